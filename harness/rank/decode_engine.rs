//! The decode loop of one rank: prefill, then rounds in which every sequence in flight
//! advances one token; stages pass activations forward and token ids back.

use super::comm::{CommStats, Communicator};
use super::context::{chunks_of, gather_cache, redistribute_cache, ContextRing, RingTally};
use super::expert::{ExpertSplit, ExpertTally};
use crate::manifest::answer::Exactness;
use crate::model::gpt2::{linear, linear_rows_into, Chunk, KvCache, Mixture, Reduce};
use crate::model::matvec::matvec_rows_into;
use crate::model::part::DecoderPart;
use crate::model::reference::{to_vec, top2, Generation};
use crate::spec::plan::RankShare;
use crate::spec::plan::Span;
use crate::spec::{HeadPlacement, RunPlan, Strategy};
use std::time::Instant;
use tch::Tensor;

/// A rank's communication: all-reduces and the logits gather (tensor), sends and receives
/// (pipeline), the ring and the hand-off (context), the experts' exchange (expert).
pub struct Link<'c> {
    /// The communicator (counts calls and seconds).
    pub comm: &'c mut Communicator,
    exchange: Exchange,
    /// The first failed exchange (an NCCL error inside the model's forward pass, which returns
    /// tensors): the step ends with it.
    failure: Option<anyhow::Error>,
}

/// How a split's ranks exchange during a repetition (what [`Link`] does for its strategy).
enum Exchange {
    /// Nothing between ranks (world 1, or data-parallel replicas).
    Alone,
    /// Row-parallel partial sums all-reduced, the logits gathered where the head is split.
    Tensor(TensorExchange),
    /// Activations passed forward between stages, token ids back to the first.
    Pipeline {
        /// This rank's stage.
        stage: u32,
        /// Stages in all.
        stages: u32,
    },
    /// The prompt's blocks through ring attention, then the cache handed to the decode layout.
    Context {
        /// The prompt block of each rank, as chunks of positions.
        blocks: Vec<Vec<Chunk>>,
        /// The tensor decode that follows (`decode_strategy: tensor`); rank 0 decodes alone without one.
        decode: Option<ContextDecode>,
    },
    /// The experts of each rank and what this rank's did.
    Expert(ExpertSplit),
}

/// A tensor split's exchanges.
struct TensorExchange {
    /// Pieces per all-reduce started non-blocking (`overlap`).
    overlap: Option<u32>,
    /// Vocabulary rows of each rank, where the output head is split.
    vocab_counts: Option<Vec<i32>>,
}

/// The tensor decode after a context prefill.
struct ContextDecode {
    /// The key/value heads each rank holds while decoding.
    heads: Vec<Span>,
    /// Its exchanges.
    tensor: TensorExchange,
}

impl TensorExchange {
    /// A tensor split over `ranks` with output head `head`.
    fn new(plan: &RunPlan, head: Option<HeadPlacement>, ranks: &[RankShare]) -> Self {
        let vocab_counts =
            (head == Some(HeadPlacement::Split)).then(|| ranks.iter().map(|r| r.vocab.map_or(0, |s| s.len() as i32)).collect());
        TensorExchange { overlap: plan.layout.overlap, vocab_counts }
    }
}

impl Exchange {
    /// The exchanges a plan's strategy needs on rank `rank` of `size`.
    fn of(plan: &RunPlan, rank: u32, size: u32) -> Self {
        let layout = &plan.layout;
        match layout.strategy {
            Strategy::Data => Exchange::Alone,
            Strategy::Tensor => Exchange::Tensor(TensorExchange::new(plan, layout.head, &layout.ranks)),
            Strategy::Pipeline => Exchange::Pipeline { stage: rank, stages: size },
            Strategy::Context => Exchange::Context {
                blocks: chunks_of(&layout.ranks.iter().map(|r| r.prompt_chunks()).collect::<Vec<_>>()),
                // The cache a tensor decode holds: each rank's key/value heads (a query head's own for GPT-2).
                decode: layout.decode.as_ref().map(|d| ContextDecode {
                    heads: d.ranks.iter().map(|r| r.kv_heads.or(r.heads).unwrap_or(Span::new(0, 0))).collect(),
                    tensor: TensorExchange::new(plan, Some(d.head), &d.ranks),
                }),
            },
            Strategy::Expert => {
                let layers = layout.ranks.first().and_then(|r| r.layers).map_or(1, |s| s.len().max(1) as usize);
                Exchange::Expert(ExpertSplit::new(layout.ranks.iter().map(|r| r.experts.unwrap_or(Span::new(0, 0))).collect(), layers))
            }
        }
    }

