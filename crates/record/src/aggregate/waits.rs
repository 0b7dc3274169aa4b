//! The wake-up graph: the kernel's summed edges, the buckets in which each
//! grew, and the edges named (kinds, states, syscalls, waker stacks).
use std::collections::BTreeMap;

use storprof_common::{
    OffCpuStart, WAKE_NO_SYSCALL, WakeAcc, WakeKey, futex_share, offcpu_state, waker_kind,
};

use super::{comm_string, offcpu_state_name, syscall_name, waker_kind_name};
use storprof_session::model::{PendingWait, WaitGraph, WakeEdge};

/// Traced threads off CPU at least this long are pending waits
/// (`waits.json` `pending`): what a stall is stuck on.
pub const PENDING_MIN_NS: u64 = 1_000_000_000;

/// Pending waits kept, longest first.
pub const PENDING_MAX: usize = 32;

/// Which threads [`pending_waits`] lists, and their names.
pub struct PendingFilter<'a> {
    /// Is this tgid traced?
    pub traced: &'a dyn Fn(u32) -> bool,
    /// Does (tgid, tid) still exist?
    pub alive: &'a dyn Fn(u32, u32) -> bool,
    pub comm_of: &'a dyn Fn(u32, u32) -> String,
}

/// Traced, living threads off CPU (not woken) for at least
/// [`PENDING_MIN_NS`] at `now`, longest first, at most [`PENDING_MAX`],
/// from the per-tid switch-out slots (`tid → (switch-in, slot)`), each
/// with the (user, kernel) stack ids its switch-out recorded; frames are
/// left to the caller to symbolize.
pub fn pending_waits(
    slots: &BTreeMap<u32, (u64, OffCpuStart)>,
    now: u64,
    filter: &PendingFilter,
) -> Vec<(PendingWait, i32, i32)> {
    let mut out: Vec<(PendingWait, i32, i32)> = slots
        .iter()
        .filter_map(|(&tid, (_, off))| {
            let blocked = now.checked_sub(off.ts)?;
            // A woken thread waits for a CPU, not for someone else.
            let woken = off.state & offcpu_state::WOKEN != 0;
            if off.ts == 0
                || woken
                || blocked < PENDING_MIN_NS
                || !(filter.traced)(off.tgid)
                || !(filter.alive)(off.tgid, tid)
            {
                return None;
            }
            let index = off.state & offcpu_state::INDEX_MASK;
            Some((
                PendingWait {
                    pid: off.tgid,
                    tid,
                    comm: (filter.comm_of)(off.tgid, tid),
                    state: offcpu_state_name(index as u8).to_string(),
                    blocked_s: blocked as f64 / 1e9,
                    stack: Vec::new(),
                },
                off.user_stack,
                off.kernel_stack,
            ))
        })
        .collect();
    out.sort_by(|a, b| b.0.blocked_s.total_cmp(&a.0.blocked_s));
    out.truncate(PENDING_MAX);
    out
}

/// Cumulative (blocked ns, wake-ups) per wake-up edge at one instant.
pub type WakeCumulative = BTreeMap<WakeKey, (u64, u64)>;

/// Wake-up edges as they are at one instant.
pub fn wake_cumulative(edges: &[(WakeKey, WakeAcc)]) -> WakeCumulative {
    edges
        .iter()
        .map(|(k, acc)| (*k, (acc.blocked_ns, acc.count)))
        .collect()
}

/// Two sets of wake-up edges as one, ordered by key: an edge in both (a
/// retired thread's tid reused) sums its time and wake-ups and spans both
/// periods; the stacks and comm of its first wake-up are kept.
pub fn merge_wake_edges(
    a: impl IntoIterator<Item = (WakeKey, WakeAcc)>,
    b: impl IntoIterator<Item = (WakeKey, WakeAcc)>,
) -> Vec<(WakeKey, WakeAcc)> {
    let mut merged: BTreeMap<WakeKey, WakeAcc> = BTreeMap::new();
    for (key, acc) in a.into_iter().chain(b) {
        add_wake_edge(&mut merged, key, acc);
    }
    merged.into_iter().collect()
}

