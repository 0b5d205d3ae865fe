//! Readers for each spec field: scalar-or-list axes, sizes, prompts, requirements.

use super::schema::*;
use super::validate::{describe, unknown_choice, unknown_key, Checker, AXES};
use crate::units::{parse_bytes, parse_seconds};
use serde_yaml::{Mapping, Value};
use std::path::{Path, PathBuf};

/// The top-level mapping of a spec, read field by field.
pub struct Fields<'m> {
    /// The spec's top-level mapping.
    pub map: &'m Mapping,
}

/// A value as a list: a scalar is a list of one; an empty list is a problem.
fn as_list<'v>(c: &mut Checker, key: &str, v: &'v Value) -> Vec<(String, &'v Value)> {
    match v {
        Value::Sequence(items) if items.is_empty() => {
            c.report(key, "empty list; give at least one value or remove the key for the default");
            Vec::new()
        }
        Value::Sequence(items) => items.iter().enumerate().map(|(i, v)| (format!("{key}[{i}]"), v)).collect(),
        other => vec![(key.to_string(), other)],
    }
}

/// The whole numbers a key accepts, `min` to `max` inclusive, kept as a `T` (u32 or u64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds<T> {
    /// The smallest value accepted.
    pub min: T,
    /// The largest value accepted.
    pub max: T,
}

impl<T> Bounds<T> {
    /// The values `min..=max`.
    pub const fn new(min: T, max: T) -> Self {
        Bounds { min, max }
    }
}

/// The most ranks a run may have.
pub const MAX_WORLD: u32 = 65_536;
/// The most sequences in flight (pipeline) or per replica (data); also the cap of an advice's
/// `sequences` (a spec's and `parlab advise --sequences`, checked by `advise::request::Workload::new`).
pub const MAX_SEQUENCES: u32 = 65_536;
/// The most threads per rank (`threads: N`).
pub const MAX_THREADS: u32 = 1_024;
/// The most timed repetitions, warm-ups or timed iterations.
pub const MAX_REPEATS: u32 = 1_000_000;
/// The longest `timeout`: 7 days, in seconds (a run that long is a mistake, not a benchmark).
pub const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;
/// The `timeout` of a spec that names none, in seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;
/// The smallest `membw` buffer: one f32.
pub const MIN_BUFFER_BYTES: u64 = 4;

/// The `membw` buffer when the spec names none: far past any CPU's caches.
pub const DEFAULT_BUFFER_BYTES: u64 = 512 << 20;

/// `world`.
pub const WORLD: Bounds<u32> = Bounds::new(1, MAX_WORLD);
/// `sequences`.
pub const SEQUENCES: Bounds<u32> = Bounds::new(1, MAX_SEQUENCES);
/// `threads: N`.
pub const THREADS: Bounds<u32> = Bounds::new(1, MAX_THREADS);
/// `repetitions` and every `iterations`.
pub const REPEATS: Bounds<u32> = Bounds::new(1, MAX_REPEATS);
/// `launches`: independent launches of a run (the nightly's unit of replication).
pub const LAUNCHES: Bounds<u32> = Bounds::new(1, super::validate::MAX_LAUNCHES);
/// `warmup`.
pub const WARMUP: Bounds<u32> = Bounds::new(0, MAX_REPEATS);
/// `new_tokens` of an advice (1 asks for the prefill alone; the model's positions cap it).
pub const ADVICE_NEW_TOKENS: Bounds<u32> = Bounds::new(1, u32::MAX);
/// `new_tokens` of a decode run (1 is refused with its own reason before these bounds).
pub const NEW_TOKENS: Bounds<u32> = Bounds::new(2, u32::MAX);
/// `overlap` as read (the layout allows at most `layout::MAX_OVERLAP`).
pub const OVERLAP: Bounds<u32> = Bounds::new(0, u32::MAX);
/// A positive count kept in 32 bits (`prompt.length`, dispatch `tokens`, `top_k`, `hidden`, `requires`).
pub const COUNT32: Bounds<u32> = Bounds::new(1, u32::MAX);
/// A prompt token id (the model's vocabulary caps it at expansion).
pub const TOKEN_ID: Bounds<u32> = Bounds::new(0, u32::MAX);
/// A seed (`weights_seed`, `prompt.seed`).
pub const SEED: Bounds<u64> = Bounds::new(0, u64::MAX);
/// `context` of `kind: model`, in tokens.
pub const CONTEXT: Bounds<u64> = Bounds::new(0, u32::MAX as u64);

