//! Byte sizes and durations as people write them in specs, and fixed formats for the register.

/// Parses a byte size: an integer, or a number with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().ok()?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = value * factor;
    // 2^64 and above would saturate to u64::MAX: refused, never truncated.
    let fits = (0.0..18_446_744_073_709_551_616.0).contains(&bytes);
    (fits && bytes.fract() == 0.0).then_some(bytes as u64)
}

/// Parses a duration in seconds: an integer, or a number with a unit (ms, s, m, h).
pub fn parse_seconds(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().ok()?;
    let factor = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(value * factor).filter(|s| s.is_finite() && *s > 0.0)
}

/// Formats a byte count with a binary unit, e.g. `3.0 KiB`, `16.0 MiB`, `4 B`.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    // Compared as printed: 1023.7 B is `1.0 KiB`, not `1024 B`.
    if bytes.round() < 1024.0 {
        return format!("{bytes:.0} B");
    }
    let mut value = bytes / 1024.0;
    let mut unit = 1;
    while value >= 1023.95 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Formats seconds with a unit chosen by magnitude and three significant figures.
pub fn format_seconds(seconds: f64) -> String {
    // The unit is chosen for the value as printed: 0.9996 s is `1.00 s`, not `1000 ms`.
    let abs = round3(seconds).abs();
    let (value, unit) = if abs >= 1.0 {
        (seconds, "s")
    } else if abs >= 1e-3 {
        (seconds * 1e3, "ms")
    } else if abs >= 1e-6 {
        (seconds * 1e6, "µs")
    } else {
        (seconds * 1e9, "ns")
    };
    format!("{} {unit}", sig3(value))
}

/// Formats a bandwidth in bytes per second as GB/s (decimal, as link vendors quote).
pub fn format_gbps(bytes_per_s: f64) -> String {
    format!("{} GB/s", sig3(bytes_per_s / 1e9))
}

/// Below this magnitude `sig3` writes scientific notation (see there).
const SIG3_FIXED_FROM: f64 = 1e-5;
/// From this magnitude up `sig3` writes scientific notation (see there).
const SIG3_FIXED_BELOW: f64 = 1e9;

/// A number for stable, readable tables: three significant figures, the same text for the
/// same value every time.
///
/// - `SIG3_FIXED_FROM` (1e-5) ≤ |v| < `SIG3_FIXED_BELOW` (1e9): fixed-point with at most seven
///   decimals (`0.0000870`, `0.000123`, `23.3`, `119`, `123456`). Whole numbers keep all their
///   digits.
/// - Any other nonzero finite value: scientific notation with three significant figures
///   (`1.23e-7`, `-4.56e12`), instead of rounding to `0.000000` or writing every digit.
/// - Zero, infinities and NaN as Rust writes them (`0`, `inf`, `NaN`).
pub fn sig3(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    if !(SIG3_FIXED_FROM..SIG3_FIXED_BELOW).contains(&magnitude) {
        return format!("{value:.2e}");
    }
    // The decimals for the value as rounded: 99.96 is `100`, not `100.0`.
    let digits = round3(magnitude).log10().floor() as i32;
    let decimals = (2 - digits).clamp(0, 7) as usize;
    format!("{value:.decimals$}")
}

/// `value` rounded to three significant figures (as `{:.2e}` prints it).
fn round3(value: f64) -> f64 {
    format!("{value:.2e}").parse().unwrap_or(value)
}

