//! Ranking the layouts that survive by the objective, and for the leaders the constant of
//! the machine at which the next layout would win (the flip point).

use super::layouts::Layout;
use super::predict::{predict, Prediction};
use super::request::{Machine, Objective, Workload};
use crate::costmodel::shape::ModelShape;
use serde::Serialize;

/// A constant of the machine the prediction depends on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Constant {
    /// A link's latency per message (seconds).
    LinkLatency {
        /// The link.
        link: String,
    },
    /// A link's bandwidth (bytes per second).
    LinkBandwidth {
        /// The link.
        link: String,
    },
    /// The device's memory bandwidth (bytes per second).
    DeviceBandwidth,
    /// The device's peak arithmetic (FLOP/s).
    DeviceCompute,
}

/// Where a ranking flips: `constant` at `at` (now `now`) makes `next` at least as good as this layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    /// The constant.
    pub constant: Constant,
    /// Its value now.
    pub now: f64,
    /// The value at which the next layout catches up.
    pub at: f64,
    /// The layout that would win.
    pub next: String,
}

/// A layout the advice ranks, with its prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// The layout.
    pub layout: Layout,
    /// Its name (`TP=2 x DP=2`).
    pub label: String,
    /// What the cost model predicts.
    pub predicted: Prediction,
    /// For the top choices: the nearest constant at which a layout ranked below wins
    /// (inner None: none within a factor of 10^4); None for the others.
    pub flip: Option<Option<Flip>>,
}

/// Sorts by the objective's cost; ties go to more replicas, then the smaller split.
pub fn rank(mut ranked: Vec<Ranked>, objective: Objective) -> Vec<Ranked> {
    ranked.sort_by(|a, b| {
        let key = |r: &Ranked| (r.predicted.cost(objective), std::cmp::Reverse(r.layout.data), r.layout.tensor, r.layout.pipeline);
        let (ka, kb) = (key(a), key(b));
        ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1)).then(ka.2.cmp(&kb.2)).then(ka.3.cmp(&kb.3))
    });
    ranked
}

fn constants(machine: &Machine, dtype: crate::spec::schema::Dtype) -> Vec<(Constant, f64)> {
    let mut out: Vec<(Constant, f64)> = Vec::new();
    for d in &machine.domains {
        let link = d.link.link();
        let name = d.link.name.clone();
        if !out.iter().any(|(c, _)| matches!(c, Constant::LinkLatency { link } if *link == name)) {
            out.push((Constant::LinkLatency { link: name.clone() }, link.alpha_s));
            out.push((Constant::LinkBandwidth { link: name }, link.beta_bps));
        }
    }
    out.push((Constant::DeviceBandwidth, machine.device.bandwidth_bps()));
    if let Some(peak) = machine.device.peak_flops(dtype) {
        out.push((Constant::DeviceCompute, peak));
    }
    out
}

/// `machine` with `constant` set to `value`.
pub fn with_constant(machine: &Machine, constant: &Constant, value: f64, dtype: crate::spec::schema::Dtype) -> Machine {
    let mut m = machine.clone();
    match constant {
        Constant::LinkLatency { link } => {
            m.domains.iter_mut().filter(|d| &d.link.name == link).for_each(|d| d.link.latency_us = value * 1e6)
        }
        Constant::LinkBandwidth { link } => {
            m.domains.iter_mut().filter(|d| &d.link.name == link).for_each(|d| d.link.bandwidth_gbps = value / 1e9)
        }
        Constant::DeviceBandwidth => m.device.bandwidth_gbps = value / 1e9,
        Constant::DeviceCompute => m.device.set_peak_flops(dtype, value),
    }
    m
}

/// Steps of the log-spaced scan each way, over a factor of 10^4.
const SCAN_STEPS: usize = 160;

/// The value of `constant` nearest to `now` (within a factor of 10^4) at which `second` costs no more than `first`.
fn flip_point(first: &Layout, second: &Layout, inputs: (&ModelShape, &Workload, &Machine), constant: &Constant, now: f64) -> Option<f64> {
    let (shape, w, machine) = inputs;
    let gap = |x: f64| {
        let m = with_constant(machine, constant, x, w.dtype);
        predict(first, shape, w, &m).cost(w.objective) - predict(second, shape, w, &m).cost(w.objective)
    };
    let ratio = 1e4f64.powf(1.0 / SCAN_STEPS as f64);
    let mut best: Option<f64> = None;
    for direction in [ratio, 1.0 / ratio] {
        let mut x = now;
        for _ in 0..SCAN_STEPS {
            let next = x * direction;
            if gap(next) >= 0.0 {
                let at = bisect(&gap, x, next);
                if best.is_none_or(|b| (at / now).ln().abs() < (b / now).ln().abs()) {
                    best = Some(at);
                }
                break;
            }
            x = next;
        }
    }
    best
}

fn bisect(gap: &impl Fn(f64) -> f64, mut below: f64, mut above: f64) -> f64 {
    for _ in 0..60 {
        let mid = (below * above).sqrt();
        if gap(mid) >= 0.0 {
            above = mid;
        } else {
            below = mid;
        }
    }
    above
}

/// For the first `top` layouts, the nearest constant at which any layout ranked below wins;
/// `Some(None)` when no constant within a factor of 10^4 of its value does.
pub fn add_flips(ranked: &mut [Ranked], top: usize, shape: &ModelShape, w: &Workload, machine: &Machine) {
    let all = constants(machine, w.dtype);
    for i in 0..top.min(ranked.len().saturating_sub(1)) {
        let first = ranked[i].layout;
        let nearest = ranked[i + 1..]
            .iter()
            .flat_map(|other| all.iter().map(move |(c, now)| (other, c, *now)))
            .filter_map(|(other, c, now)| flip_point(&first, &other.layout, (shape, w, machine), c, now).map(|at| (other, c, now, at)))
            .min_by(|a, b| (a.3 / a.2).ln().abs().total_cmp(&(b.3 / b.2).ln().abs()));
        ranked[i].flip = Some(nearest.map(|(other, c, now, at)| Flip { constant: c.clone(), now, at, next: other.label.clone() }));
    }
}
