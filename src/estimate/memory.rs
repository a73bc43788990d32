//! Peak GPU memory per GPU of one training configuration (design §3.1).
//!
//! The estimate is built in three steps:
//! 1. [`Prepared::new`] turns the plan into per-GPU parameter groups and bytes per
//!    parameter (model states, ZeRO sharding, PEFT dtypes) and per-token activation bytes;
//! 2. [`Prepared::breakdown`] evaluates the training timeline for a fleet size and
//!    micro-batch (end of forward, backward, optimizer step) and keeps the maximum;
//! 3. [`estimate`] adds the allocator reserve and CUDA context, the parameter counts, the
//!    fit table and the explanation.
//!
//! Sources are cited at each constant. "Korthikanti" is Korthikanti et al. 2022, *Reducing
//! Activation Recomputation in Large Transformer Models*; "ZeRO" is Rajbhandari et al.
//! 2020; "QLoRA" is Dettmers et al. 2023.

use std::sync::LazyLock;

use serde::Serialize;
use utoipa::ToSchema;

use super::units::{GIB, MIB, whole_bytes};
use super::{
    Attention, Framework, Method, ModelShape, Optimizations, Optimizer, Parallelism, Precision,
    Profile, Projection, Targets,
};
use crate::catalog::{Architecture, Gpu, MlpKind, NormKind};

/// Caching-allocator reserve above the allocated peak (`max_memory_reserved` /
/// `max_memory_allocated` − 1). fitcheck measured 7 % to 49 % (memory-modeling.md §2.1),
/// the high end only at long sequences with eager attention; 10 % is the typical
/// steady-state block-rounding and free-list overhead of PyTorch's caching allocator.
const ALLOCATOR_RESERVE_FRACTION: f64 = 0.10;

/// CUDA context, kernel images and cuBLAS/cuDNN workspaces: the device memory a process
/// holds before its first tensor. The HF "model training anatomy" guide measured 1,343 MiB
/// on a V100 with kernels loaded (reference row set S1); CUDA lazy loading (11.7+) cuts it
/// to 133–147 MiB on a T4 (fitcheck). The estimate takes a middle value; the range covers
/// both.
const CUDA_CONTEXT_BYTES: f64 = 768.0 * MIB;

/// Measured spread of the estimate on `memory-calibration.csv` (the accuracy report,
/// `cargo test --test api accuracy_memory -- --nocapture`): 80 % of the measured points lie
/// between the 10th (−26.0 %) and 90th (+29.0 %) percentile of the signed error
/// `predicted / measured − 1`, so the true peak lies within `predicted / (1 + error)`:
/// 1/1.29 − 1 = −22.5 % and 1/0.74 − 1 = +35.1 %, rounded outwards. The report checks
/// that the range holds at least 80 % of the rows.
pub const RANGE_LOW_FRACTION: f64 = -0.23;
pub const RANGE_HIGH_FRACTION: f64 = 0.36;

/// NF4 stores 4 bits per weight (QLoRA §2).
const NF4_BYTES: f64 = 0.5;
/// fp32 absmax per 64-weight block: 32/64 = 0.5 bit per parameter (QLoRA §2).
const NF4_SCALE_BYTES: f64 = 0.5 / 8.0;
/// Double quantisation: 8-bit absmax per 64 plus fp32 per 256 of those,
/// 8/64 + 32/(64·256) = 0.127 bit per parameter (QLoRA §2, "Double Quantization").
const NF4_DOUBLE_QUANT_SCALE_BYTES: f64 = 0.127 / 8.0;

/// bitsandbytes 8-bit optimizers quantise each state blockwise with one fp32 absmax per
/// 2,048 values (Dettmers et al. 2022, *8-bit Optimizers via Block-wise Quantization*).
const BNB_8BIT_STATE_BYTES: f64 = 1.0 + 4.0 / 2048.0;

/// torchtune's `CEWithChunkedOutputLoss` upcasts one of 8 chunks at a time.
const CROSS_ENTROPY_CHUNKS: f64 = 8.0;

/// Default bottleneck of Houlsby adapters (Houlsby et al. 2019 §3.1 sweep 8–256; 64 is the
/// `adapters` library default reduction for 4,096-wide models).
pub const DEFAULT_ADAPTER_BOTTLENECK: u64 = 64;
/// Virtual tokens for prefix / prompt tuning (the PEFT documentation examples use 20).
pub const DEFAULT_VIRTUAL_TOKENS: u64 = 20;
/// Trained top layers for `freeze` (LLaMA-Factory `freeze_trainable_layers` default 2).
pub const DEFAULT_FREEZE_TRAINABLE_LAYERS: u64 = 2;

/// The largest fleet the `min_gpus` search looks at.
pub const MAX_SEARCH_GPUS: u64 = 4096;
/// The largest micro-batch the `max_micro_batch_size` search looks at.
pub const MAX_SEARCH_MICRO_BATCH: u64 = 65_536;

/// A fully resolved training configuration: what the memory estimator takes.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPlan {
    pub model: ModelShape,
    pub method: Method,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub micro_batch_size: u64,
    pub sequence_length: u64,
    /// Longest sample of the data set, when batches are padded to their longest sample
    /// rather than full (`None`: every micro-batch is assumed full).
    pub max_sample_tokens: Option<u64>,
    pub gradient_checkpointing: bool,
    pub attention: Attention,
    pub parallelism: Parallelism,
    pub framework: Framework,
    pub optimizations: Optimizations,
}

/// Per-GPU memory, in bytes (design §2.3).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PerGpu {
    /// Base-model weights held on this GPU (frozen or trained).
    pub weights_bytes: u64,
    /// Gradients of trained base-model weights.
    pub gradients_bytes: u64,
    /// Optimizer states (and fp32 master weights) of trained base-model weights.
    pub optimizer_bytes: u64,
    /// Activations saved for backward at the peak.
    pub activations_bytes: u64,
    /// Logits and loss buffers at the peak.
    pub logits_bytes: u64,
    /// PEFT adapters: their weights, gradients and optimizer states.
    pub adapter_bytes: u64,
    /// Weights + gradients + optimizer states + adapters (what the ZeRO paper counts).
    pub model_states_bytes: u64,
    /// What `torch.cuda.max_memory_allocated()` would report.
    pub peak_allocated_bytes: u64,
    /// What `torch.cuda.max_memory_reserved()` would report (allocator reserve included).
    pub peak_reserved_bytes: u64,
    /// Reserved plus CUDA context and workspaces: what nvidia-smi shows.
    pub device_bytes: u64,
    /// `device_bytes` in GiB (2^30).
    pub total_gib: f64,
}

/// Bounds of `device_bytes` from the measured spread of the estimator.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ByteRange {
    pub low_bytes: u64,
    pub high_bytes: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ParameterCounts {
    /// All parameters, adapters included (PEFT `print_trainable_parameters` "all params").
    pub total: u64,
    pub trainable: u64,
    pub trainable_fraction: f64,
}

