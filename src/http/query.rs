//! The GET forms: a flat query string turned into the same JSON the POST form takes, so
//! both go through one deserialiser and one validator.

use serde_json::{Map, Value};

use super::render::{Format, RenderQuery};
use crate::error::ApiError;
use crate::validation::FieldError;

/// How a query key maps into the JSON request, and its type in the OpenAPI document.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Kept as a string (ids, enum values).
    Text,
    /// Numbers and booleans are parsed as such (a value that is neither stays a string,
    /// and the deserialiser names the field).
    Integer,
    Number,
    Bool,
    /// A comma-separated list of strings; `all_linear`-style single words stay strings.
    List,
}

/// `(query key, JSON pointer in the request, kind, description)`.
pub type Mapping = (&'static str, &'static str, Kind, &'static str);

/// Builds the JSON request and the rendering choice from a raw query string.
pub fn to_json(query: &str, tables: &[&[Mapping]]) -> Result<(Value, RenderQuery), ApiError> {
    let mappings: Vec<&Mapping> = tables.iter().flat_map(|t| t.iter()).collect();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| ApiError::Invalid(vec![FieldError::new("/query", e.to_string())]))?;
    let mut root = Value::Object(Map::new());
    let mut render = RenderQuery::default();
    let mut errors = Vec::new();
    for (key, raw) in pairs {
        match key.as_str() {
            "format" => match raw.as_str() {
                "json" => render.format = Some(Format::Json),
                "csv" => render.format = Some(Format::Csv),
                "text" => render.format = Some(Format::Text),
                other => errors.push(FieldError::new(
                    "/query/format",
                    format!("unknown format {other:?}; expected one of json, csv, text"),
                )),
            },
            "field" => render.field = Some(raw),
            "bom" => match raw.as_str() {
                "true" | "1" => render.bom = Some(true),
                "false" | "0" => render.bom = Some(false),
                other => errors.push(FieldError::new(
                    "/query/bom",
                    format!("expected true or false; got {other:?}"),
                )),
            },
            _ => match mappings.iter().find(|(name, ..)| *name == key) {
                Some(&&(_, pointer, kind, _)) => insert(&mut root, pointer, convert(&raw, kind)),
                None => errors.push(FieldError::new(
                    format!("/query/{key}"),
                    format!(
                        "unknown query parameter; accepted: {}, format, field, bom",
                        mappings
                            .iter()
                            .map(|(name, ..)| *name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            },
        }
    }
    if errors.is_empty() {
        Ok((root, render))
    } else {
        Err(ApiError::Invalid(errors))
    }
}

fn convert(raw: &str, kind: Kind) -> Value {
    match kind {
        Kind::Text => Value::String(raw.to_string()),
        Kind::Integer | Kind::Number | Kind::Bool => {
            if let Ok(n) = raw.parse::<u64>() {
                Value::from(n)
            } else if let Ok(n) = raw.parse::<i64>() {
                Value::from(n)
            } else if let Some(n) = raw
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Value::Number(n)
            } else if let Ok(b) = raw.parse::<bool>() {
                Value::Bool(b)
            } else {
                Value::String(raw.to_string())
            }
        }
        Kind::List if !raw.contains(',') && raw.starts_with("all_") => {
            Value::String(raw.to_string())
        }
        Kind::List => Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.into()))
                .collect(),
        ),
    }
}

/// Sets `value` at a `/a/b` pointer, creating objects on the way; a `0` segment makes
/// a one-element array (`/pricing/custom_quotes/0/gpu`).
fn insert(root: &mut Value, pointer: &str, value: Value) {
    let mut node = root;
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, key) in keys.iter().enumerate() {
        let last = i + 1 == keys.len();
        if *key == "0" {
            if !node.is_array() {
                *node = Value::Array(vec![Value::Object(Map::new())]);
            }
            let Value::Array(items) = node else { return };
            let Some(first) = items.first_mut() else {
                return;
            };
            if last {
                *first = value;
                return;
            }
            node = first;
            continue;
        }
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else { return };
        if last {
            map.insert((*key).to_string(), value);
            return;
        }
        node = map
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Adds each table's keys as documented query parameters of a GET operation, so the spec
/// and the decoder share one list.
pub fn document(operation: &mut utoipa::openapi::path::Operation, tables: &[&[Mapping]]) {
    use utoipa::openapi::Required;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    for &(key, _, kind, description) in tables.iter().flat_map(|t| t.iter()) {
        let schema_type = match kind {
            Kind::Text | Kind::List => Type::String,
            Kind::Integer => Type::Integer,
            Kind::Number => Type::Number,
            Kind::Bool => Type::Boolean,
        };
        parameters.push(utoipa::openapi::RefOr::T(
            ParameterBuilder::new()
                .name(key)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(ObjectBuilder::new().schema_type(schema_type)))
                .build(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MAP: &[Mapping] = &[
        ("model", "/model", Kind::Text, ""),
        ("parameters", "/model/parameters", Kind::Number, ""),
        ("gpus", "/parallelism/gpus", Kind::Integer, ""),
        ("lora_targets", "/lora/targets", Kind::List, ""),
        ("quote_gpu", "/pricing/custom_quotes/0/gpu", Kind::Text, ""),
        (
            "quote_gpus",
            "/pricing/custom_quotes/0/gpus",
            Kind::Integer,
            "",
        ),
    ];

    #[test]
    fn nested_pointers_numbers_and_lists() {
        let (value, render) = to_json(
            "parameters=7e9&gpus=4&lora_targets=q_proj,v_proj&format=csv",
            &[MAP],
        )
        .unwrap();
        assert_eq!(
            value,
            json!({"model": {"parameters": 7e9}, "parallelism": {"gpus": 4}, "lora": {"targets": ["q_proj", "v_proj"]}})
        );
        assert_eq!(render.format, Some(Format::Csv));
    }

    #[test]
    fn a_zero_segment_makes_a_one_element_array() {
        let (value, _) = to_json("quote_gpu=a100-80gb&quote_gpus=4", &[MAP]).unwrap();
        assert_eq!(
            value,
            json!({"pricing": {"custom_quotes": [{"gpu": "a100-80gb", "gpus": 4}]}})
        );
    }

    #[test]
    fn bom_is_a_boolean() {
        for (raw, bom) in [("true", true), ("1", true), ("false", false), ("0", false)] {
            let (_, render) = to_json(&format!("bom={raw}"), &[MAP]).unwrap();
            assert_eq!(render.bom, Some(bom), "{raw}");
        }
        for raw in ["", "yes", "TRUE "] {
            let Err(ApiError::Invalid(errors)) = to_json(&format!("bom={raw}"), &[MAP]) else {
                panic!("bom={raw} accepted")
            };
            assert_eq!(errors[0].pointer, "/query/bom");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let Err(ApiError::Invalid(errors)) = to_json("gpuz=4", &[MAP]) else {
            panic!()
        };
        assert_eq!(errors[0].pointer, "/query/gpuz");
        assert!(errors[0].message.contains("gpus"));
    }
}
