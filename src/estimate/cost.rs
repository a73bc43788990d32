//! Cost (design §3.3): hours × price over whole instances, for every matching row of the
//! price book and every custom quote, on demand, spot (with interruption rework and the
//! Young/Daly checkpoint interval) and reserved; plus the total cost of owning the
//! hardware and its break-even hours against each cloud option.
//!
//! Pure: the book, the exchange rate and "now" come in as arguments.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::time::TimeEstimate;
use crate::catalog::Gpu;
use crate::pricing::{BookSource, Currency, Fx, PriceBook, PriceFilter, PriceQuote, PriceType};

/// One-year and three-year commitments as a discount on the on-demand rate, for
/// providers that sell them (AWS Savings Plans and Reserved Instances, Azure
/// Reservations, GCP committed-use discounts, OCI and the GPU clouds' term contracts).
/// Published GPU-instance discounts cluster around 30–40 % for one year and 50–60 % for
/// three; the middle is used and every derived option says so. The live Azure and AWS
/// feeds carry quoted reservation rates instead.
const RESERVED_1Y_DISCOUNT: f64 = 0.35;
const RESERVED_3Y_DISCOUNT: f64 = 0.55;
const COMMITMENT_PROVIDERS: [&str; 9] = [
    "aws",
    "azure",
    "gcp",
    "oci",
    "alibaba",
    "tencent-intl",
    "coreweave",
    "lambda",
    "nebius",
];

/// Spot interruptions per instance-hour when the request gives none. No provider
/// publishes an hourly rate: AWS's Spot Advisor gives a monthly share of reclaimed
/// instances (p5.48xlarge under 5 %, g6e.4xlarge over 20 % in a 2026-09 capture,
/// feeds.md §3) and GCP and Azure give none. Planning values, stated in every option:
/// one interruption per 50 hours on a hyperscaler, one per 20 on a marketplace whose
/// hosts are individuals' machines.
fn default_interruptions_per_hour(provider: &str) -> (f64, &'static str) {
    match provider {
        "vast" | "runpod" | "market" | "autodl" => (
            0.05,
            "assumed planning value for marketplace spot (no published rate)",
        ),
        _ => (
            0.02,
            "assumed planning value for hyperscaler spot (AWS Spot Advisor publishes only monthly buckets)",
        ),
    }
}

/// Provider name of the request's own quotes.
pub const CUSTOM_PROVIDER: &str = "custom";

/// Checkpoint write and restart times when not given: a 7B full fine-tune's states
/// (~100 GB with AdamW) written at ~1 GB/s to network storage take under 2 minutes;
/// getting a replacement instance, pulling the image and reloading take ~10.
pub const DEFAULT_CHECKPOINT_WRITE_MINUTES: f64 = 2.0;
pub const DEFAULT_RESTART_MINUTES: f64 = 10.0;

/// Self-build defaults. Server power per GPU as a multiple of its TDP: a DGX H100 draws
/// 10.2 kW at most for 8 × 700 W GPUs (NVIDIA DGX H100 datasheet), 1.8×.
const SERVER_POWER_PER_GPU_TDP: f64 = 1.8;
/// Uptime Institute Global Data Center Survey 2024: average PUE 1.56.
const DEFAULT_PUE: f64 = 1.56;
/// US average commercial electricity, about 0.13 USD/kWh (EIA Electric Power Monthly
/// 2025); converted to the answer's currency.
const DEFAULT_ELECTRICITY_USD_PER_KWH: f64 = 0.13;
/// Three years, the usual depreciation schedule of servers.
const DEFAULT_LIFETIME_MONTHS: f64 = 36.0;
/// Hours in an average month (8,766 h / 12).
const HOURS_PER_MONTH: f64 = 730.5;

/// Spot settings (the request's `spot`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpotInputs {
    /// Default: the Young/Daly optimum.
    #[schema(minimum = 1, maximum = 10080)]
    pub checkpoint_interval_minutes: Option<f64>,
    /// Default 2.
    #[schema(minimum = 0, maximum = 1440)]
    pub checkpoint_write_minutes: Option<f64>,
    /// Default 10.
    #[schema(minimum = 0, maximum = 1440)]
    pub restart_minutes: Option<f64>,
    /// Per instance (default: a per-provider planning value, stated in each option).
    #[schema(example = 0.0, minimum = 0, maximum = 10)]
    pub interruptions_per_hour: Option<f64>,
}

