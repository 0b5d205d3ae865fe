//! OSU micro-benchmarks' printed output: a header `# OSU MPI Allreduce Latency Test v7.3`
//! (`MPI-CUDA` and the like for device buffers), optionally `# Datatype: MPI_CHAR.`, then
//! `# Size  Avg Latency(us)` (`# Size  Latency (us)` for osu_latency; more columns with `-f`:
//! min, max, iterations; a `Validation` column with `-c`) and one row per size: bytes, then µs.
//!
//! Which benchmark it is comes from the header line. OSU's all-gather and all-to-all sizes
//! are each rank's message to one peer (nccl-tests counts world × that); its other sizes are
//! nccl-tests' already. The output does not say how many ranks ran (osu_latency: always 2).

use super::{Problem, RowSource, SizeConvention, SizeResult, ToolRun};
use crate::manifest::provenance::{ImportFormat, ImportTool};
use crate::spec::schema::Op;

/// The OSU tests parlab reads: the test's name in the header, its binary, its op and how it
/// counts bytes.
pub const BENCHMARKS: [(&str, &str, Op, SizeConvention); 7] = [
    ("Allreduce Latency Test", "osu_allreduce", Op::AllReduce, SizeConvention::NcclTests),
    ("Allgather Latency Test", "osu_allgather", Op::AllGather, SizeConvention::PerPeer),
    ("Reduce_scatter Latency Test", "osu_reduce_scatter", Op::ReduceScatter, SizeConvention::NcclTests),
    ("All-to-All Personalized Exchange Latency Test", "osu_alltoall", Op::AllToAll, SizeConvention::PerPeer),
    ("Alltoall Latency Test", "osu_alltoall", Op::AllToAll, SizeConvention::PerPeer),
    ("Broadcast Latency Test", "osu_bcast", Op::Broadcast, SizeConvention::NcclTests),
    ("Latency Test", "osu_latency", Op::PingPong, SizeConvention::NcclTests),
];

/// What the `#` lines said.
#[derive(Default)]
struct Header {
    benchmark: Option<(&'static str, Op, SizeConvention)>,
    version: Option<String>,
    table: bool,
    datatypes: u32,
    /// The `# Datatype:` line's type (`MPI_CHAR`), where printed.
    data_type: Option<String>,
    validation: bool,
    /// The header has `-f`'s min, max and iterations columns: each row holds them.
    full: bool,
}

/// Reads an OSU benchmark's printed output.
pub fn read(text: &str) -> Result<ToolRun, Problem> {
    let mut h = Header::default();
    let mut sizes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix('#') {
            header_line(&mut h, rest.trim(), n)?;
        } else if is_row(trimmed) {
            if !h.table {
                return Err(Problem::at(n, "a result row before the `# OSU MPI ... Test vX.Y` and `# Size ...` header lines"));
            }
            sizes.push(row(&h, trimmed, n)?);
        }
    }
    let Some((benchmark, op, sizes_as)) = h.benchmark else {
        return Err(Problem::file("not OSU micro-benchmarks' output: no `# OSU MPI ... Test vX.Y` line"));
    };
    if sizes.is_empty() {
        return Err(Problem::file(format!("no rows: {benchmark}'s output holds no result row")));
    }
    Ok(ToolRun {
        tool: ImportTool::Osu,
        format: ImportFormat::Text,
        version: h.version,
        library: None,
        benchmark: benchmark.to_string(),
        op,
        sizes_as,
        command: None,
        devices: Vec::new(),
        world: (op == Op::PingPong).then_some(2),
        warmup: None,
        iterations: None,
        checked: h.validation,
        ran_at: None,
        data: super::DataKind { data_type: h.data_type, reduction: None },
        sizes,
    })
}

/// A result row: a size first, digits (a sign before them is read, to be refused); other
/// lines (an MPI library's warnings) are not the table's.
fn is_row(line: &str) -> bool {
    line.trim_start_matches(['-', '+']).starts_with(|c: char| c.is_ascii_digit())
}

