//! Why a layout cannot be advised, as typed reasons: the shape does not split that way, the
//! groups do not tile the machine's domains, the weights and cache do not fit, a tensor group
//! past the KV heads buys nothing a group capped at them lacks, or a tensor group crosses a
//! slow boundary while a group inside the faster domain would do.

use super::layouts::Layout;
use super::predict::Prediction;
use super::request::{Machine, Objective};
use crate::costmodel::link::Link;
use crate::costmodel::shape::ModelShape;
use serde::Serialize;

/// Why a layout is rejected.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rejection {
    /// The query heads do not split over the tensor group.
    HeadsNotDivisible {
        /// Query heads.
        heads: u64,
        /// Tensor degree.
        tensor: u32,
    },
    /// The KV heads neither split over nor replicate evenly onto the tensor group.
    KvHeadsNotDivisible {
        /// KV heads.
        kv_heads: u64,
        /// Tensor degree.
        tensor: u32,
    },
    /// The feed-forward width does not split over the tensor group.
    WidthNotDivisible {
        /// Feed-forward width.
        intermediate: u64,
        /// Tensor degree.
        tensor: u32,
    },
    /// A tensor group beyond the KV heads copies the cache instead of splitting it, while a
    /// layout whose tensor group stops at the KV heads fits and is predicted no worse.
    KvHeadsDuplicated {
        /// KV heads.
        kv_heads: u64,
        /// Tensor degree.
        tensor: u32,
        /// KV cache bytes on its most loaded device.
        kv_bytes_per_device: u64,
        /// Its collectives per decode step (seconds).
        step_comm_s: f64,
        /// The layout with the tensor group capped at the KV heads that is predicted best.
        instead: String,
        /// That layout's KV cache bytes per device.
        instead_kv_bytes_per_device: u64,
        /// That layout's collectives per decode step (seconds).
        instead_step_comm_s: f64,
        /// This layout's cost under the objective over that layout's (1 or more).
        costlier_by: f64,
    },
    /// More stages than layers.
    TooManyStages {
        /// Layers.
        layers: u64,
        /// Stages.
        pipeline: u32,
    },
    /// The experts do not split over the expert group.
    ExpertsNotDivisible {
        /// Experts per layer.
        experts: u32,
        /// Expert degree.
        expert: u32,
    },
    /// A group straddles a domain unevenly (neither divides the other).
    Misaligned {
        /// Devices in the group.
        group: u32,
        /// Devices in the domain.
        domain: u32,
    },
    /// Weights plus the cache of every sequence at the end of its answer exceed a device.
    DoesNotFit {
        /// Weight bytes on the most loaded device.
        weights_bytes: u64,
        /// Cache bytes on it.
        kv_bytes: u64,
        /// The device's memory.
        memory_bytes: u64,
    },
    /// A tensor group crosses a slower link while a smaller group inside the faster domain fits.
    TensorAcrossSlowBoundary {
        /// Tensor degree.
        tensor: u32,
        /// The slow link it crosses.
        link: String,
        /// True when that link joins nodes.
        between_nodes: bool,
        /// Devices of the faster domain holding the tensor group of the layout it offers.
        inside: u32,
        /// That domain's link.
        inside_link: String,
        /// The layout that fits with its tensor group inside.
        instead: String,
        /// That layout's tensor degree (1: it has no tensor group, and pays no all-reduce).
        instead_tensor: u32,
        /// This layout's cost under the objective over that layout's: below 1 where the
        /// prediction favours the refused layout (the rule refuses it, not the prediction).
        cost_ratio: f64,
    },
}

/// Why `layout` cannot split `shape` over `machine`'s domains, before anything is predicted.
pub fn structural(layout: &Layout, shape: &ModelShape, machine: &Machine) -> Option<Rejection> {
    let t = layout.tensor;
    let t64 = t as u64;
    if t > 1 {
        if !shape.heads.is_multiple_of(t64) {
            return Some(Rejection::HeadsNotDivisible { heads: shape.heads, tensor: t });
        }
        if !shape.kv_heads.is_multiple_of(t64) && !t64.is_multiple_of(shape.kv_heads) {
            return Some(Rejection::KvHeadsNotDivisible { kv_heads: shape.kv_heads, tensor: t });
        }
        if !shape.intermediate.is_multiple_of(t64) {
            return Some(Rejection::WidthNotDivisible { intermediate: shape.intermediate, tensor: t });
        }
    }
    if layout.pipeline as u64 > shape.layers {
        return Some(Rejection::TooManyStages { layers: shape.layers, pipeline: layout.pipeline });
    }
    if let Some(e) = shape.experts.filter(|e| layout.expert > 1 && !e.count.is_multiple_of(layout.expert)) {
        return Some(Rejection::ExpertsNotDivisible { experts: e.count, expert: layout.expert });
    }
    misaligned(layout, machine)
}

fn misaligned(layout: &Layout, machine: &Machine) -> Option<Rejection> {
    let groups = [layout.tensor.max(layout.expert), layout.devices_per_replica()];
    groups.iter().find_map(|&g| {
        machine
            .domains
            .iter()
            .find(|d| !d.size.is_multiple_of(g) && !g.is_multiple_of(d.size))
            .map(|d| Rejection::Misaligned { group: g, domain: d.size })
    })
}

