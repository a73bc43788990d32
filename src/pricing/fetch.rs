//! The thin network half of a feed: HTTP with timeouts, retries with backoff and jitter,
//! a size limit and a descriptive User-Agent; paging where the source pages.

use std::time::Duration;

use super::feeds::{self, FeedKind, ParseError, Parsed, Stamp};
use super::refresh::FeedConfig;

/// Identifies the scraper to the providers it reads.
const USER_AGENT: &str = concat!(
    "trainplan/",
    env!("CARGO_PKG_VERSION"),
    " (GPU price scraper; public price pages only)"
);

/// RunPod's public `gpuTypes` query (feeds.md §5.2), used when the feed names no body.
const RUNPOD_QUERY: &str = r#"{"query":"query { gpuTypes { id displayName memoryInGb securePrice communityPrice secureSpotPrice communitySpotPrice } }"}"#;

/// Why a fetch failed, in words for `/v1/pricing/feeds`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error("{url}: the body is over the {limit}-byte limit")]
    TooLarge { url: String, limit: u64 },
    #[error("{0}")]
    Parse(#[from] ParseError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
}

impl Default for Fetcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Fetcher {
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Self { client }
    }

    /// One body, retried on timeouts, connection errors, 429 and 5xx with exponential
    /// backoff plus jitter; other 4xx fail at once.
    async fn body(
        &self,
        feed: &FeedConfig,
        url: &str,
        post: Option<&str>,
    ) -> Result<Vec<u8>, FetchError> {
        if let Some(path) = url.strip_prefix("file://") {
            return std::fs::read(path).map_err(|e| FetchError::File {
                path: path.to_string(),
                message: e.to_string(),
            });
        }
        let mut attempt = 0;
        loop {
            match self.once(feed, url, post).await {
                Ok(bytes) => return Ok(bytes),
                Err((error, retryable)) if retryable && attempt < feed.retries => {
                    let base = feed.retry_base_ms * 2u64.pow(attempt);
                    let jitter = fastrand::u64(0..=feed.retry_base_ms);
                    tracing::debug!(feed = %feed.name, %error, attempt, "retrying");
                    tokio::time::sleep(Duration::from_millis(base + jitter)).await;
                    attempt += 1;
                }
                Err((error, _)) => return Err(error),
            }
        }
    }

    async fn once(
        &self,
        feed: &FeedConfig,
        url: &str,
        post: Option<&str>,
    ) -> Result<Vec<u8>, (FetchError, bool)> {
        let http = |message: String, retryable: bool| {
            (
                FetchError::Http {
                    url: url.to_string(),
                    message,
                },
                retryable,
            )
        };
        let request = match post {
            Some(body) => self
                .client
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string()),
            None => self.client.get(url),
        };
        let mut response = request
            .timeout(Duration::from_secs_f64(feed.timeout_seconds))
            .send()
            .await
            .map_err(|e| http(describe(&e), true))?;
        let status = response.status();
        if !status.is_success() {
            let retryable = status.as_u16() == 429 || status.is_server_error();
            return Err(http(format!("HTTP {status}"), retryable));
        }
        let too_large = || {
            (
                FetchError::TooLarge {
                    url: url.to_string(),
                    limit: feed.max_bytes,
                },
                false,
            )
        };
        if response
            .content_length()
            .is_some_and(|n| n > feed.max_bytes)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| http(describe(&e), true))?
        {
            if bytes.len() as u64 + chunk.len() as u64 > feed.max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// Fetches and parses one feed: every page, every part.
    pub async fn run(&self, feed: &FeedConfig, stamp: &Stamp) -> Result<Parsed, FetchError> {
        let url = feed.url.as_str();
        Ok(match feed.kind {
            FeedKind::AzureRetail => {
                let mut all = Parsed::default();
                let mut next = Some(url.to_string());
                let mut pages = 0;
                while let Some(page_url) = next.take() {
                    pages += 1;
                    if pages > feed.max_pages {
                        return Err(FetchError::Http {
                            url: page_url,
                            message: format!("more than {} pages", feed.max_pages),
                        });
                    }
                    let page =
                        feeds::azure::parse(&self.body(feed, &page_url, None).await?, stamp)?;
                    all.quotes.extend(page.quotes);
                    all.rejected.extend(page.rejected);
                    next = page.next_page;
                }
                all
            }
            FeedKind::Aws => {
                let region = feed.region.as_deref().unwrap_or("us-east-1");
                let mut all =
                    feeds::aws::parse_on_demand(&self.body(feed, url, None).await?, region, stamp)?;
                let risks = match &feed.advisor_url {
                    Some(advisor) => {
                        feeds::aws::parse_advisor(&self.body(feed, advisor, None).await?)?
                    }
                    None => Default::default(),
                };
                if let Some(spot) = &feed.spot_url {
                    let spot =
                        feeds::aws::parse_spot(&self.body(feed, spot, None).await?, &risks, stamp)?;
                    all.quotes.extend(spot.quotes);
                    all.rejected.extend(spot.rejected);
                }
                all
            }
            FeedKind::SkypilotCatalog => {
                let provider = feed.provider.as_deref().unwrap_or("unknown");
                feeds::skypilot::parse(&self.body(feed, url, None).await?, provider, stamp)?
            }
            FeedKind::Runpod => {
                let body = feed.body.as_deref().unwrap_or(RUNPOD_QUERY);
                feeds::runpod::parse(&self.body(feed, url, Some(body)).await?, stamp)?
            }
            FeedKind::Vast => {
                let body = feed
                    .body
                    .as_deref()
                    .unwrap_or(r#"{"rentable": {"eq": true}, "limit": 10000}"#);
                feeds::vast::parse(&self.body(feed, url, Some(body)).await?, stamp)?
            }
            FeedKind::Oci => {
                let shapes_url = feed.shapes_url.as_deref().ok_or_else(|| FetchError::Http {
                    url: url.to_string(),
                    message: "an oci feed needs shapes_url".into(),
                })?;
                let products = self.body(feed, url, None).await?;
                let shapes = self.body(feed, shapes_url, None).await?;
                feeds::oci::parse(&products, &shapes, stamp)?
            }
            FeedKind::CsvUrl => feeds::csv_sheet::parse(&self.body(feed, url, None).await?, stamp)?,
        })
    }
}

/// reqwest's error with its cause chain (a timeout, a refused connection, a reset).
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_string()
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
