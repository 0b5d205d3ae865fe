//! The nightly history: one JSON file per night (every figure's median), each figure's
//! night-to-night noise learnt from it, a trend figure per figure across nights, and change
//! points found by binary segmentation (Mann–Whitney, asv's power guard, the minimum effect).

use super::{band, figures, stats, Better, Night, Policy};
use crate::manifest::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The history file format's version tag.
pub const SCHEMA: &str = "parlab.nightly-history/1";
/// The fewest nights on each side of a change point (the power guard needs 4 + 4 at 5 %).
pub const MIN_SEGMENT: usize = 4;

/// One figure of one run on one night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Run identity.
    pub run_id: crate::identity::RunId,
    /// Short run identity and experiment.
    pub run: String,
    /// The figure.
    pub figure: String,
    /// Its median that night (of the raw samples where present, else the summary's).
    pub median: f64,
    /// Whether lower is better.
    pub lower_is_better: bool,
}

/// One night in the history folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Format version.
    pub schema: String,
    /// When the comparison ran (RFC 3339, UTC).
    pub night: String,
    /// The machine fingerprints (ids) of the night's ok runs, sorted (empty in a history
    /// written before they were recorded: such a night's machine is unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<String>,
    /// Every figure of every run that was ok.
    pub points: Vec<Point>,
}

/// The machine fingerprint ids of `night`'s ok runs that parlab measured, sorted and distinct (a
/// result imported from another tool records no machine: it would make every night it joins look
/// like another machine's).
pub fn machines(night: &Night) -> Vec<String> {
    let measured = |m: &&crate::manifest::Manifest| m.status() == Status::Ok && m.provenance.is_measured();
    let ids: std::collections::BTreeSet<String> = night.manifests.iter().filter(measured).map(|m| m.machine.id()).collect();
    ids.into_iter().collect()
}

impl Entry {
    /// Whether this night may have run on `machines`: the same fingerprints, or unknown ones.
    pub fn same_machines(&self, machines: &[String]) -> bool {
        self.machines.is_empty() || self.machines == machines
    }
}

/// Tonight's figures: the median of each figure's usable per-launch values ([`stats::usable`];
/// the summary median for a manifest written before launches were recorded), leaving out a
/// median no night records ([`implausible`]) rather than the whole night at its next read.
pub fn points(night: &Night) -> Vec<Point> {
    let limit = crate::manifest::plausible::MAX_MAGNITUDE;
    let mut out = Vec::new();
    for m in night.manifests.iter().filter(|m| m.status() == Status::Ok) {
        let launches = super::samples::of_manifest(m);
        for f in figures(m) {
            let median = launches.get(&f.name).and_then(|v| stats::usable_median(v)).unwrap_or(f.value);
            if !(median.is_finite() && median > 0.0 && median <= limit) {
                continue;
            }
            out.push(Point {
                run_id: m.run_id.clone(),
                run: super::label(m),
                figure: f.name,
                median,
                lower_is_better: f.better == Better::Lower,
            });
        }
    }
    out
}

