//! Azure Retail Prices API (`prices.azure.com/api/retail/prices`), one page at a time
//! with its `NextPageLink` (feeds.md §2).

use serde::Deserialize;

use super::{ParseError, Parsed, Row, Stamp};
use crate::pricing::quote::PriceType;

/// GPU VM sizes: the API names no GPU, so sizes map to GPUs and counts here (feeds.md §2
/// table, plus the sibling sizes of each family from Azure's size documentation).
const SIZES: &[(&str, &str, u64)] = &[
    ("Standard_NC24ads_A100_v4", "a100-80gb", 1),
    ("Standard_NC48ads_A100_v4", "a100-80gb", 2),
    ("Standard_NC96ads_A100_v4", "a100-80gb", 4),
    ("Standard_ND96asr_v4", "a100-40gb", 8),
    ("Standard_ND96amsr_A100_v4", "a100-80gb", 8),
    ("Standard_NC40ads_H100_v5", "h100-nvl-94gb", 1),
    ("Standard_NC80adis_H100_v5", "h100-nvl-94gb", 2),
    ("Standard_ND96isr_H100_v5", "h100-80gb", 8),
    ("Standard_ND96isr_H200_v5", "h200-141gb", 8),
    ("Standard_ND96isr_MI300X_v5", "mi300x-192gb", 8),
    ("Standard_NC4as_T4_v3", "t4-16gb", 1),
    ("Standard_NC8as_T4_v3", "t4-16gb", 1),
    ("Standard_NC16as_T4_v3", "t4-16gb", 1),
    ("Standard_NC64as_T4_v3", "t4-16gb", 4),
    ("Standard_NV36ads_A10_v5", "a10-24gb", 1),
    ("Standard_NV72ads_A10_v5", "a10-24gb", 2),
    ("Standard_NC6s_v3", "v100-16gb", 1),
    ("Standard_NC12s_v3", "v100-16gb", 2),
    ("Standard_NC24s_v3", "v100-16gb", 4),
    ("Standard_ND40rs_v2", "v100-32gb", 8),
];

/// Hours in the reservation terms: Reservation `unitPrice` is the whole term's price
/// although `unitOfMeasure` says "1 Hour".
const HOURS_1Y: f64 = 8760.0;
const HOURS_3Y: f64 = 26280.0;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Page {
    items: Vec<Item>,
    next_page_link: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    currency_code: String,
    #[serde(default)]
    retail_price: Option<f64>,
    #[serde(default)]
    unit_price: Option<f64>,
    arm_region_name: String,
    #[serde(default)]
    arm_sku_name: String,
    #[serde(default)]
    meter_name: String,
    #[serde(default)]
    product_name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    reservation_term: Option<String>,
}

pub fn parse(bytes: &[u8], stamp: &Stamp) -> Result<Parsed, ParseError> {
    let page: Page = serde_json::from_slice(bytes).map_err(ParseError::json)?;
    let mut parsed = Parsed {
        next_page: page.next_page_link.filter(|link| !link.is_empty()),
        ..Parsed::default()
    };
    for item in page.items {
        let what = format!(
            "{} {} {}",
            item.arm_sku_name, item.arm_region_name, item.meter_name
        );
        let product = item.product_name.as_str();
        if product.ends_with(" Windows")
            || product.ends_with(" Win")
            || product.contains("Cloud Services")
            || product.contains("Dedicated")
        {
            parsed.reject(format!("{what}: not a Linux VM price"));
            continue;
        }
        let Some(&(_, gpu, count)) = SIZES.iter().find(|(sku, _, _)| *sku == item.arm_sku_name)
        else {
            parsed.reject(format!("{what}: unmapped VM size"));
            continue;
        };
        if item.currency_code != "USD" {
            parsed.reject(format!("{what}: currency {}", item.currency_code));
            continue;
        }
        let (price_type, price) = match (item.kind.as_str(), item.reservation_term.as_deref()) {
            ("Consumption", _) if item.meter_name.ends_with(" Low Priority") => {
                parsed.reject(format!("{what}: low priority (being retired)"));
                continue;
            }
            ("Consumption", _) if item.meter_name.ends_with(" Spot") => {
                (PriceType::Spot, item.retail_price.or(item.unit_price))
            }
            ("Consumption", _) => (PriceType::OnDemand, item.retail_price.or(item.unit_price)),
            ("Reservation", Some("1 Year")) => {
                (PriceType::Reserved1y, item.unit_price.map(|p| p / HOURS_1Y))
            }
            ("Reservation", Some("3 Years")) => {
                (PriceType::Reserved3y, item.unit_price.map(|p| p / HOURS_3Y))
            }
            (kind, _) => {
                parsed.reject(format!("{what}: price type {kind}"));
                continue;
            }
        };
        match price {
            Some(p) if p > 0.0 => parsed.quotes.push(stamp.quote(Row {
                provider: "azure",
                region: &item.arm_region_name,
                sku: &item.arm_sku_name,
                gpu,
                gpu_count: count,
                price_type,
                price_per_instance_hour: p,
                source_kind: "L",
                notes: None,
            })),
            _ => parsed.reject(format!("{what}: zero or missing price")),
        }
    }
    Ok(parsed)
}
