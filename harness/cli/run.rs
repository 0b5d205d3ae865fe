//! `parlab run`: gates -> skip or launch -> collect -> manifest, run by run; then the register.

use crate::gates::Gates;
use crate::manifest::{self, Launch, Manifest, Status};
use crate::spec::{load_suite, Kind, RunPlan};
use std::path::{Path, PathBuf};

/// What became of one run.
enum Outcome {
    Skipped,
    Written(Status),
}

/// Runs every expanded run in order; exit 1 if any failed, 0 otherwise.
pub fn run(paths: &[PathBuf], force: bool, no_report: bool) -> anyhow::Result<i32> {
    let runs = load_suite(paths)?;
    let dir = manifest::manifests_dir();
    std::fs::create_dir_all(&dir)?;
    eprintln!("parlab: probing the machine (gates)");
    let gates = Gates::probe_machine();
    crate::gates::save(&gates, &dir)?;
    let total = runs.len();
    let mut failed = 0;
    let progress = crate::launch::progress::Progress::new(total as u64);
    for (i, plan) in runs.iter().enumerate() {
        progress.start(i, &plan.label());
        let outcome = run_one(plan, &gates, &dir, force)?;
        let word = match outcome {
            Outcome::Skipped => "skipped (already measured; --force reruns)",
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
    if !no_report {
        super::report::run(&dir, Path::new("reports"))?;
    }
    eprintln!("parlab: {total} runs, {failed} failed; manifests in {}", dir.display());
    Ok(if failed > 0 { crate::exitcode::RUN_FAILED } else { crate::exitcode::OK })
}

fn run_one(plan: &RunPlan, gates: &Gates, dir: &Path, force: bool) -> anyhow::Result<Outcome> {
    let path = Manifest::path_for(dir, &plan.run_id);
    if !force && manifest::read_one(&path).is_ok_and(|m| m.status == Status::Ok) {
        return Ok(Outcome::Skipped);
    }
    let started_at = manifest::now();
    let unmet = gates.unmet(&plan.requires);
    let mut record = base_manifest(plan, gates, &started_at);
    if !unmet.is_empty() {
        record.status = Status::NotRun;
        record.reason = Some(unmet.join("; "));
    } else if needs_gpu(plan) {
        record.status = Status::NotRun;
        record.reason = Some(
            "the machine meets the GPU requirements, but this version has no GPU or NCCL workload: its ranks run on CPUs over MPI, \
             so measuring here would mislabel the result"
                .into(),
        );
    } else if plan.kind == Kind::Model {
        fill_modelled(&mut record, plan);
    } else if !crate::rank::implemented(plan.kind) {
        record.status = Status::NotRun;
        record.reason = Some(format!("workload `{}` is not implemented in this version", plan.kind.name()));
    } else {
        execute(&mut record, plan, dir, gates)?;
    }
    record.finished_at = manifest::now();
    record.write(dir)?;
    Ok(Outcome::Written(record.status))
}

/// Runs that ask for GPUs, NCCL or a host-device link need a GPU workload this version lacks.
fn needs_gpu(plan: &RunPlan) -> bool {
    plan.requires.gpus.is_some() || plan.requires.nccl || plan.requires.host_device_link
}

fn base_manifest(plan: &RunPlan, gates: &Gates, started_at: &str) -> Manifest {
    Manifest::for_plan(plan, gates.fingerprint(), started_at)
}

fn fill_modelled(record: &mut Manifest, plan: &RunPlan) {
    match crate::costmodel::tables_for_plan(plan) {
        Ok(summary) => record.summary = summary,
        Err(e) => {
            record.status = Status::Failed;
            record.reason = Some(e);
        }
    }
}

fn execute(record: &mut Manifest, plan: &RunPlan, dir: &Path, gates: &Gates) -> anyhow::Result<()> {
    let out = Manifest::results_dir(dir, &plan.run_id);
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    if let Err(e) = crate::rank::prepare(plan) {
        record.status = Status::Failed;
        record.reason = Some(format!("preparing the run failed: {e}"));
        return Ok(());
    }
    let plan_path = out.join("plan.json");
    manifest::write_atomic(&plan_path, serde_json::to_string_pretty(plan)?.as_bytes())?;
    let outcome = crate::launch::launch(plan, &plan_path, &out, gates.cores());
    record.caveats = crate::launch::caveats(plan, gates.cores());
    record.launch = Some(Launch {
        command: outcome.command.clone(),
        oversubscribed: outcome.oversubscribed,
        wall_s: outcome.wall_s,
        exit_code: outcome.exit_code,
    });
    if let Some(failure) = outcome.failure {
        record.status = Status::Failed;
        record.reason = Some(failure);
        return Ok(());
    }
    match crate::collect::collect(plan, &out, dir) {
        Ok(c) => {
            record.results = c.results;
            record.summary = c.summary;
            record.answer = c.answer;
        }
        Err(e) => {
            record.status = Status::Failed;
            record.reason = Some(format!("collecting results failed: {e}"));
        }
    }
    Ok(())
}