/// The value of `v` when it is a whole number within `b`; otherwise reports why, with the range.
pub(super) fn uint_value<T>(c: &mut Checker, key: &str, v: &Value, b: Bounds<T>) -> Option<T>
where
    T: Copy + Into<u64> + TryFrom<u64> + std::fmt::Display,
{
    let (min, max) = (b.min.into(), b.max.into());
    let found = v.as_u64();
    let kept = found.filter(|n| (min..=max).contains(n)).and_then(|n| T::try_from(n).ok());
    if kept.is_none() {
        let range = format!("(allowed: {min} to {max})");
        let message = match found {
            Some(n) if n < min => format!("must be at least {min}, found {n} {range}"),
            Some(n) => format!("must be at most {max}, found {n} {range}"),
            None => format!("expected a whole number ≥ {min}, found {} {range}", describe(v)),
        };
        c.report(key, message);
    }
    kept
}

/// True for an interface name (letters, digits, `-_.:`, at most 15) or an IPv4 CIDR network.
fn valid_interface(text: &str) -> bool {
    if let Some((ip, bits)) = text.split_once('/') {
        return ip.parse::<std::net::Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32);
    }
    (1..=15).contains(&text.len()) && text.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.:".contains(ch))
}

/// The longest experiment name accepted.
pub const MAX_NAME_CHARS: usize = 100;

/// `text` quoted with control characters escaped (`"a\nb"`), so a message never prints them raw.
pub fn printable(text: &str) -> String {
    format!("{text:?}")
}

