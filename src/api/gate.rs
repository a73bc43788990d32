//! The budget gate request (issue 5): a cost plan plus limits.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::CostRequest;
use super::time::both;
use crate::error::ApiError;
use crate::estimate::gate::{Limits, limits_currency};
use crate::pricing::Currency;
use crate::validation::Problems;

/// A plan and the limits it must keep.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GateRequest {
    /// A cost request (the body of `POST /v1/estimates/cost`).
    #[schema(value_type = CostRequest)]
    pub plan: Value,
    #[serde(default)]
    pub limits: Limits,
}

impl GateRequest {
    /// The plan as a cost request priced in the limits' currency, and that currency.
    pub fn resolve(&self) -> Result<(CostRequest, Currency), ApiError> {
        let mut problems = Problems::default();
        let l = &self.limits;
        if let Some(v) = l.max_cost {
            problems.range("/limits/max_cost", v, 0.0, 1e12);
        }
        if let Some(v) = l.max_hours {
            problems.range("/limits/max_hours", v, 1e-3, 1e6);
        }
        if let Some(v) = l.max_price_age_hours {
            problems.range("/limits/max_price_age_hours", v, 0.0, 1e6);
        }
        if let Some(v) = l.min_headroom_fraction {
            problems.range("/limits/min_headroom_fraction", v, 0.0, 0.99);
        }
        let mut plan = self.plan.clone();
        let plan_currency = match plan.pointer("/pricing/currency") {
            None | Some(Value::Null) => None,
            Some(code) => match serde_json::from_value::<Currency>(code.clone()) {
                Ok(currency) => Some(currency),
                Err(error) => {
                    problems.push("/plan/pricing/currency", error.to_string());
                    None
                }
            },
        };
        let currency = limits_currency(l, plan_currency);
        // Custom quotes without a currency are in the plan's; say so before the plan is
        // priced in the limits' currency.
        let quoted_in = plan_currency.unwrap_or(Currency::Usd);
        if let Some(Value::Array(quotes)) = plan.pointer_mut("/pricing/custom_quotes") {
            for quote in quotes.iter_mut().filter_map(Value::as_object_mut) {
                quote
                    .entry("currency")
                    .or_insert_with(|| Value::String(quoted_in.code().into()));
            }
        }
        if let Value::Object(map) = &mut plan {
            // An absent or null `pricing` becomes one in the limits' currency: the plan
            // is always priced in the currency its limits are judged in.
            let pricing = map.entry("pricing").or_insert(Value::Null);
            if pricing.is_null() {
                *pricing = Value::Object(Default::default());
            }
            if let Value::Object(pricing) = pricing {
                pricing.insert("currency".into(), Value::String(currency.code().into()));
            }
        }
        let request = CostRequest::from_value(plan).map_err(|e| e.under("/plan"));
        let limits = problems.finish(()).map_err(ApiError::Invalid);
        both(request, limits).map(|(request, ())| (request, currency))
    }
}
