//! `launcher: srun` for real, under the one-host Slurm cluster `ci/slurm.sh` starts
//! (`ci/slurm.sh test` runs these ignored tests with `SLURM_CONF` set, then stops Slurm):
//! a collectives run and a tensor-split decode at world 2 give status ok and the unsplit
//! tokens; a hanging rank is killed at the timeout (srun's job cancelled with scancel) and a
//! killed rank fails its run, with no rank process and no Slurm job left.

use super::launch::{processes_mentioning, small_collectives, Suite};
use parlab::manifest::{read_all, Manifest, Status};
use std::process::Command;
use std::time::{Duration, Instant};

/// Waits up to 30 s for the node of the cluster `SLURM_CONF` names to be idle (a job of an
/// earlier test may still be completing); panics otherwise.
fn slurm_ready() {
    let conf = std::env::var("SLURM_CONF").expect("SLURM_CONF unset: run these tests through `ci/slurm.sh test`");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("sinfo").args(["-h", "-N", "-o", "%t"]).output().expect("sinfo runs");
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if state == "idle" {
            return;
        }
        assert!(Instant::now() < until, "the Slurm node of {conf} is '{state}', not idle: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Jobs Slurm still lists, running or completing (every job of this private cluster is a test's).
fn jobs() -> Vec<String> {
    let out = Command::new("squeue").args(["-h", "-o", "%i %j %T"]).output().expect("squeue runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).filter(|l| !l.trim().is_empty()).collect()
}

/// Waits up to 30 s for no process mentioning the suite and no Slurm job; panics otherwise.
fn nothing_left(suite: &Suite) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (procs, jobs) = (processes_mentioning(suite.dir.path()), jobs());
        if procs.is_empty() && jobs.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "10 s after the run: processes {procs:?}, Slurm jobs {jobs:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn launched_by_srun(m: &Manifest) {
    let command = &m.launch().expect("launch recorded").command;
    assert!(command.contains(&format!("srun -n {} ", m.layout.world)), "{command}");
    if std::env::var_os("SLURM_MPI_TYPE").is_none() {
        assert!(command.contains("--mpi=pmix"), "{command}");
    }
}

#[test]
#[ignore = "needs a running Slurm: ci/slurm.sh test"]
fn srun_runs_collectives_and_a_tensor_decode_with_the_unsplit_tokens() {
    slurm_ready();
    let suite = Suite::new();
    let small = suite.dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(small.join("config.json"), super::decode::SMALL).unwrap();
    suite.spec("coll", &small_collectives("coll", "60s", "launcher: srun\n"));
    suite.spec(
        "tp",
        "name: tp\nkind: decode\nmodel: ../small\nstrategy: tensor\nworld: [1, 2]\nsequences: 1\nlink: mpi-shm\n\
         prompt: {length: 10, seed: 4}\nnew_tokens: 7\nrepetitions: 1\nwarmup: 0\nthreads: 1\ntimeout: 120s\nlauncher: srun\n",
    );
    let state = suite.dir.path().join("state");
    assert_eq!(suite.run(&[("PARLAB_STATE", state.to_str().unwrap())]), 0, "every run ok");
    let (all, _) = read_all(&suite.manifests());
    assert_eq!(all.len(), 3, "collectives at 2, decode at 1 and 2");
    for m in &all {
        assert_eq!(m.status(), Status::Ok, "{} world {}: {:?}", m.experiment, m.layout.world, m.reason());
        launched_by_srun(m);
    }
    let coll = suite.manifest("coll");
    let out = suite.manifests().join(&coll.run_id);
    for rank in 0..2 {
        assert!(out.join(format!("ranklogs/rank.{rank}.stderr")).is_file(), "srun's --error file of rank {rank}");
    }
    let decode: Vec<&Manifest> = all.iter().filter(|m| m.experiment == "tp").collect();
    let unsplit = decode.iter().find(|m| m.layout.world == 1).expect("the world-1 run");
    let split = decode.iter().find(|m| m.layout.world == 2).expect("the world-2 run");
    let (unsplit, split) = (unsplit.answer().expect("an answer"), split.answer().expect("an answer"));
    assert_eq!(unsplit.tokens[0].len(), 7, "{unsplit:?}");
    assert_eq!(split.tokens, unsplit.tokens, "the tensor split under srun changed the tokens");
    assert!(split.exactness.tokens_equal, "{:?}", split.exactness);
    nothing_left(&suite);
}

#[test]
#[ignore = "needs a running Slurm: ci/slurm.sh test"]
fn a_hanging_rank_under_srun_is_killed_at_the_timeout_leaving_nothing() {
    slurm_ready();
    let suite = Suite::new();
    // 20 s: Slurm allocates, starts its step and the libtorch-linked ranks before the deadline
    // (the ranks write their step first) even on a loaded 2-core machine.
    suite.spec("hang", &small_collectives("hang", "20s", "launcher: srun\n"));
    assert_eq!(suite.run(&[("PARLAB_FAULT", "hang:rank1@hang")]), 1, "a failed run makes `parlab run` exit 1");
    let m = suite.manifest("hang");
    assert_eq!(m.status(), Status::Failed);
    let reason = m.reason().unwrap_or_default();
    assert!(reason.contains("timed out after 20 s"), "{reason}");
    // Cancelled through Slurm too (on other nodes its tasks are out of reach of a kill): parlab
    // runs outside any allocation here, so the whole job srun allocated for the launch.
    let out = suite.manifests().join(&m.run_id);
    let step = std::fs::read_to_string(out.join(parlab::launch::slurm::STEP_FILE)).expect("the ranks wrote their step");
    let job = step.trim().split_once('.').expect("JOB.STEP").0;
    let said = format!("cancelled Slurm job {job}, which srun allocated for this launch, with scancel");
    assert!(reason.contains(&said), "{said} in: {reason}");
    launched_by_srun(&m);
    nothing_left(&suite);
}

#[test]
#[ignore = "needs a running Slurm: ci/slurm.sh test"]
fn a_rank_killed_under_srun_fails_its_run_leaving_nothing() {
    slurm_ready();
    let suite = Suite::new();
    suite.spec("killed", &small_collectives("killed", "60s", "launcher: srun\n"));
    assert_eq!(suite.run(&[("PARLAB_FAULT", "signal:9:rank1@killed")]), 1, "a failed run makes `parlab run` exit 1");
    let m = suite.manifest("killed");
    assert_eq!(m.status(), Status::Failed);
    let reason = m.reason().unwrap_or_default();
    assert!(reason.contains("rank 1 was killed by signal 9 (Killed)"), "{reason}");
    launched_by_srun(&m);
    nothing_left(&suite);
}
