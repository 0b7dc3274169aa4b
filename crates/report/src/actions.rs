//! What to try about a verdict: one to three actions made from the evidence
//! it rests on (its threads, device, throttle, lock, Python function and
//! the CPUs left), not a fixed sentence per verdict.
//!
//! ```text
//! Decision (primary finding's Detail) + Features ──► actions() ──► verdict.json "actions",
//!                                                                 report.md, report.html,
//!                                                                 the terminal
//! ```
use crate::wording::basis_text;
use storprof_analysis::{
    Features,
    features::ReaderSelection,
    stall::StallKind,
    verdict::{AuSource, Decision, Detail, Note, StorageLimit},
};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// CPUs the job left idle, when it used fewer than it had.
/// CPUs busy on average: the machine's (work outside the job included)
/// when it was read, else the job's.
fn busy_cpus(f: &Features) -> f64 {
    f.host_cpus_busy
        .unwrap_or(0.0)
        .max(f.cpus_used)
        .min(f64::from(f.num_cpus))
}

fn idle_cpus(f: &Features) -> f64 {
    (f64::from(f.num_cpus) - busy_cpus(f)).max(0.0)
}

/// Other load takes this many CPUs or more: worth naming.
const OTHER_LOAD_CPUS: f64 = 0.5;

/// The actions for `d`'s primary finding, most specific first. Empty when
/// the rules found nothing to act on (an inconclusive verdict gets one
/// line saying how to get a clearer one).
pub fn actions(d: &Decision, f: &Features) -> Vec<String> {
    if d.notes.iter().any(|n| matches!(n, Note::NothingRecorded)) {
        return vec![
            "Record again and let the command run until it exits or is stopped with Ctrl-C \
             (storprof writes every file then); check `sudo storprof doctor` if the probes \
             did not load."
                .to_string(),
        ];
    }
    if d.inconclusive {
        return vec![
            "Record longer (at least a few dozen training steps) or with the training \
             command from its start, so a rule can decide."
                .to_string(),
        ];
    }
    match &d.primary.detail {
        Detail::CpuBoundReader {
            hot,
            gil_share,
            gil_holders,
            ..
        } => cpu_bound_reader(f, hot, *gil_share, gil_holders, basis_text(d.basis)),
        Detail::StorageBound {
            fs_daemon: Some(d), ..
        } => vec![fs_daemon_action(d)],
        Detail::StorageBound {
            limit,
            device,
            io_limit,
            ..
        } => {
            let mut out = Vec::new();
            if let Some(l) = io_limit {
                let rate = l
                    .read_mib_per_s
                    .map(|r| format!("{r:.1} MiB/s"))
                    .or_else(|| l.read_iops.map(|n| format!("{n} IOPS")))
                    .unwrap_or_else(|| "a read limit".to_string());
                out.push(format!(
                    "Raise or remove the {} read limit of cgroup {} ({rate} on {}): it, not the \
                     device, holds the reads back.",
                    l.kind, l.cgroup, l.device
                ));
            }
            match (limit, device) {
                (StorageLimit::Device, Some(dev)) => out.push(format!(
                    "{} is saturated ({} busy at {:.1} MiB/s): use faster storage, spread the \
                     dataset over more devices, or keep it in memory (a local or page-cache \
                     copy) if it fits.",
                    dev.name,
                    pct(dev.utilization),
                    dev.read_mib_per_s
                )),
                (StorageLimit::Throttle, Some(dev)) if io_limit.is_none() => out.push(format!(
                    "{} is only {} busy while reads wait: look for a limit in front of it (a \
                     cloud volume's IOPS or bandwidth cap, a cgroup outside the job), or put \
                     more reads in flight (read threads, DataLoader workers, prefetch) if each \
                     read waits on latency.",
                    dev.name,
                    pct(dev.utilization)
                )),
                _ => {}
            }
            if out.is_empty() {
                out.push(
                    "Faster storage, more reads in flight, or the dataset in memory.".to_string(),
                );
            }
            out
        }
        Detail::PageCacheServed { hit, .. } => vec![format!(
            "Storage is not being tested: {} of the bytes read came from memory. To measure \
             it, drop the page cache first (sync; echo 3 > /proc/sys/vm/drop_caches), use a \
             dataset larger than RAM, or read with O_DIRECT (storprof bench --odirect).",
            pct(*hit)
        )],
        Detail::ComputeBound { au } => compute_bound(*au),
        Detail::CpuStarved {
            busy_threads,
            num_cpus,
            ..
        } => vec![format!(
            "{busy_threads} busy threads share {num_cpus} CPU(s): cap the thread pools \
             (OMP_NUM_THREADS, torch.set_num_threads, pyarrow.set_cpu_count) and loader \
             workers to about {num_cpus} in all, or run on more CPUs."
        )],
        Detail::LockContention { futex_share, site } => vec![format!(
            "Loaders waited for a lock another loader held ({} {}){}: shorten what runs under \
             it, give each loader its own file handle, client or decoder, or load in \
             processes instead of threads.",
            pct(*futex_share),
            basis_text(d.basis),
            site.as_ref().map_or(String::new(), |s| format!(
                ", {} of that wait for the lock taken in {}",
                pct(s.share),
                s.site
            ))
        )],
        Detail::MemoryPressure { oom_killed, .. } if *oom_killed => vec![
            "A process was killed for memory: lower what the loaders keep in flight \
             (prefetch_factor, workers, shuffle buffers) or give the job more memory."
                .to_string(),
        ],
        Detail::MemoryPressure { reclaim_share, .. } => vec![format!(
            "Readers reclaimed memory ({} {}): lower what the loaders keep in flight \
             (prefetch_factor, workers, shuffle buffers) or give the job more memory.",
            pct(*reclaim_share),
            basis_text(d.basis)
        )],
        Detail::NetworkBound { socket_share } => vec![format!(
            "Readers waited on the network ({} {}): put more requests in flight (read \
             threads, DataLoader workers, the object-store client's concurrency), read larger \
             ranges, or read from an endpoint closer to the host.",
            pct(*socket_share),
            basis_text(d.basis)
        )],
        Detail::Stalled { kind, threads, .. } => stalled(*kind, threads),
        Detail::WritebackBound { device, .. } => vec![format!(
            "Writers are throttled while dirty pages drain to {}: the device's write rate is \
             the limit; write less or less often, or use faster storage.",
            device.as_ref().map_or("the device", |d| d.name.as_str())
        )],
        Detail::FsyncBound { calls, .. } => vec![format!(
            "Writers wait in {calls} fsync-family call(s): sync once per file when it is \
             complete rather than as it grows, or use storage with a power-loss-protected \
             write cache."
        )],
        Detail::WriteGeneratorBound { own_work_share, .. } => vec![format!(
            "Writers are busy making the data ({} of their CPU outside the write path): \
             serialisation is the limit, not storage; serialise in parallel (more writer \
             threads or ranks) or with a cheaper format.",
            pct(*own_work_share)
        )],
        Detail::CheckpointBound {
            comm, own_share, ..
        } => vec![format!(
            "The trainer{} writes its checkpoints itself, {} of its window: save in the \
             background (a separate thread or process, e.g. torch.distributed.checkpoint's \
             async_save) or less often.",
            comm.as_ref().map_or(String::new(), |c| format!(" ({c})")),
            pct(*own_share)
        )],
    }
}

