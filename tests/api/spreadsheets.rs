//! What spreadsheets need: plain GET URLs, CSV with formula cells escaped and an optional
//! byte-order mark, single values, and an API key in the query string.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use actix_web::web;
use trainplan::catalog::Catalog;
use trainplan::http::keys::ApiKeys;
use trainplan::http::{AppState, app};
use trainplan::pricing::Pricing;

use crate::support::{BODY_LIMIT, fx, get};

#[actix_web::test]
async fn csv_with_a_byte_order_mark_and_escaped_formulas_parses_with_the_csv_crate() {
    let uri = "/v1/estimates/cost?hours=50&gpu=a100-80gb&gpus=4&providers=&currency=CNY&quote_name=%3DCMD()&quote_gpu=a100-80gb&quote_gpus=4&quote_price_per_instance_hour=200&format=csv&bom=true";
    let reply = get(uri).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.body.starts_with("\u{feff}".as_bytes()));
    let mut reader = csv::Reader::from_reader(&reply.body[3..]);
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let sku = header.iter().position(|h| h == "options.sku").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(&rows[0][sku], "'=CMD()");
    // Without bom=true there is none.
    let plain = get(&uri.replace("&bom=true", "")).await;
    assert!(plain.body.starts_with(b"options."));
    // Catalogs and prices take it too.
    assert!(
        get("/v1/prices?format=csv&bom=true")
            .await
            .body
            .starts_with("\u{feff}".as_bytes())
    );
    assert!(
        get("/v1/gpus?format=csv&bom=true")
            .await
            .body
            .starts_with("\u{feff}".as_bytes())
    );
}

#[actix_web::test]
async fn the_documented_spreadsheet_urls_answer_one_value() {
    let docs = include_str!("../../docs/spreadsheets.md");
    let urls: Vec<&str> = docs
        .split('"')
        // Whole URLs (a URL built from cells stops at its first `" & A2 & "`).
        .filter(|s| s.starts_with("https://trainplan.example.com/") && !s.ends_with('='))
        .collect();
    assert!(urls.len() >= 4, "{urls:?}");
    for url in urls {
        let path = url
            .trim_start_matches("https://trainplan.example.com")
            .replace("&api_key=YOUR_KEY", "");
        let reply = get(&path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text());
        if path.contains("format=text") {
            assert!(
                reply.text().parse::<f64>().is_ok() || !reply.text().contains('\n'),
                "{path}: {}",
                reply.text()
            );
        }
    }
}

#[actix_web::test]
async fn api_keys_guard_v1_routes_by_header_or_query_and_are_stripped() {
    let hash = {
        use std::fmt::Write;
        let digest = <sha2::Sha256 as sha2::Digest>::digest(b"secret-key");
        digest.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let keys = ApiKeys::parse(&format!("sheets:{hash}")).unwrap();
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let (pricing, _) = Pricing::embedded(&catalog, fx());
    let state = web::Data::new(AppState::new(catalog, pricing, BODY_LIMIT).with_api_keys(keys));
    let service = test::init_service(app(state)).await;
    let status = |uri: &'static str, key: Option<&'static str>| {
        let mut request = TestRequest::get().uri(uri);
        if let Some(k) = key {
            request = request.insert_header(("x-api-key", k));
        }
        let request = request.to_request();
        let service = &service;
        async move { test::call_service(service, request).await.status().as_u16() }
    };
    assert_eq!(status("/v1/gpus", None).await, 401);
    assert_eq!(status("/v1/gpus", Some("wrong")).await, 401);
    assert_eq!(status("/v1/gpus", Some("secret-key")).await, 200);
    // In the query string (and taken out before the handler's strict query parsing).
    assert_eq!(
        status("/v1/gpus?api_key=secret-key&q=a100", None).await,
        200
    );
    assert_eq!(status("/v1/estimates/memory?model=llama-2-7b&api_key=secret-key&format=text&field=per_gpu.total_gib", None).await, 200);
    assert_eq!(status("/v1/gpus?api_key=nope", None).await, 401);
    // Operations stay open for probes.
    assert_eq!(status("/livez", None).await, 200);
    assert_eq!(status("/readyz", None).await, 200);
    assert!(ApiKeys::parse("no-colon").is_err());
    assert!(ApiKeys::parse("short:abcd").is_err());
}
