//! Typed rows read from manifests' summaries (the agreed formats in the brief), so
//! tables, figures and caveats read one parse of each summary.

use crate::manifest::{Manifest, Status};
use crate::spec::schema::Kind;
use serde_json::Value;

pub use crate::collect::stats::Stats;

/// The first 12 hex digits of a run identity.
pub fn short(run_id: &str) -> String {
    run_id.chars().take(12).collect()
}

/// One collective measurement: an op at a size, world and link.
#[derive(Debug, Clone, PartialEq)]
pub struct CollRow {
    /// Experiment.
    pub experiment: String,
    /// Operation name.
    pub op: String,
    /// Ranks.
    pub world: u32,
    /// Link name.
    pub link: String,
    /// Message size in bytes.
    pub size: u64,
    /// Time per iteration (slowest rank).
    pub time: Stats,
    /// Spread between ranks.
    pub spread: Option<Stats>,
    /// The op's own time (back to back, mean over ranks), where measured.
    pub op_time: Option<Stats>,
    /// Slowest rank's median minus the op's own median: the waiting a step pays.
    pub skew: Option<f64>,
    /// Algorithm bandwidth, bytes/s.
    pub algbw: f64,
    /// Bus bandwidth, bytes/s.
    pub busbw: f64,
    /// Bus bandwidth factor.
    pub factor: f64,
    /// Wrong results.
    pub wrong: u64,
    /// Run identity (12 hex).
    pub run: String,
}

/// A fitted alpha-beta line and its held-out checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Experiment.
    pub experiment: String,
    /// Operation fitted.
    pub op: String,
    /// Ranks.
    pub world: u32,
    /// Link.
    pub link: String,
    /// The fitted line's intercept: the time of an empty message of this op at this world.
    pub intercept_s: f64,
    /// The fitted line's slope, seconds per byte of message.
    pub slope_s_per_byte: f64,
    /// The link's latency per ring step (α = intercept / steps of the op), seconds.
    pub alpha_s: f64,
    /// The link's bandwidth (β = bandwidth factor of the op / slope), bytes/s.
    pub beta_bps: f64,
    /// Largest size used in the fit.
    pub fit_max_bytes: u64,
    /// (size, predicted s, measured s, error) of held-out sizes.
    pub heldout: Vec<(u64, f64, f64, f64)>,
    /// Run identity (12 hex).
    pub run: String,
}

impl Fit {
    /// The fitted line's time of a message of `bytes`: intercept + slope × bytes (the line
    /// passes through the points it was fitted to; α and β are its per-step reading).
    pub fn predict(&self, bytes: f64) -> f64 {
        self.intercept_s + self.slope_s_per_byte.max(0.0) * bytes
    }
}

/// One memory-bandwidth run.
#[derive(Debug, Clone, PartialEq)]
pub struct MembwRow {
    /// Experiment.
    pub experiment: String,
    /// Processes streaming at once.
    pub processes: u64,
    /// Threads each.
    pub threads: u64,
    /// Buffer bytes per process.
    pub buffer: u64,
    /// Aggregate bandwidth, bytes/s.
    pub aggregate: Stats,
    /// Per-process bandwidth, bytes/s.
    pub per_process: Option<Stats>,
    /// parlab's STREAM-class read: per-process bandwidth, bytes/s, where measured.
    pub stream_per_process: Option<Stats>,
    /// The roofline's source (`stream` or `torch-sum`), where recorded.
    pub roofline: Option<String>,
    /// Run identity (12 hex).
    pub run: String,
}

/// One decode layout.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeRow {
    /// Experiment.
    pub experiment: String,
    /// Model name.
    pub model: String,
    /// Dtype name.
    pub dtype: String,
    /// Strategy.
    pub strategy: String,
    /// Ranks.
    pub world: u32,
    /// Head placement.
    pub head: String,
    /// Sequences in flight.
    pub sequences: u64,
    /// Link.
    pub link: String,
    /// Step time.
    pub step: Stats,
    /// Communication time per step.
    pub comm: Option<Stats>,
    /// Compute time per step.
    pub compute: Option<Stats>,
    /// Prefill time.
    pub prefill: Option<Stats>,
    /// Tokens per second.
    pub tokens_per_s: Option<Stats>,
    /// Collectives per step.
    pub collectives: Option<u64>,
    /// Exactness: tokens equal.
    pub tokens_equal: Option<bool>,
    /// Exactness: largest logit difference.
    pub max_logit_diff: Option<f64>,
    /// Exactness: smallest top-2 margin.
    pub min_top2_margin: Option<f64>,
    /// Timed repetitions.
    pub repetitions: u32,
    /// Run identity (12 hex).
    pub run: String,
}

