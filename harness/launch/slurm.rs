//! The Slurm job or step an `srun` launch started, so that a stopped launch can end its tasks
//! on every node: srun killed after the grace leaves a step's tasks running on nodes this
//! machine cannot signal, and `scancel` asks Slurm itself to end them (SIGTERM, then SIGKILL
//! after the cluster's KillWait): the step inside parlab's allocation, srun's own job outside one.

use std::path::Path;
use std::time::Duration;

/// File (inside a run's results folder) where each rank started by srun writes its step.
pub const STEP_FILE: &str = "slurm-step";

/// The longest `scancel` is waited for before it is killed.
pub const SCANCEL_LIMIT: Duration = Duration::from_secs(10);

/// Step ids Slurm gives to steps no launch starts (the batch script, the extern step, …):
/// never cancelled from here.
const SPECIAL_STEPS: u64 = 0xFFFF_FFF0;

/// A Slurm job step, `JOB.STEP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlurmStep {
    /// The job id.
    pub job: u64,
    /// The step id within the job.
    pub step: u64,
}

impl std::fmt::Display for SlurmStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.job, self.step)
    }
}

impl SlurmStep {
    /// The step of this process from `SLURM_JOB_ID` and `SLURM_STEP_ID` read through `var`;
    /// None outside a step or in a special one (the batch script's).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<SlurmStep> {
        let id = |name: &str| var(name)?.trim().parse::<u64>().ok();
        let step = SlurmStep { job: id("SLURM_JOB_ID")?, step: id("SLURM_STEP_ID")? };
        (step.step < SPECIAL_STEPS).then_some(step)
    }

    /// `JOB.STEP` as written in [`STEP_FILE`]; None for anything else.
    pub fn parse(text: &str) -> Option<SlurmStep> {
        let (job, step) = text.trim().split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let step = SlurmStep { job: job.parse().ok().filter(|_| digits(job))?, step: step.parse().ok().filter(|_| digits(step))? };
        (step.step < SPECIAL_STEPS).then_some(step)
    }
}

/// A rank's side: writes this process's step to `out/slurm-step` when it runs in one (every
/// rank of a step writes the same text, each through a file of its own renamed into place, so a
/// reader never sees a half-written one). Best effort: without it a stop ends the local ranks
/// only, or srun's own allocation where srun named it.
pub fn write_step(out: &Path) {
    if let Some(step) = SlurmStep::from_env(|k| std::env::var(k).ok()) {
        write(out, step);
    }
}

/// Writes `step` to `out/slurm-step` through a file of this process's own, renamed into place.
fn write(out: &Path, step: SlurmStep) {
    let mine = out.join(format!("{STEP_FILE}.{}", std::process::id()));
    if std::fs::write(&mine, format!("{step}\n")).is_err() || std::fs::rename(&mine, out.join(STEP_FILE)).is_err() {
        let _ = std::fs::remove_file(&mine);
    }
}

/// The step the ranks wrote to `out/slurm-step`, if a whole one is there.
fn written_step(out: &Path) -> Option<SlurmStep> {
    SlurmStep::parse(&std::fs::read_to_string(out.join(STEP_FILE)).ok()?)
}

/// What a stopped srun launch asks Slurm to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The ranks' job step, inside the allocation parlab itself runs in (only the step).
    Step(SlurmStep),
    /// The job srun allocated for this launch alone (parlab runs outside any allocation): all of
    /// it, the allocation with its tasks, whether or not they had started.
    Job(u64),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Step(step) => write!(f, "{step}"),
            Target::Job(job) => write!(f, "{job}"),
        }
    }
}

