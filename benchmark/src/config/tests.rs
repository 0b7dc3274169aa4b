use super::*;

fn cfg(w: Workload, a: Accelerator, params: &[&str]) -> Result<DlioConfig, BenchError> {
    let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
    load(Some(w), a, None, &params)?.to_config()
}

#[test]
fn embedded_values_match_dlio_configs() {
    let f = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
    assert_eq!(f.model, "flux");
    assert_eq!(f.format, FormatKind::Parquet);
    assert_eq!(
        (
            f.num_files_train,
            f.num_samples_per_file,
            f.batch_size,
            f.read_threads
        ),
        (4296, 288, 48, 8)
    );
    assert_eq!(
        f.computation_time,
        TimeSpec {
            mean: 1.35,
            stdev: 0.0
        }
    );
    assert_eq!(
        f.record_size_dlio(),
        65536.0,
        "flux's record_length key is ignored by DLIO"
    );
    assert_eq!(f.record_size_real(), 2_164_832.0);
    assert_eq!(f.parquet_row_group_size, 1024);
    assert_eq!(f.sample_shuffle, Shuffle::Off);
    assert_eq!((f.au, f.seed, f.prefetch_size, f.epochs), (0.90, 123, 2, 1));
    assert_eq!((f.exclude_start_steps, f.exclude_end_steps), (1, 0));
    assert_eq!(f.data_folder, "data/flux");

    let m = cfg(Workload::Flux, Accelerator::Mi355, &[]).unwrap();
    assert_eq!((m.batch_size, m.computation_time.mean), (72, 2.025));

    for (acc, ct, files, ckpt) in [
        (Accelerator::A100, 0.636, 168, true),
        (Accelerator::H100, 0.323, 168, false),
        (Accelerator::B200, 0.162, 7200, false),
    ] {
        let u = cfg(Workload::Unet3d, acc, &[]).unwrap();
        assert_eq!(u.format, FormatKind::Npz);
        assert_eq!(
            (
                u.num_files_train,
                u.num_samples_per_file,
                u.batch_size,
                u.read_threads
            ),
            (files, 1, 7, 4)
        );
        assert_eq!(u.computation_time.mean, ct);
        assert_eq!(u.checkpoint, ckpt);
        assert_eq!(u.record_length, 146_600_628.0);
        assert_eq!(u.record_length_stdev, 68_341_808.0);
        assert_eq!(u.record_length_resize, 2_097_152.0);
        assert_eq!(u.sample_shuffle, Shuffle::Seed);
        assert_eq!(u.epochs, 5);
    }
}

#[test]
fn dlrm_embedded_values() {
    for (acc, ct) in [
        (Accelerator::B200, 0.000375),
        (Accelerator::Mi355, 0.0005625),
    ] {
        let d = cfg(Workload::Dlrm, acc, &[]).unwrap();
        assert_eq!((d.model.as_str(), d.format), ("dlrm", FormatKind::Parquet));
        assert_eq!(
            (
                d.num_files_train,
                d.num_samples_per_file,
                d.batch_size,
                d.read_threads,
                d.prefetch_size
            ),
            (1024, 4_718_592, 16384, 4, 2)
        );
        assert_eq!(d.computation_time.mean, ct);
        assert_eq!((d.parquet_row_group_size, d.au, d.epochs), (6144, 0.70, 1));
        assert_eq!(d.parquet_columns.len(), 200);
        // mlpstorage takes record_length_bytes (761) before the columns;
        // it is also the columns' own widths (f16 2, f32 4, f64 8, int8 1).
        assert_eq!((d.record_size_dlio(), d.record_size_real()), (761.0, 761.0));
        let own: usize = d.parquet_columns.iter().map(|c| c.element_bytes()).sum();
        assert_eq!(own, 761);
        let read = d.parquet_read_columns().unwrap();
        assert_eq!(read.len(), 40);
        assert_eq!(read[0], "feature_011");
        assert_eq!(read.last().map(String::as_str), Some("feature_195"));
        assert!(d.parquet_columns.iter().all(|c| c.size == 1));
    }
    // Flux reads every column.
    assert_eq!(
        cfg(Workload::Flux, Accelerator::B200, &[])
            .unwrap()
            .parquet_read_columns(),
        None
    );
    assert!(cfg(Workload::Dlrm, Accelerator::H100, &[]).is_err());
}

#[test]
fn parquet_columns_read_flag_and_mlpstorage_widths() {
    let text = "model:\n  name: dlrm\ndataset:\n  format: parquet\n  parquet:\n    read_mode: row_group\n    columns:\n\
                    \x20     - {name: a, dtype: float16}\n\
                    \x20     - {name: b, dtype: int8, read: false}\n\
                    \x20     - {name: c, dtype: float64, size: 2, read: true}\n\
                    \x20     - {name: d, dtype: uint8, size: 3}\n";
    let c = RawConfig::parse(text, "t.yaml")
        .unwrap()
        .to_config()
        .unwrap();
    assert_eq!(
        c.parquet_columns.iter().map(|c| c.read).collect::<Vec<_>>(),
        [true, false, true, true]
    );
    // No record_length_bytes: mlpstorage counts float16 and int8 as 4 B.
    assert_eq!(c.record_size_real(), (4 + 4 + 2 * 8 + 3) as f64);
    assert_eq!(
        c.parquet_read_columns().unwrap(),
        ["a", "c", "d"].map(String::from)
    );
    let bad = text.replace("read: false", "read: perhaps");
    let e = RawConfig::parse(&bad, "t.yaml")
        .unwrap()
        .to_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("dataset.parquet.columns[1].read"), "{e}");
    let e = RawConfig::parse(&text.replace("row_group", "row"), "t.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("dataset.parquet.read_mode"), "{e}");
}

