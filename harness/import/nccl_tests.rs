//! nccl-tests' output: its `-J` JSON file (format version 3) and the table it prints.
//!
//! JSON: `version` (3), `args` (the command line, the binary first), `nccl_version`
//! (`22809` = 2.28.9), `start_time`, `config` (`warmup_iters`, `iterations`, `validation`,
//! `devices[]` with `rank`, `hostname`, `device`, `device_hex`, `device_info`), `results[]`
//! with `size`, `count`, `type`, `redop`, `root`, `out_of_place` and `in_place`, each
//! `{time, alg_bw, bus_bw, nwrong}` (`cpu_time` with `-C 1`, refused: the host's CPU time; `nwrong` null without `-c`).
//!
//! Text: `#` lines naming the version (`# nccl-tests version 2.19.6 nccl-headers=22809
//! nccl-library=22809`), the binary (`# Collective test starting: all_reduce_perf`), the
//! options (`# nThread 1 nGpus 1 minBytes 8 ... warmup iters: 5 iters: 20 ... validation: 1`)
//! and each rank (`#  Rank  0 Group  0 Pid 1234 on host1 device  0 [0000:19:00] NVIDIA
//! H200`), then one row per size: `size count type redop root` and `time algbw busbw #wrong`
//! out of place then in place (with `-I 1` four per-iteration columns after each), time in
//! µs, bandwidths in GB/s (1e9 bytes/s), `#wrong` `N/A` without `-c`.

use super::{DataKind, Listed, ListedAt, ListedRanks, Problem, RowSource, SizeConvention, SizeResult, ToolRun};
use crate::manifest::plausible::MAX_MAGNITUDE;
use crate::manifest::provenance::{ImportFormat, ImportTool, ImportedDevice};
use crate::spec::fields::MAX_WORLD;
use crate::spec::schema::Op;
use serde_json::Value;

/// The JSON format version this reader knows.
pub const JSON_FORMAT: u64 = 3;
/// The oldest JSON format it reads: formats 1 (nccl-tests 2.17.3 to 2.19.4) and 2 (2.19.5) hold
/// every key parlab reads as format 3 does (3 added per-iteration keys it does not read); a key
/// one lacks is refused by name as in any file.
pub const OLDEST_JSON_FORMAT: u64 = 1;

/// The nccl-tests binaries parlab reads, and the op each times.
pub const BENCHMARKS: [(&str, Op); 6] = [
    ("all_reduce_perf", Op::AllReduce),
    ("all_gather_perf", Op::AllGather),
    ("reduce_scatter_perf", Op::ReduceScatter),
    ("alltoall_perf", Op::AllToAll),
    ("broadcast_perf", Op::Broadcast),
    ("sendrecv_perf", Op::PingPong),
];

/// Reads nccl-tests' output: JSON when it starts with `{`, else the printed table (a JSON
/// array is neither: nccl-tests writes one object).
pub fn read(text: &str, command: Option<&str>) -> Result<ToolRun, Problem> {
    let start = text.trim_start();
    if start.starts_with('{') {
        read_json(text)
    } else if start.starts_with('[') && serde_json::from_str::<serde_json::Value>(text).is_ok() {
        Err(Problem::file("a JSON array, where nccl-tests' JSON output (`-J`) is one object `{...}`; give that file or the printed table"))
    } else {
        read_text_as(text, command.and_then(command_benchmark))
    }
}

/// The nccl-tests binary a command line runs (`mpirun -np 2 ./build/all_reduce_perf -b 8`):
/// the first word that names one.
fn command_benchmark(command: &str) -> Option<(String, Op)> {
    command.split_whitespace().find_map(|w| op_of(w).ok())
}

/// A benchmark binary parlab does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown op: benchmark `{name}` is not one parlab reads ({})", BENCHMARKS.iter().map(|(b, _)| *b).collect::<Vec<_>>().join(", "))]
pub struct UnknownBenchmark {
    /// The binary's file name.
    pub name: String,
}

/// The op of the binary `path` names (a path or a bare name).
fn op_of(path: &str) -> Result<(String, Op), UnknownBenchmark> {
    let name = path.rsplit('/').next().unwrap_or(path).to_string();
    match BENCHMARKS.iter().find(|(b, _)| *b == name) {
        Some((_, op)) => Ok((name, *op)),
        None => Err(UnknownBenchmark { name }),
    }
}

