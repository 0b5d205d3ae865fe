//! The KV-head cap (the chapters' "at 8 KV heads and TP=16, ranks start duplicating KV instead
//! of splitting it"): a tensor split of a grouped-query model divides the key/value heads while
//! the world divides them and replicates them beyond, so each rank's KV cache per token falls as
//! 1/p up to the KV-head count and stays flat after it, while every decode token still pays 2L
//! all-reduces. Checked on what the runs recorded (bytes and counts, not times) against the cost
//! model's `kv_share` for the same layouts.

use super::{Finding, Inconclusive, Inputs};
use crate::costmodel::shape::{shape_from_config, ModelShape};
use crate::manifest::summary::{Decode, Phase};
use crate::manifest::{Manifest, Status};
use crate::model::ModelConfig;
use crate::spec::plan::Workload;
use crate::spec::schema::Strategy;
use std::collections::BTreeMap;

/// One tensor-split run of a grouped-query model.
struct CapRun<'a> {
    run: String,
    decode: &'a Decode,
    oversubscribed: bool,
}

/// The tensor splits of one grouped-query model in one experiment and dtype, by world.
struct Series<'a> {
    label: String,
    shape: ModelShape,
    dtype_bytes: u64,
    runs: BTreeMap<u32, CapRun<'a>>,
}

/// What one world recorded beside what the cost model predicts for its layout.
struct WorldCheck {
    world: u32,
    run: String,
    /// The largest KV cache bytes per token any rank stored.
    cache: u64,
    /// True when the ranks stored different amounts.
    uneven: bool,
    /// The cost model's bytes per token per device for this world.
    predicted: u64,
    /// World 1's cache over min(p, KV heads): 1/p up to the cap, flat after it.
    capped_fall: Option<u64>,
    /// All-reduces per decode token of one sequence (None when not recorded).
    all_reduces: Option<f64>,
    comm_s: f64,
    oversubscribed: bool,
}

/// A series' key: experiment, model name, dtype name.
type SeriesKey = (String, String, String);

/// A manifest that can enter the finding, with its series and its model's shape.
struct GqaRun<'a> {
    key: SeriesKey,
    shape: ModelShape,
    dtype_bytes: u64,
    run: CapRun<'a>,
}

/// An ok tensor decode of a model with fewer key/value heads than query heads.
fn gqa_tensor(m: &Manifest) -> Option<GqaRun<'_>> {
    let decode = m.summary()?.decode()?;
    if m.status() != Status::Ok || decode.strategy != Strategy::Tensor {
        return None;
    }
    let Workload::Decode { dtype, .. } = &m.plan.workload else { return None };
    let source = m.plan.model.as_ref()?;
    let shape = shape_from_config(&ModelConfig::read(&source.dir).ok()?).ok()?;
    if shape.kv_heads >= shape.heads {
        return None;
    }
    let key = (m.experiment.clone(), source.name.clone(), dtype.name().to_string());
    let oversubscribed = m.launch().is_some_and(|l| l.oversubscribed);
    Some(GqaRun { key, shape, dtype_bytes: dtype.bytes(), run: CapRun { run: m.run_id.short().to_string(), decode, oversubscribed } })
}

/// Every series of grouped-query tensor splits, in a fixed order (the first run of each world).
fn series(list: &[Manifest]) -> Vec<Series<'_>> {
    let mut out: BTreeMap<SeriesKey, Series> = BTreeMap::new();
    for m in list {
        let Some(GqaRun { key, shape, dtype_bytes, run }) = gqa_tensor(m) else { continue };
        let label = format!("{} {} ({})", key.1, key.2, key.0);
        let s = out.entry(key).or_insert_with(|| Series { label, shape, dtype_bytes, runs: BTreeMap::new() });
        s.runs.entry(run.decode.world).or_insert(run);
    }
    out.into_values().collect()
}

/// All-reduces per decode token of one sequence: the decode phase's calls per repetition over
/// its steps (the first token comes from the prefill).
fn all_reduces_per_token(d: &Decode) -> Option<f64> {
    let calls = d.all_reduces.iter().find(|a| a.phase == Phase::Decode)?.calls;
    let steps = u64::from(d.new_tokens.saturating_sub(1)) * u64::from(d.sequences.max(1));
    (steps > 0).then(|| calls as f64 / steps as f64)
}

/// Each world's record beside the cost model (None when a run recorded no per-rank cache).
fn checks(s: &Series) -> Option<Vec<WorldCheck>> {
    let one = s.runs.get(&1).and_then(|r| r.decode.kv_cache_bytes_per_token.iter().copied().max());
    let mut out = Vec::new();
    for (&world, r) in &s.runs {
        let per_rank = &r.decode.kv_cache_bytes_per_token;
        let cache = per_rank.iter().copied().max()?;
        let divisor = u64::from(world).min(s.shape.kv_heads);
        out.push(WorldCheck {
            world,
            run: r.run.clone(),
            cache,
            uneven: per_rank.iter().any(|&c| c != cache),
            predicted: s.shape.kv_share(u64::from(world), s.dtype_bytes).bytes_per_token_per_device,
            capped_fall: one.filter(|c| c.is_multiple_of(divisor)).map(|c| c / divisor),
            all_reduces: all_reduces_per_token(r.decode),
            comm_s: r.decode.comm_s.median,
            oversubscribed: r.oversubscribed,
        });
    }
    Some(out)
}

