//! Every bound the OpenAPI document states for a request field is the bound the
//! validator enforces: a value on the bound is accepted and one past it is refused with
//! a problem naming the field. Client generators and the contract fuzzer read these
//! bounds, so a bound that drifts from the validator misleads both.

use serde_json::{Value, json};

use crate::support::post_json;

const MEMORY: &str = "/v1/estimates/memory";
const TIME: &str = "/v1/estimates/time";
const COST: &str = "/v1/estimates/cost";
const RECOMMEND: &str = "/v1/recommendations";
const GATE: &str = "/v1/gates/budget";

/// Request schemas whose bounded properties must all be probed below.
const REQUEST_SCHEMAS: [&str; 15] = [
    "ModelInput",
    "ArchitectureInput",
    "LoraInput",
    "ParallelismInput",
    "MemoryRequest",
    "WorkloadInput",
    "TimeInputs",
    "CostInputs",
    "CustomQuoteInput",
    "SpotInputs",
    "SelfBuildInputs",
    "DatasetInput",
    "BudgetInput",
    "RecommendationRequest",
    "Limits",
];

/// Maximums the model lowers (a LoRA rank is at most the model's hidden size): for these
/// only a value past the stated maximum is probed.
const CEILINGS: [(&str, &str); 4] = [
    ("LoraInput", "rank"),
    ("ParallelismInput", "pipeline_parallel"),
    ("MemoryRequest", "adapter_bottleneck"),
    ("MemoryRequest", "trainable_layers"),
];

/// One bounded field: its schema and property, the operation, a request on which every
/// other field is valid, and where the field goes in it.
struct Case {
    schema: &'static str,
    property: &'static str,
    path: &'static str,
    base: Value,
    pointer: String,
}

