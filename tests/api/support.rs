//! Builds the real application (the same `app()` as production) for in-process requests.

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::{test, web};
use serde_json::Value;
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};
use trainplan::pricing::{Fx, Pricing};

/// The rate the tests convert at (the built-in default).
pub fn fx() -> Fx {
    Fx {
        cny_per_usd: 7.2,
        as_of: "2026-09".into(),
        source: "test".into(),
    }
}

pub const BODY_LIMIT: usize = 65_536;

pub async fn service() -> impl Service<
    actix_http::Request,
    Response = ServiceResponse<impl MessageBody>,
    Error = actix_web::Error,
> {
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let (pricing, rejected) = Pricing::embedded(&catalog, fx());
    assert!(rejected.is_empty(), "{rejected:?}");
    test::init_service(app(state(catalog, pricing))).await
}

/// The application's state as `trainplan serve` builds it by default (answer reuse on).
pub fn state(catalog: Arc<Catalog>, pricing: Pricing) -> web::Data<AppState> {
    web::Data::new(
        AppState::new(catalog, pricing, BODY_LIMIT)
            .with_answer_cache(std::time::Duration::from_secs(60), 64 << 20),
    )
}

/// Status, headers and body of one response.
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub headers: actix_web::http::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value, empty when absent or not text.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

pub async fn call(request: test::TestRequest) -> Reply {
    call_on(&service().await, request).await
}

/// One request to a service the caller keeps (to send it several).
pub async fn call_on<S, B>(service: &S, request: test::TestRequest) -> Reply
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let response = test::call_service(service, request.to_request()).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = test::read_body(response).await.to_vec();
    let mut reply = Reply {
        status,
        content_type: String::new(),
        headers,
        body,
    };
    reply.content_type = reply.header("content-type").to_string();
    reply
}

pub async fn post_json(path: &str, body: &Value) -> Reply {
    call(
        test::TestRequest::post()
            .uri(path)
            .insert_header(("content-type", "application/json"))
            .set_payload(body.to_string()),
    )
    .await
}

pub async fn get(path: &str) -> Reply {
    call(test::TestRequest::get().uri(path)).await
}

/// An API enum from its wire name (`"amp_bf16"` → `Precision::AmpBf16`).
pub fn enum_value<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_json::from_value(Value::String(text.to_string()))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Median of an ascending slice.
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Value at quantile `p` (0–1) of an ascending slice, nearest rank.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// An accuracy report's summary of relative errors (predicted / measured − 1).
pub struct ErrorSummary {
    pub median_abs: f64,
    pub worst_abs: f64,
    pub p10: f64,
    pub p90: f64,
}

impl ErrorSummary {
    pub fn of(errors: &[f64]) -> Self {
        let mut absolute: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        absolute.sort_by(f64::total_cmp);
        let mut signed = errors.to_vec();
        signed.sort_by(f64::total_cmp);
        Self {
            median_abs: median(&absolute),
            worst_abs: absolute.last().copied().unwrap_or(0.0),
            p10: quantile(&signed, 0.1),
            p90: quantile(&signed, 0.9),
        }
    }
}

impl std::fmt::Display for ErrorSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median |error| {:.1} %, worst {:.1} %; signed error p10 {:+.1} %, p90 {:+.1} %",
            self.median_abs * 100.0,
            self.worst_abs * 100.0,
            self.p10 * 100.0,
            self.p90 * 100.0
        )
    }
}

/// GPUs in the embedded catalog (every reference row plus the additions).
pub fn catalog_gpu_count() -> usize {
    Catalog::embedded().map(|c| c.gpus().len()).unwrap_or(0)
}

/// The built binary serving on a free port; the address comes from its JSON log line.
/// Killed on drop.
pub struct RunningServer {
    pub child: std::process::Child,
    pub address: String,
}

impl RunningServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With these extra environment variables (settings).
    pub fn start_with(env: &[(&str, &str)]) -> Self {
        use std::io::{BufRead, BufReader};
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_trainplan"));
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("TRAINPLAN_LOG_FORMAT", "json")
            .env_remove("TRAINPLAN_REDIS_URL")
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().unwrap();
        // Drain stderr on a thread for the child's whole life, passing on the address.
        let stderr = child.stderr.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && let Some(a) = event["address"].as_str()
                {
                    let _ = sender.send(a.to_string());
                }
            }
        });
        let address = receiver
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("a JSON log line with the listen address");
        Self { child, address }
    }
}

impl RunningServer {
    /// One plain HTTP/1.1 GET over a fresh connection; the whole raw response.
    pub fn http_get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.address).unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    /// Sends SIGTERM and waits (at most 30 s) for the process to end.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.child)
    }
}

/// Sends SIGTERM to `child` and waits (at most 30 s) for it to end.
pub fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = std::time::Instant::now();
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return exit;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "still running after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
