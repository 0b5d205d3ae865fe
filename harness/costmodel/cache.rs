//! Read rates by footprint: the membw runs' per-process read rate at each buffer size, for one
//! launch shape (processes reading at once, threads each), so a rank's weights can be looked up
//! by their bytes. A buffer within a core's cache reads faster than one the memory must serve,
//! and several processes reading at once halve a cache they share but not ones each core owns:
//! measured here, never read from the operating system's topology (a virtual machine may report
//! one shared cache where each core has its own).

use crate::identity::RunId;
use crate::manifest::summary::Membw;
use crate::manifest::Manifest;
use std::collections::BTreeMap;

/// One membw run's read: its buffer, its per-process roofline rate, the run.
#[derive(Debug, Clone, PartialEq)]
struct Read {
    buffer_bytes: u64,
    bps: f64,
    run: RunId,
}

/// The rate a footprint of bytes reads at, with the membw runs it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct FootprintRate {
    /// Bytes per second, per process.
    pub bps: f64,
    /// The one or two runs whose buffers bracket the footprint.
    pub runs: Vec<RunId>,
}

/// Per-process read rates by buffer size, for each (processes, threads) measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheRates {
    by_launch: BTreeMap<(u32, u32), Vec<Read>>,
}

impl CacheRates {
    /// The rates of `membw` runs (per process, the higher of the two kernels' medians); of two
    /// runs of one shape and buffer, the later by run identity.
    pub fn of<'m>(membw: impl Iterator<Item = (&'m Manifest, &'m Membw)>) -> Self {
        let mut by_launch: BTreeMap<(u32, u32), BTreeMap<u64, Read>> = BTreeMap::new();
        for (m, b) in membw {
            let read = Read { buffer_bytes: b.buffer_bytes, bps: b.roofline.per_process_bps, run: m.run_id.clone() };
            let sizes = by_launch.entry((b.processes, b.threads)).or_default();
            if sizes.get(&b.buffer_bytes).is_none_or(|r| r.run < read.run) {
                sizes.insert(b.buffer_bytes, read);
            }
        }
        CacheRates { by_launch: by_launch.into_iter().map(|(k, v)| (k, v.into_values().filter(|r| r.bps > 0.0).collect())).collect() }
    }

    /// The rate `processes` processes of `threads` threads each read `bytes` at: interpolated
    /// in the logarithm of the size between the two buffers around it, the largest buffer's
    /// beyond it (memory); None below the smallest buffer or where that shape never ran.
    pub fn at(&self, processes: u32, threads: u32, bytes: u64) -> Option<FootprintRate> {
        let reads = self.by_launch.get(&(processes, threads))?;
        let above = reads.iter().position(|r| r.buffer_bytes >= bytes);
        let rate = |r: &Read| FootprintRate { bps: r.bps, runs: vec![r.run.clone()] };
        match above {
            None => reads.last().map(rate),
            Some(i) if reads[i].buffer_bytes == bytes => Some(rate(&reads[i])),
            Some(0) => None,
            Some(i) => {
                let (lo, hi) = (&reads[i - 1], &reads[i]);
                let t = (bytes as f64 / lo.buffer_bytes as f64).ln() / (hi.buffer_bytes as f64 / lo.buffer_bytes as f64).ln();
                Some(FootprintRate { bps: lo.bps + t * (hi.bps - lo.bps), runs: vec![lo.run.clone(), hi.run.clone()] })
            }
        }
    }
}

/// Of membw summaries, those that read from memory: the largest buffer measured (a smaller one
/// may be served by a cache, as `experiments/membw-cache.yaml` measures).
pub fn from_memory<T>(runs: Vec<T>, buffer_bytes: impl Fn(&T) -> u64) -> Vec<T> {
    let largest = runs.iter().map(&buffer_bytes).max().unwrap_or(0);
    runs.into_iter().filter(|r| buffer_bytes(r) == largest).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(points: &[(u32, u64, f64)]) -> CacheRates {
        let mut by_launch: BTreeMap<(u32, u32), Vec<Read>> = BTreeMap::new();
        for &(p, b, bps) in points {
            by_launch.entry((p, 1)).or_default().push(Read { buffer_bytes: b, bps, run: RunId::new(format!("r{p}-{b}")) });
        }
        CacheRates { by_launch }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_footprint_reads_at_the_rate_interpolated_between_the_buffers_around_it() {
        let c = rates(&[(1, 16 * MIB, 120e9), (1, 64 * MIB, 60e9), (1, 512 * MIB, 40e9)]);
        // 32 MiB is halfway from 16 to 64 MiB in the logarithm: halfway in rate.
        let mid = c.at(1, 1, 32 * MIB).unwrap();
        assert!((mid.bps - 90e9).abs() < 1e-3, "{}", mid.bps);
        assert_eq!(mid.runs, vec![RunId::new("r1-16777216"), RunId::new("r1-67108864")]);
        assert_eq!(c.at(1, 1, 64 * MIB).unwrap().bps, 60e9);
        // Beyond the largest buffer: the memory's rate; below the smallest: unknown.
        assert_eq!(c.at(1, 1, 4096 * MIB).unwrap().bps, 40e9);
        assert_eq!(c.at(1, 1, 8 * MIB), None);
        assert_eq!(c.at(2, 1, 32 * MIB), None, "a shape that never ran");
    }

    #[test]
    fn rooflines_read_the_largest_buffer_only() {
        let kept = from_memory(vec![(1, 16 * MIB), (2, 512 * MIB), (1, 512 * MIB)], |r| r.1);
        assert_eq!(kept, vec![(2, 512 * MIB), (1, 512 * MIB)]);
        assert!(from_memory(Vec::<(u32, u64)>::new(), |r| r.1).is_empty());
    }
}