/// What is wrong with one timing object of the JSON output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimingProblem {
    /// No `time`.
    #[error("no `time`")]
    NoTime,
    /// `cpu_time` in its place: `-C 1`'s host CPU time, not the collective's.
    #[error("`cpu_time` in place of `time`: nccl-tests' `-C 1` reports the host's CPU time, not the collective's; run it without `-C 1`")]
    CpuTime,
    /// The time is not a positive number.
    #[error("`time` {0} is not a positive number of µs")]
    BadTime(Value),
    /// The time is shorter than a collective takes or longer than any figure a manifest may hold.
    #[error("`time` {0} µs {1}")]
    Implausible(Value, &'static str),
    /// A bandwidth is missing.
    #[error("no `{0}`")]
    NoBandwidth(&'static str),
    /// A bandwidth is not a number, or negative.
    #[error("`{0}` {1} is not a bandwidth (a number of GB/s, not negative)")]
    BadBandwidth(&'static str, Value),
    /// `nwrong` is not a count (negative, fractional, past 2^60, or not a number at all).
    #[error("`nwrong` {0} is not a count of wrong elements")]
    BadWrong(Value),
}

/// `22809` as `NCCL 2.28.9` (codes before 2.9 were major·1000 + minor·100 + patch).
pub fn nccl_version(code: u64) -> String {
    let (major, minor, patch) =
        if code >= 20900 { (code / 10000, code % 10000 / 100, code % 100) } else { (code / 1000, code % 1000 / 100, code % 100) };
    format!("NCCL {major}.{minor}.{patch}")
}

/// Reads the `-J` JSON file.
pub fn read_json(text: &str) -> Result<ToolRun, Problem> {
    let v: Value = serde_json::from_str(text).map_err(|e| Problem::at(e.line().max(1), format!("not JSON: {e}")))?;
    let format = v.get("version");
    if !format.and_then(Value::as_u64).is_some_and(|f| (OLDEST_JSON_FORMAT..=JSON_FORMAT).contains(&f)) {
        let said = format.map_or("no `version` key".to_string(), |f| format!("`version` {f}"));
        return Err(Problem::file(format!("not nccl-tests' JSON format {OLDEST_JSON_FORMAT} to {JSON_FORMAT} ({said})")));
    }
    let args: Vec<String> = v
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let binary = args.first().ok_or_else(|| Problem::file("its `args` are empty: the binary (all_reduce_perf, ...) names the op"))?;
    let (benchmark, op) = op_of(binary).map_err(|e| Problem::file(e.to_string()))?;
    let config = v.get("config").cloned().unwrap_or(Value::Null);
    let devices = json_devices(&config)?;
    let results = v.get("results").and_then(Value::as_array).ok_or_else(|| Problem::file("no `results` list"))?;
    let sizes = results.iter().enumerate().map(|(i, r)| json_result(i, r)).collect::<Result<Vec<_>, _>>()?;
    one_type_and_redop(results.iter().map(|r| (str_of(r, "type"), str_of(r, "redop"))))?;
    let first_root = results.first().map(|r| str_of(r, "root")).unwrap_or_default();
    for (i, r) in results.iter().enumerate() {
        let root = str_of(r, "root");
        rows_of_benchmark(&benchmark, op, &str_of(r, "redop"), &root)
            .and_then(|()| one_root(&first_root, &root))
            .map_err(|m| Problem::file(format!("results[{i}]: {m}")))?;
    }
    if sizes.is_empty() {
        return Err(Problem::file("no rows: `results` is empty"));
    }
    // Checked only where every timing of every row, out of place and in place, counted its wrong elements.
    let counted =
        |r: &Value, key| r.get(key).filter(|t| !t.is_null()).map_or(key == "in_place", |t| t.get("nwrong").is_some_and(Value::is_number));
    let nwrong_known = results.iter().all(|r| counted(r, "out_of_place") && counted(r, "in_place"));
    Ok(ToolRun {
        tool: ImportTool::NcclTests,
        format: ImportFormat::Json,
        version: None,
        library: v.get("nccl_version").and_then(Value::as_u64).map(nccl_version),
        benchmark,
        op,
        sizes_as: SizeConvention::NcclTests,
        command: Some(shell_join(&args)),
        world: (!devices.is_empty()).then_some(devices.len() as u32),
        devices,
        warmup: json_count(&config, "warmup_iters")?,
        iterations: json_count(&config, "iterations")?,
        checked: config.get("validation").and_then(Value::as_u64).is_some_and(|c| c != 0) && nwrong_known,
        ran_at: v.get("start_time").and_then(Value::as_str).map(str::to_string),
        data: results.first().map_or_else(DataKind::default, |r| DataKind::of_nccl_tests(&str_of(r, "type"), &str_of(r, "redop"))),
        sizes,
    })
}

/// `config.KEY` as an iteration count: None where absent or null, refused where not a whole
/// number of at most 2^32 − 1.
fn json_count(config: &Value, key: &str) -> Result<Option<u32>, Problem> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64().filter(|x| x.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(x)) {
            Some(x) => Ok(Some(x as u32)),
            None => Err(Problem::file(format!("config.{key} {v} is not a whole number of iterations"))),
        },
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").trim().to_string()
}

fn json_devices(config: &Value) -> Result<Vec<Listed>, Problem> {
    let Some(list) = config.get("devices").and_then(Value::as_array) else { return Ok(Vec::new()) };
    let per = ranks_per_process(config)?;
    let ranks = list.len() as u64 * u64::from(per);
    if ranks > u64::from(MAX_WORLD) {
        return Err(Problem::file(format!(
            "config: {} devices[] × {per} ranks per process (nthreads × ngpus) is {ranks} ranks: a run has at most {MAX_WORLD}",
            list.len()
        )));
    }
    let (mut devices, mut listed) = (Vec::new(), ListedRanks::default());
    for (i, d) in list.iter().enumerate() {
        let first = json_device(i, d)?;
        for j in 0..per {
            let (Some(rank), Some(device)) = (first.rank.checked_add(j), first.device.checked_add(j)) else {
                return Err(Problem::file(format!("config.devices[{i}]: rank {} + {per} ranks per process is past 2^32", first.rank)));
            };
            let name = if j == 0 {
                first.name.clone()
            } else {
                format!("not listed (nccl-tests' JSON lists only the first device of each process, config.devices[{i}])")
            };
            let entry = Listed { device: ImportedDevice { rank, host: first.host.clone(), device, name }, at: ListedAt::JsonDevice(i) };
            listed.take(&entry)?;
            devices.push(entry);
        }
    }
    Ok(devices)
}

/// The ranks each process of the run drove: `config.nthreads` × `config.ngpus` (each 1 where
/// absent). nccl-tests' JSON lists one `devices[]` entry per process, its first rank; the
/// process's others follow it in rank and device order.
fn ranks_per_process(config: &Value) -> Result<u32, Problem> {
    let (threads, gpus) = (json_count(config, "nthreads")?.unwrap_or(1), json_count(config, "ngpus")?.unwrap_or(1));
    if threads == 0 || gpus == 0 {
        return Err(Problem::file(format!("config: nthreads {threads} × ngpus {gpus} drive no GPU")));
    }
    threads.checked_mul(gpus).ok_or_else(|| Problem::file(format!("config: nthreads {threads} × ngpus {gpus} is past 2^32 ranks")))
}

/// `config.devices[i]`: `rank`, `hostname`, `device`, `device_info` and `device_hex`.
fn json_device(i: usize, d: &Value) -> Result<ImportedDevice, Problem> {
    let num = |k: &str| d.get(k).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    let (Some(rank), Some(device)) = (num("rank"), num("device")) else {
        return Err(Problem::file(format!("config.devices[{i}]: needs integer `rank` and `device`")));
    };
    let host = d.get("hostname").or_else(|| d.get("host")).and_then(Value::as_str).unwrap_or("").to_string();
    let name = match (str_of(d, "device_info"), str_of(d, "device_hex")) {
        (info, hex) if hex.is_empty() => info,
        (info, hex) => format!("{info} [{hex}]"),
    };
    Ok(ImportedDevice { rank, host, device, name })
}

/// One `results[i]`: its size and both timings.
fn json_result(i: usize, r: &Value) -> Result<SizeResult, Problem> {
    let at = |msg: &str| Problem::file(format!("results[{i}]: {msg}"));
    let size = r.get("size").and_then(Value::as_u64).ok_or_else(|| at("needs an integer `size` (bytes)"))?;
    let out = r.get("out_of_place").filter(|o| !o.is_null()).ok_or_else(|| at("has no `out_of_place` timing"))?;
    let (out_us, out_wrong, bandwidths) = json_timing(out).map_err(|m| at(&format!("out_of_place: {m}")))?;
    let (in_us, in_wrong) = match r.get("in_place").filter(|o| !o.is_null()) {
        Some(ip) => {
            let (t, w, _) = json_timing(ip).map_err(|m| at(&format!("in_place: {m}")))?;
            (Some(t), w)
        }
        None => (None, 0),
    };
    let wrong = total_wrong(out_wrong, in_wrong).ok_or_else(|| at(&format!("#wrong {out_wrong} + {in_wrong} is more than 2^60")))?;
    Ok(SizeResult {
        size_bytes: size,
        out_of_place_us: out_us,
        in_place_us: in_us,
        wrong,
        bandwidths: Some(bandwidths),
        from: RowSource::Entry(i),
    })
}

/// Out-of-place and in-place wrong elements together, None past 2^60 (what a manifest holds).
fn total_wrong(out: u64, in_place: u64) -> Option<u64> {
    out.checked_add(in_place).filter(|&w| w <= 1 << 60)
}

/// `{time, alg_bw, bus_bw, nwrong}`: µs, wrong elements (0 when null), (algbw, busbw); a
/// `cpu_time` (`-C 1`) is refused.
fn json_timing(t: &Value) -> Result<(f64, u64, (f64, f64)), TimingProblem> {
    if t.get("time").is_none() && t.get("cpu_time").is_some() {
        return Err(TimingProblem::CpuTime);
    }
    let time = t.get("time").ok_or(TimingProblem::NoTime)?;
    let us = time.as_f64().filter(|x| x.is_finite() && *x > 0.0).ok_or_else(|| TimingProblem::BadTime(time.clone()))?;
    if let Some(why) = super::implausible_us(us) {
        return Err(TimingProblem::Implausible(time.clone(), why));
    }
    let bw = |k: &'static str| {
        let v = t.get(k).ok_or(TimingProblem::NoBandwidth(k))?;
        v.as_f64().filter(|b| b.is_finite() && *b >= 0.0).ok_or_else(|| TimingProblem::BadBandwidth(k, v.clone()))
    };
    let wrong = match t.get("nwrong") {
        Some(Value::Number(n)) => {
            n.as_f64().filter(|w| is_count(*w)).ok_or_else(|| TimingProblem::BadWrong(Value::Number(n.clone())))? as u64
        }
        // Not checked (nccl-tests without `-c 1` writes null); the run is then not `checked`.
        None | Some(Value::Null) => 0,
        Some(other) => return Err(TimingProblem::BadWrong(other.clone())),
    };
    Ok((us, wrong, (bw("alg_bw")?, bw("bus_bw")?)))
}

