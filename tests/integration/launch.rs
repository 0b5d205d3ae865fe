//! Launching ranks under mpirun: command lines, a hostfile run, and failures (a rank that exits
//! non-zero, one killed by a signal, one that hangs past the timeout, a wrong result), each
//! recorded as failed with a clear reason, no process left behind, and the suite going on.

use parlab::launch::command::{build, hostfile_slots, srun_mpi, Machine};
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
        cmd.args(["run", "specs", "--no-report"]).current_dir(self.dir.path()).env("PARLAB_MANIFESTS", self.manifests());
        cmd.env_remove("PARLAB_FAULT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        out.status.code().unwrap_or(-1)
    }

    /// Runs `parlab <args>` in the suite's folder on its manifests.
    pub fn parlab(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_parlab"));
        cmd.args(args).current_dir(self.dir.path()).env("PARLAB_MANIFESTS", self.manifests()).env_remove("PARLAB_FAULT");
        cmd.output().unwrap()
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
    assert_eq!(healthy.status(), Status::Ok, "the rest of the suite completes: {:?}", healthy.reason());
    assert!(suite.leftovers().is_empty(), "processes left behind: {:?}", suite.leftovers());
    let faulty = suite.manifest("faulty");
    assert_eq!(faulty.status(), Status::Failed);
    faulty
}

#[test]
fn a_rank_that_exits_non_zero_fails_its_run_only() {
    let suite = Suite::new();
    let m = failed_with(&suite, "exit:3:rank1@faulty", "60s");
    let reason = m.reason().unwrap();
    assert!(reason.contains("rank 1 exited with status 3"), "{reason}");
    assert!(reason.contains("injected fault: exiting with status 3"), "stderr tail quoted: {reason}");
}

#[test]
fn a_rank_killed_by_a_signal_is_named_with_its_signal() {
    let suite = Suite::new();
    let m = failed_with(&suite, "signal:9:rank1@faulty", "60s");
    let reason = m.reason().unwrap();
    assert!(reason.contains("rank 1 was killed by signal 9"), "{reason}");
}

#[test]
fn a_hanging_rank_is_killed_at_the_timeout() {
    let suite = Suite::new();
    // 12 s leaves a loaded 2-core machine (a third of its usual speed) time to start both ranks
    // before the deadline.
    let m = failed_with(&suite, "hang:rank1@faulty", "12s");
    let reason = m.reason().unwrap();
    assert!(reason.contains("timed out after 12 s"), "{reason}");
    assert!(reason.contains("ranks still running: 0, 1") || reason.contains("ranks still running: 1"), "{reason}");
    let launch = m.launch().unwrap();
    assert!(launch.wall_s >= 12.0, "it ran until the timeout: {}", launch.wall_s);
}

#[test]
fn a_rank_that_panics_fails_its_run_at_once_with_the_panic_not_at_the_timeout() {
    let suite = Suite::new();
    // Rank 0 waits in the first collective: a panicking rank that unwound through MPI_Finalize
    // instead of aborting the job would leave it there until the 60 s timeout.
    let m = failed_with(&suite, "panic:rank1@faulty", "60s");
    let reason = m.reason().unwrap();
    assert!(reason.contains("panicked: injected fault: a panic in rank code"), "{reason}");
    assert!(!reason.contains("timed out"), "{reason}");
}

#[test]
fn a_wrong_collective_result_fails_the_run_with_the_op_size_and_rank() {
    let suite = Suite::new();
    let m = failed_with(&suite, "wrong:rank1@faulty", "60s");
    let reason = m.reason().unwrap();
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
    assert_eq!(m.status(), Status::Ok, "{:?}", m.reason());
    let command = m.launch().unwrap().command.clone();
    assert!(command.contains("--hostfile") && command.contains("specs/hosts"), "{command}");
    assert!(!command.contains("--oversubscribe"), "two slots hold two ranks: {command}");
}

