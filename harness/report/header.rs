//! The register's header (what, when, from how many manifests, which machine and
//! commit) and "What this machine can do" (each probe: command → result).

use crate::gates::{Gates, Probe};
use crate::manifest::{Manifest, Skipped, Status};
use crate::spec::schema::Kind;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The header's facts, already in words.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// Manifest and experiment counts by status.
    pub counts: String,
    /// The latest `finished_at` among the manifests.
    pub when: String,
    /// Skipped files: `name: reason`.
    pub skipped: Vec<String>,
    /// One line per distinct machine fingerprint.
    pub machines: Vec<String>,
    /// parlab versions and commits that wrote the manifests.
    pub parlab: String,
}

/// Builds the header from the manifests and the skipped files.
pub fn header(list: &[Manifest], skipped: &[Skipped]) -> Header {
    let n = |s: Status| list.iter().filter(|m| m.status == s).count();
    let modelled = list.iter().filter(|m| m.kind == Kind::Model && m.status == Status::Ok).count();
    let experiments: BTreeSet<&str> = list.iter().map(|m| m.experiment.as_str()).collect();
    let counts = format!(
        "{} manifests from {} experiments: {} measured, {} modelled, {} failed, {} not run; {} files skipped",
        list.len(),
        experiments.len(),
        n(Status::Ok) - modelled,
        modelled,
        n(Status::Failed),
        n(Status::NotRun),
        skipped.len()
    );
    let when = list.iter().map(|m| m.finished_at.as_str()).filter(|t| !t.is_empty()).max().unwrap_or("no run finished").to_string();
    let skipped = skipped
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s.path.file_name().map_or_else(|| s.path.display().to_string(), |f| f.to_string_lossy().into_owned()),
                s.reason
            )
        })
        .collect();
    let tools: BTreeSet<String> = list.iter().map(|m| format!("{} (commit {})", m.parlab.version, m.parlab.commit)).collect();
    Header { counts, when, skipped, machines: machines(list), parlab: tools.into_iter().collect::<Vec<_>>().join(", ") }
}

/// The sha256 (12 hex) of a machine fingerprint's canonical JSON.
pub fn fingerprint_id(machine: &Value) -> String {
    let text = serde_json::to_string(machine).unwrap_or_default();
    hex::encode(Sha256::digest(text.as_bytes()))[..12].to_string()
}

fn machines(list: &[Manifest]) -> Vec<String> {
    let mut seen: BTreeMap<String, (usize, &Value)> = BTreeMap::new();
    for m in list {
        seen.entry(fingerprint_id(&m.machine)).or_insert((0, &m.machine)).0 += 1;
    }
    seen.into_iter().map(|(id, (runs, v))| format!("{} ({id}, {runs} manifests)", describe_machine(v))).collect()
}

fn describe_machine(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|x| !x.is_empty()).unwrap_or("?").to_string();
    let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    format!(
        "{}, {} cores, {} memory, {}, Open MPI: {}, torch {}, {} GPUs",
        s("cpu_model"),
        u("cores"),
        crate::units::format_bytes(u("memory_bytes") as f64),
        s("os"),
        s("openmpi"),
        s("torch"),
        u("gpus")
    )
}

/// One probe as the register prints it.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeView {
    /// What it decides.
    pub name: String,
    /// The command.
    pub command: String,
    /// `exit N` or `did not finish`.
    pub status: String,
    /// Its output, lines joined.
    pub output: String,
}

/// "What this machine can do": the probes, and what they rule out.
#[derive(Debug, Clone, Serialize)]
pub struct MachineSection {
    /// Where the probes came from.
    pub source: String,
    /// Each probe.
    pub probes: Vec<ProbeView>,
    /// What the probes decide, in sentences.
    pub verdicts: Vec<String>,
}

/// Builds the section from the saved gates (`None`: none were saved; `Err`: unreadable).
pub fn machine(gates: Result<Option<Gates>, String>, list: &[Manifest]) -> MachineSection {
    let gates = match gates {
        Ok(Some(g)) => g,
        Ok(None) => return empty("No gates were saved beside these manifests (`parlab run` saves them to `_gates/gates.json` in the manifests folder); the fingerprints above come from the manifests.".into()),
        Err(e) => return empty(format!("The saved gates could not be read: {e}.")),
    };
    let probes = gates.probes.iter().map(probe_view).collect();
    MachineSection {
        source: "Recorded by a command and not assumed: the probes `parlab run` ran before launching (saved in `_gates/gates.json` beside the manifests).".into(),
        probes,
        verdicts: verdicts(&gates, list),
    }
}

fn empty(source: String) -> MachineSection {
    MachineSection { source, probes: Vec::new(), verdicts: Vec::new() }
}

fn probe_view(p: &Probe) -> ProbeView {
    let status = p.exit_code.map_or("did not finish".into(), |c| format!("exit {c}"));
    let lines: Vec<&str> = p.output.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut output = lines.iter().take(6).cloned().collect::<Vec<_>>().join(" / ");
    if lines.len() > 6 {
        output.push_str(&format!(" / … ({} more lines)", lines.len() - 6));
    }
    ProbeView { name: p.name.clone(), command: p.command.clone(), status, output: super::fmt::escape(&output) }
}

fn verdicts(g: &Gates, list: &[Manifest]) -> Vec<String> {
    let mut out = vec![format!("{} cores and {} GPUs.", g.cores(), g.gpus())];
    let nccl = g.get("nccl").is_some_and(Probe::succeeded);
    let mut missing = Vec::new();
    if g.gpus() < 2 {
        missing.push("multi-GPU");
    }
    if !nccl {
        missing.push("NCCL");
    }
    if !g.has_host_device_link() {
        missing.push("host-device link");
    }
    let not_run = list.iter().filter(|m| m.status == Status::NotRun).count();
    if !missing.is_empty() {
        out.push(format!(
            "So {} runs are NOT_RUN on this machine ({not_run} such runs in these manifests, listed under NOT_RUN).",
            missing.join(", ")
        ));
    }
    out
}
