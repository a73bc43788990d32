//! Memory estimates through the HTTP stack: the seed's figures and the renderings.

use serde_json::json;

use crate::support::{catalog_gpu_count, get, post_json};

const GB: f64 = 1e9;

/// The seed article's table: model states only, 7e9 parameters, amp_bf16 + AdamW.
#[actix_web::test]
async fn seed_table_of_model_states_comes_out_exactly() {
    let cases = [
        (0, 1, 112.0),
        (1, 2, 70.0),
        (1, 4, 49.0),
        (2, 2, 63.0),
        (2, 4, 38.5),
        (3, 2, 56.0),
        (3, 4, 28.0),
    ];
    for (stage, gpus, expected_gb) in cases {
        let reply = post_json(
            "/v1/estimates/memory",
            &json!({"model": {"parameters": 7.0e9}, "precision": "amp_bf16", "optimizer": "adamw",
                    "parallelism": {"gpus": gpus, "zero_stage": stage}, "gpu": "a100-80gb"}),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let states = reply.json()["per_gpu"]["model_states_bytes"]
            .as_u64()
            .unwrap();
        assert_eq!(
            states as f64,
            expected_gb * GB,
            "stage {stage} on {gpus} GPUs"
        );
    }
}

#[actix_web::test]
async fn seed_formula_is_stated() {
    let reply = post_json(
        "/v1/estimates/memory",
        &json!({"model": {"parameters": 7.0e9}, "parallelism": {"gpus": 4, "zero_stage": 2}, "gpu": "a100-80gb"}),
    )
    .await;
    assert_eq!(reply.json()["model_states_formula"], "(2 + 14/Nd)·Ψ");
}

#[actix_web::test]
async fn lora_r8_on_qkvo_of_qwen_7b_trains_8388608_parameters() {
    let reply = post_json(
        "/v1/estimates/memory",
        &json!({"model": "qwen-7b", "method": "lora", "lora": {"rank": 8, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}}),
    )
    .await;
    let parameters = &reply.json()["parameters"];
    assert_eq!(parameters["trainable"], 8_388_608);
    let fraction = parameters["trainable_fraction"].as_f64().unwrap();
    assert!((0.001..0.0012).contains(&fraction), "{fraction}");
}

#[actix_web::test]
async fn breakdown_is_consistent_and_the_fit_table_covers_the_catalog() {
    let reply = post_json(
        "/v1/estimates/memory",
        &json!({"model": "llama-3.1-8b", "method": "qlora", "gradient_checkpointing": true}),
    )
    .await;
    let answer = reply.json();
    let per_gpu = &answer["per_gpu"];
    let field = |name: &str| per_gpu[name].as_u64().unwrap();
    assert!(field("peak_allocated_bytes") <= field("peak_reserved_bytes"));
    assert!(field("peak_reserved_bytes") < field("device_bytes"));
    assert!(field("model_states_bytes") <= field("peak_allocated_bytes"));
    assert!(answer["range"]["low_bytes"].as_u64().unwrap() < field("device_bytes"));
    assert!(answer["range"]["high_bytes"].as_u64().unwrap() > field("device_bytes"));
    let fits = answer["fits"].as_array().unwrap();
    assert_eq!(fits.len(), catalog_gpu_count());
    // QLoRA of an 8B model fits one 24 GB card with checkpointing, not a 16 GB V100 at once.
    let on = |id: &str| fits.iter().find(|f| f["gpu"] == id).unwrap().clone();
    assert_eq!(on("rtx4090-24gb")["fits"], true);
    assert_eq!(on("h100-80gb")["min_gpus"], 1);
    assert!(
        on("h100-80gb")["max_micro_batch_size"].as_u64().unwrap()
            > on("rtx4090-24gb")["max_micro_batch_size"].as_u64().unwrap()
    );
    assert!(answer["assumptions"].as_array().unwrap().iter().any(|a| {
        a.as_str()
            .unwrap()
            .starts_with("precision: amp_bf16 (default)")
    }));
}

#[actix_web::test]
async fn full_fine_tuning_of_7b_needs_sharding_over_several_a100s() {
    // The seed: full fine-tuning of 7B starts at 4× A100 80GB (ZeRO-3 here).
    let reply = post_json(
        "/v1/estimates/memory",
        &json!({"model": "llama-2-7b", "gradient_checkpointing": true, "parallelism": {"gpus": 4, "zero_stage": 3}, "gpu": "a100-80gb"}),
    )
    .await;
    let fit = &reply.json()["fits"][0];
    assert_eq!(fit["fits"], true);
    let min = fit["min_gpus"].as_u64().unwrap();
    assert!((2..=4).contains(&min), "{min}");
}

#[actix_web::test]
async fn get_form_matches_post_form() {
    let post = post_json(
        "/v1/estimates/memory",
        &json!({"model": "mistral-7b", "method": "lora", "lora": {"rank": 16, "targets": ["q_proj", "v_proj"]}, "micro_batch_size": 2, "parallelism": {"gpus": 2, "zero_stage": 2}, "gpu": "l40s-48gb"}),
    )
    .await;
    let get = get("/v1/estimates/memory?model=mistral-7b&method=lora&lora_rank=16&lora_targets=q_proj,v_proj&micro_batch_size=2&gpus=2&zero_stage=2&gpu=l40s-48gb").await;
    assert_eq!(get.status, 200, "{}", get.text());
    assert_eq!(post.json(), get.json());
}

#[actix_web::test]
async fn csv_rendering_parses_and_text_gives_one_value() {
    let csv_reply = get("/v1/estimates/memory?model=llama-3.1-8b&format=csv").await;
    assert!(csv_reply.content_type.starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(csv_reply.body.as_slice());
    let header = reader.headers().unwrap().clone();
    let gpu_column = header.iter().position(|h| h == "fits.gpu").unwrap();
    let total_column = header
        .iter()
        .position(|h| h == "per_gpu.total_gib")
        .unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), catalog_gpu_count());
    assert_eq!(&rows[0][gpu_column], "v100-16gb");

    let text =
        get("/v1/estimates/memory?model=llama-3.1-8b&format=text&field=per_gpu.total_gib").await;
    assert_eq!(text.content_type, "text/plain; charset=utf-8");
    assert_eq!(text.text(), rows[0][total_column].to_string());
    assert!(text.text().parse::<f64>().unwrap() > 16.0);
}

