//! The command line: `serve` (default), `scrape`, `estimate memory|time|cost --plan
//! FILE`, `openapi`.

mod gate;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::api::{CostRequest, MemoryRequest, TimeRequest, from_json_slice, from_json_value};
use crate::catalog::Catalog;
use crate::config::{Settings, comma_list};
use crate::error::ApiError;
use crate::http::keys::ApiKeys;
use crate::http::{AppState, app, cost_answer, memory_answer, time_answer};
use crate::pricing::Pricing;
use crate::pricing::live;
use crate::pricing::refresh::{FEEDS_TOML, parse_feeds};
use crate::pricing::store::Store;

#[derive(Debug, Parser)]
#[command(
    name = "trainplan",
    version,
    about = "Will an LLM training job fit, how long, how much"
)]
pub struct Cli {
    /// Config file (TOML) layered over the built-in defaults, under TRAINPLAN_* variables.
    #[arg(long, global = true, env = "TRAINPLAN_CONFIG")]
    pub config: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API (the default).
    Serve {
        /// Listen address; port 0 picks a free port. Overrides TRAINPLAN_LISTEN.
        #[arg(long)]
        listen: Option<String>,
    },
    /// Run one estimate from a JSON plan (the API's request body) and print the JSON answer.
    Estimate {
        #[command(subcommand)]
        kind: EstimateKind,
    },
    /// Run one refresh of the enabled price feeds into Redis (TRAINPLAN_REDIS_URL) and
    /// exit: for cron or a Kubernetes CronJob. Exit 0 when at least one feed (or none
    /// enabled) succeeded, 1 when every feed failed, Redis could not be reached or SIGTERM
    /// stopped it (it then publishes nothing and gives the refresh lock back), 2 for bad
    /// configuration.
    Scrape,
    /// Check a plan against a budget, for CI: exit 0 pass, 1 fail, 2 bad input, 3 prices
    /// unavailable or older than allowed. Writes $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT
    /// when set.
    Gate(gate::GateArgs),
    /// Exit 0 when the URL answers 2xx within two seconds, 1 otherwise: a container
    /// healthcheck that needs no curl in the image.
    Probe {
        /// e.g. http://127.0.0.1:8080/livez
        url: String,
    },
    /// Print the OpenAPI document.
    Openapi,
}

#[derive(Debug, Subcommand)]
pub enum EstimateKind {
    /// Peak GPU memory per GPU.
    Memory {
        /// JSON file with the request body of POST /v1/estimates/memory ("-" for stdin).
        #[arg(long)]
        plan: PathBuf,
    },
    /// Training time.
    Time {
        /// JSON file with the request body of POST /v1/estimates/time ("-" for stdin).
        #[arg(long)]
        plan: PathBuf,
    },
    /// Cost across clouds, on the embedded price snapshot.
    Cost {
        /// JSON file with the request body of POST /v1/estimates/cost ("-" for stdin).
        #[arg(long)]
        plan: PathBuf,
    },
}

/// Exit codes: 0 success, 2 bad input, 1 anything else.
pub fn run(cli: Cli) -> i32 {
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("trainplan: configuration: {error}");
            return 2;
        }
    };
    let catalog = match Catalog::embedded() {
        Ok(catalog) => Arc::new(catalog),
        Err(error) => {
            eprintln!("trainplan: {error}");
            return 1;
        }
    };
    match cli.command.unwrap_or(Command::Serve { listen: None }) {
        Command::Openapi => {
            print!("{}", crate::openapi::json());
            0
        }
        Command::Estimate { kind } => {
            let now = jiff::Timestamp::now();
            let (pricing, _) = Pricing::embedded(&catalog, settings.fx());
            let (plan, answer): (&PathBuf, Answer) = match &kind {
                EstimateKind::Memory { plan } => (plan, &|value| {
                    let request: MemoryRequest = from_json_value(value)?;
                    to_value(memory_answer(&request, &catalog)?)
                }),
                EstimateKind::Time { plan } => (plan, &|value| {
                    to_value(time_answer(&TimeRequest::from_value(value)?, &catalog)?)
                }),
                EstimateKind::Cost { plan } => (plan, &|value| {
                    let request = CostRequest::from_value(value)?;
                    to_value(cost_answer(&request, &catalog, &pricing, now)?)
                }),
            };
            estimate(plan, answer)
        }
        Command::Probe { url } => probe(&url),
        Command::Gate(args) => {
            let (pricing, _) = Pricing::embedded(&catalog, settings.fx());
            gate::run(&args, &catalog, pricing)
        }
        Command::Scrape => {
            crate::telemetry::init(settings.log_format, &settings.log_level);
            let Some(url) = settings.redis_url.clone() else {
                eprintln!(
                    "trainplan scrape: set TRAINPLAN_REDIS_URL (the store the refresh writes to)"
                );
                return 2;
            };
            let pricing = match pricing(&settings, &catalog, Some(url)) {
                Ok(pricing) => pricing,
                Err(error) => {
                    eprintln!("trainplan scrape: {error}");
                    return 2;
                }
            };
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("trainplan scrape: {error}");
                    return 1;
                }
            };
            let refresher = pricing.refresher.clone();
            match runtime.block_on(async move {
                stop_refresher_on_signal(refresher.clone());
                refresher.refresh().await
            }) {
                Ok(report) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&report).unwrap_or_default()
                    );
                    i32::from(report.all_failed())
                }
                Err(error) => {
                    eprintln!("trainplan scrape: {error}");
                    1
                }
            }
        }
        Command::Serve { listen } => {
            crate::telemetry::init(settings.log_format, &settings.log_level);
            let listen = listen.unwrap_or_else(|| settings.listen.clone());
            let pricing = match pricing(&settings, &catalog, settings.redis_url.clone()) {
                Ok(pricing) => pricing,
                Err(error) => {
                    eprintln!("trainplan: {error}");
                    return 2;
                }
            };
            let keys = match ApiKeys::parse(settings.api_keys.as_deref().unwrap_or("")) {
                Ok(keys) => keys,
                Err(error) => {
                    eprintln!("trainplan: TRAINPLAN_API_KEYS: {error}");
                    return 2;
                }
            };
            let poll = std::time::Duration::from_secs(settings.poll_interval_seconds.max(1));
            let state = AppState::new(catalog, pricing, settings.body_limit_bytes)
                .with_api_keys(keys)
                .with_mcp_hosts(comma_list(settings.mcp_allowed_hosts.as_deref()))
                .with_limits(
                    settings.rate_limit_per_second,
                    settings.rate_limit_burst,
                    comma_list(settings.cors_origins.as_deref()),
                )
                .with_answer_cache(
                    std::time::Duration::from_secs(settings.answer_cache_seconds),
                    settings.answer_cache_bytes,
                );
            match serve(&listen, state, poll) {
                Ok(()) => 0,
                Err(error) => {
                    eprintln!("trainplan: serve on {listen}: {error}");
                    1
                }
            }
        }
    }
}

