//! The evidence register: determinism, NOT_RUN from a real probe, failed runs with
//! their reasons, corrupt manifests skipped, and snapshots of each rendered section.
//!
//! Fixture manifests (`tests/fixtures/manifests/`) are real `Manifest` structs from
//! `parlab::report::synth`; `PARLAB_UPDATE_SNAPSHOTS=1` regenerates them and the snapshots.

use parlab::manifest::{self, Manifest, Status};
use parlab::report;
use parlab::spec::Kind;
use std::path::{Path, PathBuf};
use std::sync::Once;

fn root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::env::set_current_dir(&root).unwrap();
    root
}

fn updating() -> bool {
    std::env::var("PARLAB_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1")
}

/// `parlab report --manifests DIR --out OUT`, its output captured.
fn report_into(manifests: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["report", "--manifests"])
        .arg(manifests)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The fixture manifests folder, regenerated first when updating snapshots.
fn fixtures() -> PathBuf {
    static REGENERATE: Once = Once::new();
    let dir = root().join("tests/fixtures/manifests");
    if updating() {
        REGENERATE.call_once(|| {
            let _ = std::fs::remove_dir_all(&dir);
            let list = crate::synth::fixtures().unwrap();
            crate::synth::write_all(&dir, &list).unwrap();
            parlab::gates::save(&crate::synth::gates(), &dir).unwrap();
        });
    }
    dir
}

/// The register of the manifests in `dir`, read as this build's measurements (the fixtures'
/// recorded measuring digest is that of the build that wrote them, so snapshots do not
/// change whenever measuring code does).
fn rendered(dir: &Path) -> report::Rendered {
    let (mut list, skipped) = manifest::read_all(dir);
    for m in &mut list {
        m.parlab.measuring = manifest::MEASURING_DIGEST.into();
    }
    report::render(&list, &skipped, parlab::gates::load(dir), Path::new("reports/templates")).unwrap()
}

/// `(slug, text)` of each `## ` section; the header is `header`.
fn sections(markdown: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![("header".into(), String::new())];
    for line in markdown.split_inclusive('\n') {
        if let Some(title) = line.strip_prefix("## ") {
            out.push((report::fmt::slug(title), String::new()));
        }
        out.last_mut().unwrap().1.push_str(line);
    }
    out
}

fn section(markdown: &str, slug_prefix: &str) -> String {
    sections(markdown)
        .into_iter()
        .find(|(s, _)| s.starts_with(slug_prefix))
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no section {slug_prefix} in:\n{markdown}"))
}

fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["", "figures", "tables"] {
        let d = dir.join(sub);
        let mut names: Vec<PathBuf> = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        names.sort();
        out.extend(names.into_iter().map(|p| (p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap())));
    }
    out
}

#[test]
fn fixture_manifests_match_the_schema() {
    let (list, skipped) = manifest::read_all(&fixtures());
    assert!(skipped.is_empty(), "fixtures no longer match the manifest schema: {skipped:?} (regenerate with PARLAB_UPDATE_SNAPSHOTS=1)");
    for status in [Status::Ok, Status::Failed, Status::NotRun] {
        assert!(list.iter().any(|m| m.status() == status), "fixtures lack a {status:?} manifest");
    }
    assert!(list.iter().any(|m| m.kind == Kind::Model));
}

#[test]
fn the_same_manifests_give_a_byte_identical_register() {
    let src = fixtures();
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&src).unwrap().flatten().filter(|e| e.path().is_file()) {
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    std::fs::create_dir_all(copy.path().join("_gates")).unwrap();
    std::fs::copy(src.join("_gates/gates.json"), copy.path().join("_gates/gates.json")).unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    report::render_all(&src, a.path()).unwrap();
    report::render_all(copy.path(), b.path()).unwrap();
    report::render_all(&src, b.path()).unwrap();
    let (fa, fb) = (files_under(a.path()), files_under(b.path()));
    assert!(fa.iter().any(|(p, _)| p.starts_with("figures")) && fa.iter().any(|(p, _)| p.starts_with("tables")));
    assert_eq!(fa.iter().map(|f| &f.0).collect::<Vec<_>>(), fb.iter().map(|f| &f.0).collect::<Vec<_>>());
    for ((path, x), (_, y)) in fa.iter().zip(&fb) {
        assert!(x == y, "{} differs between two renders of the same manifests", path.display());
    }
}

/// The manifests in `list` written into a new folder, with the gates of `src`; `previous`:
/// in the previous shape (a failed or NOT_RUN run also writes `"results"`, `"summary"` and
/// `"answer"` as null), else as this parlab writes them.
fn written(list: &[Manifest], src: &Path, previous: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for m in list {
        let path = m.write(dir.path()).unwrap();
        if previous && m.status() != Status::Ok {
            let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for key in ["results", "summary", "answer"] {
                value[key] = serde_json::Value::Null;
            }
            std::fs::write(&path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
        }
    }
    std::fs::create_dir_all(dir.path().join("_gates")).unwrap();
    std::fs::copy(src.join("_gates/gates.json"), dir.path().join("_gates/gates.json")).unwrap();
    dir
}

#[test]
fn manifests_of_the_previous_and_the_outcome_shape_give_the_same_register() {
    let src = fixtures();
    let (list, skipped) = manifest::read_all(&src);
    assert!(skipped.is_empty(), "{skipped:?}");
    let (previous, outcome) = (written(&list, &src, true), written(&list, &src, false));
    let not_run = list.iter().find(|m| m.status() == Status::NotRun).expect("a NOT_RUN fixture");
    let keys = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(Manifest::path_for(dir, &not_run.run_id)).unwrap()).unwrap()
    };
    assert!(keys(previous.path()).get("summary").is_some() && keys(outcome.path()).get("summary").is_none(), "two shapes");
    let visible = |manifests: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let out = tempfile::tempdir().unwrap();
        report::render_all(manifests, out.path()).unwrap();
        files_under(out.path()).into_iter().filter(|(p, _)| !p.to_string_lossy().starts_with('.')).collect()
    };
    let (fa, fb, fc) = (visible(&src), visible(previous.path()), visible(outcome.path()));
    assert!(fa.iter().any(|(p, _)| p == Path::new("evidence.md")) && fa.iter().any(|(p, _)| p.starts_with("tables")));
    for other in [&fb, &fc] {
        assert_eq!(fa.iter().map(|f| &f.0).collect::<Vec<_>>(), other.iter().map(|f| &f.0).collect::<Vec<_>>());
        for ((path, x), (_, y)) in fa.iter().zip(other) {
            assert!(x == y, "{} differs between the committed fixtures and a rewrite of them", path.display());
        }
    }
}

