//! The launcher command line of a run: `mpirun -np N ... parlab rank ...` or `srun -n N ...`.

use crate::spec::{Launcher, RunPlan};
use std::path::Path;

/// Folder (inside a run's results folder) where Open MPI writes each rank's stdout and stderr,
/// as `ranklogs/1/rank.<N>/{stdout,stderr}` (`mpirun --output-filename`, Open MPI 4.1).
pub const RANK_LOGS: &str = "ranklogs";

/// Hidden environment variable for fault injection in tests (see `rank::fault`); forwarded to ranks.
pub const FAULT_ENV: &str = "PARLAB_FAULT";

/// A launcher program, its arguments and the environment it adds.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchCommand {
    /// `mpirun` or `srun`.
    pub program: String,
    /// Its arguments, in order.
    pub args: Vec<String>,
    /// Variables set on the launcher process (shown before the program in `display`).
    pub env: Vec<(String, String)>,
    /// More ranks than cores (or hostfile slots).
    pub oversubscribed: bool,
}

/// What the command line depends on besides the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Cores of this machine.
    pub cores: u32,
    /// Running as root (Open MPI then needs `--allow-run-as-root`).
    pub root: bool,
    /// The `PARLAB_FAULT` value to forward, if any.
    pub fault: Option<String>,
}

impl Machine {
    /// This machine, as the current process sees it.
    pub fn current(cores: u32) -> Self {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        Machine { cores, root, fault: std::env::var(FAULT_ENV).ok().filter(|v| !v.is_empty()) }
    }
}

/// Builds the launcher command that starts `exe rank --plan plan --out out` in every rank.
pub fn build(plan: &RunPlan, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    match plan.launcher {
        Launcher::Mpirun => mpirun(plan, plan_path, out, exe, machine),
        Launcher::Srun => srun(plan, plan_path, out, exe, machine),
    }
}

fn rank_args(exe: &Path, plan_path: &Path, out: &Path) -> Vec<String> {
    vec![path_text(exe), "rank".into(), "--plan".into(), path_text(plan_path), "--out".into(), path_text(out)]
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}

/// Open MPI's transport selection for a measured link.
pub fn link_mca(link: &str) -> Vec<(&'static str, &'static str)> {
    match link {
        "mpi-tcp" => vec![("pml", "ob1"), ("btl", "self,tcp"), ("btl_tcp_if_include", "lo")],
        _ => vec![("pml", "ob1"), ("btl", "self,vader")],
    }
}

/// Total `slots=` of a hostfile (a host line without `slots=` counts one).
pub fn hostfile_slots(text: &str) -> u32 {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("slots=").and_then(|n| n.parse().ok())).unwrap_or(1))
        .sum()
}

fn mpirun(plan: &RunPlan, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    let world = plan.layout.world;
    let capacity = match &plan.hostfile {
        Some(h) => crate::files::read_text(h, crate::files::TEXT_LIMIT).map(|t| hostfile_slots(&t)).unwrap_or(machine.cores),
        None => machine.cores,
    };
    let oversubscribed = world > capacity;
    let mut args: Vec<String> = vec!["-np".into(), world.to_string()];
    if machine.root {
        args.push("--allow-run-as-root".into());
    }
    if let Some(h) = &plan.hostfile {
        args.extend(["--hostfile".into(), path_text(h)]);
    }
    if oversubscribed {
        args.push("--oversubscribe".into());
    }
    if oversubscribed || plan.threads_per_rank > 1 {
        args.extend(["--bind-to".into(), "none".into()]);
    }
    for (key, value) in link_mca(&plan.link) {
        args.extend(["--mca".into(), key.into(), value.into()]);
    }
    for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
        args.extend(["-x".into(), format!("{var}={}", plan.threads_per_rank)]);
    }
    args.extend(["-x".into(), OMP_WAIT.into()]);
    if let Some(fault) = &machine.fault {
        args.extend(["-x".into(), format!("{FAULT_ENV}={fault}")]);
    }
    args.extend(["--output-filename".into(), path_text(&out.join(RANK_LOGS))]);
    args.extend(rank_args(exe, plan_path, out));
    LaunchCommand { program: "mpirun".into(), args, env: Vec::new(), oversubscribed }
}

/// Idle OpenMP threads of a rank sleep (libgomp spins otherwise, taking the core the matvec pool needs).
const OMP_WAIT: &str = "OMP_WAIT_POLICY=passive";

fn srun(plan: &RunPlan, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    let threads = plan.threads_per_rank;
    let mut env: Vec<(String, String)> =
        link_mca(&plan.link).into_iter().map(|(k, v)| (format!("OMPI_MCA_{k}"), v.to_string())).collect();
    env.push(("OMP_NUM_THREADS".into(), threads.to_string()));
    env.push(("MKL_NUM_THREADS".into(), threads.to_string()));
    env.push(OMP_WAIT.split_once('=').map(|(k, v)| (k.into(), v.into())).expect("KEY=VALUE"));
    if let Some(fault) = &machine.fault {
        env.push((FAULT_ENV.into(), fault.clone()));
    }
    let mut args: Vec<String> = vec![
        "-n".into(),
        plan.layout.world.to_string(),
        format!("--cpus-per-task={threads}"),
        "--kill-on-bad-exit=1".into(),
        format!("--error={}", path_text(&out.join(RANK_LOGS).join("rank.%t.stderr"))),
    ];
    args.extend(rank_args(exe, plan_path, out));
    LaunchCommand { program: "srun".into(), args, env, oversubscribed: false }
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl LaunchCommand {
    /// The command as one shell line (environment first), as recorded in the manifest.
    pub fn display(&self) -> String {
        let env = self.env.iter().map(|(k, v)| shell_word(&format!("{k}={v}")));
        let words = std::iter::once(shell_word(&self.program)).chain(self.args.iter().map(|a| shell_word(a)));
        env.chain(words).collect::<Vec<_>>().join(" ")
    }
}
