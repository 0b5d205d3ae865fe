//! The machine fingerprint every manifest records: what decides whether two runs' timings
//! are comparable.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The machine a run measured on, as the gates' probes saw it (empty or 0 where a probe failed).
/// Fields in name order, so the JSON and its [`Fingerprint::id`] read as they always have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fingerprint {
    /// Hardware threads parlab may run on (the gates' `cores` probe: its affinity; `nproc` in
    /// manifests written before it).
    pub cores: u32,
    /// CPU model name (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Each GPU's name (`nvidia-smi --query-gpu`: an H100 and an H200 box are not one machine;
    /// not its memory, which a driver update moves); empty without GPUs, and then absent from
    /// the JSON, so the ids of machines without GPUs stay as they were.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub gpu_models: String,
    /// GPUs `nvidia-smi` lists.
    pub gpus: u32,
    /// Physical memory (`MemTotal`: the installed memory less what the kernel keeps back, some
    /// 1.5 % and a few hundred MiB that move with the kernel's version; the identity reads the
    /// installed size it implies, [`Fingerprint::installed_memory`]).
    pub memory_bytes: u64,
    /// Open MPI's version line.
    pub openmpi: String,
    /// Operating system (`PRETTY_NAME` of `/etc/os-release`).
    pub os: String,
    /// How the GPUs connect (`topology::compact` of `nvidia-smi topo -m`; empty without GPUs,
    /// and then absent from the JSON, so fingerprints made before it keep their ids).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub topology: String,
    /// torch's version.
    pub torch: String,
}

impl Fingerprint {
    /// Each field as (name, value in words), in name order.
    fn fields(&self) -> [(&'static str, String); 9] {
        [
            ("cores", self.cores.to_string()),
            ("cpu_model", self.cpu_model.clone()),
            ("gpu_models", self.gpu_models.clone()),
            ("gpus", self.gpus.to_string()),
            ("memory", crate::units::format_bytes(self.installed_memory() as f64)),
            ("openmpi", self.openmpi.clone()),
            ("os", self.os.clone()),
            ("topology", self.topology.clone()),
            ("torch", self.torch.clone()),
        ]
    }

    /// The fields whose values differ from `other`'s, as `name: before -> after` (`none` for an empty value).
    pub fn differences(&self, other: &Fingerprint) -> Vec<String> {
        let show = |v: &str| if v.is_empty() { "none".to_string() } else { v.to_string() };
        self.fields()
            .into_iter()
            .zip(other.fields())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, a), (_, b))| format!("{name}: {} -> {}", show(&a), show(&b)))
            .collect()
    }

    /// Memory as the machine's identity reads it: the installed size `MemTotal` implies, rounded
    /// up to the next eighth of the power of two below it (24 GiB for a 24 GiB VM's 23.4, 64 for
    /// 62.7, 512 for 503, 8 for 7.6): a step of 6–12 % of the size, wider than what the kernel
    /// keeps back (about 1.5 % and a few hundred MiB) moves from one kernel to the next, so a
    /// kernel update leaves the machine the same while another memory size does not.
    pub fn installed_memory(&self) -> u64 {
        let Some(power) = self.memory_bytes.checked_ilog2() else { return 0 };
        let step = (1u64 << power >> 3).max(1);
        self.memory_bytes.div_ceil(step).saturating_mul(step)
    }

    /// The sha256 (12 hex) of the fingerprint's canonical JSON, its memory the installed size
    /// ([`Fingerprint::installed_memory`]; ids of fingerprints made before 2026-12-07 read the
    /// exact bytes, so a machine's id changes once).
    pub fn id(&self) -> String {
        let identity = Fingerprint { memory_bytes: self.installed_memory(), ..self.clone() };
        let text = serde_json::to_string(&identity).unwrap_or_default();
        crate::identity::short(&hex::encode(Sha256::digest(text.as_bytes()))).to_string()
    }

    /// One line for the register: CPU, cores, memory, OS, Open MPI, torch, GPUs (and their names).
    pub fn describe(&self) -> String {
        let or_unknown = |s: &str| if s.is_empty() { "?".to_string() } else { s.to_string() };
        let models = if self.gpu_models.is_empty() { String::new() } else { format!(" ({})", self.gpu_models) };
        format!(
            "{}, {} cores, {} memory, {}, Open MPI: {}, torch {}, {} GPUs{models}",
            or_unknown(&self.cpu_model),
            self.cores,
            crate::units::format_bytes(self.installed_memory() as f64),
            or_unknown(&self.os),
            or_unknown(&self.openmpi),
            or_unknown(&self.torch),
            self.gpus
        )
    }
}
