//! Launching ranks: mpirun/srun command lines, supervision, timeouts, process-group kill.

pub mod cause;
pub mod command;
pub mod failure;
pub mod hosts;
pub mod leftovers;
pub mod signals;
pub mod slurm;
pub mod supervise;
pub mod unreached;

use crate::manifest::caveat::Caveat;
use crate::spec::link::Link;
use crate::spec::RunPlan;
use std::path::Path;
use std::time::{Duration, Instant};

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOutcome {
    /// The exact command line run.
    pub command: String,
    /// More ranks than cores.
    pub oversubscribed: bool,
    /// Seconds from start to exit.
    pub wall_s: f64,
    /// Open MPI's effective transport selection, in words.
    pub transport: String,
    /// How it ended.
    pub end: LaunchEnd,
    /// Ranks of other parlab stores that ran on this machine during the launch (a caveat).
    pub foreign_ranks: Vec<leftovers::RankProcess>,
}

impl LaunchOutcome {
    /// A launch refused before any command was built or run (`why`): no command, no time.
    fn not_started(why: String) -> Self {
        LaunchOutcome {
            command: String::new(),
            oversubscribed: false,
            wall_s: 0.0,
            transport: String::new(),
            end: LaunchEnd::NotStarted(why),
            foreign_ranks: Vec::new(),
        }
    }
}

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchEnd {
    /// The launcher exited 0 and no rank reported an error.
    Succeeded,
    /// Nothing was launched, or the launcher could not be started or waited for.
    NotStarted(String),
    /// The launcher ran and the run failed: which rank, status or signal, its own error line.
    Failed {
        /// The launcher's exit code, when it exited by itself (0 where a rank reported an error).
        exit_code: Option<i32>,
        /// Why, in words.
        why: String,
    },
}

impl LaunchEnd {
    /// The launcher's exit code, when it exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            LaunchEnd::Succeeded => Some(0),
            LaunchEnd::NotStarted(_) => None,
            LaunchEnd::Failed { exit_code, .. } => *exit_code,
        }
    }

    /// Why the run failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        match self {
            LaunchEnd::Succeeded => None,
            LaunchEnd::NotStarted(why) | LaunchEnd::Failed { why, .. } => Some(why),
        }
    }
}

/// Starts the plan's ranks and supervises them until they exit or time out.
///
/// The launcher (mpirun or srun) runs in its own process group with its output in
/// `out/launcher.{stdout,stderr}`; each rank's stderr lands in `out/ranklogs/`. On timeout the
/// group, the launcher's descendants and every rank (from `out/pids/`) get SIGTERM, then SIGKILL.
/// `slots`: this host's physical cores, Open MPI's slots without a hostfile.
pub fn launch(plan: &RunPlan, plan_path: &Path, out: &Path, slots: u32) -> LaunchOutcome {
    let machine = command::Machine::current(slots);
    let exe = parlab_exe();
    let hostfile = match command::planned_hostfile(plan) {
        Ok(text) => text,
        Err(why) => return LaunchOutcome::not_started(why.to_string()),
    };
    let cmd = command::build(plan, hostfile.as_deref(), plan_path, out, &exe, &machine);
    let mut outcome = LaunchOutcome {
        command: cmd.display(),
        oversubscribed: cmd.oversubscribed,
        wall_s: 0.0,
        transport: cmd.transport.clone(),
        end: LaunchEnd::Succeeded,
        foreign_ranks: Vec::new(),
    };
    let limit = match timeout_duration(plan.timeout_s) {
        Ok(limit) => limit,
        Err(why) => {
            outcome.end = LaunchEnd::NotStarted(why.to_string());
            return outcome;
        }
    };
    for dir in [out.join(command::RANK_LOGS), out.join(supervise::PID_DIR)] {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            outcome.end = LaunchEnd::NotStarted(format!("could not create {}: {e}", dir.display()));
            return outcome;
        }
    }
    let start = Instant::now();
    let before = leftovers::rank_processes();
    write_timeline(out, Moment::LaunchStart);
    let ended = supervise::run(&cmd, out, limit);
    outcome.wall_s = start.elapsed().as_secs_f64();
    write_timeline(out, Moment::LaunchEnd);
    outcome.foreign_ranks = foreign_during(before, out);
    outcome.end = match ended {
        Ok(ended) => match failure::explain(&ended, out, plan, &cmd.program, hostfile.as_deref()) {
            None => LaunchEnd::Succeeded,
            Some(why) => {
                let exit_code = match ended {
                    supervise::Ended::Exited(code) => Some(code),
                    _ => None,
                };
                LaunchEnd::Failed { exit_code, why }
            }
        },
        Err(e) => LaunchEnd::NotStarted(e.to_string()),
    };
    outcome
}

/// A plan's `timeout_s` that parlab cannot wait for (a hand-edited plan; validation refuses it).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error(
    "the plan's timeout of {seconds:e} s is not one parlab can wait for (more than 0, at most {} s); nothing was launched",
    crate::spec::fields::MAX_TIMEOUT_S
)]
pub struct BadTimeout {
    /// The plan's `timeout_s`.
    pub seconds: f64,
}

/// A plan's `timeout_s` as a duration: more than 0 and at most the spec's limit (validation
/// refuses anything else; a hand-edited plan gets this reason instead of a panic).
pub fn timeout_duration(seconds: f64) -> Result<Duration, BadTimeout> {
    let max = crate::spec::fields::MAX_TIMEOUT_S;
    match Duration::try_from_secs_f64(seconds) {
        Ok(limit) if seconds > 0.0 && seconds <= max => Ok(limit),
        _ => Err(BadTimeout { seconds }),
    }
}

