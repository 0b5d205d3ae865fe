//! The Llama family's split model: the slice path of a decode step against libtorch's, grouped-
//! query shares (split and replicated key/value heads) whose partial sums add up to the unsplit
//! model's, a tied head, and the layouts that say which rank holds which key/value head; and
//! Mixtral's layout: its mixture of SwiGLU experts split by expert columns adds up the same way.

use parlab::model::gpt2::{Alone, KvCache, Reduce};
use parlab::model::init;
use parlab::model::llama::{kv_heads_for, LlamaDims, LlamaPart, LlamaShare};
use parlab::model::part::DecoderPart;
use parlab::model::placement::Placement;
use parlab::model::weights::Checkpoint;
use parlab::model::ModelConfig;
use parlab::spec::plan::Span;
use std::path::Path;
use std::sync::Arc;
use tch::Tensor;

/// 8 query heads over 2 key/value heads, Llama 3's rotary scaling, Qwen2's biases when asked;
/// for mixtral, 4 experts of the feed-forward width, top 2.
fn config(dir: &Path, model_type: &str, extra: &str) -> ModelConfig {
    std::fs::create_dir_all(dir).unwrap();
    let extra =
        if model_type == "mixtral" { format!(r#", "num_local_experts": 4, "num_experts_per_tok": 2{extra}"#) } else { extra.into() };
    let text = format!(
        r#"{{"model_type": "{model_type}", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 96, "vocab_size": 301, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "rope_scaling": {{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}{extra}}}"#
    );
    std::fs::write(dir.join("config.json"), text).unwrap();
    ModelConfig::read(dir).unwrap()
}

fn part_on(dir: &Path, model_type: &str, placement: Placement, share: impl Fn(&LlamaDims) -> LlamaShare) -> LlamaPart {
    let cfg = config(dir, model_type, "");
    init::write_checkpoint(&cfg, 3, &dir.join("ckpt")).unwrap();
    let dims = LlamaDims::from_config(&ModelConfig::read(&dir.join("ckpt")).unwrap()).unwrap();
    let s = share(&dims);
    LlamaPart::load_on(Arc::new(Checkpoint::open(&dir.join("ckpt")).unwrap()), dims, s, placement).unwrap()
}

fn part(dir: &Path, model_type: &str, share: impl Fn(&LlamaDims) -> LlamaShare) -> LlamaPart {
    part_on(dir, model_type, Placement::cpu(), share)
}

/// The hidden rows of `tokens`, fed one at a time (the decode step's path on the host).
fn row_by_row(p: &LlamaPart, tokens: &[u32], comm: &mut dyn Reduce) -> Vec<Tensor> {
    let mut cache = p.new_cache(16);
    tokens.iter().enumerate().map(|(i, &t)| p.forward(p.embed(&[t], i).unwrap(), &mut cache, comm)).collect()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    f64::try_from((a - b).abs().max()).unwrap()
}

#[test]
fn a_prompt_fed_row_by_row_equals_it_fed_at_once_for_llama_qwen2_qwen3_and_mixtral() {
    for model_type in ["llama", "qwen2", "qwen3", "mixtral"] {
        let dir = tempfile::tempdir().unwrap();
        let p = part(dir.path(), model_type, LlamaShare::whole);
        let tokens = [7u32, 300, 9, 1, 42, 5];
        let at_once = p.forward(p.embed(&tokens, 0).unwrap(), &mut p.new_cache(16), &mut Alone);
        let rows = Tensor::cat(&row_by_row(&p, &tokens, &mut Alone), 0);
        let d = max_diff(&at_once, &rows);
        assert!(d < 1e-4, "{model_type}: the slice path differs from libtorch's by {d}");
        // The libtorch path of one row (a GPU's, checked on the host) agrees too.
        let gpu_like = part_on(&dir.path().join("g"), model_type, Placement::cpu_as_gpu(), LlamaShare::whole);
        let rows_gpu = Tensor::cat(&row_by_row(&gpu_like, &tokens, &mut Alone), 0);
        assert!(max_diff(&rows_gpu, &rows) < 1e-4, "{model_type}: libtorch's one-row path differs");
    }
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

/// Query heads `heads` (with the key/value heads they read) and feed-forward columns `ffn`.
fn share(heads: (u32, u32), ffn: (u32, u32)) -> impl Fn(&LlamaDims) -> LlamaShare {
    move |d| {
        let heads = Span::new(heads.0, heads.1);
        LlamaShare { heads, kv_heads: kv_heads_for(heads, d.group()), ffn: Span::new(ffn.0, ffn.1), vocab: None, ..LlamaShare::whole(d) }
    }
}

/// Every all-reduce of `parts`, in prefill and at a decode step (each fed the unsplit model's
/// sums), adds up to the unsplit model's within float32 reordering.
fn assert_shares_add_up(model_type: &str, parts: &[(u32, u32, u32, u32)]) {
    let dir = tempfile::tempdir().unwrap();
    let whole = part(&dir.path().join("w"), model_type, |d| LlamaShare { vocab: None, ..LlamaShare::whole(d) });
    let (prompt, next) = (whole.embed(&[7, 3, 9, 1], 0).unwrap(), whole.embed(&[5], 4).unwrap());
    let mut full = Replay { partials: Vec::new(), answers: Vec::new() };
    let mut cache: KvCache = whole.new_cache(8);
    let _ = whole.forward(prompt.shallow_clone(), &mut cache, &mut full);
    let _ = whole.forward(next.shallow_clone(), &mut cache, &mut full);
    assert_eq!(full.partials.len(), 2 * 2 * 2, "two all-reduces per layer, in prefill and at the step");
    let mut sums: Vec<Tensor> = full.partials.iter().map(Tensor::zeros_like).collect();
    for (i, &(h0, h1, f0, f1)) in parts.iter().enumerate() {
        let p = part(&dir.path().join(i.to_string()), model_type, share((h0, h1), (f0, f1)));
        let mut r = Replay { partials: Vec::new(), answers: full.partials.iter().map(Tensor::shallow_clone).collect() };
        let mut cache = p.new_cache(8);
        let _ = p.forward(prompt.shallow_clone(), &mut cache, &mut r);
        let _ = p.forward(next.shallow_clone(), &mut cache, &mut r);
        for (s, part) in sums.iter_mut().zip(&r.partials) {
            *s += part.view_as(s);
        }
    }
    for (i, (s, w)) in sums.iter().zip(&full.partials).enumerate() {
        let (diff, scale) = (max_diff(s, w), f64::try_from(w.abs().max()).unwrap());
        assert!(diff <= 1e-5 * scale.max(1.0), "{model_type} reduction {i}: split partials differ from the whole by {diff}");
    }
}

#[test]
fn partial_sums_of_shares_splitting_the_kv_heads_add_up_to_the_unsplit_model() {
    // Two ranks: 4 query heads and one key/value head each, uneven feed-forward columns.
    assert_shares_add_up("llama", &[(0, 4, 0, 40), (4, 8, 40, 96)]);
    assert_shares_add_up("qwen2", &[(0, 4, 0, 48), (4, 8, 48, 96)]);
}

#[test]
fn partial_sums_of_shares_replicating_the_kv_heads_add_up_to_the_unsplit_model() {
    // Four ranks over two key/value heads: ranks 0 and 1 both hold head 0, ranks 2 and 3 head 1.
    assert_shares_add_up("llama", &[(0, 2, 0, 24), (2, 4, 24, 48), (4, 6, 48, 72), (6, 8, 72, 96)]);
    assert_shares_add_up("qwen3", &[(0, 2, 0, 24), (2, 4, 24, 48), (4, 6, 48, 72), (6, 8, 72, 96)]);
}

#[test]
fn partial_sums_of_mixtral_shares_splitting_every_experts_columns_add_up_to_the_unsplit_model() {
    // The mixture's output is the layer's second all-reduce: each rank's columns of the chosen experts.
    assert_shares_add_up("mixtral", &[(0, 4, 0, 40), (4, 8, 40, 96)]);
    assert_shares_add_up("mixtral", &[(0, 2, 0, 24), (2, 4, 24, 48), (4, 6, 48, 72), (6, 8, 72, 96)]);
}

#[test]
fn a_mixtral_part_holds_the_experts_of_its_share_and_streams_only_the_routed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let whole = part(&dir.path().join("w"), "mixtral", LlamaShare::whole);
    let half = part(&dir.path().join("h"), "mixtral", |d| LlamaShare { experts: Span::new(2, 4), ..LlamaShare::whole(d) });
    let tokens = [7u32, 300, 9];
    let at_once = |p: &LlamaPart| p.forward(p.embed(&tokens, 0).unwrap(), &mut p.new_cache(8), &mut Alone);
    assert!(max_diff(&at_once(&whole), &at_once(&half)) > 1e-2, "a part without experts 0 and 1 computes a different mixture");
    // Per layer a step reads the router (4 x 64) and 2 of the experts held (3 x 96 x 64 each),
    // whether the part holds 4 experts or 2; the rest is the same.
    assert_eq!(whole.streamed_bytes(), half.streamed_bytes());
    let quarter = part(&dir.path().join("q"), "mixtral", |d| LlamaShare { experts: Span::new(3, 4), ..LlamaShare::whole(d) });
    assert_eq!(whole.streamed_bytes() - quarter.streamed_bytes(), 4 * 2 * 3 * 96 * 64, "one expert fewer in each of 2 layers");
}

#[test]
fn a_rank_caches_only_the_kv_heads_its_query_heads_read() {
    let dir = tempfile::tempdir().unwrap();
    let whole = part(&dir.path().join("w"), "llama", LlamaShare::whole);
    let quarter = part(&dir.path().join("q"), "llama", share((2, 4), (0, 24)));
    // 2 (keys, values) x 2 layers x key/value heads x 8 (head width) x 4 bytes.
    assert_eq!(whole.kv_cache_bytes_per_token(), 2 * 2 * 2 * 8 * 4);
    assert_eq!(quarter.kv_cache_bytes_per_token(), 2 * 2 * 8 * 4, "one replicated key/value head");
    assert_eq!(kv_heads_for(Span::new(2, 4), 4), Span::new(0, 1));
    assert_eq!(kv_heads_for(Span::new(3, 6), 4), Span::new(0, 2), "heads of two groups read both");
}

#[test]
fn a_ring_attention_prefill_of_the_llama_family_gives_every_position_the_unsplit_hidden_state() {
    // Grouped-query keys passed round the ring, rotary positions per chunk: 11 tokens over 1 to 4
    // ranks, contiguous and zig-zag (chunks of one token at world 4).
    // The ranks here are threads of one process, and parlab's matvec pool serves one caller at a
    // time (a rank is a process of its own); a mixture's expert that gets one row runs a matvec,
    // so every matvec runs on its caller's thread while this test runs.
    struct OneThreadMatvec;
    impl Drop for OneThreadMatvec {
        fn drop(&mut self) {
            parlab::model::matvec::set_threads(0);
        }
    }
    parlab::model::matvec::set_threads(1);
    let _restore = OneThreadMatvec;
    for model_type in ["llama", "qwen3", "mixtral"] {
        let dir = tempfile::tempdir().unwrap();
        let whole = part(dir.path(), model_type, LlamaShare::whole);
        let prompt: Vec<u32> = (0..11).map(|i| (i * 37 + 5) % 301).collect();
        let unsplit = whole.forward(whole.embed(&prompt, 0).unwrap(), &mut whole.new_cache(11), &mut Alone);
        let unsplit = Vec::<f32>::try_from(&unsplit.contiguous().view([-1])).unwrap();
        let dims = whole.dims.clone();
        let load = || -> Box<dyn DecoderPart> {
            let ckpt = Arc::new(Checkpoint::open(&dir.path().join("ckpt")).unwrap());
            Box::new(LlamaPart::load_on(ckpt, dims.clone(), LlamaShare::whole(&dims), Placement::cpu()).unwrap())
        };
        for zigzag in [false, true] {
            for world in [1, 2, 3, 4] {
                let ring = crate::decode::ring_prefill(&prompt, world, zigzag, &load);
                let worst = ring.iter().zip(&unsplit).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-4, "{model_type} world {world} zigzag {zigzag}: a position's hidden state differs by {worst}");
            }
        }
    }
}

#[test]
fn a_tied_head_reads_the_token_embedding() {
    // A checkpoint without lm_head under a tied config scores each token by its embedding row.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "llama", r#", "tie_word_embeddings": true"#);
    init::write_checkpoint(&cfg, 3, &dir.path().join("ckpt")).unwrap();
    let ck = Checkpoint::open(&dir.path().join("ckpt")).unwrap();
    let mut dims = LlamaDims::from_config(&cfg).unwrap();
    assert!(dims.tied);
    let tied = LlamaPart::load_on(Arc::new(ck), dims.clone(), LlamaShare::whole(&dims), Placement::cpu()).unwrap();
    dims.tied = false;
    let ck = Arc::new(Checkpoint::open(&dir.path().join("ckpt")).unwrap());
    let untied = LlamaPart::load_on(ck.clone(), dims.clone(), LlamaShare::whole(&dims), Placement::cpu()).unwrap();
    let h = tied.forward(tied.embed(&[4, 8], 0).unwrap(), &mut tied.new_cache(4), &mut Alone);
    let (lt, lu) = (tied.logits(&h, &mut Alone), untied.logits(&h, &mut Alone));
    assert!(max_diff(&lt, &lu) > 1.0, "the tied head is not the checkpoint's lm_head");
    let embed = ck.full("model.embed_tokens.weight").unwrap();
    let norm = ck.full("model.norm.weight").unwrap();
    let last = h.narrow(0, 1, 1);
    let x = &last / (last.pow_tensor_scalar(2).mean_dim(Some([-1i64].as_slice()), true, tch::Kind::Float) + 1e-5).sqrt() * norm;
    let want = x.matmul(&embed.tr()).view([-1]);
    assert!(max_diff(&lt, &want) < 1e-3, "tied logits are the normed row against the embedding");
}

#[test]
fn decode_specs_name_the_families_parlab_runs_and_refuse_what_it_cannot_compute() {
    let (source, cfg) = parlab::spec::weights::model_source("tinyllama-1.1b", 0).unwrap();
    assert_eq!(cfg.family(), Some(parlab::model::config::Family::Llama));
    assert!(matches!(source.weights, parlab::spec::plan::Weights::Seeded { ref generator, .. } if generator == "parlab-llama-init/1"));
    let (source, cfg) = parlab::spec::weights::model_source("mixtral-8x7b", 0).unwrap();
    assert_eq!(cfg.family(), Some(parlab::model::config::Family::Llama));
    assert!(matches!(source.weights, parlab::spec::plan::Weights::Seeded { ref generator, .. } if generator == "parlab-llama-init/1"));
    use parlab::spec::weights::SourceError;
    let err = parlab::spec::weights::model_source("gemma-2-2b", 0).unwrap_err();
    assert!(matches!(&err, SourceError::NotRunnable { model_type, .. } if model_type == "gemma2"), "{err:?}");
    assert!(err.to_string().contains("gpt2, llama, qwen2, qwen3, mixtral"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "llama", "");
    let text = std::fs::read_to_string(dir.path().join("config.json")).unwrap().replace("llama3", "yarn");
    std::fs::write(dir.path().join("config.json"), text).unwrap();
    let err = parlab::spec::weights::model_source(dir.path().to_str().unwrap(), 0).unwrap_err();
    assert!(matches!(&err, SourceError::Llama { cause: parlab::model::ConfigError::RopeType(t), .. } if t == "yarn"), "{err:?}");
}

#[test]
fn bfloat16_through_libtorchs_path_keeps_the_float32_answer_within_its_rounding() {
    // The GPU's code path in bfloat16, computed on the host (libtorch has bf16 CPU kernels), for
    // each family: greedy tokens against float32, and logits within bf16's reach.
    use parlab::model::reference::greedy;
    for model_type in ["llama", "qwen2", "qwen3"] {
        let dir = tempfile::tempdir().unwrap();
        let f32_part = part(&dir.path().join("f"), model_type, LlamaShare::whole);
        let bf16 = Placement { kind: tch::Kind::BFloat16, ..Placement::cpu_as_gpu() };
        let half = part_on(&dir.path().join("h"), model_type, bf16, LlamaShare::whole);
        assert_eq!(
            half.kv_cache_bytes_per_token() * 2,
            f32_part.kv_cache_bytes_per_token(),
            "{model_type}: a bf16 cache is half the bytes"
        );
        let prompt = [7u32, 300, 9, 1, 42, 5];
        let (a, b) = (greedy(&f32_part, &prompt, 6).unwrap(), greedy(&half, &prompt, 6).unwrap());
        let first = a.tokens.iter().zip(&b.tokens).position(|(x, y)| x != y).unwrap_or(a.tokens.len());
        let vocab = a.vocab;
        let drift = a.logits[..first * vocab].iter().zip(&b.logits).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        let scale = a.logits.iter().fold(0f32, |m, x| m.max(x.abs()));
        eprintln!("{model_type}: bf16 tokens equal for {first} of {} steps, drift {drift:.3e}, logits up to {scale:.1}", a.tokens.len());
        assert!(first >= 1, "{model_type}: bf16 changed the prompt's token ({:?} vs {:?})", a.tokens, b.tokens);
        assert!(drift > 0.0, "{model_type}: bf16 logits are bitwise float32's: the part did not compute in bf16");
        assert!(drift < 0.1 * scale, "{model_type}: bf16 drift {drift} against logits up to {scale}");
    }
}

#[test]
fn half_precision_decodes_on_the_host_and_the_precision_audit_grades_it_against_its_float32_twin() {
    // dtype bfloat16 / float16 on the CPU: libtorch's operations compute in half precision (the
    // row kernels are float32), unsplit and split by tensor; each half-precision run has a float32
    // twin, and `parlab audit --json` grades it.
    let suite = super::launch::Suite::new();
    let tiny = suite.dir.path().join("tiny");
    config(&tiny, "llama", "");
    suite.spec(
        "half",
        &format!(
            "name: half\nkind: decode\nmodel: {}\nstrategy: tensor\nworld: [1, 2]\ndtype: [float32, bfloat16, float16]\n\
             link: mpi-shm\nprompt: {{length: 8, seed: 2}}\nnew_tokens: 6\nrepetitions: 1\nwarmup: 0\nthreads: 1\ntimeout: 120s\n",
            tiny.display()
        ),
    );
    assert_eq!(suite.run(&[]), 0, "six runs ok");
    let out = suite.parlab(&["audit", "--json", "--manifests", suite.manifests().to_str().unwrap()]);
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = audit["precision"].as_array().expect("precision rows");
    let mut dtypes: Vec<&str> = rows.iter().map(|r| r["dtype"].as_str().unwrap()).collect();
    dtypes.sort();
    assert_eq!(dtypes, ["bfloat16", "bfloat16", "float16", "float16"]);
    assert_eq!(rows.len(), 4, "bfloat16 and float16 at worlds 1 and 2, each with its float32 twin: {rows:#?}");
    for r in rows {
        let grade = r["grade"].as_str().unwrap();
        assert!(
            ["TOKENS_EQUAL", "NEAR_TIE"].contains(&grade),
            "a seeded model's half-precision answer keeps its twin's tokens or leaves them at a near-tie: {r:#}"
        );
        assert!(r["drift"].as_f64().unwrap() > 0.0, "half precision drifts from float32: {r:#}");
    }
    assert!(rows.iter().all(|r| r["twin"].is_string()), "every half-precision run found its float32 twin");
}

/// `parlab model init <name> ...` run from the repository root (so the name is read under models/).
fn model_init(args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"));
    cmd.args(["model", "init"]).args(args).current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("PARLAB_MODELS");
    cmd.output().unwrap()
}

/// A copy of the catalogue model `name`'s definition (its config.json alone) as `dir/name`: the
/// folder and the config's text.
fn definition_copy(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    let folder = dir.join(name);
    std::fs::create_dir(&folder).unwrap();
    let config = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name).join("config.json")).unwrap();
    std::fs::write(folder.join("config.json"), &config).unwrap();
    (folder, config)
}

