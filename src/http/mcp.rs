//! `/mcp`: the estimators as Model Context Protocol tools, over streamable HTTP (the
//! official `rmcp` crate, stateless JSON responses so that any worker or replica can
//! answer any request). Tool input schemas come from the OpenAPI document, so tools and
//! REST operations take the same requests; tool calls run the same answer functions.

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::TryStreamExt;
use http_body_util::{BodyExt, Full};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::AppState;
use super::catalog::{GpuFilter, ModelFilter, gpu_list, model_list};
use super::estimates::{cost_answer, memory_answer, recommendation_answer, time_answer};
use super::prices::{PriceQuery, price_filter};
use crate::api::{CostRequest, MemoryRequest, RecommendationRequest, TimeRequest, from_json_value};
use crate::error::ApiError;
use crate::pricing;

/// `(tool, OpenAPI schema of its input, description for a model to read)`.
const TOOLS: [(&str, &str, &str); 7] = [
    (
        "estimate_memory",
        "MemoryRequest",
        "Peak GPU memory per GPU of one training or fine-tuning configuration, with a breakdown (weights, gradients, optimizer, activations, logits, adapters) and whether it fits each GPU. Give `model` (a catalog id such as \"llama-3.1-8b\", or {\"parameters\": 7e9}); every other field has a stated default.",
    ),
    (
        "estimate_time",
        "TimeRequest",
        "Training time of a configuration on a GPU fleet: FLOPs, tokens per second, MFU and wall hours (low, expected, high). Give `model`, `workload` ({\"tokens\": N} or {\"samples\": N, \"tokens_per_sample\": N, \"epochs\": N}), and usually `gpu` and `parallelism.gpus`.",
    ),
    (
        "estimate_cost",
        "CostRequest",
        "Cost of a job across clouds (on demand, spot, reserved), the organisation's own `pricing.custom_quotes`, and owning the hardware (`self_build`), cheapest first, each price dated and sourced. Give a time request, or `hours` with `gpu` and `parallelism.gpus`.",
    ),
    (
        "recommend_strategy",
        "RecommendationRequest",
        "Recommend how to fine-tune: method (full, LoRA, QLoRA, prefix tuning, adapters), GPUs and how many, and how to pay (spot, on demand, reserved, self-build), with every decision explained. Give `model` and `dataset.samples`; add `quality`, `deadline_hours`, `budget`, `project_months` as known.",
    ),
    (
        "list_prices",
        "ListPricesInput",
        "Current GPU prices: provider, region, instance type, GPUs per instance, price type, hourly price, date and source. Filter by `gpu`, `provider`, `region`, `price_type`; `currency` converts.",
    ),
    (
        "list_gpus",
        "ListGpusInput",
        "The GPU catalog: memory, dense TFLOP/s by precision, interconnect, power. Filter with `q` (a name substring) and `min_memory_gib`.",
    ),
    (
        "list_models",
        "ListModelsInput",
        "The model catalog: architecture and parameter count of each model id the estimators accept. Filter with `q` (a name substring) and `family`.",
    ),
];

/// Input schemas of the list tools (they are query strings in REST).
fn list_schemas() -> Map<String, Value> {
    let text = |d: &str| json!({"type": "string", "description": d});
    let mut schemas = Map::new();
    schemas.insert(
        "ListPricesInput".into(),
        json!({"type": "object", "additionalProperties": false, "properties": {
            "gpu": text("Catalog GPU id, e.g. h100-80gb"),
            "provider": text("Provider, e.g. aws"),
            "region": text("Region, e.g. us-east-1"),
            "price_type": text("on_demand or spot"),
            "currency": {"type": "string", "enum": ["USD", "CNY"]}
        }}),
    );
    schemas.insert(
        "ListGpusInput".into(),
        json!({"type": "object", "additionalProperties": false, "properties": {
            "q": text("Substring of the id or name"),
            "min_memory_gib": {"type": "number"}
        }}),
    );
    schemas.insert(
        "ListModelsInput".into(),
        json!({"type": "object", "additionalProperties": false, "properties": {
            "q": text("Substring of the id"),
            "family": text("Model family, e.g. qwen2")
        }}),
    );
    schemas
}

