//! `parlab advise`: which split to benchmark for a model, a workload and a machine.
//!
//! The data flow: `request` (model, workload, machine, checked) -> `layouts` (every
//! data × tensor × pipeline cut, and expert cuts of a mixture) -> `reject` (typed reasons)
//! -> `predict` (the cost model) -> `rank` (by the objective, with flip points) -> `render`
//! (markdown or JSON). Everything is arithmetic (MODELLED), and says so.

pub mod layouts;
pub mod predict;
pub mod rank;
pub mod record;
pub mod reject;
pub mod render;
pub mod request;

use crate::costmodel::catalogue::Catalogue;
use crate::costmodel::measured_links::{is_store_link_name, link_entries, unusable_fits};
use crate::costmodel::shape::ModelShape;
use layouts::Layout;
use predict::{predict, Prediction};
use rank::Ranked;
use reject::Rejection;
use request::{Machine, Objective, Request};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The JSON schema name `--json` prints.
pub const SCHEMA: &str = "parlab.advice/1";

/// How many of the leaders get a flip point.
pub const FLIPS_FOR_TOP: usize = 3;

/// Errors of the advice's input; each is the user's to fix (exit 2).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AdviseError {
    /// The model could not be read or shaped.
    #[error("model: {0}")]
    Model(String),
    /// The device is not in the catalogue.
    #[error("--device {name}: not in models/devices.yaml (known: {})", known.join(", "))]
    UnknownDevice {
        /// The name given.
        name: String,
        /// The catalogue's devices.
        known: Vec<String>,
    },
    /// A link is neither in the catalogue nor measured by the store `--links-from` read.
    #[error("--domain link `{name}`: {}", unknown_link_words(name, known, measured, links_from))]
    UnknownLink {
        /// The domain's place in the list, from 0.
        index: usize,
        /// The name given.
        name: String,
        /// The links of models/links.yaml.
        known: Vec<String>,
        /// The links `--links-from` read from manifests (none without it).
        measured: Vec<String>,
        /// The folders `--links-from` named (none without it).
        links_from: Vec<std::path::PathBuf>,
    },
    /// The machine's domains do not add up.
    #[error("topology: {0}")]
    Topology(request::Topology),
    /// The workload's numbers are unusable.
    #[error("workload: {0}")]
    Workload(String),
    /// A request (prompt plus answer) longer than advice is given for, or than the model holds.
    #[error("workload: --prompt {prompt} --new-tokens {new_tokens}: {why}")]
    Context {
        /// Prompt tokens.
        prompt: u64,
        /// Answer tokens.
        new_tokens: u64,
        /// Why it is too long.
        why: String,
    },
    /// The catalogue could not be read.
    #[error("{0}")]
    Catalogue(String),
    /// `--links-from` is not a folder of manifests.
    #[error("--links-from {}: not a folder (give a store of manifests, e.g. manifests/)", .0.display())]
    NotAStore(std::path::PathBuf),
}

impl AdviseError {
    /// The problem as a `kind: advise` spec states it: the key it is at (`model`,
    /// `machine.domains[1]`, `prompt_tokens`) and a message naming the spec's keys where
    /// `Display` names `parlab advise`'s flags. An empty key for a problem of the whole spec.
    pub fn in_spec(&self) -> (String, String) {
        match self {
            AdviseError::Model(why) => ("model".into(), why.clone()),
            AdviseError::UnknownDevice { name, known } => {
                ("machine.device".into(), format!("`{name}`: not in models/devices.yaml (known: {})", known.join(", ")))
            }
            AdviseError::UnknownLink { index, name, known, .. } => {
                (format!("machine.domains[{index}]"), format!("link `{name}`: not in models/links.yaml (known: {})", known.join(", ")))
            }
            AdviseError::Topology(t) => t.in_spec(),
            AdviseError::Context { prompt, new_tokens, why } => {
                ("prompt_tokens".into(), format!("prompt_tokens {prompt} and new_tokens {new_tokens}: {why}"))
            }
            AdviseError::Catalogue(why) => ("machine".into(), why.clone()),
            AdviseError::Workload(_) | AdviseError::NotAStore(_) => (String::new(), self.to_string()),
        }
    }

    /// `in_spec` as one line: `key: message` (the message alone for the whole spec).
    pub fn in_spec_line(&self) -> String {
        match self.in_spec() {
            (key, message) if key.is_empty() => message,
            (key, message) => format!("{key}: {message}"),
        }
    }
}

/// Why a `--domain` link is not known: the catalogue's links, those `--links-from` measured
/// (or that the folder it named measured none), and for a measured link's name what would
/// offer it.
fn unknown_link_words(name: &str, known: &[String], measured: &[String], links_from: &[std::path::PathBuf]) -> String {
    let catalogue = format!("models/links.yaml (known: {})", known.join(", "));
    let folders = || links_from.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let (place, store) = match (measured.is_empty(), links_from.is_empty()) {
        (true, true) => (format!("not in {catalogue}"), "--links-from DIR holding"),
        (true, false) => (format!("not in {catalogue}, and --links-from {} measured no usable link", folders()), "that folder to hold"),
        (false, _) => (format!("neither in {catalogue} nor measured by --links-from ({})", measured.join(", ")), "that folder to hold"),
    };
    match is_store_link_name(name) {
        true => format!("{place}; a measured link needs {store} an ok collectives run over it (an all-reduce at 2 ranks or more)"),
        false => place,
    }
}

