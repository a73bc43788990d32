//! Protection for a shared deployment: rate limits per API key (or client IP), CORS
//! from config, and security headers on every response.

use actix_cors::Cors;
use actix_governor::governor::NotUntil;
use actix_governor::governor::clock::{Clock, DefaultClock, QuantaInstant};
use actix_governor::governor::middleware::NoOpMiddleware;
use actix_governor::{
    GovernorConfig, GovernorConfigBuilder, KeyExtractor, SimpleKeyExtractionError,
};
use actix_web::dev::ServiceRequest;
use actix_web::http::header;
use actix_web::middleware::DefaultHeaders;
use actix_web::{HttpMessage, HttpResponse, HttpResponseBuilder};

use super::keys::KeyName;
use crate::error::ApiError;

/// Who a request counts against: its API key's name, else its peer address.
#[derive(Debug, Clone, Copy)]
pub struct KeyOrIp;

impl KeyExtractor for KeyOrIp {
    type Key = String;
    type KeyExtractionError = SimpleKeyExtractionError<&'static str>;

    fn extract(&self, request: &ServiceRequest) -> Result<String, Self::KeyExtractionError> {
        if let Some(name) = request.extensions().get::<KeyName>() {
            return Ok(format!("key:{}", name.0));
        }
        Ok(format!(
            "ip:{}",
            request
                .peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default()
        ))
    }

    fn exceed_rate_limit_response(
        &self,
        negative: &NotUntil<QuantaInstant>,
        mut response: HttpResponseBuilder,
    ) -> HttpResponse {
        let wait = negative
            .wait_time_from(DefaultClock::default().now())
            .as_secs()
            .max(1);
        let problem = ApiError::TooManyRequests(format!(
            "rate limit exceeded for this API key or address; retry in {wait} s"
        ))
        .problem();
        response
            .insert_header((header::RETRY_AFTER, wait.to_string()))
            .content_type("application/problem+json")
            .json(problem)
    }
}

pub type RateLimit = GovernorConfig<KeyOrIp, NoOpMiddleware<QuantaInstant>>;

/// A limiter shared by every worker: `per_second` requests a second per key or address,
/// bursts of `burst`. `None` when `per_second` is 0 (off).
pub fn rate_limit(per_second: u64, burst: u32) -> Option<RateLimit> {
    if per_second == 0 {
        return None;
    }
    GovernorConfigBuilder::default()
        .key_extractor(KeyOrIp)
        .milliseconds_per_request((1000 / per_second).max(1))
        .burst_size(burst.max(1))
        .finish()
}

/// CORS for the configured origins (none: browsers on other origins are refused).
pub fn cors(origins: &[String]) -> Cors {
    origins.iter().fold(
        Cors::default()
            .allowed_methods(["GET", "POST"])
            .allowed_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                header::HeaderName::from_static("x-api-key"),
            ])
            .max_age(3600),
        |cors, origin| cors.allowed_origin(origin),
    )
}

/// Headers every response carries.
pub fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::REFERRER_POLICY, "no-referrer"))
}
