//! The estimators: pure functions from typed inputs to typed outputs. No I/O, no clock,
//! no async, no actix, no Redis.

pub mod cost;
pub mod gate;
pub mod memory;
mod profile;
pub mod recommend;
pub mod time;
pub mod units;

pub use profile::Profile;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::catalog::Architecture;

/// Where an estimator writes its sentences (assumptions, warnings): a list for an answer,
/// or [`Unwritten`] for a caller that wants only the numbers, so that the text is never
/// formatted.
pub trait Notes {
    /// Adds the line `check` returns, if any; `check` runs only where lines are kept.
    fn add_some(&mut self, check: impl FnOnce() -> Option<String>);

    /// Adds the line `line` writes.
    fn add(&mut self, line: impl FnOnce() -> String) {
        self.add_some(|| Some(line()));
    }
}

impl Notes for Vec<String> {
    fn add_some(&mut self, check: impl FnOnce() -> Option<String>) {
        self.extend(check());
    }
}

/// Notes nobody reads: nothing is written.
pub struct Unwritten;

impl Notes for Unwritten {
    fn add_some(&mut self, _: impl FnOnce() -> Option<String>) {}
}

/// Numeric precision regime of training (design §2.1): `amp_*` keep fp32 master weights in
/// the optimizer, bare `bf16`/`fp16` keep everything in half precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    Fp32,
    #[default]
    AmpBf16,
    AmpFp16,
    Bf16,
    Fp16,
    Fp8,
}

impl Precision {
    pub fn is_mixed(self) -> bool {
        matches!(
            self,
            Precision::AmpBf16 | Precision::AmpFp16 | Precision::Fp8
        )
    }

    /// Bytes of one activation element (fp8 training keeps bf16 activations between
    /// Transformer Engine layers).
    pub fn activation_bytes(self) -> f64 {
        if self == Precision::Fp32 { 4.0 } else { 2.0 }
    }

    pub fn uses_bf16(self) -> bool {
        matches!(self, Precision::AmpBf16 | Precision::Bf16 | Precision::Fp8)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    #[default]
    Adamw,
    #[serde(rename = "adamw_8bit")]
    Adamw8bit,
    PagedAdamw,
    #[serde(rename = "paged_adamw_8bit")]
    PagedAdamw8bit,
    Adafactor,
    Sgd,
    SgdMomentum,
    Lion,
}

impl Optimizer {
    /// Paged optimizers keep their states in CUDA unified memory (bitsandbytes), outside the
    /// torch allocator's count.
    pub fn is_paged(self) -> bool {
        matches!(self, Optimizer::PagedAdamw | Optimizer::PagedAdamw8bit)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    #[default]
    Flash,
    Sdpa,
    Eager,
}

/// Training stack: the same configuration costs different memory in different stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    #[default]
    Generic,
    HfTrainer,
    Deepspeed,
    Megatron,
    Torchtune,
    Litgpt,
    Unsloth,
}

/// Memory-saving switches (design §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Optimization {
    ChunkedCrossEntropy,
    TorchCompile,
    OptimizerInBackward,
    ActivationOffloading,
    FusedLinearCrossEntropy,
    PackedSequences,
}

/// The set of [`Optimization`]s in force.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Optimizations {
    pub chunked_cross_entropy: bool,
    pub torch_compile: bool,
    pub optimizer_in_backward: bool,
    pub activation_offloading: bool,
    pub fused_linear_cross_entropy: bool,
    pub packed_sequences: bool,
}

impl Optimizations {
    pub fn from_list(list: &[Optimization]) -> Self {
        let has = |o| list.contains(&o);
        Self {
            chunked_cross_entropy: has(Optimization::ChunkedCrossEntropy),
            torch_compile: has(Optimization::TorchCompile),
            optimizer_in_backward: has(Optimization::OptimizerInBackward),
            activation_offloading: has(Optimization::ActivationOffloading),
            fused_linear_cross_entropy: has(Optimization::FusedLinearCrossEntropy),
            packed_sequences: has(Optimization::PackedSequences),
        }
    }
}

