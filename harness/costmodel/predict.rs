//! Predictions joined with measurements (polars): collective times at other world sizes
//! and message sizes from the 2-rank fit, and the measured constants decode predictions
//! draw on (`step` predicts every decode run from them).

use super::link::{collective_time, LinkFit};
use crate::identity::RunId;
use crate::manifest::summary::{Collectives, Membw};
use crate::manifest::{Manifest, Status};
use crate::spec::link::Link;
use crate::spec::schema::Kind;
use crate::spec::schema::Op;
use crate::table::{Cell, Table};
use crate::units::{format_bytes, format_gbps, format_seconds};
use polars::prelude::*;
use std::collections::BTreeMap;

/// Errors joining predictions with measurements.
#[derive(Debug, thiserror::Error)]
pub enum PredictError {
    /// A polars operation failed.
    #[error("joining predictions with measurements: {0}")]
    Frame(#[from] PolarsError),
}

/// One measured collective: op, link, world, size and median time, with its run.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredCollective {
    /// Operation.
    pub op: Op,
    /// Link (`mpi-shm`, `mpi-tcp`).
    pub link: Link,
    /// Ranks.
    pub world: u32,
    /// Message size.
    pub size_bytes: u64,
    /// Median seconds per iteration.
    pub median_s: f64,
    /// The run it came from.
    pub run_id: RunId,
}

fn ok_of_kind(manifests: &[Manifest], kind: Kind) -> impl Iterator<Item = &Manifest> + '_ {
    manifests.iter().filter(move |m| m.kind == kind && m.status() == Status::Ok)
}

/// The ok collectives summaries, with their manifests.
fn collectives(manifests: &[Manifest]) -> impl Iterator<Item = (&Manifest, &Collectives)> + '_ {
    ok_of_kind(manifests, Kind::Collectives).filter_map(|m| Some((m, m.summary()?.collectives()?)))
}

/// Every ok memory-bandwidth summary (any buffer, caches included), with its manifest.
pub fn all_membw(manifests: &[Manifest]) -> Vec<(&Manifest, &Membw)> {
    ok_of_kind(manifests, Kind::Membw).filter_map(|m| Some((m, m.summary()?.membw()?))).collect()
}

/// The ok memory-bandwidth summaries that read from memory (each launch shape's largest
/// buffer), with their manifests.
pub fn membw_runs(manifests: &[Manifest]) -> Vec<(&Manifest, &Membw)> {
    super::cache::from_memory(all_membw(manifests), |(_, b)| (b.processes, b.threads), |(_, b)| b.buffer_bytes)
}

/// Every measured collective in the `collectives` manifests, at the time fits are fitted on
/// (the op's own time where measured).
pub fn measured_collectives(manifests: &[Manifest]) -> Vec<MeasuredCollective> {
    collectives(manifests)
        .flat_map(|(m, c)| {
            c.rows.iter().map(|r| MeasuredCollective {
                op: r.op,
                link: r.link.clone(),
                world: r.world,
                size_bytes: r.size_bytes,
                median_s: r.fit_time(),
                run_id: m.run_id.clone(),
            })
        })
        .collect()
}

/// The 2-rank fit of each (op, link) as its run stored it: of the runs whose fit describes a
/// link ([`LinkFit::is_physical`]), the newest (then the smallest run identity), the order in
/// which `advise --links-from` prefers a link's runs.
pub fn two_rank_fits(manifests: &[Manifest]) -> BTreeMap<(Op, Link), (LinkFit, RunId)> {
    let mut out: BTreeMap<(Op, Link), (LinkFit, RunId, &str)> = BTreeMap::new();
    for (m, c) in collectives(manifests).filter(|(m, _)| m.layout.world == 2) {
        for fit in c.fits.iter().filter(|f| f.is_physical()) {
            let preferred = |(_, run, started): &(LinkFit, RunId, &str)| {
                (std::cmp::Reverse(m.started_at.as_str()), &m.run_id) < (std::cmp::Reverse(*started), run)
            };
            let key = (fit.op, m.plan.link.clone());
            if out.get(&key).is_none_or(preferred) {
                out.insert(key, (fit.clone(), m.run_id.clone(), m.started_at.as_str()));
            }
        }
    }
    out.into_iter().map(|(k, (fit, run, _))| (k, (fit, run))).collect()
}

