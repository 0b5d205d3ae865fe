//! Reads a Hugging Face `config.json` into the dimensions the harness needs.

use super::defaults::{self, Names};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The models a name may give: `models under models/: gpt2, llama-3.1-8b, ...` (the folders of
/// `models_root()` holding a config.json), or that it holds none.
fn known_models() -> String {
    let root = crate::model::resolve::models_root();
    let names = crate::model::resolve::known_models();
    match names.is_empty() {
        true => format!("{} holds no model folder", root.display()),
        false => format!("models under {}/: {}", root.display().to_string().trim_end_matches('/'), names.join(", ")),
    }
}

/// ` (here: DIR)` where `path` is a config.json in a folder, else nothing.
fn parent_hint(path: &Path) -> String {
    match (path.file_name(), path.parent()) {
        (Some(name), Some(parent)) if name == "config.json" && !parent.as_os_str().is_empty() => format!(" (here: {})", parent.display()),
        _ => String::new(),
    }
}

/// Errors reading a model folder.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The folder or its config.json is missing.
    #[error("{}: no such model folder (expected a config.json there); {}", .path.display(), known_models())]
    Missing {
        /// The path that was looked up.
        path: PathBuf,
    },
    /// The path names a file (often the config.json itself), not the folder holding it.
    #[error("{}: a file, not a model folder; name the folder that holds config.json{}, or a model under models/", .path.display(), parent_hint(.path))]
    NotAFolder {
        /// The path that was looked up.
        path: PathBuf,
    },
    /// config.json could not be read (not a regular file, too large, an I/O error).
    #[error(transparent)]
    Unreadable(#[from] crate::files::FileError),
    /// config.json is not JSON.
    #[error("{path}: not valid JSON: {cause}")]
    NotJson {
        /// The config file.
        path: PathBuf,
        /// The parser's complaint.
        cause: serde_json::Error,
    },
    /// config.json parsed, but a value in it is wrong.
    #[error("{path}: {problem}")]
    BadConfig {
        /// The config file.
        path: PathBuf,
        /// What is wrong in it.
        problem: ConfigError,
    },
}

/// What is wrong with a value in a config.json (the file is named by [`ModelError`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A size is not a positive integer.
    #[error("`{key}` must be a positive integer, found {found}")]
    NotPositive {
        /// The key.
        key: String,
        /// The value found.
        found: Value,
    },
    /// A size does not fit in 32 bits.
    #[error("`{key}` {value} is too large (at most {})", u32::MAX)]
    TooLarge {
        /// The key.
        key: &'static str,
        /// The value found.
        value: u64,
    },
    /// The file is JSON but not an object of keys.
    #[error("expected a JSON object of keys, found {0}")]
    NotObject(&'static str),
    /// `model_type` is present but not a string.
    #[error("`model_type` must be a string such as \"llama\", found {0}")]
    ModelType(Value),
    /// `model_type` is absent: the family cannot be told (transformers' AutoConfig refuses it too).
    #[error(
        "`model_type` is missing; name the model's family: {} to run it, or for its shape and advice alone also {}",
        Family::runnable_types(),
        Family::shape_only_types()
    )]
    NoModelType,
    /// None of the keys a size may have is present.
    #[error("config.json has none of {names:?}")]
    Absent {
        /// The keys looked for.
        names: Vec<&'static str>,
    },
    /// The heads do not divide the width.
    #[error("the width {hidden} is not a multiple of the {heads} attention heads")]
    WidthNotDivisible {
        /// Width of the residual stream.
        hidden: u32,
        /// Attention heads.
        heads: u32,
    },
    /// The key/value heads do not divide the heads.
    #[error("the {heads} attention heads are not a multiple of the {kv_heads} key/value heads")]
    KvHeadsNotDivisible {
        /// Attention heads.
        heads: u32,
        /// Key/value heads.
        kv_heads: u32,
    },
    /// A GPT-2 activation parlab does not compute (the JSON text found, empty if not a string).
    #[error("`activation_function` {found} is not one parlab's GPT-2 computes ({})", GPT2_ACTIVATIONS.join(", "))]
    Activation {
        /// The value found, as JSON.
        found: String,
    },
    /// GPT-2 with cross-attention blocks (an encoder-decoder's decoder), which parlab does not compute or count.
    #[error("`add_cross_attention: true` (a GPT-2 decoder attending to an encoder) is not computed or counted by parlab")]
    CrossAttention,
    /// A value that must be a number is not.
    #[error("`{key}` must be a number, found {found}")]
    NotNumber {
        /// The key.
        key: String,
        /// The value found.
        found: Value,
    },
    /// A value that must be a boolean is not.
    #[error("`{key}` must be true or false, found {found}")]
    NotFlag {
        /// The key.
        key: String,
        /// The value found.
        found: Value,
    },
    /// `rope_theta` is not a finite number above 1.
    #[error("`rope_theta` must be a number above 1, found {0}")]
    RopeTheta(f64),
    /// A rotary scaling type parlab does not compute.
    #[error("`rope_scaling` of type {0:?} is not one parlab computes (default, llama3)")]
    RopeType(String),
    /// A rotation of part of each head only.
    #[error("`partial_rotary_factor` {0} (rotating part of each head) is not computed by parlab (1 only)")]
    PartialRotary(f64),
    /// Llama 3 rotary scaling lacks a key.
    #[error("`rope_scaling` of type llama3 needs `{0}`")]
    Llama3Missing(String),
    /// Llama 3 rotary scaling factors out of order.
    #[error("`rope_scaling` of type llama3 needs factor > 0 and high_freq_factor > low_freq_factor > 0")]
    Llama3Factors,
    /// A `model_type` outside the Llama family read as one.
    #[error("model_type {model_type:?} is not one of the Llama family parlab computes ({})", crate::model::llama::LLAMA_TYPES.join(", "))]
    NotLlama {
        /// The config's `model_type`.
        model_type: String,
    },
    /// A feed-forward activation other than SwiGLU.
    #[error("`hidden_act` {0:?} is not the SwiGLU activation parlab computes (silu)")]
    HiddenAct(String),
    /// Sliding-window attention.
    #[error("`use_sliding_window: true` is not computed by parlab (sliding-window attention)")]
    SlidingWindow,
    /// `head_dim` is zero or odd.
    #[error("`head_dim` must be a positive even number, found {0}")]
    HeadDim(u64),
    /// The derived head width is odd.
    #[error("the head width {0} is odd; rotary embeddings rotate pairs")]
    OddHeadWidth(usize),
    /// Mixtral's sliding-window attention.
    #[error("`sliding_window` {0} is not computed by parlab (sliding-window attention; use null)")]
    MixtralSlidingWindow(Value),
    /// Expert keys in a config of a dense type (transformers builds it dense, ignoring them).
    #[error("`{key}` is read for model_type mixtral, qwen3_moe and parlab's gpt2 mixture; transformers builds a {model_type} dense and ignores it: remove it, or name a mixture's model_type")]
    ExpertsOfDenseType {
        /// The config's `model_type`.
        model_type: String,
        /// The expert key found.
        key: &'static str,
    },
    /// More experts per token than experts.
    #[error("`num_experts_per_tok` {top_k} is more than the {experts} experts (`num_local_experts`)")]
    TopKAboveExperts {
        /// Experts per token.
        top_k: usize,
        /// Experts per layer.
        experts: usize,
    },
}

