//! Training time (design §3.2): FLOPs per token by method, a small table of sustained
//! hardware utilisation calibrated on `throughput-calibration.csv`, the communication that
//! does not overlap with compute, the pipeline bubble, CPU offload and restarts.
//!
//! Pure: typed inputs to typed outputs, no I/O, no clock.
//!
//! Two FLOP counts are kept apart, as the design asks. *Model* FLOPs are the work the
//! training step needs (`6N` plus attention for full training); MFU is measured against
//! them. *Hardware* FLOPs add what recomputation re-does (`+2N` with gradient
//! checkpointing). The utilisation table is in hardware terms — how busy the math units
//! are — so checkpointing makes a run slower without changing the table.

use std::sync::LazyLock;

use serde::Serialize;
use utoipa::ToSchema;

use super::memory::{MemoryPlan, Prepared, adapter_parameter_count};
use super::{Framework, Method, Notes, Precision, Unwritten};
use crate::catalog::{Gpu, GpuClass};

pub const SECONDS_PER_HOUR: f64 = 3600.0;

/// Hardware FLOPs utilisation a tuned data-parallel job sustains on one GPU family, for a
/// full fine-tune of a 1.5–30B dense model in BF16 (recomputation counted as work).
/// Medians of the calibration rows, which the accuracy report re-derives:
fn class_utilization(class: GpuClass) -> f64 {
    match class {
        // llm-foundry on A100 (MOS04–MOS17): 0.60–0.74 once recompute is counted; MOS05
        // publishes HFU 67.9 %. Megatron-LM 2021 (MEG21T1) reached 0.44–0.52 with tensor
        // and pipeline parallel on top.
        GpuClass::Ampere => 0.60,
        // llm-foundry on H100 (MOS19–MOS26): 0.40–0.59; OLMo-core 7B (OLMO04): 0.50;
        // torchtitan (TT01–TT04): 0.36–0.41; NeMo AutoModel LoRA (F6, F7): 0.49–0.50.
        GpuClass::Hopper => 0.50,
        // Megatron-Bridge FP8 on B200/GB200/GB300 (MBR08–MBR12): 0.57–0.68 of the BF16
        // rate × FP8_SPEEDUP, i.e. 0.48–0.57 before the Megatron factor.
        GpuClass::Blackwell => 0.50,
        // torchtune on an RTX 4090 (F10, F12): 0.51–0.69 with torch.compile.
        GpuClass::Gddr => 0.55,
        // Megatron-LM 2019 (Shoeybi et al., §5.1): 15.1 PFLOP/s on 512 V100 = 30 % of the
        // 125 TFLOP/s peak. T4 taken as the same generation's tensor cores.
        GpuClass::Volta | GpuClass::Turing => 0.30,
        // No calibration row: assumed a little under Hopper's, as public MI300X and Gaudi
        // training reports sit in the 30–40 % range.
        GpuClass::Cdna | GpuClass::Gaudi => 0.35,
    }
}

/// Small models keep the tensor cores less busy (narrow matrices, more launch
/// overhead): the 1B rows MOS03/MOS11/MOS18 and OLMO01/02 run at 0.65–0.80 of their
/// class's value, the 3B rows (MOS04, MOS19) at the full value. The factor is 0.75 up to
/// 1B and rises log-linearly to 1 at 3B, so that time never falls as a model grows.
const SMALL_MODEL_PARAMETERS: f64 = 1.0e9;
const FULL_SIZE_PARAMETERS: f64 = 3.0e9;
const SMALL_MODEL_FACTOR: f64 = 0.75;

fn size_factor(active_parameters: f64) -> f64 {
    let position = (active_parameters / SMALL_MODEL_PARAMETERS).ln()
        / (FULL_SIZE_PARAMETERS / SMALL_MODEL_PARAMETERS).ln();
    SMALL_MODEL_FACTOR + (1.0 - SMALL_MODEL_FACTOR) * position.clamp(0.0, 1.0)
}

/// PEFT of models of 30B and more under ZeRO-3/FSDP: compute per token falls to `4N` while
/// the sharded weights are still gathered every micro-batch, and the skinny adapter GEMMs
/// add launch overhead. F8a/F8b (70B) and F9a/F9b (32B, NeMo AutoModel) run at 0.39–0.57
/// of their class's value, F16 (70B, torchtune) at 0.70: median 0.53.
const LARGE_PEFT_PARAMETERS: f64 = 3.0e10;
const LARGE_PEFT_FACTOR: f64 = 0.55;

/// QLoRA dequantises every NF4 weight on each use: F14 vs F12 (same card, model and
/// stack) runs at 2,413 vs 3,083 tokens/s = 0.78. The design's "1.3–2× slower than LoRA".
const QLORA_FACTOR: f64 = 0.78;

