//! The time request (design §2.4): the memory inputs plus the workload.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{MemoryRequest, from_json_value};
use crate::catalog::{Catalog, Gpu};
use crate::error::ApiError;
use crate::estimate::time::{PIPELINE_MICRO_BATCHES_PER_STAGE, TimePlan};
use crate::validation::{FieldError, Problems};

/// GPU a time or cost request runs on when it names none (the seed article's card).
pub const DEFAULT_GPU: &str = "a100-80gb";
/// Largest workload accepted: 10^16 tokens is 700× Llama 3's pre-training set.
const MAX_TOKENS: f64 = 1e16;

/// What the job trains on: a token count, or samples × tokens per sample × epochs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadInput {
    /// Tokens over the whole run (all epochs); give this or `samples`.
    #[schema(example = 2.0e9, minimum = 1, maximum = 1e16)]
    pub tokens: Option<f64>,
    #[schema(example = 100000, minimum = 1, maximum = 1e13)]
    pub samples: Option<f64>,
    /// Default: `sequence_length` (every sample full); at most `sequence_length`.
    #[schema(example = 512, minimum = 1, maximum = 10000000)]
    pub tokens_per_sample: Option<u64>,
    /// Default 1.
    #[schema(example = 3, minimum = 0.001, maximum = 10000)]
    pub epochs: Option<f64>,
}

/// The inputs a time estimate adds to the memory inputs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeInputs {
    /// Required for a time estimate.
    pub workload: Option<WorkloadInput>,
    /// Measured end-to-end model FLOPs utilisation (0–1); replaces the built-in table.
    #[schema(example = 0.45, minimum = 0.001, maximum = 1)]
    pub mfu: Option<f64>,
    /// Servers the GPUs are spread over (default: as few as the GPU's node size allows);
    /// divides `parallelism.gpus`.
    #[schema(example = 1, minimum = 1, maximum = 4096)]
    pub nodes: Option<u64>,
    /// Micro-batches per optimizer step on each data-parallel rank (default 1; with
    /// pipeline parallel, 4 per stage).
    #[schema(minimum = 1, maximum = 65536)]
    pub gradient_accumulation_steps: Option<u64>,
}

impl TimeInputs {
    pub const FIELDS: [&'static str; 4] =
        ["workload", "mfu", "nodes", "gradient_accumulation_steps"];
}

/// Inputs of a time estimate: every memory input plus the workload.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TimeRequest {
    #[serde(flatten)]
    pub memory: MemoryRequest,
    #[serde(flatten)]
    pub time: TimeInputs,
}

/// A resolved time request and the defaults it used.
pub struct ResolvedTime<'c> {
    pub plan: TimePlan<'c>,
    pub defaulted: Vec<String>,
}

/// Splits a request object into the fields `own` names and the rest, so that both parts
/// keep rejecting unknown fields; pointers stay valid because both keep top-level keys.
pub(super) fn split(value: Value, own: &[&str]) -> Result<(Value, Value), ApiError> {
    let Value::Object(map) = value else {
        return Err(ApiError::Invalid(vec![FieldError::new(
            "",
            "the request must be a JSON object",
        )]));
    };
    let (mine, rest): (
        serde_json::Map<String, Value>,
        serde_json::Map<String, Value>,
    ) = map
        .into_iter()
        .partition(|(k, _)| own.contains(&k.as_str()));
    Ok((Value::Object(mine), Value::Object(rest)))
}

