//! Probes what this machine can do. Each capability keeps the command that decided
//! it, its exit status and its output, so a NOT_RUN can quote its evidence.

use crate::manifest::machine::Fingerprint;
use crate::spec::schema::Requires;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod cache;

/// What a probe decides: the name its record carries in the gates and every manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeName {
    /// The CPUs parlab may run on and their physical cores ([`core_count`]).
    Cores,
    /// MemTotal.
    Memory,
    /// The CPU's model name.
    CpuModel,
    /// The operating system's name.
    Os,
    /// `mpirun --version`.
    Openmpi,
    /// Open MPI's byte and point-to-point transports.
    OpenmpiTransports,
    /// The Python torch's version and threads.
    Torch,
    /// `nvidia-smi -L`.
    Gpus,
    /// `nvidia-smi topo -m`.
    GpuTopology,
    /// The GPUs' PCIe link.
    HostDeviceLink,
    /// Each GPU's name, memory, compute capability and driver.
    GpuDetails,
    /// CUDA devices parlab's own libtorch sees (in process).
    Cuda,
    /// Whether this binary captures CUDA graphs (in process).
    CudaGraph,
    /// NCCL loaded as a rank would (in process).
    Nccl,
}

crate::named!(ProbeName {
    Cores => "cores",
    Memory => "memory",
    CpuModel => "cpu_model",
    Os => "os",
    Openmpi => "openmpi",
    OpenmpiTransports => "openmpi_transports",
    Torch => "torch",
    Gpus => "gpus",
    GpuTopology => "gpu_topology",
    HostDeviceLink => "host_device_link",
    GpuDetails => "gpu_details",
    Cuda => "cuda",
    CudaGraph => "cuda_graph",
    Nccl => "nccl",
});

/// One probe: the command, how it exited, what it printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// What the probe decides (`gpus`, `nccl`, `openmpi`, ...).
    pub name: String,
    /// The shell command it ran.
    pub command: String,
    /// Its exit status (None when it could not start or timed out).
    pub exit_code: Option<i32>,
    /// What it printed (stdout and stderr, trimmed, at most 2,000 characters).
    pub output: String,
}

impl Probe {
    /// True when the command exited 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// `command` → `exit N: first line of output`, for NOT_RUN reasons.
    pub fn evidence(&self) -> String {
        let first = self.output.lines().next().unwrap_or("").trim();
        let status = self.exit_code.map_or("did not finish".to_string(), |c| format!("exit {c}"));
        format!("`{}` → {status}{}", self.command, if first.is_empty() { String::new() } else { format!(": {first}") })
    }
}

/// Runs `command` under `sh -c` with a time limit and records it. The shell runs in its own
/// process group with its output in an unnamed file (never a pipe a child could fill or hold
/// open): at the limit, or when parlab receives a termination signal, the whole group is killed
/// and the probe recorded as not finished; a probe that exits leaves nothing of its group behind.
pub fn probe(name: &str, command: &str, limit: Duration) -> Probe {
    run_bounded(name, command, limit, OnSignal::Stop)
}

/// What a command run by [`run_bounded`] does when parlab receives a termination signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// It is killed at once (a probe: the run is being stopped).
    Stop,
    /// It runs on to its limit (a clean-up the stop itself needs, such as `scancel`).
    Finish,
}

/// [`probe`]'s mechanism: `command` under `sh -c` in a process group of its own, its output in
/// an unnamed file, the whole group killed at `limit` (and at a termination signal when
/// `on_signal` says stop); recorded as not finished when killed.
pub fn run_bounded(name: &str, command: &str, limit: Duration, on_signal: OnSignal) -> Probe {
    let record = |exit_code, output: String| Probe { name: name.into(), command: command.into(), exit_code, output };
    let Ok(mut log) = probe_output_file() else {
        return record(None, "could not create a file for its output".into());
    };
    let child = log.try_clone().and_then(|stdout| {
        let stderr = stdout.try_clone()?;
        let mut c = std::process::Command::new("sh");
        c.args(["-c", command]).stdin(std::process::Stdio::null()).stdout(stdout).stderr(stderr);
        c.process_group(0);
        crate::launch::supervise::die_with_parent(&mut c);
        limit_output(&mut c);
        c.spawn()
    });
    let Ok(child) = child else {
        return record(None, "could not start sh".into());
    };
    let exit_code = wait_for_probe(child, Instant::now() + limit, on_signal);
    record(exit_code, probe_output(&mut log))
}

/// The most bytes a probe may write into its output (an in-memory file): a probe that prints
/// on and on is stopped there (SIGXFSZ) instead of filling memory until its time limit.
pub const PROBE_OUTPUT_LIMIT: u64 = 16 << 20;

