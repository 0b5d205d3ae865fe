//! `parlab nightly`: tonight's manifests against a baseline, and answers across layouts.

use super::folder::{Folder, HISTORY_HOLDS, MANIFESTS_HOLD};
use super::Error;
use crate::nightly::history::NoiseBook;
use crate::nightly::{compare, compared, outputs, render_text, AcrossLayouts, Finding, Night, Policy};
use std::path::{Path, PathBuf};

/// Where `parlab nightly` writes its machine-readable results, besides stdout.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// JUnit XML file.
    pub junit: Option<PathBuf>,
    /// Markdown summary file.
    pub summary: Option<PathBuf>,
    /// Print JSON instead of text.
    pub json: bool,
    /// History folder: tonight's figures are appended and the trends redrawn.
    pub history: Option<PathBuf>,
}

fn check(policy: &Policy) -> Result<(), Error> {
    let fraction = |v: f64| v.is_finite() && v > 0.0;
    if !(policy.min_effect.is_finite() && (0.0..=MAX_MIN_EFFECT).contains(&policy.min_effect)) {
        return Err(Error::Usage(format!(
            "--min-effect {}: expected a fraction from 0 to {MAX_MIN_EFFECT} (e.g. 0.10 for 10%; {MAX_MIN_EFFECT} asks for a change of {}%)",
            policy.min_effect,
            MAX_MIN_EFFECT * 100.0
        )));
    }
    if !(fraction(policy.fdr) && policy.fdr < 1.0) {
        return Err(Error::Usage(format!("--fdr {}: expected a rate between 0 and 1 (e.g. 0.05)", policy.fdr)));
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::manifest::write_atomic(path, text.as_bytes()).map_err(Into::into)
}

/// Whether a file can be made in `dir` (made and removed again), so that an output it cannot
/// hold is refused before the night is judged.
fn can_write_in(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".parlab-nightly-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe)?;
    std::fs::remove_file(&probe)
}

/// Whether the folder `dir` exists or can be made, and parlab can write in it: checked before
/// the verdicts, so that a history that could never be kept is a usage error, not a failure
/// after them. Why not, where not.
fn makeable(dir: &Path) -> Result<(), String> {
    let nearest = dir.ancestors().map(|a| if a.as_os_str().is_empty() { Path::new(".") } else { a }).find(|a| a.exists());
    let Some(nearest) = nearest else { return Ok(()) };
    if !nearest.is_dir() {
        return Err(format!("cannot be made: {} is a file", nearest.display()));
    }
    can_write_in(nearest).map_err(|e| format!("cannot write in {}: {e}", nearest.display()))
}

/// Whether `a` and `b` name one file, existing or not: their folders resolved (links, `..`)
/// and their names compared.
fn one_file(a: &Path, b: &Path) -> bool {
    a == b || resolved(a).is_some_and(|x| Some(x) == resolved(b))
}

/// `p` with its folder resolved (links, `..`) and its own name kept; None where the folder is missing.
fn resolved(p: &Path) -> Option<PathBuf> {
    let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::canonicalize(parent).ok().zip(p.file_name()).map(|(dir, name)| dir.join(name))
}

/// Whether `a` and `b` are two names of one file: a hard link, or a symbolic link from one to the
/// other (its target missing included).
fn linked(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let same_inode = match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    };
    let target = |p: &Path| std::fs::read_link(p).ok().map(|t| p.parent().unwrap_or(Path::new(".")).join(t));
    let points_to = |from: &Path, to: &Path| target(from).is_some_and(|t| one_file(&t, to));
    same_inode || points_to(a, b) || points_to(b, a)
}

/// Whether writing `path` loses nothing: it does not exist, is empty, or holds what `nightly`
/// itself writes there (`own`: recognises its JUnit report or its summary by their beginning).
fn replaceable(path: &Path, own: fn(&str) -> bool) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return !path.is_symlink();
    };
    if meta.len() == 0 {
        return meta.is_file();
    }
    use std::io::Read as _;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head));
    read.is_ok() && meta.is_file() && own(&String::from_utf8_lossy(&head))
}

