//! HTTP adapters: extract and validate, call one estimator, render. No arithmetic here.

mod answers;
pub(crate) mod catalog;
pub mod estimates;
mod extract;
pub(crate) mod gate;
pub(crate) mod health;
pub mod keys;
pub mod limits;
pub mod mcp;
pub(crate) mod prices;
pub mod query;
pub mod render;

use std::sync::Arc;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, Error, HttpMessage, HttpRequest, HttpResponse, web};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use utoipa_swagger_ui::SwaggerUi;

use crate::catalog::Catalog;
use crate::error::{ApiError, REQUEST_ID};
use crate::pricing::Pricing;
use crate::validation::FieldError;

pub use answers::AnswerCache;
pub use estimates::{cost_answer, memory_answer, recommendation_answer, time_answer};
pub use extract::JsonBody;
pub use gate::gate_answer;

/// Shared, read-only state of every worker.
pub struct AppState {
    pub catalog: Arc<Catalog>,
    pub pricing: Pricing,
    pub metrics: Metrics,
    pub body_limit_bytes: usize,
    /// Empty: no key needed.
    pub api_keys: keys::ApiKeys,
    /// `Host` values `/mcp` accepts (rmcp guards against DNS rebinding).
    pub mcp_allowed_hosts: Vec<String>,
    /// Shared by every worker; `None`: no rate limit.
    pub rate_limit: Option<limits::RateLimit>,
    /// Origins browsers may call from.
    pub cors_origins: Vec<String>,
    /// Answers to repeated estimate requests; `None`: every request is estimated.
    pub answers: Option<Arc<AnswerCache>>,
}

impl AppState {
    pub fn new(catalog: Arc<Catalog>, pricing: Pricing, body_limit_bytes: usize) -> Self {
        Self {
            catalog,
            pricing,
            metrics: Metrics::new(),
            body_limit_bytes,
            api_keys: keys::ApiKeys::default(),
            mcp_allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            rate_limit: None,
            cors_origins: Vec::new(),
            answers: None,
        }
    }

    /// The same state, reusing answers to identical estimate requests for `lifetime`,
    /// keeping up to `capacity_bytes` (either zero: no reuse).
    pub fn with_answer_cache(mut self, lifetime: std::time::Duration, capacity_bytes: u64) -> Self {
        self.answers = AnswerCache::new(lifetime, capacity_bytes).map(Arc::new);
        self
    }

    /// The same state with a rate limit per API key or address (0: none) and CORS
    /// origins.
    pub fn with_limits(mut self, per_second: u64, burst: u32, cors_origins: Vec<String>) -> Self {
        self.rate_limit = limits::rate_limit(per_second, burst);
        self.cors_origins = cors_origins;
        self
    }

    /// The `Host` values `/mcp` accepts besides loopback (the public name behind a proxy).
    pub fn with_mcp_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.mcp_allowed_hosts.extend(hosts);
        self
    }

    /// The same state, requiring one of these keys on `/v1/` requests.
    pub fn with_api_keys(mut self, keys: keys::ApiKeys) -> Self {
        self.api_keys = keys;
        self
    }
}

/// Prometheus metrics of the HTTP layer.
pub struct Metrics {
    pub registry: Registry,
    requests: IntCounterVec,
    duration: HistogramVec,
    answers: IntCounterVec,
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "http_requests_total",
                "HTTP requests by method, route and status",
            ),
            &["method", "route", "status"],
        )
        .unwrap_or_else(|_| unreachable!("static metric definition"));
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "http_request_duration_seconds",
                "HTTP request latency by route",
            )
            .buckets(vec![
                0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
            ]),
            &["route"],
        )
        .unwrap_or_else(|_| unreachable!("static metric definition"));
        let answers = IntCounterVec::new(
            Opts::new(
                "answer_cache_requests_total",
                "Estimate requests the answer cache saw, by result (hit: an earlier answer reused)",
            ),
            &["result"],
        )
        .unwrap_or_else(|_| unreachable!("static metric definition"));
        // Registering fresh, uniquely named collectors into a new registry cannot fail.
        let _ = registry.register(Box::new(requests.clone()));
        let _ = registry.register(Box::new(duration.clone()));
        let _ = registry.register(Box::new(answers.clone()));
        Self {
            registry,
            requests,
            duration,
            answers,
        }
    }

    fn answer(&self, hit: bool) {
        self.answers
            .with_label_values(&[if hit { "hit" } else { "miss" }])
            .inc();
    }
}

