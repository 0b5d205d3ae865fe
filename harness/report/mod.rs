//! The evidence register: MEASURED, MODELLED and NOT_RUN from manifests.
//!
//! `render` is a pure function of the manifests, the saved gates, the templates and the
//! rendering build's measuring digest (its one caveat that names runs measured by other
//! measuring code: by design, the register says when its figures predate the code that
//! renders them), with no clock, stable ordering and fixed number formats, so the same inputs
//! give a byte-identical register; `render_all` writes it with its figures and CSV tables.

pub mod cache_sharing;
pub mod caveats;
pub mod csv;
pub mod facts;
pub mod figures;
pub mod fmt;
pub mod header;
pub mod imported;
pub mod markdown;
pub mod measured;
pub mod modelled;
pub mod origin;
pub mod predicted;
pub mod status;
pub mod templates;

use crate::gates::Gates;
use crate::manifest::{Manifest, Skipped};
use crate::table::Table;
use figures::Figure;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Why the register could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A template failed to parse or render.
    #[error("register template ({dir}): {message}")]
    Template {
        /// The template folder tried first.
        dir: PathBuf,
        /// tera's message with its causes.
        message: String,
    },
    /// An output file could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error (not a `source`, so a chain printer shows it once).
        cause: std::io::Error,
    },
    /// A table's data files could not be made.
    #[error("cannot encode the register's tables")]
    Table(#[from] TableError),
    /// A termination signal arrived (in `parlab run`, whose handlers record it) before the
    /// staged render replaced the earlier one: nothing was replaced.
    #[error("interrupted by {} before the register was replaced", crate::launch::signals::name(*signal))]
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

/// Why a table's data files (CSV, parquet) could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// Rows of one column hold different quantities (a unit per column is the CSV's contract).
    #[error("table {table}: columns {} mix quantities", columns.join(", "))]
    MixedQuantities {
        /// The table's id.
        table: String,
        /// The columns that mix quantities.
        columns: Vec<String>,
    },
    /// polars could not encode the table as parquet.
    #[error("table {table}: {message}")]
    Parquet {
        /// The table's id.
        table: String,
        /// polars' message.
        message: String,
    },
}

/// Which measured family a group of tables is; decides its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    /// Collectives measured by parlab.
    Collectives,
    /// Collectives other tools measured (`parlab import`).
    Imported,
    /// Memory bandwidth.
    Membw,
    /// Decode.
    Decode,
    /// Expert dispatch.
    Dispatch,
}

/// A group of measured tables and figures (collectives, membw, decode, dispatch).
#[derive(Debug, Clone)]
pub struct Family {
    /// Which family it is.
    pub kind: FamilyKind,
    /// Heading.
    pub title: String,
    /// What the tables show and how the figures were computed.
    pub intro: String,
    /// Its tables.
    pub tables: Vec<Table>,
    /// Its figures.
    pub figures: Vec<Figure>,
}

impl Family {
    /// A family without figures.
    pub fn new(kind: FamilyKind, title: &str, intro: &str, tables: Vec<Table>) -> Family {
        Family { kind, title: title.into(), intro: intro.into(), tables, figures: Vec::new() }
    }
}

/// The rendered register: markdown, CSV files and figures, each with its path relative to the output folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// `evidence.md`.
    pub markdown: String,
    /// (`tables/<id>.csv` or `.parquet`, the file's bytes): every table's data files.
    pub tables: Vec<(String, Vec<u8>)>,
    /// The figures.
    pub figures: Vec<Figure>,
    /// `findings.json`: the findings the register opens with.
    pub findings_json: String,
}