/// Refuses results of several data types or reduction ops (`-d all`, `-o all`): each would be
/// a curve of its own, and a collectives row has none of them.
fn one_type_and_redop(pairs: impl Iterator<Item = (String, String)>) -> Result<(), Problem> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for p in pairs {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.len() > 1 {
        let list: Vec<String> = seen.iter().map(|(t, o)| format!("{t} {o}")).collect();
        return Err(Problem::file(format!(
            "results of {} data type / reduction pairs ({}); import a run of one (`-d TYPE -o OP`)",
            seen.len(),
            list.join(", ")
        )));
    }
    Ok(())
}

/// Refuses a row whose reduction op or root is not what `benchmark` prints: nccl-tests writes
/// the `-o` op (`sum` unless given) for all_reduce, reduce_scatter and sendrecv, `none` for
/// all_gather, alltoall and broadcast, root -1 for all but broadcast, and broadcast's root
/// (0 unless `-r`; each root in turn with `-r -1`). Another benchmark's rows under this header
/// (two logs spliced) would be read as this op's times; all-gather and reduce-scatter even share
/// a bus factor.
fn rows_of_benchmark(benchmark: &str, op: Op, redop: &str, root: &str) -> Result<(), String> {
    let prints_op = prints_reduction_op(op);
    let rooted = op == Op::Broadcast;
    let spliced = "another benchmark's rows under this header (two logs joined?)";
    // A JSON result without the field, or a 2.13.0–2.13.3 row of an op that reduces nothing
    // (printed empty), says nothing either way.
    match (prints_op, redop == "none") {
        _ if redop.is_empty() => {}
        (true, true) => {
            return Err(format!("redop `none` under {benchmark}, which prints its reduction op (`sum` unless `-o`): {spliced}"))
        }
        (false, false) => return Err(format!("redop `{redop}` under {benchmark}, which prints `none` (it reduces nothing): {spliced}")),
        _ => {}
    }
    if root.is_empty() {
        return Ok(());
    }
    let root_value: i64 = root.parse().map_err(|_| format!("root `{root}` is not a rank (nccl-tests prints -1 where the op has none)"))?;
    match (rooted, root_value) {
        (true, r) if r < 0 => {
            Err(format!("root {r} under {benchmark}, which sends from a root rank (nccl-tests prints it, 0 unless `-r`): {spliced}"))
        }
        (false, r) if r != -1 => Err(format!("root {r} under {benchmark}, which has no root (nccl-tests prints -1): {spliced}")),
        _ => Ok(()),
    }
}

