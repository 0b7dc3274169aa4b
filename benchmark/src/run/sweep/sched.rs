//! CPU demand of a cell, measured: how long the run's threads were runnable
//! but waiting for a CPU (`/proc/self/task/*/schedstat`, 2nd field, ns),
//! next to the CPU time they got (`getrusage`, exited threads included).
//!
//! ```text
//!  start: baseline per tid ─► sampler thread every 50 ms: last run_delay per tid
//!  stop:  Σ (last − baseline)  [threads born in the cell start from 0]
//! ```
//! A thread's delay after its last sample (≤ 50 ms) is missed when it exits
//! between samples, so the figure is a slight underestimate.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sampling period.
const PERIOD: Duration = Duration::from_millis(50);

/// `run_delay` (ns) of every thread of this process.
pub fn read_run_delays() -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(e.path().join("schedstat"))
            && let Some(d) = parse_schedstat(&text)
        {
            out.insert(tid, d);
        }
    }
    out
}

/// The run_delay field (ns) of a schedstat line `"<on-cpu ns> <run_delay ns> <slices>"`.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// User + system CPU seconds of this process, exited threads included.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return 0.0;
        }
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// What one cell's threads got and waited for.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CpuDemand {
    /// Seconds runnable but waiting for a CPU, all threads.
    pub runnable_wait_seconds: f64,
    /// CPU seconds used.
    pub cpu_seconds: f64,
    /// Wall seconds of the measurement.
    pub wall_seconds: f64,
}

impl CpuDemand {
    /// Share of the CPU demand (ran + waited to run) spent waiting.
    pub fn wait_share(&self) -> f64 {
        let demand = self.runnable_wait_seconds + self.cpu_seconds;
        if demand > 0.0 {
            self.runnable_wait_seconds / demand
        } else {
            0.0
        }
    }

    /// Threads waiting for a CPU, on average over the wall time.
    pub fn waiting_threads(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            self.runnable_wait_seconds / self.wall_seconds
        } else {
            0.0
        }
    }

    /// "CPU constrained": threads waited at least 20 % of their CPU demand
    /// for a CPU, and on average at least 0.1 threads were waiting.
    pub fn constrained(&self) -> bool {
        self.wait_share() >= 0.20 && self.waiting_threads() >= 0.10
    }
}

/// Sum of per-thread delay growth from `base` to `last` (tids new since `base` count from 0).
pub fn delay_growth(base: &HashMap<u64, u64>, last: &HashMap<u64, u64>) -> u64 {
    last.iter()
        .map(|(tid, &d)| d.saturating_sub(base.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// A running measurement; [`CpuMeter::stop`] ends it.
pub struct CpuMeter {
    stop: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<()>>,
    base: HashMap<u64, u64>,
    last: Arc<Mutex<HashMap<u64, u64>>>,
    cpu0: f64,
    t0: Instant,
}

impl CpuMeter {
    /// Start measuring this process.
    pub fn start() -> Self {
        let base = read_run_delays();
        let last = Arc::new(Mutex::new(base.clone()));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (last, stop) = (Arc::clone(&last), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("storprof-schedstat".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(PERIOD);
                        let now = read_run_delays();
                        if let Ok(mut l) = last.lock() {
                            l.extend(now);
                        }
                    }
                })
                .ok()
        };
        CpuMeter {
            stop,
            sampler,
            base,
            last,
            cpu0: cpu_seconds(),
            t0: Instant::now(),
        }
    }

    /// Stop and report.
    pub fn stop(mut self) -> CpuDemand {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
        let mut last = self.last.lock().map(|l| l.clone()).unwrap_or_default();
        last.extend(read_run_delays());
        CpuDemand {
            runnable_wait_seconds: delay_growth(&self.base, &last) as f64 / 1e9,
            cpu_seconds: (cpu_seconds() - self.cpu0).max(0.0),
            wall_seconds: self.t0.elapsed().as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_sums() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some(456));
        assert_eq!(parse_schedstat("123"), None);
        let base = HashMap::from([(1, 100), (2, 50)]);
        let last = HashMap::from([(1, 300), (2, 50), (3, 25)]);
        assert_eq!(delay_growth(&base, &last), 200 + 25);
        assert!(!read_run_delays().is_empty(), "this process has threads");
    }

    #[test]
    fn constrained_needs_both_share_and_waiting_threads() {
        let d = CpuDemand {
            runnable_wait_seconds: 3.0,
            cpu_seconds: 6.0,
            wall_seconds: 10.0,
        };
        assert!(d.constrained());
        let light = CpuDemand {
            runnable_wait_seconds: 0.5,
            cpu_seconds: 6.0,
            wall_seconds: 10.0,
        };
        assert!(!light.constrained());
        let brief = CpuDemand {
            runnable_wait_seconds: 0.5,
            cpu_seconds: 0.5,
            wall_seconds: 10.0,
        };
        assert!(!brief.constrained(), "0.05 threads waiting on average");
    }

    #[test]
    fn meter_sees_cpu_time() {
        let m = CpuMeter::start();
        let (t, c0) = (Instant::now(), cpu_seconds());
        let mut x = 0u64;
        // Spin until this process used 60 ms of CPU (however loaded the host).
        while cpu_seconds() - c0 < 0.06 && t.elapsed() < Duration::from_secs(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let d = m.stop();
        assert!(d.cpu_seconds >= 0.06, "{d:?}");
        assert!(d.wall_seconds > 0.0 && d.runnable_wait_seconds >= 0.0);
    }
}
