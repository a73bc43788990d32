//! The built binary, run as a user or a CI job would.

use std::process::Command;

use serde::Deserialize;

fn trainplan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trainplan"))
}

/// Runs `trainplan estimate KIND --plan PLAN`, expects success, returns the JSON answer.
fn estimate(kind: &str, plan: impl AsRef<std::ffi::OsStr>) -> serde_json::Value {
    let output = trainplan()
        .args(["estimate", kind, "--plan"])
        .arg(plan)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn estimate_memory_prints_the_api_answer_for_a_plan_file() {
    let directory = std::env::temp_dir().join(format!("trainplan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let plan = directory.join("plan.json");
    std::fs::write(&plan, r#"{"model": {"parameters": 7e9}, "parallelism": {"gpus": 4, "zero_stage": 3}, "gpu": "a100-80gb"}"#).unwrap();
    let answer = estimate("memory", &plan);
    assert_eq!(answer["per_gpu"]["model_states_bytes"], 28_000_000_000u64);

    std::fs::write(&plan, r#"{"model": "llama-2-7b", "micro_batch_size": 0}"#).unwrap();
    let output = trainplan()
        .args(["estimate", "memory", "--plan"])
        .arg(&plan)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/micro_batch_size"));
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn openapi_subcommand_prints_the_committed_spec() {
    let output = trainplan().arg("openapi").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        include_str!("../../openapi/openapi.json")
    );
}

#[test]
fn serve_on_port_zero_logs_the_chosen_address_and_answers() {
    let server = crate::support::RunningServer::start();
    let address = server.address.clone();
    assert!(!address.ends_with(":0"));
    let response = server.http_get("/livez");
    drop(server);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.to_ascii_lowercase().contains("x-request-id"));
}

#[test]
fn estimate_time_and_cost_run_the_example_plans_offline() {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = |kind: &str| estimate(kind, format!("{root}/examples/plans/{kind}.json"));
    let time = run("time");
    assert!(time["wall_hours"]["expected"].as_f64().unwrap() > 0.0);
    let cost = run("cost");
    assert_eq!(cost["currency"], "CNY");
    assert_eq!(cost["prices_source"]["kind"], "embedded_snapshot");
    let negotiated = cost["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["sku"] == "negotiated A100")
        .unwrap();
    let hours = time["wall_hours"]["expected"].as_f64().unwrap();
    assert!((negotiated["cost"].as_f64().unwrap() - 80.0 * hours).abs() < 1e-6 * hours);
    assert!(cost["self_build"]["break_even"].as_array().unwrap().len() > 3);
}

#[test]
fn scrape_refreshes_once_into_redis_and_fails_when_every_feed_fails() {
    let Ok(redis_url) = std::env::var("TRAINPLAN_TEST_REDIS_URL") else {
        panic!("TRAINPLAN_TEST_REDIS_URL is not set: run scripts/test.sh");
    };
    let directory = std::env::temp_dir().join(format!("trainplan-scrape-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let sheet = format!(
        "{}/tests/fixtures/feeds/sheet.csv",
        env!("CARGO_MANIFEST_DIR")
    );
    let feeds = |url: &str| {
        let path = directory.join("feeds.toml");
        std::fs::write(
            &path,
            format!(
                "[[feed]]\nname = \"sheet\"\nkind = \"csv_url\"\nenabled = true\nurl = \"{url}\"\n"
            ),
        )
        .unwrap();
        path
    };
    let prefix = format!("trainplan-test-{}", uuid::Uuid::new_v4().simple());
    let scrape = |feeds_file: &std::path::Path, redis: Option<&str>| {
        let mut command = trainplan();
        command
            .arg("scrape")
            .env("TRAINPLAN_FEEDS_FILE", feeds_file)
            .env("TRAINPLAN_REDIS_PREFIX", &prefix)
            .env_remove("TRAINPLAN_REDIS_URL");
        if let Some(url) = redis {
            command.env("TRAINPLAN_REDIS_URL", url);
        }
        command.output().unwrap()
    };

    let good = feeds(&format!("file://{sheet}"));
    assert_eq!(scrape(&good, None).status.code(), Some(2));
    let output = scrape(&good, Some(&redis_url));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["stored"], true);
    assert_eq!(report["feeds"][0]["rows_kept"], 2);

    let missing = feeds("file:///nonexistent/quotes.csv");
    let output = scrape(&missing, Some(&redis_url));
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The failed feed keeps its last good rows, stale.
    assert_eq!(report["feeds"][0]["rows_stale"], 2);

    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut c = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap();
    assert!(keys.iter().any(|k| k.ends_with(":current")));
    let _: () = redis::cmd("DEL").arg(keys).query(&mut c).unwrap();
    std::fs::remove_dir_all(&directory).unwrap();
}

/// Every command the compose file and the Kubernetes manifests run with the trainplan
/// image is a real subcommand with real flags, and every setting they pass is one the
/// binary reads (no Docker engine or cluster here to run them).
#[test]
fn deployment_files_run_real_subcommands_with_real_flags_and_settings() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut variables: Vec<String> = Vec::new();
    let compose: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(format!("{root}/docker-compose.yml")).unwrap(),
    )
    .unwrap();
    for (name, service) in compose["services"].as_mapping().unwrap() {
        if service.get("build").is_none() {
            continue;
        }
        let command: Vec<String> = serde_yaml_ng::from_value(service["command"].clone()).unwrap();
        commands.push(command);
        if let Some(healthcheck) = service.get("healthcheck") {
            let test: Vec<String> = serde_yaml_ng::from_value(healthcheck["test"].clone()).unwrap();
            assert_eq!(&test[..2], ["CMD", "trainplan"], "{name:?}");
            commands.push(test[2..].to_vec());
        }
        for key in service["environment"]
            .as_mapping()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            variables.push(key.as_str().unwrap().to_string());
        }
    }
    for file in [
        "configmap.yaml",
        "deployment.yaml",
        "service.yaml",
        "hpa.yaml",
        "cronjob.yaml",
    ] {
        let text = std::fs::read_to_string(format!("{root}/deploy/k8s/{file}")).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let manifest = serde_yaml_ng::Value::deserialize(document).unwrap();
            assert!(manifest["kind"].is_string(), "{file}: no kind");
            if manifest["kind"] == "ConfigMap" || manifest["kind"] == "Secret" {
                let data = if manifest["kind"] == "Secret" {
                    &manifest["stringData"]
                } else {
                    &manifest["data"]
                };
                for key in data.as_mapping().unwrap().keys().filter_map(|k| k.as_str()) {
                    if key.starts_with("TRAINPLAN_") {
                        variables.push(key.to_string());
                    }
                }
            }
            let pod = if manifest["kind"] == "CronJob" {
                &manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            } else {
                &manifest["spec"]["template"]["spec"]
            };
            for container in pod["containers"].as_sequence().into_iter().flatten() {
                commands.push(serde_yaml_ng::from_value(container["args"].clone()).unwrap());
            }
        }
    }
    assert!(commands.len() >= 5, "{commands:?}");
    for args in &commands {
        let help = trainplan().arg(&args[0]).arg("--help").output().unwrap();
        assert_eq!(help.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8_lossy(&help.stdout);
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                text.contains(flag.as_str()),
                "{flag} is not a flag of {}",
                args[0]
            );
        }
    }
    // Every TRAINPLAN_ setting is a key of the built-in defaults or a documented optional one.
    let defaults = include_str!("../../src/defaults.toml").to_ascii_uppercase();
    for variable in variables.iter().filter(|v| v.starts_with("TRAINPLAN_")) {
        let key = variable.trim_start_matches("TRAINPLAN_");
        assert!(
            defaults.contains(key),
            "{variable} is not a setting the binary reads"
        );
    }
}