/// Rank processes of other runs seen at the launch's start or end (its own ranks excluded).
fn foreign_during(mut seen: Vec<leftovers::RankProcess>, out: &Path) -> Vec<leftovers::RankProcess> {
    seen.extend(leftovers::rank_processes());
    let (_, mut foreign) = leftovers::split_by_store(seen, out);
    foreign.sort_by_key(|r| r.pid);
    foreign.dedup_by_key(|r| r.pid);
    foreign
}

/// This binary's path for the ranks. When the file was replaced while parlab runs (a rebuild),
/// Linux reports `PATH (deleted)`; the ranks then start the binary now at PATH.
pub fn parlab_exe() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| "parlab".into());
    match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(path) => path.into(),
        None => exe,
    }
}

/// Seconds since the Unix epoch, for timelines across processes.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A moment of a launch that `out/timeline.txt` records (`ci/bench.sh` reads parlab's overhead
/// from the gaps between them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// The controller starts the launcher.
    LaunchStart,
    /// Rank 0 starts its first timed iteration.
    FirstTimedStart,
    /// Rank 0 ends its last timed iteration.
    LastTimedEnd,
    /// Rank 0 has finalised MPI.
    RankFinalized,
    /// The launcher has exited.
    LaunchEnd,
}

crate::named!(Moment {
    LaunchStart => "launch_start_unix",
    FirstTimedStart => "first_timed_start_unix",
    LastTimedEnd => "last_timed_end_unix",
    RankFinalized => "rank_finalized_unix",
    LaunchEnd => "launch_end_unix",
});

/// Appends `moment unix_seconds` to `out/timeline.txt`.
pub fn write_timeline(out: &Path, moment: Moment) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(out.join("timeline.txt")) {
        let _ = writeln!(f, "{} {:.6}", moment.name(), unix_now());
    }
}

/// Caveats the machine imposes on a run's figures, given where its ranks ran (`ranks` is empty
/// when the ranks recorded nothing, e.g. a launch that failed early: then one host is assumed).
pub fn caveats(plan: &RunPlan, cores: u32, ranks: &[crate::manifest::placement::RankPlacement]) -> Vec<Caveat> {
    let hosts = crate::manifest::placement::by_host(ranks);
    let mut out = Vec::new();
    if hosts.len() > 1 {
        out.push(Caveat::SeveralHosts { placement: crate::manifest::placement::describe(ranks) });
        out.extend(crowded_host(ranks, plan.threads_per_rank));
    } else if plan.layout.world * plan.threads_per_rank > cores {
        out.push(Caveat::Oversubscribed { ranks: plan.layout.world, threads: plan.threads_per_rank, cores, host: None });
    }
    if plan.layout.world > 1 && hosts.len() <= 1 {
        out.push(Caveat::SharedMemory);
    }
    if plan.link == Link::MpiTcp && hosts.len() <= 1 {
        out.push(Caveat::LoopbackTcp);
    }
    out
}

/// Across several hosts, the most crowded host whose ranks × threads exceed the cores its
/// ranks may use between them (this machine's core count says nothing of another host's).
fn crowded_host(ranks: &[crate::manifest::placement::RankPlacement], threads: u32) -> Option<Caveat> {
    crate::manifest::placement::cores_by_host(ranks)
        .into_iter()
        .filter(|&(_, on_host, cores)| on_host.saturating_mul(threads) > cores)
        .max_by_key(|&(_, on_host, cores)| (u64::from(on_host) * u64::from(threads) * 1000) / u64::from(cores.max(1)))
        .map(|(host, on_host, cores)| Caveat::Oversubscribed { ranks: on_host, threads, cores, host: Some(host) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::placement::placed as p;

    #[test]
    fn a_crowded_host_among_several_is_oversubscribed_by_its_own_cores() {
        let over = |ranks, threads, host: &str| Some(Caveat::Oversubscribed { ranks, threads, cores: 2, host: Some(host.into()) });
        let spread = [p(0, "a", "0-1"), p(1, "a", "0-1"), p(2, "b", "0-7"), p(3, "b", "0-7")];
        assert_eq!(crowded_host(&spread, 1), None);
        assert_eq!(crowded_host(&spread, 2), over(2, 2, "a"));
        let crowded = [p(0, "a", "0-1"), p(1, "a", "0-1"), p(2, "a", "0-1"), p(3, "b", "0-7")];
        assert_eq!(crowded_host(&crowded, 1), over(3, 1, "a"));
        assert_eq!(over(3, 1, "a").unwrap().to_string(), "oversubscribed: 3 ranks x 1 threads on 2 cores of host a");
        assert_eq!(crowded_host(&[p(0, "a", ""), p(1, "b", "")], 4), None, "unknown cores say nothing");
    }

    #[test]
    fn a_timeout_outside_the_limit_is_a_reason_not_a_panic() {
        assert_eq!(timeout_duration(90.0), Ok(Duration::from_secs(90)));
        for bad in [1e300, f64::INFINITY, f64::NAN, -5.0, 0.0, 7.0 * 86400.0 + 1.0] {
            let why = timeout_duration(bad).unwrap_err();
            assert!(why.seconds.to_bits() == bad.to_bits(), "{bad}: {why:?}");
            assert!(why.to_string().contains("at most 604800 s"), "{bad}: {why}");
        }
    }

    #[test]
    fn every_moment_the_bench_reads_is_one_the_timeline_records() {
        let bench = include_str!("../../ci/bench.sh");
        let read: Vec<&str> = bench.split("t[\"").skip(1).filter_map(|rest| rest.split('"').next()).collect();
        assert!(read.len() >= 4, "{read:?}");
        for key in read {
            assert!(Moment::from_name(key).is_some(), "ci/bench.sh reads {key}, which no Moment writes");
        }
    }
}
