//! `parlab run`: gates -> skip or launch -> collect -> manifest, run by run; then the register.

use super::Error;
use crate::gates::Gates;
use crate::launch::{leftovers, signals};
use crate::manifest::caveat::Caveat;
use crate::manifest::lock::StoreLock;
use crate::manifest::{self, Launch, Manifest, Status};
use crate::report::origin;
use crate::spec::{load_suite_limited, Kind, RunPlan};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// What became of one run.
enum Outcome {
    Skipped,
    Written(Status),
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
    let (mut failed, mut finished) = (0, 0);
    let progress = crate::launch::progress::Progress::new(total as u64);
    for (i, plan) in runs.iter().enumerate() {
        if signals::received().is_some() {
            break;
        }
        progress.start(i, &plan.label());
        let outcome = run_one(plan, origins.get(&plan.run_id).map_or(&[][..], Vec::as_slice), &gates, &dir, options.force, &mut notes)?;
        finished += 1;
        let word = match outcome {
            Outcome::Skipped => "skipped (already measured by this measuring code; --force reruns)",
            Outcome::Written(Status::Ok) => "ok",
            Outcome::Written(Status::NotRun) => "not run",
            Outcome::Written(Status::Failed) => {
                failed += 1;
                "FAILED"
            }
        };
        progress.finish(i, &plan.label(), word);
    }
    progress.done();
    if let Some(sig) = signals::received() {
        eprintln!(
            "parlab: interrupted by {} after {finished} of {total} runs; the launch in progress was ended and recorded failed; manifests in {} are kept",
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

fn run_one(
    plan: &RunPlan,
    origins: &[manifest::Origin],
    gates: &Gates,
    dir: &Path,
    force: bool,
    notes: &mut Vec<Caveat>,
) -> anyhow::Result<Outcome> {
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
            "the machine meets the GPU requirements, but this version has no NCCL workload, and this run computes nothing on a GPU: \
             its ranks would run on CPUs over MPI, so measuring here would mislabel the result"
                .into(),
        );
    } else if plan.kind() == Kind::Model {
        fill_modelled(&mut record, plan);
    } else {
        execute(&mut record, plan, dir, gates)?;
        record.caveats.append(notes);
    }
    record.finished_at = manifest::now();
    record.write(dir)?;
    Ok(Outcome::Written(record.status))
}

/// The requested transport, plus what rank 0's Open MPI selected when the ranks recorded it.
fn with_selected(requested: &str, ranks: &[crate::manifest::placement::RankPlacement]) -> String {
    match ranks.first().filter(|r| !r.transport.is_empty()) {
        Some(r) => format!("{requested}; selected by Open MPI in rank 0: {}", r.transport),
        None => requested.to_string(),
    }
}

/// The MPI transport line, then what NCCL chose where the link is NCCL.
fn with_nccl(mpi: String, nccl: &[crate::nccl::RankRecord]) -> String {
    if nccl.is_empty() {
        mpi
    } else {
        format!("{}; MPI (NCCL's bootstrap and barriers): {mpi}", crate::nccl::describe(nccl))
    }
}

/// `rank::prepare`, with a panic (a bug, e.g. in a kernel library) turned into this run's failure
/// so the rest of the suite still runs.
fn prepare_guarded(plan: &RunPlan) -> anyhow::Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crate::rank::prepare(plan))) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
            anyhow::bail!("internal error (a bug in parlab, please report it): {}", what.unwrap_or_else(|| "panic".into()))
        }
    }
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

