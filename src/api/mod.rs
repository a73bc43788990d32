//! Request types of the HTTP contract (design §2.1) and their resolution into the typed
//! plans the estimators take. Validation lives here, next to the types.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::catalog::{Architecture, Catalog, Gpu, MlpKind, Moe, NormKind, Projection, hf_config};
use crate::error::ApiError;
use crate::estimate::memory::{
    self, DEFAULT_ADAPTER_BOTTLENECK, DEFAULT_FREEZE_TRAINABLE_LAYERS, DEFAULT_VIRTUAL_TOKENS,
    MAX_SEARCH_GPUS, MAX_SEARCH_MICRO_BATCH, MemoryPlan,
};
use crate::estimate::{
    Attention, Framework, Method, ModelShape, Optimization, Optimizations, Optimizer, Parallelism,
    Precision, Targets,
};
use crate::validation::{FieldError, Problems};

pub mod cost;
pub mod gate;
pub mod recommend;
pub mod time;

pub use cost::CostRequest;
pub use gate::GateRequest;
pub use recommend::RecommendationRequest;
pub use time::TimeRequest;

/// Smallest and largest parameter count accepted for a bare `{"parameters": N}`.
const MIN_PARAMETERS: f64 = 1e6;
const MAX_PARAMETERS: f64 = 1e13;
/// Longest sequence accepted (design §6: "sequence length 0 or above 10^7" is rejected).
const MAX_SEQUENCE_LENGTH: u64 = 10_000_000;
/// Most blocks a posted architecture may have (the largest published dense models have
/// about 100–130), and so the most pipeline stages.
pub const MAX_LAYERS: u64 = 1000;
/// Most tensor-parallel ranks: it splits attention heads, and published runs keep it
/// within one 8-GPU node; 64 is a ceiling that leaves room, not a recommendation.
pub const MAX_TENSOR_PARALLEL: u64 = 64;
/// Most bytes a plan may need per GPU: the largest int64 (about 2^63 bytes, 8 EiB), as
/// the OpenAPI document types byte counts; 4·10^7 times the memory of the largest GPU.
const MAX_PLAN_BYTES: f64 = i64::MAX as f64;

/// Which model: a catalog id, an architecture, a Hugging Face `config.json`, or a bare
/// parameter count.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ModelInput {
    /// A catalog id (`GET /v1/models`).
    #[schema(example = "llama-3.1-8b")]
    Id(String),
    Architecture {
        architecture: ArchitectureInput,
    },
    HfConfig {
        /// A Hugging Face `config.json` object (Llama, Mistral, Mixtral, Qwen/Qwen2/Qwen3,
        /// Gemma 1–3, Phi, Phi-3, GPT-2, GPT-NeoX, Falcon, BERT).
        #[schema(value_type = Object)]
        hf_config: Value,
    },
    Parameters {
        /// Parameter count: model states are exact, activations use a typical shape.
        #[schema(example = 7.0e9, minimum = 1e6, maximum = 1e13)]
        parameters: f64,
    },
}

impl<'de> Deserialize<'de> for ModelInput {
    /// Reads the form from the object's one key and its value through the caller's
    /// deserializer, so that an error inside an architecture names its field
    /// (`/model/architecture/layers`), not only `/model`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, IgnoredAny, MapAccess, Visitor};

        const EXPECTED: &str = "a catalog id string or an object with exactly one of `architecture`, `hf_config`, `parameters`";

        struct Form;

        impl<'de> Visitor<'de> for Form {
            type Value = ModelInput;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }

