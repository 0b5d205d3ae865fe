//! What a machine or a launch imposes on a run's figures, recorded in its manifest as a
//! typed value so the register groups caveats by kind, not by the words they print.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One caveat of one run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "caveat", rename_all = "snake_case")]
pub enum Caveat {
    /// The ranks ran on several hosts (described by their placement).
    SeveralHosts {
        /// Where each rank ran.
        placement: String,
    },
    /// More ranks × threads than cores.
    Oversubscribed {
        /// Ranks.
        ranks: u32,
        /// Threads per rank.
        threads: u32,
        /// Cores of the machine (across several hosts: of the crowded host's ranks).
        cores: u32,
        /// The crowded host, where the ranks ran on several (absent on one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    /// Every rank streams from the same DRAM.
    SharedMemory,
    /// TCP between ranks went over loopback, not an interconnect.
    LoopbackTcp,
    /// Anything else worth saying about this run (leftover ranks ended, foreign ranks seen).
    Note {
        /// The sentence.
        text: String,
    },
}

impl Caveat {
    /// Whether the register says this kind of caveat in a section of its own (not as a note).
    pub fn has_own_section(&self) -> bool {
        !matches!(self, Caveat::Note { .. })
    }
}

impl fmt::Display for Caveat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caveat::SeveralHosts { placement } => write!(f, "several hosts: {placement}"),
            Caveat::Oversubscribed { ranks, threads, cores, host } => {
                write!(f, "oversubscribed: {ranks} ranks x {threads} threads on {cores} cores")?;
                host.as_ref().map_or(Ok(()), |h| write!(f, " of host {h}"))
            }
            Caveat::SharedMemory => write!(f, "one shared memory system: every rank streams from the same DRAM"),
            Caveat::LoopbackTcp => write!(f, "loopback TCP, not an interconnect"),
            Caveat::Note { text } => write!(f, "{text}"),
        }
    }
}

/// A launch with more ranks × threads than the machine's cores (its [`Caveat::Oversubscribed`]):
/// its times include ranks waiting for a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversubscribed {
    /// Ranks.
    pub ranks: u32,
    /// Threads per rank.
    pub threads: u32,
    /// Cores of the machine.
    pub cores: u32,
}

impl fmt::Display for Oversubscribed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oversubscribed: {}", crate::report::fmt::oversubscription(self.ranks, self.threads, self.cores))
    }
}

/// The oversubscription among `caveats`, if any.
pub fn oversubscribed(caveats: &[Caveat]) -> Option<Oversubscribed> {
    caveats.iter().find_map(|c| match *c {
        Caveat::Oversubscribed { ranks, threads, cores, .. } => Some(Oversubscribed { ranks, threads, cores }),
        _ => None,
    })
}
