//! The cost request (design §2.4): a time request (or explicit `hours` on a fleet) plus
//! pricing filters, custom quotes, spot settings and the self-build.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::time::{DEFAULT_GPU, TimeRequest, both, gpu_of, split};
use super::{MAX_LAYERS, MAX_TENSOR_PARALLEL, ParallelismInput, from_json_value};
use crate::catalog::Catalog;
use crate::error::ApiError;
use crate::estimate::cost::{CUSTOM_PROVIDER, CostPlan, SelfBuildInputs, SpotInputs};
use crate::estimate::time::{self, TimeEstimate};
use crate::pricing::{Currency, Fx, PriceFilter, PriceQuote, PriceType};
use crate::validation::{FieldError, Problems};

/// Upper bounds that keep answers meaningful: ten years of wall time, a price no GPU
/// instance has ever had.
const MAX_HOURS: f64 = 87_660.0;
const MAX_PRICE_PER_HOUR: f64 = 1e7;

/// An organisation's own negotiated rate.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomQuoteInput {
    /// Default `custom quote N` (N from 1).
    #[schema(example = "our-cloud A100 ×4")]
    pub name: Option<String>,
    /// Catalog GPU id.
    #[schema(example = "a100-80gb")]
    pub gpu: String,
    /// GPUs in one rented instance (required: a job rents whole instances).
    #[schema(example = 4, minimum = 1, maximum = 1024)]
    pub gpus: Option<u64>,
    /// Give this or `price_per_gpu_hour`.
    #[schema(example = 200.0, minimum = 0.000001, maximum = 1e7)]
    pub price_per_instance_hour: Option<f64>,
    #[schema(minimum = 0.000001, maximum = 1e7)]
    pub price_per_gpu_hour: Option<f64>,
    /// Default: the request's `pricing.currency`.
    pub currency: Option<Currency>,
    /// Default `on_demand`.
    pub price_type: Option<PriceType>,
    /// Default `custom`.
    pub region: Option<String>,
    /// Date of the quote (`YYYY-MM-DD`).
    pub as_of: Option<String>,
}

/// Which prices to compare.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PricingInput {
    /// Providers of the price book to include (default: all; `[]`: custom quotes only).
    #[schema(example = json!(["aws", "gcp", "azure"]))]
    pub providers: Option<Vec<String>>,
    pub regions: Option<Vec<String>>,
    /// Default: all of `on_demand`, `spot`, `reserved_1y`, `reserved_3y`.
    pub price_types: Option<Vec<PriceType>>,
    /// Currency of the answer (default USD).
    pub currency: Option<Currency>,
    #[serde(default)]
    pub custom_quotes: Vec<CustomQuoteInput>,
}

/// The inputs a cost estimate adds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CostInputs {
    /// Wall hours of the job, instead of a time estimate: then the plan is only `gpu`
    /// and `parallelism.gpus`.
    #[schema(example = 50.0, minimum = 0.001, maximum = 87660)]
    pub hours: Option<f64>,
    pub pricing: Option<PricingInput>,
    pub spot: Option<SpotInputs>,
    pub self_build: Option<SelfBuildInputs>,
}

impl CostInputs {
    const FIELDS: [&'static str; 4] = ["hours", "pricing", "spot", "self_build"];
}

/// The fleet alone, for a cost request with explicit `hours`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetInput {
    #[schema(example = "a100-80gb")]
    pub gpu: Option<String>,
    pub parallelism: Option<ParallelismInput>,
}

/// What the cost is for: a plan to time, or a fleet for a given number of hours.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum CostBasis {
    Plan(Box<TimeRequest>),
    Fleet(FleetInput),
}

/// Inputs of a cost estimate: a time request (or `hours` with `gpu` and `parallelism`)
/// plus pricing, spot and self-build settings.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CostRequest {
    #[serde(flatten)]
    pub basis: CostBasis,
    #[serde(flatten)]
    pub cost: CostInputs,
}

/// A resolved cost request: the plan to price, the time estimate behind its hours (when
/// one was made), and the defaults used.
pub struct ResolvedCost<'c> {
    pub plan: CostPlan<'c>,
    pub time: Option<TimeEstimate>,
    pub defaulted: Vec<String>,
}

