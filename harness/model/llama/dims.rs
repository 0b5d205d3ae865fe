//! The dimensions and options of a Llama-family config.json (llama, qwen2, qwen3, and mixtral:
//! Llama's blocks with a mixture of SwiGLU experts for the feed-forward), checked so a config
//! parlab cannot compute exactly is refused with the key and the reason.

use crate::model::config::{ConfigError, ModelConfig};
use crate::model::defaults::{self, AttentionBias};
use crate::model::moe::MoeDims;
use serde_json::Value;

/// The `model_type`s parlab's Llama-family model computes.
pub const LLAMA_TYPES: [&str; 4] = LlamaVariant::names();

/// Which member of the Llama family a config is (its `model_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlamaVariant {
    /// `llama`: optional biases from `attention_bias` and `mlp_bias`.
    Llama,
    /// `qwen2`: biases on the query, key and value projections, none on the output.
    Qwen2,
    /// `qwen3`: per-head RMSNorm of queries and keys.
    Qwen3,
    /// `mixtral`: a mixture of SwiGLU experts in every feed-forward block.
    Mixtral,
}

crate::named!(LlamaVariant { Llama => "llama", Qwen2 => "qwen2", Qwen3 => "qwen3", Mixtral => "mixtral" });

impl LlamaVariant {
    /// transformers' `rope_theta` for a config that names none (its config class's `default_theta`).
    fn default_theta(self) -> f64 {
        match self {
            LlamaVariant::Mixtral => 1e6,
            _ => 10000.0,
        }
    }

    /// transformers' `rms_norm_eps` for a config that names none.
    fn default_eps(self) -> f64 {
        match self {
            LlamaVariant::Mixtral => 1e-5,
            _ => 1e-6,
        }
    }
}

/// How rotary position embeddings turn a position into angles.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// `rope_theta`: the base of the frequencies.
    pub theta: f64,
    /// Llama 3's frequency scaling (`rope_type: llama3`), if the config names it.
    pub llama3: Option<Llama3Scaling>,
}

/// Llama 3's rotary frequency scaling (`rope_scaling` of type `llama3`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Scaling {
    /// `factor`: low frequencies are divided by it.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`.
    pub original_max_positions: f64,
}

/// The dimensions and options of a Llama-family model.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaDims {
    /// Which member of the family (its `model_type`).
    pub variant: LlamaVariant,
    /// Residual width.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Feed-forward (SwiGLU) width.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// RMSNorm epsilon.
    pub eps: f64,
    /// Rotary position embeddings.
    pub rope: Rope,
    /// Biases on the query, key and value projections (Qwen2; Llama's `attention_bias`).
    pub qkv_bias: bool,
    /// A bias on the output projection (Llama's `attention_bias`).
    pub o_bias: bool,
    /// Biases on the feed-forward projections (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    /// Per-head RMSNorm of queries and keys before the rotation (Qwen3).
    pub qk_norm: bool,
    /// The output head is the token embedding (`tie_word_embeddings`).
    pub tied: bool,
    /// Mixtral's mixture of SwiGLU experts in place of every feed-forward block
    /// (`num_local_experts` of width `intermediate_size`, `num_experts_per_tok`).
    pub moe: Option<MoeDims>,
}

fn number(raw: &Value, key: &str) -> Result<Option<f64>, ConfigError> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| ConfigError::NotNumber { key: key.into(), found: v.clone() }),
    }
}

fn flag(raw: &Value, key: &str, default: bool) -> Result<bool, ConfigError> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| ConfigError::NotFlag { key: key.into(), found: v.clone() }),
    }
}

