//! Why a run failed, in words: which rank, its exit status or signal, and its own error line.

use super::cause;
use super::command::RANK_LOGS;
use super::supervise::Ended;
use std::path::{Path, PathBuf};

/// Lines of the launcher's stderr quoted in a failure no rank explains.
pub const TAIL_LINES: usize = 5;

/// What mpirun's own stderr says about the first rank that failed.
#[derive(Debug, Clone, PartialEq)]
pub enum RankEnd {
    /// `Process name: [[j,1],N]` / `Exit code: C`.
    Exited {
        /// The rank.
        rank: u32,
        /// Its exit code.
        code: i32,
    },
    /// `mpirun noticed that process rank N ... exited on signal S (Name).`
    Signalled {
        /// The rank.
        rank: u32,
        /// The signal number.
        signal: i32,
        /// The signal's name as mpirun printed it.
        name: String,
    },
    /// `MPI_ABORT was invoked on rank N ... with errorcode C.`
    Aborted {
        /// The rank.
        rank: u32,
        /// The error code passed to MPI_Abort.
        code: i32,
    },
}

impl RankEnd {
    /// The rank concerned.
    pub fn rank(&self) -> u32 {
        match self {
            RankEnd::Exited { rank, .. } | RankEnd::Signalled { rank, .. } | RankEnd::Aborted { rank, .. } => *rank,
        }
    }

    /// What happened, naming the rank's host when the ranks recorded one in `out`.
    fn describe(&self, out: &Path) -> String {
        let rank = self.rank();
        let who = match host_of(out, rank) {
            Some(host) => format!("rank {rank} on host {host}"),
            None => format!("rank {rank}"),
        };
        match self {
            RankEnd::Exited { code, .. } => format!("{who} exited with status {code}"),
            RankEnd::Signalled { signal, name, .. } => format!("{who} was killed by signal {signal} ({name})"),
            RankEnd::Aborted { code, .. } => format!("{who} called MPI_Abort with error code {code}"),
        }
    }
}

fn number_after<T: std::str::FromStr>(text: &str, marker: &str) -> Option<T> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse().ok()
}

/// Parses Open MPI 4.1's (or srun's) messages about the first failed rank out of the launcher's stderr.
pub fn parse_mpirun(stderr: &str) -> Option<RankEnd> {
    if let Some(at) = stderr.find("MPI_ABORT was invoked on rank") {
        let text = &stderr[at..];
        let rank = number_after(text, "on rank")?;
        return Some(RankEnd::Aborted { rank, code: number_after(text, "errorcode").unwrap_or(-1) });
    }
    if let Some(at) = stderr.find("mpirun noticed that process rank") {
        let text = &stderr[at..];
        let rank = number_after(text, "process rank")?;
        let signal = number_after(text, "on signal")?;
        let name = text.split_once('(').and_then(|(_, r)| r.split_once(')')).map(|(n, _)| n.to_string()).unwrap_or_default();
        return Some(RankEnd::Signalled { rank, signal, name });
    }
    if let Some(end) = parse_srun(stderr) {
        return Some(end);
    }
    if let Some(at) = stderr.find(": Exited with exit code") {
        // srun: `srun: error: node1: task 1: Exited with exit code 3`
        let line_start = stderr[..at].rfind('\n').map_or(0, |i| i + 1);
        let rank = number_after(&stderr[line_start..at], "task ")?;
        return Some(RankEnd::Exited { rank, code: number_after(&stderr[at..], "exit code").unwrap_or(-1) });
    }
    if let Some(at) = stderr.find("Process name: [[") {
        let text = &stderr[at..];
        let rank = number_after(text, ",1],").or_else(|| text.split("],").nth(1).and_then(|r| number_after(r, "")))?;
        return Some(RankEnd::Exited { rank, code: number_after(text, "Exit code:").unwrap_or(-1) });
    }
    None
}