pub use crate::catalog::Projection;

/// What is trained and how (design §2.1 `method`), with each method's own settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Full,
    /// Only the last `trainable_layers` blocks are trained.
    Freeze {
        trainable_layers: u64,
    },
    Lora {
        rank: u64,
        targets: Targets,
    },
    /// LoRA over an NF4-quantised base (Dettmers et al. 2023).
    Qlora {
        rank: u64,
        targets: Targets,
        double_quantization: bool,
    },
    /// Trainable key/value prefixes in every layer (Li & Liang 2021).
    PrefixTuning {
        virtual_tokens: u64,
    },
    /// Trainable input embeddings only (Lester et al. 2021).
    PromptTuning {
        virtual_tokens: u64,
    },
    /// Houlsby bottleneck adapters, two per block.
    Adapter {
        bottleneck: u64,
    },
}

impl Method {
    pub fn is_lora_family(self) -> bool {
        matches!(self, Method::Lora { .. } | Method::Qlora { .. })
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Full => "full",
            Method::Freeze { .. } => "freeze",
            Method::Lora { .. } => "lora",
            Method::Qlora { .. } => "qlora",
            Method::PrefixTuning { .. } => "prefix_tuning",
            Method::PromptTuning { .. } => "prompt_tuning",
            Method::Adapter { .. } => "adapter",
        }
    }
}

/// Projections adapted by LoRA, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Targets(u8);

impl Targets {
    pub fn all() -> Self {
        Projection::ALL.iter().copied().collect()
    }

    pub fn contains(self, p: Projection) -> bool {
        self.0 & (1 << p as u8) != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Projection> {
        Projection::ALL
            .into_iter()
            .filter(move |&p| self.contains(p))
    }
}

impl FromIterator<Projection> for Targets {
    fn from_iter<I: IntoIterator<Item = Projection>>(iter: I) -> Self {
        Targets(iter.into_iter().fold(0, |bits, p| bits | 1 << p as u8))
    }
}

/// Data, tensor and pipeline parallel layout with ZeRO/FSDP sharding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    pub gpus: u64,
    /// 0–3; FSDP FULL_SHARD is 3, SHARD_GRAD_OP is 2.
    pub zero_stage: u8,
    pub offload_optimizer: bool,
    pub offload_parameters: bool,
    pub tensor_parallel: u64,
    pub pipeline_parallel: u64,
}

impl Parallelism {
    pub fn single_gpu() -> Self {
        Self {
            gpus: 1,
            zero_stage: 0,
            offload_optimizer: false,
            offload_parameters: false,
            tensor_parallel: 1,
            pipeline_parallel: 1,
        }
    }

    /// Data-parallel degree Nd = GPUs / (TP · PP).
    pub fn data_parallel(&self) -> u64 {
        (self.gpus / (self.tensor_parallel * self.pipeline_parallel)).max(1)
    }
}

/// The model an estimate is for: an architecture and its exact parameter count.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelShape {
    pub architecture: Architecture,
    /// Exact total parameters. Equals the architecture's count, except for a bare
    /// parameter count, where the architecture is only a typical shape.
    pub parameters: u64,
    /// True when the shape was made up from a parameter count (activations are then a
    /// typical-shape estimate).
    pub shape_estimated: bool,
}

impl ModelShape {
    pub fn from_architecture(architecture: Architecture) -> Self {
        let parameters = architecture.total_parameters();
        Self {
            architecture,
            parameters,
            shape_estimated: false,
        }
    }

    pub fn from_parameter_count(parameters: u64) -> Self {
        Self {
            architecture: Architecture::typical_for(parameters),
            parameters,
            shape_estimated: true,
        }
    }

    /// Factor from the shape's own count to the exact count (1 unless shape_estimated).
    pub fn parameter_scale(&self) -> f64 {
        self.parameters as f64 / self.architecture.total_parameters().max(1) as f64
    }
}
