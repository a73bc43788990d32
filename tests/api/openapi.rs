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