/// Owning the hardware instead (the request's `self_build`; amounts in the answer's
/// currency).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SelfBuildInputs {
    #[schema(example = 320000.0, minimum = 0, maximum = 1e12)]
    pub hardware_cost: f64,
    /// Default: 1.8 × the GPUs' TDP (a DGX H100 draws 10.2 kW for 8 × 700 W).
    #[schema(minimum = 0, maximum = 10000)]
    pub power_kw: Option<f64>,
    /// Default 0.13 USD/kWh, converted.
    #[schema(minimum = 0, maximum = 1000)]
    pub electricity_price_per_kwh: Option<f64>,
    /// Default 1.56.
    #[schema(minimum = 1, maximum = 3)]
    pub pue: Option<f64>,
    /// Default 36.
    #[schema(minimum = 1, maximum = 240)]
    pub lifetime_months: Option<f64>,
    /// Default 0.
    #[schema(minimum = 0, maximum = 1e10)]
    pub ops_cost_per_month: Option<f64>,
}

/// Everything a cost estimate needs.
#[derive(Debug, Clone)]
pub struct CostPlan<'a> {
    pub gpu: &'a Gpu,
    /// GPUs the job uses.
    pub gpus: u64,
    /// Expected wall hours of the job on demand.
    pub hours: f64,
    /// Rows of the book to consider (`gpu` is set to the plan's GPU).
    pub filter: PriceFilter,
    /// False when the request asked for custom quotes only (`providers: []`).
    pub use_book: bool,
    pub custom_quotes: Vec<PriceQuote>,
    pub currency: Currency,
    pub fx: &'a Fx,
    pub spot: SpotInputs,
    pub self_build: Option<SelfBuildInputs>,
    pub now: jiff::Timestamp,
}

/// Spot details of an option.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SpotDetail {
    /// Per instance.
    pub interruptions_per_hour: f64,
    #[schema(value_type = String)]
    pub interruptions_source: Cow<'static, str>,
    /// For the whole job (every instance must stay up).
    pub expected_interruptions: f64,
    /// The interval used: the request's, else the Young/Daly optimum. Absent when
    /// interruptions are zero (no checkpoints needed for rework).
    pub checkpoint_interval_minutes: Option<f64>,
    /// `√(2 · checkpoint_write · MTBF)` (Young 1974; Daly 2006); absent with no
    /// interruptions.
    pub young_daly_interval_minutes: Option<f64>,
    pub checkpoint_write_minutes: f64,
    pub restart_minutes: f64,
}

/// One way to pay for the job.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CostOption {
    pub provider: String,
    pub region: String,
    /// Instance type (or the custom quote's name).
    pub sku: String,
    pub gpu: String,
    pub price_type: PriceType,
    pub gpus_per_instance: u64,
    pub instances: u64,
    /// Whole instances × their GPUs: at least the job's GPUs.
    pub gpus_rented: u64,
    /// Price of all rented instances per hour, in `currency`.
    pub price_per_hour: f64,
    pub price_per_gpu_hour: f64,
    /// Hours billed: the job's hours plus spot rework.
    pub hours: f64,
    /// Spot: checkpoint writes, restarts and lost work.
    pub rework_hours: f64,
    pub cost: f64,
    pub currency: Currency,
    /// The row's own price and currency, before conversion.
    pub native_price_per_instance_hour: f64,
    pub native_currency: Currency,
    pub as_of: Option<String>,
    /// Hours since `as_of` (absent when the row is undated).
    pub age_hours: Option<f64>,
    pub source: String,
    pub source_kind: String,
    pub spot: Option<SpotDetail>,
    /// Rounding, derivation and caveats.
    pub notes: Vec<String>,
}

/// Break-even of owning against one cloud option.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BreakEven {
    pub provider: String,
    pub sku: String,
    pub price_type: PriceType,
    pub price_per_hour: f64,
    /// Hours of use after which owning is cheaper; absent when the cloud is cheaper
    /// than the running cost of owning.
    pub break_even_hours: Option<f64>,
    pub break_even_days: Option<f64>,
}

/// Total cost of ownership of the job's GPUs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SelfBuild {
    pub hardware_cost: f64,
    pub power_kw: f64,
    pub pue: f64,
    pub electricity_price_per_kwh: f64,
    pub lifetime_months: f64,
    pub ops_cost_per_month: f64,
    /// Power × PUE × electricity.
    pub energy_cost_per_hour: f64,
    /// Hardware + operations + energy over the lifetime, used around the clock.
    pub total_cost_of_ownership: f64,
    pub amortized_cost_per_hour: f64,
    /// The job's share: its hours at the amortised rate.
    pub job_cost: f64,
    pub currency: Currency,
    pub break_even: Vec<BreakEven>,
}

