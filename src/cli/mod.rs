//! The command line: `serve` (default), `estimate memory --plan FILE`, `openapi`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::api::{MemoryRequest, from_json_slice};
use crate::catalog::Catalog;
use crate::config::Settings;
use crate::http::{AppState, app, memory_answer};

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
        Command::Estimate {
            kind: EstimateKind::Memory { plan },
        } => estimate_memory(&plan, &catalog),
        Command::Serve { listen } => {
            crate::telemetry::init(settings.log_format, &settings.log_level);
            let listen = listen.unwrap_or_else(|| settings.listen.clone());
            match serve(&listen, catalog, settings.body_limit_bytes) {
                Ok(()) => 0,
                Err(error) => {
                    eprintln!("trainplan: serve on {listen}: {error}");
                    1
                }
            }
        }
    }
}

fn estimate_memory(path: &PathBuf, catalog: &Catalog) -> i32 {
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
    let answer = from_json_slice::<MemoryRequest>(&bytes)
        .and_then(|request| memory_answer(&request, catalog));
    match answer.map(|a| serde_json::to_string_pretty(&a)) {
        Ok(Ok(json)) => {
            println!("{json}");
            0
        }
        Ok(Err(error)) => {
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

/// Binds and serves until the process is stopped.
fn serve(listen: &str, catalog: Arc<Catalog>, body_limit_bytes: usize) -> std::io::Result<()> {
    actix_web::rt::System::new().block_on(async move {
        let state = actix_web::web::Data::new(AppState::new(catalog, body_limit_bytes));
        let server = actix_web::HttpServer::new(move || app(state.clone())).bind(listen)?;
        for address in server.addrs() {
            tracing::info!(%address, "trainplan listening on http://{address}");
        }
        server.run().await
    })
}
