//! The launcher command line of a run: `mpirun -np N ... parlab rank ...` or `srun -n N ...`.

use super::hosts::HostSlots;
use crate::spec::link::Link;
use crate::spec::{Launcher, RunPlan};
use std::path::{Path, PathBuf};

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
    /// Open MPI's effective transport selection, in words (recorded in the manifest).
    pub transport: String,
    /// The launcher starts a Slurm job step (srun): a stopped launch cancels it with scancel.
    pub starts_slurm_step: bool,
}

/// What the command line depends on besides the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Open MPI's slots on this host without a hostfile: its physical cores (one per core, not
    /// per hardware thread, unless `--use-hwthread-cpus`).
    pub slots: u32,
    /// Running as root (Open MPI then needs `--allow-run-as-root`).
    pub root: bool,
    /// The `PARLAB_FAULT` value to forward, if any.
    pub fault: Option<String>,
    /// Other `PARLAB_*` variables set here, forwarded by name so ranks on other hosts see them.
    pub forwarded: Vec<String>,
}

impl Machine {
    /// This machine, as the current process sees it, with `slots` physical cores.
    pub fn current(slots: u32) -> Self {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let mut forwarded: Vec<String> = std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("PARLAB_") && k != FAULT_ENV).collect();
        forwarded.sort();
        Machine { slots, root, fault: std::env::var(FAULT_ENV).ok().filter(|v| !v.is_empty()), forwarded }
    }
}

/// A plan's hostfile that is not the one the suite was planned with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostfileError {
    /// It can no longer be read.
    #[error("the hostfile {path} can no longer be read ({why}); nothing was launched")]
    Unreadable {
        /// The hostfile.
        path: PathBuf,
        /// The read's error.
        why: String,
    },
    /// Its text changed since the suite was planned.
    #[error(
        "the hostfile {} changed since the suite was planned (its digest is part of the run identity: this run was planned on the old one); nothing was launched: run the suite again", .0.display()
    )]
    Changed(PathBuf),
}

/// The text of the plan's hostfile (None without one, and for srun, which places ranks by
/// Slurm's allocation and never reads it), read once for the launch and checked against the
/// digest the run identity holds (a plan without one is not checked).
pub fn planned_hostfile(plan: &RunPlan) -> Result<Option<String>, HostfileError> {
    let Some(path) = plan.hostfile.as_ref().filter(|_| plan.launcher == Launcher::Mpirun) else { return Ok(None) };
    let text = crate::files::read_text(path, crate::files::TEXT_LIMIT)
        .map_err(|e| HostfileError::Unreadable { path: path.clone(), why: e.to_string() })?;
    match &plan.hostfile_sha256 {
        Some(planned) if *planned != crate::identity::hostfile_digest(&text) => Err(HostfileError::Changed(path.clone())),
        _ => Ok(Some(text)),
    }
}

/// Builds the launcher command that starts `exe rank --plan plan --out out` in every rank;
/// `hostfile` is the text of the plan's hostfile ([`planned_hostfile`]).
pub fn build(plan: &RunPlan, hostfile: Option<&str>, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    match plan.launcher {
        Launcher::Mpirun => mpirun(plan, hostfile, plan_path, out, exe, machine),
        Launcher::Srun => srun(plan, plan_path, out, exe, machine),
    }
}

fn rank_args(exe: &Path, plan_path: &Path, out: &Path) -> Vec<String> {
    vec![path_text(exe), "rank".into(), "--plan".into(), path_text(plan_path), "--out".into(), path_text(out)]
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}

/// A run's Open MPI transport selection: what parlab passes, and the effective choice in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Transport {
    /// `--mca KEY VALUE` pairs for mpirun.
    pub mca: Vec<(String, String)>,
    /// The effective selection and where each part came from.
    pub description: String,
}

