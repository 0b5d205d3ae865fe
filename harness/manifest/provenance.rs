//! Where a manifest's figures come from: parlab's own launch, or another tool's output read in
//! by `parlab import` (nccl-tests, OSU micro-benchmarks). The register never shows the two
//! without saying which is which.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The source of a manifest's figures (absent from the JSON of a measured run, so manifests
/// written before imports read as measured).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "source")]
pub enum Provenance {
    /// parlab launched the ranks and timed them.
    #[default]
    Measured,
    /// Another tool measured; parlab read its output file.
    Imported(Box<Imported>),
}

impl Provenance {
    /// True for parlab's own measurement.
    pub fn is_measured(&self) -> bool {
        matches!(self, Provenance::Measured)
    }

    /// The import record, for an imported manifest.
    pub fn imported(&self) -> Option<&Imported> {
        match self {
            Provenance::Imported(i) => Some(i),
            Provenance::Measured => None,
        }
    }
}

/// The tools whose output `parlab import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImportTool {
    /// NVIDIA's nccl-tests (`all_reduce_perf` and friends).
    NcclTests,
    /// Ohio State's OSU micro-benchmarks (`osu_allreduce` and friends).
    Osu,
}

crate::named!(ImportTool { NcclTests => "nccl-tests", Osu => "osu" });

/// Which of a tool's output formats the file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImportFormat {
    /// nccl-tests' `-J` JSON file.
    Json,
    /// The table the tool prints.
    Text,
}

crate::named!(ImportFormat { Json => "json", Text => "text" });

/// One rank of an imported run, as the tool listed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportedDevice {
    /// The rank.
    pub rank: u32,
    /// The host it ran on.
    pub host: String,
    /// The CUDA device index on that host.
    pub device: u32,
    /// The device's name as the tool printed it (`NVIDIA H200`), with its PCI address.
    pub name: String,
}

/// What `parlab import` kept of another tool's run: the tool, its versions, how it ran, where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The tool.
    pub tool: ImportTool,
    /// The tool's version as its output states it (None where the format does not say:
    /// nccl-tests' JSON carries its format version, not the tool's).
    pub version: Option<String>,
    /// The communication library's version the tool ran with (`NCCL 2.28.9`), where stated.
    pub library: Option<String>,
    /// The benchmark binary (`all_reduce_perf`, `osu_allreduce`).
    pub benchmark: String,
    /// The command line, from the file (nccl-tests' JSON `args`) or from `--command`.
    pub command: Option<String>,
    /// The ranks and their devices, where the tool listed them.
    pub devices: Vec<ImportedDevice>,
    /// The hosts the ranks ran on, in first-seen order.
    pub hosts: Vec<String>,
    /// Warm-up iterations per size, where stated.
    pub warmup: Option<u32>,
    /// Timed iterations per size, where stated.
    pub iterations: Option<u32>,
    /// True where the tool checked every result (nccl-tests `-c 1`, OSU `-c`): `wrong` is then
    /// its count; false where it did not, and `wrong` is 0 without meaning.
    pub checked: bool,
    /// When the tool's run started, as it wrote it (nccl-tests' JSON `start_time`).
    pub ran_at: Option<String>,
    /// The data type of its buffers as the tool named it (nccl-tests' `float`, `bfloat16`;
    /// OSU's `MPI_CHAR`), where stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_type: Option<String>,
    /// The reduction op of a reducing collective as the tool named it (`sum`, `max`), where
    /// stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduction: Option<String>,
    /// The file read, made absolute (where it lay, whatever folder the import ran from).
    pub file: PathBuf,
    /// Which of the tool's formats it was.
    pub format: ImportFormat,
    /// sha256 of the file's bytes: with the tool and the world, the run identity.
    pub sha256: String,
}

impl Imported {
    /// ` (bfloat16, max)`: the data type and reduction op where the tool stated them, else nothing.
    pub fn data_words(&self) -> String {
        let words: Vec<&str> = [&self.data_type, &self.reduction].into_iter().flatten().map(String::as_str).collect();
        match words.is_empty() {
            true => String::new(),
            false => format!(" ({})", words.join(", ")),
        }
    }

    /// `nccl-tests 2.19.6, NCCL 2.28.9` (versions the output did not state are said so).
    pub fn tool_line(&self) -> String {
        let version = self.version.clone().unwrap_or_else(|| "(version not stated in its output)".into());
        match &self.library {
            Some(lib) => format!("{} {version}, {lib}", self.tool.name()),
            None => format!("{} {version}", self.tool.name()),
        }
    }
}
