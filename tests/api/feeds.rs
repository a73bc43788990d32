//! Every feed parser on recorded payloads in the provider's real shape
//! (`tests/fixtures/feeds/`), quirks included.

use trainplan::pricing::PriceQuote;
use trainplan::pricing::PriceType::{self, OnDemand, Reserved1y, Spot};
use trainplan::pricing::feeds::{
    Parsed, Stamp, aws, azure, csv_sheet, oci, runpod, skypilot, vast,
};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/feeds/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn stamp() -> Stamp {
    Stamp {
        feed: "test".into(),
        source: "recorded payload".into(),
        as_of: "2026-11-29".into(),
        fetched_at: "2026-11-29T12:00:00Z".into(),
    }
}

fn find<'a>(parsed: &'a Parsed, sku: &str, region: &str, price_type: PriceType) -> &'a PriceQuote {
    parsed
        .quotes
        .iter()
        .find(|q| q.sku == sku && q.region == region && q.price_type == price_type)
        .unwrap_or_else(|| panic!("no {sku} {region} {price_type:?} in {:#?}", parsed.quotes))
}

fn rejected_for(parsed: &Parsed, needle: &str) -> bool {
    parsed.rejected.iter().any(|r| r.contains(needle))
}

#[test]
fn azure_retail_pages_linux_spot_and_reservations() {
    let page = azure::parse(&fixture("azure-page-1.json"), &stamp()).unwrap();
    assert_eq!(page.next_page.as_deref(), Some("{{BASE}}/azure?page=2"));
    let h100 = find(&page, "Standard_ND96isr_H100_v5", "eastus", OnDemand);
    assert_eq!(h100.price_per_instance_hour, Some(98.32));
    assert_eq!((h100.gpu.as_str(), h100.gpu_count), ("h100-80gb", 8));
    assert!((h100.price_per_gpu_hour - 12.29).abs() < 1e-9);
    assert_eq!(
        find(&page, "Standard_ND96isr_H100_v5", "eastus", Spot).price_per_instance_hour,
        Some(18.169536)
    );
    // Reservation unitPrice is the whole term: 525,600 over 8,760 hours.
    let reserved = find(&page, "Standard_ND96isr_H100_v5", "eastus", Reserved1y);
    assert_eq!(reserved.price_per_instance_hour, Some(60.0));
    // Windows shares the meter name; the zero-priced H200 is dropped, not stored as 0;
    // a CPU VM is not mapped.
    assert_eq!(page.quotes.len(), 3);
    assert!(rejected_for(&page, "not a Linux VM price"));
    assert!(rejected_for(
        &page,
        "Standard_ND96isr_H200_v5 eastus ND96isrH200v5: zero or missing price"
    ));
    assert!(rejected_for(
        &page,
        "Standard_D2s_v5 eastus D2s v5: unmapped VM size"
    ));

    let last = azure::parse(&fixture("azure-page-2.json"), &stamp()).unwrap();
    assert_eq!(last.next_page, None);
    assert_eq!(
        find(&last, "Standard_NC24ads_A100_v4", "eastus", Spot).price_per_instance_hour,
        Some(0.7345)
    );
    assert_eq!(
        find(&last, "Standard_ND96amsr_A100_v4", "eastus2", OnDemand).gpu,
        "a100-80gb"
    );
    assert!(rejected_for(&last, "low priority"));
    assert_eq!(last.quotes.len(), 4);
    for q in page.quotes.iter().chain(&last.quotes) {
        assert_eq!(q.as_of.as_deref(), Some("2026-11-29"));
        assert_eq!(q.feed.as_deref(), Some("test"));
    }
}

