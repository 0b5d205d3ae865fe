//! Two hosts on this machine (ci/multihost.sh: a network namespace with its own host name,
//! reached through an rsh agent): a world-4 collectives run over both links and a tensor decode
//! with one rank per host run through parlab, record ranks on both hosts, and give the unsplit
//! tokens; a rank killed on the second host fails the run naming that host and leaves nothing.

use super::launch::{processes_mentioning, small_collectives, Suite};
use parlab::manifest::caveat::Caveat;
use parlab::manifest::Status;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const HOST_B: &str = "parlab-hostb";
const SUBNET: &str = "10.251.77.0/24";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The two hosts, made by `ci/multihost.sh up` and removed (with every process in host B) on drop.
struct TwoHosts;

impl TwoHosts {
    fn up() -> Option<TwoHosts> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: the multi-host test needs root to make network namespaces");
            return None;
        }
        let ok = Command::new("bash").arg(repo().join("ci/multihost.sh")).arg("up").status().unwrap().success();
        assert!(ok, "ci/multihost.sh up failed (as root)");
        Some(TwoHosts)
    }

    /// Processes still running inside host B.
    fn processes_in_b(&self) -> String {
        let out = Command::new("ip").args(["netns", "pids", HOST_B]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(repo().join("ci/multihost.sh")).arg("down").status();
    }
}

/// The environment a user of two hosts sets: the rsh agent and Open MPI's daemon network.
fn env() -> Vec<(&'static str, String)> {
    vec![("OMPI_MCA_plm_rsh_agent", repo().join("ci/netns-rsh").display().to_string()), ("OMPI_MCA_oob_tcp_if_include", SUBNET.to_string())]
}

fn run(suite: &Suite, extra: &[(&str, &str)]) -> i32 {
    let owned = env();
    let mut all: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    suite.run(&all)
}

fn hosts_of(m: &parlab::manifest::Manifest) -> BTreeSet<String> {
    m.launch().map(|l| l.ranks.iter().map(|r| r.host.clone()).collect()).unwrap_or_default()
}

const SMALL: &str = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4,
 "n_embd": 64, "vocab_size": 101, "n_positions": 32, "layer_norm_epsilon": 1e-05, "n_inner": null}"#;

#[test]
fn runs_across_two_hosts_record_both_hosts_keep_the_answer_and_leave_nothing_behind() {
    let Some(hosts) = TwoHosts::up() else { return };
    let suite = Suite::new();
    let dir = suite.dir.path();
    std::fs::write(dir.join("hosts4"), "10.251.77.1 slots=2\n10.251.77.2 slots=2\n").unwrap();
    std::fs::write(dir.join("hosts2"), "10.251.77.1 slots=1\n10.251.77.2 slots=1\n").unwrap();
    let four = "hostfile: ../hosts4\nworld: 4\n";
    suite.spec("tcp", &small_collectives("tcp", "60s", &format!("{four}link: mpi-tcp\ninterface: {SUBNET}\n")).replace("world: 2\n", ""));
    suite.spec("shm", &small_collectives("shm", "60s", &format!("{four}link: mpi-shm\n")).replace("world: 2\n", ""));
    std::fs::create_dir_all(dir.join("small")).unwrap();
    std::fs::write(dir.join("small/config.json"), SMALL).unwrap();
    suite.spec(
        "split",
        "name: split\nkind: decode\nmodel: ../small\nstrategy: tensor\nworld: 2\nlink: mpi-tcp\nhostfile: ../hosts2\n\
         prompt: {length: 5, seed: 4}\nnew_tokens: 4\nrepetitions: 1\nwarmup: 0\nthreads: 1\ntimeout: 120s\n",
    );
    // The user's own Open MPI interface setting carries the shm run's TCP between hosts.
    assert_eq!(run(&suite, &[("OMPI_MCA_btl_tcp_if_include", SUBNET)]), 0);
    let this = parlab::launch::hosts::this_host();
    let both: BTreeSet<String> = [this.clone(), HOST_B.to_string()].into();
    for name in ["tcp", "shm", "split"] {
        let m = suite.manifest(name);
        assert_eq!(m.status(), Status::Ok, "{name}: {:?}", m.reason());
        assert_eq!(hosts_of(&m), both, "{name}: ranks on both hosts");
        let launch = m.launch().unwrap();
        assert!(!launch.command.contains("btl_tcp_if_include lo"), "{name}: {}", launch.command);
        assert!(m.caveats.iter().any(|c| matches!(c, Caveat::SeveralHosts { .. })), "{name}: {:?}", m.caveats);
        assert!(!m.caveats.contains(&Caveat::SharedMemory), "{name}: {:?}", m.caveats);
    }
    assert!(suite.manifest("tcp").launch().unwrap().transport.contains(&format!("TCP over {SUBNET} (the spec's interface")));
    let shm = suite.manifest("shm").launch().unwrap().transport.clone();
    assert!(shm.contains("btl self,vader,tcp") && shm.contains("OMPI_MCA_btl_tcp_if_include from the environment"), "{shm}");
    assert!(shm.contains("selected by Open MPI in rank 0: pml ob1; btl self,tcp,vader"), "{shm}");
    assert!(suite.manifest("split").answer().expect("an answer").exactness.tokens_equal);

    // A rank killed on host B: the run fails naming the host, and nothing is left on either host.
    suite.spec(
        "killed",
        &small_collectives("killed", "60s", &format!("{four}link: mpi-tcp\ninterface: {SUBNET}\n"))
            .replace("world: 2\n", "")
            .replace("sizes: [4, 4096]", "sizes: [16]"),
    );
    assert_eq!(run(&suite, &[("PARLAB_FAULT", "signal:9:rank3@killed")]), 1);
    let killed = suite.manifest("killed");
    let reason = killed.reason().unwrap_or_default();
    assert!(reason.contains(&format!("rank 3 on host {HOST_B} was killed by signal 9")), "{reason}");
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && !(suite.leftovers().is_empty() && hosts.processes_in_b().is_empty()) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(suite.leftovers().is_empty(), "left on this host: {:?}", suite.leftovers());
    assert_eq!(hosts.processes_in_b(), "", "left on host B");
}

#[test]
fn plan_json_shows_the_launch_line_and_no_loopback_pin_for_remote_hosts() {
    let suite = Suite::new();
    let dir = suite.dir.path();
    std::fs::write(dir.join("hosts"), "localhost slots=2\nnode-elsewhere.invalid slots=2\n").unwrap();
    suite.spec("far", &small_collectives("far", "60s", "hostfile: ../hosts\nlink: [mpi-tcp, mpi-shm]\n"));
    suite.spec("near", &small_collectives("near", "60s", "link: mpi-tcp\n"));
    let out = Command::new(env!("CARGO_BIN_EXE_parlab"))
        .args(["plan", "specs", "--json"])
        .current_dir(dir)
        .env_remove("OMPI_MCA_btl_tcp_if_include")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let line = |exp: &str, link: &str| -> String {
        let r = runs.iter().find(|r| r["experiment"] == exp && r["link"] == link).unwrap();
        r["launch"]["command"].as_str().unwrap().to_string()
    };
    assert!(line("near", "mpi-tcp").contains("--mca btl_tcp_if_include lo"), "{}", line("near", "mpi-tcp"));
    for link in ["mpi-tcp", "mpi-shm"] {
        let far = line("far", link);
        assert!(far.contains("--hostfile") && !far.contains("btl_tcp_if_include lo"), "{far}");
    }
    assert!(line("far", "mpi-shm").contains("--mca btl self,vader,tcp"));
    assert!(processes_mentioning(Path::new(dir)).is_empty());
}
