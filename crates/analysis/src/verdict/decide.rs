//! All findings ranked into a [`Decision`]: the primary verdict, its
//! confidence, the runners-up and the notes.
use super::*;

/// Confidence in the primary finding (0..1): its score, scaled down when the
/// margin over the runner-up is below `confident_margin` (to
/// `confidence_no_margin_factor` at no margin), and by the other
/// `confidence_*_factor` weights of [`Thresholds`] when no rule fired, the
/// session is partial, events were lost or readers ran less than
/// `min_reader_thread_s`.
pub fn confidence(primary: &Finding, runner_up_score: f64, f: &Features, t: &Thresholds) -> f64 {
    let margin = (primary.score - runner_up_score).max(0.0);
    let floor = t.confidence_no_margin_factor;
    let mut c = primary.score.clamp(0.0, 1.0)
        * (floor + (1.0 - floor) * (margin / t.confident_margin).min(1.0));
    if !primary.fired {
        c *= t.confidence_inconclusive_factor;
    }
    if !f.missing_files.is_empty() {
        c *= t.confidence_partial_session_factor;
    }
    if f.lost_events > 0 {
        c *= t.confidence_lost_events_factor;
    }
    if basis_s(primary, f) < t.min_reader_thread_s {
        c *= t.confidence_short_reader_time_factor;
    }
    round4(c)
}

/// The thread time (s) `primary` rests on: the writers' for a write
/// verdict, the checkpoint window for checkpoint-bound, else the readers'.
fn basis_s(primary: &Finding, f: &Features) -> f64 {
    match (&f.writes, &f.consumer) {
        (Some(w), _) if primary.verdict.is_write() => w.writer_thread_s,
        (_, Some(c)) if primary.verdict == VerdictId::CheckpointBound => {
            c.writes.as_ref().map_or(0.0, |w| w.window_s)
        }
        _ => f.reader_thread_s,
    }
}

/// "high", "medium" or "low", by the `confidence_high` / `confidence_medium` bars.
fn label(c: f64, t: &Thresholds) -> &'static str {
    if c >= t.confidence_high {
        "high"
    } else if c >= t.confidence_medium {
        "medium"
    } else {
        "low"
    }
}

fn bench_notes(f: &Features, t: &Thresholds) -> Vec<Note> {
    let mut notes = Vec::new();
    let Some(b) = &f.bench else { return notes };
    if let (Some(derived), Some(measured), Some(r)) = (
        b.derived_io_mib_per_s,
        b.measured_read_mib_per_s,
        b.measured_over_derived,
    ) && (r > t.io_mismatch_factor || r < 1.0 / t.io_mismatch_factor)
    {
        notes.push(Note::IoMismatch {
            derived_mib_per_s: derived,
            measured_mib_per_s: measured,
            ratio: r,
        });
    }
    if let Some(a) = b.read_amplification
        && a > t.io_mismatch_factor
    {
        notes.push(Note::ReadAmplification(a));
    }
    notes
}

