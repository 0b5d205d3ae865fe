//! Regimes: with tonight's fit, the crossover S* = N·α·β lies above a decode step's
//! all-reduce (d·s: latency regime) and below a prefill's (T·d·s: bandwidth regime).

use super::{Finding, Inconclusive, Inputs, TOLERANCE};
use crate::costmodel::link::{crossover_bytes, LinkFit};
use crate::manifest::{Manifest, Status};
use crate::model::ModelConfig;
use crate::spec::link::{Backend, Link};
use crate::spec::plan::Workload;
use crate::spec::schema::Kind;
use crate::spec::schema::{Dtype, Prompt};
use crate::units::format_bytes;
use std::collections::BTreeMap;

/// The collective sizes of one decode configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes {
    /// Model, dtype and prompt length in words.
    pub label: String,
    /// A decode step's all-reduce: d·s bytes.
    pub decode_bytes: f64,
    /// A prefill's all-reduce: T·d·s bytes.
    pub prefill_bytes: f64,
    /// Runs with this configuration (12 hex).
    pub runs: Vec<String>,
    /// The runs' element type.
    pub dtype: Dtype,
}

impl Sizes {
    /// (d·s, T·d·s) as `link` carries them: in the dtype over NCCL, as float32 over an MPI
    /// link (a rank stages its tensors through host memory as float32).
    pub fn over(&self, link: &Link) -> (f64, f64) {
        let staged = match link.backend() {
            Backend::Nccl => self.dtype,
            _ => Dtype::Float32,
        };
        let scale = staged.bytes() as f64 / self.dtype.bytes() as f64;
        (self.decode_bytes * scale, self.prefill_bytes * scale)
    }
}

/// The distinct decode configurations of the ok decode runs (model config read once per folder).
pub fn decode_sizes(list: &[Manifest]) -> Vec<Sizes> {
    let mut hidden: BTreeMap<std::path::PathBuf, Option<u64>> = BTreeMap::new();
    let mut out: BTreeMap<String, Sizes> = BTreeMap::new();
    for m in list.iter().filter(|m| m.kind == Kind::Decode && m.status() == Status::Ok) {
        let (Some(model), Workload::Decode { prompt, dtype, .. }) = (&m.plan.model, &m.plan.workload) else {
            continue;
        };
        let h = *hidden.entry(model.dir.clone()).or_insert_with(|| ModelConfig::read(&model.dir).ok().map(|c| u64::from(c.hidden)));
        let Some(h) = h else { continue };
        let t = match prompt {
            Prompt::Tokens(t) => t.len() as u64,
            Prompt::Seeded { length, .. } => u64::from(*length),
        };
        let ds = (h * dtype.bytes()) as f64;
        let label = format!("{} {}, {t}-token prompt", model.name, dtype.name());
        let e = out.entry(label.clone()).or_insert_with(|| Sizes {
            label,
            decode_bytes: ds,
            prefill_bytes: ds * t as f64,
            runs: Vec::new(),
            dtype: *dtype,
        });
        e.runs.push(m.run_id.short().to_string());
    }
    out.into_values().collect()
}

/// One finding per link with a 2-rank all-reduce fit.
pub fn findings(inp: &Inputs) -> Vec<Finding> {
    let sizes = decode_sizes(inp.list);
    let fits = inp.allreduce_fits();
    if fits.is_empty() {
        return vec![claim("regimes", "any link")
            .inconclusive(Inconclusive::MissingRuns, "missing runs: no 2-rank all-reduce fit to give α and β".into())];
    }
    fits.into_iter().map(|(link, fit, run)| link_finding(&link, fit, &run, &sizes)).collect()
}