fn cpu_bound_reader(
    f: &Features,
    hot: &[(String, f64)],
    gil_share: f64,
    gil_holders: &[(String, f64)],
    basis: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    if gil_share >= 0.10 {
        let holder = gil_holders
            .first()
            .map(|(name, share)| {
                format!(
                    ", or move {name} ({} of reader CPU) out of the interpreter",
                    pct(*share)
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "The GIL serialises the reader threads (waiting for it {} {basis}): read in \
             processes (DataLoader workers, multiprocessing) instead of threads{holder}.",
            pct(gil_share)
        ));
    }
    let idle = idle_cpus(f);
    let others = (busy_cpus(f) - f.cpus_used).max(0.0);
    let consumer_fetches = f.reader_selection == Some(ReaderSelection::ConsumerFetch);
    if others >= OTHER_LOAD_CPUS && idle < 1.0 {
        out.push(format!(
            "{:.1} of the {} CPUs were busy, {others:.1} of them with work outside the traced \
             job: the readers wait for a CPU it takes. Move that work elsewhere, or give the \
             job CPUs of its own (cpuset, taskset).",
            busy_cpus(f),
            f.num_cpus
        ));
    } else if consumer_fetches {
        // More workers or CPUs are not the consumer's lever.
    } else if idle >= 1.0 {
        out.push(format!(
            "{idle:.1} of the {} CPUs are idle: add loader workers (DataLoader num_workers, \
             tf.data num_parallel_calls, read threads); {} reader thread(s) today.",
            f.num_cpus, f.reader_threads
        ));
    } else if f.num_cpus > 0 {
        out.push(format!(
            "{:.1} of the {} CPUs are in use: more workers would compete for the rest; make \
             the reader cheaper or add CPUs.",
            f.cpus_used.min(f64::from(f.num_cpus)),
            f.num_cpus
        ));
    }
    if consumer_fetches {
        out.push(
            "No loader kept the consumer waiting: its own work taking each batch \
             (unpickling, collating, copying) did. More loader workers will not help; move \
             that work into them (collate there, hand over fewer and larger objects) or make \
             it cheaper."
                .to_string(),
        );
    }
    if let Some((name, share)) = hot.first() {
        out.push(format!(
            "The hottest reader code is {name} ({} of reader CPU): making it cheaper (less \
             per-sample work, a vectorised or native path) raises throughput in proportion.",
            pct(*share)
        ));
    }
    out
}

fn compute_bound(au: AuSource) -> Vec<String> {
    let au = match au {
        AuSource::Bench(a) => Some(a),
        AuSource::Kernel(s) | AuSource::ConsumerAsleep(s) => Some(s * 100.0),
        AuSource::NoConsumer => None,
    };
    vec![format!(
        "Nothing to fix in the data path: the consumer computes{} and the loaders wait for \
         it. A faster step would move the limit to the readers: record again with the \
         production step time to see where.",
        au.map_or(String::new(), |a| format!(" {a:.1}% of the time"))
    )]
}

fn stalled(kind: Option<StallKind>, threads: &[(String, u32)]) -> Vec<String> {
    let names: Vec<String> = threads
        .iter()
        .take(3)
        .map(|(comm, tid)| format!("{comm} ({tid})"))
        .collect();
    let on = if names.is_empty() {
        String::new()
    } else {
        format!(" of {}", names.join(", "))
    };
    let what = match kind {
        Some(StallKind::BusyLoop) => "it is busy but makes no progress (a retry or spin loop)",
        _ => "its threads are blocked with nobody to wake them",
    };
    vec![format!(
        "The job stopped moving: {what}. The report's stall section has the stacks{on}; \
         py-spy dump --pid PID shows the Python side."
    )]
}

/// What to try when a FUSE daemon answers the readers' storage waits.
fn fs_daemon_action(d: &storprof_analysis::features::FsDaemonFeature) -> String {
    format!(
        "The reads go to a file system served by {comm} (pid {pid}), a FUSE daemon: its backend \
         (an object store's latency and bandwidth), its cache and prefetch settings, or more \
         reads in flight (DataLoader workers, read threads: each read waits on the daemon's \
         round trip) set the rate; record it with the job (`storprof diagnose --pid {pid} -- \
         COMMAND`) to see where its time goes.",
        comm = d.comm,
        pid = d.pid
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compute_bound_action_reads_every_au_source_in_percent() {
        for (au, want) in [
            (AuSource::Bench(99.8), "computes 99.8% of the time"),
            (AuSource::Kernel(0.998), "computes 99.8% of the time"),
            (AuSource::ConsumerAsleep(0.5), "computes 50.0% of the time"),
        ] {
            let line = compute_bound(au).remove(0);
            assert!(line.contains(want), "{au:?}: {line}");
        }
        assert!(!compute_bound(AuSource::NoConsumer)[0].contains('%'));
    }
}
