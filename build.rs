// Embeds an rpath to libtorch (found by torch-sys) so the binary runs without LD_LIBRARY_PATH,
// the git commit, and the digest of parlab's measuring code.
use std::path::{Path, PathBuf};

/// The sources that decide how a figure is measured (not what is run: the run identity covers
/// the plan; not how it is shown: the register, nightly and CLI are left out), and the lock
/// file pinning the libraries they call (tch, mpi, polars).
const MEASURING: [&str; 19] = [
    "harness/rank",
    "harness/nccl",
    "harness/cuda.rs",
    "harness/cuda_graph.rs",
    "harness/cuda_graph.cpp",
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
    "harness/manifest/rounds.rs",
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

/// Where the CUDA runtime's headers are (`cuda_runtime_api.h` and nvcc's `crt/host_config.h`,
/// which it includes): `PARLAB_CUDA_INCLUDE`, the CUDA wheels beside this torch, or a CUDA toolkit.
fn cuda_include(torch_lib: &Path) -> Option<PathBuf> {
    let site = torch_lib.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let mut candidates: Vec<PathBuf> = std::env::var_os("PARLAB_CUDA_INCLUDE").map(PathBuf::from).into_iter().collect();
    candidates.extend(["nvidia/cu13/include", "nvidia/cuda_runtime/include"].iter().map(|d| site.join(d)));
    candidates.extend(std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("include")));
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates.into_iter().find(|d| d.join("cuda_runtime_api.h").is_file() && d.join("crt/host_config.h").is_file())
}

/// The `cuda*` functions `archive` references but does not define, strongly (the shim's weak
/// ones are bound at load time; a strong one would need libcudart on parlab's link line).
fn strong_cuda_references(archive: &Path) -> Result<Vec<String>, String> {
    let out = std::process::Command::new("nm").arg("-u").arg(archive).output().map_err(|e| format!("nm: {e}"))?;
    if !out.status.success() {
        return Err(format!("nm -u {} failed: {}", archive.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("U "))
        .filter(|s| s.starts_with("cuda") && s[4..].starts_with(|c: char| c.is_ascii_uppercase()))
        .map(String::from)
        .collect())
}

/// Compiles `harness/cuda_graph.cpp` (CUDA graph capture through libtorch's `CUDAGraph`) where
/// the torch built against has libtorch_cuda and the CUDA runtime's headers are found, and sets
/// `cfg(parlab_cuda_graph)`; elsewhere parlab builds without it and says so when asked for a graph.
fn build_cuda_graph(torch_lib: &Path) -> Result<(), String> {
    println!("cargo:rerun-if-changed=harness/cuda_graph.cpp");
    println!("cargo:rerun-if-env-changed=PARLAB_CUDA_INCLUDE");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    // Headers installed after a build (ci/setup.sh's nvidia-cuda-crt) rebuild the shim.
    if let Some(site) = torch_lib.parent().and_then(Path::parent) {
        for dir in ["nvidia/cu13/include/crt", "nvidia/cu13/include", "nvidia"] {
            if site.join(dir).is_dir() {
                println!("cargo:rerun-if-changed={}", site.join(dir).display());
                break;
            }
        }
    }
    if std::env::var_os("PARLAB_NO_TORCH_CUDA").is_some() {
        return Err("PARLAB_NO_TORCH_CUDA is set".into());
    }
    if !torch_lib.join("libtorch_cuda.so").exists() {
        return Err(format!("no libtorch_cuda.so in {}", torch_lib.display()));
    }
    let torch_include = torch_lib.parent().map(|p| p.join("include")).unwrap_or_default();
    if !torch_include.join("ATen/cuda/CUDAGraph.h").is_file() {
        return Err(format!("no ATen/cuda/CUDAGraph.h under {}", torch_include.display()));
    }
    let cuda =
        cuda_include(torch_lib).ok_or("no CUDA runtime headers (cuda_runtime_api.h with crt/host_config.h; set PARLAB_CUDA_INCLUDE)")?;
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&torch_include)
        .include(&cuda)
        .flag("-std=c++20")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .file("harness/cuda_graph.cpp")
        .try_compile("parlab_cuda_graph")
        .map_err(|e| format!("compiling harness/cuda_graph.cpp: {e}"))?;
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let strong = strong_cuda_references(&out.join("libparlab_cuda_graph.a"))?;
    if !strong.is_empty() {
        return Err(format!("harness/cuda_graph.cpp references {} strongly: add #pragma weak for each", strong.join(", ")));
    }
    for lib in ["torch_cuda", "c10_cuda"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rustc-cfg=parlab_cuda_graph");
    Ok(())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PARLAB_NO_TORCH_CUDA");
    println!("cargo::rustc-check-cfg=cfg(parlab_cuda_graph)");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        link_torch_cuda(&dir);
        if let Err(why) = build_cuda_graph(Path::new(&dir)) {
            println!("cargo:rustc-env=PARLAB_CUDA_GRAPH_ABSENT={why}");
        }
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
