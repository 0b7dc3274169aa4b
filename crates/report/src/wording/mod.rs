//! The verdict in words: turns the rules' data ([`Decision`]: ids, figures,
//! scores, notes) into the sentences of verdict.json, which report.md and
//! the terminal print. The rules in `analysis::verdict` never build text.
//!
//! ```text
//! analysis::verdict::Decision ──► verdict ──► Verdict { headline, evidence[].text,
//!                                                       runners_up[].summary, notes }
//! ```
//! Every figure is written from its unrounded value; verdict.json's `value`
//! fields are rounded to 4 decimals.
use storprof_analysis::features::IoLimitFeature;
use storprof_analysis::locks::LockSite;
use storprof_analysis::stall::StallKind;
use storprof_analysis::verdict::{
    AuSource, Decision, Detail, DeviceFigures, Evidence, Figure, Finding, Note, RunnerUp,
    ShareBasis, StorageLimit, VERDICT_FORMAT_VERSION, Verdict, WriteDeviceFigures, round4,
};

mod figures;
mod notes;

pub use figures::{evidence, figure_text};
use notes::note_text;

fn pct(x: f64) -> String {
    // A share that rounds to zero prints as 0.0%, never -0.0%.
    let p = x * 100.0;
    format!("{:.1}%", if p.abs() < 0.05 { 0.0 } else { p })
}

/// What a reader share is of, as it ends a sentence.
pub fn basis_text(basis: ShareBasis) -> &'static str {
    match basis {
        ShareBasis::ConsumerDataWait => "of the consumer's data wait",
        ShareBasis::ReaderTime => "of their time",
        ShareBasis::ConsumerFetch => "of the consumer's own fetching",
    }
}

fn storage_phrase(device: Option<&DeviceFigures>) -> String {
    match device {
        Some(d) => format!(
            "{:.1} MiB/s from {}, {} busy",
            d.read_mib_per_s,
            d.name,
            pct(d.utilization)
        ),
        None => "no block-device activity recorded".to_string(),
    }
}

fn write_device_phrase(device: Option<&WriteDeviceFigures>) -> String {
    match device {
        Some(d) => format!(
            "{:.1} MiB/s written by {}, {} busy",
            d.write_mib_per_s,
            d.name,
            pct(d.utilization)
        ),
        None => "no block device wrote anything".to_string(),
    }
}

