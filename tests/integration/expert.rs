//! Expert parallelism: a seeded mixture-of-experts GPT-2 routes each token to its top-k
//! experts with weights that sum to one, the grouped computation equals a token-by-token sum of
//! its experts, and an expert split over 2 ranks under mpirun gives the unsplit answer with the
//! pairs, imbalance and bytes a known routing must give.

use super::launch::Suite;
use parlab::manifest::Status;
use parlab::model::gpt2::{Assignment, ExpertKind, Mixture, MoeDims};
use parlab::model::weights::Checkpoint;
use parlab::model::{init, ModelConfig};
use parlab::spec::plan::Span;
use std::path::Path;
use tch::Tensor;

/// A small mixture GPT-2 (2 layers, 4 heads, width 64; 4 experts of width 96, top 2).
const SMALL_MOE: &str = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4,
 "n_embd": 64, "vocab_size": 501, "n_positions": 64, "layer_norm_epsilon": 1e-05, "n_inner": null,
 "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 96}"#;

fn small_moe(dir: &Path) -> ModelConfig {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), SMALL_MOE).unwrap();
    ModelConfig::read(dir).unwrap()
}

/// Layer 0's mixture of a seeded checkpoint, holding every expert, routed with `skew`.
fn layer0_mixture(dir: &Path, skew: f64) -> (Mixture, Tensor) {
    let cfg = small_moe(dir);
    init::write_checkpoint(&cfg, 11, dir).unwrap();
    let ckpt = Checkpoint::open(&dir.join("model.safetensors")).unwrap();
    let mut dims = MoeDims::of(&cfg).unwrap().expect("a mixture config");
    dims.skew = skew;
    let mixture =
        Mixture::load(&ckpt, &dims, "h.0.mlp", Span::new(0, 4), ExpertKind::Gpt2Mlp { gelu: parlab::model::gpt2::Gelu::Tanh }).unwrap();
    tch::manual_seed(5);
    (mixture, Tensor::randn([12, 64], (tch::Kind::Float, tch::Device::Cpu)))
}

#[test]
fn the_router_picks_k_distinct_experts_whose_weights_sum_to_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mixture, x) = layer0_mixture(dir.path(), 0.0);
    let choices = mixture.route(&x);
    assert_eq!(choices.len(), 12);
    let mut used = std::collections::BTreeSet::new();
    for c in &choices {
        assert_eq!(c.len(), 2);
        assert_ne!(c[0].0, c[1].0, "top-2 must be two experts");
        assert!(c[0].1 >= c[1].1, "the preferred expert first: {c:?}");
        assert!((c[0].1 + c[1].1 - 1.0).abs() < 1e-6, "renormalised weights sum to 1: {c:?}");
        used.extend(c.iter().map(|&(e, _)| e));
    }
    assert!(used.len() >= 3, "an unskewed router spreads 12 tokens over most of the 4 experts: {used:?}");
}

#[test]
fn a_large_skew_sends_every_token_to_the_first_experts() {
    let dir = tempfile::tempdir().unwrap();
    let (mixture, x) = layer0_mixture(dir.path(), 20.0);
    for c in mixture.route(&x) {
        let mut experts: Vec<usize> = c.iter().map(|&(e, _)| e).collect();
        experts.sort();
        assert_eq!(experts, vec![0, 1]);
    }
}

#[test]
fn the_grouped_mixture_equals_a_token_by_token_sum_of_its_experts() {
    let dir = tempfile::tempdir().unwrap();
    let (mixture, x) = layer0_mixture(dir.path(), 0.0);
    let grouped = mixture.local(&x);
    let mut worst = 0f64;
    for (t, choice) in mixture.route(&x).iter().enumerate() {
        let row = x.narrow(0, t as i64, 1);
        let mut sum = Tensor::zeros([64], (tch::Kind::Float, tch::Device::Cpu));
        for &(expert, weight) in choice {
            let y = mixture.compute(&row, &[Assignment { row: 0, expert }]);
            sum += Tensor::from_slice(&y) * f64::from(weight);
        }
        worst = worst.max((grouped.get(t as i64) - sum).abs().max().double_value(&[]));
    }
    assert!(worst < 1e-4, "grouped experts differ from one token at a time by {worst}");
}

