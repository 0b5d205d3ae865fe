//! Split GPT-2 decoding: a seeded checkpoint of a small GPT-2 split by heads and width
//! (tensor) and by layers (pipeline) over 2 ranks under mpirun gives the unsplit model's
//! tokens; the collective count of a tensor-split step; the seeded checkpoint's format.

use super::launch::Suite;
use parlab::manifest::answer::Exactness;
use parlab::manifest::Status;
use parlab::model::gpt2::{Alone, Dims, Gpt2Part, KvRing, PartShare, Reduce, RingAttention};
use parlab::model::part::DecoderPart;
use parlab::model::reference::{greedy, Generation};
use parlab::model::weights::Checkpoint;
use parlab::model::{init, ModelConfig};
use parlab::spec::plan::Span;
use std::path::Path;
use std::sync::Arc;
use tch::Tensor;

/// A small GPT-2 config (2 layers, 4 heads, width 64) whose seeded checkpoint parlab makes.
pub const SMALL: &str = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4,
 "n_embd": 64, "vocab_size": 501, "n_positions": 64, "layer_norm_epsilon": 1e-05, "n_inner": null}"#;

fn small_config(dir: &Path) -> ModelConfig {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), SMALL).unwrap();
    ModelConfig::read(dir).unwrap()
}

fn decode_spec(name: &str, strategy: &str, world: &str, sequences: &str) -> String {
    format!(
        "name: {name}\nkind: decode\nmodel: ../small\nstrategy: {strategy}\nworld: {world}\nsequences: {sequences}\n\
         link: mpi-shm\nprompt: {{length: 10, seed: 4}}\nnew_tokens: 7\nrepetitions: 2\nwarmup: 1\nthreads: 1\ntimeout: 120s\n"
    )
}

#[test]
fn tensor_pipeline_and_data_splits_give_the_unsplit_tokens() {
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    suite.spec("tp", &decode_spec("tp", "tensor", "[1, 2]", "1"));
    suite.spec("pp", &decode_spec("pp", "pipeline", "2", "[1, 3]"));
    suite.spec("dp", &decode_spec("dp", "data", "2", "1"));
    let state = suite.dir.path().join("state");
    assert_eq!(suite.run(&[("PARLAB_STATE", state.to_str().unwrap())]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 5);
    let first = all[0].answer().expect("an answer").tokens.clone();
    let tokens = &first[0];
    assert_eq!(tokens.len(), 7);
    assert!(tokens.iter().any(|t| *t != tokens[0]), "greedy decoding of the seeded model is not one repeated token: {tokens:?}");
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{} {:?}", m.experiment, m.reason());
        let answer = m.answer().expect("an answer");
        assert_eq!(answer.tokens, first, "{} world {} changed the answer", m.experiment, m.layout.world);
        let ex = &answer.exactness;
        assert!(ex.tokens_equal, "{ex:?}");
        assert!(ex.max_logit_diff < 1e-3, "{ex:?}");
        assert!(ex.prompt_logit_diff <= ex.max_logit_diff);
        assert!(ex.min_top2_margin.unwrap() > 0.0);
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        let seqs = m.layout.sequences.unwrap() as usize;
        assert_eq!(ex.sequences_checked, seqs * if m.layout.strategy.name() == "pipeline" { 1 } else { m.layout.world as usize });
        assert_eq!(d.step_s.n, 2 * 6, "2 repetitions x 6 decode rounds");
        assert!(d.tokens_per_s.median > 0.0);
        // Two all-reduces per layer, and over two or more ranks the head's logits all-gathered.
        let want = (m.layout.strategy.name() == "tensor").then_some(2 * 2 + u64::from(m.layout.world > 1));
        assert_eq!(d.collectives_per_step, want, "{d:?}");
        if m.layout.strategy.name() == "tensor" {
            // Two all-reduces per layer (2 layers of width 64): the prompt's 10 rows in prefill, one row a step.
            let phases: Vec<_> = d.all_reduces.iter().map(|a| (a.phase.name(), a.size_bytes, a.calls, a.time.n)).collect();
            assert_eq!(phases, [("prefill", 10 * 64 * 4, 4, 2), ("decode", 64 * 4, 4 * 6, 2)], "world {}", m.layout.world);
            assert!(d.all_reduces.iter().all(|a| a.fastest_rank.median <= a.time.median && a.time.median > 0.0), "{:?}", d.all_reduces);
        } else {
            assert!(d.all_reduces.is_empty(), "{}: no all-reduces", m.layout.strategy.name());
        }
    }
    let cached: Vec<_> = std::fs::read_dir(state.join("reference")).unwrap().collect();
    assert_eq!(cached.len(), 2, "one reference (json + f32) for the one answer identity");
}

/// Counts calls and passes partial sums through unchanged.
#[derive(Default)]
struct Counting {
    reduces: usize,
    gathers: usize,
}

