//! One pure function per verdict id: each scores the features into a
//! [`Finding`] (fired, score, detail, figures).
use super::*;

fn device_figures(f: &Features) -> Option<DeviceFigures> {
    f.top_device.as_ref().map(|d| DeviceFigures {
        name: d.name.clone(),
        read_mib_per_s: d.read_mib_per_s,
        utilization: d.utilization,
    })
}

fn top_util(f: &Features) -> f64 {
    f.top_device.as_ref().map_or(0.0, |d| d.utilization)
}

fn device_evidence(f: &Features) -> Vec<Figure> {
    let mut out = Vec::new();
    if let Some(d) = &f.top_device {
        out.push(Figure::DeviceReadRate {
            device: d.name.clone(),
            mib_per_s: d.read_mib_per_s,
        });
        out.push(Figure::DeviceUtilization {
            device: d.name.clone(),
            utilization: d.utilization,
        });
        if let Some(p50) = d.latency_p50_us {
            out.push(Figure::DeviceLatencyP50 {
                device: d.name.clone(),
                us: p50,
            });
        }
        if let (Some(queue_us), Some(device_us)) = (d.read_queue_p50_us, d.read_latency_p50_us) {
            out.push(Figure::DeviceReadSplit {
                device: d.name.clone(),
                queue_us,
                device_us,
            });
        }
    }
    out
}

/// Share from which a hot category is named in the headline: smaller ones
/// explain too little of the CPU to be the cause.
pub const HEADLINE_CATEGORY_MIN_SHARE: f64 = 0.05;

/// The hottest frames a headline names: categories of at least
/// [`HEADLINE_CATEGORY_MIN_SHARE`] (not the "other" buckets), else the
/// hottest self functions; at most `max`.
pub fn headline_frames(hot: &HotFrames, max: usize) -> Vec<(String, f64)> {
    let named: Vec<&FrameShare> = hot
        .categories
        .iter()
        .filter(|c| c.share >= HEADLINE_CATEGORY_MIN_SHARE && !c.name.starts_with("other"))
        .take(max)
        .collect();
    let rows: Vec<&FrameShare> = if named.is_empty() {
        hot.self_functions.iter().take(max).collect()
    } else {
        named
    };
    rows.iter().map(|c| (c.name.clone(), c.share)).collect()
}

pub(super) fn rule_cpu_bound_reader(f: &Features, hot: &HotFrames, t: &Thresholds) -> Finding {
    let user = f.reader_user_share.unwrap_or(0.0);
    let own = f.reader_own_work_share().unwrap_or(0.0);
    let util = top_util(f);
    // CPU demand: on CPU, plus waiting for one when the command itself does
    // not oversubscribe the CPUs (then the wait is other load on the machine
    // and the readers still need CPU, not I/O). When it does, the runnable
    // time is cpu-starved's evidence instead.
    let queued = if oversubscribed(f) {
        0.0
    } else {
        f.reader_runnable_share
    };
    // A wait for the GIL is a wait to run Python: CPU demand too.
    let demand = (f.reader_on_cpu_share + queued + f.reader_gil_share).min(1.0);
    let fired = demand >= t.cpu_bound_on_cpu_share
        && own >= t.cpu_bound_own_work_share
        && util < t.storage_busy_utilization;
    let mut figures = vec![
        Figure::ReaderOnCpu {
            threads: f.reader_threads,
            share: f.reader_on_cpu_share,
        },
        Figure::ReaderCpuDemand { share: demand },
        Figure::ReaderUser { share: user },
    ];
    // Who held the GIL the readers waited for: the Python functions
    // running in the interpreter (on CPU with the GIL, by definition).
    let mut gil_holders: Vec<(String, f64)> = Vec::new();
    if f.reader_gil_share > 0.0 {
        figures.push(Figure::ReaderGil {
            share: f.reader_gil_share,
        });
        for r in hot.python_functions.iter().take(3) {
            figures.push(Figure::GilHolder {
                function: r.name.clone(),
                share: r.share,
            });
            gil_holders.push((r.name.clone(), r.share));
        }
    }
    figures.push(Figure::ReaderOwnWork {
        share: own,
        read_amplification: f.bench.as_ref().and_then(|b| b.read_amplification),
    });
    for c in hot.categories.iter().take(3) {
        figures.push(Figure::HotCategory {
            name: c.name.clone(),
            share: c.share,
        });
    }
    figures.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::CpuBoundReader,
        fired,
        score: demand * own,
        detail: Detail::CpuBoundReader {
            hot: headline_frames(hot, 2),
            storage_idle: util < t.storage_idle_utilization,
            device: device_figures(f),
            gil_share: f.reader_gil_share,
            gil_holders,
        },
        figures,
    }
}

