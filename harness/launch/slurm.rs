//! The Slurm job step an `srun` launch started, so that a stopped launch can end its tasks on
//! every node: srun killed after the grace leaves a step's tasks running on nodes this machine
//! cannot signal, and `scancel JOB.STEP` asks Slurm itself to end them (SIGTERM, then SIGKILL
//! after the cluster's KillWait).

use std::path::Path;
use std::time::{Duration, Instant};

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
/// rank of a step writes the same text). Best effort: without it a stop ends the local ranks only.
pub fn write_step(out: &Path) {
    if let Some(step) = SlurmStep::from_env(|k| std::env::var(k).ok()) {
        let _ = std::fs::write(out.join(STEP_FILE), format!("{step}\n"));
    }
}

/// The step the ranks of the launch writing into `out` run in, unless it is this process's own
/// (parlab itself started by srun inside the same step must never cancel itself).
pub fn launched_step(out: &Path) -> Option<SlurmStep> {
    let step = SlurmStep::parse(&std::fs::read_to_string(out.join(STEP_FILE)).ok()?)?;
    (SlurmStep::from_env(|k| std::env::var(k).ok()) != Some(step)).then_some(step)
}

/// What a stopped launch did to its ranks' Slurm step.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// The step.
    pub step: SlurmStep,
    /// Whether scancel accepted it (Err: why the step may still run).
    pub outcome: Result<(), String>,
}

impl Cancelled {
    /// In words, for a failure reason.
    pub fn describe(&self) -> String {
        match &self.outcome {
            Ok(()) => format!("cancelled Slurm step {} with scancel (its tasks on every node)", self.step),
            Err(why) => format!("could not cancel Slurm step {}, whose tasks on other nodes may still run: {why}", self.step),
        }
    }
}

/// Cancels the step the launch writing into `out` started, if its ranks wrote one.
pub fn cancel_launched(out: &Path) -> Option<Cancelled> {
    launched_step(out).map(|step| Cancelled { step, outcome: cancel(step) })
}

/// Runs `scancel --quiet JOB.STEP`, waiting at most [`SCANCEL_LIMIT`] (then killing it);
/// Err says why the step may still run.
pub fn cancel(step: SlurmStep) -> Result<(), String> {
    let mut child = std::process::Command::new("scancel")
        .args(["--quiet", &step.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run scancel: {e}"))?;
    let until = Instant::now() + SCANCEL_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut why = String::new();
                if let Some(mut err) = child.stderr.take() {
                    use std::io::Read;
                    let _ = err.by_ref().take(4096).read_to_string(&mut why);
                }
                return Err(format!("scancel {step} exited with {status}: {}", why.trim()));
            }
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("scancel {step} did not answer within {} s", SCANCEL_LIMIT.as_secs()));
            }
        }
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
    fn a_step_file_names_the_step_to_cancel_unless_it_is_parlabs_own() {
        let out = tempfile::tempdir().unwrap();
        assert_eq!(launched_step(out.path()), None, "no file: nothing to cancel");
        std::fs::write(out.path().join(STEP_FILE), "41.2\n").unwrap();
        let mine = SlurmStep::from_env(|k| std::env::var(k).ok());
        let expected = Some(SlurmStep { job: 41, step: 2 }).filter(|s| Some(*s) != mine);
        assert_eq!(launched_step(out.path()), expected);
    }
}
