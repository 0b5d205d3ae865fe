//! Links described by a latency and a bandwidth (the alpha-beta model), the times of
//! collectives over them (ring algorithms, equations 1.4.1-1.4.4), the bytes each rank
//! puts on the wire, and a least-squares fit of the two constants from measurements.

pub use crate::manifest::fit::{Heldout, Line, LinkFit};
use crate::spec::schema::Op;
use serde::Serialize;

/// A link: `alpha_s` seconds per message plus bytes over `beta_bps`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Link {
    /// Latency of one message (seconds).
    pub alpha_s: f64,
    /// Sustained bandwidth (bytes per second).
    pub beta_bps: f64,
}

/// `(latency steps, bandwidth factor)` of `op` over `world` ranks: time = steps·α + factor·S/β.
///
/// `S` is the full buffer in nccl-tests' convention: the reduced tensor, the gathered
/// output, the scattered input, each rank's all-to-all send buffer, the broadcast or
/// point-to-point message. Broadcast is a binomial tree (⌈log2 p⌉ hops of the whole message).
pub fn op_factors(op: Op, world: u32) -> (f64, f64) {
    let p = world as f64;
    if op.on_device() {
        return (1.0, 1.0);
    }
    if world <= 1 {
        return (0.0, 0.0);
    }
    match op {
        Op::AllReduce => (2.0 * (p - 1.0), 2.0 * (p - 1.0) / p),
        Op::AllGather | Op::ReduceScatter | Op::AllToAll => (p - 1.0, (p - 1.0) / p),
        Op::Broadcast => {
            let hops = p.log2().ceil();
            (hops, hops)
        }
        _ => (1.0, 1.0),
    }
}

/// Time of `op` on `bytes` over `world` ranks of `link`.
pub fn collective_time(link: Link, op: Op, bytes: f64, world: u32) -> f64 {
    let (steps, factor) = op_factors(op, world);
    steps * link.alpha_s + factor * bytes / link.beta_bps
}

/// One message of `bytes` between two devices (eq 1.4.1).
pub fn p2p_time(link: Link, bytes: f64) -> f64 {
    link.alpha_s + bytes / link.beta_bps
}

/// Ring all-reduce: 2(p-1)α + 2(p-1)/p · S/β (eq 1.4.3).
pub fn allreduce_time(link: Link, bytes: f64, world: u32) -> f64 {
    collective_time(link, Op::AllReduce, bytes, world)
}

/// Ring all-gather of a gathered buffer of `bytes`: (p-1)α + (p-1)/p · S/β.
pub fn allgather_time(link: Link, bytes: f64, world: u32) -> f64 {
    collective_time(link, Op::AllGather, bytes, world)
}

/// Ring reduce-scatter of an input of `bytes`: (p-1)α + (p-1)/p · S/β.
pub fn reduce_scatter_time(link: Link, bytes: f64, world: u32) -> f64 {
    collective_time(link, Op::ReduceScatter, bytes, world)
}

/// Pairwise all-to-all of a send buffer of `bytes`: (p-1)α + (p-1)/p · S/β.
pub fn alltoall_time(link: Link, bytes: f64, world: u32) -> f64 {
    collective_time(link, Op::AllToAll, bytes, world)
}

/// Bytes each rank sends for `op` on a buffer of `bytes` (eq 1.4.2 for all-reduce).
pub fn wire_bytes_per_rank(op: Op, bytes: f64, world: u32) -> f64 {
    let p = world as f64;
    if op.on_device() {
        return bytes;
    }
    if world <= 1 {
        return 0.0;
    }
    match op {
        Op::AllReduce => 2.0 * (p - 1.0) / p * bytes,
        Op::AllGather | Op::ReduceScatter | Op::AllToAll => (p - 1.0) / p * bytes,
        _ => bytes,
    }
}

/// Ring all-reduce wire bytes per rank: 2S(p-1)/p.
pub fn allreduce_wire_bytes(bytes: f64, world: u32) -> f64 {
    wire_bytes_per_rank(Op::AllReduce, bytes, world)
}

/// The message size where latency and bandwidth terms of a ring all-reduce are equal: S* = p·α·β (eq 1.4.4).
pub fn crossover_bytes(link: Link, world: u32) -> f64 {
    world as f64 * link.alpha_s * link.beta_bps
}

/// Bus bandwidth from algorithm bandwidth (eq 1.4.8 for all-reduce; nccl-tests' factors).
pub fn busbw(op: Op, algbw_bps: f64, world: u32) -> f64 {
    algbw_bps * op.busbw_factor(world)
}

