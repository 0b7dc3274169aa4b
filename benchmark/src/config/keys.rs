//! The DLIO workload keys we know, with their value types.
//!
//! The table follows DLIO's `LoadConfig` (`dlio_benchmark/utils/config.py`):
//! every key DLIO reads is accepted, so any DLIO workload YAML loads. Keys
//! storprof does not act on are still accepted (and reported once as having
//! no effect) so that an upstream YAML is not rejected for, say, its
//! checkpoint block. Anything else is a typo and is rejected with the nearest
//! known keys as a hint.

/// Type of a configuration value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// Non-negative integer.
    UInt,
    /// Integer, may be negative (e.g. `train.total_training_steps: -1`).
    Int,
    /// Number (int or float).
    Float,
    /// Boolean (`True`/`False`/`true`/`false`).
    Bool,
    /// Free-form string.
    Str,
    /// One of a fixed set of strings.
    Enum(&'static [&'static str]),
    /// A number or a `{mean, stdev}` mapping (DLIO's time specs).
    TimeSpec,
    /// A list (kept as a whole, not flattened).
    List,
    /// Anything (kept as a whole): open-ended mappings such as `storage.storage_options`.
    Any,
}

/// Whether storprof acts on a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Used by storprof.
    Used,
    /// Accepted for compatibility with DLIO YAMLs, has no effect here.
    Ignored,
}

/// One known key.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// Dotted key as in DLIO YAML / hydra overrides (`dataset.num_files_train`).
    pub key: &'static str,
    pub ty: KeyType,
    pub effect: Effect,
}

const SHUFFLE: &[&str] = &["off", "seed", "random"];

macro_rules! keys {
    ($($key:literal => $ty:expr, $eff:ident;)*) => {
        /// Every key storprof accepts.
        pub const KNOWN_KEYS: &[KeySpec] = &[
            $(KeySpec { key: $key, ty: $ty, effect: Effect::$eff },)*
        ];
    };
}

use KeyType::*;

