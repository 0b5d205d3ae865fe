//! The catalogue of links and devices (`models/links.yaml`, `models/devices.yaml`):
//! every constant with its provenance (measured here, reported by a named source, or assumed).

use super::link::Link;
use crate::model::resolve::models_root;
use crate::units::sig4;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The links file, relative to the models folder.
pub const LINKS_FILE: &str = "links.yaml";
/// The devices file, relative to the models folder.
pub const DEVICES_FILE: &str = "devices.yaml";

/// Errors reading the catalogue.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    /// The file is missing or unreadable.
    #[error("{path}: cannot read ({message}); the cost model's catalogue lives in models/ of parlab's checkout: run parlab from there")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The file is not the expected YAML.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the entry's name.
        message: String,
    },
}

/// How a constant is known: the YAML's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ProvenanceKind {
    /// Measured by a parlab run (named by `run`).
    Measured,
    /// Reported by a source (named by `source`).
    Reported,
    /// Assumed, and said so.
    Assumed,
}

/// Where one constant came from, as the catalogue's YAML writes it (`kind`, `source`, `run`,
/// `note`); read into [`Provenance`] only when the keys fit the kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProvenanceKeys {
    kind: ProvenanceKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Where one constant came from: measured here, reported by a named source, or assumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ProvenanceKeys", into = "ProvenanceKeys")]
pub enum Provenance {
    /// Measured by a parlab run.
    Measured {
        /// The run identity whose fit gave it.
        run: String,
        /// Anything a reader needs to judge it.
        note: Option<String>,
    },
    /// Reported by a named source (a paper, a datasheet, the tool of an imported run).
    Reported {
        /// The source.
        source: String,
        /// The run that carries it, when it was imported.
        run: Option<String>,
        /// Anything a reader needs to judge it.
        note: Option<String>,
    },
    /// Assumed, and said why.
    Assumed {
        /// Why, and where the figure comes from.
        note: String,
    },
}

/// What a constant's provenance lacks, or holds that its kind does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProvenanceProblem {
    /// `reported` without a source.
    #[error("`reported` needs a `source`")]
    NoSource,
    /// `measured` without the run.
    #[error("`measured` needs the `run` whose fit gave it")]
    NoRun,
    /// `assumed` without a note.
    #[error("`assumed` needs a `note` saying why")]
    NoNote,
    /// `measured` naming a source (a source that reported it makes it `reported`).
    #[error("`measured` takes no `source` (a figure a source reported is `kind: reported`)")]
    MeasuredWithSource,
    /// `assumed` naming a source or a run.
    #[error("`assumed` takes no `source` or `run` (a figure a source reported is `kind: reported`, one a run measured `kind: measured`)")]
    AssumedWithSource,
}

impl TryFrom<ProvenanceKeys> for Provenance {
    type Error = ProvenanceProblem;

    fn try_from(k: ProvenanceKeys) -> Result<Self, ProvenanceProblem> {
        match (k.kind, k.source, k.run, k.note) {
            (ProvenanceKind::Measured, Some(_), _, _) => Err(ProvenanceProblem::MeasuredWithSource),
            (ProvenanceKind::Measured, None, Some(run), note) => Ok(Provenance::Measured { run, note }),
            (ProvenanceKind::Measured, None, None, _) => Err(ProvenanceProblem::NoRun),
            (ProvenanceKind::Reported, Some(source), run, note) => Ok(Provenance::Reported { source, run, note }),
            (ProvenanceKind::Reported, None, _, _) => Err(ProvenanceProblem::NoSource),
            (ProvenanceKind::Assumed, None, None, Some(note)) => Ok(Provenance::Assumed { note }),
            (ProvenanceKind::Assumed, None, None, None) => Err(ProvenanceProblem::NoNote),
            (ProvenanceKind::Assumed, _, _, _) => Err(ProvenanceProblem::AssumedWithSource),
        }
    }
}

impl From<Provenance> for ProvenanceKeys {
    fn from(p: Provenance) -> Self {
        let keys = |kind, source, run, note| ProvenanceKeys { kind, source, run, note };
        match p {
            Provenance::Measured { run, note } => keys(ProvenanceKind::Measured, None, Some(run), note),
            Provenance::Reported { source, run, note } => keys(ProvenanceKind::Reported, Some(source), run, note),
            Provenance::Assumed { note } => keys(ProvenanceKind::Assumed, None, None, Some(note)),
        }
    }
}

