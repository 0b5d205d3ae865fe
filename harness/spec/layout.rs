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

fn bare(world: u32) -> Vec<RankShare> {
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

/// The layout of a run, or `(key, message)` when the split is impossible.
pub fn layout_for(kind: Kind, p: &LayoutInput, model: Option<&ModelConfig>) -> Result<Layout, (&'static str, String)> {
    let (ranks, head, sequences) = match (kind, model) {
        (Kind::Decode, Some(cfg)) => {
            if p.routing_skew != 0.0 {
                mixture_of(cfg, "routing_skew")?;
            }
            // A context split's prefill holds the whole model (its decode split, if any, names
            // its head), and every rank of an expert split holds the whole head: no placement.
            let head = (!matches!(p.strategy, Strategy::Context | Strategy::Expert)).then_some(p.head);
            (decode_shares(p, cfg)?, head, Some(p.sequences))
        }
        (Kind::Dispatch, _) => (expert_shares(p.world), None, None),
        _ => (bare(p.world), None, None),
    };
    let decode = match model {
        Some(cfg) if kind == Kind::Decode => {
            context_only(p)?;
            decode_split(p, cfg)?
        }
        _ => None,
    };
    Ok(Layout { strategy: p.strategy, world: p.world, head, sequences, overlap: overlap_of(kind, p)?, decode, ranks })
}

/// Refuses the context-only keys' other values (`context_blocks: zigzag`, `decode_strategy:
/// tensor`) on another strategy.
fn context_only(p: &LayoutInput) -> Result<(), (&'static str, String)> {
    let name = p.strategy.name();
    if p.strategy == Strategy::Context {
        Ok(())
    } else if p.context_blocks == ContextBlocks::Zigzag {
        Err((
            "context_blocks",
            format!(
                "zigzag cuts a context split's prompt; a {name} split has no blocks to cut (use contiguous there, or leave the key out)"
            ),
        ))
    } else if p.decode_strategy != DecodeLayout::Rank0 {
        Err((
            "decode_strategy",
            format!("names the layout a context split decodes on; a {name} split decodes on its own layout (use rank0 there, or leave the key out)"),
        ))
    } else {
        Ok(())
    }
}

/// The split a context run decodes on (`decode_strategy: tensor`); None for rank 0 alone.
fn decode_split(p: &LayoutInput, cfg: &ModelConfig) -> Result<Option<DecodeSplit>, (&'static str, String)> {
    if p.decode_strategy == DecodeLayout::Rank0 {
        return Ok(None);
    }
    let tensor = LayoutInput { strategy: Strategy::Tensor, ..*p };
    let ranks = decode_shares(&tensor, cfg)
        .map_err(|(_, message)| ("decode_strategy", format!("tensor decode after the context prefill: {message}")))?;
    Ok(Some(DecodeSplit { strategy: Strategy::Tensor, head: p.head, ranks }))
}

/// The layout's overlap: refused where there is no all-reduce to overlap.
fn overlap_of(kind: Kind, p: &LayoutInput) -> Result<Option<u32>, (&'static str, String)> {
    if p.overlap == 0 {
        return Ok(None);
    }
    let refuse =
        |why: String| Err(("overlap", format!("{} pieces {why}; use 0 there (an exclude: rule can leave the point out)", p.overlap)));
    if kind != Kind::Decode || p.strategy != Strategy::Tensor {
        return refuse(format!("cut a tensor split's all-reduces, and a {} run makes none", p.strategy.name()));
    }
    if p.world < 2 {
        return refuse("need a tensor split over 2 or more ranks, and world 1 sums nothing".into());
    }
    if p.overlap > MAX_OVERLAP {
        return refuse(format!("are more than the {MAX_OVERLAP} allowed"));
    }
    Ok(Some(p.overlap))
}

/// The key/value heads a rank holding query heads `heads` needs, where the model has fewer
/// key/value heads than query heads or is of the Llama family (None: GPT-2, whose heads are both).
fn kv_heads_of(cfg: &ModelConfig, heads: Span) -> Option<Span> {
    (cfg.family() == Some(Family::Llama) || cfg.kv_heads != cfg.heads)
        .then(|| crate::model::llama::kv_heads_for(heads, (cfg.heads / cfg.kv_heads) as usize))
}

/// Refuses the strategies a family does not implement yet.
fn family_runs(p: &LayoutInput, cfg: &ModelConfig) -> Result<(), (&'static str, String)> {
    if cfg.family() == Some(Family::Llama) && matches!(p.strategy, Strategy::Context | Strategy::Expert) {
        return Err((
            "strategy",
            format!(
                "a {} split of a {} model is not implemented in this version (Llama-family models run data, tensor and pipeline splits)",
                p.strategy.name(),
                cfg.model_type
            ),
        ));
    }
    Ok(())
}

fn decode_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, (&'static str, String)> {
    family_runs(p, cfg)?;
    let all = |n: u32| Some(Span::new(0, n));
    match p.strategy {
        Strategy::Tensor => {
            if !cfg.heads.is_multiple_of(p.world) {
                let ok: Vec<String> = cfg.head_divisors().iter().map(u32::to_string).collect();
                return Err((
                    "world",
                    format!(
                        "a tensor split over {} ranks does not divide the model's {} attention heads; world sizes that do: {}",
                        p.world,
                        cfg.heads,
                        ok.join(", ")
                    ),
                ));
            }
            if !cfg.intermediate.is_multiple_of(p.world) {
                return Err((
                    "world",
                    format!("a tensor split over {} ranks does not divide the feed-forward width {}", p.world, cfg.intermediate),
                ));
            }
            let heads = even_spans(cfg.heads, p.world);
            let ffn = even_spans(cfg.intermediate, p.world);
            let vocab = even_spans(cfg.vocab, p.world);
            Ok((0..p.world as usize)
                .map(|r| RankShare {
                    rank: r as u32,
                    heads: Some(heads[r]),
                    kv_heads: kv_heads_of(cfg, heads[r]),
                    ffn: Some(ffn[r]),
                    layers: all(cfg.layers),
                    vocab: if p.head == HeadPlacement::Split { Some(vocab[r]) } else { all(cfg.vocab) },
                    experts: None,
                    tokens: None,
                    tokens_late: None,
                })
                .collect())
        }
        Strategy::Pipeline => {
            if p.world > cfg.layers {
                return Err((
                    "world",
                    format!(
                        "a pipeline of {} stages needs at least {} layers; the model has {} (use world ≤ {})",
                        p.world, p.world, cfg.layers, cfg.layers
                    ),
                ));
            }
            let layers = even_spans(cfg.layers, p.world);
            Ok((0..p.world as usize)
                .map(|r| RankShare {
                    rank: r as u32,
                    heads: all(cfg.heads),
                    kv_heads: None,
                    ffn: all(cfg.intermediate),
                    layers: Some(layers[r]),
                    vocab: (r as u32 == p.world - 1).then(|| Span::new(0, cfg.vocab)),
                    experts: None,
                    tokens: None,
                    tokens_late: None,
                })
                .collect())
        }
        Strategy::Expert => expert_decode_shares(p, cfg),
        Strategy::Data => Ok((0..p.world)
            .map(|rank| RankShare {
                rank,
                heads: all(cfg.heads),
                kv_heads: None,
                ffn: all(cfg.intermediate),
                layers: all(cfg.layers),
                vocab: all(cfg.vocab),
                experts: None,
                tokens: None,
                tokens_late: None,
            })
            .collect()),
        Strategy::Context => context_shares(p, cfg),
    }
}

/// The mixture of a config, or the message refusing what needs one.
fn mixture_of(cfg: &ModelConfig, what: &str) -> Result<MoeDims, (&'static str, String)> {
    match MoeDims::from_raw(&cfg.raw, cfg.intermediate as usize) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err((
            if what == "routing_skew" { "routing_skew" } else { "strategy" },
            format!("{what} needs a mixture-of-experts model (config.json with `num_local_experts`); this model is dense"),
        )),
        Err(message) => Err(("model", message)),
    }
}

