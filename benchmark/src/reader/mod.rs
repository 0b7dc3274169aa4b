//! Sample readers: how a training data loader turns sample indices into bytes.
//! `raw` reads the needed byte ranges without decoding, `decode` is a real
//! loader that materializes arrays, `dlio-legacy` reproduces DLIO's per-sample
//! reopen + full decode (mlcommons/storage#330). Sits on `format` and
//! `storage` (and the plain data of `config` and `metrics`); the readers
//! share [`layout`] and never import each other's internals.
//!
//! ```text
//!  engine ─► SampleReader::read_samples(file, rows)
//!     raw:         footer (cached per file) ─► row-group byte range (or the selected
//!                  columns' chunks) ─► LoadCache (shared, deduped)
//!     decode:      same bytes ─► fast FixedSizeList<f32> decoder (or arrow-rs generic) ─► RecordBatch cache
//!     dlio-legacy: per sample: format index map, reopen, reread footer, generic decode of the whole group
//!     JPEG raw:    per sample: open, read the whole file, walk its markers, close
//!     TFRecord:    the whole file once an epoch, records sliced out (decode: data CRCs checked)
//! ```
use std::sync::Arc;

pub use crate::metrics::ReadStats;
use crate::{
    config::DlioConfig,
    error::BenchError,
    format::FormatKind,
    storage::{Storage, StorageOptions},
};

mod cache;
mod chunk;
mod decode;
pub mod layout;
mod legacy;
mod raw;
mod records;

pub use cache::LoadCache;
pub use chunk::{LoadedRanges, StorageChunkReader};
pub use decode::{DecodeNpz, DecodeParquet, NpzArray, decode_row_group};
pub use layout::row_groups_range;
pub use legacy::{LegacyNpz, LegacyParquet, format_global_index_map};
pub use raw::{RawNpz, RawParquet};
pub use records::{RawJpeg, TfrecordReader};

/// Which reader strategy to use (`--reader`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ReaderKind {
    /// Read each needed row group / array member byte range, no decoding.
    Raw,
    /// Decode into Arrow arrays / materialized NPZ arrays.
    Decode,
    /// DLIO's pathological on-demand reader: reopen, reread footer, decode whole row group, per sample.
    DlioLegacy,
}

impl ReaderKind {
    /// The storage this reader wants for `cfg`: `reader.odirect` as set;
    /// local buffered reads mapped (DLIO's readers map unless
    /// `reader.dont_use_mmap`), except for `dlio-legacy`, which reproduces
    /// pyarrow's `read_table` and so `pread`s (its `memory_map` defaults to
    /// false), and JPEG files, which Python loaders `read()` whole (a mapping
    /// per 323 KB file would cost more than the copy). S3 settings are the
    /// caller's (default here).
    pub fn storage_options(self, cfg: &DlioConfig) -> StorageOptions {
        StorageOptions {
            odirect: cfg.odirect,
            mmap: !cfg.odirect
                && !cfg.dont_use_mmap
                && self != ReaderKind::DlioLegacy
                && cfg.format != FormatKind::Jpeg,
            ..StorageOptions::default()
        }
    }

    /// The name `--reader` takes and `summary.json` reports.
    pub fn name(self) -> &'static str {
        match self {
            ReaderKind::Raw => "raw",
            ReaderKind::Decode => "decode",
            ReaderKind::DlioLegacy => "dlio-legacy",
        }
    }
}

/// Reads samples of dataset files. One instance is shared by all read threads
/// of one simulated accelerator (rank), so it may hold a shared cache.
pub trait SampleReader: Send + Sync {
    /// Read samples `rows` (indices within the file, ascending) of `file`
    /// (path as given to `Storage::open`).
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError>;
    /// Called at the start of each epoch (readers may drop epoch caches).
    fn start_epoch(&self, _epoch: u32) {}
}