fn claim(id: &str, link: &str) -> Finding {
    Finding::new(
        id,
        &format!("Over {link}, decode collectives live in the latency regime and prefill's in the bandwidth regime: d·s < S* = N·α·β < T·d·s."),
        &["collectives.fits.alpha_per_step_s", "collectives.fits.beta_Bps", "model config hidden size", "prompt length", "dtype"],
        &format!("S* = N·α·β with N = 2 from the 2-rank all-reduce fit; HOLDS when every decode configuration's d·s is below S* and its prefill's T·d·s above; FAILS when one lies on the wrong side by more than {} of S* (the fit's own uncertainty), INCONCLUSIVE (noise) when the only misses are within it; each configuration's T* = S*/(d·s), the prompt length from which its prefill is in the bandwidth regime, in the notes", crate::report::fmt::whole_percent(TOLERANCE)),
    )
}

fn link_finding(carrier: &Link, fit: &LinkFit, run: &str, sizes: &[Sizes]) -> Finding {
    let link = carrier.name();
    let mut f = claim(&format!("regimes-{link}"), link);
    let Some(beta) = fit.beta_bps else {
        return f.inconclusive(
            Inconclusive::Noise,
            format!("noise: the 2-rank fit over {link} found no bandwidth term (time flat in size), so S* is undefined"),
        );
    };
    let s_star = crossover_bytes(fit.link(), 2);
    f.number("α", fit.alpha_per_step_s, "s", &[run]);
    f.number("β", beta, "B/s", &[run]);
    f.number("S* = N·α·β (N = 2)", s_star, "B", &[run]);
    if sizes.is_empty() {
        return f.inconclusive(
            Inconclusive::MissingRuns,
            "missing runs: no decode run (with a readable model config) to give d·s and T·d·s".into(),
        );
    }
    let (mut wrong, mut near) = (Vec::new(), Vec::new());
    let near_s_star = |bytes: f64| (bytes / s_star - 1.0).abs() <= TOLERANCE;
    for s in sizes {
        let runs: Vec<&str> = s.runs.iter().map(String::as_str).collect();
        let (decode_bytes, prefill_bytes) = s.over(carrier);
        f.number(&format!("decode all-reduce d·s ({})", s.label), decode_bytes, "B", &runs);
        f.number(&format!("prefill all-reduce T·d·s ({})", s.label), prefill_bytes, "B", &runs);
        let (d_ok, p_ok) = (decode_bytes < s_star, prefill_bytes > s_star);
        f.notes.push(format!(
            "{}: decode {} is {} S* {} ({} regime); prefill {} is {} it ({} regime); T* = {} tokens",
            s.label,
            format_bytes(decode_bytes),
            if d_ok { "below" } else { "not below" },
            format_bytes(s_star),
            if d_ok { "latency" } else { "bandwidth" },
            format_bytes(prefill_bytes),
            if p_ok { "above" } else { "not above" },
            if p_ok { "bandwidth" } else { "latency" },
            // Three figures: a T* below one (every prompt's prefill in the bandwidth regime)
            // is not rounded to 0.
            crate::units::sig3(s_star / decode_bytes),
        ));
        let misses = [(!d_ok, "decode d·s", decode_bytes, ">="), (!p_ok, "prefill T·d·s", prefill_bytes, "<=")];
        for (_, what, bytes, side) in misses.into_iter().filter(|m| m.0) {
            let miss = format!("{}: {what} {} {side} S*", s.label, format_bytes(bytes));
            if near_s_star(bytes) {
                near.push(miss);
            } else {
                wrong.push(miss);
            }
        }
    }
    match (wrong.is_empty(), near.is_empty()) {
        (true, true) => f.decide(true, format!("S* = {} lies between every decode all-reduce and its prefill's", format_bytes(s_star))),
        (false, _) => f.decide(false, format!("S* = {}: {}", format_bytes(s_star), wrong.join("; "))),
        (true, false) => f.inconclusive(
            Inconclusive::Noise,
            format!("noise: S* = {}: {}, within {} of S*", format_bytes(s_star), near.join("; "), crate::report::fmt::tolerance(TOLERANCE)),
        ),
    }
}