impl Rope {
    /// Reads `rope_theta` and `rope_scaling` (or transformers 5's `rope_parameters`), `theta`
    /// where the config names none; a rotation of part of each head (`partial_rotary_factor`
    /// below 1) is refused.
    fn from_raw(raw: &Value, default_theta: f64) -> Result<Self, ConfigError> {
        let params = raw.get("rope_parameters").filter(|v| !v.is_null());
        let scaling = raw.get("rope_scaling").filter(|v| !v.is_null()).or(params);
        let theta = match params.map(|p| number(p, "rope_theta")).transpose()?.flatten() {
            Some(t) => t,
            None => number(raw, "rope_theta")?.unwrap_or(default_theta),
        };
        if !(theta.is_finite() && theta > 1.0) {
            return Err(ConfigError::RopeTheta(theta));
        }
        for holder in [Some(raw), scaling].into_iter().flatten() {
            if let Some(f) = number(holder, "partial_rotary_factor")?.filter(|f| *f != 1.0) {
                return Err(ConfigError::PartialRotary(f));
            }
        }
        let Some(s) = scaling else { return Ok(Rope { theta, llama3: None }) };
        if !s.is_object() {
            return Err(ConfigError::RopeType(s.to_string()));
        }
        let kind = match s.get("rope_type").or_else(|| s.get("type")).filter(|v| !v.is_null()) {
            None => "default",
            Some(v) => v.as_str().ok_or_else(|| ConfigError::RopeType(v.to_string()))?,
        };
        match kind {
            "default" => Ok(Rope { theta, llama3: None }),
            "llama3" => Ok(Rope { theta, llama3: Some(Llama3Scaling::from_raw(s)?) }),
            other => Err(ConfigError::RopeType(other.into())),
        }
    }

    /// The inverse frequencies of a head of width `head_dim` (`head_dim / 2` values), in float32
    /// as transformers computes them, Llama 3's scaling applied where the config names it.
    pub fn inv_freq(&self, head_dim: usize) -> Vec<f32> {
        (0..head_dim / 2)
            .map(|i| {
                let exponent = (2 * i) as f32 / head_dim as f32;
                let f = 1.0 / (self.theta as f32).powf(exponent);
                self.llama3.map_or(f, |s| s.scale(f))
            })
            .collect()
    }
}

impl Llama3Scaling {
    fn from_raw(s: &Value) -> Result<Self, ConfigError> {
        let need = |k: &str| number(s, k)?.ok_or_else(|| ConfigError::Llama3Missing(k.into()));
        let out = Llama3Scaling {
            factor: need("factor")?,
            low_freq_factor: need("low_freq_factor")?,
            high_freq_factor: need("high_freq_factor")?,
            original_max_positions: need("original_max_position_embeddings")?,
        };
        if out.factor <= 0.0 || out.high_freq_factor <= out.low_freq_factor || out.low_freq_factor <= 0.0 {
            return Err(ConfigError::Llama3Factors);
        }
        Ok(out)
    }

    /// One inverse frequency scaled as transformers' `_compute_llama3_parameters` does: long
    /// wavelengths divided by `factor`, short ones kept, the ones between interpolated.
    pub fn scale(&self, inv_freq: f32) -> f32 {
        let old = self.original_max_positions as f32;
        let (low, high, factor) = (self.low_freq_factor as f32, self.high_freq_factor as f32, self.factor as f32);
        let wavelen = 2.0 * std::f32::consts::PI / inv_freq;
        if wavelen > old / low {
            return inv_freq / factor;
        }
        if wavelen < old / high {
            return inv_freq;
        }
        let smooth = (old / wavelen - low) / (high - low);
        (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    }
}

impl LlamaDims {
    /// Reads and checks a Llama-family config.
    pub fn from_config(cfg: &ModelConfig) -> Result<Self, ConfigError> {
        let raw = &cfg.raw;
        let Some(variant) = LlamaVariant::from_name(&cfg.model_type) else {
            return Err(ConfigError::NotLlama { model_type: cfg.model_type.clone() });
        };
        let act = raw.get("hidden_act").and_then(Value::as_str).unwrap_or("silu");
        if act != "silu" {
            return Err(ConfigError::HiddenAct(act.into()));
        }
        if flag(raw, "use_sliding_window", false)? {
            return Err(ConfigError::SlidingWindow);
        }
        // The experts as transformers reads them (Mixtral's `intermediate_size` wide; a dense
        // type's expert keys were refused when the config was read).
        let moe = MoeDims::of(cfg)?;
        if variant == LlamaVariant::Mixtral {
            if let Some(window) = raw.get("sliding_window").filter(|v| !v.is_null()) {
                return Err(ConfigError::MixtralSlidingWindow(window.clone()));
            }
        }
        if let Some(h) = raw.get("head_dim").and_then(Value::as_u64).filter(|h| *h == 0 || !h.is_multiple_of(2)) {
            return Err(ConfigError::HeadDim(h));
        }
        let head_dim = cfg.head_dim() as usize;
        if !head_dim.is_multiple_of(2) {
            return Err(ConfigError::OddHeadWidth(head_dim));
        }
        // Only the biases the type's modelling code has (Qwen2's q/k/v always; Mixtral none).
        let class = defaults::of(&cfg.model_type);
        let attention_bias = flag(raw, "attention_bias", false)? && class.attention_bias == AttentionBias::WhenFlagged;
        Ok(LlamaDims {
            variant,
            hidden: cfg.hidden as usize,
            heads: cfg.heads as usize,
            kv_heads: cfg.kv_heads as usize,
            head_dim,
            layers: cfg.layers as usize,
            ffn: cfg.intermediate as usize,
            vocab: cfg.vocab as usize,
            eps: number(raw, "rms_norm_eps")?.unwrap_or(variant.default_eps()),
            rope: Rope::from_raw(raw, variant.default_theta())?,
            qkv_bias: class.attention_bias == AttentionBias::QkvAlways || attention_bias,
            o_bias: attention_bias,
            mlp_bias: flag(raw, "mlp_bias", false)? && class.mlp_bias,
            qk_norm: variant == LlamaVariant::Qwen3,
            tied: flag(raw, "tie_word_embeddings", false)?,
            moe,
        })
    }

