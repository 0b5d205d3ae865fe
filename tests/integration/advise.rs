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
use std::path::{Path, PathBuf};
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
    // The refused layout's own prediction is named as its own, not read as the layout offered.
    let refused_row = md.lines().find(|l| l.starts_with("| TP=4 x DP=1 |")).unwrap();
    assert!(refused_row.contains("(TP=4 x DP=1 itself: predicted step "), "{refused_row}");
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
fn a_tensor_group_pays_the_link_of_the_smallest_domain_holding_it_whatever_is_inside() {
    // A domain's link joins every device in it: a ring over a group of 4 runs over the switch
    // that holds all 4, whatever slower link the pairs inside it also have. With the usual
    // nesting (inner links faster) that link is the slowest in the group.
    let inverted = run(&asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["2:pcie-sys", "4:nvswitch"]));
    let switch_only = run(&asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["4:nvswitch"]));
    assert_eq!(step_ms(&inverted, "TP=4 x DP=1"), step_ms(&switch_only, "TP=4 x DP=1"));
    // A pair's group pays the pair's own link: slower over PCIe than over NVSwitch.
    assert!(step_ms(&inverted, "TP=2 x DP=2") > step_ms(&switch_only, "TP=2 x DP=2"));
    let md = render::to_markdown(&inverted);
    assert!(
        md.contains(
            "a ring all-reduce pays the link of the smallest domain holding its whole group (a domain's link joins every device in it"
        ),
        "{md}"
    );
}

#[test]
fn a_tensor_group_across_nodes_still_pays_the_slow_link_inside_each_node_and_is_refused_for_it() {
    // Pairs on NVLink, SYS between the pairs of a node, InfiniBand (faster than SYS) between
    // nodes: a ring of all 8 passes SYS inside each node, so it pays SYS, and a tensor group of 2
    // inside the pairs fits (chapter 1.4: never TP across SYS).
    let a = asked(model("llama-3.1-8b"), "a100-80gb", 2, 4, &["2:nvlink-nv12", "4:pcie-sys", "8:infiniband-400g"]);
    let advice = run(&a);
    assert_eq!(advice.ranked[0].label, "TP=2 x DP=4", "{:?}", labels(&advice));
    for label in ["TP=4 x DP=2", "TP=8 x DP=1"] {
        let refused = advice.rejected.iter().find(|r| r.label == label).unwrap_or_else(|| panic!("{label} refused: {:?}", labels(&advice)));
        assert!(
            matches!(&refused.reason, Rejection::TensorAcrossSlowBoundary { link, between_nodes: false, inside: 2, .. } if link == "pcie-sys"),
            "{label}: {:?}",
            refused.reason
        );
    }
    let tp8 = advice.rejected.iter().find(|r| r.label == "TP=8 x DP=1").unwrap().predicted.as_ref().unwrap().step_s;
    let tp4 = advice.rejected.iter().find(|r| r.label == "TP=4 x DP=2").unwrap().predicted.as_ref().unwrap().step_s;
    assert!(tp8 > tp4, "eight ranks pay SYS on more ring steps than four: {tp8} vs {tp4}");
    // A refusal names a link slower than the faster group's, never the faster group's own: a
    // switch of higher bandwidth but higher latency between nodes is what TP=4 crosses.
    let switch = run(&asked(model("llama-3.1-8b"), "a100-80gb", 2, 2, &["2:nvlink-nv12", "4:nvswitch"]));
    assert!(
        matches!(rejection(&switch, "TP=4 x DP=1"), Rejection::TensorAcrossSlowBoundary { link, inside_link, .. } if link == "nvswitch" && inside_link == "nvlink-nv12"),
        "{:?}",
        rejection(&switch, "TP=4 x DP=1")
    );
}