/// The answer of `/v1/estimates/cost` (design §2.4).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CostEstimate {
    pub gpu: String,
    pub gpus: u64,
    /// Expected hours of the job on demand.
    pub hours: f64,
    pub currency: Currency,
    /// Every option, cheapest first.
    pub options: Vec<CostOption>,
    /// The cheapest option of each price type.
    pub cheapest: BTreeMap<String, CostOption>,
    pub self_build: Option<SelfBuild>,
    pub fx: Fx,
    pub prices_source: BookSource,
    /// The time estimate the hours come from (absent when `hours` was given).
    pub time: Option<TimeEstimate>,
    pub assumptions: Vec<String>,
    pub warnings: Vec<String>,
}

/// A quote converted into the answer's terms, before spot and rounding.
#[derive(Clone, Copy)]
struct Candidate<'q> {
    quote: &'q PriceQuote,
    price_type: PriceType,
    /// Factor on the quote's price (reserved derivation).
    factor: f64,
    note: Option<&'static str>,
}

/// The note on a derived reserved option, written out once per discount.
fn reserved_note(discount: f64) -> String {
    format!(
        "derived: on-demand price less a typical {:.0} % commitment discount (not a quoted rate)",
        discount * 100.0
    )
}
static RESERVED_1Y_NOTE: LazyLock<String> = LazyLock::new(|| reserved_note(RESERVED_1Y_DISCOUNT));
static RESERVED_3Y_NOTE: LazyLock<String> = LazyLock::new(|| reserved_note(RESERVED_3Y_DISCOUNT));

/// Spot hours: the job's hours, plus a checkpoint write every interval, plus for each
/// interruption a restart and on average half an interval of lost work; interruptions
/// themselves scale with the total. Returns `(hours, detail)`, or `None` when the job
/// would never finish (interruptions faster than progress).
fn spot_hours(
    hours: f64,
    instances: u64,
    spot: &SpotInputs,
    quote: &PriceQuote,
) -> Option<(f64, SpotDetail)> {
    let (rate, source) = match (spot.interruptions_per_hour, quote.interruptions_per_hour) {
        (Some(rate), _) => (rate, Cow::Borrowed("request")),
        (None, Some(rate)) => (
            rate,
            Cow::Owned(format!(
                "{} ({})",
                quote.source,
                quote.notes.as_deref().unwrap_or("feed")
            )),
        ),
        (None, None) => {
            let (rate, source) = default_interruptions_per_hour(&quote.provider);
            (rate, Cow::Borrowed(source))
        }
    };
    let write_minutes = spot
        .checkpoint_write_minutes
        .unwrap_or(DEFAULT_CHECKPOINT_WRITE_MINUTES);
    let restart_minutes = spot.restart_minutes.unwrap_or(DEFAULT_RESTART_MINUTES);
    let job_rate = rate * instances as f64;
    let young_daly = (job_rate > 0.0).then(|| (2.0 * write_minutes * 60.0 / job_rate).sqrt());
    // No interruptions: nothing to redo and no checkpoint needed for it.
    let interval = young_daly.map(|optimum| spot.checkpoint_interval_minutes.unwrap_or(optimum));
    let total = match interval {
        None => hours,
        Some(interval) => {
            // Hours spent writing checkpoints: one of `write_minutes` per `interval`
            // minutes of progress. Checkpoints that take no time cost nothing however
            // often they are taken (the Young/Daly optimum is then 0: checkpoint
            // continuously).
            let write_hours = if write_minutes > 0.0 {
                hours * write_minutes / interval
            } else {
                0.0
            };
            let lost_per_interruption = (restart_minutes + interval / 2.0) / 60.0;
            let progress_share = 1.0 - job_rate * lost_per_interruption;
            if progress_share <= 0.0 {
                return None;
            }
            (hours + write_hours) / progress_share
        }
    };
    Some((
        total,
        SpotDetail {
            interruptions_per_hour: rate,
            interruptions_source: source,
            expected_interruptions: job_rate * total,
            checkpoint_interval_minutes: interval,
            young_daly_interval_minutes: young_daly,
            checkpoint_write_minutes: write_minutes,
            restart_minutes,
        },
    ))
}

/// A candidate priced: the numbers of its [`CostOption`], before any of its text.
struct Priced<'q> {
    candidate: Candidate<'q>,
    instances: u64,
    gpus_rented: u64,
    native_instance_price: f64,
    instance_price: f64,
    hours: f64,
    spot: Option<SpotDetail>,
}

