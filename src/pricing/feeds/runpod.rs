//! RunPod's GraphQL `gpuTypes` (feeds.md §5.2): per-GPU prices, secure and community
//! cloud, on demand and spot.

use serde_json::Value;

use super::{ParseError, Parsed, Row, Stamp, gpu_id, number};
use crate::pricing::quote::PriceType;

pub fn parse(bytes: &[u8], stamp: &Stamp) -> Result<Parsed, ParseError> {
    let data: Value = serde_json::from_slice(bytes).map_err(ParseError::json)?;
    if let Some(errors) = data.get("errors") {
        return Err(ParseError(format!("GraphQL errors: {errors}")));
    }
    let types = data["data"]["gpuTypes"]
        .as_array()
        .ok_or_else(|| ParseError("no data.gpuTypes: the response changed shape".into()))?;
    let mut parsed = Parsed::default();
    for t in types {
        let id = t["id"].as_str().unwrap_or_default();
        let display = t["displayName"].as_str().unwrap_or(id);
        // The long id names the memory and form factor; the display name often does not.
        let Some(gpu) = gpu_id(id).or_else(|| gpu_id(display)) else {
            parsed.reject(format!("{id}: unknown GPU"));
            continue;
        };
        for (cloud, field, price_type) in [
            ("secure", "securePrice", PriceType::OnDemand),
            ("secure", "secureSpotPrice", PriceType::Spot),
            ("community", "communityPrice", PriceType::OnDemand),
            ("community", "communitySpotPrice", PriceType::Spot),
        ] {
            match number(&t[field]) {
                Some(price) if price > 0.0 => parsed.quotes.push(stamp.quote(Row {
                    provider: "runpod",
                    region: "global",
                    sku: &format!("{display} ({cloud} cloud)"),
                    gpu,
                    gpu_count: 1,
                    price_type,
                    price_per_instance_hour: price,
                    source_kind: if price_type == PriceType::Spot {
                        "S"
                    } else {
                        "L"
                    },
                    notes: Some("per GPU; pods of more GPUs cost the multiple".into()),
                })),
                Some(_) => parsed.reject(format!("{id} {field}: zero price")),
                None => {}
            }
        }
    }
    Ok(parsed)
}
