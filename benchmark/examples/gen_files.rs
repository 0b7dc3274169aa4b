//! Write flux Parquet or unet3d NPZ files with the library's writers
//! (used by scripts/crosscheck.py and scripts/bench-readers.sh).
//!
//! `gen_files parquet DIR FILES ROWS RG_ROWS [small|flux] [SEED]`
//! `gen_files npz DIR FILES D1 D2 SAMPLES [SEED]`
//! Files are written on as many threads as there are files (max 2 at a time).
use std::{sync::Arc, time::Instant};

use storprof_bench::{
    format::{FluxSchema, write_npz_file, write_parquet_file},
    storage::{LocalStorage, Storage},
};

fn arg<T: std::str::FromStr>(a: &[String], i: usize, d: T) -> T {
    a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d)
}

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).cloned().unwrap_or_default();
    let dir = a.get(2).cloned().unwrap_or_else(|| ".".into());
    let files: usize = arg(&a, 3, 2);
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(&dir));
    let t = Instant::now();
    let threads = 2.min(files.max(1));
    let total: u64 = std::thread::scope(|s| -> anyhow::Result<u64> {
        let mut hs = Vec::new();
        for th in 0..threads {
            let storage = storage.clone();
            let a = a.clone();
            let kind = kind.clone();
            hs.push(s.spawn(move || -> anyhow::Result<u64> {
                let mut bytes = 0;
                for f in (th..files).step_by(threads) {
                    bytes += match kind.as_str() {
                        "parquet" => {
                            let rows: u64 = arg(&a, 4, 8);
                            let rg: u64 = arg(&a, 5, rows);
                            let schema = match a.get(6).map(String::as_str) {
                                Some("small") => {
                                    FluxSchema::float32(&[("big", 300), ("one", 1), ("seven", 7)])
                                }
                                _ => FluxSchema::flux_b200(),
                            };
                            let seed: u64 = arg(&a, 7, 42);
                            write_parquet_file(
                                &*storage,
                                &format!("f{f}.parquet"),
                                &schema,
                                rows,
                                rg,
                                seed + f as u64,
                            )?
                        }
                        "npz" => {
                            let d1: usize = arg(&a, 4, 16);
                            let d2: usize = arg(&a, 5, 16);
                            let samples: usize = arg(&a, 6, 1);
                            let seed: u64 = arg(&a, 7, 42);
                            write_npz_file(
                                &*storage,
                                &format!("f{f}.npz"),
                                (d1, d2),
                                samples,
                                seed + f as u64,
                            )?
                        }
                        _ => anyhow::bail!("usage: gen_files parquet|npz DIR FILES ..."),
                    };
                }
                Ok(bytes)
            }));
        }
        let mut total = 0;
        for h in hs {
            total += h
                .join()
                .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
        }
        Ok(total)
    })?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "datagen: {total} bytes in {secs:.3} s on {threads} threads = {:.3} GB/s",
        total as f64 / secs / 1e9
    );
    Ok(())
}
