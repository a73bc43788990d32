//! Malformed requests: each gets the right 4xx problem+json naming what is wrong, never a
//! 5xx.

use actix_web::test::TestRequest;
use serde_json::{Value, json};

use crate::support::{BODY_LIMIT, Reply, call};

const MEMORY: &str = "/v1/estimates/memory";

enum Body {
    Json(Value),
    Raw(&'static str, String),
}

/// `(what, request body, expected status, text the problem must contain)`.
fn cases() -> Vec<(&'static str, Body, u16, &'static str)> {
    use Body::*;
    let m = |extra: Value| {
        let mut body = json!({"model": "llama-2-7b"});
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        Json(body)
    };
    vec![
        (
            "broken JSON",
            Raw("application/json", "{\"model\": ".into()),
            400,
            "not valid JSON",
        ),
        (
            "not JSON at all",
            Raw("application/json", "model=llama".into()),
            400,
            "not valid JSON",
        ),
        (
            "form content type",
            Raw("application/x-www-form-urlencoded", "{}".into()),
            415,
            "application/json",
        ),
        (
            "xml content type",
            Raw("application/xml", "<model/>".into()),
            415,
            "application/json",
        ),
        (
            "huge body",
            Raw(
                "application/json",
                format!("{{\"model\": \"{}\"}}", "x".repeat(BODY_LIMIT + 10)),
            ),
            413,
            "limit",
        ),
        (
            "empty object",
            Json(json!({})),
            422,
            "missing field `model`",
        ),
        ("array body", Json(json!([1, 2])), 422, "\"pointer\":\"/0\""),
        (
            "unknown field",
            m(json!({"batch": 4})),
            422,
            "unknown field `batch`",
        ),
        (
            "unknown method",
            m(json!({"method": "dora"})),
            422,
            "expected one of `full`, `lora`",
        ),
        (
            "unknown precision",
            m(json!({"precision": "int4"})),
            422,
            "`amp_bf16`",
        ),
        (
            "unknown optimizer",
            m(json!({"optimizer": "adam"})),
            422,
            "`adamw_8bit`",
        ),
        (
            "unknown attention",
            m(json!({"attention": "xformers"})),
            422,
            "`flash`, `sdpa`, `eager`",
        ),
        (
            "unknown framework",
            m(json!({"framework": "jax"})),
            422,
            "`hf_trainer`",
        ),
        (
            "unknown optimization",
            m(json!({"optimizations": ["magic"]})),
            422,
            "`chunked_cross_entropy`",
        ),
        (
            "string batch",
            m(json!({"micro_batch_size": "four"})),
            422,
            "/micro_batch_size",
        ),
        (
            "negative batch",
            m(json!({"micro_batch_size": -1})),
            422,
            "/micro_batch_size",
        ),
        (
            "zero batch",
            m(json!({"micro_batch_size": 0})),
            422,
            "between 1 and",
        ),
        (
            "fractional batch",
            m(json!({"micro_batch_size": 1.5})),
            422,
            "/micro_batch_size",
        ),
        (
            "zero sequence",
            m(json!({"sequence_length": 0})),
            422,
            "/sequence_length",
        ),
        (
            "sequence above 10^7",
            m(json!({"sequence_length": 10_000_001u64})),
            422,
            "/sequence_length",
        ),
        (
            "zero GPUs",
            m(json!({"parallelism": {"gpus": 0}})),
            422,
            "/parallelism/gpus",
        ),
        (
            "fleet above the cap",
            m(json!({"parallelism": {"gpus": 100_000}})),
            422,
            "/parallelism/gpus",
        ),
        (
            "ZeRO stage 4",
            m(json!({"parallelism": {"zero_stage": 4}})),
            422,
            "must be one of 0, 1, 2, 3",
        ),
        (
            "GPUs not a multiple of TP",
            m(json!({"parallelism": {"gpus": 3, "tensor_parallel": 2}})),
            422,
            "multiple of tensor_parallel",
        ),
        (
            "parameter offload below stage 3",
            m(json!({"parallelism": {"zero_stage": 2, "offload_parameters": true}})),
            422,
            "zero_stage 3",
        ),
        (
            "unknown parallelism field",
            m(json!({"parallelism": {"gpu": 2}})),
            422,
            "/parallelism/gpu",
        ),
        (
            "LoRA rank 0",
            m(json!({"method": "lora", "lora": {"rank": 0}})),
            422,
            "/lora/rank",
        ),
        (
            "LoRA settings without LoRA",
            m(json!({"lora": {"rank": 8}})),
            422,
            "only for method lora",
        ),
        (
            "unknown LoRA target",
            m(json!({"method": "lora", "lora": {"targets": ["qkv"]}})),
            422,
            "/lora/targets",
        ),
        (
            "empty LoRA targets",
            m(json!({"method": "lora", "lora": {"targets": []}})),
            422,
            "at least one",
        ),
        (
            "double quantisation on LoRA",
            m(json!({"method": "lora", "lora": {"double_quantization": true}})),
            422,
            "only for method qlora",
        ),
        (
            "virtual tokens on full",
            m(json!({"virtual_tokens": 20})),
            422,
            "prefix_tuning",
        ),
        (
            "10^15 parameters",
            Json(json!({"model": {"parameters": 1e15}})),
            422,
            "/model/parameters",
        ),
        (
            "negative parameters",
            Json(json!({"model": {"parameters": -7e9}})),
            422,
            "/model/parameters",
        ),
        (
            "model as a number",
            Json(json!({"model": 7})),
            422,
            "catalog id string",
        ),
        (
            "two model forms",
            Json(json!({"model": {"parameters": 7e9, "hf_config": {}}})),
            422,
            "exactly one",
        ),
        (
            "unknown model form",
            Json(json!({"model": {"repo": "meta-llama/Llama-2-7b"}})),
            422,
            "unknown model form",
        ),
        (
            "architecture missing a field",
            Json(json!({"model": {"architecture": {"layers": 2}}})),
            422,
            "missing field",
        ),
        (
            "architecture field of the wrong type",
            Json(
                json!({"model": {"architecture": {"layers": "many", "hidden": 64, "heads": 8, "kv_heads": 8, "intermediate": 128, "vocab": 100, "tied_embeddings": true}}}),
            ),
            422,
            "/model/architecture/layers",
        ),
        (
            "architecture of 4·10^14 parameters",
            Json(
                json!({"model": {"architecture": {"layers": 1000, "hidden": 131072, "heads": 128, "kv_heads": 8, "intermediate": 1048576, "vocab": 100, "tied_embeddings": true}}}),
            ),
            422,
            "above the 1e13 this service estimates",
        ),
        (
            "a plan past 2^63 bytes per GPU",
            Json(
                json!({"model": "llama-2-7b", "sequence_length": 10_000_000, "micro_batch_size": 65536, "attention": "eager"}),
            ),
            422,
            "lower micro_batch_size or sequence_length",
        ),
        (
            "architecture with bad GQA",
            Json(
                json!({"model": {"architecture": {"layers": 2, "hidden": 64, "heads": 8, "kv_heads": 3, "intermediate": 128, "vocab": 100, "tied_embeddings": true}}}),
            ),
            422,
            "/model/architecture/kv_heads",
        ),
        (
            "HF config of an unknown family",
            Json(json!({"model": {"hf_config": {"model_type": "rwkv"}}})),
            422,
            "supported: llama",
        ),
        (
            "HF config missing sizes",
            Json(json!({"model": {"hf_config": {"model_type": "llama", "hidden_size": 4096}}})),
            422,
            "/model/hf_config/num_hidden_layers",
        ),
        (
            "HF config with a negative size",
            Json(
                json!({"model": {"hf_config": {"model_type": "mistral", "num_hidden_layers": -1}}}),
            ),
            422,
            "positive integer",
        ),
        (
            "unknown model id",
            Json(json!({"model": "lama-3-8b"})),
            404,
            "llama-3-8b",
        ),
        (
            "unknown GPU id",
            m(json!({"gpu": "a100-80"})),
            404,
            "a100-80gb",
        ),
        (
            "max sample above the sequence",
            m(json!({"max_sample_tokens": 5000, "sequence_length": 4096})),
            422,
            "/max_sample_tokens",
        ),
    ]
}

/// The reply is the expected problem+json, naming what is wrong.
fn assert_problem(what: &str, reply: &Reply, status: u16, needle: &str) {
    assert_eq!(reply.status, status, "{what}: {}", reply.text());
    assert_eq!(reply.content_type, "application/problem+json", "{what}");
    let problem = reply.json();
    assert_eq!(problem["status"], status, "{what}");
    assert!(
        problem["type"]
            .as_str()
            .unwrap()
            .starts_with("urn:trainplan:problem:"),
        "{what}"
    );
    assert!(
        !problem["request_id"].as_str().unwrap().is_empty(),
        "{what}"
    );
    assert!(
        reply.text().contains(needle),
        "{what}: {needle:?} not in {}",
        reply.text()
    );
}

async fn post_each(path: &str, cases: Vec<(&'static str, Body, u16, &'static str)>) {
    for (what, body, status, needle) in cases {
        let request = match body {
            Body::Json(value) => TestRequest::post()
                .uri(path)
                .insert_header(("content-type", "application/json"))
                .set_payload(value.to_string()),
            Body::Raw(content_type, text) => TestRequest::post()
                .uri(path)
                .insert_header(("content-type", content_type))
                .set_payload(text),
        };
        assert_problem(what, &call(request).await, status, needle);
    }
}

#[actix_web::test]
async fn malformed_requests_get_problem_json_not_5xx() {
    let cases = cases();
    assert!(cases.len() >= 30);
    post_each(MEMORY, cases).await;
}

/// A time request: 7B LoRA on two A100 80GB, with `extra` merged in.
fn time_body(extra: Value) -> Body {
    let mut body = json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb",
        "parallelism": {"gpus": 2}, "workload": {"tokens": 2.0e8}});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    Body::Json(body)
}

