//! MLPerf Storage v3.0's run rules for training, as `mlpstorage` checks
//! them: which workloads and accelerators a division runs, which
//! parameters a division lets a submitter override, the read-thread cap,
//! and the dataset-size rule's verdict on a run. Pure functions over
//! the configuration and the `--param`s.
//!
//! ```text
//!  --division closed|open + workload + --param KEYs ─► check_overrides ─► Ok | BadParam (names the allowed keys)
//!  DlioConfig + DatasetSizeRule + division          ─► assess ─► RunValidity { valid, reasons }
//! ```
use std::fmt;

use super::{Accelerator, DatasetSizeRule, DlioConfig, Workload, normalize_key};
use crate::error::BenchError;

/// A submission division (`mlpstorage closed|open`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Division {
    /// Only the closed division's parameters may change: the dataset's size
    /// and location, reader threads, transfer and prefetch sizes, O_DIRECT,
    /// the checkpoint folder and the storage settings.
    Closed,
    /// Those, and also the framework, the dataset format, samples per file
    /// and the data loader.
    Open,
}

impl fmt::Display for Division {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Division::Closed => "closed",
            Division::Open => "open",
        })
    }
}

/// Parameters CLOSED lets a submitter set (mlpstorage's `CLOSED_ALLOWED_PARAMS`).
pub const CLOSED_OVERRIDES: &[&str] = &[
    "dataset.num_files_train",
    "dataset.num_subfolders_train",
    "dataset.data_folder",
    "reader.read_threads",
    "reader.computation_threads",
    "reader.transfer_size",
    "reader.odirect",
    "reader.prefetch_size",
    "checkpoint.checkpoint_folder",
    "storage.storage_type",
    "storage.storage_root",
];

/// What OPEN allows besides [`CLOSED_OVERRIDES`].
pub const OPEN_EXTRA_OVERRIDES: &[&str] = &[
    "framework",
    "dataset.format",
    "dataset.num_samples_per_file",
    "reader.data_loader",
];

/// mlpstorage's `MAX_READ_THREADS_TRAINING`.
pub const MAX_READ_THREADS_TRAINING: u64 = 32;

/// The training workloads v3.0's CLOSED and OPEN divisions run (the others
/// are `mlpstorage whatif` only).
pub const DIVISION_WORKLOADS: &[Workload] = &[Workload::Unet3d, Workload::Retinanet];

/// The accelerators v3.0's CLOSED and OPEN divisions emulate.
pub const DIVISION_ACCELERATORS: &[Accelerator] = &[Accelerator::B200, Accelerator::Mi355];

/// Whether `key` (a DLIO dotted key) may be overridden in `division`.
pub fn override_allowed(division: Division, key: &str) -> bool {
    CLOSED_OVERRIDES.contains(&key)
        || (division == Division::Open && OPEN_EXTRA_OVERRIDES.contains(&key))
}

/// The DLIO key of a `KEY=VALUE` parameter, as `RawConfig` stores it.
fn param_key(param: &str) -> String {
    normalize_key(param.split_once('=').map_or(param, |(k, _)| k).trim())
}

/// Refuse what `division` does not allow: a workload or accelerator outside
/// v3.0's divisions, a custom workload file, an override of a parameter the
/// division fixes, `reader.odirect` outside unet3d. `params` are the
/// effective `KEY=VALUE` overrides (flags included).
pub fn check_overrides(
    division: Division,
    workload: Option<Workload>,
    accelerator: Accelerator,
    custom_config: bool,
    params: &[String],
) -> Result<(), BenchError> {
    if custom_config {
        return Err(BenchError::usage(
            "--division",
            format!(
                "--division {division} runs the workload's own configuration; a --config file cannot be checked \
             against the division's rules (drop --division to run it)"
            ),
        ));
    }
    let Some(workload) = workload else {
        return Err(BenchError::usage(
            "--division",
            format!("--division {division} needs --workload"),
        ));
    };
    if !DIVISION_WORKLOADS.contains(&workload) {
        return Err(BenchError::usage(
            "--division",
            format!(
                "MLPerf Storage v3.0's {division} division runs unet3d and retinanet; {workload} is what-if only \
             (drop --division to run it)"
            ),
        ));
    }
    if !DIVISION_ACCELERATORS.contains(&accelerator) {
        return Err(BenchError::usage(
            "--division",
            format!(
                "MLPerf Storage v3.0's {division} division emulates b200 and mi355, not {accelerator}"
            ),
        ));
    }
    for param in params {
        let key = param_key(param);
        let key = key.as_str();
        if !override_allowed(division, key) {
            let mut allowed: Vec<&str> = CLOSED_OVERRIDES.to_vec();
            if division == Division::Open {
                allowed.extend_from_slice(OPEN_EXTRA_OVERRIDES);
            }
            return Err(BenchError::BadParam {
                key: key.to_string(),
                reason: format!(
                    "the {division} division does not allow overriding it; it allows only {}",
                    allowed.join(", ")
                ),
            });
        }
        if key == "reader.odirect" && workload != Workload::Unet3d {
            return Err(BenchError::BadParam {
                key: key.to_string(),
                reason: format!("the rules allow O_DIRECT reads for unet3d only, not {workload}"),
            });
        }
    }
    Ok(())
}

