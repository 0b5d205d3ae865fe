//! Links as a store of manifests measured them, offered beside the catalogue's: a link
//! parlab's own collectives runs measured is `LINK-measured` (`nccl-measured`,
//! `mpi-shm-measured`), one another tool measured and `parlab import` read is `LINK-imported`
//! (`nccl-imported`). Each is the all-reduce fit of one run: α per ring step and β, which is
//! what a tensor split's all-reduces and a pipeline hop pay in the cost model.
//!
//! Of several runs over one link, the one with the fewest ranks (at least 2) is taken, the
//! newest of those, then the smallest run identity: the same store always gives the same link.

use super::catalogue::{LinkEntry, Provenance};
use super::link::LinkFit;
use crate::identity::RunId;
use crate::manifest::provenance::Imported;
use crate::manifest::{Manifest, Status};
use crate::spec::schema::{Kind, Op};
use crate::units::format_bytes;
use std::collections::BTreeMap;

/// The name suffix of a link parlab measured.
pub const MEASURED_SUFFIX: &str = "-measured";

/// The name suffix of a link another tool measured.
pub const IMPORTED_SUFFIX: &str = "-imported";

/// Whether `name` is the name of a link a store of manifests offers (`LINK-measured`,
/// `LINK-imported`); the catalogue keeps such names for them.
pub fn is_store_link_name(name: &str) -> bool {
    name.ends_with(MEASURED_SUFFIX) || name.ends_with(IMPORTED_SUFFIX)
}

/// One candidate fit: the manifest it came from and the fit.
struct Candidate<'a> {
    manifest: &'a Manifest,
    fit: &'a LinkFit,
}

impl<'a> Candidate<'a> {
    /// The order of preference: fewest ranks first, then newest, then the smallest run identity.
    fn key(&self) -> (u32, std::cmp::Reverse<&'a str>, &'a RunId) {
        (self.fit.world, std::cmp::Reverse(self.manifest.started_at.as_str()), &self.manifest.run_id)
    }
}

/// A fit a link can be built from: an all-reduce over at least 2 ranks with a positive latency
/// (as the catalogue asks of its links: the flip search scales a constant, and cannot scale 0)
/// and a positive bandwidth (a fit whose time was flat in size has none).
fn usable(f: &LinkFit) -> bool {
    f.op == Op::AllReduce && f.world >= 2 && f.alpha_per_step_s > 0.0 && f.is_physical()
}

/// The entry's name: the run's link with the suffix of who measured it.
fn entry_name(m: &Manifest) -> String {
    let suffix = if m.provenance.is_measured() { MEASURED_SUFFIX } else { IMPORTED_SUFFIX };
    format!("{}{suffix}", m.plan.link.name())
}

/// The store's ok collectives runs, each with its fits and the entry name it would give.
fn fitted_runs(manifests: &[Manifest]) -> impl Iterator<Item = (&Manifest, &[LinkFit], String)> {
    manifests.iter().filter(|m| m.kind == Kind::Collectives && m.status() == Status::Ok).filter_map(|m| {
        let c = m.summary().and_then(|s| s.collectives())?;
        Some((m, c.fits.as_slice(), entry_name(m)))
    })
}

/// Every link the store's ok collectives runs fitted an all-reduce over ([`usable`]), as catalogue entries named by [`entry_name`], in name order.
pub fn link_entries(manifests: &[Manifest]) -> Vec<LinkEntry> {
    let mut best: BTreeMap<String, Candidate> = BTreeMap::new();
    for (m, fits, name) in fitted_runs(manifests) {
        for fit in fits.iter().filter(|f| usable(f)) {
            let candidate = Candidate { manifest: m, fit };
            if best.get(&name).is_none_or(|held| candidate.key() < held.key()) {
                best.insert(name.clone(), candidate);
            }
        }
    }
    best.into_iter().map(|(name, c)| entry(name, &c)).collect()
}

/// Why an all-reduce fit over 2 ranks or more cannot make a link ([`usable`]); None when it can.
fn unusable_why(f: &LinkFit) -> Option<String> {
    if f.op != Op::AllReduce || f.world < 2 || usable(f) {
        return None;
    }
    Some(if f.alpha_per_step_s <= 0.0 {
        let sign = if f.alpha_per_step_s < 0.0 { "a negative" } else { "no" };
        format!(
            "its {}-rank all-reduce fit has {sign} latency (α per ring step {})",
            f.world,
            crate::units::format_seconds(f.alpha_per_step_s)
        )
    } else {
        format!("its {}-rank all-reduce fit has no bandwidth (its time is flat in size)", f.world)
    })
}

