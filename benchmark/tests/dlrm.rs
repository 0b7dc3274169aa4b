//! The dlrm workload end to end: datagen writes a small dlrm dataset (the
//! embedded 200-column schema, fewer rows), pyarrow-compatible types are
//! checked with arrow-rs, and bench reads it with the raw reader, which must
//! read exactly the `read: true` columns' chunks (plus one footer read per
//! file), and with the decode reader.
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use storprof_bench::config::{self, Accelerator, Workload};
use storprof_bench::reader::ReaderKind;
use storprof_bench::run::bench::BenchOptions;
use storprof_bench::run::datagen::{DatagenOptions, run_datagen};
use storprof_bench::storage::LocalStorage;

fn params() -> Vec<String> {
    [
        "dataset.num_files_train=2",
        "dataset.num_samples_per_file=12288",
        "dataset.parquet.row_group_size=4096",
        "reader.batch_size=2048",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn generate(dir: &Path) {
    let opts = DatagenOptions {
        workload: Some(Workload::Dlrm),
        accelerator: Accelerator::B200,
        params: params(),
        data_dir: dir.to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
}

fn bench(dir: &Path, reader: ReaderKind) -> serde_json::Value {
    let o = BenchOptions {
        workload: Some(Workload::Dlrm),
        accelerator: Accelerator::B200,
        params: params(),
        data_dir: dir.to_path_buf(),
        computation_time: Some(0.0001),
        results_dir: Some(dir.join(format!("results-{}", reader.name()))),
        accelerators: 1,
        reader,
        print: false,
        client_memory_gb: Some(1.0),
        ..BenchOptions::default()
    };
    let report = storprof_bench::cli::run_bench_local(&o).unwrap();
    let text = std::fs::read_to_string(report.results_dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn train_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("dlrm/train"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    v.sort();
    v
}

#[test]
fn dlrm_datagen_types_and_column_subset_reads() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let cfg = config::load(Some(Workload::Dlrm), Accelerator::B200, None, &params())
        .unwrap()
        .to_config()
        .unwrap();
    let read: HashSet<String> = cfg.parquet_read_columns().unwrap().into_iter().collect();
    assert_eq!(read.len(), 40);

    // Independently of storprof's footer parser: arrow-rs's metadata.
    let files = train_files(tmp.path());
    assert_eq!(files.len(), 2);
    let (mut selected, mut footer_reads) = (0u64, 0u64);
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(f).unwrap()).unwrap();
        let schema = b.schema().clone();
        assert_eq!(schema.fields().len(), 200);
        for (field, c) in schema.fields().iter().zip(&cfg.parquet_columns) {
            let want = match c.dtype.as_str() {
                "float16" => DataType::Float16,
                "float32" => DataType::Float32,
                "float64" => DataType::Float64,
                "int8" => DataType::Int8,
                d => panic!("dtype {d}"),
            };
            assert_eq!((field.name(), field.data_type()), (&c.name, &want));
        }
        let md = b.metadata();
        assert_eq!(md.file_metadata().num_rows(), 12288);
        assert_eq!(md.num_row_groups(), 3);
        for g in md.row_groups() {
            assert_eq!(g.num_rows(), 4096);
            for c in g.columns() {
                assert!(c.dictionary_page_offset().is_some());
                if read.contains(c.column_path().parts()[0].as_str()) {
                    selected += c.compressed_size() as u64;
                }
            }
        }
        // The raw reader's one footer read per file: the last 64 KiB.
        footer_reads += len.min(64 << 10);
        // Values decode: a whole row group of all 200 columns.
        let batch = b
            .with_row_groups(vec![1])
            .with_batch_size(4096)
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (4096, 200));
    }

    let v = bench(tmp.path(), ReaderKind::Raw);
    let m = &v["measured"];
    assert_eq!(m["samples"].as_u64().unwrap(), 2 * 12288, "{m}");
    assert_eq!(
        m["read_bytes"].as_u64().unwrap(),
        selected + footer_reads,
        "raw reads exactly the read: true columns' chunks: {m}"
    );
    assert!(m["sample_bytes"].as_u64().unwrap() <= selected, "{m}");
    assert_eq!(m["record_size_bytes_derived"], 761.0);
    assert_eq!(m["record_size_bytes_real"], 761.0);

    let v = bench(tmp.path(), ReaderKind::Decode);
    let m = &v["measured"];
    assert_eq!(m["samples"].as_u64().unwrap(), 2 * 12288, "{m}");
    // Decoded values of the 40 columns: 160 B per sample.
    assert_eq!(m["sample_bytes"].as_u64().unwrap(), 2 * 12288 * 160, "{m}");
    let rb = m["read_bytes"].as_u64().unwrap();
    assert!(rb >= selected && rb < selected + 4 * footer_reads, "{m}");
}
