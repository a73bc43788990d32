//! One price row (design §4 `PriceQuote`) and the snapshot file format it is read from.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a price is charged.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PriceType {
    OnDemand,
    Spot,
    /// A one-year commitment.
    #[serde(rename = "reserved_1y")]
    Reserved1y,
    /// A three-year commitment.
    #[serde(rename = "reserved_3y")]
    Reserved3y,
}

impl PriceType {
    pub const ALL: [PriceType; 4] = [
        PriceType::OnDemand,
        PriceType::Spot,
        PriceType::Reserved1y,
        PriceType::Reserved3y,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PriceType::OnDemand => "on_demand",
            PriceType::Spot => "spot",
            PriceType::Reserved1y => "reserved_1y",
            PriceType::Reserved3y => "reserved_3y",
        }
    }
}

/// Currencies the service quotes in. Rows stay in their native currency until an answer
/// converts them at the configured, dated rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum Currency {
    #[serde(rename = "USD")]
    Usd,
    #[serde(rename = "CNY")]
    Cny,
}

impl Currency {
    pub fn code(self) -> &'static str {
        match self {
            Currency::Usd => "USD",
            Currency::Cny => "CNY",
        }
    }
}

/// The dated exchange rate between the two currencies (from config).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Fx {
    /// Yuan per US dollar.
    #[schema(example = 7.2)]
    pub cny_per_usd: f64,
    #[schema(example = "2026-09")]
    pub as_of: String,
    pub source: String,
}

impl Fx {
    /// `amount` in `from`, expressed in `to`.
    pub fn convert(&self, amount: f64, from: Currency, to: Currency) -> f64 {
        match (from, to) {
            (Currency::Usd, Currency::Cny) => amount * self.cny_per_usd,
            (Currency::Cny, Currency::Usd) => amount / self.cny_per_usd,
            _ => amount,
        }
    }
}

/// One price: a provider's SKU in a region at a price type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PriceQuote {
    #[schema(example = "aws")]
    pub provider: String,
    /// A provider region; `global` for one price everywhere; `a;b;c` for a median over
    /// availability zones in those regions.
    #[schema(example = "us-east-1")]
    pub region: String,
    /// Instance type or product name.
    #[schema(example = "p4d.24xlarge")]
    pub sku: String,
    /// Catalog GPU id.
    #[schema(example = "a100-40gb")]
    pub gpu: String,
    /// GPUs in one instance: a job rents whole instances.
    #[schema(example = 8)]
    pub gpu_count: u64,
    pub price_type: PriceType,
    /// Whole instance per hour, in `currency` (absent where only a per-GPU price exists).
    pub price_per_instance_hour: Option<f64>,
    pub price_per_gpu_hour: f64,
    pub currency: Currency,
    /// Date of the reading (`YYYY-MM-DD` or `YYYY-MM`); absent when the source is undated.
    #[schema(example = "2026-09-10")]
    pub as_of: Option<String>,
    /// When a live feed fetched it (RFC 3339); absent for snapshot rows.
    #[serde(default)]
    pub fetched_at: Option<String>,
    pub source: String,
    /// L list price, D provider page via a third party, T tracker, S spot reading,
    /// E estimate, Q an organisation's own quote.
    #[schema(example = "L")]
    pub source_kind: String,
    #[serde(default)]
    pub notes: Option<String>,
    /// Spot interruptions per instance-hour, where the source publishes a risk (AWS Spot
    /// Advisor); the cost model prefers it to its planning default.
    #[serde(default)]
    pub interruptions_per_hour: Option<f64>,
    /// The live feed the row came from (absent for snapshot rows and custom quotes).
    #[serde(default)]
    pub feed: Option<String>,
    /// True when the row is a feed's last good value, kept because the latest fetch
    /// failed or moved the price implausibly.
    #[serde(default)]
    pub stale: bool,
}