pub(super) fn rule_storage_bound(f: &Features, t: &Thresholds) -> Finding {
    let util = top_util(f);
    let fired = f.reader_blocked_io_share >= t.storage_bound_blocked_share;
    let limit = if !fired {
        StorageLimit::NotFired
    } else if f.fs_daemon.is_some() {
        StorageLimit::FsDaemon
    } else if util >= t.storage_busy_utilization {
        StorageLimit::Device
    } else {
        StorageLimit::Throttle
    };
    let mut figures = vec![
        Figure::ReaderBlockedIo {
            share: f.reader_blocked_io_share,
        },
        Figure::ReaderReadSyscall {
            share: f.reader_read_syscall_share,
        },
    ];
    if let Some(d) = &f.fs_daemon {
        figures.push(Figure::FsDaemonReplies {
            comm: d.comm.clone(),
            pid: d.pid,
            share: d.share,
        });
    }
    figures.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::StorageBound,
        fired,
        score: f.reader_blocked_io_share,
        detail: Detail::StorageBound {
            blocked_share: f.reader_blocked_io_share,
            limit,
            device: device_figures(f),
            io_limit: f.io_limit.clone(),
            fs_daemon: f.fs_daemon.clone(),
        },
        figures,
    }
}

pub(super) fn rule_page_cache_served(f: &Features, t: &Thresholds) -> Finding {
    let hit = f.page_cache_hit_ratio.unwrap_or(0.0);
    let util = top_util(f);
    let read_bytes = f.read_syscall_bytes + f.mapped_read_bytes;
    let read_mib = read_bytes as f64 / (1 << 20) as f64;
    // Readers served from memory do not sleep in D state: when they do as
    // much as storage-bound asks, the hit ratio is wrong (block requests a
    // blkio throttle releases later are credited to other tasks).
    let fired = read_bytes >= t.page_cache_min_read_bytes
        && hit >= t.page_cache_hit_ratio
        && util < t.storage_idle_utilization
        && f.reader_blocked_io_share < t.storage_bound_blocked_share;
    let copy_cpu = f.reader_on_cpu_share * f.reader_cache_copy_share;
    let score = if fired {
        f.reader_read_syscall_share.max(copy_cpu)
    } else {
        0.0
    };
    let figures = [
        Figure::PageCacheHitRatio {
            hit,
            read_mib,
            storage_mib: f.device_read_bytes.max(f.page_cache_miss_bytes) as f64 / (1 << 20) as f64,
        },
        Figure::ReaderReadSyscall {
            share: f.reader_read_syscall_share,
        },
        Figure::ReaderCacheCopyCpu { share: copy_cpu },
    ]
    .into_iter()
    .chain(device_evidence(f))
    .collect();
    Finding {
        verdict: VerdictId::PageCacheServed,
        fired,
        score,
        detail: Detail::PageCacheServed {
            hit,
            read_mib,
            mostly_mapped: f.mapped_read_bytes > f.read_syscall_bytes,
            read_syscall_mib_per_s: f.read_syscall_mib_per_s,
            device: device_figures(f),
        },
        figures,
    }
}

