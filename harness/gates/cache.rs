//! The gates cache: the probes' results (commands, exits, outputs) kept in the state folder and
//! reused while nothing that could change their answer has changed, so a `parlab run` does not
//! spend seconds probing (two probes start Python and import torch) before its first run.
//!
//! The key is read without running anything: the boot (`/proc/sys/kernel/random/boot_id`), the
//! machine as the fingerprint's cheap fields see it (CPU model, cores, memory, OS, host name),
//! this parlab binary (version, commit, file), the venv's Python and its torch install, the
//! tools the probes start (`mpirun`, `ompi_info`, `nvidia-smi`, resolved on `PATH`), and every
//! environment variable the probes read ([`PROBED_ENV`]). Any difference re-probes; so does
//! `--reprobe`. A GPU added or a driver changed without a reboot is not seen: `--reprobe`.

use super::{Gates, Provenance};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The cache file's format tag; a file with another is foreign and is ignored.
pub const FORMAT: &str = "parlab-gates-cache/1";

/// The environment variables whose values can change a probe's answer: the Python the torch
/// probe starts and what it imports, where commands and libraries are found, which GPUs CUDA
/// shows, torch's thread count (`OMP_NUM_THREADS`, `MKL_NUM_THREADS`), Open MPI's prefix, and
/// where the user's site packages are (`HOME`, `PYTHONUSERBASE`, `PYTHONNOUSERSITE`).
pub const PROBED_ENV: [&str; 12] = [
    "PARLAB_PYTHON",
    "PATH",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONPATH",
    "PYTHONHOME",
    "OPAL_PREFIX",
    "HOME",
    "PYTHONUSERBASE",
    "PYTHONNOUSERSITE",
];

