//! The run lifecycle, in the library: for every run of a suite, gates → cache → launch (a run
//! of k launches once in each of k rounds) → collect → manifest, announcing each step as an
//! [`Event`] to a [`Reporter`]. `parlab run` parses its arguments, calls [`run_suite`] with the
//! [`console::Console`] reporter and renders the register; tests call it with a [`Recorder`].

mod aside;
pub mod console;
pub mod events;
mod rounds;

pub use events::{Event, Recorder, Reporter, RunEnd};

use crate::gates::cache::{self, Reprobe};
use crate::gates::Gates;
use crate::launch::{leftovers, signals};
use crate::manifest::caveat::Caveat;
use crate::manifest::lock::StoreLock;
use crate::manifest::{self, Manifest, Outcome, Status};
use crate::spec::{Kind, RunPlan};
use anyhow::Context;
use rounds::Launching;
use std::path::{Path, PathBuf};

/// How the runner treats a suite.
#[derive(Debug, Clone, Default)]
pub struct RunnerOptions {
    /// Rerun runs whose manifests already say ok.
    pub force: bool,
    /// Launches of every launched run, overriding the specs' `launches`.
    pub launches: Option<u32>,
    /// Probe the machine even when the gates cache holds this machine's and boot's probes.
    pub reprobe: bool,
}

/// What a suite came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteEnd {
    /// Every run was taken: `failed` of `runs` failed.
    Finished {
        /// Runs in the suite.
        runs: usize,
        /// Runs that failed.
        failed: usize,
    },
    /// A termination signal stopped the suite after `finished` of `runs` runs.
    Interrupted {
        /// The signal.
        signal: i32,
        /// Runs taken before it.
        finished: usize,
        /// Runs in the suite.
        runs: usize,
    },
}