/// Refuses rows of several roots (broadcast_perf `-r -1` times every root in turn, each root's
/// sizes again): their times would be merged as samples of one curve. `first` is the first
/// row's root.
fn one_root(first: &str, root: &str) -> Result<(), String> {
    if root == first {
        return Ok(());
    }
    Err(format!("rows of root {first} and root {root}: the run timed several roots (`-r -1`), whose times would be merged as one curve; import a run of one root (`-r N`)"))
}

/// The command line as one string, arguments with spaces quoted.
fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| if a.contains(char::is_whitespace) || a.is_empty() { format!("'{a}'") } else { a.clone() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the `#` lines of the printed output said.
#[derive(Default)]
struct Header {
    version: Option<String>,
    library: Option<String>,
    benchmark: Option<(String, Op)>,
    warmup: Option<u32>,
    iterations: Option<u32>,
    validation: Option<bool>,
    per_iteration: bool,
    /// The closing `# Avg bus bandwidth` line every nccl-tests version prints after its table.
    concluded: bool,
    /// The options line's `maxBytes`: the largest size the sweep was asked for.
    max_bytes: Option<u64>,
    /// The table's last column is `timestamp` (`-S 1`): each row ends in a date and a time.
    timestamps: bool,
    devices: Vec<Listed>,
    listed: ListedRanks,
    /// The line of the table's `# size count ...` header, once read.
    table: Option<usize>,
    /// The first row's root.
    root: Option<String>,
    type_redop: Vec<(String, String)>,
}

/// Reads the table nccl-tests prints.
pub fn read_text(text: &str) -> Result<ToolRun, Problem> {
    read_text_as(text, None)
}

/// [`read_text`], the op taken from `named` (the `--command` line's binary) where the output
/// has no `# Collective test starting:` line (nccl-tests before 2.16.7 printed none).
fn read_text_as(text: &str, named: Option<(String, Op)>) -> Result<ToolRun, Problem> {
    let mut h = Header::default();
    let mut named = named;
    let mut sizes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix('#') {
            header_line(&mut h, rest.trim(), n)?;
        } else if is_row(trimmed) {
            if h.benchmark.is_none() {
                h.benchmark = named.take();
            }
            if h.benchmark.is_none() {
                return Err(Problem::at(n, "a result row before `# Collective test starting: BINARY`, which names the op (nccl-tests before 2.16.7 printed none: name the binary with `--command`): not nccl-tests' output, or the header was cut off"));
            }
            sizes.push(text_row(&mut h, trimmed, n)?);
        }
        // Other lines (NCCL's INFO and WARN logging, mpirun's messages) are not nccl-tests' table.
    }
    let Some((benchmark, op)) = h.benchmark else {
        return Err(Problem::file("not nccl-tests' output: no `# Collective test starting: BINARY` line"));
    };
    if sizes.is_empty() {
        return Err(Problem::file(format!("no rows: {benchmark}'s output holds no result row")));
    }
    // A run whose teardown failed printed every size but no closing line: its sweep is whole.
    let reached = h.max_bytes.is_some_and(|max| sizes.iter().any(|(s, _)| s.size_bytes >= max));
    if !h.concluded && !reached {
        return Err(Problem::file(format!(
            "{benchmark}'s output stops after {} sizes, short of its maxBytes, without the `# Avg bus bandwidth` line nccl-tests prints after its last size: the run was cut short (a crash, a kill, a full disk) or the file truncated; import a whole run's output",
            sizes.len()
        )));
    }
    let all_checked = sizes.iter().all(|(_, checked)| *checked);
    Ok(ToolRun {
        tool: ImportTool::NcclTests,
        format: ImportFormat::Text,
        version: h.version,
        library: h.library,
        benchmark,
        op,
        sizes_as: SizeConvention::NcclTests,
        command: None,
        world: (!h.devices.is_empty()).then_some(h.devices.len() as u32),
        devices: h.devices,
        warmup: h.warmup,
        iterations: h.iterations,
        checked: h.validation.unwrap_or(false) && all_checked,
        ran_at: None,
        data: h.type_redop.first().map_or_else(DataKind::default, |(t, o)| DataKind::of_nccl_tests(t, o)),
        sizes: sizes.into_iter().map(|(s, _)| s).collect(),
    })
}