#[test]
fn a_hostfile_changed_or_gone_since_the_suite_was_planned_is_not_launched() {
    use parlab::launch::command::{planned_hostfile, HostfileError};
    use parlab::launch::{launch, LaunchEnd};
    let suite = Suite::new();
    let hosts = suite.dir.path().join("specs/hosts");
    std::fs::create_dir_all(hosts.parent().unwrap()).unwrap();
    std::fs::write(&hosts, "localhost slots=2\n").unwrap();
    suite.spec("hosted", &small_collectives("hosted", "60s", "hostfile: hosts\n"));
    let plan = load_suite(&[suite.dir.path().join("specs/hosted.yaml")]).unwrap().remove(0);
    assert_eq!(planned_hostfile(&plan).unwrap().as_deref(), Some("localhost slots=2\n"), "as planned: read for the launch");
    // The run identity holds the planned file's digest; a launch on another file would be
    // recorded under it, so none starts (a launch of a later round reads it again).
    let out = suite.dir.path().join("out");
    for (edit, says) in [
        (Some("localhost slots=1\n"), HostfileError::Changed(hosts.clone())),
        (None, HostfileError::Unreadable { path: hosts.clone(), why: String::new() }),
    ] {
        match edit {
            Some(text) => std::fs::write(&hosts, text).unwrap(),
            None => std::fs::remove_file(&hosts).unwrap(),
        }
        let refused = planned_hostfile(&plan).unwrap_err();
        assert_eq!(std::mem::discriminant(&refused), std::mem::discriminant(&says), "{refused}");
        let outcome = launch(&plan, &out.join("plan.json"), &out, 2);
        let LaunchEnd::NotStarted(why) = &outcome.end else { panic!("launched on another hostfile: {:?}", outcome.end) };
        assert_eq!(why, &refused.to_string());
        assert!(why.contains(&hosts.display().to_string()) && why.contains("nothing was launched"), "{why}");
        assert!(!out.join("launcher.stderr").exists(), "no launcher started");
        assert!(outcome.command.is_empty() && outcome.wall_s == 0.0, "no command is recorded for a launch refused: {outcome:?}");
    }
    // srun places ranks by Slurm's allocation and never reads the file: it is not checked.
    let srun = parlab::spec::RunPlan { launcher: Launcher::Srun, ..plan };
    assert_eq!(planned_hostfile(&srun), Ok(None));
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
    let machine = Machine { slots: 2, root: true, fault: None, forwarded: Vec::new() };
    let cmd = build(&tcp, None, plan_path, out, exe, &machine);
    let line = cmd.display();
    assert!(line.starts_with("mpirun -np 8 --allow-run-as-root --oversubscribe --bind-to none"), "{line}");
    assert!(line.contains("--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"), "{line}");
    assert!(line.contains("-x OMP_NUM_THREADS=1 -x MKL_NUM_THREADS=1"), "{line}");
    assert!(line.ends_with("/bin/parlab rank --plan /m/r/plan.json --out /m/r"), "{line}");
    assert!(cmd.oversubscribed);

    let shm = plan_of("name: s\nkind: membw\nworld: 1\nthreads: 2\n");
    let user = Machine { slots: 2, root: false, fault: Some("hang:rank0".into()), forwarded: vec!["PARLAB_STATE".into()] };
    let line = build(&shm, None, plan_path, out, exe, &user).display();
    assert!(!line.contains("--allow-run-as-root") && !line.contains("--oversubscribe"), "{line}");
    assert!(line.contains("--bind-to none"), "threads > 1 must not be bound to one core: {line}");
    assert!(line.contains("--mca btl self,vader") && line.contains("-x OMP_NUM_THREADS=2"), "{line}");
    assert!(line.contains("-x PARLAB_FAULT=hang:rank0"), "{line}");
    assert!(line.contains("-x PARLAB_STATE --output-filename"), "PARLAB_* variables reach remote ranks: {line}");
}