/// Why the runner could not take the suite.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The gates could not be saved into the store.
    #[error("cannot save the machine's gates into {path}: {source}")]
    Gates {
        /// The gates file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A run's manifest was written by a parlab whose manifest schema this one does not know:
    /// re-measuring would overwrite it.
    #[error("{} was written by another parlab (schema `{schema}`, this one writes {}): `parlab run` will not replace it; run the parlab that wrote it, or move the file away", path.display(), manifest::SCHEMA)]
    ForeignManifest {
        /// The manifest.
        path: std::path::PathBuf,
        /// Its schema tag.
        schema: String,
    },
    /// Writing a manifest or a results folder failed, or a launch could not start.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// Refuses `runs` where one's manifest in `dir` has a schema this parlab does not know (a
/// newer parlab's): its rerun would overwrite it, and a failed one delete its results.
fn refuse_foreign(dir: &Path, runs: &[RunPlan]) -> Result<(), RunnerError> {
    for plan in runs {
        let path = Manifest::path_for(dir, &plan.run_id);
        if let Some(schema) = manifest::foreign_schema(&path) {
            return Err(RunnerError::ForeignManifest { path, schema });
        }
    }
    Ok(())
}

/// Takes `selected` (runs of `suite`, the whole suite as loaded) into the manifests folder
/// the store `held` locks (the caller took its lock: no suite runs into a folder another
/// controller writes): leftover ranks ended, the gates probed, every run's first round,
/// the later rounds, then the manifests of runs `suite` no longer expands to retired.
pub fn run_suite(
    suite: &[RunPlan],
    selected: Vec<RunPlan>,
    held: &StoreLock,
    options: &RunnerOptions,
    reporter: &dyn Reporter,
) -> Result<SuiteEnd, RunnerError> {
    let dir = held.folder();
    let origins = manifest::origins_by_run(suite);
    let runs = with_launches(first_of_each_identity(selected), options.launches);
    refuse_foreign(dir, &runs)?;
    // Leftover ranks first: one still writing into a rerun's partial folder would write into
    // the earlier results put back in its place.
    let mut notes = end_leftovers(dir, reporter);
    for (run_id, how) in aside::settle_all(dir)? {
        let now = match how {
            aside::Settled::Superseded => "moved beside its manifest kept in superseded/ (the rerun failed)",
            _ => "back in place",
        };
        crate::say!(
            "parlab: run {}: a controller stopped during its rerun; its earlier results are {now}",
            crate::identity::short(&run_id)
        );
    }
    let (obtained, file) = cache::obtain(if options.reprobe { Reprobe::Always } else { Reprobe::IfChanged });
    reporter.event(&Event::GatesObtained { notes: &obtained.notes(&file) });
    let gates = obtained.gates;
    if let Some(signal) = signals::received() {
        // Probes a signal cut short would replace the store's record of this machine with one
        // that found nothing.
        return Ok(SuiteEnd::Interrupted { signal, finished: 0, runs: runs.len() });
    }
    crate::gates::save(&gates, dir).map_err(|source| RunnerError::Gates { path: crate::gates::saved_path(dir), source })?;
    let mut suite_run = SuiteRun { dir, gates: &gates, reporter, finished: 0, failed: 0 };
    reporter.event(&Event::SuiteStarted { runs: runs.len() });
    let mut launching = Vec::new();
    for (index, plan) in runs.iter().enumerate() {
        if signals::received().is_some() {
            break;
        }
        let label = plan.label();
        reporter.event(&Event::RunStarted { index, label: &label });
        let run_origins = origins.get(&plan.run_id).map_or(&[][..], Vec::as_slice);
        let taken = suite_run.first_round(index, plan, run_origins, options.force, &mut notes).and_then(|first| match first {
            FirstRound::Launching(run) if !run.has_ended() => {
                launching.push(*run);
                Ok(())
            }
            FirstRound::Launching(run) => suite_run.ended(*run),
            FirstRound::Cached => {
                suite_run.count(index, plan, RunEnd::Cached);
                Ok(())
            }
            FirstRound::Written(status) => {
                suite_run.count(index, plan, status.into());
                Ok(())
            }
        });
        if let Err(e) = taken {
            // The runs still launching are written failed (or put back, where cut short).
            let e = suite_run.abandon(launching, e);
            reporter.event(&Event::SuiteEnded);
            return Err(e.into());
        }
    }
    let rounds = suite_run.later_rounds(launching);
    reporter.event(&Event::SuiteEnded);
    rounds?;
    if let Some(signal) = signals::received() {
        return Ok(SuiteEnd::Interrupted { signal, finished: suite_run.finished, runs: runs.len() });
    }
    retire(dir, suite, reporter)?;
    Ok(SuiteEnd::Finished { runs: runs.len(), failed: suite_run.failed })
}

/// What became of one run after its first round.
enum FirstRound<'a> {
    /// Already measured by this measuring code.
    Cached,
    /// Decided without launching (NOT_RUN, modelled) or ended after its first launch: its
    /// manifest is written (a NOT_RUN decided the same way before is left as it was).
    Written(Status),
    /// Launched once; more launches follow in later rounds.
    Launching(Box<Launching<'a>>),
}

/// Where a run's earlier results folder is while its new manifest is written.
enum Earlier {
    /// Set aside while the run launched (None: there was none).
    Aside(Option<PathBuf>),
    /// In place: the run launched nothing.
    InPlace,
}

/// A suite being taken: where manifests go, the gates, the reporter and the counts so far.
struct SuiteRun<'s> {
    dir: &'s Path,
    gates: &'s Gates,
    reporter: &'s dyn Reporter,
    finished: usize,
    failed: usize,
}

