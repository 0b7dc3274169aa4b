//! Types shared by the kernel-side probes (`storprof-ebpf`) and the user-side
//! loader (`storprof`). Everything here is `#[repr(C)]`, has explicit padding
//! and a compile-time size assert, so both sides agree byte for byte.
#![no_std]

/// Placeholder until the probe types land.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeConfig {
    /// tgid of storprof itself; its children are followed from fork.
    pub root_tgid: u32,
    /// Padding, always zero.
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<ProbeConfig>() == 8);

#[cfg(feature = "user")]
// SAFETY: ProbeConfig is repr(C), Copy, has no padding bytes that could be
// uninitialised (explicit `_pad`), and every bit pattern is valid.
unsafe impl aya::Pod for ProbeConfig {}
