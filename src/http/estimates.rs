//! `/v1/estimates/*`: thin adapters over `estimate::`.

use actix_web::{HttpRequest, HttpResponse, web};

use super::query::{self, Kind, Mapping};
use super::render::{self, RenderQuery};
use super::{AppState, JsonBody};
use crate::api::{CostRequest, MemoryRequest, RecommendationRequest, TimeRequest, from_json_value};
use crate::catalog::Catalog;
use crate::error::{ApiError, GetProblems, PostProblems};
use crate::estimate::cost::{self, CostEstimate};
use crate::estimate::memory::{self, MemoryEstimate};
use crate::estimate::recommend::{self, Recommendation};
use crate::estimate::time::{self, TimeEstimate};
use crate::pricing::Pricing;

/// Query keys of `GET /v1/estimates/memory` and where they go in the JSON request. The
/// OpenAPI document lists the same keys (see `openapi.rs`).
pub const MEMORY_QUERY: &[Mapping] = &[
    (
        "model",
        "/model",
        Kind::Text,
        "Catalog model id, e.g. llama-3.1-8b",
    ),
    (
        "parameters",
        "/model/parameters",
        Kind::Number,
        "Parameter count instead of a model id, e.g. 7e9",
    ),
    (
        "method",
        "/method",
        Kind::Text,
        "full | lora | qlora | prefix_tuning | prompt_tuning | adapter | freeze",
    ),
    (
        "lora_rank",
        "/lora/rank",
        Kind::Integer,
        "LoRA rank (default 8)",
    ),
    ("lora_alpha", "/lora/alpha", Kind::Number, "LoRA alpha"),
    (
        "lora_targets",
        "/lora/targets",
        Kind::List,
        "Comma-separated projections (q_proj,v_proj) or all_linear",
    ),
    (
        "double_quantization",
        "/lora/double_quantization",
        Kind::Bool,
        "QLoRA double quantisation (default true)",
    ),
    (
        "virtual_tokens",
        "/virtual_tokens",
        Kind::Integer,
        "Prefix/prompt tuning virtual tokens",
    ),
    (
        "adapter_bottleneck",
        "/adapter_bottleneck",
        Kind::Integer,
        "Adapter bottleneck width",
    ),
    (
        "trainable_layers",
        "/trainable_layers",
        Kind::Integer,
        "Freeze: trained top blocks",
    ),
    (
        "precision",
        "/precision",
        Kind::Text,
        "fp32 | amp_bf16 | amp_fp16 | bf16 | fp16 | fp8",
    ),
    (
        "optimizer",
        "/optimizer",
        Kind::Text,
        "adamw | adamw_8bit | paged_adamw | paged_adamw_8bit | adafactor | sgd | sgd_momentum | lion",
    ),
    (
        "micro_batch_size",
        "/micro_batch_size",
        Kind::Integer,
        "Per-GPU micro-batch (default 1)",
    ),
    (
        "sequence_length",
        "/sequence_length",
        Kind::Integer,
        "Tokens per sample (default 2048)",
    ),
    (
        "max_sample_tokens",
        "/max_sample_tokens",
        Kind::Integer,
        "Longest sample when batches are padded, not packed",
    ),
    (
        "gradient_checkpointing",
        "/gradient_checkpointing",
        Kind::Bool,
        "Activation checkpointing (default false)",
    ),
    (
        "attention",
        "/attention",
        Kind::Text,
        "flash | sdpa | eager",
    ),
    ("gpu", "/gpu", Kind::Text, "Catalog GPU id, e.g. a100-80gb"),
    (
        "gpus",
        "/parallelism/gpus",
        Kind::Integer,
        "GPUs in the job (default 1)",
    ),
    (
        "zero_stage",
        "/parallelism/zero_stage",
        Kind::Integer,
        "ZeRO stage 0-3 (FSDP FULL_SHARD = 3)",
    ),
    (
        "offload_optimizer",
        "/parallelism/offload_optimizer",
        Kind::Bool,
        "Offload optimizer states to CPU",
    ),
    (
        "offload_parameters",
        "/parallelism/offload_parameters",
        Kind::Bool,
        "Offload parameters to CPU (stage 3)",
    ),
    (
        "tensor_parallel",
        "/parallelism/tensor_parallel",
        Kind::Integer,
        "Tensor-parallel degree",
    ),
    (
        "pipeline_parallel",
        "/parallelism/pipeline_parallel",
        Kind::Integer,
        "Pipeline-parallel degree",
    ),
    (
        "framework",
        "/framework",
        Kind::Text,
        "generic | hf_trainer | deepspeed | megatron | torchtune | litgpt | unsloth",
    ),
    (
        "optimizations",
        "/optimizations",
        Kind::List,
        "Comma-separated: chunked_cross_entropy, torch_compile, optimizer_in_backward, activation_offloading, fused_linear_cross_entropy, packed_sequences",
    ),
];

