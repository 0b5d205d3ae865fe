//! A decode run's answer as its manifest records it: the token lists its ranks generated and
//! how exactly they match the unsplit reference.

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

/// Exactness of one run against the reference, accumulated step by step (`model::reference`
/// observes the steps; a rank records it, the collector merges the ranks').
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exactness {
    /// Every generated token equals the reference's.
    pub tokens_equal: bool,
    /// Largest |difference| over the logits of every step compared.
    pub max_logit_diff: f64,
    /// Largest |difference| in the prompt's final logits.
    pub prompt_logit_diff: f64,
    /// Smallest gap between the two largest logits seen by the split run.
    pub min_top2_margin: f64,
    /// Steps whose logits were compared (steps after a changed token are not comparable).
    pub steps_compared: usize,
    /// First step whose token differs, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub first_difference: Option<usize>,
    /// Per step: margins, drift and the reference's token (what `audit` grades with).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub steps: Vec<StepCheck>,
}

/// One decode step compared with the reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepCheck {
    /// Smallest top-2 margin of this run's logits at the step (over sequences and repetitions).
    pub margin: f64,
    /// Largest |logit difference| from the reference at the step; None once a token differed.
    pub drift: Option<f64>,
    /// The reference's top-2 margin at the step.
    pub reference_margin: f64,
    /// The reference's token at the step.
    pub reference_token: u32,
    /// This run's token at the step (the first one differing from the reference, if any).
    pub token: u32,
}

impl StepCheck {
    /// Merges another sequence's or rank's check of the same step into this one.
    pub fn merge(&mut self, o: &StepCheck) {
        self.margin = self.margin.min(o.margin);
        self.drift = match (self.drift, o.drift) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        if self.token == self.reference_token {
            self.token = o.token;
        }
    }
}

impl Default for Exactness {
    fn default() -> Self {
        Exactness {
            tokens_equal: true,
            max_logit_diff: 0.0,
            prompt_logit_diff: 0.0,
            min_top2_margin: f64::INFINITY,
            steps_compared: 0,
            first_difference: None,
            steps: Vec::new(),
        }
    }
}

impl Exactness {
    /// Combines the figures of two sequences or ranks.
    pub fn merge(&mut self, other: &Exactness) {
        for (i, o) in other.steps.iter().enumerate() {
            match self.steps.get_mut(i) {
                Some(s) => s.merge(o),
                None => self.steps.push(*o),
            }
        }
        self.tokens_equal &= other.tokens_equal;
        self.max_logit_diff = self.max_logit_diff.max(other.max_logit_diff);
        self.prompt_logit_diff = self.prompt_logit_diff.max(other.prompt_logit_diff);
        self.min_top2_margin = self.min_top2_margin.min(other.min_top2_margin);
        self.steps_compared = self.steps_compared.min(other.steps_compared);
        self.first_difference = match (self.first_difference, other.first_difference) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}
