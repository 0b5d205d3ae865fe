//! `parlab plan`: the runs in order, with identities and layouts.

use crate::spec::{load_suite_limited, RunPlan};
use serde_json::json;
use std::path::PathBuf;

/// Prints the expanded runs as a table or a JSON array.
pub fn run(paths: &[PathBuf], as_json: bool, max_runs: usize) -> super::Result<i32> {
    let runs = load_suite_limited(paths, max_runs)?;
    if as_json {
        let items: Vec<_> = runs.iter().map(plan_json).collect();
        super::output::print_json(&items)?;
    } else {
        // Every column as wide as its widest entry (the experiment at least 28), so rows line up
        // at any count and with any link name.
        let rows: Vec<[String; 4]> = runs.iter().enumerate().map(|(i, r)| row(i, r)).collect();
        let width = |k: usize, least: usize| rows.iter().map(|c| c[k].chars().count()).max().unwrap_or(0).max(least);
        let (n, w, s, l) = (width(0, 4), width(1, 28), width(2, 10), width(3, 8));
        let mut text = format!(
            "{:<n$} {:<w$} {:<s$} {:>5} {:<l$} {:<12} {:<12} details\n",
            "#", "experiment", "strategy", "world", "link", "run_id", "answer_id"
        );
        for (r, [index, name, strategy, link]) in runs.iter().zip(&rows) {
            let world = if r.kind().launches_ranks() { r.layout.world.to_string() } else { "–".to_string() };
            text.push_str(&format!(
                "{index:<n$} {name:<w$} {strategy:<s$} {world:>5} {link:<l$} {:<12} {:<12} {}\n",
                r.short_id(),
                r.answer_id.short(),
                details(r)
            ));
        }
        super::output::print(&text)?;
    }
    Ok(crate::exitcode::OK)
}

/// A run's position (from 1), `experiment#index`, strategy (a run of arithmetic: its kind) and
/// link, as the plan's columns show them.
fn row(i: usize, r: &RunPlan) -> [String; 4] {
    let name = format!("{}#{}", r.experiment, r.index);
    match r.kind().launches_ranks() {
        true => [(i + 1).to_string(), name, r.layout.strategy.name().to_string(), r.link.to_string()],
        false => [(i + 1).to_string(), name, r.kind().name().to_string(), "–".to_string()],
    }
}

/// The axis values the columns do not show: threads, head placement, zig-zag blocks, decode
/// split, overlap, sequences in flight, new tokens, a membw buffer, and where not the default:
/// dtype, device and step mode.
fn details(r: &RunPlan) -> String {
    if !r.kind().launches_ranks() {
        return "arithmetic: nothing is launched".into();
    }
    let mut parts = vec![format!("threads={}", r.threads_per_rank)];
    parts.extend(r.layout.details().iter().map(crate::spec::plan::LayoutDetail::key_value));
    if let crate::spec::Workload::Decode { new_tokens, dtype, .. } = &r.workload {
        parts.push(format!("new_tokens={new_tokens}"));
        if *dtype != crate::spec::schema::Dtype::Float32 {
            parts.push(format!("dtype={}", dtype.name()));
        }
    }
    if let crate::spec::Workload::Membw(m) = &r.workload {
        parts.push(format!("buffer={}", crate::units::format_bytes(m.buffer_bytes as f64)));
    }
    if r.device != crate::spec::schema::Device::Cpu {
        parts.push(format!("device={}", r.device.name()));
    }
    if r.step != crate::spec::schema::StepMode::Eager {
        parts.push(format!("step={}", r.step.name()));
    }
    parts.join(" ")
}

fn plan_json(r: &RunPlan) -> serde_json::Value {
    json!({
        "experiment": r.experiment,
        "index": r.index,
        "kind": r.kind(),
        "run_id": r.run_id,
        "answer_id": r.answer_id,
        "link": r.link,
        "threads_per_rank": r.threads_per_rank,
        "repetitions": r.repetitions,
        "launches": r.launches,
        "workload": r.workload,
        "layout": r.layout,
        "device": r.device.name(),
        "step": r.step.name(),
        "launch": launch_line(r),
    })
}

/// The launcher line `parlab run` would use for `r` on this machine now (with the paths and
/// environment it would have), and Open MPI's transport selection in words. Model runs launch nothing.
fn launch_line(r: &RunPlan) -> serde_json::Value {
    use crate::launch::command;
    if !r.kind().launches_ranks() {
        return serde_json::Value::Null;
    }
    let out = crate::manifest::Manifest::results_dir(&crate::manifest::manifests_dir(), &r.run_id);
    let machine = command::Machine::current(crate::gates::physical_cores());
    let hostfile = command::planned_hostfile(r).ok().flatten();
    let cmd = command::build(r, hostfile.as_deref(), &out.join("plan.json"), &out, &crate::launch::parlab_exe(), &machine);
    json!({"command": cmd.display(), "transport": cmd.transport})
}
