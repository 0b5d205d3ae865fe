//! What a run needs from the machine's memory, checked when the plan is made, before anything
//! is allocated or launched: a seeded checkpoint the controller generates (the whole model in
//! float32), the ranks' weights (one copy per data-parallel replica), a collective sweep's
//! buffers (send, receive and the expected result per rank) and a memory-bandwidth buffer per
//! process. A run that needs more than the machine has is refused (exit 2) with both numbers;
//! `PARLAB_MAX_MEMORY` (bytes or a size such as `512GiB`) raises the limit for a user who knows
//! better (e.g. swap, or a spec planned on one machine for another).

use super::plan::{Layout, Weights};
use super::schema::{CollectiveParams, DispatchParams, Kind, MembwParams, Strategy};
use crate::model::ModelConfig;

/// The variable that overrides the machine's memory as the limit.
pub const MAX_MEMORY_ENV: &str = "PARLAB_MAX_MEMORY";

/// The memory a plan may use: `PARLAB_MAX_MEMORY` if set and readable, else the machine's
/// total (`/proc/meminfo` MemTotal), else None (no check where neither is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure came from.
    pub source: LimitSource,
}

/// Where a memory limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// The machine's MemTotal.
    Machine,
    /// `PARLAB_MAX_MEMORY`.
    Override,
}

impl Limit {
    /// The limit in force for this process.
    pub fn current() -> Option<Limit> {
        if let Some(bytes) = std::env::var(MAX_MEMORY_ENV).ok().and_then(|v| crate::units::parse_bytes(&v)) {
            return Some(Limit { bytes, source: LimitSource::Override });
        }
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib: u64 = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?.split_whitespace().nth(1)?.parse().ok()?;
        Some(Limit { bytes: kib.saturating_mul(1024), source: LimitSource::Machine })
    }

    fn describe(&self) -> String {
        match self.source {
            LimitSource::Machine => format!("this machine has {} (MemTotal)", size(self.bytes)),
            LimitSource::Override => format!("{MAX_MEMORY_ENV} allows {}", size(self.bytes)),
        }
    }
}

fn size(bytes: impl Into<u128>) -> String {
    crate::units::format_bytes(bytes.into() as f64)
}

/// The bytes a run needs at its peak and what they are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Bytes (wide enough that a product of sizes is never clipped).
    pub bytes: u128,
    /// What for, in words.
    pub what: String,
}

/// A decode run's peak: generating its seeded checkpoint in the controller, or its ranks'
/// weights (float32 on the host; one copy per data-parallel replica), whichever is larger.
pub fn decode_need(cfg: &ModelConfig, weights: &Weights, layout: &Layout) -> Option<Need> {
    let shape = crate::costmodel::shape::shape_from_config(cfg).ok()?;
    let model = shape.stored_bytes(4);
    let replicas = if layout.strategy == Strategy::Data { u64::from(layout.world) } else { 1 };
    let ranks = u128::from(model) * u128::from(replicas);
    // Generated: every tensor of the seeded checkpoint (its head untied) held at once.
    let generated = matches!(weights, Weights::Seeded { .. }).then(|| crate::model::init::seeded_params(cfg)).flatten();
    let need = match generated {
        Some(params) if u128::from(params) * 4 >= ranks => {
            Need { bytes: u128::from(params) * 4, what: format!("a seeded checkpoint of {params} float32 parameters generated in memory") }
        }
        _ => {
            let copies = if replicas > 1 { format!(" × {replicas} data-parallel replicas") } else { String::new() };
            Need { bytes: ranks, what: format!("the ranks' float32 weights ({} parameters{copies})", shape.params) }
        }
    };
    Some(need)
}

/// A collective sweep's peak: three buffers of its largest size (send, receive, expected) per rank.
pub fn collectives_need(params: &CollectiveParams, world: u32) -> Need {
    let largest = params.sizes.iter().copied().max().unwrap_or(0);
    Need { bytes: u128::from(largest) * 3 * u128::from(world), what: format!("3 buffers of {} per rank × {world} ranks", size(largest)) }
}