/// Mixture-of-experts: token routing, all-to-all and grouped GEMMs. DeepSeek-V3 on 1,024
/// H100 (MBR07) reaches 338 model TFLOP/s per GPU against 737 for dense Llama-3.1-405B in
/// the same suite (MBR05): 0.46.
const MOE_FACTOR: f64 = 0.46;

/// Sequences beyond 64k tokens (context parallel, ring attention): TT06 (262k, 8B) runs at
/// 0.67 of TT01–TT04's utilisation, TT11 (262k, 405B) at 0.48 of TT09/TT10's; MOS14 at 65k
/// still at 0.85 of MOS13's.
const LONG_CONTEXT_TOKENS: u64 = 65_536;
const LONG_CONTEXT_FACTOR: f64 = 0.55;

/// Megatron-LM/NeMo with Transformer Engine on Hopper and Blackwell: fused kernels and
/// tuned overlap. DGXC01 (0.63) vs TT02 and MOS20 (0.41–0.47) on the same 8B shape; NEMO
/// and MBR rows sit 15–30 % above the FSDP stacks. Megatron-LM 2021 on A100 (MEG21T1,
/// before Transformer Engine) does not: no factor there.
const MEGATRON_FACTOR: f64 = 1.2;

/// FP8 runs at 1.35× the BF16 rate, not 2× (the FP8 peak): DGXC03/DGXC01 = 1.34,
/// DGXC07/DGXC05 = 1.34, TT03/TT02 = 1.28, OLMO05/OLMO04 = 1.32, MOS27/MOS19 = 1.27.
const FP8_SPEEDUP: f64 = 1.35;

/// NCCL bus bandwidth as a share of the link rate: about 80 % inside an NVLink or PCIe
/// node (nccl-tests all-reduce busbw on 8×A100/H100), 65 % across nodes — the value that
/// reproduces the MEG21T2 ZeRO-3 rows (175B on 384–1,536 A100, whose steps stay at ~65 s
/// once communication-bound).
const INTRA_NODE_EFFICIENCY: f64 = 0.8;
const INTER_NODE_EFFICIENCY: f64 = 0.65;

/// Per-GPU scale-out network, bytes/s per direction, of a typical cluster of each family:
/// DGX A100 has one 200 Gb/s HDR port per GPU, DGX H100/B200 and MI300X platforms one
/// 400 Gb/s port per GPU; GDDR, V100 and T4 servers are assumed on 100 Gb/s Ethernet;
/// Gaudi 2/3 have 3 of their 24 on-chip 100/200 GbE ports for scale-out.
fn scale_out_bytes_per_second(class: GpuClass) -> f64 {
    match class {
        GpuClass::Ampere => 25e9,
        GpuClass::Hopper | GpuClass::Blackwell | GpuClass::Cdna => 50e9,
        GpuClass::Gaudi => 37.5e9,
        GpuClass::Gddr | GpuClass::Volta | GpuClass::Turing => 12.5e9,
    }
}

/// Host link for CPU offload: PCIe Gen4 ×16, 32 GB/s at 80 %.
const PCIE_BYTES_PER_SECOND: f64 = 25.6e9;

/// CPU Adam throughput of one host: ZeRO-Offload (Ren et al. 2021, Table 3) updates 10B
/// parameters in about 2 s with DeepSpeed's CPU-Adam on a two-socket server.
const CPU_ADAM_PARAMETERS_PER_SECOND: f64 = 5e9;

/// Unplanned interruptions per GPU-hour: Llama 3 (Dubey et al. 2024, §3.3.4) saw 419
/// unexpected interruptions in 54 days on 16,384 H100.
const INTERRUPTIONS_PER_GPU_HOUR: f64 = 419.0 / (16_384.0 * 54.0 * 24.0);
/// Each interruption costs a restart plus, on average, half a checkpoint interval of
/// lost work: 10 minutes and a 30-minute interval assumed.
const RESTART_MINUTES: f64 = 10.0;
const CHECKPOINT_INTERVAL_MINUTES: f64 = 30.0;

/// The spread of the accuracy report (predicted vs published throughput,
/// `cargo test --test api time_accuracy`): the published hours lie within these factors
/// of the predicted ones for 96 of its 109 rows (error p10 −23 %, p90 +17 %); the report
/// fails if that drops under 80 %.
pub const RANGE_LOW: f64 = 0.75;
pub const RANGE_HIGH: f64 = 1.35;

