//! Manifests: one JSON file per run identity in `manifests/`, written atomically.

use crate::spec::plan::{Layout, RunPlan};
use crate::spec::schema::Kind;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub mod answer;
pub mod cache;
pub mod caveat;
pub mod fit;
pub mod lock;
pub mod machine;
pub mod nccl_record;
pub mod placement;
pub mod plausible;
pub mod provenance;
pub mod retire;
pub mod rounds;
pub mod stats;
pub mod summary;

/// The manifest format's version tag. Version 2: typed table cells, a typed kind, and the
/// experiments a run identity came from (`origins`). Version 3: a typed summary per kind
/// (`summary::Summary`) with one fit type (`fit::LinkFit`).
pub const SCHEMA: &str = "parlab.manifest/3";

/// Older format tags `read_one` refuses, each with what it lacked.
pub const OLDER_SCHEMAS: [(&str, &str); 2] = [
    ("parlab.manifest/1", "tables of formatted text, no origins"),
    ("parlab.manifest/2", "summary figures as untyped JSON, read key by key"),
];

/// The folder manifests live in: `$PARLAB_MANIFESTS` (set and not empty) or `manifests/`.
pub fn manifests_dir() -> PathBuf {
    crate::files::env_path("PARLAB_MANIFESTS").unwrap_or_else(|| PathBuf::from("manifests"))
}

/// An experiment that expanded to a run identity: its name, spec file and place in the expansion.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin {
    /// The experiment's name.
    pub experiment: String,
    /// The spec file it was read from.
    pub spec: PathBuf,
    /// The run's position in that experiment's expansion.
    pub index: usize,
}

impl Origin {
    /// Where `plan` came from.
    pub fn of(plan: &RunPlan) -> Self {
        Origin { experiment: plan.experiment.clone(), spec: plan.spec_path.clone(), index: plan.index }
    }
}

/// The origins of every run identity in `runs`, in suite order.
pub fn origins_by_run(runs: &[RunPlan]) -> std::collections::BTreeMap<crate::identity::RunId, Vec<Origin>> {
    let mut map: std::collections::BTreeMap<crate::identity::RunId, Vec<Origin>> = std::collections::BTreeMap::new();
    for r in runs {
        let list = map.entry(r.run_id.clone()).or_default();
        let o = Origin::of(r);
        if !list.contains(&o) {
            list.push(o);
        }
    }
    map
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Ran and produced results.
    Ok,
    /// Launched and failed (crash, signal, timeout, wrong result).
    Failed,
    /// Not launched: a requirement is unmet (the probe that decided it is the reason).
    NotRun,
}

/// How a run ended, with exactly what that ending carries: the one place a manifest says it.
///
/// In the JSON it is flattened into the manifest and tagged by `status`:
///
/// - `"status": "ok"`: `launch` (launched runs only; absent for modelled and imported runs),
///   `results` (null when the run has no results files), `summary`, `answer` (null but for
///   decode) and `launches` (absent in manifests written before launches were recorded);
/// - `"status": "failed"`: `reason`, and `launch` when it launched (the first launch's);
/// - `"status": "not_run"`: `reason` (the unmet requirements, as the probes decided them).
///
/// Manifests of the previous shape, which also wrote `"results": null`, `"summary": null`
/// and `"answer": null` on failed and not_run runs, read the same (the nulls are ignored);
/// a failed or not_run run with a null or absent `reason` reads with none recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Ran (or was modelled, or imported) and produced a summary.
    Ok {
        /// Launch details, for launched runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<Launch>,
        /// The results files, for runs that wrote them.
        #[serde(default)]
        results: Option<ResultFiles>,
        /// What the run measured (or computed), typed by kind.
        summary: Box<summary::Summary>,
        /// The answer (decode: generated token ids) and exactness figures.
        #[serde(default)]
        answer: Option<Box<answer::Answer>>,
        /// Each launch's statistic of every comparable figure (absent in manifests written
        /// before launches were recorded: `nightly` reads those as one launch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launches: Option<LaunchStats>,
    },
    /// Launched (or prepared, or modelled) and failed: crash, signal, timeout, wrong result.
    Failed {
        /// Why it failed (empty when an older manifest recorded none).
        #[serde(default, deserialize_with = "text_or_null")]
        reason: String,
        /// The first launch's details, when it launched.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<Launch>,
    },
    /// Not launched: a requirement is unmet (or, launched here, the run would be mislabelled).
    NotRun {
        /// The unmet requirements, as the probes that decided them say (empty when an older
        /// manifest recorded none).
        #[serde(default, deserialize_with = "text_or_null")]
        reason: String,
    },
}