/// A result row: a size first, digits (a sign before them is read, to be refused, as OSU's
/// reader does); other lines are not the table's, among them NCCL's logging, whose first word
/// is `host:pid:tid` also where the host's name starts with a digit (`10-0-0-1`, `4gpu-a`).
fn is_row(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    first.trim_start_matches(['-', '+']).starts_with(|c: char| c.is_ascii_digit()) && !first.contains(':')
}

fn header_line(h: &mut Header, rest: &str, n: usize) -> Result<(), Problem> {
    if let Some(v) = rest.strip_prefix("nccl-tests version") {
        let mut words = v.split_whitespace();
        h.version = words.next().map(str::to_string);
        h.library = words.find_map(|w| w.strip_prefix("nccl-library=")).and_then(|c| c.parse().ok()).map(nccl_version);
    } else if let Some(b) = rest.strip_prefix("Collective test starting:") {
        if let Some((first, _)) = &h.benchmark {
            return Err(Problem::at(
                n,
                format!(
                    "a second `# Collective test starting:` line ({} after {first}): the output of two runs; import one run's output per file",
                    b.trim()
                ),
            ));
        }
        h.benchmark = Some(op_of(b.trim()).map_err(|e| Problem::at(n, e.to_string()))?);
    } else if rest.starts_with("nThread") {
        let value = |qualifier, key| option_value(rest, qualifier, key).map_err(|m| Problem::at(n, m));
        h.warmup = value(Some("warmup"), "iters:")?;
        h.iterations = value(None, "iters:")?;
        h.validation = value(None, "validation:")?.map(|v| v != 0);
        h.max_bytes = rest.split_whitespace().skip_while(|w| *w != "maxBytes").nth(1).and_then(|v| v.parse().ok());
    } else if rest.starts_with("Avg bus bandwidth") {
        h.concluded = true;
    } else if rest.starts_with("Per-Iteration Report") {
        h.per_iteration = true;
    } else if rest.starts_with("Rank") {
        rank_line(h, rest, n)?;
    } else if rest.starts_with("size") && rest.contains("count") {
        if rest.split_whitespace().any(|c| c == "cputime") {
            return Err(Problem::at(
                n,
                "the table's times are `cputime`: nccl-tests' `-C 1` reports the host's CPU time, not the collective's; run it without `-C 1`",
            ));
        }
        if let Some(first) = h.table {
            return Err(Problem::at(
                n,
                format!("a second table header (the first is at line {first}): the output of two runs, whose rows would be merged as one op's samples; import one run's output per file"),
            ));
        }
        h.table = Some(n);
        h.timestamps = rest.split_whitespace().last() == Some("timestamp");
    }
    Ok(())
}

