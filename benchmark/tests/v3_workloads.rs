//! MLPerf Storage v3.0's other training workloads end to end: retinanet
//! (one JPEG per sample, DLIO's subfolders), resnet50 and cosmoflow
//! (TFRecord). datagen writes a small dataset, bench reads it through the
//! real readers and the bytes read are checked against the files; corrupt
//! files, a subfolder count that disagrees with the config and overrides a
//! division forbids fail with errors that name the file or parameter.
use std::path::Path;

use storprof_bench::config::rules::Division;
use storprof_bench::config::{Accelerator, Workload};
use storprof_bench::reader::ReaderKind;
use storprof_bench::run::bench::{BenchOptions, prepare};
use storprof_bench::run::datagen::{DatagenOptions, run_datagen};
use storprof_bench::run::mlpstorage::RecordDir;
use storprof_bench::storage::LocalStorage;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn generate(dir: &Path, workload: Workload, acc: Accelerator, params: &[String]) {
    let opts = DatagenOptions {
        workload: Some(workload),
        accelerator: acc,
        params: params.to_vec(),
        data_dir: dir.to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
}

fn bench(
    dir: &Path,
    workload: Workload,
    acc: Accelerator,
    params: &[String],
    reader: ReaderKind,
) -> Result<serde_json::Value, String> {
    let o = BenchOptions {
        workload: Some(workload),
        accelerator: acc,
        params: params.to_vec(),
        data_dir: dir.to_path_buf(),
        computation_time: Some(0.001),
        results_dir: Some(dir.join(format!("results-{}", reader.name()))),
        accelerators: 2,
        reader,
        print: false,
        client_memory_gb: Some(1.0),
        ..BenchOptions::default()
    };
    let report = storprof_bench::cli::run_bench_local(&o).map_err(|e| format!("{e:#}"))?;
    let text = std::fs::read_to_string(report.results_dir.join("summary.json")).unwrap();
    Ok(serde_json::from_str(&text).unwrap())
}

fn files_under(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p, ext));
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn total_bytes(files: &[std::path::PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

fn retinanet_params() -> Vec<String> {
    strings(&[
        "dataset.num_files_train=24",
        "dataset.num_subfolders_train=3",
        "dataset.num_files_eval=2",
        "reader.batch_size=4",
        "reader.read_threads=2",
        "train.epochs=2",
    ])
}

#[test]
fn retinanet_jpegs_in_subfolders_are_read_whole_per_sample() {
    let tmp = tempfile::tempdir().unwrap();
    let p = retinanet_params();
    generate(tmp.path(), Workload::Retinanet, Accelerator::B200, &p);
    let model = tmp.path().join("retinanet");
    for split in ["train", "valid", "test"] {
        assert!(model.join(split).is_dir(), "{split}/ missing");
    }
    // DLIO's layout: round-robin over zero-padded subfolders.
    let train = files_under(&model.join("train"), "jpeg");
    assert_eq!(train.len(), 24);
    assert!(model.join("train/0/img_00_of_24.jpeg").is_file());
    assert!(model.join("train/1/img_01_of_24.jpeg").is_file());
    assert!(model.join("train/2/img_23_of_24.jpeg").is_file());
    for f in &train {
        assert_eq!(std::fs::metadata(f).unwrap().len(), 322_957, "{f:?}");
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(&bytes[..2], &[0xFF, 0xD8]);
        assert_eq!(&bytes[bytes.len() - 2..], &[0xFF, 0xD9]);
    }

    let v = bench(
        tmp.path(),
        Workload::Retinanet,
        Accelerator::B200,
        &p,
        ReaderKind::Raw,
    )
    .unwrap();
    // 2 ranks × 3 steps × 4 samples = every file once an epoch, each read whole.
    let read = v["measured"]["read_bytes"].as_u64().unwrap();
    assert_eq!(read, 2 * total_bytes(&train), "{}", v["measured"]);
    assert_eq!(v["measured"]["record_size_bytes_derived"], 322_957.0);
    // 24 files are far below the dataset-size rule for 1 GiB: INVALID, still run.
    let rules = &v["run_rules"];
    assert_eq!(rules["valid"], false, "{rules}");
    assert!(
        rules["reasons"][0]
            .as_str()
            .unwrap()
            .contains("dataset.num_files_train = 24"),
        "{rules}"
    );
    assert_eq!(rules["size_rule_term"], "memory");
    // What mlpstorage's report generator reads: hydra's files and the metadata.
    let res = tmp.path().join("results-raw");
    let overrides = std::fs::read_to_string(res.join("dlio_config/overrides.yaml")).unwrap();
    assert!(
        overrides.contains("workload=retinanet_b200")
            && overrides.contains("++workload.dataset.num_subfolders_train=3"),
        "{overrides}"
    );
    let config = std::fs::read_to_string(res.join("dlio_config/config.yaml")).unwrap();
    assert!(config.starts_with("workload:"), "{config}");
    let meta = std::fs::read_dir(&res)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("_metadata.json"))
        .expect("a *_metadata.json");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(m["benchmark_type"], "training");
    assert_eq!(m["model"], "retinanet");
    assert_eq!(m["accelerator"], "b200");
    assert_eq!(m["num_processes"], 2);
    assert_eq!(m["metrics"], v["metric"]);
    assert_eq!(m["parameters"]["dataset"]["format"], "jpeg");

    // No pixel decode is offered for JPEG: said plainly, nothing run.
    let e = bench(
        tmp.path(),
        Workload::Retinanet,
        Accelerator::B200,
        &p,
        ReaderKind::Decode,
    )
    .unwrap_err();
    assert!(e.contains("--reader decode") && e.contains("jpeg"), "{e}");
}

/// datagen records itself as mlpstorage's datagen does.
#[test]
fn datagen_records_the_run_as_mlpstorage_does() {
    let tmp = tempfile::tempdir().unwrap();
    let record = tmp.path().join("rec");
    let opts = DatagenOptions {
        workload: Some(Workload::Retinanet),
        accelerator: Accelerator::Mi355,
        params: strings(&["dataset.num_files_train=4"]),
        data_dir: tmp.path().join("data"),
        client_memory_gb: Some(1.0),
        print: false,
        record: RecordDir::At(record.clone()),
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
    let overrides = std::fs::read_to_string(record.join("dlio_config/overrides.yaml")).unwrap();
    assert!(
        overrides.contains("workload=retinanet_mi355")
            && overrides.contains("++workload.workflow.generate_data=True"),
        "{overrides}"
    );
    let meta = std::fs::read_dir(&record)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("_metadata.json"))
        .expect("a *_metadata.json");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(m["command"], "datagen");
    assert_eq!(m["accelerator"], "mi355");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record.join("datagen.json")).unwrap())
            .unwrap();
    assert_eq!(d["num_files_train"], 4);
    assert_eq!(d["this_process"]["files"], 4);
    // The library default records nothing.
    assert!(!tmp.path().join("results").exists());
}

