use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{LogicalType, Type as PhysicalType};

use super::*;
use crate::format::r#gen::scalar_chunk_values;
use crate::storage::LocalStorage;

fn col(name: &str, elem: ElemType, size: usize) -> ColumnSpec {
    ColumnSpec {
        name: name.into(),
        elem,
        size,
    }
}

/// A primitive or fixed-size-list array's value bytes (arrow widths).
fn arrow_bytes(a: &dyn Array) -> Vec<u8> {
    let d = a.to_data();
    match a.data_type() {
        DataType::FixedSizeList(f, n) => {
            let w = f.data_type().primitive_width().unwrap();
            let c = &d.child_data()[0];
            let first = (d.offset() + c.offset()) * w * *n as usize;
            c.buffers()[0].as_slice()[first..first + a.len() * *n as usize * w].to_vec()
        }
        t => {
            let w = t.primitive_width().unwrap();
            d.buffers()[0].as_slice()[d.offset() * w..(d.offset() + a.len()) * w].to_vec()
        }
    }
}

/// Stored (PLAIN) bytes as arrow's native bytes: int8 narrows from INT32.
fn native(elem: ElemType, stored: &[u8]) -> Vec<u8> {
    match elem {
        ElemType::Int8 => stored.chunks_exact(4).map(|c| c[0]).collect(),
        _ => stored.to_vec(),
    }
}

/// The bytes the writer stores for rows `rows` of column `ci`.
fn expected(
    schema: &FluxSchema,
    seed: u64,
    ci: usize,
    rg_rows: u64,
    total: u64,
    rows: std::ops::Range<u64>,
) -> Vec<u8> {
    let c = &schema.columns[ci];
    let w = c.elem.stored_bytes();
    let mut out = Vec::new();
    for row in rows {
        if c.size > 1 {
            let mut b = vec![0u8; c.size * w];
            fill_values(&mut row_seed(seed, ci, row), c.elem, &mut b);
            out.extend(native(c.elem, &b));
        } else {
            let g0 = row / rg_rows * rg_rows;
            let n = rg_rows.min(total - g0) as usize;
            let b = scalar_chunk_values(seed, ci, g0, n, c.elem);
            let at = (row - g0) as usize * w;
            out.extend(native(c.elem, &b[at..at + w]));
        }
    }
    out
}

fn read_all(path: &std::path::Path) -> (ParquetRecordBatchReaderBuilder<std::fs::File>, ()) {
    let f = std::fs::File::open(path).unwrap();
    (ParquetRecordBatchReaderBuilder::try_new(f).unwrap(), ())
}

fn batch_of(b: ParquetRecordBatchReaderBuilder<std::fs::File>) -> RecordBatch {
    let batches: Vec<RecordBatch> = b
        .with_batch_size(1 << 20)
        .build()
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(batches.len(), 1);
    batches.into_iter().next().unwrap()
}

#[test]
fn every_dtype_round_trips_through_arrow_rs() {
    let d = tempfile::tempdir().unwrap();
    let st = LocalStorage::new(d.path());
    let schema = FluxSchema {
        columns: vec![
            col("h", ElemType::Float16, 1),
            col("f", ElemType::Float32, 1),
            col("d", ElemType::Float64, 1),
            col("b", ElemType::Int8, 1),
            col("hl", ElemType::Float16, 3),
            col("fl", ElemType::Float32, 4),
            col("dl", ElemType::Float64, 2),
            col("bl", ElemType::Int8, 5),
        ],
    };
    let size = write_parquet_file(&st, "t.parquet", &schema, 10, 4, 11).unwrap();
    assert_eq!(
        size,
        std::fs::metadata(d.path().join("t.parquet")).unwrap().len()
    );
    let (b, ()) = read_all(&d.path().join("t.parquet"));
    // Types as pyarrow writes them, and the ARROW:schema hint agrees.
    assert_eq!(b.schema().as_ref(), &arrow_schema(&schema));
    let descr = b.metadata().file_metadata().schema_descr_ptr();
    let leaf = |i: usize| descr.column(i);
    assert_eq!(leaf(0).physical_type(), PhysicalType::FIXED_LEN_BYTE_ARRAY);
    assert_eq!(leaf(0).type_length(), 2);
    assert_eq!(leaf(0).logical_type_ref(), Some(&LogicalType::Float16));
    assert_eq!(leaf(1).physical_type(), PhysicalType::FLOAT);
    assert_eq!(leaf(2).physical_type(), PhysicalType::DOUBLE);
    assert_eq!(leaf(3).physical_type(), PhysicalType::INT32);
    assert_eq!(
        leaf(3).logical_type_ref(),
        Some(&LogicalType::integer(8, true))
    );
    assert_eq!(
        leaf(3).converted_type(),
        parquet::basic::ConvertedType::INT_8
    );
    assert_eq!((leaf(3).max_def_level(), leaf(3).max_rep_level()), (1, 0));
    assert_eq!((leaf(7).max_def_level(), leaf(7).max_rep_level()), (3, 1));
    assert_eq!(b.metadata().num_row_groups(), 3);
    for g in b.metadata().row_groups() {
        for c in g.columns() {
            // Every chunk opens with a dictionary page (DLIO's raw reader needs it).
            assert!(c.dictionary_page_offset().is_some());
            assert_eq!(c.statistics().and_then(|s| s.null_count_opt()), Some(0));
        }
    }
    let batch = batch_of(b);
    for ci in 0..schema.columns.len() {
        assert_eq!(
            arrow_bytes(batch.column(ci).as_ref()),
            expected(&schema, 11, ci, 4, 10, 0..10),
            "column {}",
            schema.columns[ci].name
        );
    }
}

