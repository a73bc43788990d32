//! Accuracy report: every row of the reference `memory-calibration.csv` through the
//! estimator, like compared with like (the row's metric and unit).
//!
//! Print it with `cargo test --test api accuracy -- --nocapture`.

use serde::Deserialize;

use crate::support::{ErrorSummary, enum_value};
use trainplan::catalog::{Catalog, Projection};
use trainplan::estimate::memory::{self, MemoryPlan, Prepared};
use trainplan::estimate::{
    Attention, Framework, Method, ModelShape, Optimizations, Optimizer, Parallelism, Precision,
    Targets,
};

const MEMORY_CALIBRATION: &str = include_str!("../fixtures/reference/memory-calibration.csv");

/// Longest Alpaca sample in Llama-2 tokens (LitGPT's data preparation reports 1,304;
/// memory-modeling.md §2.8). Rows with `packed=no` pad each batch to its longest sample, so
/// their peak is set by it; the same value is used for every such row.
const ALPACA_LONGEST_SAMPLE_TOKENS: u64 = 1304;

#[derive(Debug, Deserialize)]
struct Row {
    id: String,
    model: String,
    method: String,
    lora_rank: Option<u64>,
    lora_targets: Option<String>,
    precision: Option<String>,
    optimizer: Option<String>,
    micro_batch_size: u64,
    sequence_length: u64,
    packed: Option<String>,
    gradient_checkpointing: Option<String>,
    gpus: u64,
    sharding: String,
    tensor_parallel: u64,
    pipeline_parallel: u64,
    gpu: String,
    framework: String,
    extras: Option<String>,
    source: String,
    measured_value: Option<f64>,
    unit: Option<String>,
    metric: String,
}

fn targets(text: Option<&str>) -> Targets {
    match text {
        None | Some("") => [Projection::Q, Projection::V].into_iter().collect(),
        Some(list) => list
            .split(',')
            .flat_map(|t| match t.trim() {
                "q" => vec![Projection::Q],
                "k" => vec![Projection::K],
                "v" => vec![Projection::V],
                "o" => vec![Projection::O],
                "mlp" => vec![Projection::Gate, Projection::Up, Projection::Down],
                other => panic!("unknown target {other}"),
            })
            .collect(),
    }
}