impl Provenance {
    /// One line: `reported by X (note)`, `measured: from run R`, `ASSUMED (note)`.
    pub fn describe(&self) -> String {
        let (head, note) = match self {
            Provenance::Measured { run, note } => (format!("measured: from run {run}"), note.as_deref()),
            Provenance::Reported { source, note, .. } => (format!("reported by {source}"), note.as_deref()),
            Provenance::Assumed { note } => ("ASSUMED".to_string(), Some(note.as_str())),
        };
        match note {
            Some(n) => format!("{head} ({n})"),
            None => head,
        }
    }
}

/// A link of the catalogue (`P`: its constants' provenance, checked; as the YAML's keys while read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry<P = Provenance> {
    /// Name used in specs.
    pub name: String,
    /// What it is.
    pub description: String,
    /// Latency of one message, microseconds.
    pub latency_us: f64,
    /// Bandwidth, decimal GB/s.
    pub bandwidth_gbps: f64,
    /// Where the latency came from.
    pub latency_provenance: P,
    /// Where the bandwidth came from.
    pub bandwidth_provenance: P,
}

impl LinkEntry {
    /// The alpha-beta link.
    pub fn link(&self) -> Link {
        Link { alpha_s: self.latency_us / 1e6, beta_bps: self.bandwidth_gbps * 1e9 }
    }

    /// Provenance lines for both constants.
    pub fn provenance_lines(&self) -> Vec<String> {
        vec![
            format!("link {}: latency {} µs, {}", self.name, sig4(self.latency_us), self.latency_provenance.describe()),
            format!("link {}: bandwidth {} GB/s, {}", self.name, sig4(self.bandwidth_gbps), self.bandwidth_provenance.describe()),
        ]
    }
}

/// A peak arithmetic rate of a device and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// Dense arithmetic, TFLOP/s.
    pub tflops: f64,
    /// Where it came from.
    pub provenance: Provenance,
}

/// A device of the catalogue, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceEntry {
    /// Name used in specs.
    pub name: String,
    /// What it is.
    pub description: String,
    /// Memory capacity as the catalogue writes it, e.g. `12GiB`.
    pub memory: String,
    /// Memory capacity in bytes (`memory` read).
    pub memory_bytes: u64,
    /// Memory bandwidth, decimal GB/s.
    pub bandwidth_gbps: f64,
    /// Where the capacity came from.
    pub memory_provenance: Provenance,
    /// Where the bandwidth came from.
    pub bandwidth_provenance: Provenance,
    /// Peak dense 16-bit arithmetic (what a prefill is bound by); None when unknown.
    pub compute: Option<Peak>,
    /// Peak dense float32 arithmetic (without 16-bit tensor cores); None when unknown.
    pub compute_float32: Option<Peak>,
}

/// A device as the YAML writes it: each peak and its provenance as two keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceKeys {
    name: String,
    description: String,
    memory: String,
    bandwidth_gbps: f64,
    memory_provenance: ProvenanceKeys,
    bandwidth_provenance: ProvenanceKeys,
    #[serde(default)]
    compute_tflops: Option<f64>,
    #[serde(default)]
    compute_provenance: Option<ProvenanceKeys>,
    #[serde(default)]
    compute_float32_tflops: Option<f64>,
    #[serde(default)]
    compute_float32_provenance: Option<ProvenanceKeys>,
}

impl DeviceEntry {
    /// Peak arithmetic in FLOP/s for `dtype`, when the catalogue gives one: the float32 peak for
    /// float32, the 16-bit one for float16 and bfloat16.
    pub fn peak_flops(&self, dtype: crate::spec::schema::Dtype) -> Option<f64> {
        self.peak(dtype).as_ref().map(|p| p.tflops * 1e12)
    }

    /// The catalogue's peak for `dtype`.
    fn peak(&self, dtype: crate::spec::schema::Dtype) -> &Option<Peak> {
        match dtype {
            crate::spec::schema::Dtype::Float32 => &self.compute_float32,
            _ => &self.compute,
        }
    }

    /// Sets the peak for `dtype` to `flops` FLOP/s where the catalogue gives one (a what-if of
    /// the flip search, which varies only the constants a device has).
    pub fn set_peak_flops(&mut self, dtype: crate::spec::schema::Dtype, flops: f64) {
        let peak = match dtype {
            crate::spec::schema::Dtype::Float32 => &mut self.compute_float32,
            _ => &mut self.compute,
        };
        if let Some(p) = peak {
            p.tflops = flops / 1e12;
        }
    }