/// `transport` with an environment given as pairs.
fn transport_with(link: &str, remote: &[&str], interface: Option<&str>, env: &[(&str, &str)]) -> parlab::launch::command::Transport {
    let remote: Vec<String> = remote.iter().map(|h| h.to_string()).collect();
    let lookup = |k: &str| env.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string());
    parlab::launch::command::transport(&link.into(), &remote, interface, &lookup)
}

fn mca_text(t: &parlab::launch::command::Transport) -> String {
    t.mca.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn tcp_is_pinned_to_loopback_only_when_every_rank_is_on_this_host() {
    let local = transport_with("mpi-tcp", &[], None, &[]);
    assert_eq!(mca_text(&local), "pml=ob1 btl=self,tcp btl_tcp_if_include=lo");
    assert!(local.description.ends_with("TCP over loopback (every rank on this host)"), "{}", local.description);
    let remote = transport_with("mpi-tcp", &["node2"], None, &[]);
    assert_eq!(mca_text(&remote), "pml=ob1 btl=self,tcp");
    assert!(remote.description.contains("Open MPI's default interfaces"), "{}", remote.description);
    let named = transport_with("mpi-tcp", &["node2"], Some("10.1.0.0/16"), &[]);
    assert_eq!(mca_text(&named), "pml=ob1 btl=self,tcp btl_tcp_if_include=10.1.0.0/16");
}

#[test]
fn the_users_open_mpi_interface_setting_is_kept_and_recorded_never_overridden_silently() {
    let env = [("OMPI_MCA_btl_tcp_if_include", "eth1")];
    for remote in [&[][..], &["node2"][..]] {
        let t = transport_with("mpi-tcp", remote, None, &env);
        assert_eq!(mca_text(&t), "pml=ob1 btl=self,tcp", "no interface passed over the user's");
        assert!(t.description.contains("TCP over eth1 (OMPI_MCA_btl_tcp_if_include from the environment)"), "{}", t.description);
    }
    let spec_wins = transport_with("mpi-tcp", &[], Some("eth0"), &env);
    assert!(spec_wins.description.contains("overriding OMPI_MCA_btl_tcp_if_include=eth1"), "{}", spec_wins.description);
    let btl = transport_with("mpi-shm", &[], None, &[("OMPI_MCA_btl", "self,tcp")]);
    assert!(btl.description.contains("overrides OMPI_MCA_btl=self,tcp from the environment"), "{}", btl.description);
}

#[test]
fn shared_memory_across_hosts_adds_tcp_and_auto_leaves_the_choice_to_open_mpi() {
    assert_eq!(mca_text(&transport_with("mpi-shm", &[], None, &[])), "pml=ob1 btl=self,vader");
    let across = transport_with("mpi-shm", &["node2"], Some("eth0"), &[]);
    assert_eq!(mca_text(&across), "pml=ob1 btl=self,vader,tcp btl_tcp_if_include=eth0");
    let auto = transport_with("mpi-auto", &["node2"], None, &[("OMPI_MCA_pml", "ucx")]);
    assert!(auto.mca.is_empty());
    assert_eq!(auto.description, "pml and btl chosen by Open MPI (parlab passes neither); OMPI_MCA_pml=ucx from the environment");
}

#[test]
fn a_hostfile_naming_only_this_machine_is_local_and_another_host_is_remote() {
    use parlab::launch::hosts::{remote_hosts, this_host};
    let text = format!("localhost slots=1\n127.0.0.1\n{} slots=2\nnode-elsewhere.invalid slots=2\n", this_host());
    assert_eq!(remote_hosts(&text), vec!["node-elsewhere.invalid".to_string()]);
}

#[test]
fn srun_lines_take_ranks_and_transport_from_the_environment() {
    let plan = plan_of("name: s\nkind: collectives\nworld: 4\nlink: mpi-tcp\nthreads: 2\nlauncher: srun\n");
    assert_eq!(plan.launcher, Launcher::Srun);
    let machine = Machine { slots: 2, root: true, fault: None, forwarded: Vec::new() };
    let cmd = build(&plan, None, Path::new("/m/r/plan.json"), Path::new("/m/r"), Path::new("/bin/parlab"), &machine);
    let line = cmd.display();
    assert_eq!(cmd.program, "srun");
    if std::env::var_os("SLURM_NNODES").is_none() && std::env::var_os("OMPI_MCA_btl_tcp_if_include").is_none() {
        // srun picks the nodes: TCP is never pinned to loopback unless the allocation is one node.
        assert!(line.starts_with("OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp OMP_NUM_THREADS=2"), "{line}");
        assert!(cmd.transport.contains("Open MPI's default interfaces"), "{}", cmd.transport);
    }
    assert!(line.contains("srun -n 4 --cpus-per-task=2 --kill-on-bad-exit=1 --export=ALL"), "{line}");
    assert!(!line.contains("--allow-run-as-root"), "{line}");
    if std::env::var_os("SLURM_MPI_TYPE").is_none() {
        assert!(line.contains("--kill-on-bad-exit=1 --export=ALL --mpi=pmix --error="), "{line}");
    }
}

#[test]
fn srun_starts_ranks_with_pmix_unless_the_user_chose_a_plugin() {
    assert_eq!(srun_mpi(None).as_deref(), Some("--mpi=pmix"));
    assert_eq!(srun_mpi(Some("")).as_deref(), Some("--mpi=pmix"), "an empty SLURM_MPI_TYPE chooses nothing");
    assert_eq!(srun_mpi(Some("pmi2")), None, "the user's SLURM_MPI_TYPE stays in force");
}

#[test]
fn a_membw_hostfile_naming_another_host_is_refused_one_naming_this_machine_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("m.yaml");
    let text = "name: m\nkind: membw\nworld: 2\nbuffer: 4MiB\nhostfile: hosts\n";
    std::fs::write(dir.path().join("hosts"), "localhost slots=1\nnode-elsewhere.invalid slots=1\n").unwrap();
    let problems = parlab::spec::validate::validate(&spec, text).unwrap_err();
    let err = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
    assert!(err.contains("membw times every process's read against one clock") && err.contains("node-elsewhere.invalid"), "{err}");
    std::fs::write(dir.path().join("hosts"), "localhost slots=2\n").unwrap();
    assert!(parlab::spec::validate::validate(&spec, text).is_ok(), "one host is what membw needs");
}

