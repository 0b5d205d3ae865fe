//! NCCL for GPU ranks: the library (loaded at run time), a communicator per rank, and the
//! record of what NCCL chose (version, environment, transport per connection).

pub mod comm;
pub mod library;
pub mod transport;

/// One rank's NCCL record (plain data in the manifest, the contract it is written into).
pub use crate::manifest::nccl_record::RankRecord;
use std::path::{Path, PathBuf};
use transport::Transports;

/// What can go wrong between parlab and NCCL.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NcclError {
    /// No NCCL library could be loaded (each name tried, with the loader's message).
    #[error("NCCL could not be loaded ({0})")]
    NotLoadable(String),
    /// The library lacks an entry point parlab calls.
    #[error("NCCL has no symbol {0}")]
    MissingSymbol(String),
    /// An NCCL call failed.
    #[error("{call} failed: NCCL error {code} ({message})")]
    Call {
        /// The call.
        call: &'static str,
        /// Its `ncclResult_t`.
        code: i32,
        /// NCCL's `ncclGetErrorString`.
        message: String,
    },
    /// A CUDA runtime call it needs failed (making the rank's GPU current).
    #[error("{0}")]
    Cuda(String),
    /// A buffer NCCL cannot take (wrong device, type, layout or length).
    #[error("{0}")]
    Buffer(String),
}

/// The NCCL environment a `link: nccl…` name sets, part of the run's identity (the link is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// NCCL chooses every transport itself (`nccl`).
    Default,
    /// `NCCL_P2P_DISABLE=1`: no direct GPU-to-GPU path (`nccl-no-p2p`).
    NoP2p,
    /// `NCCL_SHM_DISABLE=1`: no shared-memory path through the host (`nccl-no-shm`).
    NoShm,
    /// Both (`nccl-no-p2p-no-shm`): what is left is the network transport.
    NoP2pNoShm,
}

crate::named!(Setting { Default => "nccl", NoP2p => "nccl-no-p2p", NoShm => "nccl-no-shm", NoP2pNoShm => "nccl-no-p2p-no-shm" });

impl Setting {
    /// The variables it sets.
    pub fn variables(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Setting::Default => vec![],
            Setting::NoP2p => vec![("NCCL_P2P_DISABLE", "1")],
            Setting::NoShm => vec![("NCCL_SHM_DISABLE", "1")],
            Setting::NoP2pNoShm => vec![("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")],
        }
    }
}

/// The NCCL log file of this process inside a run's folder (`NCCL_DEBUG_FILE`, `%p` = pid).
fn log_pattern(out: &Path, rank: u32) -> PathBuf {
    out.join(format!("nccl-log-rank{rank}.txt"))
}

/// Sets, in this process before NCCL starts, the link's variables and NCCL's log (INFO for
/// INIT, GRAPH and ENV into a file in `out` named by `rank`, the launcher's) unless the user
/// sent the log elsewhere, or no launcher said the rank (the ranks' logs would be one file).
pub fn prepare_environment(setting: Setting, out: &Path, rank: Option<u32>) {
    for (key, value) in setting.variables() {
        std::env::set_var(key, value);
    }
    let Some(rank) = rank.filter(|_| std::env::var_os("NCCL_DEBUG_FILE").is_none()) else { return };
    std::env::set_var("NCCL_DEBUG_FILE", log_pattern(out, rank));
    if std::env::var("NCCL_DEBUG").map_or(true, |v| !v.eq_ignore_ascii_case("trace")) {
        std::env::set_var("NCCL_DEBUG", "INFO");
    }
    if std::env::var_os("NCCL_DEBUG_SUBSYS").is_none() {
        std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT,GRAPH,ENV");
    }
}

