//! The fixed-shape decode step a CUDA graph captures, checked where there is no GPU: issued
//! directly on the CPU through the same libtorch operators, it decodes the reference tokens of
//! GPT-2 and of grouped-query Llama, Qwen2 and Qwen3, repetition after repetition over one cache; parts
//! it cannot run (a share of a model, a mixture) are refused with the reason.

use parlab::model::fixed_step::{FixedShape, FixedStep, FixedStepError};
use parlab::model::gpt2::{Dims, Gpt2Part, PartShare};
use parlab::model::llama::{LlamaDims, LlamaPart, LlamaShare};
use parlab::model::part::DecoderPart;
use parlab::model::placement::Placement;
use parlab::model::reference::greedy;
use parlab::model::weights::Checkpoint;
use parlab::model::{init, ModelConfig};
use parlab::rank::replay::ReplayedStep;
use parlab::spec::plan::Span;
use std::path::Path;
use std::sync::Arc;

const GPT2: &str = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4,
 "n_embd": 64, "vocab_size": 501, "n_positions": 64, "layer_norm_epsilon": 1e-05, "n_inner": null}"#;

fn llama(model_type: &str, extra: &str) -> String {
    format!(
        r#"{{"model_type": "{model_type}", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 96, "vocab_size": 301, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0{extra}}}"#
    )
}

/// The seeded checkpoint of `config` in `dir`.
fn checkpoint(dir: &Path, config: &str) -> (Arc<Checkpoint>, ModelConfig) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    let cfg = ModelConfig::read(dir).unwrap();
    init::write_checkpoint(&cfg, 11, &dir.join("ckpt")).unwrap();
    (Arc::new(Checkpoint::open(&dir.join("ckpt")).unwrap()), ModelConfig::read(&dir.join("ckpt")).unwrap())
}

fn gpt2(dir: &Path, placement: Placement, share: impl Fn(&Dims) -> PartShare) -> Gpt2Part {
    let (ckpt, cfg) = checkpoint(dir, GPT2);
    let dims = Dims::from_config(&cfg);
    let s = share(&dims);
    Gpt2Part::load_on(ckpt, dims, s, placement).unwrap()
}

fn llama_part(dir: &Path, config: &str, placement: Placement, share: impl Fn(&LlamaDims) -> LlamaShare) -> LlamaPart {
    let (ckpt, cfg) = checkpoint(dir, config);
    let dims = LlamaDims::from_config(&cfg).unwrap();
    let s = share(&dims);
    LlamaPart::load_on(ckpt, dims, s, placement).unwrap()
}

/// Decodes `prompt` twice through `fixed` (one cache, refilled) and checks both repetitions
/// against `reference`'s greedy decoding by the row kernels.
fn decodes_the_reference(name: &str, fixed: &dyn DecoderPart, reference: &dyn DecoderPart) {
    let (prompt, new_tokens) = ([5u32, 17, 3, 200, 9, 41, 7], 12);
    let want = greedy(reference, &prompt, new_tokens).unwrap();
    let mut step = ReplayedStep::direct(fixed, prompt.len() + new_tokens).unwrap();
    for rep in 0..2 {
        let got = step.decode(&prompt, new_tokens, Some(&want)).unwrap();
        let exact = got.exactness.clone().unwrap();
        assert_eq!(got.tokens, std::slice::from_ref(&want.tokens), "{name}, repetition {rep}");
        assert!(exact.tokens_equal && exact.steps_compared == new_tokens, "{name}, repetition {rep}: {exact:?}");
        assert!(exact.max_logit_diff < 1e-3, "{name}, repetition {rep}: the fixed-shape step drifts {}", exact.max_logit_diff);
        assert_eq!(got.steps.len(), new_tokens - 1, "every round after the prefill is one timed step");
    }
    assert!(want.tokens.iter().collect::<std::collections::BTreeSet<_>>().len() > 2, "{name}: a varied decoding {:?}", want.tokens);
}

#[test]
fn the_fixed_shape_step_decodes_the_reference_tokens_of_gpt2_llama_qwen2_and_qwen3() {
    let dir = tempfile::tempdir().unwrap();
    let (fixed, rows) = (
        gpt2(&dir.path().join("a"), Placement::cpu_as_gpu(), PartShare::whole),
        gpt2(&dir.path().join("b"), Placement::cpu(), PartShare::whole),
    );
    decodes_the_reference("gpt2", &fixed, &rows);
    for (model_type, extra) in [("llama", ""), ("qwen2", ""), ("qwen3", r#", "head_dim": 8"#)] {
        let config = llama(model_type, extra);
        let at = |d: &str| dir.path().join(format!("{model_type}-{d}"));
        let fixed = llama_part(&at("a"), &config, Placement::cpu_as_gpu(), LlamaShare::whole);
        let rows = llama_part(&at("b"), &config, Placement::cpu(), LlamaShare::whole);
        decodes_the_reference(model_type, &fixed, &rows);
    }
}

#[test]
fn parts_the_fixed_shape_step_cannot_run_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let shard = gpt2(dir.path(), Placement::cpu_as_gpu(), |d| PartShare { heads: Span::new(0, 2), ..PartShare::whole(d) });
    let err = FixedStep::new(&shard as &dyn FixedShape, tch::Device::Cpu, 8).err().expect("a shard is refused");
    assert!(matches!(err, FixedStepError::NotWhole(_)) && err.to_string().contains("whole model"), "{err}");
    let mixture = llama("mixtral", r#", "num_local_experts": 4, "num_experts_per_tok": 2"#);
    let moe = llama_part(&dir.path().join("moe"), &mixture, Placement::cpu_as_gpu(), LlamaShare::whole);
    let err = FixedStep::new(&moe as &dyn FixedShape, tch::Device::Cpu, 8).err().expect("a mixture is refused");
    assert!(matches!(err, FixedStepError::Mixture), "{err}");
    // Before any graph is made: the refusal names the mixture, with or without a GPU.
    let captured = ReplayedStep::captured(&moe, 8, 0).err().expect("nothing is captured for a mixture").to_string();
    assert!(captured.contains("mixture-of-experts"), "{captured}");
}

#[test]
fn in_bfloat16_the_fixed_shape_step_follows_the_eager_libtorch_step() {
    // The element type a GPU graph run of `dtype: bfloat16` computes in, checked on the host
    // against libtorch's eager step in the same type (not against float32: rounding differs).
    let dir = tempfile::tempdir().unwrap();
    let bf16 = Placement::cpu_in(tch::Kind::BFloat16);
    let (fixed, eager) = (gpt2(&dir.path().join("a"), bf16, PartShare::whole), gpt2(&dir.path().join("b"), bf16, PartShare::whole));
    let (prompt, new_tokens) = ([5u32, 17, 3, 200, 9, 41, 7], 12);
    let want = greedy(&eager, &prompt, new_tokens).unwrap();
    let got = ReplayedStep::direct(&fixed, prompt.len() + new_tokens).unwrap().decode(&prompt, new_tokens, Some(&want)).unwrap();
    let exact = got.exactness.unwrap();
    assert_eq!(got.tokens, std::slice::from_ref(&want.tokens), "{exact:?}");
    assert!(exact.tokens_equal && exact.max_logit_diff < 0.05, "{exact:?}");
    println!("bfloat16 fixed-shape step against the eager one: largest logit difference {}", exact.max_logit_diff);
}
