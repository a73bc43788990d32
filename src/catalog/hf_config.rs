//! Turns a Hugging Face `config.json` object into an [`Architecture`].
//!
//! Field names and defaults follow each family's `PretrainedConfig` subclass in
//! `transformers` (e.g. `LlamaConfig.tie_word_embeddings = False`,
//! `GemmaConfig.tie_word_embeddings = True`, `FalconConfig.ffn_hidden_size = 4 · hidden`).

use serde_json::{Map, Value};

use super::model::{Architecture, MlpKind, Moe, NormKind};
use crate::validation::{FieldError, Problems};

/// `model_type` values this parser understands.
pub const SUPPORTED_MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi",
    "phi3",
    "gpt_neox",
    "falcon",
    "gpt2",
    "bert",
];

/// Parses a config object; `pointer` is where it sits in the request (for error messages).
pub fn parse(config: &Value, pointer: &str) -> Result<Architecture, Vec<FieldError>> {
    let Some(object) = config.as_object() else {
        return Err(vec![FieldError::new(
            pointer,
            "must be a config.json object",
        )]);
    };
    // Multimodal configs (Gemma 3, Llava) nest the language model under `text_config`.
    if let Some(text) = object.get("text_config").filter(|v| v.is_object()) {
        return parse(text, &format!("{pointer}/text_config"));
    }
    let model_type = object
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !SUPPORTED_MODEL_TYPES.contains(&model_type) {
        return Err(vec![FieldError::new(
            format!("{pointer}/model_type"),
            format!(
                "unsupported model_type {model_type:?}; supported: {}",
                SUPPORTED_MODEL_TYPES.join(", ")
            ),
        )]);
    }
    let mut fields = Fields {
        object,
        pointer,
        problems: Problems::default(),
    };
    let architecture = family(model_type, &mut fields);
    within_limits(&architecture, pointer, &mut fields.problems);
    fields.problems.finish(architecture)
}

/// The same limits a field-by-field architecture has (`/model/architecture`), so that
/// no accepted config can overflow a parameter count.
fn within_limits(a: &Architecture, pointer: &str, problems: &mut Problems) {
    let mut check = |name: &str, value: u64, high: u64| {
        if value > high {
            problems.push(
                format!("{pointer}/{name}"),
                format!("must be at most {high}; got {value}"),
            );
        }
    };
    check("num_hidden_layers", a.layers, 1000);
    check("hidden_size", a.hidden, 131_072);
    check("num_attention_heads", a.heads, a.hidden.max(1));
    check("head_dim", a.head_dim, 1024);
    check("intermediate_size", a.intermediate, 1_048_576);
    check("vocab_size", a.vocab, 10_000_000);
    if let Some(moe) = a.moe {
        check("num_local_experts", moe.experts, 1024);
        check("moe_intermediate_size", moe.expert_intermediate, 1_048_576);
        check("n_shared_experts", moe.shared_experts, 64);
    }
}

struct Fields<'a> {
    object: &'a Map<String, Value>,
    pointer: &'a str,
    problems: Problems,
}

impl Fields<'_> {
    /// The first of `names` present, as a positive integer; records an error when none is.
    fn required(&mut self, names: &[&str]) -> u64 {
        match self.optional(names) {
            Some(v) => v,
            None => {
                self.problems.push(
                    format!("{}/{}", self.pointer, names[0]),
                    "required positive integer is missing",
                );
                1
            }
        }
    }

    fn optional(&mut self, names: &[&str]) -> Option<u64> {
        let (name, value) = names
            .iter()
            .find_map(|n| self.object.get(*n).map(|v| (*n, v)))?;
        match value.as_u64() {
            Some(v) if v > 0 && v < 1 << 32 => Some(v),
            _ if value.is_null() => None,
            _ => {
                self.problems.push(
                    format!("{}/{name}", self.pointer),
                    format!("must be a positive integer below 2^32; got {value}"),
                );
                None
            }
        }
    }

    fn flag(&self, name: &str, default: bool) -> bool {
        self.object
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    fn number(&self, name: &str) -> f64 {
        self.object.get(name).and_then(Value::as_f64).unwrap_or(0.0)
    }
}

fn family(model_type: &str, f: &mut Fields) -> Architecture {
    let layers = f.required(&["num_hidden_layers", "n_layer", "num_layers"]);
    let hidden = f.required(&["hidden_size", "n_embd", "d_model"]);
    let heads = f.required(&["num_attention_heads", "n_head"]);
    let vocab = f.required(&["vocab_size"]);
    let head_dim = f
        .optional(&["head_dim"])
        .unwrap_or(hidden / heads.max(1))
        .max(1);
    let gpt_style = matches!(model_type, "phi" | "gpt_neox" | "falcon" | "gpt2" | "bert");
    let kv_heads = match model_type {
        "falcon" if f.flag("new_decoder_architecture", false) => {
            f.optional(&["num_kv_heads"]).unwrap_or(heads)
        }
        "falcon" if f.flag("multi_query", true) => 1,
        _ => f
            .optional(&["num_key_value_heads", "num_kv_heads"])
            .unwrap_or(heads),
    };
    let intermediate = match model_type {
        // Qwen (v1) lists the fused gate+up width.
        "qwen" => f.required(&["intermediate_size"]) / 2,
        "falcon" => f.optional(&["ffn_hidden_size"]).unwrap_or(4 * hidden),
        "gpt2" => f.optional(&["n_inner"]).unwrap_or(4 * hidden),
        _ => f.required(&["intermediate_size"]),
    };
    let tied_default = matches!(
        model_type,
        "gemma" | "gemma2" | "gemma3_text" | "falcon" | "gpt2" | "bert"
    );
    let moe = match model_type {
        "mixtral" => Some(Moe {
            experts: f.required(&["num_local_experts"]),
            experts_per_token: f.required(&["num_experts_per_tok"]),
            expert_intermediate: intermediate,
            shared_experts: 0,
            dense_layers: 0,
        }),
        "qwen2_moe" | "qwen3_moe" => {
            let expert_intermediate = f.required(&["moe_intermediate_size"]);
            let shared_width = f
                .optional(&["shared_expert_intermediate_size"])
                .unwrap_or(0);
            Some(Moe {
                experts: f.required(&["num_experts"]),
                experts_per_token: f.required(&["num_experts_per_tok"]),
                expert_intermediate,
                // A shared expert of width w counts as w / expert width experts.
                shared_experts: shared_width / expert_intermediate.max(1),
                dense_layers: 0,
            })
        }
        _ => None,
    };
    let dropout = [
        "attention_probs_dropout_prob",
        "attn_pdrop",
        "attention_dropout",
        "hidden_dropout_prob",
        "resid_pdrop",
    ]
    .iter()
    .any(|name| f.number(name) > 0.0);
    Architecture {
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        tied_embeddings: f.flag("tie_word_embeddings", tied_default),
        mlp: if gpt_style {
            MlpKind::Plain
        } else {
            MlpKind::Gated
        },
        norm: if gpt_style {
            NormKind::LayerNorm
        } else {
            NormKind::RmsNorm
        },
        moe,
        cross_attention_layers: 0,
        dropout,
        linear_bias: matches!(model_type, "phi" | "gpt_neox" | "gpt2" | "bert"),
    }
}