impl Reduce for Counting {
    fn all_reduce(&mut self, partial: &Tensor) -> Tensor {
        self.reduces += 1;
        partial.shallow_clone()
    }
    fn gather_vocab(&mut self, part: &Tensor) -> Tensor {
        self.gathers += 1;
        part.shallow_clone()
    }
}

fn small_part(dir: &Path, share: impl Fn(&Dims) -> PartShare) -> Gpt2Part {
    let cfg = small_config(dir);
    init::write_checkpoint(&cfg, 5, &dir.join("ckpt")).unwrap();
    let dims = Dims::from_config(&cfg);
    let s = share(&dims);
    Gpt2Part::load(Arc::new(Checkpoint::open(&dir.join("ckpt")).unwrap()), dims, s).unwrap()
}

#[test]
fn a_tensor_split_decode_step_makes_two_all_reduces_per_layer_and_one_gather() {
    let dir = tempfile::tempdir().unwrap();
    let part = small_part(dir.path(), |d| PartShare {
        heads: Span::new(1, 3),
        ffn: Span::new(64, 192),
        vocab: Some(Span::new(0, 250)),
        ..PartShare::whole(d)
    });
    let mut cache = part.new_cache(16);
    let mut count = Counting::default();
    let h = part.forward(part.embed(&[1, 2, 3], 0).unwrap(), &mut cache, &mut count);
    let _ = part.logits(&h, &mut count);
    let (r0, g0) = (count.reduces, count.gathers);
    let h = part.forward(part.embed(&[4], 3).unwrap(), &mut cache, &mut count);
    let logits = part.logits(&h, &mut count);
    assert_eq!((count.reduces - r0, count.gathers - g0), (2 * 2, 1), "one decode step of a 2-layer model");
    assert_eq!(logits.size(), vec![250], "this rank's vocabulary shard, before the gather");
    assert_eq!(cache.len, 4);
}

/// Records the partial sums a part hands to each all-reduce and answers with given full sums.
struct Replay {
    partials: Vec<Tensor>,
    answers: Vec<Tensor>,
}

impl Reduce for Replay {
    fn all_reduce(&mut self, partial: &Tensor) -> Tensor {
        let i = self.partials.len();
        self.partials.push(partial.copy());
        self.answers.get(i).map_or_else(|| partial.shallow_clone(), Tensor::shallow_clone)
    }
    fn gather_vocab(&mut self, part: &Tensor) -> Tensor {
        part.shallow_clone()
    }
}

/// Each reduction's summed split partials equal the unsplit model's within float32 reordering.
fn assert_partials_add_up(sums: &[Tensor], whole: &[Tensor]) {
    for (i, (s, w)) in sums.iter().zip(whole).enumerate() {
        let diff = f64::try_from((s - w).abs().max()).unwrap();
        let scale = f64::try_from(w.abs().max()).unwrap();
        assert!(diff <= 1e-5 * scale.max(1.0), "reduction {i}: split partials differ from the whole by {diff}");
    }
}

#[test]
fn partial_sums_of_two_head_and_width_shares_add_up_to_the_unsplit_model() {
    // The unsplit model's "all-reduce" inputs are the full attention and MLP outputs. Each half,
    // fed the correct full sums, must hand over partials that add up to them, at every layer.
    let dir = tempfile::tempdir().unwrap();
    let half = |heads: Span, ffn: Span| move |d: &Dims| PartShare { heads, ffn, vocab: None, ..PartShare::whole(d) };
    let whole = small_part(&dir.path().join("w"), |d| PartShare { vocab: None, ..PartShare::whole(d) });
    let parts = [
        small_part(&dir.path().join("a"), half(Span::new(0, 1), Span::new(0, 100))),
        small_part(&dir.path().join("b"), half(Span::new(1, 4), Span::new(100, 256))),
    ];
    let x = whole.embed(&[7, 3, 9, 1], 0).unwrap();
    let mut full = Replay { partials: Vec::new(), answers: Vec::new() };
    let _ = whole.forward(x.shallow_clone(), &mut whole.new_cache(8), &mut full);
    assert_eq!(full.partials.len(), 2 * 2);
    let mut sums: Vec<Tensor> = full.partials.iter().map(Tensor::zeros_like).collect();
    for p in &parts {
        let mut r = Replay { partials: Vec::new(), answers: full.partials.iter().map(Tensor::shallow_clone).collect() };
        let _ = p.forward(x.shallow_clone(), &mut p.new_cache(8), &mut r);
        for (s, part) in sums.iter_mut().zip(&r.partials) {
            *s += part;
        }
    }
    assert_partials_add_up(&sums, &full.partials);
}

