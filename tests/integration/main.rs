//! parlab's integration tests, one module per concern, in one test binary.

mod identity;
mod manifest_io;
mod spec_corpus;
mod spec_fuzz;
mod launch;
mod collectives;
mod report;
mod costmodel;
mod decode;
mod nightly;
mod reliability;
mod multihost;
mod findings;
mod audit;
mod slurm;
