//! A refresh (design §4, issue 4): run the enabled feeds concurrently, validate their
//! rows, keep each failed feed's last good rows (stale), quarantine implausible jumps,
//! and publish one immutable snapshot that every replica swaps in.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::book::{BookKind, PriceBook, SNAPSHOT_CSV, SharedBook};
use super::feeds::{FeedKind, Stamp};
use super::fetch::Fetcher;
use super::quote::{Currency, Fx, PriceQuote, read_csv};
use super::store::Store;
use crate::catalog::{Catalog, GpuClass};

/// The built-in feed list (`pricing-feeds/feeds.toml`): none enabled, so the service
/// works offline on the embedded snapshot.
pub const FEEDS_TOML: &str = include_str!("../../pricing-feeds/feeds.toml");

/// A price that moved more than this factor since the feed's last good value is
/// quarantined, not served (issue 4).
const QUARANTINE_FACTOR: f64 = 5.0;

/// One feed of `feeds.toml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedConfig {
    pub name: String,
    pub kind: FeedKind,
    #[serde(default)]
    pub enabled: bool,
    pub url: String,
    /// Shown as each row's `source`.
    #[serde(default)]
    pub source: Option<String>,
    /// `aws`: the region the pricing page is for.
    #[serde(default)]
    pub region: Option<String>,
    /// `aws`: `spot.json`; `advisor_url`: the Spot Advisor data.
    #[serde(default)]
    pub spot_url: Option<String>,
    #[serde(default)]
    pub advisor_url: Option<String>,
    /// `oci`: the shapes file.
    #[serde(default)]
    pub shapes_url: Option<String>,
    /// `skypilot_catalog`: the cloud the CSV is for (`aws`, `gcp`, `lambda`, …).
    #[serde(default)]
    pub provider: Option<String>,
    /// `runpod`, `vast`: the POST body (defaults to the public query).
    #[serde(default)]
    pub body: Option<String>,
    /// Keep only these catalog GPUs (default: every GPU the feed maps).
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Keep only these regions (default: every region).
    #[serde(default)]
    pub regions: Vec<String>,
    #[serde(default = "defaults::interval_seconds")]
    pub interval_seconds: u64,
    #[serde(default = "defaults::timeout_seconds")]
    pub timeout_seconds: f64,
    #[serde(default = "defaults::retries")]
    pub retries: u32,
    #[serde(default = "defaults::retry_base_ms")]
    pub retry_base_ms: u64,
    #[serde(default = "defaults::max_bytes")]
    pub max_bytes: u64,
    #[serde(default = "defaults::max_pages")]
    pub max_pages: u32,
}

mod defaults {
    pub fn interval_seconds() -> u64 {
        21_600
    }
    pub fn timeout_seconds() -> f64 {
        30.0
    }
    pub fn retries() -> u32 {
        2
    }
    pub fn retry_base_ms() -> u64 {
        500
    }
    pub fn max_bytes() -> u64 {
        64 << 20
    }
    pub fn max_pages() -> u32 {
        200
    }
}

#[derive(Debug, Deserialize)]
struct FeedsFile {
    #[serde(default)]
    feed: Vec<FeedConfig>,
}

/// Reads a feeds file (the built-in one when `text` is that).
pub fn parse_feeds(text: &str) -> Result<Vec<FeedConfig>, String> {
    let file: FeedsFile = config::Config::builder()
        .add_source(config::File::from_str(text, config::FileFormat::Toml))
        .build()
        .and_then(|c| c.try_deserialize())
        .map_err(|e| format!("feeds file: {e}"))?;
    let mut names: Vec<&str> = file.feed.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("feeds file: feed name {:?} is used twice", pair[0]));
    }
    Ok(file.feed)
}

/// What `/v1/pricing/feeds` reports for one feed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct FeedStatus {
    pub name: String,
    pub kind: Option<FeedKind>,
    /// RFC 3339 times of the last attempt and the last success.
    pub last_attempt: Option<String>,
    pub last_success: Option<String>,
    /// The last attempt's error (absent after a success).
    pub last_error: Option<String>,
    /// Rows the book serves from this feed (stale ones included).
    pub rows_kept: u64,
    /// Rows kept from an earlier success because the last attempt failed or moved them
    /// implausibly.
    pub rows_stale: u64,
    /// Rows dropped, counted by reason.
    pub rows_rejected: BTreeMap<String, u64>,
    /// Prices that moved more than 5× since the last good value: not served (the last
    /// good value is kept, stale).
    pub quarantined: Vec<String>,
    pub duration_ms: u64,
    /// True when the feed's rows are all from an earlier success.
    pub stale: bool,
}