#[test]
fn partial_sums_at_a_decode_step_add_up_to_the_unsplit_model() {
    // The same check at a decode step: one row, through the slice path and the cache.
    let dir = tempfile::tempdir().unwrap();
    let half = |heads: Span, ffn: Span| move |d: &Dims| PartShare { heads, ffn, vocab: None, ..PartShare::whole(d) };
    let whole = small_part(&dir.path().join("w"), |d| PartShare { vocab: None, ..PartShare::whole(d) });
    let parts = [
        small_part(&dir.path().join("a"), half(Span::new(0, 3), Span::new(0, 77))),
        small_part(&dir.path().join("b"), half(Span::new(3, 4), Span::new(77, 256))),
    ];
    let (prompt, next) = (whole.embed(&[7, 3, 9, 1], 0).unwrap(), whole.embed(&[5], 4).unwrap());
    let mut cache = whole.new_cache(8);
    let _ = whole.forward(prompt.shallow_clone(), &mut cache, &mut Alone);
    let mut full = Replay { partials: Vec::new(), answers: Vec::new() };
    let _ = whole.forward(next.shallow_clone(), &mut cache, &mut full);
    assert_eq!(full.partials.len(), 2 * 2);
    let mut sums: Vec<Tensor> = full.partials.iter().map(Tensor::zeros_like).collect();
    for p in &parts {
        // Each half's cache is filled from the same prompt with the correct full sums.
        let mut prefill = Replay { partials: Vec::new(), answers: Vec::new() };
        let _ = whole.forward(prompt.shallow_clone(), &mut whole.new_cache(8), &mut prefill);
        let mut cache = p.new_cache(8);
        let _ = p.forward(prompt.shallow_clone(), &mut cache, &mut Replay { partials: Vec::new(), answers: prefill.partials });
        let mut r = Replay { partials: Vec::new(), answers: full.partials.iter().map(Tensor::shallow_clone).collect() };
        let _ = p.forward(next.shallow_clone(), &mut cache, &mut r);
        for (s, part) in sums.iter_mut().zip(&r.partials) {
            *s += part;
        }
    }
    assert_partials_add_up(&sums, &full.partials);
}

#[test]
fn a_row_at_a_time_on_slices_equals_libtorch_over_the_whole_prompt() {
    // Decode steps take the slice path (one row); prefill takes libtorch's. Feeding a prompt
    // token by token must give the last position the hidden state the whole prompt gives it.
    let dir = tempfile::tempdir().unwrap();
    let part = small_part(dir.path(), PartShare::whole);
    let tokens = [5, 8, 13, 21, 34, 55, 89];
    let whole = part.forward(part.embed(&tokens, 0).unwrap(), &mut part.new_cache(8), &mut Alone);
    let mut cache = part.new_cache(8);
    let mut last = Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
    for (pos, t) in tokens.iter().enumerate() {
        last = part.forward(part.embed(&[*t], pos).unwrap(), &mut cache, &mut Alone);
    }
    assert_eq!(cache.len, tokens.len());
    let want = whole.narrow(0, tokens.len() as i64 - 1, 1);
    let diff = f64::try_from((&last - &want).abs().max()).unwrap();
    let scale = f64::try_from(want.abs().max()).unwrap();
    assert!(diff <= 1e-5 * scale.max(1.0), "one row at a time differs from the whole prompt by {diff} (scale {scale})");
    let logits = |h: &Tensor| parlab::model::reference::to_vec(&part.logits(h, &mut Alone));
    let (a, b) = (logits(&last), logits(&want));
    assert_eq!(parlab::model::reference::top2(&a).0, parlab::model::reference::top2(&b).0, "same next token");
}

#[test]
fn seeded_checkpoints_are_deterministic_in_hugging_face_layout() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(&dir.path().join("m"));
    for (sub, seed) in [("a", 1), ("b", 1), ("c", 2)] {
        init::write_checkpoint(&cfg, seed, &dir.path().join(sub)).unwrap();
    }
    let bytes = |s: &str| std::fs::read(dir.path().join(s).join("model.safetensors")).unwrap();
    assert_eq!(bytes("a"), bytes("b"), "same seed, same bytes");
    assert_ne!(bytes("a"), bytes("c"), "another seed, other bytes");
    let ck = Checkpoint::open(&dir.path().join("a")).unwrap();
    for name in ["wte.weight", "wpe.weight", "h.1.attn.c_attn.weight", "h.1.mlp.c_proj.weight", "ln_f.bias"] {
        assert!(ck.has(name), "{name}");
    }
    assert_eq!(ck.shape("h.0.attn.c_attn.weight").unwrap(), vec![64, 192], "Conv1D weights are stored [in, out]");
    assert_eq!(ck.shape("lm_head.weight").unwrap(), vec![501, 64]);
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("a/config.json")).unwrap()).unwrap();
    assert_eq!(config["tie_word_embeddings"], false);
    assert_eq!(config["n_embd"], 64);
}

