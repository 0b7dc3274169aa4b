//! The recorder without root: the drain loop and the session writer driven
//! by a [`ReplayKernel`].
use std::{collections::BTreeMap, path::Path};

use storprof_common::{
    BlockEvent, COMM_LEN, ProcEvent, StackKey, ThreadAcc, WakeAcc, WakeKey, offcpu_state,
    proc_event, waker_kind,
};

use super::{
    RecordOptions, UnwindMode,
    recorder::Recorder,
    replay::{ReplayKernel, ReplayStep, fork_event},
    retired::{RETIRED_THREADS_KEPT, Retired},
    run_loop::{CommandEnd, EndReason, Ending, StopCause, run_loop},
    session_writer::write_session,
};
use crate::probes::{MapSnapshot, family};
use storprof_session::model::{self, IoStats, SessionInfo, ThreadStats};

/// Pids above this machine's `pid_max` never name a live process, so
/// nothing of the test's own machine leaks into the replayed session.
fn fake_pid(n: u32) -> u32 {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    pid_max + n
}

fn comm(name: &str) -> [u8; COMM_LEN] {
    let mut out = [0u8; COMM_LEN];
    out[..name.len()].copy_from_slice(name.as_bytes());
    out
}

fn thread(tgid: u32, tid: u32, name: &str, on_cpu_ms: u64, sleeping_ms: u64) -> ThreadAcc {
    ThreadAcc {
        tgid,
        tid,
        on_cpu_ns: on_cpu_ms * 1_000_000,
        off_cpu_ns: [0, sleeping_ms * 1_000_000, 0, 0],
        page_cache_pages: 0,
        page_cache_write_pages: 0,
        comm: comm(name),
    }
}

/// A disk no machine has, so its name stays "MAJ:MIN".
const DEV: u32 = (250 << 20) | 777;

fn block_read(tgid: u32, at_ms: u64, bytes: u32) -> BlockEvent {
    let mut rwbs = [0u8; 8];
    rwbs[0] = b'R';
    BlockEvent {
        dev: DEV,
        bytes,
        issue_ns: at_ms * 1_000_000,
        complete_ns: at_ms * 1_000_000 + 500_000,
        tgid,
        error: 0,
        rwbs,
        created_ns: at_ms * 1_000_000 - 20_000,
    }
}

/// A trainer (`main`) that forks a loader (`worker`): the loader reads and
/// burns CPU, the trainer waits for it on a futex.
fn replay(main: u32, worker: u32) -> ReplayKernel {
    let fork = fork_event(main, worker, 1);
    let threads = |scale: u64| {
        vec![
            thread(main, main, "trainer", 10 * scale, 90 * scale),
            ThreadAcc {
                // Pages it read in, and pages its buffered writes added.
                page_cache_pages: 3 * scale,
                page_cache_write_pages: 2 * scale,
                ..thread(worker, worker, "worker", 80 * scale, 5 * scale)
            },
        ]
    };
    let samples = vec![
        (
            StackKey {
                tgid: worker,
                tid: worker,
                user_stack: 1,
                kernel_stack: -1,
            },
            7,
        ),
        (
            StackKey {
                tgid: main,
                tid: main,
                user_stack: 2,
                kernel_stack: -1,
            },
            1,
        ),
    ];
    let edge = (
        WakeKey {
            waker_tgid: worker,
            waker_tid: worker,
            wakee_tgid: main,
            wakee_tid: main,
            wakee_state: offcpu_state::SLEEPING as u8,
            waker_kind: waker_kind::TASK,
            syscall: 202,
            futex_shared: 0,
            _pad: [0; 3],
        },
        WakeAcc {
            blocked_ns: 90_000_000,
            count: 30,
            first_ns: 1_000_000,
            last_ns: 1_900_000_000,
            first_blocked_ns: 3_000_000,
            waker_user_stack: -1,
            waker_kernel_stack: -1,
            waker_comm: comm("worker"),
        },
    );
    let step = |scale: u64, events: Vec<ProcEvent>, blocks: Vec<BlockEvent>| ReplayStep {
        proc_events: events,
        block_events: blocks,
        maps: MapSnapshot {
            threads: threads(scale),
            samples: samples.clone(),
            ..MapSnapshot::default()
        },
        wake_edges: vec![edge],
        vmstat: Some(super::aggregate::VmstatCounters {
            nr_dirty: 10 * scale,
            nr_writeback: scale,
            nr_dirtied: 100 * scale,
            nr_written: 50 * scale,
        }),
        host_cpu: Some(super::aggregate::HostCpuTicks {
            busy: 100 * scale,
            steal: scale,
            idle: 50 * scale,
        }),
        ..ReplayStep::default()
    };
    let mut kernel = ReplayKernel::new(
        &[family::SCHED, family::BLOCK, family::WAKEUPS],
        [
            step(1, vec![fork], vec![block_read(worker, 10, 1 << 20)]),
            step(
                2,
                Vec::new(),
                vec![
                    block_read(worker, 20, 1 << 20),
                    block_read(worker, 30, 1 << 19),
                ],
            ),
            step(3, Vec::new(), Vec::new()),
        ],
    );
    kernel.stacks = BTreeMap::from([(1, vec![0x1010, 0x1000]), (2, vec![0x2000])]);
    kernel.lost = BTreeMap::from([("stack_map_full".to_string(), 2)]);
    // The disk is a loop device whose image lives on another one.
    kernel.lower_devices = BTreeMap::from([(
        DEV,
        vec![model::LowerDevice {
            name: "vdz".to_string(),
            dev: "250:778".to_string(),
            via: model::Stacking::LoopImage,
        }],
    )]);
    kernel
}

