//! What transformers' config class of each `model_type` gives a config.json that leaves a key
//! out, and which keys it reads at all (transformers 5.x), so that a hand-written or minimal
//! config is read as transformers reads it: a Mistral without `num_key_value_heads` has 8, a
//! Qwen3-MoE without `num_experts` has 128, a GPT-2 ignores `intermediate_size`.

/// The key names a type's sizes are read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// GPT-2's (`n_layer`, `n_head`, `n_embd`, `n_inner`, `n_positions`) and the aliases its
    /// config class maps onto them (`num_hidden_layers`, `num_attention_heads`, `hidden_size`,
    /// `max_position_embeddings`; not `intermediate_size` or `num_key_value_heads`).
    Gpt2,
    /// The Llama-style names (`num_hidden_layers`, `hidden_size`, `intermediate_size`, ...).
    HuggingFace,
    /// A type parlab neither counts nor runs: either set, so that it is refused for its type.
    Either,
}

/// How a type's feed-forward block may be a mixture of experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixtureRule {
    /// A type parlab neither counts nor runs: its expert keys are not read.
    NotRead,
    /// A dense type: transformers reads no expert keys (parlab refuses a config that has them).
    Dense,
    /// parlab's GPT-2 mixture: experts where `num_local_experts` (or `num_experts`) is given,
    /// each `moe_intermediate_size` wide (else the dense width); a null key is absent.
    WhenGiven {
        /// Experts per token where `num_experts_per_tok` is absent.
        top_k: u32,
    },
    /// A mixture type: experts in every block, as many as its config class says where absent.
    Always {
        /// Experts per block where `num_local_experts` and `num_experts` are absent.
        count: u32,
        /// Experts per token where `num_experts_per_tok` is absent.
        top_k: u32,
        /// One expert's width.
        width: ExpertWidth,
    },
}

/// Where a mixture type's expert width comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertWidth {
    /// `intermediate_size` (Mixtral: it reads no `moe_intermediate_size`).
    Dense,
    /// `moe_intermediate_size`, this where absent (Qwen3-MoE).
    Named(u32),
}

/// Which biases a type's attention projections have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionBias {
    /// None, whatever the config says (Mistral, Mixtral, Phi-3: `bias=False` in the code).
    Never,
    /// On q, k, v and o where `attention_bias` is true (Llama, Qwen3, Gemma).
    WhenFlagged,
    /// On q, k and v always, never on o (Qwen2).
    QkvAlways,
}

/// Whether and how a type's attention looks at a sliding window of past tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Never (the type reads no `sliding_window`).
    Never,
    /// `sliding_window` (null: none), this where absent (Mistral 4096, Mixtral none).
    Key(Option<u32>),
    /// Only where `use_sliding_window` is true, then `sliding_window` or `window`, on the layers
    /// from `max_window_layers` on (Qwen2, Qwen3: this where absent) or on every layer (None:
    /// Qwen3-MoE).
    WhenUsed {
        /// The window where `sliding_window` is absent.
        window: u32,
        /// The first sliding layer where `max_window_layers` is absent; None: every layer slides.
        from_layer: Option<u32>,
    },
}

/// What transformers' config class of a `model_type` reads and assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassDefaults {
    /// The key names its sizes are read under.
    pub names: Names,
    /// The feed-forward width where absent; None: 4 × the width (GPT-2's `n_inner`).
    pub intermediate: Option<u32>,
    /// Whether it reads `num_key_value_heads` (GPT-2's attention has one per query head).
    pub reads_kv_heads: bool,
    /// Key/value heads where `num_key_value_heads` is absent; None: one per query head.
    pub kv_heads: Option<u32>,
    /// Whether a null `num_key_value_heads` is read as one per query head (a field typed
    /// `int | None`: Llama, Phi-3, Qwen2, Qwen3); elsewhere transformers refuses it, as parlab does.
    pub null_kv_heads: bool,
    /// Positions its table holds where none is named; 0: not known.
    pub positions: u32,
    /// Its head width where `head_dim` is absent; None: width / heads.
    pub head_dim: Option<u32>,
    /// Its mixture of experts.
    pub mixture: MixtureRule,
    /// Its attention biases.
    pub attention_bias: AttentionBias,
    /// Whether it reads `mlp_bias` (Llama only).
    pub mlp_bias: bool,
    /// Its sliding window.
    pub window: Window,
}

