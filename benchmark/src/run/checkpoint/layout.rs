//! Which files each rank of an MLPerf Storage checkpointing run writes, and
//! how large they are: DLIO's transformer checkpoint model (the llama3
//! workload YAMLs of mlcommons/storage, DLIO's `BaseCheckpointing` formulas).
//!
//! ```text
//!  rank r:  tp_rank = r % TP   pp_rank = (r / TP) % PP   dp_rank = r / (TP·PP)   mp_rank = r % (TP·PP)
//!  layers:  0 = embedding, 1..=L transformer layers, L+1 = lm_head, L+2 = final norm;
//!           pipeline stage p holds a contiguous run of 1..=L (the first L % PP stages one more),
//!           stage 0 also layer 0, the last stage also L+1 and L+2
//!  model (fp16): ZeRO 3 shards every layer over DP: one zero_pp_rank_<dp>_mp_rank_<mp>_model_states file per rank;
//!                ZeRO 1/2: only dp_rank 0 writes, one file per layer when PP > 1, else model_<mp>_model_states
//!  optimizer (fp32): 3 × (N / (DP·TP·PP)) + 3 × 5·h elements per rank (zero_pp_rank_<dp>_mp_rank_<mp>_optim_states)
//! ```
//! N counts grouped-query attention (q: h·h, k and v: h·(h / heads · kv_heads)).
//! Sizes are bytes; divisions truncate as DLIO's integer divisions do.
use crate::error::BenchError;

/// Bytes of a model-state element (fp16).
pub const MODEL_DTYPE_BYTES: u64 = 2;
/// Bytes of an optimizer-state element (fp32).
pub const OPTIMIZER_DTYPE_BYTES: u64 = 4;
/// Processes of MLPerf's subset mode (one host).
pub const SUBSET_PROCESSES: usize = 8;

/// The checkpointing workloads (`llama3_{8b,70b,405b,1t}.yaml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum LlamaModel {
    #[value(name = "llama3-8b")]
    #[serde(rename = "llama3-8b")]
    Llama3_8b,
    #[value(name = "llama3-70b")]
    #[serde(rename = "llama3-70b")]
    Llama3_70b,
    #[value(name = "llama3-405b")]
    #[serde(rename = "llama3-405b")]
    Llama3_405b,
    #[value(name = "llama3-1t")]
    #[serde(rename = "llama3-1t")]
    Llama3_1t,
}

/// A transformer's shape and the parallel layout it is checkpointed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    pub name: &'static str,
    pub num_layers: u64,
    pub hidden_size: u64,
    pub ffn_hidden_size: u64,
    pub vocab_size: u64,
    pub num_attention_heads: u64,
    pub num_kv_heads: u64,
    pub tensor: usize,
    pub pipeline: usize,
    /// Data parallelism of the full (CLOSED) run.
    pub data: usize,
    pub zero_stage: u8,
}

impl LlamaModel {
    /// Every model, smallest first.
    pub const ALL: [LlamaModel; 4] = [
        LlamaModel::Llama3_8b,
        LlamaModel::Llama3_70b,
        LlamaModel::Llama3_405b,
        LlamaModel::Llama3_1t,
    ];

    /// The model's CLI name (`llama3-8b`, ...).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The workload YAML's values; DP from the reference table's TP×PP×DP.
    pub fn spec(self) -> ModelSpec {
        match self {
            LlamaModel::Llama3_8b => ModelSpec {
                name: "llama3-8b",
                num_layers: 32,
                hidden_size: 4096,
                ffn_hidden_size: 14336,
                vocab_size: 128256,
                num_attention_heads: 32,
                num_kv_heads: 8,
                tensor: 1,
                pipeline: 1,
                data: 8,
                zero_stage: 3,
            },
            LlamaModel::Llama3_70b => ModelSpec {
                name: "llama3-70b",
                num_layers: 80,
                hidden_size: 8192,
                ffn_hidden_size: 28672,
                vocab_size: 128256,
                num_attention_heads: 128,
                num_kv_heads: 8,
                tensor: 8,
                pipeline: 1,
                data: 8,
                zero_stage: 3,
            },
            LlamaModel::Llama3_405b => ModelSpec {
                name: "llama3-405b",
                num_layers: 126,
                hidden_size: 16384,
                ffn_hidden_size: 53248,
                vocab_size: 128256,
                num_attention_heads: 128,
                num_kv_heads: 8,
                tensor: 8,
                pipeline: 32,
                data: 2,
                zero_stage: 1,
            },
            LlamaModel::Llama3_1t => ModelSpec {
                name: "llama3-1t",
                num_layers: 128,
                hidden_size: 25872,
                ffn_hidden_size: 98304,
                vocab_size: 128256,
                num_attention_heads: 192,
                num_kv_heads: 32,
                tensor: 8,
                pipeline: 64,
                data: 2,
                zero_stage: 1,
            },
        }
    }
}

