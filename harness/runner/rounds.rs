//! A suite's launches in rounds (asv's `rounds`): a run of k launches is launched once
//! per round, every launched run of the suite in each round, so a run's launches are spread
//! over the whole suite's time and a slow drift of the machine shows in every run's
//! launch-to-launch spread instead of shifting one run. A [`Launching`] run holds what its
//! manifest will say between its first and its last launch; the manifest is built, with the
//! run's [`Outcome`], once it has ended.

use super::aside;
use crate::gates::Gates;
use crate::launch::leftovers;
use crate::manifest::caveat::Caveat;
use crate::manifest::machine::Fingerprint;
use crate::manifest::{self, Launch, Manifest, Origin, Outcome};
use crate::spec::{Kind, RunPlan};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// A launched run between its first and its last launch.
pub(super) struct Launching<'a> {
    /// The run's position in the suite (for the progress lines).
    pub index: usize,
    /// The run.
    pub plan: &'a RunPlan,
    /// The experiments its identity came from.
    origins: Vec<Origin>,
    /// The machine it runs on.
    machine: Fingerprint,
    /// When its first round started.
    started_at: String,
    /// The first launch's details, once it launched.
    launch: Option<Launch>,
    /// Caveats on its figures (the first launch sets them; notes are added).
    caveats: Vec<Caveat>,
    /// The manifests folder.
    dir: PathBuf,
    /// Its results folder (the first launch's records; `launch-N` folders for the others).
    out: PathBuf,
    /// The plan the ranks read.
    plan_path: PathBuf,
    /// Launches done so far.
    done: u32,
    /// How the run ended, once it has (failed, or collected after its last launch).
    ended: Option<Outcome>,
    /// The stored manifest's results folder, set aside until this run's manifest replaces it.
    previous: Option<PathBuf>,
    /// Whether the run was interrupted or abandoned before its last launch ended.
    cut_short: bool,
}

impl<'a> Launching<'a> {
    /// Sets the run's earlier results folder aside ([`super::aside`]), makes an empty one and
    /// writes its plan (for a run of `origins` on `machine`, started at `started_at`); a run whose
    /// preparation failed (weights, a panic in a kernel library) has ended failed before its
    /// first launch.
    pub fn begin(
        index: usize,
        plan: &'a RunPlan,
        origins: &[Origin],
        machine: Fingerprint,
        started_at: String,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let out = Manifest::results_dir(dir, &plan.run_id);
        let previous = aside::set_aside(dir, &plan.run_id)?;
        let plan_path = out.join("plan.json");
        let unprepared = match start(plan, &out, &plan_path) {
            Ok(unprepared) => unprepared,
            // The run cannot start: its earlier results go back before the error stops the suite.
            Err(e) => {
                if let Some(p) = &previous {
                    aside::restore(p, &out)?;
                }
                return Err(e);
            }
        };
        // A preparation a termination signal stopped was cut short, not failed by the run.
        let cut_short = unprepared.is_some() && crate::launch::signals::received().is_some();
        let ended = unprepared.map(|e| Outcome::Failed { reason: format!("preparing the run failed: {e:#}"), launch: None });
        let (origins, launch, caveats) = (origins.to_vec(), None, Vec::new());
        let dir = dir.to_path_buf();
        Ok(Launching {
            index,
            plan,
            origins,
            machine,
            started_at,
            launch,
            caveats,
            dir,
            out,
            plan_path,
            done: 0,
            ended,
            previous,
            cut_short,
        })
    }

    /// Whether the run was interrupted or abandoned before its last launch ended (its manifest
    /// would say so instead of a measurement).
    pub fn cut_short(&self) -> bool {
        self.cut_short || self.ended.is_none()
    }

    /// Puts the earlier results folder back in place of this run's (a run cut short keeps the
    /// measurement it was to replace); false where there was none.
    pub fn restore_previous(&self) -> anyhow::Result<bool> {
        let Some(previous) = self.previous.as_ref().filter(|p| p.is_dir()) else { return Ok(false) };
        aside::restore(previous, &self.out)?;
        Ok(true)
    }

    /// The earlier results folder set aside, if there was one.
    pub fn previous_folder(&self) -> Option<PathBuf> {
        self.previous.clone()
    }

    /// The launches the run asks for (at least 1).
    pub fn launches(&self) -> u32 {
        self.plan.launches.max(1)
    }

    /// Launches done so far.
    pub fn done(&self) -> u32 {
        self.done
    }

    /// Whether the run has ended: failed, or collected after its last launch.
    pub fn has_ended(&self) -> bool {
        self.ended.is_some()
    }

    /// The run's manifest, finished now: how it ended (a run not ended reads as interrupted).
    pub fn finish(mut self) -> Manifest {
        let outcome = match self.ended.take() {
            Some(outcome) => outcome,
            None => Outcome::Failed { reason: self.interrupted(), launch: self.launch.take() },
        };
        let mut record = Manifest::for_plan(self.plan, self.machine, &self.started_at, outcome);
        record.set_origins(&self.origins);
        record.caveats = self.caveats;
        record.finished_at = manifest::now();
        record
    }

