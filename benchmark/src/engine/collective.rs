//! Collective operations between simulated accelerators (ranks).
//!
//! DLIO calls `comm.barrier()` after every step (a simulated allreduce). In
//! thread mode all ranks live in one process and share a [`ThreadCollective`];
//! an MPI mode can implement [`Collective`] over MPI and reuse the rank loop.
//! The barrier is abortable: when one rank fails, the others stop waiting
//! instead of deadlocking.
use std::sync::{Condvar, Mutex};

/// Another rank failed; the run is being torn down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

/// What a rank needs from its peers.
pub trait Collective: Send + Sync {
    /// Number of ranks (DLIO's `comm_size`).
    fn size(&self) -> usize;
    /// Wait until every rank arrives; `Err(Aborted)` if a rank gave up.
    fn barrier(&self) -> Result<(), Aborted>;
    /// Give up: wake every waiter with `Err(Aborted)`, now and later.
    fn abort(&self);
}

#[derive(Debug, Default)]
struct State {
    arrived: usize,
    generation: u64,
    aborted: bool,
}

/// All ranks as threads of one process.
#[derive(Debug)]
pub struct ThreadCollective {
    size: usize,
    state: Mutex<State>,
    cv: Condvar,
}

impl ThreadCollective {
    pub fn new(size: usize) -> Self {
        ThreadCollective {
            size: size.max(1),
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }
}

impl Collective for ThreadCollective {
    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self) -> Result<(), Aborted> {
        // A poisoned lock means a rank panicked: treat it as an abort.
        let mut st = self.state.lock().map_err(|_| Aborted)?;
        if st.aborted {
            return Err(Aborted);
        }
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation = st.generation.wrapping_add(1);
            self.cv.notify_all();
            return Ok(());
        }
        let generation = st.generation;
        while st.generation == generation && !st.aborted {
            st = self.cv.wait(st).map_err(|_| Aborted)?;
        }
        if st.generation == generation {
            Err(Aborted)
        } else {
            Ok(())
        }
    }

    fn abort(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.aborted = true;
        }
        self.cv.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn barrier_synchronizes_and_aborts() {
        let c = ThreadCollective::new(3);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..100 {
                        c.barrier().unwrap();
                    }
                });
            }
        });
        let c = ThreadCollective::new(2);
        std::thread::scope(|s| {
            let h = s.spawn(|| c.barrier());
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.abort();
            assert_eq!(h.join().unwrap(), Err(Aborted));
        });
        assert_eq!(c.barrier(), Err(Aborted));
    }
}