#[test]
fn greedy_decoding_of_the_seeded_model_varies_and_exactness_sees_a_changed_token() {
    let dir = tempfile::tempdir().unwrap();
    let part = small_part(dir.path(), PartShare::whole);
    let gen = greedy(&part, &[3, 1, 4, 1, 5, 9, 2, 6], 8).unwrap();
    assert!(gen.tokens.iter().collect::<std::collections::BTreeSet<_>>().len() > 2, "{:?}", gen.tokens);
    let mut same = Exactness::default();
    for i in 0..8 {
        same.observe(&gen, i, gen.row(i));
    }
    assert!(same.tokens_equal && same.max_logit_diff == 0.0 && same.steps_compared == 8);
    let mut changed = Exactness::default();
    let mut other: Generation = gen.clone();
    let row = other.row(2).to_vec();
    let runner_up = (0..row.len()).filter(|&j| j as u32 != gen.tokens[2]).max_by(|&i, &j| row[i].total_cmp(&row[j])).unwrap();
    other.logits[2 * gen.vocab + runner_up] += 2.0 * (row[gen.tokens[2] as usize] - row[runner_up]) + 1.0;
    for i in 0..8 {
        changed.observe(&gen, i, other.row(i));
    }
    assert!(!changed.tokens_equal);
    assert_eq!(changed.first_difference, Some(2));
    assert_eq!(changed.steps_compared, 3, "steps after a changed token are not compared");
}

#[test]
fn a_forced_matvec_kernel_is_recorded_and_an_unknown_one_is_refused() {
    use parlab::model::matvec::{Kernel, KERNEL_ENV};
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    suite.spec("k", &decode_spec("k", "tensor", "1", "1"));
    let state = suite.dir.path().join("state");
    let state = state.to_str().unwrap();
    let fresh = || {
        let _ = std::fs::remove_dir_all(suite.manifests());
    };
    // The kernel is not part of the run identity, so each run starts from an empty manifests folder.
    for kernel in Kernel::supported_here() {
        fresh();
        assert_eq!(suite.run(&[("PARLAB_STATE", state), (KERNEL_ENV, kernel.name())]), 0);
        let m = suite.manifest("k");
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        assert_eq!(d.matvec_kernel, Some(kernel));
        assert!(m.answer().expect("an answer").exactness.tokens_equal, "{} kernel", kernel.name());
        assert!(!d.cpu_features.is_empty() || !cfg!(target_arch = "x86_64"), "{:?}", d.cpu_features);
    }
    fresh();
    assert_ne!(suite.run(&[("PARLAB_STATE", state), (KERNEL_ENV, "sse9")]), 0);
    let m = suite.manifest("k");
    assert_eq!(m.status(), Status::Failed);
    let reason = m.reason().unwrap_or_default();
    assert!(reason.contains("PARLAB_MATVEC_KERNEL=\"sse9\" is not a matvec kernel"), "{reason}");
}

#[test]
fn overlapped_all_reduces_give_the_blocking_splits_answer_and_the_register_the_hidden_share() {
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    suite.spec("ov", &(decode_spec("ov", "tensor", "2", "1") + "overlap: [0, 3]\n"));
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 2);
    let (blocking, overlapped) = match (all[0].layout.overlap, all[1].layout.overlap) {
        (None, Some(3)) => (&all[0], &all[1]),
        (Some(3), None) => (&all[1], &all[0]),
        other => panic!("one blocking and one 3-piece run, found {other:?}"),
    };
    assert_ne!(blocking.run_id, overlapped.run_id, "overlap is part of the layout, so of the run identity");
    let answer = |m: &parlab::manifest::Manifest| m.answer().cloned().expect("an answer");
    assert_eq!(answer(blocking).tokens, answer(overlapped).tokens);
    let ex = answer(overlapped).exactness;
    assert!(ex.tokens_equal && ex.max_logit_diff < 1e-3, "{ex:?}");
    let d = overlapped.summary().and_then(|s| s.decode()).expect("a decode summary");
    assert_eq!(d.overlap, Some(3));
    // Each of the 4 all-reduces (2 layers x 2) in 3 pieces, plus the logits gather.
    assert_eq!(d.collectives_per_step, Some(4 * 3 + 1));
    // Prefill: 10 rows in pieces of 4, 3, 3 rows; decode: 64 values in pieces of 22, 21, 21.
    let phases: Vec<_> = d.all_reduces.iter().map(|a| (a.phase.name(), a.size_bytes, a.calls)).collect();
    assert_eq!(phases, [("prefill", 10 * 64 * 4 * 4 / 12, 12), ("decode", 64 * 4 * 4 * 6 / 72, 72)]);
    assert!(d.all_reduces.iter().all(|a| a.total.is_some_and(|t| t.median > 0.0 && t.n == 2)), "{:?}", d.all_reduces);
    let report = suite.parlab(&["report"]);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let table = register.split("#### Communication hidden behind compute").nth(1).expect("the overlap table");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ov |")).collect();
    assert_eq!(rows.len(), 2, "a prefill and a decode row:\n{table}");
    assert!(rows.iter().all(|r| r.contains(&blocking.run_id[..12]) && r.contains(&overlapped.run_id[..12])), "{rows:?}");
    let audit = suite.parlab(&["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{}", String::from_utf8_lossy(&audit.stdout));
}

