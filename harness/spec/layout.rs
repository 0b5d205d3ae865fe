//! Computes what each rank holds for a strategy and world size, and refuses splits
//! that make no sense for the model (with the sizes that would work).

use super::plan::{DecodeSplit, Layout, RankShare, Span};
use super::schema::{ContextBlocks, DecodeLayout, HeadPlacement, Kind, Strategy};
use crate::model::config::Family;
use crate::model::gpt2::MoeDims;
use crate::model::ModelConfig;

/// The axis values a layout depends on.
#[derive(Debug, Clone, Copy)]
pub struct LayoutInput {
    /// The strategy.
    pub strategy: Strategy,
    /// Ranks.
    pub world: u32,
    /// Output head placement.
    pub head: HeadPlacement,
    /// Sequences in flight.
    pub sequences: u32,
    /// Pieces per all-reduce started non-blocking (0: blocking).
    pub overlap: u32,
    /// A mixture model's routing skew (0: none).
    pub routing_skew: f64,
    /// The layout a context split decodes on.
    pub decode_strategy: DecodeLayout,
    /// How a context split cuts the prompt.
    pub context_blocks: ContextBlocks,
    /// Prompt tokens (decode).
    pub prompt_tokens: u32,
}

/// What needs a mixture-of-experts model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixtureNeed {
    /// A routing skew (spec key `routing_skew`).
    RoutingSkew,
    /// An expert split (spec key `strategy`).
    ExpertSplit,
}

impl MixtureNeed {
    /// The spec key that asked for the mixture.
    fn key(self) -> &'static str {
        match self {
            MixtureNeed::RoutingSkew => "routing_skew",
            MixtureNeed::ExpertSplit => "strategy",
        }
    }

    /// How a message names it.
    fn what(self) -> &'static str {
        match self {
            MixtureNeed::RoutingSkew => "routing_skew",
            MixtureNeed::ExpertSplit => "an expert split",
        }
    }
}

/// What an overlap refusal tells the user to do instead.
const OVERLAP_FIX: &str = "use 0 there (an exclude: rule can leave the point out)";

