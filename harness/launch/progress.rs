//! Progress of a suite: a bar on a terminal, one status line per run otherwise.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Shows which run of how many is going.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
}

impl Progress {
    /// A progress display for `total` runs.
    pub fn new(total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(ProgressStyle::with_template("[{pos}/{len}] {bar:30} {elapsed} {msg}").expect("valid template"));
            bar
        });
        Progress { bar, total }
    }

    /// Announces run `index` (0-based).
    pub fn start(&self, index: usize, label: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(label.to_string()),
            None => eprintln!("[{}/{}] {label} ...", index + 1, self.total),
        }
    }

    /// Reports how run `index` ended.
    pub fn finish(&self, index: usize, label: &str, word: &str) {
        match &self.bar {
            Some(bar) => {
                bar.println(format!("[{}/{}] {label}: {word}", index + 1, self.total));
                bar.inc(1);
            }
            None => eprintln!("[{}/{}] {label}: {word}", index + 1, self.total),
        }
    }

    /// Announces round `round` of `rounds`, in which `runs` runs are launched once more.
    pub fn round(&self, round: u32, rounds: u32, runs: usize) {
        let line = format!("round {round} of {rounds}: launching {runs} runs once more");
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Clears the bar.
    pub fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