/// Reader construction options (documented defaults in [`Default`]).
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// The storage reads with O_DIRECT (open it with
    /// `LocalStorage::with_odirect`); readers then avoid extra small reads.
    /// Default false.
    pub odirect: bool,
    /// Bytes of row groups / arrays the rank's read threads may keep cached.
    /// Default 2 GiB (three 595 MiB single-row-group flux files).
    pub cache_bytes: u64,
    /// Samples in the rank's shard; dlio-legacy formats an index map of this
    /// many entries per sample, as DLIO's `logger.debug(f"{global_index_map}")`.
    /// Default 0 (no map).
    pub total_rank_samples: u64,
    /// `decode` checks NPZ member CRC32s (numpy's zipfile does). Default true.
    pub verify_crc: bool,
    /// `raw` Parquet: row groups per storage read (`reader.coalesce_rgs`). Default 1.
    pub coalesce_rgs: usize,
    /// `raw` Parquet: storage reads in flight per `read_samples` call, the
    /// needed units first, then read-ahead of the file's next units
    /// (`reader.prefetch_workers`). Default 1 (no read-ahead).
    pub prefetch_workers: usize,
    /// Parquet: the columns to load, DLIO's `read: true` subset of
    /// `dataset.parquet.columns` ([`DlioConfig::parquet_read_columns`]).
    /// `raw` reads only their column chunks, `decode` decodes only them;
    /// `dlio-legacy` decodes whole row groups regardless, as pyarrow's
    /// `read_row_group` does. Default `None`: every column.
    pub read_columns: Option<Vec<String>>,
    /// `raw` Parquet with `read_columns`: two runs of selected column chunks
    /// less than or equal to this many bytes apart are read as one range
    /// (the unselected bytes between them included), trading bytes for
    /// requests. Default 0: exactly the selected chunks.
    pub column_gap_bytes: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            odirect: false,
            cache_bytes: 2 << 30,
            total_rank_samples: 0,
            verify_crc: true,
            coalesce_rgs: 1,
            prefetch_workers: 1,
            read_columns: None,
            column_gap_bytes: 0,
        }
    }
}

/// Build the reader for `format` × `kind` over `storage`. One reader serves
/// all read threads of one rank (it holds that rank's cache).
pub fn make_reader(
    format: FormatKind,
    kind: ReaderKind,
    storage: Arc<dyn Storage>,
    options: ReaderOptions,
) -> Result<Arc<dyn SampleReader>, BenchError> {
    Ok(match (format, kind) {
        (FormatKind::Parquet, ReaderKind::Raw) => Arc::new(RawParquet::new(storage, &options)),
        (FormatKind::Parquet, ReaderKind::Decode) => {
            Arc::new(DecodeParquet::new(storage, &options))
        }
        (FormatKind::Parquet, ReaderKind::DlioLegacy) => {
            Arc::new(LegacyParquet::new(storage, &options))
        }
        (FormatKind::Npz, ReaderKind::Raw) => Arc::new(RawNpz::new(storage, &options)),
        (FormatKind::Npz, ReaderKind::Decode) => Arc::new(DecodeNpz::new(storage, &options)),
        (FormatKind::Npz, ReaderKind::DlioLegacy) => Arc::new(LegacyNpz::new(storage, &options)),
        (FormatKind::Jpeg, ReaderKind::Raw) => Arc::new(RawJpeg::new(storage, &options)),
        (FormatKind::Tfrecord, ReaderKind::Raw) => {
            Arc::new(TfrecordReader::new(storage, &options, false))
        }
        (FormatKind::Tfrecord, ReaderKind::Decode) => {
            Arc::new(TfrecordReader::new(storage, &options, true))
        }
        (format, kind) => {
            return Err(BenchError::usage(
                "--reader",
                format!(
                    "--reader {} is not available for {} files: {}",
                    kind.name(),
                    format.extension(),
                    match format {
                        FormatKind::Jpeg => {
                            "JPEG samples are read whole and not pixel-decoded (DLIO's retinanet reader \
                         skips the decode too); use --reader raw"
                        }
                        _ => "use --reader raw or decode",
                    }
                ),
            ));
        }
    })
}