/// The dimensions of a transformer, read from config.json, with the file's digest.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `model_type` (gpt2, llama, mistral, gemma2, phi3, qwen3, ...).
    pub model_type: String,
    /// Transformer blocks.
    pub layers: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (equal to `heads` without grouped-query attention).
    pub kv_heads: u32,
    /// Width of the residual stream.
    pub hidden: u32,
    /// Width of the feed-forward block.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Longest sequence the position table holds.
    pub max_positions: u32,
    /// Where `max_positions` came from.
    pub positions_from: PositionsFrom,
    /// The parsed file, for fields only some families have.
    pub raw: Value,
    /// sha256 of the file's canonical JSON (key order and spacing do not matter).
    pub digest: String,
}

/// Where a config's position table size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionsFrom {
    /// Its config.json names it (`n_positions` or `max_position_embeddings`).
    ConfigJson,
    /// Its config.json names none: transformers' default for its `model_type` (0: none known).
    TransformersDefault,
}

/// The model families parlab loads, splits and decodes, by `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// GPT-2 (and parlab's GPT-2 with a mixture of experts).
    Gpt2,
    /// The Llama family: llama, qwen2, qwen3 (`model::llama`).
    Llama,
}

impl Family {
    /// The family of a `model_type`, if parlab runs it.
    pub fn of(model_type: &str) -> Option<Family> {
        match model_type {
            "gpt2" => Some(Family::Gpt2),
            t if crate::model::llama::LlamaVariant::from_name(t).is_some() => Some(Family::Llama),
            _ => None,
        }
    }