/// A string that older manifests may have written as null.
fn text_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl Outcome {
    /// The ending's plain tag.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Ok { .. } => Status::Ok,
            Outcome::Failed { .. } => Status::Failed,
            Outcome::NotRun { .. } => Status::NotRun,
        }
    }

    /// Why it failed or did not run (None for ok, and where none was recorded).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Ok { .. } => None,
            Outcome::Failed { reason, .. } | Outcome::NotRun { reason } => Some(reason.as_str()).filter(|r| !r.is_empty()),
        }
    }

    /// The first launch's details, for launched runs.
    pub fn launch(&self) -> Option<&Launch> {
        match self {
            Outcome::Ok { launch, .. } | Outcome::Failed { launch, .. } => launch.as_ref(),
            Outcome::NotRun { .. } => None,
        }
    }

    /// An ok run that launched nothing (modelled, imported): its summary alone.
    pub fn computed(summary: summary::Summary) -> Self {
        Outcome::Ok { launch: None, results: None, summary: Box::new(summary), answer: None, launches: None }
    }
}

/// parlab's own version and commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from.
    pub commit: String,
    /// Digest of the measuring code ([`MEASURING_DIGEST`]); empty in manifests of older builds.
    #[serde(default)]
    pub measuring: String,
    /// Digest of the model code ([`MODEL_DIGEST`]): its first 12 hex name
    /// the cached reference (`reference/<answer_id>-<12 hex>`); empty in manifests of older builds.
    #[serde(default)]
    pub model: String,
}

/// Digest of the sources that decide how figures are measured (`build.rs` lists them: rank,
/// model, collect, launch, costmodel, the rank entry point and Cargo.lock); the run cache
/// re-measures a run whose manifest records another.
pub const MEASURING_DIGEST: &str = env!("PARLAB_MEASURING_DIGEST");

/// The digest of the model code this build computes with (`harness/model` and the lock file,
/// `build.rs`): a cached reference answer computed by other model code is not reused.
pub const MODEL_DIGEST: &str = env!("PARLAB_MODEL_DIGEST");

impl Tool {
    /// This binary's version, commit, measuring-code and model-code digests.
    pub fn current() -> Self {
        Tool {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: env!("PARLAB_GIT_COMMIT").into(),
            measuring: MEASURING_DIGEST.into(),
            model: MODEL_DIGEST.into(),
        }
    }
}

/// How the ranks were launched and how they ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Launch {
    /// The exact command line.
    pub command: String,
    /// More ranks than cores.
    pub oversubscribed: bool,
    /// Seconds from launch to exit.
    pub wall_s: f64,
    /// The launcher's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Open MPI's effective transport selection and where each part came from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transport: String,
    /// Where each rank ran, as the rank saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<placement::RankPlacement>,
    /// On an NCCL link, each rank's NCCL: library, version, environment and chosen transports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nccl: Vec<nccl_record::RankRecord>,
}

