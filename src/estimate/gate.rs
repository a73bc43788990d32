//! The budget gate (issue 5): a cost estimate held against limits, for CI. Pure: the
//! estimate and the memory headroom come in, a verdict and a Markdown summary go out.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cost::{CUSTOM_PROVIDER, CostEstimate, CostOption};
use crate::pricing::Currency;

/// Marks the gate's pull-request comment so a workflow can find and update it.
pub const MARKER: &str = "<!-- trainplan-budget-gate -->";

/// What the plan must stay within; every limit is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most the cheapest option may cost, in `currency`.
    #[schema(example = 2000.0, minimum = 0, maximum = 1e12)]
    pub max_cost: Option<f64>,
    /// Default: the plan's pricing currency, else USD.
    pub currency: Option<Currency>,
    /// Most wall hours the job may take.
    #[schema(example = 48.0, minimum = 0.001, maximum = 1e6)]
    pub max_hours: Option<f64>,
    /// Oldest price reading accepted for the option judged.
    #[schema(example = 720.0, minimum = 0, maximum = 1e6)]
    pub max_price_age_hours: Option<f64>,
    /// Least free share of GPU memory (0–1) the plan must leave.
    #[schema(example = 0.1, minimum = 0, maximum = 0.99)]
    pub min_headroom_fraction: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckResult {
    Pass,
    Fail,
    /// No limit given, or nothing to measure.
    Skipped,
}

/// One limit and how the plan fared.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Check {
    /// `prices_available`, `cost`, `hours`, `price_age`, `memory_headroom`.
    #[schema(example = "cost")]
    pub name: &'static str,
    pub limit: Option<f64>,
    pub value: Option<f64>,
    pub result: CheckResult,
    #[schema(example = "1600.00 CNY against at most 2000.00 CNY")]
    pub detail: String,
}

/// The answer of `/v1/gates/budget`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GateAnswer {
    pub verdict: Verdict,
    /// True when no price could be used or the one judged is older than allowed (the
    /// CLI exits 3).
    pub prices_unusable: bool,
    pub checks: Vec<Check>,
    /// The option judged: the cheapest.
    pub option: Option<CostOption>,
    /// Ready for a pull-request comment; starts with a hidden marker.
    pub summary_markdown: String,
    pub estimate: CostEstimate,
}

fn check(
    name: &'static str,
    limit: Option<f64>,
    value: Option<f64>,
    passes: impl Fn(f64, f64) -> bool,
    unit: &str,
) -> Check {
    let (result, detail) = match (limit, value) {
        (None, _) => (CheckResult::Skipped, "no limit given".to_string()),
        (Some(limit), None) => (
            CheckResult::Fail,
            format!("cannot be measured (limit {limit:.2} {unit})"),
        ),
        (Some(limit), Some(value)) => {
            let ok = passes(value, limit);
            let relation = if ok { "within" } else { "beyond" };
            (
                if ok {
                    CheckResult::Pass
                } else {
                    CheckResult::Fail
                },
                format!("{value:.2} {unit}, {relation} the limit of {limit:.2} {unit}"),
            )
        }
    };
    Check {
        name,
        limit,
        value,
        result,
        detail,
    }
}

/// Holds the estimate (priced in the limits' currency) against the limits.
/// `headroom_fraction` is the plan's free share of GPU memory, when it has a model.
pub fn judge(
    estimate: CostEstimate,
    headroom_fraction: Option<f64>,
    limits: &Limits,
) -> GateAnswer {
    let option = estimate.options.first().cloned();
    let currency = estimate.currency.code();
    let age = option.as_ref().and_then(|o| {
        // An organisation's own undated quote is current by definition.
        o.age_hours
            .or((o.provider == CUSTOM_PROVIDER).then_some(0.0))
    });
    let checks = vec![
        Check {
            name: "prices_available",
            limit: None,
            value: Some(estimate.options.len() as f64),
            result: if option.is_some() {
                CheckResult::Pass
            } else {
                CheckResult::Fail
            },
            detail: format!("{} priced option(s)", estimate.options.len()),
        },
        check(
            "cost",
            limits.max_cost,
            option.as_ref().map(|o| o.cost),
            |v, l| v <= l,
            currency,
        ),
        check(
            "hours",
            limits.max_hours,
            option.as_ref().map(|o| o.hours),
            |v, l| v <= l,
            "h",
        ),
        check(
            "price_age",
            limits.max_price_age_hours,
            age,
            |v, l| v <= l,
            "h old",
        ),
        check(
            "memory_headroom",
            limits.min_headroom_fraction,
            headroom_fraction,
            |v, l| v >= l,
            "of GPU memory free",
        ),
    ];
    let prices_unusable = checks.iter().any(|c| {
        matches!(c.name, "prices_available" | "price_age") && c.result == CheckResult::Fail
    });
    let verdict = if checks.iter().any(|c| c.result == CheckResult::Fail) {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    let summary_markdown = markdown(verdict, &checks, option.as_ref(), &estimate);
    GateAnswer {
        verdict,
        prices_unusable,
        checks,
        option,
        summary_markdown,
        estimate,
    }
}

fn markdown(
    verdict: Verdict,
    checks: &[Check],
    option: Option<&CostOption>,
    estimate: &CostEstimate,
) -> String {
    let title = match verdict {
        Verdict::Pass => "✅ trainplan budget gate: **pass**",
        Verdict::Fail => "❌ trainplan budget gate: **fail**",
    };
    let mut text =
        format!("{MARKER}\n### {title}\n\n| check | limit | value | result |\n|---|---|---|---|\n");
    let number = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.2}"));
    for c in checks {
        let result = match c.result {
            CheckResult::Pass => "pass",
            CheckResult::Fail => "**fail**",
            CheckResult::Skipped => "skipped",
        };
        text.push_str(&format!(
            "| {} | {} | {} | {result} |\n",
            c.name,
            number(c.limit),
            number(c.value)
        ));
    }
    text.push('\n');
    match option {
        Some(o) => text.push_str(&format!(
            "Cheapest option: {} {} ({}), {} × {} for {:.1} h at {:.2} {}/h = **{:.2} {}**.\n",
            o.provider,
            o.sku,
            o.price_type.name(),
            o.gpus_rented,
            o.gpu,
            o.hours,
            o.price_per_hour,
            o.currency.code(),
            o.cost,
            o.currency.code()
        )),
        None => text.push_str("No price matched the plan.\n"),
    }
    let source = &estimate.prices_source;
    text.push_str(&format!(
        "Prices: {} ({} rows, newest reading {}); {} CNY per USD as of {}.\n",
        match source.kind {
            crate::pricing::BookKind::EmbeddedSnapshot => "embedded snapshot",
            crate::pricing::BookKind::Live => "live refresh",
        },
        source.rows,
        source.newest_as_of.as_deref().unwrap_or("unknown"),
        estimate.fx.cny_per_usd,
        estimate.fx.as_of
    ));
    text
}

/// The currency the limits are in, given the plan's.
pub fn limits_currency(limits: &Limits, plan: Option<Currency>) -> Currency {
    limits.currency.or(plan).unwrap_or(Currency::Usd)
}
