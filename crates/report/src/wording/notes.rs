//! The notes under a verdict (what else fired, what the figures are
//! shares of, what the recording lacked) as sentences.
use super::*;

/// A note in words.
pub(super) fn note_text(note: &Note, d: &Decision) -> String {
    match note {
        Note::AlsoFired(id) => {
            let summary = d.runners_up.iter().find(|r| r.verdict == *id).map_or_else(
                || id.as_str().to_string(),
                |r| summary_for(r, d.basis, &consumer_label(d)),
            );
            format!("Also: {summary}")
        }
        Note::IoMismatch {
            derived_mib_per_s: derived,
            measured_mib_per_s: measured,
            ratio: r,
        } => format!(
            "DLIO's I/O throughput is derived (samples/s × record size): {derived:.2} MiB/s, while the reader really read {measured:.2} MiB/s ({r:.1}× the derived figure): the storage #330 mismatch. Compare storage with the measured figure."
        ),
        Note::ReadAmplification(a) => format!(
            "The reader read {a:.1}× the bytes of the samples it returned (read amplification)."
        ),
        Note::PartialSession(missing) => format!(
            "Partial session (recording stopped early?): missing {}; figures from those files are absent.",
            missing.join(", ")
        ),
        Note::NothingRecorded => "No thread was recorded in this session: there is nothing to \
             decide from."
            .to_string(),
        Note::TooLittleRecorded { thread_s, min_s } => format!(
            "The threads a verdict would rest on ran {thread_s:.3} s in all, under the {min_s} s \
             needed to decide (threshold min_decision_thread_s): record a longer run."
        ),
        Note::LostEvents(n) => {
            format!("{n} events or samples were lost while recording; figures are lower bounds.")
        }
        Note::Format1Session => {
            "Session of format 1 (no wake-up graph): verdict by the older rules over \
             the readers' summed thread time; idle pool threads may weigh in."
                .to_string()
        }
        Note::NoWakeupGraph => "No wake-up graph in this session (the wakeups probe did not run): \
             verdict over the readers' summed thread time."
            .to_string(),
        Note::WaitGraph(text) => text.clone(),
        Note::WritesOnlyInMemory {
            written_mib,
            device_mib,
        } => format!(
            "The written data only reached memory: {written_mib:.1} MiB written, no fsync, {device_mib:.1} MiB reached a device while recording; the rest sits in the page cache as dirty pages, so the write speed is memory's, not storage's."
        ),
        Note::BenchAuLeavesOutOwnTime {
            bench_au,
            compute_share,
            own_share,
        } => format!(
            "The bench's AU ({bench_au:.1}%) counts its training steps only (DLIO leaves checkpoint time out); over the whole training window the trainer computed {} and spent {} on its own writes.",
            pct(*compute_share),
            pct(*own_share)
        ),
        Note::EpochStarts {
            epochs,
            wait_s,
            share,
            au_without,
        } => format!(
            "The workers were started anew for {epochs} later epoch(s): waiting for their first \
             batches took {wait_s:.2} s, {} of the training window, which the kernel AU counts \
             and DLIO's leaves out (it excludes each epoch's first step); without them the \
             kernel AU would be {au_without:.1}%. persistent_workers=True keeps the workers \
             across epochs.",
            pct(*share)
        ),
        Note::ConsumerGil { comm, share } => format!(
            "The consumer {comm} waited for the GIL {} of its window (another thread was \
             running Python): the kernel AU counts that as waiting, while a workload that times \
             its own steps counts the GIL's re-take at the end of a sleep or a call as compute, \
             so its own AU reads higher.",
            pct(*share)
        ),
        Note::ConsumerFetch {
            fetch_s,
            queued_s,
            au,
            consumers,
        } => {
            let names = consumer_names(consumers);
            format!(
                "The consumer {} never waited for data, yet its AU is {au:.1}%: it fetched \
                 for itself {fetch_s:.2} s over the training window (on a CPU taking its \
                 batches {:.2} s, queued for a CPU {queued_s:.2} s), and figures about \
                 \"reader\" time are shares of that.",
                names,
                (fetch_s - queued_s).max(0.0)
            )
        }
        Note::ConsumerDataWait {
            wait_s,
            gil_s,
            consumers,
        } => {
            let names = consumer_names(consumers);
            if *gil_s > 0.005 {
                format!(
                    "Figures about \"reader\" time are shares of the time the consumer waited on \
                     its loaders ({:.2} s over the training window: {wait_s:.2} s for data, \
                     {gil_s:.2} s for the GIL they held; consumer {}), spent by the threads it \
                     waited on, directly or through their own waits.",
                    wait_s + gil_s,
                    names
                )
            } else {
                format!(
                    "Figures about \"reader\" time are shares of the consumer's data wait \
                     ({wait_s:.2} s over the training window, consumer {}), spent by the threads \
                     it waited on, directly or through their own waits.",
                    names
                )
            }
        }
    }
}

/// `comm (tid N), ...` of the consumers.
fn consumer_names(consumers: &[(String, u32)]) -> String {
    consumers
        .iter()
        .map(|(comm, tid)| format!("{comm} (tid {tid})"))
        .collect::<Vec<_>>()
        .join(", ")
}
