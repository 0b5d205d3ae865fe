//! `parlab run`: gates -> skip or launch -> collect -> manifest, run by run (a run of k launches
//! launched once in each of k rounds of the suite); then the register.

use super::rounds::{self, Launching};
use super::Error;
use crate::gates::Gates;
use crate::launch::progress::Progress;
use crate::launch::{leftovers, signals};
use crate::manifest::caveat::Caveat;
use crate::manifest::lock::StoreLock;
use crate::manifest::{self, Manifest, Status};
use crate::report::origin;
use crate::spec::{load_suite_limited, Kind, RunPlan};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// What became of one run after its first round.
enum Outcome<'a> {
    /// Cached: already measured by this measuring code.
    Skipped,
    /// Decided without launching (NOT_RUN, modelled) or ended after its first launch: its
    /// manifest is written.
    Written(Status),
    /// Launched once; more launches follow in later rounds.
    Launching(Box<Launching<'a>>),
}

/// How `parlab run` was asked to behave.
pub struct RunOptions {
    /// Rerun runs whose manifests already say ok.
    pub force: bool,
    /// Skip rendering the register afterwards.
    pub no_report: bool,
    /// Wait for another controller's lock instead of refusing.
    pub wait: bool,
    /// Refuse a suite that expands to more runs than this.
    pub max_runs: usize,
    /// Run only the runs whose experiment name or label matches one of these globs.
    pub only: Vec<String>,
    /// Where to render the register (None: beside the manifests folder).
    pub out: Option<PathBuf>,
    /// Launches of every launched run, overriding the specs' `launches`.
    pub launches: Option<u32>,
}

/// Runs every expanded run in order; exit 1 if any failed, 0 otherwise, 128+N on signal N.
pub fn run(paths: &[PathBuf], options: &RunOptions) -> super::Result<i32> {
    crate::launch::signals::install();
    crate::spec::weights::allow_cache_writes();
    let suite = load_suite_limited(paths, options.max_runs)?;
    let origins = manifest::origins_by_run(&suite);
    let whole_suite = suite.clone();
    let runs = with_launches(first_of_each_identity(super::select::only(suite, &options.only)?), options.launches);
    let dir = manifest::manifests_dir();
    let out = (!options.no_report).then(|| options.out.clone().unwrap_or_else(|| origin::default_out(&dir)));
    if let Some(out) = &out {
        // Refused before anything runs; the render checks again under the output folder's lock.
        origin::check(out, &dir)?;
    }
    let _lock = StoreLock::acquire(&dir, options.wait).map_err(|e| Error::Usage(e.to_string()))?;
    let mut notes = end_leftovers(&dir);
    eprintln!("parlab: probing the machine (gates)");
    let gates = Gates::probe_machine();
    crate::gates::save(&gates, &dir)?;
    let total = runs.len();
    let mut tally = Tally::default();
    let progress = Progress::new(total as u64);
    let mut launching = Vec::new();
    for (i, plan) in runs.iter().enumerate() {
        if signals::received().is_some() {
            break;
        }
        progress.start(i, &plan.label());
        let run_origins = origins.get(&plan.run_id).map_or(&[][..], Vec::as_slice);
        match run_one(i, plan, run_origins, &gates, &dir, options.force, &mut notes) {
            Ok(Outcome::Launching(run)) if !run.has_ended() => launching.push(*run),
            Ok(Outcome::Launching(run)) => tally.ended(*run, &dir, &progress)?,
            Ok(Outcome::Skipped) => tally.finished(i, plan, None, &progress),
            Ok(Outcome::Written(status)) => tally.finished(i, plan, Some(status), &progress),
            Err(e) => return Err(abandon(launching, e, &dir, &progress, &mut tally).into()),
        }
    }
    run_rounds(launching, &gates, &dir, &progress, &mut tally)?;
    let (failed, finished) = (tally.failed, tally.finished);
    progress.done();
    if let Some(sig) = signals::received() {
        eprintln!(
            "parlab: interrupted by {} after {finished} of {total} runs; the launch in progress was ended and recorded failed, as were the runs whose launches had not all run; manifests in {} are kept",
            signals::name(sig),
            dir.display()
        );
        return Ok(signals::exit_code(sig));
    }
    retire(&dir, &whole_suite)?;
    if let Some(out) = &out {
        super::report::render(&dir, out, true)?;
    }
    eprintln!("parlab: {total} runs, {failed} failed; manifests in {}", dir.display());
    Ok(if failed > 0 { crate::exitcode::RUN_FAILED } else { crate::exitcode::OK })
}

