//! The parts of a session that `session_writer::build_session` gathers
//! from the recorder besides the stacks: the threads seen and their
//! figures, devices and page cache, the time series, and what
//! `session.json`'s info says of the recording (features, notes,
//! processes).
use std::collections::{BTreeMap, BTreeSet};

use super::{
    RecordOptions, aggregate, dwarf_samples::DwarfSamples, fold, kernel::Kernel,
    recorder::Recorder, select, session_writer::comm_or_kernel,
};
use crate::probes::MapSnapshot;
use storprof_common::{WakeAcc, WakeKey};
use storprof_session::model::{self, IoStats, PageCacheStats, ThreadStats, TimeSeries};

/// Every process seen, from the maps too (short-lived ones included),
/// added to the tracked ones; the threads' names by tid and their figures.
pub(super) fn threads_seen(
    recorder: &mut Recorder,
    snapshot: &MapSnapshot,
    end_mono: u64,
) -> (BTreeMap<u32, String>, Vec<ThreadStats>) {
    let running = Recorder::running_ns(snapshot, end_mono);
    recorder
        .tracked
        .extend(snapshot.threads.iter().map(|t| t.tgid));
    recorder
        .tracked
        .extend(snapshot.syscalls.iter().map(|(k, _)| k.tgid));
    recorder
        .tracked
        .extend(snapshot.samples.iter().map(|(k, _)| k.tgid));
    let comms: BTreeMap<u32, String> = snapshot
        .threads
        .iter()
        .map(|t| (t.tid, aggregate::comm_string(&t.comm)))
        .collect();
    let threads = aggregate::thread_stats(
        &snapshot.threads,
        &snapshot.syscalls,
        &snapshot.samples,
        &running,
        &|tgid, tid| comm_or_kernel(&comms, &*recorder.probes, tgid, tid),
    );
    (comms, threads)
}

/// Every kernel address of the recording's stacks (samples, off-CPU
/// stacks, wakers'), once each.
pub(super) fn kernel_ips(
    snapshot: &MapSnapshot,
    dwarf_offcpu: &DwarfSamples,
    wake_edges: &[(WakeKey, WakeAcc)],
    probes: &dyn Kernel,
) -> Vec<u64> {
    let ips: BTreeSet<u64> = snapshot
        .samples
        .iter()
        .chain(&snapshot.offcpu)
        .map(|(key, _)| key)
        .chain(dwarf_offcpu.counts.keys())
        .flat_map(|key| probes.stack(key.kernel_stack))
        .chain(
            wake_edges
                .iter()
                .flat_map(|(_, acc)| probes.stack(acc.waker_kernel_stack)),
        )
        .collect();
    ips.into_iter().collect()
}

/// The system's page size (4096 when sysconf cannot say).
pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

/// The devices' figures over the tracked processes, with what each sits
/// on, and the page cache's misses and written pages.
pub(super) fn io_stats(
    recorder: &Recorder,
    threads: &[ThreadStats],
    duration_ns: u64,
    page_size: u64,
) -> IoStats {
    let mut devices = recorder
        .blocks
        .device_stats(&recorder.tracked, duration_ns, &|d| {
            recorder.probes.device_name(d)
        });
    for device in &mut devices {
        if let Some(dev) = aggregate::dev_from_major_minor(&device.dev) {
            device.sits_on = recorder.probes.lower_devices(dev);
        }
    }
    IoStats {
        devices,
        page_cache: PageCacheStats {
            misses_pages: threads.iter().map(|t| t.page_cache_misses).sum(),
            write_pages: threads.iter().map(|t| t.page_cache_write_pages).sum(),
            page_size,
        },
    }
}

/// The per-bucket series: threads (named by `comms`), devices, vmstat
/// and the host's CPU.
pub(super) fn time_series(
    recorder: &Recorder,
    comms: &BTreeMap<u32, String>,
    start_unix: u64,
    page_size: u64,
) -> TimeSeries {
    let buckets = recorder.series.buckets() as usize;
    TimeSeries {
        bucket_ns: aggregate::BUCKET_NS,
        start_unix_ns: start_unix,
        buckets: recorder.series.buckets(),
        threads: recorder
            .series
            .series(&|tid| comms.get(&tid).cloned().unwrap_or_default()),
        devices: recorder
            .blocks
            .device_series(buckets, &|d| recorder.probes.device_name(d)),
        vmstat: recorder.vmstat.series(page_size),
        host_cpu: recorder.host_cpu.series(),
    }
}