pub(super) fn rule_compute_bound(f: &Features, t: &Thresholds) -> Finding {
    let au_bench = f.bench.as_ref().and_then(|b| b.au_percentage);
    let consumer_share = f.consumer.as_ref().map(|c| c.sleep_share);
    // The bench's own AU when present; else the consumer's nanosleep share,
    // which is the same ratio measured from the kernel side.
    let au = au_bench.or(consumer_share.map(|s| s * 100.0));
    let threshold = f
        .bench
        .as_ref()
        .and_then(|b| b.au_expected_percentage)
        .unwrap_or(t.compute_bound_au_percentage);
    let fired = au.is_some_and(|a| a >= threshold);
    let mut figures = Vec::new();
    if let Some(a) = au_bench {
        figures.push(Figure::BenchAu {
            percentage: a,
            expected: threshold,
        });
    }
    if let Some(c) = &f.consumer {
        figures.push(Figure::ConsumerSleep {
            comm: c.comm.clone(),
            share: c.sleep_share,
        });
    }
    figures.push(Figure::ReaderSleeping {
        share: f.reader_sleeping_share,
    });
    let au_source = match au_bench {
        Some(a) => AuSource::Bench(a),
        None => match consumer_share {
            Some(s) if f.consumer.as_ref().is_some_and(|c| c.from_wait_graph) => {
                AuSource::Kernel(s)
            }
            Some(s) => AuSource::ConsumerAsleep(s),
            None => AuSource::NoConsumer,
        },
    };
    Finding {
        verdict: VerdictId::ComputeBound,
        fired,
        score: au.map_or(0.0, |a| (a / 100.0).clamp(0.0, 1.0)),
        detail: Detail::ComputeBound { au: au_source },
        figures,
    }
}

/// The traced command wants more CPUs at once than there are: on average
/// more of its threads on CPU or runnable than CPUs online.
fn oversubscribed(f: &Features) -> bool {
    f.num_cpus > 0 && f.cpu_demand_threads > f64::from(f.num_cpus)
}

pub(super) fn rule_cpu_starved(f: &Features, t: &Thresholds) -> Finding {
    // Issue 4: runnable but waiting for a CPU *because* there are more busy
    // threads than cores. Waits caused by load outside the command count as
    // reader CPU demand (cpu-bound-reader) instead.
    let fired = f.reader_runnable_share >= t.cpu_starved_runnable_share && oversubscribed(f);
    Finding {
        verdict: VerdictId::CpuStarved,
        fired,
        score: f.reader_runnable_share,
        detail: Detail::CpuStarved {
            runnable_share: f.reader_runnable_share,
            busy_threads: f.busy_threads,
            num_cpus: f.num_cpus,
        },
        figures: vec![
            Figure::ReaderRunnable {
                share: f.reader_runnable_share,
            },
            Figure::BusyThreads(f.busy_threads),
            Figure::NumCpus(f.num_cpus),
            Figure::CpuDemandThreads(f.cpu_demand_threads),
            Figure::CpusUsed(f.cpus_used),
        ],
    }
}

pub(super) fn rule_lock_contention(f: &Features, t: &Thresholds) -> Finding {
    Finding {
        verdict: VerdictId::LockContention,
        fired: f.reader_futex_share >= t.lock_futex_share,
        score: f.reader_futex_share,
        detail: Detail::LockContention {
            futex_share: f.reader_futex_share,
            site: f.reader_lock_site.clone(),
        },
        figures: vec![Figure::ReaderFutex {
            share: f.reader_futex_share,
        }],
    }
}

