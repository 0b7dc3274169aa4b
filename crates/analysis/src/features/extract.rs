//! `Features::build`: one session and its wait analysis in, every figure
//! out, in one pass: the reader figures from the basis chosen up front
//! ([`ReaderSource`]), the rest from the session.
use super::readers::{ReaderFigures, consumer_of};
use super::*;

impl Features {
    /// The features of `session` from per-thread statistics alone (no
    /// wait-for graph). Pure; never fails: absent data gives zeros and
    /// `None`s, and `missing_files` says why.
    pub fn extract(session: &Session, t: &Thresholds) -> Self {
        Self::build(session, t, None, ReaderSource::Threads)
    }

    /// The features of `session`, the reader figures from `source` (of
    /// `wait`, the session's wait analysis, whose loaders also say where
    /// the readers waited for a lock).
    pub fn build(
        session: &Session,
        t: &Thresholds,
        wait: Option<&WaitAnalysis>,
        source: ReaderSource,
    ) -> Self {
        let duration_s = session.duration_s();
        let threads = &session.threads;
        let (by_threads, reader_tids) = thread_figures(session, t);
        let oom_killed = session.info.exit_signal == Some(9)
            && session
                .info
                .notes
                .iter()
                .any(|n| n.to_ascii_lowercase().contains("oom"))
            || frames::share_matching(&session.offcpu, &["oom_kill_process"], true) > 0.0
            || frames::share_matching(&session.oncpu, &["oom_kill_process"], true) > 0.0;

        let all_on: u64 = threads.iter().map(|t| t.on_cpu_ns).sum();
        let busy_threads = threads
            .iter()
            .filter(|th| {
                let l = thread_ns(th) as f64;
                ratio((th.on_cpu_ns + th.off_cpu_ns.runnable) as f64, l) >= t.busy_thread_share
            })
            .count() as u32;

        let read_syscall_bytes: u64 = threads.iter().map(|t| t.read_bytes).sum();
        let traced_dev: u64 = session.io.devices.iter().map(|d| d.traced_read_bytes).sum();
        let stack = DeviceStack::new(&session.io.devices);
        let all_dev = stack.total(|d| d.read_bytes);
        let device_read_bytes = if traced_dev > 0 { traced_dev } else { all_dev };
        let page_size = if session.io.page_cache.page_size > 0 {
            session.io.page_cache.page_size
        } else {
            4096
        };
        // Read misses only: the pages buffered writes add are counted apart
        // (they came from the writer's memory, not from storage).
        let page_cache_miss_bytes = session.io.page_cache.misses_pages.saturating_mul(page_size);
        let page_cache_write_bytes = session.io.page_cache.write_pages.saturating_mul(page_size);
        let mapped_read_bytes = session
            .bench
            .as_ref()
            .and_then(|b| b.measured.as_ref())
            .and_then(|m| m.read_bytes)
            .map_or(0, |bench_read| {
                bench_read.saturating_sub(read_syscall_bytes)
            });
        let app_read_bytes = read_syscall_bytes + mapped_read_bytes;
        let page_cache_hit_ratio = (app_read_bytes > 0).then(|| {
            let from_storage = device_read_bytes.max(page_cache_miss_bytes) as f64;
            (1.0 - ratio(from_storage, app_read_bytes as f64)).max(0.0)
        });

        let devices: Vec<DeviceFeature> = (0..session.io.devices.len())
            .map(|i| stack.feature(i, duration_s))
            .collect();
        let top_device = top_device(&stack, &devices);

        let by_sleep = consumer_by_sleep(threads, &reader_tids, t);
        let consumer = consumer_of(&source, by_sleep);
        let readers = ReaderFigures::of(&source, by_threads);
        let reader_lock_site = reader_lock_site(session, &readers.comms, wait);
        let processes: BTreeSet<u32> = threads.iter().map(|t| t.pid).collect();
        Self {
            duration_s,
            stall: crate::stall::detect(session, t),
            num_cpus: session.info.num_cpus,
            threads_total: threads.len(),
            processes_total: processes.len(),
            reader_selection: readers.selection,
            reader_threads: readers.threads,
            reader_comms: readers.comms,
            reader_thread_s: readers.thread_s,
            reader_on_cpu_share: readers.on_cpu,
            reader_runnable_share: readers.runnable,
            reader_sleeping_share: readers.sleeping,
            reader_blocked_io_share: readers.blocked_io,
            reader_user_share: readers.user,
            reader_cache_copy_share: readers.cache_copy,
            reader_read_syscall_share: readers.read_syscall,
            reader_futex_share: readers.futex,
            reader_lock_site,
            reader_socket_recv_share: readers.socket_recv,
            reader_gil_share: readers.gil,
            reader_reclaim_share: readers.reclaim,
            oom_killed,
            cpus_used: if duration_s > 0.0 {
                all_on as f64 / 1e9 / duration_s
            } else {
                0.0
            },
            host_cpus_busy: host_cpus_busy(session, duration_s),
            busy_threads,
            cpu_demand_threads: if duration_s > 0.0 {
                threads
                    .iter()
                    .map(|t| (t.on_cpu_ns + t.off_cpu_ns.runnable) as f64)
                    .sum::<f64>()
                    / 1e9
                    / duration_s
            } else {
                0.0
            },
            read_syscall_bytes,
            mapped_read_bytes,
            read_syscall_mib_per_s: if duration_s > 0.0 {
                read_syscall_bytes as f64 / (1 << 20) as f64 / duration_s
            } else {
                0.0
            },
            device_read_bytes,
            page_cache_miss_bytes,
            page_cache_write_bytes,
            page_cache_hit_ratio,
            io_limit: top_device
                .as_ref()
                .and_then(|d| read_limit_on(&session.info.io_limits, &session.io.devices, &d.name)),
            fs_daemon: devices::fs_daemon(session),
            top_device,
            devices,
            consumer,
            bench: bench_feature(session),
            writes: Some(extract_writes(session, t, app_read_bytes))
                .filter(|w| w.write_syscall_bytes >= t.writer_min_write_bytes),
            lost_events: session.info.lost_events.values().sum(),
            missing_files: session.missing.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// The reader threads chosen by their statistics (read bytes, else
/// activity) and the shares of their thread time by state; with the set
/// of their (pid, tid).
fn thread_figures(session: &Session, t: &Thresholds) -> (ReaderFigures, BTreeSet<(u32, u32)>) {
    let threads = &session.threads;
    let (selection, readers) = select_readers(threads, t);
    let reader_tids: BTreeSet<(u32, u32)> = readers.iter().map(|r| (r.pid, r.tid)).collect();
    let reader_comms: BTreeSet<String> = readers.iter().map(|r| r.comm.clone()).collect();

    let sum = |f: &dyn Fn(&ThreadStats) -> u64| readers.iter().map(|r| f(r)).sum::<u64>() as f64;
    let life = sum(&thread_ns);
    let on = sum(&|r| r.on_cpu_ns);
    let samples_user = sum(&|r| r.samples_user);
    let samples_kernel = sum(&|r| r.samples_kernel);
    let in_reader = |comm: &str| reader_comms.contains(comm);
    let only_readers = |stacks: &FoldedStacks| FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| in_reader(s.split(';').next().unwrap_or("")))
            .cloned()
            .collect(),
    };
    let reader_oncpu = only_readers(&session.oncpu);
    let reader_offcpu = only_readers(&session.offcpu);
    // Per-thread sample counters when the recorder filled them, else the
    // leaf frames of the readers' on-CPU stacks.
    let reader_user_share = if samples_user + samples_kernel > 0.0 {
        Some(samples_user / (samples_user + samples_kernel))
    } else {
        frames::kernel_leaf_share(&reader_oncpu).map(|k| 1.0 - k)
    };

    let offcpu_ns = |patterns: &[&str]| {
        frames::share_matching(&reader_offcpu, patterns, true) * reader_offcpu.total() as f64 * 1e3
    };
    let freq = session.info.freq_hz.max(1) as f64;
    let oncpu_ns = |patterns: &[&str]| {
        frames::share_matching(&reader_oncpu, patterns, true) * reader_oncpu.total() as f64 / freq
            * 1e9
    };

    // Folded stacks name threads by comm only. When a non-reader thread
    // shares a reader's comm (threads of one program are often all
    // "python" or "storprof"), its stacks cannot be told apart: a main
    // thread parked in futex_wait would count as reader lock waits. Then
    // the per-thread syscall times (exact by tid) decide futex and socket
    // waits, and stack-based reclaim time is scaled by the readers' part
    // of those comms' off-CPU time.
    let comm_shared = threads
        .iter()
        .any(|th| !reader_tids.contains(&(th.pid, th.tid)) && reader_comms.contains(&th.comm));
    let stack_ns = |patterns: &[&str]| {
        if comm_shared {
            0.0
        } else {
            offcpu_ns(patterns)
        }
    };
    let comm_off: u64 = threads
        .iter()
        .filter(|th| reader_comms.contains(&th.comm))
        .map(|th| th.off_cpu_ns.total())
        .sum();
    let reader_part = if comm_shared {
        ratio(sum(&|r| r.off_cpu_ns.total()), comm_off as f64)
    } else {
        1.0
    };
    let futex_ns = sum(&|r| syscall_ns(r, FUTEX_NAMES, nr::FUTEX)).max(stack_ns(FUTEX_FRAMES));
    // Time in read syscalls: blocked-time sessions add the calls' CPU
    // time (the readers' samples inside them), which entry-to-exit
    // timing already holds.
    let read_syscall_ns = sum(&|r| syscall_ns(r, READ_NAMES, nr::READ_FAMILY))
        + if syscall_times_are_blocked_time(session) {
            oncpu_ns(READ_SYSCALL_FRAMES)
        } else {
            0.0
        };
    let socket_ns =
        sum(&|r| syscall_ns(r, SOCKET_RECV_NAMES, nr::SOCKET_RECV)).max(stack_ns(SOCKET_FRAMES));
    let reclaim_ns = (offcpu_ns(RECLAIM_FRAMES) + oncpu_ns(RECLAIM_FRAMES)) * reader_part;
    let figures = ReaderFigures {
        selection: (!threads.is_empty()).then_some(selection),
        threads: readers.len(),
        comms: reader_comms.into_iter().collect(),
        thread_s: life / 1e9,
        on_cpu: ratio(on, life),
        runnable: ratio(sum(&|r| r.off_cpu_ns.runnable), life),
        sleeping: ratio(sum(&|r| r.off_cpu_ns.sleeping), life),
        blocked_io: ratio(sum(&|r| r.off_cpu_ns.uninterruptible), life),
        user: reader_user_share,
        cache_copy: frames::share_matching(&reader_oncpu, CACHE_COPY_FRAMES, true),
        read_syscall: ratio(read_syscall_ns, life),
        futex: ratio(futex_ns, life),
        socket_recv: ratio(socket_ns, life),
        gil: 0.0,
        reclaim: ratio(reclaim_ns, life),
    };
    (figures, reader_tids)
}

/// The figures of the `storprof bench` run, when the session has them.
pub(super) fn bench_feature(session: &Session) -> Option<BenchFeature> {
    session.bench.as_ref().map(|b| {
        let measured = b.measured.as_ref().and_then(|m| m.read_mib_per_second);
        BenchFeature {
            au_percentage: b.au_mean_percentage,
            au_expected_percentage: b.au_expected.map(|a| if a <= 1.0 { a * 100.0 } else { a }),
            computation_time_s: b.computation_time_s.or_else(|| {
                arg_value(&session.info.command, "--computation-time").and_then(|v| v.parse().ok())
            }),
            throughput_samples_per_second: b.throughput_samples_per_second,
            derived_io_mib_per_s: b.derived_io_mib_per_second,
            measured_read_mib_per_s: measured,
            read_amplification: b.measured.as_ref().and_then(|m| m.read_amplification),
            measured_over_derived: match (measured, b.derived_io_mib_per_second) {
                (Some(m), Some(d)) if d > 0.0 => Some(m / d),
                _ => None,
            },
        }
    })
}

/// Where the loaders (the wait graph's loaders and helpers, else the
/// reader threads by name) waited for a lock most.
fn reader_lock_site(
    session: &Session,
    reader_comms: &[String],
    wait: Option<&WaitAnalysis>,
) -> Option<crate::locks::LockSite> {
    use crate::waitgraph::Role;
    let loaders: BTreeSet<u32> = wait
        .map(|w| {
            w.roles
                .iter()
                .filter(|r| matches!(r.role, Role::Loader | Role::Helper))
                .map(|r| r.tid)
                .collect()
        })
        .unwrap_or_default();
    if loaders.is_empty() {
        crate::locks::lock_site(&session.offcpu_threads, &|comm, _, _| {
            reader_comms.iter().any(|c| c == comm)
        })
    } else {
        crate::locks::lock_site(&session.offcpu_threads, &|_, _, tid| loaders.contains(&tid))
    }
}

/// The simulated accelerator without a wait-for graph: the non-reader
/// thread asleep in nanosleep the largest share of its life (at least
/// `consumer_sleep_share`).
fn consumer_by_sleep(
    threads: &[ThreadStats],
    reader_tids: &BTreeSet<(u32, u32)>,
    t: &Thresholds,
) -> Option<ConsumerFeature> {
    threads
        .iter()
        .filter(|th| !reader_tids.contains(&(th.pid, th.tid)))
        .filter_map(|th| {
            let share = ratio(
                syscall_ns(th, NANOSLEEP_NAMES, nr::NANOSLEEP) as f64,
                thread_ns(th) as f64,
            );
            (share >= t.consumer_sleep_share).then_some((th, share))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.tid.cmp(&a.0.tid)))
        .map(|(th, share)| ConsumerFeature {
            comm: th.comm.clone(),
            tids: vec![th.tid],
            sleep_share: share,
            from_wait_graph: false,
            writes: None,
        })
}

/// CPUs the whole machine kept busy (and its hypervisor took) on average,
/// storprof's own CPU left out: it is not the job's competition.
fn host_cpus_busy(session: &Session, duration_s: f64) -> Option<f64> {
    let h = session.timeseries.as_ref()?.host_cpu.as_ref()?;
    if duration_s <= 0.0 {
        return None;
    }
    let ns: u64 = h.busy_ns.iter().chain(&h.steal_ns).sum();
    let info = &session.info;
    let observer_s = info.recorder_cpu_recording_s.or(info.recorder_cpu_s);
    Some(((ns as f64 / 1e9 - observer_s.unwrap_or(0.0)) / duration_s).max(0.0))
}

/// The device with the most (own) reads; without reads, the busiest
/// (physical before virtual).
fn top_device(stack: &DeviceStack, devices: &[DeviceFeature]) -> Option<DeviceFeature> {
    stack
        .top(|d| d.read_bytes, &|i| devices[i].utilization.to_bits())
        .or_else(|| {
            (0..devices.len()).max_by(|&a, &b| {
                (
                    !is_virtual_device(&devices[a].name),
                    devices[a].utilization.to_bits(),
                )
                    .cmp(&(
                        !is_virtual_device(&devices[b].name),
                        devices[b].utilization.to_bits(),
                    ))
                    .then_with(|| devices[b].name.cmp(&devices[a].name))
            })
        })
        .map(|i| devices[i].clone())
}
