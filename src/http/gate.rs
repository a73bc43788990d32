//! `POST /v1/gates/budget`: a plan held against limits, for CI.

use actix_web::{HttpRequest, HttpResponse, web};

use super::render::{self, RenderQuery};
use super::{AppState, JsonBody, cost_answer, memory_answer};
use crate::api::GateRequest;
use crate::api::cost::CostBasis;
use crate::catalog::Catalog;
use crate::error::{ApiError, PostProblems};
use crate::estimate::gate::{self, GateAnswer};
use crate::pricing::Pricing;

/// The gate's answer (HTTP and the offline CLI).
pub fn gate_answer(
    request: &GateRequest,
    catalog: &Catalog,
    pricing: &Pricing,
    now: jiff::Timestamp,
) -> Result<GateAnswer, ApiError> {
    let (cost_request, _) = request.resolve()?;
    let estimate =
        cost_answer(&cost_request, catalog, pricing, now).map_err(|e| e.under("/plan"))?;
    // With a model, the memory check sees the plan's GPU.
    let headroom = match &cost_request.basis {
        CostBasis::Plan(time) => {
            let mut memory = time.memory.clone();
            memory.gpu = Some(estimate.gpu.clone());
            let answer = memory_answer(&memory, catalog).map_err(|e| e.under("/plan"))?;
            let usable = catalog
                .gpu(&estimate.gpu)
                .map_or(0, |g| g.memory_bytes_usable);
            answer
                .fits
                .first()
                .and_then(|fit| fit.headroom_fraction(usable))
        }
        CostBasis::Fleet(_) => None,
    };
    Ok(gate::judge(estimate, headroom, &request.limits))
}

/// Check a training plan against a budget.
///
/// For CI: prices the plan like `POST /v1/estimates/cost` and holds its cheapest option
/// against the limits (`max_cost` in `currency`, `max_hours`, `max_price_age_hours`,
/// `min_headroom_fraction` of GPU memory). Always 200 for a valid request, with a
/// `verdict`, each check's limit, value and result, the estimate, and a Markdown summary
/// for a pull-request comment (it starts with `<!-- trainplan-budget-gate -->` so a
/// workflow can update its earlier comment).
#[utoipa::path(
    post,
    path = "/v1/gates/budget",
    operation_id = "check_budget",
    tag = "gates",
    params(RenderQuery),
    request_body(content = GateRequest, description = "The plan and its limits.",
        examples(
            ("seed_lora" = (summary = "LoRA on 2 GPUs at ¥40/h per GPU for 20 hours, against ¥2,000", value = json!({"plan": {"hours": 20, "gpu": "a100-80gb", "parallelism": {"gpus": 2}, "pricing": {"providers": [], "custom_quotes": [{"name": "negotiated", "gpu": "a100-80gb", "gpus": 1, "price_per_gpu_hour": 40, "currency": "CNY"}]}}, "limits": {"max_cost": 2000, "currency": "CNY", "max_hours": 48}})))
        )),
    responses(
        (status = 200, description = "The verdict (JSON; `format=text&field=verdict` for one word)", body = GateAnswer,
            example = json!({"verdict": "pass", "prices_unusable": false, "checks": [{"name": "cost", "limit": 2000.0, "value": 1600.0, "result": "pass", "detail": "1600.00 CNY, within the limit of 2000.00 CNY"}], "option": null, "summary_markdown": "<!-- trainplan-budget-gate -->\n### ✅ trainplan budget gate: **pass**\n", "estimate": {}})),
        PostProblems,
    )
)]
pub async fn budget(
    request: HttpRequest,
    state: web::Data<AppState>,
    render: web::Query<RenderQuery>,
    body: JsonBody<GateRequest>,
) -> Result<HttpResponse, ApiError> {
    let answer = gate_answer(
        &body.0,
        &state.catalog,
        &state.pricing,
        jiff::Timestamp::now(),
    )?;
    render::respond(&request, &render, &answer, "checks")
}
