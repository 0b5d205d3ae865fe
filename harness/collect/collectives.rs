//! Collectives results: per op and size, the slowest rank's time per iteration, bandwidths, a fit.

use super::frames::{figures_and_sizes, per_iteration, records, write_results};
use super::stats::Stats;
use super::Collected;
use crate::costmodel::link::fit_collective;
use crate::spec::{Op, RunPlan};
use polars::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// Messages up to this size form the fitted ("small-message") regime; larger ones are held out.
pub const FIT_MAX_BYTES: u64 = 1 << 20;

/// One row of the summary: an op at a size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeSummary {
    /// The op.
    pub op: Op,
    /// Bytes moved (nccl-tests' size).
    pub size_bytes: u64,
    /// Slowest rank per iteration.
    pub time: Stats,
    /// Max minus min over ranks, per iteration.
    pub spread: Stats,
}

/// Summaries of every op and size in the records, in the order they ran.
pub fn summarise(recs: &[crate::rank::records::Record]) -> Vec<SizeSummary> {
    figures_and_sizes(recs)
        .into_iter()
        .filter_map(|(figure, size)| {
            let op = Op::ALL.into_iter().find(|o| o.name() == figure)?;
            let (slowest, spread) = per_iteration(recs, &figure, size);
            Some(SizeSummary { op, size_bytes: size, time: Stats::of(&slowest)?, spread: Stats::of(&spread)? })
        })
        .collect()
}

fn entry(s: &SizeSummary, plan: &RunPlan) -> Value {
    let factor = s.op.busbw_factor(plan.layout.world);
    let algbw = s.size_bytes as f64 / s.time.median;
    json!({
        "op": s.op.name(), "size_bytes": s.size_bytes, "world": plan.layout.world, "link": plan.link,
        "time_s": s.time.to_json(), "rank_spread_s": s.spread.to_json(),
        "algbw_Bps": algbw, "busbw_Bps": algbw * factor, "busbw_factor": factor, "wrong": 0,
    })
}

/// The alpha-beta fit of one op (`costmodel::link::fit_collective`: sizes up to 1 MiB, weighted
/// by relative error; alpha is per step of the ring), larger sizes held out and predicted.
pub fn fit_json(op: Op, world: u32, rows: &[SizeSummary]) -> Value {
    let points: Vec<(u64, f64)> = rows.iter().filter(|r| r.op == op).map(|r| (r.size_bytes, r.time.median)).collect();
    match fit_collective(op, world, &points, FIT_MAX_BYTES) {
        Some(fit) => json!({
            "op": op.name(), "world": world, "alpha_s": fit.alpha_s, "beta_Bps": fit.beta_bps,
            "intercept_s": fit.line.intercept, "slope_s_per_byte": fit.line.slope,
            "fit_max_bytes": fit.fit_max_bytes, "fitted_points": fit.fitted_points, "heldout": fit.heldout,
            "method": "costmodel::link::fit_collective on the slowest rank's median time per size",
        }),
        None => Value::Null,
    }
}

fn frame(rows: &[SizeSummary], plan: &RunPlan) -> PolarsResult<DataFrame> {
    let world = plan.layout.world;
    let f = |g: &dyn Fn(&SizeSummary) -> f64| rows.iter().map(g).collect::<Vec<f64>>();
    DataFrame::new_infer_height(vec![
        Column::new("op".into(), rows.iter().map(|r| r.op.name()).collect::<Vec<_>>()),
        Column::new("size_bytes".into(), rows.iter().map(|r| r.size_bytes).collect::<Vec<u64>>()),
        Column::new("world".into(), vec![world; rows.len()]),
        Column::new("link".into(), vec![plan.link.as_str(); rows.len()]),
        Column::new("median_s".into(), f(&|r| r.time.median)),
        Column::new("min_s".into(), f(&|r| r.time.min)),
        Column::new("max_s".into(), f(&|r| r.time.max)),
        Column::new("p99_s".into(), f(&|r| r.time.p99)),
        Column::new("n".into(), rows.iter().map(|r| r.time.n as u64).collect::<Vec<u64>>()),
        Column::new("spread_median_s".into(), f(&|r| r.spread.median)),
        Column::new("spread_max_s".into(), f(&|r| r.spread.max)),
        Column::new("algbw_Bps".into(), f(&|r| r.size_bytes as f64 / r.time.median)),
        Column::new("busbw_Bps".into(), f(&|r| r.size_bytes as f64 / r.time.median * r.op.busbw_factor(world))),
        Column::new("busbw_factor".into(), f(&|r| r.op.busbw_factor(world))),
        Column::new("wrong".into(), vec![0u64; rows.len()]),
    ])
}

/// Summarises a collectives run and writes its results files.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, String> {
    let recs = records(out)?;
    let rows = summarise(&recs);
    let mut summary_frame = frame(&rows, plan).map_err(|e| format!("building the summary frame: {e}"))?;
    let results = write_results(&recs, &mut summary_frame, out, manifests)?;
    let mut ops: Vec<Op> = rows.iter().map(|r| r.op).collect();
    ops.dedup();
    let main_op = if ops.contains(&Op::AllReduce) { Some(Op::AllReduce) } else { ops.first().copied() };
    let summary = json!({
        "collectives": rows.iter().map(|r| entry(r, plan)).collect::<Vec<_>>(),
        "fit": main_op.map(|op| fit_json(op, plan.layout.world, &rows)).unwrap_or(Value::Null),
        "fits": ops.iter().map(|&op| fit_json(op, plan.layout.world, &rows)).filter(|v| !v.is_null()).collect::<Vec<_>>(),
        "timing": "barrier before every iteration; each rank times its call with MPI_Wtime; time_s is the slowest rank per iteration",
    });
    Ok(Collected { results, summary, answer: Value::Null })
}