const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Keeps a caller's request id when it is short and plain, else makes one.
fn request_id(request: &ServiceRequest) -> String {
    request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// Request id (echoed in `X-Request-Id` and error bodies), metrics and the access log.
async fn request_context(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = request_id(&request);
    let started = Instant::now();
    let state = request.app_data::<web::Data<AppState>>().cloned();
    let method = request.method().clone();
    let path = request.path().to_owned();
    let mut response = REQUEST_ID.scope(id.clone(), next.call(request)).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let route = response
        .request()
        .match_pattern()
        .unwrap_or_else(|| "unmatched".into());
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    if let Some(state) = state {
        let status_text = status.to_string();
        state
            .metrics
            .requests
            .with_label_values(&[method.as_str(), &route, &status_text])
            .inc();
        state
            .metrics
            .duration
            .with_label_values(&[&route])
            .observe(elapsed.as_secs_f64());
    }
    // Health checks are polled constantly; keep them out of the access log.
    if !matches!(path.as_str(), "/livez" | "/readyz" | "/metrics") {
        let key = response
            .request()
            .extensions()
            .get::<keys::KeyName>()
            .map(|k| k.0.clone())
            .unwrap_or_default();
        tracing::info!(request_id = %id, %method, %path, status, key, elapsed_us = elapsed.as_micros() as u64, "request");
    }
    Ok(response)
}

/// A resource whose other methods answer 405 with `Allow`.
fn resource(path: &str, routes: Vec<(Method, actix_web::Route)>) -> actix_web::Resource {
    let allow: Vec<Method> = routes.iter().map(|(m, _)| m.clone()).collect();
    let mut resource = web::resource(path);
    for (_, route) in routes {
        resource = resource.route(route);
    }
    resource.default_service(web::to(move || {
        let allow = allow.clone();
        async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
    }))
}

/// An estimate resource: identical requests share one answer (see `answers`).
fn estimate_resource(
    path: &str,
    routes: Vec<(Method, actix_web::Route)>,
) -> actix_web::Resource<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<actix_web::body::BoxBody>,
        Error = Error,
        InitError = (),
    >,
> {
    resource(path, routes).wrap(from_fn(answers::reuse))
}

/// A resource that answers GET only.
fn get_only<F, Args>(path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    resource(path, vec![(Method::GET, web::get().to(handler))])
}

/// The route table. Every route here is documented in [`ApiDoc`]; a test checks both ways.
fn routes(config: &mut web::ServiceConfig) {
    config
        .service(estimate_resource(
            "/v1/estimates/memory",
            vec![
                (Method::POST, web::post().to(estimates::memory_post)),
                (Method::GET, web::get().to(estimates::memory_get)),
            ],
        ))
        .service(estimate_resource(
            "/v1/estimates/time",
            vec![
                (Method::POST, web::post().to(estimates::time_post)),
                (Method::GET, web::get().to(estimates::time_get)),
            ],
        ))
        .service(estimate_resource(
            "/v1/estimates/cost",
            vec![
                (Method::POST, web::post().to(estimates::cost_post)),
                (Method::GET, web::get().to(estimates::cost_get)),
            ],
        ))
        .service(estimate_resource(
            "/v1/recommendations",
            vec![
                (Method::POST, web::post().to(estimates::recommend_post)),
                (Method::GET, web::get().to(estimates::recommend_get)),
            ],
        ))
        .service(estimate_resource(
            "/v1/gates/budget",
            vec![(Method::POST, web::post().to(gate::budget))],
        ))
        .service(get_only("/v1/prices", prices::prices))
        .service(get_only("/v1/pricing/feeds", prices::feeds))
        .service(resource(
            "/mcp",
            vec![
                (Method::POST, web::post().to(mcp::handle)),
                (Method::GET, web::get().to(mcp::handle)),
                (Method::DELETE, web::delete().to(mcp::handle)),
            ],
        ))
        .service(resource(
            "/v1/pricing/refresh",
            vec![(Method::POST, web::post().to(prices::refresh))],
        ))
        .service(get_only("/v1/gpus", catalog::gpus))
        .service(get_only("/v1/models", catalog::models))
        .service(get_only("/livez", health::livez))
        .service(get_only("/readyz", health::readyz))
        .service(get_only("/metrics", health::metrics))
        .service(get_only("/docs", || async {
            HttpResponse::PermanentRedirect()
                .insert_header(("Location", "/docs/"))
                .finish()
        }))
        .service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", crate::openapi::spec()));
}

/// Builds the application; production and tests call the same factory.
pub fn app(
    state: web::Data<AppState>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    let limit = state.body_limit_bytes;
    let mcp = web::Data::new(mcp::service(state.clone(), state.mcp_allowed_hosts.clone()));
    let rate_limit = state.rate_limit.clone();
    let governor = actix_web::middleware::Condition::new(
        rate_limit.is_some(),
        actix_governor::Governor::new(&rate_limit.unwrap_or_else(|| {
            limits::rate_limit(1, 1)
                .unwrap_or_else(|| unreachable!("1 request a second is a valid limit"))
        })),
    );
    // Without configured origins no CORS layer at all: a same-origin page (/docs) works
    // and other origins get no CORS headers.
    let cors = actix_web::middleware::Condition::new(
        !state.cors_origins.is_empty(),
        limits::cors(&state.cors_origins),
    );
    App::new()
        .app_data(state)
        .app_data(mcp)
        .app_data(web::PayloadConfig::new(limit))
        .app_data(web::QueryConfig::default().error_handler(|error, _| {
            ApiError::Invalid(vec![FieldError::new("/query", error.to_string())]).into()
        }))
        .wrap(governor)
        .wrap(from_fn(keys::guard))
        .wrap(cors)
        .wrap(limits::security_headers())
        .wrap(from_fn(request_context))
        .configure(routes)
        .default_service(web::to(|request: HttpRequest| async move {
            Err::<HttpResponse, _>(ApiError::RouteNotFound(format!(
                "{} {}",
                request.method(),
                request.path()
            )))
        }))
}