impl ModelSpec {
    /// Column width of the K and V matrices (grouped-query attention).
    fn kv_dim(&self) -> u64 {
        self.hidden_size / self.num_attention_heads * self.num_kv_heads
    }

    /// Parameters of the whole model: embedding and lm_head (vocab × h),
    /// per layer two norms, q/k/v, the output projection and the gated MLP
    /// (3 × h × ffn), and the final norm.
    pub fn num_parameters(&self) -> u64 {
        let h = self.hidden_size;
        let embedding = self.vocab_size * h;
        let per_layer = h + h * (h + 2 * self.kv_dim()) + h * h + h + 3 * h * self.ffn_hidden_size;
        2 * embedding + per_layer * self.num_layers + h
    }

    /// Element counts of layer `index`'s tensors on one rank, with
    /// tensor-parallel split `tp` and ZeRO sharding factor `shard`.
    fn layer_elements(&self, index: u64, tp: u64, shard: u64) -> Vec<u64> {
        let h = self.hidden_size;
        let l = self.num_layers;
        if index == 0 || index == l + 1 {
            vec![h * self.vocab_size / tp / shard]
        } else if index == l + 2 {
            vec![h / shard]
        } else {
            vec![
                h / shard,
                h * (h + 2 * self.kv_dim()) / tp / shard,
                h * h / tp / shard,
                h / shard,
                h * 2 * self.ffn_hidden_size / tp / shard,
                h * self.ffn_hidden_size / tp / shard,
            ]
        }
    }
}

/// What a shard file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardKind {
    Model,
    Layer,
    Optimizer,
}

/// One file a rank writes per checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ShardFile {
    /// Name inside the checkpoint's directory.
    pub name: String,
    /// Unscaled size, bytes.
    pub bytes: u64,
    pub kind: ShardKind,
}

/// A model laid out on `ranks` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub model: LlamaModel,
    pub spec: ModelSpec,
    /// Processes that run (DLIO's comm_size).
    pub ranks: usize,
    /// Data parallelism the shards are sized for.
    pub data: usize,
    /// Subset mode: `ranks` of the full layout's processes run.
    pub subset: bool,
}

impl Layout {
    /// Lay `model` out on `ranks` processes (default: the full layout, or
    /// [`SUBSET_PROCESSES`] in subset mode). Full mode needs a multiple of
    /// TP×PP (DP = ranks / (TP×PP)); subset mode keeps the full DP and runs
    /// whole tensor-parallel groups of the full layout's first ranks.
    pub fn new(model: LlamaModel, subset: bool, ranks: Option<usize>) -> Result<Self, BenchError> {
        let spec = model.spec();
        let mp = spec.tensor * spec.pipeline;
        let full = mp * spec.data;
        let bad = |ranks: usize, reason: String| BenchError::BadLayout {
            model: spec.name,
            ranks,
            reason,
        };
        if subset {
            if full <= SUBSET_PROCESSES {
                return Err(bad(
                    ranks.unwrap_or(SUBSET_PROCESSES),
                    format!(
                        "{} has no subset mode: its full layout is {full} processes",
                        spec.name
                    ),
                ));
            }
            let ranks = ranks.unwrap_or(SUBSET_PROCESSES);
            if ranks == 0 || ranks > full || !ranks.is_multiple_of(spec.tensor) {
                return Err(bad(
                    ranks,
                    format!(
                        "subset mode runs whole tensor-parallel groups: a multiple of TP={} \
                         up to the full {full} processes",
                        spec.tensor
                    ),
                ));
            }
            return Ok(Layout {
                model,
                spec,
                ranks,
                data: spec.data,
                subset,
            });
        }
        let ranks = ranks.unwrap_or(full);
        if ranks == 0 || !ranks.is_multiple_of(mp) {
            return Err(bad(
                ranks,
                format!(
                    "the rank count must be a multiple of TP×PP = {}×{} = {mp} (DP = ranks / {mp})",
                    spec.tensor, spec.pipeline
                ),
            ));
        }
        Ok(Layout {
            model,
            spec,
            ranks,
            data: ranks / mp,
            subset,
        })
    }

