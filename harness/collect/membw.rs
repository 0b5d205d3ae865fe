//! Memory-bandwidth results: aggregate and per-process bandwidth per repetition.

use super::frames::{records, write_results};
use super::stats::Stats;
use super::Collected;
use crate::rank::records::Record;
use crate::spec::{RunPlan, Workload};
use polars::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Per repetition: (aggregate bytes/s = all buffers / slowest rank's time, each rank's bytes/s).
pub fn bandwidths(recs: &[Record]) -> Vec<(u32, f64, Vec<f64>)> {
    let mut reps: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.figure == "membw") {
        reps.entry(r.repetition).or_default().push(r);
    }
    reps.into_iter()
        .map(|(rep, rs)| {
            let total: f64 = rs.iter().map(|r| r.size_bytes as f64).sum();
            let slowest = rs.iter().map(|r| r.seconds).fold(0.0, f64::max);
            (rep, total / slowest, rs.iter().map(|r| r.size_bytes as f64 / r.seconds).collect())
        })
        .collect()
}

/// Summarises a membw run and writes its results files.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, String> {
    let recs = records(out)?;
    let bw = bandwidths(&recs);
    let aggregate: Vec<f64> = bw.iter().map(|b| b.1).collect();
    let per_process: Vec<f64> = bw.iter().flat_map(|b| b.2.clone()).collect();
    let (Some(agg), Some(per)) = (Stats::of(&aggregate), Stats::of(&per_process)) else {
        return Err(format!("no membw samples in {}", out.display()));
    };
    let buffer = match &plan.workload {
        Workload::Membw(p) => p.buffer_bytes,
        _ => 0,
    };
    let mut frame = DataFrame::new_infer_height(vec![
        Column::new("repetition".into(), bw.iter().map(|b| b.0).collect::<Vec<u32>>()),
        Column::new("processes".into(), vec![plan.layout.world; bw.len()]),
        Column::new("threads".into(), vec![plan.threads_per_rank; bw.len()]),
        Column::new("buffer_bytes".into(), vec![buffer; bw.len()]),
        Column::new("aggregate_Bps".into(), aggregate.clone()),
        Column::new(
            "per_process_min_Bps".into(),
            bw.iter().map(|b| b.2.iter().copied().fold(f64::INFINITY, f64::min)).collect::<Vec<f64>>(),
        ),
        Column::new(
            "per_process_max_Bps".into(),
            bw.iter().map(|b| b.2.iter().copied().fold(0.0, f64::max)).collect::<Vec<f64>>(),
        ),
    ])
    .map_err(|e| format!("building the summary frame: {e}"))?;
    let results = write_results(&recs, &mut frame, out, manifests)?;
    let summary = json!({"membw": {
        "processes": plan.layout.world, "threads": plan.threads_per_rank, "buffer_bytes": buffer,
        "aggregate_Bps": agg.to_json(), "per_process_Bps": per.to_json(),
        "method": "tch f32 tensor.sum() per rank, timed from a common start after a barrier (earliest rank clock, MPI min); aggregate = all buffers / slowest rank's time",
    }});
    Ok(Collected { results, summary, answer: Value::Null })
}
