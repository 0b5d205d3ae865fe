//! `ModelShape`: exact parameter counts, stored and streamed bytes, and KV cache
//! sizes of a transformer, from its Hugging Face config.json.
//!
//! Families: GPT-2; the Llama layout (Llama-2/3/3.1/3.2, TinyLlama, Mistral, Mixtral,
//! Qwen2); Gemma and Gemma-2 (tied embeddings by default, Gemma-2 with four norms per
//! block); Phi-3 (fused qkv and gate-up projections: the same count as separate ones);
//! Qwen3 (per-head q and k norms) and its mixture Qwen3-MoE (`qwen3_moe`: a router and
//! `num_experts` SwiGLU experts of `moe_intermediate_size` in every block).

use crate::model::defaults::AttentionBias;
use crate::model::moe::MoeDims;
use crate::model::ModelConfig;
use serde::Serialize;
use serde_json::Value;

/// Errors computing a shape.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ShapeError {
    /// No parameter formula for this `model_type`.
    #[error("model_type `{0}` has no parameter formula; parlab counts model_type {list} exactly", list = SUPPORTED_MODEL_TYPES.join(", "))]
    UnknownFamily(String),
    /// A layout of a known `model_type` the formula does not count exactly.
    #[error("{0}")]
    Unsupported(String),
    /// The configuration's numbers are inconsistent.
    #[error("{0}")]
    Inconsistent(String),
    /// The config reads wrong for its type (expert keys on a dense type, a bad mixture).
    #[error(transparent)]
    Config(#[from] crate::model::ConfigError),
    /// A size key is present but not a positive integer (null counts as absent).
    #[error("`{key}` must be a positive integer, found {found}")]
    NotPositive {
        /// The key.
        key: &'static str,
        /// The value found.
        found: Value,
    },
    /// A flag the count reads is present but not true, false or null.
    #[error("`{key}` must be true or false, found {found}")]
    NotFlag {
        /// The key.
        key: &'static str,
        /// The value found.
        found: Value,
    },
    /// The parameters, by a generous estimate, pass what parlab counts.
    #[error("about {estimate:.3e} parameters: more than parlab counts (at most {MAX_PARAMS}, 2^50)")]
    TooLarge {
        /// The estimate.
        estimate: f64,
    },
}

/// The most parameters a shape may have: a thousand times today's largest models, and far
/// enough below 2^64 that every byte and flop count of the cost model fits.
pub const MAX_PARAMS: u64 = 1 << 50;

/// The `model_type`s whose parameters the formula counts exactly.
pub const SUPPORTED_MODEL_TYPES: [&str; 10] =
    ["gpt2", "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "phi3"];

/// The layout families the formula knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// GPT-2: learned positions, LayerNorm with bias, biased projections, tied head.
    Gpt2,
    /// Llama layout: RMSNorm, gated MLP, optional grouped-query attention.
    Llama,
    /// Gemma / Gemma-2: Llama layout, tied by default; Gemma-2 has four norms per block.
    Gemma,
    /// Phi-3: fused qkv and gate-up projections.
    Phi3,
    /// Qwen3: Llama layout plus RMSNorm on each head's queries and keys.
    Qwen3,
}

/// Where the parameters are, by part (counts of values, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct ParamBreakdown {
    /// Input embedding table (vocab x hidden).
    pub embedding: u64,
    /// Learned position table (GPT-2), else 0.
    pub position: u64,
    /// Attention projections of one block (with biases).
    pub attention_per_layer: u64,
    /// Feed-forward block of one block, all experts (with biases and router).
    pub mlp_per_layer: u64,
    /// One expert's feed-forward weights (equal to `mlp_per_layer` for dense models).
    pub expert_mlp: u64,
    /// Normalisation weights of one block.
    pub norms_per_layer: u64,
    /// Final normalisation.
    pub final_norm: u64,
    /// Output head when untied (0 when it shares the embedding table).
    pub head: u64,
}

