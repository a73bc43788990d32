//! A short-lived cache of estimate answers. Identical requests — same method, path,
//! query, `Content-Type`, `Accept` and body — against the same price book within the
//! configured lifetime share the bytes of one answer instead of a new estimate each:
//! spreadsheet cells refreshing one URL, CI gates re-running one plan and a chatbot
//! asking the same question again pay for one estimate.
//!
//! An answer is kept when its request comes a second time (the third is the first one
//! reused): a stream of one-off plans never fills the cache, and so never pays for
//! keeping answers nobody asks for again. Only `200` answers are kept; errors are worked
//! out every time. A new price book (a refresh landing) retires every answer made with
//! the old one. Answers that read the clock (the age of each price row) are as of when
//! they were kept, at most the lifetime old. The `Cache-Status` header (RFC 9211) says
//! what happened to each request.
//!
//! A kept answer is also kept gzip-compressed, made once, when a request that accepts gzip
//! (`Accept-Encoding`, as Python's requests and httpx, browsers and `curl --compressed`
//! send) is first answered from it; that request and every later one taking gzip get the
//! copy: a 20 kB cost answer goes out as about a tenth of its bytes, so sending it costs
//! the server less than the kernel's work on the full body. Answers worked out for the
//! request at hand, the one that gets an answer kept included, go out as they are:
//! compressing costs several times what estimating does (docs/performance.md), so it is
//! paid only for an answer that is asked for again. Every answer of these resources says
//! `Vary: Accept-Encoding`.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix_web::body::{self, BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{
    self, AcceptEncoding, Encoding, Header, HeaderMap, HeaderName, HeaderValue, Preference, Quality,
};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpResponse, web};
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::AppState;
use super::extract::unreadable;
use crate::error::ApiError;
use crate::pricing::PriceBook;

const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");
/// Typical answer size used only to size the cache's table up front (a memory answer
/// is about 2 kB, a cost answer about 20 kB).
const TYPICAL_ANSWER_BYTES: u64 = 8 * 1024;
/// Requests remembered as seen once, by hash (512 KiB): far more than the answers the
/// cache holds, so a request repeated within the lifetime is rarely forgotten.
const SEEN_SLOTS: usize = 1 << 16;

/// One kept answer: the handler's headers and body, and the book it was made with.
struct Answer {
    stored: Instant,
    book: Arc<PriceBook>,
    headers: HeaderMap,
    body: Bytes,
    /// The body gzip-compressed, with the headers that say so, once a request taking gzip
    /// has asked for it; `None` where compressing does not make it smaller.
    gzip: OnceLock<Option<(HeaderMap, Bytes)>>,
}

impl Answer {
    /// Keeps the handler's answer; its gzip copy is made when first asked for.
    fn new(stored: Instant, book: Arc<PriceBook>, headers: HeaderMap, body: Bytes) -> Self {
        Self {
            stored,
            book,
            headers,
            body,
            gzip: OnceLock::new(),
        }
    }

    /// The headers and body to send: the gzip copy where the request takes it (made now
    /// if this is the first such request).
    fn representation(&self, takes_gzip: bool) -> (&HeaderMap, &Bytes) {
        let compressed = takes_gzip.then(|| {
            self.gzip.get_or_init(|| {
                gzip(&self.body).map(|compressed| {
                    let mut headers = self.headers.clone();
                    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                    (headers, compressed)
                })
            })
        });
        match compressed {
            Some(Some((headers, body))) => (headers, body),
            _ => (&self.headers, &self.body),
        }
    }

    /// The answer as a response to a request that does or does not take gzip.
    fn response(&self, takes_gzip: bool) -> HttpResponse {
        let (headers, body) = self.representation(takes_gzip);
        let mut response = HttpResponse::Ok().body(body.clone());
        *response.headers_mut() = headers.clone();
        response
    }
}

/// `body` gzip-compressed at the default level (6: a kept answer is compressed once and
/// sent many times), or `None` when that is not smaller.
fn gzip(body: &[u8]) -> Option<Bytes> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::default());
    encoder.write_all(body).ok()?;
    let compressed = encoder.finish().ok()?;
    (compressed.len() < body.len()).then(|| Bytes::from(compressed))
}