/// Refuses a baseline that is tonight's folder, and output paths that cannot be written, before
/// anything is compared or written: `--junit` and `--summary` naming one file, either a folder,
/// a parlab file (a manifest), any other file nightly did not write (a spec, a register, a
/// cache), or whose folder is missing, a `--history`
/// folder that is a file or one of the manifests folders compared (its nights would be read
/// back as foreign manifests).
fn check_outputs(outs: &Outputs, baseline: &Path, manifests: &Path) -> Result<(), Error> {
    let same = crate::report::origin::same_folder;
    if same(baseline, manifests) {
        return Err(Error::Usage(format!(
            "--baseline {}: is tonight's manifests folder ({}); a night compared with itself finds nothing: pass the last good night's folder",
            baseline.display(),
            manifests.display()
        )));
    }
    if let (Some(junit), Some(summary)) = (&outs.junit, &outs.summary) {
        if one_file(junit, summary) {
            return Err(Error::Usage(format!(
                "--junit {} and --summary {}: the same file; one would overwrite the other: name two files",
                junit.display(),
                summary.display()
            )));
        }
        if linked(junit, summary) {
            return Err(Error::Usage(format!(
                "--junit {} and --summary {}: two names of one file (a link); each is written in place of its name, which would break the link: name two files",
                junit.display(),
                summary.display()
            )));
        }
    }
    if let Some(dir) = &outs.history {
        for (store, what) in [(manifests, "tonight's manifests folder"), (baseline, "the baseline manifests folder")] {
            if same(dir, store) {
                return Err(Error::Usage(format!(
                    "--history {}: is {what}; its nights (.json) would be read back as foreign manifests; pass --history DIR beside it",
                    dir.display()
                )));
            }
        }
    }
    for (flag, path) in [("--junit", &outs.junit), ("--summary", &outs.summary)] {
        let Some(path) = path else { continue };
        if path.is_dir() {
            return Err(Error::Usage(format!("{flag} {}: a folder; {flag} names the file to write", path.display())));
        }
        if let Some(schema) = crate::manifest::file_schema(path) {
            return Err(Error::Usage(format!(
                "{flag} {}: holds a parlab file ({schema}) it would replace; {flag} names the file to write",
                path.display()
            )));
        }
        let own = if flag == "--junit" { outputs::is_own_junit } else { outputs::is_own_summary };
        if !replaceable(path, own) {
            return Err(Error::Usage(format!(
                "{flag} {}: holds a file that `parlab nightly` did not write, which it would replace; remove it or name another file",
                path.display()
            )));
        }
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let is_json = path.extension().is_some_and(|x| x == "json");
        let read_back = [(outs.history.as_deref(), "the --history folder", true), (Some(manifests), "tonight's manifests folder", is_json)]
            .into_iter()
            .chain([(Some(baseline), "the baseline manifests folder", is_json)])
            .find(|(dir, _, refused)| *refused && dir.is_some_and(|d| same(parent, d)));
        if let Some((_, what, _)) = read_back {
            return Err(Error::Usage(format!(
                "{flag} {}: inside {what}, whose files parlab reads back (as nights or manifests); name a file elsewhere",
                path.display()
            )));
        }
        if !parent.is_dir() {
            return Err(Error::Usage(format!("{flag} {}: no such folder {}", path.display(), parent.display())));
        }
        if let Err(e) = can_write_in(parent) {
            return Err(Error::Usage(format!("{flag} {}: cannot write in {}: {e}", path.display(), parent.display())));
        }
    }
    match &outs.history {
        Some(dir) => {
            Folder::flag(dir, "--history").not_a_file(HISTORY_HOLDS)?;
            makeable(dir).map_err(|why| Error::Usage(format!("--history {}: {why}", dir.display())))
        }
        None => Ok(()),
    }
}

/// The largest `--min-effect` taken: a tenfold change.
const MAX_MIN_EFFECT: f64 = 10.0;

