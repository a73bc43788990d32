//! The whole request path in process — routing, middleware, body parsing, the estimate and
//! its JSON — without sockets, for the requests `scripts/load.sh` sends. Set against
//! `/livez` it shows what each endpoint adds beyond the HTTP stack. Run with
//! `cargo bench --bench http`.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use actix_web::web;
use criterion::{Criterion, criterion_group, criterion_main};
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::{Fx, Pricing};

/// The load script's request bodies.
const MEMORY: &str = r#"{"model": "llama-3.1-8b", "method": "lora", "gpu": "a100-80gb", "parallelism": {"gpus": 2}}"#;
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
    let (pricing, _) = Pricing::embedded(&catalog, fx);
    let state = web::Data::new(AppState::new(catalog, pricing, 65_536));
    let service = system.block_on(test::init_service(app(state)));
    let call = |request: TestRequest| {
        system.block_on(async {
            let response = test::call_service(&service, request.to_request()).await;
            assert!(response.status().is_success());
            test::read_body(response).await.len()
        })
    };
    c.bench_function("http: GET /livez", |b| {
        b.iter(|| call(TestRequest::get().uri("/livez")))
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
        c.bench_function(name, |b| {
            b.iter(|| {
                call(
                    TestRequest::post()
                        .uri(path)
                        .insert_header(("content-type", "application/json"))
                        .set_payload(body),
                )
            })
        });
    }
}

criterion_group!(http_benches, benches);
criterion_main!(http_benches);