fn header_line(h: &mut Header, rest: &str, n: usize) -> Result<(), Problem> {
    if let Some(title) = rest.strip_prefix("OSU ") {
        if h.benchmark.is_some() {
            return Err(Problem::at(n, "a second `# OSU ...` header: import one benchmark's output per file"));
        }
        let (name, version) =
            title.rsplit_once(" v").ok_or_else(|| Problem::at(n, format!("`# {rest}`: expected `# OSU MPI <test> Test vX.Y`")))?;
        // `MPI`, `MPI-CUDA`, `MPI-ROCM`, ...: the word before the test's name. OSU's NCCL, RCCL,
        // UCC or OpenSHMEM tests measure another library, which a manifest of link `mpi` would
        // misname.
        let (library, test) = name.split_once(' ').map_or(("", ""), |(l, t)| (l, t.trim()));
        if !library.starts_with("MPI") {
            return Err(Problem::at(
                n,
                format!("`# {rest}`: OSU's {library} tests measure {library}, not MPI; parlab reads OSU's MPI tests (import NCCL results from nccl-tests)"),
            ));
        }
        let known = BENCHMARKS.iter().find(|(t, ..)| *t == test).ok_or_else(|| {
            let mut names: Vec<&str> = Vec::new();
            for (_, binary, ..) in BENCHMARKS {
                if !names.contains(&binary) {
                    names.push(binary);
                }
            }
            Problem::at(n, format!("unknown op: `{test}` is not a test parlab reads ({})", names.join(", ")))
        })?;
        h.benchmark = Some((known.1, known.2, known.3));
        h.version = Some(format!("v{}", osu_version(version.trim()).map_err(|m| Problem::at(n, m))?));
    } else if let Some(named) = rest.strip_prefix("Datatype:") {
        h.data_type = Some(named.trim().trim_end_matches('.').to_string()).filter(|t| !t.is_empty());
        h.datatypes += 1;
        if h.datatypes > 1 {
            return Err(Problem::at(n, "a second `# Datatype:` table: import a run of one data type (`-T`)"));
        }
    } else if rest.starts_with("Size") {
        if !rest.contains("Latency") || !rest.contains("(us)") {
            return Err(Problem::at(n, format!("`# {rest}`: expected a latency column in µs (`Avg Latency(us)` or `Latency (us)`)")));
        }
        h.table = true;
        h.validation = rest.contains("Validation");
        h.full = rest.contains("Min Latency") && rest.contains("Max Latency") && rest.contains("Iterations");
    }
    Ok(())
}

/// One unit of the last decimal `number` is printed with (0.01 for `3.00`, 1 for `3`).
fn printed_unit(number: &str) -> f64 {
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len().min(15));
    10f64.powi(-(decimals as i32))
}

/// The longest version a title may give (OSU's are `7.3`, `5.6.3`, `7.5-1`; rebuilds add `+cuda`, `_1`).
const MAX_VERSION_CHARS: usize = 32;

/// The title's version (`7.3`): a digit first, then digits, letters, dots, dashes, `+` and `_`
/// (a vendor's rebuild: `7.4+cuda`, `5.9_1`), at most
/// [`MAX_VERSION_CHARS`] (a manifest keeps it, and the register shows it in a heading).
fn osu_version(version: &str) -> Result<&str, String> {
    let well_formed = version.starts_with(|c: char| c.is_ascii_digit())
        && version.len() <= MAX_VERSION_CHARS
        && version.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
    if well_formed {
        return Ok(version);
    }
    let shown: String = version.chars().take(MAX_VERSION_CHARS).collect();
    let more =
        if version.chars().count() > MAX_VERSION_CHARS { format!("... ({} characters)", version.chars().count()) } else { String::new() };
    Err(format!("version `{shown}{more}` is not OSU's `vX.Y`"))
}

/// The most numbers OSU prints after a row's latency: min, max and iterations (`-f`), up to five
/// tail latencies (`-z`: P50, P90, P99 by default) and a derived datatype's transmit size.
const MAX_TRAILING_NUMBERS: usize = 9;

