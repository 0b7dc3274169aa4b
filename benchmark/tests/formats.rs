//! Formats × readers: our writers round-trip through our raw/decode/legacy
//! readers and arrow-rs's generic reader; corrupt and lying files are errors.
use std::sync::Arc;

use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use storprof_bench::{
    BenchError,
    format::{
        ElemType, FluxSchema, FormatKind,
        r#gen::{fill_bytes, flux_row_values, scalar_chunk_values},
        npz, parquet as pq, write_npz_file, write_parquet_file,
    },
    reader::{ReaderKind, ReaderOptions, decode_row_group, make_reader},
    storage::{LocalStorage, Storage},
};

fn small_schema() -> FluxSchema {
    FluxSchema::float32(&[("big", 300), ("one", 1), ("seven", 7)])
}

fn list_schema() -> FluxSchema {
    FluxSchema::float32(&[("a", 300), ("b", 7)])
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("formats-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn column_values(batch: &RecordBatch, col: usize, row: usize) -> Vec<f32> {
    let c = batch.column(col);
    if let Some(l) = c.as_any().downcast_ref::<FixedSizeListArray>() {
        let v = l.value(row);
        let f = v.as_any().downcast_ref::<Float32Array>().unwrap();
        f.values().to_vec()
    } else {
        let f = c.as_any().downcast_ref::<Float32Array>().unwrap();
        vec![f.value(row)]
    }
}

/// What the writer stores for `row` of f32 column `ci` (`n` per row) of a
/// file of `rows` rows in groups of `rg_rows`: a list row's own stream, or
/// the scalar column chunk's stream.
fn expected_f32(seed: u64, ci: usize, row: u64, n: usize, rg_rows: u64, rows: u64) -> Vec<f32> {
    if n > 1 {
        return flux_row_values(seed, ci, row, n);
    }
    let g0 = row / rg_rows * rg_rows;
    let b = scalar_chunk_values(
        seed,
        ci,
        g0,
        rg_rows.min(rows - g0) as usize,
        ElemType::Float32,
    );
    let at = (row - g0) as usize * 4;
    vec![f32::from_le_bytes(b[at..at + 4].try_into().unwrap())]
}

#[test]
fn parquet_round_trip_arrow_generic_reader() {
    let d = tmp();
    let st = LocalStorage::new(d.path());
    let schema = small_schema();
    let size = write_parquet_file(&st, "a.parquet", &schema, 10, 4, 7).unwrap();
    assert_eq!(
        size,
        std::fs::metadata(d.path().join("a.parquet")).unwrap().len()
    );
    let f = std::fs::File::open(d.path().join("a.parquet")).unwrap();
    let b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    assert_eq!(b.schema().as_ref(), &pq::arrow_schema(&schema));
    assert_eq!(b.metadata().num_row_groups(), 3);
    let batches: Vec<RecordBatch> = b
        .with_batch_size(100)
        .build()
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(batches.len(), 1);
    for (ci, c) in schema.columns.iter().enumerate() {
        for row in 0..10 {
            assert_eq!(
                column_values(&batches[0], ci, row),
                expected_f32(7, ci, row as u64, c.size, 4, 10)
            );
        }
    }
}

#[test]
fn parquet_layout_and_fast_decode_match_generator() {
    let d = tmp();
    let st = LocalStorage::new(d.path());
    let schema = list_schema();
    write_parquet_file(&st, "a.parquet", &schema, 9, 4, 3).unwrap();
    let ra = st.open("a.parquet").unwrap();
    let (layout, read) = pq::read_layout(&*ra, "a.parquet").unwrap();
    assert!(read > 0);
    assert_eq!(layout.num_rows, 9);
    assert_eq!(layout.row_groups.len(), 3);
    assert_eq!(layout.row_group_of(8), Some(2));
    assert_eq!(layout.row_group_of(9), None);
    for (rg, g) in layout.row_groups.iter().enumerate() {
        let (s, e) = g.byte_range();
        let bytes = ra.read_range(s, (e - s) as usize).unwrap();
        let batch = decode_row_group("a.parquet", &layout, rg, &bytes)
            .unwrap()
            .expect("fast path");
        assert_eq!(batch.schema().as_ref(), &pq::arrow_schema(&schema));
        for i in 0..g.num_rows as usize {
            for (ci, c) in schema.columns.iter().enumerate() {
                let row = g.first_row + i as u64;
                assert_eq!(
                    column_values(&batch, ci, i),
                    flux_row_values(3, ci, row, c.size)
                );
            }
        }
    }
}

#[test]
fn parquet_readers_report_real_bytes() {
    let d = tmp();
    let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    let schema = small_schema();
    let size = write_parquet_file(&*st, "a.parquet", &schema, 12, 12, 1).unwrap();
    let opts = ReaderOptions {
        total_rank_samples: 50,
        ..Default::default()
    };
    let raw = make_reader(
        FormatKind::Parquet,
        ReaderKind::Raw,
        st.clone(),
        opts.clone(),
    )
    .unwrap();
    let s1 = raw.read_samples("a.parquet", &[0, 1, 2, 3]).unwrap();
    let s2 = raw.read_samples("a.parquet", &[4, 5, 6, 7]).unwrap();
    assert_eq!(s1.samples, 4);
    // One row group: read once (plus the footer), then served from the cache.
    assert!(s1.bytes_read > size / 2 && s1.bytes_read <= size + 64 * 1024);
    assert_eq!(s2.bytes_read, 0);
    assert_eq!(s1.sample_bytes, s2.sample_bytes);

    let dec = make_reader(
        FormatKind::Parquet,
        ReaderKind::Decode,
        st.clone(),
        opts.clone(),
    )
    .unwrap();
    let s = dec.read_samples("a.parquet", &[0, 11]).unwrap();
    assert_eq!(s.samples, 2);
    assert_eq!(s.sample_bytes, 2 * schema.row_bytes());
    // The "one" column (n = 1) is not a list: decode falls back to arrow-rs.
    let lists = make_reader(
        FormatKind::Parquet,
        ReaderKind::Decode,
        st.clone(),
        opts.clone(),
    )
    .unwrap();
    write_parquet_file(&*st, "b.parquet", &list_schema(), 6, 3, 1).unwrap();
    let s = lists.read_samples("b.parquet", &[0, 5]).unwrap();
    assert_eq!(s.sample_bytes, 2 * list_schema().row_bytes());

    let legacy = make_reader(
        FormatKind::Parquet,
        ReaderKind::DlioLegacy,
        st.clone(),
        opts,
    )
    .unwrap();
    let s = legacy.read_samples("a.parquet", &[0, 1, 2]).unwrap();
    // Every sample rereads the footer and the whole row group.
    assert!(
        s.bytes_read >= 3 * (size - 2048),
        "{} vs {size}",
        s.bytes_read
    );
    assert_eq!(s.sample_bytes, 3 * schema.row_bytes());
    assert!(raw.read_samples("a.parquet", &[12]).is_err());
}

#[test]
fn npz_round_trip() {
    let d = tmp();
    let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    let size = write_npz_file(&*st, "x.npz", (20, 30), 2, 5).unwrap();
    let ra = st.open("x.npz").unwrap();
    assert_eq!(size, ra.len());
    let (l, _) = npz::read_layout(&*ra, "x.npz").unwrap();
    assert_eq!(l.x.shape, vec![20, 30, 2]);
    assert_eq!(l.x.descr, "|u1");
    assert_eq!(l.members.len(), 2);
    let mut data = vec![0u8; l.x.data_len as usize];
    ra.read_exact_at(&mut data, l.x.data_offset).unwrap();
    let mut expect = Vec::new();
    fill_bytes(5, 1200, &mut expect);
    assert_eq!(data, expect);
    for kind in [ReaderKind::Raw, ReaderKind::Decode, ReaderKind::DlioLegacy] {
        let r = make_reader(FormatKind::Npz, kind, st.clone(), ReaderOptions::default()).unwrap();
        let s = r.read_samples("x.npz", &[0, 1]).unwrap();
        assert_eq!(s.samples, 2, "{kind:?}");
        assert!(s.bytes_read >= 1200, "{kind:?}");
        assert!(r.read_samples("x.npz", &[2]).is_err(), "{kind:?}");
    }
}

fn assert_corrupt(r: Result<impl std::fmt::Debug, BenchError>, what: &str) {
    match r {
        Err(BenchError::Corrupt { path, .. }) => assert!(path.to_string_lossy().contains(".")),
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    }
}

#[test]
fn corrupt_parquet_is_an_error() {
    let d = tmp();
    let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    write_parquet_file(&*st, "ok.parquet", &list_schema(), 6, 3, 1).unwrap();
    let good = std::fs::read(d.path().join("ok.parquet")).unwrap();
    let flen =
        u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap()) as usize;
    let write = |name: &str, b: &[u8]| std::fs::write(d.path().join(name), b).unwrap();
    // Truncated: the tail magic is gone.
    write("trunc.parquet", &good[..good.len() / 2]);
    // Bad magic.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] = b'X';
    write("magic.parquet", &bad);
    // Footer length larger than the file.
    let mut bad = good.clone();
    bad[n - 8..n - 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    write("flen.parquet", &bad);
    // Footer bytes garbled.
    let mut bad = good.clone();
    for b in &mut bad[n - 8 - flen..n - 8 - flen / 2] {
        *b = 0xFF;
    }
    write("garbled.parquet", &bad);
    // Tiny file.
    write("tiny.parquet", b"PAR1");
    for f in ["trunc", "magic", "flen", "garbled", "tiny"] {
        let path = format!("{f}.parquet");
        for kind in [ReaderKind::Raw, ReaderKind::Decode] {
            let r = make_reader(
                FormatKind::Parquet,
                kind,
                st.clone(),
                ReaderOptions::default(),
            )
            .unwrap();
            assert_corrupt(r.read_samples(&path, &[0]), &path);
        }
        let r = make_reader(
            FormatKind::Parquet,
            ReaderKind::DlioLegacy,
            st.clone(),
            ReaderOptions::default(),
        )
        .unwrap();
        assert!(r.read_samples(&path, &[0]).is_err(), "{path}");
    }
    // Data pages garbled: decode reports Corrupt (or falls back and fails), raw
    // does not look inside pages.
    let mut bad = good.clone();
    for b in &mut bad[4..40] {
        *b = 0xEE;
    }
    write("pages.parquet", &bad);
    let r = make_reader(
        FormatKind::Parquet,
        ReaderKind::Decode,
        st.clone(),
        ReaderOptions::default(),
    )
    .unwrap();
    assert!(r.read_samples("pages.parquet", &[0]).is_err());
}

#[test]
fn lying_footer_offsets_are_corrupt() {
    // A footer whose only column chunk claims to start 1 TB into the file.
    let mut t = pq::ThriftWriter::new();
    t.begin();
    t.i32(1, 1);
    t.list(2, 12, 2);
    t.begin();
    t.binary(4, b"schema");
    t.i32(5, 1);
    t.end();
    t.begin();
    t.i32(1, 4);
    t.i32(3, 1);
    t.binary(4, b"x");
    t.end();
    t.i64(3, 1);
    t.list(4, 12, 1);
    t.begin();
    t.list(1, 12, 1);
    t.begin();
    t.i64(2, 4);
    t.begin_struct(3);
    t.i32(1, 4);
    t.i64(5, 1);
    t.i64(7, 4);
    t.i64(9, 1 << 40);
    t.end();
    t.end();
    t.i64(3, 1);
    t.end();
    t.end();
    let r = pq::parse_footer(&t.buf, 4096, "lie.parquet");
    assert_corrupt(r, "offset past EOF");
    // Row counts that do not add up.
    let r = pq::parse_footer(&t.buf[..t.buf.len() / 2], 4096, "half.parquet");
    assert_corrupt(r, "truncated footer");
}

#[test]
fn flipped_bytes_never_panic() {
    let d = tmp();
    let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    write_parquet_file(&*st, "ok.parquet", &list_schema(), 4, 2, 1).unwrap();
    let good = std::fs::read(d.path().join("ok.parquet")).unwrap();
    let mut s = 0x1234_5678_9abc_def0u64;
    for i in 0..200 {
        let mut bad = good.clone();
        for _ in 0..4 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let at = (s as usize) % bad.len();
            bad[at] ^= (s >> 32) as u8 | 1;
        }
        let name = format!("fuzz{i}.parquet");
        std::fs::write(d.path().join(&name), &bad).unwrap();
        for kind in [ReaderKind::Raw, ReaderKind::Decode] {
            let r = make_reader(
                FormatKind::Parquet,
                kind,
                st.clone(),
                ReaderOptions::default(),
            )
            .unwrap();
            let _ = r.read_samples(&name, &[0, 3]);
        }
    }
}

