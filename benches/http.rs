//! The whole request path in process — routing, middleware, body parsing, the estimate and
//! its JSON — without sockets, for the requests `scripts/load.sh` sends. Set against
//! `/livez` it shows what each endpoint adds beyond the HTTP stack; each endpoint is
//! measured estimating every request and answering a repeat from the answer cache. Run with
//! `cargo bench --bench http`.

use std::sync::Arc;
use std::time::Duration;

use actix_web::test::{self, TestRequest};
use actix_web::web;
use criterion::{Criterion, criterion_group, criterion_main};
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::{Fx, Pricing};

/// The binary's allocator, so that these figures are what `trainplan serve` does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The load script's request bodies.
const MEMORY: &str = r#"{"model": "llama-3.1-8b", "method": "lora", "lora": {"alpha": 16}, "gpu": "a100-80gb", "parallelism": {"gpus": 2}}"#;
const COST: &str = r#"{"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb", "parallelism": {"gpus": 2}, "workload": {"tokens": 2e8}}"#;
const RECOMMEND: &str =
    r#"{"model": "llama-2-7b", "dataset": {"samples": 20000}, "quality": "balanced"}"#;

fn benches(c: &mut Criterion) {
    let system = actix_web::rt::System::new();
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let fx = Fx {
        cny_per_usd: 7.2,
        as_of: "2026-09".into(),
        source: "bench".into(),
    };
    // Every request estimated (no answer cache), and repeats answered from the cache.
    let state = |lifetime| {
        let (pricing, _) = Pricing::embedded(&catalog, fx.clone());
        web::Data::new(
            AppState::new(catalog.clone(), pricing, 65_536)
                .with_answer_cache(Duration::from_secs(lifetime), 64 << 20),
        )
    };
    let estimated = system.block_on(test::init_service(app(state(0))));
    let reused = system.block_on(test::init_service(app(state(3600))));
    let call = |request: TestRequest, reuse: bool| {
        system.block_on(async {
            let service = if reuse { &reused } else { &estimated };
            let response = test::call_service(service, request.to_request()).await;
            assert!(response.status().is_success());
            test::read_body(response).await.len()
        })
    };
    c.bench_function("http: GET /livez", |b| {
        b.iter(|| call(TestRequest::get().uri("/livez"), false))
    });
    for (name, path, body) in [
        ("http: POST memory", "/v1/estimates/memory", MEMORY),
        ("http: POST cost", "/v1/estimates/cost", COST),
        (
            "http: POST recommendations",
            "/v1/recommendations",
            RECOMMEND,
        ),
    ] {
        for (how, reuse) in [("estimated", false), ("repeat, answer reused", true)] {
            c.bench_function(&format!("{name} ({how})"), |b| {
                b.iter(|| {
                    call(
                        TestRequest::post()
                            .uri(path)
                            .insert_header(("content-type", "application/json"))
                            .set_payload(body),
                        reuse,
                    )
                })
            });
        }
    }
}

criterion_group!(http_benches, benches);
criterion_main!(http_benches);
