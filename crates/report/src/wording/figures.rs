//! Each figure of a finding as one sentence of verdict.json's evidence.
use super::*;

/// A figure in words.
pub fn figure_text(figure: &Figure, basis: ShareBasis) -> String {
    match figure {
        Figure::ReaderOnCpu { .. }
        | Figure::ReaderCpuDemand { .. }
        | Figure::ReaderUser { .. }
        | Figure::ReaderOwnWork { .. }
        | Figure::HotCategory { .. }
        | Figure::ReaderBlockedIo { .. }
        | Figure::ReaderReadSyscall { .. }
        | Figure::FsDaemonReplies { .. }
        | Figure::PageCacheHitRatio { .. }
        | Figure::ReaderCacheCopyCpu { .. }
        | Figure::ReaderSleeping { .. }
        | Figure::ReaderRunnable { .. }
        | Figure::ReaderFutex { .. }
        | Figure::ReaderReclaim { .. }
        | Figure::ReaderSocketRecv { .. }
        | Figure::GilHolder { .. }
        | Figure::ReaderGil { .. } => reader_figure_text(figure, basis_text(basis)),
        Figure::DeviceReadRate { .. }
        | Figure::DeviceUtilization { .. }
        | Figure::DeviceLatencyP50 { .. }
        | Figure::DeviceReadSplit { .. }
        | Figure::DeviceWriteRate { .. } => device_figure_text(figure),
        Figure::BenchAu { .. }
        | Figure::ConsumerSleep { .. }
        | Figure::ConsumerOwnTime { .. }
        | Figure::ConsumerOwnIo { .. }
        | Figure::ConsumerDataWaitShare { .. } => consumer_figure_text(figure),
        Figure::BusyThreads(_)
        | Figure::NumCpus(_)
        | Figure::CpuDemandThreads(_)
        | Figure::CpusUsed(_)
        | Figure::OomKilled => cpu_figure_text(figure),
        Figure::NoProgress { .. } | Figure::StalledThread { .. } => stall_figure_text(figure),
        Figure::WriterOnCpu { .. }
        | Figure::WriterOwnWork { .. }
        | Figure::WriterSync { .. }
        | Figure::WriterWritebackWait { .. }
        | Figure::WriterDirtyThrottle { .. }
        | Figure::WriterBlockedIo { .. }
        | Figure::WrittenReachedDevice { .. } => writer_figure_text(figure),
    }
}

