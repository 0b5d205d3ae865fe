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
pub mod stats;

use crate::manifest::answer::Answer;
use crate::manifest::summary::Summary;
use crate::manifest::ResultFiles;
use crate::spec::{Kind, RunPlan};
use std::path::Path;

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
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, String> {
    match plan.kind() {
        Kind::Decode => decode::collect(plan, out, manifests),
        Kind::Collectives => collectives::collect(plan, out, manifests),
        Kind::Membw => membw::collect(plan, out, manifests),
        Kind::Dispatch => dispatch::collect(plan, out, manifests),
        Kind::Model => Err("model runs are arithmetic and have no rank records".into()),
    }
}