/// Writes tonight's entry as `DIR/<night>.json` (colons dropped from the name; `<night>_0002.json`,
/// ... where a night of the same second is there already).
pub fn append(dir: &Path, night: &Night, when: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let entry = entry_of(night, when);
    // A second night of the same second is `<time>_0002.json`, ... (after the first in file-name
    // order, which orders nights of one second): none replaces another.
    let stem = when.replace(':', "");
    let path = std::iter::once(dir.join(format!("{stem}.json")))
        .chain((2..).map(|n| dir.join(format!("{stem}_{n:04}.json"))))
        .find(|p| !p.exists())
        .unwrap_or_else(|| dir.join(format!("{stem}.json")));
    let text = serde_json::to_string_pretty(&entry).map_err(std::io::Error::other)?;
    crate::manifest::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// The history entry of `night`, dated `when`: what [`append`] writes.
pub fn entry_of(night: &Night, when: &str) -> Entry {
    Entry { schema: SCHEMA.into(), night: when.into(), machines: machines(night), points: points(night) }
}

/// Every readable entry in `dir`, oldest night first (other files are ignored).
pub fn read(dir: &Path) -> Vec<Entry> {
    read_all(dir).0
}

/// Every readable entry in `dir`, oldest night first (nights of the same second in the order
/// they were appended), and each `.json` file that is not one, with why (other files, such as
/// `trends.md`, are not the history's).
pub fn read_all(dir: &Path) -> (Vec<Entry>, Vec<(PathBuf, String)>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (mut entries, mut skipped) = (Vec::new(), Vec::new());
    for path in files {
        match read_entry(&path) {
            Ok(entry) => entries.push(entry),
            Err(why) => skipped.push((path, why)),
        }
    }
    // Stable: within one night, file-name order, which is append order.
    entries.sort_by(|a, b| a.night.cmp(&b.night));
    (entries, skipped)
}

/// Like [`read_all`], saying on stderr which files were skipped and why.
pub fn read_warning(dir: &Path) -> Vec<Entry> {
    let (entries, skipped) = read_all(dir);
    for (path, why) in &skipped {
        crate::say!("warning: skipped {}: {why}", path.display());
    }
    entries
}

/// One history file, or why it is not a night of this format.
fn read_entry(path: &Path) -> Result<Entry, String> {
    let text = crate::files::read_text(path, crate::files::MANIFEST_LIMIT).map_err(|e| e.reason())?;
    match crate::manifest::schema_of(&text) {
        Some(schema) if schema != SCHEMA => return Err(format!("schema `{schema}` is not {SCHEMA}")),
        _ => {}
    }
    let entry = serde_json::from_str::<Entry>(&text).map_err(|e| format!("not a nightly history entry ({e})"))?;
    implausible(&entry).map_or(Ok(entry), Err)
}

/// Why a history entry holds what no night records: a median that is not a time, rate or
/// bandwidth (not finite, not above 0, past 2^60). A night's date is its own: one dated ahead
/// of this clock (another machine's, or a history written for a test) is read as dated.
pub fn implausible(entry: &Entry) -> Option<String> {
    let limit = crate::manifest::plausible::MAX_MAGNITUDE;
    entry.points.iter().find(|p| !(p.median.is_finite() && p.median > 0.0 && p.median <= limit)).map(|p| {
        format!(
            "{} {}: median {} is not a figure a night records (a time, rate or bandwidth above 0, at most 2^60)",
            p.run, p.figure, p.median
        )
    })
}

/// The fewest past nights a figure's noise estimate rests on (below 8, the scaled MAD is so
/// uncertain that a band kept to 0.27 % false flags is wider than the launches' floor).
pub const MIN_NOISE_NIGHTS: usize = 8;
/// The most recent nights a noise estimate uses (older nights may predate a change of level).
pub const NOISE_WINDOW: usize = 20;
/// How many standard deviations of a difference of two nights the noise floor from the launches
/// spans (without a history, the launch-to-launch spread stands in for the night-to-night one).
pub const LAUNCH_FLOOR_Z: f64 = 3.0;

/// One of the two nights compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NightSide {
    /// The baseline night.
    Baseline,
    /// Tonight.
    Tonight,
}

impl NightSide {
    /// In words, for a verdict line.
    pub fn words(self) -> &'static str {
        match self {
            NightSide::Baseline => "the baseline",
            NightSide::Tonight => "tonight",
        }
    }
}

/// A figure's night-to-night noise, as the history tells it (or, without a history, as the
/// two nights' own launches bound it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "noise")]
pub enum Noise {
    /// No history folder was given: the noise band is not applied.
    NotKept,
    /// The history holds too few nights of this figure for an estimate.
    TooFew {
        /// Past nights of the figure in the history.
        nights: usize,
    },
    /// No history folder, or one with too few nights of the figure: the floor is the
    /// launch-to-launch spread of the quieter night's launches (launched in rounds, a night's
    /// launches sample the whole night, so its drift is in it).
    FromLaunches {
        /// The quieter night's spread of per-launch log values ([`stats::launch_spread`]: the
        /// range over d2 of 3 or 4 launches, the scaled MAD of more; a relative spread).
        sigma: f64,
        /// Launches of that night it rests on.
        launches: usize,
        /// Which night's launches scattered less.
        from: NightSide,
        /// Past nights of the figure in the history, where one was kept (fewer than
        /// [`MIN_NOISE_NIGHTS`]: too few for its own estimate).
        #[serde(skip_serializing_if = "Option::is_none")]
        history: Option<usize>,
    },
    /// Estimated from past nights.
    Estimated {
        /// 1.4826 × the median absolute deviation of the nights' log values (a relative spread).
        sigma: f64,
        /// Past nights it rests on.
        nights: usize,
        /// Levels those nights fell into (change points between them plus one).
        levels: usize,
        /// The band's multiplier of √2 × sigma for that many nights ([`band::multiplier`]).
        multiplier: f64,
    },
}