/// Whether the job fits one GPU type, and what would.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Fit {
    #[schema(example = "a100-80gb")]
    pub gpu: String,
    pub fits: bool,
    /// Usable memory minus `device_bytes` (negative when it does not fit).
    pub headroom_bytes: i64,
    /// Fewest GPUs that fit with the requested sharding, TP and PP (`null`: none up to
    /// 4,096; with ZeRO stage 0 more GPUs do not lower per-GPU memory).
    pub min_gpus: Option<u64>,
    /// Largest micro-batch that fits on the requested fleet (0: not even one).
    pub max_micro_batch_size: u64,
}

impl Fit {
    /// The free share of the GPU's usable memory (negative when it does not fit).
    pub fn headroom_fraction(&self, usable_bytes: u64) -> Option<f64> {
        (usable_bytes > 0).then(|| self.headroom_bytes as f64 / usable_bytes as f64)
    }
}

/// One phase of the training step and its allocated bytes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PhasePeak {
    #[schema(example = "forward_end")]
    pub phase: &'static str,
    pub allocated_bytes: u64,
}

/// The memory estimate (design §2.3).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemoryEstimate {
    pub per_gpu: PerGpu,
    pub range: ByteRange,
    pub parameters: ParameterCounts,
    /// Model states per GPU as a formula in Ψ (parameters) and Nd (data-parallel degree).
    #[schema(example = "(2 + 14/Nd)·Ψ")]
    pub model_states_formula: String,
    /// Host memory per GPU process: offloaded optimizer states and parameters, offloaded
    /// activations, paged optimizer states.
    pub cpu_bytes: u64,
    /// The phase that sets the peak, and every phase's allocated bytes.
    pub peak_phase: &'static str,
    pub phases: Vec<PhasePeak>,
    pub fits: Vec<Fit>,
    pub assumptions: Vec<String>,
    pub warnings: Vec<String>,
}

/// Bytes per parameter of one parameter class.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct StateBytes {
    weight: f64,
    gradient: f64,
    /// Optimizer states, fp32 master and any gradient partition kept by the optimizer.
    optimizer: f64,
}

/// Optimizer state bytes per trained parameter, states stored at `element_bytes`.
fn optimizer_state_bytes(optimizer: Optimizer, element_bytes: f64, factored_ratio: f64) -> f64 {
    match optimizer {
        // Adam keeps the first and second moment (Loshchilov & Hutter 2019).
        Optimizer::Adamw | Optimizer::PagedAdamw => 2.0 * element_bytes,
        Optimizer::Adamw8bit | Optimizer::PagedAdamw8bit => 2.0 * BNB_8BIT_STATE_BYTES,
        Optimizer::Sgd => 0.0,
        // Momentum buffer; Lion keeps one moment too (Chen et al. 2023).
        Optimizer::SgdMomentum | Optimizer::Lion => element_bytes,
        // Adafactor without momentum (HF default `beta1=None`) keeps a row and a column
        // second-moment vector per matrix (Shazeer & Stern 2018).
        Optimizer::Adafactor => element_bytes * factored_ratio,
    }
}

/// Everything about a plan that does not depend on the fleet size or the micro-batch.
#[derive(Debug, Clone)]
pub struct Prepared<'a> {
    plan: &'a MemoryPlan,
    profile: Profile,
    precision: Precision,
    /// Base parameters held per GPU before ZeRO sharding (after TP/PP).
    trainable_base: f64,
    frozen_base_bytes: f64,
    adapter_parameters: f64,
    base: StateBytes,
    adapter: StateBytes,
    /// Half-precision weight copies autocast keeps from forward to backward, per GPU.
    autocast_copy_bytes: f64,
    /// Bytes of one gathered layer (ZeRO-3/FSDP), per GPU.
    layer_gather_bytes: f64,
    layer_trainable_gradient_bytes: f64,
    largest_trainable_tensor: f64,
    dequantize_workspace_bytes: f64,
    /// Bytes held while loading the model, before training starts.
    load_peak_bytes: f64,
    /// Saved activation bytes of one layer: `per_token · tokens + per_score · b · s²`.
    layer_bytes_per_token: f64,
    layer_bytes_per_score: f64,
    layer_bytes_per_sequence_head: f64,
    backward_bytes_per_score: f64,
    checkpoint_bytes_per_token: f64,
    logits_bytes_per_token: f64,
    layers_with_activations: f64,
    virtual_tokens: u64,
}

/// The result of one evaluation of the timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    pub adapter: f64,
    pub activations: f64,
    pub logits: f64,
    pub cpu: f64,
    pub phases: [f64; 4],
    pub peak_allocated: f64,
    pub peak_reserved: f64,
    pub device: f64,
}

const PHASE_NAMES: [&str; 4] = ["load", "forward_end", "backward", "optimizer_step"];

