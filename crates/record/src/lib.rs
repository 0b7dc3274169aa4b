//! The recorder: everything that touches the kernel and the traced
//! processes, and the session directory it leaves. Nothing here knows the
//! analysis: the live view gets its verdicts from the caller
//! ([`record::live::LiveOptions::analysis`]).
//!
//! ```text
//!  ebpf/probes (in the kernel)
//!        │ maps / ring buffers
//!        ▼
//!  probes::    load + attach: the one kernel seam (tracefs, BTF, aya)
//!        │ raw counters, stack ids, wait records
//!        ▼
//!  record::    launch or attach, follow the workers (select, procfs),
//!              drain each turn (run_loop ─► recorder), aggregate (pure)
//!        │ user stacks, Python frames ─► [storprof-stacks]: unwound,
//!        │                                 symbolized, Python frames decoded
//!        ▼
//!  record::session_writer ─► session directory [storprof-session]
//! ```
pub mod probes;
pub mod record;