            fn visit_str<E: Error>(self, id: &str) -> Result<ModelInput, E> {
                Ok(ModelInput::Id(id.to_string()))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ModelInput, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(A::Error::custom(format!("model must be {EXPECTED}")));
                };
                let model = match key.as_str() {
                    "architecture" => ModelInput::Architecture {
                        architecture: map.next_value()?,
                    },
                    "hf_config" => ModelInput::HfConfig {
                        hf_config: map.next_value()?,
                    },
                    "parameters" => ModelInput::Parameters {
                        parameters: map.next_value()?,
                    },
                    other => {
                        return Err(A::Error::custom(format!(
                            "unknown model form `{other}`, expected one of `architecture`, `hf_config`, `parameters`"
                        )));
                    }
                };
                if map.next_key::<IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom(format!("model must be {EXPECTED}")));
                }
                Ok(model)
            }
        }

        deserializer.deserialize_any(Form)
    }
}

impl ModelInput {
    /// The model's shape: a catalog entry (404 with the closest ids when unknown), an
    /// architecture, a Hugging Face config, or a typical shape for a parameter count.
    pub fn resolve(
        &self,
        catalog: &Catalog,
        problems: &mut Problems,
    ) -> Result<ModelShape, ApiError> {
        Ok(match self {
            ModelInput::Id(id) => match catalog.model(id) {
                Some(entry) => ModelShape::from_architecture(entry.architecture.clone()),
                None => {
                    return Err(ApiError::NotFound {
                        what: "model",
                        id: id.clone(),
                        suggestions: catalog.closest_models(id),
                    });
                }
            },
            ModelInput::Architecture { architecture } => within_parameter_limit(
                ModelShape::from_architecture(architecture.resolve(problems)),
                "/model/architecture",
                problems,
            ),
            ModelInput::HfConfig { hf_config } => {
                match hf_config::parse(hf_config, "/model/hf_config") {
                    Ok(architecture) => within_parameter_limit(
                        ModelShape::from_architecture(architecture),
                        "/model/hf_config",
                        problems,
                    ),
                    Err(errors) => return Err(ApiError::Invalid(errors)),
                }
            }
            ModelInput::Parameters { parameters } => {
                if !(MIN_PARAMETERS..=MAX_PARAMETERS).contains(parameters) {
                    problems.push(
                        "/model/parameters",
                        format!("must be between {MIN_PARAMETERS:e} and {MAX_PARAMETERS:e}; got {parameters:e}"),
                    );
                }
                ModelShape::from_parameter_count(
                    parameters.clamp(MIN_PARAMETERS, MAX_PARAMETERS) as u64
                )
            }
        })
    }
}

/// A shape whose parameter count is past the limit a bare count has (design §6 rejects
/// 10^15 parameters) is reported at `pointer`.
fn within_parameter_limit(shape: ModelShape, pointer: &str, problems: &mut Problems) -> ModelShape {
    if shape.parameters as f64 > MAX_PARAMETERS {
        problems.push(
            pointer,
            format!(
                "describes {:e} parameters, above the {MAX_PARAMETERS:e} this service estimates",
                shape.parameters as f64
            ),
        );
    }
    shape
}

/// A transformer architecture given field by field.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchitectureInput {
    #[schema(minimum = 1, maximum = 1000)]
    pub layers: u64,
    #[schema(minimum = 1, maximum = 131072)]
    pub hidden: u64,
    /// At most `hidden`.
    #[schema(minimum = 1)]
    pub heads: u64,
    /// Divides `heads` (grouped-query attention).
    #[schema(minimum = 1)]
    pub kv_heads: u64,
    #[schema(minimum = 1, maximum = 1048576)]
    pub intermediate: u64,
    #[schema(minimum = 1, maximum = 10000000)]
    pub vocab: u64,
    pub tied_embeddings: bool,
    /// Defaults to `hidden / heads`.
    #[schema(minimum = 1, maximum = 1024)]
    pub head_dim: Option<u64>,
    /// Given together with `experts_per_token`.
    #[schema(minimum = 2, maximum = 1024)]
    pub experts: Option<u64>,
    /// At most `experts`.
    #[schema(minimum = 1)]
    pub experts_per_token: Option<u64>,
    /// MLP width of one expert (defaults to `intermediate`).
    #[schema(minimum = 1, maximum = 1048576)]
    pub expert_intermediate: Option<u64>,
    #[schema(maximum = 64)]
    pub shared_experts: Option<u64>,
    /// `gated` (SwiGLU/GeGLU, default) or `plain` (GELU).
    pub mlp: Option<MlpKind>,
    /// `rms_norm` (default) or `layer_norm`.
    pub norm: Option<NormKind>,
}

