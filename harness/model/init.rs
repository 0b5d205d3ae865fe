//! Seeded GPT-2 checkpoints (`parlab model init`): the recipe `parlab-gpt2-init/1`.
//!
//! Why not GPT-2's own initialisation (everything N(0, 0.02²), head tied to the
//! embedding)? A random model made that way decodes one token over and over: the
//! tied head scores the current token's own embedding highest, and attention that
//! averages over the whole context turns the biases and the mean of GELU into a
//! context-independent vector that wins every step. An exactness check on such a
//! model proves little, since any bug that keeps the constant winner keeps the answer.
//! The recipe below was chosen by measuring greedy decoding of the 124M config in
//! Hugging Face transformers (32-token prompts, 25 tokens, several seeds): 24-25
//! distinct tokens per generation, final-logit std about 10.
//!
//! * `wte` ~ N(0, 1): the token dominates the residual stream, so the next token
//!   depends on it and on the context (a walk, not a fixed point).
//! * `lm_head` untied (config.json gets `tie_word_embeddings: false`, HF then saves and
//!   loads `lm_head.weight`), ~ N(0, (10/√d)²): logits with std ≈ 10.
//! * query/key columns of `c_attn` ~ N(0, (2/√d)²), value columns ~ N(0, 1/d): scores
//!   with std ≈ 4, so attention picks a few positions instead of averaging all of them.
//! * `c_proj`, `c_fc` ~ N(0, 1/fan_in): each block adds O(1) per component.
//! * layer-norm gains 1 + N(0, 0.1²), every bias ~ N(0, 0.02²): nonzero, so a split that
//!   adds a row-parallel bias twice, or drops a layer-norm parameter, changes the logits
//!   (the cross-check against transformers sees it) without making decoding degenerate.
//! * `wpe` ~ N(0, 0.25²).
//! * a mixture config (`num_local_experts`): each expert drawn as the MLP above, the router
//!   `mlp.gate.weight` ~ N(0, 1/d), so router logits of a normed row have std ≈ 1 and the
//!   experts are chosen about evenly (a run's `routing_skew` then crowds them).
//!
//! Llama-family checkpoints (`parlab-llama-init/1`, Hugging Face's `model.layers.N.*` names)
//! follow the same reasoning: `embed_tokens` ~ N(0, 1), `lm_head` untied ~ N(0, (10/√d)²),
//! `q_proj` and `k_proj` ~ N(0, (2/√d)²), `v_proj` ~ N(0, 1/d), `o_proj`, `gate_proj`,
//! `up_proj`, `down_proj` ~ N(0, 1/fan_in), RMSNorm gains (and Qwen3's per-head q/k norms)
//! 1 + N(0, 0.1²), the biases a config asks for (Qwen2's q/k/v) ~ N(0, 0.02²). A Mixtral
//! config's blocks draw, in place of the MLP, the router `block_sparse_moe.gate.weight` ~ N(0, 1/d)
//! and per expert `w1`, `w3` ~ N(0, 1/d), `w2` ~ N(0, 1/intermediate_size).
//!
//! Each tensor draws from its own splitmix64 stream (seed, tensor name) with Box-Muller
//! normals, so the bytes depend on the seed and the config only; a checkpoint cut to its first
//! N layers ([`with_layers`], `parlab model init --layers N`) holds the same bytes in every
//! tensor it keeps as the whole model's.

use super::config::{ConfigError, Family, ModelConfig};
use super::gpt2::MoeDims;
use super::llama::LlamaDims;
use super::rng::SplitMix64;
use safetensors::tensor::{Dtype as StDtype, TensorView};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a config cannot be cut to the number of layers asked for.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayersError {
    /// Zero layers asked for.
    #[error("--layers 0: a checkpoint needs at least one layer (give 1 to {has})")]
    Zero {
        /// Layers the model has.
        has: u32,
    },
    /// More layers asked for than the model has.
    #[error("--layers {asked}: the model has {has} layers (give 1 to {has})")]
    MoreThanModel {
        /// Layers asked for.
        asked: u32,
        /// Layers the model has.
        has: u32,
    },
    /// The cut config no longer reads (not expected: only layer counts change).
    #[error("the config cut to {layers} layers does not read: {problem}")]
    Config {
        /// Layers asked for.
        layers: u32,
        /// What the config reader said.
        problem: ConfigError,
    },
}