    /// TP×PP.
    pub fn model_parallel(&self) -> usize {
        self.spec.tensor * self.spec.pipeline
    }

    /// The layer range `[start, end]` of pipeline stage `pp_rank`.
    pub fn layer_range(&self, pp_rank: usize) -> (u64, u64) {
        let pp = self.spec.pipeline as u64;
        let l = self.spec.num_layers;
        let p = pp_rank as u64;
        let per_stage = l / pp;
        let remainder = l % pp;
        let (mut start, mut end) = if p < remainder {
            let start = p * (per_stage + 1) + 1;
            (start, start + per_stage)
        } else {
            let start = remainder * (per_stage + 1) + (p - remainder) * per_stage + 1;
            (start, start + per_stage - 1)
        };
        if p == pp - 1 {
            end = l + 2;
        }
        if p == 0 {
            start = 0;
        }
        (start, end)
    }

    /// The files rank `rank` writes per checkpoint, with unscaled sizes.
    pub fn rank_files(&self, rank: usize) -> Vec<ShardFile> {
        let s = &self.spec;
        let mp = self.model_parallel();
        let pp_rank = (rank / s.tensor) % s.pipeline;
        let dp_rank = rank / mp;
        let mp_rank = rank % mp;
        let zero3 = s.zero_stage >= 3;
        let shard = if zero3 { self.data as u64 } else { 1 };
        let tp = s.tensor as u64;
        let (start, end) = self.layer_range(pp_rank);
        let layer_bytes =
            |i: u64| s.layer_elements(i, tp, shard).iter().sum::<u64>() * MODEL_DTYPE_BYTES;
        let mut files = Vec::new();
        if zero3 {
            files.push(ShardFile {
                name: format!("zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states.pt"),
                bytes: (start..=end).map(layer_bytes).sum(),
                kind: ShardKind::Model,
            });
        } else if dp_rank == 0 {
            if s.pipeline > 1 {
                files.extend((start..=end).map(|i| ShardFile {
                    name: format!("layer_{i}-model_{mp_rank}_model_states.pt"),
                    bytes: layer_bytes(i),
                    kind: ShardKind::Layer,
                }));
            } else {
                files.push(ShardFile {
                    name: format!("model_{mp_rank}_model_states.pt"),
                    bytes: (start..=end).map(layer_bytes).sum(),
                    kind: ShardKind::Model,
                });
            }
        }
        let per_rank_params = s.num_parameters() / (self.data as u64 * mp as u64);
        files.push(ShardFile {
            name: format!("zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states.pt"),
            bytes: (3 * per_rank_params + 3 * 5 * s.hidden_size) * OPTIMIZER_DTYPE_BYTES,
            kind: ShardKind::Optimizer,
        });
        files
    }

    /// Unscaled bytes of one checkpoint over every running rank.
    pub fn checkpoint_bytes(&self) -> u64 {
        (0..self.ranks)
            .flat_map(|r| self.rank_files(r))
            .map(|f| f.bytes)
            .sum()
    }
}