/// A case per property, each at `{prefix}/{property}` in the same base request.
fn each(
    schema: &'static str,
    path: &'static str,
    base: &Value,
    prefix: &str,
    properties: &[&'static str],
) -> Vec<Case> {
    properties
        .iter()
        .map(|&property| Case {
            schema,
            property,
            path,
            base: base.clone(),
            pointer: format!("{prefix}/{property}"),
        })
        .collect()
}

/// `base` with the fields of `extra` added.
fn with(base: Value, extra: Value) -> Value {
    let mut base = base;
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

fn cases() -> Vec<Case> {
    let memory = json!({"model": "llama-2-7b", "gpu": "a100-80gb"});
    let dense = json!({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
        "intermediate": 11008, "vocab": 32000, "tied_embeddings": false});
    let moe = with(dense.clone(), json!({"experts": 8, "experts_per_token": 2}));
    let architecture = |arch: Value| json!({"model": {"architecture": arch}, "gpu": "a100-80gb"});
    let on_memory = |extra: Value| with(memory.clone(), extra);
    let time = |workload: Value| on_memory(json!({"workload": workload}));
    let hours = json!({"hours": 10, "gpu": "a100-80gb"});
    let on_hours = |extra: Value| with(hours.clone(), extra);
    let quote = |price: Value| {
        let quote = with(json!({"gpu": "a100-80gb", "gpus": 8}), price);
        on_hours(json!({"pricing": {"custom_quotes": [quote]}}))
    };
    let recommend = json!({"model": "llama-2-7b", "dataset": {"samples": 1000}});
    let long = json!({"sequence_length": 10_000_000});

    [
        each(
            "ModelInput",
            MEMORY,
            &json!({"model": {"parameters": 7e9}}),
            "/model",
            &["parameters"],
        ),
        each(
            "ArchitectureInput",
            MEMORY,
            &architecture(dense),
            "/model/architecture",
            &[
                "layers",
                "hidden",
                "heads",
                "kv_heads",
                "intermediate",
                "vocab",
                "head_dim",
            ],
        ),
        each(
            "ArchitectureInput",
            MEMORY,
            &architecture(moe),
            "/model/architecture",
            &[
                "experts",
                "experts_per_token",
                "expert_intermediate",
                "shared_experts",
            ],
        ),
        each(
            "LoraInput",
            MEMORY,
            &on_memory(json!({"method": "lora", "lora": {}})),
            "/lora",
            &["rank", "alpha"],
        ),
        // 64 heads: the largest tensor-parallel degree.
        each(
            "ParallelismInput",
            MEMORY,
            &json!({"model": "llama-2-70b", "gpu": "a100-80gb"}),
            "/parallelism",
            &["gpus", "zero_stage", "tensor_parallel", "pipeline_parallel"],
        ),
        each(
            "MemoryRequest",
            MEMORY,
            &memory,
            "",
            &["micro_batch_size", "sequence_length"],
        ),
        each(
            "MemoryRequest",
            MEMORY,
            &on_memory(long.clone()),
            "",
            &["max_sample_tokens"],
        ),
        each(
            "MemoryRequest",
            MEMORY,
            &on_memory(json!({"method": "prefix_tuning"})),
            "",
            &["virtual_tokens"],
        ),
        each(
            "MemoryRequest",
            MEMORY,
            &on_memory(json!({"method": "adapter"})),
            "",
            &["adapter_bottleneck"],
        ),
        each(
            "MemoryRequest",
            MEMORY,
            &on_memory(json!({"method": "freeze"})),
            "",
            &["trainable_layers"],
        ),
        each(
            "WorkloadInput",
            TIME,
            &time(json!({"tokens": 1e9})),
            "/workload",
            &["tokens"],
        ),
        each(
            "WorkloadInput",
            TIME,
            &time(json!({"samples": 1000, "tokens_per_sample": 512})),
            "/workload",
            &["samples", "epochs"],
        ),
        each(
            "WorkloadInput",
            TIME,
            &with(time(json!({"samples": 1})), long),
            "/workload",
            &["tokens_per_sample"],
        ),
        // 4096 GPUs: up to 4096 nodes.
        each(
            "TimeInputs",
            TIME,
            &with(
                time(json!({"tokens": 1e9})),
                json!({"parallelism": {"gpus": 4096}}),
            ),
            "",
            &["mfu", "nodes", "gradient_accumulation_steps"],
        ),
        each("CostInputs", COST, &hours, "", &["hours"]),
        // A fleet priced by hours has no model: its layout is checked all the same.
        each(
            "ParallelismInput",
            COST,
            &hours,
            "/parallelism",
            &["gpus", "zero_stage", "tensor_parallel", "pipeline_parallel"],
        ),
        each(
            "CustomQuoteInput",
            COST,
            &quote(json!({"price_per_gpu_hour": 2.0})),
            "/pricing/custom_quotes/0",
            &["gpus", "price_per_gpu_hour"],
        ),
        each(
            "CustomQuoteInput",
            COST,
            &quote(json!({"price_per_instance_hour": 16.0})),
            "/pricing/custom_quotes/0",
            &["price_per_instance_hour"],
        ),
        each(
            "SpotInputs",
            COST,
            &on_hours(json!({"spot": {}})),
            "/spot",
            &[
                "checkpoint_interval_minutes",
                "checkpoint_write_minutes",
                "restart_minutes",
                "interruptions_per_hour",
            ],
        ),
        each(
            "SelfBuildInputs",
            COST,
            &on_hours(json!({"self_build": {"hardware_cost": 300000}})),
            "/self_build",
            &[
                "hardware_cost",
                "power_kw",
                "electricity_price_per_kwh",
                "pue",
                "lifetime_months",
                "ops_cost_per_month",
            ],
        ),
        each(
            "DatasetInput",
            RECOMMEND,
            &recommend,
            "/dataset",
            &["samples", "tokens_per_sample", "epochs"],
        ),
        each(
            "BudgetInput",
            RECOMMEND,
            &with(recommend.clone(), json!({"budget": {"amount": 1000}})),
            "/budget",
            &["amount"],
        ),
        each(
            "RecommendationRequest",
            RECOMMEND,
            &recommend,
            "",
            &[
                "deadline_hours",
                "project_months",
                "expected_runs",
                "hardware_cost_per_gpu",
                "ops_cost_per_month",
            ],
        ),
        each(
            "Limits",
            GATE,
            &json!({"plan": hours, "limits": {}}),
            "/limits",
            &[
                "max_cost",
                "max_hours",
                "max_price_age_hours",
                "min_headroom_fraction",
            ],
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The properties of a component schema and of its `oneOf` alternatives (the model's
/// forms).
fn properties<'s>(spec: &'s Value, schema: &str) -> impl Iterator<Item = (&'s String, &'s Value)> {
    let component = &spec["components"]["schemas"][schema];
    assert!(component.is_object(), "no component schema {schema}");
    std::iter::once(component)
        .chain(component["oneOf"].as_array().into_iter().flatten())
        .filter_map(|object| object["properties"].as_object())
        .flatten()
}

/// The request with `value` at `pointer`, objects on the way created (array items must
/// be in the base).
fn set(base: &Value, pointer: &str, value: Value) -> Value {
    let mut request = base.clone();
    let mut node = &mut request;
    for token in pointer.trim_start_matches('/').split('/') {
        node = match node {
            Value::Array(items) => &mut items[token.parse::<usize>().unwrap()],
            Value::Object(map) => map.entry(token).or_insert_with(|| json!({})),
            other => panic!("{pointer}: {other} is not a container"),
        };
    }
    *node = value;
    request
}

/// Whether the answer refuses the value at `pointer`: 422 with that field named.
async fn refused(path: &str, request: &Value, pointer: &str) -> bool {
    let reply = post_json(path, request).await;
    assert!(
        reply.status < 500,
        "{path} {request}: server error {}",
        reply.status
    );
    let body = reply.json();
    reply.status == 422
        && body["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["pointer"] == pointer)
}

/// A number just inside or outside a bound: integers step by one, other numbers by half
/// the bound's size (or by one from zero).
fn step(bound: f64, integer: bool, outward: f64) -> f64 {
    if integer || bound == 0.0 {
        bound + outward
    } else {
        bound * (1.0 + outward / 2.0)
    }
}

fn number(value: f64, integer: bool) -> Value {
    if integer {
        json!(value as i64)
    } else {
        json!(value)
    }
}

#[actix_web::test]
async fn every_stated_bound_is_the_enforced_one() {
    let spec: Value = serde_json::from_str(&trainplan::openapi::json()).unwrap();
    let cases = cases();

    // Every bounded property of the request schemas has a case.
    for schema in REQUEST_SCHEMAS {
        for (name, field) in properties(&spec, schema) {
            let bounded = ["minimum", "maximum", "exclusiveMinimum"]
                .iter()
                .any(|k| field.get(*k).is_some());
            assert!(
                !bounded
                    || cases
                        .iter()
                        .any(|c| c.schema == schema && c.property == name),
                "{schema}.{name} states a bound that no case probes"
            );
        }
    }

    for c in &cases {
        let field = properties(&spec, c.schema)
            .find_map(|(name, field)| (name == c.property).then_some(field))
            .unwrap_or_else(|| panic!("{}.{}: no such property", c.schema, c.property));
        let integer = field["type"]
            .as_array()
            .map_or(field["type"] == "integer", |t| {
                t.contains(&json!("integer"))
            });
        let label = format!("{}.{} at {}", c.schema, c.property, c.pointer);
        assert!(
            !refused(c.path, &c.base, &c.pointer).await,
            "{label}: the base request is refused"
        );
        // (value, whether it must be refused)
        let mut probes = Vec::new();
        if let Some(low) = field["minimum"].as_f64() {
            probes.push((low, false));
            probes.push((step(low, integer, -1.0), true));
        }
        if let Some(low) = field["exclusiveMinimum"].as_f64() {
            probes.push((low, true));
            probes.push((step(low, integer, 1.0), false));
        }
        if let Some(high) = field["maximum"].as_f64() {
            if !CEILINGS.contains(&(c.schema, c.property)) {
                probes.push((high, false));
            }
            probes.push((step(high, integer, 1.0), true));
        }
        assert!(!probes.is_empty(), "{label}: the spec states no bound");
        for (value, refuse) in probes {
            let request = set(&c.base, &c.pointer, number(value, integer));
            assert_eq!(
                refused(c.path, &request, &c.pointer).await,
                refuse,
                "{label} = {value}: expected {}",
                if refuse {
                    "a 422 naming it"
                } else {
                    "no error on it"
                }
            );
        }
    }
}
