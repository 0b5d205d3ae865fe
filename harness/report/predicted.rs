//! The register's predicted-against-measured decode tables: every measured decode run with the
//! cost model's step under both bandwidth hypotheses (`costmodel::step`), the one the
//! measurement matches, the error, and past the tolerance the assumption that did not hold;
//! then the same runs predicted from their unsplit run (no rank streaming faster than its
//! decode kernel). This module only words the typed predictions.

use super::fmt::{percent, tolerance};
use crate::costmodel::cache::MIN_CACHE_GAIN;
use crate::costmodel::step::{
    predict_prefills, predict_steps, Calibrated, Ceiling, FailedAssumption, Hypothesis, Matches, Moments, Outcome, PrefillPrediction, Skew,
    StepPrediction, TOLERANCE,
};
use crate::identity::{short, RunId};
use crate::manifest::Manifest;
use crate::spec::schema::Strategy;
use crate::table::{Cell, Table};
use crate::units::{format_bytes, format_gbps, format_seconds};
use std::collections::BTreeSet;

/// The decode predictions as register tables: the roofline's, then the calibrated ones where
/// any run has an unsplit peer (empty without a decode run to predict).
pub fn decode_tables(manifests: &[Manifest]) -> Vec<Table> {
    let mut predictions = predict_steps(manifests);
    if predictions.is_empty() {
        return Vec::new();
    }
    predictions.sort_by_key(order_key);
    let roofline = Table {
        id: "predicted-decode".into(),
        title: "Decode: predicted from measured bandwidth and collective fits, against measurement".into(),
        caption: with_tolerance(CAPTION),
        columns: COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows: predictions.iter().map(row).collect(),
        provenance: provenance(manifests, &predictions),
    };
    std::iter::once(roofline).chain(calibrated_table(&predictions)).collect()
}

/// `caption` with its `{tolerance}` written as the tolerance the rows are judged by.
fn with_tolerance(caption: &str) -> String {
    caption.replace("{tolerance}", &tolerance(TOLERANCE))
}

const CALIBRATED_CAPTION: &str = "MODELLED against MEASURED: every decode run that has an unsplit peer (another one-rank, one-sequence run of its model, dtype, device, step mode, routing and threads per rank) predicted again: the round of the hypothesis it matches above, each rank streaming at the lower of its ceiling and the rate at which the peer's decode kernel moved its own bytes (its bytes per step over its measured step: the roofline's compute ceiling, measured instead of assumed). The ceiling is that hypothesis' bandwidth (the memory's), or where membw read a buffer of the busiest rank's footprint (weights and KV cache) with as many processes and threads at once at least 1.1× faster, inside its sweep, that rate: a cache holds the rank's bytes between steps (a run that matched the shared-memory hypothesis, its ranks measured contending for the memory, and a GPU run keep the hypothesis'); for a host run that streams one rank at a time, each of the peer's threads, where the peer itself read memory faster than membw did at its moment (membw read a buffer of the peer's footprint, or read past its sweep, no faster than 1.1× the memory's rate: not a cache's), the peer's rate (`peer:`): the memory delivered it to that very configuration. A split is thus predicted from its unsplit run, the membw runs and the link fits; the unsplit runs themselves are predicted from another unsplit run, never from their own. error = (predicted − measured) / measured, or for a run launched in rounds with its peer the median of the rounds' errors (\"error by round\"; the columns before it give the medians); past {tolerance} the last column names the assumption that did not hold, or says that none is known";

const CALIBRATED_COLUMNS: [&str; 17] = [
    "model",
    "strategy",
    "layout",
    "world",
    "seqs",
    "threads",
    "step measured",
    "roofline (matching)",
    "peer's kernel rate",
    "ceiling per rank",
    "rate per rank",
    "predicted",
    "error",
    "error by round",
    "peer",
    "assumption not holding",
    "run",
];

