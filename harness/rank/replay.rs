//! The decode rounds of a `step: graph` run (one rank, one sequence, a whole dense model): the
//! prompt prefilled as in any run, then each round the fixed-shape step (`model::fixed_step`),
//! captured once as a CUDA graph and replayed with the round's token and position, its logits
//! copied to the host and checked against the reference as any step's are.

use super::decode_engine::RepResult;
use crate::cuda_graph::{CudaGraph, GraphNodes};
use crate::manifest::answer::Exactness;
use crate::model::fixed_step::{FixedShape, FixedStep};
use crate::model::gpt2::{Alone, KvCache};
use crate::model::part::DecoderPart;
use crate::model::reference::{to_vec, top2, Generation};
use std::time::Instant;
use tch::Tensor;

/// How each round's step reaches the device.
enum Issue {
    /// The host issues the step's operators every round (the fixed-shape step checked where
    /// there is no GPU; never what a `step: graph` run records).
    Direct,
    /// Captured once; each round replays the graph, which leaves its logits in `logits`.
    Captured {
        /// The graph (dropped before the tensors it allocated).
        graph: CudaGraph,
        /// `[vocab]`: the captured step's output, rewritten by each replay.
        logits: Tensor,
    },
}

/// A whole model's fixed-shape step with the one cache every repetition refills (a captured
/// graph reads and writes that memory).
pub struct ReplayedStep<'a> {
    /// First, so dropped first: the graph goes before the inputs, table and cache it reads.
    issue: Issue,
    part: &'a dyn DecoderPart,
    step: FixedStep,
    cache: KvCache,
}

/// Repetitions of warm-up on the graph's stream before the capture, as PyTorch's examples do.
const WARMUP: usize = 3;

impl<'a> ReplayedStep<'a> {
    /// The step of `part` for a cache of `max_len` positions, issued directly by the host.
    pub fn direct(part: &'a dyn DecoderPart, max_len: usize) -> anyhow::Result<Self> {
        let step = FixedStep::new(part as &dyn FixedShape, part.placement().device, max_len)?;
        Ok(ReplayedStep { issue: Issue::Direct, part, step, cache: part.new_cache(max_len) })
    }

    /// The step of `part` captured as a CUDA graph on GPU `ordinal`: warmed up on the graph's
    /// side stream, then captured there once.
    pub fn captured(part: &'a dyn DecoderPart, max_len: usize, ordinal: usize) -> anyhow::Result<Self> {
        let mut this = Self::direct(part, max_len)?;
        let mut graph = CudaGraph::new(ordinal)?;
        let (step, cache) = (&this.step, &mut this.cache);
        graph.on_side_stream(|| (0..WARMUP).try_for_each(|_| part.fixed_step(step, cache).map(drop)))??;
        let logits = graph.capture(|| part.fixed_step(step, cache))??;
        this.issue = Issue::Captured { graph, logits };
        Ok(this)
    }

    /// What the captured graph holds (None: issued directly).
    pub fn nodes(&self) -> anyhow::Result<Option<GraphNodes>> {
        match &self.issue {
            Issue::Direct => Ok(None),
            Issue::Captured { graph, .. } => Ok(Some(graph.nodes()?)),
        }
    }

    /// The logits `[vocab]` of `token` at `position` (its key and value stored in the cache).
    fn logits(&mut self, token: u32, position: usize) -> anyhow::Result<Tensor> {
        self.step.inputs.set(token, position);
        match &self.issue {
            Issue::Direct => Ok(self.part.fixed_step(&self.step, &mut self.cache)?),
            Issue::Captured { graph, logits } => {
                graph.replay()?;
                Ok(logits.shallow_clone())
            }
        }
    }

    /// One repetition: the prompt prefilled as any unsplit run does, then `new_tokens − 1`
    /// rounds of the fixed-shape step, each timed until its logits are on the host.
    pub fn decode(&mut self, prompt: &[u32], new_tokens: usize, reference: Option<&Generation>) -> anyhow::Result<RepResult> {
        let part = self.part;
        let mut exact = reference.map(|_| Exactness::default());
        let start = Instant::now();
        self.cache.len = 0;
        let h = part.forward(part.embed(prompt, 0)?, &mut self.cache, &mut Alone);
        let mut tokens = Vec::with_capacity(new_tokens);
        observe(to_vec(&part.logits(&h, &mut Alone)), 0, &mut tokens, exact.as_mut(), reference);
        part.placement().synchronize();
        super::fault::stretch(start.elapsed());
        let prefill_s = start.elapsed().as_secs_f64();
        let mut steps = Vec::with_capacity(new_tokens);
        for round in 1..new_tokens {
            let t0 = Instant::now();
            let last = *tokens.last().expect("a token from the previous round");
            let logits = to_vec(&self.logits(last, self.cache.len)?);
            self.cache.len += 1;
            observe(logits, round, &mut tokens, exact.as_mut(), reference);
            super::fault::stretch(t0.elapsed());
            steps.push((t0.elapsed().as_secs_f64(), 0.0));
        }
        Ok(RepResult {
            prefill_s,
            prefill_comm_s: 0.0,
            prefill_reduces: Default::default(),
            step_reduces: Default::default(),
            steps,
            run_s: start.elapsed().as_secs_f64(),
            tokens: vec![tokens],
            exactness: exact,
            collectives_per_step: None,
            context: None,
            experts: None,
        })
    }
}

/// Takes round `round`'s greedy token from its logits and checks them against the reference.
fn observe(logits: Vec<f32>, round: usize, tokens: &mut Vec<u32>, exact: Option<&mut Exactness>, reference: Option<&Generation>) {
    tokens.push(top2(&logits).0);
    if let (Some(e), Some(r)) = (exact, reference) {
        e.observe(r, round, &logits);
    }
}