keys! {
    "model.name" => Str, Used;
    "model.type" => Str, Ignored;
    "model.model_size" => Float, Used;
    "model.model_size_bytes" => Float, Used;
    "model.optimization_groups" => Any, Ignored;
    "model.num_layers" => Int, Ignored;
    "model.layer_parameters" => Any, Ignored;
    "model.model_datatype" => Str, Ignored;
    "model.optimizer_datatype" => Str, Ignored;
    "model.parallelism.tensor" => Int, Ignored;
    "model.parallelism.pipeline" => Int, Ignored;
    "model.parallelism.data" => Int, Ignored;
    "model.parallelism.zero_stage" => Int, Ignored;
    "model.transformer.vocab_size" => Int, Ignored;
    "model.transformer.hidden_size" => Int, Ignored;
    "model.transformer.ffn_hidden_size" => Int, Ignored;
    "model.transformer.num_attention_heads" => Int, Ignored;
    "model.transformer.num_kv_heads" => Int, Ignored;
    "framework" => Enum(&["pytorch", "tensorflow", "jax", "none"]), Ignored;
    "storage.storage_type" => Str, Ignored;
    "storage.storage_root" => Str, Ignored;
    "storage.storage_options" => Any, Ignored;
    "storage.storage_library" => Str, Ignored;
    "storage.post_generation_settle_seconds" => Float, Ignored;
    "workflow.generate_data" => Bool, Ignored;
    "workflow.train" => Bool, Ignored;
    "workflow.evaluation" => Bool, Ignored;
    "workflow.checkpoint" => Bool, Used;
    "workflow.profiling" => Bool, Ignored;
    "dataset.data_folder" => Str, Used;
    "dataset.format" => Enum(&["parquet", "npz", "jpeg", "tfrecord"]), Used;
    "dataset.compression" => Enum(&["none", "gzip", "zip", "lz4", "bz2", "zlib", "snappy", "xz"]), Used;
    "dataset.compression_level" => Int, Ignored;
    "dataset.num_files_train" => UInt, Used;
    "dataset.num_files_eval" => UInt, Used;
    "dataset.num_samples_per_file" => UInt, Used;
    "dataset.num_subfolders_train" => UInt, Used;
    "dataset.num_subfolders_eval" => UInt, Used;
    "dataset.record_length" => Float, Ignored;
    "dataset.record_length_bytes" => Float, Used;
    "dataset.record_length_bytes_stdev" => Float, Used;
    "dataset.record_length_bytes_resize" => Float, Used;
    "dataset.record_element_bytes" => UInt, Ignored;
    "dataset.record_element_type" => Str, Ignored;
    "dataset.record_dims" => List, Ignored;
    "dataset.generation_buffer_size" => UInt, Ignored;
    "dataset.enable_chunking" => Bool, Ignored;
    "dataset.chunk_size" => UInt, Ignored;
    "dataset.file_prefix" => Str, Used;
    "dataset.data_gen_method" => Str, Ignored;
    "dataset.keep_files" => Bool, Ignored;
    "dataset.parquet.columns" => List, Used;
    "dataset.parquet.row_group_size" => UInt, Used;
    // Readers load whole row groups (dlrm's value); DLIO's other modes are not modelled.
    "dataset.parquet.read_mode" => Enum(&["row_group"]), Used;
    "dataset.parquet.partition_by" => Str, Ignored;
    "dataset.parquet.generation_batch_size" => UInt, Ignored;
    "dataset.hdf5.chunk_dims" => List, Ignored;
    "dataset.hdf5.num_dset_per_record" => UInt, Ignored;
    "dataset.hdf5.max_shape" => List, Ignored;
    "reader.dont_use_mmap" => Bool, Used;
    "reader.reader_classname" => Str, Ignored;
    "reader.multiprocessing_context" => Enum(&["fork", "spawn", "forkserver"]), Ignored;
    "reader.data_loader" => Enum(&["pytorch", "tensorflow", "dali", "native_dali", "synthetic", "none"]), Ignored;
    "reader.data_loader_classname" => Str, Ignored;
    "reader.data_loader_sampler" => Enum(&["index", "iterative"]), Ignored;
    "reader.read_threads" => UInt, Used;
    "reader.write_threads" => UInt, Ignored;
    "reader.computation_threads" => UInt, Ignored;
    "reader.batch_size" => UInt, Used;
    "reader.batch_size_eval" => UInt, Ignored;
    "reader.prefetch_size" => UInt, Used;
    "reader.file_shuffle" => Enum(SHUFFLE), Ignored;
    "reader.file_access" => Enum(&["multi", "shared", "tensorflow"]), Ignored;
    "reader.shuffle_size" => UInt, Ignored;
    "reader.sample_shuffle" => Enum(SHUFFLE), Used;
    "reader.read_type" => Enum(&["on_demand", "memory"]), Ignored;
    "reader.transfer_size" => UInt, Ignored;
    "reader.odirect" => Bool, Used;
    "reader.preprocess_time" => TimeSpec, Ignored;
    "reader.preprocess_time.mean" => Float, Ignored;
    "reader.preprocess_time.stdev" => Float, Ignored;
    "reader.preprocess_time_stdev" => Float, Ignored;
    "reader.pin_memory" => Bool, Ignored;
    "reader.transformed_record_dims" => List, Ignored;
    "reader.transformed_record_element_type" => Str, Ignored;
    "train.epochs" => UInt, Used;
    "train.total_training_steps" => Int, Used;
    "train.seed_change_epoch" => Bool, Used;
    "train.computation_time" => TimeSpec, Used;
    "train.computation_time.mean" => Float, Used;
    "train.computation_time.stdev" => Float, Used;
    "train.computation_time_stdev" => Float, Used;
    "train.seed" => UInt, Used;
    "evaluation.eval_time" => TimeSpec, Ignored;
    "evaluation.eval_time.mean" => Float, Ignored;
    "evaluation.eval_time.stdev" => Float, Ignored;
    "evaluation.eval_time_stdev" => Float, Ignored;
    "evaluation.eval_after_epoch" => UInt, Ignored;
    "evaluation.epochs_between_evals" => UInt, Ignored;
    "checkpoint.checkpoint_folder" => Str, Used;
    "checkpoint.checkpoint_after_epoch" => UInt, Used;
    "checkpoint.epochs_between_checkpoints" => UInt, Used;
    "checkpoint.steps_between_checkpoints" => Int, Used;
    "checkpoint.type" => Str, Used;
    "checkpoint.checkpoint_mechanism_classname" => Str, Ignored;
    "checkpoint.fsync" => Bool, Used;
    "checkpoint.time_between_checkpoints" => Float, Ignored;
    "checkpoint.num_checkpoints_write" => Int, Ignored;
    "checkpoint.num_checkpoints_read" => Int, Ignored;
    "checkpoint.recovery_rank_shift" => Bool, Ignored;
    "checkpoint.rank_sync" => Bool, Ignored;
    "checkpoint.mode" => Str, Ignored;
    "checkpoint.randomize_tensor" => Bool, Ignored;
    "checkpoint.ksm" => Any, Ignored;
    "output.folder" => Str, Ignored;
    "output.log_file" => Str, Ignored;
    "output.metric.exclude_start_steps" => UInt, Used;
    "output.metric.exclude_end_steps" => UInt, Used;
    "profiling.profiler" => Str, Ignored;
    "profiling.iostat_devices" => Any, Ignored;
    "metric.au" => Float, Used;
    // s3dlio's Parquet reader knobs (the seed-002 study's): row groups per
    // storage read (default 1) and reads in flight per read thread,
    // read-ahead included (default 1: no read-ahead).
    "reader.coalesce_rgs" => UInt, Used;
    "reader.prefetch_workers" => UInt, Used;
    // Aliases accepted for `--param` convenience (not DLIO keys).
    "dataset.parquet_row_group_size" => UInt, Used;
}