/// The runs with a calibrated prediction (None where none has one).
fn calibrated_table(predictions: &[StepPrediction]) -> Option<Table> {
    let calibrated: Vec<(&StepPrediction, &Calibrated)> = predictions.iter().filter_map(|p| Some((p, p.calibrated.as_ref()?))).collect();
    if calibrated.is_empty() {
        return None;
    }
    let (splits, unsplit): (Vec<_>, Vec<_>) = calibrated.iter().partition(|(p, _)| !p.is_unsplit());
    Some(Table {
        id: "predicted-decode-calibrated".into(),
        title: "Decode: predicted from the unsplit run's kernel rate, against measurement".into(),
        caption: with_tolerance(CALIBRATED_CAPTION),
        columns: CALIBRATED_COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows: calibrated.iter().map(|(p, c)| calibrated_row(p, c)).collect(),
        provenance: vec![
            format!(
                "within {}, splits and runs of several sequences (the test of the model): {}; the roofline alone (above): {}",
                tolerance(TOLERANCE),
                within(&splits, |_, c| c.error),
                within(&splits, |p, _| p.error)
            ),
            format!(
                "within {}, unsplit runs (each predicted from another unsplit run of its model, dtype and threads: a check of run-to-run agreement, not a test of the model): {}",
                tolerance(TOLERANCE),
                within(&unsplit, |_, c| c.error)
            ),
            format!(
                "not predicted here: {} runs without a peer (another unsplit run of their model, dtype, device, step mode, routing and threads per rank, with a measured step) or whose round could not be computed",
                predictions.len() - calibrated.len()
            ),
            "peer: the unsplit run of the same experiment (launched beside it) where there is one, else the one of median kernel rate among the unsplit runs of that model, dtype, device, step mode, routing and threads".into(),
            format!("error by round: where a run and its peer, of its experiment, were each launched at least {} times in rounds of one `parlab run`, round r predicts the run's step of that round at the rate the peer's kernel moved its bytes in the same round (the experiment's runs go one after another in each round: one moment of a machine that changes speed, where the median over all launches sets two moments apart), and the error is the median of the rounds' (listed in \"error by round\"); else the medians over all launches, two moments apart", crate::manifest::rounds::MIN_ROUNDS),
            format!("past the tolerance the row names the first of these that holds: an oversubscribed launch, overlapped pieces measured slower, the communication's own failed assumption where the measured communication brings the step within tolerance, and for a split measured faster: the busiest rank's weights and KV cache read faster than the whole model's (membw's read rate at the two footprints, interpolated between its buffer sizes, the rank's inside the sweep; the split's ranks reading at once), at least {MIN_CACHE_GAIN}× faster and by enough that the step's memory time at that ratio is within tolerance (assuming the decode kernel's rate scales with the read rate)"),
        ],
    })
}

/// "k of n": how many of `runs` have `error` within the tolerance.
fn within(runs: &[&(&StepPrediction, &Calibrated)], error: impl Fn(&StepPrediction, &Calibrated) -> f64) -> String {
    let k = runs.iter().filter(|(p, c)| error(p, c).abs() <= TOLERANCE).count();
    format!("{k} of {}", runs.len())
}

fn calibrated_row(p: &StepPrediction, c: &Calibrated) -> Vec<Cell> {
    vec![
        Cell::text(model_name(p)),
        Cell::text(p.strategy.name()),
        Cell::text(layout(p)),
        Cell::Count(p.world.into()),
        Cell::Count(p.sequences.into()),
        Cell::Count(p.threads.into()),
        Cell::Seconds(p.measured_step_s),
        Cell::Seconds(p.matched().step_s),
        Cell::BytesPerSec(c.kernel_bps),
        ceiling_cell(&c.ceiling),
        Cell::BytesPerSec(c.bandwidth_bps),
        Cell::Seconds(c.step.step_s),
        Cell::Change(c.error),
        rounds_cell(&c.moments),
        Cell::text(short(&c.unsplit_run)),
        outcome_cell(&c.outcome),
        Cell::text(p.run_id.short()),
    ]
}

/// The rounds' errors of a prediction compared with its peer round by round (missing where it
/// was compared by the medians).
fn rounds_cell(m: &Moments) -> Cell {
    match m {
        Moments::Medians => Cell::Missing,
        Moments::Rounds { errors } => Cell::text(errors.iter().map(|e| super::fmt::percent(*e, true)).collect::<Vec<_>>().join(", ")),
    }
}

/// Runs by their short identities, `a, b`.
fn run_list(runs: &[RunId]) -> String {
    runs.iter().map(|r| short(r.as_str())).collect::<Vec<_>>().join(", ")
}

/// A calibrated prediction's ceiling: the memory's rate, a cache's with the footprint and membw
/// runs it was read from, or the peer's that outran membw's memory rate.
fn ceiling_cell(c: &Ceiling) -> Cell {
    match c {
        Ceiling::Memory { bps } => Cell::noted(Cell::BytesPerSec(*bps), "memory"),
        Ceiling::Cache { bps, bytes, runs } => Cell::noted(
            Cell::BytesPerSec(*bps),
            format!("cache: membw at the rank's {}, runs {}", format_bytes(*bytes as f64), run_list(runs)),
        ),
        Ceiling::Peer { bps, memory_bps, run } => Cell::noted(
            Cell::BytesPerSec(*bps),
            format!("peer: {} read memory this fast, membw {} at another moment", short(run.as_str()), format_gbps(*memory_bps)),
        ),
    }
}