/// Whether a world's record matches the cap and, past one rank, the 2L all-reduces.
fn world_holds(c: &WorldCheck, two_l: f64) -> bool {
    let all_reduces_ok = c.world == 1 || c.all_reduces.is_some_and(|a| a == two_l);
    !c.uneven && c.cache == c.predicted && c.capped_fall == Some(c.cache) && all_reduces_ok
}

/// The KV-head-cap finding.
pub fn finding(inp: &Inputs) -> Finding {
    let f = Finding::new(
        "kv-head-cap",
        "A tensor split of a grouped-query model divides the KV cache per rank as 1/p only up to the KV-head count; past it ranks hold copies, the cache per rank stays flat, and every decode token still pays 2L all-reduces.",
        &["decode.kv_cache_bytes_per_token", "decode.all_reduces (decode calls)", "decode.comm_s"],
        "per grouped-query tensor series with a world-1 run and a world past the KV-head count: at every world p each rank's KV cache bytes per token equal world 1's / min(p, KV heads) and the cost model's kv_share(p); and the decode all-reduces per token (calls per repetition / steps) equal the cost model's 2L; HOLDS when every world does, FAILS when one does not",
    );
    let all = series(inp.list);
    let usable: Vec<&Series> =
        all.iter().filter(|s| s.runs.contains_key(&1) && s.runs.keys().any(|&w| u64::from(w) > s.shape.kv_heads)).collect();
    if usable.is_empty() {
        return f.inconclusive(
            Inconclusive::MissingRuns,
            "missing runs: no tensor split of a grouped-query model at world 1 and at a world past its KV-head count".into(),
        );
    }
    decide(f, &usable)
}

fn decide(mut f: Finding, usable: &[&Series]) -> Finding {
    let (mut wrong, mut held, mut unrecorded) = (Vec::new(), Vec::new(), Vec::new());
    for s in usable {
        // A series with a run written before the cache was recorded is left out, said in a note:
        // the others are still decided (one old manifest must not hide a miss elsewhere).
        let Some(checks) = checks(s) else {
            f.notes.push(format!("{}: a run recorded no KV cache per rank (written before it was recorded); not checked", s.label));
            unrecorded.push(s.label.clone());
            continue;
        };
        let two_l = s.shape.tensor_all_reduces_per_token() as f64;
        for c in &checks {
            report_world(&mut f, s, c, two_l);
            if !world_holds(c, two_l) {
                wrong.push(format!("{} world {}", s.label, c.world));
            }
        }
        held.push(summary(s, &checks));
    }
    if wrong.is_empty() && held.is_empty() {
        f.inconclusive(
            Inconclusive::MissingRuns,
            format!("missing runs: a run of {} recorded no KV cache per rank (written before it was recorded)", unrecorded.join(", ")),
        )
    } else if wrong.is_empty() {
        f.decide(true, held.join("; "))
    } else {
        f.decide(false, format!("the cache or the all-reduces left the prediction at {}", wrong.join(", ")))
    }
}

fn report_world(f: &mut Finding, s: &Series, c: &WorldCheck, two_l: f64) {
    let at = format!("{} world {}", s.label, c.world);
    let run = [c.run.as_str()];
    f.number(&format!("{at}: KV cache per rank per token, measured"), c.cache as f64, "B", &run);
    f.number(&format!("{at}: KV cache per rank per token, cost model"), c.predicted as f64, "B", &[]);
    if let Some(a) = c.all_reduces.filter(|_| c.world > 1) {
        f.number(&format!("{at}: all-reduces per decode token"), a, "count", &run);
    }
    f.number(&format!("{at}: communication per step (median)"), c.comm_s, "s", &run);
    let kv = s.shape.kv_heads;
    let copies = u64::from(c.world).div_ceil(kv);
    f.notes.push(format!(
        "{at}{}: {} B per rank{} (cost model {} B; world 1 / min(p, {kv}) = {}), each KV head on {copies} rank{}; {}: {}; communication {} a step (reported, not judged)",
        if c.oversubscribed { " (oversubscribed: more ranks than cores)" } else { "" },
        c.cache,
        if c.uneven { ", uneven across ranks" } else { "" },
        c.predicted,
        c.capped_fall.map_or("not computable".into(), |v| format!("{v} B")),
        if copies == 1 { "" } else { "s" },
        match c.all_reduces {
            _ if c.world == 1 => "one rank: nothing to all-reduce".to_string(),
            Some(a) => format!("{a} all-reduces per token (2L = {two_l})"),
            None => "all-reduces per token not recorded".into(),
        },
        if world_holds(c, two_l) { "cache and all-reduces as predicted" } else { "cache or all-reduces OFF the prediction" },
        crate::units::format_seconds(c.comm_s)
    ));
}

/// The series' sentence: the fall up to the cap and the flat line past it.
fn summary(s: &Series, checks: &[WorldCheck]) -> String {
    let kv = s.shape.kv_heads;
    let at = |p: u64| checks.iter().find(|c| u64::from(c.world) == p).map(|c| c.cache);
    let beyond: Vec<String> = checks.iter().filter(|c| u64::from(c.world) > kv).map(|c| format!("{} B at {}", c.cache, c.world)).collect();
    format!(
        "{}: the KV cache per rank went from {} B at world 1 to {} at {kv} ranks (its {kv} KV heads) and {} ranks past them, as the cost model predicts, with {} all-reduces per token (2L) at every world past one",
        s.label,
        at(1).unwrap_or(0),
        at(kv).map_or("(no run)".into(), |b| format!("{b} B")),
        beyond.join(", "),
        s.shape.tensor_all_reduces_per_token()
    )
}