/// Adds one edge to `edges`, as [`merge_wake_edges`] merges them.
pub fn add_wake_edge(edges: &mut BTreeMap<WakeKey, WakeAcc>, key: WakeKey, acc: WakeAcc) {
    match edges.entry(key) {
        std::collections::btree_map::Entry::Vacant(slot) => {
            slot.insert(acc);
        }
        std::collections::btree_map::Entry::Occupied(mut slot) => {
            let sum = slot.get_mut();
            let acc_first = acc.first_ns < sum.first_ns;
            sum.blocked_ns += acc.blocked_ns;
            sum.count += acc.count;
            sum.last_ns = sum.last_ns.max(acc.last_ns);
            if acc_first {
                sum.first_ns = acc.first_ns;
                sum.first_blocked_ns = acc.first_blocked_ns;
                sum.waker_user_stack = acc.waker_user_stack;
                sum.waker_kernel_stack = acc.waker_kernel_stack;
                sum.waker_comm = acc.waker_comm;
            }
        }
    }
}

/// Per edge, the buckets in which it grew: (bucket, blocked ns, wake-ups).
pub type WakeSeries = BTreeMap<WakeKey, Vec<(u32, u64, u64)>>;

/// Adds bucket `bucket` (= `now` − `prev`, two cumulative snapshots taken
/// at its boundaries, as for `SeriesBuilder`) to `series`: only edges
/// with wake-ups in it, so a long recording keeps what changed.
pub fn add_wake_bucket(
    series: &mut WakeSeries,
    prev: &WakeCumulative,
    now: &WakeCumulative,
    bucket: u32,
) {
    for (key, &(ns, n)) in now {
        let (ns0, n0) = prev.get(key).copied().unwrap_or((0, 0));
        if n > n0 {
            series
                .entry(*key)
                .or_default()
                .push((bucket, ns.saturating_sub(ns0), n - n0));
        }
    }
}

/// Re-keys the series of edges whose waker or wakee was folded into a
/// group (`folded`: tid → (group tgid, group tid)), as the recorder re-keys
/// the edges themselves; series that land on one key merge per bucket.
pub fn fold_wake_series(series: &mut WakeSeries, folded: &BTreeMap<u32, (u32, u32)>) {
    if folded.is_empty() {
        return;
    }
    let moving: Vec<WakeKey> = series
        .keys()
        .filter(|k| folded.contains_key(&k.waker_tid) || folded.contains_key(&k.wakee_tid))
        .copied()
        .collect();
    for key in moving {
        let Some(buckets) = series.remove(&key) else {
            continue;
        };
        let fold = |tgid: u32, tid: u32| folded.get(&tid).copied().unwrap_or((tgid, tid));
        let (waker_tgid, waker_tid) = fold(key.waker_tgid, key.waker_tid);
        let (wakee_tgid, wakee_tid) = fold(key.wakee_tgid, key.wakee_tid);
        let into = series
            .entry(WakeKey {
                waker_tgid,
                waker_tid,
                wakee_tgid,
                wakee_tid,
                ..key
            })
            .or_default();
        into.extend(buckets);
        into.sort_by_key(|&(bucket, _, _)| bucket);
        into.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 += later.1;
                earlier.2 += later.2;
            }
            same
        });
    }
}