const CAPTION: &str = "MODELLED against MEASURED: every measured decode round predicted twice, with each rank streaming at the bandwidth one process measured alone (own bandwidth) and with the ranks that stream at once sharing the highest aggregate a membw run measured with a core for every thread (shared memory; membw runs of each launch shape's largest buffer, which read from memory; an oversubscribed run's processes take turns on the cores, so the sum of their rates is no aggregate); the memory time is the busiest rank's weight and KV-cache bytes at the mean context over that bandwidth, the communication the collectives' α–β time (2-rank fits, ring formulas at the run's world) plus each call's arrival skew measured by the collectives runs at that world and link. matches: the hypothesis nearer the measurement (by ratio); error = (predicted − measured) / measured of that one. Past {tolerance} the last two columns name the assumption of the model that did not hold for the run's step and for its communication, or say that none is known (a model error). A pipeline's predicted communication includes the waiting for the other stages its round implies.";

const COLUMNS: [&str; 17] = [
    "model",
    "strategy",
    "layout",
    "world",
    "seqs",
    "threads",
    "step measured",
    "predicted, own bandwidth",
    "predicted, shared memory",
    "matches",
    "error",
    "comm measured",
    "comm predicted (α–β + skew)",
    "comm error",
    "assumption not holding (step)",
    "assumption not holding (comm)",
    "run",
];

type OrderKey = (String, &'static str, u32, String, u32, u32, crate::identity::RunId);

fn order_key(p: &StepPrediction) -> OrderKey {
    (model_name(p), p.strategy.name(), p.world, layout(p), p.sequences, p.threads, p.run_id.clone())
}

fn model_name(p: &StepPrediction) -> String {
    let device = if p.cuda { " (cuda)" } else { "" };
    format!("{} {}{device}", p.model, p.dtype.name())
}

/// The layout details that tell runs of one strategy and world apart.
fn layout(p: &StepPrediction) -> String {
    let mut parts = Vec::new();
    if let Some(on) = p.decodes_on {
        parts.push(format!("decodes on {}", on.name()));
    }
    if let Some(h) = p.head {
        parts.push(format!("head {}", h.name()));
    }
    if let Some(k) = p.overlap {
        parts.push(format!("overlap {k}"));
    }
    if let Some(i) = p.imbalance {
        parts.push(format!("imbalance {i:.2}"));
    }
    if p.step_mode != crate::spec::schema::StepMode::Eager {
        parts.push(format!("step {}", p.step_mode.name()));
    }
    if parts.is_empty() {
        "–".into()
    } else {
        parts.join(", ")
    }
}

fn row(p: &StepPrediction) -> Vec<Cell> {
    vec![
        Cell::text(model_name(p)),
        Cell::text(p.strategy.name()),
        Cell::text(layout(p)),
        Cell::Count(p.world.into()),
        Cell::Count(p.sequences.into()),
        Cell::Count(p.threads.into()),
        Cell::Seconds(p.measured_step_s),
        Cell::Seconds(p.own.step_s),
        Cell::Seconds(p.shared.step_s),
        Cell::text(matches_name(p.matches)),
        Cell::Change(p.error),
        Cell::Seconds(p.measured_comm_s),
        Cell::opt(p.comm.as_ref().map(|c| c.total_s()), Cell::Seconds),
        Cell::opt(p.comm_error(), Cell::Change),
        outcome_cell(&p.outcome),
        if p.comm_error().is_some() { outcome_cell(&p.comm_outcome) } else { Cell::Missing },
        Cell::text(p.run_id.short()),
    ]
}

/// The hypothesis a measurement matches, in words.
pub fn matches_name(m: Matches) -> &'static str {
    match m {
        Matches::One(Hypothesis::OwnBandwidth) => "own bandwidth",
        Matches::One(Hypothesis::SharedMemory) => "shared memory",
        Matches::Both => "both (same prediction)",
    }
}

fn outcome_cell(o: &Outcome) -> Cell {
    match o {
        Outcome::Within => Cell::text(format!("– (within {})", tolerance(TOLERANCE))),
        Outcome::AssumptionFailed(a) => Cell::text(assumption_text(a)),
        Outcome::ModelError => Cell::text("none known: a model error"),
    }
}

