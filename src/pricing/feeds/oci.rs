//! Oracle Cloud: the public price list and the shapes file (feeds.md §5.4). One price
//! for every commercial region; preemptible capacity at half the on-demand price where a
//! shape allows it.

use std::collections::HashMap;

use serde_json::Value;

use super::{ParseError, Parsed, Row, Stamp, gpu_id, number};
use crate::pricing::quote::PriceType;

/// OCI's preemptible instances cost 50 % of on demand (feeds.md §5.4).
const PREEMPTIBLE_SHARE: f64 = 0.5;

/// Shape names that do not spell the GPU.
fn shape_gpu(name: &str) -> Option<&'static str> {
    if name.contains("A100-v2") {
        Some("a100-80gb")
    } else if name.contains("GPU4") {
        Some("a100-40gb")
    } else if name.contains("GPU3") {
        Some("v100-16gb")
    } else if name.contains("GPU2") {
        None
    } else {
        gpu_id(name)
    }
}

/// `products`: the price list; `shapes`: the shapes file.
pub fn parse(products: &[u8], shapes: &[u8], stamp: &Stamp) -> Result<Parsed, ParseError> {
    let products: Value = serde_json::from_slice(products).map_err(ParseError::json)?;
    let shapes: Value = serde_json::from_slice(shapes).map_err(ParseError::json)?;
    let per_gpu: HashMap<&str, f64> = products["items"]
        .as_array()
        .ok_or_else(|| ParseError("no items in the price list".into()))?
        .iter()
        .filter(|p| p["metricName"] == "GPU Per Hour")
        .filter_map(|p| {
            let usd = p["currencyCodeLocalizations"]
                .as_array()?
                .iter()
                .find(|c| c["currencyCode"] == "USD")?;
            let price = usd["prices"]
                .as_array()?
                .iter()
                .find(|x| x["model"] == "PAY_AS_YOU_GO")?;
            Some((p["partNumber"].as_str()?, number(&price["value"])?))
        })
        .collect();
    let mut parsed = Parsed::default();
    for shape in shapes["items"]
        .as_array()
        .ok_or_else(|| ParseError("no items in the shapes file".into()))?
    {
        let name = shape["name"].as_str().unwrap_or_default();
        let gpus = shape["gpuQty"].as_u64().unwrap_or(0);
        if gpus == 0 || shape["status"] != "ACTIVE" {
            continue;
        }
        let Some(gpu) = shape_gpu(name) else {
            parsed.reject(format!("{name}: unknown GPU"));
            continue;
        };
        let price = shape["products"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|p| p["partNumber"].as_str().and_then(|n| per_gpu.get(n)));
        let Some(&price) = price.filter(|p| **p > 0.0) else {
            parsed.reject(format!("{name}: no GPU price in the price list"));
            continue;
        };
        let instance = price * gpus as f64;
        let mut row = |price_type, value: f64, notes: Option<String>| {
            parsed.quotes.push(stamp.quote(Row {
                provider: "oci",
                region: "global",
                sku: name,
                gpu,
                gpu_count: gpus,
                price_type,
                price_per_instance_hour: value,
                source_kind: "L",
                notes,
            }))
        };
        row(
            PriceType::OnDemand,
            instance,
            Some("same price in every commercial region".into()),
        );
        if shape["allowPreemptible"] == true {
            row(
                PriceType::Spot,
                instance * PREEMPTIBLE_SHARE,
                Some("preemptible: 50 % of on demand".into()),
            );
        }
    }
    Ok(parsed)
}