#[test]
fn corrupt_npz_is_an_error() {
    let d = tmp();
    let st: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    write_npz_file(&*st, "ok.npz", (10, 10), 1, 1).unwrap();
    let good = std::fs::read(d.path().join("ok.npz")).unwrap();
    let write = |name: &str, b: &[u8]| std::fs::write(d.path().join(name), b).unwrap();
    write("trunc.npz", &good[..good.len() - 30]);
    write("tiny.npz", b"PK");
    // Central directory offset past EOF.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 6..n - 2].copy_from_slice(&0x7FFF_FFFFu32.to_le_bytes());
    write("cdoff.npz", &bad);
    // Array byte flipped: CRC mismatch for decode and legacy.
    let mut crc = good.clone();
    crc[200] ^= 0xFF;
    write("crc.npz", &crc);
    for f in ["trunc", "tiny", "cdoff"] {
        let path = format!("{f}.npz");
        for kind in [ReaderKind::Raw, ReaderKind::Decode, ReaderKind::DlioLegacy] {
            let r =
                make_reader(FormatKind::Npz, kind, st.clone(), ReaderOptions::default()).unwrap();
            assert_corrupt(r.read_samples(&path, &[0]), &path);
        }
    }
    for kind in [ReaderKind::Decode, ReaderKind::DlioLegacy] {
        let r = make_reader(FormatKind::Npz, kind, st.clone(), ReaderOptions::default()).unwrap();
        assert_corrupt(r.read_samples("crc.npz", &[0]), "crc");
    }
}

