//! The advice as markdown for people and as JSON (`parlab.advice/1`) for programs. Every
//! figure leaves the other stages as a number; the words and units are made here.

use super::rank::{Constant, Flip, Ranked};
use super::reject::Rejection;
use super::request::Objective;
use super::{Advice, Rejected, SCHEMA};
use crate::costmodel::tables::ARITHMETIC;
use crate::units::{format_bytes, format_gbps, format_seconds, sig3};
use serde_json::{json, Value};

/// What every piece of advice assumes, in words.
pub fn assumptions(advice: &Advice) -> Vec<String> {
    let w = &advice.request.workload;
    let mut out = vec![
        ARITHMETIC.to_string(),
        format!(
            "A decode step is predicted at the answer's mean context ({} tokens: the prompt and half the answer); memory fits are checked at its end ({} tokens) for every sequence a replica holds.",
            w.mean_decode_context(),
            w.final_context()
        ),
        "Every layout uses every device. A tensor group is contiguous, its pipeline stages next, replicas outermost; a ring all-reduce pays the link of the smallest domain holding its whole group (a domain's link joins every device in it, as a switch does) and, where that domain joins nodes, the slower of it and the links inside a node (its ring passes every device of a node over the node's own links); a pipeline hop pays the link between its two stages.".into(),
        "Sequences in flight on one replica are served in turn (no batching), so throughput favours replicas whenever they fit, and a request waits a whole round of its replica's sequences for each token after its first. Tokens per second counts every prompt's prefill and every round of each replica's own share of the sequences (a replica holding one fewer than the busiest rounds faster).".into(),
        "Time to first token is the prefill of one prompt alone (no queueing): per stage the larger of its arithmetic over the device's peak and its weight read over memory bandwidth, plus its collectives.".into(),
        "A tensor group past the model's KV heads (each device holding whole copies of its heads' cache) is refused where a layout that stops its tensor group at the KV heads, the rest as stages or replicas, fits and is predicted no worse (the parallelism chapter: past the KV heads the cache stops falling while the collectives grow); where every such layout is predicted worse, it is ranked.".into(),
        "A tensor group that crosses a slower link is refused while a layout keeping its tensor group inside the faster domain fits (chapter 1.4: never TP across SYS; the parallelism chapter: TP inside a node, PP between nodes).".into(),
    ];
    if let Some(window) = advice.request.model.sliding_window {
        out.push(format!(
            "{} attends over a sliding window of {window} tokens (config.json's `sliding_window`, else its config class's default; Gemma-2 on every other layer), which is not modelled: the KV cache is counted at the whole context on every layer, so past {window} tokens the cache per device and its read per step are overstated.",
            advice.request.model.name
        ));
    }
    if let Some(e) = advice.request.model.shape.experts {
        out.push(even_routing(e));
    }
    let (m, dtype) = (&advice.request.machine, advice.request.workload.dtype);
    match m.device.peak_flops(dtype) {
        Some(_) => out.push(format!("The arithmetic peak is the datasheet's {} peak: a real prefill reaches a fraction of it, so a predicted time to first token is a lower bound.", dtype.name())),
        None => out.push(format!(
            "Device {} has no {} compute figure in models/devices.yaml: a prefill is predicted from memory and communication only, a lower bound (far below a compute-bound prefill's time).",
            m.device.name,
            dtype.name()
        )),
    }
    out
}

/// The assumption behind every expert split's prediction: the router spreads the tokens evenly.
fn even_routing(e: crate::costmodel::shape::Experts) -> String {
    let pair = if e.active >= 2 && e.count >= 4 && e.count.is_multiple_of(2) {
        // Two of the token's experts among `count` split over 2 devices: the second lands on the
        // first's device (count/2 − 1 of the count − 1 others).
        format!(
            " (top-{} of {} experts over 2 devices: a token's first two experts share a device {} in {} times)",
            e.active,
            e.count,
            e.count / 2 - 1,
            e.count - 1
        )
    } else {
        String::new()
    };
    format!(
        "Expert splits assume even routing (imbalance 1): a prefill's busiest device computes the mean share of the pairs, a decode step's streams its even share of a token's experts rounded up to whole experts (at least one); with few tokens in flight a decode step's experts cluster on one device{pair}, so a real step is slower; the register's expert-imbalance finding measures what skew costs."
    )
}

