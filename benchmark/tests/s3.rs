//! The S3 backend against a real S3-compatible server on 127.0.0.1
//! (`moto_server`, preinstalled; tests/moto starts it on a port of its own
//! and kills it). Skips with a printed reason when the server cannot start.
//! Failure cases: object missing, server down, wrong credentials (moto with
//! auth enforcement), GETs cut short by a TCP proxy in front of the real server.
use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::moto::{free_port, start_moto};
use storprof_bench::{
    format::{FluxSchema, FormatKind, write_npz_file, write_parquet_file},
    reader::{ReaderKind, ReaderOptions, make_reader},
    storage::{LocalStorage, S3Options, S3Storage, S3Url, Storage},
};

/// Plain unsigned HTTP request; returns the status code.
fn http(port: u16, method: &str, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn opts(port: u16) -> S3Options {
    S3Options {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
        region: Some("us-east-1".into()),
        part_size: 1 << 20,
        parallel_gets: 4,
        max_retries: 3,
        retry_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

fn s3(url: &str, o: &S3Options) -> S3Storage {
    S3Storage::new(S3Url::parse(url).unwrap().unwrap(), o).unwrap()
}

fn schema() -> FluxSchema {
    // 300,000 f32 per row: 1.2 MB rows, so row groups span several 1 MiB parts.
    FluxSchema::float32(&[("a", 300_000), ("b", 7)])
}

#[test]
fn datagen_and_readers_over_moto() {
    let Some(m) = start_moto(&[]) else { return };
    assert_eq!(http(m.port, "PUT", "/bench"), 200);
    let st = Arc::new(s3("s3://bench/run1", &opts(m.port)));
    // Write through the streaming multipart writer, then read back.
    let size =
        write_parquet_file(&*st, "flux/train/img_0_of_1.parquet", &schema(), 6, 2, 5).unwrap();
    write_npz_file(
        &*st,
        "s3://bench/run1/unet3d/train/img_0_of_1.npz",
        (300, 400),
        1,
        3,
    )
    .unwrap();
    assert_eq!(st.list("flux/train").unwrap(), vec!["img_0_of_1.parquet"]);
    assert!(st.exists("flux/train/img_0_of_1.parquet").unwrap());
    assert!(st.exists("flux").unwrap(), "a prefix with objects exists");
    assert!(!st.exists("nothing/here").unwrap());
    let ra = st
        .open("s3://bench/run1/flux/train/img_0_of_1.parquet")
        .unwrap();
    assert_eq!(ra.len(), size);

    // The same file locally, for byte-exact comparison.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let local = LocalStorage::new(d.path());
    write_parquet_file(&local, "a.parquet", &schema(), 6, 2, 5).unwrap();
    let whole = std::fs::read(d.path().join("a.parquet")).unwrap();
    let gets0 = st.counters().gets.load(Ordering::Relaxed);
    let b = ra.read_range(3, whole.len() - 10).unwrap();
    assert_eq!(&b[..], &whole[3..whole.len() - 7]);
    let parts = st.counters().gets.load(Ordering::Relaxed) - gets0;
    assert_eq!(
        parts as usize,
        (whole.len() - 10).div_ceil(1 << 20),
        "1 MiB parts"
    );
    assert!(ra.read_range(ra.len() - 5, 6).is_err(), "past the end");

    for kind in [ReaderKind::Raw, ReaderKind::Decode, ReaderKind::DlioLegacy] {
        let r = make_reader(
            FormatKind::Parquet,
            kind,
            st.clone(),
            ReaderOptions::default(),
        )
        .unwrap();
        let f = "flux/train/img_0_of_1.parquet";
        let stats = r.read_samples(f, &[0, 1, 2, 3, 4, 5]).unwrap();
        assert_eq!(stats.samples, 6, "{kind:?}");
        assert!(stats.bytes_read >= size - 4096, "{kind:?}: {stats:?}");
        assert!(stats.requests >= 1, "{kind:?}");
        let npz = make_reader(FormatKind::Npz, kind, st.clone(), ReaderOptions::default()).unwrap();
        let s = npz
            .read_samples("unet3d/train/img_0_of_1.npz", &[0])
            .unwrap();
        assert_eq!(s.samples, 1, "{kind:?}");
        assert!(s.bytes_read >= 120_000, "{kind:?}: {s:?}");
    }

    // Object missing: a clear NotFound naming the object.
    let e = st.open("flux/train/missing.parquet").err().unwrap();
    let msg = e.to_string();
    eprintln!("missing: {msg}");
    assert!(
        msg.contains("s3://bench/run1/flux/train/missing.parquet"),
        "{msg}"
    );
    let r = make_reader(
        FormatKind::Parquet,
        ReaderKind::Raw,
        st.clone(),
        ReaderOptions::default(),
    )
    .unwrap();
    assert!(r.read_samples("flux/train/missing.parquet", &[0]).is_err());
    // Missing bucket.
    let nb = s3("s3://no-such-bucket/x", &opts(m.port));
    assert!(nb.list("").is_err());
}

#[test]
fn server_down_is_a_quick_clear_error() {
    let port = free_port(); // nothing listens here
    let st = s3("s3://b/p", &opts(port));
    let t = Instant::now();
    let e = st.open("a.parquet").err().unwrap().to_string();
    eprintln!("server down: {e} ({:?})", t.elapsed());
    assert!(e.contains("s3://b/p/a.parquet"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn wrong_credentials_are_refused() {
    // moto enforces signatures and known keys once INITIAL_NO_AUTH_ACTION_COUNT
    // unauthenticated actions were used up; the first (bucket creation) is free.
    let Some(m) = start_moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "1")]) else {
        return;
    };
    assert_eq!(http(m.port, "PUT", "/auth"), 200);
    let st = s3("s3://auth/x", &opts(m.port));
    let e = st.list("").err().unwrap().to_string();
    eprintln!("wrong credentials: {e}");
    assert!(
        e.contains("s3://auth/x") && (e.contains("403") || e.to_lowercase().contains("denied")),
        "{e}"
    );
}

/// A TCP proxy in front of the real server that cuts, on its first `cuts`
/// connections whose responses exceed `limit` bytes, the response after
/// `limit` bytes (a GET cut short).
struct CutProxy {
    port: u16,
    cut_done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn cut_proxy(upstream: u16, limit: usize, cuts: usize) -> CutProxy {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let cut_done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (cd, st) = (cut_done.clone(), stop.clone());
    std::thread::spawn(move || {
        for c in l.incoming() {
            if st.load(Ordering::SeqCst) {
                break;
            }
            let Ok(client) = c else { continue };
            let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let (mut c2, mut u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut u2);
                let _ = u2.shutdown(Shutdown::Write);
            });
            let cd = cd.clone();
            std::thread::spawn(move || {
                let (mut up, mut client) = (up, client);
                let mut buf = vec![0u8; 64 << 10];
                let mut sent = 0usize;
                loop {
                    let n = match up.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if sent + n > limit && cd.load(Ordering::SeqCst) < cuts {
                        cd.fetch_add(1, Ordering::SeqCst);
                        let _ = client.write_all(&buf[..limit - sent]);
                        let _ = client.shutdown(Shutdown::Both);
                        let _ = up.shutdown(Shutdown::Both);
                        return;
                    }
                    if client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    sent += n;
                }
                let _ = client.shutdown(Shutdown::Write);
            });
        }
    });
    CutProxy {
        port,
        cut_done,
        stop,
    }
}

#[test]
fn gets_cut_short_are_retried_or_fail_cleanly() {
    let Some(m) = start_moto(&[]) else { return };
    assert_eq!(http(m.port, "PUT", "/cut"), 200);
    let direct = s3("s3://cut/p", &opts(m.port));
    let data: Vec<u8> = (0..(3 << 20)).map(|i: u32| (i % 251) as u8).collect();
    direct.put("obj", &data).unwrap();

    // Two responses cut after 200 KB: object_store resumes the bodies.
    let p = cut_proxy(m.port, 200_000, 2);
    let st = s3("s3://cut/p", &opts(p.port));
    let ra = st.open("obj").unwrap();
    let b = ra.read_range(0, data.len()).unwrap();
    assert_eq!(&b[..], &data[..]);
    assert_eq!(p.cut_done.load(Ordering::SeqCst), 2, "the proxy did cut");

    // Every response cut: an error naming the object after the retries, no hang.
    let p = cut_proxy(m.port, 200_000, usize::MAX);
    let mut o = opts(p.port);
    o.max_retries = 2;
    let st = s3("s3://cut/p", &o);
    let ra = st.open("obj").unwrap();
    let t = Instant::now();
    let e = ra.read_range(0, data.len()).err().unwrap().to_string();
    eprintln!("cut short: {e} ({:?})", t.elapsed());
    assert!(e.contains("s3://cut/p/obj"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn datagen_and_bench_end_to_end_over_s3() {
    use storprof_bench::{
        config::{Accelerator, Workload},
        run::bench::BenchOptions,
        run::datagen::{DatagenOptions, run_datagen},
        storage::storage_for_data_dir,
    };
    let Some(m) = start_moto(&[]) else { return };
    assert_eq!(http(m.port, "PUT", "/e2e"), 200);
    let o = opts(m.port);
    let params: Vec<String> = [
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=8",
        "dataset.parquet.row_group_size=4",
        "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 8192}, {name: timestamp, dtype: float32, size: 7}]",
        "reader.batch_size=4",
        "reader.read_threads=2",
        "reader.coalesce_rgs=2",
        "reader.prefetch_workers=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let url = "s3://e2e/ds";
    let storage = storage_for_data_dir(url, false, &o).unwrap();
    let dg = DatagenOptions {
        workload: Some(Workload::Flux),
        accelerator: Accelerator::B200,
        params: params.clone(),
        data_dir: url.into(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&dg, &*storage).unwrap();
    assert_eq!(storage.list("flux/train").unwrap().len(), 4);
    let e = run_datagen(&dg, &*storage).err().unwrap().to_string();
    assert!(
        e.contains("--force"),
        "existing objects are not overwritten: {e}"
    );
    let results = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for reader in [ReaderKind::Raw, ReaderKind::Decode, ReaderKind::DlioLegacy] {
        let b = BenchOptions {
            workload: Some(Workload::Flux),
            accelerator: Accelerator::B200,
            params: params.clone(),
            data_dir: url.into(),
            computation_time: Some(0.0),
            reader,
            results_dir: Some(results.path().join(format!("{reader:?}"))),
            print: false,
            ..BenchOptions::default()
        };
        let report = storprof_bench::cli::run_bench_on(&b, &o)
            .map_err(|e| format!("{reader:?}: {e:#}"))
            .unwrap();
        let summary =
            std::fs::read_to_string(results.path().join(format!("{reader:?}/summary.json")))
                .unwrap();
        assert!(summary.contains("read_bytes"), "{reader:?}");
        let r = report.measured.requests_by_kind.unwrap();
        assert!(
            r.data_reads > 0 && r.data_get_requests >= r.data_reads,
            "{reader:?} {r:?}"
        );
        assert_eq!(
            r.get_requests,
            r.data_get_requests + r.metadata_get_requests,
            "{reader:?}"
        );
        assert!(r.get_bytes > 0 && r.put_objects == 0, "{reader:?} {r:?}");
        if reader != ReaderKind::DlioLegacy {
            // raw/decode: one footer read per file, counted as metadata.
            assert!(r.metadata_get_requests >= 4, "{reader:?} {r:?}");
            if reader == ReaderKind::Raw {
                // Two read threads on the same files: still one footer GET per file.
                assert_eq!(r.metadata_get_requests, 4, "{r:?}");
            }
            assert_eq!(r.get_bytes, r.data_get_bytes + r.metadata_get_bytes);
            assert_eq!(
                r.data_get_bytes,
                report.measured.read_bytes - r.metadata_get_bytes,
                "{reader:?}: the storage's byte count is the reader's"
            );
        }
        let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
        assert_eq!(
            v["measured"]["requests_by_kind"]["get_requests"].as_u64(),
            Some(r.get_requests)
        );
    }
    // A missing prefix: a clear error, nothing written.
    let b = BenchOptions {
        workload: Some(Workload::Flux),
        params,
        data_dir: "s3://e2e/nothing".into(),
        results_dir: Some(results.path().join("none")),
        print: false,
        ..BenchOptions::default()
    };
    let e = format!(
        "{:#}",
        storprof_bench::cli::run_bench_on(&b, &o).err().unwrap()
    );
    eprintln!("missing prefix: {e}");
    assert!(
        e.contains("no .parquet files") || e.contains("s3://e2e/nothing"),
        "{e}"
    );
    assert!(!results.path().join("none").exists());
}

/// `coalesce_rgs` and `prefetch_workers` over S3 and over local files: the
/// same samples, `coalesce_rgs` row groups per data read, read-ahead served
/// from the cache to the next call.
#[test]
fn coalesced_reads_and_read_ahead() {
    let Some(m) = start_moto(&[]) else { return };
    assert_eq!(http(m.port, "PUT", "/knobs"), 200);
    let st = Arc::new(s3("s3://knobs/ds", &opts(m.port)));
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(d.path()));
    // 8 rows in 4 row groups of 2 rows (1.2 MB rows).
    let f = "f.parquet";
    write_parquet_file(&*st, f, &schema(), 8, 2, 9).unwrap();
    write_parquet_file(&*local, f, &schema(), 8, 2, 9).unwrap();
    let reader = |storage: Arc<dyn Storage>, coalesce: usize, prefetch: usize| {
        make_reader(
            FormatKind::Parquet,
            ReaderKind::Raw,
            storage,
            ReaderOptions {
                coalesce_rgs: coalesce,
                prefetch_workers: prefetch,
                ..ReaderOptions::default()
            },
        )
        .unwrap()
    };
    let data_reads = || st.counters().snapshot().data_reads;
    let mut baseline = None;
    for (coalesce, prefetch) in [(1, 1), (2, 1), (4, 1), (1, 3), (2, 2)] {
        for storage in [st.clone() as Arc<dyn Storage>, local.clone()] {
            let is_s3 = Arc::ptr_eq(&storage, &(st.clone() as Arc<dyn Storage>));
            let r = reader(storage, coalesce, prefetch);
            let before = data_reads();
            // Batches of 2 rows, in order, as one read thread sees them.
            let mut total = storprof_bench::reader::ReadStats::default();
            let mut first_call_requests = 0;
            for b in 0..4u64 {
                let s = r.read_samples(f, &[2 * b, 2 * b + 1]).unwrap();
                if b == 0 {
                    first_call_requests = s.requests;
                }
                total += s;
            }
            let what = format!("coalesce {coalesce} prefetch {prefetch} s3 {is_s3}");
            assert_eq!(total.samples, 8, "{what}");
            let units = 4usize.div_ceil(coalesce) as u64;
            // One footer read + one read per unit; nothing read twice.
            assert_eq!(total.requests, 1 + units, "{what}: {total:?}");
            // The first call reads its unit and up to prefetch - 1 more ahead.
            assert_eq!(
                first_call_requests,
                1 + (prefetch as u64).min(units),
                "{what}"
            );
            if is_s3 {
                assert_eq!(data_reads() - before, units, "{what}: storage data reads");
            }
            // Same bytes delivered whatever the knobs.
            let delivered = (total.sample_bytes, total.bytes_read);
            match baseline {
                None => baseline = Some(delivered),
                Some(b) => assert_eq!(b, delivered, "{what}"),
            }
        }
    }
}

/// retinanet (JPEGs in DLIO's subfolders) and resnet50 (TFRecord) over S3:
/// the subfolders are listed as prefixes, sizes come from the listing (no
/// HEAD per object), a JPEG sample is one GET of its object and a TFRecord
/// file one GET per epoch.
#[test]
fn v3_workloads_over_s3() {
    use storprof_bench::{
        config::{Accelerator, Workload},
        run::bench::BenchOptions,
        run::datagen::{DatagenOptions, run_datagen},
        storage::storage_for_data_dir,
    };
    let Some(m) = start_moto(&[]) else { return };
    assert_eq!(http(m.port, "PUT", "/v3-data"), 200);
    let o = opts(m.port);
    let url = "s3://v3-data/ds";
    let storage = storage_for_data_dir(url, false, &o).unwrap();
    let results = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for (workload, acc, params, objects, gets) in [
        (
            Workload::Retinanet,
            Accelerator::B200,
            vec![
                "dataset.num_files_train=12",
                "dataset.num_subfolders_train=3",
                "reader.batch_size=4",
                "reader.read_threads=2",
                "train.epochs=1",
            ],
            12u64,
            12u64,
        ),
        (
            Workload::Resnet50,
            Accelerator::H100,
            vec![
                "dataset.num_files_train=2",
                "dataset.num_samples_per_file=8",
                "reader.batch_size=4",
                "reader.read_threads=2",
                "train.epochs=1",
            ],
            2,
            2,
        ),
    ] {
        let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        let dg = DatagenOptions {
            workload: Some(workload),
            accelerator: acc,
            params: params.clone(),
            data_dir: url.into(),
            client_memory_gb: Some(1.0),
            print: false,
            ..DatagenOptions::default()
        };
        run_datagen(&dg, &*storage).unwrap();
        let b = BenchOptions {
            workload: Some(workload),
            accelerator: acc,
            params,
            data_dir: url.into(),
            computation_time: Some(0.0),
            reader: ReaderKind::Raw,
            results_dir: Some(results.path().join(workload.to_string())),
            print: false,
            client_memory_gb: Some(1.0),
            ..BenchOptions::default()
        };
        let report = storprof_bench::cli::run_bench_on(&b, &o)
            .map_err(|e| format!("{workload}: {e:#}"))
            .unwrap();
        let r = report.measured.requests_by_kind.unwrap();
        assert_eq!(
            r.head_requests, 0,
            "{workload}: sizes from the listing {r:?}"
        );
        assert_eq!(r.data_reads, gets, "{workload}: {r:?}");
        assert_eq!(report.measured.read_bytes, r.data_get_bytes, "{workload}");
        assert!(report.measured.read_bytes > 0);
        let listed: u64 = if workload == Workload::Retinanet {
            (0..3)
                .map(|k| storage.list(&format!("retinanet/train/{k}")).unwrap().len() as u64)
                .sum()
        } else {
            storage.list("resnet50/train").unwrap().len() as u64
        };
        assert_eq!(listed, objects, "{workload}");
    }
}