/// Expert parallelism: every rank holds the attention and the output head whole and one
/// contiguous share of each mixture layer's experts.
fn expert_decode_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, (&'static str, String)> {
    let m = mixture_of(cfg, "an expert split")?;
    if p.world as usize > m.experts {
        return Err((
            "world",
            format!(
                "an expert split over {} ranks leaves ranks without an expert; the model has {} (use world ≤ {})",
                p.world, m.experts, m.experts
            ),
        ));
    }
    let all = |n: u32| Some(Span::new(0, n));
    Ok(even_spans(m.experts as u32, p.world)
        .into_iter()
        .enumerate()
        .map(|(r, experts)| RankShare {
            rank: r as u32,
            heads: all(cfg.heads),
            kv_heads: None,
            ffn: all(cfg.intermediate),
            layers: all(cfg.layers),
            vocab: all(cfg.vocab),
            experts: Some(experts),
            tokens: None,
            tokens_late: None,
        })
        .collect())
}

/// Context parallelism: every rank holds the whole model and prefills its block of the prompt:
/// one contiguous block (`contiguous`), or chunks r and 2p − 1 − r of 2p (`zigzag`, which evens
/// the causal work); rank 0, which decodes afterwards unless a decode split is named, holds the
/// output head.
fn context_shares(p: &LayoutInput, cfg: &ModelConfig) -> Result<Vec<RankShare>, (&'static str, String)> {
    let zigzag = p.context_blocks == ContextBlocks::Zigzag;
    let chunks = if zigzag { 2 * p.world } else { p.world };
    if chunks > p.prompt_tokens {
        let (key, how) = if zigzag { ("context_blocks", "a zig-zag context split") } else { ("world", "a context split") };
        return Err((
            key,
            format!("{how} over {} ranks needs a prompt of at least {chunks} tokens; the prompt has {}", p.world, p.prompt_tokens),
        ));
    }
    let all = |n: u32| Some(Span::new(0, n));
    let spans = even_spans(p.prompt_tokens, chunks);
    Ok((0..p.world as usize)
        .map(|r| RankShare {
            rank: r as u32,
            heads: all(cfg.heads),
            kv_heads: None,
            ffn: all(cfg.intermediate),
            layers: all(cfg.layers),
            vocab: (r == 0).then(|| Span::new(0, cfg.vocab)),
            experts: None,
            tokens: Some(spans[r]),
            tokens_late: zigzag.then(|| spans[spans.len() - 1 - r]),
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
        assert_eq!(context_shares(&short, &cfg).unwrap_err().0, "context_blocks");
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
    fn a_llama_context_or_expert_split_is_refused_naming_the_strategy() {
        let cfg = ModelConfig::read(&crate::model::resolve_model("tinyllama-1.1b").dir).unwrap();
        for strategy in [Strategy::Context, Strategy::Expert] {
            let (key, message) = decode_shares(&input(strategy, 2), &cfg).unwrap_err();
            assert_eq!(key, "strategy");
            assert!(message.contains("data, tensor and pipeline"), "{message}");
        }
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
