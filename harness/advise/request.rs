//! What advice is asked for: a model, a workload with an objective, and a machine whose
//! devices sit in nested domains (pairs on NVLink inside a node, nodes on InfiniBand), each
//! domain joined by a link of the catalogue. Built and checked here; later stages trust it.

use super::AdviseError;
use crate::costmodel::catalogue::{Catalogue, DeviceEntry, LinkEntry};
use crate::costmodel::link::Link;
use crate::costmodel::measured_links::is_store_link_name;
use crate::costmodel::plan::Device;
use crate::costmodel::tables::{load_shape, NamedShape};
use crate::model::config::PositionsFrom;
use crate::report::fmt::plural;
use crate::spec::fields::MAX_SEQUENCES;
use crate::spec::schema::{AdviseParams, Dtype};

pub use crate::spec::schema::Objective;

/// The longest context (prompt plus answer) advice is given for: 2^24 tokens, past any model's
/// window today, and short enough that every byte count of the cost model fits in 64 bits.
pub const MAX_CONTEXT: u64 = 1 << 24;

/// The traffic to serve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Prompt tokens of one request.
    pub prompt: u64,
    /// Tokens of one answer.
    pub new_tokens: u64,
    /// Sequences in flight over the whole machine.
    pub sequences: u32,
    /// What to rank by.
    pub objective: Objective,
    /// Weights, activations and cache.
    pub dtype: Dtype,
}

impl Workload {
    /// Checks the numbers are usable: each at least 1, at most `MAX_SEQUENCES` sequences (the
    /// cap a spec's `sequences:` has), and a context within `MAX_CONTEXT`.
    pub fn new(prompt: u64, new_tokens: u64, sequences: u32, objective: Objective, dtype: Dtype) -> Result<Self, AdviseError> {
        if prompt == 0 || new_tokens == 0 || sequences == 0 {
            return Err(AdviseError::Workload(format!(
                "--prompt {prompt}, --new-tokens {new_tokens}, --sequences {sequences}: each must be at least 1"
            )));
        }
        if sequences > MAX_SEQUENCES {
            return Err(AdviseError::Workload(format!(
                "--sequences {sequences}: must be at most {MAX_SEQUENCES} (allowed: 1 to {MAX_SEQUENCES}, as a spec's `sequences:`)"
            )));
        }
        if prompt.checked_add(new_tokens).is_none_or(|n| n > MAX_CONTEXT) {
            return Err(AdviseError::Context {
                prompt,
                new_tokens,
                why: format!("a request's context (prompt plus answer) is at most {MAX_CONTEXT} tokens"),
            });
        }
        Ok(Workload { prompt, new_tokens, sequences, objective, dtype })
    }

    /// Context a decode step reads on average over the answer (the cache grows linearly).
    pub fn mean_decode_context(&self) -> u64 {
        self.prompt + self.new_tokens / 2
    }

    /// Context each sequence's cache holds at the end of its answer.
    pub fn final_context(&self) -> u64 {
        self.prompt + self.new_tokens
    }
}

/// Devices `size` at a time joined by one link: a pair on NVLink, a node, the whole machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    /// Devices in each domain of this level.
    pub size: u32,
    /// The link joining devices of one domain that no smaller domain joins.
    pub link: LinkEntry,
}

/// The machine: one kind of device, counted by node, and its nested domains.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// The device every rank has.
    pub device: DeviceEntry,
    /// Nodes.
    pub nodes: u32,
    /// Devices in each node.
    pub devices_per_node: u32,
    /// Domains from the innermost out; the last holds every device.
    pub domains: Vec<Domain>,
}

/// The most devices a machine may have.
pub const MAX_DEVICES: u32 = 65_536;

