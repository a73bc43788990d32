//! `GET /v1/prices`: the price book, filtered.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::render::{self, Format, RenderQuery};
use crate::catalog::Catalog;
use crate::config::comma_list;
use crate::error::{ApiError, Problem, RefreshProblems};
use crate::pricing::refresh::{FeedStatus, RefreshError, RefreshReport};
use crate::pricing::{self, BookSource, Currency, PriceFilter, PriceList, PriceType};
use crate::validation::Problems;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PriceQuery {
    /// Catalog GPU id.
    #[param(example = "a100-80gb")]
    pub gpu: Option<String>,
    /// Comma-separated providers.
    #[param(example = "aws,gcp")]
    pub provider: Option<String>,
    /// Comma-separated regions (`global` rows match every region).
    #[param(example = "us-east-1")]
    pub region: Option<String>,
    /// Comma-separated: `on_demand`, `spot`.
    #[param(example = "on_demand")]
    pub price_type: Option<String>,
    /// Only rows read at most this many hours ago.
    #[param(minimum = 0, maximum = 1e6)]
    pub max_age_hours: Option<f64>,
    /// Also give each price in this currency (`USD` or `CNY`).
    pub currency: Option<Currency>,
    pub format: Option<Format>,
    pub field: Option<String>,
    /// CSV only: start with a UTF-8 byte-order mark (for Excel).
    pub bom: Option<bool>,
}

/// List current GPU prices.
///
/// Every price row of the book — provider, region, instance type, GPUs per instance,
/// price type, price per instance-hour and per GPU-hour in its own currency — with its
/// date, age and source; optionally converted to one currency at the configured rate.
/// A filter that matches nothing gives an empty list with a warning.
#[utoipa::path(
    get, path = "/v1/prices", operation_id = "list_prices", tag = "prices",
    params(PriceQuery),
    responses(
        (status = 200, description = "Matching rows (JSON; CSV with `format=csv`)", body = PriceList,
            example = json!({"count": 1, "prices": [{"provider": "aws", "region": "us-east-1", "sku": "p4d.24xlarge", "gpu": "a100-40gb", "gpu_count": 8, "price_type": "on_demand", "price_per_instance_hour": 21.957642, "price_per_gpu_hour": 2.745, "currency": "USD", "as_of": "2026-09-10", "fetched_at": null, "source": "SkyPilot catalog v8 (aws)", "source_kind": "L", "notes": null, "age_hours": 1940.0, "converted": null}], "prices_source": {"kind": "embedded_snapshot", "snapshot_id": null, "loaded_at": "2026-11-29T00:00:00Z", "rows": 93, "oldest_as_of": "2024-01", "newest_as_of": "2026-09-10"}, "fx": {"cny_per_usd": 7.2, "as_of": "2026-09", "source": "configured"}, "warnings": []})),
        (status = 404, description = "Unknown GPU id (with the closest ids)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown or invalid filter", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn prices(
    request: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<PriceQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let filter = price_filter(&state.catalog, &query)?;
    let book = state.pricing.book.load();
    let answer = pricing::price_list(
        &book,
        &filter,
        query.currency,
        &state.pricing.fx,
        jiff::Timestamp::now(),
    );
    let render = RenderQuery {
        format: query.format,
        field: query.field,
        bom: query.bom,
    };
    render::respond(&request, &render, &answer, "prices")
}

/// The rows a price query selects, validated (`/v1/prices` and the MCP `list_prices`
/// tool): an unknown GPU is a 404 with the closest ids.
pub fn price_filter(catalog: &Catalog, query: &PriceQuery) -> Result<PriceFilter, ApiError> {
    if let Some(gpu) = &query.gpu
        && catalog.gpu(gpu).is_none()
    {
        return Err(ApiError::NotFound {
            what: "gpu",
            id: gpu.clone(),
            suggestions: catalog.closest_gpus(gpu),
        });
    }
    let mut problems = Problems::default();
    let price_types = comma_list(query.price_type.as_deref())
        .into_iter()
        .filter_map(|name| {
            let parsed = serde_json::from_value::<PriceType>(serde_json::Value::String(name.clone()));
            if parsed.is_err() {
                problems.push(
                    "/query/price_type",
                    format!("unknown price type {name:?}; expected on_demand, spot, reserved_1y or reserved_3y"),
                );
            }
            parsed.ok()
        })
        .collect();
    if let Some(age) = query.max_age_hours {
        problems.range("/query/max_age_hours", age, 0.0, 1e6);
    }
    let filter = PriceFilter {
        gpu: query.gpu.clone(),
        providers: comma_list(query.provider.as_deref()),
        regions: comma_list(query.region.as_deref()),
        price_types,
        max_age_hours: query.max_age_hours,
    };
    problems.finish(filter).map_err(ApiError::Invalid)
}

/// `GET /v1/pricing/feeds`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct FeedList {
    /// Every configured feed, enabled or not.
    pub configured: Vec<ConfiguredFeed>,
    /// Each feed's outcome in the refresh that made the current book (empty while the
    /// embedded snapshot is served).
    pub feeds: Vec<FeedStatus>,
    pub prices_source: BookSource,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ConfiguredFeed {
    pub name: String,
    pub kind: pricing::feeds::FeedKind,
    pub enabled: bool,
    pub interval_seconds: u64,
}

/// List the price feeds and their status.
///
/// Every configured feed, and for the refresh behind the current book each feed's last
/// success, last error, rows kept (and how many are stale), rows rejected by reason,
/// quarantined price jumps and duration. Read from memory; no request waits on Redis.
#[utoipa::path(
    get, path = "/v1/pricing/feeds", operation_id = "list_price_feeds", tag = "prices",
    responses(
        (status = 200, description = "Feed statuses", body = FeedList,
            example = json!({"configured": [{"name": "azure-eastus", "kind": "azure_retail", "enabled": true, "interval_seconds": 21600}], "feeds": [{"name": "azure-eastus", "kind": "azure_retail", "last_attempt": "2026-11-29T12:00:00Z", "last_success": "2026-11-29T12:00:00Z", "last_error": null, "rows_kept": 14, "rows_stale": 0, "rows_rejected": {"unmapped VM size": 3}, "quarantined": [], "duration_ms": 840, "stale": false}], "prices_source": {"kind": "live", "snapshot_id": "1796040000-1a2b3c4d", "loaded_at": "2026-11-29T12:00:01Z", "refreshed_at": "2026-11-29T12:00:00Z", "rows": 101, "oldest_as_of": "2024-01", "newest_as_of": "2026-11-29"}})),
    )
)]
pub async fn feeds(state: web::Data<AppState>) -> HttpResponse {
    let book = state.pricing.book.load();
    HttpResponse::Ok().json(FeedList {
        configured: state
            .pricing
            .refresher
            .feeds
            .iter()
            .map(|f| ConfiguredFeed {
                name: f.name.clone(),
                kind: f.kind,
                enabled: f.enabled,
                interval_seconds: f.interval_seconds,
            })
            .collect(),
        feeds: book.feeds().to_vec(),
        prices_source: book.source().clone(),
    })
}

