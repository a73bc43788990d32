//! Price data (design §4): the rows, the in-memory book, and (with Redis) the live
//! refresh that replaces it.

pub mod book;
pub mod feeds;
pub mod fetch;
pub mod live;
pub mod quote;
pub mod refresh;
pub mod store;

pub use book::{BookKind, BookSource, PriceBook, PriceFilter, SharedBook};
pub use quote::{Currency, Fx, PriceQuote, PriceType};

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::catalog::Catalog;

/// The prices a replica serves from, the rate that converts them, and the machinery
/// that refreshes them.
pub struct Pricing {
    pub book: SharedBook,
    pub fx: Fx,
    pub refresher: Arc<refresh::Refresher>,
    pub health: live::SharedHealth,
    pub admin_token: Option<String>,
}

impl Pricing {
    /// The embedded snapshot, validated against the catalog, with these feeds and store;
    /// rows it could not use are returned so the caller can log them (the snapshot test
    /// requires none).
    pub fn new(
        catalog: &Arc<Catalog>,
        fx: Fx,
        feeds: Vec<refresh::FeedConfig>,
        store: Option<store::Store>,
        admin_token: Option<String>,
    ) -> (Self, Vec<String>) {
        let now = jiff::Timestamp::now();
        let (book, rejected) = PriceBook::embedded(|gpu| catalog.gpu(gpu).is_some(), now);
        let book: SharedBook = Arc::new(ArcSwap::from_pointee(book));
        let refresher =
            refresh::Refresher::new(feeds, store, catalog.clone(), book.clone(), fx.clone());
        (
            Self {
                book,
                fx,
                refresher: Arc::new(refresher),
                health: Arc::new(ArcSwap::from_pointee(live::StoreHealth::not_configured())),
                admin_token,
            },
            rejected,
        )
    }

    /// The embedded snapshot alone: no feeds, no store, no admin token.
    pub fn embedded(catalog: &Arc<Catalog>, fx: Fx) -> (Self, Vec<String>) {
        Self::new(catalog, fx, Vec::new(), None, None)
    }
}

/// One row of `GET /v1/prices`: the quote as stored, its age, and the converted prices
/// when another currency was asked for.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct PriceRow {
    #[serde(flatten)]
    pub quote: PriceQuote,
    /// Hours since `as_of` (absent for undated rows).
    pub age_hours: Option<f64>,
    /// The prices in the requested currency (absent when none was asked for).
    pub converted: Option<Converted>,
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Converted {
    pub currency: Currency,
    pub price_per_instance_hour: f64,
    pub price_per_gpu_hour: f64,
}

/// The answer of `GET /v1/prices`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct PriceList {
    pub count: usize,
    pub prices: Vec<PriceRow>,
    pub prices_source: BookSource,
    pub fx: Fx,
    pub warnings: Vec<String>,
}

/// The rows of `book` that match `filter`, aged at `now`, converted to `currency`.
pub fn price_list(
    book: &PriceBook,
    filter: &PriceFilter,
    currency: Option<Currency>,
    fx: &Fx,
    now: jiff::Timestamp,
) -> PriceList {
    let prices: Vec<PriceRow> = book
        .filter(filter, now)
        .map(|quote| PriceRow {
            age_hours: quote.age_hours(now),
            converted: currency.map(|to| Converted {
                currency: to,
                price_per_instance_hour: fx.convert(quote.instance_price(), quote.currency, to),
                price_per_gpu_hour: fx.convert(quote.price_per_gpu_hour, quote.currency, to),
            }),
            quote: quote.clone(),
        })
        .collect();
    let mut warnings = Vec::new();
    if prices.is_empty() {
        warnings.push("no price row matches these filters".to_string());
    }
    if !filter.providers.is_empty() {
        for provider in &filter.providers {
            if !book
                .quotes()
                .iter()
                .any(|q| q.provider.eq_ignore_ascii_case(provider))
            {
                warnings.push(format!("the book has no provider {provider:?}"));
            }
        }
    }
    PriceList {
        count: prices.len(),
        prices,
        prices_source: book.source().clone(),
        fx: fx.clone(),
        warnings,
    }
}