/// One run's record: identities, layout, machine, and how it ended ([`Outcome`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub schema: String,
    /// Run identity.
    pub run_id: crate::identity::RunId,
    /// Answer identity.
    pub answer_id: crate::identity::AnswerId,
    /// Experiment name (the first of `origins`).
    pub experiment: String,
    /// Every experiment of the last suite that expanded to this run identity, with its spec
    /// file: a renamed experiment, or two experiments with the same content, show here.
    #[serde(default)]
    pub origins: Vec<Origin>,
    /// Experiment kind (the workload's own; kept beside it for readers of the JSON).
    pub kind: Kind,
    /// How the run ended, with what that ending carries (flattened: `status` and its keys).
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The canonical layout.
    pub layout: Layout,
    /// The full plan the ranks ran.
    pub plan: RunPlan,
    /// parlab version and commit.
    pub parlab: Tool,
    /// Machine fingerprint.
    pub machine: machine::Fingerprint,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// When the run ended.
    pub finished_at: String,
    /// Caveats the machine imposes on this run's figures.
    #[serde(default)]
    pub caveats: Vec<caveat::Caveat>,
    /// Where the figures come from: parlab's own launch, or another tool's output read in by
    /// `parlab import` (absent for a measured run, so older manifests read as measured).
    #[serde(default, skip_serializing_if = "provenance::Provenance::is_measured")]
    pub provenance: provenance::Provenance,
}

/// The statistic one launch contributes per figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchStatistic {
    /// The median of the launch's own samples, reduced as the summary's median is.
    Median,
}

/// A run's figures launch by launch: what `nightly` compares (the launch is the unit of
/// replication; a launch's iterations share its placement, caches and neighbours).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchStats {
    /// How many launches measured the run.
    pub count: u32,
    /// What each launch contributes per figure.
    pub statistic: LaunchStatistic,
    /// Per comparable figure (the names `nightly::figures` gives) and per figure findings pair
    /// by round (`nightly::figures::paired`: a decode run's prefill, a collective's own time per
    /// size), one value per launch in order.
    pub figures: std::collections::BTreeMap<String, Vec<f64>>,
}

impl LaunchStats {
    /// `figure`'s values with one per launch, so that value r is launch r's (what pairing two
    /// runs round by round needs); None where it has none, or where a launch gave it no value
    /// (the values after it would pair with the wrong rounds).
    pub fn in_launch_order(&self, figure: &str) -> Option<&[f64]> {
        self.figures.get(figure).map(Vec::as_slice).filter(|v| v.len() == self.count as usize)
    }
}

/// A run's results files, relative to the manifests folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultFiles {
    /// Every raw sample (one row per rank, figure, size, repetition, iteration).
    pub samples: PathBuf,
    /// The per-size (or per-round) summary that `summary` also carries.
    pub summary: PathBuf,
}

impl ResultFiles {
    /// Both files.
    pub fn paths(&self) -> [&Path; 2] {
        [&self.samples, &self.summary]
    }
}

impl Manifest {
    /// A manifest of `plan` that ended with `outcome` (origins: the plan's own; no caveats).
    pub fn for_plan(plan: &RunPlan, machine: machine::Fingerprint, started_at: &str, outcome: Outcome) -> Self {
        Manifest {
            schema: SCHEMA.into(),
            run_id: plan.run_id.clone(),
            answer_id: plan.answer_id.clone(),
            experiment: plan.experiment.clone(),
            origins: vec![Origin::of(plan)],
            kind: plan.kind(),
            outcome,
            layout: plan.layout.clone(),
            plan: plan.clone(),
            parlab: Tool::current(),
            machine,
            started_at: started_at.into(),
            finished_at: started_at.into(),
            caveats: Vec::new(),
            provenance: provenance::Provenance::Measured,
        }
    }

    /// How the run ended (the outcome's tag).
    pub fn status(&self) -> Status {
        self.outcome.status()
    }

    /// Why it failed or did not run (None for ok, and where none was recorded).
    pub fn reason(&self) -> Option<&str> {
        self.outcome.reason()
    }

    /// The first launch's details, for launched runs.
    pub fn launch(&self) -> Option<&Launch> {
        self.outcome.launch()
    }

    /// The results files of an ok run that wrote them.
    pub fn results(&self) -> Option<&ResultFiles> {
        match &self.outcome {
            Outcome::Ok { results, .. } => results.as_ref(),
            _ => None,
        }
    }

    /// The summary of an ok run.
    pub fn summary(&self) -> Option<&summary::Summary> {
        match &self.outcome {
            Outcome::Ok { summary, .. } => Some(&**summary),
            _ => None,
        }
    }

