//! `/v1/estimates/*`: thin adapters over `estimate::`.

use actix_web::{HttpRequest, HttpResponse, web};

use super::query::{self, Kind, Mapping};
use super::render::{self, RenderQuery};
use super::{AppState, JsonBody};
use crate::api::{MemoryRequest, from_json_value};
use crate::catalog::Catalog;
use crate::error::{ApiError, Problem};
use crate::estimate::memory::{self, MemoryEstimate};

/// Query keys of `GET /v1/estimates/memory` and where they go in the JSON request.
pub const MEMORY_QUERY: &[Mapping] = &[
    ("model", "/model", Kind::Text),
    ("parameters", "/model/parameters", Kind::Scalar),
    ("method", "/method", Kind::Text),
    ("lora_rank", "/lora/rank", Kind::Scalar),
    ("lora_alpha", "/lora/alpha", Kind::Scalar),
    ("lora_targets", "/lora/targets", Kind::List),
    (
        "double_quantization",
        "/lora/double_quantization",
        Kind::Scalar,
    ),
    ("virtual_tokens", "/virtual_tokens", Kind::Scalar),
    ("adapter_bottleneck", "/adapter_bottleneck", Kind::Scalar),
    ("trainable_layers", "/trainable_layers", Kind::Scalar),
    ("precision", "/precision", Kind::Text),
    ("optimizer", "/optimizer", Kind::Text),
    ("micro_batch_size", "/micro_batch_size", Kind::Scalar),
    ("sequence_length", "/sequence_length", Kind::Scalar),
    ("max_sample_tokens", "/max_sample_tokens", Kind::Scalar),
    (
        "gradient_checkpointing",
        "/gradient_checkpointing",
        Kind::Scalar,
    ),
    ("attention", "/attention", Kind::Text),
    ("gpu", "/gpu", Kind::Text),
    ("gpus", "/parallelism/gpus", Kind::Scalar),
    ("zero_stage", "/parallelism/zero_stage", Kind::Scalar),
    (
        "offload_optimizer",
        "/parallelism/offload_optimizer",
        Kind::Scalar,
    ),
    (
        "offload_parameters",
        "/parallelism/offload_parameters",
        Kind::Scalar,
    ),
    (
        "tensor_parallel",
        "/parallelism/tensor_parallel",
        Kind::Scalar,
    ),
    (
        "pipeline_parallel",
        "/parallelism/pipeline_parallel",
        Kind::Scalar,
    ),
    ("framework", "/framework", Kind::Text),
    ("optimizations", "/optimizations", Kind::List),
];

/// Resolves a request and runs the estimator; the defaults used lead the assumptions.
/// Shared by the HTTP handlers and the CLI.
pub fn memory_answer(
    request: &MemoryRequest,
    catalog: &Catalog,
) -> Result<MemoryEstimate, ApiError> {
    let resolved = request.resolve(catalog)?;
    let mut answer = memory::estimate(&resolved.plan, resolved.gpus);
    let mut assumptions = resolved.defaulted;
    assumptions.append(&mut answer.assumptions);
    answer.assumptions = assumptions;
    Ok(answer)
}

