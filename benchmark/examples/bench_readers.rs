//! Single-threaded read throughput of our readers over existing files, for
//! scripts/bench-readers.sh (side by side with `cat` and pyarrow).
//!
//! `bench_readers parquet|npz raw|decode|dlio-legacy|arrow-generic BATCH FILE...`
//! Prints one line: bytes of the files, bytes read, seconds, GB/s (file bytes / s).
//! `BENCH_MMAP=1` reads through `LocalStorage::with_mmap` (zero-copy mapping).
use std::{sync::Arc, time::Instant};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use storprof_bench::{
    format::{FormatKind, npz, parquet as pq, tfrecord},
    reader::{ReaderKind, ReaderOptions, make_reader},
    storage::{LocalStorage, Storage},
};

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        a.len() >= 5,
        "usage: bench_readers parquet|npz raw|decode|dlio-legacy|arrow-generic BATCH FILE..."
    );
    let format = match a[1].as_str() {
        "parquet" => FormatKind::Parquet,
        "npz" => FormatKind::Npz,
        f => anyhow::bail!("unknown format {f}"),
    };
    let batch: u64 = a[3].parse()?;
    let files = &a[4..];
    let mmap = std::env::var("BENCH_MMAP").is_ok_and(|v| v == "1");
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new("/").with_mmap(mmap));
    let file_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()))
        .sum::<Result<u64, _>>()?;
    let t = Instant::now();
    let mut read = 0u64;
    if a[2] == "arrow-generic" {
        // arrow-rs's generic reader, whole row groups from in-memory bytes.
        for f in files {
            let bytes = bytes::Bytes::from(std::fs::read(f)?);
            read += bytes.len() as u64;
            let b = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?;
            let groups = b.metadata().num_row_groups();
            for rg in 0..groups {
                let rows = b.metadata().row_group(rg).num_rows() as usize;
                let r = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?
                    .with_row_groups(vec![rg])
                    .with_batch_size(rows)
                    .build()?;
                for x in r {
                    std::hint::black_box(x?);
                }
            }
        }
    } else {
        let kind = match a[2].as_str() {
            "raw" => ReaderKind::Raw,
            "decode" => ReaderKind::Decode,
            "dlio-legacy" => ReaderKind::DlioLegacy,
            k => anyhow::bail!("unknown reader {k}"),
        };
        let reader = make_reader(format, kind, storage.clone(), ReaderOptions::default())?;
        for f in files {
            let ra = storage.open(f)?;
            let rows = match format {
                FormatKind::Parquet => pq::read_layout(&*ra, f)?.0.num_rows,
                FormatKind::Npz => npz::read_layout(&*ra, f)?
                    .0
                    .x
                    .shape
                    .last()
                    .copied()
                    .unwrap_or(1) as u64,
                FormatKind::Jpeg => 1,
                FormatKind::Tfrecord => tfrecord::read_index(&*ra, f)?.len() as u64,
            };
            // BENCH_MAX_ROWS limits rows per file (dlio-legacy is slow by design).
            let max: u64 = std::env::var("BENCH_MAX_ROWS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(u64::MAX);
            let all: Vec<u64> = (0..rows.min(max)).collect();
            for chunk in all.chunks(batch.max(1) as usize) {
                read += reader.read_samples(f, chunk)?.bytes_read;
            }
            // Each file once: drop its cached groups before the next file.
            reader.start_epoch(0);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{} {}{}: files {} B, read {} B, {:.3} s, {:.3} GB/s",
        a[1],
        a[2],
        if mmap { " (mmap)" } else { "" },
        file_bytes,
        read,
        secs,
        file_bytes as f64 / secs / 1e9
    );
    Ok(())
}
