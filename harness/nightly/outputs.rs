//! A night's comparison as text lines, JUnit XML, a markdown summary and JSON.

use super::history::Noise;
use super::{stats, Absence, AcrossLayouts, AnswerOutcome, Comparison, FigureVerdict, Finding, Method, RunStatus, Verdict};
use crate::xml::escape as xml_escape;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// `text` on one line (a reason quoting a rank's output may span several), for a list item.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" / ")
}

/// One line per finding.
pub fn render_text(findings: &[Finding]) -> String {
    findings.iter().map(|f| finding_line(f) + "\n").collect()
}

fn finding_line(f: &Finding) -> String {
    match f {
        Finding::AnswerChanged { run, moved } => format!(
            "ANSWER CHANGED {run}: generated tokens differ from the baseline from step {} ({})",
            moved.step,
            moved.margin.map_or_else(
                || "no per-step margins recorded".to_string(),
                |m| format!("a robust step: float32 top-2 margin {m:.3e}, drift {:.3e}", moved.drift)
            )
        ),
        Finding::NowFailing { run, status, reason } => {
            let ended = if *status == crate::manifest::Status::NotRun { "not run tonight" } else { "failed tonight" };
            match reason {
                None => format!("NOW FAILING {run}: {ended} (its manifest gives no reason)"),
                Some(why) => format!("NOW FAILING {run}: {ended}: {why}"),
            }
        }
        Finding::NoAnswer { run, why } => format!("NO ANSWER {run}: ok tonight but {why}; the baseline's run recorded a whole answer"),
        Finding::BaselineUnread { file, reason } => {
            format!("BASELINE UNREAD {file}: skipped ({reason}): a run it holds was not compared; mend or remove the file, or rebaseline")
        }
        Finding::Missing { run, absence: Absence::NoManifest } => format!("MISSING {run}: ok in the baseline, no manifest tonight"),
        Finding::Missing { run, absence: Absence::Unread { reason } } => {
            format!("MISSING {run}: ok in the baseline; tonight's manifest of it was skipped: {reason}")
        }
        Finding::Missing { run, absence: Absence::Renamed { now_as: successor } } => format!(
            "MISSING {run}: ok in the baseline, no manifest tonight; tonight's {successor} is that experiment's run at the same position under a new identity (its spec or parlab's identity rules changed: after a deliberate change, NIGHTLY_REBASELINE=1 for one night makes tonight the baseline)"
        ),
        Finding::MachineDiffers { runs, differences } => format!(
            "MACHINE DIFFERS for {runs} runs: {}; their timings were not compared (answers were): compare with a baseline from this machine",
            differences.join(", ")
        ),
        // The effect as the verdict line gives it (after / before − 1): a rate 100 -> 80 is −20 %.
        Finding::Regressed { run, figure, before, after, p, .. } => {
            format!("REGRESSED {run}: {figure} {before:.4e} -> {after:.4e} (effect {:+.1}%, p {p:.2e})", (after / before - 1.0) * 100.0)
        }
    }
}

/// One line per run whose tokens moved without changing the answer (a near-tie, half precision).
pub fn moved_lines(c: &Comparison) -> Vec<String> {
    c.runs
        .iter()
        .filter(|r| r.answer == AnswerOutcome::NearTie)
        .filter_map(|r| Some(super::answer::moved_line(&r.run, r.answer, r.moved.as_ref()?)))
        .collect()
}