/// Why a machine does not add up, kept as data so each caller names its own inputs: `parlab
/// advise` its flags (`Display`: `--domain`, `--nodes`), a spec its `machine:` keys (`in_spec`).
#[derive(Debug, Clone, PartialEq)]
pub enum Topology {
    /// Domain `index` is not `SIZE:LINK` with SIZE a device count (`why` says which).
    Malformed {
        /// Its place among the domains, innermost first.
        index: usize,
        /// The text given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// No nodes or no devices in a node.
    NoDevices {
        /// Nodes.
        nodes: u32,
        /// Devices in each node.
        devices_per_node: u32,
    },
    /// More than `MAX_DEVICES` devices in all.
    TooManyDevices {
        /// Nodes.
        nodes: u32,
        /// Devices in each node.
        devices_per_node: u32,
    },
    /// Domain `index` is not larger than the one inside it, or not a multiple of it.
    NotNested {
        /// Its place among the domains, innermost first.
        index: usize,
        /// Its devices.
        size: u32,
        /// Its link.
        link: String,
        /// The devices of the domain inside it (1 for the innermost).
        inner: u32,
    },
    /// The outermost domain does not hold every device.
    ShortOfMachine {
        /// The devices the outermost domain holds (1 when there is none).
        reach: u32,
        /// Nodes.
        nodes: u32,
        /// Devices in each node.
        devices_per_node: u32,
    },
    /// Domains given for a machine of one device.
    OneDevice,
    /// Several nodes of several devices, and no domain is the node.
    NoNodeDomain {
        /// Nodes.
        nodes: u32,
        /// Devices in each node.
        devices_per_node: u32,
    },
}

impl std::fmt::Display for Topology {
    /// The problem in `parlab advise`'s words (its flags).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Topology::Malformed { text, why, .. } => write!(f, "--domain {text}: {why}"),
            Topology::NoDevices { nodes, devices_per_node } => {
                write!(f, "--nodes {nodes} --devices-per-node {devices_per_node}: both must be at least 1")
            }
            Topology::TooManyDevices { nodes, devices_per_node } => {
                write!(
                    f,
                    "{nodes} nodes of {devices_per_node} devices: more than {} devices",
                    crate::report::fmt::thousands(u64::from(MAX_DEVICES))
                )
            }
            Topology::NotNested { size, link, inner, .. } => {
                write!(f, "--domain {size}:{link}: each domain must be larger than the one inside it ({inner}) and a multiple of it")
            }
            Topology::ShortOfMachine { reach, nodes, devices_per_node } => {
                let total = nodes * devices_per_node;
                write!(
                    f,
                    "the domains reach {} but the machine has {total} ({} of {devices_per_node}); the last --domain must join all {total}",
                    plural(*reach as usize, "device", "devices"),
                    plural(*nodes as usize, "node", "nodes")
                )
            }
            Topology::OneDevice => write!(f, "one device needs no --domain"),
            Topology::NoNodeDomain { nodes, devices_per_node } => write!(
                f,
                "no --domain of {devices_per_node} devices: with {nodes} nodes one domain must be the node, joined by the link inside it"
            ),
        }
    }
}

impl Topology {
    /// The problem in a `kind: advise` spec's words: the key of `machine:` it is at, and
    /// the message naming the spec's keys (`machine.domains`, `machine.nodes`), not flags.
    pub fn in_spec(&self) -> (String, String) {
        match self {
            Topology::Malformed { index, text, why } => (format!("machine.domains[{index}]"), format!("`{text}`: {why}")),
            Topology::NoDevices { nodes, devices_per_node } => (
                if *nodes == 0 { "machine.nodes" } else { "machine.devices_per_node" }.to_string(),
                format!("machine.nodes {nodes} and machine.devices_per_node {devices_per_node}: both must be at least 1"),
            ),
            Topology::TooManyDevices { nodes, devices_per_node } => (
                "machine".to_string(),
                format!(
                    "machine.nodes {nodes} × machine.devices_per_node {devices_per_node}: more than {} devices",
                    crate::report::fmt::thousands(u64::from(MAX_DEVICES))
                ),
            ),
            Topology::NotNested { index, size, link, inner } => (
                format!("machine.domains[{index}]"),
                format!("`{size}:{link}`: each domain must be larger than the one inside it ({inner}) and a multiple of it"),
            ),
            Topology::ShortOfMachine { reach, nodes, devices_per_node } => {
                let total = nodes * devices_per_node;
                (
                    "machine.domains".to_string(),
                    format!(
                        "the domains reach {} but the machine has {total} (machine.nodes {nodes} of machine.devices_per_node {devices_per_node}); the last of machine.domains must join all {total}",
                        plural(*reach as usize, "device", "devices")
                    ),
                )
            }
            Topology::OneDevice => (
                "machine.domains".to_string(),
                "one device (machine.nodes 1 of machine.devices_per_node 1) needs no domains; remove machine.domains".to_string(),
            ),
            Topology::NoNodeDomain { nodes, devices_per_node } => (
                "machine.domains".to_string(),
                format!(
                    "no domain of {devices_per_node} devices: with machine.nodes {nodes} one of machine.domains must be the node (machine.devices_per_node {devices_per_node}), joined by the link inside it"
                ),
            ),
        }
    }
}