/// Whether a run could count for a submission, and why not.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunValidity {
    pub division: Option<Division>,
    /// The dataset-size rule for this run's hosts and accelerators.
    pub size_rule: DatasetSizeRule,
    /// Which term of the rule decided ("memory" or "steps").
    pub size_rule_term: &'static str,
    /// True when nothing below was found.
    pub valid: bool,
    /// Each reason the run is INVALID for a submission.
    pub reasons: Vec<String>,
}

/// Judge a run by the rules that do not need its results: the dataset-size
/// rule (`num_files_train` at least the rule's count) and the read-thread
/// cap. A run that fails them still runs; its output says INVALID.
pub fn assess(
    cfg: &DlioConfig,
    size_rule: DatasetSizeRule,
    division: Option<Division>,
) -> RunValidity {
    let mut reasons = Vec::new();
    if cfg.num_files_train < size_rule.num_files_train {
        reasons.push(format!(
            "dataset.num_files_train = {} is below the dataset-size rule's {} (Rules 3.1.2)",
            cfg.num_files_train, size_rule.num_files_train
        ));
    }
    if cfg.read_threads > MAX_READ_THREADS_TRAINING {
        reasons.push(format!(
            "reader.read_threads = {} is above the rules' maximum of {MAX_READ_THREADS_TRAINING}",
            cfg.read_threads
        ));
    }
    RunValidity {
        division,
        size_rule,
        size_rule_term: size_rule.deciding_term(),
        valid: reasons.is_empty(),
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{dataset_size_rule, load};

    fn p(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn closed_allows_only_its_list() {
        let ok = p(&[
            "dataset.num_files_train=100",
            "++workload.reader.read_threads=8",
            "reader.odirect=True",
        ]);
        check_overrides(
            Division::Closed,
            Some(Workload::Unet3d),
            Accelerator::B200,
            false,
            &ok,
        )
        .unwrap();
        let e = check_overrides(
            Division::Closed,
            Some(Workload::Retinanet),
            Accelerator::B200,
            false,
            &p(&["train.computation_time=0.01"]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("train.computation_time"), "{e}");
        assert!(
            e.contains("dataset.num_files_train"),
            "lists the allowed: {e}"
        );
        // OPEN adds the format and the loader; CLOSED refuses them.
        let fmt = p(&["dataset.format=npz"]);
        assert!(
            check_overrides(
                Division::Closed,
                Some(Workload::Retinanet),
                Accelerator::Mi355,
                false,
                &fmt
            )
            .is_err()
        );
        check_overrides(
            Division::Open,
            Some(Workload::Retinanet),
            Accelerator::Mi355,
            false,
            &fmt,
        )
        .unwrap();
    }

    #[test]
    fn refuses_what_the_divisions_do_not_run() {
        let none: Vec<String> = Vec::new();
        for (w, a) in [
            (Workload::Flux, Accelerator::B200),
            (Workload::Resnet50, Accelerator::H100),
            (Workload::Unet3d, Accelerator::H100),
        ] {
            assert!(check_overrides(Division::Closed, Some(w), a, false, &none).is_err());
        }
        let e = check_overrides(
            Division::Open,
            Some(Workload::Retinanet),
            Accelerator::B200,
            false,
            &p(&["reader.odirect=True"]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unet3d only"), "{e}");
        assert!(
            check_overrides(
                Division::Closed,
                Some(Workload::Unet3d),
                Accelerator::B200,
                true,
                &none
            )
            .is_err()
        );
    }

    #[test]
    fn small_datasets_and_many_threads_are_invalid() {
        let cfg = load(
            Some(Workload::Retinanet),
            Accelerator::B200,
            None,
            &p(&["dataset.num_files_train=1000", "reader.read_threads=33"]),
        )
        .unwrap()
        .to_config()
        .unwrap();
        let rule = dataset_size_rule(24.0, 1, 1, cfg.batch_size, 1, cfg.record_size_real());
        let v = assess(&cfg, rule, Some(Division::Closed));
        assert!(!v.valid);
        assert_eq!(v.reasons.len(), 2, "{:?}", v.reasons);
        // ceil(5 × 24 GiB / 322,957 B) = 398,967 files: memory decides.
        assert_eq!(v.size_rule.num_files_train, 398_967);
        assert_eq!(v.size_rule_term, "memory");
        let big = load(
            Some(Workload::Retinanet),
            Accelerator::B200,
            None,
            &p(&["dataset.num_files_train=398967"]),
        )
        .unwrap()
        .to_config()
        .unwrap();
        assert!(assess(&big, rule, None).valid);
    }
}