impl Priced<'_> {
    /// All rented instances, per hour, in the plan's currency.
    fn price_per_hour(&self) -> f64 {
        self.instance_price * self.instances as f64
    }

    fn cost(&self) -> f64 {
        self.price_per_hour() * self.hours
    }

    /// The option as answered: names, dates and notes.
    fn option(self, plan: &CostPlan) -> CostOption {
        let q = self.candidate.quote;
        let price_per_hour = self.price_per_hour();
        let mut notes: Vec<String> = self.candidate.note.map(str::to_owned).into_iter().collect();
        if self.gpus_rented > plan.gpus {
            notes.push(format!(
                "rents {} × {} GPUs = {} for a {}-GPU job (whole instances)",
                self.instances, q.gpu_count, self.gpus_rented, plan.gpus
            ));
        }
        if let Some(n) = q.notes.as_deref().filter(|n| !n.is_empty()) {
            notes.push(n.to_string());
        }
        CostOption {
            provider: q.provider.clone(),
            region: q.region.clone(),
            sku: q.sku.clone(),
            gpu: q.gpu.clone(),
            price_type: self.candidate.price_type,
            gpus_per_instance: q.gpu_count,
            instances: self.instances,
            gpus_rented: self.gpus_rented,
            price_per_hour,
            price_per_gpu_hour: self.instance_price / q.gpu_count.max(1) as f64,
            hours: self.hours,
            rework_hours: self.hours - plan.hours,
            cost: price_per_hour * self.hours,
            currency: plan.currency,
            native_price_per_instance_hour: self.native_instance_price,
            native_currency: q.currency,
            as_of: q.as_of.clone(),
            age_hours: q.age_hours(plan.now),
            source: q.source.clone(),
            source_kind: q.source_kind.clone(),
            spot: self.spot,
            notes,
        }
    }
}

/// Whether the plan's filter wants options of this price type.
fn wanted(plan: &CostPlan, price_type: PriceType) -> bool {
    plan.filter.price_types.is_empty() || plan.filter.price_types.contains(&price_type)
}

/// The book's rows for the plan, in book order: read as quoted (on demand, spot), with
/// reserved options derived from on-demand rows.
fn book_candidates<'b>(plan: &CostPlan, book: &'b PriceBook) -> Vec<Candidate<'b>> {
    let mut candidates = Vec::new();
    let book_filter = PriceFilter {
        gpu: Some(plan.gpu.id.clone()),
        price_types: vec![PriceType::OnDemand, PriceType::Spot],
        ..plan.filter.clone()
    };
    for quote in book.filter(&book_filter, plan.now) {
        if wanted(plan, quote.price_type) {
            candidates.push(Candidate {
                quote,
                price_type: quote.price_type,
                factor: 1.0,
                note: None,
            });
        }
        let commits = quote.price_type == PriceType::OnDemand
            && COMMITMENT_PROVIDERS.contains(&quote.provider.as_str());
        for (price_type, discount, note) in [
            (
                PriceType::Reserved1y,
                RESERVED_1Y_DISCOUNT,
                &*RESERVED_1Y_NOTE,
            ),
            (
                PriceType::Reserved3y,
                RESERVED_3Y_DISCOUNT,
                &*RESERVED_3Y_NOTE,
            ),
        ] {
            if commits && wanted(plan, price_type) {
                candidates.push(Candidate {
                    quote,
                    price_type,
                    factor: 1.0 - discount,
                    note: Some(note),
                });
            }
        }
    }
    candidates
}

/// Every candidate of a plan (the book's rows, then the custom quotes) priced, with the
/// warnings pricing raised.
fn price<'q>(plan: &'q CostPlan, book: &'q PriceBook) -> (Vec<Priced<'q>>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut candidates = if plan.use_book {
        book_candidates(plan, book)
    } else {
        Vec::new()
    };
    for quote in &plan.custom_quotes {
        if quote.gpu != plan.gpu.id {
            warnings.push(format!(
                "custom quote {:?} is for {}, the plan runs on {}: left out",
                quote.sku, quote.gpu, plan.gpu.id
            ));
        } else if wanted(plan, quote.price_type) {
            candidates.push(Candidate {
                quote,
                price_type: quote.price_type,
                factor: 1.0,
                note: None,
            });
        }
    }
    if candidates.is_empty() {
        warnings.push(format!(
            "no price matches {} with these filters; widen providers, regions or price_types, or add custom_quotes",
            plan.gpu.id
        ));
    }
    let priced = price_candidates(plan, candidates, &mut warnings);
    (priced, warnings)
}

/// Candidates priced in their order; spot rows whose job would never finish are left
/// out with a warning.
fn price_candidates<'q>(
    plan: &CostPlan,
    candidates: Vec<Candidate<'q>>,
    warnings: &mut Vec<String>,
) -> Vec<Priced<'q>> {
    let mut priced = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        match price_one(plan, candidate) {
            Some(p) => priced.push(p),
            None => warnings.push(format!(
                "{} {} spot: interruptions come faster than the job progresses; left out",
                candidate.quote.provider, candidate.quote.sku
            )),
        }
    }
    priced
}

