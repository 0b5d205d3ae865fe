//! Nightly comparison: verdicts from raw samples (Mann–Whitney U, power guard, minimum effect,
//! Benjamini–Hochberg), summary medians where samples are missing, new failures, changed
//! answers and machines, bandwidth normalisation, and the JUnit, markdown and JSON outputs.

use parlab::collect::frames::write_results;
use parlab::manifest::machine::Fingerprint;
use parlab::manifest::{Manifest, Status};
use parlab::nightly::samples::FigureSamples;
use parlab::nightly::{compare, Finding, Night, Policy, Verdict};
use parlab::rank::records::Record;
use parlab::spec::load_suite;
use parlab::spec::Kind;
use polars::prelude::*;
use std::path::{Path, PathBuf};

fn decode_manifest(step_s: f64, tokens: Option<&[u32]>) -> Manifest {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let plan = load_suite(&[PathBuf::from("tests/specs/good/matrix.yaml")]).unwrap().remove(1);
    let mut m = Manifest::for_plan(&plan, Fingerprint::default(), "2026-12-01T00:00:00Z");
    m.kind = Kind::Decode;
    m.finished_at = "2026-12-01T00:01:00Z".into();
    m.summary = Some(crate::synth::decode_summary(step_s, 1.0 / step_s));
    m.answer = tokens.map(|t| crate::synth::answer(t.to_vec(), 9.2e-5, 0.31));
    m
}

/// A deterministic generator (splitmix64) of log-normal samples around a median.
struct Draw(u64);