/// Renders `out/evidence.md` from `manifests`, with `out/figures/*.svg` and `out/tables/*.csv`; returns its path.
pub fn render_all(manifests: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let (list, mut skipped) = crate::manifest::read_all(manifests);
    let bad = crate::parallel::map(&list, |m| crate::collect::frames::unreadable_results(m.results(), manifests));
    skipped.extend(bad.into_iter().flatten().map(|(path, reason)| crate::manifest::Skipped { path, reason: reason.into() }));
    for s in &skipped {
        crate::say!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let gates = crate::gates::load(manifests);
    if let Err(e) = &gates {
        crate::say!("warning: {e}");
    }
    if let Some(warning) = missing_sources_warning(&missing_sources(&list)) {
        crate::say!("{warning}");
    }
    let rendered = render(&list, &skipped, gates, Path::new(templates::DIR))?;
    Ok(write(&rendered, out)?)
}

/// The files the findings read beside the manifests, as the runs recorded them (relative to
/// the folder they were run from) that this working folder does not hold: model configs and
/// spec files, distinct, sorted.
pub fn missing_sources(list: &[crate::manifest::Manifest]) -> Vec<PathBuf> {
    sources(list).into_iter().filter(|p| !p.is_file()).collect()
}

/// The files the findings read beside the manifests, as the runs recorded them: model configs
/// and spec files, distinct, sorted.
pub fn sources(list: &[crate::manifest::Manifest]) -> std::collections::BTreeSet<PathBuf> {
    let models = list.iter().filter_map(|m| m.plan.model.as_ref()).map(|s| s.dir.join("config.json"));
    let origins = list.iter().flat_map(|m| m.origins.iter().map(|o| o.spec.clone()));
    let specs = list.iter().map(|m| m.plan.spec_path.clone()).chain(origins).filter(|p| !p.as_os_str().is_empty());
    models.chain(specs).collect()
}

/// The warning for `missing` files (None when there are none): the findings that read them
/// cannot decide here, which a render from another working folder would not show otherwise.
pub fn missing_sources_warning(missing: &[PathBuf]) -> Option<String> {
    let first = missing.first()?;
    let more = match missing.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(format!(
        "warning: the runs name files this working folder does not hold ({}{more}): the findings that read model configs or specs (regimes, kv-head-cap, break-even, declared claims) cannot decide without them; render from the folder the runs were made in",
        first.display()
    ))
}

/// Renders the register from already-read manifests (pure: no clock, no file writes).
pub fn render(
    list: &[Manifest],
    skipped: &[Skipped],
    gates: Result<Option<Gates>, crate::gates::SavedGatesError>,
    template_dir: &Path,
) -> Result<Rendered, ReportError> {
    let facts = facts::Facts::read(list);
    // The modelled tables (the largest single stage) beside the findings and measured families.
    let ((findings, families), modelled) = crate::parallel::both(
        || {
            let findings = crate::findings::compute(list, &facts);
            let mut families = measured::families(&facts);
            attach_figures(&mut families, &facts);
            (findings, families)
        },
        || modelled::modelled(list, &facts.fits, &facts.imported),
    );
    let failed = status::failed(list);
    let not_run = status::not_run(list);
    // Every table in the register's order: ids are given in that order, the views (CSV,
    // parquet, markdown) are built in parallel.
    let ordered: Vec<(&Table, String)> = {
        let tables: Vec<&Table> = families
            .iter()
            .flat_map(|f| &f.tables)
            .chain(&failed)
            .chain(&modelled.tables)
            .chain(&modelled.predicted)
            .chain(&not_run)
            .collect();
        let ids = unique_ids(&tables);
        tables.into_iter().zip(ids).collect()
    };
    let mut files = Vec::new();
    let mut views = crate::parallel::map(&ordered, |(t, id)| table_view(t, id)).into_iter().map(|(view, data)| {
        files.extend(data);
        view
    });
    let (measured, imported): (Vec<(FamilyKind, FamilyView)>, Vec<_>) = families
        .iter()
        .map(|f| {
            let view = FamilyView {
                title: f.title.clone(),
                intro: f.intro.clone(),
                tables: views.by_ref().take(f.tables.len()).collect(),
                figures: f.figures.iter().map(|g| FigureView { file: g.file.clone(), alt: g.alt.clone() }).collect(),
            };
            (f.kind, view)
        })
        .partition(|(kind, _)| *kind != FamilyKind::Imported);
    let views_of = |families: Vec<(FamilyKind, FamilyView)>| families.into_iter().map(|(_, v)| v).collect();
    let failed = failed.and_then(|_| views.next());
    let modelled_view = ModelledView {
        inputs: modelled.inputs.clone(),
        tables: views.by_ref().take(modelled.tables.len()).collect(),
        predicted: views.by_ref().take(modelled.predicted.len()).collect(),
    };
    let not_run = not_run.and_then(|_| views.next());
    drop(views);
    let register = RegisterView {
        header: header::header(list, skipped),
        findings: crate::findings::render::views(&findings),
        machine: header::machine(gates, list),
        measured: views_of(measured),
        failed,
        imported: views_of(imported),
        modelled: modelled_view,
        not_run,
        caveats: caveats::caveats(list, &facts),
    };
    let files = files.into_iter().collect::<Result<Vec<_>, _>>().map_err(ReportError::Table)?;
    let markdown = render_markdown(&register, template_dir)?;
    let figures = families.into_iter().flat_map(|f| f.figures).collect();
    Ok(Rendered { markdown, tables: files, figures, findings_json: crate::findings::render::to_json(&findings) })
}

fn attach_figures(families: &mut [Family], facts: &facts::Facts) {
    for f in families.iter_mut() {
        match f.kind {
            FamilyKind::Collectives => f.figures = figures::collectives(&facts.collectives, &facts.fits),
            FamilyKind::Decode => {
                f.figures = figures::decode(&facts.decode);
                f.figures.extend(figures::expert_imbalance(&facts.decode));
            }
            FamilyKind::Imported | FamilyKind::Membw | FamilyKind::Dispatch => {}
        }
    }
    unique_files(families.iter_mut().flat_map(|f| f.figures.iter_mut()));
}

/// Gives each figure a file of its own: experiment names that differ only in case or in `-`,
/// `_` and `.` share a slug, and a repeated file gets `-2`, `-3`, ... before `.svg`.
fn unique_files<'f>(figures: impl Iterator<Item = &'f mut figures::Figure>) {
    let mut used = BTreeSet::new();
    for f in figures {
        let stem = f.file.trim_end_matches(".svg").to_string();
        let mut n = 1;
        while !used.insert(f.file.clone()) {
            n += 1;
            f.file = format!("{stem}-{n}.svg");
        }
    }
}