impl CostRequest {
    /// Parses a JSON request (POST body, or the GET form's query turned into JSON).
    pub fn from_value(value: Value) -> Result<Self, ApiError> {
        let (own, rest) = split(value, &CostInputs::FIELDS)?;
        let hours_given = own.get("hours").is_some();
        let cost = from_json_value::<CostInputs>(own);
        let basis = if hours_given {
            if let Value::Object(map) = &rest
                && let Some(extra) = map.keys().find(|k| *k != "gpu" && *k != "parallelism")
            {
                Err(ApiError::Invalid(vec![FieldError::new(
                    format!("/{extra}"),
                    "with hours the plan is only gpu and parallelism; drop hours to estimate the time from the model",
                )]))
            } else {
                from_json_value(rest).map(CostBasis::Fleet)
            }
        } else {
            TimeRequest::from_value(rest).map(|t| CostBasis::Plan(Box::new(t)))
        };
        let (cost, basis) = both(cost, basis)?;
        Ok(Self { basis, cost })
    }

    /// Validates, times the plan when needed, and builds the cost plan.
    pub fn resolve<'c>(
        &self,
        catalog: &'c Catalog,
        fx: &'c Fx,
        now: jiff::Timestamp,
    ) -> Result<ResolvedCost<'c>, ApiError> {
        let mut problems = Problems::default();
        let (gpu, gpus, hours, time, mut defaulted) = match &self.basis {
            CostBasis::Plan(request) => {
                let resolved = request.resolve(catalog)?;
                let estimate = time::estimate(&resolved.plan)?;
                let plan = resolved.plan;
                (
                    plan.gpu,
                    plan.memory.parallelism.gpus,
                    estimate.wall_hours.expected,
                    Some(estimate),
                    resolved.defaulted,
                )
            }
            CostBasis::Fleet(fleet) => {
                let gpu = gpu_of(fleet.gpu.as_deref(), catalog)?;
                let mut defaulted = Vec::new();
                if fleet.gpu.is_none() {
                    defaulted.push(format!("gpu: {DEFAULT_GPU} (default)"));
                }
                let layout = fleet.parallelism.clone().unwrap_or_default();
                if layout.gpus.is_none() {
                    defaulted.push("parallelism.gpus: 1 (default)".into());
                }
                // No model to shard: the layout is checked against the schema's ceilings.
                let gpus = layout
                    .resolve(MAX_TENSOR_PARALLEL, MAX_LAYERS, &mut problems)
                    .gpus;
                (gpu, gpus, self.cost.hours.unwrap_or(0.0), None, defaulted)
            }
        };

        if let CostBasis::Fleet(_) = &self.basis {
            problems.range("/hours", hours, 1e-3, MAX_HOURS);
        } else if hours > MAX_HOURS {
            problems.push(
                "/workload",
                format!("the job would take {hours:.0} hours, over the {MAX_HOURS} (ten years) this service prices"),
            );
        }
        let pricing = self.cost.pricing.clone().unwrap_or_default();
        let currency = pricing.currency.unwrap_or_else(|| {
            defaulted.push("pricing.currency: USD (default)".into());
            Currency::Usd
        });
        let custom_quotes = pricing
            .custom_quotes
            .iter()
            .enumerate()
            .filter_map(|(i, q)| custom_quote(i, q, currency, catalog, &mut problems))
            .collect();
        let spot = self.cost.spot.unwrap_or_default();
        for (field, value, high) in [
            (
                "checkpoint_interval_minutes",
                spot.checkpoint_interval_minutes,
                10_080.0,
            ),
            (
                "checkpoint_write_minutes",
                spot.checkpoint_write_minutes,
                1_440.0,
            ),
            ("restart_minutes", spot.restart_minutes, 1_440.0),
        ] {
            if let Some(v) = value {
                let low = if field == "checkpoint_interval_minutes" {
                    1.0
                } else {
                    0.0
                };
                problems.range(&format!("/spot/{field}"), v, low, high);
            }
        }
        if let Some(rate) = spot.interruptions_per_hour {
            problems.range("/spot/interruptions_per_hour", rate, 0.0, 10.0);
        }
        let self_build = self.cost.self_build;
        if let Some(s) = &self_build {
            problems.range("/self_build/hardware_cost", s.hardware_cost, 0.0, 1e12);
            for (field, value, high) in [
                ("power_kw", s.power_kw, 10_000.0),
                (
                    "electricity_price_per_kwh",
                    s.electricity_price_per_kwh,
                    1_000.0,
                ),
                ("ops_cost_per_month", s.ops_cost_per_month, 1e10),
            ] {
                if let Some(v) = value {
                    problems.range(&format!("/self_build/{field}"), v, 0.0, high);
                }
            }
            if let Some(pue) = s.pue {
                problems.range("/self_build/pue", pue, 1.0, 3.0);
            }
            if let Some(months) = s.lifetime_months {
                problems.range("/self_build/lifetime_months", months, 1.0, 240.0);
            }
        }
        let providers = pricing.providers.clone();
        let plan = CostPlan {
            gpu,
            gpus,
            hours,
            filter: PriceFilter {
                gpu: Some(gpu.id.clone()),
                providers: providers.clone().unwrap_or_default(),
                regions: pricing.regions.clone().unwrap_or_default(),
                price_types: pricing.price_types.clone().unwrap_or_default(),
                max_age_hours: None,
            },
            use_book: providers.is_none_or(|p| !p.is_empty()),
            custom_quotes,
            currency,
            fx,
            spot,
            self_build,
            now,
        };
        let plan = problems.finish(plan).map_err(ApiError::Invalid)?;
        Ok(ResolvedCost {
            plan,
            time,
            defaulted,
        })
    }
}

