//! Model architectures (`data/models.csv`) and the parameter counts derived from them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CatalogError, read_rows};

/// Shape of a transformer, enough to count its parameters and activations.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Architecture {
    /// Transformer blocks (encoder + decoder for encoder-decoder models).
    pub layers: u64,
    /// Model width.
    pub hidden: u64,
    /// Attention (query) heads.
    pub heads: u64,
    /// Key/value heads (fewer than `heads` under grouped-query attention).
    pub kv_heads: u64,
    /// Per-head width (`hidden / heads` unless the config overrides it).
    pub head_dim: u64,
    /// MLP width per branch.
    pub intermediate: u64,
    /// Embedding rows.
    pub vocab: u64,
    /// Whether the output head shares the input embedding matrix.
    pub tied_embeddings: bool,
    pub mlp: MlpKind,
    pub norm: NormKind,
    /// Mixture-of-experts layout, when the MLP is routed.
    pub moe: Option<Moe>,
    /// Decoder blocks with a cross-attention sublayer (encoder-decoder models).
    pub cross_attention_layers: u64,
    /// Whether dropout is active in training (it keeps 1-byte masks for backward).
    pub dropout: bool,
    /// Whether every linear layer has a bias vector.
    pub linear_bias: bool,
}

/// MLP shape: gated (SwiGLU/GeGLU: gate, up and down projections) or plain (up, down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    Gated,
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    RmsNorm,
    LayerNorm,
}

/// Routed MLP: every MoE layer holds `experts` MLPs of width `expert_intermediate` (plus
/// `shared_experts` always-on ones) and sends each token to `experts_per_token` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct Moe {
    pub experts: u64,
    pub experts_per_token: u64,
    pub expert_intermediate: u64,
    pub shared_experts: u64,
    /// Leading layers that keep a dense MLP of width `intermediate` (DeepSeek-MoE: 1).
    pub dense_layers: u64,
}

/// The linear projections of one block, by the names PEFT targets use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Projection {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl Projection {
    pub const ALL: [Projection; 7] = [
        Projection::Q,
        Projection::K,
        Projection::V,
        Projection::O,
        Projection::Gate,
        Projection::Up,
        Projection::Down,
    ];

    pub fn is_mlp(self) -> bool {
        matches!(self, Projection::Gate | Projection::Up | Projection::Down)
    }
}

impl Architecture {
    /// Query width (`heads · head_dim`), which differs from `hidden` for Gemma.
    pub fn q_width(&self) -> u64 {
        self.heads * self.head_dim
    }

    /// Key (and value) width under grouped-query attention.
    pub fn kv_width(&self) -> u64 {
        self.kv_heads * self.head_dim
    }

    /// `(d_in, d_out)` of one projection for an MLP of width `mlp_width`; `None` where the
    /// block has no such matrix (a plain MLP has no gate).
    pub fn projection_shape(&self, projection: Projection, mlp_width: u64) -> Option<(u64, u64)> {
        let h = self.hidden;
        match projection {
            Projection::Q => Some((h, self.q_width())),
            Projection::K => Some((h, self.kv_width())),
            Projection::V => Some((h, self.kv_width())),
            Projection::O => Some((self.q_width(), h)),
            Projection::Gate if self.mlp == MlpKind::Plain => None,
            Projection::Gate | Projection::Up => Some((h, mlp_width)),
            Projection::Down => Some((mlp_width, h)),
        }
    }

    /// Number of MoE layers (zero for dense models).
    pub fn moe_layers(&self) -> u64 {
        self.moe
            .map_or(0, |m| self.layers.saturating_sub(m.dense_layers))
    }

    /// MLP instances of each width in the whole model, as `(count, width)` pairs:
    /// dense layers, routed experts and shared experts.
    pub fn mlp_instances(&self) -> Vec<(u64, u64)> {
        match self.moe {
            None => vec![(self.layers, self.intermediate)],
            Some(moe) => {
                let moe_layers = self.moe_layers();
                vec![
                    (moe.dense_layers.min(self.layers), self.intermediate),
                    (
                        moe_layers * (moe.experts + moe.shared_experts),
                        moe.expert_intermediate,
                    ),
                ]
            }
        }
    }

    /// Parameters of one block's attention, all layers (plus cross-attention).
    fn attention_parameters(&self) -> u64 {
        let per_layer: u64 = [Projection::Q, Projection::K, Projection::V, Projection::O]
            .iter()
            .filter_map(|&p| self.projection_shape(p, self.intermediate))
            .map(|(i, o)| i * o + if self.linear_bias { o } else { 0 })
            .sum();
        per_layer * (self.layers + self.cross_attention_layers)
    }