/// The whole number after the word `key` in the options line, where the word before it is
/// `qualifier` (`warmup iters: 5`), or, with None, is no word of its own (`iters: 20`, not
/// `agg iters: 1`); None where the line has no such word, refused where what follows is not a
/// whole number.
fn option_value(text: &str, qualifier: Option<&str>, key: &str) -> Result<Option<u32>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = (1..words.len().saturating_sub(1)).find(|&i| {
        words[i] == key
            && match qualifier {
                Some(q) => words[i - 1] == q,
                None => !matches!(words[i - 1], "warmup" | "agg"),
            }
    });
    let Some(i) = at else { return Ok(None) };
    let field = qualifier.map_or(key.to_string(), |q| format!("{q} {key}"));
    words[i + 1].parse().map(Some).map_err(|_| format!("`{field}` {} is not a whole number", words[i + 1]))
}

/// A `#  Rank ...` line: its device, refused where it is not in nccl-tests' form or repeats a
/// rank an earlier line listed.
fn rank_line(h: &mut Header, rest: &str, n: usize) -> Result<(), Problem> {
    let d = device_line(rest)
        .ok_or_else(|| Problem::at(n, "a rank line not in nccl-tests' form `#  Rank R Group G Pid P on HOST device D [PCI] NAME`"))?;
    let listed = Listed { device: d, at: ListedAt::Line(n) };
    h.listed.take(&listed)?;
    h.devices.push(listed);
    Ok(())
}