#[test]
fn unsupported_combination_is_an_error() {
    let e = cfg(Workload::Flux, Accelerator::A100, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("flux_a100"), "{e}");
    assert!(cfg(Workload::Unet3d, Accelerator::Mi355, &[]).is_err());
}

#[test]
fn params_override_with_dlio_keys() {
    let c = cfg(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=64",
            "reader.batch_size=4",
            "train.computation_time=0.05",
            "++workload.reader.read_threads=2",
            "dataset.parquet_row_group_size=48",
            "reader.odirect=True",
        ],
    )
    .unwrap();
    assert_eq!(
        (c.num_files_train, c.batch_size, c.read_threads),
        (64, 4, 2)
    );
    assert_eq!(c.computation_time.mean, 0.05);
    assert_eq!(c.parquet_row_group_size, 48);
    assert!(c.odirect);
}

#[test]
fn time_spec_forms() {
    let c = cfg(
        Workload::Flux,
        Accelerator::B200,
        &["train.computation_time={mean: 1.0, stdev: 0.1}"],
    )
    .unwrap();
    assert_eq!(
        c.computation_time,
        TimeSpec {
            mean: 1.0,
            stdev: 0.1
        }
    );
    let c = cfg(
        Workload::Flux,
        Accelerator::B200,
        &["train.computation_time.stdev=0.2"],
    )
    .unwrap();
    assert_eq!(
        c.computation_time,
        TimeSpec {
            mean: 1.35,
            stdev: 0.2
        }
    );
    let c = cfg(
        Workload::Flux,
        Accelerator::B200,
        &["train.computation_time=0"],
    )
    .unwrap();
    assert_eq!(c.computation_time, TimeSpec::ZERO);
    assert_eq!(c.computation_time.dlio_repr(), "{'mean': 0.0}");
}

#[test]
fn unknown_key_is_rejected_with_hint() {
    let e = cfg(
        Workload::Flux,
        Accelerator::B200,
        &["dataset.num_file_train=3"],
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("'dataset.num_file_train'"), "{msg}");
    assert!(
        msg.contains("did you mean 'dataset.num_files_train'"),
        "{msg}"
    );
    let e = cfg(Workload::Flux, Accelerator::B200, &["bogus=1"]).unwrap_err();
    assert!(matches!(e, BenchError::UnknownParam { .. }));
}

#[test]
fn wrong_value_type_names_the_key() {
    for (p, key) in [
        ("dataset.num_files_train=many", "dataset.num_files_train"),
        ("reader.batch_size=-3", "reader.batch_size"),
        ("train.computation_time=abc", "train.computation_time"),
        ("reader.odirect=perhaps", "reader.odirect"),
        ("reader.sample_shuffle=sometimes", "reader.sample_shuffle"),
        ("dataset.num_files_train", "dataset.num_files_train"),
    ] {
        let e = cfg(Workload::Flux, Accelerator::B200, &[p])
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{p}: {e}");
    }
    let e = cfg(Workload::Flux, Accelerator::B200, &["reader.batch_size=0"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("reader.batch_size"), "{e}");
}

#[test]
fn config_file_unknown_key_names_file_and_key() {
    let text = "model:\n  name: flux\ndataset:\n  format: parquet\n  num_files_trian: 3\n";
    let e = RawConfig::parse(text, "my.yaml").unwrap_err().to_string();
    assert!(
        e.contains("dataset.num_files_trian") && e.contains("my.yaml"),
        "{e}"
    );
}

#[test]
fn config_file_loads_with_dlio_defaults() {
    let text = "model:\n  name: flux\ndataset:\n  format: parquet\n  num_files_train: 3\n  num_samples_per_file: 8\n\
                    reader:\n  batch_size: 4\ntrain:\n  computation_time: 0.01\n";
    let c = RawConfig::parse(text, "t.yaml")
        .unwrap()
        .to_config()
        .unwrap();
    assert_eq!(
        (
            c.num_files_train,
            c.num_samples_per_file,
            c.batch_size,
            c.read_threads
        ),
        (3, 8, 4, 1)
    );
    assert_eq!(c.record_size_real(), 65536.0);
    assert_eq!(c.steps_per_epoch(1), 6);
    assert_eq!(c.steps_per_epoch(4), 1);
    assert_eq!(c.prefetch_factor(), 2);
}

#[test]
fn prefetch_factor_is_ceil() {
    let c = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
    assert_eq!(c.prefetch_factor(), 1);
    let c = cfg(
        Workload::Flux,
        Accelerator::B200,
        &["reader.read_threads=1", "reader.prefetch_size=3"],
    )
    .unwrap();
    assert_eq!(c.prefetch_factor(), 3);
}

#[test]
fn size_rule_matches_330() {
    let f = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
    let r = dataset_size_rule(
        247.0,
        1,
        1,
        f.batch_size,
        f.num_samples_per_file,
        f.record_size_real(),
    );
    // 5 × 247 GiB / (288 × 2,164,832 B) = 2126.9 → 2127 (ceil; #330 used floor 2126).
    assert_eq!(r.min_files_bytes, 2127);
    assert_eq!(r.num_files_train, 2127);
    let u = cfg(Workload::Unet3d, Accelerator::A100, &[]).unwrap();
    let r = dataset_size_rule(
        247.0,
        1,
        1,
        u.batch_size,
        u.num_samples_per_file,
        u.record_size_real(),
    );
    assert_eq!(r.min_files_bytes, 9046);
    assert_eq!(r.min_files_samples, 3500);
}