#[test]
fn the_register_references_figures_and_tables_that_exist() {
    let out = tempfile::tempdir().unwrap();
    let path = report::render_all(&fixtures(), out.path()).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let refs: Vec<&str> = text
        .split(['(', ')'])
        .filter(|s| (s.starts_with("figures/") && s.ends_with(".svg")) || (s.starts_with("tables/") && s.ends_with(".csv")))
        .collect();
    assert!(refs.iter().any(|r| r.starts_with("figures/")), "no figure referenced");
    for r in refs {
        let body = std::fs::read_to_string(out.path().join(r)).unwrap_or_else(|_| panic!("{r} referenced but not written"));
        assert!(!body.is_empty());
        if r.ends_with(".svg") {
            assert!(body.starts_with("<svg") && body.trim_end().ends_with("</svg>"), "{r} is not an SVG document");
        }
    }
}

#[test]
fn a_failed_run_is_shown_with_its_reason() {
    let dir = fixtures();
    let (list, _) = manifest::read_all(&dir);
    let failed: Vec<&Manifest> = list.iter().filter(|m| m.status() == Status::Failed).collect();
    assert!(!failed.is_empty());
    let measured = section(&rendered(&dir).markdown, "measured");
    for m in failed {
        let reason = m.reason().unwrap();
        assert!(measured.contains(&m.run_id[..12]), "failed run {} missing", &m.run_id[..12]);
        assert!(measured.contains(&report::fmt::escape(reason)), "reason `{reason}` missing from:\n{measured}");
    }
    let caveats = section(&rendered(&dir).markdown, "what-the-numbers");
    assert!(caveats.contains("run failed (") || caveats.contains("runs failed ("), "{caveats}");
}

#[test]
fn corrupt_and_foreign_manifests_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (list, _) = manifest::read_all(&fixtures());
    crate::synth::write_all(dir.path(), &list[..3]).unwrap();
    std::fs::write(dir.path().join("garbage.json"), "{ not json").unwrap();
    std::fs::write(dir.path().join("foreign.json"), r#"{"hello": "world"}"#).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = report_into(dir.path(), out.path());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "parlab report failed: {stderr}");
    assert!(stderr.contains("warning: skipped") && stderr.contains("garbage.json") && stderr.contains("foreign.json"), "{stderr}");
    let header = section(&std::fs::read_to_string(out.path().join("evidence.md")).unwrap(), "header");
    assert!(header.contains("3 manifests") && header.contains("2 files skipped"), "{header}");
    assert!(header.contains("garbage.json: not valid JSON"), "{header}");
}

/// Whether this machine has 8 GPUs (then `requires: {gpus: 8}` is met and the NOT_RUN tests
/// below say they are skipped).
fn eight_gpus_here() -> bool {
    let gpus = parlab::gates::probe("gpus", "nvidia-smi -L", std::time::Duration::from_secs(30));
    let eight = gpus.succeeded() && gpus.output.lines().filter(|l| l.starts_with("GPU ")).count() >= 8;
    if eight {
        eprintln!("skipped: this machine has 8 GPUs, so `requires: {{gpus: 8}}` is met");
    }
    eight
}

#[test]
fn an_unmet_requirement_is_not_run_and_quotes_the_probe() {
    let root = root();
    if eight_gpus_here() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("eight-gpus.yaml");
    std::fs::write(&spec, "name: eight-gpus\nkind: collectives\nworld: 2\nlink: mpi-shm\nrequires: {gpus: 8}\nops: [all-reduce]\nsizes: {from: 4, to: 64, factor: 4}\n").unwrap();
    let manifests = tmp.path().join("manifests");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .current_dir(&root)
        .args(["run", "--no-report"])
        .arg(&spec)
        .env("PARLAB_MANIFESTS", &manifests)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let out = tmp.path().join("reports");
    let text = std::fs::read_to_string(report::render_all(&manifests, &out).unwrap()).unwrap();
    let not_run = section(&text, "not-run");
    assert!(not_run.contains("eight-gpus") && not_run.contains("gpus ≥ 8"), "{not_run}");
    assert!(not_run.contains("`nvidia-smi -L`") && not_run.contains("needs 8 GPUs"), "the probe is not quoted:\n{not_run}");
    assert!(!section(&text, "measured").contains("eight-gpus"), "a NOT_RUN run leaked into MEASURED");
    if parlab::gates::saved_path(&manifests).exists() {
        let machine = section(&text, "what-this-machine");
        assert!(machine.contains("| gpus | `nvidia-smi -L` |"), "the saved gates are not shown:\n{machine}");
    }
}