/// A failed assumption in words, with the figures that show it.
pub fn assumption_text(a: &FailedAssumption) -> String {
    match a {
        FailedAssumption::Oversubscribed { ranks, threads, cores } => format!(
            "oversubscribed: {} (ranks wait for a core; the model gives each rank its own)",
            super::fmt::oversubscription(*ranks, *threads, *cores)
        ),
        FailedAssumption::NoProgressThread { pieces } => format!(
            "no progress thread: the model hides {} of {pieces} pieces of each all-reduce behind compute, but Open MPI advances a non-blocking all-reduce only inside MPI calls",
            pieces.saturating_sub(1)
        ),
        FailedAssumption::CallsAsInIsolation { predicted_per_call_s, fastest_rank_per_call_s, slowest_rank_per_call_s } => format!(
            "calls as in isolation: the run's all-reduces took {} per call on the slowest rank and {} on the rank that waited least (the call itself), against {} from the collectives runs",
            format_seconds(*slowest_rank_per_call_s),
            format_seconds(*fastest_rank_per_call_s),
            format_seconds(*predicted_per_call_s)
        ),
        FailedAssumption::EvenPrefillWork { causal_imbalance } => format!(
            "even prefill work: the cut gave the busiest rank {causal_imbalance:.2}× the mean causal attention work (query-key pairs), and the ring waits for it"
        ),
        FailedAssumption::WeightsInCache { rank_bytes, rank_bps, unsplit_bytes, unsplit_bps, processes, runs } => format!(
            "weights in the cores' caches: the busiest rank's {} (weights and KV cache) read at {} per process with {processes} processes reading at once, the whole model's {} at {} alone (membw runs {}): the split reads from cache what the unsplit run reads from memory, and its memory time at that ratio is within {}",
            format_bytes(*rank_bytes as f64),
            format_gbps(*rank_bps),
            format_bytes(*unsplit_bytes as f64),
            format_gbps(*unsplit_bps),
            run_list(runs),
            tolerance(TOLERANCE)
        ),
        FailedAssumption::UndividedStepTime { peer_bps, roofline_bps, undivided, run } => format!(
            "step time the split did not divide: the unsplit peer {} moved its bytes at {} against the {} roofline (bound by compute or per-call time, not the weight stream), and the split's compute took as long as if {} of the peer's step were fixed per step, paid whole by every rank (at most {}: the peer's step beyond its bytes at the roofline; the calibration divides the whole step among the ranks)",
            short(run),
            format_gbps(*peer_bps),
            format_gbps(*roofline_bps),
            percent(*undivided, false),
            percent(1.0 - peer_bps / roofline_bps, false)
        ),
        FailedAssumption::NotStreamBound { achieved_bps, roofline_bps, run } => format!(
            "not bound by the weight stream: the unsplit run {} moved its bytes at {} against the {} roofline (per-token compute and framework time are not modelled)",
            short(run),
            format_gbps(*achieved_bps),
            format_gbps(*roofline_bps)
        ),
    }
}

fn provenance(manifests: &[Manifest], predictions: &[StepPrediction]) -> Vec<String> {
    let inputs = crate::costmodel::step::Inputs::of(manifests);
    let b = &inputs.bandwidths;
    let mut out: Vec<String> = b
        .own_by_threads
        .iter()
        .map(|(threads, (bps, run))| {
            format!(
                "own bandwidth at {threads} thread(s) per rank: {} (one process alone, median roofline) from run {}",
                format_gbps(*bps),
                short(run)
            )
        })
        .collect();
    if let Some((bps, run)) = &b.shared_total {
        out.push(format!(
            "shared memory: {} in all (the highest aggregate of a membw run not oversubscribed, run {}), divided among the ranks that stream at once, never above a rank's own",
            format_gbps(*bps),
            short(run)
        ));
    }
    if let Some((bps, run)) = b.gpu.as_ref().filter(|_| predictions.iter().any(|p| p.cuda)) {
        out.push(format!("a (cuda) run: the GPU's memory bandwidth {} (device-read, run {}); its all-reduces add the pageable copies off the GPU and back", format_gbps(*bps), short(run)));
    }
    let skews: BTreeSet<String> = predictions.iter().filter_map(|p| p.comm.as_ref()?.skew.as_ref()).map(skew_line).collect();
    out.extend(skews);
    out.push(format!("tolerance {}: past it the row names the first of these that holds: an oversubscribed launch (its caveat), overlapped pieces measured slower than predicted, the communication's own failed assumption where the measured communication in place of the predicted brings the step within tolerance, an unsplit run of the model itself outside the tolerance in the same direction", tolerance(TOLERANCE)));
    out.push(strategy_line(predictions));
    out
}