/// Pipeline micro-batches per step when not given: enough to keep the 1F1B bubble near
/// 20 % (Narayanan et al. 2021 recommend m ≫ p).
pub const PIPELINE_MICRO_BATCHES_PER_STAGE: u64 = 4;

/// Everything a time estimate needs.
#[derive(Debug, Clone)]
pub struct TimePlan<'a> {
    pub memory: MemoryPlan,
    pub gpu: &'a Gpu,
    /// Tokens processed over the whole run (all epochs).
    pub tokens: f64,
    /// Micro-batches per optimizer step on each data-parallel rank.
    pub gradient_accumulation_steps: u64,
    /// GPUs that share the fast intra-node link.
    pub gpus_per_node: u64,
    /// End-to-end MFU measured by the user; replaces the utilisation table,
    /// communication and bubble (a measured MFU already includes them).
    pub mfu: Option<f64>,
}

/// Hours: the expected value and the range the calibration spread gives.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct HoursRange {
    pub low: f64,
    pub expected: f64,
    pub high: f64,
}

/// Where the wall-clock time goes, in hours.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct TimeBreakdown {
    /// Math at the table's utilisation (recomputation included).
    pub compute_hours: f64,
    /// Data-parallel and ZeRO traffic that compute does not hide, plus tensor-parallel
    /// all-reduces (on the critical path).
    pub communication_hours: f64,
    /// Idle pipeline stages at the start and end of each step (1F1B).
    pub pipeline_bubble_hours: f64,
    /// CPU offload: PCIe transfers and the CPU optimizer step.
    pub offload_hours: f64,
    /// Expected unplanned interruptions: restarts and lost work.
    pub restart_hours: f64,
}

/// The answer of `/v1/estimates/time` (design §2.4).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TimeEstimate {
    /// Model FLOPs of the whole run.
    pub total_flops: f64,
    /// Model FLOPs per token (`6N + 12·L·H·s` for full training, `4N + …` for PEFT).
    pub flops_per_token: f64,
    /// What the GPUs execute per token, recomputation included.
    pub hardware_flops_per_token: f64,
    pub tokens: f64,
    /// Fleet throughput.
    pub tokens_per_second: f64,
    pub tokens_per_second_per_gpu: f64,
    /// Model FLOPs utilisation against `peak_tflops_per_gpu`, end to end.
    pub mfu: f64,
    /// Share of the dense peak the math units are busy (the table's value after its
    /// factors, or derived from a given `mfu`).
    pub hardware_utilization: f64,
    /// Dense peak of the GPU at the training precision.
    pub peak_tflops_per_gpu: f64,
    pub wall_hours: HoursRange,
    pub gpu_hours: f64,
    pub tokens_per_step: f64,
    pub optimizer_steps: f64,
    pub breakdown: TimeBreakdown,
    pub assumptions: Vec<String>,
    pub warnings: Vec<String>,
}

/// A plan the time model cannot price.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeError {
    #[error("the catalog has no {precision} rate for {gpu}")]
    NoPeak {
        gpu: String,
        precision: &'static str,
    },
}

/// FLOPs per token of one training step.
struct FlopsPerToken {
    model: f64,
    hardware: f64,
}

fn flops_per_token(plan: &MemoryPlan, tokens_per_sample: f64) -> FlopsPerToken {
    let arch = &plan.model.architecture;
    let n = arch.active_parameters() as f64 * plan.model.parameter_scale();
    // Attention scores and values: 4·L·H·s per token forward, twice that backward (PaLM,
    // Chowdhery et al. 2022, appendix B: `6N + 12·L·H·Q·T`).
    let attention_forward =
        4.0 * arch.layers as f64 * (arch.heads * arch.head_dim) as f64 * tokens_per_sample;
    let forward = 2.0 * n + attention_forward;
    // Share of the blocks that run a backward pass, and whether it computes weight
    // gradients (2N) on top of activation gradients (2N).
    let (backward_share, weight_gradients) = match plan.method {
        Method::Full => (1.0, true),
        Method::Freeze { trainable_layers } => {
            (trainable_layers as f64 / arch.layers.max(1) as f64, true)
        }
        // Frozen base: activation gradients flow through every block to reach the
        // adapters, prefixes or prompt; the adapters' own weight gradients are negligible.
        _ => (1.0, false),
    };
    let backward_parameters = if weight_gradients { 4.0 * n } else { 2.0 * n };
    let backward = backward_share * (backward_parameters + 2.0 * attention_forward);
    let model = forward + backward;
    let recompute = if plan.gradient_checkpointing {
        backward_share * forward
    } else {
        0.0
    };
    FlopsPerToken {
        model,
        hardware: model + recompute,
    }
}