/// Query keys of `GET /v1/recommendations`.
pub const RECOMMEND_QUERY: &[Mapping] = &[
    (
        "model",
        "/model",
        Kind::Text,
        "Catalog model id, e.g. llama-2-7b",
    ),
    (
        "parameters",
        "/model/parameters",
        Kind::Number,
        "Parameter count instead of a model id",
    ),
    (
        "samples",
        "/dataset/samples",
        Kind::Number,
        "Training samples",
    ),
    (
        "tokens_per_sample",
        "/dataset/tokens_per_sample",
        Kind::Integer,
        "Tokens per sample (default 512)",
    ),
    (
        "epochs",
        "/dataset/epochs",
        Kind::Number,
        "Epochs (default 3)",
    ),
    (
        "task_type",
        "/task_type",
        Kind::Text,
        "simple | general | complex",
    ),
    ("quality", "/quality", Kind::Text, "max | balanced | budget"),
    (
        "deadline_hours",
        "/deadline_hours",
        Kind::Number,
        "Wall hours one run may take",
    ),
    (
        "budget",
        "/budget/amount",
        Kind::Number,
        "Money for the whole project",
    ),
    (
        "currency",
        "/budget/currency",
        Kind::Text,
        "USD (default) or CNY",
    ),
    (
        "project_months",
        "/project_months",
        Kind::Number,
        "Project duration in months (default 1)",
    ),
    (
        "expected_runs",
        "/expected_runs",
        Kind::Number,
        "Training runs over the project (default 1)",
    ),
    (
        "can_operate_hardware",
        "/can_operate_hardware",
        Kind::Bool,
        "The team can run its own servers",
    ),
    (
        "hardware_cost_per_gpu",
        "/hardware_cost_per_gpu",
        Kind::Number,
        "Self-build hardware price per GPU",
    ),
    (
        "ops_cost_per_month",
        "/ops_cost_per_month",
        Kind::Number,
        "Self-build operations per month",
    ),
    (
        "providers",
        "/providers",
        Kind::List,
        "Comma-separated providers to consider",
    ),
    (
        "price_types",
        "/price_types",
        Kind::List,
        "Comma-separated price types allowed",
    ),
    (
        "gpus",
        "/gpus",
        Kind::List,
        "Comma-separated catalog GPUs to consider",
    ),
];

pub const RECOMMEND_TABLES: &[&[Mapping]] = &[RECOMMEND_QUERY];
pub const MEMORY_TABLES: &[&[Mapping]] = &[MEMORY_QUERY];
pub const TIME_TABLES: &[&[Mapping]] = &[MEMORY_QUERY, TIME_QUERY];
pub const COST_TABLES: &[&[Mapping]] = &[MEMORY_QUERY, TIME_QUERY, COST_QUERY];