    /// Launches the run once more (nothing once it has ended); a failed launch ends it failed,
    /// the last launch ends it collected.
    pub fn launch_next(&mut self, gates: &Gates) -> anyhow::Result<()> {
        if self.has_ended() {
            return Ok(());
        }
        let (n, launches) = (self.done, self.launches());
        let folder = crate::collect::frames::launch_dir(&self.out, n);
        std::fs::create_dir_all(&folder).with_context(|| format!("cannot create {}", folder.display()))?;
        let failure = launch_once(&mut self.launch, &mut self.caveats, self.plan, &self.plan_path, &folder, gates, n == 0);
        self.done += 1;
        if let Some(failure) = failure {
            // A launch a termination signal ended was cut short, not failed by the run.
            self.cut_short = crate::launch::signals::received().is_some();
            self.fail(if launches == 1 { failure } else { format!("launch {} of {launches}: {failure}", n + 1) });
        } else if self.done == launches {
            self.ended = Some(collect_launches(self.launch.take(), self.plan, &self.out, &self.dir, launches));
        }
        Ok(())
    }

    /// Ends a run the controller was interrupted before it could finish: failed, saying how many
    /// of its launches ran (their records stay in the results folder).
    pub fn interrupt(&mut self) {
        if !self.has_ended() {
            self.cut_short = true;
            self.fail(self.interrupted());
        }
    }

    /// The reason of a run interrupted now.
    fn interrupted(&self) -> String {
        format!("interrupted after {} of {} launches", self.done, self.launches())
    }

    /// Ends a run the suite could not go on with (`why`: the error that stopped it): failed,
    /// saying how many of its launches ran.
    pub fn abandon(&mut self, why: &str) {
        if !self.has_ended() {
            self.cut_short = true;
            self.fail(format!("parlab stopped after {} of {} launches: {why}", self.done, self.launches()));
        }
    }

    /// Adds `notes` to the run's caveats (after its first launch, which sets them).
    pub fn note(&mut self, notes: &mut Vec<Caveat>) {
        self.caveats.append(notes);
    }

    fn fail(&mut self, reason: String) {
        self.ended = Some(Outcome::Failed { reason, launch: self.launch.take() });
    }
}

/// Makes the run's results folder `out`, prepares the run (weights, reference answer) and writes
/// the plan its ranks read: `Ok(Some(e))` where the preparation failed (the run's own failure),
/// an error where the folder or the plan could not be written.
fn start(plan: &RunPlan, out: &Path, plan_path: &Path) -> anyhow::Result<Option<anyhow::Error>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create the results folder {}", out.display()))?;
    if let Err(e) = prepare_guarded(plan) {
        return Ok(Some(e));
    }
    manifest::write_atomic(plan_path, serde_json::to_string_pretty(plan)?.as_bytes())?;
    Ok(None)
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

/// Launches the ranks once into `folder`; the first launch fills `launch` and `caveats`, later
/// ones add only a note of foreign ranks. Returns why the launch failed, if it did.
fn launch_once(
    launch: &mut Option<Launch>,
    caveats: &mut Vec<Caveat>,
    plan: &RunPlan,
    plan_path: &Path,
    folder: &Path,
    gates: &Gates,
    first: bool,
) -> Option<String> {
    let outcome = crate::launch::launch(plan, plan_path, folder, gates.physical_cores());
    let ranks = crate::manifest::placement::read_all(folder);
    let nccl = crate::nccl::read_records(folder);
    if first {
        *caveats = crate::launch::caveats(plan, gates.cores(), &ranks);
        *launch = Some(Launch {
            command: outcome.command.clone(),
            oversubscribed: outcome.oversubscribed,
            wall_s: outcome.wall_s,
            exit_code: outcome.end.exit_code(),
            transport: with_nccl(with_selected(&outcome.transport, &ranks), &nccl),
            ranks,
            nccl,
        });
    }
    if !outcome.foreign_ranks.is_empty() {
        caveats.push(Caveat::Note {
            text: format!(
                "other parlab ranks ran on this machine during this run (pids {}); its timings may be disturbed",
                leftovers::pid_list(&outcome.foreign_ranks)
            ),
        });
    }
    outcome.end.failure().map(str::to_string)
}

/// Why a later launch's generated tokens differ from the first launch's, if they do (decode).
fn answers_differ(plan: &RunPlan, out: &Path, launches: u32) -> Option<String> {
    if plan.kind() != Kind::Decode {
        return None;
    }
    let tokens = |n| {
        crate::collect::decode::rank_answers(&crate::collect::frames::launch_dir(out, n))
            .map(|a| a.into_iter().map(|r| r.generated.map(|g| g.tokens)).collect::<Vec<_>>())
    };
    let first = tokens(0).ok()?;
    (1..launches)
        .find(|&n| tokens(n).ok().as_ref() != Some(&first))
        .map(|n| format!("launch {} of {launches} generated other tokens than launch 1 (the same run must give one answer)", n + 1))
}

/// How a run that launched every time ended: ok with the results files, the summary, the
/// answer and each launch's median per figure collected from every launch's records, or failed.
fn collect_launches(launch: Option<Launch>, plan: &RunPlan, out: &Path, dir: &Path, launches: u32) -> Outcome {
    if let Some(reason) = answers_differ(plan, out, launches) {
        return Outcome::Failed { reason, launch };
    }
    let collected = crate::collect::collect(plan, out, dir).and_then(|c| {
        let stats = crate::nightly::samples::per_launch(&c.summary, &crate::collect::frames::records(out)?, launches);
        Ok((c, stats))
    });
    match collected {
        Ok((c, stats)) => {
            let (summary, answer) = (Box::new(c.summary), c.answer.map(Box::new));
            Outcome::Ok { launch, results: Some(c.results), summary, answer, launches: Some(stats) }
        }
        Err(e) => Outcome::Failed { reason: format!("collecting results failed: {e}"), launch },
    }
}
