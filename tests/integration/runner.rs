//! The library's runner (`parlab::runner::run_suite`) fed to a recording reporter: the events
//! of a suite that launches nothing (a modelled run and a run the machine's gates refuse).
//! Launched runs are tested through the binary (`launch`, `nightly`): a rank is the binary.

use parlab::manifest::lock::StoreLock;
use parlab::runner::{run_suite, Recorder, RunnerOptions, SuiteEnd};

/// The store's lock, as `parlab run` takes it before the runner may write there (a store another
/// controller holds is refused by the binary: `reliability`).
fn held(store: &tempfile::TempDir) -> StoreLock {
    StoreLock::acquire(store.path(), false).unwrap()
}

/// A modelled run and a GPU collectives run, as one suite from a temporary folder.
fn suite(dir: &std::path::Path) -> Vec<parlab::spec::RunPlan> {
    std::fs::write(
        dir.join("a-modelled.yaml"),
        "name: runner-modelled\nkind: model\nmodel: gpt2\ndevices: [a100-80gb]\nlink: [nvswitch]\nstrategy: [tensor]\nworld: [2]\ncontext: 1024\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b-gpu.yaml"),
        "name: runner-gpu\nkind: collectives\nworld: 1\nlink: mpi-shm\nops: [device-read]\nsizes: [64KiB]\niterations: 2\n",
    )
    .unwrap();
    parlab::spec::load_suite_limited(&[dir.to_path_buf()], 100).unwrap()
}

#[test]
fn the_runner_announces_every_step_and_a_second_pass_finds_the_modelled_run_cached() {
    if parlab::gates::Gates::probe_machine().unmet(&suite(tempfile::tempdir().unwrap().path())[1].requires).is_empty() {
        println!("skipped: this machine has a GPU, so the GPU run would launch (the runner's launches are tested through the binary)");
        return;
    }
    let (specs, store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runs = suite(specs.path());
    assert_eq!(runs.len(), 2);
    let pass = |recorder: &Recorder| run_suite(&runs, runs.clone(), &held(&store), &RunnerOptions::default(), recorder).unwrap();
    let first = Recorder::default();
    assert_eq!(pass(&first), SuiteEnd::Finished { runs: 2, failed: 0 });
    let kinds: Vec<String> = first.lines().iter().map(|l| l.split([' ', '{']).next().unwrap().to_string()).collect();
    assert_eq!(
        kinds,
        ["GatesObtained", "SuiteStarted", "RunStarted", "RunEnded", "RunStarted", "RunEnded", "SuiteEnded"],
        "{:#?}",
        first.lines()
    );
    let ends = |r: &Recorder| {
        r.lines()
            .into_iter()
            .filter(|l| l.starts_with("RunEnded"))
            .map(|l| l.rsplit("end: ").next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ends(&first), ["Ok }", "NotRun }"]);
    assert!(store.path().join(format!("{}.json", runs[0].run_id)).is_file(), "the modelled run's manifest is written");
    let second = Recorder::default();
    pass(&second);
    assert_eq!(ends(&second), ["Cached }", "NotRun }"], "a modelled run already written is cached; a NOT_RUN is decided again");
}

/// A NOT_RUN decided again the same way leaves its manifest as written (its dates, and so the
/// register's, do not move on a rerun); a stored decision that differs is rewritten.
#[test]
fn a_not_run_decided_again_the_same_way_keeps_its_manifest_and_a_changed_one_is_rewritten() {
    let (specs, store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runs = suite(specs.path());
    if parlab::gates::Gates::probe_machine().unmet(&runs[1].requires).is_empty() {
        println!("skipped: this machine has a GPU, so the GPU run would launch");
        return;
    }
    let pass = || run_suite(&runs, runs.clone(), &held(&store), &RunnerOptions::default(), &Recorder::default()).unwrap();
    pass();
    let path = parlab::manifest::Manifest::path_for(store.path(), &runs[1].run_id);
    let mut stored = parlab::manifest::read_one(&path).unwrap();
    assert_eq!(stored.status(), parlab::manifest::Status::NotRun);
    stored.started_at = "2026-01-01T00:00:00Z".into();
    stored.finished_at = "2026-01-01T00:00:01Z".into();
    stored.parlab.commit = "0123456789ab".into();
    stored.write(store.path()).unwrap();
    let before = std::fs::read(&path).unwrap();
    pass();
    assert_eq!(std::fs::read(&path).unwrap(), before, "the same decision is left as written");
    let parlab::manifest::Outcome::NotRun { reason } = &mut stored.outcome else { unreachable!() };
    reason.push_str("; needs something this machine lacked then");
    stored.write(store.path()).unwrap();
    pass();
    let again = parlab::manifest::read_one(&path).unwrap();
    assert!(!again.reason().unwrap().contains("lacked then"), "a changed decision is rewritten: {:?}", again.reason());
    assert_ne!(again.finished_at, "2026-01-01T00:00:01Z");
    // The same reason decided on another machine, or by other measuring code, is rewritten too.
    for change in
        [|m: &mut parlab::manifest::Manifest| m.machine.cores += 1, |m: &mut parlab::manifest::Manifest| m.parlab.measuring.push('0')]
    {
        let mut stored = parlab::manifest::read_one(&path).unwrap();
        stored.finished_at = "2026-01-01T00:00:01Z".into();
        change(&mut stored);
        stored.write(store.path()).unwrap();
        pass();
        assert_ne!(parlab::manifest::read_one(&path).unwrap().finished_at, "2026-01-01T00:00:01Z");
    }
}