fn render_markdown(register: &RegisterView, dir: &Path) -> Result<String, ReportError> {
    let err = |e: tera::Error| ReportError::Template { dir: dir.to_path_buf(), message: templates::describe(&e) };
    let engine = templates::engine(dir).map_err(err)?;
    let context = tera::Context::from_serialize(register).map_err(err)?;
    engine.render(templates::MAIN, &context).map_err(err)
}

/// A table's data file (`tables/<id>.csv` or `.parquet`, its bytes), or why it could not be made.
type DataFile = Result<(String, Vec<u8>), TableError>;

/// Unique table ids, in the order of `tables` (a repeated id gets `-2`, `-3`, ...).
fn unique_ids(tables: &[&Table]) -> Vec<String> {
    let mut used = BTreeSet::new();
    tables
        .iter()
        .map(|t| {
            let base = if t.id.is_empty() { "table".to_string() } else { fmt::slug(&t.id) };
            let mut id = base.clone();
            let mut n = 1;
            while !used.insert(id.clone()) {
                n += 1;
                id = format!("{base}-{n}");
            }
            id
        })
        .collect()
}

/// The view of table `t` under `id`, and its data files (CSV, parquet) or why one could not be made.
fn table_view(t: &Table, id: &str) -> (TableView, Vec<DataFile>) {
    let mut files = Vec::new();
    let csv = format!("tables/{id}.csv");
    let parquet = format!("tables/{id}.parquet");
    let mixed = t.mixed_columns();
    if !mixed.is_empty() {
        files.push(Err(TableError::MixedQuantities { table: id.to_string(), columns: mixed.clone() }));
    }
    let (csv_text, parquet_bytes) = csv::data_files(t);
    files.push(Ok((csv.clone(), csv_text.into_bytes())));
    files.push(parquet_bytes.map(|bytes| (parquet.clone(), bytes)));
    let rows = markdown::cells(t);
    let view = TableView {
        id: id.to_string(),
        title: t.title.clone(),
        caption: t.caption.clone(),
        columns: t.columns.clone(),
        markdown: markdown::block(t, &rows, &[csv.clone(), parquet]),
        rows,
        provenance: t.provenance.clone(),
        csv,
    };
    (view, files)
}

/// The folders whose files of these kinds a render replaces (any other file, folder or link a
/// user keeps there is left alone).
pub const REPLACED: [(&str, &[&str]); 2] = [("figures", &["svg"]), ("tables", &["csv", "parquet"])];