/// `Rank  0 Group  0 Pid  1234 on host1 device  0 [0000:19:00] NVIDIA H200`.
fn device_line(rest: &str) -> Option<ImportedDevice> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let after = |key: &str| words.iter().position(|w| *w == key).and_then(|p| words.get(p + 1)).copied();
    let rank = after("Rank")?.parse().ok()?;
    let host = after("on")?.to_string();
    let device = after("device")?.parse().ok()?;
    // `[0000:19:00] NVIDIA H200` is kept as the JSON's `device_info [device_hex]`: `NVIDIA H200 [0000:19:00]`.
    let pci_at = words.iter().position(|w| *w == "device")? + 2;
    let (pci, name) = match words.get(pci_at) {
        Some(w) if w.starts_with('[') => (Some(*w), words.get(pci_at + 1..).unwrap_or_default().join(" ")),
        _ => (None, words.get(pci_at..).unwrap_or_default().join(" ")),
    };
    let name = pci.map_or(name.clone(), |p| format!("{name} {p}"));
    Some(ImportedDevice { rank, host, device, name })
}

/// One result row, and whether its `#wrong` columns were counted (not `N/A`).
fn text_row(h: &mut Header, row: &str, n: usize) -> Result<(SizeResult, bool), Problem> {
    if h.table.is_none() {
        return Err(Problem::at(n, "a result row before the `# size count type redop root time algbw busbw #wrong ...` header"));
    }
    let mut w: Vec<&str> = row.split_whitespace().collect();
    let group = if h.per_iteration { 8 } else { 4 };
    let stamp = if h.timestamps { 2 } else { 0 };
    let columns = 5 + 2 * group + stamp;
    if w.len() + 1 == columns && redop_printed_empty(h, &w) {
        w.insert(3, "");
    }
    if w.len() != columns {
        let more = if w.len() > columns { " (two rows on one line?)" } else { "" };
        let stamped = if h.timestamps { " and a date and time (`-S 1`)" } else { "" };
        return Err(Problem::at(
            n,
            format!(
                "expected `size count type redop root`, {group} columns out of place and in place{stamped} ({columns} in all), found {} columns{more}: `{row}`",
                w.len()
            ),
        ));
    }
    if h.timestamps && !is_timestamp(w[columns - 2], w[columns - 1]) {
        return Err(Problem::at(
            n,
            format!("expected the row's date and time (`-S 1`) last, found `{} {}`", w[columns - 2], w[columns - 1]),
        ));
    }
    let size: u64 = w[0].parse().map_err(|_| Problem::at(n, format!("size `{}` is not a byte count", w[0])))?;
    if let Some((benchmark, op)) = &h.benchmark {
        rows_of_benchmark(benchmark, *op, w[3], w[4]).map_err(|m| Problem::at(n, m))?;
    }
    let first_root = h.root.get_or_insert_with(|| w[4].to_string());
    one_root(first_root, w[4]).map_err(|m| Problem::at(n, m))?;
    let pair = (w[2].to_string(), w[3].to_string());
    if !h.type_redop.contains(&pair) {
        h.type_redop.push(pair);
        one_type_and_redop(h.type_redop.iter().cloned()).map_err(|p| Problem::at(n, p.message))?;
    }
    let (out_us, alg, bus, out_wrong) = text_timing(&w[5..5 + 4], n, "out-of-place")?;
    let (in_us, _, _, in_wrong) = text_timing(&w[5 + group..5 + group + 4], n, "in-place")?;
    let checked = out_wrong.is_some() && in_wrong.is_some();
    let (out_wrong, in_wrong) = (out_wrong.unwrap_or(0), in_wrong.unwrap_or(0));
    let wrong = total_wrong(out_wrong, in_wrong)
        .ok_or_else(|| Problem::at(n, format!("#wrong {out_wrong} out of place + {in_wrong} in place is more than 2^60")))?;
    let result = SizeResult {
        size_bytes: size,
        out_of_place_us: out_us,
        in_place_us: Some(in_us),
        wrong,
        bandwidths: Some((alg, bus)),
        from: RowSource::Line(n),
    };
    Ok((result, checked))
}

