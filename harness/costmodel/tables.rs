//! The MODELLED tables of a `kind: model` run: shapes, plans per device and link,
//! break-even latencies, link constants, traffic, bubbles and KV sharing. Every figure
//! comes from the functions of this module's siblings; captions say it is arithmetic.

use super::catalogue::CatalogueError;
use super::catalogue::{Catalogue, DeviceEntry, LinkEntry};
use super::link::{allreduce_time, crossover_bytes, op_factors};
use super::plan::{
    self, alpha_star_tp2, bubble_fraction, pp_bytes_per_token, single_device_step_s, tp_break_even_allreduce_s, Device, PlanInput,
    PlanProblem,
};
use super::shape::{shape_from_config, ModelShape, ShapeError};
use crate::model::{resolve_model, ModelConfig};
use crate::spec::plan::Workload;
use crate::spec::schema::{Dtype, Op, Strategy};
use crate::table::{Cell, Table};
use crate::units::{format_bytes, format_gbps, format_seconds};

/// What every modelled table says about itself.
pub const ARITHMETIC: &str = "Arithmetic, not measurement (MODELLED): a roofline of memory-bound decode and the alpha-beta link model; it ignores overlap of communication with compute, batching, activations and the sampling step.";

/// Why the MODELLED tables of a run could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// The run is not a `kind: model` run.
    #[error("not a `kind: model` run")]
    NotModelRun,
    /// The cost model's catalogue could not be read.
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    /// A model's config.json could not be read.
    #[error(transparent)]
    Config(#[from] crate::model::ModelError),
    /// A model's config could not be shaped.
    #[error("{name}: {cause}")]
    Shape {
        /// The model as the spec names it.
        name: String,
        /// Why it has no shape.
        cause: ShapeError,
    },
    /// A device the spec names is not in the catalogue.
    #[error("device `{0}` is not in models/devices.yaml")]
    UnknownDevice(String),
    /// A link the spec names is not in the catalogue.
    #[error("link `{0}` is not in models/links.yaml")]
    UnknownLink(String),
}

/// A model of the spec, read and shaped.
pub struct NamedShape {
    /// The spec's name for it.
    pub name: String,
    /// Its shape.
    pub shape: ModelShape,
    /// Where its numbers came from.
    pub provenance: String,
    /// The longest sequence its position table holds (0: neither its config.json nor
    /// transformers' default for its type says).
    pub max_positions: u32,
    /// Where `max_positions` came from.
    pub positions_from: crate::model::config::PositionsFrom,
    /// Its `model_type`.
    pub model_type: String,
    /// The attention window transformers gives it ([`ModelConfig::sliding_window`]), which the
    /// cost model does not model; None where it has none.
    pub sliding_window: Option<u64>,
    /// sha256 of its config.json (canonical JSON), the shape's identity.
    pub config_digest: String,
}

/// The inputs of a `kind: model` run, resolved against the catalogue and the model folders.
pub struct ModelRun {
    /// Models.
    pub models: Vec<NamedShape>,
    /// Devices.
    pub devices: Vec<DeviceEntry>,
    /// Links.
    pub links: Vec<LinkEntry>,
    /// Strategies.
    pub strategies: Vec<Strategy>,
    /// World sizes.
    pub worlds: Vec<u32>,
    /// Sequences in flight.
    pub sequences: Vec<u32>,
    /// Dtypes.
    pub dtypes: Vec<Dtype>,
    /// Context tokens.
    pub context: u64,
    /// Expert routing imbalance of expert plans (1: even).
    pub imbalance: f64,
}

/// Reads a model by name or folder and computes its shape.
pub fn load_shape(name: &str) -> Result<NamedShape, TablesError> {
    let loc = resolve_model(name);
    let cfg = ModelConfig::read(&loc.dir)?;
    let shape = shape_from_config(&cfg).map_err(|cause| TablesError::Shape { name: name.to_string(), cause })?;
    let provenance = shape_provenance(name, &loc.dir, &cfg.digest);
    Ok(NamedShape {
        name: name.to_string(),
        shape,
        provenance,
        max_positions: cfg.max_positions,
        positions_from: cfg.positions_from,
        sliding_window: cfg.sliding_window(),
        model_type: cfg.model_type,
        config_digest: cfg.digest,
    })
}