/// Checks the columns after a row's latency: up to [`MAX_TRAILING_NUMBERS`] numbers, and where
/// the header has a validation column one `Pass` or `Fail` among them (OSU prints it before the
/// `-z` tail latencies); anything else (a row glued to another line, a unit) is refused rather
/// than read past, as is a row without `-f`'s min, max and iterations under a header that has
/// them. Returns whether the row's validation failed.
fn trailing_columns(h: &Header, row: &str, latency: f64, rest: &[&str], n: usize) -> Result<bool, Problem> {
    let is_verdict = |c: &str| h.validation && (c.eq_ignore_ascii_case("pass") || c.eq_ignore_ascii_case("fail"));
    let verdicts: Vec<&str> = rest.iter().copied().filter(|c| is_verdict(c)).collect();
    if verdicts.len() > 1 {
        return Err(Problem::at(n, format!("{} Pass or Fail columns in one row; OSU prints one", verdicts.len())));
    }
    let numbers: Vec<&str> = rest.iter().copied().filter(|c| !is_verdict(c)).collect();
    if let Some(odd) = numbers.iter().find(|c| !c.parse::<f64>().is_ok_and(f64::is_finite)) {
        let verdict = if h.validation { " and Pass or Fail" } else { "" };
        return Err(Problem::at(
            n,
            format!("unexpected `{odd}` after the latency: expected numbers (min, max, iterations, percentiles){verdict}"),
        ));
    }
    if numbers.len() > MAX_TRAILING_NUMBERS {
        return Err(Problem::at(
            n,
            format!(
                "{} columns after the latency; OSU prints at most {MAX_TRAILING_NUMBERS}: min, max, iterations, five percentiles and a transmit size",
                numbers.len()
            ),
        ));
    }
    if h.full && numbers.len() < 3 {
        return Err(Problem::at(
            n,
            format!("the header has min, max and iterations columns (`-f`), but this row holds {} numbers: `{row}`", 2 + numbers.len()),
        ));
    }
    if h.full {
        // Checked above: finite numbers. The average over ranks lies between their min and max,
        // give or take one unit of the printed decimals (a sum over ranks divided by their count
        // can round past the max).
        let (min, max) = (numbers[0].parse::<f64>().unwrap_or(f64::NAN), numbers[1].parse::<f64>().unwrap_or(f64::NAN));
        let unit = printed_unit(row.split_whitespace().nth(1).unwrap_or_default());
        if !(min - unit <= latency && latency <= max + unit) {
            return Err(Problem::at(
                n,
                format!(
                    "min {} ≤ average {} ≤ max {} does not hold: the columns are not OSU's `-f` Avg, Min, Max in that order",
                    numbers[0],
                    row.split_whitespace().nth(1).unwrap_or_default(),
                    numbers[1]
                ),
            ));
        }
    }
    Ok(verdicts.first().is_some_and(|v| v.eq_ignore_ascii_case("fail")))
}

/// `size latency [min max iterations] [Pass|Fail]`.
fn row(h: &Header, row: &str, n: usize) -> Result<SizeResult, Problem> {
    let w: Vec<&str> = row.split_whitespace().collect();
    if w.len() < 2 {
        return Err(Problem::at(n, format!("expected `size latency(us)`, found `{row}`")));
    }
    let size: u64 = w[0].parse().map_err(|_| Problem::at(n, format!("size `{}` is not a byte count", w[0])))?;
    let us: f64 = w[1]
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0)
        .ok_or_else(|| Problem::at(n, format!("latency `{}` is not a positive number of µs", w[1])))?;
    if let Some(why) = super::implausible_us(us) {
        return Err(Problem::at(n, format!("latency `{}` µs {why}", w[1])));
    }
    let failed = trailing_columns(h, row, us, &w[2..], n)?;
    Ok(SizeResult {
        size_bytes: size,
        out_of_place_us: us,
        in_place_us: None,
        wrong: u64::from(failed),
        bandwidths: None,
        from: RowSource::Line(n),
    })
}
