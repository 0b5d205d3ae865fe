//! `ci/gpu-check.sh run`, the device check a GPU session runs, on a machine without a GPU (every
//! CI machine): with this build standing in for the GPU machine's, its plumbing runs end to end,
//! every GPU run is NOT_RUN by its probe (never run on the CPU under a GPU name), the checks fail
//! by name, the register and one archive are left under `$OUT`, and it exits 1.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A device-check folder holding this build, as `ci/gpu-check.sh build` leaves one.
fn dist_of_this_build(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let gz = Command::new("gzip").arg("-c").arg(env!("CARGO_BIN_EXE_parlab")).output().expect("gzip runs");
    assert!(gz.status.success());
    std::fs::write(dir.join("parlab.gz"), gz.stdout).unwrap();
    std::fs::write(dir.join("torch-version"), "this machine's torch (a CPU test of the script)\n").unwrap();
    std::fs::write(dir.join("commit"), "the build under test\n").unwrap();
}

#[test]
fn the_device_check_runs_without_a_gpu_and_records_each_gpu_run_not_run_by_its_probe() {
    if Command::new("nvidia-smi").arg("-L").output().is_ok_and(|o| o.status.success()) {
        println!("SKIPPED: this machine has a GPU; the device check is run there by hand (ci/gpu-check.sh run)");
        return;
    }
    // ci/gpu_check.py needs the project's venv (torch): `make test` names it, else the checkout's.
    let venv = root().join(".venv/bin/python");
    let Some(python) = std::env::var_os("PARLAB_PYTHON").or_else(|| venv.is_file().then(|| venv.into_os_string())) else {
        println!("SKIPPED: no PARLAB_PYTHON and no .venv in the checkout (`make test` sets up both)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (dist, out) = (tmp.path().join("dist"), tmp.path().join("out"));
    dist_of_this_build(&dist);
    // Its output is in $OUT/gpu-check.txt: no pipe a leftover process could hold open, and a
    // bound on the whole script (its own limits sum to minutes only where a GPU runs the suite).
    let run = Command::new("timeout")
        .args(["-k", "10", "300", "bash", "ci/gpu-check.sh", "run", "ci/gpu-suite/host-device-link.yaml", "ci/gpu-suite/gpu-memory.yaml"])
        .env("PARLAB_GPU_DIST", &dist)
        .env("PARLAB_GPU_WORK", tmp.path().join("work"))
        .env("PARLAB_GPU_PYTHON", python)
        .env("OUT", &out)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let log = std::fs::read_to_string(out.join("gpu-check.txt")).unwrap_or_default();
    assert_eq!(run.code(), Some(1), "the checks fail without a GPU: {log}");
    for expected in [
        "host-device-link data world=1 cpu float32: not_run (needs a host-device link (a GPU)",
        "gpu-memory data world=1 cpu float32: not_run (needs a CUDA device visible to parlab's libtorch",
        "FAIL host-device-link data world=1 cpu float32 ran: not_run",
        "gpu_check: 3 failure(s)",
        "gpu-check: exit 1",
    ] {
        assert!(log.contains(expected), "no `{expected}` in the log:\n{log}");
    }
    let register = std::fs::read_to_string(out.join("evidence.md")).expect("the register beside the archive");
    assert!(register.contains("0 measured, 0 modelled, 0 failed, 2 not run"), "{register}");
    assert!(out.join("gpu-run.tgz").is_file() && !out.join("manifests").exists(), "manifests archived, not left beside it");
    assert!(tmp.path().join("work/parlab").is_file(), "the binary unpacked where PARLAB_GPU_WORK says");
}