impl<'m> Fields<'m> {
    fn get(&self, key: &str) -> Option<&'m Value> {
        self.map.get(key)
    }

    /// `name`: required, 1 to `MAX_NAME_CHARS` letters, digits, `-`, `_`, `.`.
    pub fn name(&self, c: &mut Checker) -> String {
        match self.get("name") {
            None => {
                c.report("name", "missing; add `name:` (letters, digits, - _ .), unique in the suite");
                String::new()
            }
            Some(Value::String(s)) if s.chars().count() > MAX_NAME_CHARS => {
                c.report(
                    "name",
                    format!(
                        "{} characters is longer than the {MAX_NAME_CHARS} allowed (it names files and report rows)",
                        s.chars().count()
                    ),
                );
                String::new()
            }
            Some(Value::String(s)) if s.is_empty() => {
                c.report("name", "empty; give a name (letters, digits, - _ .), unique in the suite");
                String::new()
            }
            Some(Value::String(s)) if s.chars().all(|ch| ch == '.') => {
                c.report("name", format!("`{s}` is a folder's name, not a name (it names files and report rows): use a letter or digit"));
                String::new()
            }
            Some(Value::String(s)) if !s.is_empty() && s.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)) => s.clone(),
            Some(Value::String(s)) => {
                c.report("name", format!("{} must be letters, digits, - _ . only (it names files and report rows)", printable(s)));
                String::new()
            }
            Some(v) => {
                c.report("name", format!("expected a string, found {}", describe(v)));
                String::new()
            }
        }
    }

    /// A whole number within `b`, or `default` when absent (a value out of range is reported).
    pub fn uint<T>(&self, c: &mut Checker, key: &str, default: T, b: Bounds<T>) -> T
    where
        T: Copy + Into<u64> + TryFrom<u64> + std::fmt::Display,
    {
        match self.get(key) {
            None => default,
            Some(v) => uint_value(c, key, v, b).unwrap_or(default),
        }
    }

    /// An axis of whole numbers within `b` (scalar or list); every value out of range is reported.
    pub fn uint_axis(&self, c: &mut Checker, key: &str, default: Vec<u32>, b: Bounds<u32>) -> Vec<u32> {
        let Some(v) = self.get(key) else { return default };
        as_list(c, key, v).into_iter().filter_map(|(k, v)| uint_value(c, &k, v, b)).collect()
    }

    /// `new_tokens`: an axis of 2 or more (default 25). The first token comes from the prefill,
    /// so one token leaves no decode step to time; 1 is refused with that reason (and kept in the
    /// axis, so the matrix is counted as written; a spec with a problem plans nothing). An
    /// advice times nothing: 1 asks for the prefill alone, as `parlab advise --new-tokens 1` does.
    pub fn new_tokens(&self, c: &mut Checker, kind: Kind) -> Vec<u32> {
        let Some(v) = self.get("new_tokens") else { return vec![25] };
        let mut kept = Vec::new();
        for (k, v) in as_list(c, "new_tokens", v) {
            if kind != Kind::Advise && v.as_u64() == Some(1) {
                c.report(
                    &k,
                    "1 new token is the one the prefill produces, so there is no decode step to time \
                     (a decode run's figures are per step); give 2 or more",
                );
                kept.push(1);
                continue;
            }
            let bounds = if kind == Kind::Advise { ADVICE_NEW_TOKENS } else { NEW_TOKENS };
            if let Some(n) = uint_value(c, &k, v, bounds) {
                kept.push(n);
            }
        }
        kept
    }

    /// An axis of numbers within `±limit` (scalar or list); absent: `[0]`.
    pub fn number_axis(&self, c: &mut Checker, key: &str, limit: f64) -> Vec<f64> {
        let Some(v) = self.get(key) else { return vec![0.0] };
        as_list(c, key, v)
            .into_iter()
            .filter_map(|(k, v)| match v.as_f64() {
                Some(x) if x.is_finite() && x.abs() <= limit => Some(x),
                Some(x) => {
                    c.report(&k, format!("must be between -{limit} and {limit}, found {x}"));
                    None
                }
                None => {
                    c.report(&k, format!("expected a number between -{limit} and {limit}, found {}", describe(v)));
                    None
                }
            })
            .collect()
    }

    /// An axis of named choices.
    pub fn choice_axis<T: Copy>(&self, c: &mut Checker, key: &str, choices: &[(&str, T)], default: T) -> Vec<T> {
        let Some(v) = self.get(key) else { return vec![default] };
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        as_list(c, key, v)
            .into_iter()
            .filter_map(|(k, v)| match v.as_str() {
                Some(s) => match choices.iter().find(|(n, _)| *n == s) {
                    Some((_, t)) => Some(*t),
                    None => {
                        c.report(&k, unknown_choice(s, &names));
                        None
                    }
                },
                None => {
                    c.report(&k, format!("expected one of {}, found {}", names.join(", "), describe(v)));
                    None
                }
            })
            .collect()
    }

    /// `strategy`: an axis; each must make sense for the kind.
    pub fn strategies(&self, c: &mut Checker, kind: Kind, default: Vec<Strategy>) -> Vec<Strategy> {
        if self.get("strategy").is_none() && kind == Kind::Decode {
            c.report("strategy", "missing; a decode experiment names its split: data, tensor, pipeline, expert or context");
            return Vec::new();
        }
        let choices: Vec<(&str, Strategy)> = Strategy::ALL.iter().map(|s| (s.name(), *s)).collect();
        let list = self.choice_axis(c, "strategy", &choices, default[0]);
        let list = if self.get("strategy").is_none() { default } else { list };
        for s in &list {
            if !kind.strategies().contains(s) {
                let ok: Vec<&str> = kind.strategies().iter().map(|s| s.name()).collect();
                c.report("strategy", format!("`{}` makes no sense for kind {}; use {}", s.name(), kind.name(), ok.join(" or ")));
            }
        }
        list
    }

    /// `model`: required for decode and model kinds; names or folders.
    /// A relative folder path is read against the spec's folder (`model::resolve::in_spec`).
    pub fn models(&self, c: &mut Checker, kind: Kind, spec: &Path) -> Vec<String> {
        let Some(v) = self.get("model") else {
            if matches!(kind, Kind::Decode | Kind::Model | Kind::Advise) {
                c.report("model", "missing; name a model under models/ (e.g. gpt2) or a folder holding config.json");
            }
            return Vec::new();
        };
        as_list(c, "model", v)
            .into_iter()
            .filter_map(|(k, v)| match v.as_str() {
                Some(s) if !s.is_empty() => crate::model::resolve::in_spec(s, spec.parent().unwrap_or(Path::new("")))
                    .map_err(|why| c.report(&k, why.to_string()))
                    .ok(),
                _ => {
                    c.report(&k, format!("expected a model name (a folder under models/) or a folder path, found {}", describe(v)));
                    None
                }
            })
            .collect()
    }

    /// `link`: measured links for launched kinds; catalogue links for the cost model.
    pub fn links(&self, c: &mut Checker, kind: Kind) -> LinkAxis {
        use super::link::Link;
        let Some(v) = self.get("link") else {
            if kind == Kind::Model {
                c.report("link", "missing; name links from models/links.yaml (e.g. gloo-loopback, nvswitch)");
                return LinkAxis::Catalogue(Vec::new());
            }
            return LinkAxis::Measured(vec![Link::MpiShm]);
        };
        let valid: Vec<String> = if kind == Kind::Model {
            match crate::costmodel::catalogue::link_names() {
                Ok(names) => names,
                Err(e) => {
                    c.report("link", crate::costmodel::catalogue::unreadable(&e));
                    return LinkAxis::Catalogue(Vec::new());
                }
            }
        } else {
            Link::measured().iter().map(|l| l.name().to_string()).collect()
        };
        let valid_refs: Vec<&str> = valid.iter().map(String::as_str).collect();
        let names: Vec<String> = as_list(c, "link", v)
            .into_iter()
            .filter_map(|(k, v)| match v.as_str() {
                Some(s) if valid_refs.contains(&s) => Some(s.to_string()),
                Some(s) => {
                    let hint = if kind != Kind::Model && !valid.is_empty() {
                        " (links of models/links.yaml are for kind: model; runs measure over mpi-shm, mpi-tcp, mpi-auto or an NCCL link)"
                    } else {
                        ""
                    };
                    c.report(&k, format!("{}{hint}", unknown_choice(s, &valid_refs)));
                    None
                }
                None => {
                    c.report(&k, format!("expected a link name, found {}", describe(v)));
                    None
                }
            })
            .collect();
        if kind == Kind::Model {
            LinkAxis::Catalogue(names)
        } else {
            LinkAxis::Measured(names.iter().filter_map(|n| Link::measured_named(n)).collect())
        }
    }

    /// `threads`: per rank, a number, `auto` (cores / ranks) or `all`.
    pub fn threads(&self, c: &mut Checker) -> Vec<Threads> {
        let Some(v) = self.get("threads") else { return vec![Threads::Auto] };
        as_list(c, "threads", v)
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) if s == "auto" => Some(Threads::Auto),
                Value::String(s) if s == "all" => Some(Threads::All),
                Value::Number(_) => uint_value(c, &k, v, THREADS).map(Threads::Count),
                other => {
                    c.report(
                        &k,
                        format!("expected a number ≥ 1, `auto` or `all`, found {} (allowed: 1 to {MAX_THREADS})", describe(other)),
                    );
                    None
                }
            })
            .collect()
    }

    /// `dtype`: an axis of float32, float16, bfloat16 (a decode point in half precision needs
    /// `device: cuda`; checked per point in `expand`).
    pub fn dtypes(&self, c: &mut Checker, kind: Kind) -> Vec<Dtype> {
        let default = if matches!(kind, Kind::Model | Kind::Advise) { Dtype::Float16 } else { Dtype::Float32 };
        let choices = [("float32", Dtype::Float32), ("float16", Dtype::Float16), ("bfloat16", Dtype::Bfloat16)];
        self.choice_axis(c, "dtype", &choices, default)
    }

    /// A byte size (number or `512MiB`).
    pub fn bytes(&self, c: &mut Checker, key: &str, default: u64) -> u64 {
        match self.get(key) {
            None => default,
            Some(v) => bytes_value(c, key, v).unwrap_or(default),
        }
    }

    /// `timeout`: seconds or a duration (`90s`, `5m`), more than 0 and at most `MAX_TIMEOUT_S`;
    /// default `DEFAULT_TIMEOUT_S`.
    pub fn timeout(&self, c: &mut Checker) -> f64 {
        let Some(v) = self.get("timeout") else { return DEFAULT_TIMEOUT_S };
        let seconds = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => parse_seconds(s),
            _ => None,
        };
        let limit = format!("at most {MAX_TIMEOUT_S} s (7 days)");
        match seconds {
            Some(s) if s > 0.0 && s <= MAX_TIMEOUT_S => return s,
            Some(s) if s > MAX_TIMEOUT_S => c.report("timeout", format!("must be {limit}, found {}", describe(v))),
            _ => c.report(
                "timeout",
                format!("expected seconds > 0 or a duration like 90s or 5m, found {} (allowed: more than 0, {limit})", describe(v)),
            ),
        }
        DEFAULT_TIMEOUT_S
    }

    /// `buffer` (membw): an axis of byte sizes, each a whole number of f32 values (4 bytes or
    /// more, a multiple of 4), default 512 MiB.
    pub fn buffers(&self, c: &mut Checker) -> Vec<u64> {
        let Some(v) = self.get("buffer") else { return vec![DEFAULT_BUFFER_BYTES] };
        as_list(c, "buffer", v).into_iter().filter_map(|(k, v)| buffer_value(c, &k, v)).collect()
    }

    /// `requires`: a mapping of gpus, nccl, host_device_link, cores.
    pub fn requires(&self, c: &mut Checker) -> Requires {
        let mut req = Requires::default();
        let Some(v) = self.get("requires") else { return req };
        let Value::Mapping(m) = v else {
            c.report("requires", format!("expected a mapping like {{gpus: 2, nccl: true}}, found {}", describe(v)));
            return req;
        };
        const KEYS: &[&str] = &["gpus", "nccl", "host_device_link", "cores"];
        for (k, v) in m {
            let key = k.as_str().unwrap_or("?");
            let path = format!("requires.{key}");
            match key {
                "gpus" => req.gpus = uint_value(c, &path, v, COUNT32),
                "cores" => req.cores = uint_value(c, &path, v, COUNT32),
                "nccl" | "host_device_link" => match v.as_bool() {
                    Some(b) if key == "nccl" => req.nccl = b,
                    Some(b) => req.host_device_link = b,
                    None => c.report(&path, format!("expected true or false, found {}", describe(v))),
                },
                _ => c.report(&path, unknown_key(key, KEYS)),
            }
        }
        req
    }

    /// `launcher`: mpirun (default) or srun.
    pub fn launcher(&self, c: &mut Checker) -> Launcher {
        let choices = [("mpirun", Launcher::Mpirun), ("srun", Launcher::Srun)];
        match self.get("launcher") {
            None => Launcher::Mpirun,
            Some(Value::Sequence(_)) => {
                c.report("launcher", "expected one launcher, mpirun or srun, not a list");
                Launcher::Mpirun
            }
            Some(_) => self.choice_axis(c, "launcher", &choices, Launcher::Mpirun).first().copied().unwrap_or_default(),
        }
    }

    /// `hostfile`: an existing file, relative to the spec's folder or absolute; mpirun's only
    /// (srun takes its hosts from the Slurm allocation, so one given with it is refused).
    pub fn hostfile(&self, c: &mut Checker, spec: &Path, launcher: Launcher) -> Option<PathBuf> {
        let v = self.get("hostfile")?;
        let Some(s) = v.as_str() else {
            c.report("hostfile", format!("expected a path, found {}", describe(v)));
            return None;
        };
        if launcher == Launcher::Srun {
            c.report(
                "hostfile",
                "`launcher: srun` takes its hosts from the Slurm allocation and never reads a hostfile; remove `hostfile:` (or use `launcher: mpirun`)",
            );
            return None;
        }
        if s.is_empty() {
            c.report("hostfile", "empty; give the path of an mpirun hostfile (relative to the spec's folder), or remove the key");
            return None;
        }
        let path = spec.parent().unwrap_or(Path::new(".")).join(s);
        if !path.exists() {
            c.report("hostfile", format!("{} does not exist", path.display()));
        } else if let Some(problem) = hostfile_problem(&path) {
            c.report("hostfile", problem);
        }
        Some(path)
    }

    /// `interface`: an interface name (`eth0`) or an IPv4 network (`10.1.0.0/16`) for TCP between ranks.
    pub fn interface(&self, c: &mut Checker) -> Option<String> {
        let v = self.get("interface")?;
        let text = v.as_str().unwrap_or("");
        if valid_interface(text) {
            return Some(text.to_string());
        }
        c.report(
            "interface",
            format!("expected an interface name (e.g. eth0) or an IPv4 network (e.g. 10.1.0.0/16), found {}", describe(v)),
        );
        None
    }

    /// `exclude`: a list of mappings from axis names to values (scalar or list).
    pub fn exclude(&self, c: &mut Checker) -> Vec<ExcludeRule> {
        let Some(v) = self.get("exclude") else { return Vec::new() };
        let Value::Sequence(rules) = v else {
            c.report("exclude", format!("expected a list of mappings like - {{world: 1, head: replicated}}, found {}", describe(v)));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let key = format!("exclude[{i}]");
            let Value::Mapping(m) = rule else {
                c.report(&key, format!("expected a mapping of axis values, found {}", describe(rule)));
                continue;
            };
            let mut rule = ExcludeRule::default();
            for (k, v) in m {
                let name = k.as_str().unwrap_or("?");
                let Some(axis) = Axis::from_name(name) else {
                    c.report(&format!("{key}.{name}"), format!("{} (exclude rules match axes)", unknown_key(name, AXES)));
                    continue;
                };
                match self.get(name) {
                    None => c.report(&format!("{key}.{name}"), format!("`{name}` is not set in this spec, so this rule can never match")),
                    Some(declared) => {
                        let (on_axis, values) = (axis_values(axis, declared), axis_values(axis, v));
                        if let Some(odd) = values.iter().find(|x| !on_axis.contains(x)) {
                            c.report(
                                &format!("{key}.{name}"),
                                format!(
                                    "`{odd}` is not among this spec's {name} values ({}), so the rule never matches it",
                                    on_axis.join(", ")
                                ),
                            );
                        }
                        rule.axes.push((axis, values));
                    }
                }
            }
            out.push(rule);
        }
        out
    }

    /// The `collectives` kind's `ops`, `sizes` and `iterations`.
    pub fn collective_params(&self, c: &mut Checker) -> CollectiveParams {
        let choices: Vec<(&str, Op)> = Op::ALL.iter().map(|o| (o.name(), *o)).collect();
        let mut ops = match self.get("ops") {
            None => MPI_OPS.to_vec(),
            Some(_) => self.choice_axis(c, "ops", &choices, Op::AllReduce),
        };
        // One order and no repeats, as for sizes: a list's order does not change what is
        // measured, so it does not change the run's identity.
        ops.sort_unstable();
        ops.dedup();
        let sizes = self.sizes(c);
        CollectiveParams { ops, sizes, iterations: self.uint(c, "iterations", 20, REPEATS) }
    }

    /// `sizes`: a list of byte sizes, or a sweep `{from, to, factor}`; default 4 B to 16 MiB by 4.
    pub fn sizes(&self, c: &mut Checker) -> Vec<u64> {
        let mut sizes = match self.get("sizes") {
            None => sweep(4, 16 << 20, 4),
            Some(Value::Mapping(m)) => self.sweep(c, m),
            Some(v) => as_list(c, "sizes", v).into_iter().filter_map(|(k, v)| bytes_value(c, &k, v)).collect(),
        };
        if sizes.contains(&0) {
            c.report("sizes", "a message size of 0 bytes measures nothing; start at 4 bytes or more");
        }
        sizes.sort_unstable();
        sizes.dedup();
        let partial: Vec<String> = sizes.iter().filter(|s| **s > 0 && !s.is_multiple_of(4)).map(u64::to_string).collect();
        if !partial.is_empty() {
            c.report(
                "sizes",
                format!(
                    "{} bytes: not a whole number of the 4-byte f32 values collectives move (each would be measured as another size, two sizes perhaps as one); give multiples of 4",
                    partial.join(", ")
                ),
            );
        }
        sizes
    }

    fn sweep(&self, c: &mut Checker, m: &Mapping) -> Vec<u64> {
        for k in m.keys().filter_map(Value::as_str) {
            if !["from", "to", "factor"].contains(&k) {
                c.report(&format!("sizes.{k}"), unknown_key(k, &["from", "to", "factor"]));
            }
        }
        let read = |c: &mut Checker, k: &str| m.get(k).and_then(|v| bytes_value(c, &format!("sizes.{k}"), v));
        let (from, to) = (read(c, "from"), read(c, "to"));
        let factor = m.get("factor").map_or(Some(2), |v| uint_value(c, "sizes.factor", v, Bounds::new(2, u64::MAX)));
        match (from, to, factor) {
            (Some(f), Some(t), Some(x)) if f >= 1 && f <= t => sweep(f, t, x),
            (Some(f), Some(t), Some(_)) => {
                c.report("sizes", format!("sweep from {f} to {t} bytes is empty; `from` must be ≥ 1 and ≤ `to`"));
                Vec::new()
            }
            _ => {
                if !m.contains_key("from") || !m.contains_key("to") {
                    c.report("sizes", "a sweep needs `from` and `to` (and optionally `factor`, default 2)");
                }
                Vec::new()
            }
        }
    }

    /// The `decode` kind's parameters: its prompt, and where each token id stands in the spec.
    pub fn decode_params(&self, c: &mut Checker) -> DecodeParams {
        let (prompt, token_places) = self.prompt(c);
        DecodeParams { prompt, token_places }
    }

    /// `prompt`: `{tokens: [ids]}` or `{length: N, seed: S}`; default 32 seeded tokens. With
    /// it, the place in the spec's list of each id kept (a refused id is left out).
    fn prompt(&self, c: &mut Checker) -> (Prompt, Vec<usize>) {
        let default = (Prompt::Seeded { length: 32, seed: 0 }, Vec::new());
        let Some(v) = self.get("prompt") else { return default };
        let Value::Mapping(m) = v else {
            c.report("prompt", format!("expected {{tokens: [ids]}} or {{length: N, seed: S}}, found {}", describe(v)));
            return default;
        };
        for k in m.keys().filter_map(Value::as_str) {
            if !["tokens", "length", "seed"].contains(&k) {
                c.report(&format!("prompt.{k}"), unknown_key(k, &["tokens", "length", "seed"]));
            }
        }
        match (m.get("tokens"), m.get("length")) {
            (Some(_), Some(_)) => {
                c.report("prompt", "give either `tokens` or `length` (with `seed`), not both");
                default
            }
            (Some(Value::Sequence(ids)), None) if !ids.is_empty() => {
                let kept: Vec<(usize, u32)> = ids
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| Some((i, uint_value(c, &format!("prompt.tokens[{i}]"), v, TOKEN_ID)?)))
                    .collect();
                (Prompt::Tokens(kept.iter().map(|(_, id)| *id).collect()), kept.iter().map(|(i, _)| *i).collect())
            }
            (Some(v), None) => {
                c.report("prompt.tokens", format!("expected a non-empty list of token ids, found {}", describe(v)));
                default
            }
            (None, Some(len)) => {
                let length = uint_value(c, "prompt.length", len, COUNT32).unwrap_or(32);
                let seed = m.get("seed").and_then(|v| uint_value(c, "prompt.seed", v, SEED)).unwrap_or(0);
                (Prompt::Seeded { length, seed }, Vec::new())
            }
            (None, None) => {
                c.report("prompt", "needs `tokens: [ids]` or `length: N` (with an optional `seed`)");
                default
            }
        }
    }

    /// The `dispatch` kind's parameters.
    pub fn dispatch_params(&self, c: &mut Checker) -> DispatchParams {
        let tokens = self.uint_axis(c, "tokens", vec![1, 8, 64, 512], COUNT32);
        let params = DispatchParams {
            tokens,
            top_k: self.uint(c, "top_k", 2, COUNT32),
            hidden: self.uint(c, "hidden", 768, COUNT32),
            iterations: self.uint(c, "iterations", 20, REPEATS),
        };
        if params.largest_elements() > DispatchParams::MAX_ELEMENTS {
            c.report(
                "tokens",
                format!(
                    "tokens × top_k × hidden is {} values a rank sends in one all-to-all, past MPI's count of {} (a C int); use fewer tokens, a smaller top_k or hidden",
                    params.largest_elements(),
                    DispatchParams::MAX_ELEMENTS
                ),
            );
        }
        params
    }

    /// The `model` kind's parameters.
    pub fn model_params(&self, c: &mut Checker) -> ModelParams {
        let devices = match self.get("devices") {
            None => {
                c.report("devices", "missing; name devices from models/devices.yaml");
                Vec::new()
            }
            Some(v) => match crate::costmodel::catalogue::device_names() {
                Err(e) => {
                    c.report("devices", crate::costmodel::catalogue::unreadable(&e));
                    Vec::new()
                }
                Ok(valid) => {
                    let refs: Vec<&str> = valid.iter().map(String::as_str).collect();
                    as_list(c, "devices", v)
                        .into_iter()
                        .filter_map(|(k, v)| match v.as_str() {
                            Some(s) if refs.contains(&s) => Some(s.to_string()),
                            Some(s) => {
                                c.report(&k, unknown_choice(s, &refs));
                                None
                            }
                            None => {
                                c.report(&k, format!("expected a device name, found {}", describe(v)));
                                None
                            }
                        })
                        .collect()
                }
            },
        };
        ModelParams { devices, context: self.uint(c, "context", 4096, CONTEXT), imbalance: self.imbalance(c) }
    }

    /// `imbalance` (kind model): a number from 1 (even routing) to 64, default 1.
    fn imbalance(&self, c: &mut Checker) -> f64 {
        match self.get("imbalance") {
            None => 1.0,
            Some(v) => match v.as_f64() {
                Some(x) if (1.0..=64.0).contains(&x) => x,
                _ => {
                    c.report("imbalance", format!("expected a number from 1 (even routing) to 64, found {}", describe(v)));
                    1.0
                }
            },
        }
    }
}

