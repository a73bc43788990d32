//! `GET /v1/prices`: the price book, filtered.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::render::{self, Format, RenderQuery};
use crate::error::{ApiError, Problem};
use crate::pricing::{self, Currency, PriceFilter, PriceList, PriceType};
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
    pub max_age_hours: Option<f64>,
    /// Also give each price in this currency (`USD` or `CNY`).
    pub currency: Option<Currency>,
    pub format: Option<Format>,
    pub field: Option<String>,
}

fn list(text: Option<&str>) -> Vec<String> {
    text.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    })
    .unwrap_or_default()
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
    if let Some(gpu) = &query.gpu
        && state.catalog.gpu(gpu).is_none()
    {
        return Err(ApiError::NotFound {
            what: "gpu",
            id: gpu.clone(),
            suggestions: state.catalog.closest_gpus(gpu),
        });
    }
    let mut problems = Problems::default();
    let price_types = list(query.price_type.as_deref())
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
        providers: list(query.provider.as_deref()),
        regions: list(query.region.as_deref()),
        price_types,
        max_age_hours: query.max_age_hours,
    };
    let filter = problems.finish(filter).map_err(ApiError::Invalid)?;
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
    };
    render::respond(&request, &render, &answer, "prices")
}
