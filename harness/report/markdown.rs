//! The one markdown renderer of a table: heading, caption, rows (collapsed past 12, cut at
//! 500), provenance, and links to its data files. The register and `parlab model` both use it.

use super::fmt;
use crate::table::Table;

/// Rows past which a table is folded into `<details>`.
const FOLD_AFTER: usize = 12;
/// Rows past which the markdown shows only the first ones (the data files hold all).
const MAX_ROWS: usize = 500;

/// A table's text cells, escaped for a markdown table.
pub fn cells(t: &Table) -> Vec<Vec<String>> {
    t.rows.iter().map(|r| r.iter().map(|c| fmt::escape(&fmt::text(c))).collect()).collect()
}

/// The markdown block of `t`; `files` names its data files (`tables/<id>.csv`, ...), if any.
pub fn table(t: &Table, files: &[String]) -> String {
    block(t, &cells(t), files)
}

/// The markdown block of `t` from its already formatted `rows` (`cells(t)`).
pub fn block(t: &Table, rows: &[Vec<String>], files: &[String]) -> String {
    let n = rows.len();
    let csv = files.first().cloned().unwrap_or_default();
    let mut s = format!("#### {}\n\n{}\n\n", t.title, t.caption);
    if n > FOLD_AFTER {
        // Where no data file holds the rows (`parlab model` prints to the terminal), none is named.
        let also = if csv.is_empty() { String::new() } else { format!("; every row is also in {csv}") };
        s.push_str(&format!("<details><summary>{n} rows (collapsed{also})</summary>\n\n"));
    }
    if n == 0 {
        s.push_str("None.\n");
    } else {
        let header: Vec<String> = t.columns.iter().map(|c| fmt::escape(c)).collect();
        s.push_str(&format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len())));
    }
    for row in rows.iter().take(MAX_ROWS) {
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s.push('\n');
    if n > MAX_ROWS {
        let all = if csv.is_empty() { String::new() } else { format!("; all of them are in [{csv}]({csv})") };
        s.push_str(&format!("The first {MAX_ROWS} of {n} rows{all}.\n\n"));
    }
    if n > FOLD_AFTER {
        s.push_str("</details>\n\n");
    }
    if !t.provenance.is_empty() {
        s.push_str("Provenance:\n\n");
        for p in &t.provenance {
            s.push_str(&format!("- {p}\n"));
        }
        s.push('\n');
    }
    if !files.is_empty() {
        let links: Vec<String> = files.iter().map(|f| format!("[{f}]({f})")).collect();
        s.push_str(&format!("Table as data: {}\n", links.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Cell;

    #[test]
    fn renders_typed_cells_escaped() {
        let t = Table {
            title: "T".into(),
            caption: "C.".into(),
            columns: vec!["a|b".into(), "median".into()],
            rows: vec![vec![Cell::text("x|y"), Cell::Seconds(2e-3)]],
            provenance: vec!["p".into()],
            ..Default::default()
        };
        assert_eq!(
            table(&t, &["tables/t.csv".into()]),
            "#### T\n\nC.\n\n| a\\|b | median |\n|---|---|\n| x\\|y | 2.00 ms |\n\nProvenance:\n\n- p\n\nTable as data: [tables/t.csv](tables/t.csv)\n"
        );
    }

    #[test]
    fn a_long_table_names_its_data_file_only_where_it_has_one() {
        let t = Table {
            title: "T".into(),
            caption: "C.".into(),
            columns: vec!["n".into()],
            rows: (0..MAX_ROWS + 1).map(|i| vec![Cell::text(i.to_string())]).collect(),
            ..Default::default()
        };
        let printed = table(&t, &[]);
        assert!(printed.contains(&format!("<summary>{} rows (collapsed)</summary>", MAX_ROWS + 1)), "{}", &printed[..200]);
        assert!(printed.contains(&format!("The first {MAX_ROWS} of {} rows.\n", MAX_ROWS + 1)) && !printed.contains("[]()"));
        let rendered = table(&t, &["tables/t.csv".into()]);
        assert!(
            rendered.contains("(collapsed; every row is also in tables/t.csv)")
                && rendered.contains("are in [tables/t.csv](tables/t.csv).")
        );
    }

    #[test]
    fn a_table_without_rows_says_none_instead_of_a_bare_header() {
        let t = Table { title: "T".into(), caption: "C.".into(), columns: vec!["layout".into(), "why".into()], ..Default::default() };
        assert_eq!(table(&t, &[]), "#### T\n\nC.\n\nNone.\n\n");
    }
}
