//! The JSON body extractor: content type, size limit, and field-level errors.

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::api::from_json_slice;
use crate::error::ApiError;

/// A JSON body deserialised with JSON-pointer errors (`415` for other content types,
/// `413` over the limit, `400` for broken JSON, `422` for wrong fields).
pub struct JsonBody<T>(pub T);

fn is_json(content_type: &str) -> bool {
    // A body without a content type (curl -d without -H) is read as JSON.
    content_type.is_empty() || content_type == "application/json" || content_type.ends_with("+json")
}

/// What a body that could not be read becomes: `413` over `limit`, else `400`.
pub(super) fn unreadable(error: &actix_web::Error, limit: usize) -> ApiError {
    if error.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge { limit }
    } else {
        ApiError::MalformedJson(format!("the body could not be read: {error}"))
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        use actix_web::HttpMessage;
        let content_type = request.content_type().to_ascii_lowercase();
        let limit = request
            .app_data::<web::Data<super::AppState>>()
            .map_or(0, |state| state.body_limit_bytes);
        let body = web::Bytes::from_request(request, payload);
        Box::pin(async move {
            if !is_json(&content_type) {
                return Err(ApiError::UnsupportedMediaType(content_type));
            }
            let bytes = body.await.map_err(|error| unreadable(&error, limit))?;
            from_json_slice(&bytes).map(JsonBody)
        })
    }
}
