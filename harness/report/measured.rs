//! MEASURED: one table per experiment family from the ok manifests' summaries.

use super::facts::{CollRow, DecodeRow, DispatchRow, Facts, Fit, MembwRow};
use super::fmt;
use super::{Family, FamilyKind};
use crate::manifest::summary::Phase;
use crate::spec::link::Link;
use crate::spec::schema::StepMode;
use crate::table::{Cell, Table};
use std::collections::{BTreeMap, BTreeSet};

/// The measured families, in a fixed order; empty families are left out.
pub fn families(facts: &Facts) -> Vec<Family> {
    let mut out = Vec::new();
    if !facts.collectives.is_empty() || !facts.fits.is_empty() {
        let mut tables = collectives(&facts.collectives);
        tables.extend(fits(&facts.fits));
        out.push(Family::new(FamilyKind::Collectives, "Collectives", COLL_INTRO, tables));
    }
    out.extend(super::imported::family(&facts.imported));
    if !facts.membw.is_empty() {
        let mut tables = membw(&facts.membw);
        tables.extend(super::cache_sharing::table(&facts.membw));
        out.push(Family::new(FamilyKind::Membw, "Memory bandwidth", MEMBW_INTRO, tables));
    }
    if !facts.decode.is_empty() {
        let mut tables = decode(&facts.decode);
        tables.extend(all_reduce_phases(&facts.decode, &facts.fits));
        tables.extend(overlap_hidden(&facts.decode));
        tables.extend(context_prefill(&facts.decode));
        tables.extend(expert_prefill(&facts.decode));
        out.push(Family::new(FamilyKind::Decode, "Decode", DECODE_INTRO, tables));
    }
    if !facts.dispatch.is_empty() {
        out.push(Family::new(FamilyKind::Dispatch, "Expert dispatch", DISPATCH_INTRO, dispatch(&facts.dispatch)));
    }
    out
}

const COLL_INTRO: &str = "Each collective timed alone. Time is per iteration of the slowest rank: median, min – max and p99 over the timed iterations. algbw = bytes / median time; busbw = algbw × the nccl-tests busbw factor (all-reduce 2(p−1)/p; all-gather, reduce-scatter, all-to-all (p−1)/p; broadcast and ping-pong 1). `wrong` counts results that failed their check.";
const MEMBW_INTRO: &str =
    "Every process streams its own buffer at the same time; aggregate is the sum over processes, per process is each one's share. Rooflines read the largest buffer measured at each number of processes and threads; a smaller buffer may be read from a cache, and the cost model reads those rates at a rank's weights.";
const DECODE_INTRO: &str = "Split decoding, one row per layout: step time median and min – max over the timed steps, the time inside collectives (comm) and outside them (compute), and the exactness verdict against the unsplit reference (tokens equal, largest logit difference, smallest top-2 margin). The figures stack the compute and communication medians; medians need not add up to the step median, drawn as a black line.";
const DISPATCH_INTRO: &str = "The all-to-all that carries tokens to their experts and back, per number of tokens dispatched.";

fn group<T: Clone, K: Ord>(rows: &[T], key: impl Fn(&T) -> K) -> BTreeMap<K, Vec<T>> {
    let mut map: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for r in rows {
        map.entry(key(r)).or_default().push(r.clone());
    }
    map
}

/// A collective table's columns; the op time and skew go in after the p99 ([`AFTER_P99`]).
const COLLECTIVE_COLUMNS: [&str; 12] =
    ["world", "link", "size", "median", "min – max", "p99", "n", "algbw", "busbw", "busbw factor", "wrong", "run"];
/// Where a collective table's optional op-time columns go: after its p99.
const AFTER_P99: usize = 6;

/// A decode table's columns; the dtype, overlap and step mode go in after the link ([`AFTER_LINK`]).
const DECODE_COLUMNS: [&str; 16] = [
    "strategy",
    "world",
    "head",
    "seqs",
    "link",
    "step median",
    "step min – max",
    "comm median",
    "compute median",
    "prefill median",
    "tokens/s",
    "collectives/step",
    "tokens equal",
    "max logit diff",
    "min top-2 margin",
    "run",
];
/// Where a decode table's optional dtype, overlap and step mode columns go: after its link.
const AFTER_LINK: usize = 5;

