//! AU projection to other computation times, from a cell's measured I/O
//! wait per step (DLIO's formulas, ../shared/reference/dlio.md §4).
//!
//! ```text
//!  BlockTimings (counted steps s..e) ─► wait = total_time − total_compute   (DLIO's AU denominator minus numerator)
//!  wait / counted steps = w         ─► at computation time c:
//!      AU(c)          = c / (c + w)
//!      samples/s/acc  = batch / (c + w) = AU(c) × batch / c   ≤ batch / c (the ceiling)
//! ```
//! Holding `w` fixed is the study's model and a conservative one: with a
//! longer computation time the loader's prefetch hides more of the I/O, so
//! the real AU can only be higher. What the study got wrong is throughput:
//! samples/s per accelerator is capped by batch / computation_time, so it
//! falls as the computation time grows.
use crate::metrics::{BlockTimings, ExcludeSteps};

/// DLIO's counted totals of one block: `(counted steps, total_compute, total_time)`.
pub fn counted_totals(b: &BlockTimings, exclude: ExcludeSteps) -> (usize, f64, f64) {
    let n = b.compute.len();
    let s = exclude.start.min(n);
    let last = n.saturating_sub(exclude.end).max(s);
    let compute: f64 = b.compute[s..last].iter().sum();
    let excluded: f64 = b.proc[..s.min(b.proc.len())].iter().sum::<f64>()
        + b.proc[last.min(b.proc.len())..].iter().sum::<f64>();
    (last - s, compute, (b.end - b.start) - excluded)
}

/// Measured I/O wait per counted step over `blocks` (all ranks and epochs):
/// Σ(total_time − total_compute) / Σ counted steps. `None` without counted steps.
pub fn io_wait_per_step<'a>(
    blocks: impl IntoIterator<Item = &'a BlockTimings>,
    exclude: ExcludeSteps,
) -> Option<f64> {
    let (mut steps, mut wait) = (0usize, 0.0f64);
    for b in blocks {
        let (n, compute, time) = counted_totals(b, exclude);
        steps += n;
        wait += time - compute;
    }
    (steps > 0).then(|| (wait / steps as f64).max(0.0))
}

/// The I/O wait per step implied by an AU at a computation time: `c × (1/AU − 1)`.
pub fn io_wait_from_au(au_percentage: f64, computation_time: f64) -> Option<f64> {
    (au_percentage > 0.0).then(|| computation_time * (100.0 / au_percentage - 1.0))
}

/// One projected point.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Projection {
    /// Seconds of computation per step.
    pub computation_time: f64,
    /// AU (%) at that computation time.
    pub au_percentage: f64,
    /// Samples/s per accelerator: batch / (c + w), never above batch / c.
    pub samples_per_second_per_accelerator: f64,
    /// The ceiling batch / c (infinite for c = 0).
    pub ceiling_samples_per_second: f64,
}

/// AU and per-accelerator throughput at `computation_time` for an I/O wait
/// per step `io_wait` and batch size `batch`. `None` when `c + w` is 0.
pub fn project(io_wait: f64, batch: u64, computation_time: f64) -> Option<Projection> {
    let c = computation_time.max(0.0);
    let step = c + io_wait.max(0.0);
    (step > 0.0).then(|| Projection {
        computation_time: c,
        au_percentage: 100.0 * c / step,
        samples_per_second_per_accelerator: batch as f64 / step,
        ceiling_samples_per_second: if c > 0.0 {
            batch as f64 / c
        } else {
            f64::INFINITY
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn seed_002_projection_table() {
        // NP=8 RT=4: AU 61.0 % at 0.05 s → ~32 ms wait, 94.0 % at 0.5 s, 97.7 % at 1.35 s.
        let w = io_wait_from_au(61.0, 0.05).unwrap();
        assert!(close(w * 1e3, 31.97, 0.01), "{w}");
        assert!(close(
            project(w, 48, 0.5).unwrap().au_percentage,
            94.0,
            0.05
        ));
        assert!(close(
            project(w, 48, 1.35).unwrap().au_percentage,
            97.7,
            0.05
        ));
        // NP=1: 96.8 % → ~1.65 ms, 99.7 % at 0.5 s.
        let w1 = io_wait_from_au(96.8, 0.05).unwrap();
        assert!(close(w1 * 1e3, 1.65, 0.01), "{w1}");
        assert!(close(
            project(w1, 48, 0.5).unwrap().au_percentage,
            99.67,
            0.01
        ));
    }

    #[test]
    fn throughput_is_capped_by_batch_over_computation_time() {
        // dlio.md §4: samples/s ≈ AU × batch / computation_time, ideal 35.56 for flux_b200.
        let w = io_wait_from_au(61.0, 0.05).unwrap();
        for c in [0.05, 0.5, 1.35] {
            let p = project(w, 48, c).unwrap();
            assert!(close(
                p.samples_per_second_per_accelerator,
                p.au_percentage / 100.0 * 48.0 / c,
                1e-9
            ));
            assert!(p.samples_per_second_per_accelerator <= p.ceiling_samples_per_second);
        }
        assert!(close(
            project(0.0, 48, 1.35).unwrap().ceiling_samples_per_second,
            35.56,
            0.01
        ));
        // The seed's "926 samples/s at any sleep" cannot hold at 1.35 s.
        assert!(
            project(w, 48, 1.35)
                .unwrap()
                .samples_per_second_per_accelerator
                < 35.56
        );
        // storage #330, flux b200: AU 37.22 % at 1.35 s ⇔ 13.23 samples/s.
        let w330 = io_wait_from_au(37.22, 1.35).unwrap();
        let p = project(w330, 48, 1.35).unwrap();
        assert!(
            close(p.samples_per_second_per_accelerator, 13.23, 0.01),
            "{p:?}"
        );
        assert!(project(0.0, 48, 0.0).is_none());
        assert_eq!(project(0.5, 48, 0.0).unwrap().au_percentage, 0.0);
    }

    #[test]
    fn wait_from_timings_matches_the_au_formula() {
        // 10 steps: first load 2 s (excluded), then 0.25 s load + 1.35 s compute.
        let mut b = BlockTimings::default();
        let mut t = 0.0;
        for i in 0..10 {
            let l = if i == 0 { 2.0 } else { 0.25 };
            b.load.push(l);
            b.proc.push(l + 1.35);
            b.compute.push(1.35);
            t += l + 1.35;
        }
        b.end = t;
        let ex = ExcludeSteps { start: 1, end: 0 };
        let (n, compute, time) = counted_totals(&b, ex);
        assert_eq!(n, 9);
        let au = 100.0 * compute / time;
        let w = io_wait_per_step([&b], ex).unwrap();
        assert!(close(w, 0.25, 1e-12), "{w}");
        assert!(close(io_wait_from_au(au, 1.35).unwrap(), w, 1e-12));
        let m = crate::metrics::block_metrics(&b, 48, ex);
        assert!(
            close(m.au_percentage, au, 1e-9),
            "same AU as DLIO's block metrics"
        );
        assert!(io_wait_per_step([], ex).is_none());
    }
}