#[test]
fn scalar_chunks_span_pages_with_one_stream() {
    let d = tempfile::tempdir().unwrap();
    let st = LocalStorage::new(d.path());
    // 600,000 rows in one group: 5 DOUBLE, 3 INT32 and 2 FLBA(2) pages.
    let schema = FluxSchema {
        columns: vec![
            col("d", ElemType::Float64, 1),
            col("b", ElemType::Int8, 1),
            col("h", ElemType::Float16, 1),
        ],
    };
    let rows = 600_000;
    write_parquet_file(&st, "p.parquet", &schema, rows, rows, 5).unwrap();
    let (b, ()) = read_all(&d.path().join("p.parquet"));
    let batch = batch_of(b);
    for ci in 0..3 {
        let c = &schema.columns[ci];
        let want = scalar_chunk_values(5, ci, 0, rows as usize, c.elem);
        assert_eq!(
            arrow_bytes(batch.column(ci).as_ref()),
            native(c.elem, &want),
            "{}",
            c.name
        );
    }
}

/// A full-size dlrm file's footer: 768 row groups × 200 column chunks,
/// encoded without writing the 4 GB of data it describes.
#[test]
fn dlrm_footer_of_768_row_groups_parses_in_linear_time() {
    // The dtypes of the embedded dlrm_b200.yaml (format sits below config).
    let yaml = include_str!("../../config/workloads/dlrm_b200.yaml");
    let schema = FluxSchema {
        columns: yaml
            .lines()
            .filter_map(|l| l.trim().strip_prefix("dtype: "))
            .enumerate()
            .map(|(i, d)| {
                col(
                    &format!("feature_{i:03}"),
                    ElemType::from_dtype(d).unwrap(),
                    1,
                )
            })
            .collect(),
    };
    assert_eq!(schema.columns.len(), 200);
    let (rg_rows, rows) = (6144u64, 4_718_592u64);
    let mut pos = 4u64;
    let groups: Vec<(u64, Vec<ChunkMeta>)> = (0..rows / rg_rows)
        .map(|_| {
            let chunks = schema
                .columns
                .iter()
                .map(|c| {
                    let dict = dictionary_page(c.elem).len() as u64;
                    // A page header, the definition levels, the values.
                    let size = dict + 24 + rg_rows * c.elem.stored_bytes() as u64;
                    let m = ChunkMeta {
                        offset: pos,
                        data_offset: pos + dict,
                        size,
                        num_values: rg_rows,
                    };
                    pos += size;
                    m
                })
                .collect();
            (rg_rows, chunks)
        })
        .collect();
    assert_eq!(groups.len(), 768);
    let t = std::time::Instant::now();
    let footer = encode_footer(&schema, rows, &groups);
    let encoded = t.elapsed();
    let file_len = pos + footer.len() as u64 + 8;
    let t = std::time::Instant::now();
    let layout = parse_footer(&footer, file_len, "dlrm.parquet").unwrap();
    let parsed = t.elapsed();
    eprintln!(
        "dlrm footer: {} B for a {file_len} B file; encode {encoded:?}, parse {parsed:?}",
        footer.len()
    );
    assert!((footer.len() as u64) < MAX_FOOTER / 2, "{}", footer.len());
    assert_eq!(layout.row_groups.len(), 768);
    assert_eq!(layout.leaves.len(), 200);
    assert_eq!(layout.num_rows, 4_718_592);
    assert_eq!(layout.row_group_of(4_718_591), Some(767));
    assert!(
        layout
            .row_groups
            .iter()
            .all(|g| g.chunks.iter().all(|c| c.has_dictionary))
    );
    // Linear: a tenth of the groups parses in about a tenth of the time
    // (generous bound; quadratic would be ~100x).
    let small = encode_footer(&schema, 76 * rg_rows, &groups[..76]);
    let small_len = groups[75].1[199].offset + groups[75].1[199].size + small.len() as u64 + 8;
    let t = std::time::Instant::now();
    parse_footer(&small, small_len, "small.parquet").unwrap();
    let small_t = t.elapsed();
    assert!(
        parsed < small_t * 40 + std::time::Duration::from_millis(50),
        "{parsed:?} vs {small_t:?}"
    );
}

#[test]
fn a_footer_longer_than_its_file_is_a_clear_error() {
    let err = parse_footer(&[0x15; 40], 44, "f.parquet").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("a footer of 40 B and its 8-byte trailer do not fit a file of 44 B"),
        "{text}"
    );
    assert!(parse_footer(&[], 3, "f.parquet").is_err());
}
