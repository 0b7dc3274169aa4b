//! MPI mode: `mpirun -n N storprof bench|datagen ...`, one MPI process per
//! simulated accelerator (DLIO's process model), built with the `mpi` feature.
//!
//! ```text
//!  MPI_Init ─► all-gather of host labels (rank → host, for error messages)
//!  every rank: engine::run_rank(its rank, MpiCollective)       (same loop as the threads)
//!     barrier_agree(stop) = coordinator protocol with a deadline:
//!        rank r>0 ──ARRIVE[seq,stop]──► rank 0 ──RELEASE[seq,OR(stop)]──► rank r
//!        a peer silent past the timeout ─► message naming rank and host, MPI_Abort
//!  end: rank r>0 ──GATHER(json: timings, read stats, host facts)──► rank 0
//!  rank 0: the same TrainResult as the in-process mode ─► bench's metrics and output
//! ```
//! The barrier is built from point-to-point messages and probes instead of
//! `MPI_Barrier` so that it can give up: a blocking collective would hang
//! forever on a rank that stopped answering. A rank that *dies* is caught by
//! mpirun itself (it names the rank and node and kills the job); the timeout
//! covers ranks that hang and hosts that stop answering.
//!
//! [`run_bench`] and [`run_datagen`] are what `storprof bench|datagen` run
//! under mpirun: the world is bench's rank set, datagen's ranks split the files.
//!
//! Hosts are named by [`crate::output::host_label`] (`$STORPROF_HOST`, else
//! the hostname), so network-namespace hosts on one machine stay apart.
use std::time::Duration;

use super::bench::{BenchOptions, BenchReport};
use super::datagen::DatagenOptions;
use crate::storage::{S3Options, Storage};

/// Environment variable with the barrier/gather timeout in seconds.
pub const TIMEOUT_ENV: &str = "STORPROF_MPI_TIMEOUT";
/// Default barrier/gather timeout: longer than any step we expect (a step
/// waits for its slowest rank's batch), short enough that a hung job ends.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The timeout from [`TIMEOUT_ENV`], else [`DEFAULT_TIMEOUT`].
pub fn timeout_from_env() -> Result<Duration, crate::BenchError> {
    match std::env::var(TIMEOUT_ENV) {
        Err(_) => Ok(DEFAULT_TIMEOUT),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| crate::BenchError::BadParam {
                key: TIMEOUT_ENV.into(),
                reason: format!("'{v}' is not a positive number of seconds"),
            }),
    }
}

/// The world size when this process was started by mpirun (OpenMPI, MPICH/PMI).
pub fn launched_world_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse().ok())
}

#[cfg(feature = "mpi")]
pub use imp::MpiWorld;