/// Where a model's shape came from: its config.json in `dir` and that file's digest.
fn shape_provenance(name: &str, dir: &std::path::Path, config_digest: &str) -> String {
    format!(
        "model {name}: shape from {} (sha256 {}), parameters by formula",
        dir.join("config.json").display(),
        crate::identity::short(config_digest)
    )
}

impl NamedShape {
    /// The context this model is modelled at: `context`, or the most positions its table holds
    /// where that is fewer (a model cannot attend past its position table).
    pub fn context_at(&self, context: u64) -> u64 {
        match self.max_positions {
            0 => context,
            most => context.min(u64::from(most)),
        }
    }

    /// The same shape named for the register by the spec of `plan_spec`
    /// (`model::resolve::shown`): a folder by its path from the spec's folder, not where the
    /// checkout lies, in its name and its provenance. A catalogue name is unchanged.
    pub fn shown_for(mut self, plan_spec: &std::path::Path) -> Self {
        let shown = crate::model::resolve::shown(&self.name, plan_spec);
        if shown != self.name {
            self.provenance = shape_provenance(&shown, std::path::Path::new(&shown), &self.config_digest);
            self.name = shown;
        }
        self
    }
}

impl ModelRun {
    /// Resolves a `kind: model` run's workload, its folder models named as its spec shows
    /// them (`NamedShape::shown_for`), as the register prints them.
    pub fn of_plan(plan: &crate::spec::plan::RunPlan, catalogue: &Catalogue) -> Result<Self, TablesError> {
        let mut run = Self::from_workload(&plan.workload, catalogue)?;
        run.models = run.models.into_iter().map(|m| m.shown_for(&plan.spec_path)).collect();
        Ok(run)
    }