/// Query keys the time estimate adds.
pub const TIME_QUERY: &[Mapping] = &[
    (
        "tokens",
        "/workload/tokens",
        Kind::Number,
        "Tokens over the whole run, e.g. 2e8",
    ),
    (
        "samples",
        "/workload/samples",
        Kind::Number,
        "Samples per epoch (instead of tokens)",
    ),
    (
        "tokens_per_sample",
        "/workload/tokens_per_sample",
        Kind::Integer,
        "Tokens per sample (default sequence_length)",
    ),
    (
        "epochs",
        "/workload/epochs",
        Kind::Number,
        "Epochs (default 1)",
    ),
    (
        "mfu",
        "/mfu",
        Kind::Number,
        "Measured end-to-end MFU, 0-1, replacing the built-in table",
    ),
    (
        "nodes",
        "/nodes",
        Kind::Integer,
        "Servers the GPUs are spread over",
    ),
    (
        "gradient_accumulation_steps",
        "/gradient_accumulation_steps",
        Kind::Integer,
        "Micro-batches per optimizer step",
    ),
];

/// Query keys the cost estimate adds (one custom quote through the `quote_*` keys).
pub const COST_QUERY: &[Mapping] = &[
    (
        "hours",
        "/hours",
        Kind::Number,
        "Wall hours instead of a time estimate (then only gpu and gpus count)",
    ),
    (
        "providers",
        "/pricing/providers",
        Kind::List,
        "Comma-separated providers; empty for custom quotes only",
    ),
    (
        "regions",
        "/pricing/regions",
        Kind::List,
        "Comma-separated regions",
    ),
    (
        "price_types",
        "/pricing/price_types",
        Kind::List,
        "Comma-separated: on_demand, spot, reserved_1y, reserved_3y",
    ),
    (
        "currency",
        "/pricing/currency",
        Kind::Text,
        "USD (default) or CNY",
    ),
    (
        "quote_name",
        "/pricing/custom_quotes/0/name",
        Kind::Text,
        "Custom quote: name",
    ),
    (
        "quote_gpu",
        "/pricing/custom_quotes/0/gpu",
        Kind::Text,
        "Custom quote: catalog GPU id",
    ),
    (
        "quote_gpus",
        "/pricing/custom_quotes/0/gpus",
        Kind::Integer,
        "Custom quote: GPUs per instance",
    ),
    (
        "quote_price_per_instance_hour",
        "/pricing/custom_quotes/0/price_per_instance_hour",
        Kind::Number,
        "Custom quote: price of one instance per hour",
    ),
    (
        "quote_price_per_gpu_hour",
        "/pricing/custom_quotes/0/price_per_gpu_hour",
        Kind::Number,
        "Custom quote: price per GPU-hour",
    ),
    (
        "quote_currency",
        "/pricing/custom_quotes/0/currency",
        Kind::Text,
        "Custom quote: USD or CNY",
    ),
    (
        "quote_price_type",
        "/pricing/custom_quotes/0/price_type",
        Kind::Text,
        "Custom quote: on_demand, spot, reserved_1y or reserved_3y",
    ),
    (
        "interruptions_per_hour",
        "/spot/interruptions_per_hour",
        Kind::Number,
        "Spot interruptions per instance-hour",
    ),
    (
        "checkpoint_interval_minutes",
        "/spot/checkpoint_interval_minutes",
        Kind::Number,
        "Spot checkpoint interval (default Young/Daly)",
    ),
    (
        "checkpoint_write_minutes",
        "/spot/checkpoint_write_minutes",
        Kind::Number,
        "Minutes to write a checkpoint (default 2)",
    ),
    (
        "restart_minutes",
        "/spot/restart_minutes",
        Kind::Number,
        "Minutes to restart after an interruption (default 10)",
    ),
    (
        "hardware_cost",
        "/self_build/hardware_cost",
        Kind::Number,
        "Self-build: hardware price",
    ),
    (
        "power_kw",
        "/self_build/power_kw",
        Kind::Number,
        "Self-build: server power in kW",
    ),
    (
        "electricity_price_per_kwh",
        "/self_build/electricity_price_per_kwh",
        Kind::Number,
        "Self-build: electricity price per kWh",
    ),
    (
        "pue",
        "/self_build/pue",
        Kind::Number,
        "Self-build: power usage effectiveness",
    ),
    (
        "lifetime_months",
        "/self_build/lifetime_months",
        Kind::Integer,
        "Self-build: months of use",
    ),
    (
        "ops_cost_per_month",
        "/self_build/ops_cost_per_month",
        Kind::Number,
        "Self-build: operations per month",
    ),
];

