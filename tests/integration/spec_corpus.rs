//! The malformed-spec corpus: each file in tests/specs/bad names the one-line errors
//! it must produce (`# expect:` lines); `validate` and `run` must exit 2 and write nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn parlab() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_parlab"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn corpus(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.into_iter().map(|p| p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().to_path_buf()).collect()
}

fn expectations(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    text.lines().filter_map(|l| l.strip_prefix("# expect: ")).map(str::to_string).collect()
}

#[test]
fn corpus_has_at_least_25_real_mistakes() {
    let files = corpus("bad");
    assert!(files.len() >= 25, "only {} malformed specs", files.len());
    for f in &files {
        assert!(!expectations(f).is_empty(), "{} has no `# expect:` line", f.display());
    }
}

#[test]
fn every_malformed_spec_gives_its_one_line_errors_and_exit_2() {
    // One `validate` of the whole corpus (every file's problems are reported together, each
    // line naming its file), then each file's lines held to its `# expect:` lines; a file with
    // a problem alone exits 2 as the whole does (the exit code is the same rule). Files whose
    // names are missing or malformed do not collide with each other's (they once did, as empty
    // names, and this test left those lines out: `duplicate_experiment_names_are_refused`).
    let files = corpus("bad");
    let out = parlab().arg("validate").args(&files).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "validate panicked: {stderr}");
    let mut failures = Vec::new();
    let mut attributed = 0;
    for file in &files {
        let prefix = format!("error: {}:", file.display());
        let named: Vec<&str> = stderr.lines().filter(|l| l.starts_with(&prefix)).collect();
        attributed += named.len();
        let lines: Vec<&str> = named;
        let expected = expectations(file);
        if lines.len() != expected.len() {
            failures.push(format!("{}: {} error lines, want {}:\n{}", file.display(), lines.len(), expected.len(), lines.join("\n")));
        }
        for want in &expected {
            if !lines.iter().any(|l| l.contains(want.as_str())) {
                failures.push(format!("{}: no line contains {want:?}; got:\n{}", file.display(), lines.join("\n")));
            }
        }
    }
    assert_eq!(attributed, stderr.lines().count(), "lines naming no file of the corpus:\n{stderr}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn advise_specs_name_their_keys_not_parlab_advises_flags() {
    // A `kind: advise` spec's machine is `machine.nodes`, `machine.domains`, …: its problems
    // are at those keys (file:line:col where the key is written) in those words, never `--domain` or `--nodes`, which
    // are `parlab advise`'s (the same topology there keeps its flags' words).
    let files: Vec<PathBuf> = corpus("bad").into_iter().filter(|f| f.to_string_lossy().contains("-advise-")).collect();
    assert!(files.len() >= 10, "{files:?}");
    let out = parlab().arg("validate").args(&files).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for line in stderr.lines() {
        assert!(!line.contains("--"), "a flag's word in a spec's problem: {line}");
        assert!(line.starts_with("error: tests/specs/bad/"), "named by its file: {line}");
    }
    let topology = |machine: &[&str]| {
        let args = [&["advise", "gpt2", "--device", "a100-80gb", "--prompt", "64", "--new-tokens", "8"][..], machine].concat();
        let out = parlab().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let cli = topology(&["--devices-per-node", "6", "--domain", "2:nvlink-nv12", "--domain", "3:pcie-sys", "--domain", "6:pcie-sys"]);
    assert!(cli.contains("topology: --domain 3:pcie-sys: each domain must be larger than the one inside it (2)"), "{cli}");
    let cli = topology(&["--domain", "2:nvlink-nv12"]);
    assert!(cli.contains("topology: one device needs no --domain"), "{cli}");
}

#[test]
fn one_malformed_spec_alone_exits_2() {
    for file in ["tests/specs/bad/01-typo-key.yaml", "tests/specs/bad/83-advise-expect-nothing.yaml"] {
        let out = parlab().arg("validate").arg(file).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{file}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn a_missing_model_names_the_models_there_are_once() {
    let out = parlab().args(["validate", "tests/specs/bad/10-missing-model.yaml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("; models under models/: gemma-2-2b, gpt2, gpt2-moe,"), "{stderr}");
    assert_eq!(stderr.matches("gpt2-moe").count(), 1, "listed once: {stderr}");
}

#[test]
fn run_refuses_a_malformed_suite_and_writes_nothing() {
    let manifests = tempfile::tempdir().unwrap();
    let good = "tests/specs/good/matrix.yaml";
    let bad = "tests/specs/bad/08-tensor-not-dividing-heads.yaml";
    let out = parlab().args(["run", good, bad]).env("PARLAB_MANIFESTS", manifests.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_dir(manifests.path()).unwrap().count(), 0, "run wrote into manifests/");
}

#[test]
fn all_problems_of_all_files_are_reported_together() {
    let out = parlab().args(["validate", "tests/specs/bad/01-typo-key.yaml", "tests/specs/bad/35-several-problems.yaml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 4, "{stderr}");
}

#[test]
fn duplicate_experiment_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["a.yaml", "b.yaml"] {
        std::fs::write(dir.path().join(f), "name: twin\nkind: membw\n").unwrap();
    }
    let out = parlab().arg("validate").arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("b.yaml:1:1: name: `twin` is also the name of"), "{stderr}");
    // Names refused for themselves are not also called duplicates of one another.
    let dir = tempfile::tempdir().unwrap();
    for (f, name) in [("c.yaml", "\"\""), ("d.yaml", "\"a b\""), ("e.yaml", "123")] {
        std::fs::write(dir.path().join(f), format!("name: {name}\nkind: membw\n")).unwrap();
    }
    let out = parlab().arg("validate").arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), stderr.lines().count()), (Some(2), 3), "{stderr}");
    assert!(!stderr.contains("must be unique") && stderr.contains("c.yaml:1:1: name: empty; give a name"), "{stderr}");
}

#[test]
fn every_later_file_of_one_name_is_told_the_first_files_name() {
    // The third file was told it repeated the second's name, not the first's.
    let dir = tempfile::tempdir().unwrap();
    for f in ["a.yaml", "b.yaml", "c.yaml"] {
        std::fs::write(dir.path().join(f), "name: triplet\nkind: membw\n").unwrap();
    }
    let out = parlab().arg("validate").arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), stderr.lines().count()), (Some(2), 2), "{stderr}");
    let first = dir.path().join("a.yaml");
    for later in ["b.yaml", "c.yaml"] {
        let want = format!("{later}:1:1: name: `triplet` is also the name of {};", first.display());
        assert!(stderr.contains(&want), "{want}: {stderr}");
    }
}