/// The files the named frames of the folded stacks came from (`known`:
/// the symbolizer's frame to module map).
pub(super) fn frame_modules(
    folded: &fold::Folded,
    known: &std::collections::HashMap<String, String>,
) -> model::FrameModules {
    model::FrameModules {
        modules: [&folded.oncpu, &folded.offcpu]
            .into_iter()
            .flat_map(|text| text.lines())
            .filter_map(|line| line.rsplit_once(' ').map(|(stack, _)| stack))
            .flat_map(|stack| stack.split(';').skip(1))
            .filter_map(|frame| known.get(frame).map(|m| (frame.to_string(), m.clone())))
            .collect(),
    }
}

/// `session.json` `features`: what this recording's kernel and options
/// give the analysis.
pub(super) fn session_features(
    btf: bool,
    options: &RecordOptions,
    tracefs_line: &str,
) -> BTreeMap<String, String> {
    let mut features = BTreeMap::new();
    features.insert("tracefs".to_string(), tracefs_line.to_string());
    features.insert(
        "btf".to_string(),
        if btf { "present" } else { "missing" }.to_string(),
    );
    features.insert(
        "syscall_timing".to_string(),
        options.syscall_timing.name().to_string(),
    );
    // Wake edges tell a lock's own wait (glibc, PI) from a shared futex
    // word (`WakeEdge::lock_wait`), and interrupt wakers are the innermost
    // handler's.
    features.insert(
        model::FEATURE_WAKE_EDGES.to_string(),
        model::WAKE_EDGES_VERSION.to_string(),
    );
    features
}

/// The session's notes: the Python resolver's (`notes`), the off-CPU
/// Python stacks', what was folded or left unlisted to bound memory
/// (`(folded threads, unlisted unwind decisions)`), the process
/// selection and the probes that did not attach.
pub(super) fn session_notes(
    mut notes: Vec<String>,
    folded: &fold::Folded,
    (folded_threads, unlisted_decisions): (u64, u64),
    selector: Option<&select::NetnsSelector>,
    probes: &dyn Kernel,
) -> Vec<String> {
    notes.extend(folded.offcpu_python_note.clone());
    if folded_threads > 0 {
        notes.push(format!(
            "{folded_threads} threads that exited after the first {} are folded into one \
             entry per thread name (their figures, syscalls, stacks and wake-ups summed), so \
             storprof's memory stays bounded",
            super::retired::RETIRED_THREADS_KEPT
        ));
    }
    if unlisted_decisions > 0 {
        notes.push(format!(
            "{unlisted_decisions} processes forked after the first {} unwind decisions took \
             their parent's mode and are not listed one by one",
            super::unwind_choice::LISTED_DECISIONS
        ));
    }
    if let Some(selector) = selector {
        notes.push(format!(
            "processes selected by {}: {} seen",
            selector.describe(),
            selector.selected()
        ));
    }
    for status in probes.status() {
        if !status.attached {
            notes.push(format!("probe {} disabled: {}", status.name, status.note));
        }
    }
    notes
}

/// Each tracked process's parent and name: from what was seen while it
/// ran, else from /proc while it still runs (`live`), else its main
/// thread's name.
pub(super) fn process_infos(
    tracked: &BTreeSet<u32>,
    live: &BTreeSet<u32>,
    parents: &BTreeMap<u32, u32>,
    probes: &dyn Kernel,
    threads: &[ThreadStats],
) -> Vec<model::ProcessInfo> {
    let main_thread_comms: BTreeMap<u32, &str> = threads
        .iter()
        .filter(|t| t.tid == t.pid)
        .map(|t| (t.pid, t.comm.as_str()))
        .collect();
    tracked
        .iter()
        .map(|&pid| {
            // /proc speaks for a process only while it is the traced
            // one: a pid seen to exit may belong to another by now.
            let running = live.contains(&pid);
            model::ProcessInfo {
                pid,
                ppid: parents
                    .get(&pid)
                    .copied()
                    .or_else(|| running.then(|| probes.parent_of(pid)).flatten())
                    .unwrap_or(0),
                comm: running
                    .then(|| probes.thread_comm(pid, pid))
                    .flatten()
                    .or_else(|| main_thread_comms.get(&pid).map(|c| c.to_string()))
                    .unwrap_or_default(),
            }
        })
        .collect()
}
