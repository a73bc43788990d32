//! AWS: on-demand prices from the pricing-page JSON, spot from `spot.json`, and the Spot
//! Instance Advisor's interruption buckets (feeds.md §3.2–3.3).

use std::collections::HashMap;

use serde_json::Value;

use super::{ParseError, Parsed, Row, Stamp, number};
use crate::pricing::quote::PriceType;

/// GPU instance types: the price list names no GPU model, so types map to GPUs and
/// counts here (feeds.md §3.1 family table; counts from the EC2 instance-type pages).
const TYPES: &[(&str, &str, u64)] = &[
    ("p4d.24xlarge", "a100-40gb", 8),
    ("p4de.24xlarge", "a100-80gb", 8),
    ("p5.48xlarge", "h100-80gb", 8),
    ("p5.4xlarge", "h100-80gb", 1),
    ("p5e.48xlarge", "h200-141gb", 8),
    ("p5en.48xlarge", "h200-141gb", 8),
    ("p6-b200.48xlarge", "b200-180gb", 8),
    ("p3.2xlarge", "v100-16gb", 1),
    ("p3.8xlarge", "v100-16gb", 4),
    ("p3.16xlarge", "v100-16gb", 8),
    ("p3dn.24xlarge", "v100-32gb", 8),
    ("g4dn.xlarge", "t4-16gb", 1),
    ("g4dn.2xlarge", "t4-16gb", 1),
    ("g4dn.4xlarge", "t4-16gb", 1),
    ("g4dn.8xlarge", "t4-16gb", 1),
    ("g4dn.16xlarge", "t4-16gb", 1),
    ("g4dn.12xlarge", "t4-16gb", 4),
    ("g4dn.metal", "t4-16gb", 8),
    ("g5.xlarge", "a10g-24gb", 1),
    ("g5.2xlarge", "a10g-24gb", 1),
    ("g5.4xlarge", "a10g-24gb", 1),
    ("g5.8xlarge", "a10g-24gb", 1),
    ("g5.16xlarge", "a10g-24gb", 1),
    ("g5.12xlarge", "a10g-24gb", 4),
    ("g5.24xlarge", "a10g-24gb", 4),
    ("g5.48xlarge", "a10g-24gb", 8),
    ("g6.xlarge", "l4-24gb", 1),
    ("g6.2xlarge", "l4-24gb", 1),
    ("g6.4xlarge", "l4-24gb", 1),
    ("g6.8xlarge", "l4-24gb", 1),
    ("g6.16xlarge", "l4-24gb", 1),
    ("g6.12xlarge", "l4-24gb", 4),
    ("g6.24xlarge", "l4-24gb", 4),
    ("g6.48xlarge", "l4-24gb", 8),
    ("g6e.xlarge", "l40s-48gb", 1),
    ("g6e.2xlarge", "l40s-48gb", 1),
    ("g6e.4xlarge", "l40s-48gb", 1),
    ("g6e.8xlarge", "l40s-48gb", 1),
    ("g6e.16xlarge", "l40s-48gb", 1),
    ("g6e.12xlarge", "l40s-48gb", 4),
    ("g6e.24xlarge", "l40s-48gb", 4),
    ("g6e.48xlarge", "l40s-48gb", 8),
];

fn gpu_of(instance_type: &str) -> Option<(&'static str, u64)> {
    TYPES
        .iter()
        .find(|(t, _, _)| *t == instance_type)
        .map(|&(_, gpu, count)| (gpu, count))
}

/// On-demand Linux prices of one region from the pricing-page JSON. A missing
/// `manifest` or `regions` is a shape change: the fetch fails rather than guessing.
pub fn parse_on_demand(bytes: &[u8], region: &str, stamp: &Stamp) -> Result<Parsed, ParseError> {
    let page: Value = serde_json::from_slice(bytes).map_err(ParseError::json)?;
    if page.get("manifest").is_none() {
        return Err(ParseError(
            "no manifest: the pricing page changed shape".into(),
        ));
    }
    let regions = page
        .get("regions")
        .and_then(Value::as_object)
        .ok_or_else(|| ParseError("no regions: the pricing page changed shape".into()))?;
    let mut parsed = Parsed::default();
    for rows in regions.values().filter_map(Value::as_object) {
        for row in rows.values() {
            let instance_type = row["Instance Type"].as_str().unwrap_or_default();
            if row["Operating System"].as_str() != Some("Linux") {
                continue;
            }
            let Some((gpu, count)) = gpu_of(instance_type) else {
                parsed.reject(format!("{instance_type}: not a mapped GPU type"));
                continue;
            };
            match number(&row["price"]) {
                Some(price) if price > 0.0 => parsed.quotes.push(stamp.quote(Row {
                    provider: "aws",
                    region,
                    sku: instance_type,
                    gpu,
                    gpu_count: count,
                    price_type: PriceType::OnDemand,
                    price_per_instance_hour: price,
                    source_kind: "L",
                    notes: None,
                })),
                _ => parsed.reject(format!("{instance_type}: zero or missing price")),
            }
        }
    }
    Ok(parsed)
}