/// How a verdict was reached, in words: the test, its settings and the noise it was held
/// against, or why there was no test.
pub fn method_text(v: &FigureVerdict) -> String {
    match v.method {
        Method::NoValueTonight { before } => {
            format!("{before} vs 0 launches: tonight has no per-launch value of this figure (no launch measured it)")
        }
        Method::TooFewLaunches { before, after, usable_before, usable_after } => {
            let unusable = if (usable_before, usable_after) == (before, after) {
                String::new()
            } else {
                format!(" ({usable_before} and {usable_after} of them above 0: the test compares logarithms)")
            };
            format!(
                "{before} vs {after} launches{unusable}: the t-test needs at least {} launches a night (a manifest without per-launch figures counts as one)",
                stats::MIN_PER_SIDE
            )
        }
        Method::Tested { test, q, policy, explained_by_bandwidth } => {
            let mut how = format!(
                "Yuen-Welch t on log per-launch medians, {} (df {:.1}), BH q {q:.3} vs FDR {}, effect {:+.1}% vs minimum {}; {}",
                trimmed_words(test.trimmed),
                test.df,
                decimal(policy.fdr),
                v.effect * 100.0,
                percent(policy.min_effect),
                v.noise.describe()
            );
            if let Some(n) = explained_by_bandwidth {
                let _ = write!(
                    how,
                    "; bandwidth-normalised change {:+.1}% is not beyond the minimum the same way: explained by memory bandwidth",
                    n * 100.0
                );
            }
            how
        }
    }
}

/// How many launches the test trimmed from each end of each night (none of fewer than 5).
fn trimmed_words((before, after): (usize, usize)) -> String {
    match (before, after) {
        (0, 0) => "nothing trimmed (under 5 launches a night: Welch's t)".to_string(),
        (b, a) if b == a => format!("{b} launch{} trimmed from each end of each night", if b == 1 { "" } else { "es" }),
        (b, a) => format!("{b} and {a} launches trimmed from each end (baseline, tonight)"),
    }
}

/// A fraction as a percentage with as many decimals as it has (up to 4 significant digits):
/// `0.05` is `5%`, `0.001` `0.1%`, `0.999` `99.9%`, never rounded to 0% or 100%.
pub fn percent(fraction: f64) -> String {
    let x = fraction * 100.0;
    // More decimals where 4 digits would round a rate inside (0, 100) % onto either end.
    let boundary = |text: &str| (text == "0" && x != 0.0) || (text == "100" && x != 100.0);
    let text = (significant(x)..=15).map(|digits| decimal_to(x, digits)).find(|t| !boundary(t)).unwrap_or_else(|| decimal(x));
    format!("{text}%")
}

/// A number in up to 4 significant digits, without trailing zeros.
pub fn decimal(x: f64) -> String {
    decimal_to(x, significant(x))
}

/// The decimals that give `x` 4 significant digits.
fn significant(x: f64) -> usize {
    if x == 0.0 || !x.is_finite() {
        0
    } else {
        (3 - x.abs().log10().floor() as i32).max(0) as usize
    }
}

/// `x` with `digits` decimals, trailing zeros dropped.
fn decimal_to(x: f64, digits: usize) -> String {
    let text = format!("{x:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A verdict as JSON: its figures, the test's `p` and `q` (null when untested) and the method
/// in words.
impl Serialize for FigureVerdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            run: &'a str,
            experiment: &'a str,
            figure: &'a str,
            verdict: Verdict,
            before: f64,
            after: f64,
            effect: f64,
            worse_by: f64,
            p: Option<f64>,
            q: Option<f64>,
            n_before: usize,
            n_after: usize,
            noise: Noise,
            method: String,
            bandwidth_normalised_worse_by: Option<f64>,
        }
        Json {
            run: &self.run,
            experiment: &self.experiment,
            figure: &self.figure,
            verdict: self.verdict,
            before: self.before,
            after: self.after,
            effect: self.effect,
            worse_by: self.worse_by,
            p: self.method.p(),
            q: self.method.q(),
            n_before: self.n_before,
            n_after: self.n_after,
            noise: self.noise,
            method: method_text(self),
            bandwidth_normalised_worse_by: self.bandwidth_normalised_worse_by,
        }
        .serialize(serializer)
    }
}

/// A p or q value in three significant digits, `-` when there is none.
fn num(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |x| format!("{x:.2e}"))
}

/// One line per verdict: `VERDICT run: figure before -> after (effect, p, q, launches; method
/// with the noise estimate)`.
pub fn verdict_line(v: &FigureVerdict) -> String {
    format!(
        "{} {}: {} {:.4e} -> {:.4e} (effect {:+.1}%{}, p {}, q {}, launches {}/{}; {})",
        v.verdict.name(),
        v.run,
        v.figure,
        v.before,
        v.after,
        v.effect * 100.0,
        v.bandwidth_normalised_worse_by.map_or(String::new(), |n| format!(", {:+.1}% worse bandwidth-normalised", n * 100.0)),
        num(v.method.p()),
        num(v.method.q()),
        v.n_before,
        v.n_after,
        method_text(v)
    )
}

