//! The OpenAPI document, generated from the handlers and types. `openapi/openapi.json` is
//! its committed copy; a test keeps the two equal.

use utoipa::OpenApi;

use crate::http::estimates::{COST_TABLES, MEMORY_TABLES, RECOMMEND_TABLES, TIME_TABLES};
use crate::http::query::{self, Kind, Mapping};

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
    components(schemas(
        crate::error::Problem,
        crate::validation::FieldError,
        crate::http::render::Format
    )),
    modifiers(&QueryForms, &AdminToken, &AnswerReuse),
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

/// The resources with a GET form, and the query keys each takes.
const QUERY_FORMS: [(&str, &[&[Mapping]]); 4] = [
    ("/v1/estimates/memory", MEMORY_TABLES),
    ("/v1/estimates/time", TIME_TABLES),
    ("/v1/estimates/cost", COST_TABLES),
    ("/v1/recommendations", RECOMMEND_TABLES),
];

/// Documents the GET forms' query keys from the same tables the decoder reads.
struct QueryForms;

impl utoipa::Modify for QueryForms {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, tables) in QUERY_FORMS {
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

/// The estimate resources, whose answers are shared between identical requests
/// (`http::answers`).
const ESTIMATE_PATHS: [&str; 5] = [
    "/v1/estimates/memory",
    "/v1/estimates/time",
    "/v1/estimates/cost",
    "/v1/recommendations",
    "/v1/gates/budget",
];

/// Documents the `Cache-Status` header of every estimate answer.
struct AnswerReuse;

impl utoipa::Modify for AnswerReuse {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let header = HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .description(Some(
                "What the answer cache did (RFC 9211): `trainplan; hit; ttl=42` (an answer kept \
                 from an identical earlier request against the same price book, reused), \
                 `trainplan; fwd=miss; stored` (estimated now and kept) or \
                 `trainplan; fwd=miss` (estimated now). Absent when reuse is off.",
            ))
            .build();
        for path in ESTIMATE_PATHS {
            let Some(item) = openapi.paths.paths.get_mut(path) else {
                continue;
            };
            for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
                if let Some(RefOr::T(ok)) = operation.responses.responses.get_mut("200") {
                    ok.headers
                        .insert("Cache-Status".into(), RefOr::T(header.clone()));
                }
            }
        }
    }
}

/// The spec as served and committed: the generated document with its request schemas
/// that extend others (`allOf` of objects that each forbid extra fields, which no value
/// can satisfy) merged into single objects.
pub fn spec() -> utoipa::openapi::OpenApi {
    let generated = ApiDoc::openapi();
    let Ok(mut value) = serde_json::to_value(&generated) else {
        return generated;
    };
    merge_extensions(&mut value);
    type_query_forms(&mut value);
    document_renderings(&mut value);
    serde_json::from_value(value).unwrap_or(generated)
}

/// The spec as pretty JSON with a trailing newline (the committed file's format).
pub fn json() -> String {
    let mut text = spec()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

type Object = serde_json::Map<String, serde_json::Value>;

fn component_schemas(spec: &serde_json::Value) -> Option<Object> {
    spec.pointer("/components/schemas")?.as_object().cloned()
}

/// Gives each GET-form query key the schema of the request field it fills: its enum, or
/// its bounds. The POST body's schema is the one source of both.
fn type_query_forms(spec: &mut serde_json::Value) {
    let Some(schemas) = component_schemas(spec) else {
        return;
    };
    for (path, tables) in QUERY_FORMS {
        let path = path.replace('/', "~1");
        let Some(body) = spec
            .pointer(&format!(
                "/paths/{path}/post/requestBody/content/application~1json/schema"
            ))
            .cloned()
        else {
            continue;
        };
        let Some(parameters) = spec
            .pointer_mut(&format!("/paths/{path}/get/parameters"))
            .and_then(|p| p.as_array_mut())
        else {
            continue;
        };
        for parameter in parameters {
            let Some(&(_, pointer, kind, _)) = tables
                .iter()
                .flat_map(|t| t.iter())
                .find(|(key, ..)| parameter["name"] == *key)
            else {
                continue;
            };
            if matches!(kind, Kind::List | Kind::Bool) {
                continue;
            }
            let Some(field) = field_schema(&body, pointer, &schemas) else {
                continue;
            };
            if let Some(reference) = field.get("$ref") {
                if referenced(reference, &schemas).is_some_and(|s| s.get("enum").is_some()) {
                    parameter["schema"] = serde_json::json!({ "$ref": reference });
                }
                continue;
            }
            for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                if let Some(bound) = field.get(key) {
                    parameter["schema"][key] = bound.clone();
                }
            }
        }
    }
}