/// Why `parlab model init --out` cannot take a checkpoint: it replaces its folder whole, so
/// only a new folder, an empty one or one holding a checkpoint alone is taken.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OutError {
    /// A path with no folder name of its own (`.`, `..`, `/`).
    #[error("--out {}: name a folder of the checkpoint's own (e.g. {}/ckpt); the one named would be replaced whole", .0.display(), .0.display())]
    NoName(PathBuf),
    /// A file, not a folder.
    #[error("--out {}: a file is there; name a new or empty folder", .0.display())]
    NotFolder(PathBuf),
    /// A folder holding more than a checkpoint.
    #[error("--out {}: holds {found}; model init replaces only a new or empty folder or one holding config.json and model.safetensors alone", path.display())]
    Occupied {
        /// The folder.
        path: PathBuf,
        /// What else it holds (a name, or why it could not be listed).
        found: String,
    },
    /// A path under a file: no folder can be made there.
    #[error("--out {}: {} is a file, so no folder can be made under it; name a folder elsewhere", out.display(), file.display())]
    UnderFile {
        /// The folder named.
        out: PathBuf,
        /// The file on its way.
        file: PathBuf,
    },
    /// The folder the model itself is read from: replacing it would lose the input.
    #[error("--out {}: is the folder the model is read from ({}); name another folder for the checkpoint", out.display(), model.display())]
    IsModel {
        /// The folder named.
        out: PathBuf,
        /// The model's folder.
        model: PathBuf,
    },
}

/// The files a checkpoint folder holds.
const CHECKPOINT_FILES: [&str; 2] = ["config.json", "model.safetensors"];

/// Checks that writing a checkpoint into `out` (replacing the folder) loses nothing else.
pub fn check_out(out: &Path) -> Result<(), OutError> {
    if out.file_name().is_none() {
        return Err(OutError::NoName(out.to_path_buf()));
    }
    if !out.exists() {
        // The folder is made under its nearest existing ancestor, which must be a folder.
        return match out.ancestors().skip(1).find(|a| a.exists()) {
            Some(a) if !a.is_dir() => Err(OutError::UnderFile { out: out.to_path_buf(), file: a.to_path_buf() }),
            _ => Ok(()),
        };
    }
    if !out.is_dir() {
        return Err(OutError::NotFolder(out.to_path_buf()));
    }
    let occupied = |found: String| OutError::Occupied { path: out.to_path_buf(), found };
    for entry in std::fs::read_dir(out).map_err(|e| occupied(format!("what cannot be listed ({e})")))? {
        let name = entry.map_err(|e| occupied(format!("what cannot be listed ({e})")))?.file_name();
        if !CHECKPOINT_FILES.iter().any(|f| name == *f) {
            return Err(occupied(format!("`{}`", name.to_string_lossy())));
        }
    }
    // model init writes both files at once: a config.json alone is a model's definition (as
    // each folder of models/ is), which replacing would lose.
    if out.join("config.json").exists() && !out.join("model.safetensors").exists() {
        return Err(occupied("config.json without model.safetensors (a model's definition, not a checkpoint model init wrote)".into()));
    }
    Ok(())
}

/// Refuses an `out` that is `model_dir` itself, however spelt: the checkpoint would replace
/// the config.json (and weights) it is made from.
pub fn check_not_model(out: &Path, model_dir: &Path) -> Result<(), OutError> {
    match (out.canonicalize(), model_dir.canonicalize()) {
        (Ok(a), Ok(b)) if a == b => Err(OutError::IsModel { out: out.to_path_buf(), model: model_dir.to_path_buf() }),
        _ => Ok(()),
    }
}