    /// Bandwidth in bytes per second.
    pub fn bandwidth_bps(&self) -> f64 {
        self.bandwidth_gbps * 1e9
    }

    /// Provenance lines for every constant.
    pub fn provenance_lines(&self) -> Vec<String> {
        let peak = |what: &str, p: &Option<Peak>| {
            p.as_ref().map(|p| format!("device {}: {what} compute {} TFLOP/s, {}", self.name, sig4(p.tflops), p.provenance.describe()))
        };
        vec![
            format!("device {}: memory {}, {}", self.name, self.memory, self.memory_provenance.describe()),
            format!("device {}: bandwidth {} GB/s, {}", self.name, sig4(self.bandwidth_gbps), self.bandwidth_provenance.describe()),
        ]
        .into_iter()
        .chain(peak("16-bit", &self.compute))
        .chain(peak("float32", &self.compute_float32))
        .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinksFile {
    links: Vec<LinkEntry<ProvenanceKeys>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DevicesFile {
    devices: Vec<DeviceKeys>,
}

/// Whether a catalogue constant is a usable figure: above zero and finite (YAML's `.inf` is not).
fn positive(value: f64) -> bool {
    value > 0.0 && value.is_finite()
}

/// `keys` read as the provenance of `key`, or why not (naming the key).
fn provenance(key: &str, keys: ProvenanceKeys) -> Result<Provenance, String> {
    Provenance::try_from(keys).map_err(|problem| format!("{key}: {problem}"))
}

/// A peak arithmetic rate from its two keys (`{key}_tflops`, `{key}_provenance`): both or
/// neither, the rate positive.
fn peak(key: &str, tflops: Option<f64>, keys: Option<ProvenanceKeys>) -> Result<Option<Peak>, String> {
    match (tflops, keys) {
        (Some(t), Some(k)) if positive(t) => Ok(Some(Peak { tflops: t, provenance: provenance(&format!("{key}_provenance"), k)? })),
        (Some(_), Some(_)) => Err(format!("{key}_tflops must be positive and finite")),
        (Some(_), None) => Err(format!("{key}_tflops needs a {key}_provenance")),
        (None, Some(_)) => Err(format!("{key}_provenance without {key}_tflops")),
        (None, None) => Ok(None),
    }
}

impl LinkEntry<ProvenanceKeys> {
    /// The entry with its provenance checked against each kind's keys.
    fn checked(self) -> Result<LinkEntry, String> {
        Ok(LinkEntry {
            latency_provenance: provenance("latency_provenance", self.latency_provenance)?,
            bandwidth_provenance: provenance("bandwidth_provenance", self.bandwidth_provenance)?,
            name: self.name,
            description: self.description,
            latency_us: self.latency_us,
            bandwidth_gbps: self.bandwidth_gbps,
        })
    }
}

impl DeviceKeys {
    /// The entry with its capacity read and each constant's provenance checked against its kind's keys.
    fn checked(self) -> Result<DeviceEntry, String> {
        let memory_bytes = crate::units::parse_bytes(&self.memory).filter(|b| *b > 0);
        let Some(memory_bytes) = memory_bytes.filter(|_| positive(self.bandwidth_gbps)) else {
            return Err("memory must be a size like 12GiB and bandwidth_gbps positive and finite".into());
        };
        Ok(DeviceEntry {
            memory_provenance: provenance("memory_provenance", self.memory_provenance)?,
            bandwidth_provenance: provenance("bandwidth_provenance", self.bandwidth_provenance)?,
            compute: peak("compute", self.compute_tflops, self.compute_provenance)?,
            compute_float32: peak("compute_float32", self.compute_float32_tflops, self.compute_float32_provenance)?,
            name: self.name,
            description: self.description,
            memory: self.memory,
            memory_bytes,
            bandwidth_gbps: self.bandwidth_gbps,
        })
    }
}

/// The links and devices, checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalogue {
    /// Links, in file order.
    pub links: Vec<LinkEntry>,
    /// Devices, in file order.
    pub devices: Vec<DeviceEntry>,
    /// The folders of manifests whose measured links were added (`parlab advise --links-from`).
    pub links_from: Vec<PathBuf>,
}

fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, CatalogueError> {
    let text = std::fs::read_to_string(path).map_err(|e| CatalogueError::Read { path: path.into(), message: e.to_string() })?;
    serde_yaml::from_str(&text).map_err(|e| CatalogueError::Invalid { path: path.into(), message: e.to_string() })
}

fn invalid(path: &Path, message: String) -> CatalogueError {
    CatalogueError::Invalid { path: path.into(), message }
}

impl Catalogue {
    /// Reads and checks the catalogue under `root`.
    pub fn load(root: &Path) -> Result<Self, CatalogueError> {
        let lpath = root.join(LINKS_FILE);
        let dpath = root.join(DEVICES_FILE);
        let links = read_yaml::<LinksFile>(&lpath)?.links.into_iter().map(|l| {
            let name = l.name.clone();
            l.checked().map_err(|m| invalid(&lpath, format!("link `{name}`: {m}")))
        });
        let links = links.collect::<Result<Vec<LinkEntry>, CatalogueError>>()?;
        let devices = read_yaml::<DevicesFile>(&dpath)?.devices.into_iter().map(|d| {
            let name = d.name.clone();
            d.checked().map_err(|m| invalid(&dpath, format!("device `{name}`: {m}")))
        });
        let devices = devices.collect::<Result<Vec<DeviceEntry>, CatalogueError>>()?;
        for (i, l) in links.iter().enumerate() {
            let bad = |m: String| invalid(&lpath, format!("link `{}`: {m}", l.name));
            if links[..i].iter().any(|earlier| earlier.name == l.name) {
                return Err(bad("named twice; each link needs a name of its own".into()));
            }
            if super::measured_links::is_store_link_name(&l.name) {
                return Err(bad(
                    "names ending in -measured or -imported are kept for the links `--links-from` reads from manifests; rename it".into(),
                ));
            }
            if !(positive(l.latency_us) && positive(l.bandwidth_gbps)) {
                return Err(bad("latency_us and bandwidth_gbps must be positive and finite".into()));
            }
        }
        for (i, d) in devices.iter().enumerate() {
            let bad = |m: String| invalid(&dpath, format!("device `{}`: {m}", d.name));
            if devices[..i].iter().any(|earlier| earlier.name == d.name) {
                return Err(bad("named twice; each device needs a name of its own".into()));
            }
        }
        Ok(Catalogue { links, devices, links_from: Vec::new() })
    }

    /// Reads the catalogue under `models_root()`.
    pub fn load_default() -> Result<Self, CatalogueError> {
        Self::load(&models_root())
    }

    /// The link named `name`.
    pub fn link(&self, name: &str) -> Option<&LinkEntry> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The device named `name`.
    pub fn device(&self, name: &str) -> Option<&DeviceEntry> {
        self.devices.iter().find(|d| d.name == name)
    }
}

/// Names of the links declared in the catalogue.
pub fn link_names() -> Result<Vec<String>, CatalogueError> {
    Catalogue::load_default().map(|c| c.links.into_iter().map(|l| l.name).collect())
}

/// Names of the devices declared in the catalogue.
pub fn device_names() -> Result<Vec<String>, CatalogueError> {
    Catalogue::load_default().map(|c| c.devices.into_iter().map(|d| d.name).collect())
}

/// What a spec's key naming catalogue entries is told when the catalogue cannot be read.
pub fn unreadable(e: &CatalogueError) -> String {
    format!("cannot be checked: the catalogue cannot be read: {e}")
}

/// sha256 of the catalogue files and the model configurations under `models_root()`,
/// part of a modelled run's identity (a changed constant or config.json changes it).
pub fn catalogue_digest() -> String {
    digest_of(&models_root())
}

/// sha256 of `links.yaml`, `devices.yaml` and every `*/config.json` under `root`
/// (a missing file counts as empty).
pub fn digest_of(root: &Path) -> String {
    let mut h = Sha256::new();
    let mut files: Vec<PathBuf> = vec![root.join(LINKS_FILE), root.join(DEVICES_FILE)];
    let mut configs: Vec<PathBuf> =
        std::fs::read_dir(root).into_iter().flatten().flatten().map(|e| e.path().join("config.json")).filter(|p| p.is_file()).collect();
    configs.sort();
    files.extend(configs);
    for path in files {
        h.update(path.strip_prefix(root).unwrap_or(&path).to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(&path).unwrap_or_default());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, links: &str, devices: &str) {
        std::fs::write(dir.join(LINKS_FILE), links).unwrap();
        std::fs::write(dir.join(DEVICES_FILE), devices).unwrap();
    }

    const DEVICES: &str = "devices:\n  - name: g\n    description: a GPU\n    memory: 12GiB\n    bandwidth_gbps: 303\n    memory_provenance: {kind: reported, source: a book}\n    bandwidth_provenance: {kind: measured, run: abc}\n";

    #[test]
    fn reads_links_devices_and_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let links = "links:\n  - name: l\n    description: x\n    latency_us: 10\n    bandwidth_gbps: 300\n    latency_provenance: {kind: assumed, note: my guess}\n    bandwidth_provenance: {kind: reported, source: Megatron-LM}\n";
        write(dir.path(), links, DEVICES);
        let c = Catalogue::load(dir.path()).unwrap();
        assert_eq!(c.link("l").unwrap().link(), Link { alpha_s: 10e-6, beta_bps: 300e9 });
        assert_eq!(c.device("g").unwrap().memory_bytes, 12 << 30);
        let lines = c.link("l").unwrap().provenance_lines();
        assert!(lines[0].contains("ASSUMED (my guess)"), "{lines:?}");
        assert!(c.device("g").unwrap().provenance_lines()[1].contains("measured: from run abc"));
        let before = digest_of(dir.path());
        write(dir.path(), &links.replace("300", "301"), DEVICES);
        let after_link = digest_of(dir.path());
        assert_ne!(before, after_link);
        std::fs::create_dir(dir.path().join("m")).unwrap();
        std::fs::write(dir.path().join("m/config.json"), "{}").unwrap();
        assert_ne!(after_link, digest_of(dir.path()));
    }

    #[test]
    fn a_compute_peak_needs_its_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let links = "links: []\n";
        write(dir.path(), links, &format!("{DEVICES}    compute_tflops: 312\n"));
        let err = Catalogue::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("device `g`") && err.contains("compute_provenance"), "{err}");
        write(
            dir.path(),
            links,
            &format!("{DEVICES}    compute_tflops: 312\n    compute_provenance: {{kind: reported, source: a datasheet}}\n"),
        );
        let c = Catalogue::load(dir.path()).unwrap();
        assert_eq!(c.device("g").unwrap().peak_flops(crate::spec::schema::Dtype::Bfloat16), Some(312e12));
        assert_eq!(c.device("g").unwrap().peak_flops(crate::spec::schema::Dtype::Float32), None, "a 16-bit peak is not float32's");
        assert!(c.device("g").unwrap().provenance_lines()[2].contains("compute 312 TFLOP/s, reported by a datasheet"));
        // The what-if of the flip search moves a peak the device has and never invents one.
        let mut what_if = c.device("g").unwrap().clone();
        what_if.set_peak_flops(crate::spec::schema::Dtype::Bfloat16, 100e12);
        what_if.set_peak_flops(crate::spec::schema::Dtype::Float32, 50e12);
        assert_eq!(what_if.peak_flops(crate::spec::schema::Dtype::Bfloat16), Some(100e12));
        assert_eq!(what_if.peak_flops(crate::spec::schema::Dtype::Float32), None);
        for (keys, problem) in [
            ("    compute_float32_provenance: {kind: assumed, note: n}\n", "compute_float32_provenance without compute_float32_tflops"),
            (
                "    compute_float32_tflops: 0\n    compute_float32_provenance: {kind: assumed, note: n}\n",
                "compute_float32_tflops must be positive",
            ),
            (
                "    compute_float32_tflops: 60\n    compute_float32_provenance: {kind: assumed}\n",
                "compute_float32_provenance: `assumed` needs a `note`",
            ),
            (
                "    compute_float32_tflops: .inf\n    compute_float32_provenance: {kind: assumed, note: n}\n",
                "compute_float32_tflops must be positive and finite",
            ),
        ] {
            write(dir.path(), links, &format!("{DEVICES}{keys}"));
            let err = Catalogue::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(&format!("device `g`: {problem}")), "{keys}: {err}");
        }
    }

    #[test]
    fn an_infinite_constant_is_refused_as_a_zero_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let link = |latency: &str, bandwidth: &str| {
            format!("links:\n  - name: l\n    description: x\n    latency_us: {latency}\n    bandwidth_gbps: {bandwidth}\n    latency_provenance: {{kind: assumed, note: n}}\n    bandwidth_provenance: {{kind: assumed, note: n}}\n")
        };
        for (latency, bandwidth) in [(".inf", "300"), ("10", ".inf"), ("0", "300")] {
            write(dir.path(), &link(latency, bandwidth), DEVICES);
            let err = Catalogue::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains("link `l`: latency_us and bandwidth_gbps must be positive and finite"), "{latency} {bandwidth}: {err}");
        }
        write(dir.path(), &link("10", "300"), DEVICES);
        assert!(Catalogue::load(dir.path()).is_ok());
        let devices = DEVICES.replace("bandwidth_gbps: ", "bandwidth_gbps: .inf #");
        assert_ne!(devices, DEVICES);
        write(dir.path(), &link("10", "300"), &devices);
        let err = Catalogue::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("bandwidth_gbps positive and finite"), "{err}");
    }

    #[test]
    fn refuses_a_provenance_whose_keys_do_not_fit_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let links = "links:\n  - name: l\n    description: x\n    latency_us: 10\n    bandwidth_gbps: 300\n    latency_provenance: {kind: reported}\n    bandwidth_provenance: {kind: assumed, note: n}\n";
        write(dir.path(), links, DEVICES);
        let err = Catalogue::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("link `l`: latency_provenance: `reported` needs a `source`"), "{err}");
        // Keys a kind does not take are refused, not dropped.
        for (provenance, problem) in [
            ("{kind: assumed, note: n, source: a paper}", ProvenanceProblem::AssumedWithSource),
            ("{kind: assumed, note: n, run: abc}", ProvenanceProblem::AssumedWithSource),
            ("{kind: assumed}", ProvenanceProblem::NoNote),
            ("{kind: measured, run: abc, source: a paper}", ProvenanceProblem::MeasuredWithSource),
            ("{kind: measured, note: n}", ProvenanceProblem::NoRun),
        ] {
            write(dir.path(), &links.replace("{kind: reported}", provenance), DEVICES);
            let err = Catalogue::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(&format!("link `l`: latency_provenance: {problem}")), "{provenance}: {err}");
        }
        write(dir.path(), &links.replace("{kind: reported}", "{kind: reported, source: a tool, run: abc}"), DEVICES);
        let reported = Catalogue::load(dir.path()).unwrap().links[0].latency_provenance.clone();
        assert_eq!(reported, Provenance::Reported { source: "a tool".into(), run: Some("abc".into()), note: None });
        let again: Provenance = serde_yaml::from_str(&serde_yaml::to_string(&reported).unwrap()).unwrap();
        assert_eq!(again, reported, "written back as the same keys");
    }

    #[test]
    fn refuses_a_name_given_twice() {
        // A second entry of one name was never read (the first was taken), whatever it said.
        let dir = tempfile::tempdir().unwrap();
        let link = "  - name: l\n    description: x\n    latency_us: 10\n    bandwidth_gbps: 300\n    latency_provenance: {kind: assumed, note: n}\n    bandwidth_provenance: {kind: assumed, note: n}\n";
        write(dir.path(), &format!("links:\n{link}{}", link.replace("300", "30")), DEVICES);
        let err = Catalogue::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("links.yaml") && err.contains("link `l`: named twice"), "{err}");
        let device = DEVICES.strip_prefix("devices:\n").unwrap();
        write(dir.path(), &format!("links:\n{link}"), &format!("{DEVICES}{device}"));
        let err = Catalogue::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("devices.yaml") && err.contains("device `g`: named twice"), "{err}");
    }

    #[test]
    fn refuses_a_link_named_as_a_store_names_its_measured_links() {
        // `--links-from` offers `LINK-measured` and `LINK-imported` beside the catalogue; a
        // catalogue link of such a name would be taken for one a run measured.
        let dir = tempfile::tempdir().unwrap();
        let link = "  - name: l\n    description: x\n    latency_us: 10\n    bandwidth_gbps: 300\n    latency_provenance: {kind: assumed, note: n}\n    bandwidth_provenance: {kind: assumed, note: n}\n";
        for name in ["nccl-measured", "nccl-imported"] {
            write(dir.path(), &format!("links:\n{}", link.replace("name: l", &format!("name: {name}"))), DEVICES);
            let err = Catalogue::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(&format!("link `{name}`: names ending in -measured or -imported are kept")), "{err}");
        }
        write(dir.path(), &format!("links:\n{}", link.replace("name: l", "name: measured-nccl")), DEVICES);
        assert!(Catalogue::load(dir.path()).is_ok(), "the words elsewhere in a name are free");
    }
}
