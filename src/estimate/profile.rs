//! Framework profiles: how each training stack stores the same configuration.
//!
//! Every switch names the code or measurement it comes from. The profiles were checked
//! against the rows of `tests/fixtures/reference/memory-calibration.csv` run by that stack.

use super::Framework;

/// Memory habits of one training stack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Under `amp_*`, trainable weights stay fp32 and autocast keeps half-precision copies
    /// for the backward pass (HF Trainer and LitGPT `bf16-mixed` use `torch.autocast` over
    /// fp32 modules). Otherwise weights are 16-bit with an fp32 master copy inside the
    /// optimizer (ZeRO paper §3.1; DeepSpeed, Megatron).
    pub amp_keeps_fp32_weights: bool,
    /// PEFT upcasts adapter weights to fp32 (`autocast_adapter_dtype=True`, PEFT ≥ 0.12),
    /// so adapter gradients and Adam states are fp32 too.
    pub fp32_adapters: bool,
    /// `peft.prepare_model_for_kbit_training` casts every non-quantised parameter
    /// (embeddings, norms, LM head) to fp32.
    pub kbit_upcasts_unquantized: bool,
    /// LitGPT's `--quantize bnb.nf4` replaces every `nn.Linear`, the LM head included.
    pub quantizes_lm_head: bool,
    /// LitGPT loads the 16-bit checkpoint onto the GPU and quantises it there, so a QLoRA
    /// run peaks at the 16-bit model size before training (S12 rows: Llama-2-7B QLoRA
    /// 13.68 GB `max_allocated` against 13.48 GB of bf16 weights). HF `from_pretrained`
    /// with a `BitsAndBytesConfig` quantises tensor by tensor while loading.
    pub quantizes_after_loading: bool,
    /// Extra bytes per trainable parameter in the optimizer's partition: DeepSpeed keeps an
    /// fp32 gradient partition beside the fp32 master (memory-modeling.md §1, DeepSpeed row:
    /// 20 B/param instead of the ZeRO paper's 16).
    pub extra_optimizer_bytes_mixed: f64,
    /// Megatron accumulates gradients in an fp32 `main_grad` buffer.
    pub fp32_gradients_mixed: bool,
    /// Live bytes per logit element (`b·s·V`) at the loss: `(16-bit compute, fp32 compute)`.
    pub logits_bytes: (f64, f64),
    /// Fused kernels (Unsloth's Triton RMSNorm/SwiGLU/cross-entropy) behave like
    /// `torch_compile` fusion for saved activations.
    pub fused_kernels: bool,
    /// The model keeps its own LM head even where the checkpoint ties it to the embedding:
    /// LitGPT's `GPT` builds `lm_head` and `transformer.wte` as separate parameters, and
    /// `convert_hf_checkpoint.py` fills a missing `lm_head.weight` with a copy of the
    /// embedding (`state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]`).
    pub unties_embeddings: bool,
    /// Adapter inputs pass through dropout before `lora_A` (LitGPT `lora_dropout` defaults to
    /// 0.05 in `litgpt/finetune/lora.py`; PEFT, torchtune and LLaMA-Factory default to 0.0,
    /// which PEFT turns into `nn.Identity`). Dropout keeps a 1-byte mask and `lora_A` keeps
    /// the dropped copy of its input.
    pub lora_dropout: bool,
    /// HF Trainer cannot step fp16 weights: `GradScaler.unscale_` raises "Attempting to
    /// unscale FP16 gradients", so full fine-tuning in `fp16` runs as AMP over fp32 weights.
    pub pure_fp16_runs_as_amp: bool,
}

/// Live bytes per logit element in the Hugging Face causal-LM loss path, 16-bit compute
/// (`LlamaForCausalLM.forward` → `ForCausalLMLoss`): the 16-bit logits (2), their fp32 upcast
/// (4), the shifted `.contiguous()` copy (4) and the `log_softmax` output kept for backward
/// (4); in backward the fp32 gradient replaces the upcast (memory-modeling.md §2.7: "2–4 live
/// fp32 copies").
/// In fp32 training the logits are fp32 and the upcast is a no-op: three fp32 copies.
const HF_LOGITS_BYTES: (f64, f64) = (2.0 + 3.0 * 4.0, 3.0 * 4.0);

