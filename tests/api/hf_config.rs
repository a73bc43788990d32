//! Hugging Face `config.json` files (real shapes, in tests/fixtures/hf) parse into the same
//! architecture as the catalog entry of that model.

use trainplan::catalog::{Catalog, hf_config};

#[test]
fn every_fixture_parses_to_its_catalog_architecture() {
    let catalog = Catalog::embedded().unwrap();
    let directory = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hf");
    let mut checked = 0;
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        let id = path.file_stem().unwrap().to_str().unwrap().to_string();
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let parsed =
            hf_config::parse(&config, "/model/hf_config").unwrap_or_else(|e| panic!("{id}: {e:?}"));
        let expected = &catalog
            .model(&id)
            .unwrap_or_else(|| panic!("{id} not in the catalog"))
            .architecture;
        assert_eq!(
            parsed.total_parameters(),
            expected.total_parameters(),
            "{id}"
        );
        assert_eq!(
            (
                parsed.layers,
                parsed.hidden,
                parsed.kv_heads,
                parsed.head_dim
            ),
            (
                expected.layers,
                expected.hidden,
                expected.kv_heads,
                expected.head_dim
            ),
            "{id}"
        );
        assert_eq!(
            parsed.moe.map(|m| m.experts),
            expected.moe.map(|m| m.experts),
            "{id}"
        );
        checked += 1;
    }
    assert_eq!(checked, 10);
}

#[actix_web::test]
async fn a_posted_config_is_estimated_like_the_catalog_id() {
    let config: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/hf/mixtral-8x7b.json")).unwrap();
    let by_config = crate::support::post_json(
        "/v1/estimates/memory",
        &serde_json::json!({"model": {"hf_config": config}, "method": "qlora"}),
    )
    .await;
    let by_id = crate::support::post_json(
        "/v1/estimates/memory",
        &serde_json::json!({"model": "mixtral-8x7b", "method": "qlora"}),
    )
    .await;
    assert_eq!(by_config.status, 200, "{}", by_config.text());
    assert_eq!(by_config.json()["per_gpu"], by_id.json()["per_gpu"]);
}

#[actix_web::test]
async fn absurd_shapes_are_refused_without_overflowing() {
    let huge = serde_json::json!({"model": {"architecture": {"layers": 9223372036854775808u64, "hidden": 0, "heads": 0, "kv_heads": 0, "intermediate": 0, "vocab": 0, "tied_embeddings": false, "experts": 0, "experts_per_token": 0, "expert_intermediate": 0}}});
    let reply = crate::support::post_json("/v1/estimates/memory", &huge).await;
    assert_eq!(reply.status, 422, "{}", reply.text());
    assert!(reply.text().contains("/model/architecture/layers"));
    let config = serde_json::json!({"model": {"hf_config": {"model_type": "llama", "num_hidden_layers": 4000000000u64, "hidden_size": 4000000000u64, "num_attention_heads": 32, "intermediate_size": 4000000000u64, "vocab_size": 32000}}});
    let reply = crate::support::post_json("/v1/estimates/memory", &config).await;
    assert_eq!(reply.status, 422, "{}", reply.text());
    assert!(reply.text().contains("/model/hf_config/hidden_size"));
}
