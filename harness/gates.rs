//! Probes what this machine can do. Each capability keeps the command that decided
//! it, its exit status and its output, so a NOT_RUN can quote its evidence.

use crate::spec::schema::Requires;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Read;
use std::time::{Duration, Instant};

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

/// Runs `command` under `sh -c` with a time limit and records it.
pub fn probe(name: &str, command: &str, limit: Duration) -> Probe {
    let child = std::process::Command::new("sh")
        .args(["-c", &format!("{command} 2>&1")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return Probe { name: name.into(), command: command.into(), exit_code: None, output: "could not start sh".into() };
    };
    let deadline = Instant::now() + limit;
    let exit_code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut output = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut output);
    }
    let output: String = output.trim().chars().take(2000).collect();
    Probe { name: name.into(), command: command.into(), exit_code, output }
}

/// Every probe parlab records, in a fixed order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    /// The probes.
    pub probes: Vec<Probe>,
}

/// The Python interpreter of the project's virtual environment (for torch probes).
pub fn venv_python() -> String {
    std::env::var("PARLAB_PYTHON").unwrap_or_else(|_| ".venv/bin/python".into())
}

impl Gates {
    /// Runs every probe (a few seconds: the torch probe imports torch).
    pub fn probe_machine() -> Self {
        let py = venv_python();
        let t = Duration::from_secs(30);
        let probes = vec![
            probe("cores", "nproc", t),
            probe("memory", "grep MemTotal /proc/meminfo", t),
            probe("cpu_model", "grep -m1 'model name' /proc/cpuinfo", t),
            probe("os", "grep PRETTY_NAME /etc/os-release", t),
            probe("openmpi", "mpirun --version", t),
            probe("openmpi_transports", "ompi_info --parsable | grep -E '^mca:(btl|pml):' | cut -d: -f2,3 | sort -u", t),
            probe("torch", &format!("{py} -c 'import torch; print(torch.__version__, torch.get_num_threads())'"), t),
            probe("gpus", "nvidia-smi -L", t),
            probe("nccl", &format!("{py} -c 'import torch, sys; ok = torch.cuda.is_available(); print(torch.cuda.nccl.version() if ok else \"torch.cuda.is_available() is False\"); sys.exit(0 if ok else 1)'"), t),
            probe("gpu_topology", "nvidia-smi topo -m", t),
        ];
        Gates { probes }
    }

    /// The probe named `name`.
    pub fn get(&self, name: &str) -> Option<&Probe> {
        self.probes.iter().find(|p| p.name == name)
    }

    /// GPUs listed by `nvidia-smi -L` (0 when it failed).
    pub fn gpus(&self) -> u32 {
        self.get("gpus").filter(|p| p.succeeded()).map_or(0, |p| p.output.lines().filter(|l| l.starts_with("GPU ")).count() as u32)
    }

    /// Cores from `nproc`.
    pub fn cores(&self) -> u32 {
        self.get("cores").and_then(|p| p.output.trim().parse().ok()).unwrap_or_else(cpu_cores)
    }

    /// Why `requires` is unmet (one reason per unmet requirement, quoting the probe), or empty.
    pub fn unmet(&self, requires: &Requires) -> Vec<String> {
        let mut reasons = Vec::new();
        let gpus = self.gpus();
        let evidence = |name: &str| self.get(name).map_or("not probed".to_string(), Probe::evidence);
        if let Some(want) = requires.gpus.filter(|w| *w > gpus) {
            reasons.push(format!("needs {want} GPUs, found {gpus}: {}", evidence("gpus")));
        }
        if requires.nccl && !self.get("nccl").is_some_and(Probe::succeeded) {
            reasons.push(format!("needs NCCL: {}", evidence("nccl")));
        }
        if requires.host_device_link && gpus == 0 {
            reasons.push(format!("needs a host-device link (a GPU): {}", evidence("gpus")));
        }
        if let Some(want) = requires.cores.filter(|w| *w > self.cores()) {
            reasons.push(format!("needs {want} cores, found {}: {}", self.cores(), evidence("cores")));
        }
        reasons
    }

    /// The machine fingerprint recorded in every manifest.
    pub fn fingerprint(&self) -> Value {
        let out = |name: &str| self.get(name).filter(|p| p.succeeded()).map(|p| p.output.clone()).unwrap_or_default();
        let after_colon = |s: String| s.split_once(':').map(|(_, v)| v.trim().to_string()).unwrap_or(s);
        let memory_kib: u64 = out("memory").split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        json!({
            "cpu_model": after_colon(out("cpu_model")),
            "cores": self.cores(),
            "memory_bytes": memory_kib * 1024,
            "os": after_colon(out("os")).trim_matches('"').to_string(),
            "openmpi": out("openmpi").lines().next().unwrap_or("").to_string(),
            "torch": out("torch").split_whitespace().next().unwrap_or("").to_string(),
            "gpus": self.gpus(),
        })
    }
}

/// Cores available to this process.
pub fn cpu_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}
