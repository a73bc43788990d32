//! Answer reuse: identical estimate requests share one answer, anything that changes the
//! answer (the body, the query, `Accept`, `Content-Type`, the price book) does not.

use std::sync::Arc;

use actix_web::{test, web};
use serde_json::{Value, json};
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::{BookKind, PriceBook, Pricing};

use crate::support::{Reply, call_on, fx, state};

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
        seen.push(call_on(&service, post("/v1/estimates/cost", &cost_request())).await);
    }
    assert!(seen.iter().all(|s| s.status == 200));
    // Kept when the request comes a second time, reused from the third.
    assert_eq!(seen[0].header("cache-status"), "trainplan; fwd=miss");
    assert_eq!(
        seen[1].header("cache-status"),
        "trainplan; fwd=miss; stored"
    );
    assert!(
        seen[2]
            .header("cache-status")
            .starts_with("trainplan; hit; ttl="),
        "{}",
        seen[2].header("cache-status")
    );
    assert!(seen.iter().all(|s| s.body == seen[1].body));
    let metrics = call_on(&service, test::TestRequest::get().uri("/metrics")).await;
    assert_eq!(hits(&String::from_utf8_lossy(&metrics.body)), Some(1));

    // The GET form (a spreadsheet cell refreshing one URL) is reused the same way.
    let url = "/v1/estimates/memory?model=llama-2-7b&format=text&field=per_gpu.total_gib";
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(call_on(&service, test::TestRequest::get().uri(url)).await);
    }
    assert!(
        seen[2].header("cache-status").contains("hit"),
        "{}",
        seen[2].header("cache-status")
    );
    assert_eq!(seen[0].body, seen[2].body);
}

#[actix_web::test]
async fn one_off_requests_are_not_kept() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    for tokens in 1..=20 {
        let mut request = cost_request();
        request["workload"]["tokens"] = json!(tokens as f64 * 1e8);
        let seen = call_on(&service, post("/v1/estimates/cost", &request)).await;
        assert_eq!(
            (seen.status, seen.header("cache-status")),
            (200, "trainplan; fwd=miss")
        );
    }
}

#[actix_web::test]
async fn anything_that_changes_the_answer_is_a_different_request() {
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    // The base request twice: its answer is kept.
    call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    let base = call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert_eq!(base.header("cache-status"), "trainplan; fwd=miss; stored");

    let mut longer = cost_request();
    longer["workload"]["tokens"] = json!(4e8);
    let other = call_on(&service, post("/v1/estimates/cost", &longer)).await;
    assert_eq!(other.header("cache-status"), "trainplan; fwd=miss");
    assert_ne!(other.body, base.body);

    let csv = call_on(
        &service,
        post("/v1/estimates/cost", &cost_request()).insert_header(("accept", "text/csv")),
    )
    .await;
    assert_eq!(csv.header("cache-status"), "trainplan; fwd=miss");
    assert!(
        csv.body.starts_with(b"options.provider,"),
        "{}",
        String::from_utf8_lossy(&csv.body)
    );

    let query = call_on(
        &service,
        post(
            "/v1/estimates/cost?format=text&field=options.0.cost",
            &cost_request(),
        ),
    )
    .await;
    assert!(
        query.header("cache-status").contains("miss"),
        "{}",
        query.header("cache-status")
    );
    assert_ne!(query.body, base.body);

    // The same bytes as a cached JSON answer, sent as plain text: still refused.
    let plain = call_on(
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
        let seen = call_on(&service, post("/v1/estimates/memory", &bad)).await;
        assert_eq!(seen.status, 422);
        assert_eq!(seen.header("cache-status"), "trainplan; fwd=miss");
    }
    // A body over the limit is not read by the cache: the handler answers 413.
    let huge = format!(
        "{{\"model\": \"{}\"}}",
        "x".repeat(crate::support::BODY_LIMIT)
    );
    let seen = call_on(
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
    call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    let before = call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert_eq!(before.header("cache-status"), "trainplan; fwd=miss; stored");
    let rows = |seen: &Reply| {
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

    let after = call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert!(
        after.header("cache-status").contains("fwd=miss"),
        "{}",
        after.header("cache-status")
    );
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
        let seen = call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
        assert_eq!((seen.status, seen.header("cache-status")), (200, ""));
    }
}

#[actix_web::test]
async fn a_client_taking_gzip_gets_a_kept_answer_compressed() {
    use std::io::Read;
    let (catalog, pricing) = embedded();
    let service = test::init_service(app(state(catalog, pricing))).await;
    let gzip = || {
        post("/v1/estimates/cost", &cost_request())
            .insert_header(("accept-encoding", "gzip, deflate"))
    };
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(call_on(&service, gzip()).await);
    }
    // Worked out for the request at hand, kept or not: sent as it is.
    for worked_out in &seen[..2] {
        assert_eq!(worked_out.header("content-encoding"), "");
        assert_eq!(worked_out.body, seen[0].body);
    }
    assert!(seen[1].header("cache-status").contains("stored"));
    // Reused (from the third time): the gzip copy.
    for kept in &seen[2..] {
        assert_eq!(kept.header("content-encoding"), "gzip");
        assert_eq!(kept.header("content-type"), seen[0].header("content-type"));
        assert!(
            kept.body.len() * 4 < seen[0].body.len(),
            "{} bytes",
            kept.body.len()
        );
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&kept.body[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, seen[0].body);
    }
    // Every answer says what it depends on, so a shared cache does not mix them up.
    for s in &seen {
        let vary: Vec<_> = s
            .headers
            .get_all("vary")
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(vary, ["accept", "accept-encoding"]);
    }

    // The same kept answer, to a client that does not take gzip: as it is.
    let plain = call_on(&service, post("/v1/estimates/cost", &cost_request())).await;
    assert!(
        plain.header("cache-status").contains("hit"),
        "{}",
        plain.header("cache-status")
    );
    assert_eq!(plain.header("content-encoding"), "");
    assert_eq!(plain.body, seen[0].body);
}