/// A memory-bandwidth run's buffers: one per process.
pub fn membw_need(params: &MembwParams, world: u32) -> Need {
    Need {
        bytes: u128::from(params.buffer_bytes) * u128::from(world),
        what: format!("a buffer of {} per process × {world}", size(params.buffer_bytes)),
    }
}

/// An expert dispatch's peak: per rank the rows it sends, those it receives, those it expects
/// and those that come back (four buffers of tokens × top_k × hidden float32s, routing being even).
pub fn dispatch_need(params: &DispatchParams, world: u32) -> Need {
    let buffer = params.largest_elements() * 4;
    Need { bytes: buffer * 4 * u128::from(world), what: format!("4 buffers of {} per rank × {world} ranks", size(buffer)) }
}

/// The key to blame and the message, when `need` exceeds `limit`.
pub fn refusal(kind: Kind, need: &Need, limit: &Limit) -> Option<(&'static str, String)> {
    if need.bytes <= u128::from(limit.bytes) {
        return None;
    }
    let key = match kind {
        Kind::Decode => "model",
        Kind::Membw => "buffer",
        Kind::Dispatch => "tokens",
        _ => "sizes",
    };
    Some((
        key,
        format!(
            "this run needs about {} of memory ({}), {}: refused before anything is allocated (set {MAX_MEMORY_ENV} to a larger size to run it anyway)",
            size(need.bytes),
            need.what,
            limit.describe()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_past_the_limit_names_both_numbers_and_the_override() {
        let limit = Limit { bytes: 24 << 30, source: LimitSource::Machine };
        let params = CollectiveParams { ops: vec![], sizes: vec![1 << 10, 1 << 40], iterations: 1 };
        let need = collectives_need(&params, 2);
        assert_eq!(need.bytes, 6 << 40);
        let (key, message) = refusal(Kind::Collectives, &need, &limit).expect("6 TiB is past 24 GiB");
        assert_eq!(key, "sizes");
        assert!(message.contains("6.0 TiB") && message.contains("24.0 GiB") && message.contains(MAX_MEMORY_ENV), "{message}");
        assert_eq!(refusal(Kind::Collectives, &collectives_need(&CollectiveParams { sizes: vec![1 << 20], ..params }, 2), &limit), None);
    }

    #[test]
    fn needs_past_u64_are_counted_whole_not_wrapped_or_clipped() {
        let params = MembwParams { buffer_bytes: u64::MAX / 2 };
        assert_eq!(membw_need(&params, 4).bytes, u128::from(u64::MAX / 2) * 4);
        let sweep = CollectiveParams { ops: vec![], sizes: vec![u64::MAX], iterations: 1 };
        let need = collectives_need(&sweep, 2);
        assert_eq!(need.bytes, u128::from(u64::MAX) * 6);
        let limit = Limit { bytes: u64::MAX, source: LimitSource::Override };
        let (_, message) = refusal(Kind::Collectives, &need, &limit).expect("six times the largest u64 is past it");
        assert!(message.contains("about 100663296.0 TiB of memory (3 buffers of 16777216.0 TiB per rank × 2 ranks)"), "{message}");
    }

    #[test]
    fn a_dispatch_past_64_bits_is_counted_whole_not_wrapped() {
        // 2^31 × 2^31 × 4 = 2^64: in 64 bits it wrapped to 0 and passed every check.
        let wraps = DispatchParams { tokens: vec![1 << 31], top_k: 1 << 31, hidden: 4, iterations: 1 };
        assert_eq!(wraps.largest_elements(), 1u128 << 64);
        assert!(wraps.largest_elements() > DispatchParams::MAX_ELEMENTS);
        let widest = DispatchParams { tokens: vec![u32::MAX], top_k: u32::MAX, hidden: u32::MAX, iterations: 1 };
        assert_eq!(widest.elements(u32::MAX), u128::from(u32::MAX).pow(3));
        assert_eq!(dispatch_need(&widest, 2).bytes, u128::from(u32::MAX).pow(3) * 4 * 4 * 2);
    }
}