/// A reader figure in words: the readers' time, CPU, waits and the page
/// cache; `basis` says what a share is of.
fn reader_figure_text(figure: &Figure, basis: &str) -> String {
    match figure {
        Figure::ReaderOnCpu { threads, share } => {
            format!("{threads} reader thread(s) on CPU {} {basis}", pct(*share))
        }
        Figure::ReaderCpuDemand { share } => format!(
            "readers on CPU or queued for one (other load) {} {basis}",
            pct(*share)
        ),
        Figure::ReaderUser { share } => {
            format!("{} of reader CPU in user space", pct(*share))
        }
        Figure::ReaderOwnWork {
            share,
            read_amplification,
        } => format!(
            "{} of reader CPU is the reader's own work (not copies out of the page cache{})",
            pct(*share),
            match read_amplification {
                Some(a) if *a > 1.0 => format!(
                    ", of which it caused {:.0}% itself by reading {a:.1}× the bytes it returned",
                    (1.0 - 1.0 / a) * 100.0
                ),
                _ => String::new(),
            }
        ),
        Figure::HotCategory { name, share } => {
            format!("{} of reader CPU in {name}", pct(*share))
        }
        Figure::ReaderBlockedIo { share } => format!(
            "readers waiting for block I/O (D sleep, or a block completion ending their wait) {} {basis}",
            pct(*share)
        ),
        Figure::ReaderReadSyscall { share } => format!(
            "readers inside read syscalls {} of the readers' time",
            pct(*share)
        ),
        Figure::FsDaemonReplies { comm, pid, share } => format!(
            "a FUSE daemon's replies ended {} of the traced threads' storage waits, most of them \
             from {comm} (pid {pid})",
            pct(*share)
        ),
        Figure::PageCacheHitRatio {
            hit,
            read_mib,
            storage_mib,
        } => format!(
            "{} of {read_mib:.1} MiB read came from memory ({storage_mib:.1} MiB from storage)",
            pct(*hit)
        ),
        Figure::ReaderCacheCopyCpu { share } => format!(
            "readers on CPU copying out of the page cache {} {basis}",
            pct(*share)
        ),
        Figure::ReaderSleeping { share } => format!(
            "readers sleeping (waiting for work or queue space) {} {basis}",
            pct(*share)
        ),
        Figure::ReaderRunnable { share } => {
            format!("runnable, waiting for a CPU {} {basis}", pct(*share))
        }
        Figure::ReaderFutex { share } => {
            format!("workers in futex waits {} {basis}", pct(*share))
        }
        Figure::ReaderReclaim { share } => format!(
            "reclaim, swap-in or OOM handling {} of reader time",
            pct(*share)
        ),
        Figure::ReaderSocketRecv { share } => {
            format!("workers waiting for the network {} {basis}", pct(*share))
        }
        Figure::GilHolder { function, share } => format!(
            "{function} ran in the interpreter, holding the GIL, {} of reader CPU",
            pct(*share)
        ),
        Figure::ReaderGil { share } => format!(
            "readers waiting for the GIL (another thread running Python) {} {basis}",
            pct(*share)
        ),
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}

/// A block-device figure in words: rates, busy share and latencies.
fn device_figure_text(figure: &Figure) -> String {
    match figure {
        Figure::DeviceReadRate { device, mib_per_s } => {
            format!("{device} read {mib_per_s:.2} MiB/s")
        }
        Figure::DeviceUtilization {
            device,
            utilization,
        } => format!("{device} busy {} of the recording", pct(*utilization)),
        Figure::DeviceLatencyP50 { device, us } => {
            format!("{device} median request latency ≤ {us:.0} µs")
        }
        Figure::DeviceReadSplit {
            device,
            queue_us,
            device_us,
        } => format!(
            "{device} reads: median ≤ {queue_us:.0} µs from request creation to dispatch (plug, I/O \
             scheduler), ≤ {device_us:.0} µs on the device (a cgroup throttle holds bios before \
             the request exists: its time is in neither)"
        ),
        Figure::DeviceWriteRate { device, mib_per_s } => {
            format!("{device} wrote {mib_per_s:.2} MiB/s")
        }
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}

/// A consumer (trainer, bench) figure in words: AU, sleep, own time and
/// data wait.
fn consumer_figure_text(figure: &Figure) -> String {
    match figure {
        Figure::BenchAu {
            percentage,
            expected,
        } => format!("bench AU {percentage:.2}% (expected ≥ {expected:.0}%)"),
        Figure::ConsumerSleep { comm, share } => format!(
            "consumer thread {comm} asleep in simulated computation {} of its time",
            pct(*share)
        ),
        Figure::ConsumerOwnTime {
            comm,
            share,
            written_mib,
        } => format!(
            "consumer {comm} neither computing nor waiting for data {} of its training window; it wrote {written_mib:.1} MiB",
            pct(*share)
        ),
        Figure::ConsumerOwnIo { share } => format!(
            "{} of that time in uninterruptible (D) waits: fsync, writeback",
            pct(*share)
        ),
        Figure::ConsumerDataWaitShare { share } => format!(
            "consumer waiting for data {} of its training window",
            pct(*share)
        ),
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}

/// A figure of the machine's CPUs and memory in words: busy threads,
/// CPUs online and used, the OOM killer.
fn cpu_figure_text(figure: &Figure) -> String {
    match figure {
        Figure::BusyThreads(n) => format!("{n} busy thread(s)"),
        Figure::NumCpus(n) => format!("{n} CPU(s) online"),
        Figure::CpuDemandThreads(x) => {
            format!("{x:.2} thread(s) on CPU or runnable at once on average")
        }
        Figure::CpusUsed(x) => format!("traced threads kept {x:.2} CPU(s) busy"),
        Figure::OomKilled => "the OOM killer ended a traced process".to_string(),
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}

/// A stall figure in words: how long nothing moved, and a stuck thread.
fn stall_figure_text(figure: &Figure) -> String {
    match figure {
        Figure::NoProgress {
            seconds,
            handoffs_too,
        } => format!(
            "no read-syscall byte{} for the last {seconds:.1} s",
            if *handoffs_too {
                " and no wake-up between traced threads"
            } else {
                ""
            }
        ),
        Figure::StalledThread {
            comm,
            tid,
            state,
            seconds,
        } => {
            if state == "on-cpu" {
                format!("{comm} (tid {tid}) on a CPU {seconds:.1} s of that time")
            } else {
                format!("{comm} (tid {tid}) off CPU ({state}) for {seconds:.1} s, not woken")
            }
        }
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}

/// A writer figure in words: the writers' CPU, sync and writeback waits,
/// and how much of the written data reached a device.
fn writer_figure_text(figure: &Figure) -> String {
    match figure {
        Figure::WriterOnCpu { threads, share } => {
            format!(
                "{threads} writer thread(s) on CPU {} of their time",
                pct(*share)
            )
        }
        Figure::WriterOwnWork { share } => format!(
            "{} of writer CPU is making the data (not the kernel write path)",
            pct(*share)
        ),
        Figure::WriterSync { share, calls } => format!(
            "writers inside {calls} fsync/fdatasync/sync_file_range/msync call(s) {} of their time",
            pct(*share)
        ),
        Figure::WriterWritebackWait { share } => format!(
            "writers waiting on dirty-page throttling or writeback (outside fsync) {} of their time",
            pct(*share)
        ),
        Figure::WriterDirtyThrottle { share } => format!(
            "writers throttled in balance_dirty_pages {} of their time",
            pct(*share)
        ),
        Figure::WriterBlockedIo { share } => format!(
            "writers in uninterruptible (D) sleep {} of their time",
            pct(*share)
        ),
        Figure::WrittenReachedDevice {
            ratio,
            written_mib,
            device_mib,
        } => format!(
            "{written_mib:.1} MiB written by syscalls, {device_mib:.1} MiB written by the devices ({})",
            pct(*ratio)
        ),
        // Not reached: `figure_text` routes only this group's figures here.
        other => other.key(),
    }
}
/// A figure as verdict.json evidence.
pub fn evidence(figure: &Figure, basis: ShareBasis) -> Evidence {
    Evidence {
        key: figure.key(),
        value: round4(figure.value()),
        unit: figure.unit().to_string(),
        text: figure_text(figure, basis),
    }
}