/// How many figures got each verdict, in verdict order.
pub fn counts(c: &Comparison) -> BTreeMap<Verdict, usize> {
    let mut out = BTreeMap::new();
    for v in &c.verdicts {
        *out.entry(v.verdict).or_insert(0) += 1;
    }
    out
}

/// `REGRESSED 1, NO_CHANGE 12, ...`.
pub fn counts_line(c: &Comparison) -> String {
    let parts: Vec<String> = counts(c).into_iter().map(|(v, n)| format!("{} {n}", v.name())).collect();
    if parts.is_empty() {
        "no comparable figures".into()
    } else {
        parts.join(", ")
    }
}

/// How a JUnit test case did, when not passed: its element and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseOutcome {
    /// `<failure>` of a kind (its `type`: the finding's name, as in the JSON).
    Failure(&'static str),
    /// `<skipped>`.
    Skipped,
}

impl CaseOutcome {
    /// The JUnit element's name.
    fn element(self) -> &'static str {
        match self {
            CaseOutcome::Failure(_) => "failure",
            CaseOutcome::Skipped => "skipped",
        }
    }

    /// Whether it is a failure.
    fn failed(self) -> bool {
        matches!(self, CaseOutcome::Failure(_))
    }
}

/// A finding's name, as the JSON's `finding` tag writes it.
fn finding_kind(f: &Finding) -> &'static str {
    match f {
        Finding::AnswerChanged { .. } => "answer_changed",
        Finding::NoAnswer { .. } => "no_answer",
        Finding::NowFailing { .. } => "now_failing",
        Finding::BaselineUnread { .. } => "baseline_unread",
        Finding::Missing { .. } => "missing",
        Finding::MachineDiffers { .. } => "machine_differs",
        Finding::Regressed { .. } => "regressed",
    }
}

/// A JUnit test case: classname, name, and an optional (outcome, message).
struct Case {
    name: String,
    outcome: Option<(CaseOutcome, String)>,
    out: String,
}

/// Test cases per suite (experiment): per run its status and answer, per figure its verdict.
fn cases(c: &Comparison, layouts: &[AcrossLayouts]) -> BTreeMap<String, Vec<Case>> {
    let mut suites: BTreeMap<String, Vec<Case>> = BTreeMap::new();
    let finding_for = |run: &str, want: fn(&Finding) -> bool| {
        c.findings.iter().find(|f| want(f) && matches!(f, Finding::Missing { run: r, .. } | Finding::NowFailing { run: r, .. } | Finding::AnswerChanged { run: r, .. } | Finding::NoAnswer { run: r, .. } if r == run))
    };
    for r in &c.runs {
        let status = finding_for(&r.run, |f| matches!(f, Finding::Missing { .. } | Finding::NowFailing { .. }));
        let answer = finding_for(&r.run, |f| matches!(f, Finding::AnswerChanged { .. } | Finding::NoAnswer { .. }));
        let suite = suites.entry(r.experiment.clone()).or_default();
        let fail = |f: Option<&Finding>| f.map(|f| (CaseOutcome::Failure(finding_kind(f)), finding_line(f)));
        suite.push(Case { name: format!("{} status", r.run), outcome: fail(status), out: r.status.name().into() });
        if r.status == RunStatus::Ok {
            let out = r.moved.as_ref().map_or_else(|| r.answer.name().into(), |m| super::answer::moved_line(&r.run, r.answer, m));
            suite.push(Case { name: format!("{} answer", r.run), outcome: fail(answer), out });
        }
    }
    for v in &c.verdicts {
        let outcome = match v.verdict {
            Verdict::Regressed => Some((CaseOutcome::Failure("regressed"), verdict_line(v))),
            Verdict::InsufficientEvidence => Some((CaseOutcome::Skipped, verdict_line(v))),
            _ => None,
        };
        suites.entry(v.experiment.clone()).or_default().push(Case {
            name: format!("{} {}", v.run, v.figure),
            outcome,
            out: verdict_line(v),
        });
    }
    let night = suites.entry("parlab nightly".into()).or_default();
    for f in c.findings.iter().filter(|f| matches!(f, Finding::MachineDiffers { .. } | Finding::BaselineUnread { .. })) {
        let name = match f {
            Finding::BaselineUnread { file, .. } => format!("baseline file {file}"),
            _ => "machine fingerprint".into(),
        };
        night.push(Case { name, outcome: Some((CaseOutcome::Failure(finding_kind(f)), finding_line(f))), out: String::new() });
    }
    for l in layouts {
        night.push(Case {
            name: format!("answer across layouts: {}", l.answer),
            outcome: Some((CaseOutcome::Failure(l.kind()), l.line())),
            out: String::new(),
        });
    }
    suites.retain(|_, v| !v.is_empty());
    suites
}

