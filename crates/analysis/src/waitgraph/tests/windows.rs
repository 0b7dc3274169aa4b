//! The training window, and what a consumer's AU counts: the first
//! batch, a forkserver's replies, its own fetching.
use super::*;

/// [`dataloader`] whose first data reaches the trainer at `first_s`.
fn dataloader_delivering_from(first_s: f64) -> Session {
    let mut s = dataloader(600, 700);
    for e in &mut s.waits.as_mut().unwrap().edges {
        if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
            e.first_s = first_s;
        }
    }
    s
}

#[test]
fn the_window_starts_at_the_first_delivery_not_at_a_spawned_workers_start() {
    // A spawned worker imports for 3 s while the trainer sits in a
    // write to its full pipe (and a vfork before): data arrives from
    // 3.5 s on.
    let mut s = dataloader_delivering_from(3.5);
    s.waits.as_mut().unwrap().edges.extend([
        wakes(
            WORKER,
            TRAINER,
            "write",
            (0.2, 3.2),
            vec![(0, S, 1), (1, S, 1), (2, S, 1)],
        ),
        wakes(WORKER, TRAINER, "vfork", (0.1, 0.1), vec![(0, MS, 1)]),
    ]);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    let window = w.window.as_ref().unwrap();
    assert_eq!(window.start_s, 3.5);
    assert!(
        window.source.contains("first data delivery"),
        "{}",
        window.source
    );
    assert_eq!(window.buckets, Some((4, 9)));
    // Only the steady state counts: 600 ms of every 1000 waited.
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 38.0).abs() < 0.5, "{au}");
}

#[test]
fn a_forkservers_reply_with_a_workers_pid_is_not_a_data_delivery() {
    // Python's forkserver (a child of the trainer) forks the worker and
    // answers the trainer's request with the new pid at 0.5 s; the
    // worker wakes the forkserver (its exit status pipe); data arrives
    // from 3.5 s on.
    const FORKSERVER: (u32, u32) = (300, 300);
    let mut s = dataloader_delivering_from(3.5);
    s.waits.as_mut().unwrap().edges.extend([
        wakes(FORKSERVER, TRAINER, "poll", (0.5, 0.5), vec![(0, 2 * S, 1)]),
        wakes(WORKER, FORKSERVER, "read", (9.5, 9.5), vec![(9, 9 * S, 1)]),
    ]);
    s.info.processes = [(100, 0), (300, 100), (200, 300)]
        .iter()
        .map(|&(pid, ppid)| ProcessInfo {
            pid,
            ppid,
            comm: "python".into(),
        })
        .collect();
    s.threads.push(ThreadStats {
        pid: FORKSERVER.0,
        tid: FORKSERVER.1,
        comm: "python".into(),
        ..ThreadStats::default()
    });
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.window.as_ref().unwrap().start_s, 3.5);
    assert_ne!(w.role_of(FORKSERVER.0, FORKSERVER.1), Some(Role::Loader));
    assert_eq!(w.role_of(WORKER.0, WORKER.1), Some(Role::Loader));
}

#[test]
fn the_first_batch_wait_is_start_up() {
    // No per-bucket states: the whole-run figures, less the first wait.
    let mut s = dataloader(600, 700);
    s.timeseries = None;
    for e in &mut s.waits.as_mut().unwrap().edges {
        e.series.clear();
        if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
            e.first_blocked_ns = 3 * S;
            e.blocked_ns += 3 * S;
        }
    }
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.window.as_ref().unwrap().buckets, None);
    assert_eq!(w.consumers[0].data_wait_ns, 6 * S);
}

#[test]
fn a_consumers_own_fetching_is_what_its_au_loses_besides_its_waits() {
    let consumer = |emulated: bool, queued_ns: u64| -> ConsumerTime {
        serde_json::from_value(serde_json::json!({
            "pid": 1, "tid": 1, "comm": "python3",
            // 10 s of window at AU 80%: 2 s not computing, 0.5 s of it
            // waiting for data and 0.25 s for the GIL.
            "window_ns": 10_000_000_000u64, "au_percentage": 80.0,
            "data_wait_ns": 500_000_000u64, "gil_ns": 250_000_000u64,
            "compute_ns": 8_000_000_000u64, "emulated_compute": emulated,
            "queued_ns": queued_ns,
        }))
        .unwrap()
    };
    let sleeper = consumer(true, 2_000_000_000);
    assert_eq!(sleeper.own_fetch_ns(), 1_250_000_000);
    // Queued for a CPU longer than it fetched: the queue counts up to it.
    assert_eq!(sleeper.own_fetch_queued_ns(), 1_250_000_000);
    // A real trainer's queueing is not fetching.
    assert_eq!(consumer(false, 2_000_000_000).own_fetch_queued_ns(), 0);
}

