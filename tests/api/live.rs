//! Live prices through the real stack: a real Redis (started by the test command, or
//! `TRAINPLAN_TEST_REDIS_URL`), local HTTP servers standing in for the providers, and
//! app instances built by the production factory. Every test keeps to its own key
//! prefix and deletes it afterwards; none flushes Redis.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::test::{self, TestRequest};
use actix_web::web;
use serde_json::Value;
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::Pricing;
use trainplan::pricing::live;
use trainplan::pricing::refresh::parse_feeds;
use trainplan::pricing::store::Store;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{BODY_LIMIT, fx};

const TOKEN: &str = "test-admin-token";

fn redis_url() -> String {
    std::env::var("TRAINPLAN_TEST_REDIS_URL").expect(
        "TRAINPLAN_TEST_REDIS_URL is not set: run scripts/test.sh, which starts a throwaway Redis",
    )
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/feeds/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A key prefix of this test's own, removed on drop.
struct Prefix {
    name: String,
    url: String,
}

impl Prefix {
    fn new(url: &str) -> Self {
        Self {
            name: format!("trainplan-test-{}", uuid::Uuid::new_v4().simple()),
            url: url.to_string(),
        }
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let Ok(client) = redis::Client::open(self.url.as_str()) else {
            return;
        };
        if let Ok(mut c) = client.get_connection() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}:*", self.name))
                .query(&mut c)
                .unwrap_or_default();
            if !keys.is_empty() {
                let _: redis::RedisResult<()> = redis::cmd("DEL").arg(keys).query(&mut c);
            }
        }
    }
}

/// One app instance on the store `url`/`prefix` with these feeds (TOML), its live
/// tasks started.
async fn instance(
    url: &str,
    prefix: &str,
    feeds_toml: &str,
    token: Option<&str>,
) -> (
    impl Service<
        actix_http::Request,
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
    >,
    web::Data<AppState>,
) {
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let feeds = parse_feeds(feeds_toml).unwrap();
    let store = Store::new(url, prefix).unwrap();
    let (pricing, _) = Pricing::new(
        &catalog,
        fx(),
        feeds,
        Some(store.clone()),
        token.map(String::from),
    );
    live::spawn(
        store,
        pricing.book.clone(),
        pricing.health.clone(),
        Duration::from_millis(100),
        pricing.refresher.clone(),
    );
    // As `trainplan serve` runs: repeated estimates answered from the answer cache.
    let state = web::Data::new(
        AppState::new(catalog, pricing, BODY_LIMIT)
            .with_answer_cache(Duration::from_secs(60), 64 << 20),
    );
    (test::init_service(app(state.clone())).await, state)
}