/// The defaults a request used, ahead of the estimator's own assumptions.
fn lead_with(mut defaulted: Vec<String>, assumptions: &mut Vec<String>) {
    defaulted.append(assumptions);
    *assumptions = defaulted;
}

/// Resolves a request and runs the estimator; the defaults used lead the assumptions.
/// Shared by the HTTP handlers and the CLI.
pub fn memory_answer(
    request: &MemoryRequest,
    catalog: &Catalog,
) -> Result<MemoryEstimate, ApiError> {
    let resolved = request.resolve(catalog)?;
    let mut answer = memory::estimate(&resolved.plan, resolved.gpus);
    lead_with(resolved.defaulted, &mut answer.assumptions);
    Ok(answer)
}

/// The time estimate of a request (HTTP and CLI).
pub fn time_answer(request: &TimeRequest, catalog: &Catalog) -> Result<TimeEstimate, ApiError> {
    let resolved = request.resolve(catalog)?;
    let mut answer = time::estimate(&resolved.plan)?;
    lead_with(resolved.defaulted, &mut answer.assumptions);
    Ok(answer)
}

/// The cost estimate of a request against the current book (HTTP and CLI).
pub fn cost_answer(
    request: &CostRequest,
    catalog: &Catalog,
    pricing: &Pricing,
    now: jiff::Timestamp,
) -> Result<CostEstimate, ApiError> {
    let resolved = request.resolve(catalog, &pricing.fx, now)?;
    let book = pricing.book.load();
    let mut answer = cost::estimate(&resolved.plan, &book);
    answer.time = resolved.time;
    lead_with(resolved.defaulted, &mut answer.assumptions);
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
        PostProblems,
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
/// `field=per_gpu.total_gib` for one bare value. Both forms go through one deserialiser.
#[utoipa::path(
    get,
    path = "/v1/estimates/memory",
    operation_id = "estimate_memory_get",
    tag = "estimates",
    params(RenderQuery),
    responses(
        (status = 200, description = "The estimate", body = MemoryEstimate, example = json!({"per_gpu": {"total_gib": 31.996}})),
        GetProblems,
    )
)]
pub async fn memory_get(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (value, render) = query::to_json(request.query_string(), MEMORY_TABLES)?;
    let body: MemoryRequest = from_json_value(value)?;
    let answer = memory_answer(&body, &state.catalog)?;
    render::respond(&request, &render, &answer, "fits")
}