/// `parlab run` probes once per machine and boot: a second run decides its NOT_RUN on the cached
/// probes and says so on stderr and in the NOT_RUN reason; `--reprobe` probes again.
#[test]
fn a_second_run_uses_the_cached_gates_and_labels_its_not_run_decision() {
    if eight_gpus_here() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("eight-gpus.yaml");
    std::fs::write(
        &spec,
        "name: eight-gpus\nkind: collectives\nworld: 2\nlink: mpi-shm\nrequires: {gpus: 8}\nops: [all-reduce]\nsizes: [4]\n",
    )
    .unwrap();
    let manifests = tmp.path().join("manifests");
    let run = |extra: &[&str]| {
        let _ = std::fs::remove_dir_all(&manifests);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
            .current_dir(root())
            .args(["run", "--no-report"])
            .args(extra)
            .arg(&spec)
            .env("PARLAB_MANIFESTS", &manifests)
            .env("PARLAB_STATE", tmp.path().join("state"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let (list, _) = manifest::read_all(&manifests);
        assert_eq!(list.len(), 1, "{stderr}");
        (stderr, list[0].reason().unwrap_or_default().to_string())
    };
    let (stderr, reason) = run(&[]);
    assert!(stderr.contains("probing the machine (gates; no cached probes yet)"), "{stderr}");
    assert!(reason.contains("needs 8 GPUs") && !reason.contains("cached"), "{reason}");
    let (stderr, reason) = run(&[]);
    assert!(stderr.contains("parlab: gates: using the probes taken at"), "{stderr}");
    assert!(reason.contains("needs 8 GPUs") && reason.contains(", cached; `--reprobe` probes again)"), "{reason}");
    let (stderr, reason) = run(&["--reprobe"]);
    assert!(stderr.contains("probing the machine (gates; --reprobe)"), "{stderr}");
    assert!(reason.contains("needs 8 GPUs") && !reason.contains("cached"), "{reason}");
}

#[test]
fn rendered_sections_match_their_snapshots() {
    let markdown = rendered(&fixtures()).markdown;
    let dir = root().join("tests/fixtures/snapshots");
    let found = sections(&markdown);
    assert!(found.len() >= 6, "expected header and five sections, found {:?}", found.iter().map(|s| &s.0).collect::<Vec<_>>());
    for (slug, text) in found {
        let path = dir.join(format!("{slug}.md"));
        if updating() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("no snapshot {} (PARLAB_UPDATE_SNAPSHOTS=1 writes it)", path.display()));
        assert!(
            want == text,
            "section `{slug}` differs from {} (PARLAB_UPDATE_SNAPSHOTS=1 to accept):\n--- want\n{want}\n--- got\n{text}",
            path.display()
        );
    }
}

#[test]
fn the_default_suite_has_experiments_this_machine_may_not_run() {
    root();
    let plans = parlab::spec::load_suite(&[
        PathBuf::from("experiments/host-device-link.yaml"),
        PathBuf::from("experiments/nccl-collectives.yaml"),
        PathBuf::from("experiments/decode-cuda.yaml"),
        PathBuf::from("experiments/gpu-memory.yaml"),
    ])
    .unwrap();
    let gates = crate::synth::gates();
    for plan in &plans {
        let unmet = gates.unmet(&plan.requires);
        assert!(!unmet.is_empty(), "{} would run on a machine without GPUs", plan.experiment);
        // Every run is held back by a GPU probe; a graph run also by the capture probe, which
        // these synthetic gates lack.
        let gpu = |r: &String| r.contains("nvidia-smi") || r.contains("torch");
        assert!(unmet.iter().any(gpu) && unmet.iter().all(|r| gpu(r) || r.contains("CUDA graph capture")), "{unmet:?}");
    }
}

/// `parlab run --no-report SPEC` from `root` into `tmp`'s manifests and state folders, which
/// must exit 0; returns those folders.
fn run_without_a_register(root: &Path, spec: &Path, tmp: &Path) -> (PathBuf, PathBuf) {
    let (manifests, state) = (tmp.join("manifests"), tmp.join("state"));
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_parlab"))
        .current_dir(root)
        .args(["run", "--no-report"])
        .arg(spec)
        .env("PARLAB_MANIFESTS", &manifests)
        .env("PARLAB_STATE", &state)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    (manifests, state)
}

#[test]
fn a_cuda_run_is_never_launched_where_parlabs_libtorch_sees_no_gpu() {
    let root = root();
    if tch::Cuda::device_count() > 0 {
        eprintln!("skipped: libtorch sees {} CUDA devices here, so a cuda run is launched", tch::Cuda::device_count());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("on-gpu.yaml");
    std::fs::write(&spec, "name: on-gpu\nkind: decode\nmodel: gpt2\nstrategy: [data, tensor]\nworld: 2\ndevice: cuda\nnew_tokens: 4\n")
        .unwrap();
    let (manifests, state) = run_without_a_register(&root, &spec, tmp.path());
    let (list, _) = parlab::manifest::read_all(&manifests);
    assert_eq!(list.len(), 2, "both cuda runs get a manifest");
    for m in &list {
        assert_eq!(m.status(), parlab::manifest::Status::NotRun, "{}", m.plan.label());
        let reason = m.reason().unwrap_or_default();
        assert!(reason.contains("needs a CUDA device visible to parlab's libtorch") && reason.contains("CUDA devices: 0"), "{reason}");
        assert!(m.launch().is_none() && m.results().is_none(), "{} was launched", m.plan.label());
        assert!(m.plan.label().ends_with(" cuda"), "{}", m.plan.label());
    }
    assert!(!state.join("checkpoints").exists(), "a NOT_RUN cuda run made a checkpoint");
    // A graph run: the same probe holds it back, and its label says what would have run.
    let graph = tmp.path().join("graph.yaml");
    std::fs::write(
        &graph,
        "name: on-gpu-graph\nkind: decode\nmodel: gpt2\nstrategy: data\nworld: 1\ndevice: cuda\nstep: graph\nnew_tokens: 4\n",
    )
    .unwrap();
    let (manifests, _) = run_without_a_register(&root, &graph, tmp.path());
    let (list, _) = parlab::manifest::read_all(&manifests);
    let m = list.iter().find(|m| m.experiment == "on-gpu-graph").expect("the graph run's manifest");
    assert_eq!(m.status(), parlab::manifest::Status::NotRun);
    assert!(m.reason().unwrap_or_default().contains("needs a CUDA device visible to parlab's libtorch"), "{:?}", m.reason());
    assert!(m.launch().is_none() && m.plan.label().ends_with(" cuda step=graph"), "{}", m.plan.label());
}

/// `make bench`: render a register from 10,000 synthetic manifests and print the time.
#[test]
#[ignore = "benchmark: run by ci/bench.sh"]
fn bench_render_10000_manifests() {
    root();
    let n: usize = std::env::var("PARLAB_BENCH_MANIFESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let temp = tempfile::tempdir().unwrap();
    // PARLAB_BENCH_STORE keeps the synthetic store (to render it with two builds and compare).
    let dir = std::env::var_os("PARLAB_BENCH_STORE").map_or_else(|| temp.path().to_path_buf(), std::path::PathBuf::from);
    let plans = crate::synth::plans().unwrap();
    crate::synth::write_all(&dir, &crate::synth::manifests(&plans, n, true)).unwrap();
    parlab::gates::save(&crate::synth::gates(), &dir).unwrap();
    let out = tempfile::tempdir().unwrap();
    let rss_before = peak_rss_kib();
    let start = std::time::Instant::now();
    let path = report::render_all(&dir, out.path()).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "bench: render_all of {} manifests: {seconds:.3} s; evidence.md {size} bytes; peak RSS {} MiB (before rendering {} MiB)",
        n + 1,
        peak_rss_kib() / 1024,
        rss_before / 1024
    );
    let t = std::time::Instant::now();
    let (list, skipped) = manifest::read_all(&dir);
    let read = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let r = report::render(&list, &skipped, parlab::gates::load(&dir), Path::new(report::templates::DIR)).unwrap();
    let render = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    report::write(&r, out.path()).unwrap();
    println!(
        "bench: of which reading manifests {read:.3} s, rendering {render:.3} s, writing {:.3} s ({} tables, {} figures)",
        t.elapsed().as_secs_f64(),
        r.tables.len(),
        r.figures.len()
    );
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

#[test]
fn every_fitted_line_passes_within_25_percent_of_the_smallest_median_it_was_fitted_to() {
    let (list, _) = manifest::read_all(&fixtures());
    let facts = report::facts::Facts::read(&list);
    let fits: Vec<_> = facts.fits.iter().filter(|f| f.fit.world == 2).collect();
    assert!(!fits.is_empty(), "the fixtures hold 2-rank fits");
    for stored in fits {
        let fit = &stored.fit;
        let fitted = facts.collectives.iter().filter(|r| r.run == stored.run && r.op == fit.op && r.size <= fit.fit_max_bytes);
        let smallest = fitted.min_by_key(|r| r.size).expect("the sizes the fit used");
        let measured = smallest.op_time.as_ref().unwrap_or(&smallest.time).median;
        let predicted = fit.predict(smallest.size as f64);
        let error = (predicted - measured).abs() / measured;
        assert!(
            error <= 0.25,
            "{} {} over {} ({}): line {predicted:.3e} s vs median {measured:.3e} s at {} B",
            stored.experiment,
            fit.op.name(),
            stored.link,
            stored.run,
            smallest.size
        );
        let (steps, factor) = parlab::costmodel::link::op_factors(fit.op, fit.world);
        let line = fit.line;
        assert!(
            (fit.alpha_per_step_s * steps - line.intercept_s).abs() <= 1e-12 + 1e-9 * line.intercept_s.abs(),
            "α is the intercept per ring step"
        );
        let beta = fit.beta_bps.expect("a positive slope");
        assert!((factor / beta - line.slope_s_per_byte).abs() <= 1e-9 * line.slope_s_per_byte.max(1e-30), "β = factor / slope");
        // The predictions use the same fit: the 2-rank fit of this op and link is this one.
        let predictions = parlab::costmodel::predict::two_rank_fits(&list);
        if let Some((same, run)) = predictions.get(&(fit.op, stored.link.clone())) {
            if run.starts_with(&stored.run) {
                assert_eq!(same, fit, "the predictions' fit is the stored one");
            }
        }
    }
}

/// Every data file of the register, read by Python's standard `csv` module: columns named with
/// a unit (`_s`, `_bytes`, `_Bps`, `_fraction`) hold numbers, and no cell anywhere holds a unit.
const CSV_CHECK: &str = r#"
import csv, re, sys
unit = re.compile(r"^[-+]?[0-9.]+(e-?[0-9]+)? ?(ns|µs|us|ms|s|B|KiB|MiB|GiB|TiB|GB/s|%)( \(.*\))?$")
bad = []
for path in sys.argv[1:]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for name, cell in row.items():
            if cell and name.endswith(("_s", "_bytes", "_Bps", "_fraction")):
                try:
                    float(cell)
                except ValueError:
                    bad.append(f"{path}: {name} = {cell!r} is not a number")
            if unit.match(cell or ""):
                bad.append(f"{path}: {name} = {cell!r} holds a unit")
print("\n".join(bad[:20]))
sys.exit(1 if bad else 0)
"#;

#[test]
fn every_table_leaves_as_numbers_in_csv_and_parquet() {
    let r = rendered(&fixtures());
    let out = tempfile::tempdir().unwrap();
    report::write(&r, out.path()).unwrap();
    let csvs: Vec<PathBuf> = r.tables.iter().filter(|(p, _)| p.ends_with(".csv")).map(|(p, _)| out.path().join(p)).collect();
    assert!(csvs.len() >= 10, "{} tables", csvs.len());
    let check = std::process::Command::new("python3").arg("-c").arg(CSV_CHECK).args(&csvs).output().unwrap();
    assert!(check.status.success(), "{}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));
    let (name, bytes) = r.tables.iter().find(|(p, _)| p.ends_with("collectives-all-reduce.parquet")).unwrap();
    use polars::prelude::SerReader;
    let df = polars::prelude::ParquetReader::new(std::io::Cursor::new(bytes.clone())).finish().unwrap();
    for col in ["median_s", "size_bytes", "busbw_Bps", "min_s", "max_s"] {
        assert_eq!(df.column(col).unwrap().dtype(), &polars::prelude::DataType::Float64, "{name}: {col}");
    }
    assert_eq!(df.column("world").unwrap().dtype(), &polars::prelude::DataType::UInt64, "{name}: world");
}

#[test]
fn the_all_reduce_by_phase_table_joins_each_split_run_with_the_fit_of_its_link_and_world() {
    use parlab::table::Cell;
    let (list, _) = manifest::read_all(&fixtures());
    let facts = report::facts::Facts::read(&list);
    let families = report::measured::families(&facts);
    let table = families.iter().flat_map(|f| &f.tables).find(|t| t.id == "measured-all-reduce-by-phase").expect("the table");
    let col = |name: &str| table.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("column {name}"));
    let split: Vec<_> = facts.decode.iter().filter(|r| r.world > 1 && r.overlap.is_none() && !r.all_reduces.is_empty()).collect();
    assert_eq!(table.rows.len(), split.iter().map(|r| r.all_reduces.len()).sum::<usize>(), "one row per split run and phase");
    for row in &table.rows {
        let Cell::Text(run) = &row[col("run")] else { panic!("run cell") };
        let r = split.iter().find(|r| &r.run == run).expect("the run");
        let Cell::Text(phase) = &row[col("phase")] else { panic!("phase cell") };
        let a = r.all_reduces.iter().find(|a| a.phase.name() == phase).expect("the phase");
        let fit = facts
            .fits
            .iter()
            .find(|f| f.fit.op == parlab::spec::Op::AllReduce && f.fit.world == r.world && f.link == r.link)
            .expect("a fit");
        assert_eq!(row[col("α–β predicted")], Cell::Seconds(fit.fit.predict(a.size_bytes as f64)), "{run} {phase}");
        assert_eq!(row[col("fastest rank per call")], Cell::Seconds(a.fastest_rank.median));
    }
    let sizes: Vec<_> = table.rows.iter().map(|r| r[col("message")].clone()).collect();
    assert!(
        sizes.contains(&Cell::Bytes(32.0 * 768.0 * 4.0)) && sizes.contains(&Cell::Bytes(768.0 * 4.0)),
        "prefill and decode messages: {sizes:?}"
    );
}

#[test]
fn a_decode_table_shows_the_threads_model_and_device_where_its_runs_differ_in_them() {
    let (mut list, _) = manifest::read_all(&fixtures());
    let columns = |list: &[parlab::manifest::Manifest]| -> Vec<String> {
        let facts = report::facts::Facts::read(list);
        let families = report::measured::families(&facts);
        families.iter().flat_map(|f| &f.tables).find(|t| t.id == "measured-synth-decode").expect("the table").columns.clone()
    };
    let before = columns(&list);
    assert!(!before.iter().any(|c| c == "threads" || c == "model" || c == "device"), "{before:?}");
    let run = list.iter_mut().find(|m| m.experiment == "synth-decode" && m.layout.world == 2).unwrap();
    run.plan.threads_per_rank = 2;
    let after = columns(&list);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert!(after.iter().any(|c| c == "threads"), "{after:?}");
}

#[test]
fn the_overlap_table_sets_each_overlapped_run_against_the_blocking_run_of_its_split() {
    use parlab::table::Cell;
    let (list, _) = manifest::read_all(&fixtures());
    let facts = report::facts::Facts::read(&list);
    let families = report::measured::families(&facts);
    let table = families.iter().flat_map(|f| &f.tables).find(|t| t.id == "measured-overlap-hidden").expect("the table");
    let col = |name: &str| table.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("column {name}"));
    let overlapped = facts.decode.iter().filter(|r| r.overlap.is_some()).count();
    assert!(overlapped >= 2, "the synthetic suite overlaps at worlds 2 and 4");
    assert_eq!(table.rows.len(), 2 * overlapped, "a prefill and a decode row per overlapped run");
    let text = |row: &Vec<Cell>, name: &str| match &row[col(name)] {
        Cell::Text(t) => t.clone(),
        other => panic!("{name}: {other:?}"),
    };
    for row in &table.rows {
        let run = |name: &str| facts.decode.iter().find(|r| r.run == text(row, name)).expect("the run");
        let (off, on) = (run("blocking run"), run("overlapped run"));
        assert!(off.overlap.is_none() && on.overlap == Some(4));
        assert_eq!((off.experiment.as_str(), off.world, &off.link), (on.experiment.as_str(), on.world, &on.link));
        let phase = text(row, "phase");
        let total = |r: &report::facts::DecodeRow| r.all_reduces.iter().find(|a| a.phase.name() == phase).unwrap().total.unwrap().median;
        let want = (total(off) - total(on)) / total(off);
        assert_eq!(row[col("hidden")], Cell::Change(want), "{phase} world {}", on.world);
        assert!(want > 0.0, "the synthetic overlap hides time: {want}");
    }
    // A blocking run of the same split but for its threads (or dtype, model, device) is not
    // its pair, even listed first.
    let runs = |rows: &[report::facts::DecodeRow]| -> Vec<(String, String)> {
        report::facts::overlap_pairs(rows).iter().map(|(off, on)| (off.run.clone(), on.run.clone())).collect()
    };
    let pairs = runs(&facts.decode);
    let mut rows = facts.decode.clone();
    for (change, name) in [(0, "threads"), (1, "dtype"), (2, "model")] {
        let mut other = rows.iter().find(|r| r.run == pairs[0].0).unwrap().clone();
        match change {
            0 => other.threads += 1,
            1 => other.dtype = Some(parlab::spec::schema::Dtype::Bfloat16),
            _ => other.model = "another".into(),
        }
        other.run = format!("other-{name}");
        rows.insert(0, other);
    }
    assert_eq!(runs(&rows), pairs);
}

#[test]
fn an_nccl_run_is_not_run_by_probe_without_a_gpu_per_rank() {
    let root = root();
    if tch::Cuda::device_count() > 0 {
        eprintln!("skipped: libtorch sees {} CUDA devices here, so an NCCL run may be launched", tch::Cuda::device_count());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("over-nccl.yaml");
    let text = "name: over-nccl\nkind: collectives\nworld: [1, 2]\nlink: [nccl, nccl-no-p2p]\nops: [all-reduce]\nsizes: [1KiB, 1MiB]\n";
    std::fs::write(&spec, text).unwrap();
    let (manifests, _state) = run_without_a_register(&root, &spec, tmp.path());
    let (list, _) = parlab::manifest::read_all(&manifests);
    assert_eq!(list.len(), 4, "every NCCL point gets a manifest");
    let ids: std::collections::BTreeSet<_> = list.iter().map(|m| m.run_id.clone()).collect();
    assert_eq!(ids.len(), 4, "the NCCL environment (the link) is part of the run identity");
    for m in &list {
        assert_eq!(m.status(), parlab::manifest::Status::NotRun, "{}", m.plan.label());
        assert_eq!(m.plan.backend, parlab::spec::link::Backend::Nccl, "{}", m.plan.label());
        assert!(m.plan.requires.nccl && m.plan.requires.cuda, "{:?}", m.plan.requires);
        let reason = m.reason().unwrap_or_default();
        let world = m.plan.layout.world;
        let gpus = if world == 1 { "needs 1 GPU (one per NCCL rank" } else { "needs 2 GPUs (one per NCCL rank" };
        assert!(reason.contains(gpus) && reason.contains("CUDA devices: 0"), "{reason}");
        assert!(m.launch().is_none(), "{} was launched", m.plan.label());
    }
    let gates = parlab::gates::load(&manifests).unwrap().expect("gates saved beside the manifests");
    let probe = gates.get(parlab::gates::ProbeName::Nccl).expect("an nccl probe");
    assert_eq!(probe.command, parlab::nccl::PROBE_COMMAND, "NCCL is probed in process, as a rank loads it");
}

#[test]
fn every_decode_run_in_the_register_has_a_predicted_step_a_hypothesis_and_past_25_percent_an_assumption() {
    use parlab::costmodel::step::{predict_steps, FailedAssumption, Outcome, TOLERANCE};
    use parlab::manifest::summary::Summary;
    let mut list = crate::synth::fixtures().unwrap();
    // A context split that decodes on rank 0 communicates nothing per step (as real runs record);
    // the synthetic generator gives every multi-rank run communication, so take it out here.
    for m in list.iter_mut().filter(|m| m.layout.strategy == parlab::spec::Strategy::Context) {
        if let Some(Summary::Decode(d)) = m.summary_mut() {
            d.step_s.median -= d.comm_s.median;
            d.comm_s = crate::synth::flat(0.0, d.comm_s.n);
        }
    }
    let decode: Vec<&Manifest> = list.iter().filter(|m| m.kind == Kind::Decode && m.status() == Status::Ok).collect();
    assert!(decode.len() >= 6, "the synthetic suite decodes tensor and context splits at worlds 1, 2 and 4");
    let predictions = predict_steps(&list);
    assert_eq!(predictions.len(), decode.len(), "one prediction per measured decode run");
    for p in &predictions {
        assert!(p.own.step_s > 0.0 && p.shared.step_s > 0.0 && p.shared.step_s >= p.own.step_s, "{}: {:?} {:?}", p.run_id, p.own, p.shared);
        let matched = p.matched().step_s;
        assert!((p.error - (matched - p.measured_step_s) / p.measured_step_s).abs() < 1e-12);
        match (&p.outcome, p.error.abs() > TOLERANCE) {
            (Outcome::Within, false) | (Outcome::AssumptionFailed(_), true) => {}
            (other, past) => panic!("{} world {} error {:.3} (past 25 %: {past}): {other:?}", p.run_id, p.world, p.error),
        }
    }
    let kinds = |world: u32, overlap: Option<u32>| -> Vec<&Outcome> {
        predictions
            .iter()
            .filter(|p| p.world == world && p.overlap == overlap && p.strategy == parlab::spec::Strategy::Tensor)
            .map(|p| &p.outcome)
            .collect()
    };
    assert!(kinds(4, None)
        .iter()
        .all(|o| matches!(o, Outcome::AssumptionFailed(FailedAssumption::Oversubscribed { ranks: 4, cores: 2, .. }))));
    assert!(kinds(2, Some(4)).iter().all(|o| matches!(o, Outcome::AssumptionFailed(FailedAssumption::NoProgressThread { pieces: 4 }))));
    assert!(kinds(2, None).iter().all(|o| matches!(o, Outcome::AssumptionFailed(FailedAssumption::CallsAsInIsolation { .. }))));

    let table = report::predicted::decode_tables(&list).into_iter().next().expect("the table");
    assert_eq!(table.rows.len(), decode.len(), "a row per decode run");
    let col = |name: &str| table.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("column {name}"));
    for row in &table.rows {
        for name in ["predicted, own bandwidth", "predicted, shared memory"] {
            assert!(matches!(row[col(name)], parlab::table::Cell::Seconds(s) if s > 0.0), "{name}: {row:?}");
        }
        let parlab::table::Cell::Text(hypothesis) = &row[col("matches")] else { panic!("matches: {row:?}") };
        assert!(["own bandwidth", "shared memory", "both (same prediction)"].contains(&hypothesis.as_str()));
        let parlab::table::Cell::Change(error) = row[col("error")] else { panic!("error: {row:?}") };
        let parlab::table::Cell::Text(assumption) = &row[col("assumption not holding (step)")] else { panic!("{row:?}") };
        assert_eq!(error.abs() > TOLERANCE, !assumption.starts_with("– (within"), "{assumption} at {error}");
        assert!(!assumption.starts_with("none known"), "{row:?}");
    }

    // Every context split over several ranks has its prefill predicted from the unsplit one.
    let context = decode.iter().filter(|m| m.layout.strategy == parlab::spec::Strategy::Context && m.layout.world > 1).count();
    let prefills = parlab::costmodel::step::predict_prefills(&list);
    assert!(context >= 2);
    assert_eq!(prefills.len(), context, "one prefill prediction per context split");
    let unsplit = list
        .iter()
        .find(|m| m.layout.strategy == parlab::spec::Strategy::Context && m.layout.world == 1 && m.status() == Status::Ok)
        .and_then(|m| m.summary()?.decode())
        .expect("the unsplit context run");
    for p in &prefills {
        assert!((p.compute_s - unsplit.prefill_s.median / p.world as f64).abs() < 1e-15);
        assert!(p.ring_s > 0.0 && p.handoff_s > 0.0);
        assert_eq!(p.outcome == Outcome::Within, p.error.abs() <= TOLERANCE, "{p:?}");
    }
    assert_eq!(report::predicted::context_prefill_table(&list).expect("the prefill table").rows.len(), context);
}

#[test]
fn a_context_split_shares_the_unsplit_prefill_of_its_own_threads_per_rank_where_one_ran() {
    use parlab::manifest::summary::Summary;
    use parlab::spec::Strategy;
    let mut list = crate::synth::fixtures().unwrap();
    let context = |m: &Manifest, world: u32| m.layout.strategy == Strategy::Context && m.layout.world == world && m.summary().is_some();
    let rank_threads = list.iter().find(|m| context(m, 2)).unwrap().plan.threads_per_rank;
    // The unsplit prefill on the whole machine: twice the threads of a split's rank, 600 ms.
    let whole = list.iter_mut().find(|m| context(m, 1)).unwrap();
    whole.plan.threads_per_rank = 2 * rank_threads;
    let set_prefill = |m: &mut Manifest, s: f64| {
        if let Some(Summary::Decode(d)) = m.summary_mut() {
            d.prefill_s.median = s;
        }
    };
    set_prefill(whole, 0.6);
    let mut one_thread = whole.clone();
    let compute = |list: &[Manifest]| -> Vec<f64> {
        parlab::costmodel::step::predict_prefills(list).iter().filter(|p| p.world == 2).map(|p| p.compute_s).collect()
    };
    assert!(compute(&list).iter().all(|c| (c - 0.3).abs() < 1e-12), "only the whole machine's ran: {:?}", compute(&list));
    // The same prefill on the rank's threads took 1.05 s (two threads did it 1.75x faster, not 2x).
    one_thread.run_id = "f".repeat(64).into(); // last by identity: chosen for its threads alone
    one_thread.plan.threads_per_rank = rank_threads;
    set_prefill(&mut one_thread, 1.05);
    list.push(one_thread);
    let now = compute(&list);
    assert!(!now.is_empty() && now.iter().all(|c| (c - 0.525).abs() < 1e-12), "{now:?}");
    // On a larger machine a world-2 split's ranks run 8 threads each: of a 1-thread and a
    // 16-thread unsplit run, the nearer in ratio (16: no rank gets one thread's speed); an
    // 8-thread one, where it ran, before both.
    for m in list.iter_mut().filter(|m| context(m, 2)) {
        m.plan.threads_per_rank = 8;
    }
    for m in list.iter_mut().filter(|m| context(m, 1) && m.plan.threads_per_rank == 2 * rank_threads) {
        m.plan.threads_per_rank = 16;
    }
    assert!(compute(&list).iter().all(|c| (c - 0.3).abs() < 1e-12), "{:?}", compute(&list));
    let mut eight = list.iter().find(|m| context(m, 1)).unwrap().clone();
    eight.run_id = "e".repeat(64).into();
    eight.plan.threads_per_rank = 8;
    set_prefill(&mut eight, 0.7);
    list.push(eight);
    assert!(compute(&list).iter().all(|c| (c - 0.35).abs() < 1e-12), "{:?}", compute(&list));
}

/// Writes the fixture `m` into `dir` with the JSON number at `pointer` replaced by `number`
/// (written as text, so `1e999` reaches the reader as written).
fn write_with_number(dir: &Path, m: &Manifest, pointer: &str, number: &str) {
    let mut value = serde_json::to_value(m).unwrap();
    *value.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} in {}", m.experiment)) = serde_json::json!("@NUMBER@");
    let text = serde_json::to_string(&value).unwrap().replace("\"@NUMBER@\"", number);
    std::fs::write(dir.join(format!("{}.json", m.run_id)), text).unwrap();
}

#[test]
fn a_manifest_with_an_implausible_number_is_skipped_with_the_reason_and_never_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let (list, _) = manifest::read_all(&fixtures());
    let ok_of = |kind: Kind| list.iter().filter(move |m| m.kind == kind && m.status() == Status::Ok);
    let mut decodes = ok_of(Kind::Decode);
    write_with_number(dir.path(), decodes.next().unwrap(), "/summary/decode/step_s/median", "1e308");
    write_with_number(dir.path(), decodes.next().unwrap(), "/summary/decode/step_s/median", "1e999");
    write_with_number(dir.path(), ok_of(Kind::Collectives).next().unwrap(), "/summary/collectives/rows/0/time_s/min", "-3.0");
    crate::synth::write_all(dir.path(), &[ok_of(Kind::Membw).next().unwrap().clone()]).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = report_into(dir.path(), out.path());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "parlab report failed: {stderr}");
    assert!(stderr.contains("implausible number at summary.decode.step_s.median: 1e+308 (more than 1e15 s)"), "{stderr}");
    assert!(stderr.contains("implausible number at summary.collectives.rows[0].time_s.min: -3.0 (a negative time)"), "{stderr}");
    assert!(stderr.contains("not valid JSON (number out of range"), "1e999 is refused by the JSON reader: {stderr}");
    let register = std::fs::read_to_string(out.path().join("evidence.md")).unwrap();
    let header = section(&register, "header");
    assert!(header.contains("1 manifests") && header.contains("3 files skipped"), "{header}");
    let longest_digits = register.split(|c: char| !c.is_ascii_digit()).map(str::len).max().unwrap_or(0);
    assert!(longest_digits < 30, "a number of {longest_digits} digits in the register");
    let audit = std::process::Command::new(env!("CARGO_BIN_EXE_parlab")).args(["audit", "--manifests"]).arg(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&audit.stderr).contains("implausible number at summary.decode.step_s.median"), "audit skips it too");
}