/// Look a key up.
pub fn spec(key: &str) -> Option<&'static KeySpec> {
    KNOWN_KEYS.iter().find(|k| k.key == key)
}

/// Whether `key` is a known key whose value is kept whole (not flattened).
pub fn is_whole_value(key: &str) -> bool {
    matches!(spec(key).map(|s| s.ty), Some(KeyType::List | KeyType::Any))
}

/// Whether `key` is a prefix of some known key (a mapping such as `dataset`).
pub fn is_section(key: &str) -> bool {
    KNOWN_KEYS.iter().any(|k| {
        k.key.len() > key.len() && k.key.starts_with(key) && k.key.as_bytes()[key.len()] == b'.'
    })
}

/// Longest key given "did you mean" hints: twice the longest known key.
/// Jaro-Winkler costs the square of the length against every known key,
/// and a key that long is no typo of one (a pasted value, a broken file).
const MAX_SUGGESTED_KEY_LEN: usize = 2 * longest_known_key();

const fn longest_known_key() -> usize {
    let mut longest = 0;
    let mut i = 0;
    while i < KNOWN_KEYS.len() {
        if KNOWN_KEYS[i].key.len() > longest {
            longest = KNOWN_KEYS[i].key.len();
        }
        i += 1;
    }
    longest
}

/// Up to three known keys closest to `key`, for "did you mean" hints
/// (none for a key longer than `MAX_SUGGESTED_KEY_LEN`).
pub fn suggestions(key: &str) -> Vec<&'static str> {
    if key.len() > MAX_SUGGESTED_KEY_LEN {
        return Vec::new();
    }
    let last = key.rsplit('.').next().unwrap_or(key);
    let mut scored: Vec<(f64, &'static str)> = KNOWN_KEYS
        .iter()
        .map(|k| {
            let whole = strsim::jaro_winkler(key, k.key);
            let k_last = k.key.rsplit('.').next().unwrap_or(k.key);
            let tail = strsim::jaro_winkler(last, k_last);
            (whole.max(tail * 0.98), k.key)
        })
        .filter(|(score, _)| *score > 0.80)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Only the close runners-up: a clear best match should stand alone.
    let best = scored.first().map_or(0.0, |s| s.0);
    scored
        .into_iter()
        .take_while(|(score, _)| *score >= best - 0.03)
        .take(3)
        .map(|(_, k)| k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_sections_are_not_keys() {
        let mut seen = std::collections::HashSet::new();
        for k in KNOWN_KEYS {
            assert!(seen.insert(k.key), "duplicate key {}", k.key);
        }
        assert!(is_section("dataset"));
        assert!(is_section("dataset.parquet"));
        assert!(!is_section("dataset.num_files_train"));
    }

    #[test]
    fn no_suggestions_for_keys_far_longer_than_any_known_key() {
        let longest = KNOWN_KEYS.iter().map(|k| k.key.len()).max().unwrap();
        assert_eq!(MAX_SUGGESTED_KEY_LEN, 2 * longest);
        let typo = "dataset.num_file_train";
        assert!(!suggestions(typo).is_empty());
        let long = format!("{typo}{}", "x".repeat(MAX_SUGGESTED_KEY_LEN));
        assert!(suggestions(&long).is_empty());
    }

    #[test]
    fn suggests_near_matches() {
        let s = suggestions("dataset.num_file_train");
        assert_eq!(s.first().copied(), Some("dataset.num_files_train"));
        let s = suggestions("reader.batchsize");
        assert!(s.contains(&"reader.batch_size"), "{s:?}");
        let s = suggestions("train.computation");
        assert!(s.contains(&"train.computation_time"), "{s:?}");
    }
}