/// The keys a config.json counts its layers with, in the order `ModelConfig::from_value` reads them.
const LAYER_KEYS: [&str; 2] = ["n_layer", "num_hidden_layers"];

/// `cfg` at its real shape but with its first `layers` transformer blocks only: the layer count
/// rewritten under the key (or keys) the config uses (`n_layer` for GPT-2, `num_hidden_layers` for the
/// Llama family), a per-layer `layer_types` list cut to match and `max_window_layers` capped at it.
pub fn with_layers(cfg: &ModelConfig, layers: u32) -> Result<ModelConfig, LayersError> {
    let has = cfg.layers;
    if layers == 0 {
        return Err(LayersError::Zero { has });
    }
    if layers > has {
        return Err(LayersError::MoreThanModel { asked: layers, has });
    }
    let mut raw = cfg.raw.clone();
    if let Some(map) = raw.as_object_mut() {
        // Every key that counts them: a config may carry both, and both must say `layers`.
        for key in LAYER_KEYS {
            if let Some(count) = map.get_mut(key) {
                *count = Value::from(layers);
            }
        }
        if let Some(Value::Array(types)) = map.get_mut("layer_types") {
            types.truncate(layers as usize);
        }
        if let Some(window) = map.get("max_window_layers").and_then(Value::as_u64) {
            map.insert("max_window_layers".into(), Value::from(window.min(u64::from(layers))));
        }
    }
    ModelConfig::from_value(raw).map_err(|problem| LayersError::Config { layers, problem })
}

/// One tensor of the recipe: its name, shape and how each element is drawn (mean, std).
struct Recipe {
    name: String,
    shape: Vec<usize>,
    draw: Draw,
}

/// How element `i` of a tensor is drawn from the generator.
type Draw = Box<dyn Fn(usize, &mut SplitMix64) -> f64>;

fn normal(name: String, shape: Vec<usize>, mean: f64, std: f64) -> Recipe {
    Recipe { name, shape, draw: Box::new(move |_, r| mean + std * r.normal()) }
}

/// The tensors of a GPT-2 checkpoint as transformers' `save_pretrained` names them.
fn recipes(cfg: &ModelConfig) -> Vec<Recipe> {
    let (d, f, v, p) = (cfg.hidden as usize, cfg.intermediate as usize, cfg.vocab as usize, cfg.max_positions.max(1) as usize);
    let inv = |n: usize| 1.0 / (n as f64).sqrt();
    let mut out = vec![
        normal("transformer.wte.weight".into(), vec![v, d], 0.0, 1.0),
        normal("transformer.wpe.weight".into(), vec![p, d], 0.0, 0.25),
        normal("lm_head.weight".into(), vec![v, d], 0.0, 10.0 * inv(d)),
    ];
    let ln = |out: &mut Vec<Recipe>, prefix: String| {
        out.push(normal(format!("{prefix}.weight"), vec![d], 1.0, 0.1));
        out.push(normal(format!("{prefix}.bias"), vec![d], 0.0, 0.02));
    };
    let mlp = |out: &mut Vec<Recipe>, prefix: String, f: usize| {
        out.push(normal(format!("{prefix}.c_fc.weight"), vec![d, f], 0.0, inv(d)));
        out.push(normal(format!("{prefix}.c_fc.bias"), vec![f], 0.0, 0.02));
        out.push(normal(format!("{prefix}.c_proj.weight"), vec![f, d], 0.0, inv(f)));
        out.push(normal(format!("{prefix}.c_proj.bias"), vec![d], 0.0, 0.02));
    };
    let moe = MoeDims::of(cfg).ok().flatten();
    for l in 0..cfg.layers as usize {
        let h = format!("transformer.h.{l}");
        ln(&mut out, format!("{h}.ln_1"));
        let (qk, vstd) = (2.0 * inv(d), inv(d));
        out.push(Recipe {
            name: format!("{h}.attn.c_attn.weight"),
            shape: vec![d, 3 * d],
            draw: Box::new(move |i, r| r.normal() * if i % (3 * d) < 2 * d { qk } else { vstd }),
        });
        out.push(normal(format!("{h}.attn.c_attn.bias"), vec![3 * d], 0.0, 0.02));
        out.push(normal(format!("{h}.attn.c_proj.weight"), vec![d, d], 0.0, inv(d)));
        out.push(normal(format!("{h}.attn.c_proj.bias"), vec![d], 0.0, 0.02));
        ln(&mut out, format!("{h}.ln_2"));
        match &moe {
            Some(m) => {
                out.push(normal(format!("{h}.mlp.gate.weight"), vec![m.experts, d], 0.0, inv(d)));
                for e in 0..m.experts {
                    mlp(&mut out, format!("{h}.mlp.experts.{e}"), m.width);
                }
            }
            None => mlp(&mut out, format!("{h}.mlp"), f),
        }
    }
    ln(&mut out, "transformer.ln_f".into());
    out
}