#[test]
fn an_expert_split_over_mpi_gives_the_unsplit_answer_and_a_known_routings_imbalance() {
    let suite = Suite::new();
    small_moe(&suite.dir.path().join("small-moe"));
    suite.spec(
        "ep",
        "name: ep\nkind: decode\nmodel: ../small-moe\nstrategy: expert\nworld: [1, 2]\nrouting_skew: [0, 20]\n\
         link: mpi-shm\nprompt: {length: 10, seed: 4}\nnew_tokens: 6\nrepetitions: 2\nwarmup: 1\nthreads: 1\ntimeout: 120s\n",
    );
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 4);
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
        let ex = &m.answer().expect("an answer").exactness;
        assert!(ex.tokens_equal && ex.max_logit_diff < 1e-3, "world {}: {ex:?}", m.layout.world);
        let d = m.summary().and_then(|s| s.decode()).expect("a decode summary");
        let e = d.experts.as_ref().expect("expert figures");
        // 10 prompt tokens, 2 experts each: 20 pairs per layer, over every rank.
        assert!(e.assigned.iter().all(|l| l.iter().sum::<u64>() == 20), "{:?}", e.assigned);
        let (world, skew) = (m.layout.world, e.routing_skew);
        if world == 2 && skew == 20.0 {
            // Every token goes to experts 0 and 1, both on rank 0: rank 1 sends its 5 tokens'
            // 10 pairs (64 values + the expert index each) per layer and gets nothing to compute.
            assert_eq!(e.assigned, vec![vec![20, 0], vec![20, 0]]);
            assert_eq!(e.imbalance, vec![2.0, 2.0]);
            assert_eq!(e.sent_bytes, 2 * 10 * 65 * 4);
        }
        if world == 1 {
            assert_eq!((e.imbalance.clone(), e.sent_bytes), (vec![1.0, 1.0], 0));
        }
        // Even routing: 10 tokens x 2 x (p - 1)/p² pairs per layer, a row out and back.
        let even = if world == 2 { 2 * 5 * (2 * 64 + 1) * 4 } else { 0 };
        assert_eq!(e.sent_bytes_even, even);
    }
    let audit = suite.parlab(&["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(audit.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&audit.stderr));
    assert_eq!(text.matches("2 runs: same answer").count(), 2, "one answer per skew, each reproduced at world 2: {text}");
    let report = suite.parlab(&["report"]);
    assert_eq!(report.status.code(), Some(0), "{}", String::from_utf8_lossy(&report.stderr));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let table = register.split("#### Expert-parallel prefill").nth(1).expect("the expert table");
    assert_eq!(table.lines().filter(|l| l.starts_with("| ep |")).count(), 4, "{table}");
    assert!(table.contains("| 20 + 0 |") || table.contains("| 40 + 0 |"), "{table}");
}

#[test]
fn the_cost_models_parameter_count_of_a_mixture_gpt2_is_the_seeded_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_moe(dir.path());
    init::write_checkpoint(&cfg, 3, dir.path()).unwrap();
    let ckpt = Checkpoint::open(&dir.path().join("model.safetensors")).unwrap();
    let stored: u64 = ckpt.names().iter().map(|n| ckpt.shape(n).unwrap().iter().product::<usize>() as u64).sum();
    let shape = parlab::costmodel::shape::shape_from_config(&cfg).unwrap();
    // The seeded checkpoint unties the head (its own `lm_head.weight`, vocab x width).
    assert_eq!(shape.params + 501 * 64, stored);
    assert_eq!(shape.experts.map(|e| (e.count, e.active)), Some((4, 2)));
}
