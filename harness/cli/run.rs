//! `parlab run`: parses the arguments, hands the suite to the library's runner
//! ([`crate::runner::run_suite`]) with the console reporter, then renders the register.

use super::Error;
use crate::manifest::lock::{LockError, StoreLock};
use crate::report::origin;
use crate::runner::{console::Console, RunnerError, RunnerOptions, SuiteEnd};
use crate::spec::load_suite_limited;
use std::path::{Path, PathBuf};

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
    /// Probe the machine even when the gates cache holds this machine's and boot's probes.
    pub reprobe: bool,
}

/// Refuses a fault limited to an experiment (`@name`) that is empty or that the suite does not
/// hold: it would never strike, and a test relying on it would pass unharmed.
fn fault_strikes(fault: &str, suite: &[crate::spec::RunPlan]) -> super::Result<()> {
    let env = crate::rank::fault::ENV;
    match fault.split_once('@').map(|(_, name)| name) {
        Some("") => Err(Error::Usage(format!("{env}={fault}: `@` names no experiment"))),
        Some(name) if !suite.iter().any(|r| r.experiment == name) => {
            Err(Error::Usage(format!("{env}={fault}: names experiment `{name}`, which the suite does not hold")))
        }
        _ => Ok(()),
    }
}

/// Runs every expanded run in order; exit 1 if any failed, 0 otherwise, 128+N on signal N.
pub fn run(paths: &[PathBuf], options: &RunOptions) -> super::Result<i32> {
    crate::launch::signals::install();
    crate::spec::weights::allow_cache_writes();
    // Set but empty counts as unset, as the launcher takes it.
    let fault = std::env::var(crate::rank::fault::ENV).ok().filter(|f| !f.is_empty());
    if let Some(fault) = &fault {
        crate::rank::fault::check(fault).map_err(|why| Error::Usage(format!("{}={fault}: {why}", crate::rank::fault::ENV)))?;
    }
    let suite = load_suite_limited(paths, options.max_runs);
    // Ctrl-C while the specs loaded (hashing a large checkpoint): nothing taken, nothing to record.
    if let Some(sig) = crate::launch::signals::received() {
        crate::say!("parlab: interrupted by {} while loading the specs; nothing was run", crate::launch::signals::name(sig));
        return Ok(crate::launch::signals::exit_code(sig));
    }
    let suite = suite?;
    if let Some(fault) = &fault {
        fault_strikes(fault, &suite)?;
    }
    let selected = super::select::only(suite.clone(), &options.only)?;
    let store = super::folder::Folder::manifests(None);
    store.not_a_file(super::folder::MANIFESTS_HOLD)?;
    store.not_a_register()?;
    store.not_inside_a_store()?;
    // A store that cannot be listed would render a register of nothing over the earlier one.
    store.listable("manifests folder")?;
    let dir = store.path;
    let out = (!options.no_report).then(|| options.out.clone().unwrap_or_else(|| origin::default_out(&dir)));
    if let Some(out) = &out {
        super::report::folder_or_nothing(out)?;
        origin::check(out, &dir)?;
    }
    // The store's lock first (another controller there: exit 2 before any folder is made for
    // the register); then the output folder's, refused where a render holds it without --wait.
    // That one is let go again, so `parlab report` may render while the suite runs; the render
    // at the end takes it anew (and says so if it has to wait).
    let store = match folder_lock(&dir, options.wait, Locked::Store)? {
        Ok(lock) => lock,
        Err(sig) => return Ok(interrupted_while(sig, &dir, "waiting for the manifests folder before its first run")),
    };
    if let Some(out) = &out {
        if let Err(sig) = render_lock(out, options.wait)? {
            return Ok(interrupted_while(sig, &dir, "waiting for the output folder before its first run"));
        }
    }
    let runner = RunnerOptions { force: options.force, launches: options.launches, reprobe: options.reprobe };
    let end = crate::runner::run_suite(&suite, selected, &store, &runner, &Console::new()).map_err(|e| match e {
        e @ RunnerError::ForeignManifest { .. } => Error::Usage(e.to_string()),
        e @ RunnerError::Gates { .. } => Error::Failed(e.into()),
        RunnerError::Failed(e) => Error::Failed(e),
    })?;
    drop(store);
    match end {
        SuiteEnd::Interrupted { signal, finished, runs } => {
            crate::say!(
                "parlab: interrupted by {} after {finished} of {runs} runs; the launch in progress was ended and recorded failed, as were the runs whose launches had not all run; manifests in {} are kept",
                crate::launch::signals::name(signal),
                dir.display()
            );
            Ok(crate::launch::signals::exit_code(signal))
        }
        SuiteEnd::Finished { runs, failed } => {
            // The suite's account first: a render refused or failed after it loses neither the
            // count nor the failed runs' exit code.
            crate::say!("parlab: {runs} runs, {failed} failed; manifests in {}", dir.display());
            let suite_code = if failed > 0 { crate::exitcode::RUN_FAILED } else { crate::exitcode::OK };
            let Some(out) = &out else { return Ok(suite_code) };
            let rendered = render_lock(out, true).and_then(|held| match held {
                Ok(lock) => super::report::render_held(&dir, out, &lock).map(|_| None),
                Err(sig) => Ok(Some(interrupted_while(sig, &dir, "waiting for the output folder after its last run"))),
            });
            match rendered {
                Ok(None) => Ok(suite_code),
                Ok(Some(interrupted)) => Ok(interrupted),
                Err(e) => match interrupted_render(&e) {
                    Some(sig) => Ok(interrupted_while(sig, &dir, "rendering the register (the earlier one is kept)")),
                    // The output folder's lock or the render failed: said, and a suite with
                    // failed runs still exits 1.
                    None if failed > 0 => {
                        crate::say!("{e}");
                        Ok(suite_code)
                    }
                    None => Err(e),
                },
            }
        }
    }
}