/// The commands the shell probes start, whose files are part of the key.
const PROBED_TOOLS: [&str; 3] = ["mpirun", "ompi_info", "nvidia-smi"];

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file exists but could not be read.
    #[error("{path}: cannot read the gates cache: {reason}")]
    Read {
        /// The cache file.
        path: PathBuf,
        /// Why (too large, not a regular file, an I/O error).
        reason: String,
    },
    /// The file is not JSON of the cache's shape (truncated, overwritten).
    #[error("{path}: not a gates cache ({message})")]
    Corrupt {
        /// The cache file.
        path: PathBuf,
        /// serde_json's message.
        message: String,
    },
    /// The file is a cache of another format (another parlab version wrote it).
    #[error("{path}: a gates cache of format `{format}`, not {FORMAT}")]
    Foreign {
        /// The cache file.
        path: PathBuf,
        /// The format it says it has.
        format: String,
    },
    /// The cache could not be written.
    #[error("{path}: cannot write the gates cache: {cause}")]
    Write {
        /// The cache file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// Where the key's machine facts are read from (the system's files; a test points them elsewhere).
#[derive(Debug, Clone)]
pub struct KeySources {
    /// The boot id (`/proc/sys/kernel/random/boot_id`): a new one after every boot.
    pub boot_id: PathBuf,
    /// `/proc/cpuinfo`.
    pub cpuinfo: PathBuf,
    /// `/proc/meminfo`.
    pub meminfo: PathBuf,
    /// `/etc/os-release`.
    pub os_release: PathBuf,
    /// `/proc/sys/kernel/hostname`.
    pub hostname: PathBuf,
    /// The values of [`PROBED_ENV`] (None: unset).
    pub env: BTreeMap<String, Option<String>>,
}

impl KeySources {
    /// This machine's files and this process's environment.
    pub fn system() -> Self {
        KeySources {
            boot_id: "/proc/sys/kernel/random/boot_id".into(),
            cpuinfo: "/proc/cpuinfo".into(),
            meminfo: "/proc/meminfo".into(),
            os_release: "/etc/os-release".into(),
            hostname: "/proc/sys/kernel/hostname".into(),
            env: PROBED_ENV.iter().map(|v| (v.to_string(), std::env::var(v).ok())).collect(),
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env.get(name).and_then(|v| v.as_deref())
    }
}

/// What the probes' answers depend on, as named facts (`boot_id`, `machine.cores`, `env.PATH`,
/// `file.mpirun`, ...): equal keys mean the cached probes still hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    /// Each fact's name and value.
    pub facts: BTreeMap<String, String>,
}

impl CacheKey {
    /// Reads the key from `sources` (files that cannot be read count as `unreadable`).
    pub fn read(sources: &KeySources) -> Self {
        let mut facts = BTreeMap::new();
        let text = |path: &Path| std::fs::read_to_string(path).unwrap_or_else(|_| "unreadable".into());
        facts.insert("boot_id".into(), text(&sources.boot_id).trim().to_string());
        let cpuinfo = text(&sources.cpuinfo);
        facts.insert("machine.cpu_model".into(), first_value(&cpuinfo, "model name"));
        facts.insert("machine.memory".into(), first_value(&text(&sources.meminfo), "MemTotal"));
        facts.insert("machine.os".into(), first_value(&text(&sources.os_release).replace('=', ":"), "PRETTY_NAME"));
        facts.insert("machine.hostname".into(), text(&sources.hostname).trim().to_string());
        facts.insert("machine.cores".into(), super::cpu_cores().to_string());
        facts.insert("machine.physical_cores".into(), super::physical_cores().to_string());
        let tool = crate::manifest::Tool::current();
        facts.insert("parlab.version".into(), format!("{} {} {}", tool.version, tool.commit, tool.measuring));
        facts.insert("parlab.binary".into(), std::env::current_exe().map_or_else(|_| "unknown".into(), |p| file_identity(&p)));
        for (name, value) in &sources.env {
            facts.insert(format!("env.{name}"), value.clone().unwrap_or_else(|| "unset".into()));
        }
        let path = sources.var("PATH").unwrap_or("");
        for tool in PROBED_TOOLS {
            facts.insert(format!("file.{tool}"), which(tool, path).map_or_else(|| "not found".into(), |p| file_identity(&p)));
        }
        let python = sources.var("PARLAB_PYTHON").filter(|p| !p.is_empty()).unwrap_or(super::DEFAULT_PYTHON);
        let python = which(python, path);
        facts.insert("file.python".into(), python.as_deref().map_or_else(|| "not found".into(), file_identity));
        let user =
            sources.var("PYTHONUSERBASE").map(PathBuf::from).or_else(|| sources.var("HOME").map(|home| Path::new(home).join(".local")));
        let installs = python.as_deref().map(|p| torch_install_files(p, user.as_deref())).unwrap_or_default();
        for (i, file) in installs.iter().enumerate() {
            facts.insert(format!("file.python.torch.{i}"), file_identity(file));
        }
        CacheKey { facts }
    }

    /// The names of the facts whose values differ from `other`'s (or that only one has).
    pub fn differences(&self, other: &CacheKey) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> = self.facts.keys().chain(other.facts.keys()).collect();
        names.into_iter().filter(|n| self.facts.get(*n) != other.facts.get(*n)).cloned().collect()
    }
}

/// The value after `label`'s colon on the first line that starts with `label` (empty if none).
fn first_value(text: &str, label: &str) -> String {
    let line = text.lines().find(|l| l.starts_with(label)).unwrap_or("");
    line.split_once(':').map_or("", |(_, v)| v).trim().trim_matches('"').to_string()
}

/// `path` (made absolute, links followed) with its size and modification time in nanoseconds.
fn file_identity(path: &Path) -> String {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&real) {
        Ok(meta) => {
            let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            format!("{} {} bytes modified {modified}", real.display(), meta.len())
        }
        Err(_) => format!("{} missing", real.display()),
    }
}

/// Where `command` is found: itself when it names a path, else the first executable on `path`.
fn which(command: &str, path: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return Some(if p.is_absolute() { p } else { std::env::current_dir().ok()?.join(p) });
    }
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(command)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The files that change when torch is installed, upgraded or removed beside `python`: each
/// `site-packages`/`dist-packages` folder of its prefix and of the user's site `user` (`pip
/// install --user`, which a python outside a venv imports first) and, where present,
/// `torch/version.py`.
fn torch_install_files(python: &Path, user: Option<&Path>) -> Vec<PathBuf> {
    let prefix = python.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
    let mut lib_dirs: Vec<PathBuf> = std::iter::once(prefix)
        .chain(user)
        .flat_map(|base| std::fs::read_dir(base.join("lib")).into_iter().flatten().flatten().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python")))
        .collect();
    lib_dirs.sort();
    lib_dirs.dedup();
    let mut files = Vec::new();
    for lib in lib_dirs {
        for packages in ["site-packages", "dist-packages"].map(|d| lib.join(d)).into_iter().filter(|d| d.is_dir()) {
            let version = packages.join("torch").join("version.py");
            files.push(packages);
            if version.is_file() {
                files.push(version);
            }
        }
    }
    files
}

/// The cache file as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    /// [`FORMAT`].
    format: String,
    /// What the probes depended on when they ran.
    key: CacheKey,
    /// When they ran (RFC 3339 UTC).
    probed_at: String,
    /// Their results.
    gates: Gates,
}

