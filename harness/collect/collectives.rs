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
use super::{CollectError, Collected};
use crate::costmodel::link::{fit_collective, LinkFit};
use crate::manifest::stats::Stats;
use crate::manifest::summary::{CollectiveRow, Collectives, Summary};
use crate::rank::figure::Figure;
use crate::rank::records::Record;
use crate::spec::{Op, RunPlan};
use polars::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Messages up to this size form the fitted ("small-message") regime; larger ones are held out.
pub const FIT_MAX_BYTES: u64 = 1 << 20;

/// Per (repetition, block): the mean over ranks of the back-to-back samples of `figure` (an
/// op's [`Figure::OpBlock`] or [`Figure::OpInPlaceBlock`]) at `size`.
pub fn block_means(recs: &[Record], figure: Figure, size: u64) -> Vec<f64> {
    let mut groups: BTreeMap<(u32, u32), (f64, u32)> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.figure == figure && r.size_bytes == size) {
        let e = groups.entry((r.repetition, r.iteration)).or_insert((0.0, 0));
        e.0 += r.seconds;
        e.1 += 1;
    }
    groups.values().map(|(sum, n)| sum / f64::from(*n)).collect()
}

/// Rows of every op and size in the records, in the order they ran.
pub fn summarise(recs: &[Record], plan: &RunPlan) -> Vec<CollectiveRow> {
    figures_and_sizes(recs)
        .into_iter()
        .filter_map(|(figure, size)| {
            let Figure::Op(op) = figure else { return None };
            let (slowest, spread) = per_iteration(recs, figure, size);
            Some(CollectiveRow {
                op,
                size_bytes: size,
                world: plan.layout.world,
                link: plan.link.clone(),
                time: Stats::of(&slowest)?,
                spread: Stats::of(&spread)?,
                op_time: Stats::of(&block_means(recs, Figure::OpBlock(op), size)),
                in_place_op_time: Stats::of(&block_means(recs, Figure::OpInPlaceBlock(op), size)),
                wrong: 0,
            })
        })
        .collect()
}

/// The alpha-beta fit of one op (`costmodel::link::fit_collective`, weighted by relative error):
/// a collective over sizes up to 1 MiB, larger sizes held out and predicted; an operation on
/// the rank's GPU over every size (below a megabyte a GPU copy or read is all launch and
/// latency, so a line through those alone says nothing of the bandwidth).
pub fn fit_of(op: Op, world: u32, rows: &[CollectiveRow]) -> Option<LinkFit> {
    let points: Vec<(u64, f64)> = rows.iter().filter(|r| r.op == op).map(|r| (r.size_bytes, r.fit_time())).collect();
    let largest = points.iter().map(|(s, _)| *s).max().unwrap_or(FIT_MAX_BYTES);
    fit_collective(op, world, &points, if op.on_device() { largest } else { FIT_MAX_BYTES })
}

/// What the fits of `rows` were fitted on.
fn fit_method(rows: &[CollectiveRow]) -> String {
    let on = if rows.iter().any(|r| r.op_time.is_some()) { "op_time_s (back to back, mean over ranks)" } else { "time_s (slowest rank)" };
    format!("costmodel::link::fit_collective on the median {on} per size")
}

fn frame(rows: &[CollectiveRow], plan: &RunPlan) -> PolarsResult<DataFrame> {
    let world = plan.layout.world;
    let f = |g: &dyn Fn(&CollectiveRow) -> f64| rows.iter().map(g).collect::<Vec<f64>>();
    DataFrame::new_infer_height(vec![
        Column::new("op".into(), rows.iter().map(|r| r.op.name()).collect::<Vec<_>>()),
        Column::new("size_bytes".into(), rows.iter().map(|r| r.size_bytes).collect::<Vec<u64>>()),
        Column::new("world".into(), vec![world; rows.len()]),
        Column::new("link".into(), vec![plan.link.name(); rows.len()]),
        Column::new("median_s".into(), f(&|r| r.time.median)),
        Column::new("min_s".into(), f(&|r| r.time.min)),
        Column::new("max_s".into(), f(&|r| r.time.max)),
        Column::new("p99_s".into(), f(&|r| r.time.p99)),
        Column::new("n".into(), rows.iter().map(|r| r.time.n).collect::<Vec<u64>>()),
        Column::new("spread_median_s".into(), f(&|r| r.spread.median)),
        Column::new("spread_max_s".into(), f(&|r| r.spread.max)),
        Column::new("algbw_Bps".into(), f(&|r| r.algbw_bps())),
        Column::new("busbw_Bps".into(), f(&|r| r.busbw_bps())),
        Column::new("busbw_factor".into(), f(&|r| r.busbw_factor())),
        Column::new("wrong".into(), rows.iter().map(|r| r.wrong).collect::<Vec<u64>>()),
        Column::new("op_median_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.median))),
        Column::new("op_min_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.min))),
        Column::new("op_max_s".into(), f(&|r| r.op_time.map_or(f64::NAN, |s| s.max))),
        Column::new("skew_median_s".into(), f(&|r| r.skew_s().unwrap_or(f64::NAN))),
    ])
}

/// How both times of an op between ranks are taken, as the summary says it.
const TIMING: &str = "time_s: barrier before every iteration, each rank times its call with MPI_Wtime, the slowest rank per iteration (waiting included); op_time_s: after a barrier each rank times a block of calls back to back (up to 50; about `iterations` calls in at least 3 blocks), block / calls, averaged over ranks, median over blocks (nccl-tests' convention; barrier-exit skew divided by the block length); skew = median time_s - median op_time_s; the fit is on op_time_s";

/// What an NCCL call's MPI_Wtime spans.
const NCCL_TIMING: &str =
    "each NCCL call is issued and the device synchronised inside the timed region (the host clock, as nccl-tests' per-call time)";

/// How both times of an op on a rank's own GPU are taken.
const DEVICE_TIMING: &str = "device ops (host-device copies, device read and copy): time_s: barrier, then one call between two CUDA events on its stream, the end event waited for (the device's own time for the call); op_time_s: a block of calls queued without waiting, the device synchronised once, block / calls, median over blocks; the fit is on op_time_s";

/// The timing text of a run's ops: between ranks (over NCCL where the backend is), on the
/// GPU, or both where the run has both.
fn timing(plan: &RunPlan, ops: &[Op]) -> String {
    let between = ops.iter().any(|op| !op.on_device()).then(|| match plan.backend {
        crate::spec::link::Backend::Nccl => format!("{TIMING}; {NCCL_TIMING}"),
        _ => TIMING.to_string(),
    });
    let on_device = ops.iter().any(|op| op.on_device()).then(|| DEVICE_TIMING.to_string());
    between.into_iter().chain(on_device).collect::<Vec<_>>().join(" | ")
}

/// Summarises a collectives run and writes its results files.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, CollectError> {
    let recs = records(out)?;
    let rows = summarise(&recs, plan);
    let mut summary_frame = frame(&rows, plan).map_err(CollectError::summary_frame)?;
    let results = write_results(&recs, &mut summary_frame, out, manifests)?;
    let mut ops: Vec<Op> = rows.iter().map(|r| r.op).collect();
    ops.dedup();
    let summary = Summary::Collectives(Collectives {
        fits: ops.iter().filter_map(|&op| fit_of(op, plan.layout.world, &rows)).collect(),
        fit_method: fit_method(&rows),
        rows,
        timing: timing(plan, &ops),
    });
    Ok(Collected { results, summary, answer: None })
}
