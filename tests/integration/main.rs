//! parlab's integration tests, one module per concern, in one test binary.

mod advise;
mod audit;
mod collectives;
mod costmodel;
mod decode;
mod expert;
mod findings;
mod gpu_check;
mod graph_step;
mod identity;
mod import;
mod launch;
mod llama;
mod manifest_io;
mod multihost;
mod nightly;
mod register_store;
mod reliability;
mod report;
mod runner;
mod slurm;
mod spec_corpus;
mod spec_fuzz;
mod synth;