    /// The tensor exchanges of the decode rounds, if they are a tensor split's.
    fn tensor(&self) -> Option<&TensorExchange> {
        match self {
            Exchange::Tensor(t) | Exchange::Context { decode: Some(ContextDecode { tensor: t, .. }), .. } => Some(t),
            _ => None,
        }
    }

    /// (This rank's stage, stages): (0, 1) unless pipeline.
    fn stages(&self) -> (u32, u32) {
        match self {
            Exchange::Pipeline { stage, stages } => (*stage, *stages),
            _ => (0, 1),
        }
    }
}

impl<'c> Link<'c> {
    /// The link a plan's strategy needs.
    pub fn new(plan: &RunPlan, comm: &'c mut Communicator) -> Self {
        let exchange = Exchange::of(plan, comm.rank(), comm.size());
        Link { comm, exchange, failure: None }
    }

    /// The exchange's result, or (keeping its error for [`Link::check`]) `fallback`.
    fn kept(&mut self, result: anyhow::Result<Tensor>, fallback: &Tensor) -> Tensor {
        result.unwrap_or_else(|e| {
            self.failure.get_or_insert(e);
            fallback.shallow_clone()
        })
    }

    /// Fails with the first exchange that failed since the last check.
    fn check(&mut self) -> anyhow::Result<()> {
        self.failure.take().map_or(Ok(()), Err)
    }

    /// Whether this rank runs the decode rounds (a context split decodes on rank 0 alone unless
    /// it names a decode split).
    fn decodes(&self) -> bool {
        !matches!(self.exchange, Exchange::Context { decode: None, .. }) || self.comm.rank() == 0
    }

    /// Collectives one decode step of one sequence must make on a part with `layers` layers
    /// whose row-parallel outputs are `width` values (each overlapped all-reduce is its pieces).
    pub fn expected_collectives(&self, layers: usize, width: usize) -> Option<u64> {
        let tensor = self.exchange.tensor()?;
        let per_reduce = self.pieces(width).map_or(1, |p| p.len() as u64);
        Some(2 * layers as u64 * per_reduce + u64::from(tensor.vocab_counts.is_some()))
    }

    /// The lengths of the pieces an all-reduce over `rows` rows is cut into, when overlapping.
    fn pieces(&self, rows: usize) -> Option<Vec<usize>> {
        let n = self.exchange.tensor()?.overlap?.min(rows as u32).max(1);
        Some(crate::spec::layout::even_spans(rows as u32, n).iter().map(|s| s.len() as usize).collect())
    }

    /// A context split's prompt blocks, one per rank (a copy: the ring borrows the communicator).
    fn context_blocks(&self) -> Option<Vec<Vec<Chunk>>> {
        match &self.exchange {
            Exchange::Context { blocks, .. } => Some(blocks.clone()),
            _ => None,
        }
    }

    /// The key/value heads of each rank in the tensor decode after a context prefill.
    fn decode_heads(&self) -> Option<Vec<Span>> {
        match &self.exchange {
            Exchange::Context { decode: Some(d), .. } => Some(d.heads.clone()),
            _ => None,
        }
    }

    /// What this rank's experts did since the last call (expert splits).
    fn take_experts(&mut self) -> Option<ExpertTally> {
        match &mut self.exchange {
            Exchange::Expert(split) => Some(split.take()),
            _ => None,
        }
    }

    fn collectives(&self) -> u64 {
        let s = self.comm.stats();
        s.all_reduces + s.all_gathers
    }
}