pub(super) fn rule_memory_pressure(f: &Features, t: &Thresholds) -> Finding {
    let fired = f.oom_killed || f.reader_reclaim_share >= t.memory_reclaim_share;
    let mut figures = vec![Figure::ReaderReclaim {
        share: f.reader_reclaim_share,
    }];
    if f.oom_killed {
        figures.push(Figure::OomKilled);
    }
    Finding {
        verdict: VerdictId::MemoryPressure,
        fired,
        score: if f.oom_killed {
            1.0
        } else {
            f.reader_reclaim_share
        },
        detail: Detail::MemoryPressure {
            oom_killed: f.oom_killed,
            reclaim_share: f.reader_reclaim_share,
        },
        figures,
    }
}

pub(super) fn rule_network_bound(f: &Features, t: &Thresholds) -> Finding {
    Finding {
        verdict: VerdictId::NetworkBound,
        fired: f.reader_socket_recv_share >= t.network_socket_share,
        score: f.reader_socket_recv_share,
        detail: Detail::NetworkBound {
            socket_share: f.reader_socket_recv_share,
        },
        figures: vec![Figure::ReaderSocketRecv {
            share: f.reader_socket_recv_share,
        }],
    }
}

pub(super) fn rule_stalled(f: &Features) -> Finding {
    let Some(stall) = &f.stall else {
        return Finding {
            verdict: VerdictId::Stalled,
            fired: false,
            score: 0.0,
            detail: Detail::Stalled {
                kind: None,
                quiet_s: 0.0,
                threads: Vec::new(),
            },
            figures: Vec::new(),
        };
    };
    let mut figures = vec![Figure::NoProgress {
        seconds: stall.quiet_s,
        handoffs_too: stall.kind == StallKind::Blocked,
    }];
    figures.extend(stall.threads.iter().map(|th| Figure::StalledThread {
        comm: th.comm.clone(),
        tid: th.tid,
        state: th.state.clone(),
        seconds: th.seconds,
    }));
    Finding {
        verdict: VerdictId::Stalled,
        fired: true,
        score: 1.0,
        detail: Detail::Stalled {
            kind: Some(stall.kind),
            quiet_s: stall.quiet_s,
            threads: stall
                .threads
                .iter()
                .map(|th| (th.comm.clone(), th.tid))
                .collect(),
        },
        figures,
    }
}

fn write_device_figures(f: &Features) -> Option<WriteDeviceFigures> {
    let d = f.writes.as_ref()?.top_write_device.as_ref()?;
    Some(WriteDeviceFigures {
        name: d.name.clone(),
        write_mib_per_s: d.write_mib_per_s,
        utilization: d.utilization,
    })
}