/// Predicted against measured collective times, joined in polars, with a relative error column.
pub fn collectives_frame(manifests: &[Manifest]) -> Result<DataFrame, PredictError> {
    let measured = measured_collectives(manifests);
    let fits = two_rank_fits(manifests);
    let m = df!(
        "op" => measured.iter().map(|r| r.op.name()).collect::<Vec<_>>(),
        "link" => measured.iter().map(|r| r.link.name()).collect::<Vec<_>>(),
        "world" => measured.iter().map(|r| r.world).collect::<Vec<_>>(),
        "size_bytes" => measured.iter().map(|r| r.size_bytes).collect::<Vec<_>>(),
        "run" => measured.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        "measured_s" => measured.iter().map(|r| r.median_s).collect::<Vec<_>>(),
    )?;
    let predicted: Vec<(&MeasuredCollective, f64, bool)> = measured
        .iter()
        .filter_map(|r| {
            let (fit, _) = fits.get(&(r.op, r.link.clone()))?;
            let in_fit = r.world == 2 && r.size_bytes <= fit.fit_max_bytes;
            Some((r, collective_time(fit.link(), r.op, r.size_bytes as f64, r.world), in_fit))
        })
        .collect();
    let p = df!(
        "op" => predicted.iter().map(|(r, _, _)| r.op.name()).collect::<Vec<_>>(),
        "link" => predicted.iter().map(|(r, _, _)| r.link.name()).collect::<Vec<_>>(),
        "world" => predicted.iter().map(|(r, _, _)| r.world).collect::<Vec<_>>(),
        "size_bytes" => predicted.iter().map(|(r, _, _)| r.size_bytes).collect::<Vec<_>>(),
        "run" => predicted.iter().map(|(r, _, _)| r.run_id.as_str()).collect::<Vec<_>>(),
        "predicted_s" => predicted.iter().map(|(_, t, _)| *t).collect::<Vec<_>>(),
        "in_fit" => predicted.iter().map(|(_, _, f)| *f).collect::<Vec<_>>(),
    )?;
    let keys = [col("op"), col("link"), col("world"), col("size_bytes"), col("run")];
    let joined = m
        .lazy()
        .join(p.lazy(), keys.clone(), keys, JoinArgs::new(JoinType::Inner))
        .with_column(((col("predicted_s") - col("measured_s")) / col("measured_s")).alias("error"))
        .sort(["op", "link", "world", "size_bytes", "run"], SortMultipleOptions::default().with_maintain_order(true))
        .collect()?;
    Ok(joined)
}

/// The collectives comparison as a register table.
pub fn collectives_table(manifests: &[Manifest]) -> Result<Table, PredictError> {
    let df = collectives_frame(manifests)?;
    let (op, link) = (df.column("op")?.str()?.clone(), df.column("link")?.str()?.clone());
    let (world, size) = (df.column("world")?.u32()?.clone(), df.column("size_bytes")?.u64()?.clone());
    let (meas, pred, err) =
        (df.column("measured_s")?.f64()?.clone(), df.column("predicted_s")?.f64()?.clone(), df.column("error")?.f64()?.clone());
    let in_fit = df.column("in_fit")?.bool()?.clone();
    let imported = (0..df.height()).any(|i| link.get(i).is_some_and(|l| l.contains("(imported:")));
    let rows = (0..df.height())
        .map(|i| {
            vec![
                Cell::text(op.get(i).unwrap_or("")),
                Cell::text(link.get(i).unwrap_or("")),
                Cell::opt_count(world.get(i).map(u64::from)),
                Cell::opt(size.get(i).map(|b| b as f64), Cell::Bytes),
                Cell::opt(meas.get(i), Cell::Seconds),
                Cell::opt(pred.get(i), Cell::Seconds),
                Cell::opt(err.get(i), Cell::Change),
                Cell::text(if in_fit.get(i).unwrap_or(false) { "fitted" } else { "predicted" }),
            ]
        })
        .collect();
    let provenance = two_rank_fits(manifests)
        .into_iter()
        .map(|((op, link), (f, run))| {
            let beta = f.beta_bps.map(format_gbps).unwrap_or_else(|| "unbounded (flat in size)".into());
            format!(
                "{} over {link}: fitted on {} sizes up to {} at 2 ranks of run {}: intercept {}, α {}, β {beta}",
                op.name(),
                f.fitted_points,
                format_bytes(f.fit_max_bytes as f64),
                run.short(),
                format_seconds(f.line.intercept_s),
                format_seconds(f.alpha_per_step_s)
            )
        })
        .collect();
    Ok(Table {
        id: "predicted-collectives".into(),
        title: "Collectives: the 2-rank alpha-beta fit against measurement".into(),
        caption: format!("MODELLED against MEASURED: α and β are fitted (least squares, relative error) on the 2-rank medians up to the fit size; every other size and world size is predicted from them with the ring formulas and compared with its measured median. error = (predicted - measured) / measured.{}", if imported { " A link marked `(imported: <tool>)` is another tool's run: its fit and its measured times are that tool's (its mean over iterations, not parlab's median)." } else { "" }),
        columns: ["op", "link", "world", "size", "measured (median)", "predicted", "error", "role"].iter().map(|c| c.to_string()).collect(),
        rows,
        provenance,
    })
}

