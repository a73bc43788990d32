//! SkyPilot's published catalogs (`catalogs/v8/<cloud>/vms.csv`), read by header name
//! because column order differs per cloud (feeds.md §1.3–1.4).

use std::collections::BTreeMap;

use super::{ParseError, Parsed, Row, Stamp, gpu_id, median};
use crate::pricing::quote::PriceType;

/// Readings of one instance type (or attachable GPU) in one region, over its zones.
#[derive(Default)]
struct Readings {
    gpu: &'static str,
    count: u64,
    gpu_only: bool,
    on_demand: Vec<f64>,
    spot: Vec<f64>,
}

pub fn parse(bytes: &[u8], provider: &str, stamp: &Stamp) -> Result<Parsed, ParseError> {
    let mut reader = csv::Reader::from_reader(bytes);
    let headers = reader
        .headers()
        .map_err(|e| ParseError(format!("malformed CSV header: {e}")))?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h == name);
    let (Some(instance), Some(accelerator), Some(count), Some(price), Some(region)) = (
        column("InstanceType"),
        column("AcceleratorName"),
        column("AcceleratorCount"),
        column("Price"),
        column("Region"),
    ) else {
        return Err(ParseError(format!("missing columns in header {headers:?}")));
    };
    let spot_column = column("SpotPrice");
    let mut parsed = Parsed::default();
    let mut groups: BTreeMap<(String, String), Readings> = BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| ParseError(format!("malformed CSV row: {e}")))?;
        let field = |i: usize| record.get(i).unwrap_or("").trim();
        let name = field(accelerator);
        if name.is_empty() {
            parsed.reject(format!("{}: host VM row (no GPU)", field(instance)));
            continue;
        }
        let Some(gpu) = gpu_id(name) else {
            parsed.reject(format!("{}: unknown GPU {name:?}", field(instance)));
            continue;
        };
        let gpus = field(count).parse::<f64>().unwrap_or(0.0);
        if gpus < 1.0 || gpus.fract() != 0.0 {
            parsed.reject(format!(
                "{}: fractional or missing GPU count {gpus}",
                field(instance)
            ));
            continue;
        }
        // GCP lists attachable GPUs as rows with no instance type; they are priced
        // alone, without a host VM.
        let gpu_only = field(instance).is_empty();
        let sku = if gpu_only {
            format!("{name} ×{gpus} GPU (attach to a VM)")
        } else {
            field(instance).to_string()
        };
        let readings = groups.entry((sku, field(region).to_string())).or_default();
        readings.gpu = gpu;
        readings.count = gpus as u64;
        readings.gpu_only = gpu_only;
        let on_demand = field(price).parse::<f64>().ok();
        if let Some(p) = on_demand.filter(|p| *p > 0.0) {
            readings.on_demand.push(p);
        }
        if let Some(s) = spot_column.and_then(|i| field(i).parse::<f64>().ok()) {
            // A zone whose spot equals on demand has no spot capacity (feeds.md §1.4).
            if on_demand == Some(s) {
                parsed.reject(format!(
                    "{}: spot equals on demand in one zone",
                    field(instance)
                ));
            } else if s > 0.0 {
                readings.spot.push(s);
            }
        }
    }
    for ((sku, region), mut r) in groups {
        let gpu_only_note = r
            .gpu_only
            .then(|| "GPU only; host VM not included".to_string());
        let zones = r.spot.len();
        let (low, high) = (
            r.spot.iter().copied().fold(f64::INFINITY, f64::min),
            r.spot.iter().copied().fold(0.0, f64::max),
        );
        let mut row = |price_type, price: f64, source_kind, notes: Option<String>| {
            parsed.quotes.push(stamp.quote(Row {
                provider,
                region: &region,
                sku: &sku,
                gpu: r.gpu,
                gpu_count: r.count,
                price_type,
                price_per_instance_hour: price,
                source_kind,
                notes,
            }))
        };
        if let Some(p) = median(&mut r.on_demand) {
            row(PriceType::OnDemand, p, "L", gpu_only_note.clone());
        }
        if let Some(p) = median(&mut r.spot) {
            let spread = format!("median over {zones} zone(s); range {low:.4}–{high:.4}");
            let notes = match &gpu_only_note {
                Some(n) => format!("{n}; {spread}"),
                None => spread,
            };
            row(PriceType::Spot, p, "S", Some(notes));
        }
    }
    Ok(parsed)
}