/// The XML declaration every JUnit report `nightly` writes starts with.
const XML_DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

/// How every JUnit report `nightly` writes opens its second line (its root element).
const JUNIT_MARK: &str = "<testsuites name=\"parlab nightly\"";

/// The first line of every summary `nightly` writes.
const SUMMARY_HEADER: &str = "## parlab nightly\n";

/// Whether `text` (a file's beginning) is a JUnit report `nightly` wrote (one it may replace).
pub fn is_own_junit(text: &str) -> bool {
    text.strip_prefix(XML_DECLARATION).is_some_and(|rest| rest.starts_with(JUNIT_MARK))
}

/// Whether `text` (a file's beginning) is a summary `nightly` wrote (one it may replace).
pub fn is_own_summary(text: &str) -> bool {
    text.starts_with(SUMMARY_HEADER)
}

/// The comparison as JUnit XML (`testsuites` > `testsuite` per experiment > `testcase`):
/// failures for regressions, changed answers, new failures, missing runs and a changed
/// machine; skipped for insufficient evidence. `layouts` are answers that changed across layouts.
pub fn junit(c: &Comparison, layouts: &[AcrossLayouts], timestamp: &str) -> String {
    let suites = cases(c, layouts);
    let count = |cs: &[Case], failed: bool| cs.iter().filter(|k| k.outcome.as_ref().is_some_and(|o| o.0.failed() == failed)).count();
    let total = |failed| suites.values().map(|cs| count(cs, failed)).sum::<usize>();
    let (fail, skip) = (total(true), total(false));
    let tests: usize = suites.values().map(Vec::len).sum();
    let mut x = String::from(XML_DECLARATION);
    let _ = writeln!(x, "{JUNIT_MARK} tests=\"{tests}\" failures=\"{fail}\" errors=\"0\" skipped=\"{skip}\" time=\"0\">");
    for (name, cs) in &suites {
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"0\" timestamp=\"{}\">",
            xml_escape(name),
            cs.len(),
            count(cs, true),
            count(cs, false),
            xml_escape(timestamp)
        );
        for k in cs {
            let _ =
                write!(x, "    <testcase classname=\"parlab.nightly.{}\" name=\"{}\" time=\"0\">", xml_escape(name), xml_escape(&k.name));
            if let Some((kind, msg)) = &k.outcome {
                let _ = write!(x, "<{} message=\"{}\"", kind.element(), xml_escape(msg));
                let _ = match kind {
                    CaseOutcome::Failure(type_name) => write!(x, " type=\"{type_name}\">{}</failure>", xml_escape(msg)),
                    CaseOutcome::Skipped => write!(x, "/>"),
                };
            }
            if !k.out.is_empty() {
                let _ = write!(x, "<system-out>{}</system-out>", xml_escape(&k.out));
            }
            x.push_str("</testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// A markdown summary for a CI job page: counts, findings, and every verdict but NO_CHANGE.
pub fn markdown(c: &Comparison, layouts: &[AcrossLayouts], baseline: &str) -> String {
    let mut m = format!("{SUMMARY_HEADER}\n{} runs compared with `{}`; figures: {}.\n\n", c.compared, baseline, counts_line(c));
    let _ = writeln!(
        m,
        "Method: per figure, Yuen's trimmed (Welch) t on the logs of each launch's median (at least {} launches a night), Benjamini-Hochberg FDR {}, minimum effect {}, and outside the figure's night-to-night noise band where a history is kept.{}\n",
        super::stats::MIN_PER_SIDE,
        percent(c.policy.fdr),
        percent(c.policy.min_effect),
        c.bandwidth_ratio.map_or(String::new(), |r| format!(" Memory bandwidth tonight / baseline: {r:.3}."))
    );
    if c.findings.is_empty() && layouts.is_empty() {
        m.push_str("**No findings.**\n\n");
    } else {
        m.push_str("### Findings\n\n");
        c.findings.iter().for_each(|f| m.push_str(&format!("- {}\n", one_line(&xml_escape(&finding_line(f))))));
        layouts.iter().for_each(|l| m.push_str(&format!("- {}\n", l.line())));
        m.push('\n');
    }
    let moved = moved_lines(c);
    if !moved.is_empty() {
        m.push_str("### Answers that moved without changing\n\n");
        moved.iter().for_each(|l| m.push_str(&format!("- {}\n", one_line(&xml_escape(l)))));
        m.push('\n');
    }
    let shown: Vec<&FigureVerdict> = c.verdicts.iter().filter(|v| v.verdict != Verdict::NoChange).collect();
    if !shown.is_empty() {
        m.push_str(
            "| verdict | run | figure | before | after | effect | p | q | launches | noise |\n|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for v in shown {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {:.4e} | {:.4e} | {:+.1}% | {} | {} | {}/{} | {} |",
                v.verdict.name(),
                v.run,
                v.figure,
                v.before,
                v.after,
                v.effect * 100.0,
                num(v.method.p()),
                num(v.method.q()),
                v.n_before,
                v.n_after,
                v.noise.describe()
            );
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_printed_with_the_decimals_it_has_never_rounded_to_0_or_100_percent() {
        let cases = [
            (0.05, "5%"),
            (0.1, "10%"),
            (0.001, "0.1%"),
            (0.004, "0.4%"),
            (0.999, "99.9%"),
            (0.0375, "3.75%"),
            (0.0, "0%"),
            (0.99999, "99.999%"),
            (0.9999999, "99.99999%"),
            (1.0, "100%"),
        ];
        for (fraction, text) in cases {
            assert_eq!(percent(fraction), text, "{fraction}");
        }
        assert_eq!(decimal(0.05), "0.05");
        assert_eq!(decimal(1234.56), "1235");
    }

    #[test]
    fn a_junit_failure_type_is_the_findings_json_tag() {
        use super::super::{AnswerMove, Finding};
        let findings = [
            Finding::AnswerChanged { run: "r".into(), moved: AnswerMove { step: 1, margin: None, drift: 0.0 } },
            Finding::NoAnswer { run: "r".into(), why: "w".into() },
            Finding::NowFailing { run: "r".into(), status: crate::manifest::Status::Failed, reason: None },
            Finding::BaselineUnread { file: "f".into(), reason: "r".into() },
            Finding::Missing { run: "r".into(), absence: Absence::NoManifest },
            Finding::MachineDiffers { runs: 1, differences: vec![] },
            Finding::Regressed { run: "r".into(), figure: "f".into(), before: 1.0, after: 2.0, worse_by: 1.0, p: 0.01 },
        ];
        for f in &findings {
            assert_eq!(serde_json::to_value(f).unwrap()["finding"], finding_kind(f), "{f:?}");
        }
    }

    #[test]
    fn the_trimming_said_is_the_tests_own() {
        assert_eq!(trimmed_words((0, 0)), "nothing trimmed (under 5 launches a night: Welch's t)");
        assert_eq!(trimmed_words((1, 1)), "1 launch trimmed from each end of each night");
        assert_eq!(trimmed_words((2, 1)), "2 and 1 launches trimmed from each end (baseline, tonight)");
        let test = stats::yuen_log(&[1.0, 1.1, 0.9], &[2.0, 2.1, 1.9, 2.2, 2.05, 1.95, 2.0]).unwrap();
        assert_eq!(test.trimmed, (0, 1));
    }
}