#[test]
fn hostfile_slots_are_counted_as_open_mpi_counts_them() {
    assert_eq!(hostfile_slots("localhost slots=2\n# a comment\nnode1 slots=4\n", 16), Some(6));
    assert_eq!(hostfile_slots("node1 slots=4294967295\nnode2 slots=2\n", 16), Some(u32::MAX), "no wrap to 1 slot");
    // A line without slots= has the host's cores (Open MPI's default), not one slot.
    assert_eq!(hostfile_slots("localhost\nnode1 slots=4\n", 16), Some(20), "this machine's cores");
    assert_eq!(hostfile_slots("node1 slots=4\nnode2.invalid\n", 16), None, "another host's cores are unknown here");
}

#[test]
fn hosts_without_slots_are_not_called_oversubscribed_for_having_more_ranks_than_lines() {
    let plan = plan_of("name: h\nkind: collectives\nworld: 4\nlink: mpi-tcp\n");
    let machine = Machine { slots: 2, root: false, fault: None, forwarded: Vec::new() };
    let launch =
        |hostfile: &str| build(&plan, Some(hostfile), Path::new("/m/r/plan.json"), Path::new("/m/r"), Path::new("/bin/parlab"), &machine);
    let remote = launch("node1.invalid\nnode2.invalid\n");
    assert!(!remote.oversubscribed && !remote.display().contains("--oversubscribe"), "{}", remote.display());
    let counted = launch("node1.invalid slots=1\nnode2.invalid slots=1\n");
    assert!(counted.oversubscribed && counted.display().contains("--oversubscribe"), "{}", counted.display());
    let local = launch("localhost\n");
    assert!(local.oversubscribed, "4 ranks on this machine's 2 cores: {}", local.display());
}