/// The output folder's lock (the folder made if missing), as [`folder_lock`] takes it.
fn render_lock(out: &Path, wait: bool) -> super::Result<std::result::Result<StoreLock, i32>> {
    super::report::folder_or_nothing(out)?;
    folder_lock(out, wait, Locked::Register)
}

/// Which folder [`folder_lock`] locks, for the lines about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Locked {
    /// The manifests folder, which another controller (or an import) writes.
    Store,
    /// The register's output folder, which another render writes.
    Register,
}

/// A folder's lock (the folder made if missing): at once where it is free; held by another
/// process, exit 2 without `wait`, else polled, saying once which process holds it, until it is
/// free or a termination signal arrives (`Err` with the signal: a blocking `flock` would
/// outlast Ctrl-C, the handlers restarting it).
fn folder_lock(dir: &Path, wait: bool, which: Locked) -> super::Result<std::result::Result<StoreLock, i32>> {
    let mut said = false;
    loop {
        match StoreLock::acquire(dir, false) {
            Ok(lock) => return Ok(Ok(lock)),
            Err(LockError::Held { holder, .. }) if wait => {
                if !said {
                    let doing = match which {
                        Locked::Store => "writing manifests into",
                        Locked::Register => "rendering into",
                    };
                    crate::say!("parlab: waiting for parlab (pid {holder}), which is {doing} {}, to let go of it", dir.display());
                    said = true;
                }
                if let Some(sig) = crate::launch::signals::received() {
                    return Ok(Err(sig));
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) if which == Locked::Store => return Err(super::lock_refusal(e, "")),
            Err(e) => return Err(super::lock_refusal(e, &format!("--out {}: ", dir.display()))),
        }
    }
}

/// The signal that stopped a render before it replaced the earlier register, if that is what
/// `e` is.
fn interrupted_render(e: &Error) -> Option<i32> {
    match e {
        Error::Failed(e) => match e.downcast_ref::<crate::report::ReportError>() {
            Some(crate::report::ReportError::Interrupted { signal }) => Some(*signal),
            _ => None,
        },
        _ => None,
    }
}

/// The exit of a run interrupted while waiting for the output folder or rendering (`what`): its
/// manifests are kept, the register not rendered.
fn interrupted_while(sig: i32, dir: &Path, what: &str) -> i32 {
    crate::say!(
        "parlab: interrupted by {} while {what}; manifests in {} are kept, the register not rendered (`parlab report` renders it)",
        crate::launch::signals::name(sig),
        dir.display()
    );
    crate::launch::signals::exit_code(sig)
}
