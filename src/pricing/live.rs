//! A serving replica's link to the store: it swaps in every new snapshot, on the
//! pub/sub message and on a periodic poll (pub/sub loses messages across reconnects),
//! and runs scheduled refreshes. No request ever waits on any of this.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use serde::Serialize;
use utoipa::ToSchema;

use super::book::SharedBook;
use super::refresh::{RefreshError, Refresher};
use super::store::Store;

/// The replica's view of Redis, for `/readyz`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StoreHealth {
    /// `not_configured`, `connected` or `unavailable`.
    pub state: &'static str,
    pub error: Option<String>,
    /// RFC 3339.
    pub checked_at: Option<String>,
}

impl StoreHealth {
    pub fn not_configured() -> Self {
        Self {
            state: "not_configured",
            error: None,
            checked_at: None,
        }
    }
}

pub type SharedHealth = Arc<ArcSwap<StoreHealth>>;

fn record(health: &SharedHealth, result: &Result<(), String>) {
    health.store(Arc::new(StoreHealth {
        state: if result.is_ok() {
            "connected"
        } else {
            "unavailable"
        },
        error: result.as_ref().err().cloned(),
        checked_at: Some(jiff::Timestamp::now().to_string()),
    }));
}

/// Loads the snapshot `id` into the book unless the book already has it.
async fn swap_to(store: &Store, book: &SharedBook, id: &str) -> Result<(), String> {
    if book.load().source().snapshot_id.as_deref() == Some(id) {
        return Ok(());
    }
    if let Some(snapshot) = store.load(id).await? {
        book.store(Arc::new(snapshot.book(jiff::Timestamp::now())));
        tracing::info!(snapshot = %id, rows = snapshot.rows.len(), "price book swapped");
    }
    Ok(())
}

/// Checks `current` once and swaps if it moved.
pub async fn poll_once(store: &Store, book: &SharedBook, health: &SharedHealth) {
    let result = match store.current_id().await {
        Ok(Some(id)) => swap_to(store, book, &id).await,
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    };
    if let Err(error) = &result {
        tracing::warn!(%error, "price store unavailable; serving the book in memory");
    }
    record(health, &result);
}

/// Starts the subscriber, the poller and (when feeds are enabled) the refresh schedule
/// on the current runtime.
pub fn spawn(
    store: Store,
    book: SharedBook,
    health: SharedHealth,
    poll_interval: Duration,
    refresher: Arc<Refresher>,
) {
    let (s, b, h) = (store.clone(), book.clone(), health.clone());
    tokio::spawn(async move {
        loop {
            poll_once(&s, &b, &h).await;
            tokio::time::sleep(poll_interval).await;
        }
    });
    let (s, b) = (store.clone(), book.clone());
    tokio::spawn(async move {
        loop {
            match subscribe(&s).await {
                Ok(mut pubsub) => {
                    if pubsub.subscribe(s.channel()).await.is_ok() {
                        let mut messages = pubsub.on_message();
                        while let Some(message) = messages.next().await {
                            if let Ok(id) = message.get_payload::<String>()
                                && let Err(error) = swap_to(&s, &b, &id).await
                            {
                                tracing::warn!(%error, "could not load the announced snapshot");
                            }
                        }
                    }
                }
                Err(error) => tracing::debug!(%error, "price updates channel unavailable"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let interval = refresher
        .feeds
        .iter()
        .filter(|f| f.enabled)
        .map(|f| f.interval_seconds)
        .min();
    if let Some(seconds) = interval {
        tokio::spawn(async move {
            loop {
                match refresher.refresh().await {
                    Ok(report) => {
                        tracing::info!(snapshot = %report.snapshot_id, rows = report.rows, "scheduled refresh")
                    }
                    Err(RefreshError::Busy) => tracing::debug!("another replica is refreshing"),
                    Err(RefreshError::Stopped) => break,
                    Err(error) => tracing::warn!(%error, "scheduled refresh failed"),
                }
                tokio::time::sleep(Duration::from_secs(seconds.max(1))).await;
            }
        });
    }
}

/// A pub/sub connection to the server that carries the updates channel.
async fn subscribe(store: &Store) -> Result<redis::aio::PubSub, String> {
    let client = store.channel_client().await?;
    client.get_async_pubsub().await.map_err(|e| e.to_string())
}
