//! Price refresh speed: parse a 50,000-row SkyPilot `vms.csv` (AWS's real column layout,
//! one row per availability zone), and run a full refresh of it into Redis (validation,
//! snapshot, MULTI/EXEC publish, lock). Run with `cargo bench --bench refresh`; the
//! Redis half needs `TRAINPLAN_TEST_REDIS_URL` (scripts/test.sh prints how to start one).

use std::hint::black_box;
use std::sync::Arc;

use arc_swap::ArcSwap;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trainplan::catalog::Catalog;
use trainplan::pricing::feeds::{Stamp, skypilot};
use trainplan::pricing::refresh::{Refresher, parse_feeds};
use trainplan::pricing::store::Store;
use trainplan::pricing::{Fx, PriceBook};

const ROWS: usize = 50_000;

/// `ROWS` rows in the layout of `catalogs/v8/aws/vms.csv`.
fn payload() -> String {
    let types = [
        ("p4d.24xlarge", "A100", 8, 40960, 21.957642),
        ("p4de.24xlarge", "A100-80GB", 8, 81920, 27.44705),
        ("p5.48xlarge", "H100", 8, 81920, 55.04),
        ("p5.4xlarge", "H100", 1, 81920, 6.88),
        ("p5en.48xlarge", "H200", 8, 144384, 63.296),
        ("g5.xlarge", "A10G", 1, 24576, 1.006),
        ("g6.xlarge", "L4", 1, 23034, 0.8048),
        ("g6e.xlarge", "L40S", 1, 46068, 1.861),
        ("g4dn.xlarge", "T4", 1, 16384, 0.526),
        ("p3.2xlarge", "V100", 1, 16384, 3.06),
    ];
    let mut text = String::from(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n",
    );
    for i in 0..ROWS {
        let (name, gpu, count, memory, price) = types[i % types.len()];
        let region = i / types.len() % 500;
        let zone = i / (types.len() * 500);
        let spot = price * (0.3 + (i % 7) as f64 * 0.05);
        text.push_str(&format!(
            "{name},{gpu},{count}.0,96.0,1152.0,\"{{'Gpus': [{{'Name': '{gpu}', 'Manufacturer': 'NVIDIA', 'Count': {count}, 'MemoryInfo': {{'SizeInMiB': {memory}}}}}], 'TotalGpuMemoryInMiB': {}}}\",{price},{spot:.6},region-{region},region-{region}-az{zone},x86_64\n",
            count * memory
        ));
    }
    text
}

fn benches(c: &mut Criterion) {
    let text = payload();
    let stamp = Stamp {
        feed: "bench".into(),
        source: "generated vms.csv".into(),
        as_of: "2026-11-29".into(),
        fetched_at: "2026-11-29T00:00:00Z".into(),
    };
    let mut group = c.benchmark_group("refresh");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    group.bench_function("parse 50,000-row vms.csv", |b| {
        b.iter(|| skypilot::parse(black_box(text.as_bytes()), "aws", &stamp))
    });

    let Ok(url) = std::env::var("TRAINPLAN_TEST_REDIS_URL") else {
        eprintln!("refresh into Redis skipped: set TRAINPLAN_TEST_REDIS_URL");
        return;
    };
    let path = std::env::temp_dir().join(format!("trainplan-bench-{}.csv", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let feeds = parse_feeds(&format!(
        "[[feed]]\nname = \"bench\"\nkind = \"skypilot_catalog\"\nenabled = true\nprovider = \"aws\"\nurl = \"file://{}\"\n",
        path.display()
    ))
    .unwrap();
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let now = jiff::Timestamp::now();
    let (book, _) = PriceBook::embedded(|g| catalog.gpu(g).is_some(), now);
    let prefix = format!("trainplan-bench-{}", uuid::Uuid::new_v4().simple());
    let store = Store::new(&url, &prefix).unwrap();
    let fx = Fx {
        cny_per_usd: 7.2,
        as_of: "2026-09".into(),
        source: "bench".into(),
    };
    let refresher = Refresher::new(
        feeds,
        Some(store),
        catalog,
        Arc::new(ArcSwap::from_pointee(book)),
        fx,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    group.bench_function("full refresh of 50,000 rows into Redis", |b| {
        b.iter(|| runtime.block_on(refresher.refresh()).unwrap())
    });
    group.finish();
    std::fs::remove_file(&path).unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(keys).query(&mut c).unwrap();
    }
}

criterion_group!(refresh_benches, benches);
criterion_main!(refresh_benches);
