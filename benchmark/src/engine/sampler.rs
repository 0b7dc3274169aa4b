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

/// A rank's sample order for one epoch. The shard in order is not
/// materialized: a dlrm epoch is millions of indices, and on a VM whose
/// host reclaims freed memory the first touches of a fresh index vector
/// took a third of a page-cached epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpochOrder {
    /// The shard's samples in ascending order.
    InOrder(std::ops::Range<u64>),
    /// The shard's samples shuffled.
    Shuffled(Vec<u64>),
}

impl EpochOrder {
    /// Samples in the epoch.
    pub fn len(&self) -> u64 {
        match self {
            EpochOrder::InOrder(r) => r.end - r.start,
            EpochOrder::Shuffled(v) => v.len() as u64,
        }
    }

    /// True when the shard is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Full batches of `batch_size` samples in the epoch.
    pub fn full_batches(&self, batch_size: u64) -> u64 {
        self.len() / batch_size.max(1)
    }

    /// Batch `i` of `batch_size` samples (clipped to the epoch's end); an
    /// in-order batch is written into `scratch`, reused between batches.
    pub fn batch<'a>(&'a self, i: u64, batch_size: u64, scratch: &'a mut Vec<u64>) -> &'a [u64] {
        let bs = batch_size.max(1);
        let from = i.saturating_mul(bs).min(self.len());
        let to = from.saturating_add(bs).min(self.len());
        match self {
            EpochOrder::InOrder(r) => {
                scratch.clear();
                scratch.extend(r.start + from..r.start + to);
                scratch
            }
            // Indices within the vector's length fit usize.
            EpochOrder::Shuffled(v) => &v[from as usize..to as usize],
        }
    }

    /// Every sample, in order (for tests and small epochs).
    pub fn to_vec(&self) -> Vec<u64> {
        match self {
            EpochOrder::InOrder(r) => r.clone().collect(),
            EpochOrder::Shuffled(v) => v.clone(),
        }
    }
}

/// The rank's sample order for one epoch: the shard, shuffled with
/// `seed (+ epoch when seed_change_epoch)` when `shuffle` is set.
pub fn epoch_order(total: u64, rank: usize, size: usize, shuffle: Option<u64>) -> EpochOrder {
    let samples = shard(total, rank, size);
    match shuffle {
        None => EpochOrder::InOrder(samples),
        Some(seed) => {
            let mut order: Vec<u64> = samples.collect();
            Rng::new(seed).shuffle(&mut order);
            EpochOrder::Shuffled(order)
        }
    }
}

/// One read request of a batch: rows (ascending) of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRows {
    pub file: usize,
    pub rows: Vec<u64>,
}

/// One batch's rows per file, kept by a read thread from batch to batch:
/// the row vectors are refilled in place (a dlrm batch is 16,384 rows, and
/// a fresh 128 KiB vector per batch was a page-faulting allocation).
#[derive(Clone, Debug, Default)]
pub struct FileBatch {
    files: Vec<FileRows>,
    len: usize,
}