/// Why a split is impossible for the model; [`LayoutError::key`] names the spec key to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayoutError {
    /// `context_blocks: zigzag` on a strategy other than context.
    #[error("zigzag cuts a context split's prompt; a {} split has no blocks to cut (use contiguous there, or leave the key out)", strategy.name())]
    ZigzagOffContext {
        /// The run's strategy.
        strategy: Strategy,
    },
    /// A `decode_strategy` other than rank0 on a strategy other than context.
    #[error("names the layout a context split decodes on; a {} split decodes on its own layout (use rank0 there, or leave the key out)", strategy.name())]
    DecodeStrategyOffContext {
        /// The run's strategy.
        strategy: Strategy,
    },
    /// The tensor decode after a context prefill is impossible.
    #[error("tensor decode after the context prefill: {0}")]
    TensorDecode(Box<LayoutError>),
    /// Overlap asked of a run that makes no all-reduce to cut.
    #[error("{pieces} pieces cut a tensor split's all-reduces, and a {} run makes none; {OVERLAP_FIX}", strategy.name())]
    OverlapWithoutAllReduce {
        /// The pieces asked for.
        pieces: u32,
        /// The run's strategy.
        strategy: Strategy,
    },
    /// Overlap asked of a one-rank tensor split.
    #[error("{pieces} pieces need a tensor split over 2 or more ranks, and world 1 sums nothing; {OVERLAP_FIX}")]
    OverlapOnOneRank {
        /// The pieces asked for.
        pieces: u32,
    },
    /// More overlap pieces than allowed.
    #[error("{pieces} pieces are more than the {MAX_OVERLAP} allowed; {OVERLAP_FIX}")]
    OverlapTooFine {
        /// The pieces asked for.
        pieces: u32,
    },
    /// A tensor split of a GPT-2 mixture (its experts are not split by columns).
    #[error("a tensor split of a GPT-2 mixture is not implemented in this version (its experts are not split by columns); use expert, data or pipeline")]
    Gpt2MixtureTensor,
    /// Overlapped all-reduces on a mixture model.
    #[error("{pieces} pieces cut a dense model's all-reduces; a mixture model's are not cut in this version (use 0)")]
    OverlapOnMixture {
        /// The pieces asked for.
        pieces: u32,
    },
    /// A tensor split that does not divide the heads.
    #[error("a tensor split over {world} ranks does not divide the model's {heads} attention heads; world sizes that do: {}", divisors.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))]
    HeadsNotDivided {
        /// Ranks.
        world: u32,
        /// The model's attention heads.
        heads: u32,
        /// The world sizes that divide them.
        divisors: Vec<u32>,
    },
    /// A tensor split that does not divide the feed-forward width.
    #[error("a tensor split over {world} ranks does not divide the feed-forward width {ffn}")]
    FfnNotDivided {
        /// Ranks.
        world: u32,
        /// The feed-forward width.
        ffn: u32,
    },
    /// More pipeline stages than layers.
    #[error("a pipeline of {world} stages needs at least {world} layers; the model has {layers} (use world ≤ {layers})")]
    TooFewLayers {
        /// Stages.
        world: u32,
        /// The model's layers.
        layers: u32,
    },
    /// A dense model where a mixture is needed.
    #[error("{} needs a mixture-of-experts model (config.json with `num_local_experts`); this model is dense", need.what())]
    NeedsMixture {
        /// What needed it.
        need: MixtureNeed,
    },
    /// The model's mixture keys are wrong.
    #[error(transparent)]
    Config(#[from] crate::model::ConfigError),
    /// More ranks than experts.
    #[error("an expert split over {world} ranks leaves ranks without an expert; the model has {experts} (use world ≤ {experts})")]
    TooFewExperts {
        /// Ranks.
        world: u32,
        /// The model's experts per layer.
        experts: usize,
    },
    /// A prompt shorter than the context split's blocks.
    #[error("{} over {world} ranks needs a prompt of at least {chunks} tokens; the prompt has {prompt}", if *zigzag { "a zig-zag context split" } else { "a context split" })]
    PromptTooShort {
        /// Ranks.
        world: u32,
        /// The blocks the prompt is cut into.
        chunks: u32,
        /// Prompt tokens.
        prompt: u32,
        /// Whether the split is zig-zag.
        zigzag: bool,
    },
}

impl LayoutError {
    /// The spec key the error is reported at.
    pub fn key(&self) -> &'static str {
        match self {
            LayoutError::ZigzagOffContext { .. } => "context_blocks",
            LayoutError::DecodeStrategyOffContext { .. } | LayoutError::TensorDecode(_) => "decode_strategy",
            LayoutError::OverlapWithoutAllReduce { .. }
            | LayoutError::OverlapOnOneRank { .. }
            | LayoutError::OverlapTooFine { .. }
            | LayoutError::OverlapOnMixture { .. } => "overlap",
            LayoutError::Gpt2MixtureTensor => "strategy",
            LayoutError::NeedsMixture { need } => need.key(),
            LayoutError::Config(_) => "model",
            LayoutError::PromptTooShort { zigzag: true, .. } => "context_blocks",
            LayoutError::HeadsNotDivided { .. }
            | LayoutError::FfnNotDivided { .. }
            | LayoutError::TooFewLayers { .. }
            | LayoutError::TooFewExperts { .. }
            | LayoutError::PromptTooShort { zigzag: false, .. } => "world",
        }
    }
}

/// The most pieces an all-reduce may be cut into.
pub const MAX_OVERLAP: u32 = 64;

/// Splits `n` items into `parts` contiguous spans, the first ones one larger when uneven.
pub fn even_spans(n: u32, parts: u32) -> Vec<Span> {
    let base = n / parts;
    let extra = n % parts;
    let mut start = 0;
    (0..parts)
        .map(|i| {
            let len = base + u32::from(i < extra);
            let span = Span::new(start, start + len);
            start += len;
            span
        })
        .collect()
}

