// Embeds an rpath to libtorch (found by torch-sys) so the binary runs without LD_LIBRARY_PATH,
// the git commit, and the digest of parlab's measuring code.
use std::path::{Path, PathBuf};

/// The sources that decide how a figure is measured (not what is run: the run identity covers
/// the plan; not how it is shown: the register, nightly and CLI are left out), and the lock
/// file pinning the libraries they call (tch, mpi, polars).
const MEASURING: [&str; 16] = [
    "harness/rank",
    "harness/nccl",
    "harness/cuda.rs",
    "harness/nightly/figures.rs",
    "harness/nightly/samples.rs",
    "harness/model",
    "harness/collect",
    "harness/launch",
    "harness/host.rs",
    "harness/costmodel",
    "harness/advise",
    "harness/cli/rank.rs",
    "harness/manifest/stats.rs",
    "harness/manifest/answer.rs",
    "harness/manifest/fit.rs",
    "Cargo.lock",
];

fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            files(&entry.path(), out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// The sources of the model's arithmetic: what the cached unsplit reference answers depend on.
const MODEL: [&str; 2] = ["harness/model", "Cargo.lock"];

/// Two FNV-1a 64-bit hashes (different offsets) over every file's path and bytes under `paths`.
fn digest(paths: &[&str]) -> String {
    let mut all = Vec::new();
    for p in paths {
        println!("cargo:rerun-if-changed={p}");
        files(Path::new(p), &mut all);
    }
    all.sort();
    let mut h = [0xcbf2_9ce4_8422_2325u64, 0x6c62_272e_07bb_0142u64];
    for path in &all {
        let bytes = std::fs::read(path).unwrap_or_default();
        for b in path.to_string_lossy().as_bytes().iter().chain(&[0u8]).chain(&bytes).chain(&[0u8]) {
            for x in &mut h {
                *x = (*x ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    format!("{:016x}{:016x}", h[0], h[1])
}

/// Links libtorch_cuda when the torch being built against has it: rustc drops a library none of
/// whose symbols the program names (tch-rs #980), and without it libtorch sees no GPU. Its CUDA
/// dependencies come from other wheels, found at run time through its own RUNPATH, hence
/// `--allow-shlib-undefined`. A CPU-only torch has no libtorch_cuda and links as before.
fn link_torch_cuda(dir: &str) {
    if !Path::new(dir).join("libtorch_cuda.so").exists() || std::env::var_os("PARLAB_NO_TORCH_CUDA").is_some() {
        return;
    }
    for arg in ["-Wl,--no-as-needed", "-Wl,--allow-shlib-undefined", &format!("-L{dir}"), "-ltorch_cuda", "-Wl,--as-needed"] {
        println!("cargo:rustc-link-arg={arg}");
    }
    println!("cargo:rustc-env=PARLAB_LINKED_TORCH_CUDA=1");
}

fn main() {
    println!("cargo:rerun-if-env-changed=PARLAB_NO_TORCH_CUDA");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        link_torch_cuda(&dir);
    }
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=PARLAB_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=PARLAB_MEASURING_DIGEST={}", digest(&MEASURING));
    println!("cargo:rustc-env=PARLAB_MODEL_DIGEST={}", digest(&MODEL));
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
