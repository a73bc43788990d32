//! The committed spec equals the generated one, every operation is documented for tool
//! callers, and every documented path is routed.

use actix_web::test::TestRequest;

use crate::support::call;

const COMMITTED: &str = include_str!("../../openapi/openapi.json");

#[test]
fn committed_spec_is_in_sync_with_the_code() {
    let generated = trainplan::openapi::json();
    assert!(
        generated == COMMITTED,
        "openapi/openapi.json is out of date; regenerate it with:\n    cargo run -- openapi > openapi/openapi.json"
    );
}

#[test]
fn every_operation_has_an_id_summary_description_and_examples() {
    let spec: serde_json::Value = serde_json::from_str(&trainplan::openapi::json()).unwrap();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no operationId"));
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{id} is not snake_case"
            );
            assert!(ids.insert(id.to_string()), "{id} is not unique");
            for key in ["summary", "description"] {
                assert!(
                    operation[key].as_str().is_some_and(|s| !s.is_empty()),
                    "{id}: no {key}"
                );
            }
            let ok = &operation["responses"]["200"]["content"];
            assert!(
                ok.as_object()
                    .unwrap()
                    .values()
                    .any(|c| c.get("example").is_some() || c.get("examples").is_some()),
                "{id}: no response example"
            );
            if let Some(body) = operation.get("requestBody") {
                let content = body["content"]["application/json"].as_object().unwrap();
                assert!(
                    content.contains_key("example") || content.contains_key("examples"),
                    "{id}: no request example"
                );
            }
            // An operation that takes input documents how bad input is answered.
            let takes_input = operation.get("requestBody").is_some()
                || operation["parameters"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty());
            if path.starts_with("/v1/") && takes_input {
                assert!(
                    operation["responses"]
                        .as_object()
                        .unwrap()
                        .keys()
                        .any(|s| s.starts_with('4')),
                    "{id}: no documented error"
                );
            }
        }
    }
}

#[actix_web::test]
async fn every_documented_operation_is_routed() {
    let spec: serde_json::Value = serde_json::from_str(COMMITTED).unwrap();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let request = match method.as_str() {
                "get" => TestRequest::get(),
                "post" => TestRequest::post(),
                other => panic!("unexpected method {other}"),
            };
            let reply = call(request.uri(path)).await;
            let unrouted = reply.status == 405
                || (reply.status == 404
                    && reply.text().contains("urn:trainplan:problem:not-found"));
            assert!(
                !unrouted,
                "{method} {path} is documented but not routed ({})",
                reply.status
            );
        }
    }
}

/// A GET form's query key is typed like the request field it fills: an enum field's key
/// names the enum, a bounded field's key carries the bounds.
#[test]
fn query_keys_take_their_fields_enums_and_bounds() {
    let spec: serde_json::Value = serde_json::from_str(COMMITTED).unwrap();
    let key = |path: &str, name: &str| {
        spec["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("GET {path}: no query key {name}"))["schema"]
            .clone()
    };
    let body = |schema: &str, property: &str| {
        spec["components"]["schemas"][schema]["properties"][property].clone()
    };
    for path in ["/v1/estimates/memory", "/v1/estimates/time"] {
        assert_eq!(
            key(path, "precision"),
            serde_json::json!({"$ref": "#/components/schemas/Precision"})
        );
        let gpus = key(path, "gpus");
        assert_eq!(gpus["type"], "integer");
        assert_eq!(gpus["minimum"], body("ParallelismInput", "gpus")["minimum"]);
        assert_eq!(gpus["maximum"], body("ParallelismInput", "gpus")["maximum"]);
    }
    let mfu = key("/v1/estimates/time", "mfu");
    assert_eq!(
        (&mfu["minimum"], &mfu["maximum"]),
        (
            &body("TimeInputs", "mfu")["minimum"],
            &body("TimeInputs", "mfu")["maximum"]
        )
    );
    assert!(mfu["maximum"].is_number());
    // Through the model's alternatives, and into a custom quote (an array item).
    assert_eq!(key("/v1/estimates/memory", "parameters")["minimum"], 1e6);
    let quote_gpus = key("/v1/estimates/cost", "quote_gpus");
    assert_eq!(
        quote_gpus["maximum"],
        body("CustomQuoteInput", "gpus")["maximum"]
    );
    assert!(quote_gpus["maximum"].is_number());
    // A catalog id stays a free string; so does a comma-separated list.
    assert_eq!(key("/v1/estimates/memory", "model")["type"], "string");
    assert_eq!(
        key("/v1/estimates/memory", "lora_targets")["type"],
        "string"
    );
}