/// Estimate training time.
///
/// FLOPs per token by method (full `6N`, PEFT `4N`, plus attention; recomputation as
/// extra hardware work), throughput from a calibrated utilisation table by GPU class,
/// model size and method, the communication compute does not hide, the pipeline bubble,
/// CPU offload and expected restarts: tokens/s, MFU and wall hours with a range.
#[utoipa::path(
    post,
    path = "/v1/estimates/time",
    operation_id = "estimate_time",
    tag = "estimates",
    params(RenderQuery),
    request_body(content = TimeRequest, description = "The memory inputs plus `workload` (required), and optionally `mfu`, `nodes`, `gradient_accumulation_steps`.",
        examples(
            ("lora_7b_two_a100" = (summary = "7B LoRA, 200M tokens on two A100 80GB", value = json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb", "parallelism": {"gpus": 2}, "workload": {"tokens": 2.0e8}}))),
            ("full_8b_samples" = (summary = "Llama-3.1-8B full fine-tune, 100k samples × 512 tokens × 3 epochs on 8 H100", value = json!({"model": "llama-3.1-8b", "gpu": "h100-80gb", "parallelism": {"gpus": 8, "zero_stage": 3}, "gradient_checkpointing": true, "sequence_length": 512, "micro_batch_size": 8, "workload": {"samples": 100000, "tokens_per_sample": 512, "epochs": 3}})))
        )),
    responses(
        (status = 200, description = "The estimate (JSON; CSV with `format=csv`; one value with `format=text&field=wall_hours.expected`)", body = TimeEstimate,
            example = json!({"total_flops": 5.4e18, "flops_per_token": 2.7e10, "hardware_flops_per_token": 2.7e10, "tokens": 2.0e8, "tokens_per_second": 8000.0, "tokens_per_second_per_gpu": 4000.0, "mfu": 0.35, "hardware_utilization": 0.6, "peak_tflops_per_gpu": 312.0, "wall_hours": {"low": 5.2, "expected": 6.9, "high": 9.4}, "gpu_hours": 13.9, "tokens_per_step": 4096.0, "optimizer_steps": 48828.0, "breakdown": {"compute_hours": 6.9, "communication_hours": 0.0, "pipeline_bubble_hours": 0.0, "offload_hours": 0.0, "restart_hours": 0.0}, "assumptions": ["precision: amp_bf16 (default)"], "warnings": []})),
        PostProblems,
    )
)]
pub async fn time_post(
    request: HttpRequest,
    state: web::Data<AppState>,
    render: web::Query<RenderQuery>,
    body: JsonBody<serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    let answer = time_answer(&TimeRequest::from_value(body.0)?, &state.catalog)?;
    render::respond(&request, &render, &answer, "")
}

/// Estimate training time (query-string form).
///
/// The same estimate as `POST /v1/estimates/time` from a plain URL: the memory keys plus
/// `tokens` (or `samples`, `tokens_per_sample`, `epochs`), `mfu`, `nodes`. Add
/// `format=csv`, or `format=text&field=wall_hours.expected` for one bare value.
#[utoipa::path(
    get,
    path = "/v1/estimates/time",
    operation_id = "estimate_time_get",
    tag = "estimates",
    params(RenderQuery),
    responses(
        (status = 200, description = "The estimate", body = TimeEstimate, example = json!({"wall_hours": {"low": 5.2, "expected": 6.9, "high": 9.4}})),
        GetProblems,
    )
)]
pub async fn time_get(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (value, render) = query::to_json(request.query_string(), TIME_TABLES)?;
    let answer = time_answer(&TimeRequest::from_value(value)?, &state.catalog)?;
    render::respond(&request, &render, &answer, "")
}