/// What Redis holds under a snapshot id: the rows and every feed's status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredSnapshot {
    pub id: String,
    /// RFC 3339.
    pub created_at: String,
    pub rows: Vec<PriceQuote>,
    pub feeds: Vec<FeedStatus>,
}

impl StoredSnapshot {
    /// The book a replica serves from this snapshot.
    pub fn book(&self, loaded_at: jiff::Timestamp) -> PriceBook {
        PriceBook::new(
            self.rows.clone(),
            BookKind::Live,
            Some(self.id.clone()),
            loaded_at,
        )
        .with_feeds(self.feeds.clone(), Some(self.created_at.clone()))
    }
}

/// One feed's fetch result.
pub struct Outcome {
    pub feed: FeedConfig,
    pub result: Result<super::feeds::Parsed, String>,
    pub duration_ms: u64,
}

/// Identifies a price across refreshes.
type Key = (String, String, String, super::quote::PriceType);

fn key(q: &PriceQuote) -> Key {
    (
        q.provider.clone(),
        q.region.clone(),
        q.sku.clone(),
        q.price_type,
    )
}

/// Plausible USD per GPU-hour by GPU family: about five times beyond the cheapest and
/// the dearest reading of each family in the reference snapshot.
fn bounds(class: GpuClass) -> (f64, f64) {
    match class {
        GpuClass::Gddr | GpuClass::Turing | GpuClass::Volta => (0.01, 25.0),
        GpuClass::Ampere => (0.05, 60.0),
        GpuClass::Hopper | GpuClass::Blackwell | GpuClass::Cdna | GpuClass::Gaudi => (0.1, 150.0),
    }
}

/// The short reason of a parser's rejection (`"p3.2xlarge: zero or missing price"` →
/// `"zero or missing price"`), for counting.
fn reason_of(text: &str) -> String {
    text.rsplit(": ").next().unwrap_or(text).to_string()
}

/// Builds the next snapshot from the previous one and this refresh's outcomes. Pure.
pub fn compose(
    id: String,
    previous: Option<&StoredSnapshot>,
    outcomes: Vec<Outcome>,
    catalog: &Catalog,
    fx: &Fx,
    now: jiff::Timestamp,
) -> StoredSnapshot {
    let previous_rows: Vec<&PriceQuote> = previous
        .map(|p| p.rows.iter().collect())
        .unwrap_or_default();
    let previous_by_key: HashMap<Key, &PriceQuote> = previous_rows
        .iter()
        .filter(|q| q.feed.is_some())
        .map(|q| (key(q), *q))
        .collect();
    let previous_status: HashMap<&str, &FeedStatus> = previous
        .map(|p| p.feeds.iter().map(|f| (f.name.as_str(), f)).collect())
        .unwrap_or_default();
    let stale = |q: &PriceQuote| PriceQuote {
        stale: true,
        ..q.clone()
    };
    let now_text = now.to_string();
    let mut rows: Vec<PriceQuote> = Vec::new();
    let mut statuses = Vec::new();
    for outcome in outcomes {
        let name = outcome.feed.name.clone();
        let earlier = previous_status.get(name.as_str());
        let mut status = FeedStatus {
            name: name.clone(),
            kind: Some(outcome.feed.kind),
            last_attempt: Some(now_text.clone()),
            last_success: earlier.and_then(|s| s.last_success.clone()),
            duration_ms: outcome.duration_ms,
            ..FeedStatus::default()
        };
        let last_good: Vec<&PriceQuote> = previous_rows
            .iter()
            .copied()
            .filter(|q| q.feed.as_deref() == Some(name.as_str()))
            .collect();
        let mut kept = Vec::new();
        let error = match outcome.result {
            Err(error) => Some(error),
            Ok(parsed) => {
                for text in &parsed.rejected {
                    *status.rows_rejected.entry(reason_of(text)).or_default() += 1;
                }
                let feed = &outcome.feed;
                let wanted = |q: &PriceQuote| {
                    (feed.gpus.is_empty() || feed.gpus.contains(&q.gpu))
                        && (feed.regions.is_empty()
                            || feed.regions.iter().any(|r| q.serves_region(r)))
                };
                for quote in parsed.quotes.into_iter().filter(wanted) {
                    let gpu = catalog.gpu(&quote.gpu);
                    let reason = quote.problem(|g| catalog.gpu(g).is_some()).or_else(|| {
                        let (low, high) = bounds(gpu?.class);
                        let usd =
                            fx.convert(quote.price_per_gpu_hour, quote.currency, Currency::Usd);
                        (!(low..=high).contains(&usd))
                            .then(|| format!("outside {low}–{high} USD per GPU-hour"))
                    });
                    if let Some(reason) = reason {
                        *status.rows_rejected.entry(reason).or_default() += 1;
                        continue;
                    }
                    match previous_by_key.get(&key(&quote)) {
                        Some(before)
                            if !(1.0 / QUARANTINE_FACTOR..=QUARANTINE_FACTOR).contains(
                                &(quote.price_per_gpu_hour / before.price_per_gpu_hour),
                            ) =>
                        {
                            status.quarantined.push(format!(
                                "{} {} {} {}: {} → {} per GPU-hour",
                                quote.provider,
                                quote.region,
                                quote.sku,
                                quote.price_type.name(),
                                before.price_per_gpu_hour,
                                quote.price_per_gpu_hour
                            ));
                            kept.push(stale(before));
                        }
                        _ => kept.push(quote),
                    }
                }
                if kept.is_empty() {
                    Some("no valid row in the response".to_string())
                } else {
                    status.last_success = Some(now_text.clone());
                    None
                }
            }
        };
        if let Some(error) = error {
            status.last_error = Some(error);
            kept = last_good.iter().map(|q| stale(q)).collect();
            status.stale = !kept.is_empty();
        }
        status.rows_stale = kept.iter().filter(|q| q.stale).count() as u64;
        status.rows_kept = kept.len() as u64;
        rows.extend(kept);
        statuses.push(status);
    }
    // The embedded snapshot still serves every provider no feed delivered.
    let (snapshot, _) = read_csv(SNAPSHOT_CSV);
    let fed: Vec<String> = rows.iter().map(|q| q.provider.clone()).collect();
    rows.extend(snapshot.into_iter().filter(|q| {
        !fed.contains(&q.provider) && q.problem(|g| catalog.gpu(g).is_some()).is_none()
    }));
    StoredSnapshot {
        id,
        created_at: now_text,
        rows,
        feeds: statuses,
    }
}

