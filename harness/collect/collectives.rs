//! Collectives results: per op and size two times, bandwidths, a fit.
//!
//! - `op_time_s`: the operation's own time, free of barrier-exit skew (OSU's and nccl-tests'
//!   convention): each rank times blocks of up to 50 calls back to back after a barrier
//!   (`rank::collectives`, figure `<op>@block`); a block's sample is the mean over ranks of
//!   block time / calls; its stats are over blocks. α and β are fitted on its medians.
//! - `time_s`: per iteration (barrier before each call), the slowest rank's time, waiting
//!   included: what a decode step pays.
//! - `skew_s`: median `time_s` minus median `op_time_s`, the part of a step's collective that is
//!   waiting for the slowest rank.

use super::frames::{figures_and_sizes, per_iteration, records, write_results};
use super::stats::Stats;
use super::Collected;
use crate::costmodel::link::fit_collective;
use crate::rank::collectives::block_figure;
use crate::rank::records::Record;
use crate::spec::{Op, RunPlan};
use polars::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
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
    /// Slowest rank per iteration, waiting included.
    pub time: Stats,
    /// Max minus min over ranks, per iteration.
    pub spread: Stats,
    /// The op's own time: per block of back-to-back calls, the mean over ranks of block / calls.
    pub op_time: Option<Stats>,
}

impl SizeSummary {
    /// The time α and β are fitted on: the op's own time where measured, else the slowest rank's.
    pub fn fit_time(&self) -> f64 {
        self.op_time.map_or(self.time.median, |s| s.median)
    }
}

/// Per (repetition, block): the mean over ranks of an op's back-to-back samples at `size`.
pub fn block_means(recs: &[Record], op: Op, size: u64) -> Vec<f64> {
    let figure = block_figure(op);
    let mut groups: BTreeMap<(u32, u32), (f64, u32)> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.figure == figure && r.size_bytes == size) {
        let e = groups.entry((r.repetition, r.iteration)).or_insert((0.0, 0));
        e.0 += r.seconds;
        e.1 += 1;
    }
    groups.values().map(|(sum, n)| sum / f64::from(*n)).collect()
}

/// Summaries of every op and size in the records, in the order they ran.
pub fn summarise(recs: &[Record]) -> Vec<SizeSummary> {
    figures_and_sizes(recs)
        .into_iter()
        .filter_map(|(figure, size)| {
            let op = Op::ALL.into_iter().find(|o| o.name() == figure)?;
            let (slowest, spread) = per_iteration(recs, &figure, size);
            let op_time = Stats::of(&block_means(recs, op, size));
            Some(SizeSummary { op, size_bytes: size, time: Stats::of(&slowest)?, spread: Stats::of(&spread)?, op_time })
        })
        .collect()
}

fn entry(s: &SizeSummary, plan: &RunPlan) -> Value {
    let factor = s.op.busbw_factor(plan.layout.world);
    let algbw = s.size_bytes as f64 / s.time.median;
    let mut e = json!({
        "op": s.op.name(), "size_bytes": s.size_bytes, "world": plan.layout.world, "link": plan.link,
        "time_s": s.time.to_json(), "rank_spread_s": s.spread.to_json(),
        "algbw_Bps": algbw, "busbw_Bps": algbw * factor, "busbw_factor": factor, "wrong": 0,
    });
    if let Some(op) = s.op_time {
        let own = s.size_bytes as f64 / op.median;
        e["op_time_s"] = op.to_json();
        e["skew_s"] = json!(s.time.median - op.median);
        e["op_algbw_Bps"] = json!(own);
        e["op_busbw_Bps"] = json!(own * factor);
    }
    e
}

/// The alpha-beta fit of one op (`costmodel::link::fit_collective`: sizes up to 1 MiB, weighted
/// by relative error; alpha is per step of the ring), larger sizes held out and predicted.
pub fn fit_json(op: Op, world: u32, rows: &[SizeSummary]) -> Value {
    let points: Vec<(u64, f64)> = rows.iter().filter(|r| r.op == op).map(|r| (r.size_bytes, r.fit_time())).collect();
    let on = if rows.iter().any(|r| r.op == op && r.op_time.is_some()) {
        "op_time_s (back to back, mean over ranks)"
    } else {
        "time_s (slowest rank)"
    };
    match fit_collective(op, world, &points, FIT_MAX_BYTES) {
        Some(fit) => json!({
            "op": op.name(), "world": world, "alpha_s": fit.alpha_s, "beta_Bps": fit.beta_bps,
            "intercept_s": fit.line.intercept, "slope_s_per_byte": fit.line.slope,
            "fit_max_bytes": fit.fit_max_bytes, "fitted_points": fit.fitted_points, "heldout": fit.heldout,
            "method": format!("costmodel::link::fit_collective on the median {on} per size"),
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
        Column::new("n".into(), rows.iter().map(|r| r.time.n).collect::<Vec<u64>>()),
        Column::new("spread_median_s".into(), f(&|r| r.spread.median)),
        Column::new("spread_max_s".into(), f(&|r| r.spread.max)),
        Column::new("algbw_Bps".into(), f(&|r| r.size_bytes as f64 / r.time.median)),
        Column::new("busbw_Bps".into(), f(&|r| r.size_bytes as f64 / r.time.median * r.op.busbw_factor(world))),
        Column::new("busbw_factor".into(), f(&|r| r.op.busbw_factor(world))),
        Column::new("wrong".into(), vec![0u64; rows.len()]),
        Column::new("op_median_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.median))),
        Column::new("op_min_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.min))),
        Column::new("op_max_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.max))),
        Column::new("skew_median_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| r.time.median - s.median))),
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
        "timing": "time_s: barrier before every iteration, each rank times its call with MPI_Wtime, the slowest rank per iteration (waiting included); op_time_s: after a barrier each rank times a block of calls back to back (up to 50; about `iterations` calls in at least 3 blocks), block / calls, averaged over ranks, median over blocks (OSU's convention; barrier-exit skew divided by the block length); skew_s = median time_s - median op_time_s; the fit is on op_time_s",
    });
    Ok(Collected { results, summary, answer: Value::Null })
}