    /// The `model_type`s parlab runs, for messages.
    pub fn runnable_types() -> String {
        std::iter::once("gpt2").chain(crate::model::llama::LLAMA_TYPES).collect::<Vec<_>>().join(", ")
    }

    /// The `model_type`s whose shape the cost model reads but parlab does not run, listed.
    pub fn shape_only_types() -> String {
        let runnable = |t: &&str| *t == "gpt2" || crate::model::llama::LLAMA_TYPES.contains(t);
        crate::costmodel::shape::SUPPORTED_MODEL_TYPES.iter().filter(|t| !runnable(t)).copied().collect::<Vec<_>>().join(", ")
    }
}

/// The GELU variants parlab's GPT-2 computes (`activation_function`).
pub const GPT2_ACTIVATIONS: [&str; 3] = ["gelu_new", "gelu_pytorch_tanh", "gelu"];

/// transformers' head width for a config of `model_type` that names no `head_dim`: its config
/// class's default (Qwen3 128, Gemma 256), else hidden / heads.
fn default_head_dim(model_type: &str, hidden: u32, heads: u32) -> u32 {
    defaults::of(model_type).head_dim.unwrap_or(hidden / heads.max(1))
}

/// The shape rules `parlab shape` and transformers apply: heads divide the width (unless the
/// head width is given or named by the type), KV heads divide the heads, and GPT-2 uses an
/// activation parlab computes.
fn check_consistent(raw: &Value, model_type: &str, heads: u32, kv_heads: u32, hidden: u32) -> Result<(), ConfigError> {
    if raw.get("head_dim").is_none() && defaults::of(model_type).head_dim.is_none() && !hidden.is_multiple_of(heads) {
        return Err(ConfigError::WidthNotDivisible { hidden, heads });
    }
    if !heads.is_multiple_of(kv_heads) {
        return Err(ConfigError::KvHeadsNotDivisible { heads, kv_heads });
    }
    if model_type == "gpt2" {
        // Read with defaults where absent or null: a value of another type is refused, as the
        // Llama family's are, rather than silently taken as the default.
        for key in ["scale_attn_weights", "scale_attn_by_inverse_layer_idx", "tie_word_embeddings"] {
            if let Some(v) = raw.get(key).filter(|v| !v.is_null() && !v.is_boolean()) {
                return Err(ConfigError::NotFlag { key: key.into(), found: v.clone() });
            }
        }
        if raw.get("add_cross_attention").and_then(Value::as_bool) == Some(true) {
            return Err(ConfigError::CrossAttention);
        }
        if let Some(v) = raw.get("layer_norm_epsilon").filter(|v| !v.is_null() && !v.is_number()) {
            return Err(ConfigError::NotNumber { key: "layer_norm_epsilon".into(), found: v.clone() });
        }
        let act = raw.get("activation_function").map_or(Some("gelu_new"), Value::as_str);
        if !act.is_some_and(|a| GPT2_ACTIVATIONS.contains(&a)) {
            let found = raw.get("activation_function").map_or(String::new(), Value::to_string);
            return Err(ConfigError::Activation { found });
        }
    }
    Ok(())
}