/// Whether the request asks for gzip: listed with a non-zero weight, and not below an
/// `identity` it lists (RFC 9110 §12.5.3; a bare `*` leaves the choice to the server,
/// which sends the answer as it is). No `Accept-Encoding`: no.
fn takes_gzip(request: &impl HttpMessage) -> bool {
    let Ok(accepted) = AcceptEncoding::parse(request) else {
        return false;
    };
    let weight = |encoding| {
        let listed = Preference::Specific(encoding);
        accepted
            .iter()
            .find(|item| item.item == listed)
            .map(|item| item.quality)
    };
    let gzip = weight(Encoding::gzip()).unwrap_or(Quality::ZERO);
    gzip > Quality::ZERO && weight(Encoding::identity()).is_none_or(|identity| gzip >= identity)
}

/// Weighs an entry by the bytes it holds or may come to hold, so the capacity is a memory
/// bound: the key, the body, and as much again for the gzip copy, which is kept only when
/// smaller than the body and may be made after the entry is weighed.
#[derive(Clone)]
struct Size;

impl Weighter<Vec<u8>, Arc<Answer>> for Size {
    fn weight(&self, key: &Vec<u8>, answer: &Arc<Answer>) -> u64 {
        (key.len() + 2 * answer.body.len()) as u64
    }
}

/// The answers of one replica, shared by its workers.
pub struct AnswerCache {
    lifetime: Duration,
    entries: Cache<Vec<u8>, Arc<Answer>, Size>,
    /// A direct-mapped table of the hashes of requests seen once. The hash is keyless:
    /// requests made to collide only go uncached, which one-off requests are anyway.
    seen: Box<[AtomicU64]>,
}