/// Mixture-of-experts dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Experts {
    /// Experts per MoE layer.
    pub count: u32,
    /// Experts each token is routed to.
    pub active: u32,
}

/// A model's shape: dimensions and exact parameter count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelShape {
    /// `model_type`.
    pub model_type: String,
    /// Layout family.
    pub family: Family,
    /// Transformer blocks.
    pub layers: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// Residual width.
    pub hidden: u64,
    /// Feed-forward width (per expert).
    pub intermediate: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// The output head shares the input embedding table.
    pub tied_embeddings: bool,
    /// Normalisation layers per block.
    pub norms_per_block: u64,
    /// Experts, for mixture-of-experts models.
    pub experts: Option<Experts>,
    /// Parameters by part.
    pub breakdown: ParamBreakdown,
    /// Total parameters.
    pub params: u64,
}

fn uint(raw: &Value, names: &[&str]) -> Option<u64> {
    names.iter().find_map(|n| raw.get(*n).and_then(Value::as_u64))
}

/// The positive integer at `key`: None when absent or null, refused when anything else.
fn positive(raw: &Value, key: &'static str) -> Result<Option<u64>, ShapeError> {
    match raw.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().filter(|&n| n > 0).map(Some).ok_or_else(|| ShapeError::NotPositive { key, found: v.clone() }),
    }
}

/// The mixture a config describes, as transformers' config class of its type reads it
/// ([`MoeDims::of`]: a Qwen3-MoE without `num_experts` has 128), with one expert's width.
fn experts_of(cfg: &ModelConfig) -> Result<Option<(Experts, u64)>, ShapeError> {
    let Some(moe) = MoeDims::of(cfg)? else { return Ok(None) };
    let count = u32::try_from(moe.experts)
        .map_err(|_| ShapeError::Inconsistent(format!("{} experts is more than parlab counts (at most {})", moe.experts, u32::MAX)))?;
    Ok(Some((Experts { count, active: moe.top_k as u32 }, moe.width as u64)))
}

/// Refuses a shape whose parameters pass [`MAX_PARAMS`] by a generous estimate, made in
/// floating point before the exact count so that the exact count cannot overflow.
fn check_size(s: &ModelShape, positions: u32) -> Result<(), ShapeError> {
    let f = |n: u64| n as f64;
    let (d, i, e) = (f(s.hidden), f(s.intermediate), f(s.experts.map_or(1, |x| u64::from(x.count))));
    let q = f(s.heads).max(f(s.kv_heads)) * f(s.head_dim);
    let per_layer = 8.0 * d * q.max(d) + 8.0 * d * i * e + 8.0 * (q + d + e);
    let estimate = f(s.layers) * per_layer + 2.0 * f(s.vocab) * d + (f(u64::from(positions)) + 2.0) * d;
    if estimate > MAX_PARAMS as f64 {
        return Err(ShapeError::TooLarge { estimate });
    }
    Ok(())
}

/// The flags the count reads; each must be a boolean (or null, read as absent).
const FLAGS: [&str; 3] = ["tie_word_embeddings", "attention_bias", "mlp_bias"];

/// Refuses a flag of [`FLAGS`] that is neither a boolean nor null (`"yes"` read as absent
/// counted a head the decode, which refuses it, never loads).
fn check_flags(raw: &Value) -> Result<(), ShapeError> {
    match FLAGS.iter().find_map(|&key| raw.get(key).filter(|v| !v.is_boolean() && !v.is_null()).map(|v| (key, v))) {
        Some((key, found)) => Err(ShapeError::NotFlag { key, found: found.clone() }),
        None => Ok(()),
    }
}

fn flag(raw: &Value, name: &str) -> Option<bool> {
    raw.get(name).and_then(Value::as_bool)
}