/// One GPU decode manifest of `plan`: a step of `step_s` on `cuda:0`, its captured graph's
/// nodes where it replayed one.
fn gpu_decode(plan: &parlab::spec::RunPlan, step_s: f64, nodes: Option<parlab::cuda_graph::GraphNodes>) -> Manifest {
    let launch = manifest::Launch {
        command: "mpirun -np 1 parlab rank".into(),
        oversubscribed: false,
        wall_s: 3.0,
        exit_code: Some(0),
        transport: String::new(),
        ranks: Vec::new(),
        nccl: Vec::new(),
    };
    let outcome = manifest::Outcome::Ok {
        launch: Some(launch),
        results: None,
        summary: Box::new(crate::synth::decode_summary(step_s, 1.0 / step_s)),
        answer: Some(Box::new(crate::synth::answer(vec![3, 1, 4], 1e-4, 0.5))),
        launches: None,
    };
    let mut m = Manifest::for_plan(plan, crate::synth::gates().fingerprint(), "2026-12-05T00:00:00Z", outcome);
    if let Some(parlab::manifest::summary::Summary::Decode(d)) = m.summary_mut() {
        d.strategy = plan.layout.strategy;
        d.world = plan.layout.world;
        d.gpu = Some("cuda:0 float32".into());
        d.graph_nodes = nodes;
    }
    m
}