#[test]
fn a_refusal_for_a_slow_link_offers_a_layout_not_refused_itself_and_links_that_trade_latency_for_bandwidth_are_ranked() {
    // Pairs on NVLink, SYS between pairs, host staging over all 8: TP=8 pays host staging,
    // slower than SYS; TP=4 (inside SYS) is refused too, for crossing SYS where pairs on NVLink
    // fit. TP=8's refusal offers the pairs, not TP=4.
    let nested = Asked {
        prompt: 6144,
        new_tokens: 300,
        ..asked(model("llama-3.1-8b"), "a100-80gb", 1, 8, &["2:nvlink-nv12", "4:pcie-sys", "8:host-staged"])
    };
    let advice = run(&nested);
    for label in ["TP=8 x DP=1", "TP=4 x DP=2"] {
        match rejection(&advice, label) {
            Rejection::TensorAcrossSlowBoundary { instead, inside, inside_link, .. } => {
                assert_eq!((instead.as_str(), *inside, inside_link.as_str()), ("TP=2 x DP=4", 2, "nvlink-nv12"), "{label}");
            }
            other => panic!("{label}: {other:?}"),
        }
    }
    // NVSwitch over all 8 (10 µs, 300 GB/s) against NVLink pairs (5 µs, 250 GB/s): neither is
    // slower whatever the message, so the groups over the switch are ranked by their predictions.
    for domains in [["2:nvlink-nv12", "8:nvswitch"], ["2:nvswitch", "8:nvlink-nv12"]] {
        let traded = run(&Asked {
            objective: "ttft".into(),
            prompt: 6144,
            new_tokens: 300,
            ..asked(model("llama-3.1-8b"), "a100-80gb", 1, 8, &domains)
        });
        for label in ["TP=4 x DP=2", "TP=8 x DP=1"] {
            assert!(
                labels(&traded).contains(&label.to_string()),
                "{domains:?}: {label} ranked, not refused: {:?}",
                traded.rejected.iter().map(|r| (&r.label, &r.reason)).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn a_refusal_that_offers_a_layout_without_a_tensor_group_does_not_place_one_inside_a_domain() {
    // Multi-query attention (one KV head): every tensor layout copies the KV heads, so the
    // layout a slow-boundary refusal offers may be whole replicas, which have no tensor group.
    let dir = tempfile::tempdir().unwrap();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("models/llama-3.1-8b/config.json")).unwrap()).unwrap();
    config["num_key_value_heads"] = 1.into();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    let advice = run(&asked(dir.path().to_string_lossy().into_owned(), "a100-80gb", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"]));
    let offering_replicas: Vec<_> =
        advice.rejected.iter().filter(|r| matches!(&r.reason, Rejection::TensorAcrossSlowBoundary { instead_tensor: 1, .. })).collect();
    assert!(!offering_replicas.is_empty(), "{:?}", advice.rejected.iter().map(|r| (&r.label, &r.reason)).collect::<Vec<_>>());
    let md = render::to_markdown(&advice);
    for r in offering_replicas {
        let row = md.lines().find(|l| l.starts_with(&format!("| {} |", r.label))).unwrap();
        assert!(
            row.contains("fits with no tensor group, and makes no all-reduce") && !row.contains("with its tensor group inside"),
            "{row}"
        );
    }
}

#[test]
fn a_float32_prefill_is_divided_by_the_float32_peak_not_the_16_bit_one() {
    let ttft = |dtype: &str, device: &str| {
        let advice = run(&Asked { dtype: dtype.into(), ..asked(model("llama-3.1-8b"), device, 1, 1, &[]) });
        let md = render::to_markdown(&advice);
        (advice.ranked[0].predicted.ttft_s, advice.ranked[0].predicted.prefill_compute_bound, md)
    };
    let (half, half_bound, _) = ttft("float16", "a100-80gb");
    let (full, full_bound, md) = ttft("float32", "a100-80gb");
    assert!(half_bound && full_bound, "a 4096-token prefill of 8B is bound by arithmetic at either peak");
    // Twice the weight bytes and 312 / 19.5 = 16 times slower arithmetic: the arithmetic decides.
    assert!((full / half - 16.0).abs() < 1.0, "float32 {full} s against float16 {half} s");
    assert!(md.contains("19.5 TFLOP/s float32") && md.contains("the datasheet's float32 peak"), "{md}");
    // A device with no float32 figure says its prefill is predicted from memory only.
    let (_, bound, md) = ttft("float32", "h200-pcie");
    assert!(!bound && md.contains("has no float32 compute figure"), "{md}");
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
    Device { memory_bytes: d.memory_bytes, bandwidth_bps: d.bandwidth_bps() }
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
    let md = render::to_markdown(&advice);
    assert!(md.contains("Expert splits assume even routing") && md.contains("share a device 3 in 7 times"), "{md}");
    let dense = render::to_markdown(&run(&asked(model("llama-3.1-8b"), "a100-80gb", 1, 8, &["8:nvswitch"])));
    assert!(!dense.contains("even routing"), "a dense model has no routing to assume");
}

#[test]
fn an_advice_that_refuses_nothing_says_so_instead_of_an_empty_table() {
    let advice = run(&asked(model("llama-3.1-8b"), "h200-pcie", 1, 4, &["4:pcie-sys"]));
    assert!(advice.rejected.is_empty(), "{:?}", advice.rejected);
    let md = render::to_markdown(&advice);
    assert!(md.contains("## Rejected\n\nNone: every layout of the machine's devices was ranked.\n"), "{md}");
    assert!(!md.contains("| layout | why |"), "{md}");
    let refusing = run(&asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"]));
    assert!(!refusing.rejected.is_empty());
    assert!(render::to_markdown(&refusing).contains("## Rejected\n\n| layout | why |\n|---|---|\n| "));
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
        let m = parlab::advise::rank::with_constant(&req.machine, &flip.constant, x, req.workload.dtype);
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

/// `parlab run SPECS --out OUT` on the store `store`, from the checkout's root; asserts it
/// exits 0 and returns what it printed (stdout, then stderr).
fn run_specs(specs: &[&Path], store: &Path, out: &Path) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_parlab"))
        .arg("run")
        .args(specs)
        .arg("--out")
        .arg(out)
        .env("PARLAB_MANIFESTS", store)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr))
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
    ("/predicted/round_s", "number"),
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
fn a_request_waits_a_round_of_its_replicas_sequences_per_token() {
    let mut a = asked(model("llama-3.1-8b"), "a100-80gb", 1, 8, &["8:nvswitch"]);
    (a.prompt, a.new_tokens) = (512, 128);
    let alone = run(&a);
    a.sequences = 64;
    let busy = run(&a);
    for r in alone.ranked.iter().chain(&busy.ranked) {
        let p = &r.predicted;
        assert!((p.request_s - (p.ttft_s + 127.0 * p.round_s)).abs() <= 1e-12 * p.request_s, "{}: {p:?}", r.label);
    }
    for r in &alone.ranked {
        assert_eq!(r.predicted.round_s, r.predicted.step_s, "{}: one sequence waits only for its own step", r.label);
    }
    // 64 sequences in flight: 8 per replica at DP=8, 16 at TP=2 x DP=4; served in turn, whole
    // replicas give each request the shortest wait per token, whatever one step alone costs.
    let tp2 = busy.ranked.iter().find(|r| r.label == "TP=2 x DP=4").expect("TP=2 x DP=4 ranked");
    assert!(tp2.predicted.round_s > 15.9 * tp2.predicted.step_s, "{:?}", tp2.predicted);
    assert_eq!(labels(&busy)[0], "TP=1 x DP=8", "{:?}", labels(&busy));
    assert_ne!(labels(&alone)[0], "TP=1 x DP=8", "{:?}", labels(&alone));
}

#[test]
fn throughput_counts_each_replicas_own_share_and_every_prefill() {
    let mut a = asked(model("llama-3.1-8b"), "a100-80gb", 1, 4, &["4:nvswitch"]);
    (a.prompt, a.new_tokens, a.objective) = (512, 128, "throughput".into());
    let rate = |sequences: u32| {
        let mut a = a.clone();
        a.sequences = sequences;
        let advice = run(&a);
        let r = advice.ranked.iter().find(|r| r.label == "TP=1 x DP=4").expect("TP=1 x DP=4 ranked").predicted.clone();
        (r, labels(&advice)[0].clone())
    };
    // A fifth sequence puts two on one replica: that replica rounds at two steps, the other
    // three still at one, so the workload's rate cannot fall by the busiest's slowdown.
    let ((four, first4), (five, first5), (eight, _)) = (rate(4), rate(5), rate(8));
    assert!(five.tokens_per_s >= 0.99 * four.tokens_per_s && eight.tokens_per_s >= 0.99 * four.tokens_per_s, "{four:?} {five:?} {eight:?}");
    assert_eq!((first4.as_str(), first5.as_str()), ("TP=1 x DP=4", "TP=1 x DP=4"));
    // Each replica: its sequences' prefills, then 127 rounds; the four replicas at once.
    let one = 128.0 / (four.ttft_s + 127.0 * four.round_s);
    assert!((four.tokens_per_s - 4.0 * one).abs() <= 1e-9 * four.tokens_per_s, "{four:?}");
    // A prefill-only question (one new token) is ranked by its prefills, not the decode rate.
    let mut prefill = a.clone();
    (prefill.prompt, prefill.new_tokens, prefill.sequences) = (4096, 1, 4);
    let advice = run(&prefill);
    for r in &advice.ranked {
        let p = &r.predicted;
        let replicas = r.layout.data.min(4) as f64;
        assert!((p.tokens_per_s - replicas / p.ttft_s).abs() <= 1e-9 * p.tokens_per_s, "{}: {p:?}", r.label);
    }
}

#[test]
fn a_slow_link_refusal_says_where_the_prediction_favours_the_refused_layout() {
    let mut a = asked(model("llama-3.1-8b"), "book-gpu-12gib", 1, 4, &["2:nvlink-nv12", "4:pcie-sys"]);
    (a.prompt, a.new_tokens) = (256, 512);
    let advice = run(&a);
    let Rejection::TensorAcrossSlowBoundary { cost_ratio, instead, .. } = rejection(&advice, "TP=4 x DP=1") else {
        panic!("{:?}", rejection(&advice, "TP=4 x DP=1"))
    };
    let cost = |label: &str| {
        let p = advice
            .ranked
            .iter()
            .map(|r| (&r.label, &r.predicted))
            .chain(advice.rejected.iter().filter_map(|r| Some((&r.label, r.predicted.as_ref()?))));
        p.clone().find(|(l, _)| *l == label).unwrap().1.request_s
    };
    assert!((cost_ratio - cost("TP=4 x DP=1") / cost(instead)).abs() < 1e-12, "{cost_ratio} {instead}");
    assert!(*cost_ratio < 1.0, "the α–β prediction favours TP=4 here: {cost_ratio}");
    let message = render::rejection_message(rejection(&advice, "TP=4 x DP=1"));
    assert!(message.contains("the prediction favours it") && message.contains("refuses it, not the prediction"), "{message}");
}

#[test]
fn a_tensor_group_past_the_kv_heads_is_refused_only_where_one_capped_at_them_does_as_well() {
    // Llama-3.1-8B has 8 KV heads: at TP=16 each device holds whole copies of its heads' cache.
    let advise = |extra: &[&str]| {
        let base = ["advise", "llama-3.1-8b", "--device", "a100-80gb", "--devices-per-node", "16", "--domain", "16:nvswitch"];
        let out = parlab(&[&base[..], &["--prompt", "4096", "--new-tokens", "256", "--json"], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let ranked = |v: &Value, label: &str| v["ranked"].as_array().unwrap().iter().find(|r| r["label"] == label).cloned();
    // One request at a time: the collectives of a ring of 16 cost more than the weights they
    // split, so TP=8 with two replicas is predicted better, and the arithmetic refuses TP=16.
    let latency = advise(&[]);
    let refused = latency["rejected"].as_array().unwrap().iter().find(|r| r["label"] == "TP=16 x DP=1").expect("TP=16 refused").clone();
    let (reason, instead) = (&refused["reason"], ranked(&latency, "TP=8 x DP=2").expect("TP=8 x DP=2 ranked"));
    assert_eq!((reason["kind"].as_str(), reason["instead"].as_str()), (Some("kv_heads_duplicated"), Some("TP=8 x DP=2")), "{refused:#}");
    assert_eq!(reason["kv_bytes_per_device"], refused["predicted"]["kv_bytes_per_device"], "its own cache, as predicted");
    assert_eq!(reason["instead_step_comm_s"], instead["predicted"]["step_comm_s"], "the capped layout's collectives, as ranked");
    let request = |p: &Value| p["request_s"].as_f64().unwrap();
    let costlier = request(&refused["predicted"]) / request(&instead["predicted"]);
    assert!((reason["costlier_by"].as_f64().unwrap() - costlier).abs() < 1e-9 && costlier > 1.5, "{refused:#}");
    assert!(refused["message"].as_str().unwrap().contains("beyond the 8 KV heads"), "{refused:#}");
    // Time to first token of 64 prompts: the prefill's arithmetic over 16 devices wins what the
    // duplicated cache costs, so TP=16 is ranked (first), its cache per device shown.
    let ttft = advise(&["--objective", "ttft", "--sequences", "64"]);
    let tp16 = ranked(&ttft, "TP=16 x DP=1").expect("TP=16 ranked for time to first token");
    assert_eq!(tp16["rank"], 1, "{ttft:#}");
    assert!(ttft["rejected"].as_array().unwrap().iter().all(|r| r["reason"]["kind"] != "kv_heads_duplicated"), "{ttft:#}");
    let tp8 = ranked(&ttft, "TP=8 x DP=2").unwrap();
    assert!(tp16["predicted"]["kv_bytes_per_device"].as_u64() > tp8["predicted"]["kv_bytes_per_device"].as_u64(), "its cache is copied");
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let base = ["advise", "llama-3.1-8b", "--device", "a100-80gb", "--devices-per-node", "4", "--prompt", "128", "--new-tokens", "8"];
    let cases: [(&[&str], &str); 10] = [
        (&["--domain", "4:nvswitch", "--objective", "speed"], "--objective speed"),
        (&["--domain", "4:warp-drive"], "warp-drive"),
        (&["--domain", "3:nvswitch"], "the domains reach 3 devices but the machine has 4"),
        (&["--domain", "2:nvswitch"], "the last --domain must join all 4"),
        (&["--domain", "4:nvswitch", "--domain", "2:nvswitch"], "larger than the one inside it"),
        (&["--domain", "4"], "expected SIZE:LINK"),
        (&["--domain", "4:"], "--domain 4:: expected SIZE:LINK"),
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
    // The H200 PCIe has no compute figure in models/devices.yaml: ranked by time to first
    // token, layouts would be ranked by their weight reads alone.
    let no_peak = parlab(&[
        "advise",
        "llama-3.1-8b",
        "--device",
        "h200-pcie",
        "--devices-per-node",
        "4",
        "--domain",
        "4:nvswitch",
        "--prompt",
        "8192",
        "--new-tokens",
        "64",
        "--objective",
        "ttft",
    ]);
    let err = String::from_utf8_lossy(&no_peak.stderr);
    assert_eq!(no_peak.status.code(), Some(2), "{err}");
    assert!(err.contains("--objective ttft: device h200-pcie has no float16 compute figure") && no_peak.stdout.is_empty(), "{err}");
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

/// The all-reduce fit (α per step in µs, β in GB/s) of the world-`world` `link` fixture manifest.
fn fixture_fit(link: &str, world: u64) -> (String, f64, f64) {
    let dir = root().join("tests/fixtures/manifests");
    for entry in std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")) {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
        let fits = &v["summary"]["collectives"]["fits"];
        if v["kind"] == "collectives" && v["status"] == "ok" && v["plan"]["link"] == link && v["layout"]["world"] == world {
            let fit = fits.as_array().unwrap().iter().find(|f| f["op"] == "all-reduce").unwrap();
            let run = v["run_id"].as_str().unwrap().to_string();
            return (run, fit["alpha_per_step_s"].as_f64().unwrap() * 1e6, fit["beta_Bps"].as_f64().unwrap() / 1e9);
        }
    }
    panic!("no {link} world-{world} collectives fixture")
}

#[test]
fn links_a_store_measured_are_offered_to_domains_with_their_runs_named() {
    let store = root().join("tests/fixtures/manifests");
    let args = |domains: &[&str]| {
        let mut a = vec!["advise", "gpt2", "--device", "a100-80gb", "--devices-per-node", "4", "--prompt", "512", "--new-tokens", "64"];
        a.extend_from_slice(domains);
        a.extend_from_slice(&["--links-from", store.to_str().unwrap(), "--json"]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let argv = args(&["--domain", "2:mpi-shm-measured", "--domain", "4:mpi-tcp-measured"]);
    let out = parlab(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The store holds mpi-shm at 2 and 4 ranks: the 2-rank fit is taken, as for mpi-tcp.
    for (i, link) in ["mpi-shm", "mpi-tcp"].into_iter().enumerate() {
        let (run, alpha_us, beta_gbps) = fixture_fit(link, 2);
        let d = &v["machine"]["domains"][i];
        assert_eq!(d["link"], format!("{link}-measured"));
        assert!((d["latency_s"].as_f64().unwrap() * 1e6 - alpha_us).abs() < 1e-9 * alpha_us.max(1.0), "{d}");
        assert!((d["bandwidth_Bps"].as_f64().unwrap() / 1e9 - beta_gbps).abs() < 1e-9 * beta_gbps, "{d}");
        let provenance: Vec<&str> = v["provenance"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        let line = format!(
            "link {link}-measured: bandwidth {} GB/s, measured: from run {run} (β of the 2-rank all-reduce fit",
            parlab::units::sig4(beta_gbps)
        );
        assert!(provenance.iter().any(|p| p.starts_with(&line)), "{line} not in {provenance:#?}");
    }
    // A measured name that the store does not hold is refused with the names it does.
    let argv = args(&["--domain", "2:nccl-measured", "--domain", "4:mpi-tcp-measured"]);
    let out = parlab(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`nccl-measured`: neither in models/links.yaml (known: gloo-loopback,"), "{err}");
    assert!(err.contains("nor measured by --links-from (mpi-shm-measured, mpi-tcp-measured)"), "{err}");
    assert!(err.contains("a measured link needs that folder to hold an ok collectives run over it"), "{err}");
    // Without --links-from, the catalogue's links alone, and what would offer a measured one.
    let out = parlab(&["advise", "gpt2", "--device", "a100-80gb", "--prompt", "1", "--new-tokens", "1", "--domain", "2:nccl-measured"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`nccl-measured`: not in models/links.yaml (known: gloo-loopback,") && !err.contains("mpi-shm-measured"), "{err}");
    assert!(err.contains("a measured link needs --links-from DIR holding an ok collectives run over it"), "{err}");
    // A store without a collectives run says so, and adds nothing.
    let empty = tempfile::tempdir().unwrap();
    let mut argv = args(&["--domain", "4:mpi-tcp-measured"]);
    let at = argv.iter().position(|a| a == "--links-from").unwrap() + 1;
    argv[at] = empty.path().to_string_lossy().into_owned();
    let out = parlab(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no ok collectives run with an all-reduce fit of 2 ranks or more; no measured link added"), "{err}");
    let named = "not in models/links.yaml (known: gloo-loopback,";
    assert!(err.contains(named) && err.contains(&format!(", and --links-from {} measured no usable link; ", argv[at])), "{err}");
    assert!(err.contains("a measured link needs that folder to hold an ok collectives run over it") && !err.contains("DIR"), "{err}");
    // A store that is not a folder.
    let out = parlab(&["advise", "gpt2", "--device", "a100-80gb", "--prompt", "1", "--new-tokens", "1", "--links-from", "README.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--links-from README.md: not a folder"), "{err}");
}

#[test]
fn a_link_another_tool_measured_is_offered_as_imported_naming_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let json = root().join("tests/data/import/nccl_all_reduce_8gpu.json");
    let out = parlab(&["import", "nccl-tests", json.to_str().unwrap(), "--manifests", store]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = parlab(&[
        "advise",
        "llama-3.1-8b",
        "--device",
        "a100-80gb",
        "--devices-per-node",
        "8",
        "--domain",
        "8:nccl-imported",
        "--prompt",
        "2048",
        "--new-tokens",
        "128",
        "--links-from",
        store,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("link nccl-imported: bandwidth") && text.contains("reported by all_reduce_perf (nccl-tests)"), "{text}");
    assert!(text.contains("of the 8-rank all-reduce fit"), "{text}");
}

#[test]
fn advise_specs_answer_in_the_register_and_their_expected_answers_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let (store, out) = (dir.path().join("manifests"), dir.path().join("reports"));
    // The suite's three questions, and one whose expectation is wrong: the chapter's exercise
    // with TP=4 expected first.
    let wrong = dir.path().join("wrong.yaml");
    let exercise = std::fs::read_to_string(root().join("experiments/advice-chapter-1-4.yaml")).unwrap();
    let wrong_text = exercise
        .replace("name: chapter-1-4-design-exercise", "name: expects-tp4")
        .replace("leader: TP=2 x DP=2", "leader: TP=4 x DP=1")
        .replace("rejected: [TP=4 x DP=1]", "rejected: [TP=2 x DP=2]");
    std::fs::write(&wrong, wrong_text).unwrap();
    let specs = ["advice-chapter-1-4.yaml", "advice-two-nodes.yaml", "advice-kv-head-cap.yaml"].map(|f| root().join("experiments").join(f));
    let console = run_specs(&[&specs[0], &specs[1], &specs[2], &wrong], &store, &out);
    assert!(console.contains("chapter-1-4-design-exercise #0 advise: ok"), "a run of arithmetic is labelled by its kind:\n{console}");
    let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
    for id in ["chapter-1-4-design-exercise", "two-nodes-of-four", "kv-head-cap-sixteen-devices"] {
        assert!(md.contains(&format!("### HOLDS: advice-{id}")), "advice-{id} does not hold:\n{md}");
        assert!(md.contains(&format!("#### Advice `{id}`: the layouts to benchmark")), "{id}'s table");
    }
    assert!(md.contains("### FAILS: advice-expects-tp4"), "{md}");
    assert!(
        md.contains("it differs: TP=2 x DP=2 ranks first, TP=4 x DP=1 is not ranked (refused: its tensor group of 4 crosses pcie-sys")
            && md.contains("TP=2 x DP=2 is not refused (it ranks 1)"),
        "the failing finding names what differs:\n{md}"
    );
    assert!(md.contains("| 1 | TP=2 x DP=2 | 5.93 ms | 167 ms | 1.94 s | 155 |"), "the same ranking as `parlab advise` prints");
    assert!(md.contains("0 measured, 4 modelled, 0 failed, 0 not run"), "advice is counted as modelled");
    // The manifest keeps the question (the workload) and the answer (the summary).
    let manifest = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap())
        .find(|v| v["experiment"] == "kv-head-cap-sixteen-devices")
        .unwrap();
    assert_eq!(manifest["plan"]["workload"]["kind"], "advise");
    assert_eq!(manifest["plan"]["workload"]["params"]["expect"]["rejected"][0], "TP=16 x DP=1");
    let refused = manifest["summary"]["advice"]["rejected"].as_array().unwrap();
    assert!(
        refused.iter().any(|r| r["label"] == "TP=16 x DP=1" && r["why"].as_str().unwrap().contains("beyond the 8 KV heads")),
        "{refused:?}"
    );
}

#[test]
fn a_context_past_64_bits_or_the_models_window_is_refused() {
    for (prompt, new_tokens) in [("18446744073709551615", "2"), ("16777216", "1"), ("4294967295", "4294967295")] {
        let out = parlab(&["advise", "gpt2", "--device", "a100-80gb", "--prompt", prompt, "--new-tokens", new_tokens]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{prompt}: {err}");
        assert!(err.contains(&format!("--prompt {prompt} --new-tokens {new_tokens}")) && err.contains("at most 16777216 tokens"), "{err}");
        assert!(out.stdout.is_empty());
    }
    let past_window = parlab(&["advise", "gpt2", "--device", "a100-80gb", "--prompt", "1020", "--new-tokens", "10"]);
    let err = String::from_utf8_lossy(&past_window.stderr);
    assert_eq!(past_window.status.code(), Some(2), "{err}");
    assert!(err.contains("--prompt 1020 --new-tokens 10: a request of 1030 tokens, but gpt2 holds 1024 positions"), "{err}");
    assert!(err.contains("(n_positions or max_position_embeddings in its config.json)"), "{err}");
    // A config that names no position table: transformers' default for its type, said so.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(root().join("models/llama-3.1-8b/config.json")).unwrap()).unwrap();
    cfg.as_object_mut().unwrap().remove("max_position_embeddings");
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    let folder = dir.path().to_str().unwrap();
    let defaulted = parlab(&["advise", folder, "--device", "a100-80gb", "--prompt", "3000", "--new-tokens", "100"]);
    let err = String::from_utf8_lossy(&defaulted.stderr);
    assert_eq!(defaulted.status.code(), Some(2), "{err}");
    assert!(err.contains("holds 2048 positions (transformers' default for model_type llama: its config.json names none)"), "{err}");
}

#[test]
fn sequences_past_a_specs_cap_are_refused_and_the_cap_is_answered_in_full() {
    // `--sequences` has the cap of a spec's `sequences:` (65,536), refused as other
    // out-of-range advise flags are: exit 2, the flag and its value named, nothing printed.
    let advise = |sequences: &str| {
        let args = ["--prompt", "100000", "--new-tokens", "1000", "--sequences", sequences, "--json"];
        parlab(&[&["advise", "llama-3.1-8b", "--device", "a100-80gb"][..], &args[..]].concat())
    };
    for sequences in ["65537", "4294967295"] {
        let out = advise(sequences);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sequences}: {err}");
        assert!(
            err.starts_with(&format!("parlab advise: workload: --sequences {sequences}: must be at most 65536 (allowed: 1 to 65536")),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    // 131,072 cache bytes per token × 101,000 tokens × 65,536 sequences, exactly (no saturation).
    let out = advise("65536");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let only = &v["rejected"][0];
    assert_eq!((only["label"].as_str(), only["reason"]["kind"].as_str()), (Some("TP=1 x DP=1"), Some("does_not_fit")), "{only}");
    assert_eq!(only["reason"]["kv_bytes"].as_u64(), Some(131_072 * 101_000 * 65_536), "{only}");
}

#[test]
fn an_advise_spec_whose_model_has_no_config_names_the_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("advice.yaml");
    let text = "name: no-config\nkind: advise\nmodel: models\nmachine:\n  device: a100-80gb\nprompt_tokens: 64\nnew_tokens: 8\n";
    std::fs::write(&spec, text).unwrap();
    let out = parlab(&["validate", spec.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(":3:1: model: models/models: no such model folder") && !err.contains("model: model:"), "{err}");
}

#[test]
fn an_advise_spec_may_ask_for_one_new_token_as_parlab_advise_does() {
    // A decode run needs a second token to time a step; an advice times nothing, and one new
    // token asks for the prefill alone (`parlab advise --new-tokens 1`).
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("advice.yaml");
    let text =
        "name: first-token\nkind: advise\nmodel: gpt2\nmachine:\n  device: a100-80gb\nprompt_tokens: 64\nnew_tokens: 1\nobjective: ttft\n";
    std::fs::write(&spec, text).unwrap();
    let out = parlab(&["validate", spec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_advise_or_model_run_is_another_question_once_its_models_config_changes() {
    // Arithmetic on a model's shape: a config.json edited since a run, in a folder outside
    // models/ (whose configs the catalogue's digest covers), must not leave the old answer
    // standing as "already measured".
    let advise = "kind: advise\nmachine:\n  device: a100-80gb\nprompt_tokens: 64\nnew_tokens: 8\n";
    let model = "kind: model\ndevices: [a100-80gb]\nlink: [nvswitch]\nstrategy: [tensor]\nworld: [2]\ncontext: 1024\n";
    for question in [advise, model] {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tiny");
        std::fs::create_dir(&folder).unwrap();
        let config = std::fs::read_to_string(root().join("models/gpt2/config.json")).unwrap();
        std::fs::write(folder.join("config.json"), &config).unwrap();
        let spec = dir.path().join("arithmetic.yaml");
        std::fs::write(&spec, format!("name: shaped\nmodel: {}\n{question}", folder.display())).unwrap();
        let run_id = || {
            let out = parlab(&["plan", "--json", spec.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            v[0]["run_id"].as_str().unwrap().to_string()
        };
        let before = run_id();
        assert_eq!(before, run_id(), "the same question has the same identity: {question}");
        std::fs::write(folder.join("config.json"), config.replace("\"n_layer\": 12", "\"n_layer\": 24")).unwrap();
        assert_ne!(before, run_id(), "a model of 24 layers asks another question than one of 12: {question}");
    }
}

#[test]
fn a_renamed_advise_experiment_is_tabled_under_its_new_name() {
    // The cached manifest takes the new name (see "Identities"); its tables kept the old one,
    // so the register showed `Advice `first`` beside the finding `advice-renamed`.
    let dir = tempfile::tempdir().unwrap();
    let (store, out, spec) = (dir.path().join("manifests"), dir.path().join("reports"), dir.path().join("advice.yaml"));
    let text = "kind: advise\nmodel: gpt2\nmachine:\n  device: a100-80gb\n  devices_per_node: 2\n  domains: [2:nvlink-nv12]\n\
                prompt_tokens: 64\nnew_tokens: 8\nexpect:\n  leader: TP=2 x DP=1\n";
    for name in ["first", "renamed"] {
        std::fs::write(&spec, format!("name: {name}\n{text}")).unwrap();
        run_specs(&[&spec], &store, &out);
    }
    let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
    assert!(md.contains("advice-renamed") && md.contains("#### Advice `renamed`: the layouts to benchmark"), "{md}");
    assert!(md.contains("#### Advice `renamed`: layouts refused") && !md.contains("`first`"), "{md}");
    assert!(out.join("tables/advice-renamed.csv").is_file() && !out.join("tables/advice-first.csv").exists());
}

#[test]
fn a_spec_naming_catalogue_entries_says_when_the_catalogue_cannot_be_read() {
    // With models/links.yaml unreadable (malformed, or run from another folder), a spec's
    // device and links were each "unknown value `a100-80gb`; expected one of " and nothing
    // after it: the catalogue's own problem was never said.
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    std::fs::copy(root().join("models/devices.yaml"), models.join("devices.yaml")).unwrap();
    std::fs::write(models.join("links.yaml"), "links: [oops\n").unwrap();
    let gpt2 = model("gpt2");
    let advise = format!(
        "name: a\nkind: advise\nmodel: {gpt2}\nmachine:\n  device: a100-80gb\n  devices_per_node: 2\n  domains: [2:nvswitch]\nprompt_tokens: 8\nnew_tokens: 2\n"
    );
    let modelled = format!("name: m\nkind: model\nmodel: {gpt2}\ndevices: [a100-80gb]\nlink: [nvswitch]\nstrategy: [tensor]\nworld: [2]\n");
    for (file, text, keys) in
        [("a.yaml", advise, &["machine.device", "machine.domains"][..]), ("m.yaml", modelled, &["devices", "link"][..])]
    {
        let spec = dir.path().join(file);
        std::fs::write(&spec, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_parlab"))
            .args(["validate", spec.to_str().unwrap()])
            .env("PARLAB_MODELS", &models)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(!err.contains("expected one of \n") && !err.trim_end().ends_with("expected one of"), "{file}: {err}");
        for key in keys {
            let line = err.lines().find(|l| l.contains(&format!(": {key}: "))).unwrap_or_else(|| panic!("{file}: no {key} in {err}"));
            assert!(line.contains("links.yaml") && line.contains("the catalogue"), "{file}: {line}");
        }
    }
}

#[test]
fn an_advise_or_model_run_of_a_model_folder_is_the_same_question_wherever_the_folder_lies() {
    // A folder model's identity is its config.json (as a decode run's is its config and
    // weights, not its folder); the absolute path of the folder was hashed too, so the same
    // spec and model in another checkout were another run.
    let advise = "kind: advise\nmachine:\n  device: a100-80gb\nprompt_tokens: 64\nnew_tokens: 8\n";
    let model = "kind: model\ndevices: [a100-80gb]\nlink: [nvswitch]\nstrategy: [tensor]\nworld: [2]\ncontext: 1024\n";
    let config = std::fs::read_to_string(root().join("models/gpt2/config.json")).unwrap();
    let run_id = |question: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("specs")).unwrap();
        std::fs::create_dir_all(dir.path().join("tiny")).unwrap();
        std::fs::write(dir.path().join("tiny/config.json"), &config).unwrap();
        let spec = dir.path().join("specs/arithmetic.yaml");
        std::fs::write(&spec, format!("name: shaped\nmodel: ../tiny\n{question}")).unwrap();
        let out = parlab(&["plan", "--json", spec.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["run_id"].as_str().unwrap().to_string()
    };
    for question in [advise, model] {
        assert_eq!(run_id(question), run_id(question), "one question in two folders: {question}");
    }
}

#[test]
fn an_advice_finding_names_its_run_and_gives_no_rank_to_a_layout_not_ranked() {
    // A finding of `expect.rejected` alone said "runs: none" though it rests on the advise run,
    // and a leader the advice refused was given "rank of TP=4 x DP=1: 0", a rank above the first.
    let dir = tempfile::tempdir().unwrap();
    let (store, out) = (dir.path().join("manifests"), dir.path().join("reports"));
    let exercise = std::fs::read_to_string(root().join("experiments/advice-chapter-1-4.yaml")).unwrap();
    let refused_leader =
        exercise.replace("name: chapter-1-4-design-exercise", "name: expects-tp4").replace("leader: TP=2 x DP=2", "leader: TP=4 x DP=1");
    let refused_leader = refused_leader.replace("  rejected: [TP=4 x DP=1]\n", "").replace("  rejected: [TP=4 x DP=1]", "");
    std::fs::write(dir.path().join("tp4.yaml"), refused_leader).unwrap();
    run_specs(&[&root().join("experiments/advice-kv-head-cap.yaml"), &dir.path().join("tp4.yaml")], &store, &out);
    let findings: Value = serde_json::from_str(&std::fs::read_to_string(out.join("findings.json")).unwrap()).unwrap();
    let finding = |id: &str| {
        let all = findings["findings"].as_array().or(findings.as_array()).unwrap().clone();
        all.into_iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("no {id}"))
    };
    let cap = finding("advice-kv-head-cap-sixteen-devices");
    assert_eq!(cap["verdict"], "HOLDS", "{cap:#}");
    assert_eq!(cap["test"]["runs"].as_array().map(Vec::len), Some(1), "the finding names its run: {cap:#}");
    let tp4 = finding("advice-expects-tp4");
    assert_eq!(tp4["verdict"], "FAILS", "{tp4:#}");
    assert_eq!(tp4["test"]["runs"].as_array().map(Vec::len), Some(1), "{tp4:#}");
    assert!(tp4["numbers"].as_array().unwrap().iter().all(|n| n["value"] != 0.0), "no rank 0: {tp4:#}");
}

#[test]
fn no_baseline_says_why_whole_replicas_were_refused() {
    // Whole replicas refused for their KV cache (24 sequences of 101,000 tokens) were
    // reported as "the model does not fit one device", of a 15 GiB model on 80 GiB devices.
    let args = ["--devices-per-node", "4", "--domain", "4:nvswitch", "--prompt", "100000", "--new-tokens", "1000", "--sequences", "24"];
    let out = parlab(&[&["advise", "llama-3.1-8b", "--device", "a100-80gb"][..], &args[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("the model does not fit one device"), "{text}");
    assert!(
        text.contains("No baseline of whole replicas: TP=1 x DP=4 does not fit: 15.0 GiB of weights and 74.0 GiB of KV cache per device"),
        "{text}"
    );
}

#[allow(dead_code)]
mod build_script {
    include!("../../build.rs");

    /// Whether the measuring-code digest (the run cache's test of a cached answer) reads `path`.
    pub fn measures(path: &str) -> bool {
        MEASURING.contains(&path)
    }
}

#[test]
fn an_advise_run_is_answered_again_once_the_advice_code_changes() {
    // The run cache keeps an ok manifest made by this build's measuring code; harness/advise/
    // (the layouts, refusals, predictions and ranking an advise run's summary holds) was not in
    // that digest, so a changed rule left the old answer, and its finding, standing as fresh.
    for code in ["harness/advise", "harness/costmodel"] {
        assert!(build_script::measures(code), "{code} decides what an advise run answers");
    }
}

#[test]
fn a_store_whose_fits_cannot_make_a_link_says_which_run_and_why() {
    // A collectives run whose all-reduce fit has a negative latency (a noisy intercept) or no
    // bandwidth gives no link, as documented; the warning said the store had no such run at
    // all, and the refusal of `--domain 2:mpi-shm-measured` asked for the run it holds.
    let dir = tempfile::tempdir().unwrap();
    let name = "88732e52bba7e6caa7be6b3260d9edda9b9796cedde2083e30d2cce3d61a26f2.json";
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(root().join("tests/fixtures/manifests").join(name)).unwrap()).unwrap();
    for fit in v["summary"]["collectives"]["fits"].as_array_mut().unwrap() {
        fit["alpha_per_step_s"] = serde_json::json!(-2e-6);
    }
    std::fs::write(dir.path().join(name), serde_json::to_string(&v).unwrap()).unwrap();
    let out = parlab(&[
        "advise",
        "gpt2",
        "--device",
        "a100-80gb",
        "--devices-per-node",
        "2",
        "--domain",
        "2:mpi-shm-measured",
        "--prompt",
        "64",
        "--new-tokens",
        "8",
        "--links-from",
        dir.path().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("no ok collectives run with an all-reduce fit"), "the store has one: {err}");
    assert!(err.contains("88732e52bba7") && err.contains("mpi-shm") && err.contains("negative latency"), "{err}");
}

#[test]
fn two_advise_experiments_of_one_question_each_get_their_finding() {
    // Two experiments of the same content run once and are both named (see "Identities"); the
    // finding was made for the manifest's one experiment name, the other's silently missing.
    let dir = tempfile::tempdir().unwrap();
    let (store, out) = (dir.path().join("manifests"), dir.path().join("reports"));
    let exercise = std::fs::read_to_string(root().join("experiments/advice-chapter-1-4.yaml")).unwrap();
    for name in ["first", "second"] {
        let text = exercise.replace("name: chapter-1-4-design-exercise", &format!("name: {name}"));
        std::fs::write(dir.path().join(format!("{name}.yaml")), text).unwrap();
    }
    run_specs(&[&dir.path().join("first.yaml"), &dir.path().join("second.yaml")], &store, &out);
    let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
    for name in ["first", "second"] {
        assert!(md.contains(&format!("### HOLDS: advice-{name}")), "advice-{name}:\n{md}");
    }
}

#[test]
fn a_folder_model_is_named_alike_in_the_register_wherever_its_spec_lies() {
    // The same specs and model folder in two places: the register names the folder by its path
    // from the spec (`./tiny`), so the two registers say the same, not each its absolute path.
    let advise = "name: shaped-advice\nkind: advise\nmodel: ./tiny\nmachine:\n  device: a100-80gb\n  devices_per_node: 2\n  domains: [2:nvlink-nv12]\nprompt_tokens: 64\nnew_tokens: 8\n";
    let model = "name: shaped-model\nkind: model\nmodel: ./tiny\ndevices: [a100-80gb]\nlink: [nvswitch]\nstrategy: [tensor]\nworld: [2]\ncontext: 1024\n";
    let config = std::fs::read_to_string(root().join("models/gpt2/config.json")).unwrap();
    let register = |dir: &Path| {
        let specs = dir.join("some/checkout/specs");
        std::fs::create_dir_all(specs.join("tiny")).unwrap();
        std::fs::write(specs.join("tiny/config.json"), &config).unwrap();
        std::fs::write(specs.join("advice.yaml"), advise).unwrap();
        std::fs::write(specs.join("model.yaml"), model).unwrap();
        let (store, out) = (dir.join("manifests"), dir.join("reports"));
        run_specs(&[&specs], &store, &out);
        let md = std::fs::read_to_string(out.join("evidence.md")).unwrap();
        assert!(!md.contains(&dir.display().to_string()), "the register names where the checkout lies:\n{md}");
        for line in ["advice for ./tiny on 1 node(s)", "models ./tiny; strategies tensor", "model ./tiny: shape from ./tiny/config.json"] {
            assert!(md.contains(line), "{line}:\n{md}");
        }
        assert!(md.contains("| ./tiny | gpt2 | 124,439,808 |"), "the model tables' rows:\n{md}");
        // Everything naming the model, table rows and provenance included (the header's
        // timestamps differ run to run and are left out).
        md.lines().filter(|l| l.contains("tiny")).map(str::to_string).collect::<Vec<_>>()
    };
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (register(one.path()), register(two.path()));
    assert!(a.len() >= 5, "{a:?}");
    assert_eq!(a, b);
}
