//! Time, cost and prices through the HTTP stack: the seed article's money figures, the
//! GET forms, whole-instance rounding, currencies, filters and renderings.

use serde_json::{Value, json};

use crate::support::{get, post_json};

const SEED_FIGURES: f64 = 1e-9;

/// The seed article's inputs: ¥200/h for 4× A100 80GB on demand, spot at 20 % of that,
/// 50 hours, no interruptions, a ¥320,000 server with power and operations left out.
fn seed_request() -> Value {
    json!({
        "hours": 50, "gpu": "a100-80gb", "parallelism": {"gpus": 4},
        "pricing": {"providers": [], "currency": "CNY", "custom_quotes": [
            {"name": "negotiated 4×A100", "gpu": "a100-80gb", "gpus": 4, "price_per_instance_hour": 200},
            {"name": "spot 4×A100", "gpu": "a100-80gb", "gpus": 4, "price_per_instance_hour": 40, "price_type": "spot"}
        ]},
        "spot": {"interruptions_per_hour": 0},
        "self_build": {"hardware_cost": 320000, "power_kw": 0, "ops_cost_per_month": 0}
    })
}

fn option<'a>(answer: &'a Value, price_type: &str) -> &'a Value {
    &answer["cheapest"][price_type]
}

#[actix_web::test]
async fn the_seed_articles_money_figures_come_out_exactly() {
    let reply = post_json("/v1/estimates/cost", &seed_request()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer = reply.json();
    assert_eq!(answer["currency"], "CNY");
    let on_demand = option(&answer, "on_demand");
    assert_eq!(on_demand["cost"].as_f64().unwrap(), 10_000.0);
    assert_eq!(on_demand["gpus_rented"], 4);
    let spot = option(&answer, "spot");
    assert_eq!(spot["price_per_hour"].as_f64().unwrap(), 40.0);
    assert_eq!(spot["cost"].as_f64().unwrap(), 2_000.0);
    assert_eq!(spot["rework_hours"].as_f64().unwrap(), 0.0);
    // Cheapest first.
    assert_eq!(answer["options"][0]["price_type"], "spot");
    let break_even = answer["self_build"]["break_even"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["price_type"] == "on_demand")
        .unwrap();
    assert_eq!(break_even["break_even_hours"].as_f64().unwrap(), 1_600.0);
    let days = break_even["break_even_days"].as_f64().unwrap();
    assert!((days - 66.666_666).abs() < 1e-3, "{days}");

    // LoRA on 2 GPUs at ¥40/h per GPU for 20 hours.
    let lora = json!({
        "hours": 20, "gpu": "a100-80gb", "parallelism": {"gpus": 2},
        "pricing": {"providers": [], "currency": "CNY", "custom_quotes": [
            {"gpu": "a100-80gb", "gpus": 1, "price_per_gpu_hour": 40}
        ]}
    });
    let answer = post_json("/v1/estimates/cost", &lora).await.json();
    let only = &answer["options"][0];
    assert_eq!(only["instances"], 2);
    assert!((only["cost"].as_f64().unwrap() - 1_600.0).abs() < SEED_FIGURES);
    assert_eq!(answer["options"].as_array().unwrap().len(), 1);
}

/// The answer without the fields that depend on when the book was loaded.
fn stable(mut answer: Value) -> Value {
    if let Some(source) = answer.get_mut("prices_source") {
        source["loaded_at"] = Value::Null;
    }
    answer
}

#[actix_web::test]
async fn get_and_post_forms_give_identical_answers() {
    let time_body = json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-80gb",
        "parallelism": {"gpus": 2}, "workload": {"tokens": 2.0e8}});
    let posted = post_json("/v1/estimates/time", &time_body).await.json();
    let fetched =
        get("/v1/estimates/time?model=llama-2-7b&method=lora&gpu=a100-80gb&gpus=2&tokens=2e8")
            .await
            .json();
    assert_eq!(posted, fetched);

    let posted = post_json("/v1/estimates/cost", &seed_request())
        .await
        .json();
    let fetched = get(concat!(
        "/v1/estimates/cost?hours=50&gpu=a100-80gb&gpus=4&providers=&currency=CNY",
        "&quote_name=negotiated%204%C3%97A100&quote_gpu=a100-80gb&quote_gpus=4&quote_price_per_instance_hour=200",
        "&interruptions_per_hour=0&hardware_cost=320000&power_kw=0&ops_cost_per_month=0"
    ))
    .await
    .json();
    // The GET form carries one custom quote: compare with the POST of that one quote.
    let mut one_quote = seed_request();
    one_quote["pricing"]["custom_quotes"]
        .as_array_mut()
        .unwrap()
        .truncate(1);
    let posted_one = post_json("/v1/estimates/cost", &one_quote).await.json();
    assert_eq!(stable(posted_one), stable(fetched));
    assert_ne!(stable(posted)["options"], Value::Null);
}