/// The tensors of a Llama-family checkpoint as transformers' `save_pretrained` names them.
fn llama_recipes(d: &LlamaDims) -> Vec<Recipe> {
    let (w, f, hd, v) = (d.hidden, d.ffn, d.head_dim, d.vocab);
    let (q, kv) = (d.heads * hd, d.kv_heads * hd);
    let inv = |n: usize| 1.0 / (n as f64).sqrt();
    let gain = |name: String, n: usize| normal(name, vec![n], 1.0, 0.1);
    let mut out = vec![normal("model.embed_tokens.weight".into(), vec![v, w], 0.0, 1.0)];
    for l in 0..d.layers {
        let at = |n: &str| format!("model.layers.{l}.{n}");
        out.push(gain(at("input_layernorm.weight"), w));
        out.push(normal(at("self_attn.q_proj.weight"), vec![q, w], 0.0, 2.0 * inv(w)));
        out.push(normal(at("self_attn.k_proj.weight"), vec![kv, w], 0.0, 2.0 * inv(w)));
        out.push(normal(at("self_attn.v_proj.weight"), vec![kv, w], 0.0, inv(w)));
        if d.qkv_bias {
            for (name, n) in [("q_proj", q), ("k_proj", kv), ("v_proj", kv)] {
                out.push(normal(at(&format!("self_attn.{name}.bias")), vec![n], 0.0, 0.02));
            }
        }
        if d.qk_norm {
            out.push(gain(at("self_attn.q_norm.weight"), hd));
            out.push(gain(at("self_attn.k_norm.weight"), hd));
        }
        out.push(normal(at("self_attn.o_proj.weight"), vec![w, q], 0.0, inv(q)));
        if d.o_bias {
            out.push(normal(at("self_attn.o_proj.bias"), vec![w], 0.0, 0.02));
        }
        out.push(gain(at("post_attention_layernorm.weight"), w));
        if let Some(m) = &d.moe {
            out.push(normal(at("block_sparse_moe.gate.weight"), vec![m.experts, w], 0.0, inv(w)));
            for e in 0..m.experts {
                let expert = |n: &str| at(&format!("block_sparse_moe.experts.{e}.{n}.weight"));
                out.push(normal(expert("w1"), vec![f, w], 0.0, inv(w)));
                out.push(normal(expert("w3"), vec![f, w], 0.0, inv(w)));
                out.push(normal(expert("w2"), vec![w, f], 0.0, inv(f)));
            }
            continue;
        }
        out.push(normal(at("mlp.gate_proj.weight"), vec![f, w], 0.0, inv(w)));
        out.push(normal(at("mlp.up_proj.weight"), vec![f, w], 0.0, inv(w)));
        out.push(normal(at("mlp.down_proj.weight"), vec![w, f], 0.0, inv(f)));
        if d.mlp_bias {
            for (name, n) in [("gate_proj", f), ("up_proj", f), ("down_proj", w)] {
                out.push(normal(at(&format!("mlp.{name}.bias")), vec![n], 0.0, 0.02));
            }
        }
    }
    out.push(gain("model.norm.weight".into(), w));
    out.push(normal("lm_head.weight".into(), vec![v, w], 0.0, 10.0 * inv(w)));
    out
}

