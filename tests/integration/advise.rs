//! `parlab advise` against the chapters' decisions: 001's design exercise (pairs on NVLink,
//! SYS between them), 002's two nodes of four, 000's modelled table, and a 70B model that no
//! single device holds; its JSON against the shape the README documents; bad input exits 2.

use parlab::advise::reject::Rejection;
use parlab::advise::request::Asked;
use parlab::advise::{advise, render, Advice};
use parlab::costmodel::catalogue::Catalogue;
use parlab::costmodel::plan::{self, Device, PlanInput};
use parlab::spec::schema::Strategy;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn model(name: &str) -> String {
    root().join("models").join(name).to_string_lossy().into_owned()
}

fn seventy_b() -> String {
    root().join("tests/fixtures/advise/llama-3.1-70b").to_string_lossy().into_owned()
}

fn catalogue() -> Catalogue {
    Catalogue::load(&root().join("models")).unwrap()
}

fn asked(model: String, device: &str, nodes: u32, per_node: u32, domains: &[&str]) -> Asked {
    Asked {
        model,
        device: device.into(),
        nodes,
        devices_per_node: per_node,
        domains: domains.iter().map(|d| d.to_string()).collect(),
        prompt: 4096,
        new_tokens: 256,
        sequences: 1,
        objective: "latency".into(),
        dtype: "float16".into(),
    }
}

fn run(a: &Asked) -> Advice {
    advise(a.resolve(&catalogue()).unwrap())
}

fn labels(advice: &Advice) -> Vec<String> {
    advice.ranked.iter().map(|r| r.label.clone()).collect()
}

fn rejection<'a>(advice: &'a Advice, label: &str) -> &'a Rejection {
    &advice.rejected.iter().find(|r| r.label == label).unwrap_or_else(|| panic!("{label} not rejected: {:?}", labels(advice))).reason
}

fn step_ms(advice: &Advice, label: &str) -> f64 {
    advice.ranked.iter().find(|r| r.label == label).unwrap_or_else(|| panic!("{label} not ranked")).predicted.step_s * 1e3
}

#[test]
fn chapter_1_4_design_exercise_pairs_on_nvlink_sys_between() {
    // 4 GPUs, NV12 between 0-1 and 2-3, SYS between the pairs; Llama-3.1-8B; 6K prompts,
    // 300-token answers; time to first token.
    let a = Asked {
        prompt: 6144,
        new_tokens: 300,
        objective: "ttft".into(),
        ..asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"])
    };
    let advice = run(&a);
    assert_eq!(advice.ranked[0].label, "TP=2 x DP=2", "{:?}", labels(&advice));
    match rejection(&advice, "TP=4 x DP=1") {
        Rejection::TensorAcrossSlowBoundary { link, inside, inside_link, between_nodes, instead, .. } => {
            assert_eq!((link.as_str(), *inside, inside_link.as_str(), *between_nodes), ("pcie-sys", 2, "nvlink-nv12", false));
            assert_eq!(instead, "TP=2 x DP=2");
        }
        other => panic!("TP=4 rejected for {other:?}"),
    }
    let baseline = advice.baseline.as_ref().expect("the model fits one A100: whole replicas are the baseline");
    assert_eq!(baseline.label, "TP=1 x DP=4");
    assert!(labels(&advice).contains(&"TP=1 x DP=4".to_string()));
    // TTFT of the pairs beats four replicas: the prefill's arithmetic halves, NVLink carries its all-reduces.
    let ttft = |l: &str| advice.ranked.iter().find(|r| r.label == l).unwrap().predicted.ttft_s;
    assert!(ttft("TP=2 x DP=2") < ttft("TP=1 x DP=4"));
    let md = render::to_markdown(&advice);
    assert!(md.contains("**Advice:** TP=2 x DP=2.") && md.contains("**Baseline to measure:** TP=1 x DP=4"), "{md}");
    assert!(md.contains("| TP=4 x DP=1 | its tensor group of 4 crosses pcie-sys"), "{md}");
}