/// The dense peak reported against (FLOP/s) and the rate the table's utilisation applies
/// to, at the training precision.
fn peaks(
    gpu: &Gpu,
    precision: Precision,
    warnings: &mut impl Notes,
) -> Result<(f64, f64), TimeError> {
    let tflops = |x: Option<f64>| x.map(|t| t * 1e12);
    let half = |prefer_bf16: bool| {
        let (first, second) = if prefer_bf16 {
            (gpu.bf16_dense_tflops, gpu.fp16_dense_tflops)
        } else {
            (gpu.fp16_dense_tflops, gpu.bf16_dense_tflops)
        };
        tflops(first.or(second))
    };
    let no_peak = |precision: &'static str| TimeError::NoPeak {
        gpu: gpu.id.clone(),
        precision,
    };
    match precision {
        Precision::Fp32 => tflops(gpu.fp32_tflops)
            .map(|p| (p, p))
            .ok_or_else(|| no_peak("FP32")),
        Precision::AmpBf16 | Precision::Bf16 | Precision::AmpFp16 | Precision::Fp16 => {
            let prefer_bf16 = precision.uses_bf16();
            if prefer_bf16 && !gpu.supports_bf16() {
                warnings.add(|| {
                    format!(
                        "{} has no BF16 tensor cores; timed at its FP16 rate",
                        gpu.id
                    )
                });
            }
            half(prefer_bf16)
                .map(|p| (p, p))
                .ok_or_else(|| no_peak("FP16/BF16"))
        }
        Precision::Fp8 => {
            let bf16 = half(true).ok_or_else(|| no_peak("FP8 or BF16"))?;
            match tflops(gpu.fp8_dense_tflops) {
                Some(fp8) => Ok((fp8, bf16 * FP8_SPEEDUP)),
                None => {
                    warnings.add(|| {
                        format!("{} has no FP8 tensor cores; timed at its BF16 rate", gpu.id)
                    });
                    Ok((bf16, bf16))
                }
            }
        }
    }
}

/// The utilisation table: the class value times the factors that apply, with each
/// applied factor and why.
fn utilization(
    plan: &TimePlan,
    active_parameters: f64,
    tokens_per_sample: u64,
) -> (f64, Vec<(&'static str, f64)>) {
    let memory = &plan.memory;
    let mut value = class_utilization(plan.gpu.class);
    let mut applied = Vec::new();
    let mut apply = |applies: bool, factor: f64, why: &'static str| {
        if applies {
            value *= factor;
            applied.push((why, factor));
        }
    };
    let size = size_factor(active_parameters);
    apply(
        size < 1.0,
        (size * 1000.0).round() / 1000.0,
        "model under 3B",
    );
    let peft = !matches!(memory.method, Method::Full | Method::Freeze { .. });
    apply(
        peft && memory.parallelism.zero_stage >= 3
            && memory.model.parameters as f64 >= LARGE_PEFT_PARAMETERS,
        LARGE_PEFT_FACTOR,
        "sharded PEFT of a 30B+ model",
    );
    apply(
        matches!(memory.method, Method::Qlora { .. }),
        QLORA_FACTOR,
        "QLoRA dequantisation",
    );
    apply(
        memory.model.architecture.moe.is_some(),
        MOE_FACTOR,
        "mixture of experts",
    );
    apply(
        tokens_per_sample > LONG_CONTEXT_TOKENS,
        LONG_CONTEXT_FACTOR,
        "sequence over 64k",
    );
    apply(
        memory.framework == Framework::Megatron
            && matches!(plan.gpu.class, GpuClass::Hopper | GpuClass::Blackwell),
        MEGATRON_FACTOR,
        "Megatron kernels",
    );
    (value.min(0.95), applied)
}

/// The restart assumption, from constants only: written out once.
static RESTART_ASSUMPTION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "restarts: {:.2e} unplanned interruptions per GPU-hour (Llama 3), each costing {RESTART_MINUTES} min plus half a {CHECKPOINT_INTERVAL_MINUTES}-min checkpoint interval",
        INTERRUPTIONS_PER_GPU_HOUR
    )
});

/// Times a plan.
pub fn estimate(plan: &TimePlan) -> Result<TimeEstimate, TimeError> {
    let mut assumptions = Vec::new();
    let mut warnings = Vec::new();
    let estimate = timed(plan, &mut assumptions, &mut warnings)?;
    Ok(TimeEstimate {
        assumptions,
        warnings,
        ..estimate
    })
}

/// The expected wall-clock hours of a plan, as [`estimate`] answers them, without
/// writing its sentences: for callers that time many plans and answer only their hours.
pub fn wall_hours(plan: &TimePlan) -> Result<f64, TimeError> {
    timed(plan, &mut Unwritten, &mut Unwritten).map(|t| t.wall_hours.expected)
}

