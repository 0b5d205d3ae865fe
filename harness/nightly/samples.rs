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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::stats::Stats;
    use crate::manifest::summary::{CollectiveRow, Collectives};
    use crate::rank::figure::Figure;
    use crate::spec::schema::Op;

    #[test]
    fn a_collectives_launch_records_its_own_op_time_per_size_for_the_rounds() {
        let size = 4 << 20;
        // Two ranks, two blocks a launch. Launch 0's blocks average over ranks to 3 and 2 (a
        // median of its four raw samples would be 2); launch 1's to 4 and 4.
        let block = |launch: u32, rank: u32, iteration: u32, seconds: f64| Record {
            rank,
            figure: Figure::OpBlock(Op::AllReduce),
            size_bytes: size,
            repetition: launch,
            iteration,
            seconds,
            launch,
        };
        let recs = vec![
            block(0, 0, 0, 1.0),
            block(0, 1, 0, 5.0),
            block(0, 0, 1, 2.0),
            block(0, 1, 1, 2.0),
            block(1, 0, 0, 4.0),
            block(1, 1, 0, 4.0),
            block(1, 0, 1, 4.0),
            block(1, 1, 1, 4.0),
        ];
        let stat = Stats::of(&[1.0]).unwrap();
        let row = |op_time| CollectiveRow {
            op: Op::AllReduce,
            size_bytes: size,
            world: 2,
            link: crate::spec::link::Link::MpiShm,
            time: stat,
            spread: stat,
            op_time,
            in_place_op_time: None,
            wrong: 0,
        };
        let summary = |op_time| {
            Summary::Collectives(Collectives {
                rows: vec![row(op_time)],
                fits: Vec::new(),
                timing: String::new(),
                fit_method: String::new(),
            })
        };
        let stats = per_launch(&summary(Some(stat)), &recs, 2);
        let name = super::super::figures::op_time_median(Op::AllReduce, size);
        assert_eq!(name, "all-reduce 4194304 B op median");
        assert_eq!(stats.in_launch_order(&name), Some(&[2.5, 4.0][..]), "each launch's median of its blocks' mean over ranks");
        let without = per_launch(&summary(None), &recs, 2);
        assert!(!without.figures.contains_key(&name), "a row measured without back-to-back loops records none");
    }
}