fn topology(problem: Topology) -> AdviseError {
    AdviseError::Topology(problem)
}

impl Machine {
    /// Checks that the domains add up: growing sizes, each dividing the next, one of them the
    /// node when there are several nodes, the last holding every device.
    pub fn new(device: DeviceEntry, nodes: u32, devices_per_node: u32, domains: Vec<Domain>) -> Result<Self, AdviseError> {
        if nodes == 0 || devices_per_node == 0 {
            return Err(topology(Topology::NoDevices { nodes, devices_per_node }));
        }
        let total = nodes
            .checked_mul(devices_per_node)
            .filter(|&t| t <= MAX_DEVICES)
            .ok_or_else(|| topology(Topology::TooManyDevices { nodes, devices_per_node }))?;
        let mut inner = 1;
        for (index, d) in domains.iter().enumerate() {
            if d.size <= inner || !d.size.is_multiple_of(inner) {
                return Err(topology(Topology::NotNested { index, size: d.size, link: d.link.name.clone(), inner }));
            }
            inner = d.size;
        }
        if total > 1 && inner != total {
            return Err(topology(Topology::ShortOfMachine { reach: inner, nodes, devices_per_node }));
        }
        if total == 1 && !domains.is_empty() {
            return Err(topology(Topology::OneDevice));
        }
        if nodes > 1 && devices_per_node > 1 && !domains.iter().any(|d| d.size == devices_per_node) {
            return Err(topology(Topology::NoNodeDomain { nodes, devices_per_node }));
        }
        Ok(Machine { device, nodes, devices_per_node, domains })
    }

    /// Devices in the machine.
    pub fn devices(&self) -> u32 {
        self.nodes * self.devices_per_node
    }

    /// The device as the cost model takes it.
    pub fn cost_device(&self) -> Device {
        Device { memory_bytes: self.device.memory_bytes, bandwidth_bps: self.device.bandwidth_bps() }
    }

    /// Index of the innermost domain holding devices `a` and `b` (None when they are one device).
    pub fn domain_between(&self, a: u32, b: u32) -> Option<usize> {
        (a != b).then(|| self.domains.iter().position(|d| a / d.size == b / d.size)).flatten()
    }

    /// Index of the innermost domain holding a contiguous group of `size` devices (None for one).
    pub fn domain_of_group(&self, size: u32) -> Option<usize> {
        (size > 1).then(|| self.domains.iter().position(|d| d.size >= size)).flatten()
    }

    /// The domains whose links a contiguous group of `size` devices' ring all-reduce pays: its
    /// own domain's (a domain's link joins every device in it, as a switch does), and where that
    /// domain joins nodes, those its hops inside each node pay (a ring between nodes still
    /// passes every device of a node over the node's own links).
    pub fn paid_domains(&self, size: u32) -> Vec<usize> {
        let Some(outer) = self.domain_of_group(size) else { return Vec::new() };
        let mut paid = vec![outer];
        if self.between_nodes(outer) && outer > 0 {
            paid.extend(self.paid_domains(self.domains[outer - 1].size));
        }
        paid
    }

    /// The link a contiguous group of `size` devices' ring all-reduce pays: the slowest of the
    /// links of [`Machine::paid_domains`] paces every step (the largest latency, the smallest
    /// bandwidth); a link that costs nothing for one device.
    pub fn group_link(&self, size: u32) -> Link {
        self.paid_domains(size)
            .iter()
            .map(|&i| self.domains[i].link.link())
            .fold(self.link(None), |worst, l| Link { alpha_s: worst.alpha_s.max(l.alpha_s), beta_bps: worst.beta_bps.min(l.beta_bps) })
    }

    /// The link of domain `index`; a link that costs nothing for none.
    pub fn link(&self, index: Option<usize>) -> Link {
        index.map_or(Link { alpha_s: 0.0, beta_bps: f64::INFINITY }, |i| self.domains[i].link.link())
    }

    /// True when domain `index` crosses a node boundary.
    pub fn between_nodes(&self, index: usize) -> bool {
        self.domains[index].size > self.devices_per_node
    }
}

/// A request for advice.
pub struct Request {
    /// The model and its shape.
    pub model: NamedShape,
    /// The traffic.
    pub workload: Workload,
    /// The machine.
    pub machine: Machine,
}