/// Chooses the transport of `link` for ranks on this host and on `remote` hosts.
///
/// `mpi-shm` is shared memory inside a host (and TCP between hosts); `mpi-tcp` is TCP
/// everywhere, over loopback only when every rank is on this host. The TCP interface is the
/// spec's `interface`, else the user's `OMPI_MCA_btl_tcp_if_include`/`_exclude` (left in
/// force, never overridden), else loopback (one host) or Open MPI's default (several hosts).
/// `mpi-auto` sets nothing and lets Open MPI pick (UCX, OFI or ob1). `env` reads a variable.
pub fn transport(link: &Link, remote: &[String], interface: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Transport {
    let mut mca: Vec<(String, String)> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    if *link == Link::MpiAuto {
        words.push("pml and btl chosen by Open MPI (parlab passes neither)".into());
        for key in ["pml", "btl"] {
            if let Some(v) = env(&format!("OMPI_MCA_{key}")) {
                words.push(format!("OMPI_MCA_{key}={v} from the environment"));
            }
        }
        return Transport { mca, description: words.join("; ") };
    }
    // An NCCL link's ranks still meet over MPI (the unique id, barriers): shared memory inside a host.
    let link = if link.nccl().is_some() { &Link::MpiShm } else { link };
    let btl = match (link, remote.is_empty()) {
        (Link::MpiTcp, _) => "self,tcp",
        (_, true) => "self,vader",
        (_, false) => "self,vader,tcp",
    };
    for (key, value) in [("pml", "ob1"), ("btl", btl)] {
        mca.push((key.into(), value.into()));
        words.push(format!("{key} {value}"));
        if let Some(v) = env(&format!("OMPI_MCA_{key}")).filter(|v| v != value) {
            words.push(format!("overrides OMPI_MCA_{key}={v} from the environment (the link `{link}` defines {key})"));
        }
    }
    if btl.ends_with("tcp") {
        words.push(tcp_interface(&mut mca, remote, interface, env));
    }
    Transport { mca, description: words.join("; ") }
}

fn tcp_interface(
    mca: &mut Vec<(String, String)>,
    remote: &[String],
    interface: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let include = env("OMPI_MCA_btl_tcp_if_include");
    let exclude = env("OMPI_MCA_btl_tcp_if_exclude");
    if let Some(i) = interface {
        mca.push(("btl_tcp_if_include".into(), i.into()));
        let overridden = include.map(|v| format!(", overriding OMPI_MCA_btl_tcp_if_include={v} from the environment")).unwrap_or_default();
        return format!("TCP over {i} (the spec's interface{overridden})");
    }
    if let Some(v) = include {
        return format!("TCP over {v} (OMPI_MCA_btl_tcp_if_include from the environment)");
    }
    if let Some(v) = exclude {
        return format!("TCP over every interface but {v} (OMPI_MCA_btl_tcp_if_exclude from the environment)");
    }
    if remote.is_empty() {
        mca.push(("btl_tcp_if_include".into(), "lo".into()));
        return "TCP over loopback (every rank on this host)".into();
    }
    "TCP over Open MPI's default interfaces (all but loopback)".into()
}

/// A hostfile's slots as Open MPI counts them, at most `u32::MAX`: each line's `slots=`, and for
/// a line without one the host's cores (`local_cores` for this machine); None when such a host
/// is another machine, whose cores only Open MPI sees at launch.
pub fn hostfile_slots(text: &str, local_cores: u32) -> Option<u32> {
    super::hosts::hostfile_hosts(text).iter().try_fold(0u32, |total, (host, slots)| {
        let slots = match slots {
            HostSlots::Given(n) => *n,
            HostSlots::Cores if super::hosts::is_local(host) => local_cores,
            HostSlots::Cores => return None,
        };
        Some(total.saturating_add(slots))
    })
}

fn mpirun(plan: &RunPlan, hostfile: Option<&str>, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    let world = plan.layout.world;
    let capacity = hostfile.map_or(Some(machine.slots), |text| hostfile_slots(text, machine.slots));
    let remote = hostfile.map(super::hosts::remote_hosts).unwrap_or_default();
    let transport = transport(&plan.link, &remote, plan.interface.as_deref(), &|k| std::env::var(k).ok());
    // A remote host without `slots=` has cores only Open MPI counts: nothing is claimed, and a
    // world past them is refused by mpirun in its own words ("not enough slots").
    let oversubscribed = capacity.is_some_and(|slots| world > slots);
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
    for (key, value) in &transport.mca {
        args.extend(["--mca".into(), key.clone(), value.clone()]);
    }
    for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
        args.extend(["-x".into(), format!("{var}={}", plan.threads_per_rank)]);
    }
    args.extend(["-x".into(), OMP_WAIT.into()]);
    if let Some(fault) = &machine.fault {
        args.extend(["-x".into(), format!("{FAULT_ENV}={fault}")]);
    }
    for name in &machine.forwarded {
        args.extend(["-x".into(), name.clone()]);
    }
    args.extend(["--output-filename".into(), path_text(&out.join(RANK_LOGS))]);
    args.extend(rank_args(exe, plan_path, out));
    LaunchCommand {
        program: "mpirun".into(),
        args,
        env: Vec::new(),
        oversubscribed,
        transport: transport.description,
        starts_slurm_step: false,
    }
}