fn write_device_evidence(f: &Features) -> Vec<Figure> {
    let Some(w) = &f.writes else {
        return Vec::new();
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = vec![Figure::WrittenReachedDevice {
        ratio: w.device_over_written.unwrap_or(0.0),
        written_mib: mib(w.write_syscall_bytes),
        device_mib: mib(w.device_write_bytes),
    }];
    if let Some(d) = &w.top_write_device {
        out.push(Figure::DeviceWriteRate {
            device: d.name.clone(),
            mib_per_s: d.write_mib_per_s,
        });
        out.push(Figure::DeviceUtilization {
            device: d.name.clone(),
            utilization: d.utilization,
        });
    }
    out
}

fn write_util(f: &Features) -> f64 {
    f.writes
        .as_ref()
        .and_then(|w| w.top_write_device.as_ref())
        .map_or(0.0, |d| d.utilization)
}

pub(super) fn rule_writeback_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    let util = write_util(f);
    let fired = w.write_dominated
        && w.writer_writeback_wait_share >= t.writeback_bound_wait_share
        && w.device_write_bytes > 0;
    let limit = if !fired {
        StorageLimit::NotFired
    } else if util >= t.storage_busy_utilization {
        StorageLimit::Device
    } else {
        StorageLimit::Throttle
    };
    let mut figures = vec![
        Figure::WriterWritebackWait {
            share: w.writer_writeback_wait_share,
        },
        Figure::WriterDirtyThrottle {
            share: w.writer_dirty_throttle_share,
        },
        Figure::WriterBlockedIo {
            share: w.writer_blocked_io_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::WritebackBound,
        fired,
        score: w.writer_writeback_wait_share,
        detail: Detail::WritebackBound {
            wait_share: w.writer_writeback_wait_share,
            throttle_share: w.writer_dirty_throttle_share,
            limit,
            device: write_device_figures(f),
        },
        figures,
    }
}

pub(super) fn rule_fsync_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    // Waiting for the device: something reached it.
    let fired = w.write_dominated
        && w.writer_sync_share >= t.fsync_bound_sync_share
        && w.device_write_bytes > 0;
    let mut figures = vec![
        Figure::WriterSync {
            share: w.writer_sync_share,
            calls: w.writer_sync_calls,
        },
        Figure::WriterBlockedIo {
            share: w.writer_blocked_io_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::FsyncBound,
        fired,
        score: w.writer_sync_share,
        detail: Detail::FsyncBound {
            sync_share: w.writer_sync_share,
            calls: w.writer_sync_calls,
            device: write_device_figures(f),
        },
        figures,
    }
}

pub(super) fn rule_write_generator_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    let own = w.own_work_share();
    let fired = w.write_dominated
        && w.writer_on_cpu_share >= t.write_generator_on_cpu_share
        && own >= t.write_generator_own_work_share
        && write_util(f) < t.storage_busy_utilization
        && w.writer_sync_share < t.fsync_bound_sync_share
        && w.writer_writeback_wait_share < t.writeback_bound_wait_share;
    let mut figures = vec![
        Figure::WriterOnCpu {
            threads: w.writer_threads,
            share: w.writer_on_cpu_share,
        },
        Figure::WriterOwnWork { share: own },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::WriteGeneratorBound,
        fired,
        score: w.writer_on_cpu_share * own,
        detail: Detail::WriteGeneratorBound {
            on_cpu_share: w.writer_on_cpu_share,
            own_work_share: own,
            device: write_device_figures(f),
        },
        figures,
    }
}

pub(super) fn rule_checkpoint_bound(f: &Features, t: &Thresholds) -> Finding {
    let consumer = f.consumer.as_ref();
    let w = consumer.and_then(|c| c.writes.clone()).unwrap_or_default();
    let written_mib = w.write_bytes as f64 / (1 << 20) as f64;
    // Own time is saving when it waits on I/O, or writes fast enough for
    // its CPU to be the copying and serializing of a checkpoint.
    let own_s = w.own_share * w.window_s;
    let writing = w.own_io_share * 2.0 >= w.own_share
        || (own_s > 0.0 && written_mib / own_s >= t.checkpoint_min_write_mib_per_s);
    let fired = w.write_bytes >= t.writer_min_write_bytes
        && w.own_share >= t.checkpoint_bound_own_share
        && w.own_share > w.data_wait_share
        && writing;
    let comm = consumer.map(|c| c.comm.clone());
    let mut figures = vec![
        Figure::ConsumerOwnTime {
            comm: comm.clone().unwrap_or_default(),
            share: w.own_share,
            written_mib,
        },
        Figure::ConsumerOwnIo {
            share: w.own_io_share,
        },
        Figure::ConsumerSleep {
            comm: comm.clone().unwrap_or_default(),
            share: w.compute_share,
        },
        Figure::ConsumerDataWaitShare {
            share: w.data_wait_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::CheckpointBound,
        fired,
        score: w.own_share,
        detail: Detail::CheckpointBound {
            comm,
            own_share: w.own_share,
            compute_share: w.compute_share,
            data_wait_share: w.data_wait_share,
            own_io_share: w.own_io_share,
            written_mib,
            device: write_device_figures(f),
        },
        figures,
    }
}

/// Every rule's finding, in [`RULES`] order.
pub fn findings(f: &Features, hot_oncpu: &HotFrames, t: &Thresholds) -> Vec<Finding> {
    RULES.iter().map(|r| (r.score)(f, hot_oncpu, t)).collect()
}