/// The estimate's numbers, its sentences written to `assumptions` and `warnings`.
fn timed(
    plan: &TimePlan,
    assumptions: &mut impl Notes,
    warnings: &mut impl Notes,
) -> Result<TimeEstimate, TimeError> {
    let memory = &plan.memory;
    let gpu = plan.gpu;
    let arch = &memory.model.architecture;
    let par = memory.parallelism;

    let sample_tokens = memory
        .max_sample_tokens
        .unwrap_or(memory.sequence_length)
        .max(1);
    let flops = flops_per_token(memory, sample_tokens as f64);
    let (reported_peak, rate) = peaks(gpu, memory.precision, warnings)?;
    let active = arch.active_parameters() as f64 * memory.model.parameter_scale();

    let gpus = par.gpus.max(1) as f64;
    let (tp, pp) = (
        par.tensor_parallel.max(1) as f64,
        par.pipeline_parallel.max(1) as f64,
    );
    let dp = par.data_parallel() as f64;
    let m = plan.gradient_accumulation_steps.max(1) as f64;
    let micro_batch_tokens = memory.micro_batch_size.max(1) as f64 * sample_tokens as f64;
    let tokens_per_step = micro_batch_tokens * m * dp;
    let steps = plan.tokens / tokens_per_step;

    let (hardware_utilization, compute_step, exposed_step, bubble_step, offload_step) = match plan
        .mfu
    {
        Some(mfu) => {
            assumptions.add(|| format!(
                    "mfu {mfu} given: it replaces the utilisation table, communication and pipeline bubble"
                ));
            let model_seconds = flops.model * tokens_per_step / (gpus * reported_peak * mfu);
            let utilization = mfu * reported_peak / rate * flops.hardware / flops.model;
            (utilization, model_seconds, 0.0, 0.0, 0.0)
        }
        None => {
            let (u, factors) = utilization(plan, active, sample_tokens);
            assumptions.add(|| {
                let class = format!("{:?} class {:.2}", gpu.class, class_utilization(gpu.class));
                let applied = factors
                    .iter()
                    .map(|(why, factor)| format!("{why} ×{factor}"));
                let named: Vec<String> = std::iter::once(class.to_lowercase())
                    .chain(applied)
                    .collect();
                format!("hardware utilisation {u:.3}: {}", named.join(", "))
            });
            let per_micro_batch = flops.hardware * micro_batch_tokens / (tp * pp) / (rate * u);
            let compute = per_micro_batch * m;
            let comm = Communication::of(plan, micro_batch_tokens, assumptions);
            let exposed = (comm.data_parallel_seconds_per_step - compute).max(0.0)
                + comm.tensor_parallel_seconds_per_micro_batch * m;
            // 1F1B bubble: (p − 1) micro-batch slots idle per step (Narayanan et al.
            // 2021, §2.2.1).
            let bubble = (pp - 1.0) * per_micro_batch;
            (u, compute, exposed, bubble, comm.offload_seconds_per_step)
        }
    };

    let step_seconds = compute_step + exposed_step + bubble_step + offload_step;
    let hours = |seconds_per_step: f64| seconds_per_step * steps / SECONDS_PER_HOUR;
    let training_hours = hours(step_seconds);
    let lost_hours_per_interruption = (RESTART_MINUTES + CHECKPOINT_INTERVAL_MINUTES / 2.0) / 60.0;
    let restart_hours =
        training_hours * INTERRUPTIONS_PER_GPU_HOUR * gpus * lost_hours_per_interruption;
    let expected = training_hours + restart_hours;
    assumptions.add(|| RESTART_ASSUMPTION.clone());

    warnings.add_some(|| {
        let device = Prepared::new(memory)
            .breakdown(par.gpus, memory.micro_batch_size)
            .device;
        (device > gpu.memory_bytes_usable as f64).then(|| format!(
            "this configuration does not fit in {}'s memory (see /v1/estimates/memory); the time assumes it runs",
            gpu.id
        ))
    });

    let tokens_per_second = if training_hours > 0.0 {
        plan.tokens / (training_hours * SECONDS_PER_HOUR)
    } else {
        0.0
    };
    Ok(TimeEstimate {
        total_flops: flops.model * plan.tokens,
        flops_per_token: flops.model,
        hardware_flops_per_token: flops.hardware,
        tokens: plan.tokens,
        tokens_per_second,
        tokens_per_second_per_gpu: tokens_per_second / gpus,
        mfu: tokens_per_second * flops.model / (gpus * reported_peak),
        hardware_utilization,
        peak_tflops_per_gpu: reported_peak / 1e12,
        wall_hours: HoursRange {
            low: expected * RANGE_LOW,
            expected,
            high: expected * RANGE_HIGH,
        },
        gpu_hours: expected * gpus,
        tokens_per_step,
        optimizer_steps: steps,
        breakdown: TimeBreakdown {
            compute_hours: hours(compute_step),
            communication_hours: hours(exposed_step),
            pipeline_bubble_hours: hours(bubble_step),
            offload_hours: hours(offload_step),
            restart_hours,
        },
        assumptions: Vec::new(),
        warnings: Vec::new(),
    })
}