/// Both parts' errors together, so a caller sees every bad field at once.
pub(super) fn both<A, B>(
    a: Result<A, ApiError>,
    b: Result<B, ApiError>,
) -> Result<(A, B), ApiError> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(ApiError::Invalid(mut x)), Err(ApiError::Invalid(y))) => {
            x.extend(y);
            Err(ApiError::Invalid(x))
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

impl TimeRequest {
    /// Parses a JSON request (POST body, or the GET form's query turned into JSON).
    pub fn from_value(value: Value) -> Result<Self, ApiError> {
        let (own, rest) = split(value, &TimeInputs::FIELDS)?;
        let (time, memory) = both(from_json_value(own), from_json_value(rest))?;
        Ok(Self { memory, time })
    }

    /// Validates both parts and builds the plan; every bad field is reported together.
    pub fn resolve<'c>(&self, catalog: &'c Catalog) -> Result<ResolvedTime<'c>, ApiError> {
        let memory = self.memory.resolve(catalog);
        let gpu = gpu_of(self.memory.gpu.as_deref(), catalog);
        let (memory, gpu) = both(memory, gpu)?;
        let mut defaulted = memory.defaulted;
        let plan = memory.plan;
        let mut problems = Problems::default();
        let t = &self.time;

        let tokens = match &t.workload {
            None => {
                problems.push(
                    "/workload",
                    "required: {\"tokens\": N} or {\"samples\": N, \"tokens_per_sample\": N, \"epochs\": N}",
                );
                0.0
            }
            Some(w) => workload_tokens(w, plan.sequence_length, &mut problems, &mut defaulted),
        };
        if let Some(mfu) = t.mfu {
            problems.range("/mfu", mfu, 1e-3, 1.0);
        }
        let gpus = plan.parallelism.gpus;
        let gpus_per_node = match t.nodes {
            Some(nodes) => {
                problems.range("/nodes", nodes, 1, gpus.max(1));
                if nodes > 0 && !gpus.is_multiple_of(nodes) {
                    problems.push("/nodes", format!("must divide the GPU count {gpus} evenly"));
                }
                gpus / nodes.max(1)
            }
            None => {
                let per_node = gpu.gpus_per_node.min(gpus).max(1);
                defaulted.push(format!(
                    "nodes: {} of up to {} GPUs (default)",
                    gpus.div_ceil(per_node),
                    gpu.gpus_per_node
                ));
                per_node
            }
        };
        let accumulation = t.gradient_accumulation_steps.unwrap_or_else(|| {
            let pp = plan.parallelism.pipeline_parallel;
            let steps = if pp > 1 {
                PIPELINE_MICRO_BATCHES_PER_STAGE * pp
            } else {
                1
            };
            defaulted.push(format!("gradient_accumulation_steps: {steps} (default)"));
            steps
        });
        problems.range("/gradient_accumulation_steps", accumulation, 1, 65_536);
        if self.memory.gpu.is_none() {
            defaulted.push(format!("gpu: {DEFAULT_GPU} (default)"));
        }
        let plan = TimePlan {
            memory: plan,
            gpu,
            tokens,
            gradient_accumulation_steps: accumulation,
            gpus_per_node: gpus_per_node.max(1),
            mfu: t.mfu,
        };
        let plan = problems.finish(plan).map_err(ApiError::Invalid)?;
        Ok(ResolvedTime { plan, defaulted })
    }
}

/// The request's GPU, or the default; an unknown id is a 404 with the closest ids.
pub(super) fn gpu_of<'c>(id: Option<&str>, catalog: &'c Catalog) -> Result<&'c Gpu, ApiError> {
    let id = id.unwrap_or(DEFAULT_GPU);
    catalog.gpu(id).ok_or_else(|| ApiError::NotFound {
        what: "gpu",
        id: id.to_string(),
        suggestions: catalog.closest_gpus(id),
    })
}

fn workload_tokens(
    w: &WorkloadInput,
    sequence_length: u64,
    problems: &mut Problems,
    defaulted: &mut Vec<String>,
) -> f64 {
    match (w.tokens, w.samples) {
        (Some(tokens), None) => {
            for (field, given) in [
                ("tokens_per_sample", w.tokens_per_sample.is_some()),
                ("epochs", w.epochs.is_some()),
            ] {
                if given {
                    problems.push(
                        format!("/workload/{field}"),
                        "goes with samples, not with tokens (tokens already counts every epoch)",
                    );
                }
            }
            problems.range("/workload/tokens", tokens, 1.0, MAX_TOKENS);
            tokens
        }
        (None, Some(samples)) => {
            let per_sample = w.tokens_per_sample.unwrap_or_else(|| {
                defaulted.push(format!(
                    "workload.tokens_per_sample: {sequence_length} (sequence_length, default)"
                ));
                sequence_length
            });
            let epochs = w.epochs.unwrap_or_else(|| {
                defaulted.push("workload.epochs: 1 (default)".into());
                1.0
            });
            problems.range("/workload/samples", samples, 1.0, 1e13);
            problems.range(
                "/workload/tokens_per_sample",
                per_sample,
                1,
                sequence_length,
            );
            problems.range("/workload/epochs", epochs, 1e-3, 1e4);
            let tokens = samples * per_sample as f64 * epochs;
            problems.range("/workload/tokens", tokens, 1.0, MAX_TOKENS);
            tokens
        }
        _ => {
            problems.push(
                "/workload",
                "give exactly one of tokens, or samples (with tokens_per_sample and epochs)",
            );
            0.0
        }
    }
}