/// The recipe of a config's family.
fn family_recipes(cfg: &ModelConfig) -> anyhow::Result<Vec<Recipe>> {
    match cfg.family() {
        Some(Family::Gpt2) => Ok(recipes(cfg)),
        Some(Family::Llama) => Ok(llama_recipes(&LlamaDims::from_config(cfg).map_err(anyhow::Error::msg)?)),
        None => anyhow::bail!("parlab makes seeded checkpoints of model_type {}, not {}", Family::runnable_types(), cfg.model_type),
    }
}

/// The float32 values a seeded checkpoint of `cfg` holds: every tensor [`write_checkpoint`]
/// writes (its output head untied, so a tied config's head counts twice), None for a family
/// it does not make.
pub fn seeded_params(cfg: &ModelConfig) -> Option<u64> {
    Some(family_recipes(cfg).ok()?.iter().map(|r| r.shape.iter().product::<usize>() as u64).sum())
}

fn bytes_of(recipe: &Recipe, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::for_stream(seed, &recipe.name);
    let n: usize = recipe.shape.iter().product();
    let mut out = Vec::with_capacity(n * 4);
    for i in 0..n {
        out.extend_from_slice(&((recipe.draw)(i, &mut rng) as f32).to_le_bytes());
    }
    out
}

/// The config.json a seeded checkpoint carries: the model's, with the head untied (and, for the
/// Llama family, its element type float32, which transformers otherwise casts to).
pub fn seeded_config(cfg: &ModelConfig) -> Value {
    let mut raw = cfg.raw.clone();
    if let Some(map) = raw.as_object_mut() {
        map.insert("tie_word_embeddings".into(), Value::Bool(false));
        if cfg.family() == Some(Family::Llama) {
            map.remove("dtype");
            map.insert("torch_dtype".into(), Value::String("float32".into()));
        }
    }
    raw
}