/// For each link the store's ok collectives runs fitted an all-reduce over but that
/// [`link_entries`] gives no entry, why each of its runs gave none (one line per run).
pub fn unusable_fits(manifests: &[Manifest], entries: &[LinkEntry]) -> Vec<String> {
    let mut out = Vec::new();
    for (m, fits, name) in fitted_runs(manifests) {
        if entries.iter().any(|e| e.name == name) {
            continue;
        }
        if let Some(why) = fits.iter().find_map(unusable_why) {
            out.push(format!("run {} ({}, over {}) gives no `{name}`: {why}", m.run_id.short(), m.experiment, m.plan.link.name()));
        }
    }
    out
}

/// The catalogue entry of one chosen fit, its provenance naming the run (and the tool, imported).
fn entry(name: String, c: &Candidate) -> LinkEntry {
    let (m, fit) = (c.manifest, c.fit);
    let link = m.plan.link.name().to_string();
    let note = |what: &str| {
        format!("{what} of the {}-rank all-reduce fit up to {}, {}", fit.world, format_bytes(fit.fit_max_bytes as f64), m.started_at)
    };
    let tool = m.provenance.imported().map(tool_of);
    let provenance = |what: &str| match &tool {
        None => Provenance::Measured { run: m.run_id.to_string(), note: Some(note(what)) },
        Some(tool) => Provenance::Reported {
            source: tool.clone(),
            run: Some(m.run_id.to_string()),
            note: Some(format!("{}; imported as run {}", note(what), m.run_id.short())),
        },
    };
    let by = tool.as_deref().unwrap_or("parlab");
    LinkEntry {
        description: format!("{link} as {by} measured it ({} ranks, run {})", fit.world, m.run_id.short()),
        name,
        latency_us: fit.alpha_per_step_s * 1e6,
        bandwidth_gbps: fit.beta_bps.unwrap_or(f64::INFINITY) / 1e9,
        latency_provenance: provenance("α per ring step"),
        bandwidth_provenance: provenance("β"),
    }
}

/// The tool and benchmark an imported run came from: `all_reduce_perf (nccl-tests 2.19.6)`.
fn tool_of(i: &Imported) -> String {
    match &i.version {
        Some(v) => format!("{} ({} {v})", i.benchmark, i.tool.name()),
        None => format!("{} ({})", i.benchmark, i.tool.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The fixture store's 2-rank mpi-shm collectives run.
    fn shm_two() -> Manifest {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/manifests/88732e52bba7e6caa7be6b3260d9edda9b9796cedde2083e30d2cce3d61a26f2.json");
        crate::manifest::read_one(&path).unwrap()
    }

    /// The fits of a collectives manifest, to change.
    fn fits_mut(m: &mut Manifest) -> &mut Vec<LinkFit> {
        match m.summary_mut() {
            Some(crate::manifest::summary::Summary::Collectives(c)) => &mut c.fits,
            _ => panic!("not a collectives manifest"),
        }
    }

    /// `m` with its all-reduce fit's bandwidth and world set, started at `at`.
    fn variant(m: &Manifest, beta_bps: f64, world: u32, at: &str) -> Manifest {
        let mut v = m.clone();
        v.started_at = at.into();
        for f in fits_mut(&mut v).iter_mut() {
            (f.beta_bps, f.world) = (Some(beta_bps), world);
        }
        v
    }

    #[test]
    fn of_several_runs_the_fewest_ranks_then_the_newest_give_the_link() {
        let base = shm_two();
        let older = variant(&base, 1e9, 2, "2026-01-01T00:00:00Z");
        let newer = variant(&base, 2e9, 2, "2026-02-01T00:00:00Z");
        let wider_newest = variant(&base, 3e9, 4, "2026-03-01T00:00:00Z");
        for order in [[&older, &newer, &wider_newest], [&wider_newest, &newer, &older]] {
            let store: Vec<Manifest> = order.into_iter().cloned().collect();
            let links = link_entries(&store);
            assert_eq!(links.len(), 1);
            assert_eq!((links[0].name.as_str(), links[0].bandwidth_gbps), ("mpi-shm-measured", 2.0));
            assert!(links[0].bandwidth_provenance.describe().contains("2026-02-01"));
        }
    }

    #[test]
    fn a_fit_flat_in_size_or_with_a_negative_latency_gives_no_link() {
        let mut flat = shm_two();
        fits_mut(&mut flat).iter_mut().for_each(|f| f.beta_bps = None);
        let mut negative = shm_two();
        fits_mut(&mut negative).iter_mut().for_each(|f| f.alpha_per_step_s = -1e-6);
        assert!(link_entries(&[flat, negative]).is_empty());
    }
}
