//! Time the Parquet footer parse of a file (the first epoch's share of
//! `--reader raw`): `footer_parse FILE [ROUNDS]`. Prints the footer's size,
//! its column chunks, and the median [min..max] parse time and MB/s of
//! ROUNDS (default 15) parses of the same bytes, each into fresh memory.
use std::{os::unix::fs::FileExt, time::Instant};

use storprof_bench::format::parquet as pq;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(a.len() >= 2, "usage: footer_parse FILE [ROUNDS]");
    let rounds: usize = a.get(2).map_or(Ok(15), |r| r.parse())?;
    let file = std::fs::File::open(&a[1])?;
    let n = file.metadata()?.len();
    anyhow::ensure!(n >= 12, "{}: too short for Parquet", a[1]);
    let mut trailer = [0u8; 8];
    file.read_exact_at(&mut trailer, n - 8)?;
    let flen = u64::from(u32::from_le_bytes([
        trailer[0], trailer[1], trailer[2], trailer[3],
    ]));
    anyhow::ensure!(flen + 12 <= n, "{}: footer length {flen} too large", a[1]);
    let mut footer = vec![0u8; usize::try_from(flen)?];
    file.read_exact_at(&mut footer, n - 8 - flen)?;
    let mut secs = Vec::with_capacity(rounds);
    let mut chunks = 0;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let layout = pq::parse_footer(&footer, n, &a[1])?;
        secs.push(t.elapsed().as_secs_f64());
        chunks = layout
            .row_groups
            .iter()
            .map(|g| g.chunks.len())
            .sum::<usize>();
        drop(layout);
    }
    secs.sort_by(f64::total_cmp);
    let med = secs[secs.len() / 2];
    println!(
        "footer {flen} B, {chunks} column chunks: {:.2} ms [{:.2}..{:.2}], {:.0} MB/s",
        med * 1e3,
        secs[0] * 1e3,
        secs[secs.len() - 1] * 1e3,
        flen as f64 / med / 1e6
    );
    Ok(())
}
