//! Renderings of an answer: JSON (default), CSV (`?format=csv` or `Accept: text/csv`) and
//! one bare value (`?format=text&field=per_gpu.total_gib`), for spreadsheets.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::validation::FieldError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    #[default]
    Json,
    Csv,
    Text,
}

/// Query parameters that choose the rendering.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RenderQuery {
    /// `json` (default), `csv`, or `text` (one bare value, needs `field`).
    pub format: Option<Format>,
    /// Dotted path of the value for `format=text`, e.g. `per_gpu.total_gib` or
    /// `fits.0.min_gpus`.
    pub field: Option<String>,
    /// CSV only: start with a UTF-8 byte-order mark, so that Excel reads the file as
    /// UTF-8.
    pub bom: Option<bool>,
}

/// Renders `answer`; `rows` names the array that becomes the CSV rows (its scalars are
/// joined with the answer's top-level scalars on every row). The answer says
/// `Vary: Accept`: without `format`, `Accept` chooses JSON or CSV.
pub fn respond<T: Serialize>(
    request: &HttpRequest,
    render: &RenderQuery,
    answer: &T,
    rows: &str,
) -> Result<HttpResponse, ApiError> {
    let mut response = rendering(request, render, answer, rows)?;
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept"));
    Ok(response)
}

/// The rendering `render` or `Accept` asks for.
fn rendering<T: Serialize>(
    request: &HttpRequest,
    render: &RenderQuery,
    answer: &T,
    rows: &str,
) -> Result<HttpResponse, ApiError> {
    let wants_csv = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/csv"));
    let format = render
        .format
        .unwrap_or(if wants_csv { Format::Csv } else { Format::Json });
    match format {
        Format::Json => Ok(HttpResponse::Ok().json(answer)),
        Format::Csv => {
            let value =
                serde_json::to_value(answer).map_err(|e| ApiError::Internal(e.to_string()))?;
            let mut text = csv(&value, rows)?;
            if render.bom == Some(true) {
                text.insert(0, '\u{feff}');
            }
            Ok(HttpResponse::Ok()
                .content_type("text/csv; charset=utf-8")
                .body(text))
        }
        Format::Text => {
            let Some(field) = render.field.as_deref() else {
                return Err(ApiError::Invalid(vec![FieldError::new(
                    "/field",
                    "format=text needs field, e.g. field=per_gpu.total_gib",
                )]));
            };
            let value =
                serde_json::to_value(answer).map_err(|e| ApiError::Internal(e.to_string()))?;
            let found = field
                .split('.')
                .try_fold(&value, |v, key| match v {
                    Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                    _ => v.get(key),
                })
                .ok_or_else(|| {
                    ApiError::Invalid(vec![FieldError::new(
                        "/field",
                        format!("no value at {field:?} in this answer"),
                    )])
                })?;
            let text = match found {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            Ok(HttpResponse::Ok()
                .content_type("text/plain; charset=utf-8")
                .body(text))
        }
    }
}

/// Flattens nested objects into `a.b` columns; arrays of scalars become `;`-joined cells.
fn flatten(prefix: &str, value: &Value, skip: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if name != skip {
                    flatten(&name, inner, skip, out);
                }
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let joined = items.iter().map(cell).collect::<Vec<_>>().join("; ");
            out.push((prefix.to_string(), Value::String(joined)));
        }
        Value::Array(_) => {}
        scalar => out.push((prefix.to_string(), scalar.clone())),
    }
}

fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A text cell that a spreadsheet would read as a formula gets a leading apostrophe
/// (OWASP "CSV injection"); numbers stay numbers.
fn escape(value: &Value) -> String {
    let text = cell(value);
    match value {
        Value::String(_) if text.starts_with(['=', '+', '-', '@', '\t', '\r']) => {
            format!("'{text}")
        }
        _ => text,
    }
}

fn csv(value: &Value, rows: &str) -> Result<String, ApiError> {
    let mut common = Vec::new();
    flatten("", value, rows, &mut common);
    let row_values: Vec<Vec<(String, Value)>> = match value.get(rows) {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| {
                let mut row = Vec::new();
                flatten(rows, item, "", &mut row);
                row
            })
            .collect(),
        _ => vec![Vec::new()],
    };
    // Rows can differ in shape (a spot option has spot details, an on-demand one null):
    // the header is the union of their columns in order of first appearance, and a row
    // leaves the columns it lacks empty.
    let mut header: Vec<&str> = Vec::new();
    for (key, _) in row_values.iter().flatten().chain(&common) {
        if !header.contains(&key.as_str()) {
            header.push(key);
        }
    }
    let mut writer = csv::Writer::from_writer(Vec::new());
    let internal = |e: csv::Error| ApiError::Internal(e.to_string());
    writer.write_record(&header).map_err(internal)?;
    for row in &row_values {
        let cells = header.iter().map(|column| {
            row.iter()
                .chain(&common)
                .find(|(k, _)| k == column)
                .map(|(_, v)| escape(v))
                .unwrap_or_default()
        });
        writer.write_record(cells).map_err(internal)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| ApiError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_repeats_the_top_level_scalars_on_every_row_and_escapes_formulas() {
        let answer = json!({"total": 5, "note": "=cmd()", "rows": [{"gpu": "a", "ok": true}, {"gpu": "b", "ok": false}]});
        let text = csv(&answer, "rows").unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(header, ["rows.gpu", "rows.ok", "total", "note"]);
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), 2);
        assert_eq!(&records[1][0], "b");
        assert_eq!(&records[0][3], "'=cmd()");
    }

    #[test]
    fn rows_of_different_shapes_share_one_header() {
        let answer = json!({"rows": [{"a": 1, "spot": null}, {"a": 2, "spot": {"rate": 0.5}}]});
        let text = csv(&answer, "rows").unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(header, ["rows.a", "rows.spot", "rows.spot.rate"]);
        let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(&records[0][2], "");
        assert_eq!(&records[1][2], "0.5");
    }
}