/// This rank's record, from its environment and NCCL's log so far (NCCL connects channels at
/// the first collective that needs them, so the record is taken again at the end of the run).
pub fn record(comm: &comm::Comm, out: &Path) -> RankRecord {
    let mut variables: Vec<String> =
        std::env::vars().filter(|(k, _)| k.starts_with("NCCL_") && !k.starts_with("NCCL_DEBUG")).map(|(k, v)| format!("{k}={v}")).collect();
    variables.sort();
    let ours = log_pattern(out, comm.rank());
    let (log, unlogged) = match std::env::var_os("NCCL_DEBUG_FILE") {
        Some(file) if Path::new(&file) == ours => (std::fs::read_to_string(&ours).unwrap_or_default(), String::new()),
        Some(file) => {
            (String::new(), format!("NCCL_DEBUG_FILE was set by the user ({}): NCCL's log went there", Path::new(&file).display()))
        }
        None => (String::new(), "NCCL_DEBUG_FILE unset: no log".into()),
    };
    RankRecord {
        rank: comm.rank(),
        gpu: match comm.device() {
            tch::Device::Cuda(i) => i as u32,
            _ => 0,
        },
        library: comm.library().path.clone(),
        version: comm.library().version(),
        variables,
        transports: Transports::parse(&log),
        unlogged,
    }
}

/// `NCCL 2.28.9 (…/libnccl.so.2); NCCL_P2P_DISABLE=1; rank 0 on GPU 0: P2P/CUMEM/read × 24`,
/// for the manifest's transport line.
pub fn describe(records: &[RankRecord]) -> String {
    let Some(first) = records.first() else { return String::new() };
    let mut parts = vec![format!("NCCL {} ({})", first.version, first.library)];
    if !first.variables.is_empty() {
        parts.push(first.variables.join(" "));
    }
    let ranks = records.len() as u32;
    for r in records {
        let what = if r.unlogged.is_empty() { r.transports.describe(ranks) } else { r.unlogged.clone() };
        parts.push(format!("rank {} on GPU {}: {what}", r.rank, r.gpu));
    }
    parts.join("; ")
}

fn record_path(out: &Path, rank: u32) -> PathBuf {
    out.join(format!("nccl-rank{rank}.json"))
}

/// Writes a rank's record into `out` (best effort, as the placement is).
pub fn write_record(out: &Path, record: &RankRecord) {
    crate::manifest::placement::write_rank_record(&record_path(out, record.rank), record);
}

/// The records the ranks of a run wrote into `out`, by rank.
pub fn read_records(out: &Path) -> Vec<RankRecord> {
    let mut found: Vec<RankRecord> = crate::manifest::placement::read_rank_records(out, "nccl-rank", 1 << 20);
    found.sort_by_key(|r| r.rank);
    found
}

/// The in-process probe that decides whether NCCL is there: parlab loads it as a rank would.
pub fn probe() -> crate::gates::Probe {
    let (exit_code, output) = match library::get() {
        Ok(l) => (0, format!("NCCL {} from {}", l.version(), l.path)),
        Err(e) => (1, e.to_string()),
    };
    crate::gates::Probe {
        name: crate::gates::ProbeName::Nccl.name().into(),
        command: PROBE_COMMAND.into(),
        exit_code: Some(exit_code),
        output,
    }
}

/// What the NCCL probe says it ran.
pub const PROBE_COMMAND: &str = "parlab, in process: dlopen(\"libnccl.so.2\"), ncclGetVersion";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_carry_the_nccl_environment() {
        let of = |name: &str| crate::spec::link::Link::from_name(name).nccl();
        assert_eq!(of("nccl"), Some(Setting::Default));
        assert_eq!(of("nccl-no-p2p").unwrap().variables(), vec![("NCCL_P2P_DISABLE", "1")]);
        assert_eq!(of("nccl-no-p2p-no-shm").unwrap().variables().len(), 2);
        assert_eq!(of("mpi-shm"), None);
    }

    #[test]
    fn this_machines_nccl_probe_says_what_it_found() {
        let p = probe();
        if p.succeeded() {
            assert!(p.output.starts_with("NCCL 2."), "{}", p.output);
        } else {
            assert!(p.output.contains("could not be loaded") || p.output.contains("no symbol"), "{}", p.output);
        }
        println!("nccl probe here: {}", p.output);
    }
}