/// Least-squares line through `(bytes, seconds)`, each point weighted by 1/seconds², so the
/// fit minimises relative error (sizes spanning 4 B to 16 MB would otherwise be decided by
/// the largest alone). None with fewer than two distinct sizes.
pub fn fit_line(points: &[(f64, f64)]) -> Option<Line> {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in points.iter().filter(|(_, y)| *y > 0.0) {
        let w = 1.0 / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let det = sw * sxx - sx * sx;
    if det.abs() <= f64::EPSILON * sw * sxx || sw == 0.0 {
        return None;
    }
    let slope = (sw * sxy - sx * sy) / det;
    Some(Line { intercept_s: (sy - slope * sx) / sw, slope_s_per_byte: slope })
}

impl LinkFit {
    /// The fitted link (an unbounded bandwidth when the slope was not positive).
    pub fn link(&self) -> Link {
        Link { alpha_s: self.alpha_per_step_s, beta_bps: self.beta_bps.unwrap_or(f64::INFINITY) }
    }
}

/// Fits α and β of `op` at `world` from `(size_bytes, median seconds)` with sizes up to
/// `fit_max_bytes`, and predicts the larger sizes.
pub fn fit_collective(op: Op, world: u32, points: &[(u64, f64)], fit_max_bytes: u64) -> Option<LinkFit> {
    let (steps, factor) = op_factors(op, world);
    if steps == 0.0 {
        return None;
    }
    let small: Vec<(f64, f64)> = points.iter().filter(|(s, _)| *s <= fit_max_bytes).map(|&(s, t)| (s as f64, t)).collect();
    let line = fit_line(&small)?;
    let beta_bps = (line.slope_s_per_byte > 0.0).then(|| factor / line.slope_s_per_byte);
    let heldout = points
        .iter()
        .filter(|(s, _)| *s > fit_max_bytes)
        .map(|&(size_bytes, measured_s)| {
            let predicted_s = line.at(size_bytes as f64);
            Heldout { size_bytes, predicted_s, measured_s, error: (predicted_s - measured_s) / measured_s }
        })
        .collect();
    let alpha_per_step_s = line.intercept_s / steps;
    Some(LinkFit { op, world, line, alpha_per_step_s, beta_bps, fit_max_bytes, fitted_points: small.len(), heldout })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GLOO: Link = Link { alpha_s: 54e-6, beta_bps: 1.2e9 };

    #[test]
    fn ring_allreduce_at_four_sends_one_and_a_half_buffers() {
        // Worked solution 3 of chapter 1.4: 2S(N-1)/N = 1.5 S over 2(N-1) = 6 steps.
        assert_eq!(allreduce_wire_bytes(1.0, 4), 1.5);
        assert_eq!(op_factors(Op::AllReduce, 4).0, 6.0);
        // busbw of 120 GB/s algbw at N=4 is 180 GB/s.
        assert!((busbw(Op::AllReduce, 120e9, 4) - 180e9).abs() < 1.0);
    }

    #[test]
    fn starter_figure_against_the_ring() {
        // The starter charged (p-1) x activation: 300 bytes for 4 devices means a 100-byte buffer.
        let buffer = 300.0 / (4.0 - 1.0);
        assert_eq!(buffer, 100.0);
        assert_eq!(allreduce_wire_bytes(buffer, 4), 150.0);
    }

    #[test]
    fn crossover_of_the_worked_example() {
        // N=2, α=5 µs, 250 GB/s: S* = 2.5 MB, and the two terms are equal there.
        let nvlink = Link { alpha_s: 5e-6, beta_bps: 250e9 };
        let s = crossover_bytes(nvlink, 2);
        assert!((s - 2.5e6).abs() < 1e-3);
        let (steps, factor) = op_factors(Op::AllReduce, 2);
        assert!((steps * nvlink.alpha_s - factor * s / nvlink.beta_bps).abs() < 1e-15);
    }

    #[test]
    fn one_rank_communicates_nothing() {
        assert_eq!(allreduce_time(GLOO, 8192.0, 1), 0.0);
        assert_eq!(wire_bytes_per_rank(Op::AllGather, 8192.0, 1), 0.0);
    }

    #[test]
    fn alltoall_latency_from_the_point_to_point_alpha() {
        // (p-1)α with α = 54 µs: 162 µs at 4 processes, 378 µs at 8.
        assert!((alltoall_time(GLOO, 0.0, 4) - 162e-6).abs() < 1e-12);
        assert!((alltoall_time(GLOO, 0.0, 8) - 378e-6).abs() < 1e-12);
        assert!((p2p_time(GLOO, 1.2e9) - (54e-6 + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn fit_recovers_the_two_process_intercept_and_predicts_larger_worlds() {
        // The chapter's 2-process all-reduce fit: intercept 118.7 µs, so α = 59.35 µs.
        let beta = 1.2e9;
        let pts: Vec<(u64, f64)> =
            [4u64, 64, 1024, 16384, 262144, 1 << 20, 4 << 20].iter().map(|&s| (s, 118.7e-6 + s as f64 / beta)).collect();
        let fit = fit_collective(Op::AllReduce, 2, &pts, 1 << 20).unwrap();
        assert!((fit.line.intercept_s - 118.7e-6).abs() < 1e-10);
        assert!((fit.alpha_per_step_s - 59.35e-6).abs() < 1e-10);
        assert!((fit.beta_bps.unwrap() - beta).abs() / beta < 1e-6);
        let four = allreduce_time(Link { beta_bps: f64::INFINITY, ..fit.link() }, 0.0, 4);
        let eight = allreduce_time(Link { beta_bps: f64::INFINITY, ..fit.link() }, 0.0, 8);
        assert_eq!((four * 1e6).round(), 356.0);
        assert_eq!((eight * 1e6).round(), 831.0); // the chapter rounds α to 59 µs first: 14 x 59 = 826, it prints 830
        assert_eq!(fit.heldout.len(), 1);
        assert!(fit.heldout[0].error.abs() < 1e-9);
    }

    #[test]
    fn flat_times_give_no_bandwidth() {
        let pts = [(4u64, 1e-4), (64, 1e-4), (1024, 1e-4)];
        let fit = fit_collective(Op::AllReduce, 2, &pts, 1 << 20).unwrap();
        assert!(fit.beta_bps.is_none() || fit.beta_bps.unwrap() > 1e12);
        assert!(fit_line(&[(4.0, 1.0)]).is_none());
    }
}