impl<'a> Prepared<'a> {
    pub fn new(plan: &'a MemoryPlan) -> Self {
        let profile = Profile::of(plan.framework);
        let arch = &plan.model.architecture;
        let scale = plan.model.parameter_scale();
        let par = plan.parallelism;
        let (tp, pp) = (par.tensor_parallel as f64, par.pipeline_parallel as f64);
        let layers = arch.layers as f64;

        // Full fine-tuning in fp16 under HF Trainer runs as AMP (see Profile).
        let precision = if plan.precision == Precision::Fp16
            && profile.pure_fp16_runs_as_amp
            && matches!(plan.method, Method::Full | Method::Freeze { .. })
        {
            Precision::AmpFp16
        } else {
            plan.precision
        };

        // Parameter groups on one GPU after tensor and pipeline parallel (Megatron splits
        // every block matrix over TP and the blocks over PP stages; the embedding is split
        // over TP on the first stage, the head on the last; the busiest stage is counted).
        let block = arch.block_linear_parameters() as f64 * scale;
        let norms = arch.norm_parameters() as f64 * scale;
        let embedding = arch.embedding_parameters() as f64 * scale;
        let head = if profile.unties_embeddings {
            arch.embedding_parameters()
        } else {
            arch.head_parameters()
        } as f64
            * scale;
        let block_share = block / (tp * pp) + norms / pp;
        let vocab_share = if pp > 1.0 {
            embedding.max(head) / tp
        } else {
            (embedding + head) / tp
        };

        let factored_ratio = rank_one_parameters(arch) / block.max(1.0);
        let element = if precision == Precision::Fp32 {
            4.0
        } else {
            2.0
        };

        // Bytes per trained base parameter by precision regime.
        let base = match precision {
            Precision::Fp32 => StateBytes {
                weight: 4.0,
                gradient: 4.0,
                optimizer: optimizer_state_bytes(plan.optimizer, 4.0, factored_ratio),
            },
            p if p.is_mixed() && profile.amp_keeps_fp32_weights => StateBytes {
                weight: 4.0,
                gradient: 4.0,
                optimizer: optimizer_state_bytes(plan.optimizer, 4.0, factored_ratio),
            },
            // ZeRO §3.1: 16-bit weights and gradients, fp32 master (4) + fp32 states.
            p if p.is_mixed() => StateBytes {
                // Transformer Engine caches an fp8 copy of each weight (1 byte).
                weight: if p == Precision::Fp8 { 3.0 } else { 2.0 },
                gradient: if profile.fp32_gradients_mixed {
                    4.0
                } else {
                    2.0
                },
                optimizer: 4.0
                    + profile.extra_optimizer_bytes_mixed
                    + optimizer_state_bytes(plan.optimizer, 4.0, factored_ratio),
            },
            // Pure half precision: states in the weights' dtype (torchtune, LitGPT
            // bf16-true).
            _ => StateBytes {
                weight: 2.0,
                gradient: 2.0,
                optimizer: optimizer_state_bytes(plan.optimizer, 2.0, factored_ratio),
            },
        };
        let adapter_element = if profile.fp32_adapters || precision == Precision::Fp32 {
            4.0
        } else {
            2.0
        };
        let adapter = StateBytes {
            weight: adapter_element,
            gradient: adapter_element,
            optimizer: optimizer_state_bytes(plan.optimizer, adapter_element, factored_ratio),
        };

        // Which base parameters are trained on this GPU, and what the frozen rest costs.
        let frozen_element = if precision == Precision::Fp32 {
            4.0
        } else {
            2.0
        };
        let per_gpu_layers = layers / pp;
        let (trainable_base, frozen_base_bytes) = match plan.method {
            Method::Full => (block_share + vocab_share, 0.0),
            Method::Freeze { trainable_layers } => {
                // The stage holding the top layers is the busiest.
                let trained = (trainable_layers as f64).min(per_gpu_layers) / per_gpu_layers;
                (
                    block_share * trained,
                    (block_share * (1.0 - trained) + vocab_share) * frozen_element,
                )
            }
            Method::Qlora {
                double_quantization,
                ..
            } => {
                let scales = if double_quantization {
                    NF4_DOUBLE_QUANT_SCALE_BYTES
                } else {
                    NF4_SCALE_BYTES
                };
                let unquantized_element = if profile.kbit_upcasts_unquantized {
                    4.0
                } else {
                    frozen_element
                };
                let quantized_head = if profile.quantizes_lm_head {
                    head / tp
                } else {
                    0.0
                };
                let unquantized = norms / pp + vocab_share - quantized_head;
                (
                    0.0,
                    (block / (tp * pp) + quantized_head) * (NF4_BYTES + scales)
                        + unquantized * unquantized_element,
                )
            }
            _ => (0.0, (block_share + vocab_share) * frozen_element),
        };
        let adapter_parameters = adapter_parameter_count(arch, plan.method) as f64 / (tp * pp);

        let autocast_copy_bytes = if precision.is_mixed() && profile.amp_keeps_fp32_weights {
            2.0 * trainable_base
        } else {
            0.0
        };

        let layer_parameters = arch.parameters_per_layer() as f64 * scale / tp;
        // FSDP/ZeRO-3 hold the layer being computed and the prefetched next one, unsharded,
        // in the compute dtype (a quantised base stays quantised).
        let gather_element = if trainable_base > 0.0 {
            element
        } else {
            (frozen_base_bytes / (block_share + vocab_share).max(1.0)).min(element)
        };
        let layer_gather_bytes = 2.0 * layer_parameters * gather_element;
        let layer_trainable_gradient_bytes = if matches!(plan.method, Method::Full) {
            layer_parameters * base.gradient
        } else {
            adapter_parameters / layers.max(1.0) * adapter.gradient
        };

        let largest_trainable_tensor = if trainable_base > 0.0 {
            arch.largest_matrix_parameters() as f64 * scale / tp
        } else {
            adapter_parameters / layers.max(1.0)
        };
        let dequantize_workspace_bytes = if matches!(plan.method, Method::Qlora { .. }) {
            2.0 * arch.largest_matrix_parameters() as f64 / tp
        } else {
            0.0
        };

        let load_peak_bytes =
            if matches!(plan.method, Method::Qlora { .. }) && profile.quantizes_after_loading {
                2.0 * (block_share + vocab_share)
            } else {
                0.0
            };
        let activations = ActivationModel::new(plan, precision, &profile);
        let (virtual_tokens, layers_with_activations) = match plan.method {
            Method::PromptTuning { virtual_tokens } => (virtual_tokens, layers),
            Method::Freeze { trainable_layers } => (0, (trainable_layers as f64).min(layers)),
            _ => (0, layers),
        };

        Prepared {
            plan,
            profile,
            precision,
            trainable_base,
            frozen_base_bytes,
            adapter_parameters,
            base,
            adapter,
            autocast_copy_bytes,
            layer_gather_bytes,
            layer_trainable_gradient_bytes,
            largest_trainable_tensor,
            dequantize_workspace_bytes,
            load_peak_bytes,
            layer_bytes_per_token: activations.per_token / tp,
            layer_bytes_per_score: activations.per_score / tp,
            layer_bytes_per_sequence_head: activations.per_sequence_head / tp,
            backward_bytes_per_score: activations.backward_per_score / tp,
            checkpoint_bytes_per_token: precision.activation_bytes() * arch.hidden as f64 / tp,
            logits_bytes_per_token: activations.logits_per_token / tp,
            layers_with_activations,
            virtual_tokens,
        }
    }

    /// Tokens of the longest micro-batch's sequences.
    fn effective_sequence(&self) -> f64 {
        let plan = self.plan;
        let s = match plan.max_sample_tokens {
            Some(longest) if !plan.optimizations.packed_sequences => {
                plan.sequence_length.min(longest)
            }
            _ => plan.sequence_length,
        };
        (s + self.virtual_tokens) as f64
    }

