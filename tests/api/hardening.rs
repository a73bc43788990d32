//! Protection for a shared deployment: rate limits per key, security headers, CORS from
//! config, and a graceful stop on SIGTERM.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use actix_web::web;
use trainplan::catalog::Catalog;
use trainplan::http::keys::ApiKeys;
use trainplan::http::{AppState, app};
use trainplan::pricing::Pricing;

use crate::support::{BODY_LIMIT, RunningServer, fx, get};

fn sha256(text: &str) -> String {
    use std::fmt::Write;
    <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes())
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn state() -> AppState {
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let (pricing, _) = Pricing::embedded(&catalog, fx());
    AppState::new(catalog, pricing, BODY_LIMIT)
}

#[actix_web::test]
async fn a_flood_from_one_key_gets_429s_while_another_key_is_served() {
    let keys = ApiKeys::parse(&format!(
        "flood:{},calm:{}",
        sha256("flood-key"),
        sha256("calm-key")
    ))
    .unwrap();
    // One request a second, bursts of three.
    let state = web::Data::new(state().with_api_keys(keys).with_limits(1, 3, Vec::new()));
    let service = test::init_service(app(state)).await;
    let call = |key: &'static str| {
        let request = TestRequest::get()
            .uri("/v1/gpus?q=h100")
            .insert_header(("x-api-key", key))
            .to_request();
        let service = &service;
        async move { test::call_service(service, request).await }
    };
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(call("flood-key").await.status().as_u16());
    }
    assert_eq!(&statuses[..3], &[200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    let limited = call("flood-key").await;
    assert_eq!(limited.status().as_u16(), 429);
    assert!(limited.headers().get("retry-after").is_some());
    assert_eq!(
        limited.headers().get("content-type").unwrap(),
        "application/problem+json"
    );
    let body: serde_json::Value = serde_json::from_slice(&test::read_body(limited).await).unwrap();
    assert_eq!(body["status"], 429);
    // The other key has its own allowance.
    assert_eq!(call("calm-key").await.status().as_u16(), 200);
}

#[actix_web::test]
async fn responses_carry_security_headers_and_no_internal_detail() {
    let reply = get("/v1/gpus").await;
    assert_eq!(
        reply.headers.get("x-content-type-options").unwrap(),
        "nosniff"
    );
    assert_eq!(reply.headers.get("x-frame-options").unwrap(), "DENY");
    assert_eq!(reply.headers.get("referrer-policy").unwrap(), "no-referrer");
    let problem = get("/v1/estimates/memory?model=nope").await;
    assert!(!problem.text().contains("src/") && !problem.text().contains("panicked"));
}

#[actix_web::test]
async fn cors_allows_only_the_configured_origins() {
    let state = web::Data::new(state().with_limits(0, 1, vec!["https://sheets.example".into()]));
    let service = test::init_service(app(state)).await;
    let preflight = |origin: &'static str| {
        TestRequest::default()
            .method(actix_web::http::Method::OPTIONS)
            .uri("/v1/estimates/memory")
            .insert_header(("origin", origin))
            .insert_header(("access-control-request-method", "POST"))
            .to_request()
    };
    let allowed = test::call_service(&service, preflight("https://sheets.example")).await;
    assert_eq!(
        allowed
            .headers()
            .get("access-control-allow-origin")
            .unwrap(),
        "https://sheets.example"
    );
    let refused = test::call_service(&service, preflight("https://evil.example")).await;
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = RunningServer::start();
    // Serving, so its signal handlers are in place.
    assert!(server.http_get("/livez").starts_with("HTTP/1.1 200"));
    let exit = server.terminate();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_refresh_gives_the_redis_lock_back() {
    use wiremock::matchers::path;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let Ok(redis_url) = std::env::var("TRAINPLAN_TEST_REDIS_URL") else {
        panic!("TRAINPLAN_TEST_REDIS_URL is not set: run scripts/test.sh");
    };
    // A feed that takes ten seconds: the refresh that starts with the server is still
    // running (and holding the lock) when the signal comes.
    let provider = MockServer::start().await;
    Mock::given(path("/sheet"))
        .respond_with(ResponseTemplate::new(200).set_body_string("provider,region,sku,gpu,gpu_count,price_type,price_per_instance_hour,price_per_gpu_hour,currency,as_of,source,source_kind,notes\n").set_delay(std::time::Duration::from_secs(10)))
        .mount(&provider)
        .await;
    let dir = std::env::temp_dir().join(format!(
        "trainplan-sigterm-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let feeds = dir.join("feeds.toml");
    std::fs::write(&feeds, format!("[[feed]]\nname = \"slow\"\nkind = \"csv_url\"\nenabled = true\nurl = \"{}/sheet\"\ntimeout_seconds = 30.0\n", provider.uri())).unwrap();
    let prefix = format!("trainplan-test-{}", uuid::Uuid::new_v4().simple());
    let lock = format!("{prefix}:lock:refresh");
    let mut server = RunningServer::start_with(&[
        ("TRAINPLAN_REDIS_URL", &redis_url),
        ("TRAINPLAN_REDIS_PREFIX", &prefix),
        ("TRAINPLAN_FEEDS_FILE", feeds.to_str().unwrap()),
    ]);
    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut c = client.get_connection().unwrap();
    let started = std::time::Instant::now();
    while !redis::cmd("EXISTS")
        .arg(&lock)
        .query::<bool>(&mut c)
        .unwrap()
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the refresh never took the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Serving, so its signal handlers are in place.
    let live = tokio::task::block_in_place(|| server.http_get("/livez"));
    assert!(live.starts_with("HTTP/1.1 200"));
    let exit = tokio::task::block_in_place(|| server.terminate());
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    // Released at once, not left to expire.
    assert!(
        !redis::cmd("EXISTS")
            .arg(&lock)
            .query::<bool>(&mut c)
            .unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
