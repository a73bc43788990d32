//! Answer reuse: identical estimate requests share one answer, anything that changes the
//! answer (the body, the query, `Accept`, `Content-Type`, the price book) does not.

use std::sync::Arc;

use actix_web::dev::{Service, ServiceResponse};
use actix_web::{test, web};
use serde_json::{Value, json};
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::{BookKind, PriceBook, Pricing};

use crate::support::{fx, state};

struct Seen {
    status: u16,
    cache: String,
    body: Vec<u8>,
}

async fn send<S, B>(service: &S, request: test::TestRequest) -> Seen
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: actix_web::body::MessageBody,
{
    let response = test::call_service(service, request.to_request()).await;
    let status = response.status().as_u16();
    let cache = response
        .headers()
        .get("cache-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = test::read_body(response).await.to_vec();
    Seen {
        status,
        cache,
        body,
    }
}

fn post(path: &str, body: &Value) -> test::TestRequest {
    test::TestRequest::post()
        .uri(path)
        .insert_header(("content-type", "application/json"))
        .set_payload(body.to_string())
}

fn cost_request() -> Value {
    json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb",
           "parallelism": {"gpus": 2}, "workload": {"tokens": 2e8}})
}

fn embedded() -> (Arc<Catalog>, Pricing) {
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let (pricing, _) = Pricing::embedded(&catalog, fx());
    (catalog, pricing)
}

fn hits(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with("answer_cache_requests_total{result=\"hit\"}"))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

#[actix_web::test]
async fn a_repeated_request_gets_the_first_answer_and_says_so() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(send(&service, post("/v1/estimates/cost", &cost_request())).await);
    }
    assert!(seen.iter().all(|s| s.status == 200));
    // Kept when the request comes a second time, reused from the third.
    assert_eq!(seen[0].cache, "trainplan; fwd=miss");
    assert_eq!(seen[1].cache, "trainplan; fwd=miss; stored");
    assert!(
        seen[2].cache.starts_with("trainplan; hit; ttl="),
        "{}",
        seen[2].cache
    );
    assert!(seen.iter().all(|s| s.body == seen[1].body));
    let metrics = send(&service, test::TestRequest::get().uri("/metrics")).await;
    assert_eq!(hits(&String::from_utf8_lossy(&metrics.body)), Some(1));

    // The GET form (a spreadsheet cell refreshing one URL) is reused the same way.
    let url = "/v1/estimates/memory?model=llama-2-7b&format=text&field=per_gpu.total_gib";
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(send(&service, test::TestRequest::get().uri(url)).await);
    }
    assert!(seen[2].cache.contains("hit"), "{}", seen[2].cache);
    assert_eq!(seen[0].body, seen[2].body);
}

#[actix_web::test]
async fn one_off_requests_are_not_kept() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    for tokens in 1..=20 {
        let mut request = cost_request();
        request["workload"]["tokens"] = json!(tokens as f64 * 1e8);
        let seen = send(&service, post("/v1/estimates/cost", &request)).await;
        assert_eq!(
            (seen.status, seen.cache.as_str()),
            (200, "trainplan; fwd=miss")
        );
    }
}

#[actix_web::test]
async fn anything_that_changes_the_answer_is_a_different_request() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    // The base request twice: its answer is kept.
    send(&service, post("/v1/estimates/cost", &cost_request())).await;
    let base = send(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert_eq!(base.cache, "trainplan; fwd=miss; stored");

    let mut longer = cost_request();
    longer["workload"]["tokens"] = json!(4e8);
    let other = send(&service, post("/v1/estimates/cost", &longer)).await;
    assert_eq!(other.cache, "trainplan; fwd=miss");
    assert_ne!(other.body, base.body);

    let csv = send(
        &service,
        post("/v1/estimates/cost", &cost_request()).insert_header(("accept", "text/csv")),
    )
    .await;
    assert_eq!(csv.cache, "trainplan; fwd=miss");
    assert!(
        csv.body.starts_with(b"options.provider,"),
        "{}",
        String::from_utf8_lossy(&csv.body)
    );

    let query = send(
        &service,
        post(
            "/v1/estimates/cost?format=text&field=options.0.cost",
            &cost_request(),
        ),
    )
    .await;
    assert!(query.cache.contains("miss"), "{}", query.cache);
    assert_ne!(query.body, base.body);

    // The same bytes as a cached JSON answer, sent as plain text: still refused.
    let plain = send(
        &service,
        test::TestRequest::post()
            .uri("/v1/estimates/cost")
            .insert_header(("content-type", "text/plain"))
            .set_payload(cost_request().to_string()),
    )
    .await;
    assert_eq!(plain.status, 415);
}

#[actix_web::test]
async fn errors_are_worked_out_every_time() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    let bad = json!({"model": "llama-2-7b", "micro_batch_size": 0});
    for _ in 0..2 {
        let seen = send(&service, post("/v1/estimates/memory", &bad)).await;
        assert_eq!(seen.status, 422);
        assert_eq!(seen.cache, "trainplan; fwd=miss");
    }
    // A body over the limit is not read by the cache: the handler answers 413.
    let huge = format!(
        "{{\"model\": \"{}\"}}",
        "x".repeat(crate::support::BODY_LIMIT)
    );
    let seen = send(
        &service,
        test::TestRequest::post()
            .uri("/v1/estimates/memory")
            .insert_header(("content-type", "application/json"))
            .set_payload(huge),
    )
    .await;
    assert_eq!(seen.status, 413);
}

#[actix_web::test]
async fn a_new_price_book_retires_the_answers_made_with_the_old_one() {
    let (catalog, pricing) = embedded();
    let state = state(catalog, pricing);
    let service = test::init_service(app(state.clone())).await;
    send(&service, post("/v1/estimates/cost", &cost_request())).await;
    let before = send(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert_eq!(before.cache, "trainplan; fwd=miss; stored");
    let rows = |seen: &Seen| {
        serde_json::from_slice::<Value>(&seen.body).unwrap()["prices_source"]["rows"].clone()
    };
    assert_eq!(before.status, 200);

    // A refresh lands: the same rows less the first A100 80GB one.
    let book = state.pricing.book.load_full();
    let mut quotes = book.quotes().to_vec();
    let first = quotes.iter().position(|q| q.gpu == "a100-80gb").unwrap();
    quotes.remove(first);
    let live = PriceBook::new(
        quotes,
        BookKind::Live,
        Some("test".into()),
        jiff::Timestamp::now(),
    );
    state.pricing.book.store(Arc::new(live));

    let after = send(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert!(after.cache.contains("fwd=miss"), "{}", after.cache);
    assert_eq!(rows(&after), json!(book.quotes().len() - 1));
    assert_eq!(rows(&before), json!(book.quotes().len()));
}

#[actix_web::test]
async fn with_no_lifetime_every_request_is_estimated() {
    let (catalog, pricing) = embedded();
    let state = web::Data::new(
        AppState::new(catalog, pricing, crate::support::BODY_LIMIT)
            .with_answer_cache(std::time::Duration::ZERO, 64 << 20),
    );
    let service = test::init_service(app(state)).await;
    for _ in 0..3 {
        let seen = send(&service, post("/v1/estimates/cost", &cost_request())).await;
        assert_eq!((seen.status, seen.cache.as_str()), (200, ""));
    }
}