/// Every rank of `world` holding nothing in particular (a run that splits no model).
pub(super) fn bare(world: u32) -> Vec<RankShare> {
    (0..world)
        .map(|rank| RankShare {
            rank,
            heads: None,
            kv_heads: None,
            ffn: None,
            layers: None,
            vocab: None,
            experts: None,
            tokens: None,
            tokens_late: None,
        })
        .collect()
}

/// The layout of a run, or every reason the split is impossible: each independent key (the
/// routing skew, the split over the world, the context-only keys, the overlap) is checked, so a
/// spec's author sees all of a point's problems at once, not one per `validate`.
pub fn layout_for(kind: Kind, p: &LayoutInput, model: Option<&ModelConfig>) -> Result<Layout, Vec<LayoutError>> {
    let mut problems = Vec::new();
    let decode_model = model.filter(|_| kind == Kind::Decode);
    let (ranks, head, sequences) = match decode_model {
        Some(cfg) => {
            if p.routing_skew != 0.0 {
                noted(mixture_of(cfg, MixtureNeed::RoutingSkew), &mut problems);
            }
            // Only a tensor split over two or more ranks places its output head: one rank, a data
            // replica, a pipeline's last stage and an expert split's ranks hold it whole, and a
            // context split's decode split names its own. A head the split ignores stays out of
            // the identity, so points that differ only there are one run.
            let head = (p.strategy == Strategy::Tensor && p.world > 1).then_some(p.head);
            (noted(decode_shares(p, cfg), &mut problems), head, Some(p.sequences))
        }
        None if kind == Kind::Dispatch => (Some(expert_shares(p.world)), None, None),
        None => (Some(bare(p.world)), None, None),
    };
    let decode = decode_model
        .and_then(|cfg| noted(context_only(p), &mut problems).and_then(|()| noted(decode_split(p, cfg), &mut problems)))
        .flatten();
    let overlap = match decode_model {
        Some(cfg) if p.overlap > 0 && cfg.is_mixture() => Err(LayoutError::OverlapOnMixture { pieces: p.overlap }),
        _ => overlap_of(kind, p),
    };
    let overlap = noted(overlap, &mut problems).flatten();
    match ranks {
        Some(ranks) if problems.is_empty() => Ok(Layout { strategy: p.strategy, world: p.world, head, sequences, overlap, decode, ranks }),
        _ => Err(problems),
    }
}

/// The value of `checked`, or None with its error added to `problems`.
fn noted<T>(checked: Result<T, LayoutError>, problems: &mut Vec<LayoutError>) -> Option<T> {
    checked.map_err(|e| problems.push(e)).ok()
}

/// Refuses the context-only keys' other values (`context_blocks: zigzag`, `decode_strategy:
/// tensor`) on another strategy.
fn context_only(p: &LayoutInput) -> Result<(), LayoutError> {
    let strategy = p.strategy;
    if strategy == Strategy::Context {
        Ok(())
    } else if p.context_blocks == ContextBlocks::Zigzag {
        Err(LayoutError::ZigzagOffContext { strategy })
    } else if p.decode_strategy != DecodeLayout::Rank0 {
        Err(LayoutError::DecodeStrategyOffContext { strategy })
    } else {
        Ok(())
    }
}

/// The split a context run decodes on (`decode_strategy: tensor`); None for rank 0 alone.
fn decode_split(p: &LayoutInput, cfg: &ModelConfig) -> Result<Option<DecodeSplit>, LayoutError> {
    if p.decode_strategy == DecodeLayout::Rank0 {
        return Ok(None);
    }
    let tensor = LayoutInput { strategy: Strategy::Tensor, ..*p };
    let ranks = decode_shares(&tensor, cfg).map_err(|e| LayoutError::TensorDecode(Box::new(e)))?;
    Ok(Some(DecodeSplit { strategy: Strategy::Tensor, head: p.head, ranks }))
}