impl Draw {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` samples of median `median` and log-spread `sigma` (Box–Muller).
    fn lognormal(&mut self, n: usize, median: f64, sigma: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let (u, v) = (self.uniform().max(1e-300), self.uniform());
                median * (sigma * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()).exp()
            })
            .collect()
    }
}

/// A night of one decode manifest whose step and rate samples are `steps`.
fn night_of(m: &Manifest, steps: &[f64]) -> Night {
    let mut samples = FigureSamples::new();
    samples.insert("decode step median".into(), steps.to_vec());
    samples.insert("tokens per second median".into(), steps.iter().map(|s| 1.0 / s).collect());
    let mut night = Night::new(vec![m.clone()]);
    night.samples.insert(m.run_id.clone(), samples);
    night
}

fn step_verdict(before: &Night, after: &Night) -> parlab::nightly::FigureVerdict {
    let c = compare(before, after, &Policy::default());
    c.verdicts.into_iter().find(|v| v.figure == "decode step median").expect("a decode step verdict")
}

#[test]
fn a_twenty_percent_shift_is_regressed_with_thirty_samples_and_insufficient_with_three() {
    let m = decode_manifest(0.020, Some(&[1, 2, 3]));
    let mut draw = Draw(7);
    let (base, slow) = (draw.lognormal(30, 0.020, 0.1), draw.lognormal(30, 0.024, 0.1));
    let v = step_verdict(&night_of(&m, &base), &night_of(&m, &slow));
    assert_eq!(v.verdict, Verdict::Regressed, "{v:?}");
    assert!(v.p.unwrap() < 1e-4 && v.q.unwrap() < 0.05 && (v.effect - 0.2).abs() < 0.08, "{v:?}");
    assert_eq!((v.n_before, v.n_after), (30, 30));
    let rate = compare(&night_of(&m, &base), &night_of(&m, &slow), &Policy::default());
    assert!(rate
        .findings
        .iter()
        .any(|f| matches!(f, Finding::Regressed { figure, p: Some(_), .. } if figure == "tokens per second median")));
    let v = step_verdict(&night_of(&m, &base[..3]), &night_of(&m, &slow[..3]));
    assert_eq!(v.verdict, Verdict::InsufficientEvidence, "{v:?}");
    assert!(v.method.contains("smallest reachable p (0.100)"), "{}", v.method);
    let v = step_verdict(&night_of(&m, &slow), &night_of(&m, &base));
    assert_eq!(v.verdict, Verdict::Improved, "the same shift the other way: {v:?}");
    let small: Vec<f64> = base.iter().map(|s| s * 1.05).collect();
    let exact: Vec<f64> = base.iter().map(|s| s * 1.0).collect();
    assert_eq!(step_verdict(&night_of(&m, &base), &night_of(&m, &small)).verdict, Verdict::NoChange, "5% is below the minimum effect");
    assert_eq!(step_verdict(&night_of(&m, &base), &night_of(&m, &exact)).verdict, Verdict::NoChange);
}

/// One manifest with `figures` all-reduce sizes, each figure's samples drawn from one distribution.
fn many_figures(m: &Manifest, figures: usize, draw: &mut Draw) -> Night {
    let mut m = m.clone();
    m.summary = Some(crate::synth::allreduce_summary(1..=figures as u64, 1e-4));
    let samples: FigureSamples = (1..=figures).map(|i| (format!("all-reduce {i} B median"), draw.lognormal(30, 1e-4, 0.3))).collect();
    let mut night = Night::new(vec![m.clone()]);
    night.samples.insert(m.run_id.clone(), samples);
    night
}

#[test]
fn two_hundred_figures_from_one_distribution_stay_within_what_fdr_allows() {
    let m = decode_manifest(0.020, Some(&[1, 2, 3]));
    let (mut draw, nights) = (Draw(2026), 20);
    let (mut flagged_nights, mut false_regressed, mut uncorrected) = (0, 0, 0);
    for _ in 0..nights {
        let (before, after) = (many_figures(&m, 200, &mut draw), many_figures(&m, 200, &mut draw));
        let c = compare(&before, &after, &Policy::default());
        assert_eq!(c.verdicts.len(), 200);
        let regressed = c.verdicts.iter().filter(|v| v.verdict == Verdict::Regressed).count();
        false_regressed += regressed;
        flagged_nights += usize::from(regressed > 0);
        uncorrected += c.verdicts.iter().filter(|v| v.p.unwrap() < 0.05 && v.worse_by >= 0.10).count();
    }
    println!("{nights} nights x 200 null figures: {flagged_nights} nights flagged, {false_regressed} false REGRESSED; uncorrected p < 0.05 and >= 10% worse: {uncorrected}");
    // Under the global null BH at 5% flags any figure on at most 5% of nights (1 of 20 expected).
    assert!(flagged_nights <= 3, "{flagged_nights} of {nights} nights flagged ({false_regressed} figures)");
    // Without the correction the same draws would cry wolf every night.
    assert!(uncorrected > 5 * nights, "uncorrected p < 0.05 would flag {uncorrected}");
}

#[test]
fn an_answer_change_is_always_a_finding() {
    let before = decode_manifest(0.020, Some(&[1, 2, 3]));
    let mut draw = Draw(11);
    let base = draw.lognormal(30, 0.020, 0.1);
    let mut other = decode_manifest(0.020, Some(&[1, 2, 4]));
    for (steps, machine) in [
        (base.clone(), Fingerprint::default()),
        (base[..2].to_vec(), Fingerprint::default()),
        (draw.lognormal(30, 0.030, 0.1), Fingerprint { cores: 64, ..Default::default() }),
    ] {
        other.machine = machine;
        let c = compare(&night_of(&before, &base), &night_of(&other, &steps), &Policy::default());
        assert!(c.findings.iter().any(|f| matches!(f, Finding::AnswerChanged { .. })), "{:?}", c.findings);
    }
    let changed = decode_manifest(0.020, Some(&[1, 2, 4]));
    let findings = compare(&Night::new(vec![before.clone()]), &Night::new(vec![changed]), &Policy::default()).findings;
    assert!(matches!(findings[..], [Finding::AnswerChanged { .. }]), "{findings:?}");
    let mut failed = decode_manifest(0.020, None);
    failed.status = Status::Failed;
    failed.reason = Some("rank 1 killed by signal 9".into());
    match &compare(&Night::new(vec![before]), &Night::new(vec![failed]), &Policy::default()).findings[..] {
        [Finding::NowFailing { reason, .. }] => assert_eq!(reason, "rank 1 killed by signal 9"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn without_samples_the_summary_medians_are_held_to_the_tolerance() {
    let before = decode_manifest(0.020, Some(&[1, 2, 3]));
    let noisy = decode_manifest(0.022, Some(&[1, 2, 3]));
    let slow = decode_manifest(0.030, Some(&[1, 2, 3]));
    let policy = Policy::default();
    assert!(compare(&Night::new(vec![before.clone()]), &Night::new(vec![noisy]), &policy).findings.is_empty());
    let c = compare(&Night::new(vec![before]), &Night::new(vec![slow]), &policy);
    let figures: Vec<String> = c
        .findings
        .iter()
        .map(|f| match f {
            Finding::Regressed { figure, worse_by, p: None, .. } => format!("{figure} {worse_by:.2}"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(figures, vec!["decode step median 0.50", "tokens per second median 0.50"]);
    assert!(c.verdicts.iter().all(|v| v.method.starts_with("summary medians only")), "{:?}", c.verdicts);
}

#[test]
fn another_machine_is_a_finding_and_a_slower_memory_night_is_not_a_code_regression() {
    let m = decode_manifest(0.020, Some(&[1, 2, 3]));
    let mut draw = Draw(5);
    let (base, slow) = (draw.lognormal(30, 0.020, 0.05), draw.lognormal(30, 0.0235, 0.05));
    let mut moved = m.clone();
    moved.machine.cpu_model = "Other CPU".into();
    let c = compare(&night_of(&m, &base), &night_of(&moved, &slow), &Policy::default());
    assert!(c.verdicts.is_empty(), "timings of another machine are not compared");
    match &c.findings[..] {
        [Finding::MachineDiffers { runs: 1, differences }] => assert_eq!(differences, &["cpu_model: none -> Other CPU"]),
        other => panic!("unexpected {other:?}"),
    }
    let membw = |bw: f64| {
        let mut b = decode_manifest(0.020, None);
        b.run_id = "b".repeat(64);
        b.experiment = "membw".into();
        b.answer = None;
        b.summary = Some(crate::synth::membw_summary(bw));
        b
    };
    let (mut before, mut after) = (night_of(&m, &base), night_of(&m, &slow));
    before.manifests.push(membw(18.0e9));
    after.manifests.push(membw(18.0e9 / 1.2));
    let c = compare(&before, &after, &Policy::default());
    let v = c.verdicts.iter().find(|v| v.figure == "decode step median").unwrap();
    assert!((c.bandwidth_ratio.unwrap() - 1.0 / 1.2).abs() < 1e-12);
    assert_eq!(v.verdict, Verdict::NoChange, "{v:?}");
    assert!(v.method.contains("explained by memory bandwidth") && v.bandwidth_normalised_worse_by.unwrap().abs() < 0.1, "{v:?}");
    after.manifests[1] = membw(18.0e9);
    assert_eq!(compare(&before, &after, &Policy::default()).verdicts[0].verdict, Verdict::Regressed, "same bandwidth: a regression");
}

/// Writes `m` with decode-step samples `steps` (one repetition each, ranks 0 and 1) into `dir`.
fn write_with_samples(m: &Manifest, steps: &[f64], dir: &Path) {
    let out = Manifest::results_dir(dir, &m.run_id);
    std::fs::create_dir_all(&out).unwrap();
    let recs: Vec<Record> = steps
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            (0..2).map(move |rank| Record {
                rank,
                figure: "decode_step".into(),
                size_bytes: 0,
                repetition: i as u32,
                iteration: 0,
                seconds: s * (0.9 + 0.1 * f64::from(rank)),
            })
        })
        .collect();
    let mut summary = DataFrame::new_infer_height(vec![Column::new("step_s".into(), steps.to_vec())]).unwrap();
    let mut m = m.clone();
    m.results = Some(write_results(&recs, &mut summary, &out, dir).unwrap());
    m.write(dir).unwrap();
}

fn nightly(base: &Path, now: &Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["nightly", "--baseline"])
        .arg(base)
        .arg("--manifests")
        .arg(now)
        .args(extra)
        .output()
        .unwrap()
}

/// Parses a JUnit file with an XML parser and checks it against the common JUnit schema's
/// structure; returns (tests, failures, skipped) as the root declares and as counted.
fn parse_junit(path: &Path) -> (usize, usize, usize) {
    use quick_xml::events::Event;
    let text = std::fs::read_to_string(path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let (mut stack, mut declared, mut counted) = (Vec::<String>::new(), None, (0, 0, 0));
    loop {
        let event = reader.read_event().unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{text}"));
        let (e, empty) = match &event {
            Event::Start(e) => (e.clone(), false),
            Event::Empty(e) => (e.clone(), true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
        let attr = |k: &str| e.try_get_attribute(k).unwrap().map(|a| a.unescape_value().unwrap().to_string());
        let parent = stack.last().map(String::as_str);
        match name.as_str() {
            "testsuites" => {
                assert_eq!(parent, None);
                let n = |k| attr(k).unwrap().parse::<usize>().unwrap();
                declared = Some((n("tests"), n("failures"), n("skipped")));
            }
            "testsuite" => {
                assert_eq!(parent, Some("testsuites"));
                for k in ["name", "tests", "failures", "errors"] {
                    assert!(attr(k).is_some(), "testsuite without {k}");
                }
            }
            "testcase" => {
                assert_eq!(parent, Some("testsuite"));
                assert!(attr("name").is_some() && attr("classname").is_some());
                counted.0 += 1;
            }
            "failure" | "skipped" | "system-out" => {
                assert_eq!(parent, Some("testcase"), "{name} outside a testcase");
                assert!(name == "system-out" || attr("message").is_some());
                counted.1 += usize::from(name == "failure");
                counted.2 += usize::from(name == "skipped");
            }
            other => panic!("element {other} is not in the JUnit schema"),
        }
        if !empty {
            stack.push(name);
        }
    }
    assert_eq!(declared, Some(counted), "declared counts match the test cases");
    counted
}

#[test]
fn the_command_judges_real_parquet_samples_and_writes_junit_markdown_and_json() {
    let (base, same, slow, few) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut draw = Draw(3);
    let (before, after) = (draw.lognormal(30, 0.020, 0.1), draw.lognormal(30, 0.024, 0.1));
    write_with_samples(&decode_manifest(0.020, Some(&[1, 2, 3])), &before, base.path());
    let junit = base.path().join("junit.xml");
    let out = nightly(base.path(), base.path(), &["--junit", junit.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "a baseline against itself: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 findings"));
    assert_eq!(parse_junit(&junit).1, 0, "no failures");
    write_with_samples(&decode_manifest(0.020, Some(&[1, 2, 3])), &before, same.path());
    assert_eq!(nightly(base.path(), same.path(), &[]).status.code(), Some(0), "the same samples again");
    write_with_samples(&decode_manifest(0.024, Some(&[1, 2, 3])), &after, slow.path());
    let summary = slow.path().join("summary.md");
    let out = nightly(base.path(), slow.path(), &["--junit", junit.to_str().unwrap(), "--summary", summary.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    assert!(stdout.contains("REGRESSED") && stdout.contains("Mann-Whitney U (normal approximation"), "{stdout}");
    let (tests, failures, _) = parse_junit(&junit);
    assert!(tests >= 4 && failures == 1, "{tests} tests, {failures} failures");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("### Findings") && md.contains("| REGRESSED |"), "{md}");
    let json_out = nightly(base.path(), slow.path(), &["--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let verdicts = value["comparison"]["verdicts"].as_array().unwrap();
    let step = verdicts.iter().find(|v| v["figure"] == "decode step median").unwrap();
    assert_eq!(step["verdict"], "REGRESSED");
    assert!(step["p"].as_f64().unwrap() < 1e-3 && step["n_before"] == 30);
    let few_base = tempfile::tempdir().unwrap();
    write_with_samples(&decode_manifest(0.020, Some(&[1, 2, 3])), &before[..3], few_base.path());
    write_with_samples(&decode_manifest(0.024, Some(&[1, 2, 3])), &after[..3], few.path());
    let out = nightly(few_base.path(), few.path(), &["--junit", junit.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("INSUFFICIENT_EVIDENCE"));
    assert!(parse_junit(&junit).2 >= 1, "insufficient evidence is skipped");
}

#[test]
fn the_command_exits_3_on_a_changed_answer_and_2_on_a_foreign_baseline_or_bad_flags() {
    let (base, now, foreign) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    decode_manifest(0.020, Some(&[1, 2, 3])).write(base.path()).unwrap();
    decode_manifest(0.040, Some(&[1, 2, 3])).write(now.path()).unwrap();
    let out = nightly(base.path(), now.path(), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("REGRESSED"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("have no readable raw samples"), "the fallback is said");
    decode_manifest(0.020, Some(&[9, 9, 9])).write(now.path()).unwrap();
    assert_eq!(nightly(base.path(), now.path(), &[]).status.code(), Some(3));
    let mut other = decode_manifest(0.020, Some(&[1, 2, 3]));
    other.run_id = "c".repeat(64);
    other.write(foreign.path()).unwrap();
    let out = nightly(foreign.path(), now.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "a foreign baseline");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to compare"));
    for bad in [["--fdr", "0"], ["--fdr", "1.5"], ["--min-effect", "-0.1"], ["--min-effect", "nan"]] {
        assert_eq!(nightly(base.path(), now.path(), &bad).status.code(), Some(2), "{bad:?}");
    }
}

#[test]
fn the_history_finds_a_step_and_a_slow_drift_that_no_single_night_flags_and_not_noise() {
    use parlab::nightly::history::{append, change_points, read, write_trends};
    let policy = Policy::default();
    let mut draw = Draw(17);
    let noise = draw.lognormal(16, 1.0, 0.03);
    let flat: Vec<f64> = noise.clone();
    let step: Vec<f64> = noise.iter().enumerate().map(|(i, v)| if i < 8 { *v } else { v * 1.3 }).collect();
    let drift: Vec<f64> = noise.iter().enumerate().map(|(i, v)| v * (1.0 + 0.02 * i as f64)).collect();
    assert_eq!(change_points(&flat, &policy), Vec::<usize>::new(), "noise has no change point");
    assert_eq!(change_points(&step, &policy), vec![8], "a 30% step after night 8");
    assert!(drift.windows(2).all(|w| (w[1] / w[0] - 1.0).abs() < policy.min_effect), "no night-to-night change reaches the minimum");
    assert!(!change_points(&drift, &policy).is_empty(), "a 2%-a-night drift is visible");
    let dir = tempfile::tempdir().unwrap();
    let m = decode_manifest(0.020, Some(&[1, 2, 3]));
    for (i, v) in step.iter().enumerate() {
        append(dir.path(), &night_of(&m, &[0.020 * v]), &format!("2026-12-{:02}T00:00:00Z", i + 1)).unwrap();
    }
    let entries = read(dir.path());
    assert_eq!(entries.len(), 16);
    assert!(entries.windows(2).all(|w| w[0].night < w[1].night), "oldest first");
    let changed = write_trends(dir.path(), &policy).unwrap();
    assert!(changed.iter().any(|s| s.figure == "decode step median" && s.change_points == vec![8]), "{changed:?}");
    let md = std::fs::read_to_string(dir.path().join("trends.md")).unwrap();
    assert!(md.contains("2026-12-09T00:00:00Z"), "the change point's night: {md}");
    let svg = std::fs::read_to_string(dir.path().join("trends/0.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("stroke-dasharray") && svg.matches("<circle").count() == 16);
}

#[test]
fn the_command_appends_to_the_history_folder() {
    let (base, history) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_with_samples(&decode_manifest(0.020, Some(&[1, 2, 3])), &Draw(1).lognormal(10, 0.02, 0.1), base.path());
    for _ in 0..2 {
        let out = nightly(base.path(), base.path(), &["--history", history.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    assert_eq!(parlab::nightly::history::read(history.path()).len(), 2);
    assert!(history.path().join("trends.md").is_file() && history.path().join("trends/0.svg").is_file());
}

#[allow(dead_code)]
mod build_script {
    include!("../../build.rs");

    /// The measuring-code digest of the tree at `root`.
    pub fn digest_of(root: &std::path::Path) -> String {
        digest_in(root, &MEASURING)
    }

    /// The model-code digest (what cached references depend on) of the tree at `root`.
    pub fn model_digest_of(root: &std::path::Path) -> String {
        digest_in(root, &MODEL)
    }

    fn digest_in(root: &std::path::Path, paths: &[&str]) -> String {
        let here = std::env::current_dir().unwrap();
        std::env::set_current_dir(root).unwrap();
        let d = digest(paths);
        std::env::set_current_dir(here).unwrap();
        d
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn the_measuring_digest_changes_with_the_measuring_code_and_not_with_the_register_template() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&root.join("harness"), &tree.path().join("harness"));
    std::fs::copy(root.join("Cargo.lock"), tree.path().join("Cargo.lock")).unwrap();
    let before = build_script::digest_of(tree.path());
    assert_eq!(before.len(), 32);
    let touch = |rel: &str| {
        let path = tree.path().join(rel);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("\n// edited\n");
        std::fs::write(path, text).unwrap();
    };
    for rel in ["harness/report/templates.rs", "harness/report/figures.rs", "harness/nightly/mod.rs", "harness/cli/nightly.rs"] {
        touch(rel);
        assert_eq!(build_script::digest_of(tree.path()), before, "{rel} is not measuring code");
    }
    for rel in ["harness/rank/membw.rs", "harness/model/matvec.rs", "harness/collect/decode.rs", "harness/launch/command.rs", "Cargo.lock"]
    {
        let was = build_script::digest_of(tree.path());
        touch(rel);
        assert_ne!(build_script::digest_of(tree.path()), was, "{rel} is measuring code");
    }
    let model = build_script::model_digest_of(tree.path());
    touch("harness/rank/decode_engine.rs");
    assert_eq!(build_script::model_digest_of(tree.path()), model, "the decode loop does not change the model's arithmetic");
    touch("harness/model/row.rs");
    assert_ne!(build_script::model_digest_of(tree.path()), model, "the row path is the model's arithmetic: references are recomputed");
}

fn run_in(suite: &super::launch::Suite, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["run", "specs", "--no-report"])
        .args(extra)
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env_remove("PARLAB_FAULT")
        .output()
        .unwrap()
}

#[test]
fn the_run_cache_re_measures_runs_of_other_measuring_code_and_only_selects() {
    use super::launch::{small_collectives, Suite};
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    suite.spec("two", &small_collectives("two", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    assert_eq!(suite.run(&[]), 0);
    let (one, two) = (suite.manifest("one"), suite.manifest("two"));
    assert_eq!(one.parlab.measuring, parlab::manifest::MEASURING_DIGEST);
    let mut older = one.clone();
    older.parlab.measuring = "0".repeat(32);
    older.write(&suite.manifests()).unwrap();
    let report = suite.dir.path().join("reports");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["report", "--manifests"])
        .arg(suite.manifests())
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let evidence = std::fs::read_to_string(report.join("evidence.md")).unwrap();
    assert!(evidence.contains("1 runs (one) were measured by other measuring code"), "the register marks it");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(suite.run(&[]), 0);
    let (one_again, two_again) = (suite.manifest("one"), suite.manifest("two"));
    assert_ne!(one_again.started_at, one.started_at, "other measuring code: re-measured");
    assert_eq!(one_again.parlab.measuring, parlab::manifest::MEASURING_DIGEST);
    assert_eq!(two_again, two, "same measuring code: skipped, manifest untouched");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = run_in(&suite, &["--force", "--only", "t?o"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(suite.manifest("two").started_at, two.started_at, "--force --only two re-measures two");
    assert_eq!(suite.manifest("one"), one_again, "and leaves one alone");
    let out = run_in(&suite, &["--only", "nothing-*"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--only nothing-*: matches none"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn report_draws_the_history_beside_the_register() {
    let (base, history, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m = decode_manifest(0.020, Some(&[1, 2, 3]));
    m.write(base.path()).unwrap();
    for night in 1..=3 {
        let when = format!("2026-12-0{night}T00:00:00Z");
        parlab::nightly::history::append(history.path(), &Night::new(vec![m.clone()]), &when).unwrap();
    }
    let report = |history: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
            .args(["report", "--manifests"])
            .arg(base.path())
            .arg("--out")
            .arg(out.path())
            .arg("--history")
            .arg(history)
            .output()
            .unwrap()
    };
    let done = report(history.path());
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let md = std::fs::read_to_string(out.path().join("trends.md")).unwrap();
    assert!(md.contains("| [decode step median](trends/0.svg) |") && md.contains("| 3 |"), "{md}");
    assert!(out.path().join("evidence.md").is_file() && out.path().join("trends/1.svg").is_file());
    let fresh = tempfile::tempdir().unwrap();
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["report", "--manifests"])
        .arg(base.path())
        .arg("--out")
        .arg(fresh.path().join("r"))
        .args(["--history", "no-such-history"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(!fresh.path().join("r").exists(), "nothing written");
}