/// Where every constant came from.
pub fn provenance(advice: &Advice) -> Vec<String> {
    let m = &advice.request.machine;
    let mut out = vec![advice.request.model.provenance.clone()];
    out.extend(m.device.provenance_lines());
    let mut seen = Vec::new();
    for d in &m.domains {
        if !seen.contains(&d.link.name) {
            seen.push(d.link.name.clone());
            out.extend(d.link.provenance_lines());
        }
    }
    out
}

fn objective_words(o: Objective) -> &'static str {
    match o {
        Objective::Latency => "the time of one whole request",
        Objective::Ttft => "time to first token",
        Objective::Throughput => "tokens per second",
    }
}

/// One rejection in words.
pub fn rejection_message(r: &Rejection) -> String {
    match r {
        Rejection::HeadsNotDivisible { heads, tensor } => format!("{heads} query heads do not split over {tensor} devices"),
        Rejection::KvHeadsNotDivisible { kv_heads, tensor } => {
            format!("{kv_heads} KV heads neither split over nor replicate evenly onto {tensor} devices")
        }
        Rejection::WidthNotDivisible { intermediate, tensor } => format!("feed-forward width {intermediate} does not split over {tensor} devices"),
        Rejection::KvHeadsDuplicated {
            kv_heads,
            tensor,
            kv_bytes_per_device,
            step_comm_s,
            instead,
            instead_kv_bytes_per_device,
            instead_step_comm_s,
            costlier_by,
        } => format!(
            "TP={tensor} is beyond the {kv_heads} KV heads: each device holds whole copies of its KV heads' cache ({} a device) while a step's collectives grow to {}; {instead} stops its tensor group at TP={kv_heads} ({} of cache a device, {} of collectives) and is predicted {}",
            format_bytes(*kv_bytes_per_device as f64),
            format_seconds(*step_comm_s),
            format_bytes(*instead_kv_bytes_per_device as f64),
            format_seconds(*instead_step_comm_s),
            if *costlier_by > 1.0 { format!("{}x better", sig3(*costlier_by)) } else { "as good".to_string() }
        ),
        Rejection::TooManyStages { layers, pipeline } => format!("{layers} layers do not fill {pipeline} stages"),
        Rejection::ExpertsNotDivisible { experts, expert } => format!("{experts} experts do not split over {expert} devices"),
        Rejection::Misaligned { group, domain } => format!("a group of {group} devices straddles domains of {domain} unevenly"),
        Rejection::DoesNotFit { weights_bytes, kv_bytes, memory_bytes } => format!(
            "does not fit: {} of weights and {} of KV cache per device against {}",
            format_bytes(*weights_bytes as f64),
            format_bytes(*kv_bytes as f64),
            format_bytes(*memory_bytes as f64)
        ),
        Rejection::TensorAcrossSlowBoundary { tensor, link, between_nodes, inside, inside_link, instead, instead_tensor, cost_ratio } => {
            let offered = if *instead_tensor > 1 {
                format!("{instead} fits with its tensor group inside the {inside} devices joined by {inside_link}")
            } else {
                format!("{instead} fits with no tensor group, and makes no all-reduce")
            };
            // Said where the prediction disagrees: the refusal is the chapters' rule, not the model's.
            let against = if *cost_ratio < 1.0 {
                format!(
                    "; the prediction favours it {}x over {instead}: the rule (never TP across a slower link) refuses it, not the prediction, so measure both",
                    sig3(1.0 / cost_ratio)
                )
            } else {
                String::new()
            };
            format!(
                "its tensor group of {tensor} crosses {link}{} and every all-reduce pays it; {offered}{against}",
                if *between_nodes { " between nodes" } else { "" }
            )
        }
    }
}

fn constant_words(c: &Constant) -> String {
    match c {
        Constant::LinkLatency { link } => format!("{link}'s latency"),
        Constant::LinkBandwidth { link } => format!("{link}'s bandwidth"),
        Constant::DeviceBandwidth => "the device's memory bandwidth".into(),
        Constant::DeviceCompute => "the device's arithmetic peak".into(),
    }
}