    /// Evaluates the step timeline for `gpus` GPUs and micro-batch `micro_batch`.
    pub fn breakdown(&self, gpus: u64, micro_batch: u64) -> Breakdown {
        let plan = self.plan;
        let par = plan.parallelism;
        let nd = (gpus / (par.tensor_parallel * par.pipeline_parallel)).max(1) as f64;
        let stage = par.zero_stage;
        let divisor = |from_stage: u8| if stage >= from_stage { nd } else { 1.0 };

        // ZeRO (§5.1): stage 1 shards optimizer states, 2 also gradients, 3 also weights.
        let weights =
            (self.trainable_base * self.base.weight + self.frozen_base_bytes) / divisor(3);
        let gradients = self.trainable_base * self.base.gradient / divisor(2);
        let optimizer = self.trainable_base * self.base.optimizer / divisor(1);
        let adapter_weights = self.adapter_parameters * self.adapter.weight / divisor(3);
        let adapter_gradients = self.adapter_parameters * self.adapter.gradient / divisor(2);
        let adapter_optimizer = self.adapter_parameters * self.adapter.optimizer / divisor(1);

        let mut cpu = 0.0;
        let optimizer_on_host = par.offload_optimizer || plan.optimizer.is_paged();
        let (optimizer_gpu, adapter_optimizer_gpu) = if optimizer_on_host {
            cpu += optimizer + adapter_optimizer;
            (0.0, 0.0)
        } else {
            (optimizer, adapter_optimizer)
        };
        // ZeRO-Offload moves the gradient partition to the host with the optimizer
        // (Ren et al. 2021 §4.1); FSDP `CPUOffload(offload_params=True)` does the same.
        // The GPU keeps one layer's gradients as the reduce buffer.
        let gradients_gpu = if par.offload_optimizer {
            cpu += gradients + adapter_gradients;
            self.layer_trainable_gradient_bytes
                .min(gradients + adapter_gradients)
        } else {
            gradients + adapter_gradients
        };
        let weights_gpu = if par.offload_parameters {
            cpu += weights;
            0.0
        } else {
            weights
        };
        // Parameters that live elsewhere (other ranks or the host) are fetched a layer at a
        // time into these buffers.
        let sharding_buffers = if stage >= 3 && (nd > 1.0 || par.offload_parameters) {
            self.layer_gather_bytes + self.layer_trainable_gradient_bytes
        } else {
            0.0
        };
        // Optimizer-in-backward steps and frees each gradient as soon as it is complete
        // (torchtune `optimizer_in_bwd`): one tensor's gradient is live at a time.
        let gradients_live = if plan.optimizations.optimizer_in_backward {
            (self.largest_trainable_tensor * self.base.gradient.max(self.adapter.gradient))
                .min(gradients_gpu)
        } else {
            gradients_gpu
        };

        // Activations of one micro-batch.
        let b = micro_batch as f64;
        let s = self.effective_sequence();
        let tokens = b * s;
        let one_layer = tokens * self.layer_bytes_per_token
            + b * s * s * self.layer_bytes_per_score
            + b * s * self.layer_bytes_per_sequence_head;
        let layers = self.layers_with_activations;
        let checkpoint_layer = tokens * self.checkpoint_bytes_per_token;
        // Korthikanti §4.2: with 1F1B the first pipeline stage holds p micro-batches of L/p
        // layers, i.e. L layers' worth; checkpointing keeps each layer's input (2sbh).
        let saved = if plan.gradient_checkpointing {
            layers * checkpoint_layer
        } else {
            layers * one_layer
        };
        let (saved_gpu, recompute) = if plan.optimizations.activation_offloading {
            cpu += saved;
            (checkpoint_layer, one_layer)
        } else if plan.gradient_checkpointing {
            (saved, one_layer)
        } else {
            (saved, 0.0)
        };
        // The embedding output and the final norm's output live beside the layers.
        let stem = 2.0 * checkpoint_layer;
        let logits = tokens * self.logits_bytes_per_token;

        let resident = weights_gpu
            + optimizer_gpu
            + adapter_weights
            + adapter_optimizer_gpu
            + sharding_buffers
            + self.dequantize_workspace_bytes;
        // Peak = max over phases, not the sum (memory-modeling.md §2.2; fitcheck: under
        // checkpointing the peak is checkpoints + max(logits hump, one-layer recompute)).
        let forward_end = resident + self.autocast_copy_bytes + saved_gpu + stem + logits;
        let backward_workspace = b * s * s * self.backward_bytes_per_score;
        let backward = resident
            + self.autocast_copy_bytes
            + gradients_live
            + saved_gpu / layers.max(1.0)
            + recompute.max(one_layer)
            + backward_workspace
            + stem;
        let step_temporaries = self.largest_trainable_tensor * 4.0;
        let optimizer_step = resident + gradients_live + step_temporaries;
        // Loading: a stack that quantises after loading holds the 16-bit base first.
        let load = self.load_peak_bytes / divisor(3);
        let phases = [load, forward_end, backward, optimizer_step];
        let peak_allocated = phases.iter().copied().fold(0.0, f64::max);
        let peak_reserved = peak_allocated * (1.0 + ALLOCATOR_RESERVE_FRACTION);
        let activations_at_peak = if peak_allocated == forward_end {
            saved_gpu + stem
        } else if peak_allocated == backward {
            saved_gpu / layers.max(1.0) + recompute.max(one_layer) + backward_workspace + stem
        } else {
            0.0
        };
        Breakdown {
            weights,
            gradients,
            optimizer,
            adapter: adapter_weights + adapter_gradients + adapter_optimizer,
            activations: activations_at_peak,
            logits: if peak_allocated == forward_end {
                logits
            } else {
                0.0
            },
            cpu,
            phases,
            peak_allocated,
            peak_reserved,
            device: peak_reserved + CUDA_CONTEXT_BYTES,
        }
    }

    /// Fewest GPUs (a multiple of TP·PP) whose per-GPU `device` fits `usable` bytes.
    /// Memory never grows with the data-parallel degree, so a binary search is exact.
    pub fn min_gpus(&self, usable: f64) -> Option<u64> {
        let unit = self.plan.parallelism.tensor_parallel * self.plan.parallelism.pipeline_parallel;
        let fits = |k: u64| self.breakdown(k * unit, self.plan.micro_batch_size).device <= usable;
        let (mut low, mut high) = (1, MAX_SEARCH_GPUS / unit);
        if high == 0 || !fits(high) {
            return None;
        }
        while low < high {
            let mid = (low + high) / 2;
            if fits(mid) { high = mid } else { low = mid + 1 }
        }
        Some(low * unit)
    }

    /// Largest micro-batch that fits `usable` bytes on the requested fleet (0 if none).
    /// Memory grows with the micro-batch, so a binary search over the full model is exact.
    pub fn max_micro_batch(&self, usable: f64) -> u64 {
        let gpus = self.plan.parallelism.gpus;
        let fits = |b: u64| self.breakdown(gpus, b).device <= usable;
        if !fits(1) {
            return 0;
        }
        let (mut low, mut high) = (1, MAX_SEARCH_MICRO_BATCH);
        while low < high {
            let mid = (low + high).div_ceil(2);
            if fits(mid) { low = mid } else { high = mid - 1 }
        }
        low
    }

    fn fit(&self, gpu: &Gpu, device: f64) -> Fit {
        let usable = gpu.memory_bytes_usable as f64;
        Fit {
            gpu: gpu.id.clone(),
            fits: device <= usable,
            headroom_bytes: (usable - device).round() as i64,
            min_gpus: self.min_gpus(usable),
            max_micro_batch_size: self.max_micro_batch(usable),
        }
    }
}

/// LoRA-style count of `r·(d_in + d_out)` over every block matrix with r = 1: the size of
/// Adafactor's factored second moment.
fn rank_one_parameters(arch: &Architecture) -> f64 {
    lora_parameters(arch, 1, Targets::all()) as f64
}

