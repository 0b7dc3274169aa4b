//! TFRecord: the input is a whole file; `read_index` walks the framing
//! (length, length CRC, data, data CRC) and every record it accepts is then
//! checked by `verify_record`, as the verifying reader does.

use crate::{Mem, Seeds, written_seeds};
use storprof_bench::{
    format::tfrecord::{read_index, verify_record, write_tfrecord_file},
    storage::LocalStorage,
};

/// Records verified per input.
const MAX_VERIFIED: usize = 64;

pub fn seeds() -> Seeds {
    written_seeds(|dir| {
        let storage = LocalStorage::new(dir);
        for (samples, mean) in [(1, 8.0), (3, 40.0), (5, 100.0)] {
            let name = format!("seed-{samples}x{mean}.tfrecord");
            if let Err(e) = write_tfrecord_file(&storage, &name, samples, mean, 0.0, 3) {
                eprintln!("fuzz seeds: {name}: {e}");
            }
        }
    })
}

pub fn run(data: &[u8]) {
    let Ok(spans) = read_index(&Mem(data), "fuzz.tfrecord") else {
        return;
    };
    for (i, span) in spans.iter().take(MAX_VERIFIED).enumerate() {
        // read_index promised the record and its CRC lie in the file.
        let start = usize::try_from(span.data_offset).ok();
        let end = span
            .data_offset
            .checked_add(span.len)
            .and_then(|e| e.checked_add(4))
            .and_then(|e| usize::try_from(e).ok());
        match start.zip(end).and_then(|(s, e)| data.get(s..e)) {
            Some(bytes) => {
                let _ = verify_record("fuzz.tfrecord", i, bytes);
            }
            None => panic!(
                "read_index accepted record {i} {span:?} outside a {}-byte file",
                data.len()
            ),
        }
    }
}