#[actix_web::test]
async fn bad_time_requests() {
    use Body::*;
    let cases = vec![
        (
            "no workload",
            Json(json!({"model": "llama-2-7b"})),
            422,
            "/workload",
        ),
        (
            "tokens and samples",
            time_body(json!({"workload": {"tokens": 1e9, "samples": 10}})),
            422,
            "exactly one",
        ),
        (
            "negative tokens",
            time_body(json!({"workload": {"tokens": -5}})),
            422,
            "/workload/tokens",
        ),
        (
            "zero epochs",
            time_body(json!({"workload": {"samples": 1000, "epochs": 0}})),
            422,
            "/workload/epochs",
        ),
        (
            "sample longer than the sequence",
            time_body(json!({"workload": {"samples": 1000, "tokens_per_sample": 9000}})),
            422,
            "/workload/tokens_per_sample",
        ),
        (
            "epochs with tokens",
            time_body(json!({"workload": {"tokens": 1e9, "epochs": 2}})),
            422,
            "/workload/epochs",
        ),
        (
            "unknown workload field",
            time_body(json!({"workload": {"tokenz": 1e9}})),
            422,
            "tokenz",
        ),
        ("mfu over 1", time_body(json!({"mfu": 1.5})), 422, "/mfu"),
        ("mfu zero", time_body(json!({"mfu": 0})), 422, "/mfu"),
        (
            "nodes not dividing",
            time_body(json!({"nodes": 3, "parallelism": {"gpus": 4}})),
            422,
            "/nodes",
        ),
        (
            "zero accumulation",
            time_body(json!({"gradient_accumulation_steps": 0})),
            422,
            "/gradient_accumulation_steps",
        ),
        (
            "unknown field",
            time_body(json!({"hourz": 3})),
            422,
            "hourz",
        ),
        (
            "bad memory field too",
            time_body(json!({"mfu": 2, "micro_batch_size": 0})),
            422,
            "/micro_batch_size",
        ),
        (
            "unknown gpu",
            time_body(json!({"gpu": "a100-81gb"})),
            404,
            "a100-80gb",
        ),
        ("array body", Json(json!([1, 2])), 422, "JSON object"),
        (
            "broken JSON",
            Raw("application/json", "{\"model\": ".into()),
            400,
            "not valid JSON",
        ),
    ];
    post_each("/v1/estimates/time", cases).await;
}

