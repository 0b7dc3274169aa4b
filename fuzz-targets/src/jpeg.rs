//! JPEG: the input is a whole file; `read_info` (the RetinaNet reader's
//! entry) checks its size and walks the marker segments with `parse_jpeg`.

use crate::{Mem, Seeds};
use storprof_bench::format::jpeg::{min_jpeg_size, parse_jpeg, read_info, write_jpeg};

pub fn seeds() -> Seeds {
    let mut out = Vec::new();
    for (target, seed) in [(min_jpeg_size(), 1), (min_jpeg_size() + 300, 2)] {
        let mut bytes = Vec::new();
        match write_jpeg(target, seed, &mut |chunk| {
            bytes.extend_from_slice(chunk);
            Ok(())
        }) {
            Ok(_) => out.push((format!("seed-{target}.jpg"), bytes)),
            Err(e) => eprintln!("fuzz seeds: JPEG of {target} B: {e}"),
        }
    }
    out
}

pub fn run(data: &[u8]) {
    let _ = parse_jpeg(data, "fuzz.jpg");
    let _ = read_info(&Mem(data), "fuzz.jpg");
}