/// Estimate peak GPU memory per GPU.
///
/// Peak memory of one training or fine-tuning configuration on each GPU, broken down into
/// weights, gradients, optimizer states, activations, logits and adapters, as the
/// allocator, the caching reserve and nvidia-smi would see it; with a fit table (fits,
/// headroom, fewest GPUs, largest micro-batch) for the requested GPU or every catalog GPU.
#[utoipa::path(
    post,
    path = "/v1/estimates/memory",
    operation_id = "estimate_memory",
    tag = "estimates",
    params(RenderQuery),
    request_body(content = MemoryRequest, description = "Model and training configuration; only `model` is required.",
        examples(
            ("full_7b_zero3" = (summary = "7B full fine-tuning on 4 GPUs with ZeRO-3", value = json!({"model": {"parameters": 7.0e9}, "parallelism": {"gpus": 4, "zero_stage": 3}, "gpu": "a100-80gb"}))),
            ("lora_qwen" = (summary = "LoRA r=8 on q,k,v,o of Qwen-7B", value = json!({"model": "qwen-7b", "method": "lora", "lora": {"rank": 8, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}, "gpu": "a100-80gb"}))),
            ("qlora_consumer" = (summary = "QLoRA of Llama-3.1-8B on a 24 GB card", value = json!({"model": "llama-3.1-8b", "method": "qlora", "lora": {"rank": 16, "targets": "all_linear"}, "micro_batch_size": 2, "gradient_checkpointing": true, "gpu": "rtx4090-24gb"})))
        )),
    responses(
        (status = 200, description = "The estimate (JSON; CSV with `format=csv` or `Accept: text/csv`; one value with `format=text&field=…`)", body = MemoryEstimate,
            example = json!({"per_gpu": {"weights_bytes": 3500000000u64, "gradients_bytes": 3500000000u64, "optimizer_bytes": 21000000000u64, "activations_bytes": 1073741824u64, "logits_bytes": 917504000u64, "adapter_bytes": 0, "model_states_bytes": 28000000000u64, "peak_allocated_bytes": 30500000000u64, "peak_reserved_bytes": 33550000000u64, "device_bytes": 34355306496u64, "total_gib": 31.996}, "range": {"low_bytes": 26453586001u64, "high_bytes": 47066769899u64}, "parameters": {"total": 7000000000u64, "trainable": 7000000000u64, "trainable_fraction": 1.0}, "model_states_formula": "(16/Nd)·Ψ", "cpu_bytes": 0, "peak_phase": "forward_end", "phases": [], "fits": [{"gpu": "a100-80gb", "fits": true, "headroom_bytes": 50647000000i64, "min_gpus": 2, "max_micro_batch_size": 9}], "assumptions": ["precision: amp_bf16 (default)"], "warnings": []})),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown model or GPU id (with the closest ids)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 64 KiB", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields, each with a JSON pointer and the accepted values", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn memory_post(
    request: HttpRequest,
    state: web::Data<AppState>,
    render: web::Query<RenderQuery>,
    body: JsonBody<MemoryRequest>,
) -> Result<HttpResponse, ApiError> {
    let answer = memory_answer(&body.0, &state.catalog)?;
    render::respond(&request, &render, &answer, "fits")
}

/// Estimate peak GPU memory per GPU (query-string form).
///
/// The same estimate as `POST /v1/estimates/memory` from a plain URL, for spreadsheets
/// (`IMPORTDATA`, `WEBSERVICE`): nested fields are flattened (`lora_rank`, `gpus`,
/// `zero_stage`, …), lists are comma-separated. Add `format=csv`, or `format=text` with
/// `field=per_gpu.total_gib` for one bare value.
#[utoipa::path(
    get,
    path = "/v1/estimates/memory",
    operation_id = "estimate_memory_get",
    tag = "estimates",
    params(
        ("model" = Option<String>, Query, description = "Catalog model id", example = "llama-3.1-8b"),
        ("parameters" = Option<f64>, Query, description = "Parameter count instead of a model id", example = 7.0e9),
        ("method" = Option<String>, Query, description = "full | lora | qlora | prefix_tuning | prompt_tuning | adapter | freeze", example = "lora"),
        ("lora_rank" = Option<u64>, Query, description = "LoRA rank"),
        ("lora_alpha" = Option<f64>, Query, description = "LoRA alpha"),
        ("lora_targets" = Option<String>, Query, description = "Comma-separated projections or all_linear", example = "q_proj,v_proj"),
        ("double_quantization" = Option<bool>, Query, description = "QLoRA double quantisation"),
        ("virtual_tokens" = Option<u64>, Query, description = "Prefix/prompt tuning virtual tokens"),
        ("adapter_bottleneck" = Option<u64>, Query, description = "Adapter bottleneck width"),
        ("trainable_layers" = Option<u64>, Query, description = "Freeze: trained top blocks"),
        ("precision" = Option<String>, Query, description = "fp32 | amp_bf16 | amp_fp16 | bf16 | fp16 | fp8"),
        ("optimizer" = Option<String>, Query, description = "adamw | adamw_8bit | paged_adamw | paged_adamw_8bit | adafactor | sgd | sgd_momentum | lion"),
        ("micro_batch_size" = Option<u64>, Query, description = "Per-GPU micro-batch"),
        ("sequence_length" = Option<u64>, Query, description = "Tokens per sample"),
        ("max_sample_tokens" = Option<u64>, Query, description = "Longest sample when batches are padded"),
        ("gradient_checkpointing" = Option<bool>, Query, description = "Activation checkpointing"),
        ("attention" = Option<String>, Query, description = "flash | sdpa | eager"),
        ("gpu" = Option<String>, Query, description = "Catalog GPU id for the fit table", example = "a100-80gb"),
        ("gpus" = Option<u64>, Query, description = "GPUs in the job"),
        ("zero_stage" = Option<u8>, Query, description = "ZeRO stage 0-3"),
        ("offload_optimizer" = Option<bool>, Query, description = "Offload optimizer states to CPU"),
        ("offload_parameters" = Option<bool>, Query, description = "Offload parameters (stage 3)"),
        ("tensor_parallel" = Option<u64>, Query, description = "Tensor-parallel degree"),
        ("pipeline_parallel" = Option<u64>, Query, description = "Pipeline-parallel degree"),
        ("framework" = Option<String>, Query, description = "generic | hf_trainer | deepspeed | megatron | torchtune | litgpt | unsloth"),
        ("optimizations" = Option<String>, Query, description = "Comma-separated optimizations"),
        RenderQuery,
    ),
    responses(
        (status = 200, description = "The estimate", body = MemoryEstimate, example = json!({"per_gpu": {"total_gib": 31.996}})),
        (status = 404, description = "Unknown model or GPU id", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid or unknown query parameters", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn memory_get(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (value, render) = query::to_json(request.query_string(), MEMORY_QUERY)?;
    let body: MemoryRequest = from_json_value(value)?;
    let answer = memory_answer(&body, &state.catalog)?;
    render::respond(&request, &render, &answer, "fits")
}