/// Just the format tag, read first so a foreign file is named as such rather than as corrupt.
#[derive(Deserialize)]
struct FormatTag {
    format: Option<String>,
}

/// The cache file of a state folder.
pub fn path(state: &Path) -> PathBuf {
    state.join("gates").join("cache.json")
}

/// Whether to use the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reprobe {
    /// Use the cached probes when the key matches.
    IfChanged,
    /// Probe again whatever the cache holds (`--reprobe`).
    Always,
}

/// Why the machine was probed rather than the cache used.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeReason {
    /// `--reprobe` asked for it.
    Asked,
    /// No cache file yet.
    NoCache,
    /// The cache was taken under another key: the facts that changed.
    Changed(Vec<String>),
    /// The cache file was corrupt, foreign or unreadable: why.
    Unusable(String),
}

/// Where the gates a command uses came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Read from the cache (the key matched).
    Cached,
    /// Probed now, for this reason.
    Probed(ProbeReason),
}

/// The gates a command uses and where they came from.
#[derive(Debug, Clone)]
pub struct Obtained {
    /// The gates (their `provenance` says probed or cached, and when).
    pub gates: Gates,
    /// Cache or probe, and why.
    pub source: Source,
    /// The cache could not be written (the gates are still good): why.
    pub write_error: Option<String>,
    /// Probes that did not finish (timed out, or their shell could not start): their gates are
    /// used once and not cached, so a slow first start does not decide until the next boot.
    pub unfinished: Vec<String>,
}

impl Obtained {
    /// The lines to show on stderr: what was done and, where something was wrong, what.
    pub fn notes(&self, file: &Path) -> Vec<String> {
        let mut notes = vec![match &self.source {
            Source::Cached => format!(
                "parlab: gates: using the probes taken at {} (cached in {}; --reprobe probes again)",
                self.gates.provenance.probed_at().unwrap_or("?"),
                file.display()
            ),
            Source::Probed(ProbeReason::Asked) => "parlab: probing the machine (gates; --reprobe)".into(),
            Source::Probed(ProbeReason::NoCache) => "parlab: probing the machine (gates; no cached probes yet)".into(),
            Source::Probed(ProbeReason::Changed(facts)) => {
                format!("parlab: probing the machine (gates; the cached probes were taken under another {})", facts.join(", "))
            }
            Source::Probed(ProbeReason::Unusable(why)) => format!("parlab: ignoring the gates cache: {why}; probing the machine (gates)"),
        }];
        notes.extend(self.write_error.iter().map(|e| format!("parlab: warning: {e} (the probes are used; the next command probes again)")));
        if !self.unfinished.is_empty() {
            notes.push(format!(
                "parlab: gates: not cached: probe(s) {} did not finish (used as they are now; the next command probes again)",
                self.unfinished.join(", ")
            ));
        }
        notes
    }
}

/// Reads the cache at `file`: `Ok(None)` when there is none.
fn load(file: &Path) -> Result<Option<Stored>, CacheError> {
    if !file.exists() {
        return Ok(None);
    }
    let text =
        crate::files::read_text(file, crate::files::TEXT_LIMIT).map_err(|e| CacheError::Read { path: file.into(), reason: e.reason() })?;
    let corrupt = |e: serde_json::Error| CacheError::Corrupt { path: file.into(), message: e.to_string() };
    let tag: FormatTag = serde_json::from_str(&text).map_err(corrupt)?;
    match tag.format {
        Some(f) if f == FORMAT => serde_json::from_str(&text).map(Some).map_err(corrupt),
        Some(format) => Err(CacheError::Foreign { path: file.into(), format }),
        None => Err(CacheError::Foreign { path: file.into(), format: "none".into() }),
    }
}