#[test]
fn tfrecord_workloads_read_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let p = strings(&[
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=16",
        "reader.batch_size=8",
        "reader.read_threads=2",
        "train.epochs=1",
    ]);
    generate(tmp.path(), Workload::Resnet50, Accelerator::H100, &p);
    let files = files_under(&tmp.path().join("resnet50/train"), "tfrecord");
    assert_eq!(files.len(), 4);
    for reader in [ReaderKind::Raw, ReaderKind::Decode] {
        let v = bench(
            tmp.path(),
            Workload::Resnet50,
            Accelerator::H100,
            &p,
            reader,
        )
        .unwrap();
        // Each file is read once, whole, and its 16 records sliced from it.
        assert_eq!(
            v["measured"]["read_bytes"].as_u64().unwrap(),
            total_bytes(&files),
            "{reader:?}: {}",
            v["measured"]
        );
        let m = &v["metric"];
        assert!(
            m["train_throughput_mean_samples_per_second"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }

    let c = strings(&[
        "dataset.num_files_train=4",
        "reader.read_threads=1",
        "train.epochs=1",
    ]);
    generate(tmp.path(), Workload::Cosmoflow, Accelerator::A100, &c);
    let files = files_under(&tmp.path().join("cosmoflow/train"), "tfrecord");
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    // One ~2.8 MB record per file, sizes drawn per file as DLIO does.
    assert!(
        sizes.iter().all(|s| (2_500_000..3_200_000).contains(s)),
        "{sizes:?}"
    );
    assert!(sizes.windows(2).any(|w| w[0] != w[1]), "{sizes:?}");
    let v = bench(
        tmp.path(),
        Workload::Cosmoflow,
        Accelerator::A100,
        &c,
        ReaderKind::Decode,
    )
    .unwrap();
    assert_eq!(
        v["measured"]["read_bytes"].as_u64().unwrap(),
        total_bytes(&files)
    );
}

#[test]
fn corrupt_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let p = strings(&[
        "dataset.num_files_train=4",
        "reader.batch_size=2",
        "reader.read_threads=1",
    ]);
    generate(tmp.path(), Workload::Retinanet, Accelerator::Mi355, &p);
    let victim = tmp.path().join("retinanet/train/img_2_of_4.jpeg");
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let e = bench(
        tmp.path(),
        Workload::Retinanet,
        Accelerator::Mi355,
        &p,
        ReaderKind::Raw,
    )
    .unwrap_err();
    assert!(e.contains("img_2_of_4.jpeg") && e.contains("JPEG"), "{e}");

    let t = strings(&[
        "dataset.num_files_train=2",
        "dataset.num_samples_per_file=4",
        "reader.batch_size=2",
        "reader.read_threads=1",
    ]);
    generate(tmp.path(), Workload::Resnet50, Accelerator::A100, &t);
    let victim = tmp.path().join("resnet50/train/img_1_of_2.tfrecord");
    let mut bytes = std::fs::read(&victim).unwrap();
    // A payload byte of the first record: only the data CRC notices.
    bytes[100] ^= 0x55;
    std::fs::write(&victim, &bytes).unwrap();
    bench(
        tmp.path(),
        Workload::Resnet50,
        Accelerator::A100,
        &t,
        ReaderKind::Raw,
    )
    .unwrap();
    let e = bench(
        tmp.path(),
        Workload::Resnet50,
        Accelerator::A100,
        &t,
        ReaderKind::Decode,
    )
    .unwrap_err();
    assert!(
        e.contains("img_1_of_2.tfrecord") && e.contains("record 0"),
        "{e}"
    );
    // A torn length field: the framing itself is refused, by every reader.
    bytes[0] ^= 0x01;
    std::fs::write(&victim, &bytes).unwrap();
    let e = bench(
        tmp.path(),
        Workload::Resnet50,
        Accelerator::A100,
        &t,
        ReaderKind::Raw,
    )
    .unwrap_err();
    assert!(
        e.contains("img_1_of_2.tfrecord") && e.contains("CRC"),
        "{e}"
    );
}

