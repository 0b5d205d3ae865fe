//! Numbers no run can have measured: a manifest holding one is skipped by every reader (`report`,
//! `audit`, `nightly`) with the reason, the way an unreadable one is.
//!
//! A number's unit is read from the nearest key naming one (a `Stats` object's `median`, `min`,
//! `max` and `p99` take their parent's): seconds (`…_s`, `seconds`) lie in 0 to 1e15 s, bytes and
//! rates (`…bytes…`, `…_Bps`, `…per_s`) and logit differences and margins (`drift`, `margin`,
//! `max_logit_diff`, …) in 0 to 2^60, world sizes (`world`) in 1 to 2^60 (a reader divides by
//! them), and any other number within ±2^60. Seeds (any u64)
//! and the fitted link constants under `fits` (a fit's intercept may be negative, its bandwidth
//! near unbounded) are exempt.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::cell::RefCell;

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
    /// A size of a difference or a gap between logits (a drift, a top-2 margin): never
    /// negative, at most [`MAX_MAGNITUDE`].
    Magnitude,
    /// A world size: at least one rank, at most [`MAX_MAGNITUDE`].
    Ranks,
    /// Anything else: at most [`MAX_MAGNITUDE`] either way.
    Other,
}

/// Keys of logit differences and margins: absolute values, never below 0.
const MAGNITUDES: [&str; 6] = ["max_logit_diff", "prompt_logit_diff", "drift", "margin", "min_top2_margin", "reference_margin"];

/// Keys of a `Stats` object, whose unit is its parent key's.
const STATS_KEYS: [&str; 4] = ["median", "min", "max", "p99"];

/// Keys whose whole value is exempt.
const EXEMPT: [&str; 3] = ["seed", "seeds", "fits"];

fn unit_of(key: &str) -> Unit {
    if MAGNITUDES.contains(&key) {
        Unit::Magnitude
    } else if key.contains("bytes") || key.ends_with("_Bps") || key.ends_with("per_s") {
        Unit::Amount
    } else if key.ends_with("_s") || key == "seconds" {
        Unit::Seconds
    } else if key == "world" {
        Unit::Ranks
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

/// Why a manifest's text fails [`check_text`].
#[derive(Debug, thiserror::Error)]
pub enum TextProblem {
    /// A number no run can have measured.
    #[error(transparent)]
    Implausible(#[from] Implausible),
    /// The text is not JSON (a syntax error, a number out of range).
    #[error("{0}")]
    NotJson(serde_json::Error),
}

/// Ok, or the first implausible number of a manifest's JSON text with its key path
/// (`summary.decode.step_s.median: -3`), read as a stream without building a tree. Paths are built only on the way out of an error, so a plausible manifest
/// allocates nothing but the keys that carry escapes.
pub fn check_text(text: &str) -> Result<(), TextProblem> {
    let found = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_str(text);
    let walked = Walk { unit: Unit::Other, found: &found }.deserialize(&mut reader).and_then(|()| reader.end());
    match (found.into_inner(), walked) {
        (Some(implausible), _) => Err(TextProblem::Implausible(implausible)),
        (None, Err(e)) => Err(TextProblem::NotJson(e)),
        (None, Ok(())) => Ok(()),
    }
}

/// The walk over one JSON value whose numbers take `unit`; the first implausible number is
/// left in `found` (and the walk stopped by an error).
struct Walk<'f> {
    unit: Unit,
    found: &'f RefCell<Option<Implausible>>,
}

impl Walk<'_> {
    /// Stops the walk at an implausible number.
    fn number<E: de::Error>(&self, x: f64, written: impl FnOnce() -> String) -> Result<(), E> {
        number(x, self.unit).map_err(|why| {
            *self.found.borrow_mut() = Some(Implausible { path: String::new(), number: written(), why });
            E::custom("implausible number")
        })
    }

    /// Adds `key` in front of the found number's path on the way out.
    fn under<E>(&self, key: &str, e: E) -> E {
        let mut found = self.found.borrow_mut();
        if let Some(f) = found.take() {
            *found = Some(f.under(key));
        }
        e
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.number(v as f64, || v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.number(v as f64, || v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.number(v, || serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            match seq.next_element_seed(Walk { unit: self.unit, found: self.found }) {
                Ok(Some(())) => i += 1,
                Ok(None) => return Ok(()),
                Err(e) => return Err(self.under(&format!("[{i}]"), e)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Key(key)) = map.next_key()? {
            if EXEMPT.contains(&key.as_ref()) {
                map.next_value::<de::IgnoredAny>()?;
                continue;
            }
            let unit = if STATS_KEYS.contains(&key.as_ref()) { self.unit } else { unit_of(&key) };
            map.next_value_seed(Walk { unit, found: self.found }).map_err(|e| self.under(&key, e))?;
        }
        Ok(())
    }
}

/// A map key, borrowed from the text where it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(KeyVisitor)
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
        Unit::Magnitude if x < 0.0 => Err("a negative logit difference or margin (an absolute value)"),
        Unit::Ranks if x < 1.0 => Err("a world of fewer than one rank"),
        Unit::Amount | Unit::Magnitude | Unit::Ranks | Unit::Other if x.abs() > MAX_MAGNITUDE => Err("beyond 2^60 in magnitude"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// [`check_text`] of a JSON value's text (always JSON): Ok, or the implausible number.
    fn check(manifest: &Value) -> Result<(), Implausible> {
        match check_text(&manifest.to_string()) {
            Err(TextProblem::Implausible(found)) => Err(found),
            Ok(()) | Err(TextProblem::NotJson(_)) => Ok(()),
        }
    }

    #[test]
    fn measured_looking_numbers_pass() {
        let ok = json!({"summary": {"decode": {"step_s": {"median": 0.05, "min": 0.04, "max": 0.06, "p99": 0.06, "n": 5},
            "streamed_bytes": 497800000u64}}, "plan": {"timeout_s": 600.0, "model": {"weights": {"seeded": {"seed": u64::MAX}}}},
            "fits": [{"line": {"intercept_s": -1e-6}, "beta_Bps": 1e300}], "answer": {"exactness": {"steps": [{"drift": 0.5, "margin": 0.0}]}}});
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
        let drift = json!({"answer": {"exactness": {"max_logit_diff": -5.0}}});
        assert!(
            check(&drift).unwrap_err().to_string().contains("answer.exactness.max_logit_diff: -5.0 (a negative logit"),
            "{:?}",
            check(&drift)
        );
        // A world of no ranks (a reader divides by it: `report` once panicked on one).
        for empty in [json!({"layout": {"world": 0}}), json!({"summary": {"decode": {"world": 0}}})] {
            assert!(check(&empty).unwrap_err().to_string().contains("world: 0 (a world of fewer than one rank)"), "{:?}", check(&empty));
        }
        assert_eq!(check(&json!({"layout": {"world": 1}, "summary": {"fits": []}})), Ok(()));
        assert_eq!(number(f64::NAN, Unit::Other), Err("not a finite number"));
        assert_eq!(number(f64::INFINITY, Unit::Seconds), Err("not a finite number"));
    }
}