/// The prefix of a file staged beside the one it will replace.
const STAGED: &str = ".new-";

/// The file in the output folder naming, a line each, the figures and tables its render drew
/// (relative to it): the next render removes only those of them it no longer draws, so a
/// user's own `.svg` or `.csv` kept in `figures/` or `tables/` is never taken for one.
pub const DRAWN: &str = ".parlab-drawn";

/// Writes the register, figures and tables under `out`. Every file is first written beside
/// the one it replaces (`figures/.new-x.svg`, on the same filesystem even where `figures` is a
/// link), and only once all are written are they renamed into place, the register last, and
/// the earlier figures and tables no longer drawn removed: a render that fails while writing (a
/// full disk, a file too large) leaves the earlier register, figures and tables as they were.
pub fn write(r: &Rendered, out: &Path) -> Result<PathBuf, ReportError> {
    write_unless(r, out, crate::launch::signals::received)
}

/// [`write`], replacing nothing when `stopped` says a termination signal arrived.
fn write_unless(r: &Rendered, out: &Path, stopped: impl Fn() -> Option<i32>) -> Result<PathBuf, ReportError> {
    let mut files = render_files(r, out);
    let earlier = earlier_drawn(out);
    let drawn = drawn_list(&files, out);
    // Staged and renamed with the others, before the register.
    files.insert(files.len() - 2, (out.join(DRAWN), drawn.as_bytes()));
    for dir in REPLACED.iter().map(|(sub, _)| out.join(sub)) {
        std::fs::create_dir_all(&dir).map_err(write_error(&dir))?;
        remove_staged(&dir);
    }
    remove_staged(out);
    let result = stage(&files).and_then(|()| match stopped() {
        Some(signal) => Err(ReportError::Interrupted { signal }),
        None => commit(&files),
    });
    if let Err(e) = result {
        files.iter().for_each(|(path, _)| drop(std::fs::remove_file(staged(path))));
        return Err(e);
    }
    remove_obsolete(out, &files, earlier);
    Ok(out.join("evidence.md"))
}

/// Whether `rel` (relative to an output folder) is a file of a kind a render writes into one
/// of its folders (`figures/x.svg`, `tables/x.csv`): never a path leading elsewhere.
fn of_a_replaced_kind(rel: &Path) -> bool {
    rel.components().all(|c| matches!(c, std::path::Component::Normal(_)))
        && REPLACED.iter().any(|(sub, exts)| {
            rel.parent() == Some(Path::new(sub)) && rel.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x))
        })
}

/// The figures and tables of `files` (every file of the render), relative to `out`, a line each.
fn drawn_list(files: &[(PathBuf, &[u8])], out: &Path) -> String {
    let rel = files.iter().filter_map(|(p, _)| p.strip_prefix(out).ok()).filter(|rel| of_a_replaced_kind(rel));
    rel.map(|r| format!("{}\n", r.display())).collect()
}

/// The figures and tables the earlier render of `out` drew ([`DRAWN`]), as paths under `out`
/// (none where the list cannot be read); None where it left no list (no render yet, or a
/// parlab that kept none).
fn earlier_drawn(out: &Path) -> Option<std::collections::BTreeSet<PathBuf>> {
    let list = out.join(DRAWN);
    std::fs::symlink_metadata(&list).ok()?;
    // A list that cannot be read names nothing to remove: never a reason to remove by kind.
    let text = crate::files::read_text(&list, crate::files::TEXT_LIMIT).unwrap_or_default();
    Some(text.lines().map(Path::new).filter(|rel| of_a_replaced_kind(rel)).map(|rel| out.join(rel)).collect())
}

/// Every file in `out`'s figures and tables folders of a kind a render writes.
fn of_replaced_kinds(out: &Path) -> std::collections::BTreeSet<PathBuf> {
    let listed = |sub: &'static str| {
        std::fs::read_dir(out.join(sub)).into_iter().flatten().flatten().map(move |e| Path::new(sub).join(e.file_name()))
    };
    let rel: Vec<PathBuf> = REPLACED.iter().flat_map(|(sub, _)| listed(sub)).collect();
    rel.iter().filter(|rel| of_a_replaced_kind(rel)).map(|rel| out.join(rel)).collect()
}