/// `rows` grouped by unit (row group), preserving order: `(unit, rows)`,
/// each run of consecutive rows of one unit a slice of `rows`. `unit_of`
/// must not decrease with the row (row groups, a file's one array).
pub(crate) fn group_rows<'a>(
    rows: &'a [u64],
    mut unit_of: impl FnMut(u64) -> Option<usize>,
    file: &str,
    num_rows: u64,
) -> Result<Vec<(usize, &'a [u64])>, BenchError> {
    let beyond = |r: u64| BenchError::Corrupt {
        path: file.into(),
        format: "dataset",
        reason: format!("sample {r} requested, file holds {num_rows}"),
    };
    let mut out: Vec<(usize, &'a [u64])> = Vec::new();
    // Ascending rows (what batches read in order ask for, thousands at a
    // time): each unit's run is found by binary search, and only the last
    // row needs the bounds check.
    if rows.is_sorted() {
        if let Some(&last) = rows.last() {
            unit_of(last).ok_or_else(|| beyond(last))?;
        }
        let mut rest = rows;
        while let Some(&first) = rest.first() {
            let unit = unit_of(first).ok_or_else(|| beyond(first))?;
            let n = rest.partition_point(|&r| unit_of(r) == Some(unit));
            out.push((unit, &rest[..n]));
            rest = &rest[n..];
        }
        return Ok(out);
    }
    let mut run_start = 0;
    let mut run_unit = None;
    for (i, &r) in rows.iter().enumerate() {
        let u = unit_of(r).ok_or_else(|| beyond(r))?;
        if run_unit != Some(u) {
            if let Some(prev) = run_unit {
                out.push((prev, &rows[run_start..i]));
            }
            run_start = i;
            run_unit = Some(u);
        }
    }
    if let Some(last) = run_unit {
        out.push((last, &rows[run_start..]));
    }
    Ok(out)
}

/// Bytes of sample values in `a` (fixed-size lists of primitives, or primitives).
pub(crate) fn sample_value_bytes(a: &dyn arrow_array::Array) -> u64 {
    use arrow_schema::DataType;
    match a.data_type() {
        DataType::FixedSizeList(f, n) => {
            (*n as u64) * a.len() as u64 * f.data_type().primitive_width().unwrap_or(0) as u64
        }
        t => a.len() as u64 * t.primitive_width().unwrap_or(0) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Accelerator, Workload, load};
    use crate::format::{FluxSchema, write_parquet_file};
    use crate::storage::{S3Options, S3Storage, S3Url};

    /// Ascending rows (binary search per unit) and rows in any order (one
    /// pass) group alike, and a row beyond the file is an error either way.
    #[test]
    fn group_rows_splits_runs_of_one_unit() {
        let third = |r: u64| (r < 12).then_some((r / 3) as usize);
        let sorted = [0u64, 1, 2, 5, 6, 9];
        let got = group_rows(&sorted, third, "f", 12).unwrap();
        let want: Vec<(usize, &[u64])> = vec![(0, &[0, 1, 2]), (1, &[5]), (2, &[6]), (3, &[9])];
        assert_eq!(got, want);
        let unsorted = [5u64, 0, 1, 4];
        let want: Vec<(usize, &[u64])> = vec![(1, &[5]), (0, &[0, 1]), (1, &[4])];
        assert_eq!(group_rows(&unsorted, third, "f", 12).unwrap(), want);
        for rows in [&[3u64, 12][..], &[12, 3]] {
            let e = group_rows(rows, third, "f", 12).unwrap_err().to_string();
            assert!(e.contains("sample 12 requested, file holds 12"), "{e}");
        }
        assert!(group_rows(&[], third, "f", 12).unwrap().is_empty());
    }

    fn flux(params: &[&str]) -> DlioConfig {
        let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        load(Some(Workload::Flux), Accelerator::B200, None, &params)
            .unwrap()
            .to_config()
            .unwrap()
    }

    #[test]
    fn readers_choose_their_storage_options() {
        let cfg = flux(&[]);
        assert!(ReaderKind::Raw.storage_options(&cfg).mmap);
        assert!(ReaderKind::Decode.storage_options(&cfg).mmap);
        // pyarrow's read_table preads: dlio-legacy never maps.
        assert!(!ReaderKind::DlioLegacy.storage_options(&cfg).mmap);
        let no_mmap = flux(&["reader.dont_use_mmap=True"]);
        assert!(!ReaderKind::Raw.storage_options(&no_mmap).mmap);
        let odirect = flux(&["reader.odirect=True"]);
        let o = ReaderKind::Raw.storage_options(&odirect);
        assert!(o.odirect && !o.mmap);
    }

    /// A dlrm-shaped file (the embedded schema, 2 row groups of 6144 rows)
    /// read with dlrm's 40-column subset: raw reads exactly the selected
    /// chunks, decode decodes only them, dlio-legacy still decodes all.
    #[test]
    fn column_subset_reads_only_the_selected_chunks() {
        let params = ["dataset.num_samples_per_file=12288".to_string()];
        let cfg = load(Some(Workload::Dlrm), Accelerator::B200, None, &params)
            .unwrap()
            .to_config()
            .unwrap();
        let schema = crate::format::FluxSchema {
            columns: cfg
                .parquet_columns
                .iter()
                .map(|c| crate::format::ColumnSpec {
                    name: c.name.clone(),
                    elem: crate::format::ElemType::from_dtype(&c.dtype).unwrap(),
                    size: c.size,
                })
                .collect(),
        };
        let d = tempfile::tempdir().unwrap();
        let st: Arc<dyn Storage> = Arc::new(crate::storage::LocalStorage::new(d.path()));
        let size = write_parquet_file(&*st, "d.parquet", &schema, 12288, 6144, 9).unwrap();
        let (l, footer_read) =
            crate::format::parquet::read_layout(&*st.open("d.parquet").unwrap(), "d.parquet")
                .unwrap();
        let names: std::collections::HashSet<String> =
            cfg.parquet_read_columns().unwrap().into_iter().collect();
        let leaves = layout::selected_leaves(&l, &names, "d.parquet").unwrap();
        assert_eq!(leaves.len(), 40);
        let selected: u64 = l
            .row_groups
            .iter()
            .map(|g| layout::selected_bytes(g, &leaves))
            .sum();
        let whole: u64 = l
            .row_groups
            .iter()
            .map(|g| g.byte_range().1 - g.byte_range().0)
            .sum();
        // The DLIO fork's range: the first to the last selected chunk of a group.
        let fork: u64 = l
            .row_groups
            .iter()
            .map(|g| {
                let s = leaves.iter().map(|&i| g.chunks[i].offset).min().unwrap();
                let e = leaves
                    .iter()
                    .map(|&i| g.chunks[i].offset + g.chunks[i].len)
                    .max()
                    .unwrap();
                e - s
            })
            .sum();
        let runs = layout::selected_ranges(&l, 0..1, &leaves, 0).len();
        let read_with = |gap: u64, columns: Option<Vec<String>>| {
            let r = make_reader(
                FormatKind::Parquet,
                ReaderKind::Raw,
                st.clone(),
                ReaderOptions {
                    read_columns: columns,
                    column_gap_bytes: gap,
                    ..ReaderOptions::default()
                },
            )
            .unwrap();
            let rows: Vec<u64> = (0..12288).collect();
            r.read_samples("d.parquet", &rows).unwrap()
        };
        let exact = read_with(0, cfg.parquet_read_columns());
        let gap64 = read_with(64 << 10, cfg.parquet_read_columns());
        let all = read_with(0, None);
        eprintln!(
            "dlrm-shaped file {size} B, 2 row groups: selected chunks {selected} B, \
             read {} B in {} requests (gap 0; {runs} runs per group), {} B in {} requests (gap 64 KiB), \
             DLIO fork span {fork} B, whole groups {whole} B; footer read {footer_read} B",
            exact.bytes_read - footer_read,
            exact.requests - 1,
            gap64.bytes_read - footer_read,
            gap64.requests - 1,
        );
        assert_eq!(exact.bytes_read, footer_read + selected);
        assert_eq!(exact.requests, 1 + 2 * runs as u64);
        assert!(runs > 1 && runs < 40, "{runs}");
        assert!(gap64.bytes_read >= exact.bytes_read && gap64.requests < exact.requests);
        assert_eq!(all.bytes_read, footer_read + whole);
        assert!(selected < fork && fork < whole);
        // Samples count the selected columns' share only.
        let per_row: u64 = l
            .row_groups
            .iter()
            .map(|g| layout::selected_bytes(g, &leaves) / 6144 * 6144)
            .sum();
        assert_eq!(exact.sample_bytes, per_row);
        assert_eq!(exact.samples, 12288);

        // decode: only the 40 columns, through arrow-rs with a projection.
        let dec = make_reader(
            FormatKind::Parquet,
            ReaderKind::Decode,
            st.clone(),
            ReaderOptions {
                read_columns: cfg.parquet_read_columns(),
                ..ReaderOptions::default()
            },
        )
        .unwrap();
        let s = dec.read_samples("d.parquet", &[0, 6143, 6144]).unwrap();
        let sel_values: u64 = cfg
            .parquet_columns
            .iter()
            .filter(|c| c.read)
            .map(|c| c.element_bytes() as u64)
            .sum();
        assert_eq!(s.sample_bytes, 3 * sel_values);
        // The footer through our parser, arrow's through arrow-rs, the selected chunks.
        assert!(
            s.bytes_read >= selected && s.bytes_read < selected + 2 * footer_read + size / 50,
            "{}",
            s.bytes_read
        );
        assert!(
            make_reader(
                FormatKind::Parquet,
                ReaderKind::Decode,
                st.clone(),
                ReaderOptions {
                    read_columns: Some(vec!["feature_011".into(), "nope".into()]),
                    ..ReaderOptions::default()
                },
            )
            .unwrap()
            .read_samples("d.parquet", &[0])
            .unwrap_err()
            .to_string()
            .contains("'nope'")
        );

        // dlio-legacy: pyarrow's read_row_group decodes all 200 columns.
        let leg = make_reader(
            FormatKind::Parquet,
            ReaderKind::DlioLegacy,
            st.clone(),
            ReaderOptions {
                read_columns: cfg.parquet_read_columns(),
                ..ReaderOptions::default()
            },
        )
        .unwrap();
        let s = leg.read_samples("d.parquet", &[7]).unwrap();
        assert_eq!(s.sample_bytes, 761);
        assert!(s.bytes_read >= whole / 2);
    }

    #[test]
    fn raw_parquet_over_in_memory_s3_counts_footers_as_metadata() {
        let url = S3Url::parse("s3://mem/ds").unwrap().unwrap();
        let st = Arc::new(S3Storage::in_memory(url, &S3Options::default()).unwrap());
        let schema = FluxSchema::float32(&[("a", 1000), ("b", 7)]);
        write_parquet_file(&*st, "train/f.parquet", &schema, 6, 2, 5).unwrap();
        let before = st.request_counts().unwrap();
        let reader = make_reader(
            FormatKind::Parquet,
            ReaderKind::Raw,
            st.clone(),
            ReaderOptions::default(),
        )
        .unwrap();
        let stats = reader.read_samples("train/f.parquet", &[0, 1, 4]).unwrap();
        assert_eq!(stats.samples, 3);
        // Raw samples are their share of the group's bytes (values, levels, page headers).
        assert!(stats.sample_bytes >= 3 * schema.row_bytes());
        let c = st.request_counts().unwrap().since(&before);
        // The footer (one tail GET), then row groups 0 and 2 as data reads.
        assert_eq!(c.metadata_get_requests, 1);
        assert_eq!(c.data_reads, 2);
        assert_eq!(c.data_get_requests, 2);
        assert_eq!(c.head_requests, 0, "the size is known from the upload");
        // A new epoch reads row groups again, but the footer stays cached.
        reader.start_epoch(2);
        reader.read_samples("train/f.parquet", &[5]).unwrap();
        let c = st.request_counts().unwrap().since(&before);
        assert_eq!((c.metadata_get_requests, c.data_reads), (1, 3));
    }
}