fn probe(url: &str) -> i32 {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 1;
    };
    let ok = runtime.block_on(async {
        reqwest::Client::new()
            .get(url)
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    });
    if ok { 0 } else { 1 }
}

/// The price machinery from the settings: feeds file, store, admin token.
fn pricing(
    settings: &Settings,
    catalog: &Arc<Catalog>,
    redis_url: Option<String>,
) -> Result<Pricing, String> {
    let feeds_text = match &settings.feeds_file {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("feeds file {path}: {e}"))?
        }
        None => FEEDS_TOML.to_string(),
    };
    let feeds = parse_feeds(&feeds_text)?;
    let store = redis_url
        .map(|url| Store::new(&url, &settings.redis_prefix))
        .transpose()?;
    let (pricing, rejected) = Pricing::new(
        catalog,
        settings.fx(),
        feeds,
        store,
        settings.admin_token.clone(),
    );
    for reason in rejected {
        tracing::warn!(%reason, "embedded price row not served");
    }
    Ok(pricing)
}

/// One estimate: from the plan's JSON to the answer's JSON.
type Answer<'a> = &'a dyn Fn(serde_json::Value) -> Result<serde_json::Value, ApiError>;

fn to_value<T: serde::Serialize>(answer: T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(answer).map_err(|e| ApiError::Internal(e.to_string()))
}

/// Reads a plan, prints the answer; exit 0, 2 for bad input, 1 otherwise.
fn estimate(path: &PathBuf, answer: Answer) -> i32 {
    let bytes = if path.as_os_str() == "-" {
        let mut buffer = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buffer).map(|_| buffer)
    } else {
        std::fs::read(path)
    };
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("trainplan: cannot read {}: {error}", path.display());
            return 2;
        }
    };
    let result = from_json_slice::<serde_json::Value>(&bytes).and_then(answer);
    match result {
        Ok(json) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&json).unwrap_or_else(|e| e.to_string())
            );
            0
        }
        Err(ApiError::Internal(error)) => {
            eprintln!("trainplan: {error}");
            1
        }
        Err(error) => {
            let problem = error.problem();
            eprintln!(
                "{}",
                serde_json::to_string_pretty(&problem).unwrap_or_else(|_| error.to_string())
            );
            2
        }
    }
}

/// Stops the refresher when SIGTERM or Ctrl-C arrives: feeds still fetching give up and
/// the lock goes back at once (actix drains the HTTP side on the same signals).
fn stop_refresher_on_signal(refresher: std::sync::Arc<crate::pricing::refresh::Refresher>) {
    tokio::spawn(async move {
        #[cfg(unix)]
        let terminate = async {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut terminate) => {
                    terminate.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminate => {}
        }
        tracing::info!("stopping the price refresher");
        refresher.stop();
    });
}

/// Binds and serves until the process is stopped.
fn serve(listen: &str, state: AppState, poll: std::time::Duration) -> std::io::Result<()> {
    actix_web::rt::System::new().block_on(async move {
        let pricing = &state.pricing;
        if let Some(store) = pricing.refresher.store.clone() {
            live::spawn(
                store,
                pricing.book.clone(),
                pricing.health.clone(),
                poll,
                pricing.refresher.clone(),
            );
        }
        stop_refresher_on_signal(pricing.refresher.clone());
        let state = actix_web::web::Data::new(state);
        let state_for_shutdown = state.clone();
        // A client has 5 s to send its request head and body; a stopping server gives
        // in-flight requests 30 s (the estimators answer in milliseconds).
        let server = actix_web::HttpServer::new(move || app(state.clone()))
            .client_request_timeout(std::time::Duration::from_secs(5))
            .client_disconnect_timeout(std::time::Duration::from_secs(1))
            .shutdown_timeout(30)
            .bind(listen)?;
        for address in server.addrs() {
            tracing::info!(%address, "trainplan listening on http://{address}");
        }
        let served = server.run().await;
        // SIGTERM: requests are drained; a refresh cut short gives its lock back.
        state_for_shutdown.pricing.refresher.release().await;
        tracing::info!("trainplan stopped");
        served
    })
}
