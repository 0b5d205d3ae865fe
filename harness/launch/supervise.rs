//! Supervision: start the launcher in its own process group, wait with a deadline,
//! and kill everything the run started (group, descendants, ranks' pid files) when needed.

use super::command::LaunchCommand;
use super::slurm::Cancelled;
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
        /// The Slurm step of an srun launch, cancelled.
        cancelled: Option<Cancelled>,
    },
    /// The controller received a termination signal; the launcher and its ranks were killed.
    Interrupted {
        /// The signal the controller received.
        signal: i32,
        /// Ranks (from their pid files) still running when it arrived.
        running: Vec<u32>,
        /// The Slurm step of an srun launch, cancelled.
        cancelled: Option<Cancelled>,
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
            new_session(c);
            die_with_parent(c);
            Ok(())
        });
    for (k, v) in &cmd.env {
        expr = expr.env(k, v);
    }
    let handle = expr.start().map_err(io)?;
    let Some(launcher) = handle.pids().first().copied().and_then(ProcessId::of) else {
        let _ = handle.kill();
        return Err(io(std::io::Error::other("the launcher's process vanished as it started")));
    };
    let deadline = Instant::now() + timeout;
    let ended = loop {
        let now = Instant::now();
        let signal = super::signals::received();
        if signal.is_none() && now >= deadline {
            // A launcher that ended as the deadline came finished in time.
            if let Ok(Some(output)) = handle.try_wait() {
                break status_of(&output.status);
            }
        }
        if signal.is_some() || now >= deadline {
            let running = ranks_alive(out);
            let cancelled = kill_all(launcher, cmd, out, || exited_unreaped(launcher.pid));
            reap_within(handle, launcher.pid);
            break match signal {
                Some(signal) => Ended::Interrupted { signal, running, cancelled },
                None => Ended::TimedOut { running, cancelled },
            };
        }
        match handle.wait_deadline(deadline.min(now + POLL)) {
            Ok(Some(output)) => break status_of(&output.status),
            Ok(None) => {}
            Err(cause) => {
                // Nothing started may outlive a launch that could not be waited for.
                let _ = kill_all(launcher, cmd, out, || exited_unreaped(launcher.pid));
                reap_within(handle, launcher.pid);
                reap_leftovers(out);
                return Err(io(cause));
            }
        }
    };
    end_group(launcher.pid as i32);
    reap_leftovers(out);
    Ok(ended)
}

/// How long a launcher sent SIGKILL may take to die before a thread of its own is left to reap
/// it (a process asleep in the kernel, writing to a hung network file system, ignores SIGKILL
/// until it wakes): the run is recorded and the suite goes on rather than waiting for ever.
const KILLED_LAUNCHER_GRACE: Duration = Duration::from_secs(5);

/// Reaps the killed launcher within [`KILLED_LAUNCHER_GRACE`], else says so on stderr and leaves
/// it to a thread that reaps it whenever it dies (a zombie until parlab ends where no thread
/// can be spared).
fn reap_within(handle: duct::Handle, pid: u32) {
    match handle.wait_deadline(Instant::now() + KILLED_LAUNCHER_GRACE) {
        Ok(Some(_)) => return,
        Ok(None) => crate::say!(
            "warning: the launcher (pid {pid}) did not die within {} s of SIGKILL (asleep in the kernel?); parlab goes on and reaps it when it dies",
            KILLED_LAUNCHER_GRACE.as_secs()
        ),
        Err(e) => crate::say!("warning: the launcher (pid {pid}) was sent SIGKILL and cannot be waited for ({e}); parlab goes on and reaps it when it can"),
    }
    let _ = std::thread::Builder::new().spawn(move || handle.wait().map(drop));
}