/// A cost request on explicit hours, with `extra` merged in.
fn cost_body(extra: Value) -> Body {
    let mut body = json!({"hours": 50, "gpu": "a100-80gb", "parallelism": {"gpus": 4}});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    Body::Json(body)
}

#[actix_web::test]
async fn bad_cost_requests() {
    let quote = |q: Value| json!({"pricing": {"custom_quotes": [q]}});
    let cases = vec![
        (
            "unknown currency",
            cost_body(json!({"pricing": {"currency": "EUR"}})),
            422,
            "/pricing/currency",
        ),
        (
            "negative hours",
            cost_body(json!({"hours": -3})),
            422,
            "/hours",
        ),
        ("zero hours", cost_body(json!({"hours": 0})), 422, "/hours"),
        (
            "hours and a model",
            cost_body(json!({"model": "llama-2-7b"})),
            422,
            "with hours the plan is only gpu and parallelism",
        ),
        (
            "quote without a GPU count",
            cost_body(quote(
                json!({"name": "q", "gpu": "a100-80gb", "price_per_gpu_hour": 2.0}),
            )),
            422,
            "/pricing/custom_quotes/0/gpus",
        ),
        (
            "negative quote price",
            cost_body(quote(
                json!({"name": "q", "gpu": "a100-80gb", "gpus": 8, "price_per_instance_hour": -1.0}),
            )),
            422,
            "/pricing/custom_quotes/0/price_per_instance_hour",
        ),
        (
            "quote with both prices",
            cost_body(quote(
                json!({"name": "q", "gpu": "a100-80gb", "gpus": 8, "price_per_instance_hour": 8.0, "price_per_gpu_hour": 1.0}),
            )),
            422,
            "exactly one",
        ),
        (
            "quote for an unknown GPU",
            cost_body(quote(
                json!({"name": "q", "gpu": "a100-8gb", "gpus": 8, "price_per_gpu_hour": 1.0}),
            )),
            422,
            "/pricing/custom_quotes/0/gpu",
        ),
        (
            "quote with a bad date",
            cost_body(quote(
                json!({"name": "q", "gpu": "a100-80gb", "gpus": 8, "price_per_gpu_hour": 1.0, "as_of": "last week"}),
            )),
            422,
            "/pricing/custom_quotes/0/as_of",
        ),
        (
            "unknown price type",
            cost_body(json!({"pricing": {"price_types": ["reserved_5y"]}})),
            422,
            "/pricing/price_types/0",
        ),
        (
            "negative interruptions",
            cost_body(json!({"spot": {"interruptions_per_hour": -1}})),
            422,
            "/spot/interruptions_per_hour",
        ),
        (
            "zero checkpoint interval",
            cost_body(json!({"spot": {"checkpoint_interval_minutes": 0}})),
            422,
            "/spot/checkpoint_interval_minutes",
        ),
        (
            "negative hardware cost",
            cost_body(json!({"self_build": {"hardware_cost": -1}})),
            422,
            "/self_build/hardware_cost",
        ),
        (
            "PUE under 1",
            cost_body(json!({"self_build": {"hardware_cost": 1000, "pue": 0.5}})),
            422,
            "/self_build/pue",
        ),
        (
            "self-build without hardware cost",
            cost_body(json!({"self_build": {"power_kw": 3}})),
            422,
            "hardware_cost",
        ),
        (
            "unknown pricing field",
            cost_body(json!({"pricing": {"provider": "aws"}})),
            422,
            "provider",
        ),
        (
            "zero GPUs",
            cost_body(json!({"parallelism": {"gpus": 0}})),
            422,
            "/parallelism/gpus",
        ),
        (
            "time plan without workload",
            Body::Json(json!({"model": "llama-2-7b"})),
            422,
            "/workload",
        ),
    ];
    post_each("/v1/estimates/cost", cases).await;
}