    /// Resolves a `kind: model` workload.
    pub fn from_workload(w: &Workload, catalogue: &Catalogue) -> Result<Self, TablesError> {
        let Workload::Model { params, models, strategies, worlds, links, sequences, dtypes } = w else {
            return Err(TablesError::NotModelRun);
        };
        let models = models.iter().map(|m| load_shape(m)).collect::<Result<Vec<_>, _>>()?;
        let devices = params
            .devices
            .iter()
            .map(|d| catalogue.device(d).cloned().ok_or_else(|| TablesError::UnknownDevice(d.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let links = links
            .iter()
            .map(|l| catalogue.link(l).cloned().ok_or_else(|| TablesError::UnknownLink(l.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let dtypes = if dtypes.is_empty() { vec![Dtype::Float16] } else { dtypes.clone() };
        let sequences = if sequences.is_empty() { vec![1] } else { sequences.clone() };
        Ok(ModelRun {
            models,
            devices,
            links,
            strategies: strategies.clone(),
            worlds: worlds.clone(),
            sequences,
            dtypes,
            context: params.context,
            imbalance: params.imbalance,
        })
    }

    /// The worlds (of those asked, above `from`) over which `m` splits by tensor parallelism.
    fn tensor_worlds<'a>(&'a self, m: &'a NamedShape, from: u32) -> impl Iterator<Item = u32> + 'a {
        self.worlds.iter().copied().filter(move |&p| p >= from && m.shape.tensor_split_problem(p.into()).is_none())
    }

    /// The captions' sentence naming the models that attend over a sliding window, whose KV
    /// cache is counted at the whole context all the same; empty when there are none.
    fn window_note(&self) -> String {
        let windowed: Vec<String> =
            self.models.iter().filter_map(|m| m.sliding_window.map(|w| format!("{} ({w} tokens)", m.name))).collect();
        match windowed.is_empty() {
            true => String::new(),
            false => format!(
                " Models attending over a sliding window have their KV cache counted at the whole context all the same (not modelled; past the window it is overstated): {}.",
                windowed.join(", ")
            ),
        }
    }

    /// The captions' sentence naming the tensor splits left out (a model's heads or width do
    /// not split over that world); empty when there are none.
    fn refused_note(&self) -> String {
        let refused: Vec<String> = self
            .models
            .iter()
            .flat_map(|m| {
                self.worlds.iter().filter_map(|&p| m.shape.tensor_split_problem(p.into()).map(|why| format!("{} at {p} ({why})", m.name)))
            })
            .collect();
        match refused.is_empty() {
            true => String::new(),
            false => format!(" Tensor splits a model cannot make have no tensor figures here: {}.", refused.join(", ")),
        }
    }

    /// The captions' sentence naming the models taken at fewer tokens than the context (their
    /// position tables hold fewer); empty when there are none.
    fn clipped_note(&self) -> String {
        let clipped: Vec<String> = self
            .models
            .iter()
            .filter(|m| m.context_at(self.context) < self.context)
            .map(|m| format!("{} at {}", m.name, m.context_at(self.context)))
            .collect();
        match clipped.is_empty() {
            true => String::new(),
            false => format!(
                " Models whose position table holds fewer than {} tokens are taken at their most: {}.",
                self.context,
                clipped.join(", ")
            ),
        }
    }

    fn provenance(&self, models: bool, devices: bool, links: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if models {
            lines.extend(self.models.iter().map(|m| m.provenance.clone()));
        }
        if devices {
            lines.extend(self.devices.iter().flat_map(|d| d.provenance_lines()));
        }
        if links {
            lines.extend(self.links.iter().flat_map(|l| l.provenance_lines()));
        }
        lines
    }

    /// Every table of the run.
    pub fn tables(&self) -> Vec<Table> {
        let mut out = vec![self.shapes_table(), self.kv_table(), self.traffic_table(), self.links_table()];
        for d in &self.devices {
            for l in &self.links {
                out.push(self.plans_table(d, l));
            }
        }
        out.push(self.break_even_table());
        out.push(self.bubbles_table());
        out
    }

    fn table(&self, id: &str, title: &str, what: &str, columns: &[&str], rows: Vec<Vec<Cell>>, provenance: Vec<String>) -> Table {
        Table {
            id: id.into(),
            title: title.into(),
            caption: format!("{what} {ARITHMETIC}"),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
            provenance,
        }
    }

    fn shapes_table(&self) -> Table {
        let mut rows = Vec::new();
        for m in &self.models {
            for &dt in &self.dtypes {
                let s = &m.shape;
                let b = dt.bytes();
                rows.push(vec![
                    Cell::text(&m.name),
                    Cell::text(&s.model_type),
                    Cell::Large(s.params),
                    Cell::Count(s.layers),
                    Cell::Count(s.heads),
                    Cell::Count(s.kv_heads),
                    Cell::Count(s.hidden),
                    Cell::Count(s.vocab),
                    Cell::Flag(s.tied_embeddings),
                    Cell::text(dt.name()),
                    Cell::Bytes(s.stored_bytes(b) as f64),
                    Cell::Bytes(s.streamed_bytes(b) as f64),
                    Cell::Bytes(s.kv_bytes_per_token(b) as f64),
                    Cell::Bytes(m.context_at(self.context) as f64 * s.kv_bytes_per_token(b) as f64),
                ]);
            }
        }
        let kv_at = format!("KV at {} tokens", self.context);
        self.table(
            "model-shapes",
            "Model shapes: stored against streamed bytes",
            &format!(
                "Parameters by formula from config.json; stored bytes are what a device holds, streamed bytes what one decode step reads (one embedding row, the whole output head).{}{}",
                self.clipped_note(),
                self.window_note()
            ),
            &["model", "type", "parameters", "layers", "heads", "KV heads", "hidden", "vocab", "tied", "dtype", "stored", "streamed/step", "KV/token", &kv_at],
            rows,
            self.provenance(true, false, false),
        )
    }

    fn kv_table(&self) -> Table {
        let mut rows = Vec::new();
        for m in &self.models {
            for p in self.tensor_worlds(m, 1) {
                let dt = self.dtypes[0];
                let share = m.shape.kv_share(p as u64, dt.bytes());
                rows.push(vec![
                    Cell::text(&m.name),
                    Cell::Count(p.into()),
                    Cell::Count(m.shape.kv_heads),
                    Cell::Count(share.kv_heads_per_device),
                    Cell::Count(share.copies_of_each_head),
                    Cell::Flag(share.capped),
                    Cell::Bytes(share.bytes_per_token_per_device as f64),
                    Cell::Bytes(m.context_at(self.context) as f64 * share.bytes_per_token_per_device as f64),
                ]);
            }
        }
        let at = format!("KV/device at {} tokens ({})", self.context, self.dtypes[0].name());
        self.table(
            "model-kv-sharing",
            "KV cache under tensor parallelism: sharing by head, capped by the KV heads",
            &format!(
                "Tensor parallelism divides the KV cache by heads; past the number of KV heads each device holds a copy of a head and the cache per device stops falling.{}{}{}",
                self.clipped_note(),
                self.window_note(),
                self.refused_note()
            ),
            &["model", "world", "KV heads", "KV heads/device", "copies of each head", "capped", "KV/token/device", &at],
            rows,
            self.provenance(true, false, false),
        )
    }

    fn traffic_table(&self) -> Table {
        let mut rows = Vec::new();
        for m in &self.models {
            let s = &m.shape;
            for &dt in &self.dtypes {
                for &p in self.worlds.iter().filter(|&&p| p > 1) {
                    let b = dt.bytes();
                    // A tensor split the model cannot make has no tensor figures; its pipeline's stand.
                    let splits = s.tensor_split_problem(p.into()).is_none();
                    let tensor = |c: Cell| if splits { c } else { Cell::Missing };
                    rows.push(vec![
                        Cell::text(&m.name),
                        Cell::text(dt.name()),
                        Cell::Count(p.into()),
                        tensor(Cell::Count(2 * s.layers)),
                        tensor(Cell::Bytes((s.hidden * b) as f64)),
                        tensor(Cell::Bytes(plan::tp_wire_bytes_per_token(s.hidden, s.layers, p, b))),
                        Cell::Bytes(pp_bytes_per_token(s.hidden, p, b) as f64),
                    ]);
                }
            }
        }
        self.table(
            "model-traffic",
            "Traffic per generated token",
            &format!("Tensor: two ring all-reduces of d·s per layer, wire bytes per rank 2(p-1)/p each (the logits gather is not included); pipeline: one d·s activation per stage boundary.{}", self.refused_note()),
            &["model", "dtype", "world", "all-reduces/token (tensor)", "all-reduce size", "tensor wire bytes/rank/token", "pipeline bytes/token"],
            rows,
            self.provenance(true, false, false),
        )
    }

    fn links_table(&self) -> Table {
        let mut rows = Vec::new();
        for l in &self.links {
            for &p in self.worlds.iter().filter(|&&p| p > 1) {
                let link = l.link();
                rows.push(vec![
                    Cell::text(&l.name),
                    Cell::Seconds(link.alpha_s),
                    Cell::BytesPerSec(link.beta_bps),
                    Cell::Count(p.into()),
                    Cell::Number(op_factors(Op::AllReduce, p).0),
                    Cell::Bytes(crossover_bytes(link, p)),
                    Cell::Seconds(allreduce_time(link, 8192.0, p)),
                    Cell::Seconds(allreduce_time(link, 32.0 * 1024.0 * 1024.0, p)),
                ]);
            }
        }
        self.table(
            "model-links",
            "Links: ring all-reduce times and the latency/bandwidth crossover",
            "T = 2(p-1)α + 2(p-1)/p·S/β; below S* = p·α·β an all-reduce is a latency problem. 8 KiB is a decode all-reduce of d=4096 in 16-bit, 32 MiB a 4,096-token prefill's.",
            &["link", "α", "β", "world", "latency steps", "crossover S*", "all-reduce 8 KiB", "all-reduce 32 MiB"],
            rows,
            self.provenance(false, false, true),
        )
    }

    fn plans_table(&self, device: &DeviceEntry, link: &LinkEntry) -> Table {
        let mut rows = Vec::new();
        let mut omitted = std::collections::BTreeSet::new();
        let mut dense = std::collections::BTreeSet::new();
        let dev = Device { memory_bytes: device.memory_bytes, bandwidth_bps: device.bandwidth_bps() };
        for m in &self.models {
            for &dt in &self.dtypes {
                for &p in &self.worlds {
                    let strategies: Vec<Strategy> =
                        if p == 1 { self.strategies.iter().take(1).copied().collect() } else { self.strategies.clone() };
                    for st in strategies {
                        for &seq in &self.sequences {
                            let input = PlanInput {
                                shape: &m.shape,
                                dtype_bytes: dt.bytes(),
                                device: dev,
                                link: link.link(),
                                strategy: st,
                                world: p,
                                context: m.context_at(self.context),
                                sequences: seq,
                                imbalance: self.imbalance,
                            };
                            let label = if p == 1 { "single device".to_string() } else { st.name().to_string() };
                            match plan::plan(&input) {
                                Ok(pl) => rows.push(plan_row(&m.name, dt, &label, p, seq, &pl)),
                                Err(PlanProblem::DenseModel) => {
                                    dense.insert(m.name.clone());
                                }
                                Err(why) => {
                                    omitted.insert(format!("{} {} world {p}: {why}", m.name, st.name()));
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut what = format!(
            "Decode of one token at {} tokens of context on {} ({}, {}) joined by {} (α {}, β {}); sequences in flight are served in turn.",
            self.context,
            device.name,
            format_bytes(dev.memory_bytes as f64),
            format_gbps(dev.bandwidth_bps),
            link.name,
            format_seconds(link.link().alpha_s),
            format_gbps(link.link().beta_bps)
        );
        what.push_str(&self.clipped_note());
        if self.imbalance != 1.0 {
            what.push_str(&format!(
                " Expert plans route unevenly: the busiest device gets {} times its even share of the routed tokens (spec `imbalance`), streams that share of the experts and receives that many rows.",
                crate::units::sig3(self.imbalance)
            ));
        }
        if !dense.is_empty() {
            let names: Vec<String> = dense.into_iter().collect();
            what.push_str(&format!(" Expert parallelism does not apply to dense models, so not shown for: {}.", names.join(", ")));
        }
        if !omitted.is_empty() {
            let list: Vec<String> = omitted.into_iter().collect();
            what.push_str(&format!(" Splits that cannot run, so not shown: {}.", list.join("; ")));
        }
        let mut prov = self.provenance(true, false, false);
        prov.extend(device.provenance_lines());
        prov.extend(link.provenance_lines());
        self.table(
            &format!("model-plans-{}-{}", device.name, link.name),
            &format!("Decode plans on {} over {}", device.name, link.name),
            &what,
            &[
                "model",
                "dtype",
                "strategy",
                "world",
                "sequences",
                "fits",
                "weights/device",
                "KV/device",
                "memory time",
                "communication",
                "step",
                "round",
                "tokens/s",
                "collectives/token",
                "wire bytes/rank/token",
            ],
            rows,
            prov,
        )
    }

    fn break_even_table(&self) -> Table {
        let mut rows = Vec::new();
        for m in &self.models {
            let s = &m.shape;
            for &dt in &self.dtypes {
                for d in &self.devices {
                    let t1 = single_device_step_s(s, dt.bytes(), m.context_at(self.context), d.bandwidth_bps());
                    for p in self.tensor_worlds(m, 2) {
                        let limit = tp_break_even_allreduce_s(t1, p, s.layers);
                        let act = (s.hidden * dt.bytes()) as f64;
                        let eq147 = if p == 2 {
                            Cell::Seconds(alpha_star_tp2(s.stored_bytes(dt.bytes()) as f64, s.layers, d.bandwidth_bps()))
                        } else {
                            Cell::Missing
                        };
                        let mut row = vec![
                            Cell::text(&m.name),
                            Cell::text(dt.name()),
                            Cell::text(&d.name),
                            Cell::Seconds(t1),
                            Cell::Count(s.layers),
                            Cell::Count(p.into()),
                            Cell::Seconds(limit),
                            eq147,
                        ];
                        for l in &self.links {
                            let t = allreduce_time(l.link(), act, p);
                            row.push(Cell::noted(Cell::Seconds(t), if t < limit { "pays" } else { "does not pay" }));
                        }
                        rows.push(row);
                    }
                }
            }
        }
        let mut cols: Vec<String> = [
            "model",
            "dtype",
            "device",
            "T1 (one device)",
            "layers",
            "world",
            "break-even all-reduce",
            "eq 1.4.7 α* (stored weights, no KV)",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        cols.extend(self.links.iter().map(|l| format!("all-reduce on {}", l.name)));
        let refs: Vec<&str> = cols.iter().map(String::as_str).collect();
        self.table(
            "model-break-even",
            "How much latency per all-reduce a tensor split can afford",
            &format!("Tensor parallelism over p devices beats one device that could hold the model while each all-reduce takes less than T1(1-1/p)/(2L) (the final gather ignored); at p=2 from the weight bytes alone this is eq 1.4.7, α* = M_w/(4·L·B_mem). T1 includes the KV cache at the context length.{}{}", self.clipped_note(), self.refused_note()),
            &refs,
            rows,
            self.provenance(true, true, true),
        )
    }

    fn bubbles_table(&self) -> Table {
        let mut rows = Vec::new();
        for &p in self.worlds.iter().filter(|&&p| p > 1) {
            for &m in &self.sequences {
                let round = plan::pipeline_round_time(m, p, 1.0);
                rows.push(vec![
                    Cell::Count(p.into()),
                    Cell::Count(m.into()),
                    Cell::Fraction(bubble_fraction(p, m)),
                    Cell::Number(round),
                    // Each stage works m of the round's stage-times.
                    Cell::Fraction(m as f64 / round),
                ]);
            }
        }
        self.table(
            "model-bubbles",
            "Pipeline bubbles and decode rounds",
            "GPipe's bubble (P-1)/(M+P-1) for P stages and M micro-batches; in decode the unit that fills the pipeline is a sequence, and a round in which m sequences each advance a token takes max(m, p) stage-times, of which each stage works m.",
            &["stages", "micro-batches or sequences", "bubble", "decode round (stage-times)", "stages busy"],
            rows,
            Vec::new(),
        )
    }
}

fn plan_row(model: &str, dt: Dtype, label: &str, p: u32, seq: u32, pl: &plan::Plan) -> Vec<Cell> {
    vec![
        Cell::text(model),
        Cell::text(dt.name()),
        Cell::text(label),
        Cell::Count(p.into()),
        Cell::Count(seq.into()),
        Cell::Flag(pl.fits),
        Cell::Bytes(pl.stored_bytes_per_device as f64),
        Cell::Bytes(pl.kv_bytes_per_device as f64),
        Cell::Seconds(pl.compute_s),
        Cell::Seconds(pl.comm_s),
        Cell::Seconds(pl.step_s),
        Cell::Seconds(pl.round_s),
        Cell::Number(pl.tokens_per_s),
        Cell::Count(pl.collectives_per_token),
        Cell::Bytes(pl.wire_bytes_per_token),
    ]
}
