//! Whether the cores share their caches, measured: each membw run of several processes at once
//! beside one process alone at the same buffer (what a cache of each core's own gives) and one
//! process alone at all their buffers together (what one cache they share gives: it must hold
//! them all). The operating system's cache topology is not asked: a virtual machine may report
//! one shared cache where each core has its own.

use super::facts::MembwRow;
use crate::costmodel::cache::MIN_CACHE_GAIN;
use crate::table::{Cell, Table};

/// What a run of several processes reading at once reads like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Nearer one process alone at the same buffer: each core reads from a cache of its own.
    OwnCache,
    /// Nearer one process alone at all the buffers together: the processes share one cache.
    SharedCache,
    /// The two references within [`MIN_CACHE_GAIN`] of each other: both read from memory, so
    /// the run cannot tell.
    Indistinct,
}

crate::named!(Sharing {
    OwnCache => "a cache of each core's own",
    SharedCache => "one cache shared",
    Indistinct => "cannot tell (both references read from memory)",
});

/// Which reference `at_once` is nearer, in ratio, of `own` (alone, same buffer) and `shared`
/// (alone, every buffer together).
pub fn sharing(at_once: f64, own: f64, shared: f64) -> Sharing {
    if own < shared * MIN_CACHE_GAIN {
        return Sharing::Indistinct;
    }
    if (at_once / own).ln().abs() <= (at_once / shared).ln().abs() {
        Sharing::OwnCache
    } else {
        Sharing::SharedCache
    }
}

/// The table: a row per run of several processes whose two references were measured (one
/// process, the same threads, at its buffer and at processes × its buffer); None without one.
pub fn table(rows: &[MembwRow]) -> Option<Table> {
    let alone = |threads: u64, buffer: u64| rows.iter().find(|o| o.processes == 1 && o.threads == threads && o.buffer == buffer);
    let mut cells: Vec<(u64, u64, u64, Vec<Cell>)> = rows
        .iter()
        .filter(|r| r.processes > 1)
        .filter_map(|r| {
            let (own, shared) = (alone(r.threads, r.buffer)?, alone(r.threads, r.buffer.checked_mul(r.processes)?)?);
            let row = vec![
                Cell::Count(r.processes),
                Cell::Count(r.threads),
                Cell::Bytes(r.buffer as f64),
                Cell::BytesPerSec(r.roofline_per_process),
                Cell::BytesPerSec(own.roofline_per_process),
                Cell::BytesPerSec(shared.roofline_per_process),
                Cell::text(sharing(r.roofline_per_process, own.roofline_per_process, shared.roofline_per_process).name()),
                Cell::text(format!("{}, {}, {}", r.run, own.run, shared.run)),
            ];
            Some((r.processes, r.threads, r.buffer, row))
        })
        .collect();
    if cells.is_empty() {
        return None;
    }
    cells.sort_by_key(|c| (c.0, c.1, c.2));
    Some(Table {
        id: "measured-cache-sharing".into(),
        title: "Caches: shared by the cores, or each core's own".into(),
        caption: format!("Per membw run of several processes reading at once: its per-process rate (the roofline kernel's median) beside one process alone at the same buffer, what a cache of each core's own gives, and one process alone at all their buffers together, what one cache they share gives. Reads like: the nearer of the two in ratio; where they are within {MIN_CACHE_GAIN}× of each other both read from memory and the run cannot tell. Measured: the operating system's cache topology is not asked."),
        columns: ["processes", "threads", "buffer each", "per process, at once", "one alone, same buffer", "one alone, all buffers together", "reads like", "runs (at once, alone, alone)"]
            .iter()
            .map(|c| c.to_string())
            .collect(),
        rows: cells.into_iter().map(|c| c.3).collect(),
        provenance: vec!["measured: membw runs of one experiment or several (`experiments/membw-cache.yaml` sweeps the buffers)".into()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_reads_like_the_nearer_reference_unless_both_read_from_memory() {
        // 2 × 32 MiB at once: 80 GB/s each; 32 MiB alone 82, 64 MiB alone 64.
        assert_eq!(sharing(80e9, 82e9, 64e9), Sharing::OwnCache);
        assert_eq!(sharing(66e9, 82e9, 64e9), Sharing::SharedCache);
        // 2 × 512 MiB: both references read from memory.
        assert_eq!(sharing(44e9, 44.7e9, 44.1e9), Sharing::Indistinct);
    }
}