/// The data type names nccl-tests prints (`-d`), old builds' and new ones'.
const DATA_TYPES: [&str; 14] =
    ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2", "char", "int"];

/// Whether a row one column short is nccl-tests 2.13.0–2.13.3's for an op that reduces nothing
/// (all_gather, alltoall, broadcast): it printed their redop as an empty string, so the row's
/// third word is its data type and its fourth already its root. Not under a version line (first
/// printed by 2.18.5), nor where the header named a benchmark that prints its op.
fn redop_printed_empty(h: &Header, w: &[&str]) -> bool {
    let reduces = h.benchmark.as_ref().is_some_and(|(_, op)| prints_reduction_op(*op));
    h.version.is_none() && !reduces && w.len() > 3 && DATA_TYPES.contains(&w[2]) && w[3].parse::<i64>().is_ok()
}

/// Whether nccl-tests prints `op`'s reduction op (`-o`, `sum` unless given) in a row's redop
/// column, rather than `none`.
fn prints_reduction_op(op: Op) -> bool {
    matches!(op, Op::AllReduce | Op::ReduceScatter | Op::PingPong)
}

/// Whether `date time` is `%Y-%m-%d %H:%M:%S`, as nccl-tests' `-S 1` prints after a row.
fn is_timestamp(date: &str, time: &str) -> bool {
    chrono::NaiveDateTime::parse_from_str(&format!("{date} {time}"), "%Y-%m-%d %H:%M:%S").is_ok()
}

/// `time algbw busbw #wrong`: µs, GB/s, GB/s, count (None for `N/A`).
fn text_timing(w: &[&str], n: usize, which: &str) -> Result<(f64, f64, f64, Option<u64>), Problem> {
    let num = |s: &str, what: &str| match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Ok(x) if x < 0.0 => Err(Problem::at(n, format!("{which} {what} `{s}` is negative"))),
        _ => Err(Problem::at(n, format!("{which} {what} `{s}` is not a number"))),
    };
    let time = num(w[0], "time (µs)")?;
    if time <= 0.0 {
        return Err(Problem::at(n, format!("{which} time `{}` µs is not positive", w[0])));
    }
    if let Some(why) = super::implausible_us(time) {
        return Err(Problem::at(n, format!("{which} time `{}` µs {why}", w[0])));
    }
    let wrong = match w[3] {
        "N/A" => None,
        // A whole number as written is kept exact (2^60 + 1 would be 2^60 as a float).
        s if s.bytes().all(|b| b.is_ascii_digit()) => match s.parse::<u64>() {
            Ok(k) if k <= 1 << 60 => Some(k),
            _ => return Err(Problem::at(n, format!("{which} #wrong `{s}` is more than 2^60: not a count of wrong elements"))),
        },
        s => {
            let x = num(s, "#wrong")?;
            if x > MAX_MAGNITUDE {
                return Err(Problem::at(n, format!("{which} #wrong `{s}` is more than 2^60: not a count of wrong elements")));
            }
            if !is_count(x) {
                return Err(Problem::at(n, format!("{which} #wrong `{s}` is not a whole number of wrong elements")));
            }
            Some(x as u64)
        }
    };
    Ok((time, num(w[1], "algbw (GB/s)")?, num(w[2], "busbw (GB/s)")?, wrong))
}

/// Whether `x` is a count a manifest may hold: a whole number from 0 to 2^60.
fn is_count(x: f64) -> bool {
    x.fract() == 0.0 && (0.0..=MAX_MAGNITUDE).contains(&x)
}
