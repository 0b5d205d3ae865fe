//! Finds the line and column of a key path in a YAML text, so errors can point at it.
//!
//! serde_yaml 0.9 keeps no positions in a `Value`, so this scans block-style YAML
//! (what people write in specs): each `key:` line gets the path of the mappings and
//! list items that enclose it. Flow-style values (`{a: 1}`, `[1, 2]`) resolve to the
//! line of the key that holds them.

use std::collections::BTreeMap;

/// A position in a file, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number.
    pub column: usize,
}

/// The positions of every block-style key path in one YAML document.
#[derive(Debug, Default)]
pub struct KeyIndex {
    positions: BTreeMap<String, Position>,
}

impl KeyIndex {
    /// Scans `text` and records where each key path (`a.b[2].c`) starts.
    pub fn new(text: &str) -> Self {
        let mut positions = BTreeMap::new();
        // Stack of (indent, path) for the enclosing mappings/sequences.
        let mut stack: Vec<(usize, String)> = Vec::new();
        let mut list_counters: BTreeMap<String, usize> = BTreeMap::new();
        for (number, raw) in text.lines().enumerate() {
            let line = strip_comment(raw);
            if line.trim().is_empty() || line.trim_start().starts_with("---") {
                continue;
            }
            let mut indent = line.len() - line.trim_start().len();
            let mut rest = line.trim_start();
            while let Some(after_dash) = rest.strip_prefix("- ").or_else(|| (rest == "-").then_some("")) {
                pop_deeper(&mut stack, indent);
                // A sibling item at the same indent ends the previous item.
                if stack.last().is_some_and(|(i, p)| *i == indent && p.ends_with(']')) {
                    stack.pop();
                }
                let parent = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
                let counter = list_counters.entry(parent.clone()).or_insert(0);
                let item = format!("{parent}[{}]", *counter);
                *counter += 1;
                positions.entry(item.clone()).or_insert(Position { line: number + 1, column: indent + 1 });
                stack.push((indent, item));
                indent += rest.len() - after_dash.len();
                rest = after_dash;
            }
            let Some(key) = leading_key(rest) else { continue };
            pop_deeper(&mut stack, indent);
            let parent = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
            let path = if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") };
            positions.entry(path.clone()).or_insert(Position { line: number + 1, column: indent + 1 });
            list_counters.remove(&path);
            stack.push((indent + 1, path));
        }
        KeyIndex { positions }
    }

    /// The position of `path`, or of its nearest enclosing path that was found.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut candidate = path.to_string();
        loop {
            if let Some(pos) = self.positions.get(&candidate) {
                return Some(*pos);
            }
            let cut = candidate.rfind(['.', '['])?;
            candidate.truncate(cut);
            if candidate.is_empty() {
                return None;
            }
        }
    }
}

fn pop_deeper(stack: &mut Vec<(usize, String)>, indent: usize) {
    while stack.last().is_some_and(|(i, _)| *i > indent) {
        stack.pop();
    }
}

fn strip_comment(line: &str) -> &str {
    let mut in_single = false;
    let mut in_double = false;
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !in_double => in_single = !in_single,
            '"' if !in_single => in_double = !in_double,
            '#' if !in_single && !in_double && (i == 0 || line[..i].ends_with([' ', '\t'])) => {
                return &line[..i];
            }
            _ => {}
        }
    }
    line
}

fn leading_key(rest: &str) -> Option<&str> {
    let colon = rest.find(':')?;
    let key = rest[..colon].trim();
    let after = &rest[colon + 1..];
    let plain = !key.is_empty() && !key.starts_with(['{', '[', '"', '\'']) && (after.is_empty() || after.starts_with([' ', '\t']));
    plain.then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_and_list_items() {
        let text = "name: x  # comment\nkind: decode\nprompt:\n  length: 3\nexclude:\n  - world: 2\n    link: mpi-tcp\n  - world: 4\n";
        let index = KeyIndex::new(text);
        assert_eq!(index.find("kind"), Some(Position { line: 2, column: 1 }));
        assert_eq!(index.find("prompt.length"), Some(Position { line: 4, column: 3 }));
        assert_eq!(index.find("exclude[0].link"), Some(Position { line: 7, column: 5 }));
        assert_eq!(index.find("exclude[1].world"), Some(Position { line: 8, column: 5 }));
        assert_eq!(index.find("prompt.tokens[3]"), Some(Position { line: 3, column: 1 }));
        assert_eq!(index.find("nowhere"), None);
    }
}
