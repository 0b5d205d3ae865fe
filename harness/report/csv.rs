//! Tables as data files (`reports/tables/<id>.csv` and `.parquet`): raw numbers in SI base
//! units, the unit in the column name (`median_s`, `busbw_Bps`, `size_bytes`), no cell with a unit.

use crate::table::{Cell, Quantity, Table};
use polars::prelude::*;

/// One data column: its name and one value per row.
struct DataColumn {
    name: String,
    values: Vec<Raw>,
}

/// A cell's raw value in a data file.
#[derive(Clone)]
enum Raw {
    Empty,
    Text(String),
    Int(u64),
    Float(f64),
    Bool(bool),
}

/// The column name people read, as a data-file name: lowercase words joined by `_`.
pub fn key(title: &str) -> String {
    let mut spelled = String::new();
    for c in title.chars() {
        match c {
            'α' => spelled.push_str(" alpha "),
            'β' => spelled.push_str(" beta "),
            'µ' => spelled.push('u'),
            '/' => spelled.push_str(" per "),
            '%' => spelled.push_str(" pct "),
            '×' => spelled.push_str(" x "),
            '*' => spelled.push_str(" star "),
            c => spelled.push(c),
        }
    }
    let words: Vec<String> =
        spelled.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_ascii_lowercase()).collect();
    words.join("_")
}

fn names(title: &str, q: &Quantity) -> Vec<String> {
    let base = key(title);
    let join = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { format!("{a}_{b}") };
    match q {
        Quantity::Range(inner) => {
            let stem = base.trim_end_matches("min_max").trim_end_matches('_');
            vec![join(stem, &format!("min{}", inner.suffix())), join(stem, &format!("max{}", inner.suffix()))]
        }
        Quantity::Noted(inner) => vec![format!("{base}{}", inner.suffix()), join(&base, "note")],
        q => vec![format!("{base}{}", q.suffix())],
    }
}

fn raw(c: &Cell) -> Raw {
    let float = |x: f64| if x.is_finite() { Raw::Float(x) } else { Raw::Empty };
    match c {
        Cell::Missing | Cell::Range(..) | Cell::Noted(..) => Raw::Empty,
        Cell::Text(s) => Raw::Text(s.clone()),
        Cell::Count(n) | Cell::Large(n) => Raw::Int(*n),
        Cell::Number(x)
        | Cell::Small(x)
        | Cell::Seconds(x)
        | Cell::Bytes(x)
        | Cell::BytesPerSec(x)
        | Cell::Fraction(x)
        | Cell::Change(x) => float(*x),
        Cell::Verdict(b) | Cell::Flag(b) => Raw::Bool(*b),
    }
}

/// The raw values a cell gives a column of `width` data columns (2 for ranges and notes).
fn raws(c: &Cell, width: usize) -> Vec<Raw> {
    match c {
        Cell::Range(a, b) => vec![raw(a), raw(b)],
        Cell::Noted(a, note) => vec![raw(a), Raw::Text(note.clone())],
        c => {
            let mut v = vec![raw(c)];
            v.resize(width, Raw::Empty);
            v
        }
    }
}

fn data_columns(t: &Table) -> Vec<DataColumn> {
    let mut out = Vec::new();
    for (i, title) in t.columns.iter().enumerate() {
        let names = names(title, &t.column_quantity(i));
        let width = names.len();
        let mut cols: Vec<DataColumn> = names.into_iter().map(|name| DataColumn { name, values: Vec::new() }).collect();
        for row in &t.rows {
            let cell = row.get(i).unwrap_or(&Cell::Missing);
            for (col, v) in cols.iter_mut().zip(raws(cell, width)) {
                col.values.push(v);
            }
        }
        out.extend(cols);
    }
    out
}

/// Six significant figures, printed without an exponent so every reader takes it as a number;
/// a whole number below 2^53 (a size in bytes, a count) exactly, as the parquet copy holds it.
fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < EXACT_INTEGERS {
        return format!("{x:.0}");
    }
    let rounded: f64 = format!("{x:.5e}").parse().unwrap_or(x);
    format!("{rounded}")
}

/// Below this, every whole f64 is an exact integer.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn csv_text(v: &Raw) -> String {
    match v {
        Raw::Empty => String::new(),
        Raw::Text(s) => field(s),
        Raw::Int(n) => n.to_string(),
        Raw::Float(x) => number(*x),
        Raw::Bool(b) => b.to_string(),
    }
}

