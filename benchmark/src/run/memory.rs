//! Memory guard: estimate the reader buffer memory of a run before it starts,
//! and refuse (or cap the prefetch depth) instead of being OOM-killed.
//!
//! ```text
//!  DlioConfig + first training file's footer (bytes per fetch)
//!      ─► ReaderMemory ─► estimate() ─► bytes   vs   budget (90 % of MemAvailable)
//!          fits: run   too large: --fit-memory ─► fit_prefetch() caps reader.prefetch_workers
//!                                 otherwise    ─► MemoryRefusal (largest safe settings; exit 2)
//! ```
//!
//! The model follows what the readers hold (see `reader::raw`): every read
//! thread has up to `prefetch_depth` fetches in flight (`reader.prefetch_workers`),
//! each `bytes_per_fetch` (a unit of `coalesce_rgs` row groups, or an NPZ
//! array), times 2 for decoding readers (encoded bytes + decoded arrays);
//! each rank's cache keeps up to `cache_bytes` of finished units (no more
//! than the rank's share of the dataset); plus a fixed overhead per rank
//! (threads, footers, runtime) and the process-wide buffer pool.
use crate::error::BenchError;

/// Memory a rank needs besides its read buffers: thread stacks touched,
/// cached footers, the S3 runtime, channels. Measured well under this.
pub const PER_RANK_OVERHEAD: u64 = 32 << 20;

/// Share of `MemAvailable` a run may plan to use (the rest is headroom for
/// the page cache the run itself fills, the S3 server, the rest of the host).
pub const BUDGET_SHARE: f64 = 0.9;

/// Inputs of the estimate (all plain numbers, so it is a pure function).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderMemory {
    /// Simulated accelerators (ranks) on this host.
    pub accelerators: u64,
    /// Read threads per rank (`reader.read_threads`; 0 reads in the consumer, counted as 1).
    pub read_threads: u64,
    /// Fetches in flight per read thread (`reader.prefetch_workers`).
    pub prefetch_depth: u64,
    /// Bytes of one fetch (largest unit of `coalesce_rgs` row groups, or an NPZ array).
    pub bytes_per_fetch: u64,
    /// 1 for `raw`, 2 for decoding readers (the encoded bytes and the arrays).
    pub copies_per_fetch: u64,
    /// Finished units one rank's cache keeps (min of its capacity and the rank's data).
    pub cache_bytes_per_rank: u64,
    /// Fixed memory per rank ([`PER_RANK_OVERHEAD`]).
    pub per_rank_overhead: u64,
    /// Memory shared by all ranks of the process (the idle buffer pool).
    pub shared_bytes: u64,
}

impl ReaderMemory {
    /// Bytes one rank's read threads hold in flight.
    pub fn in_flight_per_rank(&self) -> u64 {
        self.read_threads
            .max(1)
            .saturating_mul(self.prefetch_depth.max(1))
            .saturating_mul(self.bytes_per_fetch)
            .saturating_mul(self.copies_per_fetch.max(1))
    }
}

impl ReaderMemory {
    /// Fetches in flight at once over all ranks: one read buffer each.
    pub fn fetches_in_flight(&self) -> u64 {
        self.accelerators
            .max(1)
            .saturating_mul(self.read_threads.max(1))
            .saturating_mul(self.prefetch_depth.max(1))
    }
}

/// Estimated peak reader memory of a run, in bytes:
/// `accelerators × (read_threads × prefetch_depth × bytes_per_fetch × copies
/// + cache + overhead) + shared`.
pub fn estimate(m: &ReaderMemory) -> u64 {
    let per_rank = m
        .in_flight_per_rank()
        .saturating_add(m.cache_bytes_per_rank)
        .saturating_add(m.per_rank_overhead);
    m.accelerators
        .max(1)
        .saturating_mul(per_rank)
        .saturating_add(m.shared_bytes)
}