/// One candidate priced; `None` for a spot row whose job would never finish.
fn price_one<'q>(plan: &CostPlan, candidate: Candidate<'q>) -> Option<Priced<'q>> {
    let q = candidate.quote;
    let instances = plan.gpus.div_ceil(q.gpu_count.max(1));
    let native_instance_price = q.instance_price() * candidate.factor;
    let (hours, spot) = if candidate.price_type == PriceType::Spot {
        let (hours, detail) = spot_hours(plan.hours, instances, &plan.spot, q)?;
        (hours, Some(detail))
    } else {
        (plan.hours, None)
    };
    Some(Priced {
        candidate,
        instances,
        gpus_rented: instances * q.gpu_count,
        native_instance_price,
        instance_price: plan
            .fx
            .convert(native_instance_price, q.currency, plan.currency),
        hours,
        spot,
    })
}

/// Prices a plan against the book and the custom quotes.
pub fn estimate(plan: &CostPlan, book: &PriceBook) -> CostEstimate {
    let mut assumptions = vec![format!(
        "FX: {} CNY per USD as of {} ({})",
        plan.fx.cny_per_usd, plan.fx.as_of, plan.fx.source
    )];
    let (priced, mut warnings) = price(plan, book);
    let mut options: Vec<CostOption> = priced.into_iter().map(|p| p.option(plan)).collect();
    options.sort_by(|a, b| a.cost.total_cmp(&b.cost));
    let mut cheapest = BTreeMap::new();
    for option in &options {
        cheapest
            .entry(option.price_type.name().to_string())
            .or_insert_with(|| option.clone());
    }
    if options
        .iter()
        .any(|o| o.as_of.is_none() && o.provider != CUSTOM_PROVIDER)
    {
        warnings.push("some price rows carry no date; their age is unknown".into());
    }

    let self_build = plan.self_build.map(|inputs| {
        let mut build = self_build(plan, &inputs);
        build.break_even = options.iter().map(|o| build.break_even(o)).collect();
        assumptions.push(format!(
            "self-build: {:.2} kW × PUE {} at {:.3} {}/kWh, {} months",
            build.power_kw,
            build.pue,
            build.electricity_price_per_kwh,
            plan.currency.code(),
            build.lifetime_months
        ));
        build
    });

    CostEstimate {
        gpu: plan.gpu.id.clone(),
        gpus: plan.gpus,
        hours: plan.hours,
        currency: plan.currency,
        options,
        cheapest,
        self_build,
        fx: plan.fx.clone(),
        prices_source: book.source().clone(),
        time: None,
        assumptions,
        warnings,
    }
}

/// The cheapest option of one price type: its numbers and the book row it comes from.
#[derive(Debug, Clone, Copy)]
pub struct Cheapest<'b> {
    pub quote: &'b PriceQuote,
    pub price_type: PriceType,
    /// All rented instances, per hour, in the plan's currency.
    pub price_per_hour: f64,
    /// Hours billed (spot: with rework).
    pub hours: f64,
    pub cost: f64,
    /// Spot: the checkpoint interval used.
    pub checkpoint_interval_minutes: Option<f64>,
}

/// The book's rows a plan's filter selects, on its GPU: the same at every fleet size and
/// length of job, so a caller pricing many fleets of one GPU reads the book once.
pub struct BookRows<'b>(Vec<Candidate<'b>>);

pub fn book_rows<'b>(plan: &CostPlan, book: &'b PriceBook) -> BookRows<'b> {
    BookRows(book_candidates(plan, book))
}

/// What [`estimate`] answers in `cheapest`, as numbers, for callers that price many plans
/// and keep the best of each: the book's rows only (`use_book` and `custom_quotes` are
/// not read), cheapest first, without writing out any option. `rows` must come from
/// [`book_rows`] for a plan with the same GPU, filter and time.
pub fn cheapest<'b>(plan: &CostPlan, rows: &BookRows<'b>) -> Vec<Cheapest<'b>> {
    // The cheapest of each price type; among equal costs the first in book order wins,
    // as in `estimate`'s stable sort.
    let mut best: Vec<Priced> = Vec::new();
    for p in rows.0.iter().filter_map(|&c| price_one(plan, c)) {
        match best
            .iter_mut()
            .find(|b| b.candidate.price_type == p.candidate.price_type)
        {
            Some(b) if p.cost().total_cmp(&b.cost()).is_lt() => *b = p,
            Some(_) => {}
            None => best.push(p),
        }
    }
    best.sort_by(|a, b| a.cost().total_cmp(&b.cost()));
    best.into_iter()
        .map(|p| Cheapest {
            quote: p.candidate.quote,
            price_type: p.candidate.price_type,
            price_per_hour: p.price_per_hour(),
            hours: p.hours,
            cost: p.cost(),
            checkpoint_interval_minutes: p.spot.and_then(|s| s.checkpoint_interval_minutes),
        })
        .collect()
}