fn bytes_value(c: &mut Checker, key: &str, v: &Value) -> Option<u64> {
    let parsed = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => parse_bytes(s),
        _ => None,
    };
    if parsed.is_none() {
        c.report(key, format!("expected a byte size like 4096, 64KiB or 16MiB, found {}", describe(v)));
    }
    parsed
}

/// Why the lines of a hostfile could not give mpirun its hosts: none listed (`No nodes are
/// available` at launch), or a `slots=`, `max_slots=` or `max-slots=` whose value is not a whole
/// number (Open MPI refuses the file at launch, and the run would fail as unreached hosts; a
/// value written apart from its `=`, which Open MPI also reads, is left to it).
fn hostfile_lines_problem(text: &str) -> Option<String> {
    let mut hosts = 0;
    for (line, words) in crate::launch::hosts::hostfile_lines(text) {
        hosts += 1;
        for word in &words[1..] {
            let Some((key, value)) = word.split_once('=') else { continue };
            if ["slots", "max_slots", "max-slots"].contains(&key) && !value.is_empty() && value.parse::<u32>().is_err() {
                return Some(format!("line {line}: `{word}`: {key} must be a whole number"));
            }
        }
    }
    (hosts == 0).then(|| "lists no host (a line per host: `node1 slots=4`); mpirun would find no node to start ranks on".to_string())
}