impl Noise {
    /// The smallest |ln(after / before)| outside the band: the multiplier × √2 × sigma (a
    /// difference of two nights has √2 times one night's spread) from the history,
    /// [`LAUNCH_FLOOR_Z`] × √2 × sigma from the launches; None without either.
    pub fn band(&self) -> Option<f64> {
        match self {
            Noise::Estimated { sigma, multiplier, .. } => Some(multiplier * std::f64::consts::SQRT_2 * sigma),
            Noise::FromLaunches { sigma, .. } => Some(LAUNCH_FLOOR_Z * std::f64::consts::SQRT_2 * sigma),
            _ => None,
        }
    }

    /// Without a history (or with `history` nights of the figure, too few for an estimate): the
    /// floor from the launches of whichever night scattered less (`before`, `after`: one value
    /// per launch), when both nights have enough launches for the t-test; otherwise
    /// [`Noise::NotKept`]. The smaller spread: a change that scatters tonight's launches cannot
    /// widen its own floor, and a baseline night that scattered cannot hide a change that a
    /// quiet night shows.
    pub fn from_launches(before: &[f64], after: &[f64], history: Option<usize>) -> Noise {
        if before.len().min(after.len()) < stats::MIN_PER_SIDE {
            return Noise::NotKept;
        }
        let spread = |values: &[f64]| {
            let logs: Vec<f64> = values.iter().filter(|x| x.is_finite() && **x > 0.0).map(|x| x.ln()).collect();
            stats::launch_spread(&logs).map(|sigma| (sigma, logs.len()))
        };
        match (spread(before), spread(after)) {
            (Some((b, _)), Some((a, na))) if a < b => Noise::FromLaunches { sigma: a, launches: na, from: NightSide::Tonight, history },
            (Some((sigma, launches)), _) => Noise::FromLaunches { sigma, launches, from: NightSide::Baseline, history },
            (None, Some((sigma, launches))) => Noise::FromLaunches { sigma, launches, from: NightSide::Tonight, history },
            (None, None) => Noise::NotKept,
        }
    }

    /// In words, for a verdict line.
    pub fn describe(&self) -> String {
        match self {
            Noise::NotKept => "no history: night-to-night noise not checked".into(),
            Noise::FromLaunches { sigma, launches, from, history } => format!(
                "{}: noise floor from the launches, launch-to-launch spread ±{:.1}% ({} of {}'s {launches} launches, the night that scattered less), band ±{:.1}%",
                history.map_or_else(
                    || "no history".to_string(),
                    |n| format!("history: {n} nights of this figure, too few for a noise estimate (need {MIN_NOISE_NIGHTS})")
                ),
                sigma.exp_m1() * 100.0,
                stats::spread_words(*launches),
                from.words(),
                self.band().unwrap_or(0.0).exp_m1() * 100.0
            ),
            Noise::TooFew { nights } => {
                format!("history: {nights} nights of this figure, too few for a noise estimate (need {MIN_NOISE_NIGHTS})")
            }
            Noise::Estimated { sigma, nights, levels, multiplier } => format!(
                "night-to-night noise ±{:.1}% (scaled MAD of {nights} nights{}), band ±{:.1}% ({multiplier:.2} × √2 σ: left by an unchanged figure on {:.2}% of nights)",
                sigma.exp_m1() * 100.0,
                if *levels > 1 { format!(", each from the median of its level: {levels} levels") } else { String::new() },
                self.band().unwrap_or(0.0).exp_m1() * 100.0,
                band::false_flag_rate() * 100.0
            ),
        }
    }
}

/// Each figure's past nightly values, for its noise estimate.
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseBook {
    /// No history folder: no figure has a noise estimate.
    NotKept,
    /// Per (run identity, figure), its past nights' values, oldest first.
    Nights(BTreeMap<(String, String), Vec<f64>>),
}

impl NoiseBook {
    /// The past nights of every figure in `entries` (oldest first, as [`read`] gives them)
    /// measured on `machines` (or on a machine the entry did not record): another machine's
    /// nights scatter by the machines' difference, which is not a figure's own noise.
    pub fn from_entries(entries: &[Entry], machines: &[String]) -> Self {
        let mut by: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for p in entries.iter().filter(|e| e.same_machines(machines)).flat_map(|e| &e.points) {
            by.entry((p.run_id.to_string(), p.figure.clone())).or_default().push(p.median);
        }
        NoiseBook::Nights(by)
    }

