//! Supervision: start the launcher in its own process group, wait with a deadline,
//! and kill everything the run started (group, descendants, ranks' pid files) when needed.

use super::command::LaunchCommand;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Seconds between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_millis(2500);

/// Folder (inside a run's results folder) where each rank writes a file named by its pid.
pub const PID_DIR: &str = "pids";

/// How the launcher process ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signalled(i32),
    /// The deadline passed; it and its ranks were killed. `running` are the ranks still alive then.
    TimedOut {
        /// Ranks (from their pid files) still running at the deadline.
        running: Vec<u32>,
    },
    /// The controller received a termination signal; the launcher and its ranks were killed.
    Interrupted {
        /// The signal the controller received.
        signal: i32,
        /// Ranks (from their pid files) still running when it arrived.
        running: Vec<u32>,
    },
}

/// How often the supervisor looks at the deadline and at received signals.
const POLL: Duration = Duration::from_millis(100);

/// Errors of starting or waiting for the launcher.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// The launcher could not be started or waited for.
    #[error("could not run `{program}`: {cause}")]
    Io {
        /// The program.
        program: String,
        /// The cause.
        cause: std::io::Error,
    },
}

/// Runs `cmd` with its output in `out/launcher.{stdout,stderr}`, killing it at `timeout`.
pub fn run(cmd: &LaunchCommand, out: &Path, timeout: Duration) -> Result<Ended, SuperviseError> {
    let io = |cause| SuperviseError::Io { program: cmd.program.clone(), cause };
    let mut expr = duct::cmd(&cmd.program, &cmd.args)
        .stdin_null()
        .stdout_path(out.join("launcher.stdout"))
        .stderr_path(out.join("launcher.stderr"))
        .unchecked()
        .before_spawn(|c| {
            c.process_group(0);
            die_with_parent(c);
            Ok(())
        });
    for (k, v) in &cmd.env {
        expr = expr.env(k, v);
    }
    let handle = expr.start().map_err(io)?;
    let pid = handle.pids().first().copied().unwrap_or(0) as i32;
    let deadline = Instant::now() + timeout;
    let ended = loop {
        let now = Instant::now();
        let stop = if let Some(signal) = super::signals::received() {
            Some(Ended::Interrupted { signal, running: ranks_alive(out) })
        } else if now >= deadline {
            Some(Ended::TimedOut { running: ranks_alive(out) })
        } else {
            None
        };
        if let Some(stop) = stop {
            kill_all(pid, out, || matches!(handle.try_wait(), Ok(Some(_))));
            let _ = handle.wait();
            break stop;
        }
        if let Some(output) = handle.wait_deadline(deadline.min(now + POLL)).map_err(io)? {
            break status_of(&output.status);
        }
    };
    reap_leftovers(out);
    Ok(ended)
}

/// Makes the launcher receive SIGTERM when the controller dies, even by SIGKILL (so its ranks
/// end too); a controller already gone before the launcher started is treated the same way.
fn die_with_parent(c: &mut std::process::Command) {
    // SAFETY: getpid is async-signal-safe and called before fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec only async-signal-safe calls are made: prctl, getppid, raise.
    unsafe {
        c.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        });
    }
}

fn status_of(status: &std::process::ExitStatus) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ended::Exited(code),
        (None, Some(sig)) => Ended::Signalled(sig),
        (None, None) => Ended::Exited(-1),
    }
}

/// SIGTERM to the launcher's group, its descendants and the ranks' groups; SIGKILL after the grace period.
fn kill_all(group: i32, out: &Path, launcher_gone: impl Fn() -> bool) {
    let mut targets = descendants(group as u32);
    targets.extend(pid_files(out).into_iter().map(|(pid, _)| pid).filter(|p| is_ours(*p, out)));
    signal_all(group, &targets, libc::SIGTERM);
    let until = Instant::now() + GRACE;
    while Instant::now() < until && !(launcher_gone() && targets.iter().all(|p| !alive(*p))) {
        std::thread::sleep(Duration::from_millis(50));
    }
    targets.extend(descendants(group as u32));
    signal_all(group, &targets, libc::SIGKILL);
}

fn signal_all(group: i32, pids: &[u32], sig: i32) {
    // SAFETY: kill/killpg only send signals; a vanished pid or group yields ESRCH, which is ignored.
    unsafe {
        if group > 0 {
            libc::killpg(group, sig);
        }
        for &pid in pids {
            libc::killpg(pid as i32, sig);
            libc::kill(pid as i32, sig);
        }
    }
}

/// After the launcher ended: ranks listed in pid files that still run (orphans) get SIGTERM, then SIGKILL.
fn reap_leftovers(out: &Path) {
    let left: Vec<u32> = pid_files(out).into_iter().map(|(p, _)| p).filter(|p| is_ours(*p, out)).collect();
    if left.is_empty() {
        return;
    }
    signal_all(0, &left, libc::SIGTERM);
    let until = Instant::now() + GRACE;
    while Instant::now() < until && left.iter().any(|p| is_ours(*p, out)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_all(0, &left, libc::SIGKILL);
}

/// `(pid, rank)` from the files ranks write in `out/pids/` at start.
pub fn pid_files(out: &Path) -> Vec<(u32, Option<u32>)> {
    let Ok(entries) = std::fs::read_dir(out.join(PID_DIR)) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let rank = std::fs::read_to_string(e.path()).ok().and_then(|t| t.trim().parse().ok());
            Some((pid, rank))
        })
        .collect()
}

fn ranks_alive(out: &Path) -> Vec<u32> {
    let mut ranks: Vec<u32> = pid_files(out).into_iter().filter(|(p, _)| is_ours(*p, out)).filter_map(|(_, r)| r).collect();
    ranks.sort_unstable();
    ranks
}

fn proc_path(pid: u32, what: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{what}"))
}

/// True when `pid` runs (not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(proc_path(pid, "stat")).is_ok_and(|s| stat_field(&s, 0) != Some("Z"))
}

/// True when `pid` is alive and its command line names `out` (so a reused pid is never killed).
fn is_ours(pid: u32, out: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(proc_path(pid, "cmdline")) else { return false };
    let needle = out.display().to_string();
    alive(pid) && String::from_utf8_lossy(&cmdline).contains(&needle)
}

/// Field `i` after the `(comm)` of /proc/PID/stat (0 = state, 1 = ppid).
fn stat_field(stat: &str, i: usize) -> Option<&str> {
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(i))
}

/// Every live descendant of `root`, from /proc's parent links.
pub fn descendants(root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            Some((pid, stat_field(&stat, 1)?.parse().ok()?))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}
