//! Estimator speed: memory (one estimate, and with the fit table for every catalog GPU),
//! time, cost across the whole embedded price book, and a full recommendation. Run with
//! `cargo bench --bench estimate`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use trainplan::catalog::Catalog;
use trainplan::estimate::cost::{self, CostPlan, SelfBuildInputs, SpotInputs};
use trainplan::estimate::memory::{MemoryPlan, Prepared, estimate};
use trainplan::estimate::recommend::{Quality, RecommendInputs, TaskType, recommend};
use trainplan::estimate::time::{self, TimePlan};
use trainplan::estimate::{
    Attention, Framework, Method, ModelShape, Optimizations, Optimizer, Parallelism, Precision,
    Projection,
};
use trainplan::pricing::{Currency, Fx, PriceBook, PriceFilter};

/// The binary's allocator, so that these figures are what `trainplan serve` does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn plan(catalog: &Catalog) -> MemoryPlan {
    MemoryPlan {
        model: ModelShape::from_architecture(
            catalog.model("llama-3.1-8b").unwrap().architecture.clone(),
        ),
        method: Method::Lora {
            rank: 16,
            targets: Projection::ALL.into_iter().collect(),
        },
        precision: Precision::Bf16,
        optimizer: Optimizer::Adamw,
        micro_batch_size: 4,
        sequence_length: 4096,
        max_sample_tokens: None,
        gradient_checkpointing: true,
        attention: Attention::Flash,
        parallelism: Parallelism {
            gpus: 8,
            zero_stage: 3,
            ..Parallelism::single_gpu()
        },
        framework: Framework::HfTrainer,
        optimizations: Optimizations::default(),
    }
}

fn benches(c: &mut Criterion) {
    let catalog = Catalog::embedded().unwrap();
    let plan = plan(&catalog);
    c.bench_function("memory: one estimate (timeline only)", |b| {
        b.iter(|| Prepared::new(black_box(&plan)).breakdown(8, 4))
    });
    let one_gpu = vec![catalog.gpu("a100-80gb").unwrap().clone()];
    c.bench_function("memory: full answer, one GPU", |b| {
        b.iter(|| estimate(black_box(&plan), &one_gpu))
    });
    // The configuration scripts/load.sh also gives llm-analysis: Llama-2-70B, full
    // fine-tuning, ZeRO-3 over 32 A100 80GB, micro-batch 1 × 2,048, full recompute.
    let mut seventy = plan.clone();
    seventy.model =
        ModelShape::from_architecture(catalog.model("llama-2-70b").unwrap().architecture.clone());
    seventy.method = Method::Full;
    seventy.precision = Precision::AmpBf16;
    seventy.micro_batch_size = 1;
    seventy.sequence_length = 2048;
    seventy.parallelism.gpus = 32;
    c.bench_function(
        "memory: llama-2-70b ZeRO-3 on 32 A100 (llm-analysis config)",
        |b| b.iter(|| estimate(black_box(&seventy), &one_gpu)),
    );
    c.bench_function(
        "memory: full answer, fit table for every catalog GPU",
        |b| b.iter(|| estimate(black_box(&plan), catalog.gpus())),
    );

    let h100 = catalog.gpu("h100-80gb").unwrap();
    let time_plan = TimePlan {
        memory: plan.clone(),
        gpu: h100,
        tokens: 2e9,
        gradient_accumulation_steps: 1,
        gpus_per_node: 8,
        mfu: None,
    };
    c.bench_function("time: one estimate", |b| {
        b.iter(|| time::estimate(black_box(&time_plan)))
    });

    let now = jiff::Timestamp::now();
    let (book, _) = PriceBook::embedded(|g| catalog.gpu(g).is_some(), now);
    let fx = Fx {
        cny_per_usd: 7.2,
        as_of: "2026-09".into(),
        source: "bench".into(),
    };
    // Every provider and price type the book has for the H100 (its largest GPU), spot
    // rework and the self-build break-even against every option.
    let cost_plan = CostPlan {
        gpu: h100,
        gpus: 8,
        hours: 120.0,
        filter: PriceFilter::default(),
        use_book: true,
        custom_quotes: Vec::new(),
        currency: Currency::Cny,
        fx: &fx,
        spot: SpotInputs::default(),
        self_build: Some(SelfBuildInputs {
            hardware_cost: 2.5e6,
            power_kw: None,
            electricity_price_per_kwh: None,
            pue: None,
            lifetime_months: None,
            ops_cost_per_month: None,
        }),
        now,
    };
    c.bench_function(
        "cost: whole book for one GPU, all providers and price types",
        |b| b.iter(|| cost::estimate(black_box(&cost_plan), &book)),
    );

    // The decision tree over every GPU the book prices: fleets, times and costs.
    let inputs = RecommendInputs {
        model: ModelShape::from_architecture(
            catalog.model("llama-2-7b").unwrap().architecture.clone(),
        ),
        task: TaskType::General,
        quality: Quality::Max,
        samples: 200_000.0,
        tokens_per_sample: 512,
        epochs: 3.0,
        deadline_hours: Some(48.0),
        budget: None,
        currency: Currency::Usd,
        project_months: 24.0,
        runs: 50.0,
        can_operate_hardware: true,
        hardware_cost_per_gpu: Some(15_000.0),
        ops_cost_per_month: None,
        providers: Vec::new(),
        price_types: Vec::new(),
        gpus: catalog
            .gpus()
            .iter()
            .filter(|g| book.quotes().iter().any(|q| q.gpu == g.id))
            .collect(),
        fx: &fx,
        now,
    };
    c.bench_function("recommendation: whole catalog and book", |b| {
        b.iter(|| recommend(black_box(&inputs), &book))
    });
}

criterion_group!(estimate_benches, benches);
criterion_main!(estimate_benches);
