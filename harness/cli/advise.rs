//! `parlab advise`: the splits to benchmark for a model, a workload and a machine, as
//! markdown or JSON; every input error exits 2.

use super::Error;
use crate::advise::request::Asked;
use crate::advise::{add_store_links, advise, render, AdviseError};
use crate::costmodel::catalogue::Catalogue;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `parlab advise`.
#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// A model name under models/ or a folder holding config.json.
    pub model: String,
    /// The device every rank has (a name in models/devices.yaml).
    #[arg(long)]
    pub device: String,
    /// Nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// Devices in each node.
    #[arg(long, default_value_t = 1)]
    pub devices_per_node: u32,
    /// SIZE:LINK, innermost first and repeatable: devices SIZE at a time joined by LINK of
    /// models/links.yaml (e.g. `--domain 2:nvlink-nv12 --domain 4:pcie-sys`); the last joins every device.
    #[arg(long = "domain", value_name = "SIZE:LINK")]
    pub domains: Vec<String>,
    /// Prompt tokens of one request.
    #[arg(long)]
    pub prompt: u64,
    /// Tokens of one answer.
    #[arg(long)]
    pub new_tokens: u64,
    /// Sequences in flight over the machine.
    #[arg(long, default_value_t = 1)]
    pub sequences: u32,
    /// What to rank by: latency (one whole request), ttft (time to first token) or throughput.
    #[arg(long, default_value = "latency")]
    pub objective: String,
    /// Bytes per value of weights, activations and cache.
    #[arg(long, default_value = "float16")]
    pub dtype: String,
    /// A store of manifests whose collectives runs offer their links to `--domain`: one parlab
    /// measured as `LINK-measured` (`nccl-measured`), one imported as `LINK-imported`.
    #[arg(long, value_name = "DIR")]
    pub links_from: Option<PathBuf>,
    /// Print `parlab.advice/1` JSON instead of markdown.
    #[arg(long)]
    pub json: bool,
}

impl AdviseArgs {
    fn asked(&self) -> Asked {
        Asked {
            model: self.model.clone(),
            device: self.device.clone(),
            nodes: self.nodes,
            devices_per_node: self.devices_per_node,
            domains: self.domains.clone(),
            prompt: self.prompt,
            new_tokens: self.new_tokens,
            sequences: self.sequences,
            objective: self.objective.clone(),
            dtype: self.dtype.clone(),
        }
    }
}

impl From<AdviseError> for Error {
    fn from(e: AdviseError) -> Self {
        Error::Usage(format!("parlab advise: {e}"))
    }
}

/// Runs `parlab advise`.
pub fn run(args: &AdviseArgs) -> super::Result<i32> {
    let mut catalogue = Catalogue::load_default().map_err(|e| AdviseError::Catalogue(e.to_string()))?;
    if let Some(store) = &args.links_from {
        add_store_links(&mut catalogue, store)?;
    }
    let advice = advise(args.asked().resolve(&catalogue)?);
    let text =
        if args.json { format!("{}\n", serde_json::to_string_pretty(&render::to_json(&advice))?) } else { render::to_markdown(&advice) };
    super::output::print(&text)?;
    Ok(crate::exitcode::OK)
}