/// One dispatch measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchRow {
    /// Experiment.
    pub experiment: String,
    /// Ranks.
    pub world: u32,
    /// Tokens dispatched.
    pub tokens: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time.
    pub time: Stats,
    /// Run identity (12 hex).
    pub run: String,
}

/// Every typed row of the measured (status ok) manifests, and the ok runs whose summary could not be read.
#[derive(Debug, Default)]
pub struct Facts {
    /// Collective rows.
    pub collectives: Vec<CollRow>,
    /// Fits.
    pub fits: Vec<Fit>,
    /// Memory bandwidth rows.
    pub membw: Vec<MembwRow>,
    /// Decode rows.
    pub decode: Vec<DecodeRow>,
    /// Dispatch rows.
    pub dispatch: Vec<DispatchRow>,
    /// Labels of ok runs that carried no summary the register can read.
    pub unreadable: Vec<String>,
}

impl Facts {
    /// Reads the rows of every ok, launched manifest.
    pub fn read(list: &[Manifest]) -> Facts {
        let mut f = Facts::default();
        for m in list.iter().filter(|m| m.status == Status::Ok && m.kind != Kind::Model) {
            let before = f.count();
            f.read_one(m);
            if f.count() == before {
                f.unreadable.push(format!("{} ({})", m.plan.label(), short(&m.run_id)));
            }
        }
        f
    }

    fn count(&self) -> usize {
        self.collectives.len() + self.fits.len() + self.membw.len() + self.decode.len() + self.dispatch.len()
    }