/// Traffic of one optimizer step on one GPU, in seconds at the links' rates.
struct Communication {
    /// Data-parallel gradient reduction and ZeRO gathers: overlaps with compute.
    data_parallel_seconds_per_step: f64,
    /// Tensor-parallel all-reduces: on the critical path.
    tensor_parallel_seconds_per_micro_batch: f64,
    offload_seconds_per_step: f64,
}

impl Communication {
    /// The traffic, with the links and what is not overlapped written to `notes`.
    fn of(plan: &TimePlan, micro_batch_tokens: f64, notes: &mut impl Notes) -> Self {
        let memory = &plan.memory;
        let gpu = plan.gpu;
        let arch = &memory.model.architecture;
        let par = memory.parallelism;
        let (tp, pp) = (par.tensor_parallel.max(1), par.pipeline_parallel.max(1));
        let dp = par.data_parallel() as f64;
        let m = plan.gradient_accumulation_steps.max(1) as f64;
        let per_node = plan.gpus_per_node.max(1);
        let intra = gpu.interconnect_gbs_bidir.unwrap_or(64.0) * 1e9 / 2.0 * INTRA_NODE_EFFICIENCY;
        let inter = scale_out_bytes_per_second(gpu.class) * INTER_NODE_EFFICIENCY;
        let multi_node = par.gpus > per_node;
        let dp_link = if multi_node { inter } else { intra };
        notes.add(|| format!(
            "links: {:.0} GB/s per GPU inside a node of {per_node}, {:.1} GB/s across nodes (effective, per direction)",
            intra / 1e9,
            inter / 1e9
        ));

        let element_bytes = if memory.precision == Precision::Fp32 {
            4.0
        } else {
            2.0
        };
        let model_parallel = (tp * pp) as f64;
        let total = memory.model.parameters as f64;
        let trainable = match memory.method {
            Method::Full => total,
            Method::Freeze { trainable_layers } => {
                total * trainable_layers as f64 / arch.layers.max(1) as f64
            }
            method => adapter_parameter_count(arch, method) as f64,
        };
        // Mixture of experts: the routed experts are spread over the data-parallel ranks
        // (expert parallel, as DeepSpeed-MoE and Megatron do), so each rank holds, gathers
        // and reduces only its share of them.
        let routed = arch.routed_expert_parameters() as f64 * memory.model.parameter_scale();
        let expert_parallel = arch.moe.map_or(1.0, |moe| (moe.experts as f64).min(dp));
        let local_share = (total - routed + routed / expert_parallel) / total.max(1.0);
        let weights_bytes = total * local_share * element_bytes / model_parallel;
        let gradient_bytes = trainable * local_share * element_bytes / model_parallel;
        let ring = (dp - 1.0) / dp;
        let data_parallel_bytes = if par.zero_stage >= 3 {
            // ZeRO-3/FSDP: weights gathered for forward and backward of every micro-batch,
            // gradients reduce-scattered (Rajbhandari et al. 2020: 1.5× data parallel).
            m * ring * (2.0 * weights_bytes + gradient_bytes)
        } else {
            // Ring all-reduce once per step, 2(n−1)/n·S (ZeRO-1/2: reduce-scatter plus
            // all-gather, the same volume).
            2.0 * ring * gradient_bytes
        };

        // Megatron tensor parallel: two all-reduces of the layer's activations forward
        // and two backward per block (Shoeybi et al. 2019, §3), two more to recompute.
        let tensor_parallel_seconds_per_micro_batch = if tp > 1 {
            let tp_link = if tp > per_node { inter } else { intra };
            let all_reduces = 4.0
                + if memory.gradient_checkpointing {
                    2.0
                } else {
                    0.0
                };
            let layers_per_stage = arch.layers as f64 / pp as f64;
            let bytes = micro_batch_tokens * arch.hidden as f64 * element_bytes;
            layers_per_stage * all_reduces * 2.0 * (tp as f64 - 1.0) / tp as f64 * bytes / tp_link
        } else {
            0.0
        };

        let mut offload_seconds_per_step = 0.0;
        let shard = if par.zero_stage >= 1 { dp } else { 1.0 };
        if par.offload_optimizer {
            // Gradients down and updated weights up over PCIe, then the host's CPU Adam
            // over every GPU's shard on that host.
            let params_per_gpu = trainable / model_parallel / shard;
            let gpus_on_host = par.gpus.min(per_node) as f64;
            offload_seconds_per_step += params_per_gpu * (element_bytes + 2.0)
                / PCIE_BYTES_PER_SECOND
                + params_per_gpu * gpus_on_host / CPU_ADAM_PARAMETERS_PER_SECOND;
            notes.add(|| "optimizer offload: PCIe transfers and the CPU optimizer step are not overlapped with GPU compute".into());
        }
        if par.offload_parameters {
            // The GPU's weight shard comes over PCIe for forward and for backward.
            offload_seconds_per_step += m * 2.0 * weights_bytes / shard / PCIE_BYTES_PER_SECOND;
        }

        Self {
            data_parallel_seconds_per_step: data_parallel_bytes / dp_link,
            tensor_parallel_seconds_per_micro_batch,
            offload_seconds_per_step,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use proptest::prelude::*;

    use super::*;
    use crate::catalog::Catalog;
    use crate::estimate::{ModelShape, Projection, Targets};

    fn catalog() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| Catalog::embedded().unwrap())
    }