/// The layer indices of `model.layers.N.*` tensors and how many tensors each holds.
fn tensors_per_layer(names: &[String]) -> std::collections::BTreeMap<usize, usize> {
    let mut per = std::collections::BTreeMap::new();
    for n in names {
        if let Some(l) = n.strip_prefix("model.layers.").and_then(|r| r.split('.').next()).and_then(|l| l.parse().ok()) {
            *per.entry(l).or_insert(0) += 1;
        }
    }
    per
}

#[test]
fn model_init_with_layers_writes_a_real_width_checkpoint_of_that_many_layers_that_decodes() {
    // llama-gqa-small: 4 layers, width 512, 8 heads over 2 KV heads of width 64; cut to 2.
    let suite = super::launch::Suite::new();
    let ckpt = suite.dir.path().join("ckpt");
    let out = model_init(&["llama-gqa-small", "--seed", "1", "--layers", "2", "--out", ckpt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(ckpt.join("config.json")).unwrap()).unwrap();
    let whole: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/llama-gqa-small/config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!((config["num_hidden_layers"].as_u64(), whole["num_hidden_layers"].as_u64()), (Some(2), Some(4)));
    assert_eq!(config["hidden_size"], whole["hidden_size"], "the real width");
    let bytes = std::fs::read(ckpt.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let names: Vec<String> = st.names().into_iter().cloned().collect();
    let per = tensors_per_layer(&names);
    assert_eq!(per.keys().copied().collect::<Vec<_>>(), [0, 1], "exactly layers 0 and 1: {names:?}");
    assert!(per.values().all(|n| *n == 9), "each layer's 9 tensors (2 norms, q/k/v/o, gate/up/down): {per:?}");
    assert_eq!(names.len(), 2 * 9 + 3, "and embed_tokens, norm, lm_head");
    assert_eq!(st.tensor("model.layers.1.self_attn.k_proj.weight").unwrap().shape(), [2 * 64, 512]);

    // A decode on the written folder: its weights, not a seeded stand-in; the KV cache per token
    // counts 2 layers (2 · layers · KV heads · 64 · 4 bytes: 2 KV heads unsplit, 1 per rank at tensor 2).
    suite.spec(
        "cut",
        "name: cut\nkind: decode\nmodel: ../ckpt\nstrategy: tensor\nworld: [1, 2]\nlink: mpi-shm\n\
         prompt: {length: 6, seed: 2}\nnew_tokens: 4\nrepetitions: 1\nwarmup: 0\nthreads: 1\ntimeout: 120s\n",
    );
    assert_eq!(suite.run(&[("PARLAB_STATE", suite.dir.path().join("state").to_str().unwrap())]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 2);
    for m in &all {
        assert_eq!(m.status(), parlab::manifest::Status::Ok, "{:?}", m.reason());
        assert!(
            matches!(m.plan.model.as_ref().map(|s| &s.weights), Some(parlab::spec::plan::Weights::Checkpoint { .. })),
            "{:?}",
            m.plan.model
        );
        let answer = m.answer().expect("an answer");
        assert!(answer.exactness.tokens_equal && answer.tokens[0].len() == 4, "{answer:?}");
        let world = m.layout.world as u64;
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        assert_eq!(d.kv_cache_bytes_per_token, vec![2 * 2 * (2 / world) * 64 * 4; world as usize], "world {world}");
    }
}

#[test]
fn model_init_refuses_zero_layers_or_more_than_the_model_has() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("ckpt");
    let has = ModelConfig::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tinyllama-1.1b")).unwrap().layers;
    let (zero, above) = (format!("at least one layer (give 1 to {has})"), format!("the model has {has} layers (give 1 to {has})"));
    for (layers, says) in [("0".to_string(), zero), ((has + 1).to_string(), above)] {
        let out = model_init(&["tinyllama-1.1b", "--layers", &layers, "--out", out_dir.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(parlab::exitcode::USER_ERROR), "--layers {layers}: {stderr}");
        assert!(stderr.contains("tinyllama-1.1b") && stderr.contains(says.as_str()), "--layers {layers}: {stderr}");
        assert!(!out_dir.exists(), "nothing written for --layers {layers}");
    }
}

#[test]
fn model_init_refuses_a_checkpoint_past_memory_disk_or_what_parlab_counts_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("ckpt");
    let wide = dir.path().join("wide");
    std::fs::create_dir(&wide).unwrap();
    let config = r#"{"model_type": "gpt2", "n_embd": 4294967040, "n_head": 1, "n_layer": 12, "vocab_size": 50257}"#;
    std::fs::write(wide.join("config.json"), config).unwrap();
    let cases = [
        ("gpt2", "1MiB", "1TiB", "PARLAB_MAX_MEMORY allows 1.0 MiB"),
        ("gpt2", "1TiB", "1MiB", "PARLAB_MAX_DISK allows 1.0 MiB"),
        (wide.to_str().unwrap(), "1TiB", "1TiB", "more than parlab counts"),
    ];
    for (model, memory, disk, says) in cases {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"));
        cmd.args(["model", "init", model, "--out", out_dir.to_str().unwrap()]).current_dir(env!("CARGO_MANIFEST_DIR"));
        let out = cmd.env_remove("PARLAB_MODELS").env("PARLAB_MAX_MEMORY", memory).env("PARLAB_MAX_DISK", disk).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(parlab::exitcode::USER_ERROR), "{model}: {stderr}");
        assert!(stderr.contains(model) && stderr.contains(says), "{model}: expected `{says}` in {stderr}");
        assert!(!out_dir.exists(), "nothing written for {model}");
    }
}

#[test]
fn model_init_never_replaces_a_folder_holding_anything_but_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (mine, ckpt) = (dir.path().join("mine"), dir.path().join("ckpt"));
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    std::fs::write(dir.path().join("precious.txt"), "mine").unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/llama-gqa-small");
    let init = |out: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"));
        cmd.args(["model", "init"]).arg(&model).args(["--layers", "1", "--out", out]).current_dir(dir.path()).output().unwrap()
    };
    for (out, says) in [(".", "--out .: name a folder of the checkpoint's own"), ("mine", "--out mine: holds `notes.txt`")] {
        let o = init(out);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(parlab::exitcode::USER_ERROR), "--out {out}: {stderr}");
        assert!(stderr.contains(says), "--out {out}: expected `{says}` in {stderr}");
    }
    assert_eq!(std::fs::read_to_string(mine.join("notes.txt")).unwrap(), "mine", "the folder's file is kept");
    assert_eq!(std::fs::read_to_string(dir.path().join("precious.txt")).unwrap(), "mine", "the working folder is kept");
    assert_eq!(init("ckpt").status.code(), Some(0));
    let o = init("ckpt");
    assert_eq!(o.status.code(), Some(0), "a checkpoint model init wrote is replaced: {}", String::from_utf8_lossy(&o.stderr));
    assert!(ckpt.join("model.safetensors").is_file());
}

