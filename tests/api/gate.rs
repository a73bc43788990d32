//! The budget gate: over HTTP, and as CI runs it — the built binary, its exit codes, the
//! GitHub Actions files it writes, and the shipped workflow and GitLab job.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::support::post_json;

fn trainplan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trainplan"))
}

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A scratch directory of this test's own, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "trainplan-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(dir.join("training")).unwrap();
        std::fs::copy(
            format!("{ROOT}/examples/plans/gate.json"),
            dir.join("training/plan.json"),
        )
        .unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gate(dir: &Path, args: &[&str]) -> std::process::Output {
    trainplan()
        .arg("gate")
        .args(args)
        .current_dir(dir)
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT")
        .output()
        .unwrap()
}

#[test]
fn exit_codes_pass_fail_stale_and_bad_input() {
    let scratch = Scratch::new("gate-codes");
    let dir = &scratch.0;
    let plan = "training/plan.json";
    // ¥40/h per GPU × 2 GPUs × 20 h = ¥1,600.
    let pass = gate(
        dir,
        &[
            "--plan",
            plan,
            "--max-cost",
            "2000",
            "--currency",
            "CNY",
            "--max-hours",
            "48",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        pass.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&pass.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&pass.stdout).unwrap();
    assert_eq!(answer["verdict"], "pass");
    assert_eq!(answer["option"]["cost"], 1600.0);
    // Over the money…
    assert_eq!(
        gate(
            dir,
            &["--plan", plan, "--max-cost", "1500", "--currency", "CNY"]
        )
        .status
        .code(),
        Some(1)
    );
    // …the same limit in dollars: ¥1,600 is 222 USD at 7.2.
    assert_eq!(
        gate(
            dir,
            &["--plan", plan, "--max-cost", "200", "--currency", "USD"]
        )
        .status
        .code(),
        Some(1)
    );
    assert_eq!(
        gate(
            dir,
            &["--plan", plan, "--max-cost", "250", "--currency", "USD"]
        )
        .status
        .code(),
        Some(0)
    );
    // …over the hours.
    assert_eq!(
        gate(dir, &["--plan", plan, "--max-hours", "10"])
            .status
            .code(),
        Some(1)
    );
    // Prices older than allowed: the book's rows are weeks old.
    std::fs::write(
        dir.join("book.json"),
        r#"{"hours": 20, "gpu": "h100-80gb", "parallelism": {"gpus": 8}}"#,
    )
    .unwrap();
    let stale = gate(dir, &["--plan", "book.json", "--max-price-age-hours", "24"]);
    assert_eq!(
        stale.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&stale.stdout)
    );
    // No price at all is "unavailable" too.
    std::fs::write(
        dir.join("nothing.json"),
        r#"{"hours": 20, "gpu": "h100-80gb", "pricing": {"providers": ["nobody"]}}"#,
    )
    .unwrap();
    assert_eq!(
        gate(dir, &["--plan", "nothing.json"]).status.code(),
        Some(3)
    );
    // Bad plans and flags.
    std::fs::write(dir.join("bad.json"), r#"{"hours": -1}"#).unwrap();
    let bad = gate(dir, &["--plan", "bad.json"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/plan/hours"));
    assert_eq!(
        gate(dir, &["--plan", "missing.json"]).status.code(),
        Some(2)
    );
    assert_eq!(
        gate(dir, &["--plan", plan, "--currency", "EUR"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn the_markdown_summary_is_stable() {
    let scratch = Scratch::new("gate-markdown");
    let output = gate(
        &scratch.0,
        &[
            "--plan",
            "training/plan.json",
            "--max-cost",
            "2000",
            "--currency",
            "CNY",
            "--max-hours",
            "48",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let markdown = String::from_utf8(output.stdout).unwrap();
    assert!(markdown.starts_with("<!-- trainplan-budget-gate -->"));
    insta::assert_snapshot!("gate_pass_markdown", markdown);
    let output = gate(
        &scratch.0,
        &[
            "--plan",
            "training/plan.json",
            "--max-cost",
            "1000",
            "--currency",
            "CNY",
        ],
    );
    insta::assert_snapshot!(
        "gate_fail_markdown",
        String::from_utf8(output.stdout).unwrap()
    );
}

/// The command a CI file runs, from its first line that calls `trainplan gate`.
fn command_in(file: &str) -> (Vec<String>, Option<String>) {
    let text = std::fs::read_to_string(format!("{ROOT}/docs/ci/{file}")).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("trainplan gate"))
        .unwrap_or_else(|| panic!("{file} runs no gate"));
    let command = &line[line.find("trainplan gate").unwrap()..];
    let (command, redirect) = match command.split_once('>') {
        Some((c, file)) => (c, Some(file.trim().to_string())),
        None => (command, None),
    };
    let words: Vec<String> = command
        .split_whitespace()
        .skip(2)
        .map(String::from)
        .collect();
    (words, redirect)
}

#[test]
fn the_github_workflow_runs_the_gate_and_writes_summary_outputs_and_comment() {
    let scratch = Scratch::new("gate-github");
    let (args, _) = command_in("github-actions.yml");
    let run = |max_cost: Option<&str>| {
        let mut args = args.clone();
        if let Some(limit) = max_cost {
            let i = args.iter().position(|a| a == "--max-cost").unwrap();
            args[i + 1] = limit.to_string();
        }
        trainplan()
            .arg("gate")
            .args(&args)
            .current_dir(&scratch.0)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", scratch.path("summary.md"))
            .env("GITHUB_OUTPUT", scratch.path("output.txt"))
            .output()
            .unwrap()
    };
    let output = run(None);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = std::fs::read_to_string(scratch.path("summary.md")).unwrap();
    assert!(summary.contains("budget gate: **pass**"));
    let outputs = std::fs::read_to_string(scratch.path("output.txt")).unwrap();
    assert!(
        outputs.contains("verdict=pass\n") && outputs.contains("cost=1600.0\n"),
        "{outputs}"
    );
    let comment = std::fs::read_to_string(scratch.path("gate.md")).unwrap();
    assert!(comment.starts_with("<!-- trainplan-budget-gate -->"));
    // Over budget: exit 1 and an error annotation.
    let output = run(Some("1000"));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("::error title=trainplan budget gate::cost:")
    );
}

#[test]
fn the_gitlab_job_runs_the_gate_and_writes_a_junit_report() {
    let scratch = Scratch::new("gate-gitlab");
    let (args, redirect) = command_in("gitlab-ci.yml");
    let report = redirect.expect("the job redirects the JUnit report to a file");
    let output = trainplan()
        .arg("gate")
        .args(&args)
        .current_dir(&scratch.0)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    std::fs::write(scratch.path(&report), &output.stdout).unwrap();
    let xml = std::fs::read_to_string(scratch.path(&report)).unwrap();
    assert!(xml.starts_with("<?xml"));
    assert!(
        xml.contains(r#"<testsuite name="trainplan budget gate" tests="5" failures="0">"#),
        "{xml}"
    );
    assert!(xml.contains(r#"name="cost">"#));
}

#[actix_web::test]
async fn over_http_the_gate_always_answers_200_with_a_verdict() {
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{ROOT}/examples/plans/gate.json")).unwrap(),
    )
    .unwrap();
    let reply = post_json(
        "/v1/gates/budget",
        &json!({"plan": plan, "limits": {"max_cost": 1000, "currency": "CNY"}}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer = reply.json();
    assert_eq!(answer["verdict"], "fail");
    let cost = answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "cost")
        .unwrap();
    assert_eq!(
        (
            cost["limit"].clone(),
            cost["value"].clone(),
            cost["result"].clone()
        ),
        (json!(1000.0), json!(1600.0), json!("fail"))
    );
    // A plan with a model gets the memory check on its GPU.
    let with_model = json!({"plan": {"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb", "workload": {"tokens": 1e8}}, "limits": {"min_headroom_fraction": 0.2}});
    let answer = post_json("/v1/gates/budget", &with_model).await.json();
    let headroom = answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "memory_headroom")
        .unwrap();
    assert_eq!(headroom["result"], "pass", "{headroom}");
    // Bad plans are 422 with pointers under /plan.
    let reply = post_json("/v1/gates/budget", &json!({"plan": {"hours": -2}})).await;
    assert_eq!(reply.status, 422);
    assert!(reply.text().contains("/plan/hours"), "{}", reply.text());
    let reply = post_json(
        "/v1/gates/budget",
        &json!({"plan": {"hours": 2, "hourz": 3}, "limits": {"max_cost": -1}}),
    )
    .await;
    assert_eq!(reply.status, 422);
    assert!(
        reply.text().contains("/plan/hourz") && reply.text().contains("/limits/max_cost"),
        "{}",
        reply.text()
    );
}

/// The limits' currency is the one the plan is priced in, whatever form the plan's
/// `pricing` takes; a currency the service does not know is refused, not ignored.
#[actix_web::test]
async fn the_plan_is_priced_in_the_limits_currency() {
    let cost_check = |answer: &serde_json::Value| {
        answer["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "cost")
            .unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let limits = json!({"max_cost": 2000, "currency": "CNY"});
    let mut details = Vec::new();
    for pricing in [
        None,
        Some(json!(null)),
        Some(json!({})),
        Some(json!({"currency": "USD"})),
    ] {
        let mut plan = json!({"gpu": "a100-80gb", "hours": 50});
        if let Some(pricing) = pricing {
            plan["pricing"] = pricing;
        }
        let reply = post_json("/v1/gates/budget", &json!({"plan": plan, "limits": limits})).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let answer = reply.json();
        assert_eq!(answer["estimate"]["currency"], "CNY", "{plan}");
        let detail = cost_check(&answer);
        assert!(
            detail.ends_with("within the limit of 2000.00 CNY"),
            "{plan}: {detail}"
        );
        details.push(detail);
    }
    // The same fleet costs the same, whichever way the plan said nothing about currency.
    assert!(details.windows(2).all(|w| w[0] == w[1]), "{details:?}");

    let unknown = json!({"plan": {"gpu": "a100-80gb", "hours": 50, "pricing": {"currency": "AAA"}}, "limits": limits});
    let reply = post_json("/v1/gates/budget", &unknown).await;
    assert_eq!(reply.status, 422, "{}", reply.text());
    assert!(
        reply.text().contains("/plan/pricing/currency"),
        "{}",
        reply.text()
    );
}