/// Compares `manifests` with `baseline`; exit 3 on a changed answer, 4 on any other finding.
pub fn run(baseline: &Path, tonight: &Folder, policy: &Policy, outs: &Outputs) -> super::Result<i32> {
    let manifests = tonight.path.as_path();
    check(policy)?;
    check_outputs(outs, baseline, manifests)?;
    Folder::flag(baseline, "--baseline").existing(MANIFESTS_HOLD, "baseline manifests folder", "")?;
    tonight.existing(MANIFESTS_HOLD, "tonight's manifests folder", "")?;
    let (before, skipped_before) = Night::load(baseline);
    let (after, skipped_after) = Night::load(manifests);
    for s in skipped_before.iter().chain(&skipped_after) {
        crate::say!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    for (night, what) in [(&before, "baseline"), (&after, "tonight")] {
        if let (n @ 1.., Some(run)) = night.without_launches() {
            crate::say!(
                "warning: {n} ok runs of the {what} have no per-launch figures (e.g. {run}: written before launches were recorded); each counts as one launch, too few to test (INSUFFICIENT_EVIDENCE)"
            );
        }
    }
    if compared(&before.manifests, &after.manifests) == 0 {
        let ok = before.manifests.iter().filter(|m| m.status() == crate::manifest::Status::Ok).count();
        let why = if ok == 0 && !before.manifests.is_empty() {
            format!(
                "none of the {} baseline manifests in {} is of a run that ended ok (failed or not run: no figure or answer to compare tonight's with)",
                before.manifests.len(),
                baseline.display()
            )
        } else {
            format!(
                "none of the {ok} ok runs of the baseline in {} has a manifest among the {} in {} (another suite, or an empty folder?)",
                baseline.display(),
                after.manifests.len(),
                manifests.display()
            )
        };
        let unread = match before.unread.iter().next() {
            Some((name, reason)) => format!(
                "; {} baseline file{} holding runs could not be read (the first, {name}.json: {reason})",
                before.unread.len(),
                if before.unread.len() == 1 { "" } else { "s" }
            ),
            None => String::new(),
        };
        return Err(Error::Usage(format!("nothing to compare: {why}{unread}")));
    }
    // The history is read once: its nights give the noise bands, then tonight is appended. A
    // night of tonight's very figures (a retried job judging the same folder) is tonight: it
    // neither narrows tonight's bands nor is kept twice.
    let tonight_points = crate::nightly::history::points(&after);
    let history = outs.history.as_deref().map(|dir| {
        let (earlier, again): (Vec<_>, Vec<_>) =
            crate::nightly::history::read_warning(dir).into_iter().partition(|e| e.points.is_empty() || e.points != tonight_points);
        (dir, earlier, again.into_iter().next())
    });
    let noise = match &history {
        Some((_, entries, _)) => NoiseBook::from_entries(entries, &crate::nightly::history::machines(&after)),
        None => NoiseBook::NotKept,
    };
    let comparison = compare(&before, &after, policy, &noise);
    let layouts: Vec<AcrossLayouts> = crate::audit::audit(&after.manifests).iter().filter_map(AcrossLayouts::of_group).collect();
    if outs.json {
        let value = serde_json::json!({"comparison": comparison, "answers_changed_across_layouts": layouts.iter().map(AcrossLayouts::json).collect::<Vec<_>>()});
        super::output::print_json(&value)?;
    } else {
        super::output::print(&text(&comparison, &layouts, baseline))?;
    }
    let answer_changed = !layouts.is_empty() || comparison.findings.iter().any(|f| matches!(f, Finding::AnswerChanged { .. }));
    let code = if answer_changed {
        crate::exitcode::AUDIT_ANSWER_CHANGED
    } else if comparison.findings.is_empty() {
        crate::exitcode::OK
    } else {
        crate::exitcode::NIGHTLY_REGRESSION
    };
    // Written after the verdicts are out: a file that cannot be written loses none of them,
    // and a night that found something keeps its exit code.
    let files = [
        (&outs.junit, outputs::junit(&comparison, &layouts, &crate::manifest::now())),
        (&outs.summary, outputs::markdown(&comparison, &layouts, &baseline.display().to_string())),
    ];
    for (path, text) in files.iter().filter_map(|(p, t)| p.as_ref().zip(Some(t))) {
        match write(path, text) {
            Err(e) if code == crate::exitcode::OK => return Err(e.context(format!("writing {}", path.display())).into()),
            Err(e) => crate::say!("error: writing {}: {e:#}; the verdicts above stand", path.display()),
            Ok(()) => {}
        }
    }
    // Kept after the verdicts are out: a history that cannot be written loses none of them,
    // and a night that found something keeps its exit code.
    if let Some((dir, _, Some(kept))) = &history {
        crate::say!("nightly: tonight's figures are in the history already (night {}, {}): not kept again", kept.night, dir.display());
    } else if let Some((dir, entries, None)) = history {
        match keep_history(dir, entries, &after, policy) {
            Err(e) if code == crate::exitcode::OK => return Err(e.into()),
            Err(e) => crate::say!("error: {e:#}; the history was not kept"),
            Ok(()) => {}
        }
    }
    Ok(code)
}

/// The comparison as the text `parlab nightly` prints: flagged verdicts, findings, moved answers,
/// answers changed across layouts and a summary line.
fn text(c: &crate::nightly::Comparison, layouts: &[AcrossLayouts], baseline: &Path) -> String {
    let verdicts = c.verdicts.iter().filter(|v| v.verdict != crate::nightly::Verdict::NoChange);
    let mut out: String = verdicts.map(|v| outputs::verdict_line(v) + "\n").collect();
    out.push_str(&render_text(&c.findings));
    let mut lines: Vec<String> = outputs::moved_lines(c);
    lines.extend(layouts.iter().map(AcrossLayouts::line));
    lines.push(format!(
        "nightly: {} runs compared with {}, {} findings; figures: {} (Yuen-Welch t on per-launch medians, FDR {}, minimum effect {})",
        c.compared,
        baseline.display(),
        c.findings.len(),
        outputs::counts_line(c),
        outputs::percent(c.policy.fdr),
        outputs::percent(c.policy.min_effect)
    ));
    out + &lines.iter().map(|l| format!("{l}\n")).collect::<String>()
}

/// The most `TREND` lines a night prints (trends.md holds them all).
const TREND_LINES: usize = 20;

/// Appends tonight to the history in `dir` (whose nights, `entries`, were read before it) and
/// draws its trends, warning of nights dated after now.
fn keep_history(dir: &Path, mut entries: Vec<crate::nightly::history::Entry>, tonight: &Night, policy: &Policy) -> anyhow::Result<()> {
    let now = crate::manifest::now();
    let ahead: Vec<&str> = entries.iter().map(|e| e.night.as_str()).filter(|night| *night > now.as_str()).collect();
    if let Some(newest) = ahead.last() {
        crate::say!(
            "warning: --history {}: {} night{} dated after now ({now}), the newest {newest}: {} after tonight in the trends (a clock that was ahead, or nights copied from elsewhere)",
            dir.display(),
            ahead.len(),
            if ahead.len() == 1 { " is" } else { "s are" },
            if ahead.len() == 1 { "it sorts" } else { "they sort" }
        );
    }
    let entry = crate::nightly::history::append(dir, tonight, &now)?;
    // As a read of the folder would have it: by night, the one appended last of its second, and
    // not at all where a read would skip it (a median no night records).
    let appended = crate::nightly::history::entry_of(tonight, &now);
    if crate::nightly::history::implausible(&appended).is_none() {
        entries.push(appended);
        entries.sort_by(|a, b| a.night.cmp(&b.night));
    }
    let changed = crate::nightly::history::write_trends_of(&entries, dir, policy)?;
    crate::say!(
        "nightly: history {} ({} series with change points; trends in {})",
        entry.display(),
        changed.len(),
        dir.join("trends.md").display()
    );
    for line in trend_lines(&changed) {
        crate::say!("{line}");
    }
    Ok(())
}

/// The `TREND` lines of the series with change points: the first [`TREND_LINES`], then how many
/// more there are.
fn trend_lines(changed: &[crate::nightly::history::Series]) -> Vec<String> {
    let mut lines: Vec<String> = changed
        .iter()
        .take(TREND_LINES)
        .map(|s| {
            let at: Vec<&str> = s.change_points.iter().filter_map(|&c| s.nights.get(c)).map(|n| n.0.as_str()).collect();
            format!("TREND {}: {} changed level at {}", s.run, s.figure, at.join(", "))
        })
        .collect();
    if changed.len() > TREND_LINES {
        lines.push(format!("TREND … and {} more series with change points (trends.md lists every one)", changed.len() - TREND_LINES));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_night_prints_twenty_trend_lines_and_counts_the_rest() {
        let series = |i: usize| crate::nightly::history::Series {
            run: format!("run{i:02}"),
            figure: "decode step median".into(),
            nights: vec![("2026-12-01".into(), 1.0), ("2026-12-02".into(), 1.0), ("2026-12-03".into(), 2.0)],
            lower_is_better: true,
            change_points: vec![2],
        };
        let lines = trend_lines(&(0..23).map(series).collect::<Vec<_>>());
        assert_eq!(lines.len(), TREND_LINES + 1);
        assert_eq!(lines[0], "TREND run00: decode step median changed level at 2026-12-03");
        assert_eq!(lines[TREND_LINES - 1], "TREND run19: decode step median changed level at 2026-12-03");
        assert_eq!(lines[TREND_LINES], "TREND … and 3 more series with change points (trends.md lists every one)");
        assert_eq!(trend_lines(&(0..TREND_LINES).map(series).collect::<Vec<_>>()).len(), TREND_LINES, "no count line when all are shown");
    }
}