#[test]
fn a_trainer_loading_its_own_batches_is_its_own_cpu_bound_reader() {
    // A DataLoader without workers: the trainer's main thread decodes
    // inside the loader's next() 6 s of 10, trains 2 s in the same loop,
    // imported 1 s and built its model 1 s before the loop; it never
    // blocks. A short-lived child (ldconfig at torch's import)
    // wrote to it once.
    let threads = [
        T {
            pid: 100,
            tid: 100,
            comm: "python",
            per_bucket: [1000 * MS, 0, 0, 0],
            read_bytes: 100 << 20,
        },
        T {
            pid: 100,
            tid: 101,
            comm: "python",
            per_bucket: [0, 0, 1000 * MS, 0],
            read_bytes: 0,
        },
    ];
    let mut child = edge((300, 300), TRAINER, "read", 0, 0);
    child.count = 8;
    child.series = vec![(0, MS, 8)];
    let mut s = session(&threads, &[(100, 0), (300, 100)], vec![child]);
    let stack = |frames: &str, n: u64| {
        (
            format!("python;[100/100];<module> (/t/train.py:9);{frames}"),
            n,
        )
    };
    s.oncpu_threads.stacks = vec![
        stack(
            "train (/t/train.py:61);_BaseDataLoaderIter.__next__ (/v/torch/utils/data/dataloader.py:733);ImageFile.load (/v/PIL/ImageFile.py:290);decode",
            594,
        ),
        stack(
            "train (/t/train.py:64);train_step (/t/train.py:40);sgemm",
            198,
        ),
        stack(
            "_find_and_load (<frozen importlib._bootstrap>:1176);read",
            99,
        ),
        stack("build_model (/t/train.py:20);init_weights", 99),
        // A forked worker's stacks keep the frames it was forked from.
        (
            "pt_data_worker;[200/200];<module> (/t/train.py:9);train (/t/train.py:60);\
             DataLoader.__iter__ (/v/torch/utils/data/dataloader.py:491);\
             _worker_loop (/v/torch/utils/data/_utils/worker.py:337);decode"
                .to_string(),
            900,
        ),
    ];
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.consumers.len(), 1);
    assert_eq!((w.consumers[0].pid, w.consumers[0].tid), TRAINER);
    // 2 s of training in the 8 s of its loop.
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 25.0).abs() < 1.0, "{au}");
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::CpuBoundReader);
}

/// Where a self-loading trainer's stacks take a batch and train a step.
const NEXT: &str = "train (/t/train.py:61);_BaseDataLoaderIter.__next__ (/v/torch/utils/data/dataloader.py:733);np.load (/v/numpy/npyio.py:400)";
const STEP: &str = "train (/t/train.py:64);train_step (/t/train.py:40)";
/// A read that waits for the device.
const DEVICE_READ: &str = "read;ksys_read_[k];folio_wait_bit_common_[k];io_schedule_[k]";

/// A DataLoader without workers over files out of the page cache: the
/// trainer's main thread on a CPU 2 s of 10 (half decoding in the
/// loader's next(), half training), blocked on the device 8 s, with
/// `offcpu` (frames under its loop, µs) saying where.
fn slow_disk_trainer(offcpu: &[(String, u64)]) -> Session {
    let threads = [T {
        pid: 100,
        tid: 100,
        comm: "python",
        per_bucket: [200 * MS, 0, 0, 800 * MS],
        read_bytes: 100 << 20,
    }];
    let mut s = session(&threads, &[(100, 0)], Vec::new());
    let stack = |frames: &str, n: u64| {
        (
            format!("python;[100/100];<module> (/t/train.py:9);{frames}"),
            n,
        )
    };
    s.oncpu_threads.stacks = vec![
        stack(&format!("{NEXT};memcpy"), 99),
        stack(&format!("{STEP};sgemm"), 99),
    ];
    s.offcpu_threads.stacks = offcpu.iter().map(|(f, us)| stack(f, *us)).collect();
    s
}

#[test]
fn a_trainer_reading_its_own_samples_from_a_slow_disk_is_storage_bound() {
    // Blocked on the device inside next() 8 s of 10, decoding there 1 s,
    // training 1 s.
    let s = slow_disk_trainer(&[(format!("{NEXT};{DEVICE_READ}"), 8_000_000)]);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.consumers.len(), 1);
    let c = &w.consumers[0];
    assert_eq!((c.pid, c.tid), TRAINER);
    assert_eq!(c.fetch_io_ns, 8_000_000_000);
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 10.0).abs() < 1.0, "{au}");
    // Its reads are fetching, not a checkpoint's I/O of its own.
    assert_eq!(c.own_io_ns, 0);
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::StorageBound);
}

#[test]
fn a_trainer_blocked_on_a_device_outside_its_loader_is_not_computing() {
    // As above, but 1 s of the 8 s blocked on the device is a step's page
    // faults (a library's code paged in from the same slow disk): the
    // trainer computes 1 s of 10 either way.
    let s = slow_disk_trainer(&[
        (format!("{NEXT};{DEVICE_READ}"), 7_000_000),
        (
            format!("{STEP};[libdnnl.so];asm_exc_page_fault_[k];filemap_fault_[k];io_schedule_[k]"),
            1_000_000,
        ),
    ]);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    let c = &w.consumers[0];
    assert_eq!(c.fetch_io_ns, 7_000_000_000);
    assert!(
        c.own_io_ns.abs_diff(1_000_000_000) < 10_000_000,
        "{}",
        c.own_io_ns
    );
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 10.0).abs() < 1.0, "{au}");
    // The paging is the trainer's own, not fetching.
    assert!(
        c.own_fetch_ns().abs_diff(8_000_000_000) < 100_000_000,
        "{}",
        c.own_fetch_ns()
    );
}