#[actix_web::test]
async fn accept_header_asks_for_csv() {
    let reply = crate::support::call(
        actix_web::test::TestRequest::get()
            .uri("/v1/gpus?q=h100")
            .insert_header(("accept", "text/csv")),
    )
    .await;
    assert!(reply.content_type.starts_with("text/csv"));
    assert!(reply.text().lines().count() >= 4);
}

#[actix_web::test]
async fn catalogs_filter() {
    let gpus = get("/v1/gpus?min_memory_gib=100").await.json();
    assert!(
        gpus["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["memory_gib_nominal"].as_f64().unwrap() >= 100.0)
    );
    assert_eq!(
        gpus["count"].as_u64().unwrap() as usize,
        gpus["gpus"].as_array().unwrap().len()
    );
    let models = get("/v1/models?family=mixtral").await.json();
    let ids: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mixtral-8x7b", "mixtral-8x22b"]);
}

#[actix_web::test]
async fn operations_endpoints_answer() {
    assert_eq!(get("/livez").await.json()["status"], "ok");
    assert_eq!(
        get("/readyz").await.json()["catalog_gpus"],
        catalog_gpu_count()
    );
    let docs = get("/docs/").await;
    assert_eq!(docs.status, 200);
    assert!(
        docs.text().contains("swagger"),
        "the docs page is served from the binary"
    );
    let spec = get("/openapi.json").await.json();
    assert_eq!(spec["info"]["title"], "trainplan");
}

#[actix_web::test]
async fn metrics_count_requests_by_route() {
    let service = crate::support::service().await;
    let request = actix_web::test::TestRequest::get()
        .uri("/livez")
        .to_request();
    actix_web::test::call_service(&service, request).await;
    let request = actix_web::test::TestRequest::get()
        .uri("/metrics")
        .to_request();
    let body = actix_web::test::call_and_read_body(&service, request).await;
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(r#"http_requests_total{method="GET",route="/livez",status="200"} 1"#),
        "{text}"
    );
}

#[actix_web::test]
async fn request_ids_are_echoed_or_made() {
    let given = crate::support::call(
        actix_web::test::TestRequest::get()
            .uri("/livez")
            .insert_header(("x-request-id", "ci-run-42")),
    )
    .await;
    assert_eq!(given.headers.get("x-request-id").unwrap(), "ci-run-42");
    let made = get("/nope").await;
    let id = made
        .headers
        .get("x-request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 36);
    assert_eq!(made.json()["request_id"], id);
}
