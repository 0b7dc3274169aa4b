//! waits.json: the wake-up edges between threads (who woke whom, from
//! what wait, how long), and the waits still pending at the end.
use super::*;

/// `SessionInfo::features` key of the wake-edge semantics a recording has.
pub const FEATURE_WAKE_EDGES: &str = "wake_edges";
/// Its value since wake edges carry `lock_wait` and interrupt wakers are
/// the innermost handler's (absent before).
pub const WAKE_EDGES_VERSION: &str = "2";

/// `waits.json`: the wake-up graph of the recording.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitGraph {
    /// Width of the series' buckets (the time series' buckets), ns.
    pub bucket_ns: u64,
    pub edges: Vec<WakeEdge>,
    /// Traced threads still off CPU (not woken) for a second or more when
    /// the graph was built, longest first: what a stalled job waits on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingWait>,
}

/// A traced thread off CPU, not woken yet, when the recording ended (or
/// when a live view looked).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PendingWait {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// "sleeping", "uninterruptible" or "other".
    pub state: String,
    /// How long it had been off CPU, seconds.
    pub blocked_s: f64,
    /// Its stack when it left the CPU, outermost frame first: user frames,
    /// then kernel frames.
    #[serde(default)]
    pub stack: Vec<String>,
}

/// Wake-ups of one waker that ended blocked intervals of one traced thread
/// in one state, syscall and futex word.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WakeEdge {
    /// "task", "hardirq", "softirq", "timer" or "idle".
    pub waker_kind: String,
    /// The waking task (0 for interrupts).
    pub waker_pid: u32,
    /// The waking task, or the CPU number for interrupts.
    pub waker_tid: u32,
    pub waker_comm: String,
    /// Whether the waker is a traced thread.
    #[serde(default)]
    pub waker_traced: bool,
    pub wakee_pid: u32,
    pub wakee_tid: u32,
    /// "sleeping", "uninterruptible" or "other".
    pub wakee_state: String,
    /// The syscall the wakee blocked in, when known.
    #[serde(default)]
    pub syscall: Option<String>,
    /// A futex wait for a lock: a glibc lock's wait, or a wait on a word
    /// the waker had waited on lately too, a lock both contend for (false:
    /// a hand-off, or not a futex wait).
    #[serde(default)]
    pub futex_shared: bool,
    /// Of `futex_shared` waits, the wakee waited for a glibc or PI lock
    /// (known from the wait itself); false for a word the waker had waited
    /// on too (a lock both contend for, or a condition variable next to a
    /// mutex), and in sessions recorded before it was told apart.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lock_wait: bool,
    /// Σ blocked time these wake-ups ended, ns.
    pub blocked_ns: u64,
    pub count: u64,
    /// First and last wake-up, seconds since the recording's start.
    pub first_s: f64,
    pub last_s: f64,
    /// The blocked time the first wake-up ended, ns.
    #[serde(default)]
    pub first_blocked_ns: u64,
    /// The waker's stack at a sampled wake-up, outermost frame first
    /// (user frames, then kernel frames).
    #[serde(default)]
    pub waker_stack: Vec<String>,
    /// (bucket, blocked ns, wake-ups) of the buckets with wake-ups.
    #[serde(default)]
    pub series: Vec<(u32, u64, u64)>,
}
