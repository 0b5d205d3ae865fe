//! A table of typed cells (title, columns, rows) passed from the cost model and the
//! collectors to the register. Cells hold numbers in SI base units with their quantity;
//! `report::fmt` is the one place that turns them into text, `report::csv` into raw numbers.

use serde::{Deserialize, Serialize};

/// A table ready for the register: typed cells, with their provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Table {
    /// Stable identifier, used for the file names (`reports/tables/<id>.csv`, `.parquet`).
    pub id: String,
    /// Heading in the register.
    pub title: String,
    /// One or two sentences: what the table is, and whether it is measured or arithmetic.
    pub caption: String,
    /// Column headings as people read them; CSV names add the unit (`median` → `median_s`).
    pub columns: Vec<String>,
    /// Rows of cells, one per column.
    pub rows: Vec<Vec<Cell>>,
    /// Where each input constant came from (one line each).
    #[serde(default)]
    pub provenance: Vec<String>,
}

/// One cell: a value and the quantity it measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// No value (not measured, not applicable).
    Missing,
    /// Words or identifiers.
    Text(String),
    /// A whole number of things (ranks, tokens, iterations).
    Count(u64),
    /// A large whole number people read with thousands separators (parameters).
    Large(u64),
    /// A dimensionless number.
    Number(f64),
    /// A small dimensionless difference, read in scientific notation (logit drift).
    Small(f64),
    /// A duration in seconds.
    Seconds(f64),
    /// A size in bytes.
    Bytes(f64),
    /// A bandwidth in bytes per second.
    BytesPerSec(f64),
    /// A share of a whole, as a fraction (0.25 is 25%).
    Fraction(f64),
    /// A signed relative difference, as a fraction (−0.1 is 10% less).
    Change(f64),
    /// A check's outcome: passed (`yes`) or not (`NO`).
    Verdict(bool),
    /// A yes/no property.
    Flag(bool),
    /// The least and largest of a set of values of one quantity.
    Range(Box<Cell>, Box<Cell>),
    /// A value with a word about it (`109 µs (does not pay)`).
    Noted(Box<Cell>, String),
}

impl Cell {
    /// A text cell.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// `f(v)`, or `Missing` when `v` is absent or not finite.
    pub fn opt(v: Option<f64>, f: fn(f64) -> Cell) -> Cell {
        v.filter(|x| x.is_finite()).map_or(Cell::Missing, f)
    }

    /// A count, or `Missing`.
    pub fn opt_count(v: Option<u64>) -> Cell {
        v.map_or(Cell::Missing, Cell::Count)
    }

    /// `min – max` of one quantity.
    pub fn range(min: f64, max: f64, f: fn(f64) -> Cell) -> Cell {
        Cell::Range(Box::new(f(min)), Box::new(f(max)))
    }

    /// A value with a note.
    pub fn noted(value: Cell, note: impl Into<String>) -> Cell {
        Cell::Noted(Box::new(value), note.into())
    }

    /// The cell's quantity, for the CSV column name and the check that a column holds one quantity.
    pub fn quantity(&self) -> Quantity {
        match self {
            Cell::Missing => Quantity::None,
            Cell::Text(_) => Quantity::Text,
            Cell::Count(_) | Cell::Large(_) => Quantity::Count,
            Cell::Number(_) | Cell::Small(_) => Quantity::Number,
            Cell::Seconds(_) => Quantity::Seconds,
            Cell::Bytes(_) => Quantity::Bytes,
            Cell::BytesPerSec(_) => Quantity::BytesPerSec,
            Cell::Fraction(_) | Cell::Change(_) => Quantity::Fraction,
            Cell::Verdict(_) | Cell::Flag(_) => Quantity::Bool,
            Cell::Range(a, _) => Quantity::Range(Box::new(a.quantity())),
            Cell::Noted(a, _) => Quantity::Noted(Box::new(a.quantity())),
        }
    }
}

/// What a column measures; CSV names carry its unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quantity {
    /// Only missing cells.
    None,
    /// Words.
    Text,
    /// Whole numbers.
    Count,
    /// Dimensionless numbers.
    Number,
    /// Seconds (`_s`).
    Seconds,
    /// Bytes (`_bytes`).
    Bytes,
    /// Bytes per second (`_Bps`).
    BytesPerSec,
    /// Fractions (`_fraction`).
    Fraction,
    /// true / false.
    Bool,
    /// Two columns, `_min` and `_max`, of the inner quantity.
    Range(Box<Quantity>),
    /// Two columns: the value, and `_note`.
    Noted(Box<Quantity>),
}

impl Quantity {
    /// The unit suffix of a CSV column of this quantity (`_s`, `_bytes`, `_Bps`, `_fraction`, or none).
    pub fn suffix(&self) -> &'static str {
        match self {
            Quantity::Seconds => "_s",
            Quantity::Bytes => "_bytes",
            Quantity::BytesPerSec => "_Bps",
            Quantity::Fraction => "_fraction",
            Quantity::Range(q) | Quantity::Noted(q) => q.suffix(),
            _ => "",
        }
    }
}

impl Table {
    /// The quantity of column `i`: that of its first present cell (`None` if all are missing).
    pub fn column_quantity(&self, i: usize) -> Quantity {
        self.rows.iter().filter_map(|r| r.get(i)).map(Cell::quantity).find(|q| *q != Quantity::None).unwrap_or(Quantity::None)
    }

    /// Columns whose present cells hold more than one quantity (a bug in the table's maker).
    pub fn mixed_columns(&self) -> Vec<String> {
        (0..self.columns.len())
            .filter(|&i| {
                let q = self.column_quantity(i);
                self.rows.iter().filter_map(|r| r.get(i)).any(|c| c.quantity() != Quantity::None && c.quantity() != q)
            })
            .map(|i| self.columns[i].clone())
            .collect()
    }
}