impl Reduce for Link<'_> {
    fn all_reduce(&mut self, partial: &Tensor) -> Tensor {
        if self.exchange.tensor().is_none() {
            return partial.shallow_clone();
        }
        // Over NCCL on the GPU on an NCCL link; else staged through the host for MPI.
        let sum = self.comm.all_reduce_tensor(partial);
        self.kept(sum, partial)
    }

    fn sums_partials(&self) -> bool {
        self.exchange.tensor().is_some()
    }

    fn all_reduce_row(&mut self, partial: &mut [f32]) {
        if self.sums_partials() {
            self.comm.all_reduce_sum(partial);
        }
    }

    fn gather_vocab(&mut self, part: &Tensor) -> Tensor {
        let Some(counts) = self.exchange.tensor().and_then(|t| t.vocab_counts.clone()) else {
            return part.shallow_clone();
        };
        let all = self.comm.all_gather_tensor(part, &counts);
        self.kept(all, part)
    }

    fn reduced_matvec(&mut self, w: &Tensor, x: &[f32]) -> Vec<f32> {
        let mut y = vec![0f32; w.size()[0] as usize];
        match self.pieces(y.len()) {
            Some(pieces) => self.comm.all_reduce_sum_overlapped(&mut y, &pieces, |first, piece| matvec_rows_into(w, x, first, piece)),
            None => {
                matvec_rows_into(w, x, 0, &mut y);
                self.all_reduce_row(&mut y);
            }
        }
        y
    }

    fn mixture(&mut self, m: &Mixture, x: &Tensor) -> Tensor {
        match &mut self.exchange {
            Exchange::Expert(split) => split.mixture(self.comm, m, x),
            _ => m.local(x),
        }
    }

    fn reduced_linear(&mut self, x: &Tensor, w: &Tensor) -> Tensor {
        let (rows, width) = (x.size()[0] as usize, w.size()[0] as usize);
        let Some(pieces) = self.pieces(rows) else {
            return self.all_reduce(&linear(x, w, None));
        };
        let values: Vec<usize> = pieces.iter().map(|r| r * width).collect();
        let mut y = vec![0f32; rows * width];
        self.comm.all_reduce_sum_overlapped(&mut y, &values, |first, piece| linear_rows_into(x, w, first / width, piece));
        Tensor::from_slice(&y).view([rows as i64, width as i64])
    }
}

/// libtorch on one thread while it lives (the decode rounds where parlab's row kernels do the
/// products): its operators there are a few thousand values each, where waking a second thread
/// costs more than it saves and would compete with the matvec pool for the cores. Prefill's
/// matmuls keep every thread, and so do rounds whose products are libtorch's (half precision,
/// the GPU's code path on the host).
struct OneTorchThread {
    before: i32,
}

impl OneTorchThread {
    /// One libtorch thread for decode rounds on `placement`, where parlab's row kernels do them.
    fn for_rounds(placement: &crate::model::placement::Placement) -> Option<Self> {
        placement.rows_on_host().then(Self::new)
    }

    fn new() -> Self {
        let before = tch::get_num_threads();
        tch::set_num_threads(1);
        OneTorchThread { before }
    }
}

impl Drop for OneTorchThread {
    fn drop(&mut self) {
        tch::set_num_threads(self.before);
    }
}

/// The all-reduces a rank made over a span of a repetition.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReduceTally {
    /// Calls.
    pub calls: u64,
    /// Payload bytes, all calls together.
    pub bytes: u64,
    /// Seconds inside them, waiting for other ranks included.
    pub seconds: f64,
}

impl ReduceTally {
    /// The all-reduces between two readings of a communicator's counters.
    pub fn between(before: &CommStats, after: &CommStats) -> Self {
        ReduceTally {
            calls: after.all_reduces - before.all_reduces,
            bytes: after.all_reduce_bytes - before.all_reduce_bytes,
            seconds: after.all_reduce_seconds - before.all_reduce_seconds,
        }
    }

    /// Bytes and seconds of one call on average; None without calls.
    pub fn per_call(&self) -> Option<(u64, f64)> {
        (self.calls > 0).then(|| (self.bytes / self.calls, self.seconds / self.calls as f64))
    }
}

