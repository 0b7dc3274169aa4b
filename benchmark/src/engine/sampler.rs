//! Which samples a rank reads in which batch (DLIO's `dlio_sampler` with the
//! pytorch INDEX sampler). Pure functions.

use super::rng::Rng;

/// Rank `r`'s contiguous shard of `total` samples over `size` ranks:
/// `[r⌈T/P⌉, min((r+1)⌈T/P⌉, T))`.
pub fn shard(total: u64, rank: usize, size: usize) -> std::ops::Range<u64> {
    let per = total.div_ceil(size.max(1) as u64);
    let start = (rank as u64 * per).min(total);
    let end = ((rank as u64 + 1) * per).min(total);
    start..end
}

/// The rank's sample order for one epoch: the shard, shuffled with
/// `seed (+ epoch when seed_change_epoch)` when `shuffle` is set.
pub fn epoch_order(total: u64, rank: usize, size: usize, shuffle: Option<u64>) -> Vec<u64> {
    let mut order: Vec<u64> = shard(total, rank, size).collect();
    if let Some(seed) = shuffle {
        Rng::new(seed).shuffle(&mut order);
    }
    order
}

/// One read request of a batch: rows (ascending) of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRows {
    pub file: usize,
    pub rows: Vec<u64>,
}

/// Split a batch of global sample indices into per-file row lists, files in
/// order of first appearance, rows ascending.
pub fn group_by_file(batch: &[u64], samples_per_file: u64) -> Vec<FileRows> {
    let mut out: Vec<FileRows> = Vec::new();
    for &g in batch {
        let file = (g / samples_per_file) as usize;
        let row = g % samples_per_file;
        match out.iter_mut().find(|f| f.file == file) {
            Some(f) => f.rows.push(row),
            None => out.push(FileRows {
                file,
                rows: vec![row],
            }),
        }
    }
    for f in &mut out {
        f.rows.sort_unstable();
        f.rows.dedup();
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_contiguous_ceil() {
        assert_eq!(shard(10, 0, 3), 0..4);
        assert_eq!(shard(10, 1, 3), 4..8);
        assert_eq!(shard(10, 2, 3), 8..10);
        assert_eq!(shard(2, 3, 4), 2..2);
    }

    #[test]
    fn shuffle_stays_in_shard() {
        let o = epoch_order(100, 1, 2, Some(124));
        let mut s = o.clone();
        s.sort_unstable();
        assert_eq!(s, (50..100).collect::<Vec<_>>());
        assert_ne!(o, s);
        assert_eq!(epoch_order(100, 1, 2, None), s);
    }

    #[test]
    fn groups_rows_per_file() {
        let g = group_by_file(&[10, 3, 9, 2, 8], 4);
        assert_eq!(
            g,
            vec![
                FileRows {
                    file: 2,
                    rows: vec![0, 1, 2]
                },
                FileRows {
                    file: 0,
                    rows: vec![2, 3]
                },
            ]
        );
    }
}