/// Interruption rate per instance-hour and bucket label, by `(region, instance type)`.
pub type SpotRisks = HashMap<(String, String), (f64, String)>;

/// Interruption rate per instance-hour of each `(region, instance type)`, from the Spot
/// Advisor's buckets: the bucket's upper monthly share of reclaimed instances spread
/// over a 730-hour month (AWS: "the rate at which Spot has reclaimed capacity during the
/// trailing month"), with the bucket's label.
pub fn parse_advisor(bytes: &[u8]) -> Result<SpotRisks, ParseError> {
    let data: Value = serde_json::from_slice(bytes).map_err(ParseError::json)?;
    let ranges: HashMap<u64, (f64, String)> = data["ranges"]
        .as_array()
        .ok_or_else(|| ParseError("no ranges: the advisor data changed shape".into()))?
        .iter()
        .filter_map(|r| {
            Some((
                r["index"].as_u64()?,
                (r["max"].as_f64()?, r["label"].as_str()?.to_string()),
            ))
        })
        .collect();
    let mut risks = HashMap::new();
    for (region, systems) in data["spot_advisor"].as_object().into_iter().flatten() {
        for (instance_type, entry) in systems["Linux"].as_object().into_iter().flatten() {
            if let Some((max, label)) = entry["r"].as_u64().and_then(|r| ranges.get(&r)) {
                risks.insert(
                    (region.clone(), instance_type.clone()),
                    (max / 100.0 / 730.0, label.clone()),
                );
            }
        }
    }
    Ok(risks)
}

/// Spot prices per region from `spot.json` (possibly wrapped in `callback(…);`), with the
/// advisor's interruption rate where it has one.
pub fn parse_spot(bytes: &[u8], risks: &SpotRisks, stamp: &Stamp) -> Result<Parsed, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError(format!("not UTF-8: {e}")))?;
    let json = match (text.find('{'), text.rfind('}')) {
        (Some(start), Some(end)) if start < end => &text[start..=end],
        _ => return Err(ParseError("no JSON object in spot.json".into())),
    };
    let data: Value = serde_json::from_str(json).map_err(ParseError::json)?;
    let regions = data["config"]["regions"]
        .as_array()
        .ok_or_else(|| ParseError("no config.regions: spot.json changed shape".into()))?;
    let mut parsed = Parsed::default();
    for region in regions {
        let region_code = region["region"].as_str().unwrap_or_default();
        for family in region["instanceTypes"].as_array().into_iter().flatten() {
            for size in family["sizes"].as_array().into_iter().flatten() {
                let instance_type = size["size"].as_str().unwrap_or_default();
                let Some((gpu, count)) = gpu_of(instance_type) else {
                    continue;
                };
                let linux = size["valueColumns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["name"] == "linux");
                match linux.and_then(|c| number(&c["prices"]["USD"])) {
                    Some(price) if price > 0.0 => {
                        let risk = risks.get(&(region_code.to_string(), instance_type.to_string()));
                        let mut quote = stamp.quote(Row {
                            provider: "aws",
                            region: region_code,
                            sku: instance_type,
                            gpu,
                            gpu_count: count,
                            price_type: PriceType::Spot,
                            price_per_instance_hour: price,
                            source_kind: "S",
                            notes: risk.map(|(_, label)| {
                                format!("Spot Advisor interruption frequency {label} per month")
                            }),
                        });
                        quote.interruptions_per_hour = risk.map(|(rate, _)| *rate);
                        parsed.quotes.push(quote);
                    }
                    _ => parsed.reject(format!(
                        "{region_code} {instance_type}: spot price N/A or zero"
                    )),
                }
            }
        }
    }
    Ok(parsed)
}