    /// Parameters of one MLP of the given width (with biases where the model has them).
    fn one_mlp_parameters(&self, width: u64) -> u64 {
        [Projection::Gate, Projection::Up, Projection::Down]
            .iter()
            .filter_map(|&p| self.projection_shape(p, width))
            .map(|(i, o)| i * o + if self.linear_bias { o } else { 0 })
            .sum()
    }

    /// Parameters of all MLPs (and MoE routers).
    fn mlp_parameters(&self) -> u64 {
        let mlp: u64 = self
            .mlp_instances()
            .into_iter()
            .map(|(count, width)| count * self.one_mlp_parameters(width))
            .sum();
        let routers = self
            .moe
            .map_or(0, |m| self.moe_layers() * self.hidden * m.experts);
        mlp + routers
    }

    /// Norm weights (and biases for LayerNorm): two per block, one per cross-attention,
    /// one final.
    pub fn norm_parameters(&self) -> u64 {
        let per_norm = match self.norm {
            NormKind::RmsNorm => self.hidden,
            NormKind::LayerNorm => 2 * self.hidden,
        };
        per_norm * (2 * self.layers + self.cross_attention_layers + 1)
    }

    /// Input embedding (`vocab · hidden`).
    pub fn embedding_parameters(&self) -> u64 {
        self.vocab * self.hidden
    }

    /// Output head: zero when tied to the embedding.
    pub fn head_parameters(&self) -> u64 {
        if self.tied_embeddings {
            0
        } else {
            self.vocab * self.hidden
        }
    }

    /// Parameters inside the transformer blocks (what tensor and pipeline parallel split and
    /// QLoRA quantises): attention and MLP projections, routers.
    pub fn block_linear_parameters(&self) -> u64 {
        self.attention_parameters() + self.mlp_parameters()
    }

    /// Every parameter of the model.
    pub fn total_parameters(&self) -> u64 {
        self.block_linear_parameters()
            + self.norm_parameters()
            + self.embedding_parameters()
            + self.head_parameters()
    }

    /// Parameters one token passes through: the total less the routed experts it skips
    /// (Mixtral-8x7B: 46.7e9 total, 12.9e9 active). Equal to the total for dense models.
    pub fn active_parameters(&self) -> u64 {
        let skipped = self.moe.map_or(0, |moe| {
            self.moe_layers()
                * moe.experts.saturating_sub(moe.experts_per_token)
                * self.one_mlp_parameters(moe.expert_intermediate)
        });
        self.total_parameters() - skipped
    }

    /// Parameters of the routed experts (what expert parallelism spreads); zero for dense
    /// models.
    pub fn routed_expert_parameters(&self) -> u64 {
        self.moe.map_or(0, |moe| {
            self.moe_layers() * moe.experts * self.one_mlp_parameters(moe.expert_intermediate)
        })
    }

    /// Parameters of one transformer block (the unit FSDP/ZeRO-3 gathers and a frozen
    /// layer count works in).
    pub fn parameters_per_layer(&self) -> u64 {
        (self.block_linear_parameters() + self.norm_parameters()) / self.layers.max(1)
    }

    /// The largest single weight matrix (what a fused optimizer step or a QLoRA dequantise
    /// works on at once).
    pub fn largest_matrix_parameters(&self) -> u64 {
        let widest_mlp = self
            .mlp_instances()
            .iter()
            .map(|&(_, w)| w)
            .max()
            .unwrap_or(0);
        let projections = Projection::ALL
            .iter()
            .filter_map(|&p| self.projection_shape(p, widest_mlp))
            .map(|(i, o)| i * o)
            .max()
            .unwrap_or(0);
        projections.max(self.embedding_parameters())
    }

    /// A typical decoder shape for a bare parameter count: depth grows as the cube root of
    /// size with width ≈ 128 · depth (Llama-2-7B: 4,096 wide, 32 deep; Llama-2-70B: 8,192,
    /// 80), so `P ≈ 12·L·h² = 12·128²·L³` (Kaplan et al. 2020, eq. 2.1, non-embedding
    /// parameters); MLP 8/3·h gated, Llama-2 vocabulary.
    pub fn typical_for(parameters: u64) -> Architecture {
        let layers = ((parameters as f64 / (12.0 * 128.0 * 128.0)).cbrt().round() as u64).max(1);
        let hidden = ((parameters as f64 / (12.0 * layers as f64)).sqrt() / 128.0)
            .round()
            .max(1.0) as u64
            * 128;
        let heads = (hidden / 128).max(1);
        Architecture {
            layers,
            hidden,
            heads,
            kv_heads: heads,
            head_dim: hidden / heads,
            intermediate: (hidden * 8 / 3).div_ceil(256) * 256,
            vocab: 32_000,
            tied_embeddings: false,
            mlp: MlpKind::Gated,
            norm: NormKind::RmsNorm,
            moe: None,
            cross_attention_layers: 0,
            dropout: false,
            linear_bias: false,
        }
    }
}