/// Idle OpenMP threads of a rank sleep (libgomp spins otherwise, taking the core the matvec pool needs).
const OMP_WAIT: &str = "OMP_WAIT_POLICY=passive";

fn srun(plan: &RunPlan, plan_path: &Path, out: &Path, exe: &Path, machine: &Machine) -> LaunchCommand {
    let threads = plan.threads_per_rank;
    let transport = transport(&plan.link, &slurm_remote_nodes(), plan.interface.as_deref(), &|k| std::env::var(k).ok());
    let mut env: Vec<(String, String)> = transport.mca.iter().map(|(k, v)| (format!("OMPI_MCA_{k}"), v.clone())).collect();
    env.push(("OMP_NUM_THREADS".into(), threads.to_string()));
    env.push(("MKL_NUM_THREADS".into(), threads.to_string()));
    env.push(OMP_WAIT.split_once('=').map(|(k, v)| (k.into(), v.into())).expect("KEY=VALUE"));
    if let Some(fault) = &machine.fault {
        env.push((FAULT_ENV.into(), fault.clone()));
    }
    // `--export=ALL`: under `sbatch --export=NONE` (SLURM_EXPORT_ENV=NONE, which srun inherits)
    // the ranks would get none of the environment above, and run what the manifest does not say.
    let mut args: Vec<String> = vec![
        "-n".into(),
        plan.layout.world.to_string(),
        format!("--cpus-per-task={threads}"),
        "--kill-on-bad-exit=1".into(),
        "--export=ALL".into(),
    ];
    args.extend(srun_mpi(std::env::var("SLURM_MPI_TYPE").ok().as_deref()));
    args.push(format!("--error={}", path_text(&out.join(RANK_LOGS).join("rank.%t.stderr"))));
    args.extend(rank_args(exe, plan_path, out));
    LaunchCommand { program: "srun".into(), args, env, oversubscribed: false, transport: transport.description, starts_slurm_step: true }
}

/// Under Slurm the nodes are Slurm's choice: inside a one-node allocation (`SLURM_NNODES=1`)
/// every rank is on this host; otherwise (several nodes, or srun allocating itself) they may not
/// be, so TCP is never pinned to loopback.
fn slurm_remote_nodes() -> Vec<String> {
    match std::env::var("SLURM_NNODES").ok().and_then(|n| n.parse::<u32>().ok()) {
        Some(1) => Vec::new(),
        _ => vec!["nodes of the Slurm allocation".into()],
    }
}

/// srun's `--mpi` option: PMIx, the one Slurm plugin Debian 12's Open MPI 4.1 starts under
/// (built `--with-pmix`; under `--mpi=pmi2` or `none` MPI_Init aborts), unless the user's
/// `SLURM_MPI_TYPE` chooses the plugin (then it stays in force: no option).
pub fn srun_mpi(user_choice: Option<&str>) -> Option<String> {
    match user_choice.filter(|v| !v.is_empty()) {
        Some(_) => None,
        None => Some("--mpi=pmix".into()),
    }
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
