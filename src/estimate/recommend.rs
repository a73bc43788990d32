//! The strategy recommendation (design §3.4): the seed article's decision tree, made
//! executable. Every node records the value it saw and the branch it took; hardware
//! comes from the memory estimator (smallest fleet that fits, and larger ones for
//! deadlines), hours from the time estimator, money from the cost estimator and the book.
//!
//! Pure: the catalog's GPUs, the book, the rate and "now" come in as arguments.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cost::{self, CostPlan, SelfBuildInputs, SpotInputs};
use super::memory::{MemoryPlan, Prepared};
use super::time::{self, TimePlan};
use super::units::GIB;
use super::{
    Attention, Framework, Method, ModelShape, Optimizations, Optimizer, Parallelism, Precision,
    Projection, Targets,
};
use crate::catalog::Gpu;
use crate::pricing::{Currency, Fx, PriceBook, PriceFilter, PriceType};

/// The article's data-size thresholds: "> 100k samples" for full fine-tuning; "small
/// data" (prefix tuning, adapters) taken as under 10k samples, between its 2k example and
/// its 20k LoRA example.
const LARGE_DATASET_SAMPLES: f64 = 100_000.0;
const SMALL_DATASET_SAMPLES: f64 = 10_000.0;
/// "Short or experimental": a project of up to three months. "Long and stable": a year
/// or more.
const SHORT_PROJECT_MONTHS: f64 = 3.0;
const LONG_PROJECT_MONTHS: f64 = 12.0;
/// Fleet sizes tried per GPU: the smallest that fits, then doublings up to this.
const MAX_FLEET: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Quality {
    Max,
    #[default]
    Balanced,
    Budget,
}

/// How demanding the task is: `simple` (classification, extraction, a style), `general`
/// (instruction following, chat), `complex` (reasoning, domain adaptation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    Simple,
    #[default]
    General,
    Complex,
}

/// How to pay for the hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Deployment {
    Spot,
    OnDemand,
    Reserved,
    SelfBuild,
    /// Reserved or owned capacity for the steady load, spot for the experiments.
    Hybrid,
}

/// Everything the tree looks at.
#[derive(Debug, Clone)]
pub struct RecommendInputs<'a> {
    pub model: ModelShape,
    pub task: TaskType,
    pub quality: Quality,
    pub samples: f64,
    pub tokens_per_sample: u64,
    pub epochs: f64,
    pub deadline_hours: Option<f64>,
    /// Money for the whole project, in `currency`.
    pub budget: Option<f64>,
    pub currency: Currency,
    pub project_months: f64,
    /// Training runs expected over the project.
    pub runs: f64,
    pub can_operate_hardware: bool,
    /// Hardware price per GPU for a self-build (in `currency`); without it self-build is
    /// not evaluated.
    pub hardware_cost_per_gpu: Option<f64>,
    pub ops_cost_per_month: Option<f64>,
    pub providers: Vec<String>,
    pub price_types: Vec<PriceType>,
    /// The GPUs to consider.
    pub gpus: Vec<&'a Gpu>,
    pub fx: &'a Fx,
    pub now: jiff::Timestamp,
}

/// One node of the tree: what it looked at, the value it saw, the branch it took.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Node {
    #[schema(example = "method")]
    pub node: &'static str,
    #[schema(example = "200000 samples, quality max, budget unlimited")]
    pub value: String,
    #[schema(example = "full fine-tuning: over 100k samples and maximum quality")]
    pub branch: String,
}

/// A priced fleet.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PlanOption {
    pub method: &'static str,
    pub gpu: String,
    pub gpus: u64,
    pub zero_stage: u8,
    pub provider: String,
    pub region: String,
    pub sku: String,
    pub price_type: String,
    /// Spot: the checkpoint interval (Young/Daly unless given).
    pub checkpoint_interval_minutes: Option<f64>,
    pub memory_per_gpu_gib: f64,
    pub hours: f64,
    /// For one run.
    pub cost: f64,
    /// Over the project's runs.
    pub project_cost: f64,
    pub currency: Currency,
}

/// A fleet that was not chosen, and why.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Rejected {
    pub gpu: String,
    pub gpus: u64,
    #[schema(example = "too slow: 310 h against a 168 h deadline")]
    pub reason: String,
}

