//! Liveness, readiness and metrics: cheap and boring.

use actix_web::{HttpResponse, web};
use prometheus::{Encoder, TextEncoder};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::error::ApiError;
use crate::pricing::BookSource;
use crate::pricing::live::StoreHealth;

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
    /// Where the price book comes from (embedded snapshot or a live refresh) and how old
    /// its rows are.
    pub prices_source: BookSource,
    /// The shared price store as this replica last saw it.
    pub price_store: StoreHealth,
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
/// Answers 200 when the service has what it needs to answer estimates: the catalogs and
/// a price book (the last one from Redis, else the embedded snapshot). Says which book
/// it serves, how old it is, and whether Redis is reachable — a Redis outage does not
/// make a replica unready, it serves from memory.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "operations",
    responses((status = 200, description = "Ready", body = Readiness, example = json!({"status": "ready", "catalog_gpus": 37, "catalog_models": 73, "prices_source": {"kind": "embedded_snapshot", "snapshot_id": null, "loaded_at": "2026-11-29T00:00:00Z", "refreshed_at": null, "rows": 93, "oldest_as_of": "2024-01", "newest_as_of": "2026-09-10"}, "price_store": {"state": "not_configured", "error": null, "checked_at": null}}))))]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(Readiness {
        status: "ready",
        catalog_gpus: state.catalog.gpus().len(),
        catalog_models: state.catalog.models().len(),
        prices_source: state.pricing.book.load().source().clone(),
        price_store: StoreHealth::clone(&state.pricing.health.load()),
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
