//! Collective operations between simulated accelerators (ranks).
//!
//! DLIO calls `comm.barrier()` after every step (a simulated allreduce). In
//! thread mode all ranks live in one process and share a [`ThreadCollective`];
//! an MPI mode can implement [`Collective`] over MPI and reuse the rank loop.
//! The barrier is abortable: when one rank fails, the others stop waiting
//! instead of deadlocking. It also carries one bit, OR-ed over the ranks
//! ([`Collective::barrier_agree`]): a stop request seen by any rank (Ctrl-C)
//! stops every rank after the same step, so no rank waits for a peer that left.
use std::sync::{Condvar, Mutex};

/// Another rank failed; the run is being torn down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

/// What a rank needs from its peers.
pub trait Collective: Send + Sync {
    /// Number of ranks (DLIO's `comm_size`).
    fn size(&self) -> usize;
    /// Wait until every rank arrives; returns the OR of every rank's `stop`.
    /// `Err(Aborted)` if a rank gave up.
    fn barrier_agree(&self, stop: bool) -> Result<bool, Aborted>;
    /// Wait until every rank arrives; `Err(Aborted)` if a rank gave up.
    fn barrier(&self) -> Result<(), Aborted> {
        self.barrier_agree(false).map(|_| ())
    }
    /// Give up: wake every waiter with `Err(Aborted)`, now and later.
    fn abort(&self);
}

#[derive(Debug, Default)]
struct State {
    arrived: usize,
    generation: u64,
    aborted: bool,
    /// OR of the `stop` votes of the ranks arrived in this generation.
    vote: bool,
    /// The last completed generation's decision; stable until every waiter
    /// of that generation has read it (the next one cannot complete without them).
    decision: bool,
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

    fn barrier_agree(&self, stop: bool) -> Result<bool, Aborted> {
        // A poisoned lock means a rank panicked: treat it as an abort.
        let mut st = self.state.lock().map_err(|_| Aborted)?;
        if st.aborted {
            return Err(Aborted);
        }
        st.arrived += 1;
        st.vote |= stop;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation = st.generation.wrapping_add(1);
            st.decision = st.vote;
            st.vote = false;
            self.cv.notify_all();
            return Ok(st.decision);
        }
        let generation = st.generation;
        while st.generation == generation && !st.aborted {
            st = self.cv.wait(st).map_err(|_| Aborted)?;
        }
        if st.generation == generation {
            Err(Aborted)
        } else {
            Ok(st.decision)
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

    #[test]
    fn one_stop_vote_stops_every_rank_at_the_same_barrier() {
        let c = ThreadCollective::new(3);
        let decisions: Vec<Vec<bool>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|rank| {
                    let c = &c;
                    s.spawn(move || {
                        (0..5)
                            .map(|i| c.barrier_agree(rank == 1 && i == 3).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for d in decisions {
            assert_eq!(d, vec![false, false, false, true, false]);
        }
    }
}