impl PriceQuote {
    /// The whole instance's hourly price (per-GPU × count where only that is quoted).
    pub fn instance_price(&self) -> f64 {
        self.price_per_instance_hour
            .unwrap_or(self.price_per_gpu_hour * self.gpu_count as f64)
    }

    /// The reading's date, midnight UTC (`YYYY-MM` reads as the first of the month).
    pub fn as_of_date(&self) -> Option<jiff::civil::Date> {
        let text = self.as_of.as_deref()?;
        // Every estimate dates every row it prices: a month is read as such rather than
        // first failing as a full date (a parse error allocates its message).
        match text.split_once('-') {
            Some((year, month))
                if year.len() == 4
                    && month.len() == 2
                    && text.bytes().filter(|b| b.is_ascii_digit()).count() == 6 =>
            {
                jiff::civil::Date::new(year.parse().ok()?, month.parse().ok()?, 1).ok()
            }
            _ => text.parse().ok(),
        }
    }

    /// Hours between the reading and `now`; `None` for undated rows.
    pub fn age_hours(&self, now: jiff::Timestamp) -> Option<f64> {
        let date = self.as_of_date()?;
        let then = date.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
        Some((now.as_second() - then.as_second()) as f64 / 3600.0)
    }

    /// Whether a region filter matches: `global` rows match every region, lists match
    /// any of their regions.
    pub fn serves_region(&self, region: &str) -> bool {
        self.region == "global"
            || self
                .region
                .split(';')
                .any(|r| r.eq_ignore_ascii_case(region))
    }

    /// Why the row cannot be served, if it cannot.
    pub fn problem(&self, known_gpu: impl Fn(&str) -> bool) -> Option<String> {
        let valid_price = |p: f64| p.is_finite() && p > 0.0;
        if !known_gpu(&self.gpu) {
            Some(format!("unknown GPU {:?}", self.gpu))
        } else if self.gpu_count == 0 {
            Some("gpu_count is 0".into())
        } else if !valid_price(self.price_per_gpu_hour)
            || self
                .price_per_instance_hour
                .is_some_and(|p| !valid_price(p))
        {
            Some("price is zero, negative or not a number".into())
        } else if self.as_of.is_some() && self.as_of_date().is_none() {
            Some(format!("as_of {:?} is not a date", self.as_of))
        } else {
            None
        }
    }
}

/// Reads price rows in the snapshot's column format (the embedded snapshot and an
/// organisation's own sheet). Rows that do not parse are returned with their reason.
pub fn read_csv(text: &str) -> (Vec<PriceQuote>, Vec<String>) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut quotes = Vec::new();
    let mut rejected = Vec::new();
    for (line, row) in reader.deserialize::<PriceQuote>().enumerate() {
        match row {
            Ok(quote) => quotes.push(quote),
            Err(error) => rejected.push(format!("row {}: {error}", line + 2)),
        }
    }
    (quotes, rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dated(as_of: &str) -> Option<jiff::civil::Date> {
        let quote = PriceQuote {
            provider: "p".into(),
            region: "global".into(),
            sku: "s".into(),
            gpu: "a100-80gb".into(),
            gpu_count: 1,
            price_type: PriceType::OnDemand,
            price_per_instance_hour: None,
            price_per_gpu_hour: 1.0,
            currency: Currency::Usd,
            as_of: Some(as_of.into()),
            fetched_at: None,
            source: "test".into(),
            source_kind: "Q".into(),
            notes: None,
            interruptions_per_hour: None,
            feed: None,
            stale: false,
        };
        quote.as_of_date()
    }

    #[test]
    fn dates_read_days_and_months() {
        assert_eq!(dated("2026-09-10"), Some(jiff::civil::date(2026, 9, 10)));
        assert_eq!(dated("2024-01"), Some(jiff::civil::date(2024, 1, 1)));
        for bad in [
            "2024-13",
            "2024-1",
            "2024-+1",
            "20x4-01",
            "2024-02-30",
            "soon",
            "",
        ] {
            assert_eq!(dated(bad), None, "{bad}");
        }
    }
}
