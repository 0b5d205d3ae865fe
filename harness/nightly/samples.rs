//! The raw samples behind each comparable figure, read back from a run's `samples.parquet`
//! and reduced exactly as `collect` reduced them for the summary's medians.

use crate::collect::frames::{per_iteration, read_parquet};
use crate::collect::membw::bandwidths;
use crate::manifest::Manifest;
use crate::rank::records::Record;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Samples per figure name (the names [`super::figures`] gives).
pub type FigureSamples = BTreeMap<String, Vec<f64>>;

/// The records of `m`'s samples file in `dir`, or why they cannot be read.
pub fn read_records(m: &Manifest, dir: &Path) -> Result<Vec<Record>, String> {
    let rel = m.results.get("samples").and_then(Value::as_str).ok_or("the manifest names no samples file")?;
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
    let mut out = FigureSamples::new();
    let s = &m.summary;
    for c in s.get("collectives").and_then(Value::as_array).into_iter().flatten() {
        let (Some(op), Some(size)) = (c["op"].as_str(), c["size_bytes"].as_u64()) else {
            continue;
        };
        out.insert(format!("{op} {size} B median"), per_iteration(recs, op, size).0);
    }
    if s.get("membw").is_some() {
        out.insert("aggregate bandwidth median".into(), bandwidths(recs, "membw").iter().map(|b| b.1).collect());
    }
    if let Some(d) = s.get("decode") {
        out.insert("decode step median".into(), per_iteration(recs, "decode_step", 0).0);
        out.insert("tokens per second median".into(), tokens_per_s(d, recs));
    }
    for d in s.get("dispatch").and_then(Value::as_array).into_iter().flatten() {
        let (Some(tokens), Some(bytes)) = (d["tokens"].as_u64(), d["bytes"].as_u64()) else {
            continue;
        };
        out.insert(format!("dispatch {tokens} tokens median"), per_iteration(recs, "dispatch", bytes).0);
    }
    out.retain(|_, v| !v.is_empty());
    out
}

/// Tokens per second per repetition, as `collect::decode` computes it: all tokens of a
/// repetition over its slowest rank's wall time.
fn tokens_per_s(decode: &Value, recs: &[Record]) -> Vec<f64> {
    let u = |k: &str| decode.get(k).and_then(Value::as_u64).unwrap_or(0) as f64;
    let replicas = if decode["strategy"] == "data" { u("world") } else { 1.0 };
    let tokens = replicas * u("sequences") * u("new_tokens");
    let mut wall: BTreeMap<u32, f64> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.figure == "run") {
        let w = wall.entry(r.repetition).or_insert(0.0);
        *w = w.max(r.seconds);
    }
    if tokens <= 0.0 {
        return Vec::new();
    }
    wall.into_values().filter(|w| *w > 0.0).map(|w| tokens / w).collect()
}

/// The samples of `m` in `dir`, or why there are none.
pub fn load(m: &Manifest, dir: &Path) -> Result<FigureSamples, String> {
    read_records(m, dir).map(|recs| figure_samples(m, &recs))
}
