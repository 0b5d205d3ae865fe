//! Imported collectives: the runs `parlab import` read from other tools' output, in a family
//! of their own ("Imported collectives"), each table titled with its tool, version and
//! command line, and a `source` column on every row; in MODELLED their link reads
//! `<link> (imported: <tool>)`, so no table mixes them with parlab's measurements unsaid.

use super::facts::{coll_row, CollRow, Fit};
use super::measured::{fit_cells, FIT_COLUMNS};
use super::{fmt, Family, FamilyKind};
use crate::manifest::provenance::Imported;
use crate::manifest::summary::{CollectiveRow, Summary};
use crate::manifest::Manifest;
use crate::spec::link::Link;
use crate::table::{Cell, Table};
use std::borrow::Cow;

/// The heading of the imported family.
pub const TITLE: &str = "Imported collectives (other tools' measurements, read in by parlab import)";

const INTRO: &str = "Collectives measured by other tools (nccl-tests, OSU micro-benchmarks) on the machines they ran on, and read in by `parlab import`: not measured by parlab, not in the tables, figures or findings of parlab's own runs above. Each table names its tool, version, command line and ranks. Times are the tool's: per size its mean over its timed iterations, averaged over ranks (one sample per size and cycle, so no min – max); out of place and, where the tool timed it, in place. algbw = size / out-of-place time; busbw = algbw × the nccl-tests factor. `wrong` is the tool's own check (#wrong), `unchecked` where it ran without one. Their α–β fits enter MODELLED under the link `<link> (imported: <tool>)`.";

/// One imported run as the register reads it.
#[derive(Debug, Clone)]
pub struct ImportedRun {
    /// What the import kept of the tool's run.
    pub source: Imported,
    /// The experiment name it is filed under (`import-<tool>-<12 hex of the file>`).
    pub experiment: String,
    /// Run identity (12 hex).
    pub run: String,
    /// Ranks.
    pub world: u32,
    /// The rows as stored (with their in-place times).
    pub rows: Vec<CollectiveRow>,
    /// The same rows as the measured tables read them (bandwidths, factor).
    pub view: Vec<CollRow>,
    /// The fits, their link labelled as imported.
    pub fits: Vec<Fit>,
}

impl ImportedRun {
    /// The imported run of `m`, if it is an imported collectives manifest.
    pub fn of(m: &Manifest, summary: &Summary) -> Option<ImportedRun> {
        let source = m.provenance.imported()?.clone();
        let c = summary.collectives()?;
        let link = label(&m.plan.link, &source);
        let run = m.run_id.short().to_string();
        Some(ImportedRun {
            experiment: m.experiment.clone(),
            world: m.layout.world,
            rows: c.rows.clone(),
            view: c.rows.iter().map(|r| coll_row(m, r)).collect(),
            fits: c
                .fits
                .iter()
                .map(|f| Fit { experiment: m.experiment.clone(), link: link.clone(), fit: f.clone(), run: run.clone() })
                .collect(),
            run,
            source,
        })
    }
}

/// `nccl (imported: nccl-tests)`: the link of an imported run wherever it sits among measured ones.
pub fn label(link: &Link, source: &Imported) -> Link {
    Link::Named(format!("{link} (imported: {})", source.tool.name()))
}

/// The imported family, when any run was imported.
pub fn family(runs: &[ImportedRun]) -> Option<Family> {
    if runs.is_empty() {
        return None;
    }
    let mut tables: Vec<Table> = runs.iter().map(table).collect();
    tables.extend(fits(runs));
    Some(Family::new(FamilyKind::Imported, TITLE, INTRO, tables))
}

fn table(run: &ImportedRun) -> Table {
    let s = &run.source;
    let op = run.rows.first().map_or("-", |r| r.op.name());
    let command = s.command.as_deref().map_or("command not recorded".to_string(), |c| format!("command {}", code(c)));
    let has_in_place = run.rows.iter().any(|r| r.in_place_op_time.is_some());
    let mut columns = vec!["world", "link", "size", "out-of-place time"];
    if has_in_place {
        columns.push("in-place time");
    }
    columns.extend(["algbw", "busbw", "busbw factor", "wrong", "source", "run"]);
    Table {
        id: format!("imported-{}-{}", fmt::slug(&run.experiment), fmt::slug(op)),
        title: format!("{op}{}: imported from {} ({}), {command}", s.data_words(), s.benchmark, s.tool_line()),
        caption: format!(
            "{op} measured by {} on {}, read from `{}` ({} output) by `parlab import`; imported, not measured by parlab.",
            s.tool.name(),
            ranks_line(run),
            shown_file(s),
            s.format.name()
        ),
        columns: columns.into_iter().map(str::to_string).collect(),
        rows: run.rows.iter().zip(&run.view).map(|(r, v)| cells(run, r, v, has_in_place)).collect(),
        provenance: provenance(run),
    }
}

fn cells(run: &ImportedRun, r: &CollectiveRow, v: &CollRow, has_in_place: bool) -> Vec<Cell> {
    let mut out =
        vec![Cell::Count(r.world.into()), Cell::text(r.link.name()), Cell::Bytes(r.size_bytes as f64), Cell::Seconds(r.fit_time())];
    if has_in_place {
        out.push(Cell::opt(r.in_place_op_time.map(|s| s.median), Cell::Seconds));
    }
    out.extend([
        Cell::BytesPerSec(v.algbw),
        Cell::BytesPerSec(v.busbw),
        Cell::Number(v.factor),
        if run.source.checked { Cell::Count(r.wrong) } else { Cell::text("unchecked") },
        Cell::text(format!("imported: {}", run.source.tool.name())),
        Cell::text(&run.run),
    ]);
    out
}

