//! `raw`: read the byte ranges the samples need, located from the footer
//! (Parquet: the row group's column chunks, or only the `read: true`
//! columns' chunks; NPZ: the `x` member's array), without decoding. What the
//! upstream DLIO fix (storage PR #378) does; with a column subset the fork
//! reads from the first to the last selected chunk of the group, we read
//! only the selected chunks (one read per run of adjacent ones) and drop
//! them at once, as `dd` does: a dlrm epoch is thousands of 25 KB chunks,
//! and landing each in memory of its own cost as much as reading it.
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use bytes::Bytes;

use super::{
    LoadCache, ReadStats, ReaderOptions, SampleReader, group_rows,
    layout::{
        LayoutCache, load_row_groups, npz_layout_for, parquet_layout, range_spans,
        row_groups_range, selected_bytes, selected_leaves, selected_ranges,
    },
};
use crate::{
    error::BenchError,
    format::{npz, parquet},
    storage::{RandomAccess, Storage},
};

/// Raw Parquet row-group reader. Reads whole units of `coalesce_rgs`
/// consecutive row groups (one storage read each, contiguous bytes), up to
/// `prefetch_workers` units at once per call: the units the call needs, then
/// read-ahead of the file's next units, which the shared cache hands to the
/// read thread that needs them next (or makes it wait for the load in flight).
/// With a column subset (`read_columns`) a unit is the selected columns'
/// chunks instead, one read per run of adjacent chunks, whose bytes are
/// not kept (`Unit::Discarded`).
pub struct RawParquet {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<parquet::ParquetLayout>,
    /// Selected leaf columns per file (`columns` resolved against its schema).
    leaves: Mutex<HashMap<String, Arc<[usize]>>>,
    /// Files opened for data reads, kept for the units after (an open,
    /// fstat and close per row group cost a dlrm epoch 2,300 syscalls).
    /// At most [`OPEN_FILES_KEPT`]; all are let go when it is full.
    open_files: Mutex<HashMap<String, Arc<dyn RandomAccess>>>,
    cache: LoadCache<Unit>,
    coalesce: usize,
    in_flight: usize,
    columns: Option<HashSet<String>>,
    column_gap: u64,
    /// Rows handed out this epoch per (file, unit): a unit whose every row
    /// has been served leaves the cache, so its buffers are reused for the
    /// next units instead of new memory being faulted in for each.
    served: Mutex<HashMap<(String, usize), u64>>,
}

impl RawParquet {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            leaves: Mutex::new(HashMap::new()),
            open_files: Mutex::new(HashMap::new()),
            cache: LoadCache::new(options.cache_bytes),
            coalesce: options.coalesce_rgs.max(1),
            in_flight: options.prefetch_workers.max(1),
            columns: options
                .read_columns
                .as_ref()
                .map(|c| c.iter().cloned().collect()),
            column_gap: options.column_gap_bytes,
            served: Mutex::new(HashMap::new()),
        }
    }

    /// `file` opened for data reads, from the files kept open if it is there.
    fn open(&self, file: &str) -> Result<Arc<dyn RandomAccess>, BenchError> {
        let mut open = self.open_files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ra) = open.get(file) {
            return Ok(ra.clone());
        }
        let ra = self.storage.open(file)?;
        if open.len() >= OPEN_FILES_KEPT {
            // Files are read one after another: what was open is done with
            // (a read in flight holds its own handle).
            open.clear();
        }
        open.insert(file.to_owned(), ra.clone());
        Ok(ra)
    }

    /// Count `rows` rows of unit `u` as served; release the unit from the
    /// cache once all its rows were (each row is asked for once an epoch).
    fn count_served(&self, file: &str, layout: &parquet::ParquetLayout, u: usize, rows: u64) {
        let unit_rows: u64 = layout.row_groups[self.unit_rgs(layout, u)]
            .iter()
            .map(|g| g.num_rows)
            .sum();
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let n = served.entry((file.to_owned(), u)).or_insert(0);
        *n += rows;
        if *n >= unit_rows {
            served.remove(&(file.to_owned(), u));
            drop(served);
            self.cache.remove((file, u));
        }
    }
}