#[test]
fn chapter_1_4_a_model_that_does_not_fit_two_gpus_crosses_sys_only_by_pipeline() {
    // "A bigger model: if it no longer fits in two GPUs": the 70B in float32 (263 GB) needs
    // more than a pair of A100s, so the advice joins the pairs by pipeline across SYS, the
    // tensor groups staying on NVLink, and still not TP=4 across SYS.
    let a = Asked { dtype: "float32".into(), ..asked(seventy_b(), "a100-80gb", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"]) };
    let advice = run(&a);
    assert!(matches!(rejection(&advice, "TP=2 x DP=2"), Rejection::DoesNotFit { .. }));
    assert!(matches!(rejection(&advice, "TP=4 x DP=1"), Rejection::TensorAcrossSlowBoundary { .. }));
    assert_eq!(advice.ranked[0].label, "TP=2 x PP=2 x DP=1", "{:?}", labels(&advice));
}

#[test]
fn parallelism_chapter_two_nodes_of_four_tp8_across_loses_to_tp4_inside() {
    let a = asked(seventy_b(), "a100-80gb", 2, 4, &["4:nvswitch", "8:infiniband-400g"]);
    let advice = run(&a);
    assert_eq!(advice.ranked[0].label, "TP=4 x DP=2", "{:?}", labels(&advice));
    let tp8 = advice.rejected.iter().find(|r| r.label == "TP=8 x DP=1").expect("TP=8 refused");
    assert!(
        matches!(&tp8.reason, Rejection::TensorAcrossSlowBoundary { link, between_nodes: true, inside: 4, .. } if link == "infiniband-400g"),
        "{:?}",
        tp8.reason
    );
    // It also loses on the prediction itself: its 14 ring steps all pay the node link.
    assert!(tp8.predicted.as_ref().unwrap().step_s * 1e3 > step_ms(&advice, "TP=4 x DP=2"));
}

fn book_gpu() -> Device {
    let c = catalogue();
    let d = c.device("book-gpu-12gib").unwrap();
    Device { memory_bytes: d.memory_bytes(), bandwidth_bps: d.bandwidth_bps() }
}

#[test]
fn chapter_000_modelled_table_reproduced_to_its_printed_precision() {
    // Llama-3.1-8B fp16, a 4,096-token context (the answer's mean: 4,032 + 128/2), 303 GB/s.
    let at = |link: &str| {
        let domain = format!("8:{link}");
        run(&Asked { prompt: 4032, new_tokens: 128, ..asked(model("llama-3.1-8b"), "book-gpu-12gib", 1, 8, &[&domain]) })
    };
    let slow = at("gloo-loopback");
    assert_eq!(format!("{:.0} {:.0}", step_ms(&slow, "TP=8 x DP=1"), step_ms(&slow, "TP=2 x DP=4")), "56 33");
    let rank = |a: &Advice, l: &str| a.ranked.iter().position(|r| r.label == l).unwrap();
    assert!(rank(&slow, "TP=2 x DP=4") < rank(&slow, "TP=8 x DP=1"), "8 devices slower than 2 over the gloo-class link");
    let fast = at("nvswitch");
    assert_eq!(format!("{:.1} {:.1}", step_ms(&fast, "TP=8 x DP=1"), step_ms(&fast, "TP=4 x DP=2")), "15.4 16.7");
    assert!(rank(&fast, "TP=8 x DP=1") < rank(&fast, "TP=4 x DP=2"), "8 faster than 4 over NVSwitch, barely");
    // The same figures as the MODELLED section's plans (costmodel::plan), not a second model.
    let s = parlab::costmodel::tables::load_shape(&model("llama-3.1-8b")).unwrap().shape;
    let c = catalogue();
    for (advice, link, world, label) in [(&slow, "gloo-loopback", 2, "TP=2 x DP=4"), (&fast, "nvswitch", 8, "TP=8 x DP=1")] {
        let p = plan::plan(&PlanInput {
            shape: &s,
            dtype_bytes: 2,
            device: book_gpu(),
            link: c.link(link).unwrap().link(),
            strategy: Strategy::Tensor,
            world,
            context: 4096,
            sequences: 1,
            imbalance: 1.0,
        })
        .unwrap();
        assert!((step_ms(advice, label) - p.step_s * 1e3).abs() < 1e-9);
    }
    // 14.96 GiB of weights do not fit the 12 GiB card: no whole replicas.
    assert!(matches!(rejection(&slow, "TP=1 x DP=8"), Rejection::DoesNotFit { .. }));
    assert!(slow.baseline.is_none());
}

#[test]
fn a_seventy_b_model_that_fits_no_device_is_never_advised_data_parallel() {
    let machines: [(u32, u32, &[&str]); 3] =
        [(1, 8, &["8:nvswitch"]), (2, 4, &["4:nvswitch", "8:infiniband-400g"]), (1, 4, &["2:nvlink-nv12", "4:pcie-sys"])];
    for (nodes, per_node, domains) in machines {
        for objective in ["latency", "ttft", "throughput"] {
            let a = Asked { objective: objective.into(), sequences: 8, ..asked(seventy_b(), "a100-80gb", nodes, per_node, domains) };
            let advice = run(&a);
            assert!(!advice.ranked.is_empty());
            assert!(advice.ranked.iter().all(|r| !r.layout.is_replicas_only()), "{objective}: {:?}", labels(&advice));
            assert!(advice.baseline.is_none());
            let dp = format!("TP=1 x DP={}", nodes * per_node);
            assert!(matches!(rejection(&advice, &dp), Rejection::DoesNotFit { .. }));
        }
    }
}

#[test]
fn a_mixture_is_offered_expert_splits() {
    let advice = run(&asked(model("mixtral-8x7b"), "a100-80gb", 1, 8, &["8:nvswitch"]));
    let all: Vec<String> = labels(&advice).into_iter().chain(advice.rejected.iter().map(|r| r.label.clone())).collect();
    assert!(all.contains(&"EP=8 x DP=1".to_string()) && all.contains(&"EP=2 x DP=4".to_string()), "{all:?}");
    let ep8 = advice.ranked.iter().find(|r| r.label == "EP=8 x DP=1").expect("EP=8 fits");
    assert!(ep8.predicted.step_s.is_finite() && ep8.predicted.step_comm_s > 0.0);
}

#[test]
fn the_leaders_say_what_would_flip_them() {
    let a = Asked {
        prompt: 6144,
        new_tokens: 300,
        objective: "ttft".into(),
        ..asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"])
    };
    let advice = run(&a);
    let flip = advice.ranked[0].flip.clone().expect("searched").expect("some constant flips it");
    // At the flip point the other layout really is at least as good, and just short of it not.
    let req = a.resolve(&catalogue()).unwrap();
    let (shape, w) = (&req.model.shape, &req.workload);
    let other = advice.ranked.iter().find(|r| r.label == flip.next).unwrap().layout;
    let cost = |x: f64, l| {
        let m = parlab::advise::rank::with_constant(&req.machine, &flip.constant, x);
        parlab::advise::predict::predict(l, shape, w, &m).ttft_s
    };
    let first = advice.ranked[0].layout;
    assert!(cost(flip.at, &other) <= cost(flip.at, &first) * (1.0 + 1e-9));
    let before = flip.now + (flip.at - flip.now) * 0.99;
    assert!(cost(before, &other) > cost(before, &first));
    assert!(advice.ranked.iter().skip(parlab::advise::FLIPS_FOR_TOP).all(|r| r.flip.is_none()));
}

fn parlab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_parlab")).args(args).current_dir(root()).env_remove("PARLAB_MODELS").output().unwrap()
}

/// The documented `parlab.advice/1` shape: (pointer, JSON type) pairs every advice has.
const SHAPE: &[(&str, &str)] = &[
    ("/schema", "string"),
    ("/model/name", "string"),
    ("/model/params", "number"),
    ("/model/layers", "number"),
    ("/model/kv_heads", "number"),
    ("/model/weights_bytes", "number"),
    ("/workload/prompt_tokens", "number"),
    ("/workload/new_tokens", "number"),
    ("/workload/sequences", "number"),
    ("/workload/objective", "string"),
    ("/workload/dtype", "string"),
    ("/workload/mean_decode_context_tokens", "number"),
    ("/workload/final_context_tokens", "number"),
    ("/machine/device", "string"),
    ("/machine/memory_bytes", "number"),
    ("/machine/bandwidth_Bps", "number"),
    ("/machine/nodes", "number"),
    ("/machine/devices_per_node", "number"),
    ("/machine/devices", "number"),
    ("/machine/domains", "array"),
    ("/ranked", "array"),
    ("/rejected", "array"),
    ("/assumptions", "array"),
    ("/provenance", "array"),
];

const DOMAIN: &[(&str, &str)] =
    &[("/size", "number"), ("/link", "string"), ("/latency_s", "number"), ("/bandwidth_Bps", "number"), ("/between_nodes", "bool")];

const RANKED: &[(&str, &str)] = &[
    ("/rank", "number"),
    ("/label", "string"),
    ("/devices_per_replica", "number"),
    ("/layout/data", "number"),
    ("/layout/tensor", "number"),
    ("/layout/pipeline", "number"),
    ("/layout/expert", "number"),
    ("/flip_searched", "bool"),
    ("/predicted/step_s", "number"),
    ("/predicted/step_comm_s", "number"),
    ("/predicted/ttft_s", "number"),
    ("/predicted/request_s", "number"),
    ("/predicted/tokens_per_s", "number"),
    ("/predicted/tokens_per_s_per_device", "number"),
    ("/predicted/weights_bytes_per_device", "number"),
    ("/predicted/kv_bytes_per_device", "number"),
    ("/predicted/fits", "bool"),
    ("/predicted/prefill_compute_bound", "bool"),
];

const REJECTED: &[(&str, &str)] = &[("/label", "string"), ("/layout/tensor", "number"), ("/reason/kind", "string"), ("/message", "string")];

const FLIP: &[(&str, &str)] =
    &[("/constant/kind", "string"), ("/now", "number"), ("/at", "number"), ("/next", "string"), ("/message", "string")];

fn check_shape(v: &Value, shape: &[(&str, &str)], what: &str) {
    for (pointer, kind) in shape {
        let got = v.pointer(pointer).unwrap_or_else(|| panic!("{what}: no {pointer} in {v}"));
        let ok = match *kind {
            "string" => got.is_string(),
            "number" => got.is_number(),
            "array" => got.is_array(),
            "bool" => got.is_boolean(),
            _ => unreachable!(),
        };
        assert!(ok, "{what}: {pointer} is not a {kind}: {got}");
    }
}

#[test]
fn json_output_matches_the_documented_shape() {
    let out = parlab(&[
        "advise",
        "llama-3.1-8b",
        "--device",
        "a100-80gb",
        "--devices-per-node",
        "4",
        "--domain",
        "2:nvlink-nv12",
        "--domain",
        "4:pcie-sys",
        "--prompt",
        "6144",
        "--new-tokens",
        "300",
        "--objective",
        "ttft",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_shape(&v, SHAPE, "advice");
    assert_eq!(v["schema"], "parlab.advice/1");
    assert_eq!(v["workload"]["objective"], "ttft");
    let kinds = [
        "does_not_fit",
        "tensor_across_slow_boundary",
        "heads_not_divisible",
        "kv_heads_not_divisible",
        "width_not_divisible",
        "kv_heads_duplicated",
        "too_many_stages",
        "experts_not_divisible",
        "misaligned",
    ];
    for d in v["machine"]["domains"].as_array().unwrap() {
        check_shape(d, DOMAIN, "domain");
    }
    for r in v["ranked"].as_array().unwrap() {
        check_shape(r, RANKED, "ranked");
        if let Some(f) = r.get("flip").filter(|f| !f.is_null()) {
            check_shape(f, FLIP, "flip");
        }
    }
    for r in v["rejected"].as_array().unwrap() {
        check_shape(r, REJECTED, "rejected");
        assert!(kinds.contains(&r["reason"]["kind"].as_str().unwrap()), "{r}");
    }
    check_shape(&v["baseline"], RANKED, "baseline");
    assert_eq!(v["ranked"][0]["label"], "TP=2 x DP=2");
    assert_eq!(v["rejected"][0]["reason"]["kind"], "tensor_across_slow_boundary");
    assert_eq!(v["ranked"][0]["flip_searched"], true);
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let base = ["advise", "llama-3.1-8b", "--device", "a100-80gb", "--devices-per-node", "4", "--prompt", "128", "--new-tokens", "8"];
    let cases: [(&[&str], &str); 9] = [
        (&["--domain", "4:nvswitch", "--objective", "speed"], "--objective speed"),
        (&["--domain", "4:warp-drive"], "warp-drive"),
        (&["--domain", "3:nvswitch"], "the domains reach 3 devices but the machine has 4"),
        (&["--domain", "2:nvswitch"], "the last --domain must join all 4"),
        (&["--domain", "4:nvswitch", "--domain", "2:nvswitch"], "larger than the one inside it"),
        (&["--domain", "4"], "expected SIZE:LINK"),
        (&[], "the machine has 4"),
        (&["--domain", "4:nvswitch", "--sequences", "0"], "each must be at least 1"),
        (&["--domain", "4:nvswitch", "--dtype", "int3"], "--dtype int3"),
    ];
    for (extra, message) in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let out = parlab(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(message), "{extra:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    let unknown_model = parlab(&["advise", "llama-9t", "--device", "a100-80gb", "--prompt", "8", "--new-tokens", "2"]);
    assert_eq!(unknown_model.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown_model.stderr).contains("llama-9t"));
    let unknown_device = parlab(&["advise", "gpt2", "--device", "tpu-v9", "--prompt", "8", "--new-tokens", "2"]);
    let err = String::from_utf8_lossy(&unknown_device.stderr);
    assert_eq!(unknown_device.status.code(), Some(2));
    assert!(err.contains("--device tpu-v9") && err.contains("a100-80gb"), "{err}");
    let no_node_domain = parlab(&[
        "advise",
        "gpt2",
        "--device",
        "a100-80gb",
        "--nodes",
        "2",
        "--devices-per-node",
        "4",
        "--domain",
        "2:nvswitch",
        "--domain",
        "8:infiniband-400g",
        "--prompt",
        "8",
        "--new-tokens",
        "2",
    ]);
    assert_eq!(no_node_domain.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_node_domain.stderr).contains("one domain must be the node"));
}