/// Text from another tool's output or the command line as one line of the register: each line
/// break (and the blanks around it) a space, so a line of it never becomes a heading or a row.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// `text` on one line as a markdown code span, its delimiter longer than any run of backticks
/// in it (`` a `b` ``).
fn code(text: &str) -> String {
    let text = one_line(text);
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    match longest {
        0 => format!("`{text}`"),
        n => {
            let fence = "`".repeat(n + 1);
            format!("{fence} {text} {fence}")
        }
    }
}

/// `8 ranks on 2 hosts (node-a, node-b)`, or `4 ranks (the output names no hosts)`.
fn ranks_line(run: &ImportedRun) -> String {
    match run.source.hosts.len() {
        0 => format!("{} ranks (the output names no hosts)", run.world),
        1 => format!("{} ranks on host {}", run.world, one_line(&run.source.hosts[0])),
        n => format!("{} ranks on {n} hosts ({})", run.world, one_line(&run.source.hosts.join(", "))),
    }
}

fn provenance(run: &ImportedRun) -> Vec<String> {
    let s = &run.source;
    let mut out = vec![format!("tool: {} `{}`", s.tool_line(), s.benchmark)];
    out.push(format!("command: {}", s.command.as_deref().map_or("not recorded".into(), code)));
    let said = |v: Option<u32>| v.map_or("not stated".to_string(), |n| n.to_string());
    let data = [("data type", &s.data_type), ("reduction op", &s.reduction)];
    let stated: Vec<String> = data.iter().filter_map(|(what, v)| v.as_deref().map(|v| format!("{what}: {}", code(v)))).collect();
    if !stated.is_empty() {
        out.push(stated.join("; "));
    }
    out.push(format!(
        "warm-up iterations: {}; timed iterations: {}; results checked by the tool: {}",
        said(s.warmup),
        said(s.iterations),
        if s.checked { "yes" } else { "no" }
    ));
    if !s.devices.is_empty() {
        let devices: Vec<String> = s.devices.iter().map(|d| format!("rank {} {} device {} {}", d.rank, d.host, d.device, d.name)).collect();
        out.push(format!("devices: {}", one_line(&devices.join("; "))));
    }
    if let Some(at) = &s.ran_at {
        out.push(format!("the tool's run started {}", one_line(at)));
    }
    out.push(format!("file: {} (sha256 {})", shown_file(s), s.sha256));
    out
}

fn fits(runs: &[ImportedRun]) -> Option<Table> {
    let fits: Vec<(&ImportedRun, &Fit)> = runs.iter().flat_map(|r| r.fits.iter().map(move |f| (r, f))).collect();
    if fits.is_empty() {
        return None;
    }
    Some(Table {
        id: "imported-collective-fits".into(),
        title: "Fitted link constants of imported runs".into(),
        caption: "The same least-squares line as for measured runs (intercept + slope × bytes through the tool's times up to the size shown; α = intercept / steps, β = factor / slope), fitted on imported figures: the link constants of the machines those tools ran on, not of this one.".into(),
        columns: [&FIT_COLUMNS[..], &["source", "run"]].concat().iter().map(|s| s.to_string()).collect(),
        rows: fits
            .iter()
            .map(|(r, f)| {
                let source = Cell::text(format!("imported: {} {}", r.source.tool.name(), r.source.benchmark));
                [fit_cells(f), vec![source, Cell::text(&f.run)]].concat()
            })
            .collect(),
        provenance: runs.iter().map(|r| format!("run {}: {} `{}`, {}", r.run, r.source.tool_line(), r.source.benchmark, r.source.command.as_deref().map_or("command not recorded".into(), one_line))).collect(),
    })
}

/// The manifests as the cost model's predictions read them: an imported run's link (on its
/// plan and every row) reads `<link> (imported: <tool>)`, so its fits predict only its own
/// rows and every MODELLED row says where its measurement came from.
pub fn labelled(list: &[Manifest]) -> Cow<'_, [Manifest]> {
    if list.iter().all(|m| m.provenance.is_measured()) {
        return Cow::Borrowed(list);
    }
    Cow::Owned(
        list.iter()
            .cloned()
            .map(|mut m| {
                if let Some(source) = m.provenance.imported().cloned() {
                    m.plan.link = label(&m.plan.link, &source);
                    if let Some(Summary::Collectives(c)) = m.summary_mut() {
                        c.rows.iter_mut().for_each(|r| r.link = label(&r.link, &source));
                    }
                }
                m
            })
            .collect(),
    )
}

/// The file an import read, as the register shows it: on one line, and written from `./` where
/// it lies in the working folder (the same register from every checkout; its sha256 names it).
fn shown_file(s: &Imported) -> String {
    fmt::within_working_folder(&one_line(&s.file.display().to_string()))
}

/// The caveat the register states when any run was imported.
pub fn caveat(runs: &[ImportedRun]) -> Option<String> {
    if runs.is_empty() {
        return None;
    }
    let each: Vec<String> = runs
        .iter()
        .map(|r| format!("{} ({} `{}`, run {})", r.source.benchmark, r.source.tool_line(), shown_file(&r.source), r.run))
        .collect();
    Some(format!(
        "{} collectives runs were imported from other tools' output, not measured by parlab: {}. They ran on machines this register did not probe, with those tools' own timing; they are shown under \"Imported collectives\" and in MODELLED under links marked `(imported: <tool>)`, and no finding rests on them.",
        runs.len(),
        each.join("; ")
    ))
}
