//! The analysis of a recorded session: pure functions over the session
//! crate's data, no I/O (dependencies: std, serde and the session crate).
//!
//! ```text
//! session::load::Session
//!        │ waitgraph::analyze               (roles, window, data wait, critical path)
//!        │ features::ReaderBasis::choose    (the reader figures' one basis)
//!        │ features::Features::build        (figures: shares, bytes, AU, stall)
//!        │ frames::hot_frames               (hottest categories, functions, libraries)
//!        ▼
//! verdict::decide ──► Decision (data) ──► Analysis
//! ```
//!
//! The sentences (`Verdict`'s headline and evidence) are made by the
//! profiler's `output::wording` from the decision: this crate returns data.
//!
//! Thresholds are named fields of [`Thresholds`] (documented in
//! `profiler/THRESHOLDS.md`); change them there, not in the rules.
pub mod features;
pub mod frames;
pub mod locks;
pub mod stall;
pub mod thresholds;
pub mod verdict;
pub mod waitgraph;
pub mod whatif;

pub use features::Features;
pub use frames::HotFrames;
pub use thresholds::Thresholds;
pub use verdict::{Verdict, VerdictId};
pub use waitgraph::WaitAnalysis;

use std::collections::BTreeMap;

use storprof_session::load::{FoldedStacks, Session};

/// Rows kept per "hottest" list.
pub const HOT_LIMIT: usize = 15;

/// Everything the outputs need: the decision (data; the report crate words
/// it) and what it was computed from.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub decision: verdict::Decision,
    pub features: Features,
    /// On-CPU hot frames of the reader threads.
    pub hot_oncpu_readers: HotFrames,
    /// On-CPU hot frames of every traced thread.
    pub hot_oncpu: HotFrames,
    /// Off-CPU hot frames (microseconds) of every traced thread.
    pub hot_offcpu: HotFrames,
    /// Who waits for whom (None: a format 1 session, or no wake-up probe).
    pub wait: Option<WaitAnalysis>,
}

/// Analyses a loaded session.
pub fn analyze(session: &Session, thresholds: &Thresholds) -> Analysis {
    use features::{ReaderBasis, ReaderSource};
    let wait = waitgraph::analyze(session, thresholds);
    let basis = ReaderBasis::choose(wait.as_ref(), session, thresholds);
    // The path threads' stacks weighted by their share of it; a consumer
    // that fetches for itself: its own, which are then the path's.
    let path_oncpu = match (&wait, basis) {
        (
            Some(w),
            ReaderBasis::CriticalPath | ReaderBasis::ReaderTime | ReaderBasis::ConsumerFetch,
        ) => threads_stacks(&session.oncpu_threads, &w.path_cpu_threads),
        _ => FoldedStacks::default(),
    };
    let own_oncpu = match (&wait, basis) {
        (Some(w), ReaderBasis::ConsumerFetch) => {
            let own: Vec<(u32, u32, f64)> =
                w.consumers.iter().map(|c| (c.pid, c.tid, 1.0)).collect();
            threads_stacks(&session.oncpu_threads, &own)
        }
        _ => FoldedStacks::default(),
    };
    let source = match (&wait, basis) {
        (Some(w), ReaderBasis::CriticalPath) => ReaderSource::CriticalPath {
            wait: w,
            path_oncpu: &path_oncpu,
        },
        (Some(w), ReaderBasis::ConsumerFetch) => ReaderSource::ConsumerFetch {
            wait: w,
            path_oncpu: &path_oncpu,
            own_oncpu: &own_oncpu,
        },
        (Some(w), ReaderBasis::ReaderTime) => ReaderSource::ReaderTime {
            wait: w,
            path_oncpu: &path_oncpu,
        },
        _ => ReaderSource::Threads,
    };
    let features = Features::build(session, thresholds, wait.as_ref(), source);
    let modules = &session.frame_modules;
    let reader_stacks = if basis == ReaderBasis::ConsumerFetch {
        &own_oncpu
    } else {
        &path_oncpu
    };
    let hot_oncpu_readers = if reader_stacks.is_empty() {
        let readers = &features.reader_comms;
        let is_reader = |comm: &str| readers.iter().any(|r| r == comm);
        frames::hot_frames(&session.oncpu, &is_reader, HOT_LIMIT, modules)
    } else {
        HotFrames {
            path_weighted: true,
            ..frames::hot_frames(reader_stacks, &|_| true, HOT_LIMIT, modules)
        }
    };
    let hot_oncpu = frames::hot_frames(&session.oncpu, &|_| true, HOT_LIMIT, modules);
    let hot_offcpu = frames::hot_frames(&session.offcpu, &|_| true, HOT_LIMIT, modules);
    let mut decision = verdict::decide(&features, &hot_oncpu_readers, thresholds);
    decision.attach_wait(wait.as_ref(), session.info.format_version);
    Analysis {
        decision,
        features,
        hot_oncpu_readers,
        hot_oncpu,
        hot_offcpu,
        wait,
    }
}

/// The per-thread on-CPU stacks (`comm;[pid/tid];...`) of `threads`, each
/// weighted by its share of the critical path, as per-comm stacks: the
/// hottest frames of the time the consumer waited for.
pub fn threads_stacks(per_thread: &FoldedStacks, threads: &[(u32, u32, f64)]) -> FoldedStacks {
    let mut samples: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut parsed = Vec::new();
    for (stack, n) in &per_thread.stacks {
        let mut parts = stack.splitn(3, ';');
        let (Some(comm), Some(ids)) = (parts.next(), parts.next()) else {
            continue;
        };
        let rest = parts.next().unwrap_or("");
        let Some((pid, tid)) = storprof_session::load::thread_ids(ids) else {
            continue;
        };
        *samples.entry((pid, tid)).or_insert(0) += n;
        parsed.push(((pid, tid), comm, rest, *n));
    }
    // Scaled so that each thread's samples sum to its path share × 10^4.
    let weight: BTreeMap<(u32, u32), f64> = threads
        .iter()
        .filter_map(|&(pid, tid, share)| {
            let n = *samples.get(&(pid, tid))?;
            (n > 0).then(|| ((pid, tid), share * 1e4 / n as f64))
        })
        .collect();
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for (id, comm, rest, n) in parsed {
        let Some(w) = weight.get(&id) else { continue };
        let value = (n as f64 * w).round() as u64;
        if value == 0 {
            continue;
        }
        let stack = if rest.is_empty() {
            comm.to_string()
        } else {
            format!("{comm};{rest}")
        };
        *merged.entry(stack).or_insert(0) += value;
    }
    FoldedStacks {
        stacks: merged.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `session_dir` fuzz target: folded counts whose sum
    /// passes u64 panicked in `hot_frames`; loading skips the line that
    /// passes it, and the rest is analysed.
    #[test]
    fn folded_counts_near_u64_max_are_analysed() {
        let text = format!("a;b {}\nc 2\nc;d 1\n", u64::MAX - 1);
        let (stacks, _) = FoldedStacks::parse(&text, "oncpu.folded");
        let session = Session {
            oncpu: stacks.clone(),
            offcpu: stacks,
            ..Session::default()
        };
        let analysis = analyze(&session, &Thresholds::default());
        assert_eq!(analysis.hot_oncpu.total, u64::MAX);
    }
}
