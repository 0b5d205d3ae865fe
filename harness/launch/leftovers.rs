//! Rank processes already running on this machine when a run starts: leftovers of an earlier
//! controller on this store (ended before the run) and ranks of other stores (a caveat).

use super::supervise::{alive, ProcessId};
use std::path::{Path, PathBuf};

/// A `parlab rank` process found in /proc.
#[derive(Debug, Clone, PartialEq)]
pub struct RankProcess {
    /// Its pid.
    pub pid: u32,
    /// Its `--out` folder, made absolute against the process's working directory (canonical if it exists).
    pub out: PathBuf,
}

/// Every live `parlab rank --plan P --out DIR` process on this machine but this one.
pub fn rank_processes() -> Vec<RankProcess> {
    let me = std::process::id();
    let mut found: Vec<RankProcess> =
        super::supervise::pids().into_iter().filter(|&pid| pid != me).filter_map(rank_process).filter(|p| alive(p.pid)).collect();
    found.sort_by_key(|p| p.pid);
    found
}

fn rank_process(pid: u32) -> Option<RankProcess> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
    let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let is_parlab = args.first().is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "parlab"));
    if !is_parlab || args.get(1).map(String::as_str) != Some("rank") {
        return None;
    }
    let out = args.iter().position(|a| a == "--out").and_then(|i| args.get(i + 1))?;
    let out = Path::new(out);
    let out = if out.is_absolute() { out.to_path_buf() } else { std::fs::read_link(proc_dir.join("cwd")).ok()?.join(out) };
    // Canonical where the folder still exists, so it compares with the store's canonical path.
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    Some(RankProcess { pid, out })
}

/// The ranks that write into `store` (a manifests folder, or one run's results folder), and
/// the others (see [`launched_under`]: a store nested in `store` is another controller's).
pub fn split_by_store(ranks: Vec<RankProcess>, store: &Path) -> (Vec<RankProcess>, Vec<RankProcess>) {
    let store = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
    ranks.into_iter().partition(|r| launched_under(&r.out, &store))
}

/// Whether `out` is where a launch of `dir` writes: `dir` itself or `dir/launch-N` (a run's
/// results folder), `dir/<run id>` or `dir/<run id>/launch-N` (a store's runs); a folder deeper
/// or otherwise named (`dir/gpu/<run id>`, a store of its own) is not.
pub fn launched_under(out: &Path, dir: &Path) -> bool {
    let Ok(rest) = out.strip_prefix(dir) else {
        return false;
    };
    let launch = |p: &std::ffi::OsStr| p.to_str().and_then(|s| s.strip_prefix("launch-")).is_some_and(|n| n.parse::<u32>().is_ok());
    let run = |p: &std::ffi::OsStr| p.to_str().is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    match rest.iter().collect::<Vec<_>>().as_slice() {
        [] => true,
        [one] => launch(one) || run(one),
        [first, second] => run(first) && launch(second),
        _ => false,
    }
}

/// SIGTERM to each pid, SIGKILL to those still running after the grace period (never to a
/// process that has since taken a pid of the list); returns when all are gone or the SIGKILL
/// is sent.
pub fn end(pids: &[u32]) {
    let processes: Vec<ProcessId> = pids.iter().copied().filter_map(ProcessId::of).collect();
    super::supervise::end_processes(&processes, ProcessId::signal_process);
}

/// The pids of `ranks`, as text for caveats: `123, 456`.
pub fn pid_list(ranks: &[RankProcess]) -> String {
    ranks.iter().map(|r| r.pid.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::launched_under;
    use std::path::Path;

    #[test]
    fn a_store_owns_its_runs_launches_and_not_a_store_nested_in_it() {
        let id = "ab".repeat(32);
        let store = Path::new("/data/manifests");
        for mine in [format!("/data/manifests/{id}"), format!("/data/manifests/{id}/launch-2")] {
            assert!(launched_under(Path::new(&mine), store), "{mine}");
        }
        for other in [
            format!("/data/manifests/gpu/{id}"),
            format!("/data/manifests/gpu/{id}/launch-1"),
            format!("/data/manifests/{id}/launch-x"),
            format!("/data/manifests/{}", &id[..12]),
            format!("/data/manifests-2/{id}"),
            "/data".to_string(),
        ] {
            assert!(!launched_under(Path::new(&other), store), "{other}");
        }
        // A run's own folder: the first launch writes into it, the others into launch-N.
        let run = Path::new("/data/manifests").join(&id);
        assert!(launched_under(&run, &run) && launched_under(&run.join("launch-1"), &run));
    }
}