/// The words a user gives, before they are looked up.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// A catalogue name or a config folder.
    pub model: String,
    /// A device of `models/devices.yaml`.
    pub device: String,
    /// Nodes.
    pub nodes: u32,
    /// Devices per node.
    pub devices_per_node: u32,
    /// `SIZE:LINK` domains, innermost first.
    pub domains: Vec<String>,
    /// Prompt tokens.
    pub prompt: u64,
    /// Answer tokens.
    pub new_tokens: u64,
    /// Sequences in flight.
    pub sequences: u32,
    /// `latency`, `ttft` or `throughput`.
    pub objective: String,
    /// A dtype name.
    pub dtype: String,
}

fn parse_domain(index: usize, text: &str, catalogue: &Catalogue) -> Result<Domain, AdviseError> {
    let malformed = |why: String| topology(Topology::Malformed { index, text: text.to_string(), why });
    let (size, name) = text
        .split_once(':')
        .filter(|(_, name)| !name.trim().is_empty())
        .ok_or_else(|| malformed("expected SIZE:LINK, e.g. 2:nvlink-nv12".into()))?;
    let size: u32 = size.trim().parse().map_err(|_| malformed(format!("`{size}` is not a device count")))?;
    let link = catalogue.link(name.trim()).cloned().ok_or_else(|| {
        let (measured, known) = catalogue.links.iter().map(|l| l.name.clone()).partition(|n| is_store_link_name(n));
        AdviseError::UnknownLink { index, name: name.trim().to_string(), known, measured, links_from: catalogue.links_from.clone() }
    })?;
    Ok(Domain { size, link })
}

/// Refuses a request longer than the model's position table (where its config.json or
/// transformers' default for its type says).
fn check_window(model: &NamedShape, w: &Workload) -> Result<(), AdviseError> {
    let max = u64::from(model.max_positions);
    if max == 0 || w.final_context() <= max {
        return Ok(());
    }
    Err(AdviseError::Context {
        prompt: w.prompt,
        new_tokens: w.new_tokens,
        why: format!(
            "a request of {} tokens, but {} holds {max} positions ({})",
            w.final_context(),
            model.name,
            match model.positions_from {
                PositionsFrom::ConfigJson => "n_positions or max_position_embeddings in its config.json".to_string(),
                PositionsFrom::TransformersDefault =>
                    format!("transformers' default for model_type {}: its config.json names none", model.model_type),
            }
        ),
    })
}

/// The words of a question ranked by its prefill alone (time to first token, or an answer of
/// one token whatever the objective), which a device without a compute peak cannot answer.
fn prefill_ranked(objective: Objective, w: &Workload) -> Option<String> {
    match objective {
        Objective::Ttft => Some("--objective ttft".into()),
        _ if w.new_tokens == 1 => Some(format!("--new-tokens 1 (a prefill alone) ranked by {}", objective.name())),
        _ => None,
    }
}

impl Asked {
    /// The question a `kind: advise` spec asks of `model`.
    pub fn of_spec(model: &str, p: &AdviseParams) -> Self {
        Asked {
            model: model.to_string(),
            device: p.device.clone(),
            nodes: p.nodes,
            devices_per_node: p.devices_per_node,
            domains: p.domains.clone(),
            prompt: p.prompt_tokens,
            new_tokens: p.new_tokens,
            sequences: p.sequences,
            objective: p.objective.name().to_string(),
            dtype: p.dtype.name().to_string(),
        }
    }