#[test]
fn a_graph_run_shows_its_step_its_kernels_and_the_eager_step_against_them() {
    root();
    let plans = parlab::spec::load_suite(&[PathBuf::from("experiments/decode-cuda.yaml")]).unwrap();
    let float32_gpt2 = |p: &&parlab::spec::RunPlan| {
        p.layout.world == 1
            && p.model.as_ref().is_some_and(|m| m.name == "gpt2")
            && matches!(p.workload, parlab::spec::Workload::Decode { dtype: parlab::spec::schema::Dtype::Float32, .. })
    };
    let pair: Vec<&parlab::spec::RunPlan> = plans.iter().filter(float32_gpt2).collect();
    assert_eq!(pair.iter().map(|p| p.step.name()).collect::<Vec<_>>(), ["eager", "graph"]);
    let nodes = parlab::cuda_graph::GraphNodes { kernels: 212, all: 215 };
    let list = vec![gpu_decode(pair[0], 3.3e-3, None), gpu_decode(pair[1], 0.9e-3, Some(nodes))];
    let r = report::render(&list, &[], Ok(None), Path::new(report::templates::DIR)).unwrap();
    let text = &r.markdown;
    assert!(text.contains("step mode: eager, every operator launched by the host"), "the decode table explains its step column");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| data | 1 |")).collect();
    assert!(rows.len() == 2 && rows[0].contains("| eager |") && rows[1].contains("| graph |"), "{rows:#?}");
    assert!(
        text.contains("step=graph (cuda:0 float32): step 900 µs") && text.contains("its captured graph holds 212 kernels (215 nodes)"),
        "{text}"
    );
    let graph_run = &pair[1].run_id.short().to_string();
    assert!(
        text.contains(&format!("the captured fixed-shape step of this model and dtype (run {graph_run}) holds 212 kernels")),
        "the eager step is set against the kernels counted in the graph: {text}"
    );
    let figure = r.figures.iter().find(|f| f.svg.contains(" graph cuda<") || f.svg.contains(" graph 2t cuda<")).map(|f| f.file.clone());
    assert!(figure.is_some(), "the graph bar is labelled in its figure");
}