#[test]
fn mpi_auto_records_the_transport_open_mpi_selected() {
    let suite = Suite::new();
    suite.spec("auto", &small_collectives("auto", "60s", "link: mpi-auto\n"));
    assert_eq!(suite.run(&[]), 0);
    let m = suite.manifest("auto");
    let launch = m.launch().unwrap();
    assert!(!launch.command.contains("--mca pml") && !launch.command.contains("--mca btl "), "{}", launch.command);
    assert!(launch.transport.starts_with("pml and btl chosen by Open MPI"), "{}", launch.transport);
    assert!(launch.transport.contains("selected by Open MPI in rank 0: pml "), "{}", launch.transport);
    assert_eq!(launch.ranks.len(), 2);
    assert!(launch.ranks.iter().all(|r| r.pid > 0 && !r.cores.is_empty() && !r.transport.is_empty()), "{:?}", launch.ranks);
}

#[test]
fn a_rank_that_cannot_allocate_is_failed_with_its_own_error_line_not_backtrace_frames() {
    let suite = Suite::new();
    // 1 EiB per buffer: past any machine, allowed past the plan-time memory check on purpose.
    suite.spec("huge", &small_collectives("huge", "60s", "").replace("sizes: [4, 4096]", "sizes: [1152921504606846976]"));
    assert_eq!(suite.run(&[("PARLAB_MAX_MEMORY", "8000000TiB")]), 1);
    let huge = suite.manifest("huge");
    let reason = huge.reason().unwrap();
    assert!(reason.contains("memory allocation of 1152921504606846976 bytes failed"), "the rank's cause: {reason}");
    assert!(reason.contains("ranklogs/") && reason.contains("/stderr"), "the log it came from: {reason}");
    // The log's path is a random temporary folder's (`/tmp/.tmpGo0xU9/…` once held "0x").
    let words = reason.replace(&suite.dir.path().display().to_string(), "<suite>");
    for frame in ["Process received signal", "libc.so", "stack backtrace", "End of error message", "0x"] {
        assert!(!words.contains(frame), "no backtrace frame ({frame}): {reason}");
    }
    assert!(suite.leftovers().is_empty(), "processes left behind: {:?}", suite.leftovers());
}

/// The failed manifest of a two-rank run whose hostfile names only `host`.
fn run_on_unreachable(host: &str, timeout: &str) -> String {
    let suite = Suite::new();
    std::fs::create_dir_all(suite.dir.path().join("specs")).unwrap();
    std::fs::write(suite.dir.path().join("specs/hosts"), format!("{host} slots=2\n")).unwrap();
    suite.spec("far", &small_collectives("far", timeout, "hostfile: hosts\n"));
    assert_eq!(suite.run(&[]), 1);
    let m = suite.manifest("far");
    assert_eq!(m.status(), Status::Failed);
    assert!(suite.leftovers().is_empty(), "processes left behind: {:?}", suite.leftovers());
    m.reason().unwrap().to_string()
}

#[test]
fn a_hostfile_host_that_does_not_resolve_is_named_with_sshs_own_line() {
    let reason = run_on_unreachable("nosuchhost.invalid", "20s");
    assert!(reason.contains("from which no rank reported: nosuchhost.invalid"), "{reason}");
    assert!(reason.contains("ssh: Could not resolve hostname nosuchhost"), "{reason}");
    assert!(!reason.contains("ORTE was unable") && !reason.contains("lack of authority"), "no boilerplate: {reason}");
}

#[test]
fn a_hostfile_host_that_never_answers_is_named_at_the_timeout() {
    // A private address nothing answers on here: ssh waits for it past the 3 s timeout (where a
    // network refuses it at once, mpirun exits 255 instead; the host must be named either way).
    let reason = run_on_unreachable("10.255.255.1", "3s");
    assert!(reason.contains("from which no rank reported: 10.255.255.1"), "{reason}");
}