/// The schema of the value at `pointer` (`/lora/rank`) in a request of schema `root`,
/// with an optional field's `null` alternative dropped; `None` where the pointer does not
/// lead to one schema.
fn field_schema(
    root: &serde_json::Value,
    pointer: &str,
    schemas: &Object,
) -> Option<serde_json::Value> {
    let mut schema = root.clone();
    for token in pointer.trim_start_matches('/').split('/') {
        schema = child(&schema, token, schemas)?;
    }
    let members = schema.get("oneOf").and_then(|m| m.as_array());
    match members.map(|m| m.iter().filter(|m| m["type"] != "null").collect::<Vec<_>>()) {
        Some(not_null) if not_null.len() == 1 => Some(not_null[0].clone()),
        _ => Some(schema),
    }
}

/// The schema of `token` (a property, or `0` for an array item) under `schema`, looking
/// through references and into each `oneOf` alternative.
fn child(schema: &serde_json::Value, token: &str, schemas: &Object) -> Option<serde_json::Value> {
    if let Some(target) = schema.get("$ref").and_then(|r| referenced(r, schemas)) {
        return child(target, token, schemas);
    }
    if let Some(found) = schema.pointer(&format!("/properties/{token}")) {
        return Some(found.clone());
    }
    if let Some(items) = schema.get("items").filter(|_| token == "0") {
        return Some(items.clone());
    }
    schema
        .get("oneOf")
        .and_then(|m| m.as_array())?
        .iter()
        .find_map(|member| child(member, token, schemas))
}

/// The component schema a `$ref` names.
fn referenced<'s>(
    reference: &serde_json::Value,
    schemas: &'s Object,
) -> Option<&'s serde_json::Value> {
    schemas.get(reference.as_str()?.strip_prefix("#/components/schemas/")?)
}

/// Operations that take `format` answer 200 as CSV and as one bare value too.
fn document_renderings(spec: &mut serde_json::Value) {
    let Some(paths) = spec.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for operation in paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
    {
        let renders = operation["parameters"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "format"));
        if let Some(content) = operation
            .pointer_mut("/responses/200/content")
            .and_then(|c| c.as_object_mut())
            .filter(|_| renders)
        {
            for media in ["text/csv", "text/plain"] {
                content.insert(
                    media.into(),
                    serde_json::json!({"schema": {"type": "string"}}),
                );
            }
        }
    }
}

/// Replaces each component schema built with `allOf` by the objects it allows: one
/// merged object, or a `oneOf` of them where a member is itself a `oneOf`.
fn merge_extensions(spec: &mut serde_json::Value) {
    let Some(schemas) = component_schemas(spec) else {
        return;
    };
    for (name, schema) in &schemas {
        if schema.get("allOf").is_none() {
            continue;
        }
        let mut alternatives = alternatives(schema, &schemas);
        let merged = if alternatives.len() == 1 {
            serde_json::Value::Object(alternatives.remove(0))
        } else {
            serde_json::json!({ "oneOf": alternatives })
        };
        if let Some(slot) = spec.pointer_mut(&format!("/components/schemas/{name}")) {
            let description = slot.get("description").cloned();
            *slot = merged;
            if let (Some(d), Some(o)) = (description, slot.as_object_mut()) {
                o.insert("description".into(), d);
            }
        }
    }
}

/// The plain object schemas a schema stands for, with `allOf` members merged and
/// `oneOf` members kept apart.
fn alternatives(schema: &serde_json::Value, schemas: &Object) -> Vec<Object> {
    if let Some(reference) = schema.get("$ref").and_then(|r| r.as_str()) {
        let name = reference.trim_start_matches("#/components/schemas/");
        return schemas
            .get(name)
            .map(|s| alternatives(s, schemas))
            .unwrap_or_default();
    }
    if let Some(members) = schema.get("allOf").and_then(|a| a.as_array()) {
        return members.iter().fold(vec![Object::new()], |acc, member| {
            let options = alternatives(member, schemas);
            acc.iter()
                .flat_map(|a| options.iter().map(move |b| merge(a, b)))
                .collect()
        });
    }
    if let Some(members) = schema.get("oneOf").and_then(|a| a.as_array()) {
        return members
            .iter()
            .flat_map(|m| alternatives(m, schemas))
            .collect();
    }
    schema.as_object().cloned().into_iter().collect()
}

/// One object allowing the properties of both, requiring what either requires.
fn merge(a: &Object, b: &Object) -> Object {
    let mut merged = a.clone();
    merged.insert("type".into(), "object".into());
    let mut properties = a
        .get("properties")
        .and_then(|p| p.as_object())
        .cloned()
        .unwrap_or_default();
    properties.extend(
        b.get("properties")
            .and_then(|p| p.as_object())
            .cloned()
            .unwrap_or_default(),
    );
    merged.insert("properties".into(), serde_json::Value::Object(properties));
    let mut required: Vec<serde_json::Value> = a
        .get("required")
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    for r in b
        .get("required")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        if !required.contains(r) {
            required.push(r.clone());
        }
    }
    if required.is_empty() {
        merged.remove("required");
    } else {
        merged.insert("required".into(), serde_json::Value::Array(required));
    }
    merged.insert("additionalProperties".into(), false.into());
    merged.remove("description");
    merged
}
