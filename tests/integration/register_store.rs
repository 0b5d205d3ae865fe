//! The register stays with its store: `parlab run` renders beside its manifests folder (or into
//! `--out DIR`), and no render replaces a register rendered from another manifests folder.

use super::launch::{small_collectives, Suite};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn parlab(dir: &Path, args: &[&str], manifests: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_parlab"));
    cmd.args(args).current_dir(dir).env("PARLAB_MANIFESTS", manifests).env_remove("PARLAB_FAULT");
    cmd.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    files
}

#[test]
fn a_run_on_another_store_from_the_project_root_leaves_reports_byte_identical() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reports = root.join("reports");
    let before = snapshot(&reports);
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("spec.yaml");
    std::fs::write(&spec, small_collectives("elsewhere", "60s", "")).unwrap();
    let store = tmp.path().join("x");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_parlab"));
    cmd.arg("run").arg(&spec).current_dir(root).env("PARLAB_MANIFESTS", &store).env("PARLAB_STATE", tmp.path().join("state"));
    let out = cmd.env_remove("PARLAB_FAULT").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(snapshot(&reports) == before, "reports/ changed under a run on {}", store.display());
    let beside = tmp.path().join("x-reports");
    assert!(beside.join("evidence.md").is_file(), "the register is rendered beside its store: {}", stderr(&out));
    assert!(stderr(&out).contains(&beside.join("evidence.md").display().to_string()), "{}", stderr(&out));
}

#[test]
fn run_out_renders_there_and_a_register_of_another_store_is_refused_naming_both() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let dir = suite.dir.path();
    let (a, b, register) = (dir.join("a"), dir.join("b"), dir.join("register"));
    let first = parlab(dir, &["run", "specs", "--out", "register"], &a);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(register.join("evidence.md").is_file() && !dir.join("reports").exists(), "rendered into --out only");
    let rendered = snapshot(&register);
    for args in [&["run", "specs", "--out", "register"][..], &["report", "--manifests", "b", "--out", "register"][..]] {
        std::fs::create_dir_all(&b).unwrap();
        let out = parlab(dir, args, &b);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let text = stderr(&out);
        let theirs = format!("register: holds the register rendered from {}, not from ", std::fs::canonicalize(&a).unwrap().display());
        assert!(text.contains(&theirs) && text.contains("b's register"), "{args:?}: {text}");
        assert!(snapshot(&register) == rendered, "{args:?} changed the register of another store");
        std::fs::remove_dir_all(&b).unwrap();
    }
    let again = parlab(dir, &["report", "--manifests", "a", "--out", "register"], &a);
    assert_eq!(again.status.code(), Some(0), "its own store renders again: {}", stderr(&again));
}

#[test]
fn a_folder_of_other_files_is_refused_as_out_and_loses_none_of_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = dir.join("manifests");
    std::fs::create_dir_all(&store).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests");
    for f in std::fs::read_dir(&fixtures).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")) {
        std::fs::copy(&f, store.join(f.file_name().unwrap())).unwrap();
    }
    // Someone's own folder, never rendered into: a render replaced evidence.md and removed
    // every CSV, parquet and SVG file of its tables/ and figures/.
    let mine = dir.join("mine");
    for (file, text) in
        [("evidence.md", "my notes\n"), ("tables/budget.csv", "item,cost\n"), ("figures/logo.svg", "<svg/>\n"), ("notes.txt", "x\n")]
    {
        std::fs::create_dir_all(mine.join(file).parent().unwrap()).unwrap();
        std::fs::write(mine.join(file), text).unwrap();
    }
    let before = snapshot(&mine);
    let out = parlab(dir, &["report", "--manifests", "manifests", "--out", "mine"], &store);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("mine: holds files a render would replace or remove (evidence.md, figures/logo.svg, tables/budget.csv)"),
        "{}",
        stderr(&out)
    );
    assert!(snapshot(&mine) == before, "a refused render changed {}", mine.display());
    // A folder of other files only is rendered into, and keeps them; so is a register rendered
    // before stamps existed (no stamp, parlab's evidence.md).
    std::fs::remove_dir_all(mine.join("tables")).unwrap();
    std::fs::remove_dir_all(mine.join("figures")).unwrap();
    std::fs::remove_file(mine.join("evidence.md")).unwrap();
    let out = parlab(dir, &["report", "--manifests", "manifests", "--out", "mine"], &store);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(mine.join("notes.txt")).unwrap(), "x\n");
    let legacy = dir.join("legacy");
    copy_rendered(&mine, &legacy);
    std::fs::remove_file(legacy.join(".parlab-store")).unwrap();
    let out = parlab(dir, &["report", "--manifests", "manifests", "--out", "legacy"], &store);
    assert_eq!(out.status.code(), Some(0), "an unstamped register renders again: {}", stderr(&out));
    assert!(legacy.join(".parlab-store").is_file(), "and is stamped");
}

