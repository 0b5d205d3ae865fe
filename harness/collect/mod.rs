//! Rank records -> polars frames -> results files and summaries.

use crate::spec::{Kind, RunPlan};
use serde_json::Value;
use std::path::Path;

/// What collection produced for the manifest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Collected {
    /// Paths of results files, relative to the manifests folder.
    pub results: Value,
    /// Summary figures for the register.
    pub summary: Value,
    /// The answer and exactness figures (decode).
    pub answer: Value,
}

/// Reads the ranks' records in `out`, writes results files, and summarises them.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, String> {
    match plan.kind {
        Kind::Decode => decode::collect(plan, out, manifests),
        _ => Err(format!("collecting `{}` results is not implemented in this version", plan.kind.name())),
    }
}

pub mod decode {
    //! Decode results: step times, exactness, the answer.
    use super::Collected;
    use crate::spec::RunPlan;
    use std::path::Path;

    /// Summarises a decode run.
    pub fn collect(_plan: &RunPlan, _out: &Path, _manifests: &Path) -> Result<Collected, String> {
        Err("collecting decode results is not implemented in this version".into())
    }
}