/// Decides the verdict from the features and the readers' hottest on-CPU
/// frames; [`Decision::attach_wait`] adds the wait-for graph's figures.
pub fn decide(f: &Features, hot_oncpu: &HotFrames, t: &Thresholds) -> Decision {
    let mut all = findings(f, hot_oncpu, t);
    // A stall is reported only when there is one: it is not a share of
    // anything to rank among the others.
    all.retain(|x| x.verdict != VerdictId::Stalled || x.fired);
    // The write rules speak only about write-dominated sessions; elsewhere
    // they are left out like a stall that did not fire. There, fired write
    // findings come before fired read ones: the "readers" picked by
    // activity are the writers, seen through rules made for reads.
    let write_dominated = f.writes.as_ref().is_some_and(|w| w.write_dominated);
    all.retain(|x| write_dominated || !x.verdict.is_write());
    // Fired first, then by score; ties by id order so output is deterministic.
    let write_first = |x: &Finding| write_dominated && x.fired && x.verdict.is_write();
    all.sort_by(|a, b| {
        b.fired
            .cmp(&a.fired)
            .then_with(|| write_first(b).cmp(&write_first(a)))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.verdict.cmp(&b.verdict))
    });
    // Compute-bound wins whenever it fires: the pipeline keeps the consumer
    // busy, so whatever else is slow does not limit it. Unless the consumer
    // spends its window saving checkpoints in its own thread: it is not
    // computing then, whatever the bench's AU (DLIO's leaves that time out),
    // and that rule fires only when the saving outweighs its data wait.
    for leader in [VerdictId::ComputeBound, VerdictId::CheckpointBound] {
        if let Some(i) = all.iter().position(|x| x.verdict == leader && x.fired) {
            let first = all.remove(i);
            all.insert(0, first);
        }
    }
    // A job that makes no progress is limited by nothing else.
    if let Some(i) = all.iter().position(|x| x.verdict == VerdictId::Stalled) {
        let stalled = all.remove(i);
        all.insert(0, stalled);
    }
    let primary = all.remove(0);
    let stall = (primary.verdict == VerdictId::Stalled)
        .then(|| f.stall.clone())
        .flatten();
    // The stall's certainty does not depend on how the other shares rank;
    // a bench AU that left the checkpoints out is no rival to them.
    let runner_score = if stall.is_some() {
        0.0
    } else {
        all.iter()
            .find(|r| {
                !(primary.verdict == VerdictId::CheckpointBound
                    && r.verdict == VerdictId::ComputeBound)
            })
            .map_or(0.0, |r| r.score)
    };
    let nothing_recorded = f.threads_total == 0;
    // Too short to decide from: the recording, or the readers' (writers')
    // time a verdict on them rests on. A stall is decided by its quiet
    // time; compute-bound by the consumer, with or without readers; a
    // session that does not say its length is not judged by it.
    let too_little = (!nothing_recorded && stall.is_none() && f.duration_s > 0.0)
        .then(|| {
            if primary.verdict == VerdictId::ComputeBound {
                f.duration_s
            } else {
                basis_s(&primary, f).min(f.duration_s)
            }
        })
        .filter(|s| *s < t.min_decision_thread_s);
    let confidence = if nothing_recorded || too_little.is_some() {
        0.0
    } else {
        confidence(&primary, runner_score, f, t)
    };
    let inconclusive = !primary.fired || nothing_recorded || too_little.is_some();

    let mut notes: Vec<Note> = all
        .iter()
        .filter(|r| r.fired)
        .map(|r| Note::AlsoFired(r.verdict))
        .collect();
    notes.extend(bench_notes(f, t));
    if primary.verdict == VerdictId::CheckpointBound
        && let (Some(bench_au), Some(w)) = (
            f.bench.as_ref().and_then(|b| b.au_percentage),
            f.consumer.as_ref().and_then(|c| c.writes.as_ref()),
        )
    {
        notes.push(Note::BenchAuLeavesOutOwnTime {
            bench_au,
            compute_share: w.compute_share,
            own_share: w.own_share,
        });
    }
    if let Some(w) = f.writes.as_ref().filter(|w| w.only_in_memory) {
        notes.push(Note::WritesOnlyInMemory {
            written_mib: w.write_syscall_bytes as f64 / (1 << 20) as f64,
            device_mib: w.device_write_bytes as f64 / (1 << 20) as f64,
        });
    }
    if nothing_recorded {
        notes.push(Note::NothingRecorded);
    }
    if let Some(thread_s) = too_little {
        notes.push(Note::TooLittleRecorded {
            thread_s,
            min_s: t.min_decision_thread_s,
        });
    }
    if !f.missing_files.is_empty() {
        notes.push(Note::PartialSession(f.missing_files.clone()));
    }
    if f.lost_events > 0 {
        notes.push(Note::LostEvents(f.lost_events));
    }
    Decision {
        primary,
        runners_up: all,
        confidence,
        confidence_label: label(confidence, t),
        inconclusive,
        notes,
        basis: ShareBasis::of(f),
        rules: RuleSet::Unset,
        kernel_au_percentage: None,
        data_wait_share: None,
        window: None,
        phases: Vec::new(),
        consumers: Vec::new(),
        roles: Vec::new(),
        critical_path: Vec::new(),
        stall,
    }
}