/// torchtune's `CrossEntropyLoss` path: 16-bit logits, one fp32 upcast, the `log_softmax`
/// output (torchtune `recipes/full_finetune_single_device.py`, `logits.float()`).
const TORCHTUNE_LOGITS_BYTES: (f64, f64) = (2.0 + 4.0 + 4.0, 4.0 + 4.0);

/// LitGPT's fine-tuning scripts call `model(..., lm_head_chunk_size=128)` and
/// `chunked_cross_entropy`: the logit chunks stay alive in the training loop, and
/// `F.cross_entropy` on each chunk keeps its `log_softmax` output, in the logits' dtype, for
/// backward (`litgpt/utils.py`); the fp32 work is per 128-token chunk.
const LITGPT_CHUNKED_LOGITS_BYTES: (f64, f64) = (2.0 + 2.0, 4.0 + 4.0);

/// Unsloth's `fast_cross_entropy_loss` Triton kernel keeps the logits and one fp32
/// log-sum-exp per row, and writes the gradient into the logits' own storage.
const FUSED_CROSS_ENTROPY_LOGITS_BYTES: (f64, f64) = (2.0, 4.0);

impl Profile {
    pub fn of(framework: Framework) -> Profile {
        let generic = Profile {
            amp_keeps_fp32_weights: false,
            fp32_adapters: true,
            kbit_upcasts_unquantized: false,
            quantizes_lm_head: false,
            quantizes_after_loading: false,
            extra_optimizer_bytes_mixed: 0.0,
            fp32_gradients_mixed: false,
            logits_bytes: HF_LOGITS_BYTES,
            fused_kernels: false,
            lora_dropout: false,
            unties_embeddings: false,
            pure_fp16_runs_as_amp: false,
        };
        match framework {
            Framework::Generic => generic,
            Framework::HfTrainer => Profile {
                amp_keeps_fp32_weights: true,
                kbit_upcasts_unquantized: true,
                pure_fp16_runs_as_amp: true,
                ..generic
            },
            Framework::Deepspeed => Profile {
                extra_optimizer_bytes_mixed: 4.0,
                ..generic
            },
            Framework::Megatron => Profile {
                fp32_gradients_mixed: true,
                ..generic
            },
            // torchtune builds LoRA modules in the model dtype (bf16) and keeps the output
            // projection unquantised under QLoRA.
            Framework::Torchtune => Profile {
                fp32_adapters: false,
                logits_bytes: TORCHTUNE_LOGITS_BYTES,
                ..generic
            },
            Framework::Litgpt => Profile {
                amp_keeps_fp32_weights: true,
                fp32_adapters: false,
                quantizes_lm_head: true,
                quantizes_after_loading: true,
                logits_bytes: LITGPT_CHUNKED_LOGITS_BYTES,
                lora_dropout: true,
                unties_embeddings: true,
                ..generic
            },
            // Unsloth: fp32 PEFT adapters, fused kernels, chunked fused cross-entropy
            // (`fast_cross_entropy_loss`), and the HF Trainer underneath.
            Framework::Unsloth => Profile {
                amp_keeps_fp32_weights: true,
                kbit_upcasts_unquantized: true,
                logits_bytes: FUSED_CROSS_ENTROPY_LOGITS_BYTES,
                fused_kernels: true,
                pure_fp16_runs_as_amp: true,
                ..generic
            },
        }
    }

    /// Live bytes per logit element at the loss for a given activation element width.
    pub fn logits_bytes_per_element(&self, activation_bytes: f64) -> f64 {
        if activation_bytes >= 4.0 {
            self.logits_bytes.1
        } else {
            self.logits_bytes.0
        }
    }
}