/// Every file of the render, at its final path: tables, figures, then the register.
fn render_files<'a>(r: &'a Rendered, out: &Path) -> Vec<(PathBuf, &'a [u8])> {
    let tables = r.tables.iter().map(|(file, text)| (out.join(file), text.as_slice()));
    let figures = r.figures.iter().map(|f| (out.join(&f.file), f.svg.as_bytes()));
    let register = [(out.join("findings.json"), r.findings_json.as_bytes()), (out.join("evidence.md"), r.markdown.as_bytes())];
    tables.chain(figures).chain(register).collect()
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError {
    let path = path.to_path_buf();
    move |cause| ReportError::Write { path, cause }
}

/// Where `path` is staged: `.new-<name>` beside it.
fn staged(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{STAGED}{name}"))
}

/// Writes (and syncs) every file at its staged path, named in errors by its final path. What
/// stands at a staged path (a killed render's file, a link) is removed first and the file made
/// anew, so a link planted there never sends the register outside the output folder.
fn stage(files: &[(PathBuf, &[u8])]) -> Result<(), ReportError> {
    use std::io::Write as _;
    for (path, bytes) in files {
        let at = staged(path);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&at).map_err(write_error(path))?;
        }
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&at)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
        written.map_err(write_error(path))?;
    }
    Ok(())
}

/// Renames every staged file into place, the register (last in `files`) last. A final path
/// that a rename could not replace (a folder there) is refused before anything is renamed, so
/// the earlier register never stands beside half of the new figures and tables.
fn commit(files: &[(PathBuf, &[u8])]) -> Result<(), ReportError> {
    if let Some((path, _)) = files.iter().find(|(path, _)| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())) {
        let cause = std::io::Error::new(std::io::ErrorKind::IsADirectory, "a folder stands where this file goes; move it away");
        return Err(ReportError::Write { path: path.clone(), cause });
    }
    for (path, _) in files {
        std::fs::rename(staged(path), path).map_err(write_error(path))?;
    }
    Ok(())
}