/// The cost of owning the plan's GPUs, with `break_even` left empty (see
/// [`SelfBuild::break_even_hours`]).
pub fn self_build(plan: &CostPlan, inputs: &SelfBuildInputs) -> SelfBuild {
    let power_kw = inputs.power_kw.unwrap_or_else(|| {
        plan.gpu.tdp_w.unwrap_or(0.0) * SERVER_POWER_PER_GPU_TDP * plan.gpus as f64 / 1000.0
    });
    let pue = inputs.pue.unwrap_or(DEFAULT_PUE);
    let electricity = inputs.electricity_price_per_kwh.unwrap_or_else(|| {
        plan.fx.convert(
            DEFAULT_ELECTRICITY_USD_PER_KWH,
            Currency::Usd,
            plan.currency,
        )
    });
    let lifetime_months = inputs.lifetime_months.unwrap_or(DEFAULT_LIFETIME_MONTHS);
    let ops = inputs.ops_cost_per_month.unwrap_or(0.0);
    let energy_cost_per_hour = power_kw * pue * electricity;
    let lifetime_hours = lifetime_months * HOURS_PER_MONTH;
    let total =
        inputs.hardware_cost + ops * lifetime_months + energy_cost_per_hour * lifetime_hours;
    let amortized = if lifetime_hours > 0.0 {
        total / lifetime_hours
    } else {
        0.0
    };
    SelfBuild {
        hardware_cost: inputs.hardware_cost,
        power_kw,
        pue,
        electricity_price_per_kwh: electricity,
        lifetime_months,
        ops_cost_per_month: ops,
        energy_cost_per_hour,
        total_cost_of_ownership: total,
        amortized_cost_per_hour: amortized,
        job_cost: plan.hours * amortized,
        currency: plan.currency,
        break_even: Vec::new(),
    }
}

impl SelfBuild {
    /// Owning for h hours costs hardware + h·(energy + ops per hour); renting costs
    /// h·price. They meet at hardware / (price − running cost); `None` when renting
    /// costs less than running the hardware.
    pub fn break_even_hours(&self, price_per_hour: f64) -> Option<f64> {
        let running_per_hour =
            self.energy_cost_per_hour + self.ops_cost_per_month / HOURS_PER_MONTH;
        let margin = price_per_hour - running_per_hour;
        (margin > 0.0).then(|| self.hardware_cost / margin)
    }

    fn break_even(&self, option: &CostOption) -> BreakEven {
        let hours = self.break_even_hours(option.price_per_hour);
        BreakEven {
            provider: option.provider.clone(),
            sku: option.sku.clone(),
            price_type: option.price_type,
            price_per_hour: option.price_per_hour,
            break_even_hours: hours,
            break_even_days: hours.map(|h| h / 24.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use proptest::prelude::*;

    use super::*;
    use crate::catalog::Catalog;

    fn now() -> jiff::Timestamp {
        "2026-11-29T00:00:00Z".parse().unwrap()
    }

    fn catalog() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| Catalog::embedded().unwrap())
    }

    fn book() -> &'static PriceBook {
        static BOOK: OnceLock<PriceBook> = OnceLock::new();
        BOOK.get_or_init(|| PriceBook::embedded(|g| catalog().gpu(g).is_some(), now()).0)
    }