/// Trainable parameters LoRA adds: `r·(d_in + d_out)` per targeted matrix (Hu et al. 2021),
/// in every layer, in every expert for MLP targets.
pub fn lora_parameters(arch: &Architecture, rank: u64, targets: Targets) -> u64 {
    let attention_layers = arch.layers;
    let mut total = 0;
    for projection in targets.iter() {
        if projection.is_mlp() {
            for (count, width) in arch.mlp_instances() {
                if let Some((i, o)) = arch.projection_shape(projection, width) {
                    total += count * rank * (i + o);
                }
            }
        } else if let Some((i, o)) = arch.projection_shape(projection, arch.intermediate) {
            total += attention_layers * rank * (i + o);
        }
    }
    total
}

/// Trainable parameters a PEFT method adds to the model (0 for full and freeze).
pub fn adapter_parameter_count(arch: &Architecture, method: Method) -> u64 {
    let h = arch.hidden;
    match method {
        Method::Full | Method::Freeze { .. } => 0,
        Method::Lora { rank, targets } | Method::Qlora { rank, targets, .. } => {
            lora_parameters(arch, rank, targets)
        }
        // PEFT PrefixTuning: `num_virtual_tokens · num_layers · 2 · token_dim` (a key and a
        // value vector per virtual token and layer).
        Method::PrefixTuning { virtual_tokens } => virtual_tokens * arch.layers * 2 * h,
        // PEFT PromptTuning: `num_virtual_tokens · token_dim`.
        Method::PromptTuning { virtual_tokens } => virtual_tokens * h,
        // Houlsby et al. 2019: two adapters per block, each down (h·m + m) and up (m·h + h).
        Method::Adapter { bottleneck } => arch.layers * 2 * (2 * h * bottleneck + bottleneck + h),
    }
}

/// Saved-for-backward bytes of one transformer block, derived from Korthikanti Table 2
/// (`sbh(34 + 5as/h)` for the GPT block) term by term for modern blocks: which tensors
/// autograd keeps, at which width and dtype. PyTorch saves a linear layer's input only when
/// its weight needs a gradient (autograd's `should_compute_output` for `mm`), so frozen
/// projections save nothing of their own.
struct ActivationModel {
    per_token: f64,
    /// Bytes per attention score element (`b · heads · s²`), eager attention only.
    per_score: f64,
    /// Bytes per `(sequence, head)` pair: the fp32 log-sum-exp of flash/SDPA attention.
    per_sequence_head: f64,
    /// Extra bytes per score element while one eager layer runs its backward.
    backward_per_score: f64,
    logits_per_token: f64,
}

impl ActivationModel {
    fn new(plan: &MemoryPlan, precision: Precision, profile: &Profile) -> Self {
        let arch = &plan.model.architecture;
        let a = precision.activation_bytes();
        let h = arch.hidden as f64;
        let q = arch.q_width() as f64;
        let kv = arch.kv_width() as f64;
        let heads = arch.heads as f64;
        let fused = plan.optimizations.torch_compile || profile.fused_kernels;
        let saves = |p: Projection| -> bool {
            match plan.method {
                Method::Full | Method::Freeze { .. } => true,
                Method::Lora { targets, .. } => targets.contains(p),
                // bitsandbytes `MatMul4Bit` saves its input for every quantised linear.
                Method::Qlora { .. } => true,
                _ => false,
            }
        };
        // Norm: HF RMSNorm upcasts its input to fp32 and keeps it (4 bytes/element); a fused
        // kernel keeps the 16-bit input; LayerNorm keeps its input.
        let norm = match (arch.norm, fused) {
            (NormKind::RmsNorm, false) => 4.0_f64.max(a),
            _ => a,
        } * h;
        let dropout_mask = if arch.dropout { h } else { 0.0 };

        // Attention sublayer.
        let mut attention = norm + dropout_mask;
        if saves(Projection::Q) || saves(Projection::K) || saves(Projection::V) {
            attention += a * h; // the normed input shared by q, k, v
        }
        let (mut per_score, mut per_sequence_head, mut backward_per_score) = (0.0, 0.0, 0.0);
        // Whether the attention output (the o projection's input) is kept anyway.
        let attention_keeps_output = plan.attention != Attention::Eager || saves(Projection::O);
        match plan.attention {
            // FlashAttention-2 keeps q, k, v at their own widths (native GQA), the output
            // and an fp32 log-sum-exp per row and head (Dao 2023).
            Attention::Flash => {
                attention += a * (q + 2.0 * kv) + a * q;
                per_sequence_head = 4.0 * heads;
            }
            // SDPA's memory-efficient kernel keeps the same, but HF repeats k and v to
            // every head first (`repeat_kv`).
            Attention::Sdpa => {
                attention += a * 3.0 * q + a * q;
                per_sequence_head = 4.0 * heads;
            }
            // Eager: q and repeated k, v, the fp32 softmax output kept by softmax backward
            // and its 16-bit copy kept by the value matmul; dropout adds a mask and output.
            Attention::Eager => {
                attention += a * 3.0 * q;
                if saves(Projection::O) {
                    attention += a * q;
                }
                // (In fp32 the softmax output is already the matmul's input: no copy.)
                let copy = if a < 4.0 { a } else { 0.0 };
                per_score = 4.0 + copy + if arch.dropout { 1.0 + 4.0 } else { 0.0 };
                // fitcheck measured ≈ 9 live 16-bit copies of the scores while a layer runs
                // its backward (memory-modeling.md §2.6): gradients of the probabilities,
                // the softmax and the scores beside the kept ones.
                backward_per_score = (9.0 * 2.0 - per_score).max(0.0);
            }
        }

        // MLP sublayer(s): per token, `experts_per_token` routed experts plus shared ones.
        let mut mlp = norm + dropout_mask;
        if saves(Projection::Gate) || saves(Projection::Up) {
            mlp += a * h;
        }
        let mlp_width: f64 = match arch.moe {
            None => arch.intermediate as f64,
            Some(moe) => {
                let routed = (moe.experts_per_token + moe.shared_experts) as f64
                    * moe.expert_intermediate as f64;
                let moe_share = arch.moe_layers() as f64 / arch.layers.max(1) as f64;
                moe_share * routed + (1.0 - moe_share) * arch.intermediate as f64
            }
        };
        mlp += match arch.mlp {
            // SwiGLU: gate output (kept by SiLU), SiLU output and up output (kept by the
            // product); a fused kernel keeps only gate and up outputs.
            MlpKind::Gated => (if fused { 2.0 } else { 3.0 }) * a * mlp_width,
            // GELU MLP: fc1 output (kept by GELU).
            MlpKind::Plain => a * mlp_width,
        };
        if saves(Projection::Down) {
            mlp += a * mlp_width; // the down projection's input
        }
        if let Some(moe) = arch.moe {
            mlp += 4.0 * moe.experts as f64; // fp32 router logits
        }
        let (dropout_attention, dropout_mlp) =
            lora_dropout_bytes(plan, profile, a, h, q, mlp_width, attention_keeps_output);
        attention += dropout_attention;
        mlp += dropout_mlp;

        // Logits and loss (memory-modeling.md §2.7), per token.
        let vocab = arch.vocab as f64;
        let full = profile.logits_bytes_per_element(a);
        let per_element = if plan.optimizations.fused_linear_cross_entropy {
            0.0
        } else if plan.optimizations.chunked_cross_entropy {
            a + (full - a).max(0.0) / CROSS_ENTROPY_CHUNKS
        } else {
            full
        };
        ActivationModel {
            per_token: attention + mlp,
            per_score: per_score * heads,
            per_sequence_head,
            backward_per_score: backward_per_score * heads,
            logits_per_token: per_element * vocab,
        }
    }
}