/// The job srun's own messages name (`srun: job 12 queued and waiting for resources`, `srun: job
/// 12 has been allocated resources`, `Pending job allocation 12`), if any.
pub fn srun_job(launcher_stderr: &str) -> Option<u64> {
    launcher_stderr.lines().find_map(|line| {
        let line = line.trim().strip_prefix("srun: ")?;
        let rest = line.strip_prefix("job ").or_else(|| line.strip_prefix("Pending job allocation "))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// What to cancel, given the step the ranks wrote, srun's stderr, and parlab's own job and step
/// (its environment): nothing of parlab's own step; inside parlab's allocation the ranks' step
/// only; outside any allocation the whole job srun allocated (read from the ranks' step, or from
/// srun's messages where no rank started).
pub fn target(written: Option<SlurmStep>, launcher_stderr: &str, own_job: Option<u64>, own_step: Option<SlurmStep>) -> Option<Target> {
    match written {
        Some(step) if Some(step) == own_step => None,
        Some(step) if own_job.is_none() => Some(Target::Job(step.job)),
        Some(step) => Some(Target::Step(step)),
        None => srun_job(launcher_stderr).filter(|job| own_job.is_none_or(|own| own != *job)).map(Target::Job),
    }
}

/// What a stopped launch did to its ranks' Slurm job or step.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// What was cancelled.
    pub target: Target,
    /// Whether scancel accepted it (Err: why it may still run).
    pub outcome: Result<(), String>,
}

impl Cancelled {
    /// In words, for a failure reason.
    pub fn describe(&self) -> String {
        let what = match self.target {
            Target::Step(step) => format!("Slurm step {step}"),
            Target::Job(job) => format!("Slurm job {job}, which srun allocated for this launch,"),
        };
        match &self.outcome {
            Ok(()) => format!("cancelled {what} with scancel (its tasks on every node)"),
            Err(why) => format!("could not cancel {what} whose tasks on other nodes may still run: {why}"),
        }
    }
}

/// Cancels what the srun launch writing into `out` started ([`target`]), if anything is known.
pub fn cancel_launched(out: &Path) -> Option<Cancelled> {
    let written = written_step(out);
    let stderr = crate::files::read_log(&out.join("launcher.stderr")).unwrap_or_default();
    let own_job = std::env::var("SLURM_JOB_ID").ok().and_then(|j| j.trim().parse().ok());
    let target = target(written, &stderr, own_job, SlurmStep::from_env(|k| std::env::var(k).ok()))?;
    Some(Cancelled { target, outcome: cancel(target) })
}

/// Runs `scancel --quiet TARGET` as [`crate::gates::run_bounded`] runs a command (its process
/// group killed past [`SCANCEL_LIMIT`]), to its end even while parlab is being stopped by a
/// signal: the stop is what needs it. Err says why the target may still run.
pub fn cancel(target: Target) -> Result<(), String> {
    let on_signal = crate::gates::OnSignal::Finish;
    let ran = crate::gates::run_bounded("scancel", &format!("scancel --quiet {target}"), SCANCEL_LIMIT, on_signal);
    match ran.exit_code {
        Some(0) => Ok(()),
        Some(code) => Err(format!("scancel {target} exited with status {code}: {}", ran.output)),
        None => Err(format!("scancel {target} did not finish within {} s: {}", SCANCEL_LIMIT.as_secs(), ran.output)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_read_from_slurms_variables_and_its_file_and_special_steps_are_left_alone() {
        let env = |job: &'static str, step: &'static str| {
            move |k: &str| match k {
                "SLURM_JOB_ID" => Some(job.to_string()),
                "SLURM_STEP_ID" => Some(step.to_string()),
                _ => None,
            }
        };
        assert_eq!(SlurmStep::from_env(env("12", "0")), Some(SlurmStep { job: 12, step: 0 }));
        assert_eq!(SlurmStep::from_env(env("12", "0")).unwrap().to_string(), "12.0");
        assert_eq!(SlurmStep::from_env(env("12", "4294967294")), None, "the batch script's step");
        assert_eq!(SlurmStep::from_env(env("12", "batch")), None);
        assert_eq!(SlurmStep::from_env(|_| None), None, "outside Slurm");
        assert_eq!(SlurmStep::parse("8.3\n"), Some(SlurmStep { job: 8, step: 3 }));
        for bad in ["8", "8.", ".3", "8.3.1", "-8.3", "+8.3", "8.x", "8 .3", "8.4294967295"] {
            assert_eq!(SlurmStep::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_stop_cancels_the_ranks_step_inside_parlabs_allocation_and_srun_s_own_job_outside_any() {
        let step = |job, step| Some(SlurmStep { job, step });
        // Outside any allocation srun allocated job 41 for this launch: all of it.
        assert_eq!(target(step(41, 0), "", None, None), Some(Target::Job(41)));
        // Inside parlab's allocation (job 41): the ranks' step only, never parlab's own step.
        assert_eq!(target(step(41, 2), "", Some(41), step(41, 1)), Some(Target::Step(SlurmStep { job: 41, step: 2 })));
        assert_eq!(target(step(41, 1), "", Some(41), step(41, 1)), None, "parlab's own step");
        // No rank started (srun queued): the job srun named, unless it is parlab's own.
        let queued = "srun: job 57 queued and waiting for resources\n";
        assert_eq!(target(None, queued, None, None), Some(Target::Job(57)));
        assert_eq!(target(None, queued, Some(57), None), None, "parlab's own allocation");
        assert_eq!(target(None, "srun: error: Unable to allocate resources\n", None, None), None, "nothing named");
        assert_eq!(srun_job("srun: job 12 has been allocated resources\n"), Some(12));
        assert_eq!(srun_job("srun: Pending job allocation 9\nsrun: job 9 queued and waiting for resources\n"), Some(9));
        assert_eq!(Target::Step(SlurmStep { job: 41, step: 2 }).to_string(), "41.2");
        let cancelled = Cancelled { target: Target::Job(41), outcome: Ok(()) };
        assert_eq!(
            cancelled.describe(),
            "cancelled Slurm job 41, which srun allocated for this launch, with scancel (its tasks on every node)"
        );
    }

    #[test]
    fn ranks_write_their_step_whole_and_a_reader_finds_it() {
        let out = tempfile::tempdir().unwrap();
        assert_eq!(written_step(out.path()), None, "no file: nothing to cancel");
        write(out.path(), SlurmStep { job: 41, step: 2 });
        write(out.path(), SlurmStep { job: 41, step: 2 });
        assert_eq!(written_step(out.path()), Some(SlurmStep { job: 41, step: 2 }));
        let left: Vec<String> =
            std::fs::read_dir(out.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, [STEP_FILE], "no rank's own file left beside it");
        std::fs::write(out.path().join(STEP_FILE), "").unwrap();
        assert_eq!(written_step(out.path()), None, "an empty file names nothing");
    }
}