/// Estimate cost across clouds and price types.
///
/// Prices the job's hours (from a time estimate, or `hours` given) on every matching row
/// of the price book and every custom quote: on demand, spot with interruption rework and
/// the Young/Daly checkpoint interval, and reserved; whole instances, converted to one
/// currency, each with its date and source. Optionally the total cost of owning the
/// hardware and its break-even hours against each option.
#[utoipa::path(
    post,
    path = "/v1/estimates/cost",
    operation_id = "estimate_cost",
    tag = "estimates",
    params(RenderQuery),
    request_body(content = CostRequest, description = "A time request (or `hours` with `gpu` and `parallelism`) plus `pricing`, `spot` and `self_build`.",
        examples(
            ("seed_custom_quote" = (summary = "The seed article: ¥200/h for 4× A100 80GB, 50 hours, and a ¥320,000 server", value = json!({"hours": 50, "gpu": "a100-80gb", "parallelism": {"gpus": 4}, "pricing": {"providers": [], "currency": "CNY", "custom_quotes": [{"name": "negotiated 4×A100", "gpu": "a100-80gb", "gpus": 4, "price_per_instance_hour": 200}, {"name": "spot 4×A100", "gpu": "a100-80gb", "gpus": 4, "price_per_instance_hour": 40, "price_type": "spot"}]}, "spot": {"interruptions_per_hour": 0}, "self_build": {"hardware_cost": 320000, "power_kw": 0, "ops_cost_per_month": 0}}))),
            ("lora_7b_clouds" = (summary = "7B LoRA, 200M tokens on two A100 80GB, every cloud", value = json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb", "parallelism": {"gpus": 2}, "workload": {"tokens": 2.0e8}, "pricing": {"price_types": ["on_demand", "spot"]}})))
        )),
    responses(
        (status = 200, description = "Options cheapest first (JSON; CSV rows per option with `format=csv`; one value with `format=text&field=options.0.cost`)", body = CostEstimate,
            example = json!({"gpu": "a100-80gb", "gpus": 4, "hours": 50.0, "currency": "CNY", "options": [{"provider": "custom", "region": "custom", "sku": "negotiated 4×A100", "gpu": "a100-80gb", "price_type": "on_demand", "gpus_per_instance": 4, "instances": 1, "gpus_rented": 4, "price_per_hour": 200.0, "price_per_gpu_hour": 50.0, "hours": 50.0, "rework_hours": 0.0, "cost": 10000.0, "currency": "CNY", "native_price_per_instance_hour": 200.0, "native_currency": "CNY", "as_of": null, "age_hours": null, "source": "custom quote in the request", "source_kind": "Q", "spot": null, "notes": []}], "cheapest": {}, "self_build": null, "fx": {"cny_per_usd": 7.2, "as_of": "2026-09", "source": "configured"}, "prices_source": {"kind": "embedded_snapshot", "snapshot_id": null, "loaded_at": "2026-11-29T00:00:00Z", "rows": 93, "oldest_as_of": "2024-01", "newest_as_of": "2026-09-10"}, "time": null, "assumptions": [], "warnings": []})),
        PostProblems,
    )
)]
pub async fn cost_post(
    request: HttpRequest,
    state: web::Data<AppState>,
    render: web::Query<RenderQuery>,
    body: JsonBody<serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    let request_body = CostRequest::from_value(body.0)?;
    let answer = cost_answer(
        &request_body,
        &state.catalog,
        &state.pricing,
        jiff::Timestamp::now(),
    )?;
    render::respond(&request, &render, &answer, "options")
}

/// Estimate cost across clouds and price types (query-string form).
///
/// The same estimate as `POST /v1/estimates/cost` from a plain URL: the time keys (or
/// `hours`, `gpu`, `gpus`), `providers`, `regions`, `price_types`, `currency`, one custom
/// quote through `quote_*`, spot and self-build keys. `format=csv` gives one row per
/// option; `format=text&field=cheapest.on_demand.cost` one bare value.
#[utoipa::path(
    get,
    path = "/v1/estimates/cost",
    operation_id = "estimate_cost_get",
    tag = "estimates",
    params(RenderQuery),
    responses(
        (status = 200, description = "The estimate", body = CostEstimate, example = json!({"currency": "CNY", "options": [{"provider": "custom", "cost": 10000.0}]})),
        GetProblems,
    )
)]
pub async fn cost_get(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (value, render) = query::to_json(request.query_string(), COST_TABLES)?;
    let answer = cost_answer(
        &CostRequest::from_value(value)?,
        &state.catalog,
        &state.pricing,
        jiff::Timestamp::now(),
    )?;
    render::respond(&request, &render, &answer, "options")
}

