//! Liveness, readiness and metrics: cheap and boring.

use actix_web::{HttpResponse, web};
use prometheus::{Encoder, TextEncoder};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::error::ApiError;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    #[schema(example = "ready")]
    pub status: &'static str,
    /// GPUs and models loaded from the embedded catalogs.
    pub catalog_gpus: usize,
    pub catalog_models: usize,
}

/// Liveness probe.
///
/// Answers 200 while the process serves HTTP; touches nothing else.
#[utoipa::path(get, path = "/livez", operation_id = "livez", tag = "operations",
    responses((status = 200, description = "Alive", body = Health, example = json!({"status": "ok"}))))]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

/// Readiness probe.
///
/// Answers 200 when the service has what it needs to answer estimates (the catalogs).
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "operations",
    responses((status = 200, description = "Ready", body = Readiness, example = json!({"status": "ready", "catalog_gpus": 36, "catalog_models": 73}))))]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(Readiness {
        status: "ready",
        catalog_gpus: state.catalog.gpus().len(),
        catalog_models: state.catalog.models().len(),
    })
}

/// Prometheus metrics.
///
/// Request counts by method, route and status, and latency histograms by route, in the
/// Prometheus text exposition format.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain",
        example = json!("# TYPE http_requests_total counter\nhttp_requests_total{method=\"GET\",route=\"/livez\",status=\"200\"} 1\n"))))]
pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let mut buffer = Vec::new();
    TextEncoder::new()
        .encode(&state.metrics.registry.gather(), &mut buffer)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(buffer))
}