/// Moves the manifests of the suite's experiments that their specs no longer expand to out of
/// the register's way, saying which.
fn retire(dir: &Path, suite: &[RunPlan]) -> anyhow::Result<()> {
    let moved = manifest::retire::retire_superseded(dir, suite)
        .with_context(|| format!("moving superseded manifests into {}", manifest::retire::superseded_dir(dir).display()))?;
    if !moved.is_empty() {
        eprintln!(
            "parlab: {} manifests of runs the specs no longer expand to moved to {} (kept, not in the register): {}",
            moved.len(),
            manifest::retire::superseded_dir(dir).display(),
            moved.join(", ")
        );
    }
    Ok(())
}

/// Ends ranks an earlier controller on this store left running (this controller holds the
/// store's lock, so no live controller owns them); returns the caveat for the next launched run.
fn end_leftovers(dir: &Path) -> Vec<Caveat> {
    let (ours, _) = leftovers::split_by_store(leftovers::rank_processes(), dir);
    if ours.is_empty() {
        return Vec::new();
    }
    let pids: Vec<u32> = ours.iter().map(|r| r.pid).collect();
    eprintln!(
        "parlab: ending {} leftover ranks of an earlier controller on {} (pids {})",
        pids.len(),
        dir.display(),
        leftovers::pid_list(&ours)
    );
    leftovers::end(&pids);
    vec![Caveat::Note {
        text: format!(
            "before this run parlab ended {} leftover ranks of an earlier controller on this store (pids {})",
            pids.len(),
            leftovers::pid_list(&ours)
        ),
    }]
}

/// The runs with `launches` (when given) for every run that launches processes.
fn with_launches(mut runs: Vec<RunPlan>, launches: Option<u32>) -> Vec<RunPlan> {
    if let Some(k) = launches {
        runs.iter_mut().filter(|r| r.kind() != Kind::Model).for_each(|r| r.launches = k);
    }
    runs
}

/// The suite without repeats of a run identity (two experiments of the same content run once;
/// the manifest names both).
fn first_of_each_identity(runs: Vec<RunPlan>) -> Vec<RunPlan> {
    let mut seen = std::collections::BTreeSet::new();
    runs.into_iter().filter(|r| seen.insert(r.run_id.clone())).collect()
}

/// A cached manifest whose origins differ from the suite's (an experiment renamed, or a
/// second one of the same content) is rewritten with the suite's; its figures are kept.
fn refresh_origins(mut cached: Manifest, dir: &Path, origins: &[manifest::Origin]) -> anyhow::Result<()> {
    if cached.origins != origins {
        cached.set_origins(origins);
        cached.write(dir)?;
    }
    Ok(())
}

/// Rounds 2 to k: every run still launching is launched once a round, in suite order, and
/// written once it has ended; on a termination signal, the runs not ended are written failed.
fn run_rounds(mut launching: Vec<Launching<'_>>, gates: &Gates, dir: &Path, progress: &Progress, tally: &mut Tally) -> anyhow::Result<()> {
    let rounds = launching.iter().map(Launching::launches).max().unwrap_or(1);
    for round in 2..=rounds {
        if launching.is_empty() || signals::received().is_some() {
            break;
        }
        progress.round(round, rounds, launching.len());
        rounds::round(&mut launching, gates)?;
        let (ended, going): (Vec<_>, Vec<_>) = launching.into_iter().partition(Launching::has_ended);
        launching = going;
        for run in ended {
            tally.ended(run, dir, progress)?;
        }
    }
    for mut run in launching {
        run.interrupt();
        tally.ended(run, dir, progress)?;
    }
    Ok(())
}

/// Writes the runs still launching failed (their launches so far kept) when the suite stops
/// on `error`; returns the error.
fn abandon(launching: Vec<Launching<'_>>, error: anyhow::Error, dir: &Path, progress: &Progress, tally: &mut Tally) -> anyhow::Error {
    for mut run in launching {
        run.abandon(&format!("{error:#}"));
        if let Err(e) = tally.ended(run, dir, progress) {
            eprintln!("parlab: {e:#}");
        }
    }
    error
}

