//! From a decode RunPlan to a loaded model: its checkpoint, prompt, share and reference answer.

use super::config::{Family, ModelConfig};
use super::gpt2::{Dims, Gpt2Part, PartShare};
use super::llama::{LlamaDims, LlamaPart, LlamaShare};
use super::part::DecoderPart;
use super::placement::Placement;
use super::reference::{self, Generation};
use super::rng::SplitMix64;
use super::weights::Checkpoint;
use crate::manifest::MODEL_DIGEST;
use crate::spec::plan::{ModelSource, RankShare, RunPlan, Weights, Workload};
use crate::spec::schema::{Dtype, Prompt};
use std::path::PathBuf;
use std::sync::Arc;

/// The model of a decode plan, or an error naming the plan.
pub fn model_of(plan: &RunPlan) -> anyhow::Result<&ModelSource> {
    plan.model.as_ref().ok_or_else(|| anyhow::anyhow!("{}: a decode run needs a model", plan.label()))
}

/// The `model.safetensors` a plan's ranks read.
pub fn checkpoint_path(model: &ModelSource) -> PathBuf {
    match &model.weights {
        Weights::Checkpoint { path, .. } => path.clone(),
        Weights::Seeded { path, .. } => path.join("model.safetensors"),
    }
}

/// The prompt and number of tokens to generate of a decode plan.
pub fn decode_params(plan: &RunPlan) -> anyhow::Result<(&Prompt, usize)> {
    match &plan.workload {
        Workload::Decode { prompt, new_tokens, .. } => Ok((prompt, *new_tokens as usize)),
        _ => anyhow::bail!("{}: not a decode plan", plan.label()),
    }
}

/// The prompt's token ids: the spec's, or `length` ids drawn with splitmix64 from `seed` over the vocabulary.
pub fn prompt_ids(prompt: &Prompt, vocab: u32) -> anyhow::Result<Vec<u32>> {
    match prompt {
        Prompt::Tokens(ids) => {
            if let Some(bad) = ids.iter().find(|&&t| t >= vocab) {
                anyhow::bail!("prompt token {bad} is outside the vocabulary (size {vocab})");
            }
            Ok(ids.clone())
        }
        Prompt::Seeded { length, seed } => {
            let mut rng = SplitMix64::for_stream(*seed, "parlab-prompt");
            Ok((0..*length).map(|_| rng.below(vocab as u64) as u32).collect())
        }
    }
}

/// Makes the seeded checkpoint of a plan if its weights are `Seeded` and it is missing; returns
/// the config its weights are read with ([`weights_config`]).
pub fn ensure_weights(model: &ModelSource) -> anyhow::Result<ModelConfig> {
    let cfg = ModelConfig::read(&model.dir)?;
    if let Weights::Seeded { seed, path, .. } = &model.weights {
        super::init::ensure_checkpoint(&cfg, *seed, path)?;
    }
    for_weights(model, cfg)
}

/// The config a model's weights are read with: the folder's, or for seeded weights the one their
/// checkpoint carries (its head untied, as it was written: a tied config's head would otherwise
/// be the token table, not the `lm_head.weight` transformers reads from that folder).
pub fn weights_config(model: &ModelSource) -> anyhow::Result<ModelConfig> {
    for_weights(model, ModelConfig::read(&model.dir)?)
}

fn for_weights(model: &ModelSource, folder: ModelConfig) -> anyhow::Result<ModelConfig> {
    match model.weights {
        Weights::Checkpoint { .. } => Ok(folder),
        Weights::Seeded { .. } => ModelConfig::from_value(super::init::seeded_config(&folder))
            .map_err(|e| anyhow::anyhow!("{}: the seeded checkpoint's config: {e}", model.dir.display())),
    }
}

/// A decode plan's element type (float32 for other plans).
pub fn dtype(plan: &RunPlan) -> Dtype {
    match &plan.workload {
        Workload::Decode { dtype, .. } => *dtype,
        _ => Dtype::Float32,
    }
}

/// libtorch's element type for a spec dtype.
pub fn torch_kind(dtype: Dtype) -> tch::Kind {
    match dtype {
        Dtype::Float32 => tch::Kind::Float,
        Dtype::Float16 => tch::Kind::Half,
        Dtype::Bfloat16 => tch::Kind::BFloat16,
    }
}

/// A decode plan's routing skew (0 for other plans).
pub fn routing_skew(plan: &RunPlan) -> f64 {
    match &plan.workload {
        Workload::Decode { routing_skew, .. } => *routing_skew,
        _ => 0.0,
    }
}

