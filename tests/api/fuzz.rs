//! Parser fuzzing with proptest: the Hugging Face config parser, every feed parser and
//! the query-string decoder take arbitrary input without panicking. The test command
//! runs a short pass; `scripts/fuzz.sh` runs a long one (PROPTEST_CASES).

use proptest::prelude::*;
use trainplan::catalog::hf_config;
use trainplan::http::estimates::COST_TABLES;
use trainplan::http::query;
use trainplan::pricing::feeds::{Stamp, aws, azure, csv_sheet, oci, runpod, skypilot, vast};

fn stamp() -> Stamp {
    Stamp {
        feed: "fuzz".into(),
        source: "fuzz".into(),
        as_of: "2026-11-29".into(),
        fetched_at: "2026-11-29T00:00:00Z".into(),
    }
}

/// Arbitrary JSON, nested a few levels, with the keys the parsers look for mixed in.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let keys = prop::sample::select(vec![
        "Items",
        "NextPageLink",
        "armSkuName",
        "retailPrice",
        "type",
        "regions",
        "manifest",
        "price",
        "config",
        "data",
        "gpuTypes",
        "offers",
        "items",
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "vocab_size",
        "intermediate_size",
        "num_local_experts",
        "num_experts_per_tok",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            "llama",
            "mixtral",
            "gemma2",
            "qwen2",
            "Consumption",
            "Reservation",
            "Linux",
            "USD"
        ])
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::btree_map(keys.clone(), inner, 0..8).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #[test]
    fn feed_parsers_take_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let s = stamp();
        let _ = azure::parse(&bytes, &s);
        let _ = aws::parse_on_demand(&bytes, "us-east-1", &s);
        let _ = aws::parse_advisor(&bytes);
        let _ = aws::parse_spot(&bytes, &Default::default(), &s);
        let _ = skypilot::parse(&bytes, "aws", &s);
        let _ = runpod::parse(&bytes, &s);
        let _ = vast::parse(&bytes, &s);
        let _ = oci::parse(&bytes, &bytes, &s);
        let _ = csv_sheet::parse(&bytes, &s);
    }

    #[test]
    fn feed_parsers_take_arbitrary_json(value in json()) {
        let s = stamp();
        let bytes = value.to_string().into_bytes();
        let _ = azure::parse(&bytes, &s);
        let _ = aws::parse_on_demand(&bytes, "us-east-1", &s);
        let _ = aws::parse_advisor(&bytes);
        let _ = aws::parse_spot(&bytes, &Default::default(), &s);
        let _ = runpod::parse(&bytes, &s);
        let _ = vast::parse(&bytes, &s);
        let _ = oci::parse(&bytes, &bytes, &s);
    }

    #[test]
    fn the_hf_config_parser_takes_arbitrary_json(value in json()) {
        if let Ok(architecture) = hf_config::parse(&value, "/model/hf_config") {
            // Whatever it accepts can be counted without overflow.
            let _ = architecture.total_parameters();
        }
    }

    #[test]
    fn the_query_decoder_takes_arbitrary_strings(text in ".{0,200}", pairs in prop::collection::vec(("[a-z_]{1,12}", ".{0,16}"), 0..8)) {
        let _ = query::to_json(&text, COST_TABLES);
        let built: String = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let _ = query::to_json(&built, COST_TABLES);
    }
}