/// Runs finished and failed so far, as the progress lines report them.
#[derive(Default)]
struct Tally {
    finished: usize,
    failed: usize,
}

impl Tally {
    /// Counts and reports run `index`: skipped (`None`) or written with `status`.
    fn finished(&mut self, index: usize, plan: &RunPlan, status: Option<Status>, progress: &Progress) {
        self.finished += 1;
        let word = match status {
            None => "skipped (already measured by this measuring code; --force reruns)",
            Some(Status::Ok) => "ok",
            Some(Status::NotRun) => "not run",
            Some(Status::Failed) => {
                self.failed += 1;
                "FAILED"
            }
        };
        progress.finish(index, &plan.label(), word);
    }

    /// Writes an ended launched run's manifest, then counts and reports it.
    fn ended(&mut self, mut run: Launching<'_>, dir: &Path, progress: &Progress) -> anyhow::Result<()> {
        run.record.finished_at = manifest::now();
        run.record.write(dir)?;
        self.finished(run.index, run.plan, Some(run.record.status), progress);
        Ok(())
    }
}

/// The first round of one run: skipped when cached, written when it launches nothing (NOT_RUN,
/// modelled), otherwise launched once (the first launched run also gets `notes`).
fn run_one<'a>(
    index: usize,
    plan: &'a RunPlan,
    origins: &[manifest::Origin],
    gates: &Gates,
    dir: &Path,
    force: bool,
    notes: &mut Vec<Caveat>,
) -> anyhow::Result<Outcome<'a>> {
    if !force {
        let path = Manifest::path_for(dir, &plan.run_id);
        let enough = |m: &Manifest| m.launches.as_ref().map_or(1, |l| l.count) >= plan.launches;
        if let Some(cached) = manifest::read_one(&path).ok().filter(|m| crate::manifest::cache::fresh(m) && enough(m)) {
            refresh_origins(cached, dir, origins)?;
            return Ok(Outcome::Skipped);
        }
    }
    let started_at = manifest::now();
    let unmet = gates.unmet(&plan.requires);
    let mut record = base_manifest(plan, gates, &started_at);
    record.set_origins(origins);
    if !unmet.is_empty() {
        record.status = Status::NotRun;
        record.reason = Some(unmet.join("; "));
    } else if needs_gpu(plan) {
        record.status = Status::NotRun;
        record.reason = Some(
            "the machine meets the GPU requirements, but this run's link is MPI and it computes nothing on a GPU (an NCCL link \
             carries NCCL; `device: cuda` computes on the GPU): its ranks would run on CPUs over MPI, so measuring here would \
             mislabel the result"
                .into(),
        );
    } else if plan.kind() == Kind::Model {
        fill_modelled(&mut record, plan);
    } else {
        let mut run = Launching::begin(index, plan, record, dir)?;
        run.launch_next(gates)?;
        run.note(notes);
        return Ok(Outcome::Launching(Box::new(run)));
    }
    record.finished_at = manifest::now();
    record.write(dir)?;
    Ok(Outcome::Written(record.status))
}

/// Runs that ask for NCCL over an MPI link, or for GPUs without computing on one (no `device:
/// cuda`, no host-device copies, no NCCL link), need a GPU workload this version lacks: run on
/// CPUs they would be mislabelled.
fn needs_gpu(plan: &RunPlan) -> bool {
    let over_nccl = crate::nccl::Setting::from_name(&plan.link).is_some();
    (plan.requires.nccl && !over_nccl) || ((plan.requires.gpus.is_some() || plan.requires.host_device_link) && !plan.requires.cuda)
}

fn base_manifest(plan: &RunPlan, gates: &Gates, started_at: &str) -> Manifest {
    Manifest::for_plan(plan, gates.fingerprint(), started_at)
}

fn fill_modelled(record: &mut Manifest, plan: &RunPlan) {
    match crate::costmodel::tables_for_plan(plan) {
        Ok(summary) => record.summary = Some(summary),
        Err(e) => {
            record.status = Status::Failed;
            record.reason = Some(e);
        }
    }
}