/// Starts the launcher as the leader of a new session (so of a new process group, `killpg`
/// reaching everything it starts) without a controlling terminal: an ssh asking for a password
/// or a host key fails at once, with its message, rather than stopping the launch until its
/// timeout.
fn new_session(c: &mut std::process::Command) {
    // SAFETY: setsid is async-signal-safe; it is the only call made between fork and exec here.
    unsafe {
        c.pre_exec(|| match libc::setsid() {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
}

/// Makes the launcher receive SIGTERM when the controller dies, even by SIGKILL (so its ranks
/// end too); a controller already gone before the launcher started is treated the same way.
pub(crate) fn die_with_parent(c: &mut std::process::Command) {
    // SAFETY: getpid is async-signal-safe and called before fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec only async-signal-safe calls are made: sigaction, signal,
    // prctl, getppid, raise.
    unsafe {
        c.pre_exec(move || {
            super::signals::default_in_child();
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

/// For an srun launch first `scancel` of what it started (its tasks on other nodes are out of
/// this machine's reach: [`super::slurm::target`]), then SIGTERM to the launcher's group, its
/// descendants and the ranks' groups; SIGKILL after the grace period, to those of them that are
/// still the processes signalled first. Returns what became of the Slurm job or step.
/// `launcher_gone` must not reap the launcher ([`exited_unreaped`]): its descendants are looked
/// up again after the grace period, by its pid, which a reaped launcher frees for another process.
fn kill_all(launcher: ProcessId, cmd: &LaunchCommand, out: &Path, launcher_gone: impl Fn() -> bool) -> Option<Cancelled> {
    let group = launcher.pid;
    let mut targets: Vec<ProcessId> = descendants(group).into_iter().filter_map(ProcessId::of).collect();
    targets.extend(pid_files(out).into_iter().map(|(pid, _)| pid).filter(|p| is_ours(*p, out)).filter_map(ProcessId::of));
    // Slurm first, while srun still holds the step: a step srun is already ending can refuse a cancel.
    let cancelled = if cmd.starts_slurm_step { super::slurm::cancel_launched(out) } else { None };
    launcher.signal(libc::SIGTERM);
    targets.iter().for_each(|t| t.signal(libc::SIGTERM));
    within_grace(|| launcher_gone() && targets.iter().all(|t| !t.is_running()));
    targets.extend(descendants(group).into_iter().filter_map(ProcessId::of));
    launcher.signal(libc::SIGKILL);
    targets.iter().for_each(|t| t.signal(libc::SIGKILL));
    cancelled
}

/// A process named by its pid and its start time, so that a pid the kernel has since given to
/// another process is never signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    /// Its pid.
    pub pid: u32,
    /// Its start time (clock ticks after boot, /proc/PID/stat field 22).
    started: u64,
}

impl ProcessId {
    /// The process now running as `pid` (a zombie included), if any.
    pub fn of(pid: u32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(proc_path(pid, "stat")).ok()?;
        Some(ProcessId { pid, started: stat_field(&stat, 19)?.parse().ok()? })
    }

    /// True while this very process runs (not a zombie, its pid not reused).
    pub fn is_running(self) -> bool {
        ProcessId::of(self.pid) == Some(self) && alive(self.pid)
    }

    /// Sends `sig` to this process, unless its pid now names another one.
    pub fn signal_process(self, sig: i32) {
        if ProcessId::of(self.pid) == Some(self) {
            // SAFETY: kill only sends a signal; the pid was checked to be this process just above.
            unsafe { libc::kill(self.pid as i32, sig) };
        }
    }

    /// Sends `sig` to this process and to the process group it leads. Nothing is sent where its
    /// pid now names another process; where no process holds the pid any more, only its group
    /// (which, while it has members, no new process can take the id of) is signalled.
    pub fn signal(self, sig: i32) {
        let now = ProcessId::of(self.pid);
        if now.is_some_and(|p| p != self) {
            return;
        }
        // SAFETY: kill/killpg only send signals; a vanished pid or group yields ESRCH, ignored.
        unsafe {
            if now.is_some() {
                libc::kill(self.pid as i32, sig);
            }
            libc::killpg(self.pid as i32, sig);
        }
    }
}

/// After the launcher ended: SIGTERM, then SIGKILL after the grace period, to what is left of its
/// process group (a rank or helper that outlived it). The group exists while it has members, so
/// its id names only them.
fn end_group(group: i32) {
    if group_members(group).is_empty() {
        return;
    }
    // SAFETY: killpg only sends a signal to the group's members, which exist (checked above).
    unsafe { libc::killpg(group, libc::SIGTERM) };
    within_grace(|| group_members(group).is_empty());
    if !group_members(group).is_empty() {
        // SAFETY: as above; members remain, so the id is still this group's.
        unsafe { libc::killpg(group, libc::SIGKILL) };
    }
}

/// The live (not zombie) processes of process group `group`.
fn group_members(group: i32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(proc_path(pid, "stat")) else { return false };
            stat_field(&stat, 0) != Some("Z") && stat_field(&stat, 2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
        })
        .collect()
}

/// Whether `pid`, a child of this process, has exited, without reaping it (so its pid, and the
/// id of the process group it leads, are not yet free for another process).
pub(crate) fn exited_unreaped(pid: u32) -> bool {
    // SAFETY: waitid writes only into `info`; WNOWAIT leaves the child to be reaped later.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let done = libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        done == 0 && info.si_pid() != 0
    }
}

/// After the launcher ended: ranks listed in pid files that still run (orphans) get SIGTERM,
/// then SIGKILL, with the process groups they lead.
fn reap_leftovers(out: &Path) {
    let left: Vec<ProcessId> = pid_files(out).into_iter().map(|(p, _)| p).filter(|p| is_ours(*p, out)).filter_map(ProcessId::of).collect();
    end_processes(&left, ProcessId::signal);
}

/// SIGTERM to each of `processes` through `send`, then SIGKILL to those still running after the
/// grace period; returns at once when there are none, and as soon as all are gone.
pub(crate) fn end_processes(processes: &[ProcessId], send: fn(ProcessId, i32)) {
    if processes.is_empty() {
        return;
    }
    processes.iter().for_each(|&p| send(p, libc::SIGTERM));
    within_grace(|| processes.iter().all(|p| !p.is_running()));
    processes.iter().for_each(|&p| send(p, libc::SIGKILL));
}

/// Waits until `done` says so, at most the grace period, looking every 50 ms.
fn within_grace(done: impl Fn() -> bool) {
    let until = Instant::now() + GRACE;
    while Instant::now() < until && !done() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every pid /proc lists now.
pub fn pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()
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
    let parents: Vec<(u32, u32)> = pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(proc_path(pid, "stat")).ok()?;
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

/// How many live processes have `marker` in their command line (tests of what is left behind).
#[cfg(test)]
pub(crate) fn running_with(marker: &str) -> usize {
    let cmdlines = pids().into_iter().filter(|&pid| alive(pid)).filter_map(|pid| std::fs::read(proc_path(pid, "cmdline")).ok());
    cmdlines.filter(|c| String::from_utf8_lossy(c).contains(marker)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> LaunchCommand {
        LaunchCommand {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            oversubscribed: false,
            transport: String::new(),
            starts_slurm_step: false,
        }
    }

    #[test]
    fn what_a_launcher_leaves_in_its_group_ends_with_it_and_it_has_no_terminal() {
        let out = tempfile::tempdir().unwrap();
        let marker = format!("700.{}", std::process::id());
        // The launcher starts a helper in the background and exits at once (an mpirun killed early).
        let script = format!("sleep {marker} & tty > {}/tty 2>&1; exit 5", out.path().display());
        let ended = run(&sh(&script), out.path(), Duration::from_secs(60)).unwrap();
        assert_eq!(ended, Ended::Exited(5));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(running_with(&marker), 0, "the launcher's helper outlived it");
        let tty = std::fs::read_to_string(out.path().join("tty")).unwrap();
        assert!(tty.contains("not a tty"), "the launcher has a terminal: {tty}");
    }

    #[test]
    fn a_process_whose_pid_was_taken_again_is_not_signalled() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let me = ProcessId::of(child.id()).unwrap();
        assert!(me.is_running());
        let other = ProcessId { started: me.started + 1, ..me };
        other.signal(libc::SIGKILL);
        other.signal_process(libc::SIGKILL);
        assert!(me.is_running(), "a different start time is another process: left alone");
        me.signal_process(libc::SIGKILL);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