/// Files a [`RawParquet`] keeps open at most.
const OPEN_FILES_KEPT: usize = 16;

/// A loaded unit.
#[derive(Clone)]
enum Unit {
    /// Whole row groups: `(file offset, bytes)` of the read, handed out per sample.
    Kept(Arc<[(u64, Bytes)]>),
    /// Selected column chunks, read and dropped: only what the read cost.
    Discarded { requests: u64, bytes: u64 },
}

impl Unit {
    /// Storage requests and bytes of the unit's read.
    fn read_cost(&self) -> (u64, u64) {
        match self {
            Unit::Kept(ranges) => (
                ranges.len() as u64,
                ranges.iter().map(|(_, b)| b.len() as u64).sum(),
            ),
            Unit::Discarded { requests, bytes } => (*requests, *bytes),
        }
    }
}

/// A unit and whether this call read it, or the read's error.
type UnitLoad = Result<(Unit, bool), BenchError>;

impl RawParquet {
    /// Row groups of unit `u`.
    fn unit_rgs(&self, layout: &parquet::ParquetLayout, u: usize) -> std::ops::Range<usize> {
        let first = u * self.coalesce;
        first..(first + self.coalesce).min(layout.row_groups.len())
    }

    /// Unit `u` of `file` from the cache or storage; `true` when this call
    /// read it. `leaves`: the selected columns (`None`: the whole unit).
    fn unit(
        &self,
        file: &str,
        layout: &parquet::ParquetLayout,
        leaves: Option<&[usize]>,
        u: usize,
    ) -> UnitLoad {
        self.cache.get_or_load((file, u), || {
            let rgs = self.unit_rgs(layout, u);
            let Some(leaves) = leaves else {
                let (start, _) = row_groups_range(layout, rgs.clone());
                let (b, n) = load_row_groups(&*self.open(file)?, layout, rgs)?;
                return Ok((Unit::Kept(Arc::new([(start, b)])), n));
            };
            let spans = range_spans(file, &selected_ranges(layout, rgs, leaves, self.column_gap))?;
            let bytes = self.open(file)?.read_and_discard(&spans)?;
            // Nothing is kept: the unit weighs nothing in the cache.
            let unit = Unit::Discarded {
                requests: spans.len() as u64,
                bytes,
            };
            Ok((unit, 0))
        })
    }

    /// The selected leaf columns of `file` (`None`: every column).
    fn file_leaves(
        &self,
        file: &str,
        layout: &parquet::ParquetLayout,
    ) -> Result<Option<Arc<[usize]>>, BenchError> {
        let Some(names) = &self.columns else {
            return Ok(None);
        };
        let mut known = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = known.get(file) {
            return Ok(Some(l.clone()));
        }
        let l: Arc<[usize]> = selected_leaves(layout, names, file)?.into();
        known.insert(file.to_owned(), l.clone());
        Ok(Some(l))
    }

    /// Load `units` with up to `in_flight` reads at once; results in order.
    fn load_units(
        &self,
        file: &str,
        layout: &parquet::ParquetLayout,
        leaves: Option<&[usize]>,
        units: &[usize],
    ) -> Vec<UnitLoad> {
        if units.len() <= 1 || self.in_flight <= 1 {
            return units
                .iter()
                .map(|&u| self.unit(file, layout, leaves, u))
                .collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<UnitLoad>>> = units.iter().map(|_| Mutex::new(None)).collect();
        let work = || {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&u) = units.get(i) else { break };
                let r = self.unit(file, layout, leaves, u);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            }
        };
        std::thread::scope(|s| {
            for _ in 1..self.in_flight.min(units.len()) {
                s.spawn(work);
            }
            work();
        });
        slots
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .unwrap_or_else(|| {
                        Err(BenchError::Internal("a prefetch read did not run".into()))
                    })
            })
            .collect()
    }
}