/// Extra bytes per token that LoRA dropout keeps (see [`Profile::lora_dropout`]), for the
/// attention and MLP sublayers: each adapter input gets a 1-byte mask and its own dropped
/// copy (`a` bytes/element). LitGPT's fused QKV adapter drops its shared input once; o, gate,
/// up and down have their own. Under LoRA the dropped copy replaces the input the adapter
/// would otherwise keep; under QLoRA bitsandbytes' `MatMul4Bit` keeps that input as well.
fn lora_dropout_bytes(
    plan: &MemoryPlan,
    profile: &Profile,
    a: f64,
    h: f64,
    q: f64,
    mlp_width: f64,
    attention_keeps_output: bool,
) -> (f64, f64) {
    let (targets, quantized) = match plan.method {
        Method::Lora { targets, .. } => (targets, false),
        Method::Qlora { targets, .. } => (targets, true),
        _ => return (0.0, 0.0),
    };
    if !profile.lora_dropout {
        return (0.0, 0.0);
    }
    let group = |width: f64| (1.0 + a) * width;
    // The undropped input this adapter input would keep and no longer needs.
    let replaced = |width: f64, kept_elsewhere: bool| {
        if quantized || kept_elsewhere {
            0.0
        } else {
            a * width
        }
    };
    let mut attention = 0.0;
    if targets.contains(Projection::Q)
        || targets.contains(Projection::K)
        || targets.contains(Projection::V)
    {
        attention += group(h) - replaced(h, false);
    }
    if targets.contains(Projection::O) {
        attention += group(q) - replaced(q, attention_keeps_output);
    }
    let mut mlp = 0.0;
    let gate_up = [Projection::Gate, Projection::Up]
        .into_iter()
        .filter(|p| targets.contains(*p))
        .count() as f64;
    if gate_up > 0.0 {
        mlp += gate_up * group(h) - replaced(h, false);
    }
    if targets.contains(Projection::Down) {
        mlp += group(mlp_width) - replaced(mlp_width, false);
    }
    (attention, mlp)
}

/// Model-states formula for the response, e.g. `(2 + 14/Nd)·Ψ`, over parameters `psi`.
fn states_formula(stage: u8, bytes: StateBytes, psi: &str) -> String {
    // Three decimals at most, no trailing zeros: 16, 2.5, 0.127.
    let n = |x: f64| ((x * 1000.0).round() / 1000.0).to_string();
    let StateBytes {
        weight: w,
        gradient: g,
        optimizer: k,
    } = bytes;
    match stage {
        0 => format!("{}·{psi}", n(w + g + k)),
        1 => format!("({} + {}/Nd)·{psi}", n(w + g), n(k)),
        2 => format!("({} + {}/Nd)·{psi}", n(w), n(g + k)),
        _ => format!("({}/Nd)·{psi}", n(w + g + k)),
    }
}

/// The largest byte count an estimate of `plan` reports: the top of its range.
/// Answers give bytes as 64-bit integers, so a plan beyond them (a micro-batch of 10^11
/// tokens, eager attention over 10^7 tokens) is refused rather than answered with a
/// number cut short.
pub fn largest_reported_bytes(plan: &MemoryPlan) -> f64 {
    let b = Prepared::new(plan).breakdown(plan.parallelism.gpus, plan.micro_batch_size);
    b.device * (1.0 + RANGE_HIGH_FRACTION)
}

/// Estimates peak memory per GPU and the fit table for `gpus` (the requested GPU, or the
/// whole catalog).
pub fn estimate(plan: &MemoryPlan, gpus: &[Gpu]) -> MemoryEstimate {
    let prepared = Prepared::new(plan);
    let b = prepared.breakdown(plan.parallelism.gpus, plan.micro_batch_size);
    let arch = &plan.model.architecture;

    let adapter_total = adapter_parameter_count(arch, plan.method);
    let total = plan.model.parameters + adapter_total;
    let trainable_base = match plan.method {
        Method::Full => plan.model.parameters,
        Method::Freeze { trainable_layers } => {
            (arch.parameters_per_layer() as f64 * plan.model.parameter_scale()) as u64
                * trainable_layers.min(arch.layers)
        }
        _ => 0,
    };
    let trainable = trainable_base + adapter_total;

    let peak_index = b
        .phases
        .iter()
        .position(|&p| p == b.peak_allocated)
        .unwrap_or(0);
    let formula = match plan.method {
        Method::Full => states_formula(plan.parallelism.zero_stage, prepared.base, "Ψ"),
        _ => {
            let trained = if trainable_base > 0 {
                prepared.base
            } else {
                prepared.adapter
            };
            format!(
                "frozen base {:.3} GB + {}",
                b.weights / 1e9,
                states_formula(plan.parallelism.zero_stage, trained, "Ψ_trainable")
            )
        }
    };

    MemoryEstimate {
        per_gpu: PerGpu {
            weights_bytes: whole_bytes(b.weights),
            gradients_bytes: whole_bytes(b.gradients),
            optimizer_bytes: whole_bytes(b.optimizer),
            activations_bytes: whole_bytes(b.activations),
            logits_bytes: whole_bytes(b.logits),
            adapter_bytes: whole_bytes(b.adapter),
            model_states_bytes: whole_bytes(b.weights + b.gradients + b.optimizer + b.adapter),
            peak_allocated_bytes: whole_bytes(b.peak_allocated),
            peak_reserved_bytes: whole_bytes(b.peak_reserved),
            device_bytes: whole_bytes(b.device),
            total_gib: (b.device / GIB * 1000.0).round() / 1000.0,
        },
        range: ByteRange {
            low_bytes: whole_bytes(b.device * (1.0 + RANGE_LOW_FRACTION)),
            high_bytes: whole_bytes(b.device * (1.0 + RANGE_HIGH_FRACTION)),
        },
        parameters: ParameterCounts {
            total,
            trainable,
            trainable_fraction: trainable as f64 / total.max(1) as f64,
        },
        model_states_formula: formula,
        cpu_bytes: whole_bytes(b.cpu),
        peak_phase: PHASE_NAMES[peak_index],
        phases: PHASE_NAMES
            .iter()
            .zip(b.phases)
            .map(|(&phase, bytes)| PhasePeak {
                phase,
                allocated_bytes: whole_bytes(bytes),
            })
            .collect(),
        fits: gpus.iter().map(|gpu| prepared.fit(gpu, b.device)).collect(),
        assumptions: assumptions(&prepared),
        warnings: warnings(&prepared, &b, gpus),
    }
}

