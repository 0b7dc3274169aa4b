//! Engine tests with an in-test fake `SampleReader` (no files, no timing-exact asserts).
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use storprof_bench::BenchError;
use storprof_bench::config::{Accelerator, Workload, load};
use storprof_bench::engine::{Quiet, RankEpoch, TrainObserver, TrainPlan, run_training};
use storprof_bench::metrics::{ExcludeSteps, block_metrics};
use storprof_bench::reader::{ReadStats, SampleReader};

/// Records every (file, rows) call; optionally sleeps and fails on one file.
#[derive(Default)]
struct FakeReader {
    calls: Mutex<Vec<(String, Vec<u64>)>>,
    started: AtomicU64,
    delay: Duration,
    fail_on: Option<String>,
    epochs: Mutex<Vec<u32>>,
}

impl SampleReader for FakeReader {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.fail_on.as_deref() == Some(file) {
            return Err(BenchError::Corrupt {
                path: file.into(),
                format: "parquet",
                reason: "fake corruption".into(),
            });
        }
        std::thread::sleep(self.delay);
        self.calls
            .lock()
            .unwrap()
            .push((file.to_string(), rows.to_vec()));
        Ok(ReadStats {
            bytes_read: 1000 * rows.len() as u64,
            requests: 1,
            samples: rows.len() as u64,
            sample_bytes: 100 * rows.len() as u64,
        })
    }
    fn start_epoch(&self, epoch: u32) {
        self.epochs.lock().unwrap().push(epoch);
    }
}

fn plan(
    workload: Workload,
    acc: Accelerator,
    params: &[&str],
    ranks: usize,
) -> Result<TrainPlan, BenchError> {
    let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
    let cfg = load(Some(workload), acc, None, &params)?.to_config()?;
    let files = (0..cfg.num_files_train).map(|i| format!("f{i}")).collect();
    TrainPlan::new(&cfg, files, ranks)
}

fn readers(
    n: usize,
    make: impl Fn() -> FakeReader,
) -> (Vec<Arc<FakeReader>>, Vec<Arc<dyn SampleReader>>) {
    let fakes: Vec<Arc<FakeReader>> = (0..n).map(|_| Arc::new(make())).collect();
    let dyns = fakes
        .iter()
        .map(|f| Arc::clone(f) as Arc<dyn SampleReader>)
        .collect();
    (fakes, dyns)
}

#[test]
fn every_rank_reads_its_shard_once_per_epoch() {
    // 4 files × 8 samples = 32 samples, batch 4, 2 ranks: 4 steps per rank per epoch.
    let p = plan(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=4",
            "dataset.num_samples_per_file=8",
            "reader.batch_size=4",
            "reader.read_threads=2",
            "train.computation_time=0",
            "train.epochs=2",
        ],
        2,
    )
    .unwrap();
    assert_eq!(p.steps_per_epoch, 4);
    let (fakes, dyns) = readers(2, FakeReader::default);
    let res = run_training(&p, &dyns, &Quiet).unwrap();
    assert_eq!(res.ranks.len(), 2);
    for (rank, fake) in fakes.iter().enumerate() {
        assert_eq!(*fake.epochs.lock().unwrap(), vec![1, 2]);
        let mut per_file: HashMap<String, Vec<u64>> = HashMap::new();
        for (f, rows) in fake.calls.lock().unwrap().iter() {
            per_file.entry(f.clone()).or_default().extend(rows);
        }
        // rank 0: files f0, f1 (samples 0..16); rank 1: f2, f3; each sample twice (2 epochs)
        let mut files: Vec<_> = per_file.keys().cloned().collect();
        files.sort();
        let want = if rank == 0 {
            vec!["f0", "f1"]
        } else {
            vec!["f2", "f3"]
        };
        assert_eq!(files, want);
        for rows in per_file.values_mut() {
            rows.sort_unstable();
            let expect: Vec<u64> = (0..8).flat_map(|r| [r, r]).collect();
            assert_eq!(*rows, expect);
        }
        let r = &res.ranks[rank];
        assert_eq!(r.epochs.len(), 2);
        for e in &r.epochs {
            assert_eq!(e.block.compute.len(), 4);
            assert_eq!(e.read.samples, 16);
            assert_eq!(e.read.bytes_read, 16_000);
        }
    }
    assert_eq!(res.read_total().samples, 64);
}

#[test]
fn unshuffled_flux_batches_are_consecutive_rows() {
    let p = plan(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=2",
            "dataset.num_samples_per_file=8",
            "reader.batch_size=4",
        ],
        1,
    )
    .unwrap();
    let b = p.rank_batches(0, 1);
    assert_eq!(
        b,
        vec![
            vec![0, 1, 2, 3],
            vec![4, 5, 6, 7],
            vec![8, 9, 10, 11],
            vec![12, 13, 14, 15]
        ]
    );
}

