//! The one error type of the service, rendered as RFC 9457 `application/problem+json`.

use actix_web::http::{Method, StatusCode, header};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::validation::FieldError;

tokio::task_local! {
    /// The id of the request being served, so that error bodies can carry it.
    pub static REQUEST_ID: String;
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the body is not valid JSON: {0}")]
    MalformedJson(String),
    #[error("{} field(s) are invalid", .0.len())]
    Invalid(Vec<FieldError>),
    #[error("unknown {what} `{id}`")]
    NotFound {
        what: &'static str,
        id: String,
        suggestions: Vec<String>,
    },
    #[error("no route for {0}")]
    RouteNotFound(String),
    #[error("method not allowed; allowed: {}", allowed_list(.allow))]
    MethodNotAllowed { allow: Vec<Method> },
    #[error("the body is larger than the {limit}-byte limit")]
    PayloadTooLarge { limit: usize },
    #[error("unsupported content type {0:?}; send application/json")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    TooManyRequests(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

fn allowed_list(methods: &[Method]) -> String {
    methods
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// RFC 9457 problem details, with the request id and, for validation errors, each bad
/// field.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Stable URI of the problem type.
    #[schema(example = "urn:trainplan:problem:invalid-request")]
    #[serde(rename = "type")]
    pub kind: String,
    #[schema(example = "Invalid request")]
    pub title: &'static str,
    #[schema(example = 422)]
    pub status: u16,
    #[schema(example = "1 field(s) are invalid")]
    pub detail: String,
    /// Echoes `X-Request-Id`.
    pub request_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// Closest known ids, for unknown catalog ids.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
}

impl ApiError {
    /// The same error with its field pointers under `prefix` (a request nested in a
    /// larger one).
    pub fn under(self, prefix: &str) -> Self {
        match self {
            ApiError::Invalid(errors) => ApiError::Invalid(
                errors
                    .into_iter()
                    .map(|e| FieldError::new(format!("{prefix}{}", e.pointer), e.message))
                    .collect(),
            ),
            other => other,
        }
    }

    /// Stable machine code and title of each variant.
    fn code(&self) -> (&'static str, &'static str) {
        match self {
            ApiError::MalformedJson(_) => ("malformed-json", "Malformed JSON"),
            ApiError::Invalid(_) => ("invalid-request", "Invalid request"),
            ApiError::NotFound { .. } => ("unknown-id", "Unknown catalog id"),
            ApiError::RouteNotFound(_) => ("not-found", "Not found"),
            ApiError::MethodNotAllowed { .. } => ("method-not-allowed", "Method not allowed"),
            ApiError::PayloadTooLarge { .. } => ("payload-too-large", "Payload too large"),
            ApiError::UnsupportedMediaType(_) => {
                ("unsupported-media-type", "Unsupported media type")
            }
            ApiError::Unauthorized(_) => ("unauthorized", "Unauthorized"),
            ApiError::Forbidden(_) => ("forbidden", "Forbidden"),
            ApiError::Conflict(_) => ("conflict", "Conflict"),
            ApiError::TooManyRequests(_) => ("too-many-requests", "Too many requests"),
            ApiError::Unavailable(_) => ("unavailable", "Service unavailable"),
            ApiError::Internal(_) => ("internal", "Internal error"),
        }
    }

    pub fn problem(&self) -> Problem {
        let (code, title) = self.code();
        let (errors, suggestions) = match self {
            ApiError::Invalid(errors) => (errors.clone(), Vec::new()),
            ApiError::NotFound { suggestions, .. } => (Vec::new(), suggestions.clone()),
            _ => (Vec::new(), Vec::new()),
        };
        let detail = match self {
            ApiError::NotFound { suggestions, .. } if !suggestions.is_empty() => {
                format!("{self}; closest: {}", suggestions.join(", "))
            }
            // The cause stays in the logs; the client gets a clean body.
            ApiError::Internal(_) => {
                "the server failed to answer; the request id is in the logs".into()
            }
            _ => self.to_string(),
        };
        Problem {
            kind: format!("urn:trainplan:problem:{code}"),
            title,
            status: self.status_code().as_u16(),
            detail,
            request_id: REQUEST_ID.try_with(Clone::clone).unwrap_or_default(),
            errors,
            suggestions,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound { .. } | ApiError::RouteNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::Internal(cause) = self {
            tracing::error!(%cause, "internal error");
        }
        let mut response = HttpResponse::build(self.status_code());
        response.content_type("application/problem+json");
        if let ApiError::MethodNotAllowed { allow } = self {
            response.insert_header((header::ALLOW, allowed_list(allow)));
        }
        if let ApiError::Unauthorized(_) = self {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        response.json(self.problem())
    }
}

impl From<crate::estimate::time::TimeError> for ApiError {
    fn from(error: crate::estimate::time::TimeError) -> Self {
        ApiError::Invalid(vec![FieldError::new("/precision", error.to_string())])
    }
}

/// The documented problem responses of an operation, as OpenAPI responses.
fn problem_responses(
    list: &[(u16, &str)],
) -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    list.iter()
        .map(|&(status, description)| {
            let response = ResponseBuilder::new()
                .description(description)
                .content(
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                )
                .build();
            (status.to_string(), response.into())
        })
        .collect()
}

/// The problems a POST estimate answers with.
pub struct PostProblems;

impl utoipa::IntoResponses for PostProblems {
    fn responses()
    -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
        problem_responses(&[
            (400, "Malformed JSON"),
            (404, "Unknown model or GPU id (with the closest ids)"),
            (413, "Body over 64 KiB"),
            (415, "Body is not JSON"),
            (
                422,
                "Invalid fields, each with a JSON pointer and the accepted values",
            ),
        ])
    }
}

/// The problems a GET (query-string) estimate answers with.
pub struct GetProblems;

impl utoipa::IntoResponses for GetProblems {
    fn responses()
    -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
        problem_responses(&[
            (404, "Unknown model or GPU id (with the closest ids)"),
            (422, "Invalid or unknown query parameters"),
        ])
    }
}

/// The problems `POST /v1/pricing/refresh` answers with.
pub struct RefreshProblems;

impl utoipa::IntoResponses for RefreshProblems {
    fn responses()
    -> std::collections::BTreeMap<String, utoipa::openapi::RefOr<utoipa::openapi::Response>> {
        problem_responses(&[
            (401, "No admin token sent"),
            (
                403,
                "Wrong admin token, or refresh disabled (no token configured)",
            ),
            (
                409,
                "A refresh is already running (on this or another replica)",
            ),
            (503, "The price store (Redis) is unreachable"),
        ])
    }
}
