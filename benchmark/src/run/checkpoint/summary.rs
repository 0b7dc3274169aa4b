//! The checkpoint run's metrics, as MLPerf Storage's rules define them: per
//! rank a save (load) duration and throughput; per checkpoint the run's
//! duration is the maximum over ranks and its throughput the minimum rank
//! throughput; the aggregate (bytes of every rank / that duration) is
//! reported beside it. GB are 2^30 bytes, as DLIO computes them.
use super::io::IoBytes;

const GIB: f64 = (1u64 << 30) as f64;

/// One rank's save or load of one checkpoint.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankIo {
    pub rank: usize,
    pub seconds: f64,
    pub io: IoBytes,
}

impl RankIo {
    /// This rank's throughput, GiB/s.
    pub fn gib_per_second(&self) -> f64 {
        self.io.bytes as f64 / GIB / self.seconds.max(1e-9)
    }
}

/// One checkpoint's save or load over every rank.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
// DLIO's key names (`..._GB_per_second`) are kept as field names.
#[allow(non_snake_case)]
pub struct PhaseStats {
    /// Maximum rank duration, seconds.
    pub duration_seconds: f64,
    /// Minimum rank throughput, GiB/s.
    pub throughput_GB_per_second: f64,
    /// Every rank's bytes / the maximum duration, GiB/s.
    pub aggregate_GB_per_second: f64,
    pub size_GB: f64,
    pub io: IoBytes,
    pub ranks: Vec<RankSummary>,
}

/// A rank's line in [`PhaseStats`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
// DLIO's key names (`..._GB_per_second`) are kept as field names.
#[allow(non_snake_case)]
pub struct RankSummary {
    pub rank: usize,
    pub duration_seconds: f64,
    pub throughput_GB_per_second: f64,
    pub bytes: u64,
    pub files: u64,
}

/// Aggregate one checkpoint's rank results (empty input: zeros).
pub fn aggregate(ranks: &[RankIo]) -> PhaseStats {
    let mut io = IoBytes::default();
    for r in ranks {
        io.add(r.io);
    }
    let duration = ranks.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let min_throughput = ranks
        .iter()
        .map(RankIo::gib_per_second)
        .reduce(f64::min)
        .unwrap_or(0.0);
    let mut sorted: Vec<&RankIo> = ranks.iter().collect();
    sorted.sort_by_key(|r| r.rank);
    PhaseStats {
        duration_seconds: duration,
        throughput_GB_per_second: min_throughput,
        aggregate_GB_per_second: if duration > 0.0 {
            io.bytes as f64 / GIB / duration
        } else {
            0.0
        },
        size_GB: io.bytes as f64 / GIB,
        io,
        ranks: sorted
            .into_iter()
            .map(|r| RankSummary {
                rank: r.rank,
                duration_seconds: r.seconds,
                throughput_GB_per_second: r.gib_per_second(),
                bytes: r.io.bytes,
                files: r.io.files,
            })
            .collect(),
    }
}

/// Mean and population standard deviation (numpy's default, as DLIO uses).
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Mean (std) over checkpoints of a phase's duration, rank-minimum and aggregate throughput.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
// DLIO's key names (`..._GB_per_second`) are kept as field names.
#[allow(non_snake_case)]
pub struct PhaseMeans {
    pub count: usize,
    pub duration_mean_seconds: f64,
    pub duration_stdev_seconds: f64,
    pub io_mean_GB_per_second: f64,
    pub io_stdev_GB_per_second: f64,
    pub aggregate_io_mean_GB_per_second: f64,
    pub aggregate_io_stdev_GB_per_second: f64,
}

/// Summarize the checkpoints of one phase.
pub fn phase_means(phases: &[PhaseStats]) -> PhaseMeans {
    let d: Vec<f64> = phases.iter().map(|p| p.duration_seconds).collect();
    let t: Vec<f64> = phases.iter().map(|p| p.throughput_GB_per_second).collect();
    let a: Vec<f64> = phases.iter().map(|p| p.aggregate_GB_per_second).collect();
    let (dm, ds) = mean_std(&d);
    let (tm, ts) = mean_std(&t);
    let (am, as_) = mean_std(&a);
    PhaseMeans {
        count: phases.len(),
        duration_mean_seconds: dm,
        duration_stdev_seconds: ds,
        io_mean_GB_per_second: tm,
        io_stdev_GB_per_second: ts,
        aggregate_io_mean_GB_per_second: am,
        aggregate_io_stdev_GB_per_second: as_,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: usize, seconds: f64, gib: u64) -> RankIo {
        RankIo {
            rank,
            seconds,
            io: IoBytes {
                bytes: gib << 30,
                fsynced: gib << 30,
                files: 2,
                fsyncs: 2,
            },
        }
    }

    #[test]
    fn duration_is_max_and_throughput_min_over_ranks() {
        // Rank 1: 4 GiB in 2 s = 2 GiB/s; rank 0: 1 GiB in 4 s = 0.25 GiB/s.
        let p = aggregate(&[rank(1, 2.0, 4), rank(0, 4.0, 1)]);
        assert_eq!(p.duration_seconds, 4.0);
        assert_eq!(p.throughput_GB_per_second, 0.25);
        assert_eq!(p.aggregate_GB_per_second, 5.0 / 4.0);
        assert_eq!(p.size_GB, 5.0);
        assert_eq!(p.io.files, 4);
        assert_eq!(p.io.fsynced, 5 << 30);
        assert_eq!(p.ranks[0].rank, 0);
        assert_eq!(p.ranks[1].throughput_GB_per_second, 2.0);
    }

    #[test]
    fn empty_phase_is_zero() {
        let p = aggregate(&[]);
        assert_eq!((p.duration_seconds, p.throughput_GB_per_second), (0.0, 0.0));
        assert_eq!(phase_means(&[]).count, 0);
    }

    #[test]
    fn means_are_population_statistics() {
        let a = aggregate(&[rank(0, 1.0, 1)]);
        let b = aggregate(&[rank(0, 3.0, 1)]);
        let m = phase_means(&[a, b]);
        assert_eq!(m.duration_mean_seconds, 2.0);
        assert_eq!(m.duration_stdev_seconds, 1.0);
        assert_eq!(m.io_mean_GB_per_second, (1.0 + 1.0 / 3.0) / 2.0);
    }
}
