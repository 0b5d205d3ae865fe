//! The cost model: model shapes, links, collective times, per-strategy plans.

pub mod catalogue;

use crate::spec::RunPlan;
use serde_json::Value;
use std::path::PathBuf;

/// The modelled tables of a `kind: model` run, as the manifest's summary.
pub fn tables_for_plan(_plan: &RunPlan) -> Result<Value, String> {
    Err("the cost model is not implemented in this version".into())
}

/// `parlab shape`.
pub fn shape_command(model: &str, _as_json: bool, _dtype: &str) -> anyhow::Result<i32> {
    Err(crate::cli::UserError(format!("{model}: shapes are not implemented in this version")).into())
}

/// `parlab model` without a subcommand.
pub fn model_command(_paths: &[PathBuf]) -> anyhow::Result<i32> {
    Err(crate::cli::UserError("the cost model is not implemented in this version".into()).into())
}