/// Writes the cache atomically (temporary file, then rename).
fn save(file: &Path, stored: &Stored) -> Result<(), CacheError> {
    let write_err = |cause| CacheError::Write { path: file.into(), cause };
    std::fs::create_dir_all(file.parent().unwrap_or(Path::new("."))).map_err(write_err)?;
    let mut text = serde_json::to_string_pretty(stored).map_err(|e| write_err(std::io::Error::other(e)))?;
    text.push('\n');
    crate::manifest::write_atomic(file, text.as_bytes()).map_err(write_err)
}

/// The gates under `key`: the cached ones at `file` when they were taken under the same key
/// (and `reprobe` does not ask otherwise), else `probe()`'s, which are then cached unless a
/// termination signal cut the probes short (a probe it stopped would read as a machine without
/// that capability until the next probe).
pub fn obtain_with(file: &Path, key: &CacheKey, reprobe: Reprobe, probe: impl FnOnce() -> Gates) -> Obtained {
    obtain_unless(file, key, reprobe, probe, crate::launch::signals::received)
}

/// [`obtain_with`], caching nothing when `stopped` says a termination signal arrived.
fn obtain_unless(
    file: &Path,
    key: &CacheKey,
    reprobe: Reprobe,
    probe: impl FnOnce() -> Gates,
    stopped: impl Fn() -> Option<i32>,
) -> Obtained {
    let reason = match (reprobe, load(file)) {
        (Reprobe::Always, _) => ProbeReason::Asked,
        (Reprobe::IfChanged, Ok(None)) => ProbeReason::NoCache,
        (Reprobe::IfChanged, Err(e)) => ProbeReason::Unusable(e.to_string()),
        (Reprobe::IfChanged, Ok(Some(stored))) if stored.key == *key => {
            let mut gates = stored.gates;
            gates.provenance = Provenance::Cached { probed_at: stored.probed_at, file: file.to_path_buf() };
            return Obtained { gates, source: Source::Cached, write_error: None, unfinished: Vec::new() };
        }
        (Reprobe::IfChanged, Ok(Some(stored))) => ProbeReason::Changed(stored.key.differences(key)),
    };
    let probed_at = crate::manifest::now();
    let mut gates = probe();
    gates.provenance = Provenance::Probed { probed_at: probed_at.clone() };
    let stored =
        Stored { format: FORMAT.into(), key: key.clone(), probed_at, gates: Gates { provenance: Provenance::Unrecorded, ..gates.clone() } };
    let unfinished: Vec<String> = gates.probes.iter().filter(|p| p.exit_code.is_none()).map(|p| p.name.clone()).collect();
    let write_error = match (stopped(), unfinished.is_empty()) {
        (None, true) => save(file, &stored).err().map(|e| e.to_string()),
        (None, false) => {
            // An earlier cache would otherwise answer the next command in their place.
            let _ = std::fs::remove_file(file);
            None
        }
        (Some(_), _) => None,
    };
    Obtained { gates, source: Source::Probed(reason), write_error, unfinished }
}

