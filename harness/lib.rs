//! parlab: a declarative benchmark harness and evidence pipeline for distributed LLM inference.
//!
//! The modules follow the data flow: `spec` (parse, validate, expand) -> `identity` ->
//! `gates` -> `launch` (mpirun) -> `rank` (code inside a rank) -> `collect` -> `manifest`
//! -> `report`, with `model` and `costmodel` as the science both halves share, and
//! `audit` comparing answers across layouts (and `precision` half-precision answers with their
//! float32 twins).

/// Writes a line to stderr, as `eprintln!` does, but never panics: a closed stderr (`parlab
/// run 2>&1 | head`) loses the line, not the run the controller is in the middle of.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod advise;
pub mod audit;
pub mod cli;
pub mod collect;
pub mod costmodel;
pub mod cuda;
pub mod cuda_graph;
pub mod exitcode;
pub mod files;
pub mod findings;
pub mod gates;
pub mod host;
pub mod identity;
pub mod import;
pub mod launch;
pub mod manifest;
pub mod model;
pub mod names;
pub mod nccl;
pub mod nightly;
pub mod parallel;
pub mod precision;
pub mod rank;
pub mod report;
pub mod runner;
pub mod spec;
pub mod table;
pub mod topology;
pub mod units;
pub mod xml;
