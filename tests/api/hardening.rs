//! Protection for a shared deployment: rate limits per key, security headers, CORS from
//! config, and a graceful stop on SIGTERM.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use actix_web::web;
use trainplan::catalog::Catalog;
use trainplan::http::keys::ApiKeys;
use trainplan::http::{AppState, app};
use trainplan::pricing::Pricing;

use crate::support::{BODY_LIMIT, RunningServer, fx, get, terminate};

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

/// A refresh that is still running when the signal comes: one feed that answers after
/// ten seconds, on a Redis key prefix of its own.
struct SlowRefresh {
    _provider: wiremock::MockServer,
    dir: std::path::PathBuf,
    redis_url: String,
    prefix: String,
}

impl SlowRefresh {
    async fn start() -> Self {
        use wiremock::matchers::path;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let Ok(redis_url) = std::env::var("TRAINPLAN_TEST_REDIS_URL") else {
            panic!("TRAINPLAN_TEST_REDIS_URL is not set: run scripts/test.sh");
        };
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
        std::fs::write(dir.join("feeds.toml"), format!("[[feed]]\nname = \"slow\"\nkind = \"csv_url\"\nenabled = true\nurl = \"{}/sheet\"\ntimeout_seconds = 30.0\n", provider.uri())).unwrap();
        Self {
            _provider: provider,
            dir,
            redis_url,
            prefix: format!("trainplan-test-{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// The settings that point the binary at this refresh.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TRAINPLAN_REDIS_URL", self.redis_url.clone()),
            ("TRAINPLAN_REDIS_PREFIX", self.prefix.clone()),
            (
                "TRAINPLAN_FEEDS_FILE",
                self.dir.join("feeds.toml").display().to_string(),
            ),
        ]
    }

    fn exists(&self, key: &str) -> bool {
        let client = redis::Client::open(self.redis_url.as_str()).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("EXISTS")
            .arg(format!("{}:{key}", self.prefix))
            .query::<bool>(&mut c)
            .unwrap()
    }

    /// Waits until the refresh holds the lock (it is then waiting on the slow feed).
    async fn wait_for_lock(&self) {
        let started = std::time::Instant::now();
        while !self.exists("lock:refresh") {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the refresh never took the lock"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for SlowRefresh {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_refresh_gives_the_redis_lock_back() {
    let slow = SlowRefresh::start().await;
    let env = slow.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut server = RunningServer::start_with(&env);
    slow.wait_for_lock().await;
    // Serving, so its signal handlers are in place.
    let live = tokio::task::block_in_place(|| server.http_get("/livez"));
    assert!(live.starts_with("HTTP/1.1 200"));
    let exit = tokio::task::block_in_place(|| server.terminate());
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    // Released at once, not left to expire; the cut-short refresh published nothing.
    assert!(!slow.exists("lock:refresh"));
    assert!(!slow.exists("current"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_scrape_which_publishes_nothing_and_gives_the_lock_back() {
    use std::io::Read;
    let slow = SlowRefresh::start().await;
    let mut scrape = std::process::Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .arg("scrape")
        .envs(slow.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    slow.wait_for_lock().await;
    let exit = tokio::task::block_in_place(|| terminate(&mut scrape));
    let mut stderr = String::new();
    scrape
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    // The job did not finish its work: a failing exit, said why.
    assert_eq!(exit.code(), Some(1), "{exit:?} {stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert!(!slow.exists("lock:refresh"));
    assert!(!slow.exists("current"));
}