/// Why a refresh did not run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RefreshError {
    #[error("a refresh is already running")]
    Busy,
    #[error("price store: {0}")]
    Store(String),
    #[error("stopped: the process is shutting down; nothing was published")]
    Stopped,
}

/// What a refresh did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RefreshReport {
    pub snapshot_id: String,
    pub rows: usize,
    /// Whether the snapshot went to Redis (false without Redis: this replica only).
    pub stored: bool,
    pub feeds: Vec<FeedStatus>,
}

impl RefreshReport {
    /// True when feeds ran and none succeeded (`trainplan scrape` exits non-zero).
    pub fn all_failed(&self) -> bool {
        !self.feeds.is_empty() && self.feeds.iter().all(|f| f.last_error.is_some())
    }
}

/// Runs refreshes for one replica: its feeds, fetcher, store and book.
pub struct Refresher {
    pub feeds: Vec<FeedConfig>,
    pub store: Option<Store>,
    fetcher: Fetcher,
    catalog: Arc<Catalog>,
    book: SharedBook,
    fx: Fx,
    running: tokio::sync::Mutex<()>,
    /// The token of the Redis lock while this replica holds it (for release on shutdown).
    held: std::sync::Mutex<Option<String>>,
    /// Set once by [`Refresher::stop`]; feeds still fetching give up at once.
    stopping: tokio::sync::watch::Sender<bool>,
}

/// How long the refresh lock lives unless renewed.
const LOCK_TTL: Duration = Duration::from_secs(30);

