//! Vast.ai bundle search (feeds.md §5.3): a marketplace of single offers, priced as the
//! median of at least five offers per GPU and count — never the minimum.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ParseError, Parsed, Row, Stamp, gpu_id, median, number};
use crate::pricing::quote::PriceType;

/// Fewest offers a median is taken over (skypilot#4904; thin samples are not prices).
const MIN_OFFERS: usize = 5;

pub fn parse(bytes: &[u8], stamp: &Stamp) -> Result<Parsed, ParseError> {
    let data: Value = serde_json::from_slice(bytes).map_err(ParseError::json)?;
    if data.get("success") == Some(&Value::Bool(false)) {
        return Err(ParseError(format!(
            "error {}: {}",
            data["error"], data["msg"]
        )));
    }
    let offers = data["offers"]
        .as_array()
        .ok_or_else(|| ParseError("no offers: the response changed shape".into()))?;
    let mut parsed = Parsed::default();
    // (GPU, count, provider's name) → (prices, minimum bids).
    type Offers = (Vec<f64>, Vec<f64>);
    let mut groups: BTreeMap<(&'static str, u64, String), Offers> = BTreeMap::new();
    for offer in offers {
        let name = offer["gpu_name"].as_str().unwrap_or_default();
        let Some(gpu) = gpu_id(name) else {
            parsed.reject(format!("offer {}: unknown GPU {name:?}", offer["id"]));
            continue;
        };
        let count = offer["num_gpus"].as_u64().unwrap_or(0);
        match number(&offer["dph_total"]) {
            Some(price) if price > 0.0 && count > 0 => {
                let group = groups.entry((gpu, count, name.to_string())).or_default();
                group.0.push(price);
                if let Some(bid) = number(&offer["min_bid"]).filter(|b| *b > 0.0) {
                    group.1.push(bid);
                }
            }
            _ => parsed.reject(format!("offer {}: zero price or GPU count", offer["id"])),
        }
    }
    for ((gpu, count, name), (mut prices, mut bids)) in groups {
        if prices.len() < MIN_OFFERS {
            parsed.reject(format!(
                "{count}x {name}: only {} offer(s), too few for a median",
                prices.len()
            ));
            continue;
        }
        let offers = prices.len();
        let sku = format!("{count}x {name}");
        for (price_type, value, kind) in [
            (PriceType::OnDemand, median(&mut prices), "T"),
            (PriceType::Spot, median(&mut bids), "S"),
        ] {
            if let Some(price) = value {
                parsed.quotes.push(stamp.quote(Row {
                    provider: "vast",
                    region: "global",
                    sku: &sku,
                    gpu,
                    gpu_count: count,
                    price_type,
                    price_per_instance_hour: price,
                    source_kind: kind,
                    notes: Some(format!("median of {offers} offers")),
                }));
            }
        }
    }
    Ok(parsed)
}