/// One membw buffer size: a byte size holding a whole number of f32 values, at least one.
fn buffer_value(c: &mut Checker, key: &str, v: &Value) -> Option<u64> {
    let bytes = bytes_value(c, key, v)?;
    if bytes < MIN_BUFFER_BYTES {
        c.report(
            key,
            format!("a buffer of {bytes} bytes holds no f32 value, so membw would stream nothing; give {MIN_BUFFER_BYTES} bytes or more"),
        );
        return None;
    }
    if !bytes.is_multiple_of(4) {
        c.report(key, format!("{bytes} bytes is not a whole number of 4-byte f32 values, which membw streams; give a multiple of 4"));
        return None;
    }
    Some(bytes)
}

/// Sizes from `from` to `to` inclusive, multiplying by `factor`.
pub fn sweep(from: u64, to: u64, factor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = from;
    while s <= to {
        out.push(s);
        match s.checked_mul(factor) {
            Some(n) => s = n,
            None => break,
        }
    }
    out
}

/// The canonical texts of a value of `axis` (as the spec declares it, or as an `exclude:` rule or
/// a claim names it): the value itself, or each item of a list (a buffer size as its bytes, so
/// `16MiB` matches 16777216).
pub(super) fn axis_values(axis: Axis, v: &Value) -> Vec<String> {
    let items = match v {
        Value::Sequence(items) => items.iter().collect(),
        other => vec![other],
    };
    // The text a point gives the axis (`Point::axis_value`): a buffer in bytes however written,
    // a routing skew as the number prints (1.0 is `1`).
    let text = |v: &Value| {
        let raw = super::expand::axis_text(v);
        match axis {
            Axis::Buffer => crate::units::parse_bytes(&raw).map_or(raw, |b| b.to_string()),
            Axis::RoutingSkew => raw.parse::<f64>().map_or(raw, |x| x.to_string()),
            _ => raw,
        }
    };
    items.into_iter().map(text).collect()
}

/// Why mpirun could not read the hostfile at `path` as it is, if it could not: it is not a
/// regular text file in UTF-8 (UTF-16 fails inside Open MPI's parser), starts with a UTF-8
/// byte-order mark (which the parser does not skip), holds NUL bytes (UTF-16 without a mark),
/// lists no host, or gives a slot count that is not a whole number.
fn hostfile_problem(path: &Path) -> Option<String> {
    let text = match crate::files::read_text(path, crate::files::TEXT_LIMIT) {
        Ok(text) => text,
        Err(e) => return Some(e.to_string()),
    };
    let bytes = std::fs::read(path).ok()?;
    if bytes.starts_with(b"\xef\xbb\xbf") {
        return Some(format!(
            "{} starts with a UTF-8 byte-order mark, which Open MPI's hostfile parser does not skip; save it without one",
            path.display()
        ));
    }
    if bytes.contains(&0) {
        return Some(format!("{} holds NUL bytes (UTF-16 without a byte-order mark?); convert it to UTF-8 text", path.display()));
    }
    hostfile_lines_problem(&text).map(|problem| format!("{}: {problem}", path.display()))
}