/// Writes `config.json` and `model.safetensors` (f32) for `cfg` and `seed` into `dir` (created).
pub fn write_checkpoint(cfg: &ModelConfig, seed: u64, dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the checkpoint folder {}", dir.display()))?;
    let recipes = family_recipes(cfg)?;
    let data = recipes
        .iter()
        .map(|r| crate::launch::signals::stop_if_received("generating the seeded checkpoint").map(|()| bytes_of(r, seed)))
        .collect::<anyhow::Result<Vec<Vec<u8>>>>()?;
    let views = recipes
        .iter()
        .zip(&data)
        .map(|(r, b)| Ok((r.name.clone(), TensorView::new(StDtype::F32, r.shape.clone(), b)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    let meta = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    let weights = dir.join("model.safetensors");
    safetensors::serialize_to_file(views, &meta, &weights).with_context(|| format!("cannot write {}", weights.display()))?;
    let config = dir.join("config.json");
    std::fs::write(&config, serde_json::to_string_pretty(&seeded_config(cfg))?)
        .with_context(|| format!("cannot write {}", config.display()))?;
    Ok(())
}

/// Makes the seeded checkpoint at `dir` unless it is already there (written to a temp folder, then renamed).
/// A new one removes the checkpoints of the same model and seed it supersedes (another config
/// or generator: each is the size of the model).
pub fn ensure_checkpoint(cfg: &ModelConfig, seed: u64, dir: &Path) -> anyhow::Result<()> {
    if dir.join("model.safetensors").is_file() && dir.join("config.json").is_file() {
        return Ok(());
    }
    replace_checkpoint(cfg, seed, dir)?;
    for old in crate::spec::weights::superseded(dir) {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

/// Writes the seeded checkpoint into a temp folder next to `dir`, then moves it into place.
pub fn replace_checkpoint(cfg: &ModelConfig, seed: u64, dir: &Path) -> anyhow::Result<()> {
    // `ckpt/.` is `ckpt`: a folder cannot be renamed onto a path ending in `.`.
    let dir: &Path = &dir.components().collect::<PathBuf>();
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("checkpoint");
    let tmp = dir.with_file_name(format!(".{name}.tmp-{}", temp_owner(&crate::host::this_host(), std::process::id())));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    remove_abandoned(dir, name);
    if let Err(e) = write_checkpoint(cfg, seed, &tmp) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| anyhow::anyhow!("{}: cannot move the new checkpoint into place: {e}", dir.display()))?;
    Ok(())
}

/// The writer a temp folder's name records: `<host>-<pid>` (a checkpoints folder may be
/// shared between hosts, whose pids say nothing of each other).
fn temp_owner(host: &str, pid: u32) -> String {
    format!("{host}-{pid}")
}

/// Removes the temp folders of `name` that a process of this host killed while writing left
/// beside `dir` (`.{name}.tmp-<host>-<pid>` whose process is gone); best effort.
fn remove_abandoned(dir: &Path, name: &str) {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let prefix = format!(".{name}.tmp-{}-", crate::host::this_host());
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !crate::host::process_exists(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_temp_folder_of_a_process_that_is_gone_is_removed_and_a_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("gpt2-seed0-abc");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let here = crate::host::this_host();
        let (abandoned, live, other, elsewhere) = (
            root.path().join(format!(".gpt2-seed0-abc.tmp-{}", temp_owner(&here, dead))),
            root.path().join(format!(".gpt2-seed0-abc.tmp-{}", temp_owner(&here, std::process::id()))),
            root.path().join(format!(".llama-seed0-abc.tmp-{}", temp_owner(&here, dead))),
            root.path().join(format!(".gpt2-seed0-abc.tmp-{}", temp_owner("another-host", dead))),
        );
        for d in [&abandoned, &live, &other, &elsewhere] {
            std::fs::create_dir_all(d).unwrap();
        }
        remove_abandoned(&dir, "gpt2-seed0-abc");
        assert!(!abandoned.exists() && live.exists() && other.exists(), "only this host's dead writer's");
        assert!(elsewhere.exists(), "another host's pid says nothing here");
    }

    fn tiny_llama() -> ModelConfig {
        ModelConfig::from_value(json!({"model_type": "llama", "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 2, "hidden_size": 16, "intermediate_size": 32, "vocab_size": 50,
            "max_position_embeddings": 32, "max_window_layers": 3, "layer_types": ["full_attention", "full_attention", "full_attention"]}))
        .unwrap()
    }

    #[test]
    fn a_cut_config_counts_its_layers_under_the_key_it_had() {
        let llama = with_layers(&tiny_llama(), 2).unwrap();
        assert_eq!(llama.layers, 2);
        assert_eq!(llama.raw["num_hidden_layers"], json!(2));
        assert_eq!(llama.raw["layer_types"], json!(["full_attention", "full_attention"]));
        assert_eq!(llama.raw["max_window_layers"], json!(2));
        let gpt2 =
            ModelConfig::from_value(json!({"model_type": "gpt2", "n_layer": 4, "n_head": 2, "n_embd": 8, "vocab_size": 20})).unwrap();
        let cut = with_layers(&gpt2, 1).unwrap();
        assert_eq!((cut.layers, &cut.raw["n_layer"], cut.raw.get("num_hidden_layers")), (1, &json!(1), None));
        assert_eq!(with_layers(&gpt2, 4).unwrap().raw, gpt2.raw, "all of its layers leaves the config as it was");
    }

    #[test]
    fn a_config_counting_its_layers_under_both_keys_is_cut_under_both() {
        // Only the first key was rewritten: the written config.json said 1 layer and 4 layers.
        let both = ModelConfig::from_value(
            json!({"model_type": "gpt2", "n_layer": 4, "num_hidden_layers": 4, "n_head": 2, "n_embd": 8, "vocab_size": 20}),
        )
        .unwrap();
        let cut = with_layers(&both, 1).unwrap();
        assert_eq!((&cut.raw["n_layer"], &cut.raw["num_hidden_layers"]), (&json!(1), &json!(1)));
    }

    #[test]
    fn out_is_refused_where_replacing_it_would_lose_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let (new, file, held) = (dir.path().join("new"), dir.path().join("file"), dir.path().join("held"));
        std::fs::write(&file, "").unwrap();
        std::fs::create_dir(&held).unwrap();
        for f in CHECKPOINT_FILES {
            std::fs::write(held.join(f), "").unwrap();
        }
        assert_eq!((check_out(&new), check_out(&held), check_out(dir.path().join("held/.").as_path())), (Ok(()), Ok(()), Ok(())));
        assert_eq!(check_out(&file), Err(OutError::NotFolder(file.clone())));
        for bare in [".", "..", "/", "sub/.."] {
            assert_eq!(check_out(Path::new(bare)), Err(OutError::NoName(bare.into())), "{bare}");
        }
        std::fs::write(held.join("notes.txt"), "mine").unwrap();
        let err = check_out(&held).unwrap_err();
        assert_eq!(err, OutError::Occupied { path: held.clone(), found: "`notes.txt`".into() });
        assert!(err.to_string().ends_with(
            "holds `notes.txt`; model init replaces only a new or empty folder or one holding config.json and model.safetensors alone"
        ));
    }

    #[test]
    fn zero_layers_or_more_than_the_model_has_are_refused() {
        assert_eq!(with_layers(&tiny_llama(), 0).unwrap_err(), LayersError::Zero { has: 3 });
        assert_eq!(with_layers(&tiny_llama(), 4).unwrap_err(), LayersError::MoreThanModel { asked: 4, has: 3 });
        assert!(with_layers(&tiny_llama(), 4).unwrap_err().to_string().contains("the model has 3 layers"));
    }

    #[test]
    fn a_cut_checkpoint_keeps_the_whole_models_bytes_in_the_tensors_it_keeps() {
        let whole = tempfile::tempdir().unwrap();
        let cut = tempfile::tempdir().unwrap();
        write_checkpoint(&tiny_llama(), 5, whole.path()).unwrap();
        write_checkpoint(&with_layers(&tiny_llama(), 1).unwrap(), 5, cut.path()).unwrap();
        let (whole_bytes, cut_bytes) =
            (std::fs::read(whole.path().join("model.safetensors")).unwrap(), std::fs::read(cut.path().join("model.safetensors")).unwrap());
        let (whole_st, cut_st) =
            (safetensors::SafeTensors::deserialize(&whole_bytes).unwrap(), safetensors::SafeTensors::deserialize(&cut_bytes).unwrap());
        let cut_names = cut_st.names();
        assert!(cut_names.iter().all(|n| !n.starts_with("model.layers.1.") && !n.starts_with("model.layers.2.")));
        assert!(cut_names.iter().any(|n| n.starts_with("model.layers.0.")));
        assert_eq!(cut_names.len() + 2 * cut_names.iter().filter(|n| n.starts_with("model.layers.0.")).count(), whole_st.names().len());
        for name in cut_names {
            assert_eq!(cut_st.tensor(name).unwrap().data(), whole_st.tensor(name).unwrap().data(), "{name}");
        }
    }
}