/// Refresh the prices now.
///
/// Runs every enabled feed, validates and publishes a new snapshot (to Redis when
/// configured, which every replica then picks up), and answers with each feed's
/// outcome. Needs the admin token as `Authorization: Bearer <token>`.
#[utoipa::path(
    post, path = "/v1/pricing/refresh", operation_id = "refresh_prices", tag = "prices",
    responses(
        (status = 200, description = "The refresh ran", body = RefreshReport,
            example = json!({"snapshot_id": "1796040000-1a2b3c4d", "rows": 101, "stored": true, "feeds": []})),
        RefreshProblems,
    ),
    security(("admin_token" = []))
)]
pub async fn refresh(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(expected) = state
        .pricing
        .admin_token
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return Err(ApiError::Forbidden(
            "refresh over HTTP is disabled: no admin token is configured (TRAINPLAN_ADMIN_TOKEN)"
                .into(),
        ));
    };
    let given = request
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "this operation needs the admin token: send `Authorization: Bearer <token>`".into(),
            )
        })?;
    if !super::keys::constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        return Err(ApiError::Forbidden("the admin token is wrong".into()));
    }
    match state.pricing.refresher.refresh().await {
        Ok(report) => Ok(HttpResponse::Ok().json(report)),
        Err(RefreshError::Busy) => Err(ApiError::Conflict(
            "a refresh is already running (on this or another replica)".into(),
        )),
        Err(RefreshError::Store(error)) => Err(ApiError::Unavailable(format!(
            "the price store is unreachable: {error}"
        ))),
        Err(RefreshError::Stopped) => Err(ApiError::Unavailable(
            "this replica is shutting down; the refresh published nothing".into(),
        )),
    }
}
