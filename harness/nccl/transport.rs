//! What NCCL chose, read from its own log: each rank's `NCCL_DEBUG=INFO` output (subsystems
//! INIT, GRAPH and ENV, written to a file per process by `NCCL_DEBUG_FILE`) names the version,
//! the environment it obeyed, and the transport of every channel connection
//! (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`), so a run with P2P disabled shows that
//! its path changed rather than assuming it.

/// The transports NCCL logged (plain data in the manifest; read from the log here).
pub use crate::manifest::nccl_record::Transports;

/// Reading NCCL's log into the manifest's record of it, and saying it in one line.
impl Transports {
    /// Reads an NCCL log.
    pub fn parse(log: &str) -> Self {
        let mut found = Transports::default();
        for line in log.lines() {
            let text = line.split_once("NCCL INFO ").map_or(line, |(_, rest)| rest).trim();
            if let Some(version) = text.strip_prefix("NCCL version ") {
                found.version = format!("NCCL version {}", version.trim());
            } else if let Some(via) = connection_transport(text) {
                *found.connections.entry(via).or_default() += 1;
            } else if text.starts_with("NCCL_") && text.contains(" set by environment to ") {
                found.environment.push(text.to_string());
            }
        }
        found.environment.sort();
        found.environment.dedup();
        found
    }

    /// One line: `P2P/CUMEM/read × 24, SHM/direct/direct × 4`, or why there is none.
    pub fn describe(&self, ranks: u32) -> String {
        if self.connections.is_empty() {
            return if ranks <= 1 {
                "no peer connections (one rank: NCCL connects no channel)".into()
            } else {
                "no connection logged (NCCL printed no `via` line)".into()
            };
        }
        self.connections.iter().map(|(via, n)| format!("{via} × {n}")).collect::<Vec<_>>().join(", ")
    }
}

/// The transport of a channel connection line (`Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`).
fn connection_transport(text: &str) -> Option<String> {
    if !text.starts_with("Channel ") || !text.contains("->") {
        return None;
    }
    let (_, after) = text.split_once(" via ")?;
    after.split_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
host:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
host:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
host:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
host:1:9 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct
host:1:9 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0
host:1:9 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0
host:1:9 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1
";

    #[test]
    fn connections_are_counted_by_transport_and_the_environment_kept() {
        let t = Transports::parse(LOG);
        assert_eq!(t.version, "NCCL version 2.28.9+cuda13.0");
        assert_eq!(t.connections.get("SHM/direct/direct"), Some(&2));
        assert_eq!(t.connections.get("NET/Socket/0"), Some(&1));
        assert_eq!(t.connections.len(), 2, "{t:?}");
        assert_eq!(t.environment, vec!["NCCL_P2P_DISABLE set by environment to 1".to_string()]);
        assert_eq!(t.describe(2), "NET/Socket/0 × 1, SHM/direct/direct × 2");
    }

    #[test]
    fn a_log_without_connections_says_why() {
        let t = Transports::parse("x NCCL INFO NCCL version 2.28.9+cuda13.0\nx NCCL INFO comm 0x1 rank 0 nRanks 1 - Init COMPLETE\n");
        assert!(t.connections.is_empty());
        assert!(t.describe(1).contains("one rank"));
        assert!(t.describe(2).contains("no connection logged"));
    }
}
