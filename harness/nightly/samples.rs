//! The raw samples behind each comparable figure, read back from a run's `samples.parquet`
//! and reduced exactly as `collect` reduced them for the summary's medians.

use super::figures::comparable;
use crate::collect::frames::read_parquet;
use crate::manifest::Manifest;
use crate::rank::records::Record;
use std::collections::BTreeMap;
use std::path::Path;

/// Samples per figure name (the names [`super::figures`] gives).
pub type FigureSamples = BTreeMap<String, Vec<f64>>;

/// The records of `m`'s samples file in `dir`, or why they cannot be read.
pub fn read_records(m: &Manifest, dir: &Path) -> Result<Vec<Record>, String> {
    let rel = &m.results.as_ref().ok_or("the manifest names no samples file")?.samples;
    let df = read_parquet(&dir.join(rel))?;
    let err = |e: polars::prelude::PolarsError| format!("{}: {e}", dir.join(rel).display());
    let rank = df.column("rank").and_then(|c| c.u32().cloned()).map_err(err)?;
    let figure = df.column("figure").and_then(|c| c.str().cloned()).map_err(err)?;
    let size = df.column("size_bytes").and_then(|c| c.u64().cloned()).map_err(err)?;
    let rep = df.column("repetition").and_then(|c| c.u32().cloned()).map_err(err)?;
    let iter = df.column("iteration").and_then(|c| c.u32().cloned()).map_err(err)?;
    let secs = df.column("seconds").and_then(|c| c.f64().cloned()).map_err(err)?;
    Ok((0..df.height())
        .filter_map(|i| {
            Some(Record {
                rank: rank.get(i)?,
                figure: figure.get(i)?.to_string(),
                size_bytes: size.get(i)?,
                repetition: rep.get(i)?,
                iteration: iter.get(i)?,
                seconds: secs.get(i)?,
            })
        })
        .collect())
}

/// The samples of every comparable figure of `m`, from its records.
pub fn figure_samples(m: &Manifest, recs: &[Record]) -> FigureSamples {
    let mut out: FigureSamples = m.summary.iter().flat_map(comparable).map(|f| (f.name, f.samples.read(recs))).collect();
    out.retain(|_, v| !v.is_empty());
    out
}

/// The samples of `m` in `dir`, or why there are none.
pub fn load(m: &Manifest, dir: &Path) -> Result<FigureSamples, String> {
    read_records(m, dir).map(|recs| figure_samples(m, &recs))
}