impl SuiteRun<'_> {
    /// Counts run `index` and announces how it ended.
    fn count(&mut self, index: usize, plan: &RunPlan, end: RunEnd) {
        self.finished += 1;
        if end == RunEnd::Failed {
            self.failed += 1;
        }
        self.reporter.event(&Event::RunEnded { index, label: &plan.label(), end });
    }

    /// Writes an ended launched run's manifest, then counts it. A run cut short (interrupted,
    /// abandoned) whose identity has an ok manifest already leaves that manifest and its
    /// results as they were: stopping a `--force` rerun loses no measurement.
    fn ended(&mut self, run: Launching<'_>) -> anyhow::Result<()> {
        let (index, plan) = (run.index, run.plan);
        if run.cut_short() && self.worth_keeping(plan) && run.restore_previous()? {
            crate::say!("parlab: {} was cut short; its earlier manifest and results are kept", plan.label());
            self.count(index, plan, RunEnd::Failed);
            return Ok(());
        }
        let previous = run.previous_folder();
        let record = run.finish();
        self.write(plan, &record, Earlier::Aside(previous))?;
        self.count(index, plan, record.status().into());
        Ok(())
    }

    /// Writes `record`, the new manifest of `plan`. Where it is not ok and the stored one is worth keeping, the
    /// register says so and nothing is lost ([`Self::replace_kept`]). Otherwise a results folder
    /// set aside is removed once the new manifest stands.
    fn write(&self, plan: &RunPlan, record: &Manifest, earlier: Earlier) -> anyhow::Result<()> {
        if record.status() != Status::Ok && self.worth_keeping(plan) {
            return self.replace_kept(plan, record, earlier);
        }
        if let Err(e) = record.write(self.dir) {
            let aside = match &earlier {
                Earlier::Aside(folder) => folder.as_deref(),
                Earlier::InPlace => None,
            };
            return Err(aside::put_back(e.into(), aside, &Manifest::results_dir(self.dir, &plan.run_id)));
        }
        if let Earlier::Aside(folder) = earlier {
            // A folder left aside is removed by the next run's settling.
            if let Err(e) = aside::discard(folder) {
                crate::say!("warning: {e:#}; the next `parlab run` removes it");
            }
        }
        Ok(())
    }

    /// Writes `record` in place of the stored ok manifest of `plan`, which moves into
    /// `superseded/` with its results folder: the folder is set aside first (where it is still in
    /// place), then the manifest copied, the new one written, and the folder moved; a controller
    /// stopped at any point leaves what the next run's settling puts back or moves there.
    fn replace_kept(&self, plan: &RunPlan, record: &Manifest, earlier: Earlier) -> anyhow::Result<()> {
        let folder = match earlier {
            Earlier::Aside(folder) => folder,
            Earlier::InPlace => aside::set_aside(self.dir, &plan.run_id)?,
        };
        let written = manifest::retire::keep_replaced(self.dir, &plan.run_id)
            .with_context(|| format!("keeping the earlier manifest of {} in superseded/", plan.label()))
            .and_then(|kept| match record.write(self.dir) {
                Ok(_) => Ok(kept),
                Err(e) => {
                    // The stored manifest stays the earlier one: its copy would only repeat it.
                    let _ = std::fs::remove_file(&kept);
                    Err(e.into())
                }
            });
        let kept = match written {
            Ok(kept) => kept,
            Err(e) => return Err(aside::put_back(e, folder.as_deref(), &Manifest::results_dir(self.dir, &plan.run_id))),
        };
        let how = if record.status() == Status::Failed { "failed" } else { "was recorded NOT_RUN" };
        let into = kept.parent().unwrap_or(self.dir).display();
        let moved = match folder.filter(|p| p.is_dir()).map(|p| aside::supersede(&p, self.dir, &plan.run_id)) {
            None => "manifest is",
            Some(Ok(())) => "manifest and results are",
            Some(Err(e)) => {
                crate::say!("warning: {e:#}; the next `parlab run` moves it");
                "manifest is"
            }
        };
        crate::say!("parlab: {} {how}; its earlier ok {moved} kept in {into}", plan.label());
        Ok(())
    }

    /// Whether the manifests folder holds a manifest of `plan`'s identity that a failed rerun
    /// must not replace unkept: an ok one, or one this parlab cannot read (corrupt, implausible,
    /// missing its results), which may still hold figures. An older parlab's manifest is
    /// re-measured, as documented, and a failed or NOT_RUN one holds nothing to lose.
    fn worth_keeping(&self, plan: &RunPlan) -> bool {
        let path = Manifest::path_for(self.dir, &plan.run_id);
        match manifest::read_one(&path) {
            Ok(m) => m.status() == Status::Ok,
            Err(manifest::ReadError::OlderSchema { .. }) => false,
            Err(_) => path.is_file(),
        }
    }

    /// The first round of one run: cached, written when it launches nothing (NOT_RUN,
    /// modelled), otherwise launched once (the first launched run also gets `notes`).
    fn first_round<'a>(
        &mut self,
        index: usize,
        plan: &'a RunPlan,
        origins: &[manifest::Origin],
        force: bool,
        notes: &mut Vec<Caveat>,
    ) -> anyhow::Result<FirstRound<'a>> {
        let stored = manifest::read_one(&Manifest::path_for(self.dir, &plan.run_id)).ok();
        if let Some(cached) = stored.as_ref().filter(|m| !force && covers(plan, m)) {
            refresh_origins(cached, self.dir, origins)?;
            return Ok(FirstRound::Cached);
        }
        let started_at = manifest::now();
        let Some(outcome) = self.decided(plan) else {
            let mut run = Launching::begin(index, plan, origins, self.gates.fingerprint(), started_at, self.dir)?;
            if let Err(e) = self.launch(&mut run) {
                // The launch could not start: the suite stops, and the run's earlier results go back.
                if let Err(back) = run.restore_previous() {
                    return Err(anyhow::anyhow!("{e:#}; and its earlier results could not be put back: {back:#}"));
                }
                return Err(e);
            }
            run.note(notes);
            return Ok(FirstRound::Launching(Box::new(run)));
        };
        let mut record = Manifest::for_plan(plan, self.gates.fingerprint(), &started_at, outcome);
        record.set_origins(origins);
        record.finished_at = manifest::now();
        // A NOT_RUN decided the same way before is left as written.
        if !stored.is_some_and(|s| manifest::cache::same_not_run(&s, &record)) {
            self.write(plan, &record, Earlier::InPlace)?;
        }
        Ok(FirstRound::Written(record.status()))
    }

    /// How a run ends without launching (NOT_RUN: a requirement unmet or no GPU workload;
    /// modelled: the cost model's tables), or None for a run to launch.
    fn decided(&self, plan: &RunPlan) -> Option<Outcome> {
        let unmet = self.gates.unmet(&plan.requires);
        if !unmet.is_empty() {
            Some(Outcome::NotRun { reason: unmet.join("; ") })
        } else if needs_gpu(plan) {
            Some(Outcome::NotRun { reason: GPU_WORKLOAD_MISSING.into() })
        } else if !plan.kind().launches_ranks() {
            Some(arithmetic(plan))
        } else {
            None
        }
    }

    /// Launches `run` once more, announcing it.
    fn launch(&self, run: &mut Launching<'_>) -> anyhow::Result<()> {
        if !run.has_ended() {
            let label = run.plan.label();
            self.reporter.event(&Event::Launched { index: run.index, label: &label, launch: run.done() + 1, launches: run.launches() });
        }
        run.launch_next(self.gates)
    }

    /// Rounds 2 to k: every run still launching is launched once a round, in suite order, and
    /// written once it has ended; on a termination signal, the runs not ended are written failed.
    fn later_rounds(&mut self, mut launching: Vec<Launching<'_>>) -> anyhow::Result<()> {
        let rounds = launching.iter().map(Launching::launches).max().unwrap_or(1);
        for round in 2..=rounds {
            if launching.is_empty() || signals::received().is_some() {
                break;
            }
            self.reporter.event(&Event::RoundStarted { round, rounds, runs: launching.len() });
            let mut stopped = None;
            for run in launching.iter_mut() {
                if signals::received().is_some() {
                    break;
                }
                if let Err(e) = self.launch(run) {
                    stopped = Some(e);
                    break;
                }
            }
            if let Some(error) = stopped {
                return Err(self.abandon(launching, error));
            }
            let (ended, going): (Vec<_>, Vec<_>) = launching.into_iter().partition(Launching::has_ended);
            launching = going;
            // Every ended run is written, though one of them cannot be: their measurements are done.
            let mut first_error = None;
            for run in ended {
                if let Err(error) = self.ended(run) {
                    first_error.get_or_insert(error);
                }
            }
            if let Some(error) = first_error {
                return Err(self.abandon(launching, error));
            }
        }
        let mut first_error = None;
        for mut run in launching {
            run.interrupt();
            if let Err(e) = self.ended(run) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes the runs still launching failed (their launches so far kept) when the suite stops
    /// on `error`; returns the error.
    fn abandon(&mut self, launching: Vec<Launching<'_>>, error: anyhow::Error) -> anyhow::Error {
        for mut run in launching {
            run.abandon(&format!("{error:#}"));
            if let Err(e) = self.ended(run) {
                crate::say!("parlab: {e:#}");
            }
        }
        error
    }
}

/// The NOT_RUN reason of a run whose GPU requirements are met but which computes nothing on a GPU.
const GPU_WORKLOAD_MISSING: &str =
    "the machine meets the GPU requirements, but this run's link is MPI and it computes nothing on a GPU (an NCCL link \
     carries NCCL; `device: cuda` computes on the GPU): its ranks would run on CPUs over MPI, so measuring here would \
     mislabel the result";

/// Whether the run's stored manifest `m` stands for it: measured by this measuring code with
/// enough launches.
fn covers(plan: &RunPlan, m: &Manifest) -> bool {
    manifest::cache::fresh(m) && m.launches().map_or(1, |l| l.count) >= plan.launches
}

/// Moves the manifests of the suite's experiments that their specs no longer expand to out of
/// the register's way, announcing which.
fn retire(dir: &Path, suite: &[RunPlan], reporter: &dyn Reporter) -> anyhow::Result<()> {
    let into = manifest::retire::superseded_dir(dir);
    let moved =
        manifest::retire::retire_superseded(dir, suite).with_context(|| format!("moving superseded manifests into {}", into.display()))?;
    if !moved.is_empty() {
        reporter.event(&Event::Retired { runs: &moved, into: &into });
    }
    Ok(())
}

/// Ends ranks an earlier controller on this store left running (this controller holds the
/// store's lock, so no live controller owns them); returns the caveat for the next launched run.
fn end_leftovers(dir: &Path, reporter: &dyn Reporter) -> Vec<Caveat> {
    let (ours, _) = leftovers::split_by_store(leftovers::rank_processes(), dir);
    if ours.is_empty() {
        return Vec::new();
    }
    let pids: Vec<u32> = ours.iter().map(|r| r.pid).collect();
    reporter.event(&Event::LeftoversEnded { pids: &pids, store: dir });
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
        runs.iter_mut().filter(|r| r.kind().launches_ranks()).for_each(|r| r.launches = k);
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
fn refresh_origins(cached: &Manifest, dir: &Path, origins: &[manifest::Origin]) -> anyhow::Result<()> {
    if cached.origins != origins {
        let mut renamed = cached.clone();
        renamed.set_origins(origins);
        renamed.write(dir)?;
    }
    Ok(())
}

/// Runs that ask for NCCL over an MPI link, or for GPUs without computing on one (no `device:
/// cuda`, no host-device copies, no NCCL link), need a GPU workload this version lacks: run on
/// CPUs they would be mislabelled.
fn needs_gpu(plan: &RunPlan) -> bool {
    let over_nccl = plan.link.nccl().is_some();
    (plan.requires.nccl && !over_nccl) || ((plan.requires.gpus.is_some() || plan.requires.host_device_link) && !plan.requires.cuda)
}

/// How a run of arithmetic ends: ok with what it computed (the cost model's tables for
/// `kind: model`, the advice for `kind: advise`), or failed with why it could not be.
fn arithmetic(plan: &RunPlan) -> Outcome {
    let computed = match plan.kind() {
        // A spec's question: its failure names the spec's keys, as `validate` would.
        Kind::Advise => crate::advise::answer_plan(plan).map_err(|e| e.in_spec_line()),
        _ => crate::costmodel::tables_for_plan(plan).map_err(|e| e.to_string()),
    };
    match computed {
        Ok(summary) => Outcome::computed(summary),
        Err(reason) => Outcome::Failed { reason, launch: None },
    }
}