fn skew_line(s: &Skew) -> String {
    format!(
        "skew of {} at world {} ({} message, nearest measured size): {} per call, slowest-rank median − the op's own median, run {}",
        s.op.name(),
        s.world,
        format_bytes(s.size_bytes as f64),
        format_seconds(s.skew_s),
        short(&s.run)
    )
}

fn strategy_line(predictions: &[StepPrediction]) -> String {
    let present: BTreeSet<&str> = predictions.iter().map(|p| p.strategy.name()).collect();
    let mut parts = Vec::new();
    let has = |s: Strategy| present.contains(s.name());
    if has(Strategy::Data) || predictions.iter().any(|p| p.world == 1) {
        parts.push("one rank or a data replica: m passes over the whole model per round");
    }
    if has(Strategy::Tensor) {
        parts.push("tensor: each rank's share of the blocks and KV heads (the head whole when replicated), 2L all-reduces of one row and the logits' all-gather when the head is split; overlapped: only the last of k pieces exposed");
    }
    if has(Strategy::Pipeline) {
        parts.push("pipeline: max(one pass through the stages and their hops, m × the busiest stage), min(m, p) stages streaming at once");
    }
    if has(Strategy::Expert) {
        parts.push("expert: the busiest rank's routed experts at the measured prefill imbalance, 2L all-to-alls");
    }
    if has(Strategy::Context) {
        parts.push("context: the decode layout after the prefill (rank 0 alone, or a tensor split)");
    }
    format!("rounds: {}", parts.join("; "))
}

/// The context splits' prefills as a register table (None without one to predict).
pub fn context_prefill_table(manifests: &[Manifest]) -> Option<Table> {
    let mut predictions = predict_prefills(manifests);
    if predictions.is_empty() {
        return None;
    }
    predictions.sort_by(|a, b| {
        (&a.model, a.world, a.cut.name(), a.decodes_on.name(), &a.run_id).cmp(&(
            &b.model,
            b.world,
            b.cut.name(),
            b.decodes_on.name(),
            &b.run_id,
        ))
    });
    let unsplit: BTreeSet<String> = predictions.iter().map(|p| short(&p.unsplit_run).to_string()).collect();
    Some(Table {
        id: "predicted-context-prefill".into(),
        title: "Context prefill: predicted from the unsplit prefill and the link fits, against measurement".into(),
        caption: with_tolerance("MODELLED against MEASURED: a context split's prefill predicted as the unsplit prefill of the same model and prompt (on the split's threads per rank where such a run exists) shared evenly by the ranks, plus the ring (L(p − 1) point-to-point messages carrying the busiest sender's modelled key/value bytes) and the hand-off of the cache (to rank 0: p − 1 messages it receives all of; to a tensor split: 2L all-to-alls, each rank sending its p-th), with the 2-rank point-to-point (else all-reduce) and all-to-all fits. error = (predicted − measured) / measured; past {tolerance} the last column names the assumption that did not hold, or says that none is known."),
        columns: ["model", "world", "cut", "decodes on", "prefill measured", "prefill predicted", "error", "ring measured", "ring predicted", "hand-off measured", "hand-off predicted", "assumption not holding"]
            .iter()
            .map(|c| c.to_string())
            .collect(),
        rows: predictions.iter().map(prefill_row).collect(),
        provenance: vec![format!("the unsplit prefill: run {}", unsplit.into_iter().collect::<Vec<_>>().join(", ")), "ring and hand-off measured: seconds inside them, waiting for neighbours included (slowest rank)".into()],
    })
}

fn prefill_row(p: &PrefillPrediction) -> Vec<Cell> {
    vec![
        Cell::text(&p.model),
        Cell::Count(p.world.into()),
        Cell::text(p.cut.name()),
        Cell::text(p.decodes_on.name()),
        Cell::Seconds(p.measured_s),
        Cell::Seconds(p.predicted_s()),
        Cell::Change(p.error),
        Cell::Seconds(p.measured_ring_s),
        Cell::Seconds(p.ring_s),
        Cell::Seconds(p.measured_handoff_s),
        Cell::Seconds(p.handoff_s),
        outcome_cell(&p.outcome),
    ]
}