impl SampleReader for RawParquet {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let layout = parquet_layout(&*self.storage, &self.layouts, file, &mut stats)?;
        let leaves = self.file_leaves(file, &layout)?;
        // Batches ask for runs of rows of one group: try the last group first.
        let mut last: Option<(u64, u64, usize)> = None;
        let group_of = |r: u64| match last {
            Some((lo, hi, g)) if (lo..hi).contains(&r) => Some(g),
            _ => {
                let g = layout.row_group_of(r)?;
                let rg = &layout.row_groups[g];
                last = Some((rg.first_row, rg.first_row + rg.num_rows, g));
                Some(g)
            }
        };
        let groups = group_rows(rows, group_of, file, layout.num_rows)?;
        // Units this call needs, then read-ahead up to `in_flight` units.
        let mut units: Vec<usize> = Vec::new();
        for (rg, _) in &groups {
            let u = rg / self.coalesce;
            if !units.contains(&u) {
                units.push(u);
            }
        }
        let needed = units.len();
        let n_units = layout.row_groups.len().div_ceil(self.coalesce);
        let mut ahead = units.last().map_or(n_units, |u| u + 1);
        while units.len() < self.in_flight && ahead < n_units {
            units.push(ahead);
            ahead += 1;
        }
        let mut loaded: HashMap<usize, Unit> = HashMap::with_capacity(needed);
        for (i, (&u, r)) in units
            .iter()
            .zip(self.load_units(file, &layout, leaves.as_deref(), &units))
            .enumerate()
        {
            let (unit, did_read) = r?;
            if did_read {
                let (requests, bytes) = unit.read_cost();
                stats.bytes_read += bytes;
                stats.requests += requests;
            }
            if i < needed {
                loaded.insert(u, unit);
            }
        }
        for (rg, rs) in groups {
            let u = rg / self.coalesce;
            let Some(unit) = loaded.get(&u) else {
                return Err(BenchError::Internal(format!(
                    "{file}: row group {rg} was not loaded"
                )));
            };
            let g = &layout.row_groups[rg];
            let (g_start, g_end) = g.byte_range();
            // A sample's share: the group's (selected) chunk bytes per row.
            let group_bytes = match &leaves {
                Some(l) => selected_bytes(g, l),
                None => g_end - g_start,
            };
            let per_row = group_bytes / g.num_rows.max(1);
            // Hand out the rows' share of each kept range in the group
            // (one slice per range, not per sample: dlrm asks for 16,384;
            // discarded chunks have nothing to hand out, nor rows to scan).
            let kept: &[(u64, Bytes)] = match unit {
                Unit::Kept(ranges) => ranges,
                Unit::Discarded { .. } => &[],
            };
            let (lo_row, hi_row) = if kept.is_empty() {
                (0, 0)
            } else {
                (
                    rs.iter().min().map_or(0, |r| r - g.first_row),
                    rs.iter().max().map_or(0, |r| r - g.first_row + 1),
                )
            };
            for (off, b) in kept {
                let s = (*off).max(g_start);
                let e = (off + b.len() as u64).min(g_end);
                if s >= e {
                    continue;
                }
                let len = e - s;
                let from = (s - off + len * lo_row / g.num_rows.max(1)) as usize;
                let to = (s - off + len * hi_row / g.num_rows.max(1)) as usize;
                std::hint::black_box(b.slice(from..to.max(from)));
            }
            stats.samples += rs.len() as u64;
            stats.sample_bytes += per_row * rs.len() as u64;
            self.count_served(file, &layout, u, rs.len() as u64);
        }
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        // Each epoch reads from storage again, as DLIO does.
        self.cache.clear();
        self.served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// Raw NPZ reader: the `x` array's bytes.
pub struct RawNpz {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<npz::NpzLayout>,
    cache: LoadCache<Bytes>,
}

impl RawNpz {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            cache: LoadCache::new(options.cache_bytes),
        }
    }
}

impl SampleReader for RawNpz {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let (layout, n) = npz_layout_for(&*self.storage, &self.layouts, file, rows, &mut stats)?;
        let (bytes, loaded) = self.cache.get_or_load((file, 0), || {
            let ra = self.storage.open(file)?;
            let b = ra.read_range(layout.x.data_offset, layout.x.data_len as usize)?;
            Ok((b, layout.x.data_len))
        })?;
        if loaded {
            stats.bytes_read += bytes.len() as u64;
            stats.requests += 1;
        }
        std::hint::black_box(&bytes);
        stats.samples += rows.len() as u64;
        stats.sample_bytes += layout.x.data_len / n * rows.len() as u64;
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        self.cache.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{FluxSchema, write_parquet_file};
    use crate::storage::LocalStorage;

