//! Memory-bandwidth results: aggregate and per-process bandwidth per repetition, for both
//! read kernels: libtorch's sum (figure `membw`; the summary's `aggregate` and `per_process`)
//! and parlab's STREAM-class read (figure `membw_stream`; `stream`). `roofline` names the
//! higher of the two medians: the bandwidth a decode step is judged against.

use super::frames::{launch_dir, launches_in, records, write_results};
use super::{CollectError, Collected};
use crate::manifest::stats::Stats;
use crate::manifest::summary::{Membw, Roofline, RooflineSource, StreamRead, Summary};
use crate::rank::figure::Figure;
use crate::rank::records::Record;
use crate::spec::{RunPlan, Workload};
use polars::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Per repetition of `figure`: (aggregate bytes/s = all buffers / slowest rank's time, each rank's bytes/s).
pub fn bandwidths(recs: &[Record], figure: Figure) -> Vec<(u32, f64, Vec<f64>)> {
    let mut reps: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.figure == figure) {
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

/// How the libtorch sum is timed.
const TORCH_METHOD: &str = "tch f32 tensor.sum() per rank, timed from a common start after a barrier (earliest rank clock, MPI min); aggregate = all buffers / slowest rank's time";

/// How parlab's STREAM-class read is timed.
const STREAM_METHOD: &str = "parlab's STREAM-class read (model::matvec::read_threaded with the best kernel here: SIMD, several accumulators, four streams per thread) of the same buffer by threads_per_rank threads (the caller and the matvec pool, taking chunks as they come free), timed like the libtorch sum; the two kernels alternate order per repetition";

/// Summarises a membw run and writes its results files.
pub fn collect(plan: &RunPlan, out: &Path, manifests: &Path) -> Result<Collected, CollectError> {
    let recs = records(out)?;
    let bw = bandwidths(&recs, Figure::Membw);
    let (Some((agg, per)), aggregate) = (stats(&bw), bw.iter().map(|b| b.1).collect::<Vec<f64>>()) else {
        return Err(CollectError::NoSamples { figure: "membw", dir: out.into() });
    };
    let stream_bw = bandwidths(&recs, Figure::MembwStream);
    let stream = stats(&stream_bw);
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
        Column::new("per_process_max_Bps".into(), bw.iter().map(|b| b.2.iter().copied().fold(0.0, f64::max)).collect::<Vec<f64>>()),
        Column::new("stream_aggregate_Bps".into(), per_rep(&bw, &stream_bw)),
    ])
    .map_err(CollectError::summary_frame)?;
    let results = write_results(&recs, &mut frame, out, manifests)?;
    let stream = stream.map(|(aggregate, per_process)| StreamRead {
        aggregate,
        per_process,
        kernel: stream_kernel(out),
        method: STREAM_METHOD.into(),
    });
    let summary = Summary::Membw(Membw {
        processes: plan.layout.world,
        threads: plan.threads_per_rank,
        buffer_bytes: buffer,
        aggregate: agg,
        per_process: per,
        method: TORCH_METHOD.into(),
        roofline: roofline(&agg, &per, stream.as_ref()),
        stream,
    });
    Ok(Collected { results, summary, answer: None })
}

/// Aggregate and per-process stats of one kernel's per-repetition bandwidths.
fn stats(bw: &[(u32, f64, Vec<f64>)]) -> Option<(Stats, Stats)> {
    let aggregate: Vec<f64> = bw.iter().map(|b| b.1).collect();
    let per_process: Vec<f64> = bw.iter().flat_map(|b| b.2.clone()).collect();
    Some((Stats::of(&aggregate)?, Stats::of(&per_process)?))
}

/// The STREAM kernel's aggregate bandwidth at each repetition of `torch` (NaN where it has none).
fn per_rep(torch: &[(u32, f64, Vec<f64>)], stream: &[(u32, f64, Vec<f64>)]) -> Vec<f64> {
    torch.iter().map(|t| stream.iter().find(|s| s.0 == t.0).map_or(f64::NAN, |s| s.1)).collect()
}

/// The read kernel the ranks used, as rank 0 of each launch recorded it (the collector may run
/// on another host, with other SIMD: a Slurm login node); distinct names joined by `, `, and
/// `unrecorded` where no launch wrote one.
fn stream_kernel(out: &Path) -> String {
    let recorded: std::collections::BTreeSet<String> = (0..launches_in(out))
        .filter_map(|l| std::fs::read_to_string(launch_dir(out, l).join(crate::rank::membw::KERNEL_FILE)).ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .collect();
    if recorded.is_empty() {
        return "unrecorded".into();
    }
    recorded.into_iter().collect::<Vec<_>>().join(", ")
}

/// The higher median of the two kernels (per process and aggregate), and which kernel it is.
pub fn roofline(torch_agg: &Stats, torch_per: &Stats, stream: Option<&StreamRead>) -> Roofline {
    match stream {
        Some(s) if s.per_process.median > torch_per.median => Roofline {
            source: RooflineSource::Stream,
            per_process_bps: s.per_process.median,
            aggregate_bps: s.aggregate.median,
            other_per_process_bps: Some(torch_per.median),
        },
        _ => Roofline {
            source: RooflineSource::TorchSum,
            per_process_bps: torch_per.median,
            aggregate_bps: torch_agg.median,
            other_per_process_bps: stream.map(|s| s.per_process.median),
        },
    }
}