#[test]
fn a_spec_saved_with_a_byte_order_mark_validates() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bom.yaml");
    std::fs::write(&spec, "\u{feff}name: bom\nkind: membw\n").unwrap();
    let out = parlab().arg("validate").arg(&spec).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "was `more than one document`: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_fifo_or_a_dangling_link_named_yaml_is_refused_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.yaml"), "name: good\nkind: membw\n").unwrap();
    std::os::unix::fs::symlink("/nonexistent/parlab/spec.yaml", dir.path().join("dangling.yaml")).unwrap();
    let fifo = dir.path().join("fifo.yaml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = parlab().arg("validate").arg(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the folder validated with two specs unread: {stderr}");
    assert!(stderr.contains("dangling.yaml: cannot") && stderr.contains("fifo.yaml: not a regular file (a FIFO)"), "{stderr}");
    let out = parlab().arg("validate").arg(&fifo).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo.yaml: not a regular file (a FIFO)"), "named, not `no such file`");
}

#[test]
fn missing_paths_are_user_errors() {
    let out = parlab().args(["validate", "no/such/specs"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/specs: no such file or folder"));
}

#[test]
fn good_specs_and_the_default_suite_validate() {
    for path in ["tests/specs/good", "experiments"] {
        let out = parlab().args(["validate", path]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{path}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn plan_json_lists_runs_in_matrix_order_with_identities() {
    let out = parlab().args(["plan", "--json", "tests/specs/good/matrix.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    let order: Vec<(String, u64)> =
        runs.iter().map(|r| (r["layout"]["strategy"].as_str().unwrap().to_string(), r["layout"]["world"].as_u64().unwrap())).collect();
    let want = [("tensor", 1), ("tensor", 2), ("tensor", 4), ("pipeline", 2), ("pipeline", 4)];
    assert_eq!(order, want.map(|(s, w)| (s.to_string(), w)).to_vec());
    for r in runs {
        for key in ["experiment", "run_id", "answer_id", "layout"] {
            assert!(!r[key].is_null(), "plan entry lacks {key}");
        }
        assert_eq!(r["run_id"].as_str().unwrap().len(), 64);
    }
}

#[test]
fn the_readmes_example_specs_validate() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The multi-node example names a hostfile beside it.
    std::fs::write(dir.path().join("nodes.txt"), "node1 slots=4\nnode2 slots=4\n").unwrap();
    let examples: Vec<&str> =
        readme.split("```yaml\n").skip(1).filter_map(|b| b.split("```").next()).filter(|b| b.contains("\nkind: ")).collect();
    assert!(examples.len() >= 8, "{} example specs in the README", examples.len());
    for (i, text) in examples.iter().enumerate() {
        std::fs::write(dir.path().join(format!("example-{i}.yaml")), text).unwrap();
    }
    let out = parlab().args(["validate"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_memory_refusal_is_lifted_by_the_override_and_never_allocates() {
    let spec = Path::new("tests/specs/bad/77-buffer-past-memory.yaml");
    let refused = parlab().arg("validate").arg(spec).env_remove("PARLAB_MAX_MEMORY").output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    let allowed = parlab().arg("validate").arg(spec).env("PARLAB_MAX_MEMORY", "16TiB").output().unwrap();
    assert_eq!(allowed.status.code(), Some(0), "{}", String::from_utf8_lossy(&allowed.stderr));
    let lower = parlab().arg("validate").arg("tests/specs/good/matrix.yaml").env("PARLAB_MAX_MEMORY", "1KiB").output().unwrap();
    let stderr = String::from_utf8_lossy(&lower.stderr);
    assert_eq!(lower.status.code(), Some(2), "a limit below the suite's needs refuses it: {stderr}");
    assert!(stderr.contains("PARLAB_MAX_MEMORY allows 1.0 KiB"), "{stderr}");
}

#[test]
fn a_relative_model_path_is_read_from_the_spec_files_folder_whatever_the_working_folder() {
    let dir = tempfile::tempdir().unwrap();
    let specs = dir.path().join("specs");
    std::fs::create_dir_all(specs.join("tiny")).unwrap();
    std::fs::write(
        specs.join("tiny/config.json"),
        r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 50, "n_positions": 16, "layer_norm_epsilon": 1e-05}"#,
    )
    .unwrap();
    let spec = "name: beside\nkind: decode\nmodel: ./tiny\nstrategy: tensor\nworld: 2\nprompt: {length: 4}\nnew_tokens: 4\n";
    std::fs::write(specs.join("beside.yaml"), spec).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parlab"))
        .arg("plan")
        .arg(specs.join("beside.yaml"))
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("beside"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_spec_named_twice_is_one_spec_not_two_experiments_of_one_name() {
    let spec = "tests/specs/good/matrix.yaml";
    let once = parlab().args(["plan", spec]).output().unwrap();
    for twice in [vec![spec, spec], vec!["tests/specs/good/matrix.yaml", "./tests/specs/good/../good/matrix.yaml"]] {
        let out = parlab().arg("plan").args(&twice).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{twice:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, once.stdout, "the same runs as naming it once");
    }
}

#[test]
fn plan_lines_up_its_columns_whatever_the_experiment_names_length() {
    let out = parlab().args(["plan", "experiments"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap();
    // Every column after one of variable width (the experiment, the link: `nccl-no-shm` is
    // wider than its heading) starts where its heading does.
    for column in ["strategy", "link", "run_id"] {
        let at = header.find(column).unwrap();
        for line in text.lines().skip(1) {
            // By characters: a run of arithmetic shows `–` for its world and link.
            let chars: Vec<char> = line.chars().collect();
            assert!(chars[at - 1] == ' ' && chars[at] != ' ', "the {column} column starts at {at}: {line}");
        }
    }
}
