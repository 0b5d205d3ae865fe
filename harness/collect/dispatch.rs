//! Dispatch results: the expert all-to-all there and back, per token count.

use super::frames::{figures_and_sizes, per_iteration, records, write_results};
use super::{CollectError, Collected};
use crate::manifest::stats::Stats;
use crate::manifest::summary::{Dispatch, DispatchRow, Summary};
use crate::rank::figure::Figure;
use crate::spec::{RunPlan, Workload};
use polars::prelude::*;
use std::path::Path;

/// Summarises a dispatch run and writes its results files.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, CollectError> {
    let Workload::Dispatch(params) = &plan.workload else {
        return Err(CollectError::NoDispatchParameters);
    };
    let recs = records(out)?;
    let row_bytes = params.top_k as u64 * params.hidden as u64 * 4;
    let rows: Vec<(u64, u64, Stats, Stats)> = figures_and_sizes(&recs)
        .into_iter()
        .filter(|(f, _)| *f == Figure::Dispatch)
        .filter_map(|(f, bytes)| {
            let (slowest, spread) = per_iteration(&recs, f, bytes);
            Some((bytes / row_bytes.max(1), bytes, Stats::of(&slowest)?, Stats::of(&spread)?))
        })
        .collect();
    let mut frame = DataFrame::new_infer_height(vec![
        Column::new("tokens".into(), rows.iter().map(|r| r.0).collect::<Vec<u64>>()),
        Column::new("bytes".into(), rows.iter().map(|r| r.1).collect::<Vec<u64>>()),
        Column::new("world".into(), vec![plan.layout.world; rows.len()]),
        Column::new("median_s".into(), rows.iter().map(|r| r.2.median).collect::<Vec<f64>>()),
        Column::new("min_s".into(), rows.iter().map(|r| r.2.min).collect::<Vec<f64>>()),
        Column::new("max_s".into(), rows.iter().map(|r| r.2.max).collect::<Vec<f64>>()),
        Column::new("p99_s".into(), rows.iter().map(|r| r.2.p99).collect::<Vec<f64>>()),
        Column::new("n".into(), rows.iter().map(|r| r.2.n).collect::<Vec<u64>>()),
        Column::new("spread_median_s".into(), rows.iter().map(|r| r.3.median).collect::<Vec<f64>>()),
    ])
    .map_err(CollectError::summary_frame)?;
    let results = write_results(&recs, &mut frame, out, manifests)?;
    let summary = Summary::Dispatch(Dispatch {
        rows: rows
            .into_iter()
            .map(|(tokens, bytes, time, spread)| DispatchRow {
                tokens,
                bytes,
                world: plan.layout.world,
                top_k: params.top_k,
                hidden: params.hidden,
                time,
                spread,
            })
            .collect(),
        timing: "barrier, then MPI_Alltoallv to the experts and back, timed together; time_s is the slowest rank per iteration".into(),
    });
    Ok(Collected { results, summary, answer: None })
}