/// At most four significant figures, trailing zeros dropped: a constant as a person would
/// write it (`54`, `1.2`, `7.787`), whether typed into a catalogue or fitted.
pub fn sig4(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = value.abs().log10().floor() as i32;
    let decimals = (3 - digits).clamp(0, 9) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_significant_figures_read_as_typed() {
        let cases = [(54.0, "54"), (1.2, "1.2"), (1500.0, "1500"), (1.6577650102808463, "1.658"), (7.786666853, "7.787")];
        for (value, text) in cases {
            assert_eq!(sig4(value), text);
        }
        assert_eq!(
            (sig4(123456.0), sig4(0.000123456), sig4(-2.5), sig4(0.0)),
            ("123456".into(), "0.0001235".into(), "-2.5".into(), "0".into())
        );
    }

    #[test]
    fn parses_sizes_people_write() {
        assert_eq!(parse_bytes("4"), Some(4));
        assert_eq!(parse_bytes("16MiB"), Some(16 << 20));
        assert_eq!(parse_bytes("3 KB"), Some(3000));
        assert_eq!(parse_bytes("1.5KiB"), Some(1536));
        assert_eq!(parse_bytes("12 parsecs"), None);
        assert_eq!(parse_bytes("0.3B"), None);
        assert_eq!(parse_bytes("16GiB"), Some(16 << 30));
        assert_eq!(parse_bytes("18446744073709551616"), None, "2^64 does not saturate to u64::MAX");
        assert_eq!(parse_bytes("99999999999GiB"), None);
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_seconds("90"), Some(90.0));
        assert_eq!(parse_seconds("5m"), Some(300.0));
        assert_eq!(parse_seconds("250ms"), Some(0.25));
        assert_eq!(parse_seconds("0"), None);
        assert_eq!(parse_seconds("soon"), None);
    }

    #[test]
    fn formats_are_fixed() {
        assert_eq!(format_seconds(0.000_118_7), "119 µs");
        assert_eq!(format_seconds(0.0233), "23.3 ms");
        assert_eq!(format_bytes(3072.0), "3.0 KiB");
        assert_eq!(format_gbps(21.5e9), "21.5 GB/s");
        assert_eq!(sig3(0.000123), "0.000123");
    }

    #[test]
    fn values_that_round_up_to_the_next_unit_or_decade_are_printed_in_it() {
        assert_eq!(format_seconds(0.9996), "1.00 s");
        assert_eq!(format_seconds(0.9994), "999 ms");
        assert_eq!(format_seconds(9.9996e-4), "1.00 ms");
        assert_eq!(sig3(999.6), "1000");
        assert_eq!(sig3(99.96), "100");
        assert_eq!(sig3(9.9996e-6), "1.00e-5");
        assert_eq!(format_bytes(1023.7), "1.0 KiB");
        assert_eq!(format_bytes(1023.4), "1023 B");
        assert_eq!(format_bytes(1024.0 * 1023.97), "1.0 MiB");
    }

    #[test]
    fn sig3_keeps_three_figures_outside_the_fixed_range() {
        // Below 1e-5: scientific, not `0.000000` / `0.000001`.
        assert_eq!(sig3(1.234e-7), "1.23e-7");
        assert_eq!(sig3(-1.234e-7), "-1.23e-7");
        assert_eq!(sig3(4.2e-6), "4.20e-6");
        assert_eq!(sig3(1e-300), "1.00e-300");
        // From 1e9: scientific, not every digit.
        assert_eq!(sig3(4.5612e12), "4.56e12");
        assert_eq!(sig3(1e9), "1.00e9");
        assert_eq!(sig3(-f64::MAX), "-1.80e308");
        assert!(sig3(f64::MAX).len() <= 9, "{}", sig3(f64::MAX));
        // The fixed range prints as it always has.
        let fixed = [
            (0.0233, "0.0233"),
            (1.5, "1.50"),
            (23.3, "23.3"),
            (119.0, "119"),
            (608.4, "608"),
            (123456.0, "123456"),
            (999_999_999.0, "999999999"),
            (-2.5, "-2.50"),
        ];
        for (value, text) in fixed {
            assert_eq!(sig3(value), text, "{value}");
        }
        assert_eq!((sig3(0.0), sig3(f64::INFINITY), sig3(f64::NAN)), ("0".into(), "inf".into(), "NaN".into()));
    }

    #[test]
    fn sig3_keeps_three_figures_from_1e_5_to_1e_4() {
        let cases = [
            (9.99e-6, "9.99e-6"),
            (1e-5, "0.0000100"),
            (-1e-5, "-0.0000100"),
            (1.2345e-5, "0.0000123"),
            (0.000087, "0.0000870"),
            (9.99e-5, "0.0000999"),
            (-9.99e-5, "-0.0000999"),
            (1e-4, "0.000100"),
            (1.0001e-4, "0.000100"),
            (1.234e-4, "0.000123"),
        ];
        for (value, text) in cases {
            assert_eq!(sig3(value), text, "{value}");
        }
    }
}