/// One model of the catalog: its id, family, architecture and published size.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelEntry {
    #[schema(example = "llama-3.1-8b")]
    pub id: String,
    pub family: String,
    pub architecture: Architecture,
    /// Parameter count computed from the architecture (what the estimator uses).
    pub parameters: u64,
    /// Parameter count as published by the source.
    pub published_parameters: f64,
    /// MLP activation (`swiglu`, `geglu`, `gelu`).
    pub activation: String,
    pub source: String,
}

#[derive(Deserialize)]
struct Row {
    id: String,
    family: String,
    layers: u64,
    hidden: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    intermediate: u64,
    vocab: u64,
    tied_embeddings: Option<String>,
    params: f64,
    activation: String,
    norm: String,
    source: String,
    experts: Option<u64>,
    experts_per_token: Option<u64>,
    expert_intermediate: Option<u64>,
    shared_experts: Option<u64>,
    dense_layers: Option<u64>,
    cross_attention_layers: Option<u64>,
    dropout: String,
    linear_bias: String,
}

pub(super) fn parse(text: &str) -> Result<Vec<ModelEntry>, CatalogError> {
    let rows: Vec<Row> = read_rows("models.csv", text)?;
    rows.into_iter().map(entry).collect()
}

fn entry(r: Row) -> Result<ModelEntry, CatalogError> {
    let bad = |message: String| CatalogError {
        file: "models.csv",
        message,
    };
    let mlp = match r.activation.as_str() {
        "swiglu" | "geglu" => MlpKind::Gated,
        "gelu" => MlpKind::Plain,
        other => return Err(bad(format!("{}: unknown activation {other}", r.id))),
    };
    let norm = match r.norm.as_str() {
        "rmsnorm" => NormKind::RmsNorm,
        "layernorm" => NormKind::LayerNorm,
        other => return Err(bad(format!("{}: unknown norm {other}", r.id))),
    };
    let moe = r.experts.map(|experts| Moe {
        experts,
        experts_per_token: r.experts_per_token.unwrap_or(1),
        expert_intermediate: r.expert_intermediate.unwrap_or(r.intermediate),
        shared_experts: r.shared_experts.unwrap_or(0),
        dense_layers: r.dense_layers.unwrap_or(0),
    });
    let architecture = Architecture {
        layers: r.layers,
        hidden: r.hidden,
        heads: r.heads,
        kv_heads: r.kv_heads,
        head_dim: r.head_dim,
        intermediate: r.intermediate,
        vocab: r.vocab,
        // An unknown tie is counted untied: the published totals of those rows match it.
        tied_embeddings: r.tied_embeddings.as_deref() == Some("yes"),
        mlp,
        norm,
        moe,
        cross_attention_layers: r.cross_attention_layers.unwrap_or(0),
        dropout: r.dropout == "yes",
        linear_bias: r.linear_bias == "yes",
    };
    Ok(ModelEntry {
        id: r.id,
        family: r.family,
        parameters: architecture.total_parameters(),
        architecture,
        published_parameters: r.params,
        activation: r.activation,
        source: r.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<ModelEntry> {
        parse(include_str!("data/models.csv")).unwrap()
    }

    #[test]
    fn computed_parameter_counts_match_the_published_ones() {
        for m in catalog() {
            let ratio = m.parameters as f64 / m.published_parameters;
            assert!(
                (0.96..=1.04).contains(&ratio),
                "{}: computed {} vs published {}",
                m.id,
                m.parameters,
                m.published_parameters
            );
        }
    }

    #[test]
    fn llama_2_7b_counts_exactly() {
        let m = catalog()
            .into_iter()
            .find(|m| m.id == "llama-2-7b")
            .unwrap();
        // 2 × 32000 × 4096 + 32 × (4 × 4096² + 3 × 4096 × 11008 + 2 × 4096) + 4096
        assert_eq!(m.parameters, 6_738_415_616);
    }

    #[test]
    fn typical_shape_for_7b_is_llama_like() {
        let a = Architecture::typical_for(7_000_000_000);
        assert_eq!((a.layers, a.hidden), (33, 4224));
        let ratio = a.total_parameters() as f64 / 7e9;
        assert!((0.9..1.1).contains(&ratio), "{ratio}");
    }
}