    /// The same dimensions with a run's routing skew (ignored by a dense model).
    pub fn with_routing_skew(self, skew: f64) -> Self {
        Self { moe: self.moe.map(|m| MoeDims { skew, ..m }), ..self }
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(extra: Value) -> Result<LlamaDims, ConfigError> {
        let mut v = json!({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
            "hidden_size": 64, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        LlamaDims::from_config(&ModelConfig::from_value(v)?)
    }

    #[test]
    fn a_gqa_llama_config_reads_with_its_defaults() {
        let d = cfg(json!({})).unwrap();
        assert_eq!((d.heads, d.kv_heads, d.head_dim, d.group()), (8, 2, 8, 4));
        assert_eq!(d.rope, Rope { theta: 10000.0, llama3: None });
        assert!(!d.qkv_bias && !d.qk_norm && !d.tied);
        let q2 = cfg(json!({"model_type": "qwen2"})).unwrap();
        assert!(q2.qkv_bias && !q2.o_bias);
        assert!(cfg(json!({"model_type": "qwen3"})).unwrap().qk_norm);
        assert_eq!((d.variant, q2.variant), (LlamaVariant::Llama, LlamaVariant::Qwen2));
        assert_eq!(LLAMA_TYPES.map(|t| LlamaVariant::from_name(t).map(LlamaVariant::name)), LLAMA_TYPES.map(Some));
    }

    #[test]
    fn a_mixtral_config_reads_its_experts_of_the_feed_forward_width() {
        let d = cfg(json!({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null})).unwrap();
        let m = d.moe.expect("a mixtral config has a mixture");
        assert_eq!((m.experts, m.top_k, m.width, m.skew), (4, 2, 128, 0.0));
        assert_eq!(cfg(json!({})).unwrap().moe, None);
    }

    #[test]
    fn keys_a_config_leaves_out_take_transformers_defaults_for_its_type() {
        let llama = cfg(json!({})).unwrap();
        assert_eq!((llama.rope.theta, llama.eps, llama.head_dim), (10000.0, 1e-6, 64 / 8));
        let mixtral =
            cfg(json!({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null})).unwrap();
        assert_eq!((mixtral.rope.theta, mixtral.eps), (1e6, 1e-5), "MixtralConfig's default_theta and rms_norm_eps");
        assert_eq!(cfg(json!({"model_type": "qwen3"})).unwrap().head_dim, 128, "Qwen3Config's head_dim");
        assert_eq!(cfg(json!({"model_type": "qwen3", "head_dim": 16})).unwrap().head_dim, 16);
        assert_eq!(cfg(json!({"partial_rotary_factor": 1.0})).unwrap().rope.theta, 10000.0, "a factor of 1 rotates the whole head");
        // transformers reads no moe_intermediate_size for Mixtral: its experts are intermediate_size wide.
        let wide = cfg(
            json!({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null, "moe_intermediate_size": 512}),
        );
        assert_eq!(wide.unwrap().moe.map(|m| m.width), Some(128));
        // MixtralConfig: 8 experts, 2 per token, where the config names none.
        let bare = cfg(json!({"model_type": "mixtral", "sliding_window": null})).unwrap().moe.unwrap();
        assert_eq!((bare.experts, bare.top_k), (8, 2));
        let one = cfg(json!({"model_type": "mixtral", "num_local_experts": 1})).unwrap_err();
        assert_eq!(one, ConfigError::TopKAboveExperts { top_k: 2, experts: 1 }, "MixtralConfig's 2 per token");
        let top1 = cfg(json!({"model_type": "mixtral", "num_local_experts": 1, "num_experts_per_tok": 1})).unwrap().moe.unwrap();
        assert_eq!((top1.experts, top1.top_k), (1, 1), "one expert is still a routed mixture");
    }

    #[test]
    fn only_the_biases_a_types_modelling_code_has_are_read() {
        let all = json!({"attention_bias": true, "mlp_bias": true});
        let biases = |t: &str| {
            let mut extra = all.clone();
            extra["model_type"] = json!(t);
            if t == "mixtral" {
                extra["num_local_experts"] = json!(4);
            }
            let d = cfg(extra).unwrap();
            (d.qkv_bias, d.o_bias, d.mlp_bias)
        };
        assert_eq!(biases("llama"), (true, true, true), "LlamaConfig reads both");
        assert_eq!(biases("qwen2"), (true, false, false), "Qwen2: q/k/v always, o never, no MLP bias");
        assert_eq!(biases("qwen3"), (true, true, false), "Qwen3: attention_bias only");
        assert_eq!(biases("mixtral"), (false, false, false), "Mixtral: bias=False in its code");
    }

    #[test]
    fn llama3_scaling_keeps_short_wavelengths_divides_long_ones_and_interpolates_between() {
        let s = Llama3Scaling { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_positions: 16.0 };
        // wavelengths 2π/f: 1 -> 6.28 (between 4 and 16), 0.1 -> 62.8 (> 16), 10 -> 0.63 (< 4).
        assert_eq!(s.scale(10.0), 10.0);
        assert!((s.scale(0.1) - 0.1 / 8.0).abs() < 1e-9);
        let smooth = (16.0 / (2.0 * std::f32::consts::PI) - 1.0) / 3.0;
        assert!((s.scale(1.0) - ((1.0 - smooth) / 8.0 + smooth)).abs() < 1e-6);
        let d = cfg(json!({"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}))
        .unwrap();
        assert_eq!(d.rope.llama3, Some(s));
        let inv = d.rope.inv_freq(8);
        assert_eq!(inv[0], s.scale(1.0), "position 0's frequency 1 lies between the wavelengths: interpolated");
        let slowest = 1.0 / 500000f32.powf(0.75);
        assert!((inv[3] - slowest / 8.0).abs() < 1e-12, "{}", inv[3]);
    }

    #[test]
    fn configs_parlab_cannot_compute_exactly_are_refused_with_the_key() {
        for (extra, want) in [
            (json!({"hidden_act": "gelu"}), ConfigError::HiddenAct("gelu".into())),
            (json!({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}), ConfigError::RopeType("yarn".into())),
            (json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}), ConfigError::Llama3Missing("low_freq_factor".into())),
            (json!({"model_type": "qwen2", "use_sliding_window": true}), ConfigError::SlidingWindow),
            (json!({"model_type": "gemma2"}), ConfigError::NotLlama { model_type: "gemma2".into() }),
            (json!({"model_type": "mixtral", "num_local_experts": 4, "sliding_window": 32}), ConfigError::MixtralSlidingWindow(json!(32))),
            (
                json!({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 5}),
                ConfigError::TopKAboveExperts { top_k: 5, experts: 4 },
            ),
            (json!({"num_local_experts": 4}), ConfigError::ExpertsOfDenseType { model_type: "llama".into(), key: "num_local_experts" }),
            (
                json!({"model_type": "qwen2", "num_experts": 4}),
                ConfigError::ExpertsOfDenseType { model_type: "qwen2".into(), key: "num_experts" },
            ),
            (json!({"partial_rotary_factor": 0.5}), ConfigError::PartialRotary(0.5)),
            (json!({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}), ConfigError::PartialRotary(0.25)),
            (json!({"rope_scaling": {"rope_type": 3}}), ConfigError::RopeType("3".into())),
            (json!({"rope_scaling": "llama3"}), ConfigError::RopeType("\"llama3\"".into())),
        ] {
            assert_eq!(cfg(extra).unwrap_err(), want);
        }
        let err = cfg(json!({"hidden_act": "gelu"})).unwrap_err().to_string();
        assert_eq!(err, "`hidden_act` \"gelu\" is not the SwiGLU activation parlab computes (silu)");
    }
}
