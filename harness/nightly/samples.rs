//! Each launch's statistic per comparable figure: computed from a run's records when it is
//! collected (the manifest keeps them), and read back from a manifest for a night's verdicts.

use super::figures::{comparable, paired};
use crate::manifest::summary::Summary;
use crate::manifest::{LaunchStatistic, LaunchStats, Manifest};
use crate::rank::records::Record;
use std::collections::BTreeMap;

/// Values per figure name (the names [`super::figures`] gives), one per launch.
pub type FigureSamples = BTreeMap<String, Vec<f64>>;

/// Each launch's median of every comparable and paired figure of `summary`, from the records of all
/// `launches` (tagged by the collector); a launch without samples of a figure gives it no value.
pub fn per_launch(summary: &Summary, recs: &[Record], launches: u32) -> LaunchStats {
    let by_launch: Vec<Vec<Record>> = (0..launches).map(|l| recs.iter().filter(|r| r.launch == l).cloned().collect()).collect();
    let named = comparable(summary).into_iter().map(|f| (f.name, f.samples)).chain(paired(summary));
    let figures = named
        .map(|(name, samples)| (name, by_launch.iter().filter_map(|recs| super::stats::median(&samples.read(recs))).collect::<Vec<f64>>()))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    LaunchStats { count: launches, statistic: LaunchStatistic::Median, figures }
}

/// The per-launch values of `m`'s comparable figures: its recorded launches, or for a manifest
/// written before launches were recorded its summary median, as the one launch it stands for.
pub fn of_manifest(m: &Manifest) -> FigureSamples {
    match m.launches() {
        Some(l) => l.figures.clone(),
        None => super::figures(m).into_iter().map(|f| (f.name, vec![f.value])).collect(),
    }
}