fn collectives(rows: &[CollRow]) -> Vec<Table> {
    let groups = group(rows, |r| (r.experiment.clone(), super::facts::op_order(r.op), r.op.name()));
    groups
        .into_iter()
        .map(|((experiment, _, op), mut rows)| {
            rows.sort_by(|a, b| (a.world, &a.link, a.size, &a.run).cmp(&(b.world, &b.link, b.size, &b.run)));
            let table = Table {
                id: format!("measured-{}-{}", fmt::slug(&experiment), fmt::slug(op)),
                title: format!("{op} (experiment `{experiment}`)"),
                caption: format!("{op}: time per iteration by world size, link and message size; measured."),
                columns: cols(&COLLECTIVE_COLUMNS),
                rows: rows.iter().map(coll_cells).collect(),
                provenance: Vec::new(),
            };
            with_in_place(with_op_time(table, &rows), &rows)
        })
        .collect()
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Adds the op's own time (back to back, mean over ranks) and the skew after the slowest
/// rank's p99, when the rows have them (manifests made before they were measured do not).
fn with_op_time(mut t: Table, rows: &[CollRow]) -> Table {
    if rows.iter().all(|r| r.op_time.is_none()) {
        return t;
    }
    let at = AFTER_P99;
    t.columns.insert(at, "op time (back to back, median)".into());
    t.columns.insert(at + 1, "skew (median − op time)".into());
    for (cells, r) in t.rows.iter_mut().zip(rows) {
        cells.insert(at, Cell::opt(r.op_time.map(|s| s.median), Cell::Seconds));
        cells.insert(at + 1, Cell::opt(r.skew, Cell::Seconds));
    }
    t.caption.push_str(" Median, min – max and p99: the slowest rank per iteration, a barrier before each call (what a step pays). Op time: blocks of back-to-back calls after one barrier, per rank, averaged over ranks (nccl-tests' convention; α and β are fitted on it). Skew: the difference.");
    t
}

/// Adds the in-place op time after the out-of-place one, when the rows have it (NCCL runs).
fn with_in_place(mut t: Table, rows: &[CollRow]) -> Table {
    if rows.iter().all(|r| r.in_place_op_time.is_none()) {
        return t;
    }
    // After the op time (which `with_op_time` put at AFTER_P99 when any row has one).
    let at = if rows.iter().any(|r| r.op_time.is_some()) { AFTER_P99 + 1 } else { t.columns.len() };
    t.columns.insert(at, "in place (back to back, median)".into());
    for (cells, r) in t.rows.iter_mut().zip(rows) {
        cells.insert(at, Cell::opt(r.in_place_op_time.map(|s| s.median), Cell::Seconds));
    }
    t.caption.push_str(" In place: the same blocks with the result written over the input (nccl-tests' in-place columns; NCCL runs only).");
    t
}

fn coll_cells(r: &CollRow) -> Vec<Cell> {
    vec![
        Cell::Count(r.world.into()),
        Cell::text(r.link.name()),
        Cell::Bytes(r.size as f64),
        Cell::Seconds(r.time.median),
        Cell::range(r.time.min, r.time.max, Cell::Seconds),
        Cell::Seconds(r.time.p99),
        Cell::Count(r.time.n),
        Cell::BytesPerSec(r.algbw),
        Cell::BytesPerSec(r.busbw),
        Cell::Number(r.factor),
        Cell::Count(r.wrong),
        Cell::text(&r.run),
    ]
}

fn fits(fits: &[Fit]) -> Vec<Table> {
    if fits.is_empty() {
        return Vec::new();
    }
    let mut fits = fits.to_vec();
    fits.sort_by(|a, b| {
        (&a.experiment, super::facts::op_order(a.fit.op), a.fit.world, &a.link, &a.run).cmp(&(
            &b.experiment,
            super::facts::op_order(b.fit.op),
            b.fit.world,
            &b.link,
            &b.run,
        ))
    });
    vec![Table {
        id: "measured-collective-fits".into(),
        title: "Fitted link constants".into(),
        caption: "Least-squares line time = intercept + slope × bytes through the measured medians up to the size shown (the figures draw this line); α = intercept / steps and β = factor / slope read it as the ring model's per-step latency and link bandwidth (all-reduce: 2(p−1) steps, factor 2(p−1)/p). The held-out sizes above it are checked in MODELLED.".into(),
        columns: cols(&[&FIT_COLUMNS[..], &["run"]].concat()),
        rows: fits.iter().map(|f| [fit_cells(f), vec![Cell::text(&f.run)]].concat()).collect(),
        provenance: Vec::new(),
    }]
}

/// The columns of a link fit's own cells, before a table's trailing ones (measured and imported fits).
pub(super) const FIT_COLUMNS: [&str; 8] = ["experiment", "op", "world", "link", "intercept", "α per step", "β", "fitted up to"];

/// A link fit's cells under [`FIT_COLUMNS`].
pub(super) fn fit_cells(f: &Fit) -> Vec<Cell> {
    vec![
        Cell::text(&f.experiment),
        Cell::text(f.fit.op.name()),
        Cell::Count(f.fit.world.into()),
        Cell::text(f.link.name()),
        Cell::Seconds(f.fit.line.intercept_s),
        Cell::Seconds(f.fit.alpha_per_step_s),
        Cell::opt(f.fit.beta_bps, Cell::BytesPerSec),
        Cell::Bytes(f.fit.fit_max_bytes as f64),
    ]
}

fn membw(rows: &[MembwRow]) -> Vec<Table> {
    group(rows, |r| r.experiment.clone())
        .into_iter()
        .map(|(experiment, mut rows)| {
            rows.sort_by(|a, b| (a.processes, a.threads, a.buffer, &a.run).cmp(&(b.processes, b.threads, b.buffer, &b.run)));
            let table = Table {
                id: format!("measured-{}", fmt::slug(&experiment)),
                title: format!("memory bandwidth (experiment `{experiment}`)"),
                caption: "Aggregate and per-process streaming bandwidth; measured.".into(),
                columns: cols(&[
                    "processes",
                    "threads",
                    "buffer",
                    "aggregate median",
                    "aggregate min – max",
                    "per process median",
                    "per process min – max",
                    "run",
                ]),
                rows: rows
                    .iter()
                    .map(|r| {
                        vec![
                            Cell::Count(r.processes),
                            Cell::Count(r.threads),
                            Cell::Bytes(r.buffer as f64),
                            Cell::BytesPerSec(r.aggregate.median),
                            Cell::range(r.aggregate.min, r.aggregate.max, Cell::BytesPerSec),
                            Cell::BytesPerSec(r.per_process.median),
                            bw_range(Some(&r.per_process)),
                            Cell::text(&r.run),
                        ]
                    })
                    .collect(),
                provenance: Vec::new(),
            };
            with_stream(table, &rows)
        })
        .collect()
}

/// Adds parlab's STREAM-class read beside libtorch's sum, and which of them is the roofline,
/// when the runs measured it (manifests made before it existed did not).
fn with_stream(mut t: Table, rows: &[MembwRow]) -> Table {
    if rows.iter().all(|r| r.stream_per_process.is_none()) {
        return t;
    }
    let at = t.columns.len().saturating_sub(1);
    t.columns.insert(at, "STREAM-class per process median".into());
    t.columns.insert(at + 1, "STREAM-class min – max".into());
    t.columns.insert(at + 2, "roofline".into());
    for (cells, r) in t.rows.iter_mut().zip(rows) {
        cells.insert(at, Cell::opt(r.stream_per_process.map(|s| s.median), Cell::BytesPerSec));
        cells.insert(at + 1, bw_range(r.stream_per_process.as_ref()));
        cells.insert(at + 2, Cell::text(r.roofline.name()));
    }
    t.caption.push_str(" The first columns are libtorch's sum; STREAM-class is parlab's own SIMD read of the same buffer by every thread of the rank; roofline names the higher median, which the decode bound uses.");
    t
}

fn decode(rows: &[DecodeRow]) -> Vec<Table> {
    group(rows, |r| r.experiment.clone())
        .into_iter()
        .map(|(experiment, mut rows)| {
            rows.sort_by_key(decode_key);
            let mixed = rows.iter().any(|r| r.dtype_name() != rows[0].dtype_name());
            let models: BTreeSet<&str> = rows.iter().map(|r| r.model.as_str()).collect();
            let models = models.into_iter().collect::<Vec<_>>().join(", ");
            let model = match rows.first() {
                Some(r) if !mixed => format!("{models} {}", r.dtype_name()),
                _ => models,
            };
            let table = Table {
                id: format!("measured-{}", fmt::slug(&experiment)),
                title: format!("decode (experiment `{experiment}`, {})", model.trim()),
                caption: "Per decode step; tokens/s over the whole generation; measured.".into(),
                columns: cols(&DECODE_COLUMNS),
                rows: rows.iter().map(decode_cells).collect(),
                provenance: Vec::new(),
            };
            with_optional_columns(table, &rows, mixed)
        })
        .collect()
}

const DTYPE_CAPTION: &str = " dtype: the precision the run computed in; a half-precision run's exactness columns compare it with the float32 reference (the precision audit grades it against its float32 twin).";

const STEP_MODE_CAPTION: &str = " step mode: eager, every operator launched by the host each step; graph, the step (its shapes fixed: the whole KV cache read, later positions masked) captured once as a CUDA graph and replayed each round, its logits copied to the host as an eager step's are.";

const OVERLAP_CAPTION: &str = " Overlap: each all-reduce cut into that many pieces, each started non-blocking while the next computes (0: one blocking all-reduce, the spec's value).";

const THREADS_CAPTION: &str = " threads: each rank's compute threads.";

const DEVICE_CAPTION: &str = " device: where each rank computed (cpu, or cuda: a GPU per local rank, shared where fewer).";

const MODEL_CAPTION: &str = " model: the checkpoint decoded (the experiment crosses several).";

/// Adds the optional decode columns after the link, where an experiment's runs differ in them:
/// model, device, threads per rank, dtype (more than one precision, `mixed`), overlap (pieces
/// of overlapped all-reduces) and step mode (a replayed graph), each with its sentence of the
/// caption; so rows that differ in them are told apart.
fn with_optional_columns(t: Table, rows: &[DecodeRow], mixed: bool) -> Table {
    let varies = |f: &dyn Fn(&DecodeRow) -> String| rows.iter().any(|r| f(r) != f(&rows[0]));
    let t = with_column(t, rows, varies(&|r| r.model.clone()), "model", |r| Cell::text(&r.model), MODEL_CAPTION);
    let t = with_column(t, rows, varies(&|r| r.device.name().to_string()), "device", |r| Cell::text(r.device.name()), DEVICE_CAPTION);
    let t = with_column(t, rows, varies(&|r| r.threads.to_string()), "threads", |r| Cell::Count(r.threads.into()), THREADS_CAPTION);
    let graph = rows.iter().any(|r| r.step_mode != StepMode::Eager);
    let t = with_column(t, rows, graph, "step mode", |r| Cell::text(r.step_mode.name()), STEP_MODE_CAPTION);
    let overlap = rows.iter().any(|r| r.overlap.is_some());
    let t = with_column(t, rows, overlap, "overlap", |r| Cell::Count(r.overlap.unwrap_or(0).into()), OVERLAP_CAPTION);
    with_column(t, rows, mixed, "dtype", |r| Cell::text(r.dtype_name()), DTYPE_CAPTION)
}

/// Column `name` (each row's `cell`) inserted after the link and `caption` added, where `shown`.
fn with_column(mut t: Table, rows: &[DecodeRow], shown: bool, name: &str, cell: impl Fn(&DecodeRow) -> Cell, caption: &str) -> Table {
    if !shown {
        return t;
    }
    t.columns.insert(AFTER_LINK, name.into());
    for (cells, r) in t.rows.iter_mut().zip(rows) {
        cells.insert(AFTER_LINK, cell(r));
    }
    t.caption.push_str(caption);
    t
}

type DecodeKey = (String, &'static str, &'static str, u32, &'static str, u64, Link, Option<u32>, &'static str, StepMode, u32, String);

fn decode_key(r: &DecodeRow) -> DecodeKey {
    let (model, device) = (r.model.clone(), r.device.name());
    let layout = (r.strategy.name(), r.world, r.head_name(), r.sequences, r.link.clone(), r.overlap);
    (model, device, layout.0, layout.1, layout.2, layout.3, layout.4, layout.5, r.dtype_name(), r.step_mode, r.threads, r.run.clone())
}

fn decode_cells(r: &DecodeRow) -> Vec<Cell> {
    vec![
        Cell::text(r.strategy.name()),
        Cell::Count(r.world.into()),
        Cell::text(r.head_name()),
        Cell::Count(r.sequences),
        Cell::text(r.link.name()),
        Cell::Seconds(r.step.median),
        Cell::range(r.step.min, r.step.max, Cell::Seconds),
        Cell::Seconds(r.comm.median),
        Cell::Seconds(r.compute.median),
        Cell::Seconds(r.prefill.median),
        Cell::Number(r.tokens_per_s.median),
        Cell::opt_count(r.collectives),
        r.tokens_equal.map_or(Cell::Missing, Cell::Verdict),
        Cell::opt(r.max_logit_diff, Cell::Small),
        Cell::opt(r.min_top2_margin, Cell::Number),
        Cell::text(&r.run),
    ]
}

/// The tensor splits' all-reduces in prefill (prompt rows: the bandwidth regime) and in decode
/// steps (one row: the latency regime), beside what the α–β line fitted to the collectives
/// runs of the same link and world predicts for that message size.
fn all_reduce_phases(rows: &[DecodeRow], fits: &[Fit]) -> Option<Table> {
    let mut split: Vec<&DecodeRow> = rows.iter().filter(|r| r.world > 1 && r.overlap.is_none() && !r.all_reduces.is_empty()).collect();
    if split.is_empty() {
        return None;
    }
    split.sort_by_key(|r| (r.experiment.clone(), r.world, r.head_name(), r.sequences, r.link.clone(), r.run.clone()));
    let fit_for =
        |r: &DecodeRow| fits.iter().find(|f| f.fit.op == crate::spec::schema::Op::AllReduce && f.fit.world == r.world && f.link == r.link);
    let mut cells = Vec::new();
    for r in split {
        let fit = fit_for(r);
        for a in &r.all_reduces {
            let predicted = fit.map(|f| f.fit.predict(a.size_bytes as f64));
            cells.push(vec![
                Cell::text(&r.experiment),
                Cell::Count(r.world.into()),
                Cell::text(r.head_name()),
                Cell::text(r.link.name()),
                Cell::text(a.phase.name()),
                Cell::Bytes(a.size_bytes as f64),
                Cell::Count(a.calls),
                Cell::Seconds(a.time.median),
                Cell::range(a.time.min, a.time.max, Cell::Seconds),
                Cell::Seconds(a.fastest_rank.median),
                Cell::opt(predicted, Cell::Seconds),
                Cell::opt(predicted.filter(|p| *p > 0.0).map(|p| a.fastest_rank.median / p), Cell::Number),
                Cell::text(&r.run),
            ]);
        }
    }
    Some(Table {
        id: "measured-all-reduce-by-phase".into(),
        title: "All-reduce in prefill and in decode (tensor splits)".into(),
        caption: "One all-reduce of the split's residual stream: in prefill its message holds every prompt row, in a decode step one row. Per call: the mean over a repetition's calls of the time inside them, waiting for the other ranks included, on the slowest rank (what the split pays; median and min – max over repetitions) and on the fastest (the rank that arrives last waits least: the closest a running split comes to the call alone). α–β predicted: the line fitted to the collectives runs of the same link and world (Fitted link constants), which time the call alone; the last column compares the fastest rank with it.".into(),
        columns: cols(&[
            "experiment",
            "world",
            "head",
            "link",
            "phase",
            "message",
            "calls/repetition",
            "slowest rank per call",
            "slowest min – max",
            "fastest rank per call",
            "α–β predicted",
            "fastest / predicted",
            "run",
        ]),
        rows: cells,
        provenance: vec!["measured: parlab's decode runs (rank records `prefill_allreduce`, `decode_allreduce`); predicted: the stored fit of the collectives runs".into()],
    })
}

/// `min – max` of a bandwidth statistic, or `Missing`.
/// A tensor split's all-reduces overlapped with its computation against the same split
/// blocking: per phase, the seconds inside the all-reduces of a repetition (blocking: all of
/// them; overlapped: what the computation did not hide), the hidden fraction, and the phase's
/// time both ways.
fn overlap_hidden(rows: &[DecodeRow]) -> Option<Table> {
    let mut cells = Vec::new();
    for (off, on) in super::facts::overlap_pairs(rows) {
        for phase in [Phase::Prefill, Phase::Decode] {
            let (Some(blocking), Some(exposed)) = (off.all_reduce_total(phase), on.all_reduce_total(phase)) else { continue };
            let time = |r: &DecodeRow| r.phase_time(phase).median;
            cells.push(vec![
                Cell::text(&on.experiment),
                Cell::Count(on.world.into()),
                Cell::text(on.link.name()),
                Cell::text(phase.name()),
                Cell::Count(on.overlap.unwrap_or(0).into()),
                Cell::Seconds(blocking),
                Cell::Seconds(exposed),
                Cell::opt((blocking > 0.0).then(|| (blocking - exposed) / blocking), Cell::Change),
                Cell::Seconds(time(off)),
                Cell::Seconds(time(on)),
                Cell::opt((time(off) > 0.0).then(|| time(on) / time(off)), Cell::Number),
                Cell::text(&off.run),
                Cell::text(&on.run),
            ]);
        }
    }
    if cells.is_empty() {
        return None;
    }
    Some(Table {
        id: "measured-overlap-hidden".into(),
        title: "Communication hidden behind compute (tensor splits, overlapped all-reduces)".into(),
        caption: "The same tensor split run twice: each all-reduce blocking, and cut into pieces, each started non-blocking (MPI_Iallreduce) while the next piece of the row-parallel product computes; the pending pieces are tested after each start (Open MPI progresses a non-blocking collective only inside MPI calls) and waited for at the end. Per phase: the seconds a repetition spends inside its all-reduces on the slowest rank (median over repetitions), blocking and overlapped (start, test and wait calls: what the computation did not hide); hidden = (blocking − overlapped) / blocking, negative when the pieces cost more than they hide. Phase time: the prefill of the prompt, or one decode step, median. The two runs ran one after the other in the same suite, not interleaved: their ratio carries the machine's drift between them.".into(),
        columns: cols(&[
            "experiment",
            "world",
            "link",
            "phase",
            "pieces",
            "blocking comm/repetition",
            "overlapped comm/repetition",
            "hidden",
            "phase time blocking",
            "phase time overlapped",
            "overlapped / blocking",
            "blocking run",
            "overlapped run",
        ]),
        rows: cells,
        provenance: vec!["measured: parlab's decode runs (rank records `prefill_allreduce_total`, `decode_allreduce_total`, `prefill`, `decode_step`)".into()],
    })
}

/// Context-parallel prefill: per run, what the key/value ring moved beside what the algorithm
/// must move, the ring's time, the cache's hand-off to the decode layout (bytes beside what it
/// must move, time), and the prefill against world 1 of the same experiment.
fn context_prefill(rows: &[DecodeRow]) -> Option<Table> {
    let mut runs: Vec<&DecodeRow> = rows.iter().filter(|r| r.context.is_some()).collect();
    if runs.is_empty() {
        return None;
    }
    runs.sort_by_key(|r| {
        let c = r.context.as_ref();
        (
            r.experiment.clone(),
            r.link.clone(),
            r.world,
            std::cmp::Reverse(r.threads),
            c.map(|c| c.cut),
            c.map(|c| c.decodes_on),
            r.run.clone(),
        )
    });
    // World 1 on the most threads: one process with the machine's cores, the split's baseline.
    let alone = |r: &DecodeRow| {
        let unsplit = runs.iter().filter(|o| o.world == 1 && o.experiment == r.experiment && o.link == r.link);
        unsplit.max_by_key(|o| (o.threads, std::cmp::Reverse(o.run.clone()))).map(|o| o.prefill.median)
    };
    let cells = runs
        .iter()
        .filter_map(|r| {
            let c = r.context.as_ref()?;
            let blocks: Vec<String> = c.blocks.iter().map(u32::to_string).collect();
            Some(vec![
                Cell::text(&r.experiment),
                Cell::Count(r.world.into()),
                Cell::Count(r.threads.into()),
                Cell::text(r.link.name()),
                Cell::text(blocks.join(" + ")),
                Cell::text(c.cut.name()),
                Cell::opt(c.causal_imbalance, Cell::Number),
                Cell::Bytes(c.ring_bytes as f64),
                Cell::Bytes(c.ring_bytes_modelled as f64),
                Cell::Seconds(c.ring.median),
                Cell::text(c.decodes_on.name()),
                Cell::Bytes(c.gather_bytes as f64),
                Cell::opt(c.gather_bytes_modelled.map(|b| b as f64), Cell::Bytes),
                Cell::Seconds(c.gather.median),
                Cell::Seconds(r.prefill.median),
                Cell::opt(alone(r).filter(|_| r.prefill.median > 0.0).map(|a| a / r.prefill.median), Cell::Number),
                Cell::Seconds(r.step.median),
                r.tokens_equal.map_or(Cell::Missing, Cell::Verdict),
                Cell::text(&r.run),
            ])
        })
        .collect();
    Some(Table {
        id: "measured-context-prefill".into(),
        title: "Context-parallel prefill (ring attention)".into(),
        caption: "The prompt split into one block per rank (blocks: tokens per rank); each rank runs its block through every layer, attention a ring: world − 1 send-receives per layer pass key/value blocks to the next rank, a causal mask drops later keys and the softmax is merged across blocks online. Ring sent: key/value bytes of the rank that sent most in a repetition; modelled: what the algorithm must send, 2 · layers · key/value heads · head width · 4 bytes per token (the width only without grouped-query attention) of every block but the next rank's. Ring time: seconds inside the send-receives per repetition (waiting for neighbours included), slowest rank. Then the cache is handed to the layout the run decodes on (decodes on, the spec's decode_strategy): rank0, every block's cache rows gathered to rank 0, which decodes alone with its threads_per_rank threads (the other ranks wait in MPI, which polls a core); tensor, one all-to-all per layer's keys and values leaves each rank its tensor split's heads of every block, and all ranks decode as a tensor split. Hand-off sent: key/value bytes all ranks sent in a repetition; modelled: 2 · layers · head_dim · 4 bytes per token and key/value head of every block but rank 0's (rank0), or of every block for the key/value heads every other rank holds (tensor; a head on several ranks sent to each). The decode step column is the decode layout's. Speed-up: world 1's prefill (same experiment and link; of its runs, the one on the most threads) over this one. Cut: contiguous (one block per rank, in order) or zigzag (the prompt in 2p chunks, rank r holding chunks r and 2p − 1 − r; the spec's context_blocks). Causal work, busiest / mean: the query-key pairs the causal mask keeps in the busiest rank's block over the mean, from the layout (contiguous blocks leave the last rank the most; zigzag evens it). Worlds above the cores are oversubscribed.".into(),
        columns: cols(&[
            "experiment",
            "world",
            "threads",
            "link",
            "blocks",
            "cut",
            "causal work, busiest / mean",
            "ring sent",
            "ring modelled",
            "ring time",
            "decodes on",
            "hand-off sent",
            "hand-off modelled",
            "hand-off time",
            "prefill median",
            "speed-up over world 1",
            "decode step median",
            "tokens equal",
            "run",
        ]),
        rows: cells,
        provenance: vec!["measured: parlab's decode runs (rank records `prefill_ring`, `prefill_ring_bytes`, `kv_gather`, `kv_gather_bytes`, `prefill`); modelled: arithmetic from config.json (layers, key/value heads, head width) and the layout's blocks".into()],
    })
}

/// Expert-parallel prefill: per run, where the router sent the prompt's tokens, the busiest
/// rank's expert time beside what its share of the pairs predicts, the all-to-alls, and the
/// prefill against the same world's evenly routed run.
fn expert_prefill(rows: &[DecodeRow]) -> Option<Table> {
    let mut runs: Vec<&DecodeRow> = rows.iter().filter(|r| r.experts.is_some()).collect();
    if runs.is_empty() {
        return None;
    }
    let skew = |r: &DecodeRow| r.experts.as_ref().map_or(0.0, |e| e.routing_skew);
    runs.sort_by(|a, b| {
        (&a.experiment, &a.link, a.world)
            .cmp(&(&b.experiment, &b.link, b.world))
            .then(skew(a).total_cmp(&skew(b)))
            .then_with(|| a.run.cmp(&b.run))
    });
    let even = |r: &DecodeRow| {
        runs.iter()
            .find(|o| o.world == r.world && o.experiment == r.experiment && o.link == r.link && skew(o) == 0.0)
            .map(|o| o.prefill.median)
    };
    let cells = runs.iter().filter_map(|r| Some(expert_cells(r, r.experts.as_ref()?, even(r)))).collect();
    Some(Table {
        id: "measured-expert-prefill".into(),
        title: "Expert-parallel prefill: routing imbalance and the slowest rank".into(),
        caption: "Each rank holds the attention and the output head whole and one contiguous share of every mixture layer's experts (experts per rank). At each mixture layer rank r routes its own block of the prompt's rows (softmax router, top-k, weights renormalised), sends each (token, expert) pair to the expert's rank (MPI_Alltoallv), computes the pairs it received, sends the outputs back, and the blocks are all-gathered. Pairs per rank: summed over the layers, prefill; imbalance: the busiest rank's pairs over the mean, summed over layers (worst layer in brackets). Busiest rank's expert time beside the prediction: the ranks' mean expert time × the imbalance (time in proportion to pairs). All-to-all time: the least busy rank's seconds inside the dispatch and combine, waiting for the busiest included. Sent: the rank that sent most; even: what even routing sends, tokens · top_k · (p − 1)/p² pairs per layer, each a row out (width + 1 values) and back. Prefill ÷ even: this run's prefill over the evenly routed (skew 0) run of the same world; the slowest rank sets the pace. Worlds above the cores are oversubscribed.".into(),
        columns: cols(&[
            "experiment",
            "world",
            "routing skew",
            "experts per rank",
            "pairs per rank",
            "imbalance (worst layer)",
            "busiest rank's expert time",
            "predicted from imbalance",
            "all-to-all time, least busy rank",
            "sent",
            "sent, even routing",
            "prefill median",
            "prefill ÷ even routing",
            "decode step median",
            "tokens equal",
            "run",
        ]),
        rows: cells,
        provenance: vec!["measured: parlab's decode runs (rank records `moe_assigned`, `moe_compute`, `moe_exchange`, `moe_sent_bytes`, `prefill`, `decode_step`); predicted and even-routing bytes: arithmetic on those records and config.json (top_k, width, layers)".into()],
    })
}

fn expert_cells(r: &DecodeRow, e: &crate::manifest::summary::ExpertPrefill, even_prefill: Option<f64>) -> Vec<Cell> {
    let worst = e.imbalance.iter().copied().fold(0.0, f64::max);
    let list = |v: Vec<String>| v.join(" + ");
    Vec::from([
        Cell::text(&r.experiment),
        Cell::Count(r.world.into()),
        Cell::Number(e.routing_skew),
        Cell::text(list(e.experts.iter().map(u32::to_string).collect())),
        Cell::text(list(e.pairs_per_rank().iter().map(u64::to_string).collect())),
        Cell::Noted(Box::new(Cell::Number(e.overall_imbalance())), fmt::text(&Cell::Number(worst))),
        Cell::Seconds(e.busiest_compute()),
        Cell::Seconds(e.predicted_busiest_compute()),
        Cell::Seconds(e.exchange.iter().copied().fold(f64::INFINITY, f64::min)),
        Cell::Bytes(e.sent_bytes as f64),
        Cell::Bytes(e.sent_bytes_even as f64),
        Cell::Seconds(r.prefill.median),
        Cell::opt(even_prefill.filter(|&p| p > 0.0).map(|p| r.prefill.median / p), Cell::Number),
        Cell::Seconds(r.step.median),
        r.tokens_equal.map_or(Cell::Missing, Cell::Verdict),
        Cell::text(&r.run),
    ])
}

fn bw_range(s: Option<&super::facts::Stats>) -> Cell {
    s.map_or(Cell::Missing, |s| Cell::range(s.min, s.max, Cell::BytesPerSec))
}

fn dispatch(rows: &[DispatchRow]) -> Vec<Table> {
    group(rows, |r| r.experiment.clone())
        .into_iter()
        .map(|(experiment, mut rows)| {
            rows.sort_by(|a, b| (a.world, a.tokens, &a.run).cmp(&(b.world, b.tokens, &b.run)));
            Table {
                id: format!("measured-{}", fmt::slug(&experiment)),
                title: format!("expert dispatch (experiment `{experiment}`)"),
                caption: "One all-to-all round trip per row; measured.".into(),
                columns: cols(&["world", "tokens", "bytes", "median", "min – max", "p99", "run"]),
                rows: rows
                    .iter()
                    .map(|r| {
                        vec![
                            Cell::Count(r.world.into()),
                            Cell::Count(r.tokens),
                            Cell::Bytes(r.bytes as f64),
                            Cell::Seconds(r.time.median),
                            Cell::range(r.time.min, r.time.max, Cell::Seconds),
                            Cell::Seconds(r.time.p99),
                            Cell::text(&r.run),
                        ]
                    })
                    .collect(),
                provenance: Vec::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_columns_go_in_after_the_columns_they_belong_to() {
        assert_eq!(COLLECTIVE_COLUMNS[AFTER_P99 - 1], "p99");
        assert_eq!(DECODE_COLUMNS[AFTER_LINK - 1], "link");
    }
}