/// The answer of `/v1/recommendations`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Recommendation {
    pub path: Vec<Node>,
    pub method: &'static str,
    pub deployment: Deployment,
    /// The cheapest plan that fits, meets the deadline and the budget (absent when none
    /// does; `rejected` says why).
    pub plan: Option<PlanOption>,
    /// Other plans that meet the deadline, cheapest first.
    pub alternatives: Vec<PlanOption>,
    pub rejected: Vec<Rejected>,
    pub assumptions: Vec<String>,
    pub warnings: Vec<String>,
}

/// One fleet on one GPU, evaluated.
struct Candidate<'b> {
    gpu: String,
    gpus: u64,
    zero_stage: u8,
    memory_gib: f64,
    hours: f64,
    /// The cheapest book option of each price type, and the self-build.
    options: Vec<cost::Cheapest<'b>>,
    self_build: Option<cost::SelfBuild>,
}

impl<'b> Candidate<'b> {
    fn option(&self, price_type: PriceType) -> Option<&cost::Cheapest<'b>> {
        self.options.iter().find(|o| o.price_type == price_type)
    }
}

/// A fleet size and ZeRO stage with its memory per GPU, which is the same on every GPU.
struct Fleet {
    plan: MemoryPlan,
    device_bytes: f64,
}

impl Fleet {
    fn gpus(&self) -> u64 {
        self.plan.parallelism.gpus
    }
}

/// Every fleet a GPU may be tried with, in the order they are tried, grouped by size: 1,
/// 2, 4, … up to [`MAX_FLEET`]; at each size, PEFT keeps plain data parallel when the
/// frozen base fits on each GPU, and full fine-tuning shards everything (ZeRO-3) as soon
/// as there are several GPUs.
fn fleets(inputs: &RecommendInputs, method: Method) -> Vec<Fleet> {
    let mut fleets = Vec::new();
    let mut n = 1;
    while n <= MAX_FLEET {
        let stages: &[u8] = if n == 1 {
            &[0]
        } else if matches!(method, Method::Full) {
            &[3]
        } else {
            &[0, 3]
        };
        for &stage in stages {
            let plan = memory_plan(inputs, method, n, stage);
            let device_bytes = Prepared::new(&plan).breakdown(n, 1).device;
            fleets.push(Fleet { plan, device_bytes });
        }
        n *= 2;
    }
    fleets
}

fn method_for(inputs: &RecommendInputs, path: &mut Vec<Node>) -> Method {
    let q = [Projection::Q, Projection::K, Projection::V, Projection::O];
    let targets: Targets = q.into_iter().collect();
    let value = format!(
        "{} samples, quality {:?}, task {:?}",
        inputs.samples, inputs.quality, inputs.task
    )
    .to_lowercase();
    let (method, branch) =
        if inputs.samples > LARGE_DATASET_SAMPLES && inputs.quality == Quality::Max {
            (
                Method::Full,
                "full fine-tuning: over 100k samples and maximum quality",
            )
        } else if inputs.samples < SMALL_DATASET_SAMPLES
            && (inputs.task == TaskType::Simple || inputs.quality == Quality::Budget)
        {
            if inputs.quality == Quality::Budget {
                (
                    Method::PrefixTuning { virtual_tokens: 20 },
                    "prefix tuning: small data and very tight resources",
                )
            } else {
                (
                    Method::Adapter { bottleneck: 64 },
                    "adapters: small data, simple task",
                )
            }
        } else if inputs.quality == Quality::Budget {
            (
                Method::Qlora {
                    rank: 16,
                    targets,
                    double_quantization: true,
                },
                "QLoRA: medium data, cost first",
            )
        } else {
            (
                Method::Lora { rank: 16, targets },
                "LoRA: medium data, balance of quality and cost",
            )
        };
    path.push(Node {
        node: "method",
        value,
        branch: branch.into(),
    });
    method
}

fn memory_plan(inputs: &RecommendInputs, method: Method, gpus: u64, zero_stage: u8) -> MemoryPlan {
    MemoryPlan {
        model: inputs.model.clone(),
        method,
        precision: if matches!(method, Method::Full) {
            Precision::AmpBf16
        } else {
            Precision::Bf16
        },
        optimizer: Optimizer::Adamw,
        micro_batch_size: 1,
        sequence_length: inputs.tokens_per_sample.max(1),
        max_sample_tokens: None,
        gradient_checkpointing: true,
        attention: Attention::Flash,
        parallelism: Parallelism {
            gpus,
            zero_stage,
            ..Parallelism::single_gpu()
        },
        framework: Framework::Generic,
        optimizations: Optimizations::default(),
    }
}

