//! `trainplan gate`: the budget gate for CI, offline on the embedded book or against a
//! server. Exit 0 pass, 1 fail, 2 bad input, 3 prices unavailable or too old.

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;

use crate::api::{GateRequest, from_json_slice};
use crate::catalog::Catalog;
use crate::error::ApiError;
use crate::estimate::gate::Limits;
use crate::http::gate_answer;
use crate::pricing::{Currency, Pricing};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GateFormat {
    Json,
    Markdown,
    Junit,
}

/// The flags of `trainplan gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// A cost request (the body of POST /v1/estimates/cost), or {"plan": …, "limits": …}.
    #[arg(long)]
    pub plan: PathBuf,
    /// Most the cheapest option may cost.
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// Currency of --max-cost: USD or CNY.
    #[arg(long)]
    pub currency: Option<String>,
    /// Most wall hours the job may take.
    #[arg(long)]
    pub max_hours: Option<f64>,
    /// Oldest price reading accepted, in hours.
    #[arg(long)]
    pub max_price_age_hours: Option<f64>,
    /// Least free share of GPU memory, 0–1.
    #[arg(long)]
    pub min_headroom: Option<f64>,
    /// Ask this trainplan server (its live prices) instead of the embedded book.
    #[arg(long)]
    pub server: Option<String>,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: GateFormat,
    /// Also write the Markdown summary to this file (for a pull-request comment).
    #[arg(long)]
    pub summary_file: Option<PathBuf>,
}

/// Exit codes.
const PASS: i32 = 0;
const FAIL: i32 = 1;
const BAD_INPUT: i32 = 2;
const PRICES_UNUSABLE: i32 = 3;

fn problem(error: &ApiError) -> i32 {
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&error.problem()).unwrap_or_else(|_| error.to_string())
    );
    BAD_INPUT
}

/// The request from the plan file, with the flags' limits over the file's.
fn request(args: &GateArgs) -> Result<GateRequest, ApiError> {
    let bytes = std::fs::read(&args.plan).map_err(|e| {
        ApiError::Invalid(vec![crate::validation::FieldError::new(
            "/plan",
            format!("cannot read {}: {e}", args.plan.display()),
        )])
    })?;
    let value: Value = from_json_slice(&bytes)?;
    let mut request = if value.get("plan").is_some() {
        crate::api::from_json_value::<GateRequest>(value)?
    } else {
        GateRequest {
            plan: value,
            limits: Limits::default(),
        }
    };
    let limits = &mut request.limits;
    if let Some(currency) = &args.currency {
        limits.currency = Some(
            serde_json::from_value::<Currency>(Value::String(currency.clone())).map_err(|_| {
                ApiError::Invalid(vec![crate::validation::FieldError::new(
                    "/limits/currency",
                    format!("unknown currency {currency:?}; expected USD or CNY"),
                )])
            })?,
        );
    }
    limits.max_cost = args.max_cost.or(limits.max_cost);
    limits.max_hours = args.max_hours.or(limits.max_hours);
    limits.max_price_age_hours = args.max_price_age_hours.or(limits.max_price_age_hours);
    limits.min_headroom_fraction = args.min_headroom.or(limits.min_headroom_fraction);
    Ok(request)
}

/// Offline: the embedded book. Online: the server's answer, or its problem.
fn answer(
    request: &GateRequest,
    args: &GateArgs,
    catalog: &std::sync::Arc<Catalog>,
    pricing: Pricing,
) -> Result<Result<Value, i32>, ApiError> {
    let Some(server) = &args.server else {
        let answer = gate_answer(request, catalog, &pricing, jiff::Timestamp::now())?;
        return Ok(Ok(
            serde_json::to_value(answer).map_err(|e| ApiError::Internal(e.to_string()))?
        ));
    };
    let url = format!("{}/v1/gates/budget", server.trim_end_matches('/'));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let reply = runtime.block_on(async {
        let body = serde_json::to_vec(request).unwrap_or_default();
        let response = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        let status = response.status();
        Ok::<_, reqwest::Error>((status, response.bytes().await?.to_vec()))
    });
    Ok(match reply {
        Err(error) => {
            eprintln!("trainplan gate: {url}: {error}");
            Err(PRICES_UNUSABLE)
        }
        Ok((status, body)) => {
            let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if status.is_success() {
                Ok(value)
            } else {
                eprintln!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
                Err(if status.is_client_error() {
                    BAD_INPUT
                } else {
                    PRICES_UNUSABLE
                })
            }
        }
    })
}

fn junit(answer: &Value) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let checks = answer["checks"].as_array().cloned().unwrap_or_default();
    let failures = checks.iter().filter(|c| c["result"] == "fail").count();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"trainplan budget gate\" tests=\"{}\" failures=\"{failures}\">\n",
        checks.len()
    );
    for c in &checks {
        let name = escape(c["name"].as_str().unwrap_or(""));
        let detail = escape(c["detail"].as_str().unwrap_or(""));
        let inner = match c["result"].as_str() {
            Some("fail") => format!("<failure message=\"{detail}\"/>"),
            Some("skipped") => format!("<skipped message=\"{detail}\"/>"),
            _ => String::new(),
        };
        xml.push_str(&format!(
            "  <testcase classname=\"trainplan.gate\" name=\"{name}\">{inner}</testcase>\n"
        ));
    }
    xml.push_str("</testsuite>\n");
    xml
}

/// Appends to the file a GitHub Actions variable names, when it is set.
fn append(variable: &str, text: &str) {
    if let Ok(path) = std::env::var(variable)
        && let Err(error) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
    {
        eprintln!("trainplan gate: cannot write {variable} ({path}): {error}");
    }
}

pub fn run(args: &GateArgs, catalog: &std::sync::Arc<Catalog>, pricing: Pricing) -> i32 {
    let request = match request(args) {
        Ok(request) => request,
        Err(error) => return problem(&error),
    };
    let answer = match answer(&request, args, catalog, pricing) {
        Err(error) => return problem(&error),
        Ok(Err(code)) => return code,
        Ok(Ok(answer)) => answer,
    };
    let summary = answer["summary_markdown"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let verdict = answer["verdict"].as_str().unwrap_or("fail");
    append("GITHUB_STEP_SUMMARY", &format!("{summary}\n"));
    if let Some(path) = &args.summary_file
        && let Err(error) = std::fs::write(path, &summary)
    {
        eprintln!("trainplan gate: cannot write {}: {error}", path.display());
        return BAD_INPUT;
    }
    let option = &answer["option"];
    append(
        "GITHUB_OUTPUT",
        &format!(
            "verdict={verdict}\ncost={}\ncurrency={}\nhours={}\n",
            option["cost"],
            option["currency"].as_str().unwrap_or(""),
            option["hours"]
        ),
    );
    if verdict != "pass" && std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        for c in answer["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["result"] == "fail")
        {
            println!(
                "::error title=trainplan budget gate::{}: {}",
                c["name"].as_str().unwrap_or(""),
                c["detail"].as_str().unwrap_or("")
            );
        }
    }
    match args.format {
        GateFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ),
        GateFormat::Markdown => print!("{summary}"),
        GateFormat::Junit => print!("{}", junit(&answer)),
    }
    if answer["prices_unusable"] == true {
        PRICES_UNUSABLE
    } else if verdict == "pass" {
        PASS
    } else {
        FAIL
    }
}