fn execute(record: &mut Manifest, plan: &RunPlan, dir: &Path, gates: &Gates) -> anyhow::Result<()> {
    let out = Manifest::results_dir(dir, &plan.run_id);
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("cannot remove the old results folder {}", out.display()))?;
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create the results folder {}", out.display()))?;
    if let Err(e) = prepare_guarded(plan) {
        record.status = Status::Failed;
        record.reason = Some(format!("preparing the run failed: {e:#}"));
        return Ok(());
    }
    let plan_path = out.join("plan.json");
    manifest::write_atomic(&plan_path, serde_json::to_string_pretty(plan)?.as_bytes())?;
    let launches = plan.launches.max(1);
    for n in 0..launches {
        if n > 0 && signals::received().is_some() {
            record.status = Status::Failed;
            record.reason = Some(format!("interrupted after {n} of {launches} launches"));
            return Ok(());
        }
        let folder = crate::collect::frames::launch_dir(&out, n);
        std::fs::create_dir_all(&folder).with_context(|| format!("cannot create {}", folder.display()))?;
        let failure = launch_once(record, plan, &plan_path, &folder, gates, n == 0);
        if let Some(failure) = failure {
            record.status = Status::Failed;
            record.reason = Some(if launches == 1 { failure } else { format!("launch {} of {launches}: {failure}", n + 1) });
            return Ok(());
        }
    }
    collect_launches(record, plan, &out, dir, launches);
    Ok(())
}

/// Launches the ranks once into `folder`; the first launch fills `record.launch` and the
/// caveats, later ones add only a note of foreign ranks. Returns why the launch failed, if it did.
fn launch_once(record: &mut Manifest, plan: &RunPlan, plan_path: &Path, folder: &Path, gates: &Gates, first: bool) -> Option<String> {
    let outcome = crate::launch::launch(plan, plan_path, folder, gates.cores());
    let ranks = crate::manifest::placement::read_all(folder);
    let nccl = crate::nccl::read_records(folder);
    if first {
        record.caveats = crate::launch::caveats(plan, gates.cores(), &ranks);
        record.launch = Some(Launch {
            command: outcome.command.clone(),
            oversubscribed: outcome.oversubscribed,
            wall_s: outcome.wall_s,
            exit_code: outcome.exit_code,
            transport: with_nccl(with_selected(&outcome.transport, &ranks), &nccl),
            ranks,
            nccl,
        });
    }
    if !outcome.foreign_ranks.is_empty() {
        record.caveats.push(Caveat::Note {
            text: format!(
                "other parlab ranks ran on this machine during this run (pids {}); its timings may be disturbed",
                leftovers::pid_list(&outcome.foreign_ranks)
            ),
        });
    }
    outcome.failure
}

/// Why a later launch's generated tokens differ from the first launch's, if they do (decode).
fn answers_differ(plan: &RunPlan, out: &Path, launches: u32) -> Option<String> {
    if plan.kind() != Kind::Decode {
        return None;
    }
    let tokens = |n| {
        crate::collect::decode::rank_answers(&crate::collect::frames::launch_dir(out, n))
            .map(|a| a.into_iter().map(|r| r.tokens).collect::<Vec<_>>())
    };
    let first = tokens(0).ok()?;
    (1..launches)
        .find(|&n| tokens(n).ok().as_ref() != Some(&first))
        .map(|n| format!("launch {} of {launches} generated other tokens than launch 1 (the same run must give one answer)", n + 1))
}

/// Collects the records of every launch into the results files, the summary and the answer,
/// and each launch's median per figure.
fn collect_launches(record: &mut Manifest, plan: &RunPlan, out: &Path, dir: &Path, launches: u32) {
    if let Some(why) = answers_differ(plan, out, launches) {
        record.status = Status::Failed;
        record.reason = Some(why);
        return;
    }
    let collected = crate::collect::collect(plan, out, dir).and_then(|c| {
        let stats = crate::nightly::samples::per_launch(&c.summary, &crate::collect::frames::records(out)?, launches);
        Ok((c, stats))
    });
    match collected {
        Ok((c, stats)) => {
            record.results = Some(c.results);
            record.summary = Some(c.summary);
            record.answer = c.answer;
            record.launches = Some(stats);
        }
        Err(e) => {
            record.status = Status::Failed;
            record.reason = Some(format!("collecting results failed: {e}"));
        }
    }
}