    fn fx() -> &'static Fx {
        static FX: OnceLock<Fx> = OnceLock::new();
        FX.get_or_init(|| Fx {
            cny_per_usd: 7.2,
            as_of: "2026-09".into(),
            source: "test".into(),
        })
    }

    fn plan(gpu: &str, gpus: u64, hours: f64) -> CostPlan<'static> {
        CostPlan {
            gpu: catalog().gpu(gpu).unwrap(),
            gpus,
            hours,
            filter: PriceFilter::default(),
            use_book: true,
            custom_quotes: Vec::new(),
            currency: Currency::Usd,
            fx: fx(),
            spot: SpotInputs::default(),
            self_build: None,
            now: now(),
        }
    }

    /// Owning the hardware at `hardware_cost`, every other input defaulted.
    fn owning(hardware_cost: f64, ops_cost_per_month: Option<f64>) -> SelfBuildInputs {
        SelfBuildInputs {
            hardware_cost,
            power_kw: None,
            electricity_price_per_kwh: None,
            pue: None,
            lifetime_months: None,
            ops_cost_per_month,
        }
    }

    /// Answers compared as their JSON (they have no `PartialEq`).
    fn json<T: Serialize>(value: &T) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
    }

    /// GPUs the book prices.
    fn priced_gpus() -> Vec<String> {
        let mut ids: Vec<String> = book().quotes().iter().map(|q| q.gpu.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    #[test]
    fn young_daly_is_the_square_root_of_twice_write_time_times_mtbf() {
        let spot = SpotInputs {
            interruptions_per_hour: Some(0.1),
            checkpoint_write_minutes: Some(2.0),
            ..SpotInputs::default()
        };
        let aws = &book().quotes()[0];
        let (_, detail) = spot_hours(10.0, 1, &spot, aws).unwrap();
        // MTBF 600 minutes: √(2 · 2 · 600) ≈ 49 minutes.
        let interval = detail.young_daly_interval_minutes.unwrap();
        assert!((interval - (2.0f64 * 2.0 * 600.0).sqrt()).abs() < 1e-9);
        assert_eq!(detail.checkpoint_interval_minutes, Some(interval));
        // Two instances fail twice as often.
        let (_, two) = spot_hours(10.0, 2, &spot, aws).unwrap();
        assert!((two.young_daly_interval_minutes.unwrap() - interval / 2f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn spot_hours_add_checkpoint_writes_and_rework() {
        let spot = |interval| SpotInputs {
            interruptions_per_hour: Some(0.1),
            checkpoint_interval_minutes: interval,
            checkpoint_write_minutes: Some(2.0),
            restart_minutes: Some(6.0),
        };
        let aws = &book().quotes()[0];
        // 10 h of progress, a 2-minute checkpoint every 60 minutes: 10 · 2/60 h of writes;
        // each interruption (0.1 an hour) loses the 6-minute restart and half an interval:
        // 0.6 h, so progress runs 1 − 0.1 · 0.6 = 0.94 of the time.
        let (hours, _) = spot_hours(10.0, 1, &spot(Some(60.0)), aws).unwrap();
        let expected = (10.0 + 10.0 * 2.0 / 60.0) / 0.94;
        assert!(
            (hours - expected).abs() < 1e-9,
            "{hours} against {expected}"
        );
        // The Young/Daly interval it reports bills less than half or twice that interval.
        let (optimal, detail) = spot_hours(10.0, 1, &spot(None), aws).unwrap();
        let interval = detail.checkpoint_interval_minutes.unwrap();
        for other in [interval / 2.0, interval * 2.0] {
            let (billed, _) = spot_hours(10.0, 1, &spot(Some(other)), aws).unwrap();
            assert!(
                optimal < billed,
                "{other} min: {billed} h, optimum {optimal} h"
            );
        }
    }

    #[test]
    fn free_checkpoints_leave_only_restarts_to_redo() {
        let spot = SpotInputs {
            interruptions_per_hour: Some(0.1),
            checkpoint_write_minutes: Some(0.0),
            restart_minutes: Some(6.0),
            ..SpotInputs::default()
        };
        let aws = &book().quotes()[0];
        let (hours, detail) = spot_hours(10.0, 1, &spot, aws).unwrap();
        assert_eq!(detail.checkpoint_interval_minutes, Some(0.0));
        // Each interruption costs its 6-minute restart: 10 h / (1 − 0.1 · 0.1 h).
        assert!((hours - 10.0 / 0.99).abs() < 1e-9, "{hours}");
        assert!(detail.expected_interruptions.is_finite());
    }

    #[test]
    fn interruptions_faster_than_progress_leave_the_option_out() {
        let mut p = plan("h100-80gb", 64, 100.0);
        p.spot.interruptions_per_hour = Some(5.0);
        p.filter.price_types = vec![PriceType::Spot];
        let answer = estimate(&p, book());
        assert!(answer.options.is_empty());
        assert!(
            answer
                .warnings
                .iter()
                .any(|w| w.contains("faster than the job"))
        );
    }

    #[test]
    fn reserved_options_come_only_from_providers_that_sell_commitments() {
        let answer = estimate(&plan("h100-80gb", 8, 100.0), book());
        let reserved: Vec<&CostOption> = answer
            .options
            .iter()
            .filter(|o| matches!(o.price_type, PriceType::Reserved1y | PriceType::Reserved3y))
            .collect();
        assert!(!reserved.is_empty());
        for o in reserved {
            assert!(
                COMMITMENT_PROVIDERS.contains(&o.provider.as_str()),
                "{}",
                o.provider
            );
        }
    }

    proptest! {
        #[test]
        fn cost_is_never_negative_and_rounding_never_undercounts(
            gpu_index in 0usize..16,
            gpus in 1u64..=512,
            hours in 1e-3f64..1e5,
            // The validator's whole ranges, their ends drawn on purpose: a range alone
            // almost never draws an end exactly, and a write time of exactly 0 once made
            // every spot option NaN.
            interruptions in prop::option::of(prop_oneof![Just(0.0), 0.0f64..=10.0, Just(10.0)]),
            write in prop::option::of(prop_oneof![Just(0.0), 0.0f64..=1440.0, Just(1440.0)]),
            restart in prop::option::of(prop_oneof![Just(0.0), 0.0f64..=1440.0, Just(1440.0)]),
            interval in prop::option::of(prop_oneof![Just(1.0), 1.0f64..=10080.0, Just(10080.0)]),
            yuan in any::<bool>(),
        ) {
            let ids = priced_gpus();
            let mut p = plan(&ids[gpu_index % ids.len()], gpus, hours);
            p.spot = SpotInputs {
                checkpoint_interval_minutes: interval,
                checkpoint_write_minutes: write,
                restart_minutes: restart,
                interruptions_per_hour: interruptions,
            };
            p.currency = if yuan { Currency::Cny } else { Currency::Usd };
            p.self_build = Some(owning(1e5, None));
            let answer = estimate(&p, book());
            for o in &answer.options {
                prop_assert!(o.cost.is_finite() && o.cost >= 0.0, "{o:?}");
                prop_assert!(o.hours.is_finite() && o.hours >= hours && o.rework_hours >= 0.0);
                if let Some(spot) = &o.spot {
                    prop_assert!(spot.expected_interruptions.is_finite(), "{spot:?}");
                    prop_assert!(spot.checkpoint_interval_minutes.is_none_or(f64::is_finite));
                }
                prop_assert!(o.gpus_rented >= gpus, "{o:?}");
                prop_assert!(o.gpus_rented < gpus + o.gpus_per_instance);
            }
            let build = answer.self_build.unwrap();
            prop_assert!(build.total_cost_of_ownership >= 0.0 && build.job_cost >= 0.0);
        }

        #[test]
        fn cheapest_answers_what_the_whole_estimate_answers(
            gpu_index in 0usize..16,
            gpus in 1u64..=512,
            hours in 1e-3f64..1e5,
            yuan in any::<bool>(),
        ) {
            let ids = priced_gpus();
            let mut p = plan(&ids[gpu_index % ids.len()], gpus, hours);
            p.currency = if yuan { Currency::Cny } else { Currency::Usd };
            p.self_build = Some(owning(2e5, Some(500.0)));
            let whole = estimate(&p, book());
            let best = cheapest(&p, &book_rows(&p, book()));
            prop_assert_eq!(best.len(), whole.cheapest.len());
            prop_assert!(best.is_sorted_by(|a, b| a.cost <= b.cost));
            let whole_build = whole.self_build.unwrap();
            let build = self_build(&p, &p.self_build.unwrap());
            for b in &best {
                let o = &whole.cheapest[b.price_type.name()];
                prop_assert_eq!(
                    (&b.quote.provider, &b.quote.region, &b.quote.sku),
                    (&o.provider, &o.region, &o.sku)
                );
                prop_assert_eq!(b.price_per_hour.to_bits(), o.price_per_hour.to_bits());
                prop_assert_eq!(b.hours.to_bits(), o.hours.to_bits());
                prop_assert_eq!(b.cost.to_bits(), o.cost.to_bits());
                prop_assert_eq!(
                    b.checkpoint_interval_minutes,
                    o.spot.as_ref().and_then(|s| s.checkpoint_interval_minutes)
                );
                let listed = whole_build
                    .break_even
                    .iter()
                    .find(|w| w.provider == o.provider && w.sku == o.sku && w.price_type == o.price_type)
                    .unwrap();
                prop_assert_eq!(build.break_even_hours(b.price_per_hour), listed.break_even_hours);
            }
            prop_assert_eq!(json(&build), json(&SelfBuild { break_even: Vec::new(), ..whole_build }));
        }

        #[test]
        fn spot_rework_is_zero_when_interruptions_are_zero(
            gpu_index in 0usize..16,
            gpus in 1u64..=512,
            hours in 1e-3f64..1e5,
            write in prop::option::of(0.0f64..60.0),
            interval in prop::option::of(1.0f64..600.0),
        ) {
            let ids = priced_gpus();
            let mut p = plan(&ids[gpu_index % ids.len()], gpus, hours);
            p.spot = SpotInputs {
                checkpoint_interval_minutes: interval,
                checkpoint_write_minutes: write,
                restart_minutes: None,
                interruptions_per_hour: Some(0.0),
            };
            for o in estimate(&p, book()).options {
                prop_assert_eq!(o.rework_hours, 0.0);
            }
        }
    }
}