#[test]
fn aws_pricing_page_spot_json_and_advisor() {
    let on_demand =
        aws::parse_on_demand(&fixture("aws-ondemand.json"), "us-east-1", &stamp()).unwrap();
    assert_eq!(
        find(&on_demand, "p5.48xlarge", "us-east-1", OnDemand).price_per_instance_hour,
        Some(55.04)
    );
    assert_eq!(
        find(&on_demand, "p4d.24xlarge", "us-east-1", OnDemand).gpu,
        "a100-40gb"
    );
    assert_eq!(
        find(&on_demand, "g6e.2xlarge", "us-east-1", OnDemand).gpu_count,
        1
    );
    // Capacity-block-only p5e has a zero price; m7i is no GPU type.
    assert_eq!(on_demand.quotes.len(), 3);
    assert!(rejected_for(
        &on_demand,
        "p5e.48xlarge: zero or missing price"
    ));
    assert!(rejected_for(
        &on_demand,
        "m7i.xlarge: not a mapped GPU type"
    ));
    // A page without `regions` changed shape: the fetch fails instead of guessing.
    assert!(aws::parse_on_demand(br#"{"manifest": {}}"#, "us-east-1", &stamp()).is_err());

    let risks = aws::parse_advisor(&fixture("aws-spot-advisor.json")).unwrap();
    let spot = aws::parse_spot(&fixture("aws-spot.js"), &risks, &stamp()).unwrap();
    let p5 = find(&spot, "p5.48xlarge", "us-east-1", Spot);
    assert_eq!(p5.price_per_instance_hour, Some(21.6229));
    // <5 % of instances reclaimed a month: 0.05 over 730 hours.
    assert!((p5.interruptions_per_hour.unwrap() - 0.05 / 730.0).abs() < 1e-12);
    assert!(p5.notes.as_deref().unwrap().contains("<5%"));
    let p4d = find(&spot, "p4d.24xlarge", "us-east-1", Spot);
    assert!((p4d.interruptions_per_hour.unwrap() - 1.0 / 730.0).abs() < 1e-12);
    // "N/A*" is no price.
    assert!(rejected_for(&spot, "g6e.2xlarge: spot price N/A or zero"));
    assert_eq!(spot.quotes.len(), 2);
}

#[test]
fn skypilot_catalogs_by_header_name_with_per_zone_spot() {
    let aws = skypilot::parse(&fixture("skypilot-aws-vms.csv"), "aws", &stamp()).unwrap();
    let p4d_spot = find(&aws, "p4d.24xlarge", "us-east-1", Spot);
    // Median over the three zones, with the range kept.
    assert_eq!(p4d_spot.price_per_instance_hour, Some(9.32));
    assert!(
        p4d_spot
            .notes
            .as_deref()
            .unwrap()
            .contains("range 6.2890–14.0800")
    );
    assert_eq!(
        find(&aws, "p4d.24xlarge", "us-east-1", OnDemand).price_per_instance_hour,
        Some(21.957642)
    );
    assert_eq!(
        find(&aws, "p4de.24xlarge", "us-east-1", OnDemand).gpu,
        "a100-80gb"
    );
    // The zone whose spot equals on demand has no spot capacity: only the other counts.
    assert_eq!(
        find(&aws, "p5.48xlarge", "us-east-1", Spot).price_per_instance_hour,
        Some(14.246)
    );
    assert!(rejected_for(&aws, "spot equals on demand"));
    // p5e has spot but no on-demand price; a fractional L4 and a CPU type are dropped.
    assert_eq!(
        find(&aws, "p5e.48xlarge", "us-east-2", Spot).gpu,
        "h200-141gb"
    );
    assert!(
        !aws.quotes
            .iter()
            .any(|q| q.sku == "p5e.48xlarge" && q.price_type == OnDemand)
    );
    assert!(rejected_for(&aws, "fractional or missing GPU count"));
    assert!(rejected_for(&aws, "host VM row"));

    // GCP: other column order; GPU rows are separate from host rows.
    let gcp = skypilot::parse(&fixture("skypilot-gcp-vms.csv"), "gcp", &stamp()).unwrap();
    let a100 = find(
        &gcp,
        "A100 ×1 GPU (attach to a VM)",
        "us-central1",
        OnDemand,
    );
    assert_eq!(a100.price_per_instance_hour, Some(2.93391));
    assert_eq!(a100.gpu, "a100-40gb");
    assert!(
        a100.notes
            .as_deref()
            .unwrap()
            .contains("host VM not included")
    );
    assert_eq!(
        find(&gcp, "L4 ×1 GPU (attach to a VM)", "us-central1", Spot).price_per_instance_hour,
        Some(0.224)
    );
    assert!(rejected_for(&gcp, "unknown GPU \"TPU-V5P\""));
    assert!(skypilot::parse(b"Foo,Bar\n1,2\n", "aws", &stamp()).is_err());
}

#[test]
fn runpod_graphql_per_gpu_prices_secure_and_community() {
    let parsed = runpod::parse(&fixture("runpod.json"), &stamp()).unwrap();
    let a100 = find(&parsed, "A100 PCIe (secure cloud)", "global", OnDemand);
    assert_eq!(
        (a100.gpu.as_str(), a100.price_per_gpu_hour),
        ("a100-pcie-80gb", 1.64)
    );
    assert_eq!(
        find(&parsed, "A100 PCIe (community cloud)", "global", Spot).price_per_gpu_hour,
        0.6
    );
    assert_eq!(
        find(&parsed, "H100 SXM (secure cloud)", "global", OnDemand).gpu,
        "h100-80gb"
    );
    // A zero spot price is dropped; nulls are absent offers; an A4000 is no catalog GPU.
    assert!(rejected_for(
        &parsed,
        "NVIDIA H100 80GB HBM3 secureSpotPrice: zero price"
    ));
    assert!(rejected_for(&parsed, "NVIDIA RTX A4000: unknown GPU"));
    assert_eq!(parsed.quotes.len(), 4 + 1 + 4);
    assert!(runpod::parse(br#"{"errors": [{"message": "rate limited"}]}"#, &stamp()).is_err());
}

#[test]
fn vast_takes_the_median_of_enough_offers_never_the_minimum() {
    let parsed = vast::parse(&fixture("vast.json"), &stamp()).unwrap();
    let rtx = find(&parsed, "1x RTX 4090", "global", OnDemand);
    // Six offers 0.29 … 0.55: the median, not the cheapest.
    assert!((rtx.price_per_instance_hour.unwrap() - (0.3142 + 0.35) / 2.0).abs() < 1e-12);
    assert_eq!(
        find(&parsed, "8x H100 SXM", "global", Spot).price_per_instance_hour,
        Some(10.5)
    );
    assert_eq!(
        find(&parsed, "8x H100 SXM", "global", OnDemand).gpu_count,
        8
    );
    assert!(rejected_for(&parsed, "1x H100 NVL: only 2 offer(s)"));
    // The RTX 4090D is another card.
    assert!(rejected_for(&parsed, "unknown GPU \"RTX 4090D\""));
    assert!(
        vast::parse(
            br#"{"success": false, "error": "bad_request", "msg": "no"}"#,
            &stamp()
        )
        .is_err()
    );
}

#[test]
fn oci_price_list_and_shapes() {
    let parsed = oci::parse(
        &fixture("oci-products.json"),
        &fixture("oci-shapes.json"),
        &stamp(),
    )
    .unwrap();
    let h100 = find(&parsed, "BM.GPU.H100.8", "global", OnDemand);
    assert_eq!(
        (h100.price_per_instance_hour, h100.gpu.as_str()),
        (Some(80.0), "h100-80gb")
    );
    assert_eq!(
        find(&parsed, "BM.GPU.A100-v2.8", "global", OnDemand).gpu,
        "a100-80gb"
    );
    // Bare-metal GPU shapes allow no preemptible capacity; VM.GPU3.1 does, at half.
    assert!(
        !parsed
            .quotes
            .iter()
            .any(|q| q.sku == "BM.GPU.H100.8" && q.price_type == Spot)
    );
    assert_eq!(
        find(&parsed, "VM.GPU3.1", "global", Spot).price_per_instance_hour,
        Some(1.475)
    );
    assert!(rejected_for(&parsed, "VM.GPU2.1: unknown GPU"));
}

#[test]
fn an_organisations_sheet_keeps_its_currency_and_dates() {
    let parsed = csv_sheet::parse(&fixture("sheet.csv"), &stamp()).unwrap();
    assert_eq!(parsed.quotes.len(), 2);
    let contract = &parsed.quotes[0];
    assert_eq!(contract.currency, trainplan::pricing::Currency::Cny);
    assert_eq!(contract.as_of.as_deref(), Some("2026-10-01"));
    assert_eq!(contract.feed.as_deref(), Some("test"));
    assert!(csv_sheet::parse(b"provider,gpu\nx,y\n", &stamp()).is_err());
}