    /// The noise of `figure` of run `run_id`: the scaled MAD of its last [`NOISE_WINDOW`]
    /// nights' logs, each about the median of its level (the window split at the change points
    /// `policy` finds in it), once there are [`MIN_NOISE_NIGHTS`]. Deviations from one median
    /// of two levels would widen the band by their distance: a regression left unfixed, kept
    /// night after night, would hide itself within a few nights and pass into the baseline.
    pub fn noise(&self, run_id: &str, figure: &str, policy: &Policy) -> Noise {
        let NoiseBook::Nights(by) = self else { return Noise::NotKept };
        let all = by.get(&(run_id.to_string(), figure.to_string())).map_or(&[][..], Vec::as_slice);
        let window: Vec<f64> =
            all[all.len().saturating_sub(NOISE_WINDOW)..].iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
        let (deviations, levels) = level_deviations(&window, policy);
        match stats::scaled_mad(&deviations) {
            // Each level's median takes one night's freedom: the band is the one of that many
            // fewer nights.
            Some(sigma) if window.len() >= MIN_NOISE_NIGHTS => {
                Noise::Estimated { sigma, nights: window.len(), levels, multiplier: band::multiplier(window.len() + 1 - levels) }
            }
            _ => Noise::TooFew { nights: window.len() },
        }
    }
}

/// Each value's log less the median log of its level (`values` split at their change points),
/// and the number of levels.
fn level_deviations(values: &[f64], policy: &Policy) -> (Vec<f64>, usize) {
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let mut bounds = vec![0];
    bounds.extend(change_points(values, policy));
    bounds.push(logs.len());
    let deviations = bounds
        .windows(2)
        .flat_map(|w| {
            let level = &logs[w[0]..w[1]];
            let median = stats::median(level).unwrap_or(0.0);
            level.iter().map(move |x| x - median)
        })
        .collect();
    (deviations, bounds.len() - 1)
}

/// One figure's medians across nights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// Short run identity and experiment.
    pub run: String,
    /// The figure.
    pub figure: String,
    /// (night, median), oldest first.
    pub nights: Vec<(String, f64)>,
    /// Whether lower is better.
    pub lower_is_better: bool,
    /// Indices into `nights` where a new level starts.
    pub change_points: Vec<usize>,
}

/// Each (run identity, figure) across the nights, with its change points under `policy`.
pub fn series(entries: &[Entry], policy: &Policy) -> Vec<Series> {
    let mut by: BTreeMap<(String, String), Series> = BTreeMap::new();
    for e in entries {
        for p in &e.points {
            let s = by.entry((p.run_id.to_string(), p.figure.clone())).or_insert_with(|| Series {
                run: p.run.clone(),
                figure: p.figure.clone(),
                nights: Vec::new(),
                lower_is_better: p.lower_is_better,
                change_points: Vec::new(),
            });
            s.nights.push((e.night.clone(), p.median));
        }
    }
    let mut out: Vec<Series> = by.into_values().collect();
    for s in &mut out {
        let values: Vec<f64> = s.nights.iter().map(|n| n.1).collect();
        s.change_points = change_points(&values, policy);
    }
    out
}

/// Change points of `x` by binary segmentation: the split (at least [`MIN_SEGMENT`] values
/// each side) with the smallest Mann–Whitney p between the two sides is kept when that p,
/// times the number of splits tried (Bonferroni: the smallest of many p values is small by
/// chance alone), is below `policy.fdr` and the sides' medians differ by at least
/// `policy.min_effect`; each side is then searched again. Returns the first index of every
/// new level, ascending.
pub fn change_points(x: &[f64], policy: &Policy) -> Vec<usize> {
    let mut found = Vec::new();
    segment(x, 0, policy, &mut found);
    found.sort_unstable();
    found
}

