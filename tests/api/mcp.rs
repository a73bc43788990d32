//! `/mcp` with a real MCP client (rmcp's streamable HTTP client) against the real binary.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

fn arguments(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

#[tokio::test]
async fn an_mcp_client_lists_the_tools_and_calls_them() {
    let server = crate::support::RunningServer::start();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.address)),
    );
    let client = ClientConfig::default()
        .serve(transport)
        .await
        .expect("initialize");

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "estimate_memory",
        "estimate_time",
        "estimate_cost",
        "recommend_strategy",
        "list_prices",
        "list_gpus",
        "list_models",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    // The input schema is the OpenAPI request schema: `model` required, references
    // resolvable inside the schema.
    let memory = tools.iter().find(|t| t.name == "estimate_memory").unwrap();
    let schema = serde_json::Value::Object((*memory.input_schema).clone());
    assert_eq!(schema["required"], serde_json::json!(["model"]));
    assert!(schema["$defs"]["ModelInput"].is_object());
    assert!(!schema.to_string().contains("#/components/"));

    let result = client
        .call_tool(
            CallToolRequestParams::new("estimate_memory").with_arguments(arguments(serde_json::json!({
                "model": "qwen-7b", "method": "lora", "lora": {"rank": 8, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}
            }))),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let text = result.content[0].as_text().unwrap().text.clone();
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["parameters"]["trainable"], 8_388_608);

    let result = client
        .call_tool(
            CallToolRequestParams::new("recommend_strategy").with_arguments(arguments(
                serde_json::json!({
                    "model": "llama-2-7b", "dataset": {"samples": 20000}, "quality": "balanced"
                }),
            )),
        )
        .await
        .unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    assert!(answer["method"] == "lora" || answer["method"] == "qlora");
    assert!(answer["path"].as_array().unwrap().len() >= 4);

    // A bad request is a tool error naming the field, for the model to fix.
    let result = client
        .call_tool(
            CallToolRequestParams::new("estimate_memory").with_arguments(arguments(
                serde_json::json!({
                    "model": "qwen-7b", "micro_batch_size": 0
                }),
            )),
        )
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        result.content[0]
            .as_text()
            .unwrap()
            .text
            .contains("/micro_batch_size")
    );
    let _ = client.cancel().await;
}