/// The config's `model_type`; a file that is not an object, or a `model_type` that is absent or
/// not a string, is refused.
fn model_type_of(raw: &Value) -> Result<String, ConfigError> {
    let kind = match raw {
        Value::Object(_) => None,
        Value::Array(_) => Some("an array"),
        Value::String(_) => Some("a string"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null => Some("null"),
    };
    if let Some(kind) = kind {
        return Err(ConfigError::NotObject(kind));
    }
    match raw.get("model_type") {
        None => Err(ConfigError::NoModelType),
        Some(Value::String(t)) => Ok(t.clone()),
        Some(other) => Err(ConfigError::ModelType(other.clone())),
    }
}

impl ModelConfig {
    /// True when the config describes a mixture of experts (checked when it was read).
    pub fn is_mixture(&self) -> bool {
        matches!(crate::model::moe::MoeDims::of(self), Ok(Some(_)))
    }

    /// The attention window transformers' config class of its type gives it, if any
    /// ([`defaults::Window`]: Mistral's 4096 where `sliding_window` is absent; Qwen's only
    /// where `use_sliding_window` is true and a layer slides).
    pub fn sliding_window(&self) -> Option<u64> {
        let named = self.raw.get("sliding_window");
        let window = match defaults::of(&self.model_type).window {
            defaults::Window::Never => None,
            defaults::Window::Key(default) => named.map_or(default.map(u64::from), Value::as_u64),
            defaults::Window::WhenUsed { window, from_layer } => {
                let used = self.raw.get("use_sliding_window").and_then(Value::as_bool) == Some(true);
                // Qwen2 and Qwen3 slide only on the layers from `max_window_layers` on.
                let first = from_layer.map(|d| self.raw.get("max_window_layers").and_then(Value::as_u64).unwrap_or(u64::from(d)));
                let slides = first.is_none_or(|first| u64::from(self.layers) > first);
                (used && slides).then(|| named.map_or(Some(u64::from(window)), Value::as_u64)).flatten()
            }
        };
        window.filter(|w| *w > 0)
    }

    /// Reads `dir/config.json`.
    pub fn read(dir: &Path) -> Result<Self, ModelError> {
        if dir.is_file() {
            return Err(ModelError::NotAFolder { path: dir.to_path_buf() });
        }
        let path = dir.join("config.json");
        if !path.exists() {
            return Err(ModelError::Missing { path: dir.to_path_buf() });
        }
        let text = crate::files::read_text(&path, crate::files::TEXT_LIMIT)?;
        let raw: Value = serde_json::from_str(&text).map_err(|cause| ModelError::NotJson { path: path.clone(), cause })?;
        Self::from_value(raw).map_err(|problem| ModelError::BadConfig { path, problem })
    }

    /// Builds the dimensions from a parsed config.json.
    pub fn from_value(raw: Value) -> Result<Self, ConfigError> {
        let size = |names: &[&'static str]| -> Result<Option<u32>, ConfigError> {
            let Some((key, v)) = names.iter().find_map(|n| raw.get(*n).map(|v| (*n, v))) else { return Ok(None) };
            let not_positive = || ConfigError::NotPositive { key: key.to_string(), found: v.clone() };
            let n = v.as_u64().ok_or_else(not_positive)?;
            let n = u32::try_from(n).map_err(|_| ConfigError::TooLarge { key, value: n })?;
            if n == 0 {
                return Err(not_positive());
            }
            Ok(Some(n))
        };
        let need = |names: &[&'static str]| size(names)?.ok_or_else(|| ConfigError::Absent { names: names.to_vec() });
        let model_type = model_type_of(&raw)?;
        let class = defaults::of(&model_type);
        // GPT-2's config class maps the Llama-style names onto its own, and one given beside
        // its own overwrites it: the alias is read first.
        let names = |gpt2: &'static str, hf: &'static str| -> Vec<&'static str> {
            match class.names {
                Names::Gpt2 => vec![hf, gpt2],
                Names::Either => vec![gpt2, hf],
                Names::HuggingFace => vec![hf],
            }
        };
        let layers = need(&names("n_layer", "num_hidden_layers"))?;
        let heads = need(&names("n_head", "num_attention_heads"))?;
        let hidden = need(&names("n_embd", "hidden_size"))?;
        // A null `num_key_value_heads` is one per query head where the config class's field
        // may be None (Llama's); elsewhere it is refused, as transformers refuses it.
        let kv_heads = match raw.get("num_key_value_heads") {
            _ if !class.reads_kv_heads => heads,
            Some(Value::Null) if class.null_kv_heads => heads,
            _ => size(&["num_key_value_heads"])?.or(class.kv_heads).unwrap_or(heads),
        };
        let intermediate_keys: &[&'static str] = match class.names {
            Names::Gpt2 => &["n_inner"],
            Names::HuggingFace => &["intermediate_size"],
            Names::Either => &["n_inner", "intermediate_size"],
        };
        let intermediate = match size(intermediate_keys) {
            Ok(n) => n.or(class.intermediate).unwrap_or(hidden.saturating_mul(4)),
            Err(_) if raw.get("n_inner").is_some_and(Value::is_null) && class.names != Names::HuggingFace => hidden.saturating_mul(4),
            Err(e) => return Err(e),
        };
        let vocab = need(&["vocab_size"])?;
        let named_positions = size(&names("n_positions", "max_position_embeddings"))?;
        let positions_from = if named_positions.is_some() { PositionsFrom::ConfigJson } else { PositionsFrom::TransformersDefault };
        let max_positions = named_positions.unwrap_or(class.positions);
        check_consistent(&raw, &model_type, heads, kv_heads, hidden)?;
        crate::model::moe::MoeDims::read(&raw, &model_type, intermediate as usize)?;
        let digest = hex::encode(Sha256::digest(raw.to_string().as_bytes()));
        Ok(ModelConfig { model_type, layers, heads, kv_heads, hidden, intermediate, vocab, max_positions, positions_from, raw, digest })
    }

    /// The family parlab runs this model as, if any.
    pub fn family(&self) -> Option<Family> {
        Family::of(&self.model_type)
    }

    /// Each attention head's width: config.json's `head_dim`, else the type's
    /// ([`default_head_dim`]); GPT-2's is always hidden / heads (its config class reads no
    /// `head_dim`).
    pub fn head_dim(&self) -> u32 {
        let named = self.raw.get("head_dim").filter(|_| self.model_type != "gpt2");
        let given = named.and_then(Value::as_u64).and_then(|d| u32::try_from(d).ok());
        given.unwrap_or_else(|| default_head_dim(&self.model_type, self.hidden, self.heads))
    }

    /// Bytes of float32 keys and values one token leaves in every layer's cache (its key/value
    /// heads: fewer than the query heads under grouped-query attention).
    pub fn kv_bytes_per_token(&self) -> u64 {
        u64::from(self.kv_heads) * self.kv_bytes_per_token_and_head()
    }

    /// Bytes of float32 keys and values one token leaves for one key/value head, every layer together.
    pub fn kv_bytes_per_token_and_head(&self) -> u64 {
        2 * u64::from(self.layers) * u64::from(self.head_dim()) * 4
    }

    /// The head counts world sizes must divide, as a sorted list of divisors of `heads`.
    pub fn head_divisors(&self) -> Vec<u32> {
        (1..=self.heads).filter(|w| self.heads.is_multiple_of(*w)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gpt2(extra: Value) -> Value {
        let mut v = json!({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 100, "n_positions": 32});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn a_config_file_named_for_its_folder_is_told_to_name_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, gpt2(json!({})).to_string()).unwrap();
        let e = ModelConfig::read(&file).unwrap_err();
        assert!(matches!(e, ModelError::NotAFolder { .. }), "{e:?}");
        let says = format!("a file, not a model folder; name the folder that holds config.json (here: {})", dir.path().display());
        assert!(e.to_string().contains(&says), "{e}");
        assert!(ModelConfig::read(dir.path()).is_ok(), "its folder reads");
        let missing = ModelConfig::read(&dir.path().join("nothing")).unwrap_err();
        assert!(matches!(missing, ModelError::Missing { .. }), "{missing:?}");
        // Named with the models a name may give (this crate's models/, the tests' folder).
        assert!(missing.to_string().contains("; models under models/: gemma-2-2b, gpt2, gpt2-moe,"), "{missing}");
    }

    #[test]
    fn a_consistent_config_reads() {
        let cfg = ModelConfig::from_value(gpt2(json!({"n_inner": null}))).unwrap();
        assert_eq!((cfg.heads, cfg.hidden, cfg.intermediate), (4, 64, 256));
    }

    #[test]
    fn a_config_without_its_position_table_gets_transformers_default() {
        // GPT2Config: n_positions 1024 (it read as 0: no table, and `model init` wrote one row).
        let mut unnamed = gpt2(json!({}));
        unnamed.as_object_mut().unwrap().remove("n_positions");
        assert_eq!(ModelConfig::from_value(unnamed.clone()).unwrap().max_positions, 1024);
        let mut unnamed = json!({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 64, "vocab_size": 100});
        assert_eq!(ModelConfig::from_value(unnamed.clone()).unwrap().max_positions, 2048, "LlamaConfig");
        unnamed["model_type"] = json!("mixtral");
        assert_eq!(ModelConfig::from_value(unnamed.clone()).unwrap().max_positions, 131_072, "MixtralConfig");
        unnamed["model_type"] = json!("gemma");
        assert_eq!(ModelConfig::from_value(unnamed.clone()).unwrap().max_positions, 8192, "GemmaConfig");
        unnamed["model_type"] = json!("something-else");
        assert_eq!(ModelConfig::from_value(unnamed).unwrap().max_positions, 0, "not known");
        assert_eq!(ModelConfig::from_value(gpt2(json!({}))).unwrap().max_positions, 32, "a named table is read");
    }

    #[test]
    fn keys_a_config_leaves_out_are_read_as_its_types_config_class_reads_them() {
        let read = |t: &str, extra: Value| {
            let mut v = json!({"model_type": t, "num_hidden_layers": 2, "num_attention_heads": 64, "hidden_size": 512, "vocab_size": 100});
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            ModelConfig::from_value(v).unwrap()
        };
        // Key/value heads: MistralConfig 8, Qwen2Config 32, LlamaConfig one per query head.
        let kv = |t: &str| read(t, json!({})).kv_heads;
        assert_eq!([kv("mistral"), kv("qwen2"), kv("qwen3_moe"), kv("gemma2"), kv("llama"), kv("phi3")], [8, 32, 4, 4, 64, 64]);
        assert_eq!(read("llama", json!({"num_key_value_heads": null})).kv_heads, 64, "LlamaConfig: null is one per query head");
        let mut mistral =
            json!({"model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 64, "hidden_size": 512, "vocab_size": 100});
        mistral["num_key_value_heads"] = Value::Null;
        assert!(ModelConfig::from_value(mistral).is_err(), "MistralConfig's field is an int: transformers refuses null");
        // GPT-2: a Llama-style name given beside GPT-2's own overwrites it, as in transformers.
        assert_eq!(ModelConfig::from_value(gpt2(json!({"hidden_size": 128}))).unwrap().hidden, 128);
        // The feed-forward width: the class's, not 4 × the width.
        assert_eq!([read("llama", json!({})).intermediate, read("mistral", json!({})).intermediate], [11008, 14336]);
        // A Llama-style type reads no GPT-2 names; GPT-2 reads no `intermediate_size`.
        let llama = read("llama", json!({"n_embd": 64, "n_inner": 256}));
        assert_eq!((llama.hidden, llama.intermediate), (512, 11008));
        assert_eq!(ModelConfig::from_value(gpt2(json!({"intermediate_size": 100}))).unwrap().intermediate, 256);
        // The window: Mistral's default, Qwen's only where used, Gemma2's default, none for Llama.
        let window = |t: &str, extra: Value| read(t, extra).sliding_window();
        assert_eq!(window("mistral", json!({})), Some(4096));
        assert_eq!(window("mistral", json!({"sliding_window": null})), None);
        assert_eq!(window("qwen3", json!({"sliding_window": 4096})), None, "use_sliding_window defaults to false");
        assert_eq!(window("qwen2", json!({"use_sliding_window": true})), None, "2 layers, below max_window_layers 28: none slides");
        assert_eq!(window("qwen2", json!({"use_sliding_window": true, "max_window_layers": 1})), Some(4096));
        assert_eq!(window("qwen3_moe", json!({"use_sliding_window": true})), Some(4096), "every layer of a Qwen3-MoE");
        assert_eq!(window("gemma2", json!({})), Some(4096));
        assert_eq!(window("phi3", json!({"sliding_window": 2047})), Some(2047));
        assert_eq!(window("llama", json!({"sliding_window": 2047})), None, "LlamaConfig reads none");
    }

    #[test]
    fn gpt2_options_of_the_wrong_type_are_refused_not_taken_as_their_defaults() {
        for (extra, want) in [
            (json!({"scale_attn_weights": "false"}), "`scale_attn_weights` must be true or false, found \"false\""),
            (json!({"scale_attn_by_inverse_layer_idx": 1}), "`scale_attn_by_inverse_layer_idx` must be true or false, found 1"),
            (json!({"layer_norm_epsilon": "1e-5"}), "`layer_norm_epsilon` must be a number, found \"1e-5\""),
        ] {
            assert_eq!(ModelConfig::from_value(gpt2(extra.clone())).unwrap_err().to_string(), want, "{extra}");
        }
        let cross = ModelConfig::from_value(gpt2(json!({"add_cross_attention": true}))).unwrap_err();
        assert_eq!(cross, ConfigError::CrossAttention, "transformers would build cross-attention blocks parlab does not count");
        let fine = json!({"scale_attn_weights": false, "layer_norm_epsilon": 1e-6, "scale_attn_by_inverse_layer_idx": null, "add_cross_attention": false});
        assert!(ModelConfig::from_value(gpt2(fine)).is_ok());
    }

    #[test]
    fn heads_that_do_not_divide_the_width_are_refused() {
        let err = ModelConfig::from_value(gpt2(json!({"n_head": 5}))).unwrap_err();
        assert_eq!(err, ConfigError::WidthNotDivisible { hidden: 64, heads: 5 });
        assert_eq!(err.to_string(), "the width 64 is not a multiple of the 5 attention heads");
    }

    #[test]
    fn kv_heads_must_divide_the_heads() {
        let llama = json!({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 100, "num_key_value_heads": 3});
        let err = ModelConfig::from_value(llama).unwrap_err();
        assert_eq!(err, ConfigError::KvHeadsNotDivisible { heads: 4, kv_heads: 3 });
        // GPT-2's attention has a key/value head per query head: its config class reads no other.
        assert_eq!(ModelConfig::from_value(gpt2(json!({"num_key_value_heads": 2}))).unwrap().kv_heads, 4);
    }

    #[test]
    fn sizes_must_be_positive_integers_that_fit() {
        for (extra, want) in [
            (json!({"n_layer": 0}), "`n_layer` must be a positive integer, found 0"),
            (json!({"n_layer": -2}), "`n_layer` must be a positive integer, found -2"),
            (json!({"n_layer": 2.5}), "`n_layer` must be a positive integer, found 2.5"),
            (json!({"n_embd": 4294967360u64}), "`n_embd` 4294967360 is too large (at most 4294967295)"),
        ] {
            assert_eq!(ModelConfig::from_value(gpt2(extra)).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn a_gpt2_activation_parlab_does_not_compute_is_refused() {
        let err = ModelConfig::from_value(gpt2(json!({"activation_function": "relu"}))).unwrap_err();
        assert_eq!(err, ConfigError::Activation { found: "\"relu\"".into() });
        assert!(ModelConfig::from_value(gpt2(json!({"activation_function": "gelu"}))).is_ok());
    }

    #[test]
    fn a_config_that_is_not_an_object_or_whose_model_type_is_absent_or_not_a_string_is_refused() {
        assert_eq!(ModelConfig::from_value(json!([1, 2])).unwrap_err().to_string(), "expected a JSON object of keys, found an array");
        let err = ModelConfig::from_value(gpt2(json!({"model_type": 5}))).unwrap_err();
        assert_eq!(err.to_string(), "`model_type` must be a string such as \"llama\", found 5");
        let mut untyped = gpt2(json!({}));
        untyped.as_object_mut().unwrap().remove("model_type");
        let err = ModelConfig::from_value(untyped).unwrap_err();
        assert!(err
            .to_string()
            .starts_with(&format!("`model_type` is missing; name the model's family: {} to run it", Family::runnable_types())));
        assert!(err.to_string().ends_with("for its shape and advice alone also mistral, qwen3_moe, gemma, gemma2, phi3"), "{err}");
    }
}