fn family_of(model_type: &str) -> Result<Family, ShapeError> {
    Ok(match model_type {
        "gpt2" => Family::Gpt2,
        "llama" | "mistral" | "mixtral" | "qwen2" => Family::Llama,
        "gemma" | "gemma2" => Family::Gemma,
        "phi3" => Family::Phi3,
        "qwen3" | "qwen3_moe" => Family::Qwen3,
        other => return Err(ShapeError::UnknownFamily(other.to_string())),
    })
}

/// The shape of the model `cfg` describes.
pub fn shape_from_config(cfg: &ModelConfig) -> Result<ModelShape, ShapeError> {
    let family = family_of(&cfg.model_type)?;
    let raw = &cfg.raw;
    let (d, heads, kv) = (cfg.hidden as u64, cfg.heads as u64, cfg.kv_heads as u64);
    positive(raw, "head_dim")?;
    let head_dim = u64::from(cfg.head_dim());
    if family == Family::Gpt2 && d % heads != 0 {
        return Err(ShapeError::Inconsistent(format!("hidden {d} is not a multiple of {heads} heads")));
    }
    if heads % kv != 0 {
        return Err(ShapeError::Inconsistent(format!("{heads} query heads are not a multiple of {kv} KV heads")));
    }
    every_layer_a_mixture(cfg)?;
    check_flags(raw)?;
    let mixture = experts_of(cfg)?;
    let experts = mixture.map(|(e, _)| e);
    let tied = match family {
        // transformers ties GPT-2's and Gemma's head unless the config says otherwise (parlab's
        // seeded checkpoints say `false` and store the head apart).
        Family::Gpt2 | Family::Gemma => flag(raw, "tie_word_embeddings").unwrap_or(true),
        _ => flag(raw, "tie_word_embeddings").unwrap_or(false),
    };
    let norms_per_block = if cfg.model_type == "gemma2" { 4 } else { 2 };
    let mut shape = ModelShape {
        model_type: cfg.model_type.clone(),
        family,
        layers: cfg.layers as u64,
        heads,
        kv_heads: kv,
        head_dim,
        hidden: d,
        // A mixture's expert width (Qwen-MoE's `moe_intermediate_size`; a Mixtral's experts are
        // `intermediate_size` wide whatever it says, as transformers reads it).
        intermediate: mixture.map_or(cfg.intermediate as u64, |(_, width)| width),
        vocab: cfg.vocab as u64,
        tied_embeddings: tied,
        norms_per_block,
        experts,
        breakdown: ParamBreakdown::default(),
        params: 0,
    };
    check_size(&shape, cfg.max_positions)?;
    shape.breakdown = breakdown(&shape, cfg);
    shape.params = total(&shape.breakdown, shape.layers);
    Ok(shape)
}

/// Qwen3-MoE may keep some blocks dense (`mlp_only_layers`, `decoder_sparse_step` above 1);
/// the formula counts one block layout for every layer, so those configs are refused.
fn every_layer_a_mixture(cfg: &ModelConfig) -> Result<(), ShapeError> {
    if cfg.model_type != "qwen3_moe" {
        return Ok(());
    }
    let step = uint(&cfg.raw, &["decoder_sparse_step"]).unwrap_or(1);
    let dense = cfg.raw.get("mlp_only_layers").and_then(Value::as_array).map_or(0, Vec::len);
    if step != 1 || dense > 0 {
        return Err(ShapeError::Unsupported(format!(
            "qwen3_moe with dense blocks among the mixtures (decoder_sparse_step {step}, {dense} mlp_only_layers): the formula counts configs whose every block is a mixture"
        )));
    }
    Ok(())
}

