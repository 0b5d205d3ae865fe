//! Fixed cell formats for the register (built on `crate::units`), so the same
//! manifests always print the same text.

use super::facts::Stat;
use crate::units::{format_bytes, format_gbps, format_seconds, sig3};

/// A duration, or `–` when absent or not finite.
pub fn secs(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("–".into(), format_seconds)
}

/// `min – max` of a duration statistic.
pub fn secs_range(s: Option<&Stat>) -> String {
    s.map_or("–".into(), |s| format!("{} – {}", format_seconds(s.min), format_seconds(s.max)))
}

/// A bandwidth in GB/s, or `–`.
pub fn gbps(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("–".into(), format_gbps)
}

/// `min – max` of a bandwidth statistic in GB/s.
pub fn gbps_range(s: Option<&Stat>) -> String {
    s.map_or("–".into(), |s| format!("{} – {}", format_gbps(s.min), format_gbps(s.max)))
}

/// A byte count with a binary unit.
pub fn bytes(v: u64) -> String {
    format_bytes(v as f64)
}

/// A plain number with three significant figures, or `–`.
pub fn plain(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("–".into(), sig3)
}

/// A small difference in scientific notation (`9.2e-5`), or `–`.
pub fn sci(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("–".into(), |x| if x == 0.0 { "0".into() } else { format!("{x:.1e}") })
}

/// A fraction as a signed percentage (`+86%`), or `–`.
pub fn percent(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("–".into(), |x| format!("{:+.0}%", x * 100.0))
}

/// yes / NO / –.
pub fn verdict(v: Option<bool>) -> String {
    match v {
        Some(true) => "yes".into(),
        Some(false) => "NO".into(),
        None => "–".into(),
    }
}

/// A count, or `–`.
pub fn count(v: Option<u64>) -> String {
    v.map_or("–".into(), |n| n.to_string())
}

/// Text safe inside a markdown table cell: pipes escaped, line breaks folded.
pub fn cell(text: &str) -> String {
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
        assert_eq!(cell("a|b\n  c"), "a\\|b / c");
        assert_eq!(slug("Decode: GPT-2 (tensor)"), "decode-gpt-2-tensor");
        assert_eq!(percent(Some(-0.861)), "-86%");
        assert_eq!(sci(Some(9.2e-5)), "9.2e-5");
        assert_eq!(sci(Some(0.0)), "0");
        assert_eq!(secs_range(Some(&Stat { median: 2e-3, min: 1e-3, max: 3e-3, p99: 3e-3, n: 3 })), "1.00 ms – 3.00 ms");
    }
}