#[test]
fn a_graph_run_is_never_the_unsplit_baseline_of_eager_splits() {
    root();
    let plans = parlab::spec::load_suite(&[PathBuf::from("experiments/decode-cuda.yaml")]).unwrap();
    let gpt2_f32 = |p: &&parlab::spec::RunPlan| {
        p.model.as_ref().is_some_and(|m| m.name == "gpt2")
            && matches!(p.workload, parlab::spec::Workload::Decode { dtype: parlab::spec::schema::Dtype::Float32, .. })
    };
    let runs: Vec<&parlab::spec::RunPlan> = plans.iter().filter(gpt2_f32).collect();
    let steps: Vec<(u32, &str)> = runs.iter().map(|p| (p.layout.world, p.step.name())).collect();
    assert_eq!(steps, [(1, "eager"), (1, "graph"), (2, "eager")]);
    // The graph run is the fastest world-1 run: were it a baseline, it would be picked.
    let list = vec![gpu_decode(runs[0], 3.3e-3, None), gpu_decode(runs[1], 0.9e-3, None), gpu_decode(runs[2], 4.0e-3, None)];
    let facts = report::facts::Facts::read(&list);
    assert_eq!(facts.decode.len(), 3, "every run is a row of the decode table");
    let baseline = parlab::findings::one_experiment(facts.decode.iter());
    let chosen: Vec<&str> = baseline.iter().map(|r| r.run.as_str()).collect();
    let short = |p: &parlab::spec::RunPlan| p.run_id.short().to_string();
    assert_eq!(chosen, [short(runs[0]), short(runs[2])], "the eager world-1 run and the split, never the graph run");
}

#[test]
fn a_half_precision_graph_run_is_audited_against_the_float32_graph_run() {
    root();
    let plans = parlab::spec::load_suite(&[PathBuf::from("experiments/decode-cuda.yaml")]).unwrap();
    let one_rank_gpt2: Vec<&parlab::spec::RunPlan> =
        plans.iter().filter(|p| p.layout.world == 1 && p.model.as_ref().is_some_and(|m| m.name == "gpt2")).collect();
    let list: Vec<Manifest> = one_rank_gpt2.iter().map(|p| gpu_decode(p, 1e-3, None)).collect();
    let short = |m: &Manifest| m.run_id.short().to_string();
    let rows = parlab::precision::audit(&list);
    assert_eq!(rows.len(), 2, "the two bfloat16 runs");
    for row in &rows {
        let half = list.iter().find(|m| short(m) == row.run).unwrap();
        let twin = list.iter().find(|m| Some(short(m)) == row.twin).expect("a float32 twin");
        assert_eq!(twin.plan.step, half.plan.step, "{} is graded against a run of the same step mode", row.layout);
        assert_eq!(row.layout.contains("step=graph"), half.plan.step == parlab::spec::schema::StepMode::Graph, "{}", row.layout);
    }
}