impl FileBatch {
    /// The batch's files, in order of first appearance, rows ascending.
    pub fn files(&self) -> &[FileRows] {
        &self.files[..self.len]
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Position of `file` among the batch's files, appended if new.
    fn position(&mut self, file: usize) -> usize {
        if let Some(i) = self.files().iter().position(|f| f.file == file) {
            return i;
        }
        self.push(file);
        self.len - 1
    }

    /// An emptied row vector for `file`, appended as the batch's last file.
    fn push(&mut self, file: usize) -> &mut Vec<u64> {
        if self.len == self.files.len() {
            self.files.push(FileRows {
                file,
                rows: Vec::new(),
            });
        }
        let f = &mut self.files[self.len];
        self.len += 1;
        f.file = file;
        f.rows.clear();
        &mut f.rows
    }
}

impl EpochOrder {
    /// Batch `i` of `batch_size` samples (clipped to the epoch's end) split
    /// per file of `samples_per_file` into `out`, as [`group_by_file`]
    /// splits [`EpochOrder::batch`]. An in-order batch is a run of rows per
    /// file, written once, without its global indices.
    pub fn batch_by_file(
        &self,
        i: u64,
        batch_size: u64,
        samples_per_file: u64,
        out: &mut FileBatch,
    ) {
        match self {
            EpochOrder::InOrder(r) => {
                let bs = batch_size.max(1);
                let per_file = samples_per_file.max(1);
                let from = i.saturating_mul(bs).min(self.len());
                let to = from.saturating_add(bs).min(self.len());
                let (mut g, end) = (r.start + from, r.start + to);
                out.clear();
                while g < end {
                    let file = g / per_file;
                    let base = file * per_file;
                    let run_end = end.min(base.saturating_add(per_file));
                    out.push(file as usize).extend(g - base..run_end - base);
                    g = run_end;
                }
            }
            EpochOrder::Shuffled(_) => {
                let mut unused = Vec::new();
                group_by_file_into(
                    self.batch(i, batch_size, &mut unused),
                    samples_per_file,
                    out,
                );
            }
        }
    }
}

/// Split a batch of global sample indices into per-file row lists, files in
/// order of first appearance, rows ascending.
pub fn group_by_file(batch: &[u64], samples_per_file: u64) -> Vec<FileRows> {
    let mut out = FileBatch::default();
    group_by_file_into(batch, samples_per_file, &mut out);
    out.files().to_vec()
}

/// [`group_by_file`] into `out`, reusing its row vectors.
pub fn group_by_file_into(batch: &[u64], samples_per_file: u64, out: &mut FileBatch) {
    let per_file = samples_per_file.max(1);
    out.clear();
    // Ascending batches: split them per file by binary search, without a
    // per-sample division or branch.
    if batch.is_sorted_by(|a, b| a < b) {
        let mut rest = batch;
        while let Some(&first) = rest.first() {
            let file = first / per_file;
            let base = file * per_file;
            let n = rest.partition_point(|&g| g / per_file == file);
            out.push(file as usize)
                .extend(rest[..n].iter().map(|&g| g - base));
            rest = &rest[n..];
        }
        return;
    }
    // Shuffled batches: divide and look the file up only when it changes.
    let mut current = 0;
    let mut file_samples = 0..0;
    for &g in batch {
        if !file_samples.contains(&g) {
            let file = (g / per_file) as usize;
            let first = g - g % per_file;
            file_samples = first..first.saturating_add(per_file);
            current = out.position(file);
        }
        out.files[current].rows.push(g - file_samples.start);
    }
    for f in &mut out.files[..out.len] {
        f.rows.sort_unstable();
        f.rows.dedup();
    }
}

#[cfg(test)]
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
        let o = epoch_order(100, 1, 2, Some(124)).to_vec();
        let mut s = o.clone();
        s.sort_unstable();
        assert_eq!(s, (50..100).collect::<Vec<_>>());
        assert_ne!(o, s);
        assert_eq!(epoch_order(100, 1, 2, None).to_vec(), s);
    }

    #[test]
    fn batches_are_the_same_in_order_or_materialized() {
        let lazy = epoch_order(103, 1, 2, None);
        let full = EpochOrder::Shuffled(lazy.to_vec());
        assert_eq!(lazy.full_batches(10), 5);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..7 {
            assert_eq!(
                lazy.batch(i, 10, &mut a),
                full.batch(i, 10, &mut b),
                "batch {i}"
            );
        }
        assert_eq!(lazy.batch(0, 10, &mut a), (52..62).collect::<Vec<_>>());
        assert_eq!(lazy.batch(5, 10, &mut a), [102]);
        assert!(lazy.batch(6, 10, &mut a).is_empty());
    }

    /// Ascending batches take the binary-search path; it gives what the
    /// per-sample path gives for the same samples.
    #[test]
    fn sorted_and_unsorted_batches_group_alike() {
        let sorted: Vec<u64> = (5..23).chain([30, 31, 47]).collect();
        let mut shuffled = sorted.clone();
        shuffled.swap(0, 7);
        shuffled.swap(3, 19);
        for per_file in [1, 4, 10, 100] {
            // Files come in order of first appearance: compare by file.
            let mut from_shuffled = group_by_file(&shuffled, per_file);
            from_shuffled.sort_by_key(|f| f.file);
            assert_eq!(
                group_by_file(&sorted, per_file),
                from_shuffled,
                "{per_file} samples per file"
            );
        }
        assert_eq!(
            group_by_file(&[8, 9, 12], 4),
            [
                FileRows {
                    file: 2,
                    rows: vec![0, 1]
                },
                FileRows {
                    file: 3,
                    rows: vec![0]
                }
            ]
        );
        assert!(group_by_file(&[], 4).is_empty());
    }

    /// In-order batches split per file without their global indices give
    /// what grouping the materialized batch gives, also across file ends,
    /// for the last (short) batch and past the epoch; a reused `FileBatch`
    /// holds only the current batch's files.
    #[test]
    fn in_order_batches_by_file_match_grouping_the_batch() {
        let mut out = FileBatch::default();
        let mut scratch = Vec::new();
        for (total, rank, ranks) in [(103, 1, 2), (40, 0, 1), (7, 0, 3)] {
            let lazy = epoch_order(total, rank, ranks, None);
            let full = EpochOrder::Shuffled(lazy.to_vec());
            for per_file in [1, 3, 10, 64] {
                for bs in [1, 4, 10, 25] {
                    for i in 0..lazy.full_batches(bs) + 2 {
                        let want = group_by_file(lazy.batch(i, bs, &mut scratch), per_file);
                        lazy.batch_by_file(i, bs, per_file, &mut out);
                        assert_eq!(out.files(), want, "{total}/{rank}/{per_file}/{bs}/{i}");
                        full.batch_by_file(i, bs, per_file, &mut out);
                        assert_eq!(out.files(), want, "shuffled path {per_file}/{bs}/{i}");
                    }
                }
            }
        }
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