/// The wake-up graph from the final edge map. `start_mono_ns` is the
/// recording's start on the probes' clock; `stack_of` gives a waker's
/// frames (outermost first) for its tgid, user and kernel stack ids;
/// `is_traced` tells traced processes.
pub fn wait_graph(
    edges: &[(WakeKey, WakeAcc)],
    series: &WakeSeries,
    start_mono_ns: u64,
    bucket_ns: u64,
    is_traced: &dyn Fn(u32) -> bool,
    stack_of: &mut dyn FnMut(u32, i32, i32) -> Vec<String>,
) -> WaitGraph {
    let seconds = |t: u64| t.saturating_sub(start_mono_ns) as f64 / 1e9;
    let mut out: Vec<WakeEdge> = edges
        .iter()
        .map(|(k, acc)| {
            let task = k.waker_kind == waker_kind::TASK;
            WakeEdge {
                waker_kind: waker_kind_name(k.waker_kind).to_string(),
                waker_pid: k.waker_tgid,
                waker_tid: k.waker_tid,
                waker_comm: comm_string(&acc.waker_comm),
                waker_traced: task && is_traced(k.waker_tgid),
                wakee_pid: k.wakee_tgid,
                wakee_tid: k.wakee_tid,
                wakee_state: offcpu_state_name(k.wakee_state).to_string(),
                syscall: (k.syscall != WAKE_NO_SYSCALL).then(|| syscall_name(u32::from(k.syscall))),
                futex_shared: k.futex_shared != futex_share::NONE,
                lock_wait: k.futex_shared == futex_share::LOCK_WAIT,
                blocked_ns: acc.blocked_ns,
                count: acc.count,
                first_s: seconds(acc.first_ns),
                last_s: seconds(acc.last_ns),
                first_blocked_ns: acc.first_blocked_ns,
                waker_stack: stack_of(
                    k.waker_tgid,
                    if task { acc.waker_user_stack } else { -1 },
                    acc.waker_kernel_stack,
                ),
                series: series.get(k).cloned().unwrap_or_default(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.blocked_ns
            .cmp(&a.blocked_ns)
            .then_with(|| (a.wakee_tid, a.waker_tid).cmp(&(b.wakee_tid, b.waker_tid)))
    });
    WaitGraph {
        bucket_ns,
        edges: out,
        pending: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_wake_edges_sum_a_shared_key_and_keep_the_first_wake_up() {
        let key = |wakee_tid| WakeKey {
            waker_tid: 1,
            wakee_tid,
            ..WakeKey::default()
        };
        let acc = |first_ns, last_ns, count, stack| WakeAcc {
            blocked_ns: 10 * count,
            count,
            first_ns,
            last_ns,
            first_blocked_ns: first_ns,
            waker_user_stack: stack,
            waker_kernel_stack: -1,
            ..WakeAcc::default()
        };
        let retired = [(key(2), acc(100, 200, 3, 7)), (key(3), acc(5, 6, 1, 8))];
        let live = [(key(2), acc(50, 900, 2, 9)), (key(4), acc(1, 2, 1, 10))];
        let merged = merge_wake_edges(retired, live);
        assert_eq!(merged.len(), 3);
        let (k, m) = merged[0];
        assert_eq!(k, key(2));
        assert_eq!((m.count, m.blocked_ns), (5, 50));
        assert_eq!((m.first_ns, m.last_ns, m.first_blocked_ns), (50, 900, 50));
        assert_eq!(m.waker_user_stack, 9);
        assert_eq!(merged[1].0, key(3));
        assert_eq!(merged[2].1.count, 1);
    }

    #[test]
    fn pending_waits_are_traced_living_unwoken_threads_off_cpu_a_second_or_more() {
        const S: u64 = 1_000_000_000;
        let slot = |tgid: u32, ts: u64, state: u32| {
            (
                0,
                OffCpuStart {
                    ts,
                    tgid,
                    state,
                    user_stack: 7,
                    kernel_stack: 8,
                    woken_ts: 0,
                    syscall: storprof_common::NO_SYSCALL,
                    _pad: 0,
                },
            )
        };
        let sleeping = offcpu_state::SLEEPING as u32;
        let slots: BTreeMap<u32, (u64, OffCpuStart)> = [
            (11, slot(10, 10 * S, sleeping)),                             // 90 s
            (12, slot(10, 95 * S, offcpu_state::UNINTERRUPTIBLE as u32)), // 5 s
            (13, slot(10, 99 * S + S / 2, sleeping)),                     // 0.5 s: too short
            (14, slot(10, 0, sleeping)),                                  // on a CPU
            (15, slot(10, 10 * S, sleeping | offcpu_state::WOKEN)),       // runnable
            (16, slot(20, 10 * S, sleeping)),                             // not traced
            (17, slot(10, 10 * S, sleeping)),                             // exited
        ]
        .into_iter()
        .collect();
        let filter = PendingFilter {
            traced: &|tgid| tgid == 10,
            alive: &|_, tid| tid != 17,
            comm_of: &|_, tid| format!("t{tid}"),
        };
        let got = pending_waits(&slots, 100 * S, &filter);
        let rows: Vec<(u32, &str, f64, i32, i32)> = got
            .iter()
            .map(|(w, u, k)| (w.tid, w.state.as_str(), w.blocked_s, *u, *k))
            .collect();
        assert_eq!(
            rows,
            [
                (11, "sleeping", 90.0, 7, 8),
                (12, "uninterruptible", 5.0, 7, 8)
            ]
        );
        assert_eq!(got[0].0.comm, "t11");
    }

    fn wake_key(waker_tid: u32, wakee_tid: u32) -> WakeKey {
        WakeKey {
            waker_tgid: 1,
            waker_tid,
            wakee_tgid: 1,
            wakee_tid,
            wakee_state: offcpu_state::SLEEPING as u8,
            waker_kind: waker_kind::TASK,
            syscall: 202,
            futex_shared: 1,
            _pad: [0; 3],
        }
    }

    #[test]
    fn folded_threads_edge_series_merge_per_bucket_under_the_group_key() {
        let group = |waker_tid: u32, wakee_tid: u32| WakeKey {
            waker_tgid: 1,
            ..wake_key(waker_tid, wakee_tid)
        };
        let mut series = WakeSeries::from([
            (wake_key(5, 2), vec![(0, 10, 1), (2, 20, 2)]),
            (wake_key(6, 2), vec![(1, 1, 1), (2, 4, 1)]),
            (wake_key(5, 3), vec![(4, 7, 1)]),
            (wake_key(9, 2), vec![(3, 3, 3)]),
        ]);
        // 5 and 6 (one name) fold into group 900, 3 into group 901.
        let folded = BTreeMap::from([(5, (1, 900)), (6, (1, 900)), (3, (1, 901))]);
        fold_wake_series(&mut series, &folded);
        assert_eq!(
            series,
            WakeSeries::from([
                (wake_key(9, 2), vec![(3, 3, 3)]),
                (group(900, 2), vec![(0, 10, 1), (1, 1, 1), (2, 24, 3)]),
                (group(900, 901), vec![(4, 7, 1)]),
            ])
        );
    }

    #[test]
    fn wake_series_keeps_buckets_with_wake_ups() {
        let a = wake_key(2, 3);
        let b = wake_key(3, 2);
        let s0 = WakeCumulative::new();
        let s1 = WakeCumulative::from([(a, (500, 2))]);
        let s2 = WakeCumulative::from([(a, (500, 2)), (b, (70, 1))]);
        let s3 = WakeCumulative::from([(a, (900, 3)), (b, (70, 1))]);
        let mut series = WakeSeries::new();
        for (i, pair) in [s0, s1, s2, s3].windows(2).enumerate() {
            add_wake_bucket(&mut series, &pair[0], &pair[1], i as u32);
        }
        assert_eq!(series[&a], vec![(0, 500, 2), (2, 400, 1)]);
        assert_eq!(series[&b], vec![(1, 70, 1)]);
    }

    #[test]
    fn wait_graph_names_kinds_and_orders_by_blocked_time() {
        let task = wake_key(2, 3);
        let timer = WakeKey {
            waker_tgid: 0,
            waker_tid: 1,
            waker_kind: waker_kind::TIMER,
            syscall: WAKE_NO_SYSCALL,
            futex_shared: 0,
            ..wake_key(0, 3)
        };
        let acc = |blocked_ns, first_ns| WakeAcc {
            blocked_ns,
            count: 4,
            first_ns,
            last_ns: first_ns + 2_000_000_000,
            first_blocked_ns: 10,
            waker_user_stack: 5,
            waker_kernel_stack: 6,
            waker_comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
        };
        let mut asked = Vec::new();
        let graph = wait_graph(
            &[
                (task, acc(100, 1_500_000_000)),
                (timer, acc(900, 1_000_000_000)),
            ],
            &WakeSeries::new(),
            1_000_000_000,
            1_000_000_000,
            &|pid| pid == 1,
            &mut |_, user, kernel| {
                asked.push((user, kernel));
                vec![format!("u{user}"), format!("k{kernel}")]
            },
        );
        assert_eq!(graph.edges.len(), 2);
        let first = &graph.edges[0];
        assert_eq!(first.waker_kind, "timer");
        assert!(!first.waker_traced);
        assert_eq!(first.syscall, None);
        assert_eq!(first.first_s, 0.0);
        let second = &graph.edges[1];
        assert_eq!(second.waker_kind, "task");
        assert!(second.waker_traced);
        assert_eq!(second.syscall.as_deref(), Some("futex"));
        assert!(second.futex_shared);
        assert!(!first.futex_shared);
        assert_eq!(second.waker_comm, "worker");
        assert!((second.first_s - 0.5).abs() < 1e-9);
        assert!((second.last_s - 2.5).abs() < 1e-9);
        // An interrupt's user stack belongs to the task it interrupted.
        assert!(asked.contains(&(-1, 6)), "{asked:?}");
        assert!(asked.contains(&(5, 6)), "{asked:?}");
    }
}