/// Evaluates the fleets of one GPU: the smallest that fits, then doublings.
fn candidates_for<'b>(
    inputs: &RecommendInputs,
    book: &'b PriceBook,
    fleets: &[Fleet],
    gpu: &Gpu,
    rejected: &mut Vec<Rejected>,
) -> Vec<Candidate<'b>> {
    let usable = gpu.memory_bytes_usable as f64;
    let tokens = inputs.samples * inputs.tokens_per_sample as f64 * inputs.epochs;
    let mut cost_plan = CostPlan {
        gpu,
        gpus: 1,
        hours: 0.0,
        filter: PriceFilter {
            gpu: Some(gpu.id.clone()),
            providers: inputs.providers.clone(),
            regions: Vec::new(),
            price_types: inputs.price_types.clone(),
            max_age_hours: None,
        },
        use_book: true,
        custom_quotes: Vec::new(),
        currency: inputs.currency,
        fx: inputs.fx,
        spot: SpotInputs::default(),
        self_build: None,
        now: inputs.now,
    };
    let rows = cost::book_rows(&cost_plan, book);
    let mut found = Vec::new();
    let mut smallest = None;
    for size in fleets.chunk_by(|a, b| a.gpus() == b.gpus()) {
        let n = size[0].gpus();
        if let Some(fleet) = size.iter().find(|f| f.device_bytes <= usable) {
            smallest.get_or_insert(n);
            let time_plan = TimePlan {
                memory: fleet.plan.clone(),
                gpu,
                tokens,
                gradient_accumulation_steps: 1,
                gpus_per_node: gpu.gpus_per_node.min(n),
                mfu: None,
            };
            let Ok(hours) = time::wall_hours(&time_plan) else {
                rejected.push(Rejected {
                    gpu: gpu.id.clone(),
                    gpus: n,
                    reason: "no throughput figure for this GPU at the precision".into(),
                });
                break;
            };
            cost_plan.gpus = n;
            cost_plan.hours = hours;
            let self_build = inputs.hardware_cost_per_gpu.map(|per_gpu| {
                let owning = SelfBuildInputs {
                    hardware_cost: per_gpu * n as f64,
                    power_kw: None,
                    electricity_price_per_kwh: None,
                    pue: None,
                    lifetime_months: Some(inputs.project_months.max(1.0)),
                    ops_cost_per_month: inputs.ops_cost_per_month,
                };
                cost::self_build(&cost_plan, &owning)
            });
            found.push(Candidate {
                gpu: gpu.id.clone(),
                gpus: n,
                zero_stage: fleet.plan.parallelism.zero_stage,
                memory_gib: fleet.device_bytes / GIB,
                hours,
                options: cost::cheapest(&cost_plan, &rows),
                self_build,
            });
        } else if smallest.is_none() && n == MAX_FLEET {
            rejected.push(Rejected {
                gpu: gpu.id.clone(),
                gpus: n,
                reason: format!("does not fit on up to {MAX_FLEET} GPUs"),
            });
        }
        // Past the smallest fleet, try two doublings (for deadlines), no more.
        if smallest.is_some_and(|s| n >= s * 4) {
            break;
        }
    }
    found
}

/// `number` and `unit`, plural unless the number reads "1".
fn counted(number: String, unit: &str) -> String {
    let plural = if number == "1" { "" } else { "s" };
    format!("{number} {unit}{plural}")
}