    /// The summary of an ok run, to change.
    pub fn summary_mut(&mut self) -> Option<&mut summary::Summary> {
        match &mut self.outcome {
            Outcome::Ok { summary, .. } => Some(&mut **summary),
            _ => None,
        }
    }

    /// The answer of an ok run that has one (decode).
    pub fn answer(&self) -> Option<&answer::Answer> {
        match &self.outcome {
            Outcome::Ok { answer, .. } => answer.as_deref(),
            _ => None,
        }
    }

    /// The answer of an ok run that has one, to change.
    pub fn answer_mut(&mut self) -> Option<&mut answer::Answer> {
        match &mut self.outcome {
            Outcome::Ok { answer, .. } => answer.as_deref_mut(),
            _ => None,
        }
    }

    /// Each launch's figures, for an ok run that recorded them.
    pub fn launches(&self) -> Option<&LaunchStats> {
        match &self.outcome {
            Outcome::Ok { launches, .. } => launches.as_ref(),
            _ => None,
        }
    }

    /// The manifest file's path for a run identity.
    pub fn path_for(dir: &Path, run_id: &str) -> PathBuf {
        dir.join(format!("{run_id}.json"))
    }

    /// The folder for a run's results files.
    pub fn results_dir(dir: &Path, run_id: &str) -> PathBuf {
        dir.join(run_id)
    }

    /// Sets the experiments this run identity came from (the first names it), as the suite now says.
    pub fn set_origins(&mut self, origins: &[Origin]) {
        if let Some(first) = origins.first() {
            self.experiment = first.experiment.clone();
            self.plan.experiment = first.experiment.clone();
            self.plan.spec_path = first.spec.clone();
            self.plan.index = first.index;
            self.origins = origins.to_vec();
        }
    }

    /// Writes the manifest to `dir/<run_id>.json` atomically.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = Self::path_for(dir, &self.run_id);
        let mut text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        text.push('\n');
        write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it into place.
///
/// On any failure (a full disk, a missing folder) the temporary file is removed, `path` keeps
/// what it held, and the error names the path and the action.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })
}

/// A manifest file that could not be used, and why.
#[derive(Debug)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: ReadError,
}

/// Why a file in the manifests folder is not read as a manifest (the caller names the file).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read (not a regular file, too large, an I/O error).
    #[error("{}", .0.reason())]
    Unreadable(crate::files::FileError),
    /// The file is not JSON.
    #[error("not valid JSON ({0})")]
    NotJson(serde_json::Error),
    /// The file has no `schema` key, or one that is not a string.
    #[error("not a parlab manifest (no `schema` string such as \"{SCHEMA}\")")]
    NoSchema,
    /// An older parlab wrote it; it is not migrated.
    #[error("written by an older parlab ({tag}: {lacked}); `parlab run` re-measures it (or delete it); it is not migrated because its figures were not stored as the values this parlab reads")]
    OlderSchema {
        /// The older format tag.
        tag: &'static str,
        /// What that format lacked.
        lacked: &'static str,
    },
    /// A schema tag this parlab does not know.
    #[error("schema `{0}` is not {SCHEMA}")]
    ForeignSchema(String),
    /// The JSON does not have the manifest's shape.
    #[error("malformed manifest ({0})")]
    Malformed(serde_json::Error),
    /// A number no measurement gives (non-finite, a negative time, an absurd magnitude).
    #[error(transparent)]
    Implausible(#[from] plausible::Implausible),
    /// The file is named for another run.
    #[error("file name does not match its run_id {0}")]
    MisnamedFile(crate::identity::RunId),
    /// A results file the manifest names is missing or not a parquet file.
    #[error(transparent)]
    Results(#[from] ResultsProblem),
}

/// Why a results file a manifest names cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ResultsProblem {
    /// It is missing, not a regular file, or unreadable (the reader names its path).
    #[error("results file: {}", .0.reason())]
    Unreadable(crate::files::FileError),
    /// It lacks parquet's magic bytes at either end.
    #[error("results file is not a parquet file (truncated or overwritten)")]
    NotParquet,
}