/// The largest `v` in `1..=max` with `estimate_at(v) <= budget`, if any;
/// `estimate_at` must grow with `v` (binary search).
fn largest_fitting(max: u64, budget: u64, estimate_at: impl Fn(u64) -> u64) -> Option<u64> {
    if estimate_at(1) > budget {
        return None;
    }
    let (mut lo, mut hi) = (1u64, max.max(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if estimate_at(mid) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// The largest prefetch depth (≥ 1) whose estimate fits `budget`, if any.
pub fn fit_prefetch(m: &ReaderMemory, budget: u64) -> Option<u64> {
    largest_fitting(m.prefetch_depth, budget, |d| {
        estimate(&ReaderMemory {
            prefetch_depth: d,
            ..*m
        })
    })
}

/// The largest read-thread count (≥ 1) that fits `budget` at the asked depth, if any.
pub fn fit_read_threads(m: &ReaderMemory, budget: u64) -> Option<u64> {
    largest_fitting(m.read_threads, budget, |t| {
        estimate(&ReaderMemory {
            read_threads: t,
            ..*m
        })
    })
}

/// The largest accelerator count (≥ 1) that fits `budget`, if any.
pub fn fit_accelerators(m: &ReaderMemory, budget: u64) -> Option<u64> {
    let one = estimate(&ReaderMemory {
        accelerators: 1,
        ..*m
    });
    if one > budget {
        return None;
    }
    let per_rank = one - m.shared_bytes;
    Some(((budget - m.shared_bytes) / per_rank.max(1)).clamp(1, m.accelerators.max(1)))
}

/// What the guard decided.
#[derive(Clone, Debug, PartialEq)]
pub enum MemoryDecision {
    /// The run fits as asked.
    Fits { estimate: u64, budget: u64 },
    /// `--fit-memory`: the prefetch depth was lowered to `depth`.
    Capped {
        depth: u64,
        estimate: u64,
        budget: u64,
    },
}

/// `available` is MemAvailable in bytes; `fit` caps the prefetch depth when
/// the asked one does not fit. Errors with the largest safe settings.
pub fn check(m: &ReaderMemory, available: u64, fit: bool) -> Result<MemoryDecision, BenchError> {
    let budget = (available as f64 * BUDGET_SHARE) as u64;
    let need = estimate(m);
    if need <= budget {
        return Ok(MemoryDecision::Fits {
            estimate: need,
            budget,
        });
    }
    if fit && let Some(depth) = fit_prefetch(m, budget) {
        return Ok(MemoryDecision::Capped {
            depth,
            estimate: estimate(&ReaderMemory {
                prefetch_depth: depth,
                ..*m
            }),
            budget,
        });
    }
    Err(BenchError::MemoryGuard {
        estimate: need,
        budget,
        message: refusal_message(m, need, available, budget),
    })
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The refusal: what was asked, why it does not fit, the largest safe settings.
pub fn refusal_message(m: &ReaderMemory, need: u64, available: u64, budget: u64) -> String {
    let mut safe = Vec::new();
    if let Some(d) = fit_prefetch(m, budget) {
        safe.push(format!(
            "reader.prefetch_workers={d} (with reader.read_threads={})",
            m.read_threads
        ));
    }
    if let Some(t) = fit_read_threads(m, budget) {
        safe.push(format!(
            "reader.read_threads={t} (with reader.prefetch_workers={})",
            m.prefetch_depth
        ));
    }
    if let Some(n) = fit_accelerators(m, budget) {
        safe.push(format!(
            "--accelerators {n} (with read_threads={}, prefetch_workers={})",
            m.read_threads, m.prefetch_depth
        ));
    }
    let safe = if safe.is_empty() {
        "none: even 1 read thread with prefetch_workers=1 does not fit; lower reader.coalesce_rgs \
         or use smaller row groups"
            .to_string()
    } else {
        safe.join("; or ")
    };
    format!(
        "memory guard: the run would need about {} of reader memory ({} accelerator(s) × ({} read thread(s) × \
         prefetch_workers {} × {} per fetch{} + {} cache + {} overhead) + {} shared) but {} is available \
         ({} budget = {:.0}% of MemAvailable). Largest safe settings: {}. Or pass --fit-memory to cap \
         prefetch_workers.",
        gib(need),
        m.accelerators,
        m.read_threads.max(1),
        m.prefetch_depth,
        mib(m.bytes_per_fetch),
        if m.copies_per_fetch > 1 {
            format!(" × {} copies (decode)", m.copies_per_fetch)
        } else {
            String::new()
        },
        mib(m.cache_bytes_per_rank),
        mib(m.per_rank_overhead),
        mib(m.shared_bytes),
        gib(available),
        gib(budget),
        BUDGET_SHARE * 100.0,
        safe
    )
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn mem_available() -> Result<u64, BenchError> {
    let text = std::fs::read_to_string("/proc/meminfo").map_err(|source| BenchError::Io {
        path: "/proc/meminfo".into(),
        source,
    })?;
    parse_mem_available(&text).ok_or_else(|| {
        BenchError::System("/proc/meminfo has no MemAvailable line (kernel < 3.14?)".into())
    })
}

/// `MemAvailable:  123 kB` → bytes.
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// The seed-002 study's NP=8 RT=8 cell: 2 buffers × 99 MiB per worker.
    fn study(np: u64, rt: u64) -> ReaderMemory {
        ReaderMemory {
            accelerators: np,
            read_threads: rt,
            prefetch_depth: 2,
            bytes_per_fetch: 99 * MIB,
            copies_per_fetch: 1,
            cache_bytes_per_rank: 0,
            per_rank_overhead: 0,
            shared_bytes: 0,
        }
    }

    #[test]
    fn one_read_buffer_per_fetch_in_flight() {
        assert_eq!(study(8, 8).fetches_in_flight(), 8 * 8 * 2);
        // read_threads 0 reads in the consumer: still one fetch at a time.
        let m = ReaderMemory {
            read_threads: 0,
            prefetch_depth: 1,
            ..study(1, 0)
        };
        assert_eq!(m.fetches_in_flight(), 1);
    }

    #[test]
    fn estimate_is_the_product_plus_overheads() {
        // 8 × 8 × 2 × 99 MiB = 12,672 MiB: the study's "≈ 12+ GB".
        assert_eq!(estimate(&study(8, 8)), 8 * 8 * 2 * 99 * MIB);
        let m = ReaderMemory {
            copies_per_fetch: 2,
            cache_bytes_per_rank: 100 * MIB,
            per_rank_overhead: PER_RANK_OVERHEAD,
            shared_bytes: GIB,
            ..study(2, 0)
        };
        // read_threads 0 reads in the consumer: one fetch path.
        assert_eq!(
            estimate(&m),
            2 * (2 * 99 * MIB * 2 + 100 * MIB + PER_RANK_OVERHEAD) + GIB
        );
        assert_eq!(
            estimate(&ReaderMemory {
                accelerators: u64::MAX,
                ..m
            }),
            u64::MAX
        );
    }

    #[test]
    fn refuses_with_largest_safe_settings() {
        let m = study(8, 8);
        let available = 10 * GIB; // budget 9 GiB: 12.4 GiB does not fit
        let e = check(&m, available, false).unwrap_err().to_string();
        assert!(e.contains("memory guard"), "{e}");
        assert!(e.contains("12.38 GiB"), "{e}");
        // 8 × 8 × 1 × 99 MiB = 6.2 GiB fits; 8 × 5 × 2 × 99 = 7.7 GiB fits, 6 threads: 9.3 do not.
        assert!(
            e.contains("reader.prefetch_workers=1 (with reader.read_threads=8)"),
            "{e}"
        );
        assert!(
            e.contains("reader.read_threads=5 (with reader.prefetch_workers=2)"),
            "{e}"
        );
        assert!(e.contains("--accelerators 5"), "{e}");
        assert!(e.contains("--fit-memory"), "{e}");
        // --fit-memory caps the depth.
        match check(&m, available, true).unwrap() {
            MemoryDecision::Capped {
                depth,
                estimate,
                budget,
            } => {
                assert_eq!(depth, 1);
                assert!(estimate <= budget);
            }
            other => panic!("{other:?}"),
        }
        // Nothing fits: refused even with --fit-memory.
        let e = check(&m, 512 * MIB, true).unwrap_err().to_string();
        assert!(e.contains("none: even 1 read thread"), "{e}");
        // Fits as asked.
        assert!(matches!(
            check(&study(2, 2), 48 * GIB, false).unwrap(),
            MemoryDecision::Fits { .. }
        ));
    }

    #[test]
    fn fit_prefetch_is_the_largest_depth_that_fits() {
        let m = ReaderMemory {
            prefetch_depth: 64,
            ..study(1, 1)
        };
        assert_eq!(fit_prefetch(&m, 99 * MIB * 10), Some(10));
        assert_eq!(fit_prefetch(&m, 99 * MIB * 10 - 1), Some(9));
        assert_eq!(
            fit_prefetch(&m, 99 * MIB * 100),
            Some(64),
            "never above the asked depth"
        );
        assert_eq!(fit_prefetch(&m, 99 * MIB - 1), None);
    }

    #[test]
    fn parses_meminfo() {
        let t = "MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(parse_mem_available(t), Some(20_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert!(mem_available().unwrap() > 0);
    }
}
