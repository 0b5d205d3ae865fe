//! Fixed cell formats for the register (built on `crate::units`), so the same
//! manifests always print the same text: every table cell becomes text here.

use crate::table::Cell;
use crate::units::{format_bytes, format_gbps, format_seconds, sig3};

/// The text of a cell in the register: the one place cells become words.
pub fn text(c: &Cell) -> String {
    match c {
        Cell::Missing => "–".into(),
        Cell::Text(s) => s.clone(),
        Cell::Count(n) => n.to_string(),
        Cell::Large(n) => thousands(*n),
        Cell::Number(x) => finite(*x, sig3),
        Cell::Small(x) => finite(*x, |x| if x == 0.0 { "0".into() } else { small(x) }),
        Cell::Seconds(x) => finite(*x, format_seconds),
        Cell::Bytes(x) => finite(*x, format_bytes),
        Cell::BytesPerSec(x) => finite(*x, format_gbps),
        Cell::Fraction(x) => finite(*x, |x| percent(x, false)),
        Cell::Change(x) => finite(*x, |x| percent(x, true)),
        Cell::Verdict(b) => if *b { "yes" } else { "NO" }.into(),
        Cell::Flag(b) => if *b { "yes" } else { "no" }.into(),
        Cell::Range(a, b) => format!("{} – {}", text(a), text(b)),
        Cell::Noted(a, note) => format!("{} ({note})", text(a)),
    }
}

fn finite(x: f64, f: impl Fn(f64) -> String) -> String {
    if x.is_finite() {
        f(x)
    } else {
        "–".into()
    }
}

/// A fraction as a percentage with one decimal (`42.9%`), signed when it is a change (`+86.0%`).
pub fn percent(fraction: f64, signed: bool) -> String {
    if signed {
        format!("{:+.1}%", fraction * 100.0)
    } else {
        format!("{:.1}%", fraction * 100.0)
    }
}

/// `text` with the working folder's path (the folder the runs were made in, where the register
/// is rendered) written `.`: a probe's `/home/me/parlab/.venv/bin/python` reads
/// `./.venv/bin/python`, the same register from every checkout of the project.
pub fn within_working_folder(text: &str) -> String {
    let here = std::env::current_dir().ok().and_then(|d| std::fs::canonicalize(d).ok());
    match here.as_ref().and_then(|d| d.to_str()).filter(|d| d.len() > 1) {
        Some(dir) => relative_paths(text, &format!("{dir}/")),
        None => text.to_string(),
    }
}

/// `text` with every path that starts with `prefix` (at the start of the text, or after a
/// space, quote, `=`, `:` or parenthesis: a path's start, not the middle of a longer one)
/// written from `./`.
fn relative_paths(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let starts_a_path =
            at == 0 && out.is_empty() || rest[..at].chars().next_back().or(out.chars().next_back()).is_some_and(|c| " '\"=:(".contains(c));
        out.push_str(&rest[..at]);
        out.push_str(if starts_a_path { "./" } else { prefix });
        rest = &rest[at + prefix.len()..];
    }
    out.push_str(rest);
    out
}

/// A whole percentage where it is one (`25%`), else with one decimal (`41.4%`): a declared
/// tolerance or share, not a measurement.
pub fn whole_percent(fraction: f64) -> String {
    let text = format!("{:.1}", fraction * 100.0);
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

/// A range of seconds as the tables print one: `611 ms – 709 ms`.
pub fn seconds_range(min: f64, max: f64) -> String {
    text(&Cell::Range(Box::new(Cell::Seconds(min)), Box::new(Cell::Seconds(max))))
}

/// A tolerance either way: `±25%`.
pub fn tolerance(fraction: f64) -> String {
    format!("±{}", whole_percent(fraction))
}

/// A small quantity (a logit drift) with three significant digits: `2.12e-4`.
pub fn small(x: f64) -> String {
    format!("{x:.2e}")
}

/// An oversubscribed launch's shape in words: `4 ranks × 1 thread on 2 cores`.
pub fn oversubscription(ranks: u32, threads: u32, cores: u32) -> String {
    format!("{ranks} ranks × {threads} thread{} on {cores} cores", if threads == 1 { "" } else { "s" })
}

/// A byte count with a binary unit.
pub fn bytes(v: u64) -> String {
    format_bytes(v as f64)
}

/// `1 run`, `2 runs`: a count and the noun that agrees with it.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// An integer with thousands separators: 124,439,808.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Text safe inside a markdown table cell: pipes escaped, line breaks folded.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push_str(" / ");
        }
        out.push_str(&line.replace('|', "\\|"));
    }
    out
}

/// A lowercase identifier of letters, digits and dashes, for file names.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_slugs() {
        assert_eq!(escape("a|b\n  c"), "a\\|b / c");
        assert_eq!(slug("Decode: GPT-2 (tensor)"), "decode-gpt-2-tensor");
        assert_eq!(text(&Cell::Change(-0.861)), "-86.1%");
        assert_eq!(text(&Cell::Fraction(0.5)), "50.0%");
        assert_eq!(text(&Cell::Small(9.2e-5)), "9.20e-5");
        assert_eq!(text(&Cell::Small(2.1234e-4)), small(2.1234e-4), "a drift reads alike in a table and a finding");
        assert_eq!((whole_percent(0.25), tolerance(0.414), whole_percent(0.1)), ("25%".into(), "±41.4%".into(), "10%".into()));
        assert_eq!(seconds_range(0.611, 0.709), "611 ms – 709 ms");
        let here = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
        let python = format!("'{}/.venv/bin/python' -c 1", here.display());
        assert_eq!(within_working_folder(&python), "'./.venv/bin/python' -c 1");
        assert_eq!(within_working_folder("/elsewhere/bin/python"), "/elsewhere/bin/python");
        assert_eq!(relative_paths("/home/me/p/x and '/home/me/p/y' PATH=/home/me/p/z", "/home/me/p/"), "./x and './y' PATH=./z");
        assert_eq!(relative_paths("/srv/home/me/p/x", "/home/me/p/"), "/srv/home/me/p/x", "not inside a longer path");
        assert_eq!(relative_paths("a/home/me/p/x /home/me/p/", "/home/me/p/"), "a/home/me/p/x ./");
        assert_eq!(text(&Cell::Small(0.0)), "0");
        assert_eq!(text(&Cell::range(1e-3, 3e-3, Cell::Seconds)), "1.00 ms – 3.00 ms");
        assert_eq!(text(&Cell::noted(Cell::Seconds(1.09e-4), "does not pay")), "109 µs (does not pay)");
        assert_eq!(text(&Cell::Seconds(f64::NAN)), "–");
        assert_eq!(text(&Cell::Large(124439808)), "124,439,808");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }
}
