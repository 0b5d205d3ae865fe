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

/// The smallest ratio of two read rates that counts as a cache's doing: membw's medians of one
/// buffer move a few per cent between runs, so a smaller gain is no evidence of a cache.
pub const MIN_CACHE_GAIN: f64 = 1.1;

/// One membw run's read: its buffer, its per-process roofline rate, when it finished, the run.
#[derive(Debug, Clone, PartialEq)]
struct Read {
    buffer_bytes: u64,
    bps: f64,
    finished_at: String,
    run: RunId,
}

/// The rate a footprint of bytes reads at, with the membw runs it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct FootprintRate {
    /// Bytes per second, per process.
    pub bps: f64,
    /// The one or two runs whose buffers bracket the footprint.
    pub runs: Vec<RunId>,
    /// The footprint is the largest buffer measured or past it: the rate is the memory's, not
    /// a cache's.
    pub past_sweep: bool,
}

/// Per-process read rates by buffer size, for each (processes, threads) measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheRates {
    by_launch: BTreeMap<(u32, u32), Vec<Read>>,
}

impl CacheRates {
    /// The rates of `membw` runs (per process, the higher of the two kernels' medians); of two
    /// runs of one shape and buffer, the one that finished last (then the greater run identity).
    pub fn of<'m>(membw: impl Iterator<Item = (&'m Manifest, &'m Membw)>) -> Self {
        let mut by_launch: BTreeMap<(u32, u32), BTreeMap<u64, Read>> = BTreeMap::new();
        for (m, b) in membw.filter(|(_, b)| b.roofline.per_process_bps > 0.0) {
            let read = Read {
                buffer_bytes: b.buffer_bytes,
                bps: b.roofline.per_process_bps,
                finished_at: m.finished_at.clone(),
                run: m.run_id.clone(),
            };
            let sizes = by_launch.entry((b.processes, b.threads)).or_default();
            if sizes.get(&b.buffer_bytes).is_none_or(|r| (&r.finished_at, &r.run) < (&read.finished_at, &read.run)) {
                sizes.insert(b.buffer_bytes, read);
            }
        }
        CacheRates { by_launch: by_launch.into_iter().map(|(k, v)| (k, v.into_values().collect())).collect() }
    }

    /// The rate `processes` processes of `threads` threads each read `bytes` at: interpolated
    /// in the logarithm of the size between the two buffers around it, the largest buffer's
    /// from it on (memory); None below the smallest buffer or where that shape never ran.
    pub fn at(&self, processes: u32, threads: u32, bytes: u64) -> Option<FootprintRate> {
        let reads = self.by_launch.get(&(processes, threads))?;
        let largest = reads.last()?;
        if bytes >= largest.buffer_bytes {
            return Some(FootprintRate { bps: largest.bps, runs: vec![largest.run.clone()], past_sweep: true });
        }
        let i = reads.iter().position(|r| r.buffer_bytes >= bytes)?;
        if reads[i].buffer_bytes == bytes {
            return Some(FootprintRate { bps: reads[i].bps, runs: vec![reads[i].run.clone()], past_sweep: false });
        }
        let lo = reads.get(i.checked_sub(1)?)?;
        let hi = &reads[i];
        let t = (bytes as f64 / lo.buffer_bytes as f64).ln() / (hi.buffer_bytes as f64 / lo.buffer_bytes as f64).ln();
        Some(FootprintRate { bps: lo.bps + t * (hi.bps - lo.bps), runs: vec![lo.run.clone(), hi.run.clone()], past_sweep: false })
    }
}

/// Of membw summaries, those that read from memory: for each launch shape (`shape`: processes
/// and threads), the largest buffer measured (a smaller one may be served by a cache, as
/// `experiments/membw-cache.yaml` measures).
pub fn from_memory<T, S: Ord>(runs: Vec<T>, shape: impl Fn(&T) -> S, buffer_bytes: impl Fn(&T) -> u64) -> Vec<T> {
    let mut largest: BTreeMap<S, u64> = BTreeMap::new();
    for r in &runs {
        let b = largest.entry(shape(r)).or_insert(0);
        *b = (*b).max(buffer_bytes(r));
    }
    runs.into_iter().filter(|r| largest.get(&shape(r)) == Some(&buffer_bytes(r))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(points: &[(u32, u64, f64)]) -> CacheRates {
        let mut by_launch: BTreeMap<(u32, u32), Vec<Read>> = BTreeMap::new();
        for &(p, b, bps) in points {
            let read = Read { buffer_bytes: b, bps, finished_at: String::new(), run: RunId::new(format!("r{p}-{b}")) };
            by_launch.entry((p, 1)).or_default().push(read);
        }
        CacheRates { by_launch }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_footprint_reads_at_the_rate_interpolated_between_the_buffers_around_it() {
        let c = rates(&[(1, 16 * MIB, 120e9), (1, 64 * MIB, 60e9), (1, 512 * MIB, 40e9)]);
        // 32 MiB is halfway from 16 to 64 MiB in the logarithm: halfway in rate.
        let mid = c.at(1, 1, 32 * MIB).unwrap();
        assert!((mid.bps - 90e9).abs() < 1e-3 && !mid.past_sweep, "{mid:?}");
        assert_eq!(mid.runs, vec![RunId::new("r1-16777216"), RunId::new("r1-67108864")]);
        assert_eq!(c.at(1, 1, 64 * MIB).unwrap().bps, 60e9);
        // From the largest buffer on: the memory's rate; below the smallest: unknown.
        let past = c.at(1, 1, 4096 * MIB).unwrap();
        assert_eq!((past.bps, past.past_sweep), (40e9, true));
        assert!(c.at(1, 1, 512 * MIB).unwrap().past_sweep);
        assert_eq!(c.at(1, 1, 8 * MIB), None);
        assert_eq!(c.at(2, 1, 32 * MIB), None, "a shape that never ran");
    }

    #[test]
    fn rooflines_read_the_largest_buffer_of_each_launch_shape() {
        // (processes, buffer): one process was also read at 1 GiB; two only at 512 MiB.
        let runs = vec![(1, 16 * MIB), (2, 512 * MIB), (1, 512 * MIB), (1, 1024 * MIB), (2, 16 * MIB)];
        assert_eq!(from_memory(runs, |r| r.0, |r| r.1), vec![(2, 512 * MIB), (1, 1024 * MIB)]);
        assert!(from_memory(Vec::<(u32, u64)>::new(), |r| r.0, |r| r.1).is_empty());
    }
}