/// Every readable manifest in `dir` (sorted by experiment, then plan index), and the files skipped.
pub fn read_all(dir: &Path) -> (Vec<Manifest>, Vec<Skipped>) {
    let mut manifests = Vec::new();
    let mut skipped = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.is_dir() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    // Read in parallel, kept in file order.
    let read = crate::parallel::map(&files, |path| read_one(path));
    for (path, result) in files.into_iter().zip(read) {
        match result {
            Ok(m) => manifests.push(m),
            Err(reason) => skipped.push(Skipped { path, reason }),
        }
    }
    manifests.sort_by(|a, b| (&a.experiment, a.plan.index, &a.run_id).cmp(&(&b.experiment, b.plan.index, &b.run_id)));
    (manifests, skipped)
}

/// Reads one manifest, refusing foreign or corrupt files with a reason.
pub fn read_one(path: &Path) -> Result<Manifest, ReadError> {
    let text = crate::files::read_text(path, crate::files::MANIFEST_LIMIT).map_err(ReadError::Unreadable)?;
    let manifest = parse_checked(&text)?;
    let expected = format!("{}.json", manifest.run_id);
    if path.file_name().and_then(|n| n.to_str()) != Some(expected.as_str()) {
        return Err(ReadError::MisnamedFile(manifest.run_id));
    }
    Ok(manifest)
}

/// The schema of the manifest at `path` where it is one this parlab does not know (a newer
/// parlab's, never to be replaced); None where there is no file, or one this parlab reads.
pub fn foreign_schema(path: &Path) -> Option<String> {
    // Only the schema is read here: the whole manifest is read where it is used.
    let text = crate::files::read_text(path, crate::files::MANIFEST_LIMIT).ok()?;
    match check_schema(&text) {
        Err(ReadError::ForeignSchema(schema)) => Some(schema),
        _ => None,
    }
}

/// The `schema` tag of a JSON document (a manifest, a nightly history entry), where it has one.
pub fn schema_of(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    serde_json::from_str::<Head>(text).ok()?.schema
}

/// The `schema` of the parlab file (a manifest, a history night) `path` holds, if it holds one
/// (read up to a manifest's size limit).
pub fn file_schema(path: &Path) -> Option<String> {
    let text = crate::files::read_text(path, crate::files::MANIFEST_LIMIT).ok()?;
    schema_of(&text).filter(|s| s.starts_with("parlab."))
}

/// Parses a manifest's text, refusing another schema, an implausible number or a malformed file
/// with a reason: the schema read first, the numbers checked as a stream, then the typed parse
/// (no JSON tree is built).
fn parse_checked(text: &str) -> Result<Manifest, ReadError> {
    check_schema(text)?;
    plausible::check_text(text).map_err(|problem| match problem {
        plausible::TextProblem::Implausible(found) => ReadError::Implausible(found),
        plausible::TextProblem::NotJson(e) => ReadError::NotJson(e),
    })?;
    serde_json::from_str(text).map_err(ReadError::Malformed)
}

/// Refuses a manifest's text whose `schema` is not this parlab's, reading that key alone (an
/// older parlab's, a foreign one, none, or not JSON).
pub fn check_schema(text: &str) -> Result<(), ReadError> {
    /// The one key read before the rest.
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        schema: Option<std::borrow::Cow<'a, str>>,
    }
    let head = match serde_json::from_str::<Head>(text) {
        Ok(head) => head.schema,
        // JSON but not an object (or a schema that is not a string): no schema to go by.
        Err(_) => serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| None).map_err(ReadError::NotJson)?,
    };
    match head.as_deref() {
        Some(SCHEMA) => {}
        Some(old) => {
            return Err(match OLDER_SCHEMAS.iter().find(|(tag, _)| *tag == old) {
                Some(&(tag, lacked)) => ReadError::OlderSchema { tag, lacked },
                None => ReadError::ForeignSchema(old.to_string()),
            })
        }
        None => return Err(ReadError::NoSchema),
    }
    Ok(())
}

/// The current time as RFC 3339 UTC with seconds.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