/// The assumptions whose numbers are the model's constants, written out once (formatting
/// a float to a fixed precision is a measurable share of an estimate).
static RESERVE_ASSUMPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "peak_reserved = peak_allocated × {:.2} (caching allocator); device = reserved + {:.0} MiB CUDA context and workspaces",
        1.0 + ALLOCATOR_RESERVE_FRACTION,
        CUDA_CONTEXT_BYTES / MIB
    )
});
static RANGE_ASSUMPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "range holds 80 % of the calibration set's measured peaks ({:+.0} % to {:+.0} % around device_bytes)",
        RANGE_LOW_FRACTION * 100.0,
        RANGE_HIGH_FRACTION * 100.0
    )
});

fn assumptions(p: &Prepared) -> Vec<String> {
    let plan = p.plan;
    let mut out = vec![
        format!(
            "precision {}: {}",
            serde_name(&p.precision),
            match p.precision {
                Precision::Fp32 => "fp32 weights, gradients and optimizer states",
                pr if pr.is_mixed() && p.profile.amp_keeps_fp32_weights =>
                    "fp32 weights and gradients with autocast 16-bit copies kept for backward",
                pr if pr.is_mixed() =>
                    "16-bit weights and gradients, fp32 master weights and states in the optimizer (ZeRO paper)",
                _ => "16-bit weights, gradients and optimizer states (no fp32 master)",
            }
        ),
        format!(
            "micro-batch {} × {} tokens{}",
            plan.micro_batch_size,
            p.effective_sequence(),
            if plan.max_sample_tokens.is_some() && !plan.optimizations.packed_sequences {
                " (batches padded to the longest sample)"
            } else {
                " (every micro-batch full)"
            }
        ),
        format!(
            "{} GPU(s): data parallel {}, tensor parallel {}, pipeline parallel {}, ZeRO stage {}",
            plan.parallelism.gpus,
            plan.parallelism.data_parallel(),
            plan.parallelism.tensor_parallel,
            plan.parallelism.pipeline_parallel,
            plan.parallelism.zero_stage
        ),
        "gradients freed between steps (zero_grad(set_to_none=True)); no gradient-accumulation buffer beyond the gradients themselves".into(),
        format!("framework profile {}", serde_name(&plan.framework)),
        RESERVE_ASSUMPTION.clone(),
        RANGE_ASSUMPTION.clone(),
    ];
    if plan.parallelism.tensor_parallel > 1 {
        out.push("tensor parallel with sequence parallelism (Korthikanti et al. 2022)".into());
    }
    let arch = &plan.model.architecture;
    if arch.tied_embeddings && p.profile.unties_embeddings {
        out.push(format!(
            "the framework keeps the tied embedding and the LM head as two tensors: {} parameters counted twice",
            arch.embedding_parameters()
        ));
    }
    if let Method::Qlora {
        double_quantization,
        ..
    } = plan.method
    {
        out.push(format!(
            "QLoRA base in NF4 with {} quantisation constants; embeddings{} unquantised",
            if double_quantization {
                "double-quantised (0.127 bit/param)"
            } else {
                "fp32 (0.5 bit/param)"
            },
            if p.profile.quantizes_lm_head {
                ""
            } else {
                " and LM head"
            }
        ));
    }
    out
}

fn warnings(p: &Prepared, b: &Breakdown, gpus: &[Gpu]) -> Vec<String> {
    let plan = p.plan;
    let mut out = Vec::new();
    if plan.model.shape_estimated {
        out.push(
            "model given as a parameter count: model states are exact, activations and logits use a typical decoder shape".into(),
        );
    }
    if p.precision != plan.precision {
        out.push(format!(
            "{} cannot step pure fp16 weights (GradScaler refuses fp16 gradients); estimated as amp_fp16",
            serde_name(&plan.framework)
        ));
    }
    if plan.optimizer.is_paged() {
        out.push(format!(
            "paged optimizer states ({:.2} GiB) live in CUDA unified memory: they use free device memory when there is some and spill to host RAM; counted in cpu_bytes, not device_bytes",
            b.cpu / GIB
        ));
    }
    if let [gpu] = gpus {
        if plan.precision.uses_bf16() && !gpu.supports_bf16() {
            out.push(format!(
                "{} has no bf16 support; use fp16 or amp_fp16",
                gpu.id
            ));
        }
        if plan.attention == Attention::Flash && !gpu.supports_bf16() {
            out.push(format!(
                "FlashAttention-2 needs Ampere or newer; {} would run sdpa or eager",
                gpu.id
            ));
        }
        if b.device > gpu.memory_bytes_usable as f64 {
            out.push(format!(
                "does not fit on {}: needs {:.1} GiB of {:.1} GiB usable",
                gpu.id,
                b.device / GIB,
                gpu.memory_bytes_usable as f64 / GIB
            ));
        }
    }
    if plan.attention == Attention::Eager && plan.sequence_length > 4096 {
        out.push("eager attention keeps b·heads·s² scores per layer; use flash or sdpa for long sequences".into());
    }
    out
}

