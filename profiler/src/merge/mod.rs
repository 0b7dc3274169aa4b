//! Diagnosis across hosts: several hosts' sessions (one `storprof record` per
//! host, since eBPF sees one kernel) merged into one cluster diagnosis.
//!
//! ```text
//!  session dirs ─► session::load::load ─► analysis::analyze (per host, unchanged)
//!        │ host_label: session.json hostname, or the directory name when
//!        │             hostnames collide (network-namespace hosts share a kernel)
//!        ▼
//!  HostRow per host (verdict + figures) ─► merge() (pure):
//!        imbalance of the reader's I/O-wait share over hosts (Drishti-style)
//!        ─► stragglers (hosts near the max wait while the spread is large)
//!        ─► straggler verdict: storage-bound when that finding fired on the
//!           host (the imbalance is in I/O wait, which is what it measures),
//!           else the host's own verdict
//!        ─► cluster verdict (the stragglers' verdict; else the hosts' common
//!           verdict; else the data-side host with the lowest AU's)
//!  ─► command::run writes DIR/merged.json, DIR/report.md, DIR/merged.tar.gz
//!     (every host's session files, secrets redacted, under hosts/<label>/)
//! ```
//! In a synchronous data-parallel job (DLIO's barrier after every step) the
//! whole job runs at the pace of its slowest host: one host whose readers
//! sit in uninterruptible I/O while the others' readers idle (their prefetch
//! queues are full because their consumers wait at the barrier) is the
//! straggler, and its verdict is the cluster's.
pub mod command;
pub mod report;

use serde::Serialize;
use storprof_report::diagnosis::Diagnosis;

use storprof_analysis::VerdictId;

/// Drishti's `imbalance_stragglers` (0.15): a spread `(max − min) / max` of a
/// per-rank figure above this is an imbalance worth calling out. Applied
/// here to the hosts' reader I/O-wait shares.
pub const STRAGGLER_IMBALANCE: f64 = 0.15;
/// A straggler's readers wait on I/O at least this share of their time
/// (Drishti's `imbalance_operations` 0.10 used as the floor), so that a
/// large relative spread of negligible waits calls out nobody.
pub const STRAGGLER_MIN_IO_WAIT_SHARE: f64 = 0.10;
/// Hosts within this fraction of the largest wait count as stragglers too
/// (the same 0.15: the spread among stragglers is not itself an imbalance).
pub const STRAGGLER_NEAR_MAX: f64 = STRAGGLER_IMBALANCE;

/// One host's figures, side by side in the merged report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostRow {
    /// The host's name in the merged outputs (see [`host_labels`]).
    pub host: String,
    /// session.json `hostname`.
    pub hostname: String,
    pub session_dir: String,
    pub verdict: VerdictId,
    pub headline: String,
    pub confidence: f64,
    pub duration_s: f64,
    /// Share of time lost to block I/O (uninterruptible sleep: block I/O,
    /// page-cache misses): the figure compared across hosts. With the
    /// wake-up graph, the consumer's time waiting for data that the
    /// critical path spent in D state; else the reader threads' share of
    /// their own time.
    pub reader_io_wait_share: f64,
    /// Readers on CPU, on the same basis as `reader_io_wait_share`.
    pub reader_on_cpu_share: f64,
    /// Readers asleep (idle: prefetch queue full, or waiting for work).
    pub reader_sleeping_share: f64,
    /// Consumer (simulated accelerator) time asleep in computation, from the kernel side.
    pub consumer_sleep_share: Option<f64>,
    /// DLIO AU (%) from the bench summary, when this host's session has one.
    pub bench_au_percentage: Option<f64>,
    pub read_syscall_mib_per_s: f64,
    pub device_read_mib_per_s: Option<f64>,
    pub device_utilization: Option<f64>,
    pub device_latency_p50_us: Option<f64>,
    pub cpus_used: f64,
    pub complete: bool,
    /// The host's storage-bound finding fired (its readers' block-I/O wait
    /// reached the threshold), as its verdict or as a runner-up.
    pub storage_bound_fired: bool,
}

/// A share as 0 when rounding left it at or below 0 (no "-0.0%" in tables).
fn non_negative(share: f64) -> f64 {
    if share > 0.0 { share } else { 0.0 }
}