impl ArchitectureInput {
    fn resolve(&self, problems: &mut Problems) -> Architecture {
        let p = "/model/architecture";
        problems.range(&format!("{p}/layers"), self.layers, 1, MAX_LAYERS);
        problems.range(&format!("{p}/hidden"), self.hidden, 1, 131_072);
        problems.range(&format!("{p}/heads"), self.heads, 1, self.hidden.max(1));
        problems.range(
            &format!("{p}/kv_heads"),
            self.kv_heads,
            1,
            self.heads.max(1),
        );
        if self.kv_heads > 0 && !self.heads.is_multiple_of(self.kv_heads) {
            problems.push(
                format!("{p}/kv_heads"),
                "must divide heads (grouped-query attention)",
            );
        }
        problems.range(
            &format!("{p}/intermediate"),
            self.intermediate,
            1,
            1_048_576,
        );
        problems.range(&format!("{p}/vocab"), self.vocab, 1, 10_000_000);
        if let Some(head_dim) = self.head_dim {
            problems.range(&format!("{p}/head_dim"), head_dim, 1, 1024);
        }
        let moe = match (self.experts, self.experts_per_token) {
            (None, None) => None,
            (Some(experts), Some(per_token)) => {
                problems.range(&format!("{p}/experts"), experts, 2, 1024);
                problems.range(
                    &format!("{p}/experts_per_token"),
                    per_token,
                    1,
                    experts.max(1),
                );
                let expert_intermediate = self.expert_intermediate.unwrap_or(self.intermediate);
                problems.range(
                    &format!("{p}/expert_intermediate"),
                    expert_intermediate,
                    1,
                    1_048_576,
                );
                let shared_experts = self.shared_experts.unwrap_or(0);
                problems.range(&format!("{p}/shared_experts"), shared_experts, 0, 64);
                // Out-of-range values are reported above; the shape is kept within range
                // so that counting its parameters cannot overflow.
                Some(Moe {
                    experts: experts.clamp(2, 1024),
                    experts_per_token: per_token.clamp(1, experts.clamp(2, 1024)),
                    expert_intermediate: expert_intermediate.clamp(1, 1_048_576),
                    shared_experts: shared_experts.min(64),
                    dense_layers: 0,
                })
            }
            _ => {
                problems.push(
                    format!("{p}/experts"),
                    "experts and experts_per_token go together",
                );
                None
            }
        };
        // Every value within its range (the errors are already recorded), so that
        // parameter counts cannot overflow before the request is refused.
        let hidden = self.hidden.clamp(1, 131_072);
        let heads = self.heads.clamp(1, hidden);
        Architecture {
            layers: self.layers.clamp(1, MAX_LAYERS),
            hidden,
            heads,
            kv_heads: self.kv_heads.clamp(1, heads),
            head_dim: self.head_dim.unwrap_or(hidden / heads).clamp(1, 1024),
            intermediate: self.intermediate.clamp(1, 1_048_576),
            vocab: self.vocab.clamp(1, 10_000_000),
            tied_embeddings: self.tied_embeddings,
            mlp: self.mlp.unwrap_or(MlpKind::Gated),
            norm: self.norm.unwrap_or(NormKind::RmsNorm),
            moe,
            cross_attention_layers: 0,
            dropout: false,
            linear_bias: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum MethodName {
    #[default]
    Full,
    Lora,
    Qlora,
    PrefixTuning,
    PromptTuning,
    Adapter,
    Freeze,
}

/// LoRA settings (for `lora` and `qlora`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoraInput {
    /// Rank r (default 8), at most the model's hidden size.
    #[schema(example = 8, minimum = 1, maximum = 131072)]
    pub rank: Option<u64>,
    /// Scaling alpha (default 16); it does not change memory.
    #[schema(example = 16, exclusive_minimum = 0)]
    pub alpha: Option<f64>,
    /// Projections to adapt, or `"all_linear"` (default `["q_proj", "v_proj"]`, PEFT's
    /// default for Llama-family models).
    pub targets: Option<LoraTargets>,
    /// QLoRA only: double-quantise the NF4 constants (default true, as in the QLoRA paper).
    pub double_quantization: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum LoraTargets {
    /// `"all_linear"`: every projection of every block (PEFT `all-linear`).
    #[schema(example = "all_linear")]
    All(AllLinear),
    #[schema(example = json!(["q_proj", "k_proj", "v_proj", "o_proj"]))]
    List(Vec<ProjectionName>),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AllLinear {
    AllLinear,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProjectionName {
    QProj,
    KProj,
    VProj,
    OProj,
    GateProj,
    UpProj,
    DownProj,
}

impl From<ProjectionName> for Projection {
    fn from(name: ProjectionName) -> Self {
        match name {
            ProjectionName::QProj => Projection::Q,
            ProjectionName::KProj => Projection::K,
            ProjectionName::VProj => Projection::V,
            ProjectionName::OProj => Projection::O,
            ProjectionName::GateProj => Projection::Gate,
            ProjectionName::UpProj => Projection::Up,
            ProjectionName::DownProj => Projection::Down,
        }
    }
}

/// Parallel layout and sharding.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelismInput {
    /// GPUs in the job (default 1); a multiple of `tensor_parallel × pipeline_parallel`.
    #[schema(example = 4, minimum = 1, maximum = 4096)]
    pub gpus: Option<u64>,
    /// ZeRO stage 0–3 (FSDP FULL_SHARD = 3, SHARD_GRAD_OP = 2; default 0).
    #[schema(example = 3, maximum = 3)]
    pub zero_stage: Option<u8>,
    pub offload_optimizer: Option<bool>,
    /// Needs ZeRO stage 3.
    pub offload_parameters: Option<bool>,
    /// Default 1; at most the model's attention heads, and at most 64.
    #[schema(minimum = 1, maximum = 64)]
    pub tensor_parallel: Option<u64>,
    /// Default 1; at most the model's layers.
    #[schema(minimum = 1, maximum = 1000)]
    pub pipeline_parallel: Option<u64>,
}

impl ParallelismInput {
    /// The layout with its defaults (1 GPU, ZeRO stage 0, no model parallelism), every
    /// field checked; the model caps tensor and pipeline parallelism at its heads and
    /// layers (a fleet priced by hours, with no model, at the schema's ceilings).
    pub fn resolve(
        &self,
        max_tensor_parallel: u64,
        max_pipeline_parallel: u64,
        problems: &mut Problems,
    ) -> Parallelism {
        let parallelism = Parallelism {
            gpus: self.gpus.unwrap_or(1),
            zero_stage: self.zero_stage.unwrap_or(0),
            offload_optimizer: self.offload_optimizer.unwrap_or(false),
            offload_parameters: self.offload_parameters.unwrap_or(false),
            tensor_parallel: self.tensor_parallel.unwrap_or(1),
            pipeline_parallel: self.pipeline_parallel.unwrap_or(1),
        };
        problems.range("/parallelism/gpus", parallelism.gpus, 1, MAX_SEARCH_GPUS);
        if parallelism.zero_stage > 3 {
            problems.push(
                "/parallelism/zero_stage",
                format!("must be one of 0, 1, 2, 3; got {}", parallelism.zero_stage),
            );
        }
        problems.range(
            "/parallelism/tensor_parallel",
            parallelism.tensor_parallel,
            1,
            max_tensor_parallel,
        );
        problems.range(
            "/parallelism/pipeline_parallel",
            parallelism.pipeline_parallel,
            1,
            max_pipeline_parallel,
        );
        let model_parallel =
            parallelism.tensor_parallel.max(1) * parallelism.pipeline_parallel.max(1);
        if !parallelism.gpus.is_multiple_of(model_parallel) {
            problems.push(
                "/parallelism/gpus",
                format!(
                    "must be a multiple of tensor_parallel × pipeline_parallel = {model_parallel}"
                ),
            );
        }
        if parallelism.offload_parameters && parallelism.zero_stage != 3 {
            problems.push(
                "/parallelism/offload_parameters",
                "needs zero_stage 3 (parameters are only partitioned at stage 3)",
            );
        }
        parallelism
    }
}

/// Inputs of a memory estimate (design §2.1). Every field but `model` has a default,
/// stated in the answer's `assumptions`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRequest {
    pub model: ModelInput,
    /// `full` (default), `lora`, `qlora`, `prefix_tuning`, `prompt_tuning`, `adapter`,
    /// `freeze`.
    pub method: Option<MethodName>,
    pub lora: Option<LoraInput>,
    /// Prefix/prompt tuning: virtual tokens (default 20).
    #[schema(minimum = 1, maximum = 10000)]
    pub virtual_tokens: Option<u64>,
    /// Adapters: bottleneck width (default 64), at most the model's hidden size.
    #[schema(minimum = 1, maximum = 131072)]
    pub adapter_bottleneck: Option<u64>,
    /// Freeze: how many top blocks are trained (default 2), at most the model's layers.
    #[schema(minimum = 1, maximum = 1000)]
    pub trainable_layers: Option<u64>,
    pub precision: Option<Precision>,
    pub optimizer: Option<Optimizer>,
    /// Per GPU (default 1).
    #[schema(example = 1, minimum = 1, maximum = 65536)]
    pub micro_batch_size: Option<u64>,
    /// Tokens per sample (default 2048).
    #[schema(example = 2048, minimum = 1, maximum = 10000000)]
    pub sequence_length: Option<u64>,
    /// Longest sample in the data, when batches are padded to their longest sample rather
    /// than full (default: every batch full at `sequence_length`); at most
    /// `sequence_length`.
    #[schema(minimum = 1, maximum = 10000000)]
    pub max_sample_tokens: Option<u64>,
    pub gradient_checkpointing: Option<bool>,
    pub attention: Option<Attention>,
    /// Catalog GPU for the fit table (default: every catalog GPU).
    #[schema(example = "a100-80gb")]
    pub gpu: Option<String>,
    pub parallelism: Option<ParallelismInput>,
    pub framework: Option<Framework>,
    #[serde(default)]
    pub optimizations: Vec<Optimization>,
}

/// A resolved memory request: the plan, the GPUs of the fit table, and what was defaulted.
pub struct ResolvedMemory<'c> {
    pub plan: MemoryPlan,
    pub gpus: &'c [Gpu],
    pub defaulted: Vec<String>,
}

impl MemoryRequest {
    /// Validates every field and turns the request into a plan; all bad fields are reported
    /// together.
    pub fn resolve<'c>(&self, catalog: &'c Catalog) -> Result<ResolvedMemory<'c>, ApiError> {
        let mut problems = Problems::default();
        let mut defaulted = Vec::new();
        let mut default =
            |name: &str, value: &str| defaulted.push([name, ": ", value, " (default)"].concat());

        let model = self.model.resolve(catalog, &mut problems)?;
        let arch = &model.architecture;

        let method_name = self.method.unwrap_or_else(|| {
            default("method", "full");
            MethodName::Full
        });
        let lora_family = matches!(method_name, MethodName::Lora | MethodName::Qlora);
        let only_for =
            |field: &str, given: bool, ok: bool, methods: &str, problems: &mut Problems| {
                if given && !ok {
                    problems.push(format!("/{field}"), format!("only for method {methods}"));
                }
            };
        only_for(
            "lora",
            self.lora.is_some(),
            lora_family,
            "lora or qlora",
            &mut problems,
        );
        only_for(
            "virtual_tokens",
            self.virtual_tokens.is_some(),
            matches!(
                method_name,
                MethodName::PrefixTuning | MethodName::PromptTuning
            ),
            "prefix_tuning or prompt_tuning",
            &mut problems,
        );
        only_for(
            "adapter_bottleneck",
            self.adapter_bottleneck.is_some(),
            method_name == MethodName::Adapter,
            "adapter",
            &mut problems,
        );
        only_for(
            "trainable_layers",
            self.trainable_layers.is_some(),
            method_name == MethodName::Freeze,
            "freeze",
            &mut problems,
        );

        let lora = self.lora.clone().unwrap_or(LoraInput {
            rank: None,
            alpha: None,
            targets: None,
            double_quantization: None,
        });
        let rank = lora.rank.unwrap_or(8);
        if lora_family {
            problems.range("/lora/rank", rank, 1, arch.hidden.max(1));
            if let Some(alpha) = lora.alpha
                && !(alpha.is_finite() && alpha > 0.0)
            {
                problems.push("/lora/alpha", "must be a positive number");
            }
        }
        only_for(
            "lora/double_quantization",
            lora.double_quantization.is_some(),
            method_name == MethodName::Qlora,
            "qlora",
            &mut problems,
        );
        let targets: Targets = match &lora.targets {
            None => [Projection::Q, Projection::V].into_iter().collect(),
            Some(LoraTargets::All(_)) => Targets::all(),
            Some(LoraTargets::List(list)) => {
                if list.is_empty() {
                    problems.push("/lora/targets", "must name at least one projection");
                }
                list.iter().map(|&p| Projection::from(p)).collect()
            }
        };
        if lora_family && targets.contains(Projection::Gate) && arch.mlp == MlpKind::Plain {
            problems.push(
                "/lora/targets",
                "gate_proj: this model's MLP has no gate projection",
            );
        }
        let virtual_tokens = self.virtual_tokens.unwrap_or(DEFAULT_VIRTUAL_TOKENS);
        problems.range("/virtual_tokens", virtual_tokens, 1, 10_000);
        let bottleneck = self
            .adapter_bottleneck
            .unwrap_or(DEFAULT_ADAPTER_BOTTLENECK);
        problems.range("/adapter_bottleneck", bottleneck, 1, arch.hidden.max(1));
        let trainable_layers = self
            .trainable_layers
            .unwrap_or(DEFAULT_FREEZE_TRAINABLE_LAYERS.min(arch.layers));
        problems.range("/trainable_layers", trainable_layers, 1, arch.layers.max(1));
        let method = match method_name {
            MethodName::Full => Method::Full,
            MethodName::Lora => Method::Lora { rank, targets },
            MethodName::Qlora => Method::Qlora {
                rank,
                targets,
                double_quantization: lora.double_quantization.unwrap_or(true),
            },
            MethodName::PrefixTuning => Method::PrefixTuning { virtual_tokens },
            MethodName::PromptTuning => Method::PromptTuning { virtual_tokens },
            MethodName::Adapter => Method::Adapter { bottleneck },
            MethodName::Freeze => Method::Freeze { trainable_layers },
        };

        let precision = self.precision.unwrap_or_else(|| {
            default("precision", "amp_bf16");
            Precision::AmpBf16
        });
        let optimizer = self.optimizer.unwrap_or_else(|| {
            default("optimizer", "adamw");
            Optimizer::Adamw
        });
        let micro_batch_size = self.micro_batch_size.unwrap_or_else(|| {
            default("micro_batch_size", "1");
            1
        });
        problems.range(
            "/micro_batch_size",
            micro_batch_size,
            1,
            MAX_SEARCH_MICRO_BATCH,
        );
        let sequence_length = self.sequence_length.unwrap_or_else(|| {
            default("sequence_length", "2048");
            2048
        });
        problems.range("/sequence_length", sequence_length, 1, MAX_SEQUENCE_LENGTH);
        if let Some(longest) = self.max_sample_tokens {
            problems.range("/max_sample_tokens", longest, 1, sequence_length.max(1));
        }
        let gradient_checkpointing = self.gradient_checkpointing.unwrap_or_else(|| {
            default("gradient_checkpointing", "false");
            false
        });
        let attention = self.attention.unwrap_or_else(|| {
            default("attention", "flash");
            Attention::Flash
        });
        let framework = self.framework.unwrap_or_else(|| {
            default("framework", "generic");
            Framework::Generic
        });

        if self.parallelism.is_none() {
            default("parallelism", "1 GPU, ZeRO stage 0");
        }
        let parallelism = self.parallelism.clone().unwrap_or_default().resolve(
            arch.heads.clamp(1, MAX_TENSOR_PARALLEL),
            arch.layers.max(1),
            &mut problems,
        );

        let gpu = match &self.gpu {
            None => None,
            Some(id) => match catalog.gpu(id) {
                Some(gpu) => Some(gpu),
                None => {
                    return Err(ApiError::NotFound {
                        what: "gpu",
                        id: id.clone(),
                        suggestions: catalog.closest_gpus(id),
                    });
                }
            },
        };
        let plan = MemoryPlan {
            model,
            method,
            precision,
            optimizer,
            micro_batch_size,
            sequence_length,
            max_sample_tokens: self.max_sample_tokens,
            gradient_checkpointing,
            attention,
            parallelism,
            framework,
            optimizations: Optimizations::from_list(&self.optimizations),
        };
        let plan = problems.finish(plan).map_err(ApiError::Invalid)?;
        let largest = memory::largest_reported_bytes(&plan);
        if largest > MAX_PLAN_BYTES {
            return Err(ApiError::Invalid(vec![FieldError::new(
                "",
                format!(
                    "the plan needs about {largest:.1e} bytes per GPU, more than the 2^63 this service answers in and far beyond any GPU: lower micro_batch_size or sequence_length"
                ),
            )]));
        }
        let gpus = match gpu {
            Some(gpu) => std::slice::from_ref(gpu),
            None => catalog.gpus(),
        };
        Ok(ResolvedMemory {
            plan,
            gpus,
            defaulted,
        })
    }
}

/// Parses a JSON body into `T`, naming the failing field as a JSON pointer.
pub fn from_json_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // The plain parser first: tracking the path costs every body, and only a failing
    // one needs it, so that one is parsed again to name the field.
    if let Ok(parsed) = serde_json::from_slice(bytes) {
        return Ok(parsed);
    }
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let pointer = pointer_of(error.path());
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::MalformedJson(inner.to_string())
        } else {
            ApiError::Invalid(vec![FieldError::new(
                pointer,
                strip_position(&inner.to_string()),
            )])
        }
    })
}

/// Deserialises an already-parsed JSON value (the GET forms build one from the query).
pub fn from_json_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    // As `from_json_slice`: the path is tracked only for a value that fails.
    if let Ok(parsed) = T::deserialize(&value) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let pointer = pointer_of(error.path());
        ApiError::Invalid(vec![FieldError::new(
            pointer,
            error.into_inner().to_string(),
        )])
    })
}

/// RFC 6901 pointer of a serde path (`~` and `/` in keys escaped).
fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.replace('~', "~0").replace('/', "~1")),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .map(|token| format!("/{token}"))
        .collect()
}

/// serde_json appends " at line L column C"; the pointer already says where.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
