//! The in-memory price book every request reads (design §4): immutable once built,
//! indexed by GPU, swapped whole through an `ArcSwap` when a refresh lands.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::quote::{PriceQuote, PriceType, read_csv};
use super::refresh::FeedStatus;

/// The embedded default prices (`pricing-feeds/snapshot.csv`).
pub const SNAPSHOT_CSV: &str = include_str!("../../pricing-feeds/snapshot.csv");

/// Where the book's rows came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BookKind {
    /// The snapshot compiled into the binary.
    EmbeddedSnapshot,
    /// A refresh of the live feeds.
    Live,
}

/// The book's provenance, stated in every cost answer (`prices_source`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BookSource {
    pub kind: BookKind,
    /// Id of the stored snapshot (live books only).
    pub snapshot_id: Option<String>,
    /// When this replica loaded the book (RFC 3339).
    pub loaded_at: String,
    /// When the refresh that made the snapshot ran (live books only).
    pub refreshed_at: Option<String>,
    pub rows: usize,
    /// Oldest and newest reading in the book.
    pub oldest_as_of: Option<String>,
    pub newest_as_of: Option<String>,
}

/// Which rows a caller wants; every filter is optional.
#[derive(Debug, Clone, Default)]
pub struct PriceFilter {
    pub gpu: Option<String>,
    /// Empty: every provider.
    pub providers: Vec<String>,
    pub regions: Vec<String>,
    /// Empty: every price type.
    pub price_types: Vec<PriceType>,
    pub max_age_hours: Option<f64>,
}

/// An immutable set of price rows with a GPU index.
#[derive(Debug)]
pub struct PriceBook {
    quotes: Vec<PriceQuote>,
    by_gpu: HashMap<String, Vec<usize>>,
    source: BookSource,
    feeds: Vec<FeedStatus>,
}

impl PriceBook {
    pub fn new(
        quotes: Vec<PriceQuote>,
        kind: BookKind,
        snapshot_id: Option<String>,
        loaded_at: jiff::Timestamp,
    ) -> Self {
        let mut by_gpu: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, q) in quotes.iter().enumerate() {
            by_gpu.entry(q.gpu.clone()).or_default().push(i);
        }
        let dated = || quotes.iter().filter_map(|q| q.as_of_date().map(|d| (d, q)));
        let oldest_as_of = dated()
            .min_by_key(|(d, _)| *d)
            .and_then(|(_, q)| q.as_of.clone());
        let newest_as_of = dated()
            .max_by_key(|(d, _)| *d)
            .and_then(|(_, q)| q.as_of.clone());
        let source = BookSource {
            kind,
            snapshot_id,
            loaded_at: loaded_at.to_string(),
            refreshed_at: None,
            rows: quotes.len(),
            oldest_as_of,
            newest_as_of,
        };
        Self {
            quotes,
            by_gpu,
            source,
            feeds: Vec::new(),
        }
    }

    /// The feed statuses of the refresh that made this book, and when it ran.
    pub fn with_feeds(mut self, feeds: Vec<FeedStatus>, refreshed_at: Option<String>) -> Self {
        self.feeds = feeds;
        self.source.refreshed_at = refreshed_at;
        self
    }

    pub fn feeds(&self) -> &[FeedStatus] {
        &self.feeds
    }

    /// The embedded snapshot, validated against the GPU catalog. Rows that fail are
    /// returned with their reasons (the snapshot test requires there be none).
    pub fn embedded(known_gpu: impl Fn(&str) -> bool, now: jiff::Timestamp) -> (Self, Vec<String>) {
        let (quotes, mut rejected) = read_csv(SNAPSHOT_CSV);
        let mut kept = Vec::with_capacity(quotes.len());
        for quote in quotes {
            match quote.problem(&known_gpu) {
                None => kept.push(quote),
                Some(reason) => rejected.push(format!(
                    "{} {} {}: {reason}",
                    quote.provider, quote.sku, quote.region
                )),
            }
        }
        (
            Self::new(kept, BookKind::EmbeddedSnapshot, None, now),
            rejected,
        )
    }

    pub fn source(&self) -> &BookSource {
        &self.source
    }

    pub fn quotes(&self) -> &[PriceQuote] {
        &self.quotes
    }

    /// Rows matching the filter, in book order.
    pub fn filter<'a: 'f, 'f>(
        &'a self,
        filter: &'f PriceFilter,
        now: jiff::Timestamp,
    ) -> impl Iterator<Item = &'a PriceQuote> + 'f {
        let candidates: Box<dyn Iterator<Item = &PriceQuote>> = match &filter.gpu {
            Some(gpu) => Box::new(
                self.by_gpu
                    .get(gpu)
                    .into_iter()
                    .flatten()
                    .map(|&i| &self.quotes[i]),
            ),
            None => Box::new(self.quotes.iter()),
        };
        candidates.filter(move |q| {
            (filter.providers.is_empty()
                || filter
                    .providers
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&q.provider)))
                && (filter.regions.is_empty() || filter.regions.iter().any(|r| q.serves_region(r)))
                && (filter.price_types.is_empty() || filter.price_types.contains(&q.price_type))
                && filter
                    .max_age_hours
                    .is_none_or(|max| q.age_hours(now).is_some_and(|age| age <= max))
        })
    }
}

/// The book of this replica, swapped whole on refresh; readers never wait.
pub type SharedBook = Arc<ArcSwap<PriceBook>>;
