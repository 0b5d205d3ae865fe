//! A plain table (title, columns, rows of text) passed from the cost model and
//! collectors to the register and the CSV exporters.

use serde::{Deserialize, Serialize};

/// A table ready to print: every cell already formatted, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Table {
    /// Stable identifier, used for the CSV file name (`reports/tables/<id>.csv`).
    pub id: String,
    /// Heading in the register.
    pub title: String,
    /// One or two sentences: what the table is, and whether it is measured or arithmetic.
    pub caption: String,
    /// Column headings (with units).
    pub columns: Vec<String>,
    /// Rows of formatted cells, one per column.
    pub rows: Vec<Vec<String>>,
    /// Where each input constant came from (one line each).
    #[serde(default)]
    pub provenance: Vec<String>,
}