#[actix_web::test]
async fn bad_query_strings_and_methods_and_routes() {
    let cases = [
        (
            "/v1/estimates/memory?model=llama-2-7b&gpuz=2",
            422,
            "/query/gpuz",
        ),
        (
            "/v1/estimates/memory?model=llama-2-7b&gpus=two",
            422,
            "/parallelism/gpus",
        ),
        (
            "/v1/estimates/memory?model=llama-2-7b&format=xml",
            422,
            "json, csv, text",
        ),
        (
            "/v1/estimates/memory?model=llama-2-7b&format=text",
            422,
            "needs field",
        ),
        (
            "/v1/estimates/memory?model=llama-2-7b&format=text&field=per_gpu.nothing",
            422,
            "no value",
        ),
        ("/v1/estimates/memory", 422, "missing field `model`"),
        ("/v1/gpus?min_memory_gib=lots", 422, "/query"),
        ("/v1/models?colour=red", 422, "/query"),
        ("/v2/estimates", 404, "no route"),
        ("/v1/estimates/time?model=llama-2-7b", 422, "/workload"),
        (
            "/v1/estimates/time?model=llama-2-7b&tokens=lots",
            422,
            "/workload/tokens",
        ),
        (
            "/v1/estimates/cost?hours=5&currency=EUR",
            422,
            "/pricing/currency",
        ),
        ("/v1/estimates/cost?hours=-5", 422, "/hours"),
        (
            "/v1/estimates/cost?hours=5&quote_gpu=a100-80gb&quote_price_per_gpu_hour=2",
            422,
            "/pricing/custom_quotes/0/gpus",
        ),
        ("/v1/prices?gpu=a100-81gb", 404, "a100-80gb"),
        ("/v1/prices?price_type=cheap", 422, "/query/price_type"),
        ("/v1/prices?currency=EUR", 422, "/query"),
        ("/v1/prices?max_age_hours=-1", 422, "/query/max_age_hours"),
        ("/v1/prices?colour=red", 422, "/query"),
    ];
    for (uri, status, needle) in cases {
        assert_problem(
            uri,
            &call(TestRequest::get().uri(uri)).await,
            status,
            needle,
        );
    }
    let reply = call(TestRequest::delete().uri(MEMORY)).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.headers.get("allow").unwrap(), "POST, GET");
    assert_eq!(reply.content_type, "application/problem+json");
}
