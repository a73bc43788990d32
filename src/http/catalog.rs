//! `/v1/gpus` and `/v1/models`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::render::{self, Format, RenderQuery};
use crate::catalog::{Catalog, Gpu, ModelEntry};
use crate::error::{ApiError, Problem};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GpuFilter {
    /// Only GPUs with at least this much nominal memory.
    #[param(example = 40)]
    pub min_memory_gib: Option<f64>,
    /// `sxm4`, `sxm5`, `pcie`, `oam`, …
    pub form_factor: Option<String>,
    /// Substring of the id or name, case-insensitive.
    #[param(example = "a100")]
    pub q: Option<String>,
    pub format: Option<Format>,
    pub field: Option<String>,
    /// CSV only: start with a UTF-8 byte-order mark (for Excel).
    pub bom: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GpuList {
    pub count: usize,
    pub gpus: Vec<Gpu>,
}

/// List the GPU catalog.
///
/// Every accelerator the estimators know, with usable memory (what one process can
/// allocate), dense tensor TFLOP/s by precision, memory bandwidth, interconnect and power,
/// each with its source. Filter by memory, form factor or a name substring.
#[utoipa::path(
    get, path = "/v1/gpus", operation_id = "list_gpus", tag = "catalog",
    params(GpuFilter),
    responses(
        (status = 200, description = "Matching GPUs", body = GpuList, example = json!({"count": 1, "gpus": [{"id": "a100-80gb", "name": "NVIDIA A100 SXM4 80GB", "memory_gib_nominal": 80.0}]})),
        (status = 422, description = "Unknown or invalid filter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn gpus(
    request: HttpRequest,
    state: web::Data<AppState>,
    filter: web::Query<GpuFilter>,
) -> Result<HttpResponse, ApiError> {
    let list = gpu_list(&state.catalog, &filter);
    let render_query = RenderQuery {
        format: filter.format,
        field: filter.field.clone(),
        bom: filter.bom,
    };
    render::respond(&request, &render_query, &list, "gpus")
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ModelFilter {
    /// `llama`, `qwen2`, `mixtral`, …
    #[param(example = "llama")]
    pub family: Option<String>,
    pub min_parameters: Option<f64>,
    #[param(example = 1.0e10)]
    pub max_parameters: Option<f64>,
    /// Substring of the id, case-insensitive.
    pub q: Option<String>,
    pub format: Option<Format>,
    pub field: Option<String>,
    /// CSV only: start with a UTF-8 byte-order mark (for Excel).
    pub bom: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub count: usize,
    pub models: Vec<ModelEntry>,
}

/// List the model catalog.
///
/// Every model id the estimators accept as `model`, with its architecture (layers, width,
/// heads, KV heads, MLP width, vocabulary, experts) and parameter count. Filter by family,
/// size or an id substring.
#[utoipa::path(
    get, path = "/v1/models", operation_id = "list_models", tag = "catalog",
    params(ModelFilter),
    responses(
        (status = 200, description = "Matching models", body = ModelList, example = json!({"count": 1, "models": [{"id": "llama-3.1-8b", "family": "llama", "parameters": 8030261248u64}]})),
        (status = 422, description = "Unknown or invalid filter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn models(
    request: HttpRequest,
    state: web::Data<AppState>,
    filter: web::Query<ModelFilter>,
) -> Result<HttpResponse, ApiError> {
    let list = model_list(&state.catalog, &filter);
    let render_query = RenderQuery {
        format: filter.format,
        field: filter.field.clone(),
        bom: filter.bom,
    };
    render::respond(&request, &render_query, &list, "models")
}

/// The GPUs a filter selects (`/v1/gpus` and the MCP `list_gpus` tool).
pub fn gpu_list(catalog: &Catalog, filter: &GpuFilter) -> GpuList {
    let q = filter.q.as_deref().map(str::to_ascii_lowercase);
    let gpus: Vec<Gpu> = catalog
        .gpus()
        .iter()
        .filter(|g| {
            filter
                .min_memory_gib
                .is_none_or(|m| g.memory_gib_nominal >= m)
        })
        .filter(|g| {
            filter
                .form_factor
                .as_deref()
                .is_none_or(|f| g.form_factor == f)
        })
        .filter(|g| {
            q.as_deref()
                .is_none_or(|q| g.id.contains(q) || g.name.to_ascii_lowercase().contains(q))
        })
        .cloned()
        .collect();
    GpuList {
        count: gpus.len(),
        gpus,
    }
}

/// The models a filter selects (`/v1/models` and the MCP `list_models` tool).
pub fn model_list(catalog: &Catalog, filter: &ModelFilter) -> ModelList {
    let q = filter.q.as_deref().map(str::to_ascii_lowercase);
    let models: Vec<ModelEntry> = catalog
        .models()
        .iter()
        .filter(|m| filter.family.as_deref().is_none_or(|f| m.family == f))
        .filter(|m| {
            filter
                .min_parameters
                .is_none_or(|p| m.parameters as f64 >= p)
        })
        .filter(|m| {
            filter
                .max_parameters
                .is_none_or(|p| m.parameters as f64 <= p)
        })
        .filter(|m| q.as_deref().is_none_or(|q| m.id.contains(q)))
        .cloned()
        .collect();
    ModelList {
        count: models.len(),
        models,
    }
}