/// Validates one custom quote and turns it into a price row.
fn custom_quote(
    index: usize,
    q: &CustomQuoteInput,
    currency: Currency,
    catalog: &Catalog,
    problems: &mut Problems,
) -> Option<PriceQuote> {
    let at = |field: &str| format!("/pricing/custom_quotes/{index}/{field}");
    let before = problems.is_empty();
    if catalog.gpu(&q.gpu).is_none() {
        problems.push(
            at("gpu"),
            format!(
                "unknown GPU {:?}; closest: {}",
                q.gpu,
                catalog.closest_gpus(&q.gpu).join(", ")
            ),
        );
    }
    let gpus = match q.gpus {
        None => {
            problems.push(
                at("gpus"),
                "required: how many GPUs one rented instance has (jobs rent whole instances)",
            );
            1
        }
        Some(n) => {
            problems.range(&at("gpus"), n, 1, 1024);
            n.max(1)
        }
    };
    let per_gpu = match (q.price_per_instance_hour, q.price_per_gpu_hour) {
        (Some(instance), None) => {
            problems.range(
                &at("price_per_instance_hour"),
                instance,
                1e-6,
                MAX_PRICE_PER_HOUR,
            );
            instance / gpus as f64
        }
        (None, Some(per_gpu)) => {
            problems.range(&at("price_per_gpu_hour"), per_gpu, 1e-6, MAX_PRICE_PER_HOUR);
            per_gpu
        }
        _ => {
            problems.push(
                at("price_per_instance_hour"),
                "give exactly one of price_per_instance_hour and price_per_gpu_hour",
            );
            1.0
        }
    };
    let quote = PriceQuote {
        provider: CUSTOM_PROVIDER.into(),
        region: q.region.clone().unwrap_or_else(|| "custom".into()),
        sku: q
            .name
            .clone()
            .unwrap_or_else(|| format!("custom quote {}", index + 1)),
        gpu: q.gpu.clone(),
        gpu_count: gpus,
        price_type: q.price_type.unwrap_or(PriceType::OnDemand),
        price_per_instance_hour: q.price_per_instance_hour,
        price_per_gpu_hour: per_gpu,
        currency: q.currency.unwrap_or(currency),
        as_of: q.as_of.clone(),
        fetched_at: None,
        source: "custom quote in the request".into(),
        source_kind: "Q".into(),
        notes: None,
        interruptions_per_hour: None,
        feed: None,
        stale: false,
    };
    if quote.as_of.is_some() && quote.as_of_date().is_none() {
        problems.push(at("as_of"), "must be a date, YYYY-MM-DD");
    }
    (before && problems.is_empty()).then_some(quote)
}