impl AnswerCache {
    /// A cache keeping answers for `lifetime`, up to `capacity_bytes` of keys and bodies;
    /// `None` (no cache) when either is zero.
    pub fn new(lifetime: Duration, capacity_bytes: u64) -> Option<Self> {
        (!lifetime.is_zero() && capacity_bytes > 0).then(|| Self {
            lifetime,
            entries: Cache::with_weighter(
                (capacity_bytes / TYPICAL_ANSWER_BYTES).max(1) as usize,
                capacity_bytes,
                Size,
            ),
            seen: (0..SEEN_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Whether an answer to `key` is worth keeping: true when the request was seen
    /// before (a collision in the table only delays that by one request).
    fn seen_before(&self, key: &[u8]) -> bool {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        let slot = &self.seen[(hash % SEEN_SLOTS as u64) as usize];
        slot.swap(hash, Ordering::Relaxed) == hash
    }

    /// The kept answer for `key` if it was made with `book` and is younger than the
    /// lifetime at `now`, with the seconds it has left.
    fn fresh(&self, key: &[u8], book: &Arc<PriceBook>, now: Instant) -> Option<(Arc<Answer>, u64)> {
        let answer = self.entries.get(key)?;
        let age = now.saturating_duration_since(answer.stored);
        (Arc::ptr_eq(&answer.book, book) && age < self.lifetime)
            .then(|| (answer, (self.lifetime - age).as_secs()))
    }
}

/// Everything a response depends on besides the book, length-prefixed so that no two
/// different requests share a key.
fn key(request: &ServiceRequest, body: &[u8]) -> Vec<u8> {
    let header = |name| {
        request
            .headers()
            .get(name)
            .map_or(&b""[..], HeaderValue::as_bytes)
    };
    let parts = [
        request.method().as_str().as_bytes(),
        request.path().as_bytes(),
        request.query_string().as_bytes(),
        header(header::CONTENT_TYPE),
        header(header::ACCEPT),
        body,
    ];
    let mut key = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for part in parts {
        key.extend_from_slice(&(part.len() as u64).to_le_bytes());
        key.extend_from_slice(part);
    }
    key
}

/// Whether the cache reads the body before the handler: a declared length (none for a
/// body-less request) within the body limit. Chunked and larger bodies go on to the
/// handler as they are, which answers them (415, 413) in its own order.
fn readable(request: &ServiceRequest, limit: usize) -> bool {
    let headers = request.headers();
    let length = match headers.get(header::CONTENT_LENGTH) {
        None => Some(0),
        Some(value) => value.to_str().ok().and_then(|v| v.parse::<usize>().ok()),
    };
    !headers.contains_key(header::TRANSFER_ENCODING) && length.is_some_and(|n| n <= limit)
}

/// Says what the cache did, in `Cache-Status` (RFC 9211), and that the answer depends
/// on `Accept-Encoding`.
fn mark(headers: &mut HeaderMap, status: &str) {
    if let Ok(value) = HeaderValue::from_str(status) {
        headers.insert(CACHE_STATUS, value);
    }
    headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
}

/// Middleware of the estimate resources: answers a repeated request from the cache, and
/// keeps new `200` answers.
pub async fn reuse(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let plan = request.app_data::<web::Data<AppState>>().and_then(|state| {
        let cache = state.answers.clone()?;
        readable(&request, state.body_limit_bytes).then(|| (state.clone(), cache))
    });
    let Some((state, cache)) = plan else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    let body = request
        .extract::<web::Bytes>()
        .await
        .map_err(|error| unreadable(&error, state.body_limit_bytes))?;
    let key = key(&request, &body);
    let book = state.pricing.book.load_full();
    if let Some((answer, ttl)) = cache.fresh(&key, &book, Instant::now()) {
        state.metrics.answer(true);
        let mut response = answer.response(takes_gzip(&request));
        mark(
            response.headers_mut(),
            &format!("trainplan; hit; ttl={ttl}"),
        );
        return Ok(request.into_response(response));
    }
    state.metrics.answer(false);
    request.set_payload(Payload::from(body));
    let response = next.call(request).await?;
    if response.status() != StatusCode::OK || !cache.seen_before(&key) {
        let mut response = response.map_into_boxed_body();
        mark(response.headers_mut(), "trainplan; fwd=miss");
        return Ok(response);
    }
    let (request, response) = response.into_parts();
    let (head, body) = response.into_parts();
    let body = body::to_bytes(body)
        .await
        .map_err(|_| ApiError::Internal("the answer could not be read back".into()))?;
    let answer = Arc::new(Answer::new(
        Instant::now(),
        book,
        head.headers().clone(),
        body,
    ));
    cache.entries.insert(key, answer.clone());
    let mut response = answer.response(false);
    mark(response.headers_mut(), "trainplan; fwd=miss; stored");
    Ok(ServiceResponse::new(request, response))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::BookKind;

    fn answer(book: &Arc<PriceBook>, stored: Instant) -> Arc<Answer> {
        Arc::new(Answer::new(
            stored,
            book.clone(),
            HeaderMap::new(),
            Bytes::from_static(b"{}"),
        ))
    }

    fn book() -> Arc<PriceBook> {
        Arc::new(PriceBook::new(
            Vec::new(),
            BookKind::EmbeddedSnapshot,
            None,
            jiff::Timestamp::UNIX_EPOCH,
        ))
    }

    #[test]
    fn an_answer_is_served_within_its_lifetime_and_with_its_own_book_only() {
        let Some(cache) = AnswerCache::new(Duration::from_secs(60), 1 << 20) else {
            panic!("a cache with a lifetime and a capacity")
        };
        let (first, second) = (book(), book());
        let stored = Instant::now();
        cache.entries.insert(b"k".to_vec(), answer(&first, stored));
        let after = |seconds| stored + Duration::from_secs(seconds);
        assert_eq!(
            cache.fresh(b"k", &first, after(0)).map(|(_, ttl)| ttl),
            Some(60)
        );
        assert_eq!(
            cache.fresh(b"k", &first, after(59)).map(|(_, ttl)| ttl),
            Some(1)
        );
        assert!(cache.fresh(b"k", &first, after(60)).is_none(), "expired");
        assert!(
            cache.fresh(b"k", &second, after(1)).is_none(),
            "another book"
        );
        assert!(
            cache.fresh(b"other", &first, after(1)).is_none(),
            "another key"
        );
    }

    #[test]
    fn an_answer_is_worth_keeping_from_its_request_s_second_time() {
        let Some(cache) = AnswerCache::new(Duration::from_secs(60), 1 << 20) else {
            panic!("a cache with a lifetime and a capacity")
        };
        assert!(!cache.seen_before(b"plan a"));
        assert!(!cache.seen_before(b"plan b"));
        assert!(cache.seen_before(b"plan a"));
        assert!(cache.seen_before(b"plan a"));
        assert!(cache.seen_before(b"plan b"));
    }

    #[test]
    fn no_lifetime_or_no_capacity_means_no_cache() {
        assert!(AnswerCache::new(Duration::ZERO, 1 << 20).is_none());
        assert!(AnswerCache::new(Duration::from_secs(60), 0).is_none());
    }

    #[test]
    fn the_capacity_bounds_the_bytes_kept() {
        let Some(cache) = AnswerCache::new(Duration::from_secs(60), 10_000) else {
            panic!("a cache with a lifetime and a capacity")
        };
        let book = book();
        for i in 0..100u32 {
            let body = Bytes::from(vec![b' '; 1_000]);
            let entry = Answer::new(Instant::now(), book.clone(), HeaderMap::new(), body);
            cache
                .entries
                .insert(i.to_le_bytes().to_vec(), Arc::new(entry));
        }
        assert!(
            cache.entries.weight() <= 10_000,
            "{}",
            cache.entries.weight()
        );
    }

    #[test]
    fn a_kept_answer_makes_a_gzip_copy_of_the_same_bytes_when_first_asked_and_smaller() {
        use std::io::Read;
        let body = serde_json::to_vec(&serde_json::json!({
            "options": (0..50).map(|i| serde_json::json!({"provider": "aws", "cost": i}))
                .collect::<Vec<_>>()
        }))
        .unwrap_or_default();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let answer = Answer::new(Instant::now(), book(), headers, Bytes::from(body.clone()));
        let (plain_headers, plain) = answer.representation(false);
        assert_eq!(plain, &body);
        assert!(!plain_headers.contains_key(header::CONTENT_ENCODING));
        assert!(answer.gzip.get().is_none(), "not compressed before asked");
        let (gzip_headers, compressed) = answer.representation(true);
        assert!(compressed.len() < body.len() / 4, "{}", compressed.len());
        assert_eq!(
            gzip_headers
                .get(header::CONTENT_ENCODING)
                .map(HeaderValue::as_bytes),
            Some(&b"gzip"[..])
        );
        assert_eq!(
            gzip_headers.get(header::CONTENT_TYPE),
            plain_headers.get(header::CONTENT_TYPE)
        );
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_end(&mut decoded)
            .unwrap_or_default();
        assert_eq!(decoded, body);

        // Two bytes do not get smaller: every request gets them as they are.
        let tiny = Answer::new(
            Instant::now(),
            book(),
            HeaderMap::new(),
            Bytes::from_static(b"{}"),
        );
        assert_eq!(tiny.representation(true).1, &Bytes::from_static(b"{}"));
        assert!(
            matches!(tiny.gzip.get(), Some(None)),
            "asked, and found no smaller"
        );
    }

    #[test]
    fn gzip_is_sent_only_where_the_request_asks_for_it() {
        let takes = |accept: Option<&str>| {
            let mut request = actix_web::test::TestRequest::default();
            if let Some(accept) = accept {
                request = request.insert_header((header::ACCEPT_ENCODING, accept));
            }
            takes_gzip(&request.to_srv_request())
        };
        assert!(!takes(None));
        assert!(takes(Some("gzip")));
        assert!(takes(Some("gzip, deflate")), "Python requests");
        assert!(takes(Some("gzip, deflate, br, zstd")), "browsers");
        assert!(takes(Some("br, gzip;q=0.8")));
        assert!(!takes(Some("br")));
        assert!(!takes(Some("identity")));
        assert!(!takes(Some("gzip;q=0")));
        assert!(!takes(Some("gzip;q=0.5, identity")));
        assert!(!takes(Some("gzip;q=0.8, identity;q=0.9")));
        assert!(takes(Some("identity;q=0.5, gzip")));
        assert!(!takes(Some("*")), "anything goes: sent as it is");
    }
}