/// A ring of in-process ranks: each thread passes its key/value block to the next by channel.
struct ChannelRing {
    rank: usize,
    blocks: Vec<Vec<std::ops::Range<usize>>>,
    heads: i64,
    head_dim: i64,
    next: std::sync::mpsc::Sender<Vec<f32>>,
    prev: std::sync::mpsc::Receiver<Vec<f32>>,
}

impl KvRing for ChannelRing {
    fn steps(&self) -> usize {
        self.blocks.len() - 1
    }
    fn pass(&mut self, kv: &Tensor, step: usize) -> (Tensor, Vec<std::ops::Range<usize>>) {
        let world = self.blocks.len();
        self.next.send(Vec::<f32>::try_from(&kv.contiguous().view([-1])).unwrap()).unwrap();
        let block = self.blocks[(self.rank + world - step % world) % world].clone();
        let len: usize = block.iter().map(|c| c.len()).sum();
        let values = self.prev.recv().unwrap();
        (Tensor::from_slice(&values).view([2, self.heads, len as i64, self.head_dim]), block)
    }
}

/// Each rank's block as chunks: contiguous (one per rank) or zig-zag (chunks r and 2p − 1 − r of 2p).
fn context_blocks(len: usize, world: u32, zigzag: bool) -> Vec<Vec<std::ops::Range<usize>>> {
    let spans = parlab::spec::layout::even_spans(len as u32, if zigzag { 2 * world } else { world });
    let chunk = |s: &Span| s.start as usize..s.end as usize;
    (0..world as usize)
        .map(|r| if zigzag { vec![chunk(&spans[r]), chunk(&spans[spans.len() - 1 - r])] } else { vec![chunk(&spans[r])] })
        .collect()
}

/// Prefills `prompt` as a context split over `world` in-process ranks (one thread each, its own
/// copy of the model from `load`): every prompt position's final hidden state, in position order.
pub(crate) fn ring_prefill(prompt: &[u32], world: u32, zigzag: bool, load: &(dyn Fn() -> Box<dyn DecoderPart> + Sync)) -> Vec<f32> {
    let blocks = context_blocks(prompt.len(), world, zigzag);
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..world).map(|_| std::sync::mpsc::channel()).unzip();
    let mut receivers: Vec<Option<_>> = receivers.into_iter().map(Some).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world as usize)
            .map(|rank| {
                let next = senders[(rank + 1) % world as usize].clone();
                let prev = receivers[rank].take().unwrap();
                let blocks = blocks.clone();
                scope.spawn(move || {
                    let part = load();
                    let (heads, head_dim) = (part.kv_heads_held() as i64, part.head_dim() as i64);
                    let mut ring = ChannelRing { rank, blocks: blocks.clone(), heads, head_dim, next, prev };
                    let mut cache = part.new_cache(prompt.len());
                    let h = part.prefill_block(prompt, &blocks[rank], &mut cache, &mut ring).unwrap();
                    Vec::<f32>::try_from(&h.contiguous().view([-1])).unwrap()
                })
            })
            .collect();
        // Each rank's rows are its chunks' positions in order; put every row at its position.
        let rows: Vec<Vec<f32>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let width = rows.iter().map(Vec::len).sum::<usize>() / prompt.len();
        let mut out = vec![0f32; prompt.len() * width];
        for (rank, values) in rows.iter().enumerate() {
            let positions = blocks[rank].iter().flat_map(|c| c.clone());
            for (i, pos) in positions.enumerate() {
                out[pos * width..(pos + 1) * width].copy_from_slice(&values[i * width..(i + 1) * width]);
            }
        }
        out
    })
}