impl HostRow {
    /// The row of one host's analysis.
    pub fn new(
        host: String,
        hostname: String,
        session_dir: String,
        a: &Diagnosis,
        complete: bool,
    ) -> Self {
        let f = &a.features;
        // Critical-path shares are of the consumer's data wait: weighted by
        // it, a host whose consumer hardly waits compares as hardly waiting
        // on I/O, whatever its few waits were spent on.
        let data_wait = match &f.consumer {
            Some(c) if c.from_wait_graph => (1.0 - c.sleep_share).clamp(0.0, 1.0),
            _ => 1.0,
        };
        HostRow {
            host,
            hostname,
            session_dir,
            verdict: a.verdict.verdict,
            headline: a.verdict.headline.clone(),
            confidence: a.verdict.confidence,
            duration_s: f.duration_s,
            reader_io_wait_share: non_negative(f.reader_blocked_io_share * data_wait),
            reader_on_cpu_share: non_negative(f.reader_on_cpu_share * data_wait),
            reader_sleeping_share: non_negative(f.reader_sleeping_share * data_wait),
            consumer_sleep_share: f.consumer.as_ref().map(|c| c.sleep_share),
            bench_au_percentage: f.bench.as_ref().and_then(|b| b.au_percentage),
            read_syscall_mib_per_s: f.read_syscall_mib_per_s,
            device_read_mib_per_s: f.top_device.as_ref().map(|d| d.read_mib_per_s),
            device_utilization: f.top_device.as_ref().map(|d| d.utilization),
            device_latency_p50_us: f.top_device.as_ref().and_then(|d| d.latency_p50_us),
            cpus_used: f.cpus_used,
            complete,
            storage_bound_fired: (a.verdict.verdict == VerdictId::StorageBound
                && !a.verdict.inconclusive)
                || a.verdict
                    .runners_up
                    .iter()
                    .any(|r| r.verdict == VerdictId::StorageBound && r.fired),
        }
    }
}

/// A host called out as a straggler, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Straggler {
    pub host: String,
    /// Why it straggles: storage-bound when that finding fired on the host,
    /// else the host's own verdict.
    pub verdict: VerdictId,
    /// The host's own (single-host) verdict.
    pub host_verdict: VerdictId,
    pub reader_io_wait_share: f64,
    /// Median I/O-wait share of the other hosts.
    pub others_median_io_wait_share: f64,
    pub text: String,
}

/// The merged diagnosis (`merged.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Merged {
    pub format_version: u32,
    pub hosts: Vec<HostRow>,
    pub cluster_verdict: VerdictId,
    pub cluster_headline: String,
    /// `(max − min) / max` of the hosts' reader I/O-wait shares (0 when all are 0).
    pub io_wait_imbalance: f64,
    pub stragglers: Vec<Straggler>,
    /// Caveats about the inputs (sessions from one host).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub thresholds: MergeThresholds,
}

/// The constants above, recorded in `merged.json` for the reader of a report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MergeThresholds {
    pub straggler_imbalance: f64,
    pub straggler_min_io_wait_share: f64,
    pub straggler_near_max: f64,
}

impl Default for MergeThresholds {
    fn default() -> Self {
        MergeThresholds {
            straggler_imbalance: STRAGGLER_IMBALANCE,
            straggler_min_io_wait_share: STRAGGLER_MIN_IO_WAIT_SHARE,
            straggler_near_max: STRAGGLER_NEAR_MAX,
        }
    }
}