    /// Looks every word up in the catalogue and the model folders, and checks the machine adds up.
    pub fn resolve(&self, catalogue: &Catalogue) -> Result<Request, AdviseError> {
        let model = load_shape(&self.model).map_err(|e| AdviseError::Model(e.to_string()))?;
        let device = catalogue.device(&self.device).cloned().ok_or_else(|| AdviseError::UnknownDevice {
            name: self.device.clone(),
            known: catalogue.devices.iter().map(|d| d.name.clone()).collect(),
        })?;
        let domains = self.domains.iter().enumerate().map(|(i, d)| parse_domain(i, d, catalogue)).collect::<Result<Vec<_>, _>>()?;
        let machine = Machine::new(device, self.nodes, self.devices_per_node, domains)?;
        let objective = Objective::from_name(&self.objective)
            .ok_or_else(|| AdviseError::Workload(format!("--objective {}: use {}", self.objective, Objective::names().join(", "))))?;
        let dtype = crate::costmodel::parse_dtype(&self.dtype)
            .ok_or_else(|| AdviseError::Workload(format!("--dtype {}: use float32, float16 or bfloat16", self.dtype)))?;
        let workload = Workload::new(self.prompt, self.new_tokens, self.sequences, objective, dtype)?;
        check_window(&model, &workload)?;
        if let Some(asked) = prefill_ranked(objective, &workload).filter(|_| machine.device.peak_flops(dtype).is_none()) {
            return Err(AdviseError::Workload(format!(
                "{asked}: device {} has no {} compute figure in models/devices.yaml, so a prefill's arithmetic cannot be predicted and layouts would be ranked by their weight reads alone (a split that divides the arithmetic would look no faster); give the device a peak{}",
                machine.device.name,
                dtype.name(),
                if objective == Objective::Ttft { ", or rank a longer answer by latency or throughput" } else { "" }
            )));
        }
        Ok(Request { model, workload, machine })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::catalogue::Provenance;

    fn link(name: &str, latency_us: f64) -> LinkEntry {
        let p = Provenance::Assumed { note: "test".into() };
        LinkEntry {
            name: name.into(),
            description: String::new(),
            latency_us,
            bandwidth_gbps: 100.0,
            latency_provenance: p.clone(),
            bandwidth_provenance: p,
        }
    }

    fn device() -> DeviceEntry {
        let p = Provenance::Assumed { note: "test".into() };
        DeviceEntry {
            name: "g".into(),
            description: String::new(),
            memory: "80GiB".into(),
            memory_bytes: 80 << 30,
            bandwidth_gbps: 1500.0,
            memory_provenance: p.clone(),
            bandwidth_provenance: p,
            compute: None,
            compute_float32: None,
        }
    }

    fn domains(levels: &[(u32, &str)]) -> Vec<Domain> {
        levels.iter().map(|&(size, name)| Domain { size, link: link(name, 1.0) }).collect()
    }

    #[test]
    fn two_nodes_of_two_pairs_find_the_link_between_any_two_devices() {
        let m = Machine::new(device(), 2, 4, domains(&[(2, "nv"), (4, "sys"), (8, "ib")])).unwrap();
        assert_eq!(m.devices(), 8);
        assert_eq!(m.domain_between(0, 1), Some(0));
        assert_eq!(m.domain_between(1, 2), Some(1));
        assert_eq!(m.domain_between(3, 4), Some(2));
        assert_eq!(m.domain_between(5, 5), None);
        assert_eq!(
            (m.domain_of_group(1), m.domain_of_group(2), m.domain_of_group(4), m.domain_of_group(8)),
            (None, Some(0), Some(1), Some(2))
        );
        assert!(m.between_nodes(2) && !m.between_nodes(1));
        assert_eq!(m.link(None).alpha_s, 0.0);
    }

    #[test]
    fn a_groups_ring_is_paced_by_the_slowest_link_it_crosses() {
        let levels = vec![
            Domain { size: 2, link: LinkEntry { bandwidth_gbps: 300.0, ..link("nv", 2.0) } },
            Domain { size: 4, link: LinkEntry { bandwidth_gbps: 24.0, ..link("sys", 20.0) } },
            Domain { size: 8, link: LinkEntry { bandwidth_gbps: 50.0, ..link("ib", 10.0) } },
        ];
        let m = Machine::new(device(), 2, 4, levels).unwrap();
        let ring = |size| {
            let l = m.group_link(size);
            (l.alpha_s * 1e6, l.beta_bps / 1e9)
        };
        assert_eq!(ring(1), (0.0, f64::INFINITY));
        assert_eq!(ring(2), (2.0, 300.0));
        assert_eq!(ring(4), (20.0, 24.0));
        assert_eq!(ring(8), (20.0, 24.0), "eight devices over two nodes still cross SYS inside each");
        assert_eq!(m.paid_domains(8), vec![2, 1]);
        // Inside one node a domain's link joins every device in it: a group of 4 on a switch
        // pays the switch alone, however slow the pairs inside it are.
        let switch = vec![
            Domain { size: 2, link: LinkEntry { bandwidth_gbps: 24.0, ..link("sys", 20.0) } },
            Domain { size: 4, link: LinkEntry { bandwidth_gbps: 300.0, ..link("switch", 2.0) } },
        ];
        let one_node = Machine::new(device(), 1, 4, switch).unwrap();
        assert_eq!(one_node.paid_domains(4), vec![1]);
        assert_eq!(one_node.group_link(4).beta_bps, 300e9);
    }

    #[test]
    fn a_topology_that_does_not_add_up_is_refused() {
        let bad =
            |nodes, per_node, levels: &[(u32, &str)]| Machine::new(device(), nodes, per_node, domains(levels)).unwrap_err().to_string();
        assert!(bad(1, 4, &[(3, "a"), (4, "b")]).contains("multiple"));
        assert!(bad(1, 4, &[(2, "a")]).contains("reach 2 devices but the machine has 4"));
        assert!(bad(2, 4, &[(2, "a"), (8, "b")]).contains("one domain must be the node"));
        assert!(bad(1, 1, &[(2, "a")]).contains("one device needs no --domain"));
        assert!(bad(0, 4, &[]).contains("at least 1"));
        assert!(Machine::new(device(), 1, 1, Vec::new()).is_ok());
    }

    #[test]
    fn a_topology_is_worded_for_the_flags_or_for_a_specs_keys() {
        let refused = |nodes, per_node, levels: &[(u32, &str)]| match Machine::new(device(), nodes, per_node, domains(levels)) {
            Err(AdviseError::Topology(t)) => t,
            other => panic!("{other:?}"),
        };
        let t = refused(1, 6, &[(2, "a"), (3, "b"), (6, "c")]);
        assert_eq!(
            t.to_string(),
            "--domain 3:b: each domain must be larger than the one inside it (2) and a multiple of it",
            "parlab advise keeps its flags' words"
        );
        assert_eq!(
            t.in_spec(),
            ("machine.domains[1]".into(), "`3:b`: each domain must be larger than the one inside it (2) and a multiple of it".into())
        );
        for t in [
            refused(0, 4, &[]),
            refused(65_537, 1, &[]),
            refused(1, 4, &[(2, "a")]),
            refused(1, 1, &[(2, "a")]),
            refused(2, 4, &[(2, "a"), (8, "b")]),
            t,
        ] {
            let (key, message) = t.in_spec();
            assert!(key.starts_with("machine"), "{key}");
            assert!(!message.contains("--"), "{message}");
            assert!(t.to_string().contains("--") || t.to_string().contains("nodes of"), "{t}");
        }
        let (key, message) = refused(2, 4, &[(2, "a"), (8, "b")]).in_spec();
        assert_eq!(key, "machine.domains");
        assert!(message.starts_with("no domain of 4 devices: with machine.nodes 2 one of machine.domains must be the node"), "{message}");
        let malformed = Topology::Malformed { index: 2, text: "x:nv".into(), why: "`x` is not a device count".into() };
        assert_eq!(malformed.to_string(), "--domain x:nv: `x` is not a device count");
        assert_eq!(malformed.in_spec(), ("machine.domains[2]".into(), "`x:nv`: `x` is not a device count".into()));
    }

    #[test]
    fn the_answer_is_read_at_its_mean_and_held_at_its_end() {
        let w = Workload::new(4032, 128, 1, Objective::Latency, Dtype::Float16).unwrap();
        assert_eq!((w.mean_decode_context(), w.final_context()), (4096, 4160));
        assert!(Workload::new(0, 1, 1, Objective::Ttft, Dtype::Float16).is_err());
    }

    #[test]
    fn sequences_are_capped_where_a_spec_caps_them() {
        let w = |sequences| Workload::new(64, 8, sequences, Objective::Throughput, Dtype::Float16);
        assert_eq!(w(MAX_SEQUENCES).map(|w| w.sequences), Ok(65_536));
        let refused = w(MAX_SEQUENCES + 1).unwrap_err().to_string();
        assert_eq!(refused, "workload: --sequences 65537: must be at most 65536 (allowed: 1 to 65536, as a spec's `sequences:`)");
        assert!(w(u32::MAX).unwrap_err().to_string().contains("--sequences 4294967295: must be at most 65536"));
    }

    #[test]
    fn a_context_past_max_context_is_refused_not_wrapped() {
        let too_long =
            |prompt, new_tokens| Workload::new(prompt, new_tokens, 1, Objective::Latency, Dtype::Float16).unwrap_err().to_string();
        assert!(too_long(u64::MAX, 2).contains("--prompt 18446744073709551615 --new-tokens 2: a request's context"), "overflow");
        assert!(too_long(MAX_CONTEXT, 1).contains("is at most 16777216 tokens"));
        assert!(Workload::new(MAX_CONTEXT - 1, 1, 1, Objective::Latency, Dtype::Float16).is_ok());
    }
}
