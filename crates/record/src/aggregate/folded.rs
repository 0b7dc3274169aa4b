//! Folded stacks (`frames;... count`), per comm and per thread, and the
//! unwinding depths per process.
use std::collections::BTreeMap;

use storprof_common::StackKey;

use storprof_session::model::ProcessUnwind;

/// Splits folded stacks whose first frame is `comm` + [`THREAD_MARK`] +
/// `pid/tid` into the per-comm form (`comm;...`) and the per-thread form
/// (`comm;[pid/tid];...`), each sorted with identical stacks merged.
pub fn split_thread_folded(folded: &str) -> (String, String) {
    let mut by_comm: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_thread: BTreeMap<String, u64> = BTreeMap::new();
    for line in folded.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else {
            continue;
        };
        let (first, rest) = stack.split_once(';').unwrap_or((stack, ""));
        let (comm, ids) = first.split_once(THREAD_MARK).unwrap_or((first, "?"));
        let join = |head: String| {
            if rest.is_empty() {
                head
            } else {
                format!("{head};{rest}")
            }
        };
        *by_comm.entry(join(comm.to_string())).or_insert(0) += n;
        *by_thread
            .entry(join(format!("{comm};[{ids}]")))
            .or_insert(0) += n;
    }
    let text = |m: BTreeMap<String, u64>| -> String {
        m.into_iter().map(|(s, n)| format!("{s} {n}\n")).collect()
    };
    (text(by_comm), text(by_thread))
}

/// Separates a thread's comm from its `pid/tid` in the first frame of
/// folded stacks before [`split_thread_folded`].
pub const THREAD_MARK: char = '\u{1f}';

/// Folded stacks (`comm;outer;...;leaf VALUE`), sorted, identical stacks
/// merged. `frames` returns the frames of a key outermost first; values are
/// divided by `divisor` (1 for samples, 1000 for ns → µs) and zero lines dropped.
pub fn fold(
    entries: &[(StackKey, u64)],
    divisor: u64,
    comm_of: &dyn Fn(&StackKey) -> String,
    frames: &mut dyn FnMut(&StackKey) -> Vec<String>,
) -> String {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (key, value) in entries {
        let mut parts = vec![comm_of(key).replace([';', ' '], "_")];
        let stack = frames(key);
        if stack.is_empty() {
            parts.push("[no stack]".to_string());
        }
        parts.extend(stack);
        *lines.entry(parts.join(";")).or_insert(0) += value;
    }
    let mut out = String::new();
    for (stack, value) in lines {
        let value = value / divisor.max(1);
        if value > 0 {
            out.push_str(&stack);
            out.push(' ');
            out.push_str(&value.to_string());
            out.push('\n');
        }
    }
    out
}

/// Stack depth distribution per process from (tgid, user depth, stopped
/// early (None: unknown, fp mode), samples) entries.
pub fn process_unwind(entries: &[(u32, u32, Option<bool>, u64)]) -> Vec<ProcessUnwind> {
    let mut per: BTreeMap<u32, ProcessUnwind> = BTreeMap::new();
    for &(tgid, depth, early, n) in entries {
        let p = per.entry(tgid).or_insert_with(|| ProcessUnwind {
            pid: tgid,
            ..ProcessUnwind::default()
        });
        p.samples += n;
        *p.depth_samples.entry(depth).or_insert(0) += n;
        if let Some(early) = early {
            *p.early_stop_samples.get_or_insert(0) += if early { n } else { 0 };
        }
    }
    for p in per.values_mut() {
        let half = p.samples.div_ceil(2);
        let mut seen = 0;
        for (&depth, &n) in &p.depth_samples {
            seen += n;
            if seen >= half {
                p.median_depth = depth;
                break;
            }
        }
        p.early_stop_share = p
            .early_stop_samples
            .filter(|_| p.samples > 0)
            .map(|e| e as f64 / p.samples as f64);
    }
    per.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_folded_splits_into_comm_and_thread_forms() {
        let m = THREAD_MARK;
        let folded = format!("w{m}1/2;a;b 3\nw{m}1/3;a;b 4\nw{m}1/3 1\n");
        let (by_comm, by_thread) = split_thread_folded(&folded);
        assert_eq!(by_comm, "w 1\nw;a;b 7\n");
        assert_eq!(by_thread, "w;[1/2];a;b 3\nw;[1/3] 1\nw;[1/3];a;b 4\n");
    }

    #[test]
    fn folds_and_merges() {
        let k = |tid, u| StackKey {
            tgid: 1,
            tid,
            user_stack: u,
            kernel_stack: -1,
        };
        let entries = [(k(1, 1), 2500), (k(2, 1), 600), (k(1, 2), 999)];
        let folded = fold(&entries, 1000, &|_| "my comm".to_string(), &mut |key| {
            if key.user_stack == 1 {
                vec!["main".into(), "leaf".into()]
            } else {
                vec![]
            }
        });
        assert_eq!(folded, "my_comm;main;leaf 3\n");
    }

    #[test]
    fn process_unwind_gives_depths_median_and_early_share() {
        let entries = [
            (7, 2, Some(true), 1),
            (7, 5, Some(false), 2),
            (7, 6, Some(false), 1),
            (9, 1, None, 4),
        ];
        let out = process_unwind(&entries);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].pid, 7);
        assert_eq!(out[0].samples, 4);
        assert_eq!(out[0].median_depth, 5);
        assert_eq!(out[0].early_stop_samples, Some(1));
        assert_eq!(out[0].early_stop_share, Some(0.25));
        assert_eq!(out[0].depth_samples.get(&5), Some(&2));
        assert_eq!(out[1].median_depth, 1);
        assert_eq!(out[1].early_stop_samples, None);
        assert_eq!(out[1].early_stop_share, None);
    }
}