/// Friendly "name NN%" list of frames for headlines.
fn frames_phrase(frames: &[(String, f64)]) -> String {
    frames
        .iter()
        .map(|(name, share)| format!("{name} {:.0}%", share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One sentence: what a finding saw.
/// A share of GIL waits from which a CPU-bound reader's headline names the
/// GIL: a tenth of the time.
const GIL_NAMED_SHARE: f64 = 0.1;

pub fn summary(finding: &Finding, basis: ShareBasis) -> String {
    summary_for(finding, basis, SIMULATED_CONSUMER)
}

/// How a compute-bound headline names a consumer that emulates its compute
/// (timed sleeps: `storprof bench`, DLIO).
const SIMULATED_CONSUMER: &str = "the consumer (simulated accelerator)";

/// How the verdict names its consumer: a trainer that computes for real
/// (no timed sleeps) by its thread name, else the simulated accelerator.
fn consumer_label(d: &Decision) -> String {
    match d.consumers.as_slice() {
        [] => SIMULATED_CONSUMER.to_string(),
        cs if cs.iter().all(|c| !c.emulated_compute) => {
            let mut names: Vec<&str> = cs.iter().map(|c| c.comm.as_str()).collect();
            names.dedup();
            format!("the trainer ({})", names.join(", "))
        }
        _ => SIMULATED_CONSUMER.to_string(),
    }
}

/// [`summary`], naming the consumer as `consumer`.
fn summary_for(finding: &Finding, basis: ShareBasis, consumer: &str) -> String {
    let basis_text = basis_text(basis);
    match &finding.detail {
        Detail::CpuBoundReader {
            hot,
            storage_idle,
            device,
            gil_share,
            gil_holders,
        } => cpu_bound_reader_summary(
            hot,
            *storage_idle,
            device.as_ref(),
            *gil_share,
            gil_holders,
            basis,
        ),
        Detail::StorageBound {
            blocked_share,
            limit: StorageLimit::FsDaemon,
            device,
            fs_daemon: Some(d),
            ..
        } => format!(
            "Storage-bound: readers wait on a FUSE file system {} {basis_text}: its daemon {} \
             (pid {}) answers their reads, not a local device ({})",
            pct(*blocked_share),
            d.comm,
            d.pid,
            storage_phrase(device.as_ref())
        ),
        Detail::StorageBound {
            blocked_share,
            limit,
            device,
            io_limit,
            ..
        } => format!(
            "Storage-bound: readers wait on block I/O {} {basis_text}; {}",
            pct(*blocked_share),
            read_limit_phrase(*limit, io_limit.as_ref(), device.as_ref())
        ),
        Detail::PageCacheServed {
            hit,
            read_mib,
            mostly_mapped,
            read_syscall_mib_per_s,
            device,
        } => page_cache_served_summary(
            *hit,
            *read_mib,
            *mostly_mapped,
            *read_syscall_mib_per_s,
            device.as_ref(),
        ),
        Detail::ComputeBound { au } => format!(
            "Compute-bound: {consumer} is the limit ({}); loaders wait for it; nothing to fix in storage",
            au_phrase(*au)
        ),
        Detail::CpuStarved {
            runnable_share,
            busy_threads,
            num_cpus,
        } => format!(
            "CPU-starved: threads runnable but waiting for a CPU {} {basis_text}; {busy_threads} busy thread(s) on {num_cpus} CPU(s)",
            pct(*runnable_share)
        ),
        Detail::LockContention { futex_share, site } => {
            lock_contention_summary(*futex_share, site.as_ref(), basis)
        }
        Detail::MemoryPressure {
            oom_killed,
            reclaim_share,
        } => memory_pressure_summary(*oom_killed, *reclaim_share),
        Detail::NetworkBound { socket_share } => format!(
            "Network-bound: workers wait on socket receives {} {basis_text} (object storage)",
            pct(*socket_share)
        ),
        Detail::WritebackBound {
            wait_share,
            throttle_share,
            limit,
            device,
        } => format!(
            "Writeback-bound: writers wait for dirty pages to be written back {} of their time ({} throttled in balance_dirty_pages); {}",
            pct(*wait_share),
            pct(*throttle_share),
            storage_limit_phrase(*limit, write_device_phrase(device.as_ref()))
        ),
        Detail::FsyncBound {
            sync_share,
            calls,
            device,
        } => format!(
            "Fsync-bound: writers wait in {calls} fsync-family call(s) {} of their time for the data to reach the device; {}",
            pct(*sync_share),
            write_device_phrase(device.as_ref())
        ),
        Detail::WriteGeneratorBound {
            on_cpu_share,
            own_work_share,
            device,
        } => format!(
            "Write-generator-bound: writers on CPU {} of their time, {} of it making the data rather than writing it; storage: {}",
            pct(*on_cpu_share),
            pct(*own_work_share),
            write_device_phrase(device.as_ref())
        ),
        Detail::CheckpointBound {
            comm,
            own_share,
            compute_share,
            data_wait_share,
            own_io_share,
            written_mib,
            device,
        } => {
            let who = checkpoint_writer_name(comm.as_deref());
            format!(
                "Checkpoint-bound: {who} spends {} of its training window on its own writes ({written_mib:.1} MiB written), computing {} and waiting for data {}; {}",
                pct(*own_share),
                pct(*compute_share),
                pct(*data_wait_share),
                checkpoint_limit_phrase(*own_io_share, device.as_ref())
            )
        }
        Detail::Stalled {
            kind,
            quiet_s,
            threads,
        } => stalled_summary(*kind, *quiet_s, threads),
    }
}

/// The summary of a CPU-bound reader: the hot frames, the GIL when its
/// waits reach [`GIL_NAMED_SHARE`], and the storage's state.
fn cpu_bound_reader_summary(
    hot: &[(String, f64)],
    storage_idle: bool,
    device: Option<&DeviceFigures>,
    gil_share: f64,
    gil_holders: &[(String, f64)],
    basis: ShareBasis,
) -> String {
    let hot_text = frames_phrase(hot);
    let headline_hot = if hot_text.is_empty() {
        String::new()
    } else {
        format!(" ({hot_text})")
    };
    let storage = if storage_idle {
        format!("storage idle: {}", storage_phrase(device))
    } else {
        format!("storage: {}", storage_phrase(device))
    };
    let gil = if gil_share >= GIL_NAMED_SHARE {
        let held = match gil_holders.first() {
            Some((function, share)) => {
                format!(
                    "; held most running {function}, {} of reader CPU",
                    pct(*share)
                )
            }
            None => String::new(),
        };
        format!(
            "; the GIL serializes the Python work (waits for it: {} {}{held})",
            pct(gil_share),
            basis_text(basis)
        )
    } else {
        String::new()
    };
    // A consumer that fetches for itself is the reader.
    let reader = match basis {
        ShareBasis::ConsumerFetch => "the consumer's own fetching",
        _ => "the reader",
    };
    format!("CPU-bound in {reader}{headline_hot}{gil}; {storage}")
}

/// What limits storage-bound readers, in words: a cgroup's read throttle
/// when one is set and named, else as [`storage_limit_phrase`] says.
fn read_limit_phrase(
    limit: StorageLimit,
    io_limit: Option<&IoLimitFeature>,
    device: Option<&DeviceFigures>,
) -> String {
    match (limit, io_limit) {
        (StorageLimit::Throttle, Some(l)) => {
            let rate = match (l.read_mib_per_s, l.read_iops) {
                (Some(mib), _) => format!("{mib:.1} MiB/s"),
                (None, Some(iops)) => format!("{iops} reads/s"),
                (None, None) => "a limit".to_string(),
            };
            format!(
                "reads held by the {} throttle of cgroup {} at {rate}; the device is not \
                 saturated ({})",
                l.kind,
                l.cgroup,
                storage_phrase(device)
            )
        }
        (limit, _) => storage_limit_phrase(limit, storage_phrase(device)),
    }
}

/// What limits the I/O, given the device's phrase (its rate and busy
/// share): the phrase alone when the rule did not fire, else the device
/// or a throttle or queue limit in front of it.
fn storage_limit_phrase(limit: StorageLimit, device: String) -> String {
    match limit {
        StorageLimit::NotFired => device,
        StorageLimit::Device => format!("the device is the limit: {device}"),
        StorageLimit::Throttle => format!(
            "the device is not saturated ({device}), so a throttle or queue limit in front of it is (cgroup io.max / blkio, network storage)"
        ),
        StorageLimit::FsDaemon => {
            format!("a FUSE daemon answers the reads, not a local device ({device})")
        }
    }
}

/// The AU figure a compute-bound summary names, in words.
fn au_phrase(au: AuSource) -> String {
    match au {
        AuSource::Bench(a) => format!("AU {a:.1}%"),
        AuSource::Kernel(s) => format!("AU seen by the kernel {}", pct(s)),
        AuSource::ConsumerAsleep(s) => format!("consumer asleep {}", pct(s)),
        AuSource::NoConsumer => "no consumer thread found".to_string(),
    }
}

/// The summary of lock contention: whose time the futex waits took, and
/// where the lock was taken when known.
fn lock_contention_summary(futex_share: f64, site: Option<&LockSite>, basis: ShareBasis) -> String {
    let at = site.map_or(String::new(), |s| format!(" (taken in {})", s.site));
    match basis {
        ShareBasis::ConsumerDataWait => format!(
            "Lock contention: {} of the consumer's data wait went to loaders blocked on a \
             lock that another loader held{at}",
            pct(futex_share)
        ),
        ShareBasis::ReaderTime | ShareBasis::ConsumerFetch => format!(
            "Lock contention: workers sleep on futexes {} {} rather than doing \
             I/O{at}",
            pct(futex_share),
            basis_text(basis)
        ),
    }
}

/// The summary of reads served from the page cache: the hit share, how the
/// bytes were read (file mappings or read syscalls) and the idle storage.
fn page_cache_served_summary(
    hit: f64,
    read_mib: f64,
    mostly_mapped: bool,
    read_syscall_mib_per_s: f64,
    device: Option<&DeviceFigures>,
) -> String {
    format!(
        "Served from the page cache: {} of {:.1} MiB read came from memory, {}; storage idle: {}",
        pct(hit),
        read_mib,
        if mostly_mapped {
            "most through file mappings".to_string()
        } else {
            format!("{read_syscall_mib_per_s:.1} MiB/s through read syscalls")
        },
        storage_phrase(device)
    )
}

/// The summary of memory pressure: the OOM killer when it struck, else the
/// share of reader time reclaim and major faults take.
fn memory_pressure_summary(oom_killed: bool, reclaim_share: f64) -> String {
    if oom_killed {
        "Memory pressure: the OOM killer ended a traced process".to_string()
    } else {
        format!(
            "Memory pressure: reclaim and major faults take {} of reader time",
            pct(reclaim_share)
        )
    }
}

/// Who a checkpoint-bound summary says writes the checkpoints: the trainer
/// by its thread name, else the consumer.
fn checkpoint_writer_name(comm: Option<&str>) -> String {
    comm.map_or_else(
        || "the consumer".to_string(),
        |c| format!("the trainer {c}"),
    )
}

/// What limits a checkpoint-bound consumer's own writes, in words: storage
/// when uninterruptible I/O waits are at least half of that time, else the
/// saving itself.
fn checkpoint_limit_phrase(own_io_share: f64, device: Option<&WriteDeviceFigures>) -> String {
    let device = write_device_phrase(device);
    if own_io_share >= 0.5 {
        format!(
            "{} of that time in uninterruptible I/O waits (fsync, writeback): storage is the limit: {device}",
            pct(own_io_share)
        )
    } else {
        format!(
            "{} of that time in I/O waits, the rest on a CPU: the saving itself (serializing, copying into the page cache) is the limit, not storage: {device}",
            pct(own_io_share)
        )
    }
}

/// The summary of a stall: how long nothing moved and the (first four)
/// threads it is stuck on, or that it did not fire.
fn stalled_summary(kind: Option<StallKind>, quiet_s: f64, threads: &[(String, u32)]) -> String {
    let names: Vec<String> = threads
        .iter()
        .take(4)
        .map(|(comm, tid)| format!("{comm} (tid {tid})"))
        .collect();
    let names = names.join(", ");
    match kind {
        Some(StallKind::Blocked) => format!(
            "Stalled: no data read and no hand-off between threads for {quiet_s:.0} s; \
             {names} blocked with nobody to wake them (a deadlock, or a wait that never ends)"
        ),
        Some(StallKind::BusyLoop) => {
            format!(
                "Stalled: no data read for {quiet_s:.0} s while {names} kept a CPU busy (a loop that reads nothing)"
            )
        }
        None => "Not stalled: data or hand-offs kept flowing".to_string(),
    }
}

/// The decision as verdict.json: headline, evidence, runners-up and notes
/// in words, the figures as they are.
pub fn verdict(d: &Decision) -> Verdict {
    let consumer = consumer_label(d);
    let primary_summary = summary_for(&d.primary, d.basis, &consumer);
    let nothing = d.notes.iter().any(|n| matches!(n, Note::NothingRecorded));
    let too_little = d.notes.iter().find_map(|n| match n {
        Note::TooLittleRecorded { thread_s, .. } => Some(*thread_s),
        _ => None,
    });
    let mut headline = if nothing {
        "Inconclusive: no thread was recorded in this session, so there is nothing to decide \
         from"
            .to_string()
    } else if let Some(s) = too_little {
        format!(
            "Inconclusive: the recording is too short to decide from ({s:.3} s of the threads a \
             verdict would rest on); record a longer run"
        )
    } else if d.inconclusive {
        format!("No rule fired; closest match: {primary_summary}")
    } else {
        primary_summary
    };
    if d.notes
        .iter()
        .any(|n| matches!(n, Note::WritesOnlyInMemory { .. }))
    {
        headline.push_str("; the written data only reached memory (page cache, no fsync)");
    }
    Verdict {
        format_version: VERDICT_FORMAT_VERSION,
        verdict: d.primary.verdict,
        headline,
        confidence: d.confidence,
        confidence_label: d.confidence_label.to_string(),
        inconclusive: d.inconclusive,
        evidence: d
            .primary
            .figures
            .iter()
            .map(|f| evidence(f, d.basis))
            .collect(),
        runners_up: d
            .runners_up
            .iter()
            .map(|r| RunnerUp {
                verdict: r.verdict,
                fired: r.fired,
                score: round4(r.score),
                summary: summary_for(r, d.basis, &consumer),
            })
            .collect(),
        notes: d.notes.iter().map(|n| note_text(n, d)).collect(),
        actions: Vec::new(),
        threshold_overrides: Vec::new(),
        rules: d.rules.as_str().to_string(),
        kernel_au_percentage: d.kernel_au_percentage,
        data_wait_share: d.data_wait_share,
        window: d.window.clone(),
        phases: d.phases.clone(),
        consumers: d.consumers.clone(),
        roles: d.roles.clone(),
        critical_path: d.critical_path.clone(),
        stall: d.stall.clone(),
    }
}