/// The row as a plan, plus the GPU it ran on.
fn plan(row: &Row, catalog: &Catalog) -> (MemoryPlan, String) {
    let extras: Vec<&str> = row.extras.as_deref().unwrap_or("").split(';').collect();
    let has = |x: &str| extras.contains(&x);
    let model = catalog
        .model(&row.model)
        .unwrap_or_else(|| panic!("{}: model", row.id));
    let rank = row.lora_rank.unwrap_or(8);
    let lora_targets = targets(row.lora_targets.as_deref());
    let method = match row.method.as_str() {
        "full" => Method::Full,
        "lora" => Method::Lora {
            rank,
            targets: lora_targets,
        },
        "qlora" => Method::Qlora {
            rank,
            targets: lora_targets,
            double_quantization: has("nested_quant"),
        },
        other => panic!("{}: method {other}", row.id),
    };
    // Sources that name no framework of the list: fitcheck measures HF Trainer + PEFT
    // runs; "other" with Unsloth kernels is Unsloth.
    let framework = match row.framework.as_str() {
        "fitcheck" => Framework::HfTrainer,
        "other" if has("unsloth") => Framework::Unsloth,
        "other" => Framework::Generic,
        name => enum_value(name),
    };
    // Unstated precision/optimizer: the service defaults, except that LoRA stacks load the
    // base in bf16 (LLaMA-Factory's default `bf16: true`).
    let precision = match row.precision.as_deref() {
        Some(p) if !p.is_empty() => enum_value(p),
        _ if row.method != "full" => Precision::Bf16,
        _ => Precision::AmpBf16,
    };
    // Unstated optimizer: torchtune's single-device full fine-tuning configs use
    // bitsandbytes PagedAdamW8bit ("The default config uses an optimizer from
    // bitsandbytes"); every other stack in the file defaults to AdamW.
    let optimizer: Optimizer = match row.optimizer.as_deref() {
        Some(o) if !o.is_empty() => enum_value(o),
        _ if row.framework == "torchtune" && row.method == "full" && row.gpus == 1 => {
            Optimizer::PagedAdamw8bit
        }
        _ => Optimizer::Adamw,
    };
    let (zero_stage, offload) = match row.sharding.as_str() {
        "none" => (0, false),
        "fsdp" => (3, false),
        "fsdp_offload" => (3, true),
        other => panic!("{}: sharding {other}", row.id),
    };
    let mut optimizations = Vec::new();
    for (extra, optimization) in [
        ("compile", trainplan::estimate::Optimization::TorchCompile),
        (
            "chunked_ce",
            trainplan::estimate::Optimization::ChunkedCrossEntropy,
        ),
        (
            "optimizer_in_backward",
            trainplan::estimate::Optimization::OptimizerInBackward,
        ),
        (
            "activation_offload",
            trainplan::estimate::Optimization::ActivationOffloading,
        ),
    ] {
        if has(extra) {
            optimizations.push(optimization);
        }
    }
    // Source conventions for what a row leaves unstated: fitcheck's validation tables use
    // fixed-length inputs; torchtune 0.3's Llama 3.1 configs (the S7 table) use
    // `CEWithChunkedOutputLoss`; the 2022 HF guide (S1) predates SDPA in transformers
    // (v4.36, 2023), so BERT ran eager attention.
    let packed = row.packed.as_deref() == Some("yes")
        || (row.packed.is_none() && row.framework == "fitcheck");
    if row.source.contains("(S7)") {
        optimizations.push(trainplan::estimate::Optimization::ChunkedCrossEntropy);
    }
    if packed {
        optimizations.push(trainplan::estimate::Optimization::PackedSequences);
    }
    let plan = MemoryPlan {
        model: ModelShape::from_architecture(model.architecture.clone()),
        method,
        precision,
        optimizer,
        micro_batch_size: row.micro_batch_size,
        sequence_length: row.sequence_length,
        // Unstated packing: the stacks' data loaders pad per batch (torchtune
        // `packed: False`, LLaMA-Factory `packing: false` for SFT).
        max_sample_tokens: (!packed).then_some(ALPACA_LONGEST_SAMPLE_TOKENS),
        // Unstated checkpointing: on, the default of LLaMA-Factory
        // (`disable_gradient_checkpointing: false`) and of torchtune's configs
        // (`enable_activation_checkpointing: True`).
        gradient_checkpointing: row.gradient_checkpointing.as_deref() != Some("no"),
        attention: if has("eager_attention") || row.source.contains("(S1)") {
            Attention::Eager
        } else if row.framework == "hf_trainer" && !has("flash_attn") {
            Attention::Sdpa
        } else {
            Attention::Flash
        },
        parallelism: Parallelism {
            gpus: row.gpus,
            zero_stage,
            offload_optimizer: offload,
            offload_parameters: offload,
            tensor_parallel: row.tensor_parallel,
            pipeline_parallel: row.pipeline_parallel,
        },
        framework,
        optimizations: Optimizations::from_list(&optimizations),
    };
    // "a100" rows do not state the memory size; the estimate does not depend on it.
    let gpu = if row.gpu == "a100" {
        "a100-80gb".to_string()
    } else {
        row.gpu.clone()
    };
    (plan, gpu)
}

struct Outcome {
    id: String,
    metric: String,
    measured_bytes: Option<f64>,
    predicted_bytes: f64,
    usable_bytes: f64,
    detail: String,
}