/// The host `rank` recorded at start, when the run spanned several hosts.
fn host_of(out: &Path, rank: u32) -> Option<String> {
    let ranks = crate::manifest::placement::read_all(out);
    let several = crate::manifest::placement::by_host(&ranks).len() > 1;
    ranks.into_iter().find(|r| r.rank == rank).filter(|_| several).map(|r| r.host)
}

/// glibc's `strsignal` texts, which srun prints for a task a signal ended (`task 1: Killed`).
const SIGNAL_TEXTS: [(i32, &str); 15] = [
    (1, "Hangup"),
    (2, "Interrupt"),
    (3, "Quit"),
    (4, "Illegal instruction"),
    (5, "Trace/breakpoint trap"),
    (6, "Aborted"),
    (7, "Bus error"),
    (8, "Floating point exception"),
    (9, "Killed"),
    (10, "User defined signal 1"),
    (11, "Segmentation fault"),
    (12, "User defined signal 2"),
    (13, "Broken pipe"),
    (14, "Alarm clock"),
    (15, "Terminated"),
];

/// srun's first line about one task, `srun: error: NODE: task N: Exited with exit code C` or
/// `...: task N: Killed` (a signal's text); a line about a range of tasks names no culprit.
fn parse_srun(stderr: &str) -> Option<RankEnd> {
    stderr.lines().find_map(|line| {
        let (_, task) = line.strip_prefix("srun: error: ")?.split_once(": task ")?;
        let (rank, what) = task.split_once(": ")?;
        let rank = rank.parse().ok()?;
        let what = what.trim();
        if let Some(code) = what.strip_prefix("Exited with exit code ") {
            return Some(RankEnd::Exited { rank, code: code.trim().parse().ok()? });
        }
        let (signal, name) = SIGNAL_TEXTS.iter().find(|(_, text)| *text == what)?;
        Some(RankEnd::Signalled { rank, signal: *signal, name: name.to_string() })
    })
}

/// The stderr file Open MPI (or srun) wrote for `rank`.
pub fn rank_stderr(out: &Path, rank: u32) -> Option<PathBuf> {
    let logs = out.join(RANK_LOGS);
    let srun = logs.join(format!("rank.{rank}.stderr"));
    if srun.is_file() {
        return Some(srun);
    }
    std::fs::read_dir(&logs).ok()?.flatten().map(|job| job.path().join(format!("rank.{rank}")).join("stderr")).find(|p| p.is_file())
}

/// The message a rank left in `error-rank<N>.txt` before aborting (a wrong result, a workload error).
pub fn rank_errors(out: &Path) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir(out) else { return Vec::new() };
    let mut found: Vec<(u32, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let rank = name.strip_prefix("error-rank")?.strip_suffix(".txt")?.parse().ok()?;
            Some((rank, crate::files::read_log(&e.path())?.trim().to_string()))
        })
        .collect();
    found.sort();
    found
}

