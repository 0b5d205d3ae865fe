//! Hosts a launch never reached: the hostfile's hosts no rank reported from, and the launcher's
//! own lines about them (`ssh: Could not resolve hostname …`), for a failure that names them.

use crate::manifest::placement::RankPlacement;
use std::path::Path;

/// Phrases of ssh/rsh (as Open MPI's `plm rsh` relays them) that say a host was not reached.
const UNREACHED: [&str; 8] = [
    "Could not resolve hostname",
    "Name or service not known",
    "No route to host",
    "Network is unreachable",
    "Connection refused",
    "Connection timed out",
    "Permission denied (",
    "Host key verification failed",
];

/// The hosts of `hostfile_text` (in file order) from which no rank of `ranks` reported, when
/// fewer than `world` ranks reported; empty when every rank reported (the hosts were reached).
pub fn hosts_without_ranks(hostfile_text: &str, ranks: &[RankPlacement], world: u32) -> Vec<String> {
    if ranks.len() >= world as usize {
        return Vec::new();
    }
    super::hosts::hostfile_hosts(hostfile_text)
        .into_iter()
        .map(|(h, _)| h)
        .filter(|h| !ranks.iter().any(|r| same_host(h, &r.host)))
        .collect()
}

/// True when a hostfile's `listed` host is the host a rank `recorded`: the same name, the same
/// short name, or this machine under any of its names or addresses.
fn same_host(listed: &str, recorded: &str) -> bool {
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_string();
    listed == recorded || short(listed) == short(recorded) || (recorded == super::hosts::this_host() && super::hosts::is_local(listed))
}

/// The launcher's lines that say a host was not reached (ssh's or rsh's own words).
pub fn launcher_lines(launcher_stderr: &str) -> Vec<String> {
    let mut lines: Vec<String> =
        launcher_stderr.lines().map(str::trim).filter(|l| UNREACHED.iter().any(|p| l.contains(p))).map(str::to_string).collect();
    lines.dedup();
    lines
}

/// `hosts of the hostfile H from which no rank reported: a, b; mpirun said: ssh: …`, or None when
/// the run has no hostfile or every host reported; `hostfile` is its path and the text the
/// launch read.
pub fn explain(hostfile: Option<(&Path, &str)>, out: &Path, world: u32, launcher: &str, launcher_stderr: &str) -> Option<String> {
    let (path, text) = hostfile?;
    let missing = hosts_without_ranks(text, &crate::manifest::placement::read_all(out), world);
    if missing.is_empty() {
        return None;
    }
    let mut words = format!("hosts of the hostfile {} from which no rank reported: {}", path.display(), missing.join(", "));
    let said = launcher_lines(launcher_stderr);
    if !said.is_empty() {
        words.push_str(&format!("; {launcher} said: {}", said.join(" | ")));
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(rank: u32, host: &str) -> RankPlacement {
        RankPlacement { rank, host: host.into(), pid: 1, cores: "0".into(), transport: String::new() }
    }

    #[test]
    fn hosts_no_rank_reported_from_are_named_only_while_ranks_are_missing() {
        let file = "node1 slots=2\nnosuchhost.invalid slots=2 # far away\n";
        assert_eq!(hosts_without_ranks(file, &[], 4), vec!["node1", "nosuchhost.invalid"], "nothing started");
        assert_eq!(hosts_without_ranks(file, &[placed(0, "node1.cluster"), placed(1, "node1.cluster")], 4), vec!["nosuchhost.invalid"]);
        let all = [placed(0, "node1"), placed(1, "node1"), placed(2, "other"), placed(3, "other")];
        assert!(hosts_without_ranks(file, &all, 4).is_empty(), "every rank reported: no host is blamed");
        let here = super::super::hosts::this_host();
        assert!(hosts_without_ranks("localhost slots=2\n", &[placed(0, &here)], 2).is_empty(), "localhost is this machine");
    }

    #[test]
    fn the_launchers_own_words_about_a_host_are_kept_and_its_boilerplate_is_not() {
        let stderr = "ssh: Could not resolve hostname nosuchhost: Name or service not known\n-----\nORTE was unable to reliably start one or more daemons.\n* lack of authority to execute on one or more specified nodes.\n";
        assert_eq!(launcher_lines(stderr), vec!["ssh: Could not resolve hostname nosuchhost: Name or service not known"]);
        assert!(launcher_lines("[vm:07228] plm:rsh: Warning: setpgid(7233,7233) failed in parent with errno=Permission denied(13)\n")
            .is_empty());
        assert_eq!(launcher_lines("node2: Permission denied (publickey).\n"), vec!["node2: Permission denied (publickey)."]);
    }
}