#[cfg(feature = "mpi")]
mod imp {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use mpi::Threading;
    use mpi::environment::Universe;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Communicator, SimpleCommunicator};
    use mpi::traits::CommunicatorCollectives;

    use crate::engine::collective::{Aborted, Collective};
    use crate::engine::{Clock, RankResult, TrainObserver, TrainPlan, TrainResult, run_rank};
    use crate::error::BenchError;
    use crate::metrics::{BlockTimings, RankEpoch, ReadStats};
    use crate::output::{HostFacts, host_label};
    use crate::reader::SampleReader;
    use crate::run::bench::{RankSet, Trained};

    const TAG_ARRIVE: i32 = 7101;
    const TAG_RELEASE: i32 = 7102;
    const TAG_GATHER: i32 = 7103;
    /// Bytes per host label in the start-up all-gather.
    const LABEL_BYTES: usize = 256;

    /// The communicator, handed between threads under a mutex.
    struct Comm(SimpleCommunicator);
    // SAFETY: MPI is initialized with MPI_THREAD_SERIALIZED (checked in
    // `MpiWorld::init`), which allows calls from any thread as long as they
    // are serialized; every use goes through `MpiWorld::comm`'s mutex.
    unsafe impl Send for Comm {}

    /// This process's place in the MPI job. Dropping it finalizes MPI.
    pub struct MpiWorld {
        comm: Mutex<Comm>,
        rank: usize,
        size: usize,
        /// Host label of every rank.
        hosts: Vec<String>,
        timeout: Duration,
        /// Barriers completed (names the barrier in timeout messages).
        seq: AtomicU64,
        // Last: MPI_Finalize runs after the communicator is gone.
        _universe: Universe,
    }

    impl MpiWorld {
        /// `MPI_Init_thread(SERIALIZED)`, rank, size, and every rank's host label.
        pub fn init(timeout: Duration) -> Result<Self, BenchError> {
            let (universe, provided) = mpi::initialize_with_threading(Threading::Serialized)
                .ok_or_else(|| BenchError::Mpi("MPI was already initialized".into()))?;
            if provided < Threading::Serialized {
                return Err(BenchError::Mpi(format!(
                    "the MPI library provides thread level {provided:?}, storprof needs Serialized"
                )));
            }
            let world = universe.world();
            let rank = usize::try_from(world.rank()).unwrap_or(0);
            let size = usize::try_from(world.size()).unwrap_or(1).max(1);
            let mut mine = [0u8; LABEL_BYTES];
            let label = host_label();
            let n = label.len().min(LABEL_BYTES);
            mine[..n].copy_from_slice(&label.as_bytes()[..n]);
            let mut all = vec![0u8; LABEL_BYTES * size];
            // Start-up only: every process has just been launched by mpirun,
            // which fails by itself when a host cannot be reached.
            world.all_gather_into(&mine[..], &mut all[..]);
            let hosts = all
                .chunks_exact(LABEL_BYTES)
                .map(|c| {
                    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                    String::from_utf8_lossy(&c[..end]).into_owned()
                })
                .collect();
            Ok(MpiWorld {
                comm: Mutex::new(Comm(world)),
                rank,
                size,
                hosts,
                timeout,
                seq: AtomicU64::new(0),
                _universe: universe,
            })
        }

        pub fn rank(&self) -> usize {
            self.rank
        }

        pub fn size(&self) -> usize {
            self.size
        }

        /// Host label of `rank`.
        pub fn host_of(&self, rank: usize) -> &str {
            self.hosts.get(rank).map_or("?", String::as_str)
        }

        /// Print `msg` (prefixed with this rank and host) and end the whole job.
        pub fn fail(&self, msg: &str) -> ! {
            eprintln!(
                "storprof: error: rank {} on host {}: {msg}",
                self.rank,
                self.host_of(self.rank)
            );
            match self.comm.lock() {
                Ok(c) => c.0.abort(1),
                Err(p) => p.into_inner().0.abort(1),
            }
        }

        /// Barrier that returns the OR of every rank's `stop`, or ends the
        /// job with a message naming the missing rank after the timeout.
        pub fn agree(&self, stop: bool) -> bool {
            let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
            if self.size == 1 {
                return stop;
            }
            let outcome = {
                let Ok(guard) = self.comm.lock() else {
                    self.fail("MPI communicator lock poisoned");
                };
                let comm = &guard.0;
                if self.rank == 0 {
                    self.coordinate(comm, seq, stop)
                } else {
                    self.follow(comm, seq, stop)
                }
            };
            match outcome {
                Ok(decision) => decision,
                Err(msg) => self.fail(&msg),
            }
        }

        fn coordinate(
            &self,
            comm: &SimpleCommunicator,
            seq: u64,
            stop: bool,
        ) -> Result<bool, String> {
            let deadline = Instant::now() + self.timeout;
            let mut decision = stop;
            for r in 1..self.size {
                let peer = comm.process_at_rank(rank_i32(r));
                if !wait_for(
                    || peer.immediate_probe_with_tag(TAG_ARRIVE).is_some(),
                    deadline,
                ) {
                    return Err(format!(
                        "rank {r} on host {} did not reach barrier {seq} within {:.0} s \
                         (hung, or its host stopped answering); ending the job",
                        self.host_of(r),
                        self.timeout.as_secs_f64()
                    ));
                }
                let mut msg = [0u64; 2];
                peer.receive_into_with_tag(&mut msg[..], TAG_ARRIVE);
                if msg[0] != seq {
                    return Err(format!(
                        "rank {r} on host {} is at barrier {} while rank 0 is at {seq}",
                        self.host_of(r),
                        msg[0]
                    ));
                }
                decision |= msg[1] != 0;
            }
            let reply = [seq, u64::from(decision)];
            for r in 1..self.size {
                comm.process_at_rank(rank_i32(r))
                    .send_with_tag(&reply[..], TAG_RELEASE);
            }
            Ok(decision)
        }

        fn follow(&self, comm: &SimpleCommunicator, seq: u64, stop: bool) -> Result<bool, String> {
            let root = comm.process_at_rank(0);
            root.send_with_tag(&[seq, u64::from(stop)][..], TAG_ARRIVE);
            // Twice the coordinator's timeout, so that rank 0, which knows
            // which rank is missing, reports first.
            let deadline = Instant::now() + self.timeout * 2;
            if !wait_for(
                || root.immediate_probe_with_tag(TAG_RELEASE).is_some(),
                deadline,
            ) {
                return Err(format!(
                    "rank 0 on host {} did not release barrier {seq} within {:.0} s; ending the job",
                    self.host_of(0),
                    (self.timeout * 2).as_secs_f64()
                ));
            }
            let mut msg = [0u64; 2];
            root.receive_into_with_tag(&mut msg[..], TAG_RELEASE);
            Ok(msg[1] != 0)
        }

        /// Rank 0 gets every rank's bytes (its own first); the others `None`.
        pub fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
            let outcome = {
                let Ok(guard) = self.comm.lock() else {
                    self.fail("MPI communicator lock poisoned");
                };
                let comm = &guard.0;
                if self.rank != 0 {
                    comm.process_at_rank(0).send_with_tag(&mine[..], TAG_GATHER);
                    return None;
                }
                let deadline = Instant::now() + self.timeout;
                let mut all = vec![mine];
                let mut err = None;
                for r in 1..self.size {
                    let peer = comm.process_at_rank(rank_i32(r));
                    if !wait_for(
                        || peer.immediate_probe_with_tag(TAG_GATHER).is_some(),
                        deadline,
                    ) {
                        err = Some(format!(
                            "rank {r} on host {} did not send its results within {:.0} s; ending the job",
                            self.host_of(r),
                            self.timeout.as_secs_f64()
                        ));
                        break;
                    }
                    let (bytes, _) = peer.receive_vec_with_tag::<u8>(TAG_GATHER);
                    all.push(bytes);
                }
                err.map_or(Ok(all), Err)
            };
            match outcome {
                Ok(all) => Some(all),
                Err(msg) => self.fail(&msg),
            }
        }
    }

    fn rank_i32(r: usize) -> i32 {
        i32::try_from(r).unwrap_or(i32::MAX)
    }

    /// Poll `ready` with a growing nap (1 µs … 1 ms) until it holds or the deadline passes.
    fn wait_for(mut ready: impl FnMut() -> bool, deadline: Instant) -> bool {
        let mut nap = Duration::from_micros(1);
        loop {
            if ready() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }

    /// [`Collective`] over the MPI job. A timeout ends the job (MPI_Abort),
    /// so `Err(Aborted)` is never returned.
    struct MpiCollective<'a>(&'a MpiWorld);

    impl Collective for MpiCollective<'_> {
        fn size(&self) -> usize {
            self.0.size
        }
        fn barrier_agree(&self, stop: bool) -> Result<bool, Aborted> {
            Ok(self.0.agree(stop))
        }
        fn abort(&self) {
            self.0.fail("aborting the job");
        }
    }

    /// What a rank sends rank 0 at the end.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct WireRank {
        rank: usize,
        stopped: bool,
        elapsed: f64,
        host: HostFacts,
        epochs: Vec<WireEpoch>,
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    struct WireEpoch {
        epoch: u32,
        start: f64,
        end: f64,
        block: BlockTimings,
        /// bytes_read, requests, samples, sample_bytes.
        read: [u64; 4],
        checkpoints: Vec<crate::metrics::CheckpointSave>,
    }

    impl RankSet for MpiWorld {
        fn size(&self) -> usize {
            self.size
        }
        fn local_ranks(&self) -> Vec<usize> {
            vec![self.rank]
        }
        fn is_reporter(&self) -> bool {
            self.rank == 0
        }
        fn train(
            &self,
            plan: &TrainPlan,
            readers: &[Arc<dyn SampleReader>],
            observer: &dyn TrainObserver,
            stop: &AtomicBool,
        ) -> Result<Option<Trained>, BenchError> {
            let Some(reader) = readers.first() else {
                return Err(BenchError::Mpi("no reader for this MPI rank".into()));
            };
            let collective = MpiCollective(self);
            // Start the clocks together (within one barrier's latency).
            self.agree(false);
            let clock = Clock::new();
            let started = chrono::Local::now();
            let obs = (self.rank == 0).then_some(observer);
            let mine = match run_rank(
                plan,
                self.rank,
                reader.as_ref(),
                &collective,
                &clock,
                obs,
                stop,
            ) {
                Ok(r) => r,
                Err(e) => self.fail(&e.to_string()),
            };
            let wire = WireRank {
                rank: self.rank,
                stopped: mine.stopped,
                elapsed: clock.now(),
                host: HostFacts::read(),
                epochs: mine
                    .epochs
                    .iter()
                    .map(|e| WireEpoch {
                        epoch: e.epoch,
                        start: e.start,
                        end: e.end,
                        block: e.block.clone(),
                        checkpoints: e.checkpoints.clone(),
                        read: [
                            e.read.bytes_read,
                            e.read.requests,
                            e.read.samples,
                            e.read.sample_bytes,
                        ],
                    })
                    .collect(),
            };
            let bytes = serde_json::to_vec(&wire)
                .map_err(|e| BenchError::Encoding(format!("encoding rank results: {e}")))?;
            let Some(all) = self.gather(bytes) else {
                return Ok(None);
            };
            let mut ranks = Vec::with_capacity(all.len());
            let mut hosts: Vec<HostFacts> = Vec::new();
            let mut rank_hosts = Vec::with_capacity(all.len());
            let mut elapsed: f64 = 0.0;
            for (i, bytes) in all.iter().enumerate() {
                let w: WireRank = serde_json::from_slice(bytes).map_err(|e| {
                    BenchError::Encoding(format!(
                        "results of rank {i} (host {}) do not decode: {e}",
                        self.host_of(i)
                    ))
                })?;
                elapsed = elapsed.max(w.elapsed);
                let h = match hosts.iter().position(|h| h.hostname == w.host.hostname) {
                    Some(h) => h,
                    None => {
                        hosts.push(w.host);
                        hosts.len() - 1
                    }
                };
                rank_hosts.push(h);
                ranks.push(RankResult {
                    rank: w.rank,
                    stopped: w.stopped,
                    epochs: w
                        .epochs
                        .into_iter()
                        .map(|e| RankEpoch {
                            epoch: e.epoch,
                            start: e.start,
                            end: e.end,
                            block: e.block,
                            read: ReadStats {
                                bytes_read: e.read[0],
                                requests: e.read[1],
                                samples: e.read[2],
                                sample_bytes: e.read[3],
                            },
                            checkpoints: e.checkpoints,
                        })
                        .collect(),
                });
            }
            let interrupted = ranks.iter().any(|r| r.stopped);
            Ok(Some(Trained {
                result: TrainResult {
                    started,
                    elapsed,
                    ranks,
                    interrupted,
                },
                hosts,
                rank_hosts,
            }))
        }
    }
}

