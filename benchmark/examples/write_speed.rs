//! Generation speed of the JPEG and TFRecord writers, in memory and into
//! files (a speed probe, not a test: it asserts nothing).
//!
//! `cargo run --release -p storprof-bench --example write_speed [DIR]`
//! (DIR: where the TFRecord files go, default a temporary directory).
use std::time::Instant;

use storprof_bench::{
    format::{jpeg::write_jpeg, tfrecord::write_tfrecord_file},
    storage::LocalStorage,
};

fn main() -> anyhow::Result<()> {
    // RetinaNet's 322,957-byte record, 2,000 files, into one reused buffer.
    let files = 2000u64;
    let mut buffer = Vec::with_capacity(400_000);
    let t = Instant::now();
    let mut total = 0u64;
    for seed in 0..files {
        buffer.clear();
        total += write_jpeg(322_957, seed, &mut |chunk| {
            buffer.extend_from_slice(chunk);
            Ok(())
        })?;
        std::hint::black_box(&buffer);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "jpeg: {files} files, {total} B in {secs:.3} s: {:.2} GB/s, {:.1} us/file",
        total as f64 / secs / 1e9,
        secs / files as f64 * 1e6
    );

    let scratch = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| scratch.path().to_path_buf(), Into::into);
    let storage = LocalStorage::new(&dir);
    // resnet50: 8 files of 1,251 records of 114,660 B on average.
    let t = Instant::now();
    let mut bytes = 0;
    for i in 0..8 {
        bytes += write_tfrecord_file(
            &storage,
            &format!("r{i}.tfrecord"),
            1251,
            114_660.07,
            0.0,
            i,
        )?;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "tfrecord resnet50: {bytes} B in {s:.3} s = {:.2} GB/s",
        bytes as f64 / s / 1e9
    );
    // cosmoflow: 200 files of one 2.8 MB record.
    let t = Instant::now();
    let mut bytes = 0;
    for i in 0..200 {
        bytes += write_tfrecord_file(
            &storage,
            &format!("c{i}.tfrecord"),
            1,
            2_828_486.0,
            71_311.0,
            i,
        )?;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "tfrecord cosmoflow: {bytes} B in {s:.3} s = {:.2} GB/s",
        bytes as f64 / s / 1e9
    );
    Ok(())
}
