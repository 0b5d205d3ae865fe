//! Where each rank ran, as the rank itself saw it: host name, pid and the cores it may use.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One rank's placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankPlacement {
    /// The rank.
    pub rank: u32,
    /// Its host name (`gethostname`).
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// The cores it may run on (`sched_getaffinity`), as ranges: `0-1`, `0,2`.
    pub cores: String,
    /// The point-to-point transport Open MPI selected (`pml ob1; btl self,vader`): its
    /// `pml`, `mtl` and `btl` components mapped into the rank after MPI_Init.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transport: String,
}

impl RankPlacement {
    /// This process's placement as rank `rank`.
    pub fn current(rank: u32) -> Self {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        RankPlacement {
            rank,
            host: crate::host::this_host(),
            pid: std::process::id(),
            cores: cores_text(&allowed_cores()),
            transport: mapped_transport(&maps),
        }
    }
}

/// `pml ob1; btl self,vader` from the Open MPI component libraries (`mca_pml_ob1.so`, ...) in a
/// process's memory map: Open MPI unloads the components it did not select.
pub fn mapped_transport(maps: &str) -> String {
    let mut found: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for name in maps.split(['/', '\n', ' ']).filter_map(|w| w.strip_prefix("mca_")?.strip_suffix(".so")) {
        if let Some((framework, component)) = name.split_once('_') {
            if ["pml", "mtl", "btl"].contains(&framework) {
                found.entry(framework).or_default().insert(component);
            }
        }
    }
    ["pml", "mtl", "btl"]
        .iter()
        .filter_map(|f| found.get(f).map(|c| format!("{f} {}", c.iter().copied().collect::<Vec<_>>().join(","))))
        .collect::<Vec<_>>()
        .join("; ")
}

fn file_for(out: &Path, rank: u32) -> PathBuf {
    out.join(format!("placement-rank{rank}.json"))
}

/// Writes this rank's placement into `out` (best effort: a failure only loses the record).
pub fn write(out: &Path, rank: u32) {
    write_rank_record(&file_for(out, rank), &RankPlacement::current(rank));
}

/// The placements the ranks of a run wrote into `out`, by rank.
pub fn read_all(out: &Path) -> Vec<RankPlacement> {
    let mut found: Vec<RankPlacement> = read_rank_records(out, "placement-rank", 1 << 16);
    found.sort_by_key(|r| r.rank);
    found
}

/// Writes one rank's JSON record atomically (best effort: a failure only loses the record).
pub fn write_rank_record(path: &Path, record: &impl Serialize) {
    if let Ok(text) = serde_json::to_string(record) {
        let _ = crate::manifest::write_atomic(path, text.as_bytes());
    }
}

/// The JSON records `<prefix>*.json` the ranks of a run wrote into `out` (at most `limit` bytes
/// each), in no particular order; unreadable or malformed ones are skipped.
pub fn read_rank_records<T: serde::de::DeserializeOwned>(out: &Path, prefix: &str, limit: u64) -> Vec<T> {
    let Ok(entries) = std::fs::read_dir(out) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json")))
        .filter_map(|e| crate::files::read_text(&e.path(), limit).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect()
}

/// Ranks per host, hosts in first-rank order.
pub fn by_host(ranks: &[RankPlacement]) -> Vec<(String, Vec<u32>)> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for r in ranks {
        if !map.contains_key(&r.host) {
            order.push(r.host.clone());
        }
        map.entry(r.host.clone()).or_default().push(r.rank);
    }
    order.into_iter().map(|h| (h.clone(), map.remove(&h).unwrap_or_default())).collect()
}

/// `4 ranks on 2 hosts (vm: 0, 1; node2: 2, 3)`.
pub fn describe(ranks: &[RankPlacement]) -> String {
    let hosts = by_host(ranks);
    let parts: Vec<String> =
        hosts.iter().map(|(h, rs)| format!("{h}: {}", rs.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))).collect();
    format!("{} ranks on {} hosts ({})", ranks.len(), hosts.len(), parts.join("; "))
}

fn allowed_cores() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// `[0, 1, 2, 5]` as `0-2,5`.
pub fn cores_text(cores: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cores.len() {
        let start = cores[i];
        while i + 1 < cores.len() && cores[i + 1] == cores[i] + 1 {
            i += 1;
        }
        parts.push(if cores[i] == start { start.to_string() } else { format!("{start}-{}", cores[i]) });
        i += 1;
    }
    parts.join(",")
}

/// `0-2,5` as `[0, 1, 2, 5]` (the inverse of [`cores_text`]); None where a part is not a core
/// or a range of cores.
pub fn parse_cores(text: &str) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        if last < first || last >= libc::CPU_SETSIZE as usize {
            return None;
        }
        cores.extend(first..=last);
    }
    Some(cores)
}

/// Each host's ranks and the cores they may use between them (the union of their affinities),
/// in the order hosts first appear; a host whose ranks' cores cannot be read is left out.
pub fn cores_by_host(ranks: &[RankPlacement]) -> Vec<(String, u32, u32)> {
    by_host(ranks)
        .into_iter()
        .filter_map(|(host, on_host)| {
            let mut union = std::collections::BTreeSet::new();
            for r in ranks.iter().filter(|r| r.host == host) {
                union.extend(parse_cores(&r.cores).filter(|c| !c.is_empty())?);
            }
            Some((host, on_host.len() as u32, union.len() as u32))
        })
        .collect()
}

/// Rank `rank` placed on `host` with the cores `cores` (for tests).
#[cfg(test)]
pub fn placed(rank: u32, host: &str, cores: &str) -> RankPlacement {
    RankPlacement { rank, host: host.into(), pid: 1, cores: cores.into(), transport: String::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_read_as_ranges() {
        assert_eq!(cores_text(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cores_text(&[3]), "3");
        assert_eq!(cores_text(&[]), "");
        for cores in [vec![0, 1, 2, 5, 7, 8], vec![3], vec![]] {
            assert_eq!(parse_cores(&cores_text(&cores)), Some(cores));
        }
        for bad in ["x", "3-1", "0-", "1,a", "0-99999"] {
            assert_eq!(parse_cores(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_hosts_cores_are_the_union_of_its_ranks_affinities() {
        let p = placed;
        let ranks = [p(0, "a", "0"), p(1, "a", "1"), p(2, "b", "0-3"), p(3, "b", "0-3"), p(4, "c", "")];
        assert_eq!(cores_by_host(&ranks), vec![("a".to_string(), 2, 2), ("b".to_string(), 2, 4)]);
    }

    #[test]
    fn the_selected_transport_is_read_from_the_mapped_component_libraries() {
        let maps = "7f00-7f01 r-xp 0 fd:01 1 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pml_ob1.so\n\
                    7f02-7f03 r-xp 0 fd:01 2 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so\n\
                    7f04-7f05 r-xp 0 fd:01 3 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_self.so\n\
                    7f06-7f07 r-xp 0 fd:01 4 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_coll_tuned.so\n";
        assert_eq!(mapped_transport(maps), "pml ob1; btl self,vader");
        assert_eq!(mapped_transport(""), "");
    }

    #[test]
    fn placements_group_by_host_in_rank_order() {
        let p = |rank, host: &str| RankPlacement { rank, host: host.into(), pid: 1, cores: "0".into(), transport: String::new() };
        let ranks = [p(0, "a"), p(1, "a"), p(2, "b"), p(3, "b")];
        assert_eq!(describe(&ranks), "4 ranks on 2 hosts (a: 0, 1; b: 2, 3)");
    }
}
