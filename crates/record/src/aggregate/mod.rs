//! Pure functions that turn drained map contents and events into the session
//! model: threads, devices, time series, folded stacks. No kernel access, no
//! files: unit-tested without root.
mod block;
mod folded;
mod host_cpu;
mod names;
mod readings;
mod series;
mod threads;
mod vmstat;
mod waits;

pub use block::*;
pub use folded::*;
pub use host_cpu::*;
pub use names::*;
pub use series::*;
pub use threads::*;
pub use vmstat::*;
pub use waits::*;

/// The time series' bucket: one second.
pub const BUCKET_NS: u64 = 1_000_000_000;

/// Map contents the tests of several modules share.
#[cfg(test)]
mod test_data {
    use storprof_common::{SyscallAcc, SyscallKey, ThreadAcc};

    pub fn thread(tgid: u32, tid: u32, comm: &str, on: u64) -> ThreadAcc {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm.as_bytes());
        ThreadAcc {
            tgid,
            tid,
            on_cpu_ns: on,
            off_cpu_ns: [1, 2, 3, 4],
            page_cache_pages: 5,
            page_cache_write_pages: 6,
            comm: c,
        }
    }

    pub fn sys(tgid: u32, tid: u32, nr: u32, count: u64, bytes: u64) -> (SyscallKey, SyscallAcc) {
        let mut acc = SyscallAcc {
            count,
            bytes,
            total_ns: count * 100,
            ..SyscallAcc::ZERO
        };
        acc.latency_log2_ns[6] = count;
        (
            SyscallKey {
                tgid,
                tid,
                nr,
                _pad: 0,
            },
            acc,
        )
    }
}