fn constant_value(c: &Constant, v: f64) -> String {
    match c {
        Constant::LinkLatency { .. } => format_seconds(v),
        Constant::LinkBandwidth { .. } | Constant::DeviceBandwidth => format_gbps(v),
        Constant::DeviceCompute => format!("{} TFLOP/s", sig3(v / 1e12)),
    }
}

/// A flip point in words.
pub fn flip_message(f: &Flip) -> String {
    let verb = if f.at > f.now { "rises above" } else { "falls below" };
    format!(
        "{} catches up with it when {} {verb} {} (now {})",
        f.next,
        constant_words(&f.constant),
        constant_value(&f.constant, f.at),
        constant_value(&f.constant, f.now)
    )
}

fn ranked_json(r: &Ranked, rank: Option<usize>) -> Value {
    json!({
        "rank": rank,
        "layout": r.layout,
        "label": r.label,
        "devices_per_replica": r.layout.devices_per_replica(),
        "predicted": r.predicted,
        "flip_searched": r.flip.is_some(),
        "flip": r.flip.as_ref().and_then(Option::as_ref).map(|f| json!({
            "constant": f.constant, "now": f.now, "at": f.at, "next": f.next, "message": flip_message(f),
        })),
    })
}

fn rejected_json(r: &Rejected) -> Value {
    json!({
        "layout": r.layout,
        "label": r.label,
        "reason": r.reason,
        "message": rejection_message(&r.reason),
        "predicted": r.predicted,
    })
}

/// The advice as `parlab.advice/1` JSON (the shape the README documents).
pub fn to_json(advice: &Advice) -> Value {
    let (req, m) = (&advice.request, &advice.request.machine);
    let (s, w) = (&req.model.shape, &req.workload);
    json!({
        "schema": SCHEMA,
        "model": {
            "name": req.model.name, "params": s.params, "layers": s.layers, "heads": s.heads, "kv_heads": s.kv_heads,
            "experts": s.experts.map(|e| e.count), "weights_bytes": s.stored_bytes(w.dtype.bytes()),
        },
        "workload": {
            "prompt_tokens": w.prompt, "new_tokens": w.new_tokens, "sequences": w.sequences,
            "objective": w.objective, "dtype": w.dtype,
            "mean_decode_context_tokens": w.mean_decode_context(), "final_context_tokens": w.final_context(),
        },
        "machine": {
            "device": m.device.name, "memory_bytes": m.device.memory_bytes, "bandwidth_Bps": m.device.bandwidth_bps(),
            "compute_flops": m.device.peak_flops(req.workload.dtype), "nodes": m.nodes, "devices_per_node": m.devices_per_node,
            "devices": m.devices(),
            "domains": m.domains.iter().enumerate().map(|(i, d)| json!({
                "size": d.size, "link": d.link.name, "latency_s": d.link.link().alpha_s,
                "bandwidth_Bps": d.link.link().beta_bps, "between_nodes": m.between_nodes(i),
            })).collect::<Vec<_>>(),
        },
        "ranked": advice.ranked.iter().enumerate().map(|(i, r)| ranked_json(r, Some(i + 1))).collect::<Vec<_>>(),
        "baseline": advice.baseline.as_ref().map(|b| {
            let rank = advice.ranked.iter().position(|r| r.layout == b.layout).map(|i| i + 1);
            ranked_json(b, rank)
        }),
        "rejected": advice.rejected.iter().map(rejected_json).collect::<Vec<_>>(),
        "assumptions": assumptions(advice),
        "provenance": provenance(advice),
    })
}

/// What would flip a ranked layout, in words (None for one below the top whose flip was not searched).
pub fn flip_words(r: &Ranked) -> Option<String> {
    match &r.flip {
        Some(Some(f)) => Some(flip_message(f)),
        Some(None) => Some("no single constant within a factor of 10^4 of its value".into()),
        None => None,
    }
}