#[test]
fn unet3d_shuffles_per_epoch_with_seed() {
    let p = plan(
        Workload::Unet3d,
        Accelerator::H100,
        &["dataset.num_files_train=28"],
        2,
    )
    .unwrap();
    assert_eq!(p.steps_per_epoch, 2); // 28 / 7 / 2
    let e1 = p.rank_batches(1, 1);
    let e2 = p.rank_batches(1, 2);
    assert_ne!(e1, e2, "seed + epoch changes the order");
    assert_eq!(e1, p.rank_batches(1, 1), "deterministic");
    let mut all: Vec<u64> = e1.concat();
    all.sort_unstable();
    assert!(all.iter().all(|s| (14..28).contains(s)), "{all:?}");
}

/// Reads started never run ahead of the consumer by more than
/// read_threads × prefetch_factor batches.
#[test]
fn prefetch_depth_is_bounded() {
    struct Watch {
        reader: Arc<FakeReader>,
        max_ahead: Mutex<i64>,
    }
    impl TrainObserver for Watch {
        fn step_done(&self, _epoch: u32, step: u64) {
            let started = self.reader.started.load(Ordering::SeqCst) as i64;
            let mut m = self.max_ahead.lock().unwrap();
            *m = (*m).max(started - step as i64);
        }
    }
    for (threads, prefetch, depth) in [(2, 2, 2), (1, 3, 3), (3, 2, 3)] {
        let p = plan(
            Workload::Flux,
            Accelerator::B200,
            &[
                "dataset.num_files_train=4",
                "dataset.num_samples_per_file=8",
                "reader.batch_size=2",
                &format!("reader.read_threads={threads}"),
                &format!("reader.prefetch_size={prefetch}"),
                "train.computation_time=0.005",
            ],
            1,
        )
        .unwrap();
        assert_eq!(p.read_threads * p.prefetch_factor, depth);
        let (fakes, dyns) = readers(1, FakeReader::default);
        let w = Watch {
            reader: Arc::clone(&fakes[0]),
            max_ahead: Mutex::new(0),
        };
        run_training(&p, &dyns, &w).unwrap();
        let ahead = *w.max_ahead.lock().unwrap();
        assert!(
            ahead <= depth as i64,
            "threads {threads}: {ahead} batches ahead > {depth}"
        );
        assert!(ahead >= 1, "workers should prefetch at least one batch");
    }
}

#[test]
fn fast_reads_give_high_au_slow_reads_low_au() {
    let run = |delay_ms: u64| {
        let p = plan(
            Workload::Flux,
            Accelerator::B200,
            &[
                "dataset.num_files_train=2",
                "dataset.num_samples_per_file=12",
                "reader.batch_size=2",
                "reader.read_threads=1",
                "train.computation_time=0.02",
            ],
            1,
        )
        .unwrap();
        let (_f, dyns) = readers(1, || FakeReader {
            delay: Duration::from_millis(delay_ms),
            ..FakeReader::default()
        });
        let res = run_training(&p, &dyns, &Quiet).unwrap();
        let b = &res.ranks[0].epochs[0].block;
        block_metrics(b, 2, ExcludeSteps::default()).au_percentage
    };
    let fast = run(0);
    let slow = run(60);
    assert!(fast > 80.0, "fast AU {fast}");
    // each step waits ~60 ms for 20 ms of compute: AU ≈ 25 %
    assert!(slow < 50.0, "slow AU {slow}");
}

#[test]
fn reader_error_stops_all_ranks_with_the_real_error() {
    let p = plan(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=4",
            "dataset.num_samples_per_file=8",
            "reader.batch_size=4",
            "reader.read_threads=2",
            "train.computation_time=0.001",
        ],
        2,
    )
    .unwrap();
    let (_f, dyns) = readers(2, || FakeReader {
        fail_on: Some("f3".into()),
        ..FakeReader::default()
    });
    let err = run_training(&p, &dyns, &Quiet).unwrap_err().to_string();
    assert!(
        err.contains("f3") && err.contains("fake corruption"),
        "{err}"
    );
}

#[test]
fn zero_steps_is_an_error_naming_the_keys() {
    let e = plan(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=1",
            "dataset.num_samples_per_file=8",
            "reader.batch_size=48",
        ],
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("zero steps") && e.contains("reader.batch_size"),
        "{e}"
    );
}

#[test]
fn read_threads_zero_reads_inline() {
    let p = plan(
        Workload::Flux,
        Accelerator::B200,
        &[
            "dataset.num_files_train=1",
            "dataset.num_samples_per_file=8",
            "reader.batch_size=2",
            "reader.read_threads=0",
            "train.computation_time=0",
        ],
        1,
    )
    .unwrap();
    let (f, dyns) = readers(1, FakeReader::default);
    let res = run_training(&p, &dyns, &Quiet).unwrap();
    assert_eq!(f[0].calls.lock().unwrap().len(), 4);
    let e: &RankEpoch = &res.ranks[0].epochs[0];
    assert_eq!(e.block.proc.len(), 4);
}