/// The timings and answer of one repetition on one rank.
#[derive(Debug, Clone)]
pub struct RepResult {
    /// Seconds of the prefill round (every sequence's prompt).
    pub prefill_s: f64,
    /// Seconds inside communication during prefill.
    pub prefill_comm_s: f64,
    /// The all-reduces of prefill (every sequence's prompt).
    pub prefill_reduces: ReduceTally,
    /// The all-reduces of the decode rounds.
    pub step_reduces: ReduceTally,
    /// Per decode round: (seconds, seconds inside communication).
    pub steps: Vec<(f64, f64)>,
    /// Seconds of the whole repetition, prefill included.
    pub run_s: f64,
    /// Tokens per sequence (complete on the rank that produces logits).
    pub tokens: Vec<Vec<u32>>,
    /// Exactness against the reference, on ranks that produce logits.
    pub exactness: Option<Exactness>,
    /// Collectives per decode step of one sequence (tensor), checked equal on every step.
    pub collectives_per_step: Option<u64>,
    /// A context split's prefill: what the ring moved and the gather of the cache to rank 0.
    pub context: Option<ContextTally>,
    /// An expert split's share on this rank: in prefill, then over the decode rounds.
    pub experts: Option<(ExpertTally, ExpertTally)>,
}

/// What a context-parallel prefill moved on one rank, every sequence together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContextTally {
    /// The ring's key/value blocks.
    pub ring: RingTally,
    /// Key/value bytes this rank sent to rank 0 after the ring.
    pub gather_bytes: u64,
    /// Seconds of that gather.
    pub gather_s: f64,
}

/// Seconds counted by the communicator as a duration (never negative).
fn seconds(counted: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(counted.max(0.0))
}

/// The rank whose block holds the prompt's last position (`len − 1`), and that position's row in
/// the rank's block (its chunks' rows one after another).
fn last_position(blocks: &[Vec<Chunk>], len: usize) -> (usize, i64) {
    blocks
        .iter()
        .enumerate()
        .find_map(|(r, b)| b.iter().zip(crate::model::gpt2::chunk_rows(b)).find(|(c, _)| c.end == len).map(|(_, (at, n))| (r, at + n - 1)))
        .unwrap_or((0, 0))
}

/// What a rank decodes: its part, the prompt, sequences in flight and tokens to generate.
pub struct Engine<'a> {
    part: &'a dyn DecoderPart,
    /// The part the decode rounds use when it is not the prefill's (a context split's tensor decode).
    decode_part: Option<&'a dyn DecoderPart>,
    /// The prompt's token ids.
    pub prompt: Vec<u32>,
    /// Tokens to generate per sequence.
    pub new_tokens: usize,
    /// Sequences in flight (each decodes the prompt, with its own cache).
    pub sequences: usize,
    reference: Option<&'a Generation>,
}

impl<'a> Engine<'a> {
    /// An engine for a plan (sequences from `layout.sequences`, at least 1); `decode_part`, where
    /// given, runs the decode rounds after `part`'s prefill.
    pub fn new(
        plan: &RunPlan,
        part: &'a dyn DecoderPart,
        decode_part: Option<&'a dyn DecoderPart>,
        prompt: Vec<u32>,
        new_tokens: usize,
        reference: Option<&'a Generation>,
    ) -> Self {
        let sequences = plan.layout.sequences.unwrap_or(1).max(1) as usize;
        Engine { part, decode_part, prompt, new_tokens, sequences, reference }
    }

