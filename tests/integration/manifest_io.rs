//! Manifests: atomic writes, round trips, and corrupt or foreign files skipped.

use parlab::manifest::{self, Manifest, Outcome, ReadError};
use parlab::spec::load_suite;
use std::path::PathBuf;

fn sample_manifest() -> Manifest {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let plan = load_suite(&[PathBuf::from("tests/specs/good/matrix.yaml")]).unwrap().remove(0);
    let machine = parlab::manifest::machine::Fingerprint { cores: 2, ..Default::default() };
    let mut m = Manifest::for_plan(&plan, machine, "2026-12-02T00:00:00Z", Outcome::NotRun { reason: "needs 2 GPUs".into() });
    m.finished_at = "2026-12-02T00:00:01Z".into();
    m
}

#[test]
fn a_manifest_round_trips_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = sample_manifest();
    let path = m.write(dir.path()).unwrap();
    assert_eq!(path.file_name().unwrap().to_str().unwrap(), format!("{}.json", m.run_id));
    let names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let back = manifest::read_one(&path).unwrap();
    assert_eq!(back, m);
    let text: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for key in ["run_id", "answer_id", "experiment", "kind", "status", "layout"] {
        assert!(text.get(key).is_some(), "manifest lacks top-level {key}");
    }
    assert_eq!(text["status"], "not_run");
}

#[test]
fn corrupt_and_foreign_files_are_skipped_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let m = sample_manifest();
    m.write(dir.path()).unwrap();
    std::fs::write(dir.path().join("truncated.json"), "{\"schema\": \"parlab.manifest/1\", \"run_").unwrap();
    std::fs::write(dir.path().join("foreign.json"), "{\"hello\": \"world\"}").unwrap();
    std::fs::write(dir.path().join("numbered.json"), "{\"schema\": 5}").unwrap();
    std::fs::write(dir.path().join("future.json"), "{\"schema\": \"parlab.manifest/9\"}").unwrap();
    let mut renamed = m.clone();
    renamed.run_id = "0".repeat(64).into();
    std::fs::write(dir.path().join("misnamed.json"), serde_json::to_string(&renamed).unwrap()).unwrap();
    let (list, skipped) = manifest::read_all(dir.path());
    assert_eq!(list.len(), 1);
    let reasons: Vec<String> = skipped.iter().map(|s| format!("{}: {}", s.path.file_name().unwrap().to_string_lossy(), s.reason)).collect();
    assert_eq!(skipped.len(), 5, "{reasons:?}");
    let reason = |name: &str| &skipped.iter().find(|s| s.path.file_name().unwrap() == name).expect(name).reason;
    assert!(matches!(reason("truncated.json"), ReadError::NotJson(_)), "{reasons:?}");
    assert!(matches!(reason("foreign.json"), ReadError::NoSchema), "{reasons:?}");
    assert!(matches!(reason("numbered.json"), ReadError::NoSchema), "{reasons:?}");
    let numbered = reasons.iter().find(|r| r.starts_with("numbered.json")).unwrap();
    assert!(numbered.ends_with(&format!("not a parlab manifest (no `schema` string such as \"{}\")", manifest::SCHEMA)), "{numbered}");
    assert!(matches!(reason("future.json"), ReadError::ForeignSchema(s) if s == "parlab.manifest/9"), "{reasons:?}");
    assert!(matches!(reason("misnamed.json"), ReadError::MisnamedFile(id) if *id == renamed.run_id), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.starts_with("future.json: schema `parlab.manifest/9` is not parlab.manifest/")), "{reasons:?}");
}

#[test]
fn a_missing_manifests_folder_reads_as_empty() {
    let (list, skipped) = manifest::read_all(std::path::Path::new("/nonexistent/parlab/manifests"));
    assert!(list.is_empty() && skipped.is_empty());
}

#[test]
fn an_older_format_manifest_is_refused_with_what_to_do() {
    for (old, lacked) in manifest::OLDER_SCHEMAS {
        let dir = tempfile::tempdir().unwrap();
        let m = sample_manifest();
        let path = m.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap().replace(manifest::SCHEMA, old);
        std::fs::write(&path, text).unwrap();
        let (list, skipped) = manifest::read_all(dir.path());
        assert!(list.is_empty());
        let reason = &skipped[0].reason;
        assert!(matches!(reason, ReadError::OlderSchema { tag, lacked: l } if *tag == old && *l == lacked), "{reason:?}");
        assert!(reason.to_string().contains("`parlab run` re-measures it"), "{reason}");
    }
}

const MEMBW: &str = "kind: membw\nworld: 1\nthreads: 1\nbuffer: 1MiB\nrepetitions: 2\nwarmup: 1\ntimeout: 60s\n";