/// The layout's overlap: refused where there is no all-reduce to overlap.
fn overlap_of(kind: Kind, p: &LayoutInput) -> Result<Option<u32>, LayoutError> {
    if p.overlap == 0 {
        return Ok(None);
    }
    let pieces = p.overlap;
    if kind != Kind::Decode || p.strategy != Strategy::Tensor {
        return Err(LayoutError::OverlapWithoutAllReduce { pieces, strategy: p.strategy });
    }
    if p.world < 2 {
        return Err(LayoutError::OverlapOnOneRank { pieces });
    }
    if pieces > MAX_OVERLAP {
        return Err(LayoutError::OverlapTooFine { pieces });
    }
    Ok(Some(p.overlap))
}

/// The key/value heads a rank holding query heads `heads` needs, where the model has fewer
/// key/value heads than query heads or is of the Llama family (None: GPT-2, whose heads are both).
fn kv_heads_of(cfg: &ModelConfig, heads: Span) -> Option<Span> {
    (cfg.family() == Some(Family::Llama) || cfg.kv_heads != cfg.heads)
        .then(|| crate::model::llama::kv_heads_for(heads, (cfg.heads / cfg.kv_heads) as usize))
}

/// Refuses the splits a family does not implement yet (an expert split of a dense model is
/// refused by [`expert_decode_shares`]).
fn family_runs(p: &LayoutInput, cfg: &ModelConfig) -> Result<(), LayoutError> {
    if cfg.family() == Some(Family::Gpt2) && p.strategy == Strategy::Tensor && cfg.is_mixture() {
        return Err(LayoutError::Gpt2MixtureTensor);
    }
    Ok(())
}

/// Rank `rank`'s share when it holds the whole model (every head, feed-forward column, layer
/// and vocabulary row; no expert share, no prompt block): a data-parallel replica, and what the
/// other splits change.
fn whole_model(rank: u32, cfg: &ModelConfig) -> RankShare {
    let all = |n: u32| Some(Span::new(0, n));
    RankShare {
        rank,
        heads: all(cfg.heads),
        kv_heads: None,
        ffn: all(cfg.intermediate),
        layers: all(cfg.layers),
        vocab: all(cfg.vocab),
        experts: None,
        tokens: None,
        tokens_late: None,
    }
}

fn decode_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, LayoutError> {
    family_runs(p, cfg)?;
    match p.strategy {
        Strategy::Tensor => {
            if !cfg.heads.is_multiple_of(p.world) {
                return Err(LayoutError::HeadsNotDivided { world: p.world, heads: cfg.heads, divisors: cfg.head_divisors() });
            }
            if !cfg.intermediate.is_multiple_of(p.world) {
                return Err(LayoutError::FfnNotDivided { world: p.world, ffn: cfg.intermediate });
            }
            let heads = even_spans(cfg.heads, p.world);
            let ffn = even_spans(cfg.intermediate, p.world);
            let vocab = even_spans(cfg.vocab, p.world);
            Ok((0..p.world as usize)
                .map(|r| RankShare {
                    heads: Some(heads[r]),
                    kv_heads: kv_heads_of(cfg, heads[r]),
                    ffn: Some(ffn[r]),
                    vocab: if p.head == HeadPlacement::Split { Some(vocab[r]) } else { Some(Span::new(0, cfg.vocab)) },
                    ..whole_model(r as u32, cfg)
                })
                .collect())
        }
        Strategy::Pipeline => {
            if p.world > cfg.layers {
                return Err(LayoutError::TooFewLayers { world: p.world, layers: cfg.layers });
            }
            let layers = even_spans(cfg.layers, p.world);
            Ok((0..p.world as usize)
                .map(|r| RankShare {
                    layers: Some(layers[r]),
                    vocab: (r as u32 == p.world - 1).then(|| Span::new(0, cfg.vocab)),
                    ..whole_model(r as u32, cfg)
                })
                .collect())
        }
        Strategy::Expert => expert_decode_shares(p, cfg),
        Strategy::Data => Ok((0..p.world).map(|rank| whole_model(rank, cfg)).collect()),
        Strategy::Context => context_shares(p, cfg),
    }
}