    /// The part the decode rounds run on.
    pub fn rounds_part(&self) -> &'a dyn DecoderPart {
        self.decode_part.unwrap_or(self.part)
    }

    fn max_len(&self) -> usize {
        self.prompt.len() + self.new_tokens
    }

    /// One repetition from an empty cache.
    pub fn run_once(&self, link: &mut Link) -> anyhow::Result<RepResult> {
        let mut caches: Vec<KvCache> = (0..self.sequences).map(|_| self.part.new_cache(self.max_len())).collect();
        let mut tokens = vec![Vec::new(); self.sequences];
        let mut exact = self.rounds_part().has_head().then(Exactness::default);
        let expected = link.expected_collectives(self.part.layers_held(), self.part.hidden());
        let start = Instant::now();
        let comm0 = link.comm.stats();
        let mut context = matches!(link.exchange, Exchange::Context { .. }).then(ContextTally::default);
        for s in 0..self.sequences {
            match context.as_mut() {
                Some(tally) => {
                    if let Some(handed) = self.prefill_context(link, &mut caches[s], &mut tokens[s], exact.as_mut(), tally)? {
                        caches[s] = handed;
                    }
                }
                None => self.advance(link, &mut caches[s], &mut tokens[s], 0, exact.as_mut())?,
            }
        }
        self.part.placement().synchronize();
        super::fault::stretch_own_work(start.elapsed(), seconds(link.comm.stats().seconds - comm0.seconds));
        let prefill_s = start.elapsed().as_secs_f64();
        let experts_prefill = link.take_experts();
        let comm1 = link.comm.stats();
        let prefill_comm_s = comm1.seconds - comm0.seconds;
        let single = OneTorchThread::for_rounds(self.rounds_part().placement());
        let mut steps = Vec::with_capacity(self.new_tokens);
        let rounds = if link.decodes() { 1..self.new_tokens } else { 0..0 };
        for round in rounds {
            let (t0, c0) = (Instant::now(), link.comm.stats().seconds);
            for s in 0..self.sequences {
                let before = link.collectives();
                self.advance(link, &mut caches[s], &mut tokens[s], round, exact.as_mut())?;
                let made = link.collectives() - before;
                if let Some(want) = expected.filter(|&w| w != made) {
                    anyhow::bail!("decode step {round} made {made} collectives; a tensor split of this model makes {want}");
                }
            }
            self.rounds_part().placement().synchronize();
            super::fault::stretch_own_work(t0.elapsed(), seconds(link.comm.stats().seconds - c0));
            steps.push((t0.elapsed().as_secs_f64(), link.comm.stats().seconds - c0));
        }
        drop(single);
        let run_s = start.elapsed().as_secs_f64();
        let (prefill_reduces, step_reduces) = (ReduceTally::between(&comm0, &comm1), ReduceTally::between(&comm1, &link.comm.stats()));
        Ok(RepResult {
            prefill_s,
            prefill_comm_s,
            prefill_reduces,
            step_reduces,
            steps,
            run_s,
            tokens,
            exactness: exact,
            collectives_per_step: expected,
            context,
            experts: experts_prefill.zip(link.take_experts()),
        })
    }

    /// A context split's prefill of one sequence: this rank's prompt block through every layer
    /// with ring attention, then the cache handed to the decode layout. Rank 0 alone: every
    /// block's cache rows gathered to rank 0, which takes the last prompt row's hidden state from
    /// the last rank and produces the first token. A tensor decode: each rank's heads of every
    /// block by an all-to-all, the last row broadcast, and every rank produces the first token
    /// with its decode part; returns that part's cache.
    fn prefill_context(
        &self,
        link: &mut Link,
        cache: &mut KvCache,
        tokens: &mut Vec<u32>,
        exact: Option<&mut Exactness>,
        tally: &mut ContextTally,
    ) -> anyhow::Result<Option<KvCache>> {
        let blocks = link.context_blocks().unwrap_or_default();
        let rank = link.comm.rank() as usize;
        let (heads, head_dim) = (self.part.kv_heads_held(), self.part.head_dim());
        let mut ring = ContextRing::new(link.comm, &blocks, heads, head_dim);
        let h = self.part.prefill_block(&self.prompt, &blocks[rank], cache, &mut ring)?;
        tally.ring += ring.tally;
        let (last, row) = last_position(&blocks, self.prompt.len());
        let final_row = h.narrow(0, if rank == last { row } else { 0 }, 1);
        let start = Instant::now();
        let handed = self.hand_off(link, &blocks, cache, tally);
        tally.gather_s += start.elapsed().as_secs_f64();
        cache.len = self.prompt.len();
        let Some(row) = self.last_row_where_decoded(link, last, final_row, handed.is_some()) else {
            return Ok(handed);
        };
        let logits = to_vec(&self.rounds_part().logits(&row, link));
        tokens.push(top2(&logits).0);
        if let (Some(e), Some(r)) = (exact, self.reference) {
            e.observe(r, 0, &logits);
        }
        Ok(handed)
    }

    /// Hands a context prefill's cache to the decode layout and counts the bytes this rank sent:
    /// a tensor decode's heads of every block to each rank (returns the decode part's cache), or
    /// every block's rows to rank 0 (into `cache` there; returns None).
    fn hand_off(&self, link: &mut Link, blocks: &[Vec<Chunk>], cache: &mut KvCache, tally: &mut ContextTally) -> Option<KvCache> {
        match (link.decode_heads(), self.decode_part) {
            (Some(heads), Some(decode_part)) => {
                let mut handed = decode_part.new_cache(self.max_len());
                tally.gather_bytes += redistribute_cache(link.comm, blocks, &heads, cache, &mut handed);
                handed.len = self.prompt.len();
                Some(handed)
            }
            _ => {
                tally.gather_bytes += gather_cache(link.comm, blocks, cache);
                None
            }
        }
    }

    /// The last prompt row's hidden state `[1, d]` (held by rank `last`) on the ranks that
    /// produce the first token: broadcast to every rank for a decode split (`everywhere`), else
    /// sent to rank 0; None on the ranks that do not.
    fn last_row_where_decoded(&self, link: &mut Link, last: usize, row: Tensor, everywhere: bool) -> Option<Tensor> {
        let rank = link.comm.rank() as usize;
        let received = |buf: Vec<f32>| Tensor::from_slice(&buf).view([1, -1]);
        if everywhere {
            let mut buf = if rank == last { to_vec(&row) } else { vec![0f32; self.part.hidden()] };
            link.comm.broadcast(last as u32, &mut buf);
            return Some(received(buf));
        }
        if last == 0 || (rank != 0 && rank != last) {
            return (rank == 0).then_some(row);
        }
        if rank == last {
            link.comm.send(0, &to_vec(&row));
            return None;
        }
        let mut buf = vec![0f32; self.part.hidden()];
        link.comm.recv(last as u32, &mut buf);
        Some(received(buf))
    }

    /// Advances one sequence by one round on this rank's stage.
    fn advance(
        &self,
        link: &mut Link,
        cache: &mut KvCache,
        tokens: &mut Vec<u32>,
        round: usize,
        exact: Option<&mut Exactness>,
    ) -> anyhow::Result<()> {
        let part = self.rounds_part();
        let d = part.hidden();
        let rows = if round == 0 { self.prompt.len() } else { 1 };
        let (stage, stages) = link.exchange.stages();
        let last_stage = stage + 1 == stages;
        let h = if stage == 0 {
            let input = if round == 0 {
                self.prompt.clone()
            } else if stages > 1 {
                let mut buf = [0f32];
                link.comm.recv(stages - 1, &mut buf);
                vec![buf[0] as u32]
            } else {
                vec![*tokens.last().expect("a token from the previous round")]
            };
            if round > 0 && stages > 1 {
                tokens.push(input[0]);
            }
            part.embed(&input, cache.len)?
        } else {
            let mut buf = vec![0f32; rows * d];
            link.comm.recv(stage - 1, &mut buf);
            Tensor::from_slice(&buf).view([rows as i64, d as i64])
        };
        let h = part.forward(h, cache, link);
        link.check()?;
        if !last_stage {
            link.comm.send(stage + 1, &to_vec(&h));
            return Ok(());
        }
        let logits = part.logits(&h, link);
        link.check()?;
        let logits = to_vec(&logits);
        let (tok, _) = top2(&logits);
        if stages > 1 && round + 1 < self.new_tokens {
            link.comm.send(0, &[tok as f32]);
        }
        if stages == 1 || stage != 0 {
            tokens.push(tok);
        }
        if let (Some(e), Some(r)) = (exact, self.reference) {
            e.observe(r, round, &logits);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::OneTorchThread;
    use crate::model::placement::Placement;

    #[test]
    fn rounds_whose_products_are_libtorchs_keep_every_libtorch_thread() {
        let before = tch::get_num_threads();
        tch::set_num_threads(2);
        for half in [tch::Kind::BFloat16, tch::Kind::Half] {
            let kept = OneTorchThread::for_rounds(&Placement::cpu_in(half));
            assert!(kept.is_none() && tch::get_num_threads() == 2, "{half:?}");
        }
        assert!(OneTorchThread::for_rounds(&Placement::cpu_as_gpu()).is_none());
        let single = OneTorchThread::for_rounds(&Placement::cpu());
        assert!(single.is_some() && tch::get_num_threads() == 1, "float32 rounds on the row kernels");
        drop(single);
        assert_eq!(tch::get_num_threads(), 2);
        tch::set_num_threads(before);
    }
}
