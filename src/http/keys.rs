//! Optional API keys: when configured, every `/v1/` request names one, in the `X-Api-Key`
//! header or, for spreadsheets that cannot send headers, the `api_key` query parameter.
//! Keys are kept as SHA-256 hashes; logs carry the key's name, never the key.

use actix_web::HttpMessage;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, web};
use sha2::{Digest, Sha256};

use super::AppState;
use crate::error::ApiError;

/// Configured keys: `(name, SHA-256 of the key)`.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys(Vec<(String, [u8; 32])>);

/// The name of the key a request used (for the access log).
#[derive(Debug, Clone)]
pub struct KeyName(pub String);

impl ApiKeys {
    /// Parses `name:sha256hex[,name:sha256hex…]` (`TRAINPLAN_API_KEYS`); hash a key with
    /// `printf %s KEY | sha256sum`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, hex) = entry
                .split_once(':')
                .ok_or_else(|| format!("api key entry {entry:?}: expected name:sha256hex"))?;
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .filter_map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect();
            let hash: [u8; 32] = bytes
                .try_into()
                .map_err(|_| format!("api key {name:?}: the hash is not 64 hex digits"))?;
            keys.push((name.to_string(), hash));
        }
        Ok(Self(keys))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name of the key, if it is one of ours.
    fn name_of(&self, key: &str) -> Option<&str> {
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        self.0
            .iter()
            .find(|(_, h)| constant_time_eq(h, &hash))
            .map(|(name, _)| name.as_str())
    }
}

/// Checks the key of `/v1/` requests and takes `api_key` out of the query string, so
/// that handlers never see it.
pub async fn guard(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let keys = request
        .app_data::<web::Data<AppState>>()
        .map(|state| state.api_keys.clone())
        .unwrap_or_default();
    let uri = request.uri().clone();
    let query = uri.query().unwrap_or("");
    let from_query = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("api_key="))
        .map(|k| {
            serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("k={k}"))
                .ok()
                .and_then(|v| v.into_iter().next())
                .map(|(_, v)| v)
                .unwrap_or_default()
        });
    if from_query.is_some() {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| !p.starts_with("api_key="))
            .collect();
        let path_and_query = if kept.is_empty() {
            uri.path().to_string()
        } else {
            format!("{}?{}", uri.path(), kept.join("&"))
        };
        if let Ok(stripped) = path_and_query.parse() {
            request.head_mut().uri = stripped;
        }
    }
    if keys.is_empty() || !uri.path().starts_with("/v1/") {
        return Ok(next.call(request).await?.map_into_boxed_body());
    }
    let from_header = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match from_header
        .or(from_query)
        .as_deref()
        .and_then(|k| keys.name_of(k))
    {
        Some(name) => {
            request.extensions_mut().insert(KeyName(name.to_string()));
            Ok(next.call(request).await?.map_into_boxed_body())
        }
        None => Ok(request.error_response(ApiError::Unauthorized(
            "an API key is required: send it as X-Api-Key, or as api_key in the query string"
                .into(),
        ))),
    }
}

/// Compares secrets without leaking through timing where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
