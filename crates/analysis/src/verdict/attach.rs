//! The wait-for graph's figures added to a decision, and the rule set that
//! decided.
use super::*;

impl Decision {
    /// Adds the wait-for-graph figures and says which rules decided.
    pub fn attach_wait(&mut self, wait: Option<&WaitAnalysis>, session_format: u32) {
        let Some(w) = wait else {
            if session_format < 2 {
                self.notes.push(Note::Format1Session);
                self.rules = RuleSet::Format1;
            } else {
                self.notes.push(Note::NoWakeupGraph);
                self.rules = RuleSet::Readers;
            }
            return;
        };
        self.notes
            .extend(w.notes.iter().cloned().map(Note::WaitGraph));
        if w.kernel_au_percentage.is_none() {
            self.rules = RuleSet::Readers;
            if !w.critical_path.is_empty() {
                // The readers' own time, split by what ended their waits.
                self.window = w.window.clone();
                self.phases = w.phases.clone();
                self.roles = w.roles.clone();
                self.critical_path = rounded_path(&w.critical_path);
            }
            return;
        }
        self.rules = RuleSet::WaitGraph;
        let consumers = w
            .consumers
            .iter()
            .map(|c| (c.comm.clone(), c.tid))
            .collect();
        let sum_s = |ns: &dyn Fn(&crate::waitgraph::ConsumerTime) -> u64| {
            w.consumers.iter().map(|c| ns(c) as f64 / 1e9).sum::<f64>()
        };
        self.notes.push(if self.basis == ShareBasis::ConsumerFetch {
            Note::ConsumerFetch {
                fetch_s: sum_s(&|c| c.own_fetch_ns()),
                queued_s: sum_s(&|c| c.own_fetch_queued_ns()),
                au: w.kernel_au_percentage.unwrap_or(100.0),
                consumers,
            }
        } else {
            Note::ConsumerDataWait {
                wait_s: sum_s(&|c| c.data_wait_ns),
                gil_s: sum_s(&|c| c.gil_ns),
                consumers,
            }
        });
        for c in &w.consumers {
            let window = c.window_ns.max(1) as f64;
            let starts = c.epoch_start_wait_ns as f64;
            if c.epoch_starts > 0 && starts >= EPOCH_STARTS_NOTE_SHARE * window && starts < window {
                let not_computing = (1.0 - c.au_percentage / 100.0) * window;
                self.notes.push(Note::EpochStarts {
                    epochs: c.epoch_starts,
                    wait_s: starts / 1e9,
                    share: starts / window,
                    au_without: ((1.0 - (not_computing - starts).max(0.0) / (window - starts))
                        * 100.0)
                        .clamp(0.0, 100.0),
                });
            }
            let share = c.gil_ns as f64 / c.window_ns.max(1) as f64;
            if share >= CONSUMER_GIL_NOTE_SHARE {
                self.notes.push(Note::ConsumerGil {
                    comm: c.comm.clone(),
                    share,
                });
            }
        }
        self.kernel_au_percentage = w.kernel_au_percentage.map(round4);
        self.data_wait_share = w.data_wait_share.map(round4);
        self.window = w.window.clone();
        self.phases = w.phases.clone();
        self.consumers = w.consumers.clone();
        self.roles = w.roles.clone();
        self.critical_path = rounded_path(&w.critical_path);
    }
}

/// The share of its window a consumer waited for later epochs' first
/// batches from which a note says so.
const EPOCH_STARTS_NOTE_SHARE: f64 = 0.02;

/// A consumer's share of its window waiting for the GIL from which a note
/// says that its own step timing counts it as compute.
const CONSUMER_GIL_NOTE_SHARE: f64 = 0.05;

/// A critical path with its shares rounded for verdict.json.
fn rounded_path(path: &[PathShare]) -> Vec<PathShare> {
    path.iter()
        .map(|p| PathShare {
            share: round4(p.share),
            threads: p
                .threads
                .iter()
                .map(|(pid, tid, comm, share)| (*pid, *tid, comm.clone(), round4(*share)))
                .collect(),
            ..p.clone()
        })
        .collect()
}