fn run() -> Vec<Outcome> {
    let catalog = Catalog::embedded().unwrap();
    let mut reader = csv::Reader::from_reader(MEMORY_CALIBRATION.as_bytes());
    reader
        .deserialize::<Row>()
        .map(|row| {
            let row = row.unwrap();
            let (plan, gpu) = plan(&row, &catalog);
            let gpu = catalog
                .gpu(&gpu)
                .unwrap_or_else(|| panic!("{}: gpu {gpu}", row.id));
            let b = Prepared::new(&plan).breakdown(plan.parallelism.gpus, plan.micro_batch_size);
            // Like with like: allocated and active are tensor bytes; reserved adds the
            // allocator cache; nvidia-smi adds the CUDA context. An unstated metric is
            // compared with the reserved figure, the middle of the three.
            let predicted_bytes = match row.metric.as_str() {
                "max_allocated" | "active" => b.peak_allocated,
                "max_reserved" | "unknown" => b.peak_reserved,
                "nvidia_smi" | "oom" => b.device,
                other => panic!("{}: metric {other}", row.id),
            };
            let unit = match row.unit.as_deref() {
                Some("GiB") => 1024.0_f64.powi(3),
                Some("GB") => 1e9,
                Some("MiB") => 1024.0_f64.powi(2),
                _ => 0.0,
            };
            Outcome {
                id: row.id,
                metric: row.metric,
                measured_bytes: row.measured_value.map(|v| v * unit),
                predicted_bytes,
                usable_bytes: gpu.memory_bytes_usable as f64,
                detail: format!(
                    "w {:.1} g {:.1} o {:.1} ad {:.2} act {:.1} lg {:.1} ph {:?}",
                    b.weights / 1073741824.0,
                    b.gradients / 1073741824.0,
                    b.optimizer / 1073741824.0,
                    b.adapter / 1073741824.0,
                    b.activations / 1073741824.0,
                    b.logits / 1073741824.0,
                    b.phases.map(|p| (p / 1073741824.0 * 10.0).round() / 10.0)
                ),
            }
        })
        .collect()
}

#[test]
fn accuracy_memory_report() {
    let outcomes = run();
    let gib = 1024.0_f64.powi(3);
    println!(
        "\nmemory accuracy on memory-calibration.csv ({} rows)",
        outcomes.len()
    );
    println!(
        "{:<6} {:<14} {:>12} {:>12} {:>8}",
        "row", "metric", "measured GiB", "predicted GiB", "error"
    );
    let mut errors = Vec::new();
    let mut oom_failures = Vec::new();
    for o in &outcomes {
        match o.measured_bytes {
            Some(measured) => {
                let error = o.predicted_bytes / measured - 1.0;
                errors.push(error);
                println!(
                    "{:<6} {:<14} {:>12.2} {:>12.2} {:>+7.1}%  {}",
                    o.id,
                    o.metric,
                    measured / gib,
                    o.predicted_bytes / gib,
                    error * 100.0,
                    o.detail
                );
            }
            None => {
                let fits = o.predicted_bytes <= o.usable_bytes;
                println!(
                    "{:<6} {:<14} {:>12} {:>12.2} {:>8}  usable {:.2}  {}",
                    o.id,
                    o.metric,
                    "OOM",
                    o.predicted_bytes / gib,
                    if fits { "MISSED" } else { "ok" },
                    o.usable_bytes / gib,
                    o.detail
                );
                if fits {
                    oom_failures.push(o.id.clone());
                }
            }
        }
    }
    let summary = ErrorSummary::of(&errors);
    println!(
        "{summary}; OOM rows predicted not to fit: {}",
        if oom_failures.is_empty() {
            "all".to_string()
        } else {
            format!("missed {oom_failures:?}")
        }
    );
    // The range every answer states holds at least 80 % of the measured peaks.
    let within = outcomes
        .iter()
        .filter_map(|o| o.measured_bytes.map(|m| (m, o.predicted_bytes)))
        .filter(|(measured, predicted)| {
            (predicted * (1.0 + memory::RANGE_LOW_FRACTION)
                ..=predicted * (1.0 + memory::RANGE_HIGH_FRACTION))
                .contains(measured)
        })
        .count();
    println!(
        "the stated range ({:+.0} % to {:+.0} %) holds {within} of {} measured rows",
        memory::RANGE_LOW_FRACTION * 100.0,
        memory::RANGE_HIGH_FRACTION * 100.0,
        errors.len()
    );
    assert!(
        within as f64 >= 0.8 * errors.len() as f64,
        "the stated range holds fewer than 80 % of the rows"
    );
    // The design's target for the median.
    assert!(
        summary.median_abs <= 0.10,
        "median |error| above the 10 % target"
    );
    // The 25 % worst-case target is not met yet (rows whose real sequence lengths the
    // sources do not give, see the closing notes); this guards against regressions.
    assert!(
        summary.worst_abs <= 1.10,
        "worst |error| regressed past 110 %"
    );
    // The design's rule for out-of-memory rows: each is predicted not to fit its GPU.
    assert!(
        oom_failures.is_empty(),
        "OOM rows predicted to fit: {oom_failures:?}"
    );
}