/// The serde (API) spelling of an enum value.
fn serde_name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
impl MemoryPlan {
    /// A plan with the design's defaults (§2.1) for the given model.
    pub(crate) fn with_defaults(model: ModelShape) -> Self {
        MemoryPlan {
            model,
            method: Method::Full,
            precision: Precision::AmpBf16,
            optimizer: Optimizer::Adamw,
            micro_batch_size: 1,
            sequence_length: 2048,
            max_sample_tokens: None,
            gradient_checkpointing: false,
            attention: Attention::Flash,
            parallelism: Parallelism::single_gpu(),
            framework: Framework::Generic,
            optimizations: Optimizations::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use proptest::prelude::*;

    fn plan(model: &str) -> MemoryPlan {
        let catalog = Catalog::embedded().unwrap();
        MemoryPlan::with_defaults(ModelShape::from_architecture(
            catalog.model(model).unwrap().architecture.clone(),
        ))
    }

    fn device(plan: &MemoryPlan) -> f64 {
        Prepared::new(plan)
            .breakdown(plan.parallelism.gpus, plan.micro_batch_size)
            .device
    }

    fn any_method() -> impl Strategy<Value = Method> {
        let targets = prop::sample::subsequence(Projection::ALL.to_vec(), 1..=7)
            .prop_map(|list| list.into_iter().collect::<Targets>());
        prop_oneof![
            Just(Method::Full),
            (1u64..=4).prop_map(|trainable_layers| Method::Freeze { trainable_layers }),
            (1u64..=256, targets.clone())
                .prop_map(|(rank, targets)| Method::Lora { rank, targets }),
            (1u64..=256, targets, any::<bool>()).prop_map(
                |(rank, targets, double_quantization)| Method::Qlora {
                    rank,
                    targets,
                    double_quantization
                }
            ),
            (1u64..=100).prop_map(|virtual_tokens| Method::PrefixTuning { virtual_tokens }),
            (1u64..=100).prop_map(|virtual_tokens| Method::PromptTuning { virtual_tokens }),
            (1u64..=256).prop_map(|bottleneck| Method::Adapter { bottleneck }),
        ]
    }

    prop_compose! {
        fn any_plan()(
            model in prop::sample::select(vec!["llama-2-7b", "qwen2.5-1.5b", "mixtral-8x7b", "gemma-2-2b", "bert-large", "phi-2", "llama-3.1-70b"]),
            method in any_method(),
            precision in prop::sample::select(vec![Precision::Fp32, Precision::AmpBf16, Precision::AmpFp16, Precision::Bf16, Precision::Fp16, Precision::Fp8]),
            optimizer in prop::sample::select(vec![Optimizer::Adamw, Optimizer::Adamw8bit, Optimizer::PagedAdamw, Optimizer::PagedAdamw8bit, Optimizer::Adafactor, Optimizer::Sgd, Optimizer::SgdMomentum, Optimizer::Lion]),
            framework in prop::sample::select(vec![Framework::Generic, Framework::HfTrainer, Framework::Deepspeed, Framework::Megatron, Framework::Torchtune, Framework::Litgpt, Framework::Unsloth]),
            attention in prop::sample::select(vec![Attention::Flash, Attention::Sdpa, Attention::Eager]),
            micro_batch_size in 1u64..=64,
            sequence_length in 1u64..=32_768,
            gradient_checkpointing in any::<bool>(),
            zero_stage in 0u8..=3,
            data_parallel in 1u64..=64,
            tensor_parallel in prop::sample::select(vec![1u64, 2]),
            offload_optimizer in any::<bool>(),
            flags in prop::collection::vec(any::<bool>(), 6),
        ) -> MemoryPlan {
            let mut p = plan(model);
            p.method = method;
            p.precision = precision;
            p.optimizer = optimizer;
            p.framework = framework;
            p.attention = attention;
            p.micro_batch_size = micro_batch_size;
            p.sequence_length = sequence_length;
            p.gradient_checkpointing = gradient_checkpointing;
            p.parallelism = Parallelism {
                gpus: data_parallel * tensor_parallel,
                zero_stage,
                offload_optimizer,
                offload_parameters: offload_optimizer && zero_stage == 3,
                tensor_parallel,
                pipeline_parallel: 1,
            };
            p.optimizations = Optimizations {
                chunked_cross_entropy: flags[0],
                torch_compile: flags[1],
                optimizer_in_backward: flags[2],
                activation_offloading: flags[3],
                fused_linear_cross_entropy: flags[4],
                packed_sequences: flags[5],
            };
            p
        }
    }

    proptest! {
        #[test]
        fn never_nan_negative_or_infinite(p in any_plan()) {
            let e = estimate(&p, &[]);
            let b = Prepared::new(&p).breakdown(p.parallelism.gpus, p.micro_batch_size);
            for x in [b.weights, b.gradients, b.optimizer, b.adapter, b.activations, b.logits, b.cpu, b.peak_allocated, b.device] {
                prop_assert!(x.is_finite() && x >= 0.0, "{x}");
            }
            prop_assert!(e.per_gpu.peak_allocated_bytes <= e.per_gpu.peak_reserved_bytes);
            prop_assert!(e.per_gpu.peak_reserved_bytes <= e.per_gpu.device_bytes);
            prop_assert!((0.0..=1.0).contains(&e.parameters.trainable_fraction));
        }

        #[test]
        fn grows_with_batch_sequence_and_rank(p in any_plan()) {
            let base = device(&p);
            let mut bigger = p.clone();
            bigger.micro_batch_size += 1;
            prop_assert!(device(&bigger) >= base);
            let mut longer = p.clone();
            longer.sequence_length += 512;
            prop_assert!(device(&longer) >= base);
            if let Method::Lora { rank, targets } = p.method {
                let mut wider = p.clone();
                wider.method = Method::Lora { rank: rank * 2, targets };
                prop_assert!(device(&wider) >= base);
            }
        }

        #[test]
        fn never_grows_with_zero_stage_gpus_or_checkpointing(p in any_plan()) {
            let base = device(&p);
            // Stages 1 and 2 only shard; stage 3 adds the gathered-layer buffers, which the
            // sharded weights outweigh once there is more than one data-parallel rank.
            let stage = p.parallelism.zero_stage;
            if stage < 2 || (stage == 2 && p.parallelism.data_parallel() > 1 && !p.parallelism.offload_optimizer) {
                let mut sharded = p.clone();
                sharded.parallelism.zero_stage += 1;
                prop_assert!(device(&sharded) <= base + 1.0, "stage {} -> {}", stage, stage + 1);
            }
            let mut more = p.clone();
            more.parallelism.gpus *= 2;
            prop_assert!(device(&more) <= base + 1.0);
            let mut checkpointed = p.clone();
            checkpointed.gradient_checkpointing = true;
            prop_assert!(device(&checkpointed) <= base + 1.0);
        }

        #[test]
        fn grows_with_parameters(layers in 1u64..=80, extra in 1u64..=16) {
            let mut small = plan("llama-2-7b");
            small.model = ModelShape::from_architecture(Architecture { layers, ..small.model.architecture.clone() });
            let mut large = small.clone();
            large.model = ModelShape::from_architecture(Architecture { layers: layers + extra, ..small.model.architecture.clone() });
            prop_assert!(device(&large) > device(&small));
        }
    }

    #[test]
    fn fit_searches_agree_with_direct_evaluation() {
        let mut p = plan("llama-2-7b");
        p.parallelism.zero_stage = 3;
        let prepared = Prepared::new(&p);
        let usable = 80.0 * GIB;
        let n = prepared.min_gpus(usable).unwrap();
        assert!(prepared.breakdown(n, 1).device <= usable);
        assert!(n == 1 || prepared.breakdown(n - 1, 1).device > usable);
        let b = prepared.max_micro_batch(usable * 4.0);
        assert!(prepared.breakdown(1, b).device <= usable * 4.0);
        assert!(prepared.breakdown(1, b + 1).device > usable * 4.0);
    }

    #[test]
    fn stage_zero_never_finds_more_gpus_helpful() {
        let p = plan("llama-3.1-70b");
        assert_eq!(Prepared::new(&p).min_gpus(80.0 * GIB), None);
    }
}
