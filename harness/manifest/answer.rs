//! A decode run's answer as its manifest records it: the token lists its ranks generated and
//! how exactly they match the unsplit reference.

use crate::model::reference::{Exactness, StepCheck};
use serde::{Deserialize, Serialize};

/// The distinct token lists a decode run generated and their exactness figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Each distinct list of generated token ids (one list when every sequence and rank agree).
    pub tokens: Vec<Vec<u32>>,
    /// The run's tokens and logits against the unsplit reference.
    pub exactness: AnswerExactness,
}

/// The ranks' [`Exactness`] records merged, with what was checked against what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerExactness {
    /// Every generated token equals the reference's, and every sequence generated the same list.
    pub tokens_equal: bool,
    /// Largest |difference| over the logits of every step compared.
    pub max_logit_diff: f64,
    /// Largest |difference| in the prompt's final logits.
    pub prompt_logit_diff: f64,
    /// Smallest gap between the two largest logits the run saw; None when no step was compared.
    pub min_top2_margin: Option<f64>,
    /// First step whose token differs from the reference's, if any.
    #[serde(default)]
    pub first_difference: Option<usize>,
    /// Steps whose logits were compared.
    pub steps_compared: usize,
    /// Per step: margins, drift and the reference's token.
    #[serde(default)]
    pub steps: Vec<StepCheck>,
    /// Sequences whose tokens were checked, over all ranks holding logits.
    pub sequences_checked: usize,
    /// Ranks that held logits and compared them.
    pub ranks_checked: usize,
    /// What the reference is and where it is cached.
    pub reference: String,
}

impl Answer {
    /// The manifest's answer from the distinct token lists and the ranks' merged exactness.
    pub fn new(tokens: Vec<Vec<u32>>, merged: Exactness, sequences_checked: usize, ranks_checked: usize, reference: String) -> Self {
        let exactness = AnswerExactness {
            tokens_equal: merged.tokens_equal && tokens.len() == 1,
            max_logit_diff: merged.max_logit_diff,
            prompt_logit_diff: merged.prompt_logit_diff,
            min_top2_margin: Some(merged.min_top2_margin).filter(|m| m.is_finite()),
            first_difference: merged.first_difference,
            steps_compared: merged.steps_compared,
            steps: merged.steps,
            sequences_checked,
            ranks_checked,
            reference,
        };
        Answer { tokens, exactness }
    }

    /// The reference's token at every step, when the run recorded each step.
    pub fn recorded_reference(&self) -> Option<Vec<u32>> {
        let steps = &self.exactness.steps;
        (!steps.is_empty()).then(|| steps.iter().map(|s| s.reference_token).collect())
    }
}
