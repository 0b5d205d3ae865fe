//! The tera engine for the register: templates from `reports/templates/` (relative
//! to the working directory) when present, else the copies built into the binary.

use std::collections::HashMap;
use std::path::Path;
use tera::{Tera, Value};

/// The folder templates are read from, relative to the working directory.
pub const DIR: &str = "reports/templates";

/// Template names and their built-in copies.
const BUILTIN: [(&str, &str); 2] = [
    ("macros.md.tera", include_str!("../../reports/templates/macros.md.tera")),
    ("evidence.md.tera", include_str!("../../reports/templates/evidence.md.tera")),
];

/// The main template's name.
pub const MAIN: &str = "evidence.md.tera";

/// Builds the engine: each template from `dir` if readable, else the built-in copy.
pub fn engine(dir: &Path) -> tera::Result<Tera> {
    let mut tera = Tera::default();
    tera.autoescape_on(vec![]);
    tera.register_filter("cell", cell_filter);
    let sources: Vec<(String, String)> = BUILTIN
        .iter()
        .map(|(name, builtin)| (name.to_string(), std::fs::read_to_string(dir.join(name)).unwrap_or_else(|_| builtin.to_string())))
        .collect();
    tera.add_raw_templates(sources)?;
    Ok(tera)
}

/// `{{ x | cell }}`: text safe in a markdown table cell (pipes escaped, lines folded).
fn cell_filter(value: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(Value::String(super::fmt::escape(&text)))
}

/// A tera error with its causes, on one line.
pub fn describe(e: &tera::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