async fn json(
    service: &impl Service<
        actix_http::Request,
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
    >,
    request: TestRequest,
) -> (u16, Value) {
    let response = test::call_service(service, request.to_request()).await;
    let status = response.status().as_u16();
    let body = test::read_body(response).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn refresh_request(token: Option<&str>) -> TestRequest {
    let request = TestRequest::post().uri("/v1/pricing/refresh");
    match token {
        Some(t) => request.insert_header(("authorization", format!("Bearer {t}"))),
        None => request,
    }
}

/// Waits until `check` holds, for at most `limit` (a wait, not a timing assertion).
async fn eventually<F: AsyncFnMut() -> bool>(limit: Duration, mut check: F) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn feed(name: &str, kind: &str, url: &str, extra: &str) -> String {
    format!(
        "[[feed]]\nname = \"{name}\"\nkind = \"{kind}\"\nenabled = true\nurl = \"{url}\"\ntimeout_seconds = 1.0\nretries = 1\nretry_base_ms = 10\ninterval_seconds = 86400\n{extra}\n"
    )
}

async fn serve(server: &MockServer, route: &str, body: String) {
    Mock::given(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_string(body))
        .mount(server)
        .await;
}

/// Azure's two recorded pages, the first pointing at the second on this server.
async fn serve_azure(server: &MockServer) {
    Mock::given(method("GET"))
        .and(path("/azure"))
        .and(query_param("page", "2"))
        .respond_with(ResponseTemplate::new(200).set_body_string(fixture("azure-page-2.json")))
        .with_priority(1)
        .mount(server)
        .await;
    let first = fixture("azure-page-1.json").replace("{{BASE}}", &server.uri());
    Mock::given(method("GET"))
        .and(path("/azure"))
        .respond_with(ResponseTemplate::new(200).set_body_string(first))
        .with_priority(2)
        .mount(server)
        .await;
}

#[actix_web::test]
async fn one_instance_refreshes_and_another_serves_the_new_prices_without_a_restart() {
    let url = redis_url();
    let prefix = Prefix::new(&url);
    let server = MockServer::start().await;
    serve_azure(&server).await;
    let feeds = feed(
        "azure-eastus",
        "azure_retail",
        &format!("{}/azure", server.uri()),
        "",
    );
    let (a, _) = instance(&url, &prefix.name, &feeds, Some(TOKEN)).await;
    let (b, b_state) = instance(&url, &prefix.name, "", None).await;

    // The admin token guards the refresh.
    let (status, problem) = json(&a, refresh_request(None)).await;
    assert_eq!(status, 401, "{problem}");
    assert_eq!(json(&a, refresh_request(Some("wrong"))).await.0, 403);
    assert_eq!(json(&b, refresh_request(Some(TOKEN))).await.0, 403);

    let before = json(&b, TestRequest::get().uri("/v1/prices?provider=azure"))
        .await
        .1;
    assert!(
        before["prices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["feed"].is_null())
    );

    let (status, report) = json(&a, refresh_request(Some(TOKEN))).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["stored"], true);
    let azure = &report["feeds"][0];
    assert_eq!(azure["rows_kept"], 7, "{azure}");
    assert!(azure["last_error"].is_null());
    assert_eq!(azure["rows_rejected"]["unmapped VM size"], 1);

    // B never refreshed: it picks the snapshot up from Redis.
    let picked_up = eventually(Duration::from_secs(10), async || {
        let list = json(&b, TestRequest::get().uri("/v1/prices?provider=azure"))
            .await
            .1;
        list["count"] == 7 && list["prices_source"]["kind"] == "live"
    })
    .await;
    assert!(picked_up, "instance B did not swap to the new book");
    let h100 = json(
        &b,
        TestRequest::get().uri("/v1/prices?gpu=h100-80gb&provider=azure&price_type=on_demand"),
    )
    .await
    .1;
    assert_eq!(h100["prices"][0]["price_per_instance_hour"], 98.32);
    assert_eq!(h100["prices"][0]["feed"], "azure-eastus");
    // Other providers still come from the embedded snapshot.
    let aws = json(&b, TestRequest::get().uri("/v1/prices?provider=aws"))
        .await
        .1;
    assert!(aws["count"].as_u64().unwrap() > 5);
    let ready = json(&b, TestRequest::get().uri("/readyz")).await.1;
    assert_eq!(ready["prices_source"]["snapshot_id"], report["snapshot_id"]);
    assert_eq!(ready["price_store"]["state"], "connected");
    let feeds = json(&b, TestRequest::get().uri("/v1/pricing/feeds"))
        .await
        .1;
    assert_eq!(feeds["feeds"][0]["name"], "azure-eastus");
    let cost_body = serde_json::json!({"hours": 10, "gpu": "h100-80gb", "parallelism": {"gpus": 8}, "pricing": {"providers": ["azure"]}});
    let cost = json(
        &b,
        TestRequest::post()
            .uri("/v1/estimates/cost")
            .set_json(&cost_body),
    )
    .await
    .1;
    assert_eq!(cost["prices_source"]["kind"], "live");
    assert!(
        cost["options"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["sku"] == "Standard_ND96isr_H100_v5")
    );
    drop(b_state);
}

#[actix_web::test]
async fn failing_feeds_keep_their_last_good_rows_and_report_the_error() {
    let url = redis_url();
    let prefix = Prefix::new(&url);
    let server = MockServer::start().await;
    let base = server.uri();
    let feeds = [
        feed("azure", "azure_retail", &format!("{base}/azure"), ""),
        feed(
            "aws",
            "aws",
            &format!("{base}/aws"),
            &format!("region = \"us-east-1\"\nspot_url = \"{base}/aws-spot\""),
        ),
        feed(
            "skypilot-aws",
            "skypilot_catalog",
            &format!("{base}/sky-aws"),
            "provider = \"aws-catalog\"",
        ),
        feed(
            "skypilot-gcp",
            "skypilot_catalog",
            &format!("{base}/sky-gcp"),
            "provider = \"gcp\"\ngpus = [\"a100-40gb\"]",
        ),
        feed("runpod", "runpod", &format!("{base}/runpod"), ""),
        feed("vast", "vast", &format!("{base}/vast"), "max_bytes = 5000"),
        feed(
            "oci",
            "oci",
            &format!("{base}/oci"),
            &format!("shapes_url = \"{base}/oci-shapes\""),
        ),
        feed("sheet", "csv_url", &format!("{base}/sheet"), ""),
    ]
    .concat();
    let good = async |server: &MockServer| {
        serve_azure(server).await;
        serve(server, "/aws", fixture("aws-ondemand.json")).await;
        serve(server, "/aws-spot", fixture("aws-spot.js")).await;
        serve(server, "/sky-aws", fixture("skypilot-aws-vms.csv")).await;
        serve(server, "/sky-gcp", fixture("skypilot-gcp-vms.csv")).await;
        serve(server, "/runpod", fixture("runpod.json")).await;
        serve(server, "/vast", fixture("vast.json")).await;
        serve(server, "/oci", fixture("oci-products.json")).await;
        serve(server, "/oci-shapes", fixture("oci-shapes.json")).await;
        serve(server, "/sheet", fixture("sheet.csv")).await;
    };
    good(&server).await;
    let (a, _) = instance(&url, &prefix.name, &feeds, Some(TOKEN)).await;
    let (status, first) = json(&a, refresh_request(Some(TOKEN))).await;
    assert_eq!(status, 200, "{first}");
    let kept = |report: &Value, name: &str| -> (u64, Value) {
        let f = report["feeds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap();
        (f["rows_kept"].as_u64().unwrap(), f.clone())
    };
    for name in [
        "azure",
        "aws",
        "skypilot-aws",
        "skypilot-gcp",
        "runpod",
        "oci",
        "sheet",
    ] {
        let (rows, status) = kept(&first, name);
        assert!(
            rows > 0 && status["last_error"].is_null(),
            "{name}: {status}"
        );
    }
    // The GCP feed keeps only the GPU its filter names.
    let gcp = json(&a, TestRequest::get().uri("/v1/prices?provider=gcp"))
        .await
        .1;
    assert!(
        gcp["prices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["gpu"] == "a100-40gb"),
        "{gcp}"
    );
    assert_eq!(kept(&first, "skypilot-gcp").0, 2);
    // Vast's payload is over its 5,000-byte limit from the start.
    assert!(
        kept(&first, "vast").1["last_error"]
            .as_str()
            .unwrap()
            .contains("limit")
    );

    // Now every feed breaks in its own way.
    server.reset().await;
    Mock::given(path("/azure"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(fixture("azure-page-2.json"))
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&server)
        .await;
    Mock::given(path("/aws"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let truncated = fixture("skypilot-aws-vms.csv");
    serve(
        &server,
        "/sky-aws",
        truncated[..truncated.len() / 2].to_string(),
    )
    .await;
    // skypilot-gcp disappears: 404.
    serve(
        &server,
        "/runpod",
        r#"{"data": {"gpuTypes": [{"id": "#.to_string(),
    )
    .await;
    serve(&server, "/vast", fixture("vast.json")).await;
    serve(
        &server,
        "/oci",
        fixture("oci-products.json")
            .replace("\"value\": 10", "\"value\": 0")
            .replace("\"value\": 4", "\"value\": 0")
            .replace("\"value\": 2.95", "\"value\": 0"),
    )
    .await;
    serve(&server, "/oci-shapes", fixture("oci-shapes.json")).await;
    serve(
        &server,
        "/sheet",
        fixture("sheet.csv").replace(",160,20,", ",1600,200,"),
    )
    .await;

    let (status, second) = json(&a, refresh_request(Some(TOKEN))).await;
    assert_eq!(status, 200, "{second}");
    for (name, error) in [
        ("azure", "timed out"),
        ("aws", "500"),
        ("skypilot-aws", "CSV"),
        ("skypilot-gcp", "404"),
        ("runpod", "malformed JSON"),
        ("oci", "no valid row"),
    ] {
        let (rows, status) = kept(&second, name);
        assert!(
            status["last_error"].as_str().unwrap_or("").contains(error),
            "{name}: {status}"
        );
        assert_eq!(rows, kept(&first, name).0, "{name} lost rows");
        assert_eq!(status["rows_stale"], rows, "{name}");
        assert_eq!(
            status["last_success"],
            kept(&first, name).1["last_success"],
            "{name}"
        );
    }
    // The 10× jump is quarantined: the old price stays, stale.
    let (_, sheet) = kept(&second, "sheet");
    assert_eq!(sheet["quarantined"].as_array().unwrap().len(), 1, "{sheet}");
    let prices = json(
        &a,
        TestRequest::get().uri("/v1/prices?provider=our-cloud&price_type=on_demand"),
    )
    .await
    .1;
    assert_eq!(prices["prices"][0]["price_per_instance_hour"], 160.0);
    assert_eq!(prices["prices"][0]["stale"], true);
    // The book never shrank, and the feed list reports every error.
    assert_eq!(second["rows"], first["rows"]);
    let listed = json(&a, TestRequest::get().uri("/v1/pricing/feeds"))
        .await
        .1;
    assert_eq!(
        listed["feeds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| !f["last_error"].is_null())
            .count(),
        7
    );
}

#[actix_web::test]
async fn two_concurrent_refreshes_run_once() {
    let url = redis_url();
    let prefix = Prefix::new(&url);
    let server = MockServer::start().await;
    Mock::given(path("/sheet"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(fixture("sheet.csv"))
                .set_delay(Duration::from_millis(500)),
        )
        .mount(&server)
        .await;
    let feeds = feed("sheet", "csv_url", &format!("{}/sheet", server.uri()), "");
    let (a, _) = instance(&url, &prefix.name, &feeds, Some(TOKEN)).await;
    let (b, _) = instance(&url, &prefix.name, &feeds, Some(TOKEN)).await;
    let (x, y) = futures_util::join!(
        json(&a, refresh_request(Some(TOKEN))),
        json(&b, refresh_request(Some(TOKEN)))
    );
    let mut statuses = [x.0, y.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{} / {}", x.1, y.1);
    let skipped = if x.0 == 409 { &x.1 } else { &y.1 };
    assert!(
        skipped["detail"]
            .as_str()
            .unwrap()
            .contains("already running")
    );
    // The lock is released: the next refresh runs.
    assert_eq!(json(&b, refresh_request(Some(TOKEN))).await.0, 200);
}

/// A Redis of this test's own, so that it can be stopped and started again, in a scratch
/// directory of its own (cluster and Sentinel nodes write their state there).
struct OwnRedis {
    port: u16,
    dir: std::path::PathBuf,
    child: std::process::Child,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl OwnRedis {
    fn start(port: u16) -> Self {
        Self::start_with(port, &[], None)
    }

    /// `redis-server [config] --port P … extra`; a config file (Sentinel needs one) is
    /// written into the scratch directory first.
    fn start_with(port: u16, extra: &[&str], config: Option<&str>) -> Self {
        let binary =
            std::env::var("TRAINPLAN_TEST_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let dir = std::env::temp_dir().join(format!(
            "trainplan-test-redis-{port}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut command = std::process::Command::new(binary);
        if let Some(text) = config {
            let file = dir.join("redis.conf");
            std::fs::write(&file, text).unwrap();
            command.arg(file);
        }
        let child = command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (installed by scripts/test.sh)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { port, dir, child }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut c = client.get_connection()?;
        redis::cmd(args[0]).arg(&args[1..]).query(&mut c)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[actix_web::test]
async fn a_redis_outage_is_served_from_memory_and_the_next_refresh_lands_everywhere() {
    let port = free_port();
    let redis = OwnRedis::start(port);
    let url = redis.url();
    let server = sheet_server().await;
    let feeds = feed("sheet", "csv_url", &format!("{}/sheet", server.uri()), "");
    let (a, _) = instance(&url, "trainplan", &feeds, Some(TOKEN)).await;
    let (b, _) = instance(&url, "trainplan", "", None).await;
    assert_eq!(json(&a, refresh_request(Some(TOKEN))).await.0, 200);
    let ours = "/v1/prices?provider=our-cloud&price_type=on_demand";
    assert!(
        eventually(Duration::from_secs(10), async || json(
            &b,
            TestRequest::get().uri(ours)
        )
        .await
        .1["count"]
            == 1)
        .await
    );

    drop(redis);
    // Requests keep succeeding from the book in memory.
    let cost_body = serde_json::json!({"hours": 5, "gpu": "a100-80gb", "parallelism": {"gpus": 8}, "pricing": {"providers": ["our-cloud"], "currency": "CNY"}});
    let on_demand_cost = async || {
        let request = TestRequest::post()
            .uri("/v1/estimates/cost")
            .set_json(&cost_body);
        let (status, cost) = json(&b, request).await;
        assert_eq!(status, 200, "{cost}");
        cost["cheapest"]["on_demand"]["cost"].clone()
    };
    for _ in 0..5 {
        let (status, list) = json(&b, TestRequest::get().uri(ours)).await;
        assert_eq!((status, list["count"].clone()), (200, Value::from(1)));
        assert_eq!(on_demand_cost().await, 800.0);
    }
    assert!(
        eventually(Duration::from_secs(10), async || {
            json(&b, TestRequest::get().uri("/readyz")).await.1["price_store"]["state"]
                == "unavailable"
        })
        .await
    );
    assert_eq!(json(&a, refresh_request(Some(TOKEN))).await.0, 503);

    // Redis is back (empty: it kept nothing); the next refresh lands on every instance.
    let _redis = OwnRedis::start(port);
    raise_sheet_prices(&server).await;
    refresh_lands_on_both(&a, &b, 176.0).await;
    // The cost answer the second instance kept (from the second of the five requests)
    // and reused is retired with the old book.
    let metrics = test::call_service(&b, TestRequest::get().uri("/metrics").to_request()).await;
    let metrics = String::from_utf8_lossy(&test::read_body(metrics).await).into_owned();
    assert!(
        metrics.contains("answer_cache_requests_total{result=\"hit\"} 3"),
        "{metrics}"
    );
    assert_eq!(on_demand_cost().await, 880.0);
}

/// A provider serving the recorded sheet (8×A100 at 160 an hour).
async fn sheet_server() -> MockServer {
    let server = MockServer::start().await;
    serve(&server, "/sheet", fixture("sheet.csv")).await;
    server
}

/// The sheet again, at 176 an hour.
async fn raise_sheet_prices(server: &MockServer) {
    server.reset().await;
    serve(
        server,
        "/sheet",
        fixture("sheet.csv").replace(",160,20,", ",176,22,"),
    )
    .await;
}

/// Refreshes through `a` until it lands and waits until `b` serves the sheet's 8×A100
/// price `hourly`: the two instances share the store.
async fn refresh_lands_on_both(
    a: &impl Service<
        actix_http::Request,
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
    >,
    b: &impl Service<
        actix_http::Request,
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
    >,
    hourly: f64,
) {
    let landed = eventually(Duration::from_secs(20), async || {
        json(a, refresh_request(Some(TOKEN))).await.0 == 200
    })
    .await;
    assert!(landed, "the refresh did not land");
    let ours = "/v1/prices?provider=our-cloud&price_type=on_demand";
    assert!(
        eventually(Duration::from_secs(10), async || {
            json(b, TestRequest::get().uri(ours)).await.1["prices"][0]["price_per_instance_hour"]
                == hourly
        })
        .await,
        "the second instance did not pick up the refresh"
    );
}

#[actix_web::test]
async fn a_sentinel_failover_is_followed() {
    // A master, its replica, and one Sentinel that promotes the replica once the master
    // has been unreachable for a second.
    let master = OwnRedis::start(free_port());
    let replica_port = free_port();
    let master_port = master.port.to_string();
    let replica = OwnRedis::start_with(
        replica_port,
        &["--replicaof", "127.0.0.1", &master_port],
        None,
    );
    let sentinel_port = free_port();
    let _sentinel = OwnRedis::start_with(
        sentinel_port,
        &["--sentinel"],
        Some(&format!(
            "sentinel monitor tp 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds tp 1000\n\
             sentinel failover-timeout tp 3000\n"
        )),
    );
    let url = format!("redis+sentinel://127.0.0.1:{sentinel_port}/tp");
    let server = sheet_server().await;
    let feeds = feed("sheet", "csv_url", &format!("{}/sheet", server.uri()), "");
    let (a, _) = instance(&url, "trainplan", &feeds, Some(TOKEN)).await;
    let (b, _) = instance(&url, "trainplan", "", None).await;
    refresh_lands_on_both(&a, &b, 160.0).await;
    let current: Option<String> = master.command(&["GET", "trainplan:current"]).unwrap();
    assert!(current.is_some(), "the snapshot pointer is on the master");

    // The master dies; Sentinel promotes the replica and both instances follow it.
    drop(master);
    raise_sheet_prices(&server).await;
    refresh_lands_on_both(&a, &b, 176.0).await;
    let role: Vec<redis::Value> = replica.command(&["ROLE"]).unwrap();
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec())),
        "the refresh landed on the promoted replica"
    );
}

#[actix_web::test]
async fn a_redis_cluster_holds_the_store_in_one_slot() {
    // Three masters sharing the 16,384 slots.
    let nodes: Vec<OwnRedis> = (0..3)
        .map(|_| {
            OwnRedis::start_with(
                free_port(),
                &["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"],
                None,
            )
        })
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let (first, last) = (i * 5462, ((i + 1) * 5462).min(16_384) - 1);
        let _: () = node
            .command(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string(),
            ])
            .unwrap();
        let port = node.port.to_string();
        let _: () = nodes[0]
            .command(&["CLUSTER", "MEET", "127.0.0.1", &port])
            .unwrap();
    }
    let started = Instant::now();
    while nodes.iter().any(|n| {
        !n.command::<String>(&["CLUSTER", "INFO"])
            .unwrap_or_default()
            .contains("cluster_state:ok")
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "cluster not ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
        nodes[0].port, nodes[1].port
    );
    let server = sheet_server().await;
    let feeds = feed("sheet", "csv_url", &format!("{}/sheet", server.uri()), "");
    let (a, _) = instance(&url, "trainplan", &feeds, Some(TOKEN)).await;
    let (b, _) = instance(&url, "trainplan", "", None).await;
    refresh_lands_on_both(&a, &b, 160.0).await;
    // Every key carries the `{trainplan}` hash tag: the pointer and its snapshot share
    // one slot (a MULTI/EXEC across slots would have been refused).
    let client = redis::cluster::ClusterClient::new(vec![nodes[2].url()]).unwrap();
    let mut c = client.get_connection().unwrap();
    let current: String = redis::cmd("GET")
        .arg("{trainplan}:current")
        .query(&mut c)
        .unwrap();
    let snapshot: Option<String> = redis::cmd("GET")
        .arg(format!("{{trainplan}}:snapshot:{current}"))
        .query(&mut c)
        .unwrap();
    assert!(snapshot.is_some_and(|s| s.contains("our-cloud")));
    // Both instances agree on the same store through different seed nodes.
    let third = format!("redis+cluster://127.0.0.1:{}", nodes[2].port);
    let (c, _) = instance(&third, "trainplan", "", None).await;
    let ours = "/v1/prices?provider=our-cloud&price_type=on_demand";
    assert!(
        eventually(Duration::from_secs(10), async || {
            json(&c, TestRequest::get().uri(ours)).await.1["count"] == 1
        })
        .await
    );
}

#[test]
fn store_addresses_are_checked_when_read() {
    for (url, reason) in [
        ("redis+sentinel://127.0.0.1:26379", "service name"),
        ("redis+sentinel:///tp", "host:port"),
        ("redis+sentinel://127.0.0.1:26379/tp/zero", "not a number"),
        ("redis+cluster://", "host:port"),
        ("redis+cluster://localhost", "host:port"),
    ] {
        match Store::new(url, "p") {
            Ok(_) => panic!("{url} was accepted"),
            Err(error) => assert!(error.contains(reason), "{url}: {error}"),
        }
    }
    for url in [
        "redis://127.0.0.1:6379",
        "redis+sentinel://user:secret@127.0.0.1:26379,127.0.0.1:26380/tp/2",
        "redis+cluster://:secret@127.0.0.1:7000,127.0.0.1:7001",
    ] {
        assert!(Store::new(url, "p").is_ok(), "{url}");
    }
}