/// Caps the files the probe writes, its output among them, at [`PROBE_OUTPUT_LIMIT`].
fn limit_output(c: &mut std::process::Command) {
    // SAFETY: setrlimit is async-signal-safe; it is the only call made between fork and exec here.
    unsafe {
        c.pre_exec(|| {
            let cap = libc::rlimit { rlim_cur: PROBE_OUTPUT_LIMIT, rlim_max: PROBE_OUTPUT_LIMIT };
            match libc::setrlimit(libc::RLIMIT_FSIZE, &cap) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
}

/// How long a killed probe may take to die before it is left to a thread that reaps it (a
/// process asleep in the kernel, as `nvidia-smi` in a wedged driver, ignores SIGKILL until it wakes).
const KILLED_PROBE_GRACE: Duration = Duration::from_secs(2);

/// Waits for a probe's shell until `deadline` (or a termination signal, with [`OnSignal::Stop`]);
/// its exit code (None when it was killed). Its process group is killed before the shell is
/// reaped, so the group id still names only the probe's processes; a shell that does not die
/// within [`KILLED_PROBE_GRACE`] is reaped by a thread of its own whenever it does.
fn wait_for_probe(mut child: std::process::Child, deadline: Instant, on_signal: OnSignal) -> Option<i32> {
    let group = child.id() as i32;
    let exited = || crate::launch::supervise::exited_unreaped(group as u32);
    loop {
        let done = exited();
        let signalled = on_signal == OnSignal::Stop && crate::launch::signals::received().is_some();
        if done || signalled || Instant::now() >= deadline {
            // SAFETY: killpg only sends a signal; the shell is unreaped, so `group` is still ours.
            unsafe { libc::killpg(group, libc::SIGKILL) };
            let grace = Instant::now() + KILLED_PROBE_GRACE;
            while !exited() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !exited() {
                // Without a thread to spare (a process limit) it stays a zombie until parlab ends.
                let _ = std::thread::Builder::new().spawn(move || child.wait());
                return None;
            }
            let status = child.wait().ok()?;
            return if done { status.code() } else { None };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs an in-process probe (a driver or library call) on a thread of its own for at most
/// `limit`: a call that does not return (a wedged driver) is recorded as not finished and
/// left behind, rather than holding `parlab run` for ever; one that panicked (a library's
/// assertion) is recorded as such, not as slow.
pub fn in_process(name: &str, command: &str, limit: Duration, call: fn() -> Probe) -> Probe {
    use std::sync::mpsc::RecvTimeoutError;
    let (answer, answered) = std::sync::mpsc::channel();
    let started = std::thread::Builder::new().spawn(move || drop(answer.send(call())));
    let unanswered = |output: String| Probe { name: name.into(), command: command.into(), exit_code: None, output };
    match started.map(|_| answered.recv_timeout(limit)) {
        Ok(Ok(probe)) => probe,
        Ok(Err(RecvTimeoutError::Timeout)) => unanswered(format!("did not answer within {} s", limit.as_secs_f64())),
        Ok(Err(RecvTimeoutError::Disconnected)) => unanswered("panicked before answering".into()),
        Err(_) => call(),
    }
}

/// An unnamed in-memory file for a probe's output (`memfd_create`: no folder needed, so a
/// missing or read-only TMPDIR cannot fail every probe).
fn probe_output_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated literal; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::memfd_create(c"parlab-probe".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// The first 2,000 characters of what a probe printed, trimmed (bytes that are not UTF-8 shown
/// as U+FFFD rather than losing the rest).
fn probe_output(log: &mut std::fs::File) -> String {
    use std::io::Seek;
    let mut bytes = Vec::new();
    let _ = log.seek(std::io::SeekFrom::Start(0)).and_then(|_| log.take(64 * 1024).read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).trim().chars().take(2000).collect()
}

/// Every probe parlab records, in a fixed order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    /// The probes.
    pub probes: Vec<Probe>,
    /// When the probes ran and whether this command took them from the cache (absent in gates
    /// saved before the cache existed).
    #[serde(default, skip_serializing_if = "Provenance::is_unrecorded")]
    pub provenance: Provenance,
}

/// When a command's gates were probed, and whether by this command or an earlier one (cached).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Provenance {
    /// Not recorded (gates saved before the cache existed, or built by hand).
    #[default]
    Unrecorded,
    /// Probed by this command.
    Probed {
        /// When (RFC 3339 UTC).
        probed_at: String,
    },
    /// Probed by an earlier command and read from the gates cache (`gates::cache`).
    Cached {
        /// When they were probed (RFC 3339 UTC).
        probed_at: String,
        /// The cache file.
        file: PathBuf,
    },
}

impl Provenance {
    /// True for [`Provenance::Unrecorded`].
    pub fn is_unrecorded(&self) -> bool {
        matches!(self, Provenance::Unrecorded)
    }

    /// When the probes ran, where recorded.
    pub fn probed_at(&self) -> Option<&str> {
        match self {
            Provenance::Unrecorded => None,
            Provenance::Probed { probed_at } | Provenance::Cached { probed_at, .. } => Some(probed_at),
        }
    }

    /// What a decision quoting a cached probe adds to its evidence (empty unless cached).
    pub fn label(&self) -> String {
        match self {
            Provenance::Cached { probed_at, .. } => format!("{CACHED_LABEL_START}{probed_at}{CACHED_LABEL_END}"),
            _ => String::new(),
        }
    }
}

/// How [`Provenance::label`] opens, before the probe time.
const CACHED_LABEL_START: &str = " (probed at ";
/// How [`Provenance::label`] closes, after the probe time.
const CACHED_LABEL_END: &str = ", cached; `--reprobe` probes again)";

/// `reason` without the labels [`Provenance::label`] added to it: the decision itself, the same
/// whether its probes were fresh or cached, and whenever they ran.
pub fn unlabelled(reason: &str) -> String {
    let mut rest = reason;
    let mut out = String::with_capacity(reason.len());
    while let Some(start) = rest.find(CACHED_LABEL_START) {
        let after = &rest[start + CACHED_LABEL_START.len()..];
        // A label holds one time and nothing else: text with a `(` or `)` between its ends is not one.
        match after.find(CACHED_LABEL_END).filter(|&end| !after[..end].contains(['(', ')'])) {
            Some(end) => {
                out.push_str(&rest[..start]);
                rest = &after[end + CACHED_LABEL_END.len()..];
            }
            None => {
                out.push_str(&rest[..start + CACHED_LABEL_START.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The Python the torch probe starts when `PARLAB_PYTHON` is unset.
pub const DEFAULT_PYTHON: &str = ".venv/bin/python";

/// The Python interpreter of the project's virtual environment (for torch probes).
pub fn venv_python() -> String {
    std::env::var("PARLAB_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_PYTHON.into())
}

impl Gates {
    /// Runs every probe (a few seconds: the torch probe imports torch).
    pub fn probe_machine() -> Self {
        // Quoted for `sh -c`: a venv under a folder whose name has a space still probes.
        let py = format!("'{}'", venv_python().replace('\'', "'\\''"));
        let t = Duration::from_secs(30);
        let torch = format!("{py} -c 'import torch; print(torch.__version__, torch.get_num_threads())'");
        let commands: [(ProbeName, &str); 10] = [
            (ProbeName::Memory, "grep MemTotal /proc/meminfo"),
            (ProbeName::CpuModel, "grep -m1 'model name' /proc/cpuinfo"),
            (ProbeName::Os, "grep PRETTY_NAME /etc/os-release"),
            (ProbeName::Openmpi, "mpirun --version"),
            (ProbeName::OpenmpiTransports, "ompi_info --parsable | grep -E '^mca:(btl|pml):' | cut -d: -f2,3 | sort -u"),
            (ProbeName::Torch, &torch),
            (ProbeName::Gpus, "nvidia-smi -L"),
            (ProbeName::GpuTopology, "nvidia-smi topo -m"),
            (ProbeName::HostDeviceLink, HOST_DEVICE_LINK),
            (ProbeName::GpuDetails, GPU_DETAILS),
        ];
        // The probes are independent; running them at once keeps `parlab run`'s start short
        // (two of them import torch). The order of the result is the order above.
        // A probe whose thread cannot be created (a process limit) runs on this thread instead.
        let mut probes: Vec<Probe> = std::thread::scope(|scope| {
            let handles: Vec<_> = commands
                .iter()
                .map(|(name, cmd)| (name.name(), cmd, std::thread::Builder::new().spawn_scoped(scope, move || probe(name.name(), cmd, t))))
                .collect();
            handles
                .into_iter()
                .map(|(name, cmd, thread)| match thread {
                    Ok(thread) => thread.join().unwrap_or_else(|_| Probe {
                        name: name.to_string(),
                        command: cmd.to_string(),
                        exit_code: None,
                        output: "the probe's thread panicked".into(),
                    }),
                    Err(_) => probe(name, cmd, t),
                })
                .collect()
        });
        probes.insert(0, in_process(ProbeName::Cores.name(), CORES_PROBE_COMMAND, t, cores_probe));
        probes.push(in_process(ProbeName::Cuda.name(), CUDA_PROBE_COMMAND, t, cuda_probe));
        probes.push(cuda_graph_probe());
        probes.push(in_process(ProbeName::Nccl.name(), crate::nccl::PROBE_COMMAND, t, crate::nccl::probe));
        Gates { probes, provenance: Provenance::Unrecorded }
    }

    /// The record of probe `name`, when it was taken.
    pub fn get(&self, name: ProbeName) -> Option<&Probe> {
        self.probes.iter().find(|p| p.name == name.name())
    }

    /// GPUs listed by `nvidia-smi -L` (0 when it failed).
    pub fn gpus(&self) -> u32 {
        self.get(ProbeName::Gpus).filter(|p| p.succeeded()).map_or(0, |p| p.output.lines().filter(|l| l.starts_with("GPU ")).count() as u32)
    }

    /// CUDA devices parlab's own libtorch sees (0 when the probe failed or was not taken).
    pub fn cuda_devices(&self) -> u32 {
        self.get(ProbeName::Cuda).filter(|p| p.succeeded()).and_then(|p| cuda_count(&p.output)).unwrap_or(0)
    }

    /// True when a GPU answered the PCIe link query (or, for gates saved before that
    /// probe existed, when `nvidia-smi -L` listed one).
    pub fn has_host_device_link(&self) -> bool {
        match self.get(ProbeName::HostDeviceLink) {
            Some(p) => p.succeeded() && !p.output.trim().is_empty() && self.gpus() > 0,
            None => self.gpus() > 0,
        }
    }

    /// The hardware threads this process may run on, from the `cores` probe (its first number:
    /// gates recorded before it counted cores hold `nproc`'s), or counted now where it has none.
    pub fn cores(&self) -> u32 {
        let probed = self.get(ProbeName::Cores).and_then(|p| p.output.split_whitespace().next()?.parse().ok());
        probed.unwrap_or_else(cpu_cores)
    }

    /// Physical cores from the `cores` probe (Open MPI's slots on this host), or counted now
    /// where it has none (gates recorded with `nproc`).
    pub fn physical_cores(&self) -> u32 {
        let output = self.get(ProbeName::Cores).map(|p| p.output.as_str()).unwrap_or_default();
        let probed = output.strip_suffix(" physical cores").and_then(|rest| rest.rsplit(' ').next()?.parse().ok());
        probed.unwrap_or_else(physical_cores)
    }

    /// Why `requires` is unmet (one reason per unmet requirement, quoting the probe), or empty.
    pub fn unmet(&self, requires: &Requires) -> Vec<String> {
        let mut reasons = Vec::new();
        let gpus = self.gpus();
        let label = self.provenance.label();
        let evidence = |name: ProbeName| self.get(name).map_or("not probed".to_string(), |p| format!("{}{label}", p.evidence()));
        // A run on CUDA has the GPUs its libtorch sees (`CUDA_VISIBLE_DEVICES`, a container's
        // mask), which `nvidia-smi -L` does not honour (and a container may have no nvidia-smi);
        // gates recorded before parlab asked its libtorch have only nvidia-smi's count.
        let by_cuda = requires.cuda && self.get(ProbeName::Cuda).is_some();
        let (gpus, counted_by) = if by_cuda { (self.cuda_devices(), ProbeName::Cuda) } else { (gpus, ProbeName::Gpus) };
        if let Some(want) = requires.gpus.filter(|w| *w > gpus) {
            let per_rank = if requires.nccl { " (one per NCCL rank: two ranks cannot share a GPU in one NCCL communicator)" } else { "" };
            let plural = |n: u32| if n == 1 { "GPU" } else { "GPUs" };
            reasons.push(format!("needs {want} {}{per_rank}, found {gpus} {}: {}", plural(want), plural(gpus), evidence(counted_by)));
        }
        if requires.nccl && !self.get(ProbeName::Nccl).is_some_and(Probe::succeeded) {
            reasons.push(format!("needs NCCL: {}", evidence(ProbeName::Nccl)));
        }
        if requires.host_device_link && !self.has_host_device_link() {
            let name = if self.get(ProbeName::HostDeviceLink).is_some() { ProbeName::HostDeviceLink } else { ProbeName::Gpus };
            reasons.push(format!("needs a host-device link (a GPU): {}", evidence(name)));
        }
        if requires.cuda && self.cuda_devices() == 0 {
            reasons.push(format!("needs a CUDA device visible to parlab's libtorch: {}", evidence(ProbeName::Cuda)));
        }
        if requires.cuda_graph && !self.get(ProbeName::CudaGraph).is_some_and(Probe::succeeded) {
            reasons.push(format!("needs CUDA graph capture in this parlab: {}", evidence(ProbeName::CudaGraph)));
        }
        if let Some(want) = requires.cores.filter(|w| *w > self.cores()) {
            reasons.push(format!("needs {want} cores, found {}: {}", self.cores(), evidence(ProbeName::Cores)));
        }
        reasons
    }

    /// The machine fingerprint recorded in every manifest.
    pub fn fingerprint(&self) -> Fingerprint {
        let out = |name: ProbeName| self.get(name).filter(|p| p.succeeded()).map(|p| p.output.clone()).unwrap_or_default();
        let after_colon = |s: String| s.split_once(':').map(|(_, v)| v.trim().to_string()).unwrap_or(s);
        let memory_kib: u64 = out(ProbeName::Memory).split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        Fingerprint {
            cpu_model: after_colon(out(ProbeName::CpuModel)),
            cores: self.cores(),
            memory_bytes: memory_kib * 1024,
            os: out(ProbeName::Os).split_once('=').map_or(String::new(), |(_, v)| v.trim().trim_matches('"').to_string()),
            openmpi: out(ProbeName::Openmpi).lines().next().unwrap_or("").to_string(),
            torch: out(ProbeName::Torch).split_whitespace().next().unwrap_or("").to_string(),
            gpu_models: gpu_models(&out(ProbeName::GpuDetails)),
            gpus: self.gpus(),
            topology: crate::topology::compact(&self.topology()),
        }
    }

    /// The GPU rows of the `gpu_topology` probe (empty where it failed or found no GPU).
    pub fn topology(&self) -> Vec<crate::topology::GpuRow> {
        self.get(ProbeName::GpuTopology).filter(|p| p.succeeded()).map_or_else(Vec::new, |p| crate::topology::parse(&p.output))
    }
}

/// True when the build linked libtorch_cuda (the torch it was built against has CUDA; `build.rs`).
pub const LINKED_TORCH_CUDA: bool = option_env!("PARLAB_LINKED_TORCH_CUDA").is_some();

/// What the in-process CUDA probe says it ran.
const CUDA_PROBE_COMMAND: &str = "parlab, in process: tch::Cuda::device_count(), cudnn_is_available()";

/// Each GPU's name, memory, compute capability and driver, as `nvidia-smi` reports them.
pub const GPU_DETAILS: &str = "nvidia-smi --query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv,noheader";

/// parlab's own libtorch asked for CUDA devices: what a `device: cuda` rank will find (a torch
/// without CUDA, or a binary without libtorch_cuda linked, sees none even on a GPU machine).
pub fn cuda_probe() -> Probe {
    let devices = tch::Cuda::device_count();
    let output =
        format!("CUDA devices: {devices}; cuDNN: {}; libtorch_cuda linked: {}", tch::Cuda::cudnn_is_available(), LINKED_TORCH_CUDA);
    Probe {
        name: ProbeName::Cuda.name().into(),
        command: CUDA_PROBE_COMMAND.into(),
        exit_code: Some(if devices > 0 { 0 } else { 1 }),
        output,
    }
}

/// Whether this binary can capture CUDA graphs (`step: graph`): built with harness/cuda_graph.cpp,
/// or why not. The device itself is the `cuda` probe's question.
pub fn cuda_graph_probe() -> Probe {
    let (exit_code, output) = match crate::cuda_graph::absent() {
        None => (0, "CUDA graph capture: built (libtorch's at::cuda::CUDAGraph, harness/cuda_graph.cpp)".to_string()),
        Some(why) => (1, format!("CUDA graph capture: not built ({why})")),
    };
    Probe {
        name: ProbeName::CudaGraph.name().into(),
        command: "parlab, in process: built with harness/cuda_graph.cpp".into(),
        exit_code: Some(exit_code),
        output,
    }
}

/// Each GPU's name from the `gpu_details` probe's lines (index, name, memory, compute
/// capability, driver), `; `-joined; empty without GPUs.
fn gpu_models(details: &str) -> String {
    let model = |line: &str| {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        (fields.len() >= 3 && !fields[1].is_empty()).then(|| fields[1].to_string())
    };
    details.lines().filter_map(model).collect::<Vec<_>>().join("; ")
}

/// The device count in a CUDA probe's output.
fn cuda_count(output: &str) -> Option<u32> {
    output.strip_prefix("CUDA devices: ")?.split(';').next()?.trim().parse().ok()
}

/// The PCIe link query that decides whether a host-device link exists.
pub const HOST_DEVICE_LINK: &str = "nvidia-smi --query-gpu=index,name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader";

/// Where the gates a run used are saved: a subfolder of the manifests folder, so
/// `manifest::read_all` (which reads only the folder's own `*.json`) never takes it for a manifest.
pub fn saved_path(manifests: &Path) -> PathBuf {
    manifests.join("_gates").join("gates.json")
}

/// Records `gates` beside the manifests (`<manifests>/_gates/gates.json`, written atomically).
pub fn save(gates: &Gates, manifests: &Path) -> std::io::Result<PathBuf> {
    let path = saved_path(manifests);
    std::fs::create_dir_all(path.parent().unwrap_or(manifests))?;
    let mut text = serde_json::to_string_pretty(gates).map_err(std::io::Error::other)?;
    text.push('\n');
    crate::manifest::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// Why the gates saved beside the manifests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SavedGatesError {
    /// The file exists but could not be read.
    #[error("{path}: cannot read: {cause}")]
    Unreadable {
        /// The gates file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file is not JSON of the gates' shape.
    #[error("{path}: not a gates record ({message})")]
    NotGates {
        /// The gates file.
        path: PathBuf,
        /// serde_json's message.
        message: String,
    },
}

/// The gates saved beside the manifests: `Ok(None)` when none were saved, `Err` when the file is unreadable.
pub fn load(manifests: &Path) -> Result<Option<Gates>, SavedGatesError> {
    let path = saved_path(manifests);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|cause| SavedGatesError::Unreadable { path: path.clone(), cause })?;
    serde_json::from_str(&text).map(Some).map_err(|e| SavedGatesError::NotGates { path, message: e.to_string() })
}

/// Hardware threads available to this process (what parlab's own parallel work may use).
pub fn cpu_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Physical cores among the CPUs this process may run on: what Open MPI counts as a host's
/// slots without a hostfile (one per core, not per hardware thread).
pub fn physical_cores() -> u32 {
    core_count().cores
}

/// What the `cores` probe says it reads.
const CORES_PROBE_COMMAND: &str =
    "parlab, in process: sched_getaffinity; /sys/devices/system/cpu/cpuN/topology/core_cpus_list (thread_siblings_list)";

/// The CPUs this process may run on, and the physical cores they belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreCount {
    /// Distinct cores (sets of sibling hardware threads) among the allowed CPUs.
    pub cores: u32,
    /// The allowed CPUs (hardware threads).
    pub hardware_threads: u32,
}

/// Counts the CPUs in this process's affinity (`OMP_NUM_THREADS` and the like do not change it,
/// as they change `nproc`) and their cores, both at most [`cpu_cores`] (a container's CPU
/// quota); without an affinity, every hardware thread counts as a core.
pub fn core_count() -> CoreCount {
    let quota = cpu_cores();
    let count = match allowed_cpus() {
        Some(cpus) => {
            count_cores(&cpus, |cpu, file| std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{file}")).ok())
        }
        None => CoreCount { cores: quota, hardware_threads: quota },
    };
    CoreCount { cores: count.cores.clamp(1, quota), hardware_threads: count.hardware_threads.clamp(1, quota) }
}

/// The CPUs `sched_getaffinity` allows this process (None where it fails or allows none).
fn allowed_cpus() -> Option<Vec<u32>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes at most its size, and
    // CPU_ISSET reads bits below CPU_SETSIZE of a set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus: Vec<u32> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c as u32).collect();
        (!cpus.is_empty()).then_some(cpus)
    }
}

/// The cores of `cpus`, `topology(cpu, file)` reading a CPU's topology file: CPUs that list the
/// same sibling threads share a core (a CPU whose topology cannot be read is a core of its own).
fn count_cores(cpus: &[u32], topology: impl Fn(u32, &str) -> Option<String>) -> CoreCount {
    let core_of = |cpu: u32| {
        let siblings = topology(cpu, "core_cpus_list").or_else(|| topology(cpu, "thread_siblings_list"));
        siblings.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).unwrap_or_else(|| format!("cpu{cpu}"))
    };
    let cores: std::collections::BTreeSet<String> = cpus.iter().map(|&c| core_of(c)).collect();
    CoreCount { cores: cores.len() as u32, hardware_threads: cpus.len() as u32 }
}

/// The `cores` probe: hardware threads first (what [`Gates::cores`] reads, as it read `nproc`'s
/// one number before), then physical cores ([`Gates::physical_cores`]).
fn cores_probe() -> Probe {
    let count = core_count();
    Probe {
        name: ProbeName::Cores.name().into(),
        command: CORES_PROBE_COMMAND.into(),
        exit_code: Some(0),
        output: format!("{} hardware threads, {} physical cores", count.hardware_threads, count.cores),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_process_probe_that_does_not_answer_is_recorded_as_not_finished() {
        fn hangs() -> Probe {
            std::thread::sleep(Duration::from_secs(3600));
            unreachable!("slept an hour")
        }
        fn answers() -> Probe {
            Probe { name: "x".into(), command: "c".into(), exit_code: Some(0), output: "fine".into() }
        }
        let start = Instant::now();
        let hung = in_process("cuda", "a driver call", Duration::from_millis(200), hangs);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!((hung.name.as_str(), hung.exit_code, hung.output.as_str()), ("cuda", None, "did not answer within 0.2 s"));
        assert_eq!(in_process("x", "c", Duration::from_secs(5), answers).output, "fine");
        fn panics() -> Probe {
            panic!("a library's assertion")
        }
        let start = Instant::now();
        let panicked = in_process("nccl", "a library call", Duration::from_secs(60), panics);
        assert!(start.elapsed() < Duration::from_secs(30), "a panic is told at once, not after the limit");
        assert_eq!((panicked.exit_code, panicked.output.as_str()), (None, "panicked before answering"));
    }

    #[test]
    fn a_probe_is_bounded_by_its_limit_whatever_its_children_hold_and_leaves_none_behind() {
        // A pipeline's children hold its output open: killing only the shell used to hang here.
        let start = Instant::now();
        let hung = probe("hung", "sleep 600 | cat", Duration::from_millis(500));
        assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
        assert_eq!(hung.exit_code, None);
        // More output than a pipe holds does not make a probe time out.
        let big = probe("big", "head -c 300000 /dev/zero | tr '\\0' x; echo done >&2", Duration::from_secs(20));
        assert_eq!(big.exit_code, Some(0), "{}", big.evidence());
        assert_eq!(big.output.chars().count(), 2000);
        // What a probe started in the background ends with it, and its exit code is kept.
        let marker = format!("600.{}", std::process::id());
        let bg = probe("bg", &format!("sleep {marker} & echo started; exit 3"), Duration::from_secs(20));
        assert_eq!((bg.exit_code, bg.output.as_str()), (Some(3), "started"));
        let until = Instant::now() + Duration::from_secs(5);
        while crate::launch::supervise::running_with(&marker) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(crate::launch::supervise::running_with(&marker), 0, "a probe's background child outlived it");
        // A probe that prints on and on is stopped at the output cap, not at its time limit.
        let start = Instant::now();
        let flood = probe("flood", "cat /dev/zero", Duration::from_secs(60));
        assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
        assert_ne!(flood.exit_code, Some(0), "{}", flood.evidence());
        // Output that is not UTF-8 keeps the rest.
        let bytes = probe("bytes", "printf 'GPU 0\\377 ok'", Duration::from_secs(20));
        assert!(bytes.output.starts_with("GPU 0") && bytes.output.ends_with(" ok"), "{}", bytes.output);
    }

    fn no_gpu() -> Gates {
        let p = |name: &str, command: &str, code: i32, output: &str| Probe {
            name: name.into(),
            command: command.into(),
            exit_code: Some(code),
            output: output.into(),
        };
        Gates {
            probes: vec![
                p("cores", "nproc", 0, "2"),
                p("gpus", "nvidia-smi -L", 127, "sh: 1: nvidia-smi: not found"),
                p("host_device_link", HOST_DEVICE_LINK, 127, "sh: 1: nvidia-smi: not found"),
            ],
            provenance: Provenance::Unrecorded,
        }
    }

    #[test]
    fn cores_are_counted_as_open_mpi_counts_slots_one_per_physical_core() {
        // Four cores of two hardware threads each (CPU n and n + 4 share a core), as a laptop's.
        let smt = |cpu: u32, file: &str| (file == "core_cpus_list").then(|| format!("{},{}\n", cpu % 4, cpu % 4 + 4));
        let all: Vec<u32> = (0..8).collect();
        assert_eq!(count_cores(&all, smt), CoreCount { cores: 4, hardware_threads: 8 });
        assert_eq!(count_cores(&[0, 4], smt), CoreCount { cores: 1, hardware_threads: 2 }, "two threads of one core");
        let older = |cpu: u32, file: &str| (file == "thread_siblings_list").then(|| format!("{}-{}", cpu / 2 * 2, cpu / 2 * 2 + 1));
        assert_eq!(count_cores(&all, older).cores, 4, "kernels before core_cpus_list");
        assert_eq!(count_cores(&[0, 1, 2], |_, _| None).cores, 3, "no topology: each CPU its own core");
        // Here: the affinity's CPUs (OMP_NUM_THREADS, which `nproc` obeys, plays no part), within
        // the quota, and no more cores than them.
        let here = core_count();
        assert!(here.cores >= 1 && here.cores <= here.hardware_threads && here.hardware_threads <= cpu_cores(), "{here:?}");
        assert_eq!(allowed_cpus().map_or(0, |c| c.len() as u32).min(cpu_cores()), here.hardware_threads);
        let gates = Gates { probes: vec![cores_probe()], provenance: Provenance::Unrecorded };
        assert_eq!((gates.cores(), gates.physical_cores()), (here.hardware_threads, here.cores));
        assert_eq!(no_gpu().cores(), 2, "gates recorded with `nproc` still read");
    }

    #[test]
    fn the_fingerprint_tells_gpu_models_apart_and_keeps_gpu_less_ids() {
        let details =
            |output: &str| Probe { name: "gpu_details".into(), command: GPU_DETAILS.into(), exit_code: Some(0), output: output.into() };
        let with = |output: &str| {
            let mut g = no_gpu();
            g.probes.push(details(output));
            g.fingerprint()
        };
        let h200 = with("0, NVIDIA H200, 143771 MiB, 9.0, 580.95.05");
        let h100 = with("0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0, 580.95.05");
        assert_eq!(h200.gpu_models, "NVIDIA H200");
        assert_ne!(h200.id(), h100.id());
        assert_eq!(h200.differences(&h100), ["gpu_models: NVIDIA H200 -> NVIDIA H100 80GB HBM3"]);
        assert!(h200.describe().ends_with("0 GPUs (NVIDIA H200)"), "{}", h200.describe());
        let two = with("0, NVIDIA H200, 143771 MiB, 9.0, 580\n1, NVIDIA H200, 143771 MiB, 9.0, 580");
        assert_eq!(two.gpu_models, "NVIDIA H200; NVIDIA H200");
        assert_eq!(with("0, NVIDIA H200, 143360 MiB, 9.0, 590").id(), h200.id(), "a driver that reserves other memory is the same machine");
        let none = no_gpu().fingerprint();
        assert!(
            none.gpu_models.is_empty() && !serde_json::to_string(&none).unwrap().contains("gpu_models"),
            "ids of GPU-less machines unchanged"
        );
    }

    #[test]
    fn a_kernel_that_keeps_back_other_memory_leaves_the_machine_the_same() {
        let machine = |gib: f64| Fingerprint {
            cpu_model: "CPU".into(),
            cores: 2,
            memory_bytes: (gib * 1073741824.0) as u64,
            ..Fingerprint::default()
        };
        // MemTotal under one kernel and the next, for 8, 24, 64 and 512 GiB installed (the
        // kernel keeps back about 1.5 % and a few hundred MiB, and a little more or less after
        // an update), and for 96 GiB (not a power of two).
        for (installed, before, after) in
            [(8.0, 7.62, 7.55), (24.0, 23.47, 23.30), (64.0, 62.7, 62.5), (512.0, 503.05, 502.9), (96.0, 94.4, 94.1)]
        {
            let (before, after) = (machine(before), machine(after));
            assert_eq!(before.installed_memory(), (installed * 1073741824.0) as u64, "{installed} GiB");
            assert_eq!(before.id(), after.id(), "{installed} GiB");
            assert!(before.differences(&after).is_empty(), "{:?}", before.differences(&after));
        }
        let (small, bigger) = (machine(23.47), machine(47.0));
        assert_ne!(small.id(), bigger.id(), "twice the memory is another machine");
        assert_eq!(small.differences(&bigger), ["memory: 24.0 GiB -> 48.0 GiB"]);
    }

    #[test]
    fn a_cuda_run_counts_the_gpus_its_libtorch_sees_not_every_gpu_installed() {
        let mut gates = no_gpu();
        gates.probes[1] = Probe {
            exit_code: Some(0),
            output: "GPU 0: NVIDIA H200 (UUID: a)\nGPU 1: NVIDIA H200 (UUID: b)".into(),
            ..gates.probes[1].clone()
        };
        let cuda = |n: u32| Probe {
            name: ProbeName::Cuda.name().into(),
            command: CUDA_PROBE_COMMAND.into(),
            exit_code: Some(if n > 0 { 0 } else { 1 }),
            output: format!("CUDA devices: {n}; cuDNN: true; libtorch_cuda linked: true"),
        };
        gates.probes.push(cuda(1));
        let nccl_two = Requires { gpus: Some(2), cuda: true, ..Default::default() };
        let reasons = gates.unmet(&nccl_two);
        assert!(
            reasons.len() == 1 && reasons[0].starts_with("needs 2 GPUs, found 1 GPU: ") && reasons[0].contains("CUDA devices: 1"),
            "{reasons:?}"
        );
        assert!(gates.unmet(&Requires { gpus: Some(2), ..Default::default() }).is_empty(), "off CUDA, nvidia-smi's count");
        *gates.probes.last_mut().unwrap() = cuda(2);
        assert!(gates.unmet(&nccl_two).is_empty());
        gates.probes[1] = no_gpu().probes[1].clone();
        assert!(gates.unmet(&nccl_two).is_empty(), "a container without nvidia-smi whose libtorch sees 2 GPUs");
        gates.probes.pop();
        let reasons = gates.unmet(&nccl_two);
        assert!(
            reasons.iter().any(|r| r.starts_with("needs 2 GPUs, found 0 GPUs: `nvidia-smi -L`")),
            "gates without a cuda probe: {reasons:?}"
        );
    }

    #[test]
    fn a_host_device_link_requirement_quotes_its_probe() {
        let reasons = no_gpu().unmet(&Requires { host_device_link: true, ..Default::default() });
        assert_eq!(reasons.len(), 1);
        assert!(reasons[0].contains("--query-gpu") && reasons[0].contains("exit 127"), "{reasons:?}");
        let mut with_gpu = no_gpu();
        with_gpu.probes[1] = Probe { exit_code: Some(0), output: "GPU 0: NVIDIA H200 (UUID: x)".into(), ..with_gpu.probes[1].clone() };
        with_gpu.probes[2] = Probe { exit_code: Some(0), output: "0, NVIDIA H200, 5, 16".into(), ..with_gpu.probes[2].clone() };
        assert!(with_gpu.unmet(&Requires { host_device_link: true, ..Default::default() }).is_empty());
    }

    #[test]
    fn a_decision_on_cached_probes_says_when_they_were_probed_and_that_they_were_cached() {
        let link = Requires { host_device_link: true, ..Default::default() };
        let mut gates = no_gpu();
        gates.provenance = Provenance::Probed { probed_at: "2026-12-04T19:00:00Z".into() };
        assert!(!gates.unmet(&link)[0].contains("cached"), "{:?}", gates.unmet(&link));
        gates.provenance = Provenance::Cached { probed_at: "2026-12-04T19:00:00Z".into(), file: "state/gates/cache.json".into() };
        let reason = &gates.unmet(&link)[0];
        assert!(reason.contains("exit 127"), "{reason}");
        assert!(reason.ends_with("(probed at 2026-12-04T19:00:00Z, cached; `--reprobe` probes again)"), "{reason}");
        let json = serde_json::to_string(&gates).unwrap();
        assert_eq!(serde_json::from_str::<Gates>(&json).unwrap(), gates, "the provenance is saved with the gates");
        assert!(!serde_json::to_string(&no_gpu()).unwrap().contains("provenance"), "gates without one are saved as before");
    }

    fn gates_label(at: &str) -> String {
        Provenance::Cached { probed_at: at.into(), file: "cache.json".into() }.label()
    }

    #[test]
    fn a_decision_reads_the_same_unlabelled_whether_its_probes_were_fresh_or_cached_and_when() {
        let both = Requires { host_device_link: true, gpus: Some(2), ..Default::default() };
        let mut gates = no_gpu();
        gates.provenance = Provenance::Probed { probed_at: "2026-12-04T19:00:00Z".into() };
        let fresh = gates.unmet(&both).join("; ");
        gates.provenance = Provenance::Cached { probed_at: "2026-12-05T08:00:00Z".into(), file: "cache.json".into() };
        let cached = gates.unmet(&both).join("; ");
        assert_ne!(fresh, cached);
        assert_eq!(cached.matches("cached;").count(), 2, "{cached}");
        assert_eq!(unlabelled(&cached), fresh);
        assert_eq!(unlabelled(&fresh), fresh, "a reason without labels is unchanged");
        assert_eq!(unlabelled("x (probed at 1"), "x (probed at 1", "an unclosed label is kept");
        let real = format!("out (probed at y) z{}", gates_label("T"));
        assert_eq!(unlabelled(&real), "out (probed at y) z", "text that only looks like a label's start is kept");
    }

    #[test]
    fn a_cuda_requirement_is_decided_by_parlabs_own_libtorch_not_by_nvidia_smi() {
        let cuda = Requires { cuda: true, ..Default::default() };
        let mut gates = no_gpu();
        // nvidia-smi lists a GPU, but parlab's libtorch sees none (a CPU-only torch): unmet.
        gates.probes[1] = Probe { exit_code: Some(0), output: "GPU 0: NVIDIA H200 (UUID: x)".into(), ..gates.probes[1].clone() };
        let reasons = gates.unmet(&cuda);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("not probed"), "{reasons:?}");
        let probe = |code, output: &str| Probe {
            name: ProbeName::Cuda.name().into(),
            command: CUDA_PROBE_COMMAND.into(),
            exit_code: Some(code),
            output: output.into(),
        };
        gates.probes.push(probe(1, "CUDA devices: 0; cuDNN: false; libtorch_cuda linked: false"));
        assert_eq!(gates.cuda_devices(), 0);
        assert!(gates.unmet(&cuda)[0].contains("CUDA devices: 0"), "the reason quotes the probe");
        *gates.probes.last_mut().unwrap() = probe(0, "CUDA devices: 2; cuDNN: true; libtorch_cuda linked: true");
        assert_eq!(gates.cuda_devices(), 2);
        assert!(gates.unmet(&cuda).is_empty());
    }

    #[test]
    fn an_nccl_run_wants_a_gpu_per_rank_and_says_how_many_it_found() {
        let mut gates = no_gpu();
        gates.probes[1] = Probe { exit_code: Some(0), output: "GPU 0: NVIDIA H200 (UUID: x)".into(), ..gates.probes[1].clone() };
        gates.probes.push(Probe { name: "nccl".into(), command: "x".into(), exit_code: Some(0), output: "NCCL 2.28.9".into() });
        let two = Requires { gpus: Some(2), nccl: true, ..Default::default() };
        let reasons = gates.unmet(&two);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].starts_with("needs 2 GPUs (one per NCCL rank") && reasons[0].contains("found 1 GPU:"), "{reasons:?}");
        assert!(gates.unmet(&Requires { gpus: Some(1), nccl: true, ..Default::default() }).is_empty());
        gates.probes.pop();
        assert!(gates.unmet(&Requires { nccl: true, ..Default::default() })[0].contains("needs NCCL: not probed"));
    }

    #[test]
    fn this_machines_cuda_probe_matches_what_libtorch_reports() {
        let p = cuda_probe();
        assert_eq!(cuda_count(&p.output), Some(tch::Cuda::device_count() as u32), "{}", p.output);
        assert_eq!(p.succeeded(), tch::Cuda::device_count() > 0);
        if !p.succeeded() {
            println!("no CUDA device visible to libtorch here ({}): the GPU path is skipped on this machine", p.output);
        }
    }

    #[test]
    fn a_graph_run_needs_capture_in_this_binary_and_quotes_the_probe() {
        let graph = Requires { cuda_graph: true, ..Default::default() };
        let mut gates = no_gpu();
        assert!(gates.unmet(&graph)[0].contains("needs CUDA graph capture in this parlab: not probed"));
        gates.probes.push(Probe {
            name: ProbeName::CudaGraph.name().into(),
            command: "in process".into(),
            exit_code: Some(1),
            output: "CUDA graph capture: not built (no libtorch_cuda)".into(),
        });
        assert!(gates.unmet(&graph)[0].contains("not built (no libtorch_cuda)"), "{:?}", gates.unmet(&graph));
        gates.probes.last_mut().unwrap().exit_code = Some(0);
        assert!(gates.unmet(&graph).is_empty());
        // This binary's answer is what a graph run finds: "built" where the shim is linked and
        // callable (it answers for itself: a device, or libtorch's reason there is none).
        let here = cuda_graph_probe();
        let made = crate::cuda_graph::CudaGraph::new(0);
        assert_eq!(here.succeeded(), !matches!(made, Err(crate::cuda_graph::GraphError::NotBuilt(_))), "{}", here.output);
        println!("{}", here.output);
    }

    #[test]
    fn saved_gates_load_back_and_are_not_read_as_manifests() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        let path = save(&no_gpu(), dir.path()).unwrap();
        assert!(path.starts_with(dir.path().join("_gates")));
        assert_eq!(load(dir.path()).unwrap(), Some(no_gpu()));
        let (list, skipped) = crate::manifest::read_all(dir.path());
        assert!(list.is_empty() && skipped.is_empty());
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(load(dir.path()), Err(SavedGatesError::NotGates { path: p, .. }) if p == path));
    }
}