#[actix_web::test]
async fn a_cost_over_the_book_rents_whole_instances_and_dates_every_price() {
    // 4 GPUs of a type most clouds sell as 8-GPU instances.
    let body = json!({"model": "llama-2-7b", "method": "lora", "gpu": "a100-40gb",
        "parallelism": {"gpus": 4}, "workload": {"tokens": 2.0e8}});
    let reply = post_json("/v1/estimates/cost", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let answer = reply.json();
    let options = answer["options"].as_array().unwrap();
    assert!(options.len() >= 5, "{}", options.len());
    let costs: Vec<f64> = options
        .iter()
        .map(|o| o["cost"].as_f64().unwrap())
        .collect();
    assert!(
        costs.windows(2).all(|w| w[0] <= w[1]),
        "not sorted: {costs:?}"
    );
    let hours = answer["hours"].as_f64().unwrap();
    assert!((answer["time"]["wall_hours"]["expected"].as_f64().unwrap() - hours).abs() < 1e-9);
    for o in options {
        let rented = o["gpus_rented"].as_u64().unwrap();
        let per_instance = o["gpus_per_instance"].as_u64().unwrap();
        assert!(rented >= 4 && rented < 4 + per_instance, "{o}");
        if rented > 4 {
            assert!(
                o["notes"].to_string().contains("whole instances"),
                "rounding not stated: {o}"
            );
        }
        assert!(!o["source"].as_str().unwrap().is_empty());
        let cost = o["cost"].as_f64().unwrap();
        let expected = o["price_per_hour"].as_f64().unwrap() * o["hours"].as_f64().unwrap();
        assert!((cost - expected).abs() <= 1e-9 * cost.max(1.0));
    }
    // An 8-GPU p4d for a 4-GPU job pays for 8.
    let p4d = options
        .iter()
        .find(|o| o["sku"] == "p4d.24xlarge" && o["price_type"] == "on_demand")
        .unwrap();
    assert_eq!(p4d["gpus_rented"], 8);
    assert!((p4d["price_per_hour"].as_f64().unwrap() - 21.957642).abs() < 1e-9);
    for price_type in ["on_demand", "spot", "reserved_1y", "reserved_3y"] {
        assert!(answer["cheapest"][price_type].is_object(), "{price_type}");
    }
    let reserved = option(&answer, "reserved_3y");
    assert!(
        reserved["notes"]
            .to_string()
            .contains("commitment discount")
    );
    let spot = option(&answer, "spot");
    assert!(
        spot["spot"]["young_daly_interval_minutes"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(spot["rework_hours"].as_f64().unwrap() > 0.0);
    assert!(
        !spot["spot"]["interruptions_source"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert_eq!(answer["prices_source"]["kind"], "embedded_snapshot");
    assert_eq!(answer["prices_source"]["rows"], 93);
    assert_eq!(answer["fx"]["cny_per_usd"], 7.2);
}

#[actix_web::test]
async fn native_yuan_rows_are_converted_at_the_stated_rate() {
    let body = json!({"hours": 10, "gpu": "a100-80gb", "pricing": {"providers": ["alibaba"], "currency": "USD"}});
    let answer = post_json("/v1/estimates/cost", &body).await.json();
    let alibaba = option(&answer, "on_demand");
    assert_eq!(alibaba["native_currency"], "CNY");
    assert_eq!(alibaba["native_price_per_instance_hour"], 34.742);
    let usd = alibaba["price_per_hour"].as_f64().unwrap();
    assert!((usd - 34.742 / 7.2).abs() < 1e-9, "{usd}");
    assert!(
        answer["assumptions"]
            .to_string()
            .contains("7.2 CNY per USD")
    );
}

#[actix_web::test]
async fn filters_that_match_nothing_give_an_empty_list_and_a_warning() {
    let body = json!({"hours": 10, "gpu": "a100-80gb", "pricing": {"providers": ["nobody"]}});
    let reply = post_json("/v1/estimates/cost", &body).await;
    assert_eq!(reply.status, 200);
    let answer = reply.json();
    assert_eq!(answer["options"], json!([]));
    assert!(answer["warnings"].to_string().contains("no price matches"));

    let reply = get("/v1/prices?provider=nobody").await;
    assert_eq!(reply.status, 200);
    let list = reply.json();
    assert_eq!(list["count"], 0);
    assert!(list["warnings"].to_string().contains("nobody"));
}

#[actix_web::test]
async fn cost_renders_as_csv_rows_and_as_one_value() {
    let uri = "/v1/estimates/cost?hours=50&gpu=a100-80gb&gpus=4&providers=&currency=CNY&quote_name=%3DHYPERLINK(1)&quote_gpu=a100-80gb&quote_gpus=4&quote_price_per_instance_hour=200";
    let reply = get(&format!("{uri}&format=csv")).await;
    assert_eq!(reply.status, 200);
    assert!(reply.content_type.starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(reply.body.as_slice());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(&rows[0][column("options.cost")], "10000.0");
    assert_eq!(&rows[0][column("options.sku")], "'=HYPERLINK(1)");
    let text = get(&format!("{uri}&format=text&field=cheapest.on_demand.cost"))
        .await
        .text();
    assert_eq!(text, "10000.0");
    let hours =
        get("/v1/estimates/time?model=llama-2-7b&tokens=1e9&format=text&field=wall_hours.expected")
            .await
            .text();
    assert!(hours.parse::<f64>().unwrap() > 0.0, "{hours}");
}

#[actix_web::test]
async fn the_price_list_filters_ages_and_converts() {
    let all = get("/v1/prices").await.json();
    assert_eq!(all["count"], 93);
    let a100 = get("/v1/prices?gpu=a100-80gb&provider=aws,gcp&price_type=on_demand&currency=CNY")
        .await
        .json();
    let rows = a100["prices"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        assert_eq!(row["gpu"], "a100-80gb");
        assert!(row["provider"] == "aws" || row["provider"] == "gcp");
        assert_eq!(row["price_type"], "on_demand");
        let converted = row["converted"]["price_per_gpu_hour"].as_f64().unwrap();
        assert!((converted - row["price_per_gpu_hour"].as_f64().unwrap() * 7.2).abs() < 1e-9);
        assert!(row["age_hours"].as_f64().unwrap() > 0.0);
    }
    // Everything in the snapshot is older than a day.
    let fresh = get("/v1/prices?max_age_hours=24").await.json();
    assert_eq!(fresh["count"], 0);
    let csv_reply = get("/v1/prices?gpu=h100-80gb&format=csv").await;
    assert!(csv_reply.content_type.starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(csv_reply.body.as_slice());
    assert!(
        reader
            .headers()
            .unwrap()
            .iter()
            .any(|h| h == "prices.age_hours")
    );
    assert!(reader.records().count() > 3);
}

#[actix_web::test]
async fn the_embedded_snapshot_keeps_every_reference_row_with_its_date_and_source() {
    let reference = include_str!("../fixtures/reference/prices-snapshot.csv");
    let mut reader = csv::Reader::from_reader(reference.as_bytes());
    let expected: Vec<(String, String, String, String)> = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            (
                r[0].to_string(),
                r[2].to_string(),
                r[9].to_string(),
                r[10].to_string(),
            )
        })
        .collect();
    let served = get("/v1/prices").await.json();
    let rows: Vec<(String, String, String, String)> = served["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().unwrap().to_string(),
                p["sku"].as_str().unwrap().to_string(),
                p["as_of"].as_str().unwrap_or("").to_string(),
                p["source"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(rows, expected);
}

#[actix_web::test]
async fn a_time_estimate_is_consistent_and_states_its_assumptions() {
    let body = json!({"model": "llama-3.1-8b", "gpu": "h100-80gb", "parallelism": {"gpus": 8, "zero_stage": 3},
        "gradient_checkpointing": true, "micro_batch_size": 4, "sequence_length": 2048,
        "workload": {"samples": 100000, "tokens_per_sample": 2048, "epochs": 3}});
    let reply = post_json("/v1/estimates/time", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let t = reply.json();
    let f = |path: &str| {
        path.split('.')
            .fold(&t, |v, k| &v[k])
            .as_f64()
            .unwrap_or_else(|| panic!("{path}"))
    };
    assert_eq!(f("tokens"), 100000.0 * 2048.0 * 3.0);
    assert!(
        (f("total_flops") - f("flops_per_token") * f("tokens")).abs() < 1e-3 * f("total_flops")
    );
    // Checkpointing re-runs the forward pass: 8N against 6N, plus attention.
    let ratio = f("hardware_flops_per_token") / f("flops_per_token");
    assert!((1.30..1.34).contains(&ratio), "{ratio}");
    assert!(f("wall_hours.low") < f("wall_hours.expected"));
    assert!(f("wall_hours.expected") < f("wall_hours.high"));
    assert!((f("gpu_hours") - 8.0 * f("wall_hours.expected")).abs() < 1e-9 * f("gpu_hours"));
    let parts = [
        "compute_hours",
        "communication_hours",
        "pipeline_bubble_hours",
        "offload_hours",
        "restart_hours",
    ]
    .iter()
    .map(|p| f(&format!("breakdown.{p}")))
    .sum::<f64>();
    assert!((parts - f("wall_hours.expected")).abs() < 1e-9 * parts);
    assert!(f("mfu") > 0.2 && f("mfu") < f("hardware_utilization"));
    assert!(
        t["assumptions"]
            .to_string()
            .contains("hardware utilisation")
    );

    // A measured MFU replaces the table: hours follow from FLOPs at that MFU.
    let mut given = body.clone();
    given["mfu"] = json!(0.4);
    let t = post_json("/v1/estimates/time", &given).await.json();
    let compute = t["breakdown"]["compute_hours"].as_f64().unwrap();
    let expected = t["total_flops"].as_f64().unwrap() / (8.0 * 989e12 * 0.4) / 3600.0;
    assert!(
        (compute - expected).abs() < 1e-9 * expected,
        "{compute} vs {expected}"
    );
    assert_eq!(t["breakdown"]["communication_hours"], 0.0);

    // A plan that cannot fit still gets its time, with a warning.
    let too_big =
        json!({"model": "llama-3.1-70b", "gpu": "rtx4090-24gb", "workload": {"tokens": 1e6}});
    let t = post_json("/v1/estimates/time", &too_big).await.json();
    assert!(t["warnings"].to_string().contains("does not fit"));
}