fn breakdown(s: &ModelShape, cfg: &ModelConfig) -> ParamBreakdown {
    let (d, v, i) = (s.hidden, s.vocab, s.intermediate);
    let raw = &cfg.raw;
    let embedding = v * d;
    let head = if s.tied_embeddings { 0 } else { v * d };
    if s.family == Family::Gpt2 {
        let attention = d * 3 * d + 3 * d + d * d + d;
        let expert = d * i + i + i * d + d;
        let mlp = s.experts.map_or(expert, |e| e.count as u64 * (expert + d));
        return ParamBreakdown {
            embedding,
            position: cfg.max_positions as u64 * d,
            attention_per_layer: attention,
            mlp_per_layer: mlp,
            expert_mlp: expert,
            norms_per_layer: 2 * 2 * d,
            final_norm: 2 * d,
            head,
        };
    }
    let q = s.heads * s.head_dim;
    let kv = s.kv_heads * s.head_dim;
    // Only the biases the type's modelling code has (transformers ignores the flags elsewhere).
    let class = crate::model::defaults::of(&cfg.model_type);
    let mut attention = d * q + 2 * d * kv + q * d;
    match class.attention_bias {
        AttentionBias::WhenFlagged if flag(raw, "attention_bias").unwrap_or(false) => attention += q + 2 * kv + d,
        AttentionBias::QkvAlways => attention += q + 2 * kv,
        _ => {}
    }
    let mut expert = 3 * d * i;
    if class.mlp_bias && flag(raw, "mlp_bias").unwrap_or(false) {
        expert += 2 * i + d;
    }
    let mlp = match s.experts {
        Some(e) => e.count as u64 * expert + d * e.count as u64,
        None => expert,
    };
    let qk_norms = if s.family == Family::Qwen3 { 2 * s.head_dim } else { 0 };
    ParamBreakdown {
        embedding,
        position: 0,
        attention_per_layer: attention,
        mlp_per_layer: mlp,
        expert_mlp: expert,
        norms_per_layer: s.norms_per_block * d + qk_norms,
        final_norm: d,
        head,
    }
}

fn total(b: &ParamBreakdown, layers: u64) -> u64 {
    b.embedding + b.position + layers * (b.attention_per_layer + b.mlp_per_layer + b.norms_per_layer) + b.final_norm + b.head
}

impl ModelShape {
    /// Parameters of one transformer block.
    pub fn per_layer(&self) -> u64 {
        self.breakdown.attention_per_layer + self.breakdown.mlp_per_layer + self.breakdown.norms_per_layer
    }

    /// The output head's values (the embedding table when tied).
    pub fn head_params(&self) -> u64 {
        self.vocab * self.hidden
    }

    /// Bytes a device must hold for the weights, at `bytes_per_value`.
    pub fn stored_bytes(&self, bytes_per_value: u64) -> u64 {
        self.params * bytes_per_value
    }

    /// Values one decode step of one sequence reads: every block (only the routed
    /// experts of a mixture), the whole output head, and one row of each lookup table.
    pub fn streamed_params(&self) -> u64 {
        let b = &self.breakdown;
        let lookup_rows = self.hidden * if b.position > 0 { 2 } else { 1 };
        let untied_embedding = if self.tied_embeddings { 0 } else { b.embedding };
        let idle_experts = self.experts.map_or(0, |e| (e.count - e.active) as u64 * b.expert_mlp * self.layers);
        self.params - untied_embedding - b.position + lookup_rows - idle_experts
    }

    /// Bytes one decode step of one sequence streams, at `bytes_per_value`.
    pub fn streamed_bytes(&self, bytes_per_value: u64) -> u64 {
        self.streamed_params() * bytes_per_value
    }

    /// KV cache bytes per token of context: keys and values of every KV head of every layer.
    pub fn kv_bytes_per_token(&self, bytes_per_value: u64) -> u64 {
        2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value
    }

    /// All-reduces a tensor split makes per decode token: two per block (after attention and
    /// after the feed-forward), whatever the world and however the KV heads share out.
    pub fn tensor_all_reduces_per_token(&self) -> u64 {
        2 * self.layers
    }