/// The failure text of a launch, or None when it succeeded; `hostfile` is the text of the
/// hostfile it was launched with.
pub fn explain(ended: &Ended, out: &Path, plan: &crate::spec::RunPlan, launcher: &str, hostfile: Option<&str>) -> Option<String> {
    let timeout_s = plan.timeout_s;
    let errors = rank_errors(out);
    let mpirun_err = crate::files::read_log(&out.join("launcher.stderr")).unwrap_or_default();
    let parsed = parse_mpirun(&mpirun_err);
    let head = match ended {
        Ended::Exited(0) if errors.is_empty() => return None,
        Ended::TimedOut { running, .. } => format!(
            "timed out after {timeout_s} s; ranks still running: {}; sent SIGTERM to the launcher's process group and the ranks, SIGKILL after {:.1} s",
            list(running),
            super::supervise::GRACE.as_secs_f64()
        ),
        Ended::Exited(code) => match (&parsed, errors.first()) {
            (Some(end), _) => format!("{} ({launcher} exited with status {code})", end.describe(out)),
            (None, Some((rank, _))) => format!("rank {rank} stopped the run with MPI_Abort ({launcher} exited with status {code})"),
            (None, None) => format!("{launcher} exited with status {code}"),
        },
        Ended::Signalled(sig) => format!("{launcher} was killed by signal {sig}"),
        Ended::Interrupted { signal, running, .. } => format!(
            "interrupted: parlab received {}; ranks still running then: {}; sent SIGTERM to the launcher's process group and the ranks, SIGKILL after {:.1} s",
            super::signals::name(*signal),
            list(running),
            super::supervise::GRACE.as_secs_f64()
        ),
    };
    let mut parts = vec![head];
    if let Ended::TimedOut { cancelled: Some(c), .. } | Ended::Interrupted { cancelled: Some(c), .. } = ended {
        parts.push(c.describe());
    }
    let listed = plan.hostfile.as_deref().zip(hostfile);
    let unreached = super::unreached::explain(listed, out, plan.layout.world, launcher, &mpirun_err);
    let launcher_explained = unreached.is_some();
    parts.extend(unreached);
    parts.extend(errors.iter().map(|(r, m)| format!("rank {r} reported: {}", cause::without_noise(m))));
    let mut cause_ranks: Vec<u32> = parsed.iter().map(RankEnd::rank).chain(errors.iter().map(|(r, _)| *r)).collect();
    if let Ended::TimedOut { running, .. } | Ended::Interrupted { running, .. } = ended {
        cause_ranks.extend(running);
    }
    cause_ranks.sort_unstable();
    cause_ranks.dedup();
    for rank in cause_ranks {
        let reported = |line: &str| {
            errors.iter().any(|(r, m)| *r == rank && m.lines().filter(|l| !cause::is_noise(l)).any(|l| line.ends_with(l.trim())))
        };
        if let Some(found) = cause::of_rank(out, rank).filter(|c| !reported(&c.line)) {
            parts.push(format!("rank {rank}'s error line ({}): {}", found.log.display(), found.line));
        }
    }
    let quiet = launcher_explained || matches!(ended, Ended::TimedOut { .. } | Ended::Interrupted { .. });
    if parsed.is_none() && errors.is_empty() && !quiet {
        let tail: Vec<&str> = mpirun_err.lines().filter(|l| !cause::is_noise(l) && !l.starts_with("----")).collect();
        if !tail.is_empty() {
            parts.push(format!("{launcher} stderr: {}", tail[tail.len().saturating_sub(TAIL_LINES)..].join(" | ")));
        }
    }
    Some(parts.join("; "))
}

fn list(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "none known".into();
    }
    ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exit_code_signal_and_abort() {
        let exit = "mpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n  Process name: [[8935,1],1]\n  Exit code:    3\n";
        assert_eq!(parse_mpirun(exit), Some(RankEnd::Exited { rank: 1, code: 3 }));
        let sig = "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 11 (Segmentation fault).\n";
        assert_eq!(parse_mpirun(sig), Some(RankEnd::Signalled { rank: 1, signal: 11, name: "Segmentation fault".into() }));
        let abort = "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 7.\n";
        assert_eq!(parse_mpirun(abort), Some(RankEnd::Aborted { rank: 0, code: 7 }));
        assert_eq!(parse_mpirun("all fine"), None);
        let srun = "srun: error: node1: task 1: Exited with exit code 3\n";
        assert_eq!(parse_mpirun(srun), Some(RankEnd::Exited { rank: 1, code: 3 }));
        let killed = "srun: error: vm: task 1: Killed\nsrun: launch/slurm: _step_signal: Terminating StepId=8.0\nsrun: error: vm: task 0: Terminated\n";
        assert_eq!(parse_mpirun(killed), Some(RankEnd::Signalled { rank: 1, signal: 9, name: "Killed".into() }));
        let first = "srun: error: vm: task 1: Exited with exit code 3\nsrun: error: vm: task 0: Terminated\n";
        assert_eq!(parse_mpirun(first), Some(RankEnd::Exited { rank: 1, code: 3 }), "the first task srun names");
        assert_eq!(parse_mpirun("srun: error: vm: tasks 0-1: Terminated\n"), None, "a range names no culprit");
    }
}
