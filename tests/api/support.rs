//! Builds the real application (the same `app()` as production) for in-process requests.

use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::{test, web};
use serde_json::Value;
use trainplan::catalog::Catalog;
use trainplan::http::{AppState, app};

pub const BODY_LIMIT: usize = 65_536;

pub async fn service() -> impl Service<
    actix_http::Request,
    Response = ServiceResponse<impl MessageBody>,
    Error = actix_web::Error,
> {
    let state = web::Data::new(AppState::new(
        Arc::new(Catalog::embedded().unwrap()),
        BODY_LIMIT,
    ));
    test::init_service(app(state)).await
}

/// Status, headers and body of one response.
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub headers: actix_web::http::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn call(request: test::TestRequest) -> Reply {
    let service = service().await;
    let response = test::call_service(&service, request.to_request()).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = test::read_body(response).await.to_vec();
    Reply {
        status,
        content_type,
        headers,
        body,
    }
}

pub async fn post_json(path: &str, body: &Value) -> Reply {
    call(
        test::TestRequest::post()
            .uri(path)
            .insert_header(("content-type", "application/json"))
            .set_payload(body.to_string()),
    )
    .await
}

pub async fn get(path: &str) -> Reply {
    call(test::TestRequest::get().uri(path)).await
}
