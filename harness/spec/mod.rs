//! Experiment specs: parse -> validate -> expand (matrix) -> RunPlan.

pub mod advise;
pub mod claims;
pub mod disk;
pub mod expand;
pub mod fields;
pub mod layout;
pub mod link;
pub mod locate;
pub mod plan;
pub mod problem;
pub mod resources;
pub mod schema;
pub mod validate;
pub mod weights;

pub use plan::*;
pub use problem::{Problem, Problems};
pub use schema::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder `run`, `plan` and `validate` read when given no paths.
pub const DEFAULT_SUITE: &str = "experiments";

/// The spec files named by `paths`: files as given, folders' `*.yaml`/`*.yml` sorted by name.
pub fn spec_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Problems> {
    let paths = if paths.is_empty() { vec![PathBuf::from(DEFAULT_SUITE)] } else { paths.to_vec() };
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        if path.is_dir() {
            match folder_specs(std::fs::read_dir(&path)) {
                Ok(found) if found.is_empty() => problems.push(file_problem(&path, "folder holds no .yaml specs")),
                Ok(found) => files.extend(found),
                Err(e) => problems.push(file_problem(&path, &format!("cannot read folder: {e}"))),
            }
        } else if path.exists() {
            files.push(path);
        } else {
            problems.push(file_problem(&path, "no such file or folder"));
        }
    }
    if problems.is_empty() {
        Ok(once_each(files))
    } else {
        Err(Problems(problems))
    }
}

/// The `*.yaml`/`*.yml` paths of a folder's listing (`read_dir`'s result), sorted by name; the
/// error that stopped the listing, if one did (an unreadable folder is not an empty one).
fn folder_specs<I>(listing: std::io::Result<I>) -> std::io::Result<Vec<PathBuf>>
where
    I: IntoIterator<Item = std::io::Result<std::fs::DirEntry>>,
{
    let mut found = Vec::new();
    for entry in listing? {
        let path = entry?.path();
        // Not only regular files: a FIFO or a dangling link named .yaml is read, and refused
        // naming what it is, rather than skipped without a word.
        if !path.is_dir() && path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// `files` with a file named twice (`a.yaml a.yaml`, or a folder and a file in it) kept at its
/// first place only: it is one spec, not two experiments of the same name.
fn once_each(files: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = std::collections::BTreeSet::new();
    files.into_iter().filter(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone()))).collect()
}

fn file_problem(path: &Path, message: &str) -> Problem {
    Problem { file: path.to_path_buf(), position: None, key: String::new(), message: message.into() }
}

/// The most runs a suite may expand to unless `--max-runs` raises it.
pub const DEFAULT_MAX_RUNS: usize = 10_000;

/// Reads, validates and expands every spec under `paths`; all problems, or all runs.
pub fn load_suite(paths: &[PathBuf]) -> Result<Vec<RunPlan>, Problems> {
    load_suite_limited(paths, DEFAULT_MAX_RUNS)
}

/// As `load_suite`, refusing (before expanding) a suite of more than `max_runs` runs.
pub fn load_suite_limited(paths: &[PathBuf], max_runs: usize) -> Result<Vec<RunPlan>, Problems> {
    let files = spec_files(paths)?;
    let mut counted: u64 = 0;
    let cores = crate::gates::cpu_cores();
    let mut problems = Vec::new();
    let mut runs = Vec::new();
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    // The file whose matrix took the count past `max_runs`, with its text and size.
    let mut passed = None;
    for file in files {
        let text = match crate::files::read_text(&file, crate::files::TEXT_LIMIT) {
            Ok(t) => t,
            Err(e) => {
                problems.push(file_problem(&file, &e.reason()));
                continue;
            }
        };
        let (experiment, found) = validate::validate_partial(&file, &text);
        let valid = found.is_empty();
        problems.extend(found);
        let Some(experiment) = experiment else { continue };
        // A name refused above is read as empty: it names nothing another file could repeat.
        let named = !experiment.name.is_empty();
        let first =
            named.then(|| names.entry(experiment.name.clone()).or_insert_with(|| file.clone()).clone()).filter(|first| *first != file);
        if let Some(first) = first {
            let mut c = validate::Checker::new(&file, &text);
            c.report("name", format!("`{}` is also the name of {}; experiment names must be unique", experiment.name, first.display()));
            problems.extend(c.problems);
            continue;
        }
        let size = expand::matrix_size(&experiment);
        counted = counted.saturating_add(size.runs);
        if passed.is_none() && counted > max_runs as u64 {
            passed = Some((file.clone(), text.clone(), size));
        }
        // Past the limit the later files are still read and counted (their problems, and the
        // whole suite's count for the message), never expanded.
        if passed.is_some() {
            continue;
        }
        match expand::expand(&experiment, &text, cores) {
            Ok(r) if valid => runs.extend(r),
            Ok(_) => {}
            Err(p) => problems.extend(p),
        }
    }
    if let Some((file, text, size)) = passed {
        let mut c = validate::Checker::new(&file, &text);
        c.report(size.largest_axis, size.too_many(counted, max_runs));
        problems.extend(c.problems);
    }
    sort_problems(&mut problems);
    if problems.is_empty() {
        Ok(runs)
    } else {
        Err(Problems(problems))
    }
}

/// Orders problems by file, then line and column, keeping each file's first-found order for
/// ties, and each problem once (many points of a matrix can share one, between others).
fn sort_problems(problems: &mut Vec<Problem>) {
    let at = |p: &Problem| (p.file.clone(), p.position.map(|pos| (pos.line, pos.column)));
    problems.sort_by_key(at);
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| seen.insert((at(p), p.key.clone(), p.message.clone())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_ordered_by_place_and_each_kept_once_even_between_others() {
        let at = |line: usize, message: &str| Problem {
            file: PathBuf::from("a.yaml"),
            position: Some(locate::Position { line, column: 1 }),
            key: "world".into(),
            message: message.into(),
        };
        let mut problems = vec![at(9, "5 ranks"), at(3, "first"), at(9, "7 ranks"), at(9, "5 ranks"), at(9, "7 ranks")];
        sort_problems(&mut problems);
        assert_eq!(problems, [at(3, "first"), at(9, "5 ranks"), at(9, "7 ranks")]);
    }

    #[test]
    fn a_folder_that_cannot_be_listed_is_said_so_with_the_reason_not_called_empty() {
        let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied (os error 13)");
        let err = folder_specs(Err::<Vec<std::io::Result<std::fs::DirEntry>>, _>(denied)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        let failed_entry = vec![Err(std::io::Error::other("Input/output error"))];
        assert_eq!(folder_specs(Ok(failed_entry)).unwrap_err().to_string(), "Input/output error");
        // Through spec_files: a folder read as empty is refused as empty, an unlistable one with why.
        let dir = tempfile::tempdir().unwrap();
        let empty = spec_files(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(empty.0[0].message == "folder holds no .yaml specs", "{empty}");
        let missing = folder_specs(std::fs::read_dir(dir.path().join("gone"))).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        // A folder without read permission, where that stops reads (not as root).
        use std::os::unix::fs::PermissionsExt;
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read_dir(&locked).is_err() {
            let refused = spec_files(std::slice::from_ref(&locked)).unwrap_err();
            assert!(refused.0[0].message.starts_with("cannot read folder: Permission denied"), "{refused}");
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