/// A Llama-style dense type with these defaults and every other rule at Llama's.
const fn dense(intermediate: u32, kv_heads: Option<u32>, positions: u32) -> ClassDefaults {
    ClassDefaults {
        names: Names::HuggingFace,
        intermediate: Some(intermediate),
        reads_kv_heads: true,
        kv_heads,
        null_kv_heads: kv_heads.is_none(),
        positions,
        head_dim: None,
        mixture: MixtureRule::Dense,
        attention_bias: AttentionBias::WhenFlagged,
        mlp_bias: false,
        window: Window::Never,
    }
}

/// Qwen2's and Qwen3's window: 4096 tokens on the layers from the 28th on, where used.
const QWEN_WINDOW: Window = Window::WhenUsed { window: 4096, from_layer: Some(28) };

/// What transformers' config class of `model_type` reads and assumes.
pub fn of(model_type: &str) -> ClassDefaults {
    let window = |w| Window::Key(w);
    match model_type {
        "gpt2" => ClassDefaults {
            names: Names::Gpt2,
            intermediate: None,
            reads_kv_heads: false,
            kv_heads: None,
            positions: 1024,
            mixture: MixtureRule::WhenGiven { top_k: 2 },
            ..dense(0, None, 0)
        },
        "llama" => ClassDefaults { mlp_bias: true, ..dense(11008, None, 2048) },
        "mistral" => ClassDefaults { attention_bias: AttentionBias::Never, window: window(Some(4096)), ..dense(14336, Some(8), 131_072) },
        "mixtral" => ClassDefaults {
            attention_bias: AttentionBias::Never,
            window: window(None),
            mixture: MixtureRule::Always { count: 8, top_k: 2, width: ExpertWidth::Dense },
            ..dense(14336, Some(8), 131_072)
        },
        "qwen2" => ClassDefaults {
            attention_bias: AttentionBias::QkvAlways,
            null_kv_heads: true,
            window: QWEN_WINDOW,
            ..dense(22016, Some(32), 32768)
        },
        "qwen3" => ClassDefaults { head_dim: Some(128), null_kv_heads: true, window: QWEN_WINDOW, ..dense(22016, Some(32), 32768) },
        "qwen3_moe" => ClassDefaults {
            window: Window::WhenUsed { window: 4096, from_layer: None },
            mixture: MixtureRule::Always { count: 128, top_k: 8, width: ExpertWidth::Named(768) },
            ..dense(6144, Some(4), 32768)
        },
        "gemma" => ClassDefaults { head_dim: Some(256), ..dense(24576, Some(16), 8192) },
        "gemma2" => ClassDefaults { head_dim: Some(256), window: window(Some(4096)), ..dense(9216, Some(4), 8192) },
        "phi3" => ClassDefaults { attention_bias: AttentionBias::Never, window: window(None), ..dense(8192, None, 4096) },
        _ => ClassDefaults {
            names: Names::Either,
            intermediate: None,
            mixture: MixtureRule::NotRead,
            attention_bias: AttentionBias::Never,
            ..dense(0, None, 0)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_the_cost_model_counts_has_its_config_class_defaults() {
        for t in crate::costmodel::shape::SUPPORTED_MODEL_TYPES {
            let d = of(t);
            assert_ne!(d.names, Names::Either, "{t}");
            assert!(d.positions > 0, "{t}");
        }
        assert_eq!(of("something-else").names, Names::Either);
        assert_eq!(of("gpt2").mixture, MixtureRule::WhenGiven { top_k: 2 }, "the same top-k for the decode and the count");
    }
}