    /// A unit stays cached while some of its rows are still to come, and is
    /// released (its buffers reused) once every row was handed out.
    #[test]
    fn units_leave_the_cache_once_every_row_was_served() {
        let d = tempfile::tempdir().unwrap();
        let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
        let schema = FluxSchema::float32(&[("a", 4096), ("b", 3)]);
        write_parquet_file(&*st, "f.parquet", &schema, 8, 4, 1).unwrap();
        let r = RawParquet::new(st.clone(), &ReaderOptions::default());
        let first = r.read_samples("f.parquet", &[0, 1]).unwrap();
        assert!(first.bytes_read > 0);
        // Rows 2 and 3 of the same group: served from the cache.
        assert_eq!(r.read_samples("f.parquet", &[2, 3]).unwrap().bytes_read, 0);
        // Group 0 is complete: asking again (not what an epoch does) reloads it.
        assert!(r.read_samples("f.parquet", &[0]).unwrap().bytes_read > 0);
        // A new epoch forgets what was served.
        r.start_epoch(2);
        assert!(r.read_samples("f.parquet", &[4, 5]).unwrap().bytes_read > 0);
        assert_eq!(r.read_samples("f.parquet", &[6]).unwrap().bytes_read, 0);
    }

    /// The file stays open between units: a unit read after the file's
    /// name is gone still reads (from the handle kept since the first unit).
    #[test]
    fn units_after_the_first_read_from_the_file_kept_open() {
        let d = tempfile::tempdir().unwrap();
        let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
        let schema = FluxSchema::float32(&[("a", 4096), ("b", 3)]);
        write_parquet_file(&*st, "f.parquet", &schema, 8, 4, 1).unwrap();
        let r = RawParquet::new(st.clone(), &ReaderOptions::default());
        assert!(r.read_samples("f.parquet", &[0, 1]).unwrap().bytes_read > 0);
        std::fs::remove_file(d.path().join("f.parquet")).unwrap();
        assert!(r.read_samples("f.parquet", &[4, 5]).unwrap().bytes_read > 0);
        // A reader that never opened it cannot.
        let fresh = RawParquet::new(st, &ReaderOptions::default());
        assert!(fresh.read_samples("f.parquet", &[4, 5]).is_err());
    }

    /// Several ranges read into one pooled buffer come back as the bytes a
    /// read per range gives.
    #[test]
    fn read_ranges_matches_one_read_per_range() {
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(d.path().join("f"), &data).unwrap();
        let st = LocalStorage::new(d.path());
        let ra = st.open("f").unwrap();
        let ranges = [(10u64, 40_000usize), (100_000, 70_000), (299_000, 1_000)];
        let got = ra.read_ranges(&ranges).unwrap();
        for ((o, l), b) in ranges.iter().zip(&got) {
            assert_eq!(&b[..], &data[*o as usize..*o as usize + l]);
        }
        assert!(ra.read_ranges(&[(299_500, 1_000)]).is_err());
        assert!(ra.read_ranges(&[(0, 70_000), (299_500, 1_000)]).is_err());
    }

    /// Discarded reads count every byte, ranges longer than the reused
    /// buffer included, and a range past the end is an error naming it.
    #[test]
    fn read_and_discard_counts_the_ranges_bytes() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), vec![7u8; 1_500_000]).unwrap();
        let st = LocalStorage::new(d.path());
        let ra = st.open("f").unwrap();
        let ranges = [(0u64, 1_200_000usize), (1_200_000, 5), (1_499_999, 1)];
        assert_eq!(ra.read_and_discard(&ranges).unwrap(), 1_200_006);
        assert_eq!(ra.read_and_discard(&[]).unwrap(), 0);
        let e = ra.read_and_discard(&[(1_499_000, 2_000)]).unwrap_err();
        assert!(e.to_string().contains("short read"), "{e}");
    }
}