#[test]
fn ring_attention_prefill_gives_every_prompt_position_the_unsplit_hidden_state() {
    let dir = tempfile::tempdir().unwrap();
    let part = small_part(dir.path(), PartShare::whole);
    let prompt: Vec<u32> = (0..11).map(|i| (i * 37 + 5) % 501).collect();
    let mut cache = part.new_cache(prompt.len());
    let unsplit = part.forward(part.embed(&prompt, 0).unwrap(), &mut cache, &mut Alone);
    let unsplit = Vec::<f32>::try_from(&unsplit.contiguous().view([-1])).unwrap();
    // 11 tokens over 1, 2, 3 and 4 ranks: even and uneven blocks, and a block of 2; zig-zag
    // cuts into 2p chunks (down to chunks of 1 token at world 4).
    for zigzag in [false, true] {
        for world in [1, 2, 3, 4] {
            let load = || -> Box<dyn DecoderPart> {
                let dims = Dims::from_config(&ModelConfig::read(dir.path()).unwrap());
                let ckpt = Arc::new(Checkpoint::open(&dir.path().join("ckpt")).unwrap());
                Box::new(Gpt2Part::load(ckpt, dims.clone(), PartShare::whole(&dims)).unwrap())
            };
            let ring = ring_prefill(&prompt, world, zigzag, &load);
            assert_eq!(ring.len(), unsplit.len());
            let worst = ring.iter().zip(&unsplit).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst < 1e-4, "world {world} zigzag {zigzag}: a prompt position's hidden state differs by {worst}");
        }
    }
}

#[test]
fn ring_attention_skips_later_blocks_and_masks_the_diagonal_block() {
    let (heads, hd) = (2, 8);
    let opts = (tch::Kind::Float, tch::Device::Cpu);
    tch::manual_seed(3);
    let (q, k, v) = (Tensor::randn([heads, 6, hd], opts), Tensor::randn([heads, 6, hd], opts), Tensor::randn([heads, 6, hd], opts));
    // Unsplit causal attention of the queries at positions 2..4 over keys 0..6.
    let scores = q.narrow(1, 2, 2).matmul(&k.transpose(1, 2)) * 0.5;
    let mask = Tensor::arange(6, (tch::Kind::Int64, tch::Device::Cpu))
        .view([1, 6])
        .gt_tensor(&(Tensor::arange(2, (tch::Kind::Int64, tch::Device::Cpu)).view([2, 1]) + 2));
    let want = scores.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1, tch::Kind::Float).matmul(&v);
    let mut ring = RingAttention::new(q.narrow(1, 2, 2), 2, 0.5);
    ring.add(&k.narrow(1, 2, 2), &v.narrow(1, 2, 2), 2);
    ring.add(&k.narrow(1, 4, 2), &(v.narrow(1, 4, 2) * f64::NAN), 4);
    ring.add(&k.narrow(1, 0, 2), &v.narrow(1, 0, 2), 0);
    let got = ring.finish();
    let worst = (got - want).abs().max().double_value(&[]);
    assert!(worst < 1e-6, "ring attention differs from unsplit attention by {worst} (a later block must not be computed)");
}

#[test]
fn a_context_split_over_mpi_gives_the_unsplit_tokens_and_moves_what_the_ring_must() {
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    suite.spec("cp", &decode_spec("cp", "context", "[1, 2, 3]", "1"));
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 3);
    // Keys and values of one token: 2 x 2 layers x 64 wide x 4 bytes.
    let per_token = 2 * 2 * 64 * 4;
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let ex = &m.answer().expect("an answer").exactness;
        assert!(ex.tokens_equal && ex.prompt_logit_diff < 1e-4 && ex.max_logit_diff < 1e-3, "world {}: {ex:?}", m.layout.world);
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        assert_eq!(d.step_s.n, 2 * 6, "rank 0 decodes 6 rounds in each of 2 repetitions");
        let c = d.context.as_ref().expect("context figures");
        // 10 prompt tokens: rank r sends every block but rank r + 1's; rank 0 gathers the others.
        let (blocks, ring, gathered): (Vec<u32>, u64, u64) = match m.layout.world {
            1 => (vec![10], 0, 0),
            2 => (vec![5, 5], 5 * per_token, 5 * per_token),
            _ => (vec![4, 3, 3], 7 * per_token, 6 * per_token),
        };
        assert_eq!(
            (&c.blocks, c.ring_bytes, c.ring_bytes_modelled, c.gather_bytes),
            (&blocks, ring, ring, gathered),
            "world {}",
            m.layout.world
        );
        assert_eq!(c.ring.n, 2);
    }
    let report = suite.parlab(&["report"]);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let table = register.split("#### Context-parallel prefill").nth(1).expect("the context table");
    assert_eq!(table.lines().filter(|l| l.starts_with("| cp |")).count(), 3, "{table}");
}