    /// How the KV cache shares out under tensor parallelism over `world` devices.
    pub fn kv_share(&self, world: u64, bytes_per_value: u64) -> KvShare {
        let sharded_over = world.min(self.kv_heads);
        let heads_per_device = self.kv_heads.div_ceil(world).max(1);
        KvShare {
            world,
            kv_heads_per_device: heads_per_device,
            copies_of_each_head: world.div_ceil(self.kv_heads).max(1),
            sharded_over,
            capped: world > self.kv_heads,
            bytes_per_token_per_device: 2 * self.layers * heads_per_device * self.head_dim * bytes_per_value,
        }
    }

    /// Key/value projection values of one block a tensor rank holds beyond its even `world`-th
    /// share: past the KV heads every rank keeps whole heads' projections (biases left out).
    pub fn kv_projection_excess(&self, world: u64) -> u64 {
        let per_head = 2 * self.hidden * self.head_dim;
        let held = per_head * self.kv_share(world, 1).kv_heads_per_device;
        held.saturating_sub(per_head * self.kv_heads / world.max(1))
    }

    /// Why a tensor split over `world` devices is impossible, if it is.
    pub fn tensor_split_problem(&self, world: u64) -> Option<String> {
        if !self.heads.is_multiple_of(world) {
            return Some(format!("{} query heads do not split over {world} devices", self.heads));
        }
        let kv_ok = self.kv_heads.is_multiple_of(world) || world.is_multiple_of(self.kv_heads);
        if !kv_ok {
            return Some(format!("{} KV heads neither split over nor replicate evenly onto {world} devices", self.kv_heads));
        }
        if !self.intermediate.is_multiple_of(world) {
            return Some(format!("feed-forward width {} does not split over {world} devices", self.intermediate));
        }
        None
    }
}

