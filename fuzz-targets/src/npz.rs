//! NPZ (ZIP of .npy members): the input is a whole file; `read_layout`
//! finds the end-of-central-directory record (and zip64 records), walks the
//! central directory and parses `x.npy`'s header, as the readers do.

use crate::{Mem, Seeds, written_seeds};
use storprof_bench::{
    format::npz::{read_layout_as, write_npz_file},
    storage::{LocalStorage, ReadKind},
};

pub fn seeds() -> Seeds {
    written_seeds(|dir| {
        let storage = LocalStorage::new(dir);
        for (dims, samples) in [((1, 1), 1), ((2, 3), 2), ((4, 4), 3)] {
            let name = format!("seed-{}x{}x{samples}.npz", dims.0, dims.1);
            if let Err(e) = write_npz_file(&storage, &name, dims, samples, 11) {
                eprintln!("fuzz seeds: {name}: {e}");
            }
        }
    })
}

pub fn run(data: &[u8]) {
    // Both kinds: the kind only labels reads, but both callers exist.
    let _ = read_layout_as(&Mem(data), "fuzz.npz", ReadKind::Metadata);
}