    fn plan(
        gpu: &str,
        parameters: f64,
        gpus: u64,
        zero_stage: u8,
        method: Method,
    ) -> TimePlan<'static> {
        let gpu = catalog().gpu(gpu).unwrap();
        let mut memory =
            MemoryPlan::with_defaults(ModelShape::from_parameter_count(parameters as u64));
        memory.method = method;
        memory.parallelism.gpus = gpus;
        memory.parallelism.zero_stage = zero_stage;
        TimePlan {
            memory,
            gpu,
            tokens: 1e9,
            gradient_accumulation_steps: 1,
            gpus_per_node: gpu.gpus_per_node.min(gpus),
            mfu: None,
        }
    }

    fn hours(plan: &TimePlan) -> f64 {
        estimate(plan).unwrap().wall_hours.expected
    }

    fn any_method() -> impl Strategy<Value = Method> {
        let targets: Targets = [Projection::Q, Projection::V].into_iter().collect();
        prop_oneof![
            Just(Method::Full),
            (1u64..=64).prop_map(move |rank| Method::Lora { rank, targets }),
            (1u64..=64).prop_map(move |rank| Method::Qlora {
                rank,
                targets,
                double_quantization: true
            }),
            (1u64..=100).prop_map(|virtual_tokens| Method::PrefixTuning { virtual_tokens }),
        ]
    }

    #[test]
    fn flops_per_token_follow_the_method() {
        let full = plan("a100-80gb", 7e9, 1, 0, Method::Full);
        let arch = &full.memory.model.architecture;
        let attention = 12.0 * (arch.layers * arch.heads * arch.head_dim) as f64 * 2048.0;
        let f = flops_per_token(&full.memory, 2048.0);
        assert!((f.model - (6.0 * 7e9 + attention)).abs() < 1e-6 * f.model);
        assert_eq!(f.model, f.hardware);
        let mut checkpointed = full.memory.clone();
        checkpointed.gradient_checkpointing = true;
        let f = flops_per_token(&checkpointed, 2048.0);
        let expected = 8.0 * 7e9 + attention * 16.0 / 12.0;
        assert!((f.hardware - expected).abs() < 1e-6 * expected);
        let lora = plan(
            "a100-80gb",
            7e9,
            1,
            0,
            Method::Lora {
                rank: 8,
                targets: Targets::all(),
            },
        );
        let f = flops_per_token(&lora.memory, 2048.0);
        assert!((f.model - (4.0 * 7e9 + attention)).abs() < 1e-6 * f.model);
    }

    #[test]
    fn fp8_runs_faster_than_bf16_but_not_twice() {
        let bf16 = plan("h100-80gb", 8e9, 8, 3, Method::Full);
        let mut fp8 = bf16.clone();
        fp8.memory.precision = Precision::Fp8;
        let speedup = hours(&bf16) / hours(&fp8);
        assert!((1.2..1.4).contains(&speedup), "{speedup}");
        // No FP8 on an A100: timed at BF16, with a warning.
        let mut a100 = plan("a100-80gb", 8e9, 8, 3, Method::Full);
        a100.memory.precision = Precision::Fp8;
        assert!(estimate(&a100).unwrap().warnings[0].contains("no FP8"));
    }

    #[test]
    fn a_gpu_without_the_precisions_rate_is_an_error_not_a_guess() {
        let mut b200 = plan("b200-180gb", 8e9, 8, 3, Method::Full);
        b200.memory.precision = Precision::Fp32;
        assert!(matches!(estimate(&b200), Err(TimeError::NoPeak { .. })));
    }

    #[test]
    fn a_given_mfu_sets_the_compute_time() {
        let mut given = plan("h100-80gb", 7e9, 8, 3, Method::Full);
        given.mfu = Some(0.5);
        let t = estimate(&given).unwrap();
        let expected = t.total_flops / (8.0 * 989e12 * 0.5) / SECONDS_PER_HOUR;
        assert!((t.breakdown.compute_hours - expected).abs() < 1e-9 * expected);
        assert!((t.mfu - 0.5).abs() < 1e-9);
    }

    #[test]
    fn pipeline_bubbles_and_offload_cost_time() {
        let mut piped = plan("h100-80gb", 7e10, 16, 1, Method::Full);
        piped.memory.parallelism.pipeline_parallel = 4;
        piped.gradient_accumulation_steps = 4;
        let t = estimate(&piped).unwrap();
        // (p − 1) / m of compute.
        let share = t.breakdown.pipeline_bubble_hours / t.breakdown.compute_hours;
        assert!((share - 0.75).abs() < 1e-9, "{share}");
        let mut offloaded = plan("a100-80gb", 7e9, 1, 0, Method::Full);
        offloaded.memory.parallelism.offload_optimizer = true;
        assert!(estimate(&offloaded).unwrap().breakdown.offload_hours > 0.0);
    }

    proptest! {
        #[test]
        fn time_grows_with_tokens(
            parameters in 1e8f64..7e10,
            method in any_method(),
            tokens in 1e6f64..1e12,
            more in 1.01f64..100.0,
        ) {
            let mut small = plan("h100-80gb", parameters, 8, 3, method);
            small.tokens = tokens;
            let mut large = small.clone();
            large.tokens = tokens * more;
            prop_assert!(hours(&large) > hours(&small));
        }

        #[test]
        fn time_grows_with_parameters(
            parameters in 1e8f64..2e11,
            method in any_method(),
            gpu in prop::sample::select(vec!["a100-80gb", "h100-80gb", "l40s-48gb", "rtx4090-24gb"]),
        ) {
            let small = plan(gpu, parameters, 8, 3, method);
            let large = plan(gpu, parameters * 1.1, 8, 3, method);
            prop_assert!(hours(&large) > hours(&small), "{} vs {}", hours(&large), hours(&small));
        }

        /// More GPUs of the same fabric (all in one NVLink node, or all across nodes)
        /// never make a job slower; the gain need not be linear.
        #[test]
        fn more_gpus_take_less_time(
            parameters in 1e8f64..7e10,
            method in any_method(),
            zero_stage in 0u8..=3,
            gpus in prop::sample::select(vec![1u64, 2, 4, 16, 32, 64]),
            gpu in prop::sample::select(vec!["a100-80gb", "h100-80gb", "b200-180gb"]),
            sequence_length in 1024u64..=8192,
            micro_batch_size in 1u64..=8,
        ) {
            let mut fewer = plan(gpu, parameters, gpus, zero_stage, method);
            fewer.memory.sequence_length = sequence_length;
            fewer.memory.micro_batch_size = micro_batch_size;
            let mut more = fewer.clone();
            more.memory.parallelism.gpus = gpus * 2;
            more.gpus_per_node = more.gpu.gpus_per_node.min(gpus * 2);
            let (a, b) = (hours(&fewer), hours(&more));
            prop_assert!(b < a, "{gpus} → {}: {a} h → {b} h", gpus * 2);
        }

        #[test]
        fn answers_are_finite_and_positive(
            parameters in 1e6f64..1e13,
            method in any_method(),
            gpus in 1u64..=4096,
            zero_stage in 0u8..=3,
            gpu_index in 0usize..37,
            tokens in 1.0f64..1e16,
        ) {
            let gpu = &catalog().gpus()[gpu_index % catalog().gpus().len()];
            let mut p = plan(&gpu.id, parameters, gpus, zero_stage, method);
            p.tokens = tokens;
            p.gpus_per_node = gpu.gpus_per_node.min(gpus);
            let t = estimate(&p).unwrap();
            for value in [t.wall_hours.low, t.wall_hours.expected, t.wall_hours.high, t.mfu, t.tokens_per_second] {
                prop_assert!(value.is_finite() && value > 0.0, "{value}");
            }
            // The hours alone, without the sentences, are the answer's.
            prop_assert_eq!(wall_hours(&p).unwrap().to_bits(), t.wall_hours.expected.to_bits());
        }
    }
}