fn segment(x: &[f64], offset: usize, policy: &Policy, found: &mut Vec<usize>) {
    if x.len() < 2 * MIN_SEGMENT {
        return;
    }
    let splits = (x.len() - 2 * MIN_SEGMENT + 1) as f64;
    let best = (MIN_SEGMENT..=x.len() - MIN_SEGMENT)
        .filter_map(|k| {
            let (l, r) = x.split_at(k);
            let effect = stats::median(r)? / stats::median(l)? - 1.0;
            let p = stats::mann_whitney(l, r)?.p;
            (super::beyond_min_effect(effect, policy.min_effect) && p * splits < policy.fdr).then_some((k, p))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((k, _)) = best {
        found.push(offset + k);
        segment(&x[..k], offset, policy, found);
        segment(&x[k..], offset + k, policy, found);
    }
}

fn trend_svg(s: &Series) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 300.0, 70.0, 20.0, 40.0, 50.0);
    let values: Vec<f64> = s.nights.iter().map(|n| n.1).collect();
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
    let span = if hi > lo { hi - lo } else { hi.abs().max(1e-300) };
    let (lo, hi) = (lo - 0.1 * span, hi + 0.1 * span);
    let n = values.len().max(2) - 1;
    let px = |i: usize| left + (w - left - right) * i as f64 / n as f64;
    let py = |v: f64| top + (h - top - bottom) * (1.0 - (v - lo) / (hi - lo));
    let esc = crate::xml::escape;
    let mut svg = crate::xml::svg_open(w, h, 11);
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"13\">{} — {}</text>",
        w / 2.0,
        esc(&s.figure),
        esc(&s.run)
    );
    let _ = writeln!(svg, "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>", h - bottom, w - right, h - bottom);
    let _ = writeln!(svg, "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>", h - bottom);
    for v in [lo, (lo + hi) / 2.0, hi] {
        let _ = writeln!(svg, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.3e}</text>", left - 4.0, py(v) + 4.0);
    }
    for (i, (night, _)) in s.nights.iter().enumerate().filter(|(i, _)| *i == 0 || *i == n) {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            px(i),
            h - bottom + 16.0,
            esc(&night.chars().take(10).collect::<String>())
        );
    }
    for &c in &s.change_points {
        let x = (px(c - 1) + px(c)) / 2.0;
        let _ = writeln!(svg, "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"><title>change point</title></line>", h - bottom);
    }
    let pts: Vec<String> = values.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", px(i), py(*v))).collect();
    let _ = writeln!(svg, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"{}\"/>", pts.join(" "));
    for (i, v) in values.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#1f77b4\"><title>{} {v:.4e}</title></circle>",
            px(i),
            py(*v),
            esc(&s.nights[i].0)
        );
    }
    let better = if s.lower_is_better { "lower is better" } else { "higher is better" };
    let _ = writeln!(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{better}; dashed: change point</text>\n</svg>", w - right, h - 8.0);
    svg
}

/// A night whose machines differ from the night before's (both recorded).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineSwitch {
    /// The night (RFC 3339, UTC).
    pub night: String,
    /// The machines of the night before.
    pub before: Vec<String>,
    /// The machines of this night.
    pub after: Vec<String>,
}

/// The nights of `entries` (oldest first) on other machines than the night before.
pub fn machine_switches(entries: &[Entry]) -> Vec<MachineSwitch> {
    entries
        .windows(2)
        .filter(|w| !w[0].machines.is_empty() && !w[1].machines.is_empty() && w[0].machines != w[1].machines)
        .map(|w| MachineSwitch { night: w[1].night.clone(), before: w[0].machines.clone(), after: w[1].machines.clone() })
        .collect()
}

/// The trends page's paragraph on machine switches (empty without one).
fn switches_text(switches: &[MachineSwitch]) -> String {
    if switches.is_empty() {
        return String::new();
    }
    let lines: Vec<String> =
        switches.iter().map(|w| format!("- {}: {} -> {}\n", w.night, w.before.join(", "), w.after.join(", "))).collect();
    format!(
        "The machine fingerprint changed on these nights; a change point there may be the machine's, not the code's:\n\n{}\n",
        lines.concat()
    )
}

/// Writes `DIR/trends/<i>.svg` for every series with at least two nights and `DIR/trends.md`
/// listing them with their change points; returns the series with change points.
pub fn write_trends(dir: &Path, policy: &Policy) -> std::io::Result<Vec<Series>> {
    write_trends_into(dir, dir, policy)
}

/// Like [`write_trends`] for the history in `history`, writing `out/trends.md` and `out/trends/`.
pub fn write_trends_into(history: &Path, dir: &Path, policy: &Policy) -> std::io::Result<Vec<Series>> {
    write_trends_of(&read(history), dir, policy)
}

/// The first line of every `trends.md` parlab writes.
const TRENDS_HEADING: &str = "# parlab nightly trends";