/// `bytes` divided by `scale` (≥ 1), rounded up so no shard becomes empty.
pub fn scaled(bytes: u64, scale: f64) -> u64 {
    if scale <= 1.0 {
        return bytes;
    }
    // Sizes stay below 2^53, where f64 holds integers exactly.
    (bytes as f64 / scale).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = (1u64 << 30) as f64;

    #[test]
    fn llama3_8b_parameters_by_hand() {
        // h=4096, kv dim = 4096/32*8 = 1024, ffn 14336, vocab 128256, 32 layers.
        let per_layer: u64 = 4096 + 4096 * (4096 + 2048) + 4096 * 4096 + 4096 + 3 * 4096 * 14336;
        let expected = 2 * 128256 * 4096 + 32 * per_layer + 4096;
        assert_eq!(per_layer, 218_112_000);
        assert_eq!(expected, 8_030_261_248);
        assert_eq!(LlamaModel::Llama3_8b.spec().num_parameters(), expected);
    }

    #[test]
    fn llama3_8b_rank_shards_by_hand() {
        // 1×1×8, ZeRO 3: every rank holds 1/8 of every layer (fp16) and
        // 1/8 of the optimizer (3 × N/8 + 15·h fp32 elements).
        let l = Layout::new(LlamaModel::Llama3_8b, false, None).unwrap();
        assert_eq!((l.ranks, l.data), (8, 8));
        let emb = 4096 * 128256 / 8;
        let layer = 4096 / 8
            + 4096 * 6144 / 8
            + 4096 * 4096 / 8
            + 4096 / 8
            + 4096 * 2 * 14336 / 8
            + 4096 * 14336 / 8;
        let model_elems: u64 = emb + 32 * layer + emb + 4096 / 8;
        let optim_elems: u64 = 3 * (8_030_261_248 / 8) + 15 * 4096;
        for rank in 0..8 {
            let files = l.rank_files(rank);
            assert_eq!(
                files,
                vec![
                    ShardFile {
                        name: format!("zero_pp_rank_{rank}_mp_rank_0_model_states.pt"),
                        bytes: model_elems * 2,
                        kind: ShardKind::Model,
                    },
                    ShardFile {
                        name: format!("zero_pp_rank_{rank}_mp_rank_0_optim_states.pt"),
                        bytes: optim_elems * 4,
                        kind: ShardKind::Optimizer,
                    },
                ]
            );
        }
        // The reference table's 105 GB (DLIO's GB are 2^30 bytes).
        let total = l.checkpoint_bytes() as f64 / GIB;
        assert!((total - 104.7).abs() < 0.05, "{total}");
    }

    #[test]
    fn llama3_70b_full_and_subset_by_hand() {
        // 8×1×8, ZeRO 3: rank 9 is tp 1, dp 1; layers split 8 ways by TP and 8 by DP.
        let l = Layout::new(LlamaModel::Llama3_70b, false, None).unwrap();
        assert_eq!((l.ranks, l.data), (64, 8));
        let f = l.rank_files(9);
        assert_eq!(f[0].name, "zero_pp_rank_1_mp_rank_1_model_states.pt");
        assert_eq!(f[1].name, "zero_pp_rank_1_mp_rank_1_optim_states.pt");
        let h: u64 = 8192;
        let kv = h / 128 * 8;
        let emb = h * 128256 / 8 / 8;
        let layer = h / 8
            + h * (h + 2 * kv) / 8 / 8
            + h * h / 8 / 8
            + h / 8
            + h * 2 * 28672 / 8 / 8
            + h * 28672 / 8 / 8;
        assert_eq!(f[0].bytes, (emb + 80 * layer + emb + h / 8) * 2);
        let n = LlamaModel::Llama3_70b.spec().num_parameters();
        assert_eq!(f[1].bytes, (3 * (n / 64) + 15 * h) * 4);
        let total = l.checkpoint_bytes() as f64 / GIB;
        assert!((total - 912.0).abs() < 1.0, "{total}");
        // Subset: 8 of the 64 processes, DP stays 8: 1/8 of the data (114 GB).
        let s = Layout::new(LlamaModel::Llama3_70b, true, None).unwrap();
        assert_eq!((s.ranks, s.data), (8, 8));
        assert_eq!(s.rank_files(3), l.rank_files(3));
        let subset = s.checkpoint_bytes() as f64 / GIB;
        assert!((subset - 114.0).abs() < 0.5, "{subset}");
    }

    #[test]
    fn llama3_405b_pipeline_layers_by_hand() {
        // 8×32×2, ZeRO 1: 126 layers over 32 stages: 30 stages of 4, the
        // first 126 % 32 = 30 stages get 4, the last two 3 (+ lm_head, norm).
        let l = Layout::new(LlamaModel::Llama3_405b, false, None).unwrap();
        assert_eq!((l.ranks, l.data), (512, 2));
        assert_eq!(l.layer_range(0), (0, 4));
        assert_eq!(l.layer_range(1), (5, 8));
        assert_eq!(l.layer_range(29), (117, 120));
        assert_eq!(l.layer_range(30), (121, 123));
        assert_eq!(l.layer_range(31), (124, 128));
        // Rank 0: layers 0..=4, one file each, then the optimizer.
        let f = l.rank_files(0);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "layer_0-model_0_model_states.pt",
                "layer_1-model_0_model_states.pt",
                "layer_2-model_0_model_states.pt",
                "layer_3-model_0_model_states.pt",
                "layer_4-model_0_model_states.pt",
                "zero_pp_rank_0_mp_rank_0_optim_states.pt",
            ]
        );
        let h: u64 = 16384;
        assert_eq!(f[0].bytes, h * 128256 / 8 * 2);
        let kv = h / 128 * 8;
        let layer = 2 * h + h * (h + 2 * kv) / 8 + h * h / 8 + 3 * h * 53248 / 8;
        assert_eq!(f[1].bytes, layer * 2);
        // DP rank 1 (rank 256) writes only its optimizer shard.
        let f = l.rank_files(256);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name, "zero_pp_rank_1_mp_rank_0_optim_states.pt");
        let n = LlamaModel::Llama3_405b.spec().num_parameters();
        assert_eq!(f[0].bytes, (3 * (n / 512) + 15 * h) * 4);
        let total = l.checkpoint_bytes() as f64 / GIB;
        // The table's 5.29 TB are 5,292 of DLIO's 2^30-byte GB.
        assert!((total / 1000.0 - 5.29).abs() < 0.01, "{total}");
    }

    #[test]
    fn llama3_1t_last_stage_by_hand() {
        let l = Layout::new(LlamaModel::Llama3_1t, false, None).unwrap();
        assert_eq!((l.ranks, l.data), (1024, 2));
        // 128 layers over 64 stages: 2 each; the last stage adds 129, 130.
        assert_eq!(l.layer_range(63), (127, 130));
        let f = l.rank_files(511);
        assert_eq!(f.len(), 5);
        assert_eq!(f[3].name, "layer_130-model_511_model_states.pt");
        assert_eq!(f[3].bytes, 25872 * 2);
    }

    #[test]
    fn bad_layouts_are_refused() {
        let e = Layout::new(LlamaModel::Llama3_70b, false, Some(12)).unwrap_err();
        assert!(e.to_string().contains("multiple of TP×PP"), "{e}");
        assert!(matches!(e, BenchError::BadLayout { ranks: 12, .. }));
        assert!(Layout::new(LlamaModel::Llama3_8b, true, None).is_err());
        assert!(Layout::new(LlamaModel::Llama3_405b, true, Some(4)).is_err());
        assert!(Layout::new(LlamaModel::Llama3_70b, false, Some(0)).is_err());
        // OPEN allows multiples of TP×PP.
        let l = Layout::new(LlamaModel::Llama3_70b, false, Some(16)).unwrap();
        assert_eq!(l.data, 2);
    }

    #[test]
    fn scaling_rounds_up() {
        assert_eq!(scaled(1000, 1.0), 1000);
        assert_eq!(scaled(1000, 3.0), 334);
        assert_eq!(scaled(1, 1000.0), 1);
    }
}