/// The answer to a `kind: advise` run's question, as its summary; an error where the
/// question cannot be asked any more (the catalogue or the model changed since it was planned).
pub fn answer_plan(plan: &crate::spec::plan::RunPlan) -> Result<crate::manifest::summary::Summary, AdviseError> {
    let crate::spec::plan::Workload::Advise { model, params } = &plan.workload else {
        return Err(AdviseError::Workload(format!("{} is not a kind: advise run", plan.label())));
    };
    let catalogue = Catalogue::load_default().map_err(|e| AdviseError::Catalogue(e.to_string()))?;
    let mut request = request::Asked::of_spec(model, params).resolve(&catalogue)?;
    // The register names a folder by its path from the spec, not where the checkout lies.
    request.model = request.model.shown_for(&plan.spec_path);
    let advice = advise(request);
    Ok(crate::manifest::summary::Summary::Advice(record::advised(&advice, &plan.experiment)))
}

/// Adds to `catalogue` every link the manifests in `store` measured or imported
/// (`costmodel::measured_links`). Unreadable manifests are skipped with a warning, as
/// `parlab report` skips them.
pub fn add_store_links(catalogue: &mut Catalogue, store: &Path) -> Result<(), AdviseError> {
    if !store.is_dir() {
        return Err(AdviseError::NotAStore(store.to_path_buf()));
    }
    let (manifests, skipped) = crate::manifest::read_all(store);
    for s in &skipped {
        crate::say!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let entries = link_entries(&manifests);
    let unusable = unusable_fits(&manifests, &entries);
    for why in &unusable {
        crate::say!("warning: --links-from {}: {why}", store.display());
    }
    if entries.is_empty() && unusable.is_empty() {
        crate::say!(
            "warning: --links-from {}: no ok collectives run with an all-reduce fit of 2 ranks or more; no measured link added",
            store.display()
        );
    }
    // The catalogue keeps the names of measured links for them (`Catalogue::load` refuses a
    // `-measured` or `-imported` link), so none is taken.
    catalogue.links.extend(entries);
    catalogue.links_from.push(store.to_path_buf());
    Ok(())
}

/// A layout the advice refuses, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rejected {
    /// The layout.
    pub layout: Layout,
    /// Its name.
    pub label: String,
    /// Why.
    pub reason: Rejection,
    /// Its prediction where one could be made (a layout that does not fit has none).
    pub predicted: Option<Prediction>,
}

/// The advice: ranked layouts, the baseline to measure, and the refused ones.
pub struct Advice {
    /// What was asked.
    pub request: Request,
    /// Layouts that can run, best first.
    pub ranked: Vec<Ranked>,
    /// Whole replicas with nothing split, when they fit: what to measure first.
    pub baseline: Option<Ranked>,
    /// Layouts refused, with reasons.
    pub rejected: Vec<Rejected>,
}

/// The layouts of `sound` refused for a tensor group across a slower link, with the refusal:
/// decided from the smallest tensor group up, so the layout a refusal offers instead (a smaller
/// group, splitting the cache: never one past the KV heads) is never refused itself.
fn slow_boundaries(sound: &[(Layout, Prediction)], shape: &ModelShape, m: &Machine, objective: Objective) -> HashMap<Layout, Rejection> {
    let mut by_group: Vec<&(Layout, Prediction)> = sound.iter().collect();
    by_group.sort_by_key(|(l, _)| l.tensor);
    let mut refused = HashMap::new();
    let mut offered: Vec<(Layout, &Prediction)> = Vec::new();
    for (layout, p) in by_group {
        match reject::slow_boundary(layout, p, m, &offered, objective) {
            Some(reason) => {
                refused.insert(*layout, reason);
            }
            None if !reject::past_kv_heads(layout, shape) => offered.push((*layout, p)),
            None => {}
        }
    }
    refused
}

/// Enumerates, rejects, predicts and ranks the layouts of `request`.
pub fn advise(request: Request) -> Advice {
    let (shape, w, m) = (&request.model.shape, &request.workload, &request.machine);
    let mut rejected = Vec::new();
    let mut sound = Vec::new();
    for layout in layouts::enumerate(m.devices(), shape) {
        let reject = |reason, predicted| Rejected { layout, label: layout.label(), reason, predicted };
        if let Some(reason) = reject::structural(&layout, shape, m) {
            rejected.push(reject(reason, None));
            continue;
        }
        let p = predict(&layout, shape, w, m);
        match reject::fit(&p, m) {
            Some(reason) => rejected.push(reject(reason, Some(p))),
            None => sound.push((layout, p)),
        }
    }
    let mut boundaries = slow_boundaries(&sound, shape, m, w.objective);
    let mut kept = Vec::new();
    for (layout, p) in sound {
        match boundaries.remove(&layout) {
            Some(reason) => rejected.push(Rejected { layout, label: layout.label(), reason, predicted: Some(p) }),
            None => kept.push((layout, p)),
        }
    }
    // Past the KV heads, against the layouts that are ranked: the one it names instead is advised.
    let mut ranked = Vec::new();
    for (layout, p) in &kept {
        match reject::kv_duplicated(layout, p, shape, &kept, w.objective) {
            Some(reason) => rejected.push(Rejected { layout: *layout, label: layout.label(), reason, predicted: Some(p.clone()) }),
            None => ranked.push(Ranked { layout: *layout, label: layout.label(), predicted: p.clone(), flip: None }),
        }
    }
    let mut ranked = rank::rank(ranked, w.objective);
    rank::add_flips(&mut ranked, FLIPS_FOR_TOP, shape, w, m);
    let baseline = ranked.iter().find(|r| r.layout.is_replicas_only()).cloned();
    Advice { request, ranked, baseline, rejected }
}
