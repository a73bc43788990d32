//! Price feeds (design §4): one module per source, each a pure parser over the source's
//! real payload, normalising rows into [`PriceQuote`]s. Fetching lives in `fetch.rs`;
//! which feeds run is `pricing-feeds/feeds.toml`.

pub mod aws;
pub mod azure;
pub mod csv_sheet;
pub mod oci;
pub mod runpod;
pub mod skypilot;
pub mod vast;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::quote::{Currency, PriceQuote, PriceType};

/// The kinds of feed `feeds.toml` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeedKind {
    AzureRetail,
    Aws,
    SkypilotCatalog,
    Runpod,
    Vast,
    Oci,
    CsvUrl,
}

/// What one parse produced: rows, rows it could not use (with the reason), and for
/// paged sources the next page.
#[derive(Debug, Default)]
pub struct Parsed {
    pub quotes: Vec<PriceQuote>,
    pub rejected: Vec<String>,
    pub next_page: Option<String>,
}

impl Parsed {
    fn reject(&mut self, reason: impl Into<String>) {
        self.rejected.push(reason.into());
    }
}

/// A payload the parser cannot read at all (shape change, truncation): the whole fetch
/// fails and the feed keeps its last good rows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    fn json(error: serde_json::Error) -> Self {
        ParseError(format!("malformed JSON: {error}"))
    }
}

/// Provenance stamped on every row of a fetch.
#[derive(Debug, Clone)]
pub struct Stamp {
    pub feed: String,
    pub source: String,
    /// Date of the reading (`YYYY-MM-DD`).
    pub as_of: String,
    /// RFC 3339.
    pub fetched_at: String,
}

/// Fields of a row the parser fills; the rest comes from the stamp.
pub struct Row<'a> {
    pub provider: &'a str,
    pub region: &'a str,
    pub sku: &'a str,
    pub gpu: &'static str,
    pub gpu_count: u64,
    pub price_type: PriceType,
    pub price_per_instance_hour: f64,
    pub source_kind: &'a str,
    pub notes: Option<String>,
}

impl Stamp {
    /// A USD price row (every source here quotes USD; CSV sheets carry their own).
    pub fn quote(&self, row: Row) -> PriceQuote {
        PriceQuote {
            provider: row.provider.to_string(),
            region: row.region.to_string(),
            sku: row.sku.to_string(),
            gpu: row.gpu.to_string(),
            gpu_count: row.gpu_count,
            price_type: row.price_type,
            price_per_instance_hour: Some(row.price_per_instance_hour),
            price_per_gpu_hour: row.price_per_instance_hour / row.gpu_count.max(1) as f64,
            currency: Currency::Usd,
            as_of: Some(self.as_of.clone()),
            fetched_at: Some(self.fetched_at.clone()),
            source: self.source.clone(),
            source_kind: row.source_kind.to_string(),
            notes: row.notes,
            interruptions_per_hour: None,
            feed: Some(self.feed.clone()),
            stale: false,
        }
    }
}

/// Catalog id for a provider's GPU name, most specific pattern first, matching whole
/// words (`L4` is not `L40`, `RTX 4090D` is not an RTX 4090). `None` when unsure: an
/// unknown name is rejected, never guessed (feeds.md §7.11).
pub fn gpu_id(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let any = |list: &[&str]| list.iter().any(|w| has(w));
    let gb80 = any(&["80GB", "80G", "80"]);
    let pcie = any(&["PCIE", "PCI"]);
    let nvl = has("NVL");
    let id = if has("GB300") {
        "gb300-288gb"
    } else if has("GB200") {
        "gb200-186gb"
    } else if has("B200") {
        "b200-180gb"
    } else if has("H200") {
        if nvl { "h200-nvl-141gb" } else { "h200-141gb" }
    } else if has("H100") {
        match (nvl, pcie) {
            (true, _) => "h100-nvl-94gb",
            (_, true) => "h100-pcie-80gb",
            _ => "h100-80gb",
        }
    } else if has("H800") {
        "h800-80gb"
    } else if has("A100") {
        match (gb80, pcie) {
            (true, true) => "a100-pcie-80gb",
            (true, false) => "a100-80gb",
            (false, true) => "a100-pcie-40gb",
            (false, false) => "a100-40gb",
        }
    } else if has("A800") {
        match (gb80, pcie) {
            (_, true) => "a800-pcie-80gb",
            (true, false) => "a800-80gb",
            (false, false) => "a800-40gb",
        }
    } else if has("L40S") {
        "l40s-48gb"
    } else if has("L40") {
        "l40-48gb"
    } else if has("L4") {
        "l4-24gb"
    } else if has("A10G") {
        "a10g-24gb"
    } else if has("A10") {
        "a10-24gb"
    } else if has("T4") {
        "t4-16gb"
    } else if has("V100") {
        let gb32 = any(&["32GB", "32G", "32"]);
        match (gb32, pcie) {
            (true, true) => "v100-pcie-32gb",
            (true, false) => "v100-32gb",
            (false, true) => "v100-pcie-16gb",
            (false, false) => "v100-16gb",
        }
    } else if has("4090") {
        "rtx4090-24gb"
    } else if has("3090") {
        "rtx3090-24gb"
    } else if has("5090") {
        "rtx5090-32gb"
    } else if has("A6000") {
        "rtx-a6000-48gb"
    } else if has("6000") && has("ADA") {
        "rtx6000-ada-48gb"
    } else if has("MI300X") {
        "mi300x-192gb"
    } else if has("MI325X") {
        "mi325x-256gb"
    } else if has("MI250X") {
        "mi250x-128gb"
    } else if has("GAUDI2") || (has("GAUDI") && has("2")) {
        "gaudi2-96gb"
    } else if has("GAUDI3") || (has("GAUDI") && has("3")) {
        "gaudi3-128gb"
    } else {
        return None;
    };
    Some(id)
}

/// A price field that may be a number or a numeric string ("55.0400000000"); `None` for
/// anything else ("N/A*", empty).
pub fn number(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|p: &f64| p.is_finite())
}

/// Median of the values (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_names_map_to_catalog_ids_by_whole_words() {
        for (name, id) in [
            ("A100-80GB", Some("a100-80gb")),
            ("A100", Some("a100-40gb")),
            ("NVIDIA A100 80GB PCIe", Some("a100-pcie-80gb")),
            ("NVIDIA H100 80GB HBM3", Some("h100-80gb")),
            ("H100 NVL", Some("h100-nvl-94gb")),
            ("H100 PCIe", Some("h100-pcie-80gb")),
            ("L4", Some("l4-24gb")),
            ("L40S", Some("l40s-48gb")),
            ("L40", Some("l40-48gb")),
            ("RTX 4090", Some("rtx4090-24gb")),
            ("RTX 4090D", None),
            ("RTX A4000", None),
            ("Tesla V100-SXM2-32GB", Some("v100-32gb")),
            ("A10G", Some("a10g-24gb")),
            ("MI300X", Some("mi300x-192gb")),
            ("GH200", None),
        ] {
            assert_eq!(gpu_id(name), id, "{name}");
        }
    }
}