/// The recommendation for a request (HTTP and CLI).
pub fn recommendation_answer(
    request: &RecommendationRequest,
    catalog: &Catalog,
    pricing: &Pricing,
    now: jiff::Timestamp,
) -> Result<Recommendation, ApiError> {
    let book = pricing.book.load();
    let (inputs, defaulted) = request.resolve(catalog, &book, &pricing.fx, now)?;
    let mut answer = recommend::recommend(&inputs, &book);
    lead_with(defaulted, &mut answer.assumptions);
    Ok(answer)
}

/// Recommend a fine-tuning strategy.
///
/// The decision tree of the seed article, executed: method from data size, quality and
/// budget; for each GPU the smallest fleet that fits (and larger ones for deadlines),
/// timed and priced on the live book; then the deployment (spot for short work, reserved
/// or self-build past the break-even, hybrid when both apply). The answer lists every
/// node with the value seen and the branch taken, the chosen plan, the alternatives that
/// meet the deadline cheapest first, and why the others were rejected.
#[utoipa::path(
    post,
    path = "/v1/recommendations",
    operation_id = "recommend_strategy",
    tag = "estimates",
    params(RenderQuery),
    request_body(content = RecommendationRequest, description = "Model, data, quality, deadline, budget and how long the project lasts.",
        examples(
            ("full_7b" = (summary = "7B, 200k samples, maximum quality", value = json!({"model": "llama-2-7b", "dataset": {"samples": 200000, "tokens_per_sample": 512, "epochs": 3}, "quality": "max"}))),
            ("lora_budget" = (summary = "7B, 20k samples, balanced, one-week experiment", value = json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "quality": "balanced", "project_months": 0.25})))
        )),
    responses(
        (status = 200, description = "The recommendation (JSON; CSV rows per alternative with `format=csv`)", body = Recommendation,
            example = json!({"path": [{"node": "method", "value": "200000 samples, quality max, task general", "branch": "full fine-tuning: over 100k samples and maximum quality"}], "method": "full", "deployment": "spot", "plan": {"method": "full", "gpu": "a100-80gb", "gpus": 4, "zero_stage": 3, "provider": "lambda", "region": "global", "sku": "gpu_8x_a100_80gb_sxm4", "price_type": "spot", "checkpoint_interval_minutes": 42.0, "memory_per_gpu_gib": 41.2, "hours": 30.5, "cost": 420.0, "project_cost": 420.0, "currency": "USD"}, "alternatives": [], "rejected": [{"gpu": "t4-16gb", "gpus": 64, "reason": "does not fit on up to 64 GPUs"}], "assumptions": [], "warnings": []})),
        PostProblems,
    )
)]
pub async fn recommend_post(
    request: HttpRequest,
    state: web::Data<AppState>,
    render: web::Query<RenderQuery>,
    body: JsonBody<RecommendationRequest>,
) -> Result<HttpResponse, ApiError> {
    let answer = recommendation_answer(
        &body.0,
        &state.catalog,
        &state.pricing,
        jiff::Timestamp::now(),
    )?;
    render::respond(&request, &render, &answer, "alternatives")
}

/// Recommend a fine-tuning strategy (query-string form).
///
/// The same recommendation as `POST /v1/recommendations` from a plain URL: `model`,
/// `samples`, `quality`, `deadline_hours`, `budget`, `currency`, `project_months`, ….
#[utoipa::path(
    get,
    path = "/v1/recommendations",
    operation_id = "recommend_strategy_get",
    tag = "estimates",
    params(RenderQuery),
    responses(
        (status = 200, description = "The recommendation", body = Recommendation, example = json!({"method": "lora", "deployment": "spot"})),
        GetProblems,
    )
)]
pub async fn recommend_get(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (value, render) = query::to_json(request.query_string(), RECOMMEND_TABLES)?;
    let body: RecommendationRequest = from_json_value(value)?;
    let answer = recommendation_answer(
        &body,
        &state.catalog,
        &state.pricing,
        jiff::Timestamp::now(),
    )?;
    render::respond(&request, &render, &answer, "alternatives")
}
