//! `kind: advise`: one `parlab advise` question in a spec, answered in the register's
//! MODELLED section, and the answer a source gives (`expect:`) checked as a finding.
//!
//! ```yaml
//! name: advice-chapter-1-4
//! kind: advise
//! model: llama-3.1-8b
//! machine:
//!   device: a100-80gb
//!   devices_per_node: 4
//!   domains: [2:nvlink-nv12, 4:pcie-sys]
//! prompt_tokens: 6144
//! new_tokens: 300
//! objective: ttft
//! expect:
//!   leader: TP=2 x DP=2
//!   rejected: [TP=4 x DP=1]
//! ```

use super::fields::{Bounds, COUNT32};
use super::schema::{AdviseParams, AskedAdvice, Dtype, Expectation, Experiment, Objective};
use super::validate::{describe, refuse_unused_keys, unknown_choice, unknown_key, Checker};
use crate::advise::request::Request;
use serde_yaml::{Mapping, Value};

/// Keys of `machine:`.
const MACHINE_KEYS: &[&str] = &["device", "nodes", "devices_per_node", "domains"];

/// Keys of `expect:`.
const EXPECT_KEYS: &[&str] = &["leader", "rejected"];

/// Keys every kind may have that an advice uses; the others (`strategy`, `world`, `link`,
/// `threads`, `repetitions`, …) it has no use for: it enumerates its own layouts and launches nothing.
const COMMON_FOR_ADVICE: &[&str] = &["name", "kind", "description", "timeout"];

/// Prompt tokens of one request, as read.
const PROMPT_TOKENS: Bounds<u64> = Bounds::new(1, u32::MAX as u64);

/// Reads `kind: advise`'s keys of `map`; `e` holds the axes already read (one model, one
/// `new_tokens`, `sequences` and `dtype` each). Also whether the question itself (everything
/// but `expect:`) was read without a problem: then expansion still checks the layouts `expect:`
/// names against the machine, so `validate` says every problem at once.
pub fn params(c: &mut Checker, map: &Mapping, e: &Experiment) -> (AskedAdvice, bool) {
    let before = c.problems.len();
    refuse_unused_keys(c, map, COMMON_FOR_ADVICE, "kind: advise (it ranks every layout of the machine and launches nothing)");
    if e.models.len() > 1 {
        too_many(c, "model", e.models.len());
    }
    if !map.contains_key("new_tokens") {
        c.report("new_tokens", "missing; give the tokens of one answer");
    }
    let machine = mapping(c, map, "machine", MACHINE_KEYS, true);
    let mut params = AdviseParams {
        device: device(c, machine),
        nodes: count(c, machine, "machine.nodes"),
        devices_per_node: count(c, machine, "machine.devices_per_node"),
        domains: domains(c, machine),
        prompt_tokens: prompt_tokens(c, map),
        new_tokens: one(c, "new_tokens", &e.new_tokens, 1).into(),
        sequences: one(c, "sequences", &e.sequences, 1),
        objective: objective(c, map),
        dtype: one(c, "dtype", &e.dtypes, Dtype::Float16),
        expect: Expectation::default(),
    };
    let question_whole = c.problems.len() == before;
    let expect = mapping(c, map, "expect", EXPECT_KEYS, false);
    let (expect, rejected_places) = expectation(c, expect);
    params.expect = expect;
    (AskedAdvice { params, rejected_places }, question_whole)
}

/// The one value of an axis (`default` when it has none); more than one is a problem (an
/// advice is one question).
fn one<T: Copy>(c: &mut Checker, key: &str, values: &[T], default: T) -> T {
    if values.len() > 1 {
        too_many(c, key, values.len());
    }
    values.first().copied().unwrap_or(default)
}

/// Reports an axis of `values` (more than one) under `key`.
fn too_many(c: &mut Checker, key: &str, values: usize) {
    c.report(key, format!("kind: advise asks one question: one {key}, found {values} (write one experiment per question)"));
}

