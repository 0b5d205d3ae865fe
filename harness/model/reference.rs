//! The unsplit model's greedy answer, and the exactness figures of a split run against it.

use super::gpt2::Alone;
use super::part::DecoderPart;
use std::path::Path;
use tch::Tensor;

/// A greedy generation: the tokens and the logits that chose them (`[new_tokens, vocab]`, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Logits of the prompt's last position, then of each decode step.
    pub logits: Vec<f32>,
    /// Vocabulary size (row length of `logits`).
    pub vocab: usize,
}

impl Generation {
    /// Row `i` of the logits.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.logits[i * self.vocab..(i + 1) * self.vocab]
    }
}

/// A tensor's values as a vector of f32, copied to the host (and to float32) where it is not there.
pub fn to_vec(logits: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(&super::placement::on_host(logits).contiguous().view([-1])).expect("f32 logits")
}

/// The index of the largest logit (the first, on ties) and the gap to the second largest.
pub fn top2(logits: &[f32]) -> (u32, f32) {
    let (mut best, mut first, mut second) = (0usize, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for (i, &x) in logits.iter().enumerate() {
        if x > first {
            second = first;
            first = x;
            best = i;
        } else if x > second {
            second = x;
        }
    }
    (best as u32, first - second)
}

/// Greedy decoding of `new_tokens` tokens after `prompt` with an unsplit (or replica) part.
pub fn greedy(part: &dyn DecoderPart, prompt: &[u32], new_tokens: usize) -> anyhow::Result<Generation> {
    let mut cache = part.new_cache(prompt.len() + new_tokens);
    let mut input = part.embed(prompt, 0)?;
    let mut gen = Generation { tokens: Vec::new(), logits: Vec::new(), vocab: part.vocab() };
    for step in 0..new_tokens {
        crate::launch::signals::stop_if_received("computing the reference answer")?;
        let h = part.forward(input.shallow_clone(), &mut cache, &mut Alone);
        let logits = to_vec(&part.logits(&h, &mut Alone));
        if let Some(i) = logits.iter().position(|x| !x.is_finite()) {
            anyhow::bail!("the unsplit model's logits at step {step} hold a NaN or infinite value (vocabulary index {i})");
        }
        let (tok, _) = top2(&logits);
        gen.tokens.push(tok);
        gen.logits.extend_from_slice(&logits);
        if step + 1 < new_tokens {
            input = part.embed(&[tok], prompt.len() + step)?;
        }
    }
    Ok(gen)
}

use crate::manifest::answer::{Exactness, StepCheck};

impl Exactness {
    /// Compares step `step`'s logits (and the token they chose) with the reference.
    pub fn observe(&mut self, reference: &Generation, step: usize, logits: &[f32]) {
        let (tok, margin) = top2(logits);
        self.min_top2_margin = self.min_top2_margin.min(margin as f64);
        if step >= reference.tokens.len() {
            return;
        }
        let diff = logits.iter().zip(reference.row(step)).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max) as f64;
        self.record_step(reference, step, tok, margin as f64, diff);
        if self.first_difference.is_some() {
            return;
        }
        self.max_logit_diff = self.max_logit_diff.max(diff);
        if step == 0 {
            self.prompt_logit_diff = self.prompt_logit_diff.max(diff);
        }
        self.steps_compared += 1;
        if tok != reference.tokens[step] {
            self.tokens_equal = false;
            self.first_difference = Some(step);
        }
    }

    /// Adds (or merges into) step `step`'s record.
    fn record_step(&mut self, reference: &Generation, step: usize, token: u32, margin: f64, diff: f64) {
        let comparable = self.first_difference.is_none_or(|k| k > step);
        let check = StepCheck {
            margin,
            drift: comparable.then_some(diff),
            reference_margin: top2(reference.row(step)).1 as f64,
            reference_token: reference.tokens[step],
            token,
        };
        if let Some(s) = self.steps.get_mut(step) {
            s.merge(&check);
        } else if self.steps.len() == step {
            self.steps.push(check);
        }
    }
}

/// Writes a generation as `<stem>.json` (prompt, tokens, vocab) and `<stem>.f32` (little-endian `[tokens, vocab]` logits).
pub fn save(gen: &Generation, prompt: &[u32], stem: &Path) -> anyhow::Result<()> {
    if let Some(dir) = stem.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes: Vec<u8> = gen.logits.iter().flat_map(|x| x.to_le_bytes()).collect();
    let tmp = stem.with_extension(format!("f32.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, stem.with_extension("f32"))?;
    let meta = serde_json::json!({"prompt": prompt, "tokens": gen.tokens, "vocab": gen.vocab, "rows": gen.tokens.len()});
    crate::manifest::write_atomic(&stem.with_extension("json"), serde_json::to_string_pretty(&meta)?.as_bytes())?;
    Ok(())
}

/// Reads a generation written by [`save`], or `None` when it is not there.
pub fn load(stem: &Path) -> anyhow::Result<Option<Generation>> {
    let (json, raw) = (stem.with_extension("json"), stem.with_extension("f32"));
    if !json.is_file() || !raw.is_file() {
        return Ok(None);
    }
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let tokens: Vec<u32> = serde_json::from_value(meta["tokens"].clone())?;
    let vocab = meta["vocab"].as_u64().unwrap_or(0) as usize;
    let logits: Vec<f32> = std::fs::read(&raw)?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if logits.len() != tokens.len() * vocab {
        anyhow::bail!("{}: {} logits for {} tokens of vocabulary {vocab}", raw.display(), logits.len(), tokens.len());
    }
    Ok(Some(Generation { tokens, logits, vocab }))
}