/// The mixture of a config, or the message refusing what needs one.
fn mixture_of(cfg: &ModelConfig, need: MixtureNeed) -> Result<MoeDims, LayoutError> {
    MoeDims::of(cfg)?.ok_or(LayoutError::NeedsMixture { need })
}

/// Expert parallelism: every rank holds the attention and the output head whole and one
/// contiguous share of each mixture layer's experts.
fn expert_decode_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, LayoutError> {
    let m = mixture_of(cfg, MixtureNeed::ExpertSplit)?;
    if p.world as usize > m.experts {
        return Err(LayoutError::TooFewExperts { world: p.world, experts: m.experts });
    }
    Ok(even_spans(m.experts as u32, p.world)
        .into_iter()
        .enumerate()
        .map(|(r, experts)| RankShare { experts: Some(experts), ..whole_model(r as u32, cfg) })
        .collect())
}

/// Context parallelism: every rank holds the whole model and prefills its block of the prompt:
/// one contiguous block (`contiguous`), or chunks r and 2p − 1 − r of 2p (`zigzag`, which evens
/// the causal work); rank 0, which decodes afterwards unless a decode split is named, holds the
/// output head.
fn context_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, LayoutError> {
    let zigzag = p.context_blocks == ContextBlocks::Zigzag;
    let chunks = if zigzag { 2 * p.world } else { p.world };
    if chunks > p.prompt_tokens {
        return Err(LayoutError::PromptTooShort { world: p.world, chunks, prompt: p.prompt_tokens, zigzag });
    }
    let spans = even_spans(p.prompt_tokens, chunks);
    Ok((0..p.world as usize)
        .map(|r| RankShare {
            vocab: (r == 0).then(|| Span::new(0, cfg.vocab)),
            tokens: Some(spans[r]),
            tokens_late: zigzag.then(|| spans[spans.len() - 1 - r]),
            ..whole_model(r as u32, cfg)
        })
        .collect())
}