fn deployment_for(
    inputs: &RecommendInputs,
    candidates: &[Candidate],
    path: &mut Vec<Node>,
) -> Deployment {
    let months = inputs.project_months;
    let short = months <= SHORT_PROJECT_MONTHS;
    let long = months >= LONG_PROJECT_MONTHS;
    // The cheapest on-demand fleet's GPU-hours over the project, against its break-even.
    let reference = candidates
        .iter()
        .filter_map(|c| c.option(PriceType::OnDemand).map(|o| (c, o)))
        .min_by(|a, b| a.1.cost.total_cmp(&b.1.cost));
    let project_hours = reference.map(|(c, _)| c.hours * inputs.runs);
    // Outer `None`: not evaluated; inner `None`: never (renting costs less than running).
    let break_even = reference.and_then(|(c, o)| {
        let build = c.self_build.as_ref()?;
        Some(build.break_even_hours(o.price_per_hour))
    });
    let break_even_text = match break_even {
        None if inputs.hardware_cost_per_gpu.is_none() => {
            "not evaluated (no hardware price)".to_string()
        }
        None => "not evaluated (no on-demand price)".to_string(),
        Some(None) => "never (renting on demand costs less than running the hardware)".to_string(),
        Some(Some(h)) => format!("{h:.0} h"),
    };
    let value = format!(
        "{}, {}, {} of use on the cheapest on-demand fleet, self-build break-even {break_even_text}, ops team: {}",
        counted(months.to_string(), "month"),
        counted(inputs.runs.to_string(), "run"),
        project_hours.map_or("n/a hours".into(), |h| counted(format!("{h:.0}"), "hour")),
        if inputs.can_operate_hardware {
            "yes"
        } else {
            "no"
        }
    );
    let owns = inputs.can_operate_hardware
        && matches!((project_hours, break_even), (Some(h), Some(Some(b))) if h >= b);
    let (deployment, branch) = if short {
        (
            Deployment::Spot,
            "spot with checkpoints: short or experimental work".to_string(),
        )
    } else if long && owns {
        let experiments =
            inputs.runs >= 20.0 && project_hours.is_some_and(|h| h / inputs.runs <= 24.0);
        if experiments {
            (
                Deployment::Hybrid,
                "hybrid: own hardware for the steady load, spot for the many short experiments"
                    .into(),
            )
        } else {
            (
                Deployment::SelfBuild,
                "self-build: long, steady use past the break-even, and a team to run it".into(),
            )
        }
    } else if long {
        let why = if inputs.can_operate_hardware {
            "below the self-build break-even"
        } else {
            "no team to run hardware"
        };
        (
            Deployment::Reserved,
            format!("reserved: long and stable, {why}"),
        )
    } else {
        (
            Deployment::OnDemand,
            "on demand: neither short enough for spot nor long enough to commit".into(),
        )
    };
    path.push(Node {
        node: "deployment",
        value,
        branch,
    });
    deployment
}

/// The price type a deployment rents; `None` for self-build and hybrid, which are priced
/// by the self-build.
fn price_type_of(deployment: Deployment, months: f64) -> Option<PriceType> {
    match deployment {
        Deployment::Spot => Some(PriceType::Spot),
        Deployment::OnDemand => Some(PriceType::OnDemand),
        Deployment::Reserved if months >= 36.0 => Some(PriceType::Reserved3y),
        Deployment::Reserved => Some(PriceType::Reserved1y),
        Deployment::SelfBuild | Deployment::Hybrid => None,
    }
}