/// The tool list: each input schema is the OpenAPI component with every component it
/// refers to under `$defs`.
fn tools() -> Vec<Tool> {
    let spec: Value = serde_json::from_str(&crate::openapi::json()).unwrap_or(Value::Null);
    let mut components = spec["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    components.extend(list_schemas());
    let defs = serde_json::to_string(&components)
        .unwrap_or_default()
        .replace("#/components/schemas/", "#/$defs/");
    let defs: Value = serde_json::from_str(&defs).unwrap_or(Value::Null);
    TOOLS
        .iter()
        .map(|&(name, schema, description)| {
            let mut input = defs[schema].as_object().cloned().unwrap_or_default();
            input.insert("$defs".into(), defs.clone());
            input.entry("type").or_insert_with(|| json!("object"));
            Tool::new(name, description, Arc::new(input))
        })
        .collect()
}

/// The MCP server: one per request (stateless), sharing the app's state.
#[derive(Clone)]
pub struct Mcp {
    state: web::Data<AppState>,
}

impl Mcp {
    fn answer(&self, name: &str, arguments: Value) -> Result<Value, ApiError> {
        let state = &self.state;
        let now = jiff::Timestamp::now();
        let value =
            |v: Result<Value, serde_json::Error>| v.map_err(|e| ApiError::Internal(e.to_string()));
        match name {
            "estimate_memory" => {
                let request: MemoryRequest = from_json_value(arguments)?;
                value(serde_json::to_value(memory_answer(
                    &request,
                    &state.catalog,
                )?))
            }
            "estimate_time" => value(serde_json::to_value(time_answer(
                &TimeRequest::from_value(arguments)?,
                &state.catalog,
            )?)),
            "estimate_cost" => {
                let request = CostRequest::from_value(arguments)?;
                value(serde_json::to_value(cost_answer(
                    &request,
                    &state.catalog,
                    &state.pricing,
                    now,
                )?))
            }
            "recommend_strategy" => {
                let request: RecommendationRequest = from_json_value(arguments)?;
                value(serde_json::to_value(recommendation_answer(
                    &request,
                    &state.catalog,
                    &state.pricing,
                    now,
                )?))
            }
            "list_prices" => {
                let query: PriceQuery = from_json_value(arguments)?;
                let filter = price_filter(&state.catalog, &query)?;
                let book = state.pricing.book.load();
                value(serde_json::to_value(pricing::price_list(
                    &book,
                    &filter,
                    query.currency,
                    &state.pricing.fx,
                    now,
                )))
            }
            "list_gpus" => {
                let filter: GpuFilter = from_json_value(arguments)?;
                value(serde_json::to_value(gpu_list(&state.catalog, &filter)))
            }
            "list_models" => {
                let filter: ModelFilter = from_json_value(arguments)?;
                value(serde_json::to_value(model_list(&state.catalog, &filter)))
            }
            other => Err(ApiError::RouteNotFound(format!("tool {other}"))),
        }
    }
}

impl ServerHandler for Mcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trainplan", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Plans LLM training and fine-tuning: memory per GPU, training time, cost across clouds, and which strategy to pick. Every answer states its assumptions; prices carry their date and source.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !TOOLS.iter().any(|(name, _, _)| *name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // A bad request is the model's to fix: a tool error carrying the problem, not a
        // protocol error.
        let result = match self.answer(&request.name, arguments) {
            Ok(answer) => CallToolResult::success(vec![ContentBlock::text(answer.to_string())]),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(
                serde_json::to_string(&error.problem()).unwrap_or_else(|_| error.to_string()),
            )]),
        };
        Ok(result.into())
    }
}

/// The streamable HTTP service of one worker.
pub type McpService = StreamableHttpService<Mcp, LocalSessionManager>;

pub fn service(state: web::Data<AppState>, allowed_hosts: Vec<String>) -> McpService {
    let mut config = StreamableHttpServerConfig::default().with_allowed_hosts(allowed_hosts);
    config.legacy_session_mode = false;
    config.json_response = true;
    StreamableHttpService::new(
        move || {
            Ok(Mcp {
                state: state.clone(),
            })
        },
        Default::default(),
        config,
    )
}

/// Hands an actix request to the rmcp service and its answer back (SSE streams too).
pub async fn handle(
    request: HttpRequest,
    body: web::Bytes,
    mcp: web::Data<McpService>,
) -> Result<HttpResponse, ApiError> {
    let mut builder = http::Request::builder()
        .method(request.method().as_str())
        .uri(request.uri().to_string());
    for (name, value) in request.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let forwarded = builder
        .body(Full::new(bytes::Bytes::from(body.to_vec())))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let response = tower_call(mcp.get_ref().clone(), forwarded).await;
    let mut reply = HttpResponse::build(
        actix_web::http::StatusCode::from_u16(response.status().as_u16())
            .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR),
    );
    for (name, value) in response.headers() {
        reply.append_header((name.as_str(), value.as_bytes()));
    }
    let stream = response
        .into_body()
        .into_data_stream()
        .map_ok(|chunk| web::Bytes::from(chunk.to_vec()))
        .map_err(|never| match never {});
    Ok(reply.streaming::<_, actix_web::Error>(stream))
}

async fn tower_call(
    mut service: McpService,
    request: http::Request<Full<bytes::Bytes>>,
) -> http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>> {
    use tower_service::Service;
    match service.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
