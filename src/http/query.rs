//! The GET forms: a flat query string turned into the same JSON the POST form takes, so
//! both go through one deserialiser and one validator.

use serde_json::{Map, Value};

use super::render::{Format, RenderQuery};
use crate::error::ApiError;
use crate::validation::FieldError;

/// How a query key maps into the JSON request.
#[derive(Clone, Copy)]
pub enum Kind {
    /// Kept as a string (ids, enum values).
    Text,
    /// A number, boolean or string, whichever it parses as.
    Scalar,
    /// A comma-separated list of strings; `all_linear`-style single words stay strings.
    List,
}

/// `(query key, JSON pointer in the request, kind)`.
pub type Mapping = (&'static str, &'static str, Kind);

/// Builds the JSON request and the rendering choice from a raw query string.
pub fn to_json(query: &str, mappings: &[Mapping]) -> Result<(Value, RenderQuery), ApiError> {
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
            _ => match mappings.iter().find(|(name, _, _)| *name == key) {
                Some(&(_, pointer, kind)) => insert(&mut root, pointer, convert(&raw, kind)),
                None => errors.push(FieldError::new(
                    format!("/query/{key}"),
                    format!(
                        "unknown query parameter; accepted: {}, format, field",
                        mappings
                            .iter()
                            .map(|(name, _, _)| *name)
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
        Kind::Scalar => {
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

/// Sets `value` at a `/a/b` pointer, creating objects on the way.
fn insert(root: &mut Value, pointer: &str, value: Value) {
    let mut node = root;
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, key) in keys.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else { return };
        if i + 1 == keys.len() {
            map.insert((*key).to_string(), value);
            return;
        }
        node = map
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MAP: &[Mapping] = &[
        ("model", "/model", Kind::Text),
        ("parameters", "/model/parameters", Kind::Scalar),
        ("gpus", "/parallelism/gpus", Kind::Scalar),
        ("lora_targets", "/lora/targets", Kind::List),
    ];

    #[test]
    fn nested_pointers_numbers_and_lists() {
        let (value, render) = to_json(
            "parameters=7e9&gpus=4&lora_targets=q_proj,v_proj&format=csv",
            MAP,
        )
        .unwrap();
        assert_eq!(
            value,
            json!({"model": {"parameters": 7e9}, "parallelism": {"gpus": 4}, "lora": {"targets": ["q_proj", "v_proj"]}})
        );
        assert_eq!(render.format, Some(Format::Csv));
    }

    #[test]
    fn unknown_keys_are_named() {
        let Err(ApiError::Invalid(errors)) = to_json("gpuz=4", MAP) else {
            panic!()
        };
        assert_eq!(errors[0].pointer, "/query/gpuz");
        assert!(errors[0].message.contains("gpus"));
    }
}