#[test]
fn model_init_never_replaces_the_folder_it_reads_the_model_from() {
    // `--out` naming the model's own folder replaced its config.json with the cut one (and any
    // real weights beside it with seeded ones): the input was lost to the output.
    let dir = tempfile::tempdir().unwrap();
    let (model, config) = definition_copy(dir.path(), "gpt2");
    let spelt_otherwise = dir.path().join("gpt2/../gpt2");
    for out in [&model, &spelt_otherwise] {
        let o = model_init(&[model.to_str().unwrap(), "--layers", "1", "--out", out.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(parlab::exitcode::USER_ERROR), "--out {}: {stderr}", out.display());
        assert!(stderr.contains("is the folder the model is read from"), "--out {}: {stderr}", out.display());
        assert_eq!(std::fs::read_to_string(model.join("config.json")).unwrap(), config, "the model's config.json is kept");
        assert!(!model.join("model.safetensors").exists(), "nothing written");
    }
}

#[test]
fn model_init_replaces_a_checkpoint_named_with_a_trailing_dot() {
    // `--out ckpt/.` passed the checks as `ckpt`, then the old checkpoint was deleted and the
    // move into `ckpt/.` failed (exit 1, "Invalid argument"), the new one left in `.ckpt.tmp-PID`.
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let init = |out: &Path| model_init(&["llama-gqa-small", "--layers", "1", "--out", out.to_str().unwrap()]);
    assert_eq!(init(&ckpt).status.code(), Some(0));
    let o = init(&ckpt.join("."));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ckpt.join("config.json").is_file() && ckpt.join("model.safetensors").is_file(), "the checkpoint is in place");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, ["ckpt"], "nothing left beside it");
}