/// The mapping under `key` (empty when absent), its keys checked against `valid`.
fn mapping<'m>(c: &mut Checker, map: &'m Mapping, key: &str, valid: &[&str], required: bool) -> Option<&'m Mapping> {
    let m = match map.get(key) {
        None if required => {
            c.report(key, format!("missing; give {}", valid.join(", ")));
            return None;
        }
        None => return None,
        Some(Value::Mapping(m)) => m,
        Some(v) => {
            c.report(key, format!("expected a mapping of {}, found {}", valid.join(", "), describe(v)));
            return None;
        }
    };
    for k in m.keys() {
        match k.as_str() {
            Some(name) if valid.contains(&name) => {}
            Some(name) => c.report(&format!("{key}.{name}"), unknown_key(name, valid)),
            None => c.report(key, format!("keys are names, found {}", describe(k))),
        }
    }
    Some(m)
}

fn device(c: &mut Checker, machine: Option<&Mapping>) -> String {
    let known = match (machine.and_then(|m| m.get("device")), crate::costmodel::catalogue::device_names()) {
        (_, Ok(known)) => known,
        (None, Err(_)) => Vec::new(),
        (Some(_), Err(e)) => {
            c.report("machine.device", crate::costmodel::catalogue::unreadable(&e));
            return String::new();
        }
    };
    let refs: Vec<&str> = known.iter().map(String::as_str).collect();
    match machine.map(|m| m.get("device")) {
        None => String::new(),
        Some(None) => {
            c.report("machine", format!("missing `device:`; name one of models/devices.yaml ({})", refs.join(", ")));
            String::new()
        }
        Some(Some(Value::String(s))) if refs.contains(&s.as_str()) => s.clone(),
        Some(Some(Value::String(s))) => {
            c.report("machine.device", unknown_choice(s, &refs));
            String::new()
        }
        Some(Some(v)) => {
            c.report("machine.device", format!("expected a device of models/devices.yaml, found {}", describe(v)));
            String::new()
        }
    }
}

/// `machine.nodes` or `machine.devices_per_node`: 1 when absent.
fn count(c: &mut Checker, machine: Option<&Mapping>, path: &str) -> u32 {
    let key = path.rsplit('.').next().unwrap_or(path);
    match machine.and_then(|m| m.get(key)) {
        None => 1,
        Some(v) => super::fields::uint_value(c, path, v, COUNT32).unwrap_or(1),
    }
}

/// `machine.domains`: `SIZE:LINK` strings, each link in the catalogue.
fn domains(c: &mut Checker, machine: Option<&Mapping>) -> Vec<String> {
    let items = match machine.and_then(|m| m.get("domains")) {
        None => return Vec::new(),
        Some(Value::Sequence(items)) => items,
        Some(v) => {
            c.report("machine.domains", format!("expected a list of SIZE:LINK (e.g. [2:nvlink-nv12, 4:pcie-sys]), found {}", describe(v)));
            return Vec::new();
        }
    };
    let links = match crate::costmodel::catalogue::link_names() {
        Ok(links) => links,
        Err(e) => {
            c.report("machine.domains", crate::costmodel::catalogue::unreadable(&e));
            return Vec::new();
        }
    };
    let refs: Vec<&str> = links.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for (i, v) in items.iter().enumerate() {
        let key = format!("machine.domains[{i}]");
        let Some((size, link)) = v.as_str().and_then(|s| s.split_once(':')) else {
            c.report(&key, format!("expected SIZE:LINK (e.g. 2:nvlink-nv12), found {}", describe(v)));
            continue;
        };
        match size.trim().parse::<u32>() {
            Err(_) => c.report(&key, format!("`{size}` is not a device count")),
            Ok(0) => c.report(&key, "`0` is not a device count (give 1 or more)"),
            Ok(_) if !refs.contains(&link.trim()) => c.report(&key, unknown_choice(link.trim(), &refs)),
            Ok(n) => out.push(format!("{n}:{}", link.trim())),
        }
    }
    out
}