/// Removes the staged files a render that was killed left in `dir`.
fn remove_staged(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let plain = entry.file_type().is_ok_and(|t| t.is_file() || t.is_symlink());
        if entry.file_name().to_string_lossy().starts_with(STAGED) && plain {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes the figures and tables of an earlier render that this one did not draw: those the
/// earlier render listed ([`DRAWN`]), or where it listed none (a parlab that kept no list) the
/// files of the kinds a render writes. Plain files only (a link, even to a file, is the user's,
/// never followed or removed); best effort: a leftover is only an unlinked file.
fn remove_obsolete(out: &Path, files: &[(PathBuf, &[u8])], earlier: Option<std::collections::BTreeSet<PathBuf>>) {
    let drawn: std::collections::BTreeSet<&Path> = files.iter().map(|(p, _)| p.as_path()).collect();
    let plain = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let candidates = earlier.unwrap_or_else(|| of_replaced_kinds(out));
    for p in candidates.iter().filter(|p| !drawn.contains(p.as_path()) && plain(p)) {
        let _ = std::fs::remove_file(p);
    }
}

/// A table as the templates see it: cells as escaped text, its markdown block, its CSV path.
#[derive(Debug, Clone, Serialize)]
pub struct TableView {
    /// Unique id.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Caption.
    pub caption: String,
    /// Columns.
    pub columns: Vec<String>,
    /// Rows of escaped cells.
    pub rows: Vec<Vec<String>>,
    /// Provenance lines.
    pub provenance: Vec<String>,
    /// `tables/<id>.csv`.
    pub csv: String,
    /// The whole markdown block (`report::markdown::table`), which the `table` macro prints.
    pub markdown: String,
}

/// A figure reference.
#[derive(Debug, Clone, Serialize)]
pub struct FigureView {
    /// `figures/<name>.svg`.
    pub file: String,
    /// Alt text.
    pub alt: String,
}

/// A measured family as the templates see it.
#[derive(Debug, Clone, Serialize)]
pub struct FamilyView {
    /// Heading.
    pub title: String,
    /// Introduction.
    pub intro: String,
    /// Tables.
    pub tables: Vec<TableView>,
    /// Figures.
    pub figures: Vec<FigureView>,
}

/// MODELLED as the templates see it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelledView {
    /// Inputs of each model run.
    pub inputs: Vec<String>,
    /// The cost model's tables.
    pub tables: Vec<TableView>,
    /// Predicted against measured.
    pub predicted: Vec<TableView>,
}

/// Everything the main template prints.
#[derive(Debug, Clone, Serialize)]
pub struct RegisterView {
    /// Header.
    pub header: header::Header,
    /// Findings, before any table.
    pub findings: Vec<crate::findings::render::FindingView>,
    /// What this machine can do.
    pub machine: header::MachineSection,
    /// MEASURED families.
    pub measured: Vec<FamilyView>,
    /// Failed runs.
    pub failed: Option<TableView>,
    /// Other tools' measurements `parlab import` read in (not this machine's).
    pub imported: Vec<FamilyView>,
    /// MODELLED.
    pub modelled: ModelledView,
    /// NOT_RUN.
    pub not_run: Option<TableView>,
    /// What the numbers do not show.
    pub caveats: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_whose_experiments_share_a_slug_get_files_of_their_own() {
        let figure = |file: &str| figures::Figure { file: file.into(), alt: String::new(), svg: String::new() };
        let mut list =
            vec![figure("figures/decode-a-tensor-mpi-shm.svg"), figure("figures/decode-a-tensor-mpi-shm.svg"), figure("figures/x.svg")];
        list.push(figure("figures/decode-a-tensor-mpi-shm.svg"));
        unique_files(list.iter_mut());
        let files: Vec<&str> = list.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "figures/decode-a-tensor-mpi-shm.svg",
                "figures/decode-a-tensor-mpi-shm-2.svg",
                "figures/x.svg",
                "figures/decode-a-tensor-mpi-shm-3.svg"
            ]
        );
    }

    fn rendered(word: &str) -> Rendered {
        Rendered {
            markdown: format!("# {word}\n"),
            tables: vec![(format!("tables/{word}.csv"), b"a,b\n".to_vec())],
            figures: vec![figures::Figure { file: format!("figures/{word}.svg"), alt: word.into(), svg: "<svg/>".into() }],
            findings_json: "[]".into(),
        }
    }

    #[test]
    fn a_render_stopped_by_a_signal_replaces_nothing_and_the_next_replaces_everything() {
        let out = tempfile::tempdir().unwrap();
        write_unless(&rendered("first"), out.path(), || None).unwrap();
        let stopped = write_unless(&rendered("second"), out.path(), || Some(libc::SIGINT));
        assert!(matches!(stopped, Err(ReportError::Interrupted { signal: libc::SIGINT })), "{stopped:?}");
        assert_eq!(std::fs::read_to_string(out.path().join("evidence.md")).unwrap(), "# first\n");
        assert!(out.path().join("figures/first.svg").is_file() && !out.path().join("figures/second.svg").exists());
        let left: Vec<String> = ["figures", "tables", "."]
            .iter()
            .flat_map(|d| std::fs::read_dir(out.path().join(d)).unwrap().flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(STAGED))
            .collect();
        assert!(left.is_empty(), "the staged files are removed: {left:?}");
        write_unless(&rendered("third"), out.path(), || None).unwrap();
        assert_eq!(std::fs::read_to_string(out.path().join("evidence.md")).unwrap(), "# third\n");
        assert!(!out.path().join("figures/first.svg").exists() && out.path().join("tables/third.csv").is_file());
    }

    #[test]
    fn a_render_that_cannot_put_one_file_in_place_replaces_none() {
        let out = tempfile::tempdir().unwrap();
        write_unless(&rendered("first"), out.path(), || None).unwrap();
        // Tables are renamed before figures: a folder where a figure goes must not leave the new tables in place.
        std::fs::create_dir_all(out.path().join("figures/second.svg/inside")).unwrap();
        let refused = write_unless(&rendered("second"), out.path(), || None);
        assert!(matches!(&refused, Err(ReportError::Write { path, .. }) if path.ends_with("figures/second.svg")), "{refused:?}");
        assert!(!out.path().join("tables/second.csv").exists(), "a table was put in place beside the earlier register");
        assert_eq!(std::fs::read_to_string(out.path().join("evidence.md")).unwrap(), "# first\n");
        assert!(out.path().join("tables/first.csv").is_file() && out.path().join("figures/first.svg").is_file());
    }
}
