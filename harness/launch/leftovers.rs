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

/// The ranks whose results folder lies inside `store` (a manifests folder), and the others.
pub fn split_by_store(ranks: Vec<RankProcess>, store: &Path) -> (Vec<RankProcess>, Vec<RankProcess>) {
    let store = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
    ranks.into_iter().partition(|r| r.out.starts_with(&store))
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
