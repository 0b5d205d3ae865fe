//! Nightly comparison: regressions past the tolerance, new failures and changed answers.

use parlab::manifest::{Manifest, Status};
use parlab::nightly::{compare, Finding};
use parlab::spec::load_suite;
use serde_json::json;
use std::path::PathBuf;

fn decode_manifest(step_s: f64, tokens: serde_json::Value) -> Manifest {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let plan = load_suite(&[PathBuf::from("tests/specs/good/matrix.yaml")]).unwrap().remove(1);
    let mut m = Manifest::for_plan(&plan, json!({}), "2026-12-01T00:00:00Z");
    m.kind = "decode".into();
    m.finished_at = "2026-12-01T00:01:00Z".into();
    m.summary = json!({"decode": {"step_s": {"median": step_s, "min": step_s, "max": step_s, "p99": step_s, "n": 3},
                                  "tokens_per_s": {"median": 1.0 / step_s, "min": 1.0, "max": 1.0, "p99": 1.0, "n": 3}}});
    m.answer = json!({"tokens": tokens});
    m
}

#[test]
fn a_step_slower_than_the_tolerance_is_a_regression_and_noise_is_not() {
    let before = decode_manifest(0.020, json!([[1, 2, 3]]));
    let noisy = decode_manifest(0.022, json!([[1, 2, 3]]));
    let slow = decode_manifest(0.030, json!([[1, 2, 3]]));
    assert!(compare(&[before.clone()], &[noisy], 0.25).is_empty());
    let findings = compare(&[before], &[slow], 0.25);
    let figures: Vec<String> = findings
        .iter()
        .map(|f| match f {
            Finding::Regressed { figure, worse_by, .. } => format!("{figure} {worse_by:.2}"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(figures, vec!["decode step median 0.50", "tokens per second median 0.50"]);
}

#[test]
fn changed_tokens_and_new_failures_are_findings() {
    let before = decode_manifest(0.020, json!([[1, 2, 3]]));
    let changed = decode_manifest(0.020, json!([[1, 2, 4]]));
    assert!(matches!(compare(&[before.clone()], &[changed], 0.25)[..], [Finding::AnswerChanged { .. }]));
    let mut failed = decode_manifest(0.020, json!(null));
    failed.status = Status::Failed;
    failed.reason = Some("rank 1 killed by signal 9".into());
    match &compare(&[before], &[failed], 0.25)[..] {
        [Finding::NowFailing { reason, .. }] => assert_eq!(reason, "rank 1 killed by signal 9"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn the_command_exits_4_on_a_regression_and_3_on_a_changed_answer() {
    let (base, now) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    decode_manifest(0.020, json!([[1, 2, 3]])).write(base.path()).unwrap();
    let run = |now: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
            .args(["nightly", "--baseline"])
            .arg(base.path())
            .arg("--manifests")
            .arg(now)
            .output()
            .unwrap()
    };
    decode_manifest(0.040, json!([[1, 2, 3]])).write(now.path()).unwrap();
    let out = run(now.path());
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("REGRESSED"));
    decode_manifest(0.020, json!([[9, 9, 9]])).write(now.path()).unwrap();
    assert_eq!(run(now.path()).status.code(), Some(3));
}
