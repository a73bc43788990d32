//! The decision tree on the seed article's own scenarios, through the HTTP stack.

use serde_json::{Value, json};

use crate::support::{get, post_json};

async fn recommend(body: Value) -> Value {
    let reply = post_json("/v1/recommendations", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

/// One field of a node of the answer's path.
fn node(answer: &Value, node: &str, field: &str) -> String {
    answer["path"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == node)
        .unwrap_or_else(|| panic!("no {node} node in {}", answer["path"]))[field]
        .as_str()
        .unwrap()
        .to_string()
}

fn branch(answer: &Value, name: &str) -> String {
    node(answer, name, "branch")
}

fn plans(answer: &Value) -> Vec<&Value> {
    answer["plan"]
        .as_object()
        .map(|_| &answer["plan"])
        .into_iter()
        .chain(answer["alternatives"].as_array().unwrap())
        .collect()
}

#[actix_web::test]
async fn large_data_and_maximum_quality_mean_full_fine_tuning_on_a_fleet_that_fits() {
    let answer = recommend(json!({"model": "llama-2-7b", "dataset": {"samples": 200000, "tokens_per_sample": 512, "epochs": 3}, "quality": "max"})).await;
    assert_eq!(answer["method"], "full");
    assert!(branch(&answer, "method").contains("over 100k samples"));
    // The article's 4× A100 80GB with ZeRO-3 is among the feasible plans.
    assert!(
        plans(&answer)
            .iter()
            .any(|p| p["gpu"] == "a100-80gb" && p["gpus"] == 4 && p["zero_stage"] == 3),
        "{}",
        answer["alternatives"]
    );
    // Every plan fits its GPUs and is ranked by cost.
    let costs: Vec<f64> = answer["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["project_cost"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]));
    assert!(answer["plan"]["project_cost"].as_f64().unwrap() <= costs[0]);
    assert!(
        answer["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reason"].as_str().unwrap().contains("no spot price")
                || r["reason"].as_str().unwrap().contains("does not fit"))
    );
}

#[actix_web::test]
async fn medium_data_and_balanced_quality_mean_lora_on_one_or_two_gpus() {
    let answer = recommend(
        json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "quality": "balanced"}),
    )
    .await;
    assert!(
        answer["method"] == "lora" || answer["method"] == "qlora",
        "{}",
        answer["method"]
    );
    let gpus = answer["plan"]["gpus"].as_u64().unwrap();
    assert!((1..=2).contains(&gpus), "{gpus}");
}

#[actix_web::test]
async fn small_data_a_simple_task_and_a_tiny_budget_mean_prefix_tuning_or_adapters() {
    let answer = recommend(json!({"model": "llama-2-7b", "dataset": {"samples": 2000}, "task_type": "simple", "quality": "budget", "budget": {"amount": 50, "currency": "USD"}})).await;
    assert!(
        answer["method"] == "prefix_tuning" || answer["method"] == "adapter",
        "{}",
        answer["method"]
    );
    assert!(answer["plan"]["project_cost"].as_f64().unwrap() <= 50.0);
}

#[actix_web::test]
async fn a_one_week_experiment_runs_on_spot_with_checkpoints() {
    let answer = recommend(
        json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "project_months": 0.25}),
    )
    .await;
    assert_eq!(answer["deployment"], "spot");
    assert!(branch(&answer, "deployment").contains("spot with checkpoints"));
    assert_eq!(answer["plan"]["price_type"], "spot");
    assert!(
        answer["plan"]["checkpoint_interval_minutes"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[actix_web::test]
async fn steady_use_past_the_break_even_means_self_build_with_an_ops_team_and_reserved_without() {
    let steady = json!({"model": "llama-2-7b", "dataset": {"samples": 2000000, "tokens_per_sample": 512, "epochs": 3}, "quality": "max",
        "project_months": 24, "expected_runs": 200, "can_operate_hardware": true, "hardware_cost_per_gpu": 10000});
    let answer = recommend(steady.clone()).await;
    assert_eq!(answer["deployment"], "self_build", "{}", answer["path"]);
    assert_eq!(answer["plan"]["price_type"], "self_build");
    let mut no_team = steady;
    no_team["can_operate_hardware"] = json!(false);
    let answer = recommend(no_team).await;
    assert_eq!(answer["deployment"], "reserved", "{}", answer["path"]);
    assert_eq!(answer["plan"]["price_type"], "reserved_1y");
    assert!(branch(&answer, "deployment").contains("no team"));
}

#[actix_web::test]
async fn the_self_build_break_even_is_against_the_on_demand_price_whatever_else_is_priced() {
    // Reserved options are derived from the same on-demand rows (same provider and SKU);
    // asking for them must not move the break-even the deployment node states.
    let mut request = json!({"model": "llama-2-7b", "dataset": {"samples": 2000000, "tokens_per_sample": 512, "epochs": 3},
        "project_months": 24, "expected_runs": 20, "can_operate_hardware": true, "hardware_cost_per_gpu": 10000,
        "gpus": ["h100-80gb"], "providers": ["aws"]});
    let every_type = node(&recommend(request.clone()).await, "deployment", "value");
    request["price_types"] = json!(["on_demand"]);
    let on_demand_only = node(&recommend(request).await, "deployment", "value");
    assert!(
        every_type.contains("self-build break-even "),
        "{every_type}"
    );
    assert!(!every_type.contains("not evaluated"), "{every_type}");
    assert_eq!(every_type, on_demand_only);
}

#[actix_web::test]
async fn the_deployment_node_counts_its_months_runs_and_hours_in_words() {
    let one = node(
        &recommend(json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "project_months": 1, "expected_runs": 1})).await,
        "deployment",
        "value",
    );
    assert!(one.starts_with("1 month, 1 run, "), "{one}");
    let many = node(
        &recommend(json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "project_months": 1.5, "expected_runs": 3})).await,
        "deployment",
        "value",
    );
    assert!(many.starts_with("1.5 months, 3 runs, "), "{many}");
    assert!(
        many.contains(" hours of use on the cheapest on-demand fleet"),
        "{many}"
    );
}

#[actix_web::test]
async fn deadlines_and_budgets_reject_with_reasons_and_the_get_form_agrees() {
    let answer = recommend(json!({"model": "llama-2-7b", "dataset": {"samples": 200000}, "quality": "max", "deadline_hours": 6, "budget": {"amount": 25}})).await;
    let reasons: Vec<&str> = answer["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons.iter().any(|r| r.starts_with("too slow")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("over budget")),
        "{reasons:?}"
    );
    for p in plans(&answer) {
        assert!(p["hours"].as_f64().unwrap() <= 6.0);
        assert!(p["project_cost"].as_f64().unwrap() <= 25.0);
    }
    let posted = recommend(
        json!({"model": "llama-2-7b", "dataset": {"samples": 20000}, "quality": "budget"}),
    )
    .await;
    let fetched = get("/v1/recommendations?model=llama-2-7b&samples=20000&quality=budget")
        .await
        .json();
    assert_eq!(posted, fetched);
    let csv = get("/v1/recommendations?model=llama-2-7b&samples=20000&format=csv").await;
    assert!(csv.content_type.starts_with("text/csv"));
}