/// The KV cache of one token on one device under tensor parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KvShare {
    /// Devices.
    pub world: u64,
    /// KV heads each device holds.
    pub kv_heads_per_device: u64,
    /// Devices holding a copy of each KV head (1 until world exceeds the KV heads).
    pub copies_of_each_head: u64,
    /// Devices the cache is actually divided over (the cap is the KV head count).
    pub sharded_over: u64,
    /// True when world exceeds the KV heads and the cache per device stops falling.
    pub capped: bool,
    /// Cache bytes per token of context on one device.
    pub bytes_per_token_per_device: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(v: Value) -> ModelShape {
        shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap()
    }

    fn tiny_llama(extra: Value) -> Value {
        let mut v = json!({"model_type": "llama", "hidden_size": 8, "intermediate_size": 12,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn past_its_kv_heads_a_tensor_rank_holds_whole_heads_projections() {
        // hidden 8, 4 query heads of 2, 2 KV heads: k and v project 8 -> 4 values each (64 values).
        let s = shape(tiny_llama(json!({})));
        assert_eq!(s.kv_projection_excess(1), 0);
        assert_eq!(s.kv_projection_excess(2), 0, "one KV head each: exactly the even share");
        // At 4 ranks each holds one whole KV head (2 * 8 * 2 = 32 values), not a quarter of 64.
        assert_eq!(s.kv_projection_excess(4), 32 - 16);
    }

    #[test]
    fn tiny_gpt2_counts_by_hand() {
        let s = shape(json!({"model_type": "gpt2", "n_embd": 4, "n_head": 2, "n_layer": 1, "vocab_size": 10, "n_positions": 6}));
        // wte 40, wpe 24, ln 8+8, c_attn 48+12, c_proj 16+4, c_fc 64+16, c_proj 64+4, ln_f 8
        assert_eq!(s.params, 40 + 24 + 16 + 60 + 20 + 80 + 68 + 8);
        assert!(s.tied_embeddings);
        // a step reads one wte row and one wpe row, not the 24-value position table
        assert_eq!(s.streamed_params(), s.params - 24 + 4 + 4);
        // A config that unties the head (parlab's seeded checkpoints) stores it apart: 40 more.
        let untied = shape(json!({"model_type": "gpt2", "n_embd": 4, "n_head": 2, "n_layer": 1, "vocab_size": 10, "n_positions": 6,
            "tie_word_embeddings": false}));
        assert_eq!((untied.params - s.params, untied.tied_embeddings), (40, false));
    }

    #[test]
    fn llama_layout_tied_untied_and_grouped() {
        let untied = shape(tiny_llama(json!({})));
        // embed 80, per layer q 64 + k,v 2*8*4 + o 64 + mlp 3*8*12 + norms 16, final 8, head 80
        let per_layer = 64 + 64 + 64 + 288 + 16;
        assert_eq!(untied.params, 80 + 2 * per_layer + 8 + 80);
        let tied = shape(tiny_llama(json!({"tie_word_embeddings": true})));
        assert_eq!(untied.params - tied.params, 80);
        assert_eq!(untied.streamed_params(), untied.params - 80 + 8);
        assert_eq!(tied.streamed_params(), tied.params + 8);
        assert_eq!(untied.kv_bytes_per_token(2), 2 * 2 * 2 * 2 * 2);
    }

    #[test]
    fn gemma_ties_by_default_and_gemma2_has_four_norms() {
        // Gemma2Config's head width is 256 where a config names none: named here as llama's.
        let g2 = shape(tiny_llama(json!({"model_type": "gemma2", "head_dim": 2})));
        let llama = shape(tiny_llama(json!({})));
        assert!(g2.tied_embeddings);
        assert_eq!(g2.norms_per_block, 4);
        assert_eq!(llama.params - 80 + 2 * 2 * 8, g2.params);
        let untied = shape(tiny_llama(json!({"model_type": "gemma2", "head_dim": 2, "tie_word_embeddings": false})));
        assert!(!untied.tied_embeddings);
    }

    #[test]
    fn qwen3_adds_query_and_key_norms() {
        let q = shape(tiny_llama(json!({"model_type": "qwen3", "head_dim": 2})));
        let l = shape(tiny_llama(json!({"head_dim": 2})));
        assert_eq!(q.params - l.params, 2 * 2 * 2);
    }

    #[test]
    fn kv_sharing_caps_at_the_kv_heads() {
        let s = shape(tiny_llama(json!({})));
        let two = s.kv_share(2, 2);
        assert_eq!((two.kv_heads_per_device, two.capped), (1, false));
        let four = s.kv_share(4, 2);
        assert_eq!((four.kv_heads_per_device, four.copies_of_each_head, four.capped), (1, 2, true));
        assert_eq!(four.bytes_per_token_per_device, two.bytes_per_token_per_device);
        assert!(s.tensor_split_problem(3).is_some());
        assert!(s.tensor_split_problem(4).is_none());
    }

    #[test]
    fn unknown_family_is_refused_naming_every_supported_model_type() {
        let v = json!({"model_type": "gpt_neox", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 4});
        let err = shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap_err().to_string();
        assert!(err.contains("`gpt_neox` has no parameter formula"), "{err}");
        assert!(err.ends_with("gpt2, llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma, gemma2, phi3 exactly"), "{err}");
        for t in SUPPORTED_MODEL_TYPES {
            assert!(family_of(t).is_ok(), "{t} is listed as supported but has no family");
        }
        assert!(family_of("qwen2_moe").is_err(), "shared experts are not counted");
    }

    #[test]
    fn a_head_width_left_out_is_the_one_transformers_and_the_decoder_use() {
        for (model_type, want) in [("qwen3", 128), ("llama", 8 / 4), ("gemma2", 256)] {
            let cfg = ModelConfig::from_value(tiny_llama(json!({"model_type": model_type}))).unwrap();
            assert_eq!(shape_from_config(&cfg).unwrap().head_dim, want, "{model_type}");
            if model_type != "gemma2" {
                assert_eq!(crate::model::llama::LlamaDims::from_config(&cfg).unwrap().head_dim as u64, want, "{model_type}");
            }
        }
    }

    #[test]
    fn qwen3_moe_counts_a_router_and_every_expert_in_every_block() {
        let moe = json!({"model_type": "qwen3_moe", "head_dim": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 6});
        let m = shape(tiny_llama(moe.clone()));
        let dense = shape(tiny_llama(json!({"model_type": "qwen3", "head_dim": 2})));
        // Per block: the dense 3 x 8 x 12 feed-forward becomes 4 experts of 3 x 8 x 6 and a 4 x 8 router.
        assert_eq!(m.params - dense.params, 2 * (4 * 3 * 8 * 6 + 4 * 8 - 3 * 8 * 12));
        assert_eq!(m.experts, Some(Experts { count: 4, active: 2 }));
        assert_eq!(m.family, Family::Qwen3);
        let mut mixed = tiny_llama(moe);
        mixed["mlp_only_layers"] = json!([0]);
        let err = shape_from_config(&ModelConfig::from_value(mixed).unwrap()).unwrap_err().to_string();
        assert!(err.contains("mlp_only_layers") && err.contains("every block is a mixture"), "{err}");
    }

    #[test]
    fn mixture_streams_only_routed_experts() {
        let m = shape(tiny_llama(json!({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2})));
        let dense = shape(tiny_llama(json!({})));
        assert_eq!(m.params - dense.params, 2 * (3 * 288 + 8 * 4));
        assert_eq!(m.params - m.streamed_params() - (80 - 8), 2 * 2 * 288);
    }

    #[test]
    fn a_size_key_that_is_not_a_positive_integer_is_refused_not_ignored() {
        // Refused when the config is read (a mixture's keys) or when its shape is counted.
        let err = |extra: Value| match ModelConfig::from_value(tiny_llama(extra)) {
            Ok(cfg) => shape_from_config(&cfg).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(err(json!({"head_dim": -1})), "`head_dim` must be a positive integer, found -1");
        assert_eq!(err(json!({"head_dim": 0})), "`head_dim` must be a positive integer, found 0");
        assert_eq!(
            err(json!({"model_type": "mixtral", "num_local_experts": 0})),
            "`num_local_experts` must be a positive integer, found 0"
        );
        assert_eq!(
            err(json!({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 5})),
            "`num_experts_per_tok` 5 is more than the 2 experts (`num_local_experts`)"
        );
        let moe = json!({"model_type": "qwen3_moe", "num_experts": 4, "moe_intermediate_size": 0});
        assert_eq!(err(moe), "`moe_intermediate_size` must be a positive integer, found 0");
        assert_eq!(shape(tiny_llama(json!({"head_dim": null}))).head_dim, 2, "null is absent");
        assert_eq!(err(json!({"tie_word_embeddings": "yes"})), "`tie_word_embeddings` must be true or false, found \"yes\"");
        assert_eq!(err(json!({"mlp_bias": 1})), "`mlp_bias` must be true or false, found 1");
        assert!(!shape(tiny_llama(json!({"attention_bias": null}))).tied_embeddings, "null is absent");
    }

    #[test]
    fn a_shape_past_what_parlab_counts_is_refused_not_wrapped() {
        let max = u64::from(u32::MAX);
        let widest = json!({"num_hidden_layers": max, "hidden_size": max, "intermediate_size": max,
            "num_attention_heads": max, "num_key_value_heads": max, "vocab_size": max});
        let gpt2 = json!({"model_type": "gpt2", "n_embd": 4294967040u64, "n_head": 1, "n_layer": 12, "vocab_size": 50257});
        for config in [tiny_llama(widest), gpt2] {
            let err = shape_from_config(&ModelConfig::from_value(config).unwrap()).unwrap_err();
            assert!(matches!(err, ShapeError::TooLarge { .. }), "{err}");
            assert!(err.to_string().contains("more than parlab counts (at most 1125899906842624, 2^50)"), "{err}");
        }
    }
}