#[test]
fn model_init_refuses_an_out_under_a_file_as_a_bad_path() {
    // `--out FILE/ckpt` passed the checks and failed writing (exit 1, as if a run had failed):
    // a path that cannot be a folder is the user's to fix (exit 2), named before any work.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "mine").unwrap();
    let out = file.join("ckpt");
    let o = model_init(&["llama-gqa-small", "--layers", "1", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(parlab::exitcode::USER_ERROR), "{stderr}");
    assert!(stderr.contains(&format!("--out {}", out.display())) && stderr.contains("notes.txt"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing written beside it");
}

#[test]
fn model_init_never_replaces_a_model_definition_it_did_not_write() {
    // A folder holding a config.json alone is a model's definition (as each of models/ is), not
    // a checkpoint model init wrote (always config.json and model.safetensors): `--out
    // models/llama-3.2-1b` replaced that model with the one initialised.
    let dir = tempfile::tempdir().unwrap();
    let (other, config) = definition_copy(dir.path(), "llama-3.2-1b");
    let o = model_init(&["llama-gqa-small", "--layers", "1", "--out", other.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(parlab::exitcode::USER_ERROR), "{stderr}");
    assert!(stderr.contains("config.json without model.safetensors"), "{stderr}");
    assert_eq!(std::fs::read_to_string(other.join("config.json")).unwrap(), config, "the other model's definition is kept");
}
