//! Launching ranks under mpirun: command lines, a hostfile run, and failures (a rank that exits
//! non-zero, one killed by a signal, one that hangs past the timeout, a wrong result), each
//! recorded as failed with a clear reason, no process left behind, and the suite going on.

use parlab::launch::command::{build, hostfile_slots, Machine};
use parlab::manifest::{read_all, Manifest, Status};
use parlab::spec::{load_suite, Launcher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary suite: spec files in `specs/`, manifests in `manifests/`.
pub struct Suite {
    /// The temporary folder.
    pub dir: tempfile::TempDir,
}

impl Suite {
    /// An empty suite.
    pub fn new() -> Self {
        Suite { dir: tempfile::tempdir().unwrap() }
    }

    /// Writes `specs/<name>.yaml`.
    pub fn spec(&self, name: &str, yaml: &str) -> &Self {
        let specs = self.dir.path().join("specs");
        std::fs::create_dir_all(&specs).unwrap();
        std::fs::write(specs.join(format!("{name}.yaml")), yaml).unwrap();
        self
    }

    /// The manifests folder.
    pub fn manifests(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    /// Runs `parlab run specs --no-report` with extra environment; returns the exit code.
    pub fn run(&self, env: &[(&str, &str)]) -> i32 {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_parlab"));
        cmd.args(["run", "specs", "--no-report"])
            .current_dir(self.dir.path())
            .env("PARLAB_MANIFESTS", self.manifests());
        cmd.env_remove("PARLAB_FAULT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        out.status.code().unwrap_or(-1)
    }

    /// The manifest of experiment `name` (the only run it expands to).
    pub fn manifest(&self, name: &str) -> Manifest {
        let (all, _) = read_all(&self.manifests());
        let mut found: Vec<Manifest> = all.into_iter().filter(|m| m.experiment == name).collect();
        assert_eq!(found.len(), 1, "one manifest for {name}");
        found.remove(0)
    }

    /// Live processes whose command line mentions this suite's folder.
    pub fn leftovers(&self) -> Vec<String> {
        processes_mentioning(self.dir.path())
    }
}

/// Live (non-zombie) processes whose command line contains `path`.
pub fn processes_mentioning(path: &Path) -> Vec<String> {
    let needle = path.display().to_string();
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()) && n != me))
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie = stat.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            (!zombie && text.contains(&needle)).then(|| format!("{}: {text}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// A two-rank all-reduce experiment.
pub fn small_collectives(name: &str, timeout: &str, extra: &str) -> String {
    format!("name: {name}\nkind: collectives\nworld: 2\nops: [all-reduce]\nsizes: [4, 4096]\niterations: 3\nwarmup: 1\nthreads: 1\ntimeout: {timeout}\n{extra}")
}

fn failed_with(suite: &Suite, fault: &str, timeout: &str) -> Manifest {
    suite.spec("faulty", &small_collectives("faulty", timeout, ""));
    // A different workload (sizes), so the healthy run has its own identity and manifest.
    suite.spec("healthy", &small_collectives("healthy", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    let code = suite.run(&[("PARLAB_FAULT", fault)]);
    assert_eq!(code, 1, "a failed run makes `parlab run` exit 1");
    let healthy = suite.manifest("healthy");
    assert_eq!(healthy.status, Status::Ok, "the rest of the suite completes: {:?}", healthy.reason);
    assert!(suite.leftovers().is_empty(), "processes left behind: {:?}", suite.leftovers());
    let faulty = suite.manifest("faulty");
    assert_eq!(faulty.status, Status::Failed);
    faulty
}

#[test]
fn a_rank_that_exits_non_zero_fails_its_run_only() {
    let suite = Suite::new();
    let m = failed_with(&suite, "exit:3:rank1@faulty", "60s");
    let reason = m.reason.unwrap();
    assert!(reason.contains("rank 1 exited with status 3"), "{reason}");
    assert!(reason.contains("injected fault: exiting with status 3"), "stderr tail quoted: {reason}");
}

#[test]
fn a_rank_killed_by_a_signal_is_named_with_its_signal() {
    let suite = Suite::new();
    let m = failed_with(&suite, "signal:9:rank1@faulty", "60s");
    let reason = m.reason.unwrap();
    assert!(reason.contains("rank 1 was killed by signal 9"), "{reason}");
}

#[test]
fn a_hanging_rank_is_killed_at_the_timeout() {
    let suite = Suite::new();
    // 6 s leaves a loaded 2-core machine time to start both ranks before the deadline.
    let m = failed_with(&suite, "hang:rank1@faulty", "6s");
    let reason = m.reason.unwrap();
    assert!(reason.contains("timed out after 6 s"), "{reason}");
    assert!(reason.contains("ranks still running: 0, 1") || reason.contains("ranks still running: 1"), "{reason}");
    let launch = m.launch.unwrap();
    assert!(launch.wall_s >= 6.0, "it ran until the timeout: {}", launch.wall_s);
}

#[test]
fn a_wrong_collective_result_fails_the_run_with_the_op_size_and_rank() {
    let suite = Suite::new();
    let m = failed_with(&suite, "wrong:rank1@faulty", "60s");
    let reason = m.reason.unwrap();
    assert!(reason.contains("wrong result: all-reduce of 4 B"), "{reason}");
    assert!(reason.contains("rank 1: 1 of 1 values wrong"), "{reason}");
}

#[test]
fn a_local_hostfile_with_two_slots_runs() {
    let suite = Suite::new();
    std::fs::create_dir_all(suite.dir.path().join("specs")).unwrap();
    std::fs::write(suite.dir.path().join("specs/hosts"), "localhost slots=2\n").unwrap();
    suite.spec("hosted", &small_collectives("hosted", "60s", "hostfile: hosts\n"));
    assert_eq!(suite.run(&[]), 0);
    let m = suite.manifest("hosted");
    assert_eq!(m.status, Status::Ok, "{:?}", m.reason);
    let command = m.launch.unwrap().command;
    assert!(command.contains("--hostfile") && command.contains("specs/hosts"), "{command}");
    assert!(!command.contains("--oversubscribe"), "two slots hold two ranks: {command}");
}

fn plan_of(yaml: &str) -> parlab::spec::RunPlan {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.yaml");
    std::fs::write(&path, yaml).unwrap();
    load_suite(&[path]).unwrap().remove(0)
}

#[test]
fn mpirun_lines_carry_link_threads_root_and_oversubscription() {
    let exe = Path::new("/bin/parlab");
    let (plan_path, out) = (Path::new("/m/r/plan.json"), Path::new("/m/r"));
    let tcp = plan_of("name: t\nkind: collectives\nworld: 8\nlink: mpi-tcp\nthreads: 1\n");
    let machine = Machine { cores: 2, root: true, fault: None };
    let cmd = build(&tcp, plan_path, out, exe, &machine);
    let line = cmd.display();
    assert!(line.starts_with("mpirun -np 8 --allow-run-as-root --oversubscribe --bind-to none"), "{line}");
    assert!(line.contains("--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"), "{line}");
    assert!(line.contains("-x OMP_NUM_THREADS=1 -x MKL_NUM_THREADS=1"), "{line}");
    assert!(line.ends_with("/bin/parlab rank --plan /m/r/plan.json --out /m/r"), "{line}");
    assert!(cmd.oversubscribed);

    let shm = plan_of("name: s\nkind: membw\nworld: 1\nthreads: 2\n");
    let user = Machine { cores: 2, root: false, fault: Some("hang:rank0".into()) };
    let line = build(&shm, plan_path, out, exe, &user).display();
    assert!(!line.contains("--allow-run-as-root") && !line.contains("--oversubscribe"), "{line}");
    assert!(line.contains("--bind-to none"), "threads > 1 must not be bound to one core: {line}");
    assert!(line.contains("--mca btl self,vader") && line.contains("-x OMP_NUM_THREADS=2"), "{line}");
    assert!(line.contains("-x PARLAB_FAULT=hang:rank0"), "{line}");
}

#[test]
fn srun_lines_take_ranks_and_transport_from_the_environment() {
    let plan = plan_of("name: s\nkind: collectives\nworld: 4\nlink: mpi-tcp\nthreads: 2\nlauncher: srun\n");
    assert_eq!(plan.launcher, Launcher::Srun);
    let machine = Machine { cores: 2, root: true, fault: None };
    let cmd = build(&plan, Path::new("/m/r/plan.json"), Path::new("/m/r"), Path::new("/bin/parlab"), &machine);
    let line = cmd.display();
    assert_eq!(cmd.program, "srun");
    assert!(
        line.starts_with("OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMP_NUM_THREADS=2"),
        "{line}"
    );
    assert!(line.contains("srun -n 4 --cpus-per-task=2 --kill-on-bad-exit=1"), "{line}");
    assert!(!line.contains("--allow-run-as-root"), "{line}");
}

#[test]
fn hostfile_slots_are_summed() {
    assert_eq!(hostfile_slots("localhost slots=2\n# a comment\nnode1 slots=4\nnode2\n"), 7);
}
