//! Loader threads at a lock or the GIL, a fork-join pool, a plain reader.
use super::*;

const LOCK_MAIN: (u32, u32) = (300, 300);

/// A main thread fed by four loader threads of its process, each reading
/// and on CPU `cpu_ms[i]` of each second, with the lock waits
/// `lock_edges(i, loaders)` gives for loader `i`.
fn four_loaders(
    cpu_ms: [u64; 4],
    lock_edges: impl Fn(usize, &[(u32, u32)]) -> Vec<WakeEdge>,
) -> Session {
    let loaders: Vec<(u32, u32)> = (301..=304).map(|t| (300, t)).collect();
    let mut threads = vec![T {
        pid: 300,
        tid: 300,
        comm: "python",
        per_bucket: [10 * MS, 0, 990 * MS, 0],
        read_bytes: 0,
    }];
    let mut edges = vec![timer(LOCK_MAIN, 200 * MS)];
    for (i, &l) in loaders.iter().enumerate() {
        threads.push(T {
            pid: 300,
            tid: l.1,
            comm: "loader",
            per_bucket: [cpu_ms[i] * MS, 0, (1000 - cpu_ms[i]) * MS, 0],
            read_bytes: 50 << 20,
        });
        edges.push(edge(l, LOCK_MAIN, "futex", 195 * MS, 5));
        edges.extend(lock_edges(i, &loaders));
    }
    session(&threads, &[(300, 0)], edges)
}

#[test]
fn loader_threads_serialized_by_one_lock_are_lock_contention() {
    // Each waits on the one lock, released by the next, which waited on
    // it too.
    let s = four_loaders([250; 4], |i, loaders| {
        vec![futex(
            loaders[(i + 1) % loaders.len()],
            loaders[i],
            true,
            700 * MS,
        )]
    });
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert_eq!((w.consumers[0].pid, w.consumers[0].tid), LOCK_MAIN);
    assert!(w.share(&[PathKind::Lock]) > 0.6, "{:?}", w.critical_path);
    assert_verdict(&a, VerdictId::LockContention);
}

#[test]
fn a_worker_and_its_feeder_taking_turns_at_the_gil_are_not_lock_contention() {
    // DLIO #330: the worker formats on CPU holding the GIL; its feeder
    // waits for the GIL to send the last batch, and the worker waited on
    // the same word when the feeder had it. Both are loaders.
    let mut s = dataloader(600, 900);
    for e in &mut s.waits.as_mut().unwrap().edges {
        if (e.waker_pid, e.waker_tid) == WORKER && (e.wakee_pid, e.wakee_tid) == FEEDER {
            e.futex_shared = true;
        }
    }
    s.waits
        .as_mut()
        .unwrap()
        .edges
        .push(futex(FEEDER, WORKER, true, 20 * MS));
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert_eq!(w.role_of(FEEDER.0, FEEDER.1), Some(Role::Loader));
    assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
    assert_verdict(&a, VerdictId::CpuBoundReader);
    // A feeder that does a third of the pair's work under the same lock
    // is contention: without the lock the pair could go 1.5x faster.
    let mut shared = s.clone();
    for series in &mut shared.timeseries.as_mut().unwrap().threads {
        if (series.pid, series.tid) == FEEDER {
            series.on_cpu_ns = vec![450 * MS; BUCKETS];
        }
    }
    let w = analyze(&shared, &Thresholds::default()).unwrap();
    assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
}

#[test]
fn readers_starved_at_an_unfair_lock_are_lock_contention() {
    // One of four readers wins the lock nearly every time: it does most
    // of the CPU work, the others wait to do theirs.
    let s = four_loaders([900, 30, 30, 30], |i, loaders| {
        if i == 0 {
            return Vec::new();
        }
        vec![
            futex(loaders[0], loaders[i], true, 900 * MS),
            futex(loaders[i], loaders[0], true, 50 * MS),
        ]
    });
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
}

#[test]
fn fork_join_on_a_pool_is_not_lock_contention() {
    // The pool thread never waits on the word the worker waits on: a
    // hand-off. A shared word between a loader and a helper is not
    // contention among loaders either.
    let mut s = dataloader(600, 300);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.share(&[PathKind::Lock]), 0.0);
    for e in &mut s.waits.as_mut().unwrap().edges {
        if (e.waker_pid, e.waker_tid) == (200, 202) {
            e.futex_shared = true;
        }
    }
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
}

#[test]
fn a_plain_reader_has_no_consumer() {
    let threads = [T {
        pid: 400,
        tid: 400,
        comm: "cat",
        per_bucket: [900 * MS, 0, 0, 100 * MS],
        read_bytes: 500 << 20,
    }];
    let s = session(&threads, &[(400, 0)], Vec::new());
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert!(w.consumers.is_empty());
    assert!(w.notes.iter().any(|n| n.contains("no consumer")));
    assert_eq!(a.decision.rules.as_str(), "readers");
    assert!(
        a.decision
            .notes
            .iter()
            .any(|n| matches!(n, Note::WaitGraph(t) if t.contains("no consumer")))
    );
}