fn expert_shares(world: u32) -> Vec<RankShare> {
    let experts = even_spans(world.max(1) * 2, world.max(1));
    bare(world)
        .into_iter()
        .zip(experts)
        .map(|(mut r, e)| {
            r.experts = Some(e);
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zigzag_split_gives_rank_r_chunks_r_and_2p_minus_1_minus_r() {
        let cfg = ModelConfig::read(&crate::model::resolve_model("gpt2").dir).unwrap();
        let input = LayoutInput {
            strategy: Strategy::Context,
            world: 2,
            head: HeadPlacement::Split,
            sequences: 1,
            overlap: 0,
            routing_skew: 0.0,
            decode_strategy: DecodeLayout::Rank0,
            context_blocks: ContextBlocks::Zigzag,
            prompt_tokens: 10,
        };
        let shares = context_shares(&input, &cfg).unwrap();
        let chunks: Vec<Vec<(u32, u32)>> = shares.iter().map(|s| s.prompt_chunks().iter().map(|c| (c.start, c.end)).collect()).collect();
        assert_eq!(chunks, vec![vec![(0, 3), (8, 10)], vec![(3, 6), (6, 8)]]);
        let short = LayoutInput { prompt_tokens: 3, ..input };
        let err = context_shares(&short, &cfg).unwrap_err();
        assert_eq!(err, LayoutError::PromptTooShort { world: 2, chunks: 4, prompt: 3, zigzag: true });
        assert_eq!(err.key(), "context_blocks");
        let contiguous = LayoutInput { context_blocks: ContextBlocks::Contiguous, prompt_tokens: 1, ..input };
        assert_eq!(context_shares(&contiguous, &cfg).unwrap_err().key(), "world");
    }

    fn input(strategy: Strategy, world: u32) -> LayoutInput {
        LayoutInput {
            strategy,
            world,
            head: HeadPlacement::Split,
            sequences: 1,
            overlap: 0,
            routing_skew: 0.0,
            decode_strategy: DecodeLayout::Rank0,
            context_blocks: ContextBlocks::Contiguous,
            prompt_tokens: 16,
        }
    }

    #[test]
    fn a_gqa_tensor_split_names_each_ranks_kv_heads_split_then_replicated() {
        // TinyLlama: 32 query heads over 4 key/value heads (8 query heads per key/value head).
        let cfg = ModelConfig::read(&crate::model::resolve_model("tinyllama-1.1b").dir).unwrap();
        let kv = |world: u32| -> Vec<(u32, u32)> {
            let shares = decode_shares(&input(Strategy::Tensor, world), &cfg).unwrap();
            shares.iter().map(|s| s.kv_heads.map(|k| (k.start, k.end)).unwrap()).collect()
        };
        assert_eq!(kv(1), vec![(0, 4)]);
        assert_eq!(kv(2), vec![(0, 2), (2, 4)]);
        assert_eq!(kv(4), vec![(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert_eq!(kv(8), vec![(0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3), (3, 4), (3, 4)], "replicated past 4 ranks");
        // GPT-2's layouts (and so its identities) carry no key/value heads.
        let gpt2 = ModelConfig::read(&crate::model::resolve_model("gpt2").dir).unwrap();
        assert!(decode_shares(&input(Strategy::Tensor, 2), &gpt2).unwrap().iter().all(|s| s.kv_heads.is_none()));
    }

    #[test]
    fn a_llama_context_split_holds_the_whole_model_and_an_expert_split_of_a_dense_llama_is_refused() {
        let cfg = ModelConfig::read(&crate::model::resolve_model("tinyllama-1.1b").dir).unwrap();
        let shares = decode_shares(&input(Strategy::Context, 2), &cfg).unwrap();
        let tokens: Vec<Option<Span>> = shares.iter().map(|s| s.tokens).collect();
        assert_eq!(tokens, vec![Some(Span::new(0, 8)), Some(Span::new(8, 16))]);
        assert!(shares.iter().all(|s| s.heads == Some(Span::new(0, 32)) && s.kv_heads.is_none()), "every rank the whole model");
        let err = decode_shares(&input(Strategy::Expert, 2), &cfg).unwrap_err();
        assert_eq!((err.key(), err), ("strategy", LayoutError::NeedsMixture { need: MixtureNeed::ExpertSplit }));
    }

    #[test]
    fn a_mixtral_expert_split_gives_each_rank_a_share_of_the_experts_and_the_rest_whole() {
        let cfg = ModelConfig::read(&crate::model::resolve_model("mixtral-8x7b").dir).unwrap();
        let shares = decode_shares(&input(Strategy::Expert, 2), &cfg).unwrap();
        let experts: Vec<(u32, u32)> = shares.iter().map(|s| s.experts.map(|e| (e.start, e.end)).unwrap()).collect();
        assert_eq!(experts, vec![(0, 4), (4, 8)]);
        assert!(shares.iter().all(|s| s.heads == Some(Span::new(0, 32)) && s.layers == Some(Span::new(0, 32))));
        let err = decode_shares(&input(Strategy::Expert, 16), &cfg).unwrap_err();
        assert_eq!(err.key(), "world");
        assert!(err.to_string().contains("the model has 8 (use world ≤ 8)"), "{err}");
        assert!(decode_shares(&input(Strategy::Context, 2), &cfg).is_ok(), "a mixtral context split prefills with the whole model");
    }

    #[test]
    fn every_planned_layout_is_runnable_and_one_edited_by_hand_is_refused() {
        let cfg = ModelConfig::read(&crate::model::resolve_model("mixtral-8x7b").dir).unwrap();
        for (strategy, world) in [(Strategy::Expert, 8), (Strategy::Expert, 3), (Strategy::Tensor, 4), (Strategy::Context, 2)] {
            let layout = layout_for(Kind::Decode, &input(strategy, world), Some(&cfg)).unwrap();
            assert_eq!(layout.unrunnable(world), None, "{strategy:?} at {world}");
        }
        let mut gap = layout_for(Kind::Decode, &input(Strategy::Expert, 2), Some(&cfg)).unwrap();
        gap.ranks[1].experts = Some(Span::new(5, 8));
        assert!(gap.unrunnable(2).unwrap().contains("does not hand out the experts in order"), "{:?}", gap.unrunnable(2));
        let short = layout_for(Kind::Decode, &input(Strategy::Tensor, 2), Some(&cfg)).unwrap();
        assert!(short.unrunnable(3).unwrap().contains("lists ranks [0, 1], not 0..3 in order"), "{:?}", short.unrunnable(3));
    }

    #[test]
    fn a_tensor_split_of_a_gpt2_mixture_and_overlap_on_any_mixture_are_refused_by_name() {
        let gpt2_moe = ModelConfig::read(&crate::model::resolve_model("gpt2-moe").dir).unwrap();
        let err = decode_shares(&input(Strategy::Tensor, 2), &gpt2_moe).unwrap_err();
        assert_eq!((err.key(), err), ("strategy", LayoutError::Gpt2MixtureTensor));
        let mixtral = ModelConfig::read(&crate::model::resolve_model("mixtral-8x7b").dir).unwrap();
        let ffn: Vec<Option<Span>> = decode_shares(&input(Strategy::Tensor, 2), &mixtral).unwrap().iter().map(|s| s.ffn).collect();
        assert_eq!(ffn, vec![Some(Span::new(0, 7168)), Some(Span::new(7168, 14336))], "every expert's columns split as a SwiGLU's");
        let overlapped = LayoutInput { overlap: 2, ..input(Strategy::Tensor, 2) };
        let err = layout_for(Kind::Decode, &overlapped, Some(&mixtral)).unwrap_err().remove(0);
        assert_eq!((err.key(), err), ("overlap", LayoutError::OverlapOnMixture { pieces: 2 }));
    }

    #[test]
    fn every_independent_problem_of_a_point_is_reported_not_only_the_first() {
        let gpt2 = ModelConfig::read(&crate::model::resolve_model("gpt2").dir).unwrap();
        let point = LayoutInput { overlap: 65, context_blocks: ContextBlocks::Zigzag, routing_skew: 0.5, ..input(Strategy::Tensor, 5) };
        let keys: Vec<&str> = layout_for(Kind::Decode, &point, Some(&gpt2)).unwrap_err().iter().map(LayoutError::key).collect();
        assert_eq!(keys, ["routing_skew", "world", "context_blocks", "overlap"]);
        // A key refused off its strategy is not judged again as that strategy's (no tensor decode
        // after a context prefill checked for a tensor split).
        let off = LayoutInput { decode_strategy: DecodeLayout::Tensor, ..input(Strategy::Pipeline, 2) };
        assert_eq!(
            layout_for(Kind::Decode, &off, Some(&gpt2)).unwrap_err(),
            [LayoutError::DecodeStrategyOffContext { strategy: Strategy::Pipeline }]
        );
    }

    #[test]
    fn even_spans_cover_everything_once() {
        let spans = even_spans(12, 5);
        assert_eq!(spans.iter().map(Span::len).collect::<Vec<_>>(), vec![3, 3, 2, 2, 2]);
        assert_eq!(spans.first().unwrap().start, 0);
        assert_eq!(spans.last().unwrap().end, 12);
        assert!(spans.windows(2).all(|w| w[0].end == w[1].start));
    }
}