/// A table's data files, `(CSV text, parquet bytes)`, from one pass over its cells.
pub fn data_files(t: &Table) -> (String, Result<Vec<u8>, super::TableError>) {
    let cols = data_columns(t);
    let parquet = parquet(&cols, t.rows.len()).map_err(|e| super::TableError::Parquet { table: t.id.clone(), message: e.to_string() });
    (csv(&cols, t.rows.len()), parquet)
}

/// RFC 4180 CSV with `\n` line ends: a header of unit-suffixed names, raw values.
fn csv(cols: &[DataColumn], rows: usize) -> String {
    let mut out = cols.iter().map(|c| field(&c.name)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in 0..rows {
        out.push_str(&cols.iter().map(|c| csv_text(&c.values[r])).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

fn series(c: &DataColumn) -> Column {
    let name = PlSmallStr::from(c.name.as_str());
    let kind = c.values.iter().find(|v| !matches!(v, Raw::Empty));
    match kind {
        Some(Raw::Int(_)) => {
            let v: Vec<Option<u64>> = c.values.iter().map(|v| if let Raw::Int(n) = v { Some(*n) } else { None }).collect();
            Column::new(name, v)
        }
        Some(Raw::Float(_)) => {
            let v: Vec<Option<f64>> = c.values.iter().map(|v| if let Raw::Float(x) = v { Some(*x) } else { None }).collect();
            Column::new(name, v)
        }
        Some(Raw::Bool(_)) => {
            let v: Vec<Option<bool>> = c.values.iter().map(|v| if let Raw::Bool(b) = v { Some(*b) } else { None }).collect();
            Column::new(name, v)
        }
        _ => {
            let v: Vec<Option<String>> = c.values.iter().map(|v| if let Raw::Text(s) = v { Some(s.clone()) } else { None }).collect();
            Column::new(name, v)
        }
    }
}

/// A parquet file: one typed column per CSV column (u64, f64, bool or string).
fn parquet(cols: &[DataColumn], rows: usize) -> PolarsResult<Vec<u8>> {
    let mut df = DataFrame::new(rows, cols.iter().map(series).collect())?;
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf).finish(&mut df)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            columns: vec!["size".into(), "median".into(), "min – max".into(), "op, \"quoted\"".into(), "on nvswitch".into()],
            rows: vec![
                vec![
                    Cell::Bytes(4.0),
                    Cell::Seconds(3.94e-7),
                    Cell::range(3e-7, 1.5e-5, Cell::Seconds),
                    Cell::text("a,b"),
                    Cell::noted(Cell::Seconds(2e-5), "pays"),
                ],
                vec![Cell::Bytes(1024.0), Cell::Missing, Cell::Missing, Cell::Missing, Cell::Missing],
            ],
            ..Default::default()
        }
    }

    #[test]
    fn numbers_carry_units_in_names_not_cells() {
        assert_eq!(
            data_files(&table()).0,
            "size_bytes,median_s,min_s,max_s,op_quoted,on_nvswitch_s,on_nvswitch_note\n4,0.000000394,0.0000003,0.000015,\"a,b\",0.00002,pays\n1024,,,,,,\n"
        );
    }

    #[test]
    fn whole_sizes_are_printed_exactly_and_fractions_to_six_figures() {
        assert_eq!(number(536_870_912.0), "536870912");
        assert_eq!(number(1_048_576.0), "1048576");
        assert_eq!(number(123_456_789.5), "123457000");
        assert_eq!(number(3.940_001e-7), "0.000000394");
    }

    #[test]
    fn names_spell_symbols() {
        assert_eq!(key("α per step"), "alpha_per_step");
        assert_eq!(key("tokens/s"), "tokens_per_s");
        assert_eq!(names("step min – max", &Quantity::Range(Box::new(Quantity::Seconds))), ["step_min_s", "step_max_s"]);
    }

    #[test]
    fn parquet_holds_typed_columns() {
        let bytes = data_files(&table()).1.unwrap();
        let df = ParquetReader::new(std::io::Cursor::new(bytes)).finish().unwrap();
        assert_eq!(df.column("size_bytes").unwrap().dtype(), &DataType::Float64);
        assert_eq!(df.column("median_s").unwrap().f64().unwrap().get(0), Some(3.94e-7));
        assert_eq!(df.column("median_s").unwrap().f64().unwrap().get(1), None);
        assert_eq!(df.column("on_nvswitch_note").unwrap().str().unwrap().get(0), Some("pays"));
    }
}