/// Copies the register in `from` (its files and its figures/ and tables/) to `to`.
fn copy_rendered(from: &Path, to: &Path) {
    for (path, bytes) in snapshot(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

#[test]
fn an_out_whose_tables_is_a_file_or_evidence_a_folder_exits_2_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = dir.join("manifests");
    std::fs::create_dir_all(&store).unwrap();
    for (name, make_file) in [("tables", true), ("figures", true), ("evidence.md", false), ("findings.json", false)] {
        let out = dir.join(format!("out-{name}"));
        std::fs::create_dir_all(&out).unwrap();
        if make_file {
            std::fs::write(out.join(name), "mine\n").unwrap();
        } else {
            std::fs::create_dir_all(out.join(name).join("mine")).unwrap();
        }
        let before = snapshot(&out);
        let o = parlab(dir, &["report", "--manifests", "manifests", "--out", out.to_str().unwrap()], &store);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let kind = if make_file { "not a folder" } else { "a folder" };
        assert!(stderr(&o).contains(&format!("{}: {kind}; a render writes", out.join(name).display())), "{name}: {}", stderr(&o));
        assert!(snapshot(&out) == before && !out.join(".parlab-store").exists(), "{name}: written before the refusal");
    }
}

/// An empty manifests folder `manifests` in `dir` and its register rendered into `dir/out`;
/// the folders and a render of it again.
fn rendered_empty_store(dir: &Path) -> (PathBuf, PathBuf, impl Fn() -> Output + '_) {
    let (store, out) = (dir.join("manifests"), dir.join("out"));
    std::fs::create_dir_all(&store).unwrap();
    let (s, o) = (store.clone(), out.clone());
    let render = move || parlab(dir, &["report", "--manifests", "manifests", "--out", o.to_str().unwrap()], &s);
    let first = render();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    (store, out, render)
}

#[test]
fn a_link_at_a_staged_path_is_replaced_not_followed_out_of_the_register_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, out, render) = rendered_empty_store(dir);
    // A link where the register is staged, to a file outside the output folder.
    let outside = dir.join("outside.md");
    std::fs::write(&outside, "mine\n").unwrap();
    std::os::unix::fs::symlink(&outside, out.join(".new-evidence.md")).unwrap();
    let o = render();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n", "the render wrote through the link");
    let register = std::fs::symlink_metadata(out.join("evidence.md")).unwrap();
    assert!(register.is_file(), "evidence.md is the register itself, not a link");
    assert!(std::fs::symlink_metadata(out.join(".new-evidence.md")).is_err(), "no staged file is left");
}

#[test]
fn a_registers_folder_given_to_report_as_its_manifests_is_refused_not_rendered_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (store, out, _) = rendered_empty_store(dir);
    let other = dir.join("other");
    let o = parlab(dir, &["report", "--manifests", out.to_str().unwrap(), "--out", other.to_str().unwrap()], &store);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a register's folder (rendered from"), "{}", stderr(&o));
    assert!(!other.exists(), "nothing rendered");
}

#[test]
fn a_users_own_figures_tables_and_links_beside_the_registers_are_kept_by_every_render() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, out, render) = rendered_empty_store(dir);
    let drawn = std::fs::read_to_string(out.join(".parlab-drawn")).unwrap();
    assert!(drawn.lines().all(|l| l.starts_with("figures/") || l.starts_with("tables/")), "{drawn}");
    // A figure the earlier render listed and this one does not draw is removed ...
    std::fs::write(out.join("figures/gone.svg"), "<svg/>").unwrap();
    std::fs::write(out.join(".parlab-drawn"), format!("{drawn}figures/gone.svg\n../outside.svg\n")).unwrap();
    std::fs::write(dir.join("outside.svg"), "<svg/>").unwrap();
    // ... but a user's own files of the same kinds, and links, are not.
    std::fs::write(out.join("figures/my-diagram.svg"), "<svg/>").unwrap();
    std::fs::write(out.join("tables/my-notes.csv"), "a,b\n").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.svg"), out.join("figures/link.svg")).unwrap();
    let o = render();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!out.join("figures/gone.svg").exists(), "an earlier render's figure no longer drawn stays");
    for kept in ["figures/my-diagram.svg", "tables/my-notes.csv"] {
        assert!(out.join(kept).is_file(), "{kept} was removed");
    }
    assert!(std::fs::symlink_metadata(out.join("figures/link.svg")).is_ok_and(|m| m.is_symlink()), "the link was removed");
    assert!(dir.join("outside.svg").is_file(), "a listed path outside the register's folders is never touched");
}

#[test]
fn a_trends_file_in_the_way_of_report_history_exits_2_before_the_register_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (store, out, _) = rendered_empty_store(dir);
    let history = dir.join("history");
    std::fs::create_dir_all(&history).unwrap();
    std::fs::write(out.join("trends"), "mine\n").unwrap();
    let before = snapshot(&out);
    let o = parlab(dir, &["report", "--manifests", "manifests", "--out", out.to_str().unwrap(), "--history", "history"], &store);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`trends` is a file, not the folder the trend figures are drawn into"), "{}", stderr(&o));
    assert!(snapshot(&out) == before, "written before the refusal");
}

#[test]
fn a_manifests_folder_that_cannot_be_listed_exits_2_and_keeps_the_register() {
    // Root reads any folder: the refusal is checked as another user, where setpriv can make one.
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    let root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")));
    if !root || !setpriv.exists() {
        eprintln!("skipped: needs root and /usr/bin/setpriv to read as another user");
        return;
    }
    let tmp = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let dir = tmp.path();
    let (store, out, _) = rendered_empty_store(dir);
    let before = snapshot(&out);
    let chown = |p: &Path| assert!(Command::new("chown").arg("-R").arg("65534").arg(p).status().unwrap().success());
    chown(dir);
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o311)).unwrap();
    let args = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_parlab"),
        "report",
        "--manifests",
        "manifests",
        "--out",
        "out",
    ];
    let o = Command::new(setpriv).args(args).current_dir(dir).env_remove("PARLAB_MANIFESTS").output().unwrap();
    if stderr(&o).contains("Permission denied") && stderr(&o).contains(env!("CARGO_BIN_EXE_parlab")) {
        eprintln!("skipped: the binary is not readable by another user here: {}", stderr(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--manifests manifests: cannot list the manifests folder"), "{}", stderr(&o));
    assert!(snapshot(&out) == before, "the register and its figures were replaced");
}