/// `mpirun ... storprof bench`: this process is one rank of the MPI world.
#[cfg(feature = "mpi")]
pub fn run_bench(opts: &BenchOptions, s3: &S3Options) -> anyhow::Result<Option<BenchReport>> {
    if opts.accelerators > 1 {
        anyhow::bail!(
            "--accelerators {} under mpirun: the simulated accelerators are the MPI ranks (mpirun -n N)",
            opts.accelerators
        );
    }
    let world = MpiWorld::init(timeout_from_env()?)?;
    match super::run_bench_ranks(opts, s3, &world) {
        Ok(r) => Ok(r),
        // One rank failing (bad data, missing file) must not leave the others waiting.
        Err(e) => world.fail(&format!("{e:#}")),
    }
}

/// Without the `mpi` feature: an error saying how to rebuild.
#[cfg(not(feature = "mpi"))]
pub fn run_bench(_: &BenchOptions, _: &S3Options) -> anyhow::Result<Option<BenchReport>> {
    anyhow::bail!(NO_MPI)
}

#[cfg(not(feature = "mpi"))]
const NO_MPI: &str = "started by mpirun with several ranks, but this storprof was built without MPI \
                      support; rebuild with `cargo build --release --features storprof/mpi`";

/// `mpirun ... storprof datagen`: the ranks split the files (rank r writes r, r+N, …).
#[cfg(feature = "mpi")]
pub fn run_datagen(opts: &DatagenOptions, storage: &dyn Storage) -> anyhow::Result<()> {
    use super::datagen;
    let world = MpiWorld::init(timeout_from_env()?)?;
    let (rank, size) = (world.rank(), world.size());
    // Every rank checks (and refuses to overwrite) before any rank writes.
    if let Err(e) = datagen::plan(opts) {
        world.fail(&format!("datagen: {e}"));
    }
    world.agree(false);
    let shard_opts = DatagenOptions {
        force: true,
        print: opts.print && rank == 0,
        progress: opts.progress && rank == 0,
        ..opts.clone()
    };
    let report = match datagen::run_datagen_shard(&shard_opts, storage, rank, size) {
        Ok((_, r)) => r,
        Err(e) => world.fail(&format!("datagen: {e}")),
    };
    let mine = format!("{} {} {}", report.files, report.bytes, report.seconds).into_bytes();
    if let Some(all) = world.gather(mine) {
        let (mut files, mut bytes, mut secs) = (0u64, 0u64, 0f64);
        for b in &all {
            let text = String::from_utf8_lossy(b);
            let mut it = text.split_whitespace();
            files += it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            bytes += it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            secs = secs.max(it.next().and_then(|v| v.parse().ok()).unwrap_or(0.0));
        }
        if opts.print {
            println!(
                "All {size} ranks: {files} files, {bytes} bytes in {secs:.2} s: {:.3} GB/s",
                if secs > 0.0 {
                    bytes as f64 / secs / 1e9
                } else {
                    0.0
                }
            );
        }
    }
    Ok(())
}

/// Without the `mpi` feature: an error saying how to rebuild.
#[cfg(not(feature = "mpi"))]
pub fn run_datagen(_: &DatagenOptions, _: &dyn Storage) -> anyhow::Result<()> {
    anyhow::bail!(NO_MPI)
}
