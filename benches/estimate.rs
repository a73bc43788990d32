//! Estimator speed: one memory estimate, and one with the fit table for every catalog GPU.
//! Run with `cargo bench --bench estimate`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use trainplan::catalog::Catalog;
use trainplan::estimate::memory::{MemoryPlan, Prepared, estimate};
use trainplan::estimate::{
    Attention, Framework, Method, ModelShape, Optimizations, Optimizer, Parallelism, Precision,
    Projection,
};

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
    c.bench_function("memory: full answer, fit table for all 36 GPUs", |b| {
        b.iter(|| estimate(black_box(&plan), catalog.gpus()))
    });
}

criterion_group!(estimate_benches, benches);
criterion_main!(estimate_benches);