fn prompt_tokens(c: &mut Checker, map: &Mapping) -> u64 {
    match map.get("prompt_tokens") {
        None => {
            c.report("prompt_tokens", "missing; give the prompt tokens of one request");
            1
        }
        Some(v) => super::fields::uint_value(c, "prompt_tokens", v, PROMPT_TOKENS).unwrap_or(1),
    }
}

fn objective(c: &mut Checker, map: &Mapping) -> Objective {
    match map.get("objective") {
        None => Objective::Latency,
        Some(Value::String(s)) => Objective::from_name(s).unwrap_or_else(|| {
            c.report("objective", unknown_choice(s, &Objective::names()));
            Objective::Latency
        }),
        Some(v) => {
            c.report("objective", format!("expected one of {}, found {}", Objective::names().join(", "), describe(v)));
            Objective::Latency
        }
    }
}

/// `expect:` read, with the place in the spec's `expect.rejected` list of each layout kept (a
/// malformed item is reported and left out).
fn expectation(c: &mut Checker, expect: Option<&Mapping>) -> (Expectation, Vec<usize>) {
    let Some(m) = expect else { return (Expectation::default(), Vec::new()) };
    let label = |c: &mut Checker, key: &str, v: &Value| match v.as_str() {
        Some(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => {
            c.report(key, format!("expected a layout as parlab advise labels it (e.g. TP=2 x DP=2), found {}", describe(v)));
            None
        }
    };
    let before = c.problems.len();
    let leader = m.get("leader").and_then(|v| label(c, "expect.leader", v));
    // Each layout with its place in the spec's list (a lone label is the list's first).
    let rejected: Vec<(usize, String)> = match m.get("rejected") {
        None => Vec::new(),
        Some(Value::Sequence(items)) => {
            items.iter().enumerate().filter_map(|(i, v)| Some((i, label(c, &format!("expect.rejected[{i}]"), v)?))).collect()
        }
        Some(v) => label(c, "expect.rejected", v).map(|l| (0, l)).into_iter().collect(),
    };
    if let Some((i, r)) = leader.as_ref().and_then(|l| rejected.iter().find(|(_, r)| r == l)) {
        c.report(
            &format!("expect.rejected[{i}]"),
            format!("`{r}` is also expect.leader; one layout cannot be both run first and never run"),
        );
    }
    for (n, (i, r)) in rejected.iter().enumerate() {
        if let Some((first, _)) = rejected[..n].iter().find(|(_, earlier)| earlier == r) {
            c.report(&format!("expect.rejected[{i}]"), format!("`{r}` is listed twice (also expect.rejected[{first}])"));
        }
    }
    // A key given but malformed has been reported; "states nothing" is for an empty `expect:`.
    if leader.is_none() && rejected.is_empty() && c.problems.len() == before {
        c.report("expect", "states nothing; give `leader:` and/or `rejected:`, or remove it");
    }
    let (places, rejected) = rejected.into_iter().unzip();
    (Expectation { leader, rejected }, places)
}

/// Reports each layout the question's `expect:` names that the machine of `request` does not
/// have (labels as `parlab advise` prints them): such an expectation could only fail, whatever
/// the arithmetic. Each is named at its own place in the spec's list.
pub fn expected_layouts(c: &mut Checker, asked: &AskedAdvice, request: &Request) {
    let devices = request.machine.devices();
    let labels: Vec<String> = crate::advise::layouts::enumerate(devices, &request.model.shape).iter().map(|l| l.label()).collect();
    let expect = &asked.params.expect;
    let named = expect
        .leader
        .iter()
        .map(|l| ("expect.leader".to_string(), l))
        .chain(expect.rejected.iter().enumerate().map(|(i, l)| (asked.rejected_key(i), l)));
    for (key, label) in named.filter(|(_, l)| !labels.contains(l)) {
        c.report(&key, format!("no layout `{label}` on this machine of {devices} devices (its layouts: {})", some_of(&labels)));
    }
}

/// The first labels of `labels`, joined (an ellipsis where more were left out).
fn some_of(labels: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut text = labels.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if labels.len() > SHOWN {
        text.push_str(", …");
    }
    text
}
