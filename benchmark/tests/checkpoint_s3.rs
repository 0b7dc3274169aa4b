//! `storprof checkpoint` into `s3://BUCKET/PREFIX` on a local S3 server
//! (`moto_server` on 127.0.0.1, started and killed here as in tests/s3.rs;
//! skips with a printed reason when it cannot start): every shard becomes an
//! object of its planned size (the larger ones as multipart uploads of
//! several parts), is read back with GETs, and the output says what
//! durability means without fsync. Bad input: a missing bucket, a server
//! that is down, O_DIRECT, an earlier run without --force.
use std::{
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    time::Duration,
};

use crate::moto::{free_port, start_moto};
use storprof_bench::error::BenchError;
use storprof_bench::run::checkpoint::io::CacheDrop;
use storprof_bench::run::checkpoint::layout::LlamaModel;
use storprof_bench::run::checkpoint::{CheckpointOptions, Threads, run_checkpoint};
use storprof_bench::storage::{S3Options, S3Storage, S3Url, Storage};

/// Create bucket `name` with an unsigned PUT (moto accepts it).
fn make_bucket(port: u16, name: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
}

fn s3_opts(port: u16) -> S3Options {
    S3Options {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        region: Some("us-east-1".into()),
        // The storage layer's smallest multipart part (S3's minimum).
        part_size: 5 << 20,
        max_retries: 1,
        retry_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    }
}

fn opts(folder: &str, s3: S3Options, results: PathBuf) -> CheckpointOptions {
    CheckpointOptions {
        model: LlamaModel::Llama3_8b,
        folder: PathBuf::from(folder),
        s3,
        // Optimizer shards of ~7.5 MiB: two multipart parts each.
        scale: 1500.0,
        num_checkpoints_write: 1,
        num_checkpoints_read: 1,
        block_size: 1 << 20,
        print: false,
        generator_probe: Duration::from_millis(5),
        results_dir: Some(results),
        ..CheckpointOptions::default()
    }
}

#[test]
fn checkpoint_to_s3_puts_gets_and_says_what_durability_means() {
    let Some(m) = start_moto(&[]) else { return };
    make_bucket(m.port, "ckpt");
    let tmp = tempfile::tempdir().unwrap();
    let o = opts("s3://ckpt/run1", s3_opts(m.port), tmp.path().join("res"));
    let report = run_checkpoint(&o, &Threads(8)).unwrap().unwrap();
    let s = &report.summary;
    let planned = (s.checkpoint_size_gb * (1u64 << 30) as f64).round() as u64;
    assert_eq!(s.bytes.written, planned);
    assert_eq!(s.bytes.read, planned);
    assert_eq!((s.bytes.files_written, s.bytes.files_read), (16, 16));
    assert_eq!((s.bytes.fsynced, s.bytes.fsyncs), (0, 0));
    assert!(!s.fsync);
    assert_eq!(s.cache_drop, CacheDrop::RemoteObjects);
    assert!(s.durability.contains("no fsync"), "{}", s.durability);
    assert!(s.metric.save_checkpoint_duration_mean_seconds > 0.0);
    assert!(s.metric.load_checkpoint_aggregate_io_mean_GB_per_second > 0.0);

    // The objects are there, with the planned sizes, and the server counted
    // multipart uploads: one per shard.
    let st = S3Storage::new(
        S3Url::parse("s3://ckpt/run1").unwrap().unwrap(),
        &s3_opts(m.port),
    )
    .unwrap();
    let objects = st.list_sized("global_epoch1_step1").unwrap();
    assert_eq!(objects.len(), 16, "{objects:?}");
    assert_eq!(objects.iter().map(|(_, n)| n).sum::<u64>(), planned);
    assert!(
        objects.iter().any(|(_, n)| *n > 5 << 20),
        "no shard spans two parts: {objects:?}"
    );
    assert!(st.exists(".storprof-checkpoint.json").unwrap());
    let summary_json = std::fs::read_to_string(report.results_dir.join("summary.json")).unwrap();
    assert!(
        summary_json.contains("\"remote_objects\""),
        "{summary_json}"
    );

    // An earlier run needs --force; with it the run replaces its own objects.
    let again = run_checkpoint(&o, &Threads(8)).unwrap_err();
    assert!(
        matches!(again, BenchError::ExistingCheckpoint { files: 16, .. }),
        "{again}"
    );
    let forced = CheckpointOptions {
        force: true,
        results_dir: Some(tmp.path().join("res2")),
        ..o.clone()
    };
    run_checkpoint(&forced, &Threads(8)).unwrap().unwrap();
    assert_eq!(st.list("global_epoch1_step1").unwrap().len(), 16);
}

#[test]
fn checkpoint_to_s3_bad_input_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    // O_DIRECT has no meaning for objects: refused before any request.
    let mut o = opts("s3://ckpt/x", s3_opts(9), tmp.path().join("r"));
    o.odirect = true;
    let e = run_checkpoint(&o, &Threads(8)).unwrap_err();
    assert!(
        matches!(&e, BenchError::BadParam { key, .. } if key == "--odirect"),
        "{e}"
    );

    // Nothing listening at the endpoint: an I/O error naming the URL.
    let closed = free_port();
    let o = opts("s3://ckpt/x", s3_opts(closed), tmp.path().join("r"));
    let e = run_checkpoint(&o, &Threads(8)).unwrap_err().to_string();
    assert!(e.contains("s3://ckpt/x"), "{e}");

    let Some(m) = start_moto(&[]) else { return };
    // A bucket that does not exist: the error names the object URL and says so.
    let o = opts(
        "s3://no-such-bucket/x",
        s3_opts(m.port),
        tmp.path().join("r"),
    );
    let e = run_checkpoint(&o, &Threads(8)).unwrap_err().to_string();
    assert!(e.contains("s3://no-such-bucket/x"), "{e}");
    assert!(e.to_lowercase().contains("bucket"), "{e}");
    assert!(
        !tmp.path().join("r").exists(),
        "no results for a failed run"
    );
}