#[test]
fn a_context_prefill_handed_to_a_tensor_decode_gives_the_unsplit_tokens_and_moves_what_it_must() {
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    let spec = decode_spec("cpt", "context", "2", "1")
        + "decode_strategy: [rank0, tensor]\nhead: [split, replicated]\nexclude:\n  - {decode_strategy: rank0, head: replicated}\n";
    suite.spec("cpt", &spec);
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 3, "{:?}", all.iter().map(|m| &m.layout).collect::<Vec<_>>());
    // Keys and values of one token and head: 2 x 2 layers x 16 wide x 4 bytes; 4 heads.
    let per_token_head = 2 * 2 * 16 * 4;
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let ex = &m.answer().expect("an answer").exactness;
        assert!(ex.tokens_equal && ex.prompt_logit_diff < 1e-4 && ex.max_logit_diff < 1e-3, "{:?}: {ex:?}", m.layout.decode);
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        let c = d.context.as_ref().expect("context figures");
        assert_eq!(c.blocks, vec![5, 5]);
        match &m.layout.decode {
            // Rank 1 sends its block with all 4 heads to rank 0.
            None => {
                assert_eq!(c.decodes_on, parlab::spec::DecodeLayout::Rank0);
                assert_eq!((c.gather_bytes, c.gather_bytes_modelled), (5 * 4 * per_token_head, Some(5 * 4 * per_token_head)));
                assert_eq!(d.collectives_per_step, None);
            }
            // Each rank sends its 5 rows for the other rank's 2 heads.
            Some(split) => {
                assert_eq!(c.decodes_on, parlab::spec::DecodeLayout::Tensor);
                let heads: Vec<_> = split.ranks.iter().map(|r| r.heads.expect("heads").len()).collect();
                assert_eq!(heads, vec![2, 2]);
                assert_eq!((c.gather_bytes, c.gather_bytes_modelled), (2 * 5 * 2 * per_token_head, Some(2 * 5 * 2 * per_token_head)));
                // Two all-reduces per layer, and the vocabulary gather where the head is split.
                let gather = u64::from(split.head == parlab::spec::HeadPlacement::Split);
                assert_eq!(d.collectives_per_step, Some(2 * 2 + gather));
                assert_eq!(d.head, Some(split.head));
            }
        }
        assert_eq!(d.step_s.n, 2 * 6, "6 decode rounds in each of 2 repetitions");
    }
    let ids: std::collections::BTreeSet<_> = all.iter().map(|m| m.run_id.clone()).collect();
    assert_eq!(ids.len(), 3, "each decode layout has its own identity");
    let report = suite.parlab(&["report"]);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let table = register.split("#### Context-parallel prefill").nth(1).expect("the context table");
    assert_eq!(table.lines().filter(|l| l.starts_with("| cpt |") && l.contains("| tensor |")).count(), 2, "{table}");
}

#[test]
fn a_context_split_of_a_grouped_query_model_moves_its_key_value_heads_not_its_query_heads() {
    let suite = Suite::new();
    let dir = suite.dir.path().join("gqa");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 96, "vocab_size": 301, "max_position_embeddings": 64}"#,
    )
    .unwrap();
    let spec = decode_spec("cg", "context", "[2, 4]", "1").replace("../small", "../gqa") + "decode_strategy: [rank0, tensor]\n";
    suite.spec("cg", &spec);
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 4);
    // Keys and values of one token and key/value head: 2 x 2 layers x 8 wide x 4 bytes; 2 such
    // heads (the 8 query heads' width, 64, would make it four times as much).
    let per_token_head = 2 * 2 * 8 * 4;
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        assert!(m.answer().expect("an answer").exactness.tokens_equal, "{:?}", m.layout);
        let c = m.summary().and_then(|s| s.decode()).and_then(|d| d.context.clone()).expect("context figures");
        assert_eq!((c.ring_bytes, c.gather_bytes_modelled), (c.ring_bytes_modelled, Some(c.gather_bytes)), "{:?}", m.layout);
        let (world, tensor) = (m.layout.world, m.layout.decode.is_some());
        match (world, tensor) {
            (2, false) => assert_eq!((c.ring_bytes, c.gather_bytes), (5 * 2 * per_token_head, 5 * 2 * per_token_head)),
            // Each rank holds one of the 2 key/value heads: it sends its block's rows of the other one.
            (2, true) => assert_eq!(c.gather_bytes, 10 * per_token_head),
            // Blocks 3, 3, 2, 2; each key/value head on 2 ranks: a rank sends its block's rows
            // for the 3 other ranks' heads (its twin's copy included).
            (4, true) => assert_eq!(c.gather_bytes, 10 * 3 * per_token_head),
            _ => assert_eq!(c.gather_bytes, 7 * 2 * per_token_head, "rank 0 receives 3 + 2 + 2 tokens' rows"),
        }
    }
}

