//! Accelerator specifications (`data/gpus.csv`, a copy of the reference table).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CatalogError, read_rows};

/// Share of the nominal memory the driver keeps for itself (ECC, page tables, firmware):
/// an A100 80GB reports 81,920 MiB in nvidia-smi but `torch.cuda.get_device_properties`
/// gives 81,050 MiB total (870 MiB, 1.06 %); an A100 40GB 40,536 of 40,960 MiB (1.04 %).
/// Used only where `memory_bytes_usable_hint` has no measurement.
const DRIVER_RESERVED_FRACTION: f64 = 0.0106;

const GIB: f64 = 1_073_741_824.0;

/// Data-centre GDDR cards (T4, A10, A10G, L4, L40, L40S) ship with ECC on, which keeps
/// 1/16 of the memory for check bits: a T4 shows 15,360 of 16,384 MiB, an A10G 23,028 of
/// 24,576 MiB in nvidia-smi. HBM carries ECC in separate bits.
const GDDR_ECC_KEPT_FRACTION: f64 = 1.0 / 16.0;

/// One accelerator from the catalog.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Gpu {
    /// Catalog id, e.g. `a100-80gb`.
    #[schema(example = "a100-80gb")]
    pub id: String,
    pub name: String,
    /// Marketed memory (vendors write "GB"; it is GiB of HBM).
    pub memory_gib_nominal: f64,
    /// What one process can allocate: the measured value where one exists, otherwise the
    /// nominal size less the share the driver keeps.
    pub memory_bytes_usable: u64,
    /// Dense BF16 tensor-core TFLOP/s (no 2:4 sparsity); absent where the GPU has no BF16.
    pub bf16_dense_tflops: Option<f64>,
    pub fp16_dense_tflops: Option<f64>,
    pub tf32_tflops: Option<f64>,
    pub fp8_dense_tflops: Option<f64>,
    pub fp32_tflops: Option<f64>,
    pub mem_bandwidth_gbs: Option<f64>,
    pub interconnect: Option<String>,
    /// GPU-to-GPU link speed, bidirectional aggregate, GB/s.
    pub interconnect_gbs_bidir: Option<f64>,
    pub tdp_w: Option<f64>,
    /// Generation and memory family, which sets the throughput defaults.
    pub class: GpuClass,
    /// GPUs that share the fast GPU-to-GPU link (one server; a GB200/GB300 NVL72 rack).
    pub gpus_per_node: u64,
    pub form_factor: String,
    pub source: String,
    /// H: primary datasheet, M: secondary copy, L: single secondary source.
    pub confidence: String,
}

/// The families the time model tells apart (`class` column of `gpus.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuClass {
    /// V100.
    Volta,
    /// T4.
    Turing,
    /// A100, A800.
    Ampere,
    /// H100, H800, H200.
    Hopper,
    /// B200, GB200, GB300.
    Blackwell,
    /// GDDR cards: A10/A10G, L4, L40/L40S, RTX workstation and GeForce.
    Gddr,
    /// AMD Instinct.
    Cdna,
    /// Intel Gaudi.
    Gaudi,
}

impl Gpu {
    /// Whether the GPU has BF16 tensor cores (V100 and T4 do not).
    pub fn supports_bf16(&self) -> bool {
        self.bf16_dense_tflops.is_some()
    }
}

#[derive(Deserialize)]
struct Row {
    id: String,
    name: String,
    memory_gib_nominal: f64,
    memory_bytes_usable_hint: Option<u64>,
    gddr_ecc: String,
    bf16_dense_tflops: Option<f64>,
    fp16_dense_tflops: Option<f64>,
    tf32_tflops: Option<f64>,
    fp8_dense_tflops: Option<f64>,
    fp32_tflops: Option<f64>,
    mem_bandwidth_gbs: Option<f64>,
    interconnect: Option<String>,
    interconnect_gbs_bidir: Option<f64>,
    tdp_w: Option<f64>,
    class: GpuClass,
    gpus_per_node: u64,
    form_factor: String,
    source: String,
    confidence: String,
}

pub(super) fn parse(text: &str) -> Result<Vec<Gpu>, CatalogError> {
    let rows: Vec<Row> = read_rows("gpus.csv", text)?;
    Ok(rows
        .into_iter()
        .map(|r| Gpu {
            memory_bytes_usable: r.memory_bytes_usable_hint.unwrap_or_else(|| {
                let ecc = if r.gddr_ecc == "yes" {
                    GDDR_ECC_KEPT_FRACTION
                } else {
                    0.0
                };
                (r.memory_gib_nominal * GIB * (1.0 - ecc) * (1.0 - DRIVER_RESERVED_FRACTION)) as u64
            }),
            id: r.id,
            name: r.name,
            memory_gib_nominal: r.memory_gib_nominal,
            bf16_dense_tflops: r.bf16_dense_tflops,
            fp16_dense_tflops: r.fp16_dense_tflops,
            tf32_tflops: r.tf32_tflops,
            fp8_dense_tflops: r.fp8_dense_tflops,
            fp32_tflops: r.fp32_tflops,
            mem_bandwidth_gbs: r.mem_bandwidth_gbs,
            interconnect: r.interconnect,
            interconnect_gbs_bidir: r.interconnect_gbs_bidir,
            tdp_w: r.tdp_w,
            class: r.class,
            gpus_per_node: r.gpus_per_node,
            form_factor: r.form_factor,
            source: r.source,
            confidence: r.confidence,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_memory_uses_the_measured_hint_or_keeps_the_driver_share_back() {
        let gpus = parse(include_str!("data/gpus.csv")).unwrap();
        let t4 = gpus.iter().find(|g| g.id == "t4-16gb").unwrap();
        assert_eq!(t4.memory_bytes_usable, 15_636_365_312);
        let a100 = gpus.iter().find(|g| g.id == "a100-80gb").unwrap();
        let mib = a100.memory_bytes_usable / (1 << 20);
        assert!((81_040..=81_060).contains(&mib), "{mib} MiB");
    }
}