#[test]
fn a_run_identity_names_every_experiment_that_produced_it_and_follows_renames() {
    let suite = super::launch::Suite::new();
    suite.spec("a", &format!("name: first\n{MEMBW}")).spec("b", &format!("name: second\n{MEMBW}"));
    let validated = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["validate", "specs"])
        .current_dir(suite.dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&validated.stdout);
    assert_eq!(said, "ok: 2 experiments, 2 runs (1 distinct: experiments of the same content share a run identity, run once)\n");
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 1, "same content, one run identity, measured once");
    let names: Vec<&str> = all[0].origins.iter().map(|o| o.experiment.as_str()).collect();
    assert_eq!(names, ["first", "second"]);
    assert!(all[0].origins[1].spec.ends_with("specs/b.yaml"), "{:?}", all[0].origins);
    let measured_at = all[0].started_at.clone();

    std::fs::remove_file(suite.dir.path().join("specs/a.yaml")).unwrap();
    suite.spec("b", &format!("name: renamed\n{MEMBW}"));
    assert_eq!(suite.run(&[]), 0);
    let (all, _) = manifest::read_all(&suite.manifests());
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].experiment, "renamed", "a cached run takes the suite's new name");
    assert_eq!(all[0].origins.len(), 1);
    assert_eq!(all[0].started_at, measured_at, "renaming does not re-measure");
}

/// The committed fixtures (as committed, of the previous shape: loose `status`, `reason`,
/// `results`, `summary`, `answer` fields, nulls written out on every run).
fn previous_shape() -> Vec<(PathBuf, serde_json::Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap())).collect()
}

#[test]
fn manifests_of_the_previous_shape_read_with_the_outcome_they_recorded() {
    let mut seen = std::collections::BTreeSet::new();
    for (path, raw) in previous_shape() {
        let m = manifest::read_one(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(serde_json::to_value(m.status()).unwrap(), raw["status"], "{}", path.display());
        seen.insert(format!("{:?}", m.status()));
        assert_eq!(m.reason(), raw["reason"].as_str(), "{}", path.display());
        assert_eq!(serde_json::to_value(m.summary()).unwrap(), raw["summary"], "{}", path.display());
        assert_eq!(serde_json::to_value(m.answer()).unwrap(), raw["answer"], "{}", path.display());
        assert_eq!(serde_json::to_value(m.launch()).unwrap(), raw.get("launch").cloned().unwrap_or_default(), "{}", path.display());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["Failed", "NotRun", "Ok"], "the fixtures hold every ending");
}

/// The first fixture that ended `status`, as JSON, and the file name it must have.
fn fixture_ending(status: &str) -> (String, serde_json::Value) {
    let (path, raw) = previous_shape().into_iter().find(|(_, v)| v["status"] == status).expect(status);
    (path.file_name().unwrap().to_string_lossy().into_owned(), raw)
}

/// Reads `value` as the manifest file `name`.
fn read_value(name: &str, value: &serde_json::Value) -> Result<Manifest, ReadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    manifest::read_one(&path)
}

#[test]
fn null_and_absent_keys_of_the_previous_shape_read_and_an_ok_run_without_a_summary_is_refused() {
    let (name, mut ok) = fixture_ending("ok");
    ok["reason"] = serde_json::Value::Null;
    ok["answer"] = serde_json::Value::Null;
    ok.as_object_mut().unwrap().remove("launches");
    let m = read_value(&name, &ok).unwrap();
    assert!(matches!(&m.outcome, Outcome::Ok { answer: None, launches: None, .. }), "{:?}", m.outcome);
    assert_eq!(serde_json::to_value(m.summary()).unwrap(), ok["summary"]);

    let (name, mut not_run) = fixture_ending("not_run");
    not_run["reason"] = serde_json::Value::Null;
    for key in ["results", "summary", "answer"] {
        not_run[key] = serde_json::Value::Null;
    }
    let m = read_value(&name, &not_run).unwrap();
    assert_eq!((m.status(), m.reason(), m.launch().is_none()), (manifest::Status::NotRun, None, true));

    let (name, mut failed) = fixture_ending("failed");
    failed.as_object_mut().unwrap().remove("reason");
    for key in ["results", "summary", "answer"] {
        failed[key] = serde_json::Value::Null;
    }
    let m = read_value(&name, &failed).unwrap();
    assert_eq!((m.status(), m.reason(), m.launch().is_some()), (manifest::Status::Failed, None, true));

    let (name, mut hollow) = fixture_ending("ok");
    hollow["summary"] = serde_json::Value::Null;
    assert!(matches!(read_value(&name, &hollow), Err(ReadError::Malformed(_))), "an ok run must carry its summary");
}

#[test]
fn each_outcome_round_trips_with_only_its_own_keys() {
    let (name, raw) = fixture_ending("ok");
    let ok = read_value(&name, &raw).unwrap().outcome;
    assert!(ok.launch().is_some(), "a launched ok run");
    let launch = ok.launch().cloned();
    let failed = Outcome::Failed { reason: "rank 1 was killed by signal 9".into(), launch };
    let not_run = Outcome::NotRun { reason: "needs 2 GPUs".into() };
    let cases = [
        (ok, "ok", &["launch", "results", "summary", "answer"][..], &["reason"][..]),
        (failed, "failed", &["reason", "launch"][..], &["results", "summary", "answer", "launches"][..]),
        (not_run, "not_run", &["reason"][..], &["launch", "results", "summary", "answer", "launches"][..]),
    ];
    for (outcome, tag, present, absent) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut m = sample_manifest();
        m.outcome = outcome;
        let path = m.write(dir.path()).unwrap();
        assert_eq!(manifest::read_one(&path).unwrap(), m, "{tag} round trip");
        let text: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(text["status"], tag);
        for key in present {
            assert!(text.get(key).is_some(), "{tag} lacks {key}: {text}");
        }
        for key in absent {
            assert!(text.get(key).is_none(), "{tag} carries {key}");
        }
    }
}