#[test]
fn odirect_reads_match_buffered() {
    let d = tmp();
    let st = LocalStorage::new(d.path());
    write_parquet_file(&st, "a.parquet", &list_schema(), 40, 10, 9).unwrap();
    let od: Arc<dyn Storage> = Arc::new(LocalStorage::with_odirect(d.path(), true));
    let ra = match od.open("a.parquet") {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipping: O_DIRECT not available here: {e}");
            return;
        }
    };
    let bra = st.open("a.parquet").unwrap();
    for (off, len) in [
        (0u64, 100usize),
        (4095, 5000),
        (7, 40_000),
        (ra.len() - 13, 13),
    ] {
        let a = ra.read_range(off, len).unwrap();
        let b = bra.read_range(off, len).unwrap();
        assert_eq!(a, b, "range {off}+{len}");
        let mut c = vec![0u8; len];
        ra.read_exact_at(&mut c, off).unwrap();
        assert_eq!(&c[..], &b[..]);
    }
    assert!(ra.read_range(ra.len() - 10, 11).is_err());
    let r = make_reader(
        FormatKind::Parquet,
        ReaderKind::Decode,
        od,
        ReaderOptions {
            odirect: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.read_samples("a.parquet", &[0, 39]).unwrap().samples, 2);
}

#[test]
fn large_reads_pooled_and_mmap_match_the_file() {
    let d = tmp();
    let schema = FluxSchema::float32(&[("a", 300_000), ("b", 3)]);
    let st = LocalStorage::new(d.path());
    write_parquet_file(&st, "a.parquet", &schema, 4, 2, 3).unwrap();
    let whole = std::fs::read(d.path().join("a.parquet")).unwrap();
    let pool = storprof_bench::storage::BufferPool::new(64 << 20);
    for mmap in [false, true] {
        let s = LocalStorage::new(d.path())
            .with_pool(pool.clone())
            .with_mmap(mmap);
        let ra = s.open("a.parquet").unwrap();
        // Same-sized ranges one after another: the second reuses the first's
        // buffer (pooled path), which must hold the new range's bytes.
        for (off, len) in [(4u64, 2 << 20), (4099, 2 << 20), (1, (1 << 20) + 7)] {
            let b = ra.read_range(off, len).unwrap();
            assert_eq!(
                &b[..],
                &whole[off as usize..off as usize + len],
                "mmap={mmap} {off}+{len}"
            );
        }
        assert!(ra.read_range(ra.len() - (2 << 20) + 1, 2 << 20).is_err());
        let r = make_reader(
            FormatKind::Parquet,
            ReaderKind::Raw,
            Arc::new(s),
            ReaderOptions::default(),
        )
        .unwrap();
        let stats = r.read_samples("a.parquet", &[0, 1, 2, 3]).unwrap();
        assert_eq!(stats.samples, 4);
    }
    assert!(pool.idle_bytes() > 0, "pooled buffers were returned");
}

/// A file truncated after it was opened: the mapped read fails with a clear
/// error (populating reports it) instead of a SIGBUS that kills the run.
#[test]
fn mmap_read_of_a_file_truncated_after_open_is_an_error() {
    let d = tmp();
    let path = d.path().join("t.bin");
    std::fs::write(&path, vec![7u8; 8 << 20]).unwrap();
    let s = LocalStorage::new(d.path()).with_mmap(true);
    let ra = s.open("t.bin").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let e = ra.read_range(2 << 20, 4 << 20).unwrap_err().to_string();
    assert!(e.contains("t.bin"), "{e}");
    assert!(ra.read_range(0, 1 << 20).is_ok());
}