fn ranked_row(i: usize, r: &Ranked) -> String {
    let p = &r.predicted;
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        i + 1,
        r.label,
        format_seconds(p.step_s),
        format_seconds(p.ttft_s),
        format_seconds(p.request_s),
        sig3(p.tokens_per_s),
        sig3(p.tokens_per_s_per_device),
        format_bytes(p.weights_bytes_per_device as f64),
        format_bytes(p.kv_bytes_per_device as f64),
        flip_words(r).unwrap_or_default(),
    )
}

fn header(advice: &Advice) -> String {
    let (req, m) = (&advice.request, &advice.request.machine);
    let w = &req.workload;
    let dev = &m.device;
    let peak = dev.peak_flops(w.dtype).map(|f| format!(", {} TFLOP/s {}", sig3(f / 1e12), w.dtype.name())).unwrap_or_default();
    let domains: Vec<String> = m
        .domains
        .iter()
        .map(|d| {
            format!(
                "{} devices on {} (α {}, β {})",
                d.size,
                d.link.name,
                format_seconds(d.link.link().alpha_s),
                format_gbps(d.link.link().beta_bps)
            )
        })
        .collect();
    format!(
        "# Advice: {} on {} x {} (MODELLED)\n\nWorkload: {}-token prompts, {}-token answers, {} sequence(s) in flight, {}; ranked by {}.\n\nMachine: {} node(s) of {} {} ({}, {}{peak}){}.\n\n",
        req.model.name,
        m.devices(),
        dev.name,
        w.prompt,
        w.new_tokens,
        w.sequences,
        w.dtype.name(),
        objective_words(w.objective),
        m.nodes,
        m.devices_per_node,
        dev.name,
        format_bytes(dev.memory_bytes as f64),
        format_gbps(dev.bandwidth_bps()),
        if domains.is_empty() { String::new() } else { format!("; domains: {}", domains.join(", ")) },
    )
}

fn verdict(advice: &Advice) -> String {
    let mut t = match advice.ranked.first() {
        Some(best) => format!("**Advice:** {}.", best.label),
        None => "**Advice:** no layout fits this machine.".into(),
    };
    match &advice.baseline {
        Some(b) => t.push_str(&format!(" **Baseline to measure:** {} (whole replicas, no collectives).", b.label)),
        // Whole replicas are refused for a reason (their weights, or every sequence's cache);
        // say which rather than blaming the model.
        None => match advice.rejected.iter().find(|r| r.layout.is_replicas_only()) {
            Some(r) => t.push_str(&format!(" No baseline of whole replicas: {} {}.", r.label, rejection_message(&r.reason))),
            None => t.push_str(" No baseline of whole replicas."),
        },
    }
    t + "\n\n"
}

/// The advice as markdown.
pub fn to_markdown(advice: &Advice) -> String {
    let mut t = header(advice);
    t.push_str(&verdict(advice));
    t.push_str("## Ranked\n\n| rank | layout | step | TTFT | request | tokens/s | tokens/s/device | weights/device | KV/device | what would flip it |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (i, r) in advice.ranked.iter().enumerate() {
        t.push_str(&ranked_row(i, r));
    }
    t.push_str("\n## Rejected\n\n");
    if advice.rejected.is_empty() {
        t.push_str("None: every layout of the machine's devices was ranked.\n");
    } else {
        t.push_str("| layout | why |\n|---|---|\n");
    }
    for r in &advice.rejected {
        let predicted = r.predicted.as_ref().filter(|_| matches!(r.reason, Rejection::TensorAcrossSlowBoundary { .. }));
        let extra = predicted
            .map(|p| format!(" ({} itself: predicted step {}, TTFT {})", r.label, format_seconds(p.step_s), format_seconds(p.ttft_s)))
            .unwrap_or_default();
        t.push_str(&format!("| {} | {}{extra} |\n", r.label, rejection_message(&r.reason)));
    }
    t.push_str("\n## Assumptions\n\n");
    for a in assumptions(advice) {
        t.push_str(&format!("- {a}\n"));
    }
    t.push_str("\n## Provenance\n\n");
    for p in provenance(advice) {
        t.push_str(&format!("- {p}\n"));
    }
    t
}
