//! The register's header (what, when, from how many manifests, which machine and
//! commit) and "What this machine can do" (each probe: command → result).

use crate::gates::{Gates, Probe};
use crate::manifest::machine::Fingerprint;
use crate::manifest::{Manifest, Skipped, Status};
use serde::Serialize;
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
    let n = |s: Status| list.iter().filter(|m| m.status() == s).count();
    let ok = || list.iter().filter(|m| m.status() == Status::Ok);
    let modelled = ok().filter(|m| !m.kind.launches_ranks()).count();
    let imported = ok().filter(|m| m.kind.launches_ranks() && !m.provenance.is_measured()).count();
    let measured = ok().filter(|m| m.kind.launches_ranks() && m.provenance.is_measured()).count();
    let experiments: BTreeSet<&str> = list.iter().map(|m| m.experiment.as_str()).collect();
    let imported_words = if imported > 0 { format!(", {imported} imported from other tools") } else { String::new() };
    let counts = format!(
        "{} manifests from {} experiments: {} measured{imported_words}, {} modelled, {} failed, {} not run; {} files skipped",
        list.len(),
        experiments.len(),
        measured,
        modelled,
        n(Status::Failed),
        n(Status::NotRun),
        skipped.len()
    );
    // When parlab measured: an import's times are when the file was read, not when its tool ran.
    let own = list.iter().filter(|m| m.provenance.imported().is_none());
    let when = own.map(|m| m.finished_at.as_str()).filter(|t| !t.is_empty()).max().unwrap_or("no run finished").to_string();
    let skipped = skipped.iter().map(|s| format!("{}: {}", skipped_name(&s.path), s.reason)).collect();
    let tools: BTreeSet<String> = list.iter().map(|m| format!("{} (commit {})", m.parlab.version, m.parlab.commit)).collect();
    Header { counts, when, skipped, machines: machines(list), parlab: tools.into_iter().collect::<Vec<_>>().join(", ") }
}

/// A skipped file as the register names it: a manifest by its file name, a results file with
/// its run's folder (`<run id>/samples.parquet`), so the reader knows whose it is.
fn skipped_name(path: &std::path::Path) -> String {
    let name = |p: &std::path::Path| p.file_name().map(|f| f.to_string_lossy().into_owned());
    let Some(file) = name(path) else { return path.display().to_string() };
    match path.extension().is_some_and(|x| x == "json") {
        true => file,
        false => path.parent().and_then(name).map_or(file.clone(), |run| format!("{run}/{file}")),
    }
}

fn machines(list: &[Manifest]) -> Vec<String> {
    let mut seen: BTreeMap<String, (usize, &Fingerprint)> = BTreeMap::new();
    // An imported run's machine is described in its own table, not fingerprinted here.
    for m in list.iter().filter(|m| m.provenance.is_measured()) {
        seen.entry(m.machine.id()).or_insert((0, &m.machine)).0 += 1;
    }
    seen.into_iter().map(|(id, (runs, v))| format!("{} ({id}, {runs} manifests)", v.describe())).collect()
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
    /// `nvidia-smi topo -m` read into one row per GPU (empty without GPUs).
    pub topology: Vec<crate::topology::GpuRow>,
}

/// Builds the section from the saved gates (`None`: none were saved; `Err`: unreadable).
pub fn machine(gates: Result<Option<Gates>, crate::gates::SavedGatesError>, list: &[Manifest]) -> MachineSection {
    let gates = match gates {
        Ok(Some(g)) => g,
        Ok(None) => return empty("No gates were saved beside these manifests (`parlab run` saves them to `_gates/gates.json` in the manifests folder); the fingerprints above come from the manifests.".into()),
        Err(e) => return empty(format!("The saved gates could not be read: {e}.")),
    };
    let probes = gates.probes.iter().map(probe_view).collect();
    // When the probes ran, the same whether this `parlab run` took them or reused them from the
    // gates cache (which the console says): a rerun on cached probes renders the same line.
    let when = gates.provenance.probed_at().map_or(String::new(), |at| format!("; probed at {at}"));
    MachineSection {
        source: format!("Recorded by a command and not assumed: the probes `parlab run` ran before launching (saved in `_gates/gates.json` beside the manifests{when})."),
        probes,
        verdicts: verdicts(&gates, list),
        topology: gates.topology(),
    }
}

fn empty(source: String) -> MachineSection {
    MachineSection { source, probes: Vec::new(), verdicts: Vec::new(), topology: Vec::new() }
}

fn probe_view(p: &Probe) -> ProbeView {
    let status = p.exit_code.map_or("did not finish".into(), |c| format!("exit {c}"));
    let lines: Vec<&str> = p.output.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut output = lines.iter().take(6).cloned().collect::<Vec<_>>().join(" / ");
    if lines.len() > 6 {
        output.push_str(&format!(" / … ({} more lines)", lines.len() - 6));
    }
    let here = |text: &str| super::fmt::within_working_folder(text);
    ProbeView { name: p.name.clone(), command: here(&p.command), status, output: super::fmt::escape(&here(&output)) }
}

fn verdicts(g: &Gates, list: &[Manifest]) -> Vec<String> {
    let mut out = vec![format!("{} cores and {} GPUs ({} visible to parlab's libtorch).", g.cores(), g.gpus(), g.cuda_devices())];
    let nccl = g.get(crate::gates::ProbeName::Nccl).is_some_and(Probe::succeeded);
    let mut missing = Vec::new();
    if g.cuda_devices() == 0 {
        missing.push("CUDA");
    }
    if g.gpus() < 2 {
        missing.push("multi-GPU");
    }
    if !nccl {
        missing.push("NCCL");
    }
    if !g.has_host_device_link() {
        missing.push("host-device link");
    }
    let not_run = list.iter().filter(|m| m.status() == Status::NotRun).count();
    if !missing.is_empty() {
        out.push(format!(
            "So {} runs are NOT_RUN on this machine ({not_run} such runs in these manifests, listed under NOT_RUN).",
            missing.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::Provenance;

    #[test]
    fn an_imported_manifest_that_is_not_ok_is_counted_by_its_status_not_taken_from_the_measured() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/nccl_all_reduce_8gpu.json");
        let options = crate::import::ImportOptions::default();
        let imported = crate::import::import(crate::manifest::provenance::ImportTool::NcclTests, &file, &options).unwrap();
        let counts = |list: &[Manifest]| header(list, &[]).counts;
        assert!(counts(std::slice::from_ref(&imported)).contains(": 0 measured, 1 imported from other tools, 0 modelled, 0 failed"));
        let mut failed = imported;
        failed.outcome = crate::manifest::Outcome::Failed { reason: "edited".into(), launch: None };
        assert!(counts(&[failed]).contains(": 0 measured, 0 modelled, 1 failed, 0 not run"), "no underflow");
    }

    #[test]
    fn the_machine_section_says_when_its_probes_ran_the_same_whether_taken_or_reused() {
        let at = "2026-12-05T11:32:20Z";
        let with = |provenance| Gates { probes: Vec::new(), provenance };
        let taken = machine(Ok(Some(with(Provenance::Probed { probed_at: at.into() }))), &[]).source;
        let reused = machine(Ok(Some(with(Provenance::Cached { probed_at: at.into(), file: "cache.json".into() }))), &[]).source;
        assert!(taken.contains(&format!("probed at {at}")), "{taken}");
        assert_eq!(taken, reused, "a rerun on cached probes renders the same line");
        let unrecorded = machine(Ok(Some(with(Provenance::Unrecorded))), &[]).source;
        assert!(!unrecorded.contains("probed at"), "{unrecorded}");
    }
}