/// The memory rejection of a prediction that does not fit.
pub fn fit(prediction: &Prediction, machine: &Machine) -> Option<Rejection> {
    (!prediction.fits).then_some(Rejection::DoesNotFit {
        weights_bytes: prediction.weights_bytes_per_device,
        kv_bytes: prediction.kv_bytes_per_device,
        memory_bytes: machine.device.memory_bytes,
    })
}

/// True when `layout`'s tensor group is larger than the model's KV heads (each device then
/// holds whole copies of its heads' cache).
pub fn past_kv_heads(layout: &Layout, shape: &ModelShape) -> bool {
    u64::from(layout.tensor) > shape.kv_heads
}

/// The rejection of a layout whose tensor group is past the KV heads (each device holds whole
/// copies of its heads' cache), when a layout of `advised` (sound, fitting, not refused for a
/// slow boundary) with its tensor group capped at the KV heads and the rest of the group as
/// more stages or replicas costs no more under `objective`. Where every such layout costs more
/// (or none is advised), the duplicated cache is the price of the gain and the layout is ranked.
pub fn kv_duplicated(
    layout: &Layout,
    predicted: &Prediction,
    shape: &ModelShape,
    advised: &[(Layout, Prediction)],
    objective: Objective,
) -> Option<Rejection> {
    if !past_kv_heads(layout, shape) {
        return None;
    }
    let capped = |l: &Layout| {
        u64::from(l.tensor) == shape.kv_heads && l.expert == layout.expert && l.pipeline >= layout.pipeline && l.data >= layout.data
    };
    let (instead, p) =
        advised.iter().filter(|(l, _)| capped(l)).min_by(|(_, a), (_, b)| a.cost(objective).total_cmp(&b.cost(objective)))?;
    let costlier_by = predicted.cost(objective) / p.cost(objective);
    (costlier_by >= 1.0).then(|| Rejection::KvHeadsDuplicated {
        kv_heads: shape.kv_heads,
        tensor: layout.tensor,
        kv_bytes_per_device: predicted.kv_bytes_per_device,
        step_comm_s: predicted.step_comm_s,
        instead: instead.label(),
        instead_kv_bytes_per_device: p.kv_bytes_per_device,
        instead_step_comm_s: p.step_comm_s,
        costlier_by,
    })
}

/// Whether link `a` is slower than `b` whatever the message: no lower latency and no higher
/// bandwidth, and worse in one. Links that trade one for the other are not ordered (which pays
/// less depends on the message size): the predictions rank the layouts that use them.
pub fn slower(a: Link, b: Link) -> bool {
    a.alpha_s >= b.alpha_s && a.beta_bps <= b.beta_bps && (a.alpha_s > b.alpha_s || a.beta_bps < b.beta_bps)
}

/// The rejection of a tensor group that crosses a slower link ([`slower`]), when one of
/// `fitting` (layouts that fit, split soundly and are not refused themselves for crossing a
/// slower link, with their predictions) keeps its tensor group inside the faster domain; it
/// says how `predicted` compares with that layout's under `objective`.
/// A group pays the slowest link of the domains its ring passes ([`Machine::group_link`]); it
/// crosses a slower link when a group of the largest domain inside its own whose ring is faster
/// exists, and it is named by the slowest-bandwidth link it pays (SYS inside two nodes joined by
/// a faster network is still SYS).
pub fn slow_boundary(
    layout: &Layout,
    predicted: &Prediction,
    machine: &Machine,
    fitting: &[(Layout, &Prediction)],
    objective: Objective,
) -> Option<Rejection> {
    let outer = machine.domain_of_group(layout.tensor)?;
    let paid = machine.group_link(layout.tensor);
    let inner = (0..outer).rev().find(|&j| slower(paid, machine.group_link(machine.domains[j].size)))?;
    // Named by a link it pays that is itself slower than the faster group's ring (the smallest
    // bandwidth first, then the largest latency), never one that group pays too.
    let faster = machine.group_link(machine.domains[inner].size);
    let crossed = machine
        .paid_domains(layout.tensor)
        .into_iter()
        .map(|d| (d, machine.domains[d].link.link()))
        .filter(|(_, l)| l.alpha_s > faster.alpha_s || l.beta_bps < faster.beta_bps)
        .min_by(|(_, a), (_, b)| a.beta_bps.total_cmp(&b.beta_bps).then(b.alpha_s.total_cmp(&a.alpha_s)))?
        .0;
    let (instead, instead_predicted) =
        fitting.iter().filter(|(l, _)| l.tensor <= machine.domains[inner].size && l.expert == 1).max_by_key(|(l, _)| (l.tensor, l.data))?;
    // Named by the domain holding the group it offers (a smaller one where the faster domain's
    // own groups are refused too).
    let held = machine.domain_of_group(instead.tensor).unwrap_or(inner);
    Some(Rejection::TensorAcrossSlowBoundary {
        tensor: layout.tensor,
        link: machine.domains[crossed].link.name.clone(),
        between_nodes: machine.between_nodes(crossed),
        inside: machine.domains[held].size,
        inside_link: machine.domains[held].link.name.clone(),
        instead: instead.label(),
        instead_tensor: instead.tensor,
        cost_ratio: predicted.cost(objective) / instead_predicted.cost(objective),
    })
}