#[test]
fn a_zigzag_context_split_over_mpi_gives_the_unsplit_tokens_and_evens_the_causal_work() {
    let suite = Suite::new();
    small_config(&suite.dir.path().join("small"));
    let spec = decode_spec("cz", "context", "2", "1") + "context_blocks: [contiguous, zigzag]\ndecode_strategy: [rank0, tensor]\n";
    suite.spec("cz", &spec);
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 4);
    // Keys and values of one token: 2 x 2 layers x 64 wide x 4 bytes.
    let per_token = 2 * 2 * 64 * 4;
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let ex = &m.answer().expect("an answer").exactness;
        assert!(ex.tokens_equal && ex.prompt_logit_diff < 1e-4 && ex.max_logit_diff < 1e-3, "{:?}: {ex:?}", m.layout.ranks);
        let c = m.summary().and_then(|s| s.decode()).and_then(|d| d.context.clone()).expect("context figures");
        // 10 tokens either way in blocks of 5: each rank sends its block once around the ring
        // of 2, and the hand-off moves 5 tokens' worth (rank 1's block, or half the heads of both).
        assert_eq!(c.blocks, vec![5, 5]);
        assert_eq!((c.ring_bytes, c.ring_bytes_modelled), (5 * per_token, 5 * per_token));
        assert_eq!((c.gather_bytes, c.gather_bytes_modelled), (5 * per_token, Some(5 * per_token)));
        let chunks: Vec<Vec<(u32, u32)>> =
            m.layout.ranks.iter().map(|r| r.prompt_chunks().iter().map(|s| (s.start, s.end)).collect()).collect();
        let imbalance = c.causal_imbalance.expect("the causal work");
        match c.cut {
            // Causal pairs per rank: 15 and 40 (contiguous), 6 + 19 and 15 + 15 (zig-zag); mean 27.5.
            parlab::spec::ContextBlocks::Contiguous => {
                assert_eq!(chunks, vec![vec![(0, 5)], vec![(5, 10)]]);
                assert!((imbalance - 40.0 / 27.5).abs() < 1e-12, "{imbalance}");
            }
            parlab::spec::ContextBlocks::Zigzag => {
                assert_eq!(chunks, vec![vec![(0, 3), (8, 10)], vec![(3, 6), (6, 8)]]);
                assert!((imbalance - 30.0 / 27.5).abs() < 1e-12, "{imbalance}");
            }
        }
    }
    let report = suite.parlab(&["report"]);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let table = register.split("#### Context-parallel prefill").nth(1).expect("the context table");
    assert_eq!(table.lines().filter(|l| l.starts_with("| cz |") && l.contains("| zigzag |")).count(), 2, "{table}");
}

/// The path a GPU rank takes (libtorch for every step: fused linear, scaled-dot-product
/// attention, the row-parallel bias inside the product), run on the CPU in float32: the same
/// greedy tokens as the row kernels, logits equal within float32 reordering, for the unsplit
/// model and for a tensor split's shard (where the bias must wait for the sum).
#[test]
fn the_gpu_code_path_run_on_the_cpu_matches_the_row_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_config(dir.path());
    init::write_checkpoint(&cfg, 5, &dir.path().join("ckpt")).unwrap();
    let dims = Dims::from_config(&cfg);
    let load = |placement| {
        let ckpt = Arc::new(Checkpoint::open(&dir.path().join("ckpt")).unwrap());
        Gpt2Part::load_on(ckpt, dims.clone(), PartShare::whole(&dims), placement).unwrap()
    };
    let rows = load(parlab::model::placement::Placement::cpu());
    let fused = load(parlab::model::placement::Placement::cpu_as_gpu());
    let prompt = [3, 17, 42, 5, 99, 7];
    let (want, got) = (greedy(&rows, &prompt, 8).unwrap(), greedy(&fused, &prompt, 8).unwrap());
    assert_eq!(got.tokens, want.tokens);
    let drift = want.logits.iter().zip(&got.logits).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(drift < 1e-3, "the GPU path drifts {drift} from the row kernels");
    // A shard whose partial sums are summed by a communicator: the bias must not enter the partial.
    let half = |placement| {
        let ckpt = Arc::new(Checkpoint::open(&dir.path().join("ckpt")).unwrap());
        let share = PartShare { heads: Span::new(0, 2), ffn: Span::new(0, 128), ..PartShare::whole(&dims) };
        Gpt2Part::load_on(ckpt, dims.clone(), share, placement).unwrap()
    };
    let (a, b) = (half(parlab::model::placement::Placement::cpu()), half(parlab::model::placement::Placement::cpu_as_gpu()));
    let mut counts = (Counting::default(), Counting::default());
    let (mut ca, mut cb) = (a.new_cache(16), b.new_cache(16));
    let _ = a.forward(a.embed(&prompt, 0).unwrap(), &mut ca, &mut counts.0);
    let _ = b.forward(b.embed(&prompt, 0).unwrap(), &mut cb, &mut counts.1);
    let ha = a.forward(a.embed(&[8], prompt.len()).unwrap(), &mut ca, &mut counts.0);
    let hb = b.forward(b.embed(&[8], prompt.len()).unwrap(), &mut cb, &mut counts.1);
    let diff = (ha - hb).abs().max().double_value(&[]);
    assert!(diff < 1e-3, "a split shard's step differs by {diff} between the two paths");
    assert_eq!(counts.0.reduces, counts.1.reduces, "both paths hand every partial to the communicator");
}
