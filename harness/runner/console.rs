//! The console's view of a suite: a bar on a terminal, one status line per run otherwise;
//! fed by the runner's [`Event`]s.

use super::events::{Event, Reporter, RunEnd};
use indicatif::{ProgressBar, ProgressStyle};
use std::cell::Cell;
use std::io::IsTerminal;

/// Prints the suite's progress on stderr.
pub struct Console {
    bar: Option<ProgressBar>,
    total: Cell<usize>,
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Console {
    /// A console reporter: a progress bar when stderr is a terminal, lines otherwise.
    pub fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(ProgressStyle::with_template("[{pos}/{len}] {bar:30} {elapsed} {msg}").expect("valid template"));
            bar
        });
        Console { bar, total: Cell::new(0) }
    }

    /// A line above the bar, or on stderr.
    fn line(&self, line: String) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => crate::say!("{line}"),
        }
    }
}

/// The word a run's status line ends with.
pub fn end_word(end: RunEnd) -> &'static str {
    match end {
        RunEnd::Cached => "skipped (already measured by this measuring code; --force reruns)",
        RunEnd::Ok => "ok",
        RunEnd::NotRun => "not run",
        RunEnd::Failed => "FAILED",
    }
}

impl Reporter for Console {
    fn event(&self, event: &Event<'_>) {
        let total = self.total.get();
        match event {
            Event::LeftoversEnded { pids, store } => {
                let list: Vec<String> = pids.iter().map(u32::to_string).collect();
                crate::say!(
                    "parlab: ending {} leftover ranks of an earlier controller on {} (pids {})",
                    pids.len(),
                    store.display(),
                    list.join(", ")
                );
            }
            Event::GatesObtained { notes } => notes.iter().for_each(|note| crate::say!("{note}")),
            Event::SuiteStarted { runs } => {
                self.total.set(*runs);
                if let Some(bar) = &self.bar {
                    bar.set_length(*runs as u64);
                }
            }
            Event::RunStarted { index, label } => match &self.bar {
                Some(bar) => bar.set_message(label.to_string()),
                None => crate::say!("[{}/{total}] {label} ...", index + 1),
            },
            Event::Launched { .. } => {}
            Event::RoundStarted { round, rounds, runs } => self.line(format!("round {round} of {rounds}: launching {runs} runs once more")),
            Event::RunEnded { index, label, end } => {
                self.line(format!("[{}/{total}] {label}: {}", index + 1, end_word(*end)));
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
            }
            Event::Retired { runs, into } => crate::say!(
                "parlab: {} manifests of runs the specs no longer expand to moved to {} (kept, not in the register): {}",
                runs.len(),
                into.display(),
                runs.join(", ")
            ),
            Event::SuiteEnded => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
        }
    }
}