    fn read_one(&mut self, m: &Manifest) {
        let s = &m.summary;
        if let Some(list) = s.get("collectives").and_then(Value::as_array) {
            self.collectives.extend(list.iter().filter_map(|e| coll_row(m, e)));
        }
        match s.get("fit") {
            Some(Value::Array(fits)) => self.fits.extend(fits.iter().filter_map(|e| fit(m, e))),
            Some(v) => self.fits.extend(fit(m, v)),
            None => {}
        }
        if let Some(v) = s.get("membw") {
            self.membw.extend(membw_row(m, v));
        }
        if let Some(v) = s.get("decode") {
            self.decode.extend(decode_row(m, v));
        }
        if let Some(list) = s.get("dispatch").and_then(Value::as_array) {
            self.dispatch.extend(list.iter().filter_map(|e| dispatch_row(m, e)));
        }
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(|x| x.as_str().map(str::to_string).or_else(|| x.as_u64().map(|n| n.to_string())))
}

fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn coll_row(m: &Manifest, e: &Value) -> Option<CollRow> {
    Some(CollRow {
        experiment: m.experiment.clone(),
        op: text(e, "op")?,
        world: uint(e, "world").map_or(m.layout.world, |w| w as u32),
        link: text(e, "link").unwrap_or_else(|| m.plan.link.clone()),
        size: uint(e, "size_bytes")?,
        time: Stats::read(e.get("time_s"))?,
        spread: Stats::read(e.get("rank_spread_s")),
        op_time: Stats::read(e.get("op_time_s")),
        skew: num(e, "skew_s"),
        algbw: num(e, "algbw_Bps").unwrap_or(f64::NAN),
        busbw: num(e, "busbw_Bps").unwrap_or(f64::NAN),
        factor: num(e, "busbw_factor").unwrap_or(f64::NAN),
        wrong: uint(e, "wrong").unwrap_or(0),
        run: short(&m.run_id),
    })
}

fn fit(m: &Manifest, e: &Value) -> Option<Fit> {
    let heldout = e
        .get("heldout")
        .and_then(Value::as_array)
        .map(|h| {
            h.iter()
                .filter_map(|x| Some((uint(x, "size_bytes")?, num(x, "predicted_s")?, num(x, "measured_s")?, num(x, "error")?)))
                .collect()
        })
        .unwrap_or_default();
    let op = text(e, "op")?;
    let world = uint(e, "world").map_or(m.layout.world, |w| w as u32);
    let (alpha_s, beta_bps) = (num(e, "alpha_s")?, num(e, "beta_Bps")?);
    // Manifests before the line was stored: rebuild it from the per-step constants.
    let (steps, factor) = crate::spec::schema::Op::ALL
        .into_iter()
        .find(|o| o.name() == op)
        .map_or((1.0, 1.0), |o| crate::costmodel::link::op_factors(o, world));
    let intercept_s = num(e, "intercept_s").unwrap_or(alpha_s * steps);
    let slope_s_per_byte = num(e, "slope_s_per_byte").unwrap_or(if beta_bps > 0.0 { factor / beta_bps } else { 0.0 });
    Some(Fit {
        experiment: m.experiment.clone(),
        op,
        world,
        link: text(e, "link").unwrap_or_else(|| m.plan.link.clone()),
        intercept_s,
        slope_s_per_byte,
        alpha_s,
        beta_bps,
        fit_max_bytes: uint(e, "fit_max_bytes").unwrap_or(0),
        heldout,
        run: short(&m.run_id),
    })
}

fn membw_row(m: &Manifest, e: &Value) -> Option<MembwRow> {
    Some(MembwRow {
        experiment: m.experiment.clone(),
        processes: uint(e, "processes").unwrap_or(m.layout.world as u64),
        threads: uint(e, "threads").unwrap_or(m.plan.threads_per_rank as u64),
        buffer: uint(e, "buffer_bytes").unwrap_or(0),
        aggregate: Stats::read(e.get("aggregate_Bps"))?,
        per_process: Stats::read(e.get("per_process_Bps")),
        stream_per_process: Stats::read(e.pointer("/stream/per_process_Bps")),
        roofline: e.pointer("/roofline/source").and_then(Value::as_str).map(str::to_string),
        run: short(&m.run_id),
    })
}

fn decode_row(m: &Manifest, e: &Value) -> Option<DecodeRow> {
    let exact = m.answer.get("exactness");
    let ex = |k: &str| exact.and_then(|x| x.get(k));
    let dtype = match &m.plan.workload {
        crate::spec::plan::Workload::Decode { dtype, .. } => dtype.name().to_string(),
        _ => String::new(),
    };
    Some(DecodeRow {
        experiment: m.experiment.clone(),
        model: m.plan.model.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
        dtype,
        strategy: text(e, "strategy").unwrap_or_else(|| m.layout.strategy.name().into()),
        world: uint(e, "world").map_or(m.layout.world, |w| w as u32),
        head: text(e, "head").unwrap_or_else(|| m.layout.head.map_or("-".into(), |h| format!("{h:?}").to_lowercase())),
        sequences: uint(e, "sequences").or(m.layout.sequences.map(u64::from)).unwrap_or(1),
        link: m.plan.link.clone(),
        step: Stats::read(e.get("step_s"))?,
        comm: Stats::read(e.get("comm_s")),
        compute: Stats::read(e.get("compute_s")),
        prefill: Stats::read(e.get("prefill_s")),
        tokens_per_s: Stats::read(e.get("tokens_per_s")),
        collectives: uint(e, "collectives_per_step"),
        tokens_equal: ex("tokens_equal").and_then(Value::as_bool),
        max_logit_diff: ex("max_logit_diff").and_then(Value::as_f64),
        min_top2_margin: ex("min_top2_margin").and_then(Value::as_f64),
        repetitions: m.plan.repetitions,
        run: short(&m.run_id),
    })
}

fn dispatch_row(m: &Manifest, e: &Value) -> Option<DispatchRow> {
    Some(DispatchRow {
        experiment: m.experiment.clone(),
        world: m.layout.world,
        tokens: uint(e, "tokens")?,
        bytes: uint(e, "bytes").unwrap_or(0),
        time: Stats::read(e.get("time_s"))?,
        run: short(&m.run_id),
    })
}

/// The position of an op in the sweep order (unknown ops last).
pub fn op_order(op: &str) -> usize {
    crate::spec::schema::Op::ALL.iter().position(|o| o.name() == op).unwrap_or(usize::MAX)
}