/// Runs the tree.
pub fn recommend(inputs: &RecommendInputs, book: &PriceBook) -> Recommendation {
    let mut path = vec![Node {
        node: "goal",
        value: format!(
            "quality {:?}, deadline {}, budget {}",
            inputs.quality,
            inputs
                .deadline_hours
                .map_or("none".into(), |h| format!("{h} h")),
            inputs
                .budget
                .map_or("none".into(), |b| format!("{b} {}", inputs.currency.code())),
        )
        .to_lowercase(),
        branch: "constraints recorded".into(),
    }];
    let mut warnings = Vec::new();
    let mut method = method_for(inputs, &mut path);
    let mut rejected = Vec::new();
    let evaluate = |method, rejected: &mut Vec<Rejected>| -> Vec<Candidate> {
        let fleets = fleets(inputs, method);
        inputs
            .gpus
            .iter()
            .flat_map(|gpu| candidates_for(inputs, book, &fleets, gpu, rejected))
            .collect()
    };
    let mut candidates = evaluate(method, &mut rejected);
    // "…and budget allows": when no full fine-tune fits the budget, LoRA it is.
    if matches!(method, Method::Full)
        && let Some(budget) = inputs.budget
    {
        let cheapest = candidates
            .iter()
            .flat_map(|c| c.options.iter().map(|o| o.cost * inputs.runs))
            .fold(f64::INFINITY, f64::min);
        if cheapest > budget {
            let targets: Targets = [Projection::Q, Projection::K, Projection::V, Projection::O]
                .into_iter()
                .collect();
            method = Method::Lora { rank: 16, targets };
            path.push(Node {
                node: "budget",
                value: format!(
                    "cheapest full fine-tune {cheapest:.0} {} over the project",
                    inputs.currency.code()
                ),
                branch: "over budget: LoRA instead".into(),
            });
            rejected.clear();
            candidates = evaluate(method, &mut rejected);
        }
    }
    path.push(Node {
        node: "hardware",
        value: format!(
            "{} GPU types, {} fleets that fit",
            inputs.gpus.len(),
            candidates.len()
        ),
        branch: "smallest fleet per GPU that fits, and two doublings".into(),
    });
    let deployment = deployment_for(inputs, &candidates, &mut path);
    let wanted = price_type_of(deployment, inputs.project_months);
    let wanted_name = wanted.map_or("self_build", PriceType::name);

    let mut priced: Vec<PlanOption> = Vec::new();
    for c in &candidates {
        let option = match wanted {
            None => c.self_build.as_ref().map(|b| PlanOption {
                method: method.name(),
                gpu: c.gpu.clone(),
                gpus: c.gpus,
                zero_stage: c.zero_stage,
                provider: "self-build".into(),
                region: "own".into(),
                sku: format!("{} × {}", c.gpus, c.gpu),
                price_type: wanted_name.into(),
                checkpoint_interval_minutes: None,
                memory_per_gpu_gib: c.memory_gib,
                hours: c.hours,
                cost: c.hours * b.amortized_cost_per_hour,
                project_cost: b.total_cost_of_ownership,
                currency: inputs.currency,
            }),
            Some(price_type) => c.option(price_type).map(|o| PlanOption {
                method: method.name(),
                gpu: c.gpu.clone(),
                gpus: c.gpus,
                zero_stage: c.zero_stage,
                provider: o.quote.provider.clone(),
                region: o.quote.region.clone(),
                sku: o.quote.sku.clone(),
                price_type: wanted_name.into(),
                checkpoint_interval_minutes: o.checkpoint_interval_minutes,
                memory_per_gpu_gib: c.memory_gib,
                hours: o.hours,
                cost: o.cost,
                project_cost: o.cost * inputs.runs,
                currency: inputs.currency,
            }),
        };
        let Some(option) = option else {
            rejected.push(Rejected {
                gpu: c.gpu.clone(),
                gpus: c.gpus,
                reason: format!("no {wanted_name} price"),
            });
            continue;
        };
        if let Some(deadline) = inputs.deadline_hours.filter(|d| option.hours > *d) {
            rejected.push(Rejected {
                gpu: c.gpu.clone(),
                gpus: c.gpus,
                reason: format!(
                    "too slow: {:.0} h against a {deadline} h deadline",
                    option.hours
                ),
            });
            continue;
        }
        if let Some(budget) = inputs.budget.filter(|b| option.project_cost > *b) {
            rejected.push(Rejected {
                gpu: c.gpu.clone(),
                gpus: c.gpus,
                reason: format!(
                    "over budget: {:.0} against {budget} {}",
                    option.project_cost,
                    inputs.currency.code()
                ),
            });
            continue;
        }
        priced.push(option);
    }
    priced.sort_by(|a, b| a.project_cost.total_cmp(&b.project_cost));
    if priced.is_empty() {
        warnings.push("no plan meets every constraint; see rejected".into());
    }
    let plan = (!priced.is_empty()).then(|| priced.remove(0));
    if let Some(p) = &plan {
        path.push(Node {
            node: "plan",
            value: format!("{} plans meet the deadline and budget", priced.len() + 1),
            branch: format!(
                "cheapest: {} × {} on {} {} ({})",
                p.gpus, p.gpu, p.provider, p.sku, p.price_type
            ),
        });
    }
    Recommendation {
        path,
        method: method.name(),
        deployment,
        plan,
        alternatives: priced,
        rejected,
        assumptions: vec![
            "per-GPU micro-batch 1 with gradient checkpointing, AdamW; full fine-tuning in amp_bf16, PEFT on a bf16 base".into(),
            "self-build priced over the project's months as its lifetime".into(),
            format!("project runs: {}", inputs.runs),
        ],
        warnings,
    }
}
