//! Rank records -> polars frames -> results files and summaries.
//!
//! Results files (paths in `manifest.results`, relative to the manifests folder):
//! `<run_id>/samples.parquet` holds every raw sample (one row per rank, figure, size,
//! repetition, iteration); `<run_id>/summary.parquet` holds the per-size (or per-token-count,
//! per-repetition) summary that `manifest.summary` also carries.

pub mod collectives;
pub mod decode;
pub mod dispatch;
pub mod frames;
pub mod membw;

use crate::manifest::answer::Answer;
use crate::manifest::summary::Summary;
use crate::manifest::ResultFiles;
use crate::spec::{Kind, RunPlan};
use std::path::{Path, PathBuf};

/// Why collecting a run's results stopped; each variant names the file or folder and the step.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// A launch's rank records could not be read.
    #[error("reading rank records in {}: {cause}", dir.display())]
    ReadRecords {
        /// The launch folder.
        dir: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A launch's ranks wrote no record.
    #[error("no rank wrote any record in {}", dir.display())]
    NoRecords {
        /// The launch folder.
        dir: PathBuf,
    },
    /// A rank's answer file could not be read.
    #[error("{}: {cause}", path.display())]
    ReadAnswer {
        /// The answer file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A rank's answer file is not the JSON a rank writes.
    #[error("{}: {cause}", path.display())]
    ParseAnswer {
        /// The answer file.
        path: PathBuf,
        /// The parser's complaint.
        cause: serde_json::Error,
    },
    /// No rank wrote an answer.
    #[error("no rank wrote an answer in {}", dir.display())]
    NoAnswer {
        /// The launch folder.
        dir: PathBuf,
    },
    /// The ranks' answers carry no exactness figures.
    #[error("no rank reported logits to compare")]
    NoLogits,
    /// A figure the summary needs has no samples.
    #[error("no {figure} samples in {}", dir.display())]
    NoSamples {
        /// The figure (or the part of the run) lacking samples.
        figure: &'static str,
        /// The results folder.
        dir: PathBuf,
    },
    /// A prefill figure of a context split has no records.
    #[error("no {figure} records")]
    NoPrefillRecords {
        /// The figure.
        figure: crate::rank::figure::Figure,
    },
    /// A decode run's plan names no model.
    #[error("a decode run without a model")]
    NoModel,
    /// The model's config.json could not be read again.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// The model's config.json has a bad mixture key.
    #[error(transparent)]
    Config(#[from] crate::model::ConfigError),
    /// An expert run's model has no experts.
    #[error("an expert run of a dense model")]
    DenseExpertRun,
    /// A dispatch run's plan carries no dispatch parameters.
    #[error("a dispatch run needs dispatch parameters")]
    NoDispatchParameters,
    /// A model run reached collection (it has no ranks).
    #[error("model runs are arithmetic and have no rank records")]
    ModelRun,
    /// Building a polars frame failed.
    #[error("building the {what} frame: {cause}")]
    Frame {
        /// Which frame (`summary`, `samples`).
        what: &'static str,
        /// polars' error.
        cause: polars::error::PolarsError,
    },
    /// A results file's temporary could not be created.
    #[error("creating {}: {cause}", path.display())]
    CreateResults {
        /// The temporary file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Writing a parquet file failed.
    #[error("writing {}: {cause}", path.display())]
    WriteParquet {
        /// The results file.
        path: PathBuf,
        /// polars' error.
        cause: polars::error::PolarsError,
    },
    /// A results file's temporary could not be synced to disk (before it is renamed into
    /// place: a manifest, synced, must never name a file a power cut left empty).
    #[error("syncing {}: {cause}", path.display())]
    SyncResults {
        /// The temporary file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Renaming a results file into place failed.
    #[error("renaming into {}: {cause}", path.display())]
    RenameResults {
        /// The results file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A parquet file could not be opened.
    #[error("opening {}: {cause}", path.display())]
    OpenParquet {
        /// The results file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A parquet file could not be read.
    #[error("reading {}: {cause}", path.display())]
    ReadParquet {
        /// The results file.
        path: PathBuf,
        /// polars' error.
        cause: polars::error::PolarsError,
    },
}

impl CollectError {
    /// The error of building the summary frame.
    pub fn summary_frame(cause: polars::error::PolarsError) -> Self {
        CollectError::Frame { what: "summary", cause }
    }
}

/// What collection produced for the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// The results files written.
    pub results: ResultFiles,
    /// Summary figures for the register.
    pub summary: Summary,
    /// The answer and exactness figures (decode).
    pub answer: Option<Answer>,
}

/// Reads the ranks' records in `out`, writes results files, and summarises them.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, CollectError> {
    match plan.kind() {
        Kind::Decode => decode::collect(plan, out, manifests),
        Kind::Collectives => collectives::collect(plan, out, manifests),
        Kind::Membw => membw::collect(plan, out, manifests),
        Kind::Dispatch => dispatch::collect(plan, out, manifests),
        Kind::Model | Kind::Advise => Err(CollectError::ModelRun),
    }
}
