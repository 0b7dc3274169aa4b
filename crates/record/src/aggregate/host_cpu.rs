//! The machine's CPU time over the recording, from `/proc/stat` read once
//! per time-series bucket: what the traced threads' own series cannot
//! show (untraced processes, storprof itself, interrupts, a hypervisor's
//! steal).
use storprof_session::model::HostCpuSeries;

use super::readings::{Readings, increase};

/// `/proc/stat`'s first line, summed over the CPUs, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    pub steal: u64,
    /// idle + iowait.
    pub idle: u64,
}

/// The counters from the text of `/proc/stat`; None when its `cpu` line
/// is missing or short (the first eight fields are in every kernel since
/// 2.6.11).
pub fn parse_proc_stat(text: &str) -> Option<HostCpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = *fields.get(..8)? else {
        return None;
    };
    Some(HostCpuTicks {
        busy: user + nice + system + irq + softirq,
        steal,
        idle: idle + iowait,
    })
}

/// The series built one reading at a time, in step with the thread
/// series (each bucket the counters' increase since the reading before).
#[derive(Debug)]
pub struct HostCpuBuilder {
    /// Nanoseconds per clock tick.
    tick_ns: u64,
    readings: Readings<HostCpuTicks, 3>,
}

impl HostCpuBuilder {
    /// A builder for counters in ticks of `ticks_per_s` (USER_HZ).
    pub fn new(ticks_per_s: u64) -> Self {
        Self {
            tick_ns: 1_000_000_000 / ticks_per_s.max(1),
            readings: Readings::default(),
        }
    }

    /// Closes a bucket at this reading (the first call sets the baseline).
    pub fn push(&mut self, now: Option<HostCpuTicks>) {
        self.readings.push(now, |last, now| {
            [
                increase(last, now, |c| c.busy),
                increase(last, now, |c| c.steal),
                increase(last, now, |c| c.idle),
            ]
        });
    }

    /// The series in ns, None when no reading succeeded.
    pub fn series(&self) -> Option<HostCpuSeries> {
        let column = |i| self.readings.column(i, self.tick_ns);
        Some(HostCpuSeries {
            busy_ns: column(0)?,
            steal_ns: column(1)?,
            idle_ns: column(2)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_is_summed_into_busy_steal_and_idle() {
        let text = "cpu  5897223 2222 897422 5309325 515647 7 19477 6140 0 0\n\
                    cpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n";
        assert_eq!(
            parse_proc_stat(text),
            Some(HostCpuTicks {
                busy: 5897223 + 2222 + 897422 + 7 + 19477,
                steal: 6140,
                idle: 5309325 + 515647,
            })
        );
        assert_eq!(parse_proc_stat("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(parse_proc_stat("intr 1 2 3\n"), None);
    }

    #[test]
    fn buckets_hold_each_counter_s_increase_in_ns() {
        let t = |busy, steal, idle| Some(HostCpuTicks { busy, steal, idle });
        let mut b = HostCpuBuilder::new(100);
        assert_eq!(b.series(), None);
        b.push(t(100, 0, 1000));
        b.push(t(250, 10, 1050));
        b.push(None);
        b.push(t(300, 10, 1200));
        let s = b.series().unwrap();
        // 10 ms a tick at 100 Hz.
        assert_eq!(s.busy_ns, vec![150 * 10_000_000, 0, 0]);
        assert_eq!(s.steal_ns, vec![10 * 10_000_000, 0, 0]);
        assert_eq!(s.idle_ns, vec![50 * 10_000_000, 0, 0]);
    }
}