#[test]
fn layout_and_division_mismatches_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let p = retinanet_params();
    generate(tmp.path(), Workload::Retinanet, Accelerator::B200, &p);
    let storage = LocalStorage::new(".");
    let opts = |params: Vec<String>, division: Option<Division>| BenchOptions {
        workload: Some(Workload::Retinanet),
        params,
        data_dir: tmp.path().to_path_buf(),
        results_dir: Some(tmp.path().join("results")),
        print: false,
        division,
        ..BenchOptions::default()
    };
    let err = |o: BenchOptions| prepare(&o, &storage).err().unwrap().to_string();

    // The config says 4 subfolders, the dataset has 3.
    let mut q = p.clone();
    q.push("dataset.num_subfolders_train=4".into());
    let e = err(opts(q, None));
    assert!(
        e.contains("retinanet/train/3") && e.contains("num_subfolders_train=4"),
        "{e}"
    );
    // The config says no subfolders: the files are not where it looks.
    let mut q = p.clone();
    q.push("dataset.num_subfolders_train=0".into());
    let e = err(opts(q, None));
    assert!(e.contains("no .jpeg files"), "{e}");

    // CLOSED forbids changing the batch; OPEN forbids it too, and names what it allows.
    let e = err(opts(p.clone(), Some(Division::Closed)));
    assert!(
        e.contains("'dataset.num_files_eval'") || e.contains("dataset.num_files_eval"),
        "{e}"
    );
    let allowed = strings(&[
        "dataset.num_files_train=24",
        "dataset.num_subfolders_train=3",
        "reader.read_threads=2",
    ]);
    prepare(&opts(allowed.clone(), Some(Division::Closed)), &storage).unwrap();
    let mut q = allowed.clone();
    q.push("reader.batch_size=4".into());
    let e = err(opts(q, Some(Division::Open)));
    assert!(
        e.contains("reader.batch_size") && e.contains("reader.data_loader"),
        "{e}"
    );
    let mut q = allowed;
    q.push("reader.odirect=True".into());
    let e = err(opts(q, Some(Division::Closed)));
    assert!(e.contains("unet3d only"), "{e}");
    assert!(!tmp.path().join("results").exists(), "nothing written");
}