/// The membw bandwidth of one process streaming alone (median) from memory (its launch
/// shape's largest buffer), with its run; with `threads`, a run with that many threads is
/// preferred (a decode step is compared with the bandwidth its own thread count can draw).
pub fn single_process_bandwidth(manifests: &[Manifest], threads: Option<u32>) -> Option<(f64, RunId)> {
    let alone: Vec<(&Manifest, &Membw)> = membw_runs(manifests).into_iter().filter(|(_, b)| b.processes == 1).collect();
    let matching: Vec<(&Manifest, &Membw)> = alone.iter().copied().filter(|(_, b)| threads == Some(b.threads)).collect();
    let pool = if matching.is_empty() { alone } else { matching };
    // The roofline: the higher of parlab's STREAM-class read and libtorch's sum.
    pool.into_iter()
        .max_by(|a, b| (&a.0.finished_at, &a.0.run_id).cmp(&(&b.0.finished_at, &b.0.run_id)))
        .map(|(m, b)| (b.roofline.per_process_bps, m.run_id.clone()))
}

/// The GPU memory roofline: the bandwidth of the largest `device-read` measured (its size over
/// the op's own time), with its run.
pub fn gpu_read_bandwidth(manifests: &[Manifest]) -> Option<(f64, RunId)> {
    collectives(manifests)
        .flat_map(|(m, c)| c.rows.iter().filter(|r| r.op == Op::DeviceRead).map(move |r| (r.size_bytes, r.fit_time(), &m.run_id)))
        .filter(|(_, t, _)| *t > 0.0)
        .max_by(|a, b| (a.0, a.2).cmp(&(b.0, b.2)))
        .map(|(size, t, run)| (size as f64 / t, run.clone()))
}

/// The world-1 fits of the operations on a rank's GPU (host-device copies, device read and
/// copy), each op's first in manifest order, with its run.
pub fn device_fits(manifests: &[Manifest]) -> BTreeMap<Op, (LinkFit, RunId)> {
    let mut out = BTreeMap::new();
    for (m, c) in collectives(manifests).filter(|(m, _)| m.layout.world == 1) {
        for fit in c.fits.iter().filter(|f| f.op.on_device()) {
            out.entry(fit.op).or_insert_with(|| (fit.clone(), m.run_id.clone()));
        }
    }
    out
}

/// Every predicted-against-measured table the manifests allow (empty tables are left out).
pub fn try_predicted_vs_measured(manifests: &[Manifest]) -> Result<Vec<Table>, PredictError> {
    let tables = vec![collectives_table(manifests)?];
    Ok(tables.into_iter().filter(|t| !t.rows.is_empty()).collect())
}

/// The register's call: the tables, or none with a warning on stderr if the join failed.
pub fn predicted_vs_measured(manifests: &[Manifest]) -> Vec<Table> {
    try_predicted_vs_measured(manifests).unwrap_or_else(|e| {
        crate::say!("warning: {e}");
        Vec::new()
    })
}