/// This machine's gates for a command: cached in the state folder (`PARLAB_STATE`, default
/// `.parlab`) under this machine's key, or probed (and cached) when the key changed, the cache
/// is unusable, or `reprobe` asks.
pub fn obtain(reprobe: Reprobe) -> (Obtained, PathBuf) {
    let file = path(&crate::spec::weights::state_dir());
    let obtained = obtain_with(&file, &CacheKey::read(&KeySources::system()), reprobe, Gates::probe_machine);
    (obtained, file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::Probe;
    use std::cell::Cell;

    /// A machine of files in a temporary folder, with the environment given.
    struct FakeMachine {
        dir: tempfile::TempDir,
        sources: KeySources,
    }

    impl FakeMachine {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let file = |name: &str, text: &str| {
                let p = dir.path().join(name);
                std::fs::write(&p, text).unwrap();
                p
            };
            let sources = KeySources {
                boot_id: file("boot_id", "11111111-aaaa\n"),
                cpuinfo: file("cpuinfo", "processor\t: 0\nmodel name\t: Test CPU\n"),
                meminfo: file("meminfo", "MemTotal:       1000 kB\n"),
                os_release: file("os-release", "PRETTY_NAME=\"Test OS\"\n"),
                hostname: file("hostname", "testhost\n"),
                env: [("PATH".to_string(), Some(String::new())), ("PARLAB_PYTHON".to_string(), Some("/nonexistent/python".into()))]
                    .into_iter()
                    .collect(),
            };
            FakeMachine { dir, sources }
        }

        fn key(&self) -> CacheKey {
            CacheKey::read(&self.sources)
        }

        fn cache(&self) -> PathBuf {
            path(&self.dir.path().join("state"))
        }
    }

    fn gates(gpus: &str) -> Gates {
        let probe = Probe { name: "gpus".into(), command: "nvidia-smi -L".into(), exit_code: Some(127), output: gpus.into() };
        Gates { probes: vec![probe], ..Default::default() }
    }

    /// Obtains the gates with a probe that counts its calls; returns them and the count.
    fn obtain_counting(m: &FakeMachine, reprobe: Reprobe) -> (Obtained, u32) {
        let probes = Cell::new(0);
        let got = obtain_with(&m.cache(), &m.key(), reprobe, || {
            probes.set(probes.get() + 1);
            gates("nvidia-smi: not found")
        });
        (got, probes.get())
    }

    #[test]
    fn the_cache_is_reused_while_the_key_matches_and_no_probe_runs() {
        let m = FakeMachine::new();
        let (first, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, &first.source), (1, &Source::Probed(ProbeReason::NoCache)));
        assert!(first.write_error.is_none() && m.cache().is_file(), "{:?}", first.write_error);
        let Provenance::Probed { probed_at } = &first.gates.provenance else { panic!("{:?}", first.gates.provenance) };
        let (second, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, &second.source), (0, &Source::Cached), "no probe command runs on a cache hit");
        assert_eq!(second.gates.probes, first.gates.probes, "the cached probes keep their commands, exits and outputs");
        assert_eq!(second.gates.provenance, Provenance::Cached { probed_at: probed_at.clone(), file: m.cache() });
        assert!(second.notes(&m.cache())[0].contains("cached in"), "{:?}", second.notes(&m.cache()));
    }

    #[test]
    fn probes_cut_short_by_a_signal_are_used_but_not_cached() {
        let m = FakeMachine::new();
        let got = obtain_unless(&m.cache(), &m.key(), Reprobe::IfChanged, || gates("stopped"), || Some(libc::SIGINT));
        assert_eq!(got.gates.probes[0].output, "stopped");
        assert!(!m.cache().exists(), "gates a signal cut short were cached");
        let (next, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, &next.source), (1, &Source::Probed(ProbeReason::NoCache)), "the next run probes again");
    }

    #[test]
    fn probes_that_did_not_finish_are_used_but_not_cached_and_say_so() {
        let m = FakeMachine::new();
        let slow = || {
            let mut g = gates("did not finish within 30 s");
            g.probes[0].exit_code = None;
            g
        };
        let got = obtain_with(&m.cache(), &m.key(), Reprobe::IfChanged, slow);
        assert_eq!((got.gates.probes[0].exit_code, got.unfinished.as_slice()), (None, &["gpus".to_string()][..]));
        assert!(!m.cache().exists(), "a timed-out probe was cached until the next boot");
        let notes = got.notes(&m.cache()).join("\n");
        assert!(notes.contains("not cached: probe(s) gpus did not finish"), "{notes}");
        let (next, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!(
            (probes, &next.source, next.unfinished.len()),
            (1, &Source::Probed(ProbeReason::NoCache), 0),
            "the next run probes again"
        );
        assert!(m.cache().is_file(), "finished probes are cached");
    }

    #[test]
    fn a_new_boot_id_reprobes_and_names_what_changed() {
        let m = FakeMachine::new();
        obtain_counting(&m, Reprobe::IfChanged);
        std::fs::write(&m.sources.boot_id, "22222222-bbbb\n").unwrap();
        let (got, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, got.source), (1, Source::Probed(ProbeReason::Changed(vec!["boot_id".into()]))));
        assert_eq!(obtain_counting(&m, Reprobe::IfChanged).1, 0, "the new boot's probes are cached in turn");
    }

    #[test]
    fn a_changed_fingerprint_fact_or_probed_variable_reprobes() {
        let mut m = FakeMachine::new();
        obtain_counting(&m, Reprobe::IfChanged);
        std::fs::write(&m.sources.meminfo, "MemTotal:       2000 kB\n").unwrap();
        let (got, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, got.source), (1, Source::Probed(ProbeReason::Changed(vec!["machine.memory".into()]))));
        m.sources.env.insert("CUDA_VISIBLE_DEVICES".into(), Some("1".into()));
        let (got, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!((probes, got.source), (1, Source::Probed(ProbeReason::Changed(vec!["env.CUDA_VISIBLE_DEVICES".into()]))));
    }

    #[test]
    fn reprobe_probes_even_when_the_key_matches() {
        let m = FakeMachine::new();
        obtain_counting(&m, Reprobe::IfChanged);
        let (got, probes) = obtain_counting(&m, Reprobe::Always);
        assert_eq!((probes, got.source), (1, Source::Probed(ProbeReason::Asked)));
        assert!(matches!(got.gates.provenance, Provenance::Probed { .. }));
    }

    #[test]
    fn a_corrupt_or_foreign_cache_is_ignored_with_a_message_and_reprobed() {
        let m = FakeMachine::new();
        obtain_counting(&m, Reprobe::IfChanged);
        for (text, says) in [
            ("{\"format\": \"parlab-gates-cache/1\", \"key\"", "not a gates cache"),
            ("{\"format\": \"other/9\"}", "format `other/9`"),
            ("[1, 2]", "not a gates cache"),
        ] {
            std::fs::write(m.cache(), text).unwrap();
            let (got, probes) = obtain_counting(&m, Reprobe::IfChanged);
            assert_eq!(probes, 1, "{text}");
            let Source::Probed(ProbeReason::Unusable(why)) = &got.source else { panic!("{text}: {:?}", got.source) };
            assert!(why.contains(says) && why.contains("cache.json"), "{text}: {why}");
            assert!(got.notes(&m.cache())[0].contains("ignoring the gates cache"), "{:?}", got.notes(&m.cache()));
            assert_eq!(obtain_counting(&m, Reprobe::IfChanged).1, 0, "{text}: the cache is rewritten whole");
        }
    }

    #[test]
    fn an_unwritable_cache_leaves_the_probes_usable_and_says_so() {
        let m = FakeMachine::new();
        std::fs::write(m.dir.path().join("state"), "a file where the state folder should be").unwrap();
        let (got, probes) = obtain_counting(&m, Reprobe::IfChanged);
        assert_eq!(probes, 1);
        assert_eq!(got.gates.probes, gates("nvidia-smi: not found").probes);
        assert!(got.write_error.as_deref().is_some_and(|e| e.contains("cannot write the gates cache")), "{:?}", got.write_error);
    }

    #[test]
    fn the_key_reads_the_fingerprints_cheap_facts_and_the_tools_files() {
        let m = FakeMachine::new();
        let key = m.key();
        assert_eq!(key.facts["boot_id"], "11111111-aaaa");
        assert_eq!(key.facts["machine.cpu_model"], "Test CPU");
        assert_eq!(key.facts["machine.memory"], "1000 kB");
        assert_eq!(key.facts["machine.os"], "Test OS");
        assert_eq!(key.facts["file.mpirun"], "not found", "an empty PATH finds no tool");
        assert!(key.facts["file.python"].starts_with("/nonexistent/python missing"), "{}", key.facts["file.python"]);
        assert!(key.facts["parlab.binary"].contains("bytes modified"), "{}", key.facts["parlab.binary"]);
    }

    #[test]
    fn torch_in_the_users_site_is_part_of_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("venv/bin/python");
        std::fs::create_dir_all(python.parent().unwrap()).unwrap();
        let user = dir.path().join("home/.local");
        let torch = user.join("lib/python3.11/site-packages/torch");
        std::fs::create_dir_all(&torch).unwrap();
        std::fs::write(torch.join("version.py"), "__version__ = '2.11.0'\n").unwrap();
        let files = torch_install_files(&python, Some(&user));
        assert!(files.contains(&torch.join("version.py")), "{files:?}");
        assert!(torch_install_files(&python, None).is_empty());
    }
}
