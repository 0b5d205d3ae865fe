//! What the runner announces as a suite goes: one [`Event`] per step, to a [`Reporter`] (the
//! console's progress lines, a test's recorder), as nextest's reporter is fed.

use std::path::Path;

/// How one run of the suite ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Already measured by this measuring code: its manifest is kept, nothing ran.
    Cached,
    /// Measured (or modelled) and written ok.
    Ok,
    /// Not run: the machine lacks what it needs (the probes' evidence is in its manifest).
    NotRun,
    /// Failed: its manifest says why.
    Failed,
}

impl From<crate::manifest::Status> for RunEnd {
    fn from(status: crate::manifest::Status) -> Self {
        match status {
            crate::manifest::Status::Ok => RunEnd::Ok,
            crate::manifest::Status::NotRun => RunEnd::NotRun,
            crate::manifest::Status::Failed => RunEnd::Failed,
        }
    }
}

/// One step of a suite, in the order the runner takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// Ranks an earlier controller left on this store were ended (pids).
    LeftoversEnded {
        /// Their process ids.
        pids: &'a [u32],
        /// The manifests folder whose ranks they were.
        store: &'a Path,
    },
    /// The machine's gates were probed or taken from the cache (`notes`: which, and why).
    GatesObtained {
        /// What the gates cache says about them, one line each.
        notes: &'a [String],
    },
    /// The suite starts: `runs` runs, in this order.
    SuiteStarted {
        /// How many runs.
        runs: usize,
    },
    /// Run `index` (0-based) starts its first round.
    RunStarted {
        /// Its position in the suite.
        index: usize,
        /// Its label (experiment, index, layout).
        label: &'a str,
    },
    /// Run `index` is launched: launch `launch` (1-based) of `launches`.
    Launched {
        /// Its position in the suite.
        index: usize,
        /// Its label.
        label: &'a str,
        /// Which launch (1-based).
        launch: u32,
        /// Of how many.
        launches: u32,
    },
    /// Round `round` of `rounds` starts, launching `runs` runs once more.
    RoundStarted {
        /// The round (2 and up; round 1 is the runs' first launches).
        round: u32,
        /// Of how many.
        rounds: u32,
        /// Runs still launching.
        runs: usize,
    },
    /// Run `index` ended (its manifest is written unless it was cached).
    RunEnded {
        /// Its position in the suite.
        index: usize,
        /// Its label.
        label: &'a str,
        /// How it ended.
        end: RunEnd,
    },
    /// Manifests of runs the specs no longer expand to were moved to `into`.
    Retired {
        /// Their run ids.
        runs: &'a [String],
        /// The folder they were moved to.
        into: &'a Path,
    },
    /// The suite is over (finished or interrupted).
    SuiteEnded,
}

/// Receives the runner's events.
pub trait Reporter {
    /// Called once per event, in order.
    fn event(&self, event: &Event<'_>);
}

/// A reporter that records every event as a line (for tests and logs).
#[derive(Debug, Default)]
pub struct Recorder {
    lines: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    /// The events received so far, one `Debug` line each.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Reporter for Recorder {
    fn event(&self, event: &Event<'_>) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(format!("{event:?}"));
        }
    }
}
