//! Tables as CSV (`reports/tables/<id>.csv`): header row, then one row per table row.

use crate::table::Table;

fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The table as RFC 4180 CSV with `\n` line ends.
pub fn to_csv(t: &Table) -> String {
    let mut out = String::new();
    for row in std::iter::once(&t.columns).chain(t.rows.iter()) {
        let cells: Vec<String> = row.iter().map(|c| field(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        let t = Table { columns: vec!["a".into(), "b, c".into()], rows: vec![vec!["1 \"x\"".into(), "2".into()]], ..Default::default() };
        assert_eq!(to_csv(&t), "a,\"b, c\"\n\"1 \"\"x\"\"\",2\n");
    }
}
