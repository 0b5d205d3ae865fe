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
    /// Scans `text` and records where each key path (`a.b[2].c`) starts. A list may be
    /// indented under its key or not (`strategy:\n- tensor`, as PyYAML writes it).
    pub fn new(text: &str) -> Self {
        let mut positions = BTreeMap::new();
        // The enclosing keys and list items, outermost first.
        let mut stack: Vec<Open> = Vec::new();
        let mut list_counters: BTreeMap<String, usize> = BTreeMap::new();
        for (number, raw) in text.lines().enumerate() {
            let line = strip_comment(raw);
            if line.trim().is_empty() || line.trim_start().starts_with("---") {
                continue;
            }
            let mut indent = line.len() - line.trim_start().len();
            let mut rest = line.trim_start();
            while let Some(after_dash) = rest.strip_prefix("- ").or_else(|| (rest == "-").then_some("")) {
                close_for_item(&mut stack, indent);
                let parent = stack.last().map(|o| o.path.clone()).unwrap_or_default();
                let counter = list_counters.entry(parent.clone()).or_insert(0);
                let item = format!("{parent}[{}]", *counter);
                *counter += 1;
                positions.entry(item.clone()).or_insert(Position { line: number + 1, column: indent + 1 });
                stack.push(Open { indent, path: item, is_item: true });
                indent += rest.len() - after_dash.len();
                rest = after_dash;
            }
            let Some(key) = leading_key(rest) else { continue };
            close_for_key(&mut stack, indent);
            let parent = stack.last().map(|o| o.path.clone()).unwrap_or_default();
            let path = if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") };
            positions.entry(path.clone()).or_insert(Position { line: number + 1, column: indent + 1 });
            list_counters.remove(&path);
            stack.push(Open { indent, path, is_item: false });
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

/// A key or list item that encloses the lines after it, with the column it starts at.
struct Open {
    indent: usize,
    path: String,
    is_item: bool,
}

/// Closes what a list item `- ` at `indent` ends: deeper keys and items, and a sibling item at
/// its own indent; a key at its indent stays open, as the parent of a list not indented under it.
fn close_for_item(stack: &mut Vec<Open>, indent: usize) {
    while stack.last().is_some_and(|o| o.indent > indent || (o.is_item && o.indent == indent)) {
        stack.pop();
    }
}

/// Closes what a `key:` at `indent` ends: every key and list item at its indent or deeper (a
/// sibling key, or the items of a list not indented under the key before it).
fn close_for_key(stack: &mut Vec<Open>, indent: usize) {
    while stack.last().is_some_and(|o| o.indent >= indent) {
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

    #[test]
    fn a_list_not_indented_under_its_key_keeps_the_keys_after_it() {
        // PyYAML's style: the items at the key's own indent.
        let text = "name: x\nstrategy:\n- tensor\n- data\nworld: [1, 2]\nkind: decode\n";
        let index = KeyIndex::new(text);
        assert_eq!(index.find("strategy[1]"), Some(Position { line: 4, column: 1 }));
        assert_eq!(index.find("world"), Some(Position { line: 5, column: 1 }));
        assert_eq!(index.find("kind"), Some(Position { line: 6, column: 1 }));
    }

    #[test]
    fn mappings_in_an_unindented_list_and_the_keys_after_them_are_found() {
        let text = "claims:\n- figure: step\n  select: {world: 2}\n- figure: tokens\n  rule: less\nexclude:\n  - world: 2\nname: x\n";
        let index = KeyIndex::new(text);
        assert_eq!(index.find("claims[0].select"), Some(Position { line: 3, column: 3 }));
        assert_eq!(index.find("claims[1].figure"), Some(Position { line: 4, column: 3 }));
        assert_eq!(index.find("claims[1].rule"), Some(Position { line: 5, column: 3 }));
        assert_eq!(index.find("exclude[0].world"), Some(Position { line: 7, column: 5 }));
        assert_eq!(index.find("name"), Some(Position { line: 8, column: 1 }));
    }

    #[test]
    fn nested_lists_in_both_styles_are_found() {
        let text = "a:\n  b:\n  - 1\n  - 2\n  c:\n    - 3\n  d: 4\nm:\n- - 5\n  - 6\n- - 7\nn: 8\n";
        let index = KeyIndex::new(text);
        assert_eq!(index.find("a.b[1]"), Some(Position { line: 4, column: 3 }));
        assert_eq!(index.find("a.c[0]"), Some(Position { line: 6, column: 5 }));
        assert_eq!(index.find("a.d"), Some(Position { line: 7, column: 3 }));
        assert_eq!(index.find("m[0][1]"), Some(Position { line: 10, column: 3 }));
        assert_eq!(index.find("m[1][0]"), Some(Position { line: 11, column: 3 }));
        assert_eq!(index.find("n"), Some(Position { line: 12, column: 1 }));
    }
}
