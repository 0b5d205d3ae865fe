//! Numbers no run can have measured: a manifest holding one is skipped by every reader (`report`,
//! `audit`, `nightly`) with the reason, the way an unreadable one is.
//!
//! A number's unit is read from the nearest key naming one (a `Stats` object's `median`, `min`,
//! `max` and `p99` take their parent's): seconds (`…_s`, `seconds`) lie in 0 to 1e15 s, bytes and
//! rates (`…bytes…`, `…_Bps`, `…per_s`) in 0 to 2^60, and any other number within ±2^60. Seeds (any u64)
//! and the fitted link constants under `fits` (a fit's intercept may be negative, its bandwidth
//! near unbounded) are exempt.

use serde_json::Value;

/// The most seconds a figure may hold (about 32 million years).
pub const MAX_SECONDS: f64 = 1e15;

/// The largest magnitude of bytes, rates and counts (2^60, an exbibyte).
pub const MAX_MAGNITUDE: f64 = 1_152_921_504_606_846_976.0;

/// The unit a number's key gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    /// Seconds: never negative, at most [`MAX_SECONDS`].
    Seconds,
    /// Bytes or a rate (bytes or tokens per second): never negative, at most [`MAX_MAGNITUDE`].
    Amount,
    /// Anything else: at most [`MAX_MAGNITUDE`] either way.
    Other,
}

/// Keys of a `Stats` object, whose unit is its parent key's.
const STATS_KEYS: [&str; 4] = ["median", "min", "max", "p99"];

/// Keys whose whole value is exempt.
const EXEMPT: [&str; 3] = ["seed", "seeds", "fits"];

fn unit_of(key: &str) -> Unit {
    if key.contains("bytes") || key.ends_with("_Bps") || key.ends_with("per_s") {
        Unit::Amount
    } else if key.ends_with("_s") || key == "seconds" {
        Unit::Seconds
    } else {
        Unit::Other
    }
}

/// The first implausible number of a manifest, with its key path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("implausible number at {path}: {number} ({why})")]
pub struct Implausible {
    /// Where it is (`summary.decode.step_s.median`, `rows[0]`).
    pub path: String,
    /// The number as written.
    pub number: String,
    /// Why it cannot be a figure there.
    pub why: &'static str,
}

impl Implausible {
    /// The same number seen from one level up, under `key` (a name, or `[i]`).
    fn under(mut self, key: &str) -> Self {
        self.path = match (self.path.is_empty(), self.path.starts_with('[')) {
            (true, _) => key.to_string(),
            (false, true) => format!("{key}{}", self.path),
            (false, false) => format!("{key}.{}", self.path),
        };
        self
    }
}

/// Ok, or the first implausible number with its key path (`summary.decode.step_s.median: -3`).
/// Paths are built only on the way out of an error, so a plausible manifest allocates nothing.
pub fn check(manifest: &Value) -> Result<(), Implausible> {
    walk(manifest, Unit::Other)
}

fn walk(value: &Value, unit: Unit) -> Result<(), Implausible> {
    match value {
        Value::Object(map) => map.iter().filter(|(k, _)| !EXEMPT.contains(&k.as_str())).try_for_each(|(key, inner)| {
            let inner_unit = if STATS_KEYS.contains(&key.as_str()) { unit } else { unit_of(key) };
            walk(inner, inner_unit).map_err(|e| e.under(key))
        }),
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, inner)| walk(inner, unit).map_err(|e| e.under(&format!("[{i}]"))))
        }
        Value::Number(n) => {
            number(n.as_f64().unwrap_or(f64::NAN), unit).map_err(|why| Implausible { path: String::new(), number: n.to_string(), why })
        }
        _ => Ok(()),
    }
}

/// Why `x` cannot be a figure of `unit`.
fn number(x: f64, unit: Unit) -> Result<(), &'static str> {
    if !x.is_finite() {
        return Err("not a finite number");
    }
    match unit {
        Unit::Seconds if x < 0.0 => Err("a negative time"),
        Unit::Seconds if x > MAX_SECONDS => Err("more than 1e15 s"),
        Unit::Amount if x < 0.0 => Err("a negative amount of bytes or a negative rate"),
        Unit::Amount | Unit::Other if x.abs() > MAX_MAGNITUDE => Err("beyond 2^60 in magnitude"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn measured_looking_numbers_pass() {
        let ok = json!({"summary": {"decode": {"step_s": {"median": 0.05, "min": 0.04, "max": 0.06, "p99": 0.06, "n": 5},
            "streamed_bytes": 497800000u64}}, "plan": {"timeout_s": 600.0, "model": {"weights": {"seeded": {"seed": u64::MAX}}}},
            "fits": [{"line": {"intercept_s": -1e-6}, "beta_Bps": 1e300}], "answer": {"exactness": {"steps": [{"drift": -0.5}]}}});
        assert_eq!(check(&ok), Ok(()));
    }

    #[test]
    fn absurd_negative_and_huge_numbers_are_named_with_their_path() {
        let huge = json!({"summary": {"decode": {"step_s": {"median": 1e308}}}});
        assert_eq!(check(&huge).unwrap_err().to_string(), "implausible number at summary.decode.step_s.median: 1e+308 (more than 1e15 s)");
        let negative = json!({"summary": {"collectives": {"rows": [{"time_s": {"min": -3.0}}]}}});
        assert_eq!(
            check(&negative).unwrap_err().to_string(),
            "implausible number at summary.collectives.rows[0].time_s.min: -3.0 (a negative time)"
        );
        let bytes = json!({"summary": {"decode": {"streamed_bytes": 2e19}}});
        assert!(check(&bytes).unwrap_err().to_string().contains("beyond 2^60"), "{:?}", check(&bytes));
        let count = json!({"answer": {"exactness": {"steps_compared": -1e300}}});
        assert!(check(&count).unwrap_err().to_string().contains("answer.exactness.steps_compared"), "{:?}", check(&count));
        let rate = json!({"summary": {"decode": {"tokens_per_s": {"median": -2.0}}}});
        assert!(check(&rate).unwrap_err().to_string().contains("a negative amount"), "{:?}", check(&rate));
        assert_eq!(number(f64::NAN, Unit::Other), Err("not a finite number"));
        assert_eq!(number(f64::INFINITY, Unit::Seconds), Err("not a finite number"));
    }
}