/// Loads the share `share` (None: the whole model) of a plan's checkpoint, routing a mixture
/// with `skew`.
pub fn load_part(model: &ModelSource, cfg: &ModelConfig, share: Option<&RankShare>, skew: f64) -> anyhow::Result<Box<dyn DecoderPart>> {
    load_part_on(model, cfg, share, skew, Placement::cpu())
}

/// [`load_part`] onto `placement` (a GPU, or half precision): the model of the config's family.
pub fn load_part_on(
    model: &ModelSource,
    cfg: &ModelConfig,
    share: Option<&RankShare>,
    skew: f64,
    placement: Placement,
) -> anyhow::Result<Box<dyn DecoderPart>> {
    let ckpt = Arc::new(Checkpoint::open(&checkpoint_path(model))?);
    match cfg.family() {
        Some(Family::Gpt2) => {
            let dims = Dims::from_config(cfg).with_routing_skew(skew);
            host_only_mixture(dims.moe.is_some(), &placement)?;
            let share = share.map_or_else(|| PartShare::whole(&dims), |s| PartShare::from_rank(s, &dims));
            Ok(Box::new(Gpt2Part::load_on(ckpt, dims, share, placement)?))
        }
        Some(Family::Llama) => {
            let dims = LlamaDims::from_config(cfg).map_err(|e| anyhow::anyhow!("{}: {e}", model.dir.display()))?.with_routing_skew(skew);
            host_only_mixture(dims.moe.is_some(), &placement)?;
            let share = share.map_or_else(|| LlamaShare::whole(&dims), |s| LlamaShare::from_rank(s, &dims));
            Ok(Box::new(LlamaPart::load_on(ckpt, dims, share, placement)?))
        }
        None => anyhow::bail!("{} is a {} model; parlab runs model_type {}", model.dir.display(), cfg.model_type, Family::runnable_types()),
    }
}

/// Refuses a mixture model anywhere but the host in float32 (its experts compute on slices).
fn host_only_mixture(mixture: bool, placement: &Placement) -> anyhow::Result<()> {
    if mixture && *placement != Placement::cpu() {
        anyhow::bail!("a mixture model computes on the host in float32 only in this version (asked for {})", placement.describe());
    }
    Ok(())
}

/// Where the reference answer of an answer identity is cached, for this build's model code.
pub fn reference_stem(answer_id: &str) -> PathBuf {
    crate::spec::weights::state_dir().join("reference").join(format!("{answer_id}-{}", crate::identity::short(MODEL_DIGEST)))
}

/// The unsplit model's greedy answer for a plan: cached under `.parlab/reference/`, computed if missing.
pub fn reference_for(plan: &RunPlan) -> anyhow::Result<Generation> {
    let stem = reference_stem(&plan.answer_id);
    if let Some(found) = reference::load(&stem)? {
        return Ok(found);
    }
    let model = model_of(plan)?;
    let cfg = ensure_weights(model)?;
    let (prompt, new_tokens) = decode_params(plan)?;
    let ids = prompt_ids(prompt, cfg.vocab)?;
    let part = load_part(model, &cfg, None, routing_skew(plan))?;
    Checkpoint::open(&checkpoint_path(model))?.check_finite()?;
    let gen = reference::greedy(part.as_ref(), &ids, new_tokens)?;
    reference::save(&gen, &ids, &stem)?;
    Ok(gen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::llama::LlamaDims;

    #[test]
    fn seeded_weights_of_a_tied_config_are_read_with_the_untied_head_their_checkpoint_holds() {
        let (seeded, folder_cfg) = crate::spec::weights::model_source("llama-3.2-1b", 0).unwrap();
        assert!(LlamaDims::from_config(&folder_cfg).unwrap().tied, "models/llama-3.2-1b ties its head");
        assert!(matches!(seeded.weights, Weights::Seeded { .. }));
        let read = weights_config(&seeded).unwrap();
        assert!(!LlamaDims::from_config(&read).unwrap().tied, "the seeded checkpoint's own lm_head.weight");
        assert_eq!((read.layers, read.hidden, read.vocab), (folder_cfg.layers, folder_cfg.hidden, folder_cfg.vocab));
        let own =
            ModelSource { weights: Weights::Checkpoint { path: seeded.dir.join("model.safetensors"), sha256: String::new() }, ..seeded };
        assert!(
            LlamaDims::from_config(&weights_config(&own).unwrap()).unwrap().tied,
            "a checkpoint of one's own is read as its config says"
        );
    }
}