/// The files of `dir` that drawing trends there would replace or remove though parlab did not
/// draw them: a `trends.md` without parlab's heading, and `trends/<i>.svg` where `trends.md`
/// is not parlab's (relative to `dir`, sorted).
pub fn foreign_trends(dir: &Path) -> Vec<String> {
    let own = std::fs::read_to_string(dir.join("trends.md")).is_ok_and(|t| t.starts_with(TRENDS_HEADING));
    if own {
        return Vec::new();
    }
    let mut files: Vec<String> = dir.join("trends.md").exists().then(|| "trends.md".to_string()).into_iter().collect();
    for entry in std::fs::read_dir(dir.join("trends")).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if drawn_index(&name).is_some() && entry.path().is_file() {
            files.push(format!("trends/{name}"));
        }
    }
    files.sort();
    files
}

/// The series a file name of `trends/` is the drawing of (`3.svg`: 3), if it is one's.
fn drawn_index(name: &str) -> Option<usize> {
    name.strip_suffix(".svg").and_then(|i| i.parse::<usize>().ok()).filter(|i| name == format!("{i}.svg"))
}

/// Like [`write_trends`] for `entries` (oldest night first) already read, writing into `dir`.
pub fn write_trends_of(entries: &[Entry], dir: &Path, policy: &Policy) -> std::io::Result<Vec<Series>> {
    let all: Vec<Series> = series(entries, policy).into_iter().filter(|s| s.nights.len() >= 2).collect();
    let switches = machine_switches(entries);
    let trends = dir.join("trends");
    std::fs::create_dir_all(&trends).map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", trends.display())))?;
    let mut md = format!("{TRENDS_HEADING}\n\nChange points: binary segmentation, each side at least {MIN_SEGMENT} nights, Mann-Whitney p below {} and medians {} apart.\n\n", super::outputs::decimal(policy.fdr), super::outputs::percent(policy.min_effect));
    md.push_str(&switches_text(&switches));
    md.push_str("| figure | run | nights | last | change points |\n|---|---|---|---|---|\n");
    for (i, s) in all.iter().enumerate() {
        let cps: Vec<String> = s
            .change_points
            .iter()
            .map(|&c| {
                let night = &s.nights[c].0;
                let machine = if switches.iter().any(|w| &w.night == night) { " (the machine changed that night)" } else { "" };
                format!("{night}{machine}")
            })
            .collect();
        let last = s.nights.last().map_or(0.0, |n| n.1);
        let _ = writeln!(
            md,
            "| [{}](trends/{i}.svg) | {} | {} | {last:.4e} | {} |",
            s.figure,
            s.run,
            s.nights.len(),
            if cps.is_empty() { "-".into() } else { cps.join(", ") }
        );
    }
    // The page before its figures: a drawing cut short leaves parlab's page (which names the
    // figures as its own), never figures without it.
    crate::manifest::write_atomic(&dir.join("trends.md"), md.as_bytes())?;
    for (i, s) in all.iter().enumerate() {
        crate::manifest::write_atomic(&trends.join(format!("{i}.svg")), trend_svg(s).as_bytes())?;
    }
    // An earlier drawing of more series left `trends/<i>.svg` past the last drawn now: removed
    // (only the names written here: other files of the folder are kept).
    for entry in std::fs::read_dir(&trends)?.flatten() {
        let stale = drawn_index(&entry.file_name().to_string_lossy()).is_some_and(|i| i >= all.len());
        if stale && entry.path().is_file() {
            std::fs::remove_file(entry.path())
                .map_err(|e| std::io::Error::new(e.kind(), format!("cannot remove {}: {e}", entry.path().display())))?;
        }
    }
    Ok(all.into_iter().filter(|s| !s.change_points.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::{trend_svg, NightSide, Noise, Series, LAUNCH_FLOOR_Z};

    #[test]
    fn a_result_imported_beside_the_nights_runs_leaves_its_machines_as_they_were() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let fixtures = root.join("tests/fixtures/manifests");
        let (measured, _) = crate::manifest::read_all(&fixtures);
        assert!(!measured.is_empty(), "fixture manifests");
        let alone = super::machines(&super::super::Night::new(measured.clone()));
        let file = root.join("tests/data/import/nccl_all_gather_2gpu.txt");
        let imported = crate::import::import(crate::manifest::provenance::ImportTool::NcclTests, &file, &Default::default()).unwrap();
        assert!(!imported.provenance.is_measured());
        let with_import = super::machines(&super::super::Night::new([measured, vec![imported]].concat()));
        assert_eq!(with_import, alone, "an imported result records no machine of this night");
    }

    #[test]
    fn a_night_with_impossible_medians_is_skipped_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let night = |file: &str, night: &str, median: &str| {
            let point = format!(
                r#"{{"run_id": "{:064x}", "run": "abc decode", "figure": "decode step median", "median": {median}, "lower_is_better": true}}"#,
                1
            );
            let text = format!(r#"{{"schema": "{}", "night": "{night}", "points": [{point}]}}"#, super::SCHEMA);
            std::fs::write(dir.path().join(file), text).unwrap();
        };
        night("1.json", "2026-12-01T00:00:00Z", "0.05");
        night("2.json", "2026-12-02T00:00:00Z", "-1.0");
        night("3.json", "2026-12-03T00:00:00Z", "0");
        night("4.json", "2026-12-04T00:00:00Z", "1e300");
        let (entries, skipped) = super::read_all(dir.path());
        assert_eq!(entries.iter().map(|e| e.night.as_str()).collect::<Vec<_>>(), ["2026-12-01T00:00:00Z"]);
        let why: Vec<&str> = skipped.iter().map(|(_, w)| w.as_str()).collect();
        assert!(why[0].contains("abc decode decode step median: median -1 is not a figure a night records"), "{why:?}");
        assert!(why[1].contains("median 0 is not a figure"), "{why:?}");
        assert!(why.len() == 3 && why[2].contains("is not a figure a night records"), "past 2^60: {why:?}");
    }

    #[test]
    fn a_night_named_with_characters_of_several_bytes_is_drawn_without_a_panic() {
        let nights = vec![("2026-12-0é-night".to_string(), 1.0), ("日本語の夜です-2026".to_string(), 2.0)];
        let s = Series { run: "r".into(), figure: "step".into(), nights, lower_is_better: true, change_points: vec![] };
        let svg = trend_svg(&s);
        assert!(svg.contains(">2026-12-0é<") && svg.contains(">日本語の夜です-20<"), "{svg}");
    }

    #[test]
    fn the_floor_from_the_launches_is_the_scaled_mad_of_the_quieter_nights_logs() {
        let night = |level: f64, spread: f64| [-2.0, -1.0, 0.0, 1.0, 2.0].map(|d: f64| level * (d * spread).exp());
        // The quieter night's deviations from its median: 0.2, 0.1, 0, 0.1, 0.2 (median 0.1),
        // whatever its level: tonight's scatter does not widen the floor, nor the baseline's.
        let floor = |before: &[f64], after: &[f64]| match Noise::from_launches(before, after, None) {
            Noise::FromLaunches { sigma, launches, from, .. } => (sigma, launches, from),
            other => panic!("{other:?}"),
        };
        let (sigma, launches, from) = floor(&night(1.0, 0.1), &night(3.0, 0.5));
        assert_eq!((launches, from), (5, NightSide::Baseline));
        assert!((sigma - 0.14826).abs() < 1e-9, "{sigma}");
        let (sigma, _, from) = floor(&night(3.0, 0.5), &night(1.0, 0.1));
        assert_eq!(from, NightSide::Tonight, "a scattered baseline does not widen the floor");
        assert!((sigma - 0.14826).abs() < 1e-9, "{sigma}");
        let band = Noise::FromLaunches { sigma, launches, from, history: None }.band().unwrap();
        assert!((band - LAUNCH_FLOOR_Z * std::f64::consts::SQRT_2 * 0.14826).abs() < 1e-9, "{band}");
        assert_eq!(Noise::from_launches(&night(1.0, 0.1)[..2], &night(1.0, 0.1), None), Noise::NotKept, "too few launches for a floor");
        // Three launches a night (the specs' default): the quieter night's range over d2(3),
        // not the gap to the median's nearer neighbour (0.001 tonight: a floor of ±0.6 %).
        let three = |logs: [f64; 3]| logs.map(f64::exp);
        let (sigma, launches, from) = floor(&three([0.0, 0.05, 0.3]), &three([0.0, 0.001, 0.2]));
        assert_eq!((launches, from), (3, NightSide::Tonight));
        assert!((sigma - 0.2 / 1.693).abs() < 1e-9, "{sigma}");
    }
}