/// Labels for sessions: each session's `hostname`, except that sessions
/// sharing a hostname (hosts made as network namespaces on one kernel, or
/// the same host recorded twice) are named by their directory's name.
pub fn host_labels(sessions: &[(String, String)]) -> Vec<String> {
    sessions
        .iter()
        .map(|(hostname, dir_name)| {
            let shared = sessions.iter().filter(|(h, _)| h == hostname).count() > 1;
            if shared || hostname.is_empty() {
                dir_name.clone()
            } else {
                hostname.clone()
            }
        })
        .collect()
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Merge per-host rows into the cluster diagnosis.
pub fn merge(hosts: Vec<HostRow>) -> Merged {
    let waits: Vec<f64> = hosts.iter().map(|h| h.reader_io_wait_share).collect();
    let max = waits.iter().copied().fold(0.0, f64::max);
    let min = waits.iter().copied().fold(f64::INFINITY, f64::min);
    let imbalance = if max > 0.0 && hosts.len() > 1 {
        (max - min) / max
    } else {
        0.0
    };
    let mut stragglers = Vec::new();
    if hosts.len() > 1 && imbalance > STRAGGLER_IMBALANCE && max >= STRAGGLER_MIN_IO_WAIT_SHARE {
        for h in &hosts {
            if h.reader_io_wait_share < max * (1.0 - STRAGGLER_NEAR_MAX) {
                continue;
            }
            let others = median(
                hosts
                    .iter()
                    .filter(|o| o.host != h.host)
                    .map(|o| o.reader_io_wait_share)
                    .collect(),
            );
            // A straggler is picked by its I/O wait: when the host's
            // storage-bound finding fired, that is what makes it slower than
            // the others, even if another finding ranks first on the host
            // alone (seen on real data: blkio-throttled O_DIRECT reads whose
            // block requests the kernel issues from the throttle's context,
            // so the host's device bytes undercount and page-cache-served
            // outranks storage-bound).
            let verdict = if h.storage_bound_fired {
                VerdictId::StorageBound
            } else {
                h.verdict
            };
            let own = if verdict == h.verdict {
                String::new()
            } else {
                format!(
                    " (its own verdict reads {}, with storage-bound fired as a runner-up: the imbalance is in \
                     I/O wait, which is what storage-bound measures)",
                    h.verdict
                )
            };
            let waiting: Vec<&str> = hosts
                .iter()
                .filter(|o| o.reader_io_wait_share < max * (1.0 - STRAGGLER_NEAR_MAX))
                .map(|o| o.host.as_str())
                .collect();
            stragglers.push(Straggler {
                host: h.host.clone(),
                verdict,
                host_verdict: h.verdict,
                reader_io_wait_share: h.reader_io_wait_share,
                others_median_io_wait_share: others,
                text: format!(
                    "{} is the straggler: its readers wait on I/O {:.1}% of their time against a median of {:.1}% \
                     on the other hosts (imbalance {:.0}% > {:.0}%), and it is {}{own}; {} wait for it at the \
                     barrier after every step",
                    h.host,
                    h.reader_io_wait_share * 100.0,
                    others * 100.0,
                    imbalance * 100.0,
                    STRAGGLER_IMBALANCE * 100.0,
                    verdict,
                    if waiting.is_empty() {
                        "the other hosts".to_string()
                    } else {
                        waiting.join(", ")
                    }
                ),
            });
        }
    }
    let (cluster_verdict, cluster_headline) = if let Some(first) = stragglers.first() {
        let names: Vec<&str> = stragglers.iter().map(|s| s.host.as_str()).collect();
        (
            first.verdict,
            format!(
                "{} on {} (straggler{}): the job runs at the pace of the slowest host",
                first.verdict,
                names.join(", "),
                if names.len() > 1 { "s" } else { "" }
            ),
        )
    } else {
        without_straggler(&hosts, imbalance)
    };
    let warnings = same_host_warnings(&hosts);
    Merged {
        format_version: 1,
        hosts,
        cluster_verdict,
        cluster_headline,
        io_wait_imbalance: imbalance,
        stragglers,
        warnings,
        thresholds: MergeThresholds::default(),
    }
}

/// The cluster verdict without a straggler by I/O wait. Hosts that agree
/// give their verdict. Otherwise the job runs at the pace of the host
/// whose consumer waits most for data: compute-bound only when every host
/// is, else the verdict of the data-side host with the lowest AU (then the
/// highest confidence).
fn without_straggler(hosts: &[HostRow], imbalance: f64) -> (VerdictId, String) {
    let spread = format!(
        "no straggler (I/O-wait imbalance {:.0}%)",
        imbalance * 100.0
    );
    let first = hosts.first().map(|h| h.verdict);
    if first.is_none() || hosts.iter().all(|h| Some(h.verdict) == first) {
        let v = majority(hosts);
        let agree = hosts.iter().filter(|h| h.verdict == v).count();
        return (
            v,
            format!("{v} on {agree} of {} host(s); {spread}", hosts.len()),
        );
    }
    let au = |h: &HostRow| {
        h.bench_au_percentage
            .or(h.consumer_sleep_share.map(|s| s * 100.0))
    };
    let limiting = hosts
        .iter()
        .filter(|h| h.verdict != VerdictId::ComputeBound)
        .min_by(|a, b| {
            let (x, y) = (au(a).unwrap_or(f64::MAX), au(b).unwrap_or(f64::MAX));
            x.total_cmp(&y).then(b.confidence.total_cmp(&a.confidence))
        });
    let Some(h) = limiting else {
        let v = majority(hosts);
        return (v, format!("{v} on {} host(s); {spread}", hosts.len()));
    };
    let au_text = au(h).map_or(String::new(), |a| format!(", AU {a:.1}%"));
    let others: Vec<String> = hosts
        .iter()
        .filter(|o| o.host != h.host)
        .map(|o| format!("{} {}", o.host, o.verdict))
        .collect();
    (
        h.verdict,
        format!(
            "{} on {}{au_text}, the host that waits most for data: a synchronous job runs at its pace ({}); {spread}",
            h.verdict,
            h.host,
            others.join(", ")
        ),
    )
}

/// Sessions recorded on one host (same non-empty hostname): their figures
/// share one kernel and its devices, so the hosts compared are one machine.
fn same_host_warnings(hosts: &[HostRow]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for h in hosts {
        if h.hostname.is_empty() || seen.contains(&h.hostname.as_str()) {
            continue;
        }
        seen.push(&h.hostname);
        let same: Vec<&str> = hosts
            .iter()
            .filter(|o| o.hostname == h.hostname)
            .map(|o| o.host.as_str())
            .collect();
        if same.len() > 1 {
            out.push(format!(
                "{} were recorded on the same host ({}): they share one kernel, its CPUs and                  devices, so comparing them is comparing one machine with itself (expected                  only for hosts made as network namespaces, or repeated runs)",
                same.join(", "),
                h.hostname
            ));
        }
    }
    out
}

/// The most common verdict; ties go to the higher summed confidence, then the order of `VerdictId::ALL`.
fn majority(hosts: &[HostRow]) -> VerdictId {
    let mut best: Option<(usize, f64, VerdictId)> = None;
    for v in VerdictId::ALL {
        let n = hosts.iter().filter(|h| h.verdict == v).count();
        let c: f64 = hosts
            .iter()
            .filter(|h| h.verdict == v)
            .map(|h| h.confidence)
            .sum();
        if n == 0 {
            continue;
        }
        if best.is_none_or(|(bn, bc, _)| n > bn || (n == bn && c > bc)) {
            best = Some((n, c, v));
        }
    }
    best.map_or(VerdictId::ComputeBound, |(_, _, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(host: &str, verdict: VerdictId, wait: f64) -> HostRow {
        HostRow {
            host: host.into(),
            hostname: host.into(),
            session_dir: format!("/s/{host}"),
            verdict,
            headline: String::new(),
            confidence: 0.8,
            duration_s: 10.0,
            reader_io_wait_share: wait,
            reader_on_cpu_share: 0.1,
            reader_sleeping_share: 0.5,
            consumer_sleep_share: None,
            bench_au_percentage: None,
            read_syscall_mib_per_s: 100.0,
            device_read_mib_per_s: None,
            device_utilization: None,
            device_latency_p50_us: None,
            cpus_used: 0.5,
            complete: true,
            storage_bound_fired: verdict == VerdictId::StorageBound,
        }
    }

    #[test]
    fn one_slow_host_is_the_straggler() {
        let m = merge(vec![
            row("h1", VerdictId::ComputeBound, 0.02),
            row("h2", VerdictId::StorageBound, 0.70),
            row("h3", VerdictId::ComputeBound, 0.03),
        ]);
        assert_eq!(m.stragglers.len(), 1);
        assert_eq!(m.stragglers[0].host, "h2");
        assert_eq!(m.cluster_verdict, VerdictId::StorageBound);
        assert!(m.cluster_headline.contains("h2"), "{}", m.cluster_headline);
        assert!(
            m.stragglers[0].text.contains("h1, h3 wait"),
            "{}",
            m.stragglers[0].text
        );
        assert!((m.stragglers[0].others_median_io_wait_share - 0.025).abs() < 1e-12);
    }

    #[test]
    fn a_straggler_waiting_on_io_is_storage_bound_when_that_finding_fired() {
        let mut slow = row("h2", VerdictId::PageCacheServed, 0.94);
        slow.storage_bound_fired = true;
        let m = merge(vec![row("h1", VerdictId::ComputeBound, 0.02), slow]);
        assert_eq!(m.stragglers.len(), 1);
        assert_eq!(m.stragglers[0].verdict, VerdictId::StorageBound);
        assert_eq!(m.stragglers[0].host_verdict, VerdictId::PageCacheServed);
        assert_eq!(m.cluster_verdict, VerdictId::StorageBound);
        assert!(
            m.stragglers[0]
                .text
                .contains("its own verdict reads page-cache-served"),
            "{}",
            m.stragglers[0].text
        );
        // Without a fired storage-bound finding the host's verdict stands.
        let m = merge(vec![
            row("h1", VerdictId::ComputeBound, 0.02),
            row("h2", VerdictId::CpuStarved, 0.40),
        ]);
        assert_eq!(m.stragglers[0].verdict, VerdictId::CpuStarved);
        assert_eq!(m.cluster_verdict, VerdictId::CpuStarved);
    }

    #[test]
    fn balanced_hosts_have_no_straggler() {
        // Spread 0.50 vs 0.45: 10% < 15%.
        let m = merge(vec![
            row("h1", VerdictId::StorageBound, 0.50),
            row("h2", VerdictId::StorageBound, 0.45),
        ]);
        assert!(m.stragglers.is_empty());
        assert_eq!(m.cluster_verdict, VerdictId::StorageBound);
        // Large relative spread of negligible waits: nobody is called out.
        let m = merge(vec![
            row("h1", VerdictId::ComputeBound, 0.01),
            row("h2", VerdictId::ComputeBound, 0.05),
        ]);
        assert!(m.stragglers.is_empty());
        assert_eq!(m.cluster_verdict, VerdictId::ComputeBound);
    }

    /// Hosts that disagree without a straggler: the job runs at the pace of
    /// the data-side host that computes least, not at the majority's.
    #[test]
    fn disagreeing_hosts_take_the_limiting_hosts_verdict() {
        let mut fast = row("h1", VerdictId::ComputeBound, 0.0);
        fast.bench_au_percentage = Some(98.0);
        let mut reader = row("h2", VerdictId::CpuBoundReader, 0.0);
        reader.bench_au_percentage = Some(40.0);
        let mut other = row("h3", VerdictId::ComputeBound, 0.0);
        other.bench_au_percentage = Some(97.0);
        let m = merge(vec![fast, reader, other]);
        assert!(m.stragglers.is_empty());
        assert_eq!(m.cluster_verdict, VerdictId::CpuBoundReader);
        assert!(
            m.cluster_headline
                .starts_with("cpu-bound-reader on h2, AU 40.0%"),
            "{}",
            m.cluster_headline
        );
        // Of two data-side hosts, the one with the lower AU.
        let mut a = row("a", VerdictId::NetworkBound, 0.0);
        a.consumer_sleep_share = Some(0.7);
        let mut b = row("b", VerdictId::CpuStarved, 0.0);
        b.consumer_sleep_share = Some(0.3);
        assert_eq!(merge(vec![a, b]).cluster_verdict, VerdictId::CpuStarved);
    }

    #[test]
    fn sessions_of_one_host_are_flagged() {
        let mut a = row("a", VerdictId::ComputeBound, 0.0);
        let mut b = row("b", VerdictId::ComputeBound, 0.0);
        a.hostname = "vm".into();
        b.hostname = "vm".into();
        let m = merge(vec![a, b, row("c", VerdictId::ComputeBound, 0.0)]);
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        assert!(m.warnings[0].starts_with("a, b were recorded on the same host (vm)"));
        assert!(
            merge(vec![row("x", VerdictId::ComputeBound, 0.0)])
                .warnings
                .is_empty()
        );
    }

    #[test]
    fn labels_fall_back_to_directory_names_on_shared_hostnames() {
        let l = host_labels(&[
            ("vm".into(), "h1".into()),
            ("vm".into(), "h2".into()),
            ("other".into(), "x".into()),
        ]);
        assert_eq!(l, vec!["h1", "h2", "other"]);
    }

    #[test]
    fn majority_breaks_ties_by_confidence() {
        let mut a = row("a", VerdictId::StorageBound, 0.0);
        a.confidence = 0.9;
        let b = row("b", VerdictId::ComputeBound, 0.0);
        assert_eq!(majority(&[a, b]), VerdictId::StorageBound);
    }
}
