//! One problem found in a spec: file, position, key path, message and fix.

use super::locate::Position;
use std::fmt;
use std::path::PathBuf;

/// A user error in a spec, printed as one line: `file:line:col: key: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The spec file.
    pub file: PathBuf,
    /// Where in the file, when known.
    pub position: Option<Position>,
    /// The key path (`prompt.length`, `exclude[1].world`), empty for the whole file.
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(pos) = self.position {
            write!(f, ":{}:{}", pos.line, pos.column)?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

/// All the problems found in a set of specs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}