/// Three drains and ticks of `recorder` (tracing `main`) over its replay,
/// then the session written to a new directory: 2 s of recording.
fn three_ticks_written(
    recorder: &mut Recorder,
    main: u32,
    options: &RecordOptions,
    ending: &Ending,
) -> tempfile::TempDir {
    recorder.tracked.insert(main);
    recorder.start_series();
    for _ in 0..3 {
        recorder.drain();
        recorder.tick_series().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    write_session(
        recorder,
        options,
        dir.path(),
        ending,
        (1_000_000_000, 3_000_000_000, 2_000_000_000),
        "tracefs at /sys/kernel/tracing",
    )
    .unwrap();
    dir
}

fn read<T: serde::de::DeserializeOwned>(dir: &Path, name: &str) -> T {
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

// The loop itself reaps the commands these tests spawn (waitpid).
#[test]
#[allow(clippy::zombie_processes)]
fn the_loop_drains_every_step_and_ends_when_the_command_exits() {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let mut recorder = Recorder::new(Box::new(replay(main, worker)), UnwindMode::Fp, None, 0);
    recorder.tracked.insert(main);
    // The command: a real child that exits by itself after a few turns.
    let child = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let ending = run_loop(
        &mut recorder,
        &RecordOptions::default(),
        Some(child.id() as i32),
    )
    .unwrap();
    assert_eq!(
        ending,
        Ending {
            reason: EndReason::Exited,
            exit_code: Some(0),
            exit_signal: None,
            early: None,
            ended_by: Some(CommandEnd::Exited),
            grace: None,
        }
    );
    // The fork made the loader a traced process with its parent known; all
    // three steps' completions were collected.
    assert!(recorder.tracked.contains(&worker));
    assert_eq!(recorder.parents.get(&worker), Some(&main));
    let devices = recorder
        .blocks
        .device_stats(&recorder.tracked, 1, &|_| String::new());
    let requests: u64 = devices
        .iter()
        .map(|d| d.read_requests + d.write_requests)
        .sum();
    let bytes: u64 = devices.iter().map(|d| d.read_bytes + d.write_bytes).sum();
    assert_eq!((requests, bytes), (3, (1 << 20) + (1 << 20) + (1 << 19)));
}

/// With the live view on, checkpoints wait for a live update and reuse its
/// parts: they still get written, a readable session marked "checkpoint"
/// while the command runs.
#[test]
#[allow(clippy::zombie_processes)]
fn checkpoints_are_written_from_live_updates() {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let mut recorder = Recorder::new(Box::new(replay(main, worker)), UnwindMode::Fp, None, 0);
    recorder.tracked.insert(main);
    let dir = tempfile::tempdir().unwrap();
    let mut options = RecordOptions {
        checkpoint: Some(std::time::Duration::from_millis(200)),
        ..RecordOptions::default()
    };
    options.live.view = super::live::LiveView::Off;
    options.live.until_verdict = Some(std::time::Duration::from_secs(3600));
    options.live.interval = std::time::Duration::from_millis(300);
    let child = std::process::Command::new("sleep")
        .arg("1.2")
        .spawn()
        .unwrap();
    let ctx = super::run_loop::LiveContext {
        dir: dir.path(),
        tracefs_line: "tracefs at /sys/kernel/tracing",
        start_unix: 1_000_000_000,
    };
    let (ending, _) =
        super::run_loop::run_loop_live(&mut recorder, &options, Some(child.id() as i32), Some(ctx))
            .unwrap();
    assert_eq!(ending.reason, EndReason::Exited);
    let info: SessionInfo = read(dir.path(), model::files::SESSION);
    assert_eq!(info.end_reason, super::run_loop::CHECKPOINT_REASON);
    // The files beside it were written too.
    let threads: Vec<ThreadStats> = read(dir.path(), model::files::THREADS);
    assert!(threads.iter().any(|t| t.pid == main), "{threads:?}");
}

#[test]
#[allow(clippy::zombie_processes)]
fn the_duration_ends_the_loop_with_sigterm_to_the_command() {
    let mut recorder = Recorder::new(
        Box::new(replay(fake_pid(1), fake_pid(2))),
        UnwindMode::Fp,
        None,
        0,
    );
    let child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let options = RecordOptions {
        duration: Some(std::time::Duration::from_millis(300)),
        ..RecordOptions::default()
    };
    let ending = run_loop(&mut recorder, &options, Some(child.id() as i32)).unwrap();
    assert_eq!(ending.reason, EndReason::Duration);
    assert_eq!(ending.exit_signal, Some(libc::SIGTERM));
    assert_eq!(
        ending.ended_by,
        Some(CommandEnd::Sigterm(StopCause::Duration))
    );
    assert_eq!(ending.grace, Some(options.grace));
}

#[test]
#[allow(clippy::zombie_processes)]
fn a_command_ignoring_sigterm_at_the_duration_is_killed_after_the_grace_period() {
    let mut recorder = Recorder::new(
        Box::new(replay(fake_pid(1), fake_pid(2))),
        UnwindMode::Fp,
        None,
        0,
    );
    // `exec`: the sleep inherits the ignored SIGTERM and is the child itself.
    let child = std::process::Command::new("sh")
        .args(["-c", "trap '' TERM; exec sleep 30"])
        .spawn()
        .unwrap();
    let options = RecordOptions {
        duration: Some(std::time::Duration::from_millis(300)),
        grace: std::time::Duration::from_millis(400),
        ..RecordOptions::default()
    };
    let started = std::time::Instant::now();
    let ending = run_loop(&mut recorder, &options, Some(child.id() as i32)).unwrap();
    let took = started.elapsed();
    assert_eq!(ending.reason, EndReason::Duration);
    assert_eq!(ending.exit_signal, Some(libc::SIGKILL));
    assert_eq!(
        ending.ended_by,
        Some(CommandEnd::SigkillAfterGrace(StopCause::Duration))
    );
    assert_eq!(ending.grace, Some(options.grace));
    // The duration plus the grace period, not the command's 30 s.
    assert!(
        took >= std::time::Duration::from_millis(700) && took < std::time::Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn the_session_writer_turns_a_replay_into_a_session_directory() {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let mut recorder = Recorder::new(Box::new(replay(main, worker)), UnwindMode::Fp, None, 0);
    let options = RecordOptions {
        command: vec!["python3".to_string(), "train.py".to_string()],
        unwind: UnwindMode::Fp,
        ..RecordOptions::default()
    };
    let ending = Ending {
        reason: EndReason::Interrupted,
        exit_code: None,
        exit_signal: Some(libc::SIGINT),
        early: None,
        ended_by: Some(CommandEnd::Signaled),
        grace: None,
    };
    let dir = three_ticks_written(&mut recorder, main, &options, &ending);

    let info: SessionInfo = read(dir.path(), model::files::SESSION);
    assert_eq!(info.format_version, model::SESSION_FORMAT_VERSION);
    assert_eq!(info.end_reason, "interrupted");
    assert_eq!(info.exit_signal, Some(libc::SIGINT));
    assert_eq!(info.ended_by.as_deref(), Some("signal"));
    assert_eq!(info.grace_s, None);
    assert_eq!(info.command, options.command);
    assert_eq!(info.tracked_pids, vec![main, worker]);
    assert_eq!(info.duration_s, 2.0);
    assert_eq!(info.lost_events.get("stack_map_full"), Some(&2));
    let worker_info = info.processes.iter().find(|p| p.pid == worker).unwrap();
    assert_eq!(worker_info.ppid, main);
    assert_eq!(worker_info.comm, "worker");
    assert_eq!(info.probes.len(), 3);

    // The last snapshot's per-thread figures.
    let threads: Vec<ThreadStats> = read(dir.path(), model::files::THREADS);
    let loader = threads.iter().find(|t| t.tid == worker).unwrap();
    assert_eq!(loader.comm, "worker");
    assert_eq!(loader.on_cpu_ns, 240_000_000);
    assert_eq!(loader.samples_user, 7);

    // Every completion, on its device, owned by the loader.
    let io: IoStats = read(dir.path(), model::files::IO);
    assert_eq!(io.devices.len(), 1);
    let dev = &io.devices[0];
    assert_eq!(dev.name, "250:777");
    assert_eq!((dev.read_bytes, dev.read_requests), (5 << 19, 3));
    assert_eq!(dev.traced_read_bytes, 5 << 19);
    assert_eq!(dev.by_pid.get(&worker), Some(&(5 << 19)));
    // What it sits on, asked of the kernel seam at the end.
    assert_eq!(dev.sits_on.len(), 1);
    assert_eq!(
        (dev.sits_on[0].name.as_str(), dev.sits_on[0].via),
        ("vdz", model::Stacking::LoopImage)
    );
    // Read misses and buffered writes' pages, apart.
    assert_eq!(io.page_cache.misses_pages, 9);
    assert_eq!(io.page_cache.write_pages, 6);

    // /proc/vmstat at each tick: gauges at the bucket's end, counters'
    // increases (none in the first bucket: its baseline, taken before the
    // first step, had no reading).
    let ts: model::TimeSeries = read(dir.path(), model::files::TIMESERIES);
    let page = io.page_cache.page_size;
    let vm = ts.vmstat.unwrap();
    assert_eq!(vm.dirty_bytes, vec![10 * page, 20 * page, 30 * page]);
    assert_eq!(vm.writeback_bytes, vec![page, 2 * page, 3 * page]);
    assert_eq!(vm.dirtied_bytes, vec![0, 100 * page, 100 * page]);
    assert_eq!(vm.written_bytes, vec![0, 50 * page, 50 * page]);
    // /proc/stat alike: each bucket's increase, in ns.
    let tick = 1_000_000_000 / super::procfs::clock_ticks_per_s();
    let host = ts.host_cpu.unwrap();
    assert_eq!(host.busy_ns, vec![0, 100 * tick, 100 * tick]);
    assert_eq!(host.steal_ns, vec![0, tick, tick]);
    assert_eq!(host.idle_ns, vec![0, 50 * tick, 50 * tick]);

    // Folded stacks per comm and per thread: the loader's 7 samples in one
    // stack of two frames, the trainer's one.
    let oncpu = std::fs::read_to_string(dir.path().join(model::files::ONCPU_FOLDED)).unwrap();
    let per_comm: Vec<(&str, &str)> = oncpu.lines().filter_map(|l| l.rsplit_once(' ')).collect();
    assert_eq!(per_comm.len(), 2, "{oncpu}");
    let (stack, count) = per_comm
        .iter()
        .find(|(s, _)| s.starts_with("worker;"))
        .unwrap();
    assert_eq!((stack.split(';').count(), *count), (3, "7"), "{oncpu}");
    let threads_folded =
        std::fs::read_to_string(dir.path().join(model::files::ONCPU_THREADS_FOLDED)).unwrap();
    assert!(
        threads_folded.contains(&format!("worker;[{worker}/{worker}];")),
        "{threads_folded}"
    );

    // The wake-up edge, between traced processes, with its time series.
    let waits: model::WaitGraph = read(dir.path(), model::files::WAITS);
    assert_eq!(waits.edges.len(), 1);
    let edge = &waits.edges[0];
    assert_eq!((edge.waker_pid, edge.wakee_pid), (worker, main));
    assert!(edge.waker_traced);
    assert_eq!(edge.syscall.as_deref(), Some("futex"));
    assert_eq!(edge.blocked_ns, 90_000_000);
}

#[test]
fn offcpu_quantum_defaults_to_one_sampling_period() {
    let options = RecordOptions::default();
    assert_eq!(options.offcpu_quantum_us(), 10_101);
    let options = RecordOptions {
        freq_hz: 1000,
        ..RecordOptions::default()
    };
    assert_eq!(options.offcpu_quantum_us(), 1000);
    let options = RecordOptions {
        offcpu_quantum_us: Some(0),
        ..RecordOptions::default()
    };
    assert_eq!(options.offcpu_quantum_us(), 0);
}

/// The loader of [`replay`] exits after the second step: the recorder
/// retires it (its entries leave the kernel's maps, as the third step
/// shows), and the session still has all of it: figures, syscalls,
/// samples, the wake-up edge and its time series up to its exit.
/// The recording of [`an_exited_thread_is_retired_from_the_maps_and_kept_in_the_session`],
/// with `kept` retired threads kept one by one before later ones fold.
fn recording_with_a_retired_loader(kept: usize) -> (Recorder, tempfile::TempDir, u32, u32) {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let mut kernel = replay(main, worker);
    let read_call = |tid: u32, count: u64| {
        (
            storprof_common::SyscallKey {
                tgid: tid,
                tid,
                nr: 0,
                _pad: 0,
            },
            storprof_common::SyscallAcc {
                count,
                bytes: count << 20,
                ..storprof_common::SyscallAcc::ZERO
            },
        )
    };
    kernel.steps[0].maps.syscalls = vec![read_call(worker, 2)];
    kernel.steps[1].maps.syscalls = vec![read_call(worker, 5)];
    kernel.steps[1].proc_events.push(ProcEvent {
        kind: proc_event::EXIT,
        tgid: worker,
        tid: worker,
        group_dead: 1,
        ts: 2,
    });
    // After the retirement the kernel holds the trainer alone.
    let last = &mut kernel.steps[2];
    last.maps.threads.retain(|t| t.tid == main);
    last.maps.samples.retain(|(k, _)| k.tid == main);
    last.wake_edges.clear();
    let mut recorder = Recorder::new(Box::new(kernel), UnwindMode::Fp, None, 0);
    recorder.retire_after = std::time::Duration::ZERO;
    recorder.retired = Retired::keeping(kept);
    let options = RecordOptions {
        unwind: UnwindMode::Fp,
        ..RecordOptions::default()
    };
    let ending = Ending {
        reason: EndReason::Exited,
        exit_code: Some(0),
        exit_signal: None,
        early: None,
        ended_by: Some(CommandEnd::Exited),
        grace: None,
    };
    let dir = three_ticks_written(&mut recorder, main, &options, &ending);
    (recorder, dir, main, worker)
}

#[test]
fn an_exited_thread_is_retired_from_the_maps_and_kept_in_the_session() {
    let (recorder, dir, main, worker) = recording_with_a_retired_loader(RETIRED_THREADS_KEPT);
    assert!(recorder.exited.is_empty());
    assert_eq!(recorder.retired.threads.len(), 1);
    assert_eq!(recorder.retired.threads[0].tid, worker);
    let live = recorder.probes.snapshot(&[]).unwrap();
    assert!(live.threads.iter().all(|t| t.tid != worker));
    let threads: Vec<ThreadStats> = read(dir.path(), model::files::THREADS);
    let loader = threads.iter().find(|t| t.tid == worker).unwrap();
    assert_eq!(loader.on_cpu_ns, 160_000_000);
    assert_eq!(loader.samples_user, 7);
    assert_eq!(loader.read_bytes, 5 << 20);
    assert_eq!(loader.syscalls.len(), 1);
    assert_eq!(loader.syscalls[0].count, 5);
    let trainer = threads.iter().find(|t| t.tid == main).unwrap();
    assert_eq!(trainer.on_cpu_ns, 30_000_000);

    let waits: model::WaitGraph = read(dir.path(), model::files::WAITS);
    assert_eq!(waits.edges.len(), 1);
    assert_eq!(waits.edges[0].blocked_ns, 90_000_000);

    // The loader's series stops at its exit; the trainer's runs on.
    let ts: model::TimeSeries = read(dir.path(), model::files::TIMESERIES);
    assert_eq!(ts.buckets, 3);
    let series = |tid| ts.threads.iter().find(|s| s.tid == tid).unwrap();
    assert_eq!(series(worker).on_cpu_ns, vec![80_000_000, 80_000_000]);
    assert_eq!(series(worker).read_bytes, vec![2 << 20, 3 << 20]);
    assert_eq!(series(main).on_cpu_ns, vec![10_000_000; 3]);
    let oncpu = std::fs::read_to_string(dir.path().join(model::files::ONCPU_FOLDED)).unwrap();
    assert!(
        oncpu
            .lines()
            .any(|l| l.starts_with("worker;") && l.ends_with(" 7")),
        "{oncpu}"
    );
}

/// Past the threads kept one by one, a retired loader's figures, time
/// series and wake-up edge all move to its name's group, and agree there.
#[test]
fn a_folded_thread_keeps_its_figures_series_and_edge_series_under_its_group() {
    let (recorder, dir, main, worker) = recording_with_a_retired_loader(0);
    assert_eq!(recorder.retired.folded, 1);
    let threads: Vec<ThreadStats> = read(dir.path(), model::files::THREADS);
    assert!(threads.iter().all(|t| t.tid != worker));
    let group = threads.iter().find(|t| t.comm == "worker").unwrap();
    assert_ne!(group.tid, worker);
    assert_eq!((group.pid, group.on_cpu_ns), (worker, 160_000_000));
    assert_eq!(group.read_bytes, 5 << 20);

    let ts: model::TimeSeries = read(dir.path(), model::files::TIMESERIES);
    assert!(ts.threads.iter().all(|s| s.tid != worker));
    let series = |tid| ts.threads.iter().find(|s| s.tid == tid).unwrap();
    assert_eq!(series(group.tid).on_cpu_ns, vec![80_000_000, 80_000_000]);
    assert_eq!(series(group.tid).read_bytes, vec![2 << 20, 3 << 20]);
    assert_eq!(series(group.tid).comm, "worker");
    assert_eq!(series(main).on_cpu_ns, vec![10_000_000; 3]);

    // The edge and its per-bucket series moved to the group's key together.
    let waits: model::WaitGraph = read(dir.path(), model::files::WAITS);
    assert_eq!(waits.edges.len(), 1);
    let edge = &waits.edges[0];
    assert!(
        edge.waker_tid == group.tid || edge.wakee_tid == group.tid,
        "{edge:?}"
    );
    assert_eq!(edge.blocked_ns, 90_000_000);
    let series_ns: u64 = edge.series.iter().map(|&(_, ns, _)| ns).sum();
    assert_eq!(series_ns, edge.blocked_ns);
    assert!(
        recorder
            .wake_series
            .keys()
            .all(|k| k.waker_tid != worker && k.wakee_tid != worker)
    );
}

#[test]
fn a_slice_in_progress_counts_up_to_when_the_slots_were_read() {
    use storprof_common::OffCpuStart;
    let running = |on: u64, off_ts: u64| {
        (
            on,
            OffCpuStart {
                ts: off_ts,
                ..OffCpuStart::default()
            },
        )
    };
    let snapshot = MapSnapshot {
        oncpu_start: BTreeMap::from([
            // On a CPU since 1,000 when the slots were read at 5,000.
            (11, running(1_000, 0)),
            // Switched in after the read: its slice waits for its switch-out.
            (12, running(6_000, 0)),
            // Asleep since 3,000.
            (13, running(1_000, 3_000)),
            // No consistent switch-in time.
            (14, running(0, 0)),
        ]),
        slots_read_ns: 5_000,
        ..MapSnapshot::default()
    };
    // The series is built a while after the read (8,000): thread 11 may
    // have gone to sleep since, so only what the read saw counts.
    assert_eq!(
        Recorder::running_ns(&snapshot, 8_000),
        BTreeMap::from([(11, 4_000)])
    );
    // Without a read time (older replays), up to `now`.
    let unknown = MapSnapshot {
        slots_read_ns: 0,
        ..snapshot
    };
    assert_eq!(
        Recorder::running_ns(&unknown, 8_000),
        BTreeMap::from([(11, 7_000), (12, 2_000)])
    );
}

/// A chain of forks inherits the decision of the process that made it,
/// naming that process once, however deep the chain.
#[test]
fn forked_children_inherit_the_unwind_decision_without_nesting_its_reason() {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let mut recorder = Recorder::new(Box::new(replay(main, worker)), UnwindMode::Auto, None, 0);
    recorder.unwind_decisions.insert(
        main,
        model::UnwindDecision {
            pid: main,
            exe: "/usr/bin/python3".to_string(),
            mode: "dwarf".to_string(),
            reason: "runs CPython 3.12".to_string(),
        },
    );
    recorder.inherit_unwind(worker, main);
    recorder.inherit_unwind(worker + 1, worker);
    recorder.inherit_unwind(worker + 2, worker + 1);
    let reason = |pid: u32| recorder.unwind_decisions[&pid].reason.clone();
    let expected = format!("forked from {main}: runs CPython 3.12");
    assert_eq!(reason(worker), expected);
    assert_eq!(reason(worker + 2), expected);
    assert!(recorder.is_dwarf_process(worker + 2));
    assert_eq!(recorder.unwind_decisions[&(worker + 2)].pid, worker + 2);

    // Past the listed decisions, a child (and its child) inherits through
    // the process tree without an entry of its own.
    for pid in 0..super::unwind_choice::LISTED_DECISIONS as u32 {
        let filler = model::UnwindDecision {
            pid: 1_000_000 + pid,
            ..recorder.unwind_decisions[&main].clone()
        };
        recorder.unwind_decisions.insert(filler.pid, filler);
    }
    let (child, grandchild) = (worker + 3, worker + 4);
    recorder.parents.insert(child, worker + 2);
    recorder.parents.insert(grandchild, child);
    recorder.inherit_unwind(child, worker + 2);
    recorder.inherit_unwind(grandchild, child);
    assert!(!recorder.unwind_decisions.contains_key(&child));
    assert!(!recorder.unwind_decisions.contains_key(&grandchild));
    assert_eq!(recorder.unlisted_inherited_decisions, 2);
    assert!(recorder.is_dwarf_process(grandchild));
    assert!(
        !recorder.is_dwarf_process(worker + 99),
        "no ancestor, no decision"
    );
}

#[test]
fn a_process_leaves_the_live_set_at_its_exit_and_stays_listed() {
    let (main, worker) = (fake_pid(1), fake_pid(2));
    let event = |kind, tgid, tid, group_dead| ProcEvent {
        kind,
        tgid,
        tid,
        group_dead,
        ts: 1,
    };
    let step = ReplayStep::with_proc_events;
    let kernel = ReplayKernel::new(
        &[family::SCHED],
        [
            step(vec![event(proc_event::FORK, main, worker, 0)]),
            // A thread of the worker exits first; the process goes with
            // its last thread.
            step(vec![event(proc_event::EXIT, worker, worker + 1, 0)]),
            step(vec![event(proc_event::EXIT, worker, worker, 1)]),
        ],
    );
    let mut recorder = Recorder::new(Box::new(kernel), UnwindMode::Fp, None, 0);
    recorder.track(main);
    recorder.drain();
    assert!(recorder.live.contains(&worker));
    recorder.drain();
    assert!(
        recorder.live.contains(&worker),
        "a thread's exit is not the process's"
    );
    recorder.drain();
    assert!(!recorder.live.contains(&worker));
    assert!(recorder.live.contains(&main));
    assert!(recorder.tracked.contains(&worker) && recorder.tracked.contains(&main));
}

#[test]
fn checkpoints_come_less_often_once_they_cost_more_than_the_budget() {
    // Cheap checkpoints keep their interval.
    assert_eq!(super::next_checkpoint_s(60.0, 30.0, 0.1), 90.0);
    // Having cost 3 s in all, the next waits until 1% of the time since
    // the start has paid for them: 300 s, not 90 + 30.
    assert_eq!(super::next_checkpoint_s(90.0, 30.0, 3.0), 300.0);
    // A negative reading (clock skew) costs nothing.
    assert_eq!(super::next_checkpoint_s(10.0, 30.0, -1.0), 40.0);
}
