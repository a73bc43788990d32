//! The OpenAPI document, generated from the handlers and types. `openapi/openapi.json` is
//! its committed copy; a test keeps the two equal.

use utoipa::OpenApi;

use crate::http::estimates::{COST_TABLES, MEMORY_TABLES, RECOMMEND_TABLES, TIME_TABLES};
use crate::http::query;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "trainplan",
        description = "Will an LLM training or fine-tuning job fit on your GPUs, how long will it take, and what will it cost? Every answer carries its assumptions, a range and its sources. Errors are RFC 9457 problem+json.",
        license(name = "MIT OR Apache-2.0"),
    ),
    paths(
        crate::http::estimates::memory_post,
        crate::http::estimates::memory_get,
        crate::http::estimates::time_post,
        crate::http::estimates::time_get,
        crate::http::estimates::cost_post,
        crate::http::estimates::cost_get,
        crate::http::estimates::recommend_post,
        crate::http::estimates::recommend_get,
        crate::http::gate::budget,
        crate::http::prices::prices,
        crate::http::prices::feeds,
        crate::http::prices::refresh,
        crate::http::catalog::gpus,
        crate::http::catalog::models,
        crate::http::health::livez,
        crate::http::health::readyz,
        crate::http::health::metrics,
    ),
    components(schemas(crate::error::Problem, crate::validation::FieldError)),
    modifiers(&QueryForms, &AdminToken),
    tags(
        (name = "estimates", description = "Memory, time and cost of a training job"),
        (name = "gates", description = "Pass/fail checks for CI"),
        (name = "prices", description = "The price book: dated, sourced GPU prices"),
        (name = "catalog", description = "GPUs and models the estimators know"),
        (name = "operations", description = "Health and metrics"),
    )
)]
pub struct ApiDoc;

/// The bearer token `POST /v1/pricing/refresh` requires, and the optional API keys.
struct AdminToken;

impl utoipa::Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement};
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        // Optional API keys (when the deployment configures them): a header, or the
        // query string for spreadsheets that cannot send headers.
        components.add_security_scheme(
            "api_key_header",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Api-Key"))),
        );
        components.add_security_scheme(
            "api_key_query",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::new("api_key"))),
        );
        openapi.security = Some(vec![
            SecurityRequirement::default(),
            SecurityRequirement::new("api_key_header", Vec::<String>::new()),
            SecurityRequirement::new("api_key_query", Vec::<String>::new()),
        ]);
    }
}

/// Documents the GET forms' query keys from the same tables the decoder reads.
struct QueryForms;

impl utoipa::Modify for QueryForms {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, tables) in [
            ("/v1/estimates/memory", MEMORY_TABLES),
            ("/v1/estimates/time", TIME_TABLES),
            ("/v1/estimates/cost", COST_TABLES),
            ("/v1/recommendations", RECOMMEND_TABLES),
        ] {
            if let Some(get) = openapi
                .paths
                .paths
                .get_mut(path)
                .and_then(|item| item.get.as_mut())
            {
                query::document(get, tables);
            }
        }
    }
}

/// The spec as pretty JSON with a trailing newline (the committed file's format).
pub fn json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