impl Refresher {
    pub fn new(
        feeds: Vec<FeedConfig>,
        store: Option<Store>,
        catalog: Arc<Catalog>,
        book: SharedBook,
        fx: Fx,
    ) -> Self {
        Self {
            feeds,
            store,
            fetcher: Fetcher::new(),
            catalog,
            book,
            fx,
            running: tokio::sync::Mutex::new(()),
            held: std::sync::Mutex::new(None),
            stopping: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Stops this replica's refreshing for good (SIGTERM): a refresh in progress abandons
    /// the feeds still fetching, publishes nothing (not even the feeds that had finished:
    /// half a refresh would mark the others as failed) and gives its lock back; no refresh
    /// starts after this.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once [`Refresher::stop`] has been called.
    async fn stopped(&self) {
        let mut watch = self.stopping.subscribe();
        // The sender lives as long as `self`, so `wait_for` ends only by the flag.
        let _ = watch.wait_for(|stopping| *stopping).await;
    }

    /// Runs every enabled feed and publishes the result. One refresh at a time per
    /// replica, and with Redis one across replicas (`Busy` otherwise).
    pub async fn refresh(&self) -> Result<RefreshReport, RefreshError> {
        if self.is_stopping() {
            return Err(RefreshError::Stopped);
        }
        let _local = self.running.try_lock().map_err(|_| RefreshError::Busy)?;
        let token = uuid::Uuid::new_v4().to_string();
        let renewal = match &self.store {
            Some(store) => {
                if !store
                    .try_lock(&token, LOCK_TTL)
                    .await
                    .map_err(RefreshError::Store)?
                {
                    return Err(RefreshError::Busy);
                }
                self.hold(Some(token.clone()));
                let (store, token) = (store.clone(), token.clone());
                Some(tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(LOCK_TTL / 3).await;
                        if !matches!(store.renew(&token, LOCK_TTL).await, Ok(true)) {
                            break;
                        }
                    }
                }))
            }
            None => None,
        };
        let result = self.refresh_locked().await;
        if let Some(task) = renewal {
            task.abort();
        }
        self.release().await;
        result
    }

    fn hold(&self, token: Option<String>) {
        if let Ok(mut held) = self.held.lock() {
            *held = token;
        }
    }

    /// Releases the Redis lock if this replica holds it: after a refresh, and on shutdown
    /// when one was cut short (otherwise it would block the others until it expires).
    pub async fn release(&self) {
        let token = self.held.lock().ok().and_then(|mut held| held.take());
        if let (Some(store), Some(token)) = (&self.store, token)
            && let Err(error) = store.unlock(&token).await
        {
            tracing::warn!(%error, "could not release the refresh lock (it expires by itself)");
        }
    }

    async fn refresh_locked(&self) -> Result<RefreshReport, RefreshError> {
        let previous = match &self.store {
            Some(store) => store.load_current().await.map_err(RefreshError::Store)?,
            None => {
                let book = self.book.load();
                Some(StoredSnapshot {
                    id: book.source().snapshot_id.clone().unwrap_or_default(),
                    created_at: book.source().loaded_at.clone(),
                    rows: book.quotes().to_vec(),
                    feeds: book.feeds().to_vec(),
                })
            }
        };
        let now = jiff::Timestamp::now();
        let today = now.strftime("%Y-%m-%d").to_string();
        let runs = self.feeds.iter().filter(|f| f.enabled).map(|feed| {
            let stamp = Stamp {
                feed: feed.name.clone(),
                source: feed
                    .source
                    .clone()
                    .unwrap_or_else(|| format!("live feed {} ({})", feed.name, feed.url)),
                as_of: today.clone(),
                fetched_at: now.to_string(),
            };
            async move {
                let started = Instant::now();
                let result = tokio::select! {
                    result = self.fetcher.run(feed, &stamp) => result.map_err(|e| e.to_string()),
                    () = self.stopped() => Err("stopped by shutdown".to_string()),
                };
                Outcome {
                    feed: feed.clone(),
                    result,
                    duration_ms: started.elapsed().as_millis() as u64,
                }
            }
        });
        let outcomes = futures_util::future::join_all(runs).await;
        if self.is_stopping() {
            return Err(RefreshError::Stopped);
        }
        let id = format!(
            "{}-{}",
            now.as_second(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let snapshot = compose(
            id,
            previous.as_ref(),
            outcomes,
            &self.catalog,
            &self.fx,
            now,
        );
        let stored = match &self.store {
            Some(store) => {
                store
                    .publish(&snapshot, previous.as_ref().map(|p| p.id.as_str()))
                    .await
                    .map_err(RefreshError::Store)?;
                true
            }
            None => false,
        };
        self.book.store(Arc::new(snapshot.book(now)));
        for feed in &snapshot.feeds {
            match &feed.last_error {
                Some(error) => {
                    tracing::warn!(feed = %feed.name, %error, stale = feed.rows_stale, "feed failed")
                }
                None => tracing::info!(feed = %feed.name, rows = feed.rows_kept, "feed refreshed"),
            }
        }
        Ok(RefreshReport {
            snapshot_id: snapshot.id.clone(),
            rows: snapshot.rows.len(),
            stored,
            feeds: snapshot.feeds,
        })
    }
}
