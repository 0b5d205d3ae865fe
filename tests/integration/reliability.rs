//! Safe to interrupt, safe to share: signals end the whole launch, a second controller is
//! refused, bad checkpoints and configs fail their run (never a panic), huge matrices and long
//! names are refused before anything runs, nightly never passes on nothing, and a write that
//! fails leaves the store as it was. Each case here failed on the first version.

use super::launch::{processes_mentioning, small_collectives, Suite};
use parlab::manifest::Status;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PARLAB: &str = env!("CARGO_BIN_EXE_parlab");

/// `parlab ARGS` in `dir`, output captured.
fn parlab(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(PARLAB);
    cmd.args(args).current_dir(dir).env_remove("PARLAB_FAULT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `parlab` started as a shell with job control starts a foreground command: SIGINT at its
/// default action. Tests run from a background job (`make test &` in a script) inherit SIGINT
/// ignored (POSIX), and parlab keeps an inherited ignored SIGINT ignored, as whoever started it
/// asked: the Ctrl-C these tests send would never arrive.
fn controller() -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(PARLAB);
    // SAFETY: signal is async-signal-safe; a shell does this before it execs a foreground job.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    command
}

/// `child`'s exit after a signal the test sent, waited for at most a minute: past it the child
/// is killed and the test fails, instead of waiting for ever on a signal that did not end it.
fn exit_after_signal(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("parlab (pid {}) had not ended a minute after the signal", child.id());
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A controller running the suite in the background, its ranks hanging (rank 1 of `hung`).
fn start_hung(suite: &Suite) -> Child {
    start_hanging(suite, "hung", &[], Stdio::null())
}

/// `parlab run specs --no-report EXTRA` of the suite in the background (with `--out` in EXTRA,
/// rendering there instead), rank 1 of `experiment` hanging, its stderr to `stderr`.
fn start_hanging(suite: &Suite, experiment: &str, extra: &[&str], stderr: Stdio) -> Child {
    let report = if extra.contains(&"--out") { None } else { Some("--no-report") };
    controller()
        .args(["run", "specs"])
        .args(report)
        .args(extra)
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PARLAB_FAULT", format!("hang:rank1@{experiment}"))
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// True for a `processes_mentioning` line of a `parlab rank` process (not mpirun's, which names it too).
fn is_rank(line: &str) -> bool {
    let args: Vec<&str> = line.split_once(": ").map_or("", |(_, a)| a).split_whitespace().collect();
    args.len() > 1 && args[0].ends_with("parlab") && args[1] == "rank"
}

fn rank_count(dir: &Path) -> usize {
    processes_mentioning(dir).iter().filter(|p| is_rank(p)).count()
}

/// Waits (up to `limit`) until `done` holds; returns whether it did.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

fn hung_suite() -> Suite {
    let suite = Suite::new();
    suite.spec("hung", &small_collectives("hung", "60s", ""));
    suite.spec("later", &small_collectives("later", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    suite
}

fn wait_for_ranks(suite: &Suite) {
    // The suite probes the machine first (no state folder): minutes are allowed, seconds taken.
    assert!(wait_until(Duration::from_secs(120), || rank_count(suite.dir.path()) >= 2), "the ranks never started");
}

fn interrupted_by(sig: i32, code: i32) {
    let suite = hung_suite();
    let mut child = start_hung(&suite);
    wait_for_ranks(&suite);
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, sig) };
    let status = exit_after_signal(&mut child);
    assert_eq!(status.code(), Some(code), "exit status after signal {sig}");
    assert!(wait_until(Duration::from_secs(10), || suite.leftovers().is_empty()), "left behind: {:?}", suite.leftovers());
    let hung = suite.manifest("hung");
    assert_eq!(hung.status(), Status::Failed);
    assert!(hung.reason().unwrap_or("").starts_with("interrupted"), "{:?}", hung.reason());
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    assert!(all.iter().all(|m| m.experiment != "later"), "the suite stops at the interrupted run");
}

#[test]
fn an_interrupt_between_rounds_writes_the_runs_still_launching_failed_and_keeps_their_launches() {
    let suite = Suite::new();
    // "done" is launched once in round 1 before "hung" hangs there; with 2 launches each it is
    // still launching when the signal comes.
    suite.spec("a-done", &small_collectives("done", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    suite.spec("b-hung", &small_collectives("hung", "60s", ""));
    let mut child = controller()
        .args(["run", "specs", "--no-report", "--launches", "2"])
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PARLAB_FAULT", "hang:rank1@hung")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_ranks_of(&suite, "hung");
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(exit_after_signal(&mut child).code(), Some(130));
    let hung = suite.manifest("hung");
    assert_eq!(hung.status(), Status::Failed);
    assert!(hung.reason().unwrap_or("").starts_with("launch 1 of 2: interrupted"), "{:?}", hung.reason());
    let done = suite.manifest("done");
    assert_eq!((done.status(), done.reason()), (Status::Failed, Some("interrupted after 1 of 2 launches")));
    let results = suite.manifests().join(&done.run_id);
    assert!(results.join("records-rank0.jsonl").is_file(), "its first launch's records are kept");
    assert!(!results.join("launch-1").exists(), "no second launch after the signal");
}

/// A suite of one small collectives run, `again`, measured once: the suite, its manifest and
/// its results folder.
fn measured_once() -> (Suite, parlab::manifest::Manifest, PathBuf) {
    let suite = Suite::new();
    suite.spec("again", &small_collectives("again", "60s", ""));
    assert_eq!(suite.run(&[]), 0);
    let before = suite.manifest("again");
    assert_eq!(before.status(), Status::Ok);
    let results = suite.manifests().join(&before.run_id);
    (suite, before, results)
}

#[test]
fn an_interrupted_forced_rerun_keeps_the_measurement_it_was_to_replace() {
    let (suite, before, results) = measured_once();
    let files = |dir: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let kept = files(&results);
    let child = start_hanging(&suite, "again", &["--force"], Stdio::piped());
    wait_for_ranks(&suite);
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(stderr(&out).contains("was cut short; its earlier manifest and results are kept"), "{}", stderr(&out));
    let after = suite.manifest("again");
    assert_eq!((after.status(), &after.started_at), (Status::Ok, &before.started_at), "the ok manifest is the one measured before");
    assert_eq!(files(&results), kept, "its results folder is the one measured before");
    let aside = suite.manifests().join(format!(".{}.previous", before.run_id));
    assert!(!aside.exists(), "nothing left set aside");
    // A forced rerun that ends replaces both, and leaves nothing aside either.
    assert_eq!(suite.parlab(&["run", "specs", "--no-report", "--force"]).status.code(), Some(0));
    let replaced = suite.manifest("again");
    assert!(replaced.status() == Status::Ok && replaced.started_at != before.started_at);
    assert!(!aside.exists() && results.join("plan.json").is_file());
}

#[test]
fn a_controller_killed_during_a_forced_rerun_leaves_the_earlier_results_to_the_next_run() {
    let (suite, before, results) = measured_once();
    let samples = std::fs::read(results.join("samples.parquet")).unwrap();
    let mut child = start_hanging(&suite, "again", &["--force"], Stdio::null());
    wait_for_ranks(&suite);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(wait_until(Duration::from_secs(20), || suite.leftovers().is_empty()), "left behind: {:?}", suite.leftovers());
    assert!(!results.join("samples.parquet").exists(), "the killed rerun's partial folder is in place");
    // The next run settles it: the stored manifest is still the earlier one, so its results go back.
    let out = suite.parlab(&["run", "specs", "--no-report"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("its earlier results are back in place"), "{}", stderr(&out));
    assert_eq!(suite.manifest("again").started_at, before.started_at, "cached, not measured again");
    assert_eq!(std::fs::read(results.join("samples.parquet")).unwrap(), samples);
    assert!(!suite.manifests().join(format!(".{}.previous", before.run_id)).exists());
}

#[test]
fn a_forced_rerun_that_fails_keeps_the_measurement_it_replaced_in_superseded() {
    let (suite, before, results) = measured_once();
    let samples = std::fs::read(results.join("samples.parquet")).unwrap();
    let failing_rerun = || {
        Command::new(PARLAB)
            .args(["run", "specs", "--no-report", "--force"])
            .current_dir(suite.dir.path())
            .env("PARLAB_MANIFESTS", suite.manifests())
            .env("PARLAB_FAULT", "exit:3:rank1@again")
            .output()
            .unwrap()
    };
    let out = failing_rerun();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("failed; its earlier ok manifest and results are kept in"), "{}", stderr(&out));
    // The register says what happened tonight: the stored manifest is the failed rerun's.
    let after = suite.manifest("again");
    assert_eq!(after.status(), Status::Failed, "{:?}", after.reason());
    // The measurement it replaced is kept in superseded/, manifest and results.
    let kept = parlab::manifest::retire::superseded_dir(&suite.manifests());
    let earlier = parlab::manifest::read_one(&parlab::manifest::Manifest::path_for(&kept, &before.run_id)).unwrap();
    assert_eq!((earlier.status(), &earlier.started_at), (Status::Ok, &before.started_at));
    assert_eq!(std::fs::read(kept.join(before.run_id.as_str()).join("samples.parquet")).unwrap(), samples);
    assert!(!kept.join(before.run_id.as_str()).join(".set-aside-for").exists(), "the set-aside mark is not carried along");
    assert!(!suite.manifests().join(format!(".{}.previous", before.run_id)).exists(), "nothing left aside");
    // A second failure replaces a failed manifest: nothing to keep, the kept measurement stays.
    assert_eq!(failing_rerun().status.code(), Some(1));
    assert_eq!(
        parlab::manifest::read_one(&parlab::manifest::Manifest::path_for(&kept, &before.run_id)).unwrap().started_at,
        before.started_at
    );
    // A rerun that ends ok replaces the failed one as usual.
    assert_eq!(suite.parlab(&["run", "specs", "--no-report", "--force"]).status.code(), Some(0));
    assert_eq!(suite.manifest("again").status(), Status::Ok);
}

#[test]
fn a_forced_rerun_recorded_not_run_keeps_the_measurement_it_replaced_in_superseded() {
    let (suite, before, results) = measured_once();
    let samples = std::fs::read(results.join("samples.parquet")).unwrap();
    // The same run (requirements are not in its identity) now needs more cores than any machine.
    suite.spec("again", &small_collectives("again", "60s", "requires: {cores: 4096}\n"));
    let out = suite.parlab(&["run", "specs", "--no-report", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("was recorded NOT_RUN; its earlier ok manifest and results are kept in"), "{}", stderr(&out));
    let after = suite.manifest("again");
    assert_eq!((after.status(), &after.run_id), (Status::NotRun, &before.run_id));
    let kept = parlab::manifest::retire::superseded_dir(&suite.manifests());
    let earlier = parlab::manifest::read_one(&parlab::manifest::Manifest::path_for(&kept, &before.run_id)).unwrap();
    assert_eq!((earlier.status(), &earlier.started_at), (Status::Ok, &before.started_at));
    assert_eq!(std::fs::read(kept.join(before.run_id.as_str()).join("samples.parquet")).unwrap(), samples);
    assert!(!results.exists(), "the results folder moved with its manifest");
    assert!(!suite.manifests().join(format!(".{}.previous", before.run_id)).exists(), "nothing left aside");
}

/// Two small collectives runs, `a-first` launched `first_launches` times and `b-second`
/// `second_launches` times (in rounds), measured once; then the manifest file of `broken` is a
/// folder, so writing it fails (root writes anywhere; a rename onto a folder does not): the
/// suite, and both runs' manifests before the failure.
fn measured_then_unwritable(first_launches: u32, second_launches: u32, broken: &str) -> (Suite, [parlab::manifest::Manifest; 2]) {
    let suite = Suite::new();
    suite.spec("a-first", &small_collectives("a-first", "60s", &format!("launches: {first_launches}\n")));
    let second =
        small_collectives("b-second", "60s", &format!("launches: {second_launches}\n")).replace("sizes: [4, 4096]", "sizes: [8, 64]");
    suite.spec("b-second", &second);
    assert_eq!(suite.run(&[]), 0);
    let before = [suite.manifest("a-first"), suite.manifest("b-second")];
    let path = parlab::manifest::Manifest::path_for(&suite.manifests(), &suite.manifest(broken).run_id);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    (suite, before)
}

#[test]
fn a_manifest_that_cannot_be_written_in_a_later_round_still_writes_the_runs_that_ended_beside_it() {
    let (suite, [first, second]) = measured_then_unwritable(2, 2, "a-first");
    let out = suite.parlab(&["run", "specs", "--no-report", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}.json", first.run_id)), "the write that failed is named: {}", stderr(&out));
    // b-second ended in the same round after a-first: its measurement is written, not dropped.
    let now = suite.manifest("b-second");
    assert!(now.status() == Status::Ok && now.started_at != second.started_at, "{:?}", now.reason());
    assert!(!suite.manifests().join(format!(".{}.previous", now.run_id)).exists(), "nothing of b-second left aside");
}

#[test]
fn a_manifest_that_cannot_be_written_in_the_first_round_puts_back_the_runs_still_launching() {
    let (suite, [first, _]) = measured_then_unwritable(2, 1, "b-second");
    let results = suite.manifests().join(first.run_id.as_str());
    let samples = std::fs::read(results.join("samples.parquet")).unwrap();
    let out = suite.parlab(&["run", "specs", "--no-report", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // a-first had launched once of twice when b-second's manifest failed: cut short, its earlier
    // manifest and results stay (they were left set aside, a partial folder in their place).
    assert!(stderr(&out).contains("was cut short; its earlier manifest and results are kept"), "{}", stderr(&out));
    assert_eq!(suite.manifest("a-first").started_at, first.started_at);
    assert_eq!(std::fs::read(results.join("samples.parquet")).unwrap(), samples);
    assert!(!suite.manifests().join(format!(".{}.previous", first.run_id)).exists(), "nothing left aside");
}

#[test]
fn a_manifest_that_cannot_be_written_puts_its_runs_earlier_results_back() {
    let (suite, [first, _]) = measured_then_unwritable(1, 1, "a-first");
    let results = suite.manifests().join(first.run_id.as_str());
    let samples = std::fs::read(results.join("samples.parquet")).unwrap();
    let out = suite.parlab(&["run", "specs", "--no-report", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}.json", first.run_id)), "the write that failed is named: {}", stderr(&out));
    // Its rerun ended ok but its manifest could not be written: the results beside the stored
    // manifest are the earlier ones, not the new launch's.
    assert_eq!(std::fs::read(results.join("samples.parquet")).unwrap(), samples);
    assert!(!suite.manifests().join(format!(".{}.previous", first.run_id)).exists(), "nothing left aside");
}

#[test]
fn a_manifest_another_parlab_wrote_is_never_replaced_and_an_unreadable_one_is_kept_when_its_rerun_fails() {
    let (suite, before, _) = measured_once();
    let path = parlab::manifest::Manifest::path_for(&suite.manifests(), &before.run_id);
    let text = std::fs::read_to_string(&path).unwrap();
    let newer = text.replacen(parlab::manifest::SCHEMA, "parlab.manifest/99", 1);
    std::fs::write(&path, &newer).unwrap();
    let out = suite.parlab(&["run", "specs", "--no-report", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("was written by another parlab (schema `parlab.manifest/99`"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer, "left as it was");
    // A manifest this parlab cannot read (cut off) may still hold figures: a rerun that fails
    // keeps it in superseded/.
    let cut = &text[..text.len() / 2];
    std::fs::write(&path, cut).unwrap();
    let out = Command::new(PARLAB)
        .args(["run", "specs", "--no-report", "--force"])
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PARLAB_FAULT", "exit:3:rank1@again")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let kept = parlab::manifest::Manifest::path_for(&parlab::manifest::retire::superseded_dir(&suite.manifests()), &before.run_id);
    assert_eq!(std::fs::read_to_string(kept).unwrap(), cut);
    assert_eq!(suite.manifest("again").status(), Status::Failed);
}

#[test]
fn a_register_that_cannot_be_written_after_the_suite_loses_neither_its_account_nor_its_failed_runs() {
    // The output folder passed its checks at the start; while the ranks hang, something puts a
    // file where the register's tables go (the render fails), or where the output folder goes
    // (its lock cannot be taken).
    for (blocked, said_of) in [("out/tables", "tables: not a folder"), ("out", "out: a file, not the folder the register is written into")]
    {
        let suite = Suite::new();
        suite.spec("hung", &small_collectives("hung", "3s", ""));
        let out_dir = suite.dir.path().join("out");
        let out_arg = out_dir.display().to_string();
        let child = start_hanging(&suite, "hung", &["--out", &out_arg], Stdio::piped());
        wait_for_ranks_of(&suite, "hung");
        let blocked = suite.dir.path().join(blocked);
        std::fs::create_dir_all(blocked.parent().unwrap()).unwrap();
        if blocked.is_dir() {
            std::fs::remove_dir_all(&blocked).unwrap();
        }
        std::fs::write(&blocked, "a file where a folder goes").unwrap();
        let out = child.wait_with_output().unwrap();
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{said_of}: the failed run's exit code: {said}");
        assert!(said.contains("parlab: 1 runs, 1 failed; manifests in"), "the account is printed: {said}");
        assert!(said.contains(said_of), "the render's error is printed: {said}");
        assert_eq!(suite.manifest("hung").status(), Status::Failed);
    }
}

#[test]
fn a_fault_that_could_never_strike_is_refused_before_anything_runs() {
    let suite = Suite::new();
    suite.spec("target", &small_collectives("target", "60s", ""));
    let manifests = suite.manifests().display().to_string();
    for (fault, said) in [
        ("hang:rank1@targte", "names experiment `targte`, which the suite does not hold"),
        ("hang:rank1@", "`@` names no experiment"),
        ("slow:200", "expected ACTION[:ARG]:rankN[@experiment]"),
    ] {
        let out = parlab(suite.dir.path(), &["run", "specs", "--no-report"], &[("PARLAB_MANIFESTS", &manifests), ("PARLAB_FAULT", fault)]);
        assert_eq!(out.status.code(), Some(2), "{fault}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{fault}: {}", stderr(&out));
        assert!(parlab::manifest::read_all(&suite.manifests()).0.is_empty(), "{fault}: nothing runs");
    }
    // Set but empty is unset, as the launcher takes it: the suite runs unharmed.
    let out = parlab(suite.dir.path(), &["run", "specs", "--no-report"], &[("PARLAB_MANIFESTS", &manifests), ("PARLAB_FAULT", "")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Waits until both ranks of experiment `name` run (rank processes naming its results folder).
fn wait_for_ranks_of(suite: &Suite, name: &str) {
    let folder = || {
        std::fs::read_dir(suite.manifests())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| std::fs::read_to_string(p.join("plan.json")).is_ok_and(|t| t.contains(&format!("\"experiment\": \"{name}\""))))
    };
    let running = || {
        folder().is_some_and(|f| {
            let needle = f.display().to_string();
            processes_mentioning(suite.dir.path()).iter().filter(|p| is_rank(p) && p.contains(&needle)).count() >= 2
        })
    };
    assert!(wait_until(Duration::from_secs(60), running), "the ranks of {name} never started");
}

#[test]
fn sigint_ends_the_launch_records_it_interrupted_and_exits_130() {
    interrupted_by(libc::SIGINT, 130);
}

#[test]
fn sigterm_ends_the_launch_and_exits_143() {
    interrupted_by(libc::SIGTERM, 143);
}

#[test]
fn a_controller_started_ignoring_sighup_as_nohup_does_keeps_ignoring_it() {
    use std::os::unix::process::CommandExt;
    let suite = Suite::new();
    suite.spec("hung", &small_collectives("hung", "5s", ""));
    suite.spec("later", &small_collectives("later", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    let mut command = Command::new(PARLAB);
    command
        .args(["run", "specs", "--no-report"])
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PARLAB_FAULT", "hang:rank1@hung")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: signal is async-signal-safe; `nohup` does exactly this before it execs.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    wait_for_ranks(&suite);
    // The terminal closes (a logout): the suite goes on, the hung run ends by its own timeout.
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert_eq!(child.wait().unwrap().code(), Some(1), "a run failed (timed out); not 129 (interrupted by SIGHUP)");
    let hung = suite.manifest("hung");
    assert!(hung.reason().unwrap_or("").contains("timed out"), "{:?}", hung.reason());
    assert_eq!(suite.manifest("later").status(), Status::Ok, "the suite went on after the SIGHUP");
    assert!(wait_until(Duration::from_secs(10), || suite.leftovers().is_empty()), "left behind: {:?}", suite.leftovers());
}

#[test]
fn a_controller_killed_by_sigkill_leaves_no_rank_and_the_next_run_completes() {
    let suite = hung_suite();
    let mut child = start_hung(&suite);
    wait_for_ranks(&suite);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(wait_until(Duration::from_secs(10), || suite.leftovers().is_empty()), "left behind: {:?}", suite.leftovers());
    assert_eq!(suite.run(&[]), 0, "a second run completes the suite");
    assert_eq!(suite.manifest("hung").status(), Status::Ok);
    assert_eq!(suite.manifest("later").status(), Status::Ok);
}

#[test]
fn a_second_controller_is_refused_with_the_holders_pid_and_touches_nothing() {
    let suite = hung_suite();
    let mut first = start_hung(&suite);
    wait_for_ranks(&suite);
    let ranks_before = rank_count(suite.dir.path());
    let out = parlab(suite.dir.path(), &["run", "specs", "--no-report"], &[("PARLAB_MANIFESTS", suite.manifests().to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("pid {}", first.id())), "names the holder: {}", stderr(&out));
    assert_eq!(rank_count(suite.dir.path()), ranks_before, "the first controller's ranks still run");
    // Refused before a folder is made for its register (it once left `fresh/.parlab.lock`).
    let fresh = suite.dir.path().join("fresh");
    let out = parlab(
        suite.dir.path(),
        &["run", "specs", "--out", fresh.to_str().unwrap()],
        &[("PARLAB_MANIFESTS", suite.manifests().to_str().unwrap())],
    );
    assert_eq!((out.status.code(), fresh.exists()), (Some(2), false), "{}", stderr(&out));
    let report = parlab(suite.dir.path(), &["report", "--manifests", suite.manifests().to_str().unwrap()], &[]);
    assert_eq!(report.status.code(), Some(0), "a render only reads the store, so it may run beside: {}", stderr(&report));
    let out = suite.dir.path().join("reports");
    let holder = parlab::manifest::lock::StoreLock::acquire(&out, false).unwrap();
    let second = parlab(suite.dir.path(), &["report", "--manifests", suite.manifests().to_str().unwrap()], &[]);
    assert_eq!(second.status.code(), Some(2), "two renders into one folder: {}", stderr(&second));
    assert!(stderr(&second).contains(&format!("pid {}", std::process::id())), "{}", stderr(&second));
    drop(holder);
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    assert_eq!(exit_after_signal(&mut first).code(), Some(130));
    assert!(wait_until(Duration::from_secs(10), || suite.leftovers().is_empty()));
}

#[test]
fn leftover_ranks_of_an_earlier_controller_are_ended_and_the_next_manifest_says_so() {
    // Ranks an earlier controller left behind on this store: the launcher line `parlab run`
    // builds, started here without a controller, its rank 1 hanging (so rank 0 waits in its
    // all-reduce) and its results folder in the store, so only a controller can end them (or,
    // should this test fail first, their own 60 s timeout).
    let suite = Suite::new();
    suite.spec("later", &small_collectives("later", "60s", ""));
    let earlier_specs = suite.dir.path().join("earlier-specs");
    std::fs::create_dir_all(&earlier_specs).unwrap();
    std::fs::write(earlier_specs.join("earlier.yaml"), small_collectives("earlier", "60s", "")).unwrap();
    let plan = parlab::spec::load_suite(&[earlier_specs]).unwrap().remove(0);
    // Where that controller's launch wrote: the store's folder named by the run's identity.
    let out = suite.manifests().join(plan.run_id.as_str());
    std::fs::create_dir_all(&out).unwrap();
    let plan_path = out.join("plan.json");
    std::fs::write(&plan_path, serde_json::to_string(&plan).unwrap()).unwrap();
    let machine = parlab::launch::command::Machine {
        slots: 2,
        // SAFETY: geteuid has no preconditions and cannot fail.
        root: unsafe { libc::geteuid() } == 0,
        fault: Some("hang:rank1@earlier".into()),
        forwarded: Vec::new(),
    };
    let hostfile = parlab::launch::command::planned_hostfile(&plan).unwrap();
    let line = parlab::launch::command::build(&plan, hostfile.as_deref(), &plan_path, &out, Path::new(PARLAB), &machine);
    let leftover = Command::new(&line.program)
        .args(&line.args)
        .envs(line.env.iter().map(|(k, v)| (k, v)))
        .env("PARLAB_FAULT", "hang:rank1@earlier")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each rank writes its pid file as it starts, before MPI.
    assert!(wait_until(Duration::from_secs(60), || rank_pids(&out).len() == 2), "the leftover ranks run: {:?}", rank_pids(&out));
    let pids = rank_pids(&out);
    assert_eq!(rank_count(suite.dir.path()), 2, "both are `parlab rank` processes of this store");
    assert_eq!(suite.run(&[]), 0);
    assert!(pids.iter().all(|&p| !parlab::launch::supervise::alive(p)), "the leftover ranks were ended: {pids:?}");
    let launcher = leftover.wait_with_output().unwrap();
    let told = format!("{}{}", String::from_utf8_lossy(&launcher.stdout), String::from_utf8_lossy(&launcher.stderr));
    assert!(!launcher.status.success() && told.contains("signal 15"), "mpirun saw its ranks ended by SIGTERM: {told}");
    let m = suite.manifest("later");
    let listed = pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let note = format!("ended 2 leftover ranks of an earlier controller on this store (pids {listed})");
    assert!(m.caveats.iter().any(|c| c.to_string().contains(&note)), "{note}: {:?}", m.caveats);
}

/// The pids the ranks of a results folder wrote under `out/pids/`, in order.
fn rank_pids(out: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = parlab::launch::supervise::pid_files(out).into_iter().map(|(pid, _)| pid).collect();
    pids.sort();
    pids
}

/// A small GPT-2 checkpoint folder written by `parlab model init`, from `config`.
fn checkpoint(dir: &Path, config: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    let cfg = parlab::model::ModelConfig::read(dir).unwrap();
    parlab::model::init::write_checkpoint(&cfg, 3, dir).unwrap();
}

const SMALL: &str = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4,
 "n_embd": 64, "vocab_size": 101, "n_positions": 32, "layer_norm_epsilon": 1e-05, "n_inner": null}"#;

fn decode_spec(name: &str, model: &str) -> String {
    format!(
        "name: {name}\nkind: decode\nmodel: {model}\nstrategy: tensor\nworld: 2\nlink: mpi-shm\nprompt: {{length: 5, seed: 4}}\n\
         new_tokens: 3\nrepetitions: 1\nwarmup: 0\nthreads: 1\ntimeout: 60s\n"
    )
}

/// Rewrites tensor `name` of `dir/model.safetensors` with `shape` (or fills it with NaN).
fn alter_tensor(dir: &Path, name: &str, shape: Option<Vec<usize>>) {
    use safetensors::tensor::{Dtype, TensorView};
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (n, view) in st.tensors() {
        let (mut s, mut data) = (view.shape().to_vec(), view.data().to_vec());
        if n == name {
            match &shape {
                Some(new) => {
                    data.truncate(new.iter().product::<usize>() * 4);
                    s = new.clone();
                }
                None => data[..4].copy_from_slice(&f32::NAN.to_le_bytes()),
            }
        }
        owned.push((n, s, data));
    }
    let views: Vec<(String, TensorView)> =
        owned.iter().map(|(n, s, d)| (n.clone(), TensorView::new(Dtype::F32, s.clone(), d).unwrap())).collect();
    safetensors::serialize_to_file(views, &None, &dir.join("model.safetensors")).unwrap();
}

#[test]
fn a_wrong_shaped_tensor_fails_its_run_naming_the_tensor_and_both_shapes_and_the_suite_goes_on() {
    let suite = Suite::new();
    checkpoint(&suite.dir.path().join("bad"), SMALL);
    alter_tensor(&suite.dir.path().join("bad"), "transformer.h.0.attn.c_proj.weight", Some(vec![64, 63]));
    suite.spec("a-bad", &decode_spec("a-bad", "../bad"));
    suite.spec("b-healthy", &small_collectives("b-healthy", "60s", ""));
    let code = suite.run(&[]);
    assert_eq!(code, 1, "a failed run, not a panic (101)");
    let bad = suite.manifest("a-bad");
    assert_eq!(bad.status(), Status::Failed);
    let reason = bad.reason().unwrap_or_default();
    assert!(reason.contains("h.0.attn.c_proj.weight") && reason.contains("[64, 63]") && reason.contains("[64, 64]"), "{reason}");
    assert_eq!(suite.manifest("b-healthy").status(), Status::Ok);
}

#[test]
fn nan_weights_name_the_tensor() {
    let suite = Suite::new();
    checkpoint(&suite.dir.path().join("nan"), SMALL);
    alter_tensor(&suite.dir.path().join("nan"), "transformer.h.1.mlp.c_fc.weight", None);
    suite.spec("nan", &decode_spec("nan", "../nan"));
    assert_eq!(suite.run(&[("PARLAB_STATE", suite.dir.path().join("state").to_str().unwrap())]), 1);
    let nan = suite.manifest("nan");
    let reason = nan.reason().unwrap_or_default();
    assert!(reason.contains("h.1.mlp.c_fc.weight") && reason.contains("NaN"), "{reason}");
}

#[test]
fn a_config_whose_heads_do_not_divide_the_width_is_refused_by_validate() {
    let suite = Suite::new();
    let dir = suite.dir.path().join("odd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), SMALL.replace("\"n_head\": 4", "\"n_head\": 5")).unwrap();
    suite.spec("odd", &decode_spec("odd", "../odd"));
    let out = parlab(suite.dir.path(), &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("config.json") && stderr(&out).contains("not a multiple of the 5 attention heads"), "{}", stderr(&out));
}

#[test]
fn a_matrix_of_ten_million_runs_is_refused_before_expanding() {
    let suite = Suite::new();
    checkpoint(&suite.dir.path().join("small"), SMALL);
    let list = |n: u32| format!("[{}]", (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    let spec = format!(
        "name: bomb\nkind: decode\nmodel: ../small\nstrategy: [data, tensor, pipeline]\nworld: {}\nthreads: {}\nsequences: {}\n\
         link: [mpi-shm, mpi-tcp]\nnew_tokens: {}\nprompt: {{length: 5, seed: 1}}\n",
        list(4),
        list(20),
        list(20),
        list(1250)
    );
    suite.spec("bomb", &spec);
    let started = Instant::now();
    let out = parlab(suite.dir.path(), &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("12000000 runs") && stderr(&out).contains("--max-runs"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(30), "refused without expanding");
}

#[test]
fn a_suite_past_max_runs_is_refused_once_naming_the_total_that_passes() {
    // Three files of 6 runs each: the limit of 10 is passed by the second file, and the third
    // (read and counted, never expanded) still counts towards the total the message offers.
    let suite = Suite::new();
    for name in ["a", "b", "c"] {
        suite.spec(name, &format!("name: {name}\nkind: collectives\nworld: [2, 3, 4]\nlink: [mpi-shm, mpi-tcp]\nops: [all-reduce]\n"));
    }
    let out = parlab(suite.dir.path(), &["validate", "--max-runs", "10", "specs"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("--max-runs")).count(), 1, "one problem: {err}");
    assert!(err.contains("specs/b.yaml:") && err.contains("hold 18 runs before exclusions, more than the limit of 10"), "{err}");
    assert!(err.contains("pass --max-runs 18"), "{err}");
    let out = parlab(suite.dir.path(), &["validate", "--max-runs", "18", "specs"], &[]);
    assert_eq!(out.status.code(), Some(0), "the suggestion passes: {}", stderr(&out));
}

#[test]
fn a_name_longer_than_100_characters_is_refused() {
    let suite = Suite::new();
    let name = "n".repeat(5000);
    suite.spec("long", &small_collectives(&name, "60s", ""));
    let out = parlab(suite.dir.path(), &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("5000 characters is longer than the 100 allowed"), "{}", stderr(&out));
    assert!(stderr(&out).len() < 1000, "the name is not echoed whole");
}

#[test]
fn control_characters_in_a_name_are_printed_escaped() {
    let suite = Suite::new();
    suite.spec("ctl", &small_collectives("\"bad\\u0000na\\nme\"", "60s", ""));
    let out = parlab(suite.dir.path(), &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(!text.contains('\0') && text.contains("\\0na\\nme"), "{text:?}");
}

fn nightly(dir: &Path, baseline: &Path, manifests: &Path, min_effect: &str) -> Output {
    let (b, m) = (baseline.to_str().unwrap(), manifests.to_str().unwrap());
    parlab(dir, &["nightly", "--baseline", b, "--manifests", m, "--min-effect", min_effect], &[])
}

#[test]
fn nightly_refuses_to_pass_when_nothing_was_compared_and_reports_missing_runs() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    suite.spec("two", &small_collectives("two", "60s", "").replace("sizes: [4, 4096]", "sizes: [8, 64]"));
    assert_eq!(suite.run(&[]), 0);
    let (tonight, empty) = (suite.manifests(), suite.dir.path().join("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let dir = suite.dir.path();
    for baseline in [empty.as_path(), Path::new("/etc")] {
        let out = nightly(dir, baseline, &tonight, "0.10");
        assert_eq!(out.status.code(), Some(2), "{}: {}", baseline.display(), stderr(&out));
        assert!(stderr(&out).contains("nothing to compare"), "{}", stderr(&out));
    }
    for bad in ["nan", "inf", "-0.1"] {
        assert_eq!(nightly(dir, &tonight, &tonight, bad).status.code(), Some(2), "--min-effect {bad}");
    }
    assert_eq!(nightly(dir, &tonight, &tonight, "0.10").status.code(), Some(2), "a store against itself is a misconfigured job");
    let copy = suite.dir.path().join("copy");
    assert!(Command::new("cp").arg("-a").arg(&tonight).arg(&copy).status().unwrap().success());
    assert_eq!(nightly(dir, &copy, &tonight, "0.10").status.code(), Some(0), "a store against its copy");
    let partial = suite.dir.path().join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    let kept = suite.manifest("one");
    kept.write(&partial).unwrap();
    let out = nightly(dir, &tonight, &partial, "0.10");
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("MISSING"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn report_on_a_missing_folder_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = parlab(dir.path(), &["report", "--manifests", "nowhere", "--out", "reports"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--manifests nowhere: no such manifests folder"));
    assert!(!dir.path().join("reports").exists(), "nothing written");
    std::fs::write(dir.path().join("a-file"), "{}").unwrap();
    let out = parlab(dir.path(), &["report", "--manifests", "a-file", "--out", "reports"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--manifests a-file: a file, not the folder the manifests are in"), "{}", stderr(&out));
    assert!(!dir.path().join("reports").exists(), "nothing written");
    // A folder no flag named is named as it was: by its variable, or bare where it is the default.
    let out = parlab(dir.path(), &["report", "--out", "reports"], &[("PARLAB_MANIFESTS", "a-file")]);
    assert!(stderr(&out).contains("PARLAB_MANIFESTS=a-file: a file, not the folder the manifests are in"), "{}", stderr(&out));
    let out = Command::new(PARLAB).args(["audit"]).current_dir(dir.path()).env_remove("PARLAB_MANIFESTS").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("manifests: no such manifests folder"), "no flag was given: {}", stderr(&out));
    // Set but empty (`PARLAB_MANIFESTS= parlab …`) is unset: the working folder is never the store.
    let out = parlab(dir.path(), &["audit"], &[("PARLAB_MANIFESTS", "")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("manifests: no such manifests folder"), "an empty variable: {}", stderr(&out));
}

#[test]
fn report_into_the_manifests_folder_itself_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("manifests");
    std::fs::create_dir(&store).unwrap();
    for out in ["manifests", "./manifests/"] {
        let o = parlab(dir.path(), &["report", "--manifests", "manifests", "--out", out], &[]);
        assert_eq!(o.status.code(), Some(2), "--out {out}: {}", stderr(&o));
        assert!(stderr(&o).contains("is the manifests folder itself"), "--out {out}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 0, "findings.json and the register would be read back as foreign manifests");
}

#[test]
fn audit_and_nightly_on_a_missing_folder_or_a_file_exit_2_instead_of_passing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), "{}").unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["audit", "--manifests", "nowhere"], "--manifests nowhere: no such manifests folder"),
        (&["audit", "--manifests", "a-file"], "--manifests a-file: a file, not the folder the manifests are in"),
        (&["nightly", "--baseline", "a-file", "--manifests", "empty"], "--baseline a-file: a file, not the folder the manifests are in"),
        (&["nightly", "--baseline", "nowhere", "--manifests", "empty"], "--baseline nowhere: no such baseline manifests folder"),
        (&["nightly", "--baseline", "empty", "--manifests", "a-file"], "--manifests a-file: a file, not the folder the manifests are in"),
    ];
    for (args, says) in cases {
        let out = parlab(dir.path(), args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: expected `{says}` in {}", stderr(&out));
    }
    let out = parlab(dir.path(), &["audit", "--manifests", "empty"], &[]);
    assert_eq!(out.status.code(), Some(0), "an empty store has nothing to compare: {}", stderr(&out));
}

#[test]
fn fifos_and_devices_are_refused_as_hostfiles_configs_and_manifests_without_hanging() {
    let suite = Suite::new();
    let mkfifo = |p: &Path| assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    mkfifo(&suite.dir.path().join("hosts"));
    suite.spec("fifo-hosts", &small_collectives("fifo-hosts", "60s", "hostfile: ../hosts\n"));
    let fifo_model = suite.dir.path().join("fifo-model");
    std::fs::create_dir_all(&fifo_model).unwrap();
    mkfifo(&fifo_model.join("config.json"));
    suite.spec("fifo-model", &decode_spec("fifo-model", "../fifo-model"));
    let zero_model = suite.dir.path().join("zero-model");
    std::fs::create_dir_all(&zero_model).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_model.join("config.json")).unwrap();
    suite.spec("zero-model", &decode_spec("zero-model", "../zero-model"));
    let out = parlab(suite.dir.path(), &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("hosts: not a regular file (a FIFO)"), "{text}");
    assert!(text.contains("fifo-model/config.json: not a regular file (a FIFO)"), "{text}");
    assert!(text.contains("zero-model/config.json: not a regular file (a device)"), "{text}");
    let manifests = suite.manifests();
    std::fs::create_dir_all(&manifests).unwrap();
    mkfifo(&manifests.join(format!("{}.json", "f".repeat(64))));
    let report = parlab(suite.dir.path(), &["report", "--manifests", manifests.to_str().unwrap(), "--out", "reports"], &[]);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
}

#[test]
fn validate_and_plan_write_nothing_into_the_state_folder() {
    let suite = Suite::new();
    checkpoint(&suite.dir.path().join("small"), SMALL);
    suite.spec("d", &decode_spec("d", "../small"));
    let state = suite.dir.path().join("state");
    for cmd in ["validate", "plan"] {
        let out = parlab(suite.dir.path(), &[cmd, "specs"], &[("PARLAB_STATE", state.to_str().unwrap())]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert!(!state.exists(), "validate and plan wrote into {}", state.display());
}

/// A tmpfs of `kib` KiB mounted at `dir` (root only), unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, kib: u32) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"]).arg(dir).status().ok()?.success();
        ok.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_names_the_path_leaves_no_temporary_file_and_keeps_what_was_there() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(&dir.path().join("disk"), 64)
        .expect("mounting a 64 KiB tmpfs needs root (CI and this project's machines run as root)");
    let target = disk.0.join("manifest.json");
    parlab::manifest::write_atomic(&target, b"{\"kept\": true}").unwrap();
    let err = parlab::manifest::write_atomic(&target, &vec![b'x'; 1 << 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), None, "wrapped with its path");
    assert!(err.to_string().contains(&target.display().to_string()) && err.to_string().contains("No space left"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"{\"kept\": true}");
    let names: Vec<String> = std::fs::read_dir(&disk.0).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["manifest.json".to_string()], "no temporary file left");
}

mod checkpoint_fuzz {
    use parlab::model::gpt2::{check_shapes, Dims};
    use parlab::model::weights::Checkpoint;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// A valid small checkpoint's bytes and its dimensions, made once.
    fn original() -> &'static (Vec<u8>, Dims) {
        static MADE: OnceLock<(Vec<u8>, Dims)> = OnceLock::new();
        MADE.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            super::checkpoint(dir.path(), super::SMALL);
            let cfg = parlab::model::ModelConfig::read(dir.path()).unwrap();
            (std::fs::read(dir.path().join("model.safetensors")).unwrap(), Dims::from_config(&cfg))
        })
    }

    /// Opening and checking a damaged file either works or fails with an error; it never panics.
    fn open_and_check(bytes: &[u8]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        std::fs::write(&path, bytes).unwrap();
        if let Ok(ckpt) = Checkpoint::open(&path) {
            let _ = check_shapes(&ckpt, &original().1);
            let _ = ckpt.check_finite();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        #[test]
        fn a_truncated_checkpoint_is_an_error_not_a_panic(cut in 0usize..4096) {
            let bytes = &original().0;
            open_and_check(&bytes[..cut.min(bytes.len())]);
        }

        #[test]
        fn a_mutated_header_is_an_error_not_a_panic(edits in proptest::collection::vec((0usize..2048, any::<u8>()), 1..8)) {
            let mut bytes = original().0.clone();
            let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            for (at, value) in edits {
                let i = at % header_end.min(bytes.len());
                bytes[i] = value;
            }
            open_and_check(&bytes);
        }
    }
}

#[test]
fn a_garbage_results_file_is_warned_about_in_the_register_header() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    assert_eq!(suite.run(&[]), 0);
    let m = suite.manifest("one");
    let samples = suite.manifests().join(&m.results().expect("results files").samples);
    std::fs::write(&samples, b"not parquet at all").unwrap();
    let out = parlab(suite.dir.path(), &["report", "--manifests", suite.manifests().to_str().unwrap(), "--out", "reports"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let named = format!("{}/samples.parquet: results file is not a parquet file", m.run_id);
    assert!(register.contains("1 files skipped") && register.contains(&named), "{}", &register[..register.len().min(3000)]);
    // A missing one says so (it read `results file cannot inspect: …`), no machine's path in the register.
    std::fs::remove_file(&samples).unwrap();
    let out = parlab(suite.dir.path(), &["report", "--manifests", suite.manifests().to_str().unwrap(), "--out", "reports"], &[]);
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    let missing = format!("{}/samples.parquet: results file: cannot inspect: No such file or directory", m.run_id);
    assert!(register.contains(&missing), "{}\n{}", stderr(&out), &register[..register.len().min(3000)]);
}

#[test]
fn a_report_that_cannot_be_written_says_so_once_naming_the_path() {
    let suite = Suite::new();
    std::fs::create_dir_all(suite.manifests()).unwrap();
    let out =
        parlab(suite.dir.path(), &["report", "--manifests", suite.manifests().to_str().unwrap(), "--out", "/proc/parlab-nowhere"], &[]);
    assert_eq!(out.status.code(), Some(2), "an output folder that cannot be made is a bad path");
    let text = stderr(&out);
    assert!(text.contains("/proc/parlab-nowhere"), "{text}");
    assert_eq!(text.matches("No such file or directory").count(), 1, "the cause is printed once: {text}");
}

#[test]
fn a_user_who_cannot_write_the_store_is_told_which_folder() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let locked = suite.dir.path().join("locked");
    std::fs::create_dir_all(&locked).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let store = locked.join("manifests");
    let specs = suite.dir.path().join("specs");
    std::fs::set_permissions(suite.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("runuser")
        .args(["-u", "nobody", "--", "env"])
        .arg(format!("PARLAB_MANIFESTS={}", store.display()))
        .arg(PARLAB)
        .args(["run", "--no-report"])
        .arg(&specs)
        .output()
        .expect("runuser (util-linux) is on Debian");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}: cannot create the folder: Permission denied", store.display())), "{}", stderr(&out));
}

#[test]
fn a_changed_spec_moves_its_old_runs_out_of_the_register_and_keeps_them() {
    let suite = Suite::new();
    suite.spec("sweep", &small_collectives("sweep", "60s", ""));
    suite.spec("other", &small_collectives("other", "60s", "").replace("sizes: [4, 4096]", "sizes: [8]"));
    assert_eq!(suite.run(&[]), 0);
    let old = suite.manifest("sweep");
    // The spec changes: its old run identity is no longer in the suite.
    suite.spec("sweep", &small_collectives("sweep", "60s", "").replace("sizes: [4, 4096]", "sizes: [4, 1024]"));
    let out = suite.parlab(&["run", "specs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("sweep {}", &old.run_id[..12])), "{}", stderr(&out));
    let new = suite.manifest("sweep");
    assert_ne!(new.run_id, old.run_id);
    assert_eq!(suite.manifest("other").status(), Status::Ok, "another experiment's run stays");
    let kept = suite.manifests().join("superseded");
    assert!(kept.join(format!("{}.json", old.run_id)).is_file(), "the old manifest is kept");
    assert!(kept.join(&old.run_id).join("samples.parquet").is_file(), "with its results");
    let register = std::fs::read_to_string(suite.dir.path().join("reports/evidence.md")).unwrap();
    assert!(register.contains(&new.run_id[..12]) && !register.contains(&old.run_id[..12]), "only the current run is in the register");
    // Back to the first sizes (measured again), then away once more: the identity is superseded
    // a second time, and the copy superseded first is kept under its start time.
    suite.spec("sweep", &small_collectives("sweep", "60s", ""));
    assert_eq!(suite.run(&[]), 0);
    let again = suite.manifest("sweep");
    assert_eq!(again.run_id, old.run_id);
    suite.spec("sweep", &small_collectives("sweep", "60s", "").replace("sizes: [4, 4096]", "sizes: [4, 1024]"));
    assert_eq!(suite.run(&[]), 0);
    let newest = parlab::manifest::read_one(&kept.join(format!("{}.json", old.run_id))).unwrap();
    assert_eq!(newest.started_at, again.started_at, "the copy superseded last is in superseded/");
    let first = kept.join(old.started_at.replace(':', "-"));
    let earlier = parlab::manifest::read_one(&first.join(format!("{}.json", old.run_id))).unwrap();
    assert_eq!(earlier.started_at, old.started_at, "the copy superseded first is kept under its start time");
    assert!(first.join(&old.run_id).join("samples.parquet").is_file(), "with its results");
}

/// A decode spec of the GPT-2 config `config` (written to `dir/m/config.json`), in `dir/specs`.
fn weightless_suite(dir: &Path, config: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("m")).unwrap();
    std::fs::write(dir.join("m/config.json"), config).unwrap();
    std::fs::create_dir_all(dir.join("specs")).unwrap();
    let spec = dir.join("specs/w.yaml");
    std::fs::write(&spec, "name: w\nkind: decode\nmodel: ../m\nstrategy: tensor\nworld: 2\nprompt: {length: 4}\nnew_tokens: 4\n").unwrap();
    spec
}

#[test]
fn a_seeded_checkpoint_past_the_free_disk_of_a_small_filesystem_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // About 530 thousand parameters, 661 thousand values with the untied head a seeded
    // checkpoint writes: a 2.6 MB checkpoint, nothing for memory.
    let config = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 2, "n_head": 4, "n_embd": 128,
        "vocab_size": 1000, "n_positions": 64, "layer_norm_epsilon": 1e-05}"#;
    weightless_suite(dir.path(), config);
    let state = dir.path().join("state");
    let disk = SmallDisk::mount(&state, 1024).expect("mounting a 1 MiB tmpfs needs root (CI and this project's machines run as root)");
    let manifests = dir.path().join("manifests");
    let env = [("PARLAB_STATE", state.to_str().unwrap()), ("PARLAB_MANIFESTS", manifests.to_str().unwrap()), ("PARLAB_MAX_DISK", "")];
    let out = parlab(dir.path(), &["run", "specs", "--no-report"], &env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("this run writes a seeded checkpoint of about 2.5 MiB (660992 float32 parameters)"), "{err}");
    assert!(
        err.contains(&format!("{}/checkpoints/", state.display())) && err.contains("1.0 MiB free"),
        "the folder and the free figure: {err}"
    );
    assert!(std::fs::read_dir(&disk.0).unwrap().next().is_none(), "nothing written into the small filesystem");
    drop(disk);
    let roomy = SmallDisk::mount(&state, 8192).unwrap();
    let out = parlab(dir.path(), &["validate", "specs"], &env);
    assert_eq!(out.status.code(), Some(0), "8 MiB free holds it: {}", stderr(&out));
    drop(roomy);
}

#[test]
fn a_seeded_checkpoint_past_any_disk_is_refused_at_validate_once_memory_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    // About 51 trillion parameters: 206 TB, past any disk; memory is allowed by the override.
    let config = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 1000, "n_head": 64, "n_embd": 65536,
        "vocab_size": 1000, "n_positions": 64, "layer_norm_epsilon": 1e-05}"#;
    weightless_suite(dir.path(), config);
    let state = dir.path().join("state");
    let env = [("PARLAB_STATE", state.to_str().unwrap()), ("PARLAB_MAX_MEMORY", "8000000TiB")];
    let started = Instant::now();
    let out = parlab(dir.path(), &["validate", "specs"], &env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("model: this run writes a seeded checkpoint of about") && err.contains("float32 parameters) into"), "{err}");
    assert!(err.contains("free (") && err.contains("by statvfs") && err.contains("PARLAB_MAX_DISK"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30) && !state.exists(), "refused at once, nothing written");
    let allowed = parlab(dir.path(), &["validate", "specs"], &[env[0], env[1], ("PARLAB_MAX_DISK", "1000TB")]);
    assert_eq!(allowed.status.code(), Some(0), "the override lifts it: {}", stderr(&allowed));
}

#[test]
fn rank_names_a_plan_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("foreign.json"), "{}").unwrap();
    for (plan, says) in [("missing.json", "missing.json: cannot"), ("foreign.json", "foreign.json: not a run plan written by `parlab run`")]
    {
        let out = parlab(dir.path(), &["rank", "--plan", plan, "--out", "records"], &[]);
        assert_eq!(out.status.code(), Some(1), "{plan}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{plan}: expected `{says}` in {}", stderr(&out));
    }
}

#[test]
fn nightly_never_replaces_a_file_it_did_not_write_but_replaces_an_empty_one_and_its_own() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    assert_eq!(suite.run(&[]), 0);
    let (dir, store) = (suite.dir.path(), suite.manifests());
    let m = store.to_str().unwrap();
    let baseline = dir.join("last-good");
    assert!(Command::new("cp").arg("-a").arg(&store).arg(&baseline).status().unwrap().success());
    let b = baseline.to_str().unwrap();
    let spec = dir.join("specs/one.yaml");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "a user's file that quotes nightly's own lines:\n## parlab nightly\n<testsuites name=\"parlab nightly\"\n")
        .unwrap();
    for (flag, victim) in [("--junit", &spec), ("--summary", &spec), ("--junit", &notes), ("--summary", &notes)] {
        let before = std::fs::read(victim).unwrap();
        let out = parlab(dir, &["nightly", "--baseline", b, "--manifests", m, flag, victim.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(2), "{flag} {}: {}", victim.display(), stderr(&out));
        assert!(stderr(&out).contains("holds a file that `parlab nightly` did not write"), "{}", stderr(&out));
        assert_eq!(std::fs::read(victim).unwrap(), before, "{} kept", victim.display());
    }
    let (junit, summary) = (dir.join("junit.xml"), dir.join("summary.md"));
    std::fs::write(&junit, "").unwrap();
    for _ in 0..2 {
        let args =
            ["nightly", "--baseline", b, "--manifests", m, "--junit", junit.to_str().unwrap(), "--summary", summary.to_str().unwrap()];
        let out = parlab(dir, &args, &[]);
        assert_eq!(out.status.code(), Some(0), "an empty file, then its own reports, are replaced: {}", stderr(&out));
    }
    // One file for both would keep only the one written last, however it is spelled, and
    // whether or not it exists yet.
    let fresh = dir.join("out/x.xml");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let other_spelling = dir.join("out/../out/./x.xml");
    for (j, s) in [(&junit, &junit), (&fresh, &other_spelling)] {
        let args = ["nightly", "--baseline", b, "--manifests", m, "--junit", j.to_str().unwrap(), "--summary", s.to_str().unwrap()];
        let out = parlab(dir, &args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("the same file; one would overwrite the other"), "{}", stderr(&out));
    }
    // A link to the JUnit report under another name, its target written yet or not, is that
    // file too (it was refused as "a file nightly did not write", the wrong problem).
    let link = dir.join("out/summary-link.md");
    std::os::unix::fs::symlink(&junit, &link).unwrap();
    let hard = dir.join("out/junit-hard.xml");
    std::fs::hard_link(&junit, &hard).unwrap();
    let dangling = dir.join("out/dangling.md");
    std::os::unix::fs::symlink("x.xml", &dangling).unwrap();
    for (j, s) in [(&junit, &link), (&hard, &junit), (&fresh, &dangling)] {
        let args = ["nightly", "--baseline", b, "--manifests", m, "--junit", j.to_str().unwrap(), "--summary", s.to_str().unwrap()];
        let out = parlab(dir, &args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("two names of one file (a link)"), "{}", stderr(&out));
    }
    assert!(!fresh.exists(), "nothing written");
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<testsuites name=\"parlab nightly\""));
    assert!(std::fs::read_to_string(&summary).unwrap().starts_with("## parlab nightly\n"));
}

#[test]
fn report_audit_and_nightly_read_the_manifests_folder_parlab_manifests_names() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    assert_eq!(suite.run(&[]), 0);
    let elsewhere = tempfile::tempdir().unwrap();
    let store = suite.dir.path().join("night-1");
    std::fs::rename(suite.manifests(), &store).unwrap();
    let env = [("PARLAB_MANIFESTS", store.to_str().unwrap())];
    let report = parlab(elsewhere.path(), &["report"], &env);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    assert!(suite.dir.path().join("night-1-reports/evidence.md").is_file(), "rendered beside the folder it names");
    assert!(!elsewhere.path().join("reports").exists(), "not into the working folder's reports/");
    let audit = parlab(elsewhere.path(), &["audit"], &env);
    assert_eq!(audit.status.code(), Some(0), "{}", stderr(&audit));
    let baseline = suite.dir.path().join("last-good");
    assert!(Command::new("cp").arg("-a").arg(&store).arg(&baseline).status().unwrap().success());
    let night = parlab(elsewhere.path(), &["nightly", "--baseline", baseline.to_str().unwrap()], &env);
    assert_eq!(night.status.code(), Some(0), "{}", stderr(&night));
    let itself = parlab(elsewhere.path(), &["nightly", "--baseline", store.to_str().unwrap()], &env);
    assert_eq!(itself.status.code(), Some(2), "the folder PARLAB_MANIFESTS names is tonight's: {}", stderr(&itself));
}

#[test]
fn a_reader_that_stops_early_ends_plan_quietly_and_a_run_goes_on_without_its_stderr() {
    use std::os::unix::process::ExitStatusExt as _;
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let mut plan = Command::new(PARLAB)
        .args(["plan", "specs"])
        .current_dir(suite.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(plan.stdout.take());
    let out = plan.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "ended as `cat` would: {:?}", out.status);
    let mut run = Command::new(PARLAB)
        .args(["run", "specs"])
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(run.stderr.take());
    assert_eq!(run.wait().unwrap().code(), Some(0), "the run finished with nobody reading its lines");
    assert_eq!(suite.manifest("one").status(), Status::Ok);
    assert!(suite.dir.path().join("reports/evidence.md").is_file(), "and rendered its register");
    assert!(suite.leftovers().is_empty(), "{:?}", suite.leftovers());
}

#[test]
fn a_register_run_cannot_render_is_refused_before_the_first_run() {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let dir = suite.dir.path();
    std::fs::write(dir.join("afile"), "kept\n").unwrap();
    let env = [("PARLAB_MANIFESTS", suite.manifests())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.to_str().unwrap())).collect();
    for out in ["afile", "afile/sub"] {
        let o = parlab(dir, &["run", "specs", "--out", out], &env);
        assert_eq!(o.status.code(), Some(2), "--out {out}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("--out {out}:")), "{}", stderr(&o));
    }
    assert!(stderr(&parlab(dir, &["run", "specs", "--out", "afile"], &env))
        .contains("--out afile: a file, not the folder the register is written into"));
    let holder = parlab::manifest::lock::StoreLock::acquire(&dir.join("register"), false).unwrap();
    let o = parlab(dir, &["run", "specs", "--out", "register"], &env);
    assert_eq!(o.status.code(), Some(2), "another render holds the folder: {}", stderr(&o));
    assert!(stderr(&o).contains(&format!("pid {}", std::process::id())), "{}", stderr(&o));
    drop(holder);
    assert!(
        !suite.manifests().exists()
            || std::fs::read_dir(suite.manifests()).unwrap().all(|e| e.unwrap().path().extension().is_none_or(|x| x != "json")),
        "nothing ran"
    );
    assert_eq!(std::fs::read_to_string(dir.join("afile")).unwrap(), "kept\n");
    let o = parlab(dir, &["run", "specs", "--out", "register"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.join("register/evidence.md").is_file());
}

#[test]
fn a_limit_variable_that_is_not_a_size_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (name, value) in [("PARLAB_MAX_MEMORY", "banana"), ("PARLAB_MAX_DISK", "1e3"), ("PARLAB_MAX_MEMORY", "2PiB")] {
        let out = parlab(dir.path(), &["validate", "nowhere"], &[(name, value)]);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("{name}={value}: not a size")), "{}", stderr(&out));
    }
}

#[test]
fn a_seeded_checkpoints_disk_need_is_what_model_init_writes_its_head_untied() {
    let dir = tempfile::tempdir().unwrap();
    let tied = dir.path().join("tied");
    std::fs::create_dir_all(&tied).unwrap();
    std::fs::write(tied.join("config.json"), SMALL).unwrap();
    let cfg = parlab::model::ModelConfig::read(&tied).unwrap();
    let params = parlab::model::init::seeded_params(&cfg).unwrap();
    let shape = parlab::costmodel::shape::shape_from_config(&cfg).unwrap();
    assert_eq!(params, shape.params + 101 * 64, "the model's parameters and the untied head the checkpoint adds");
    let out = dir.path().join("ck");
    let init = parlab(dir.path(), &["model", "init", tied.to_str().unwrap(), "--seed", "1", "--out", out.to_str().unwrap()], &[]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr(&init));
    let written = std::fs::metadata(out.join("model.safetensors")).unwrap().len();
    assert!(written >= params * 4 && written - params * 4 < 8192, "{written} B written for {params} values (a header aside)");
    let small = format!("{}B", params * 4 - 1);
    let refused = parlab(dir.path(), &["model", "init", tied.to_str().unwrap(), "--out", "ck2"], &[("PARLAB_MAX_DISK", &small)]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains(&format!("({params} float32 parameters)")), "{}", stderr(&refused));
}

#[test]
fn a_hostfile_open_mpi_cannot_parse_as_written_is_refused_by_validate() {
    let suite = Suite::new();
    let dir = suite.dir.path();
    let utf16: Vec<u8> = [0xff, 0xfe].into_iter().chain("localhost slots=2\n".bytes().flat_map(|b| [b, 0])).collect();
    std::fs::write(dir.join("utf16-hosts"), &utf16).unwrap();
    std::fs::write(dir.join("bomless-hosts"), &utf16[2..]).unwrap();
    std::fs::write(dir.join("bom-hosts"), "\u{feff}localhost slots=2\n").unwrap();
    std::fs::write(dir.join("hosts"), "localhost slots=2\n").unwrap();
    std::fs::write(dir.join("bad-slots"), "# two nodes\nlocalhost slots=2\nnode1 slots=abc\n").unwrap();
    std::fs::write(dir.join("no-hosts"), "# nothing yet\n\n").unwrap();
    suite.spec("bad-slots", &small_collectives("bad-slots", "60s", "hostfile: ../bad-slots\n"));
    suite.spec("no-hosts", &small_collectives("no-hosts", "60s", "hostfile: ../no-hosts\n"));
    suite.spec("utf16", &small_collectives("utf16", "60s", "hostfile: ../utf16-hosts\n"));
    suite.spec("bom", &small_collectives("bom", "60s", "hostfile: ../bom-hosts\n"));
    suite.spec("bomless", &small_collectives("bomless", "60s", "hostfile: ../bomless-hosts\n"));
    let out = parlab(dir, &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("utf16-hosts is UTF-16; convert it to UTF-8"), "{}", stderr(&out));
    assert!(stderr(&out).contains("bom-hosts starts with a UTF-8 byte-order mark"), "{}", stderr(&out));
    assert!(stderr(&out).contains("bomless-hosts holds NUL bytes"), "{}", stderr(&out));
    // A slot count mpirun would refuse at launch (the run then failed as unreached hosts), or
    // no host at all ("No nodes are available"), is refused here too.
    assert!(stderr(&out).contains("bad-slots: line 3: `slots=abc`: slots must be a whole number"), "{}", stderr(&out));
    assert!(stderr(&out).contains("no-hosts: lists no host"), "{}", stderr(&out));
    for name in ["utf16", "bom", "bomless", "bad-slots", "no-hosts"] {
        std::fs::remove_file(dir.join(format!("specs/{name}.yaml"))).unwrap();
    }
    suite.spec("plain", &small_collectives("plain", "60s", "hostfile: ../hosts\n"));
    let out = parlab(dir, &["validate", "specs"], &[]);
    assert_eq!(out.status.code(), Some(0), "a plain hostfile: {}", stderr(&out));
}

#[test]
fn an_interrupt_while_the_controller_generates_a_checkpoint_ends_it_within_a_tensor_and_leaves_no_temporary_folder() {
    let suite = Suite::new();
    let dir = suite.dir.path();
    // GPT-2 at 1024 wide and 24 blocks (about 350 million values): seconds of generation.
    let config = r#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 24, "n_head": 16, "n_embd": 1024,
        "vocab_size": 50257, "n_positions": 64, "layer_norm_epsilon": 1e-05}"#;
    weightless_suite(dir, config);
    let state = dir.join("state");
    let child = controller()
        .args(["run", "specs", "--no-report"])
        .current_dir(dir)
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PARLAB_STATE", &state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let checkpoints = state.join("checkpoints");
    let generating =
        || std::fs::read_dir(&checkpoints).is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().contains(".tmp-")));
    assert!(wait_until(Duration::from_secs(120), generating), "the checkpoint's temporary folder never appeared");
    let sent = Instant::now();
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(10), "ended {:?} after the signal", sent.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let (all, _) = parlab::manifest::read_all(&suite.manifests());
    let run = all.iter().find(|m| m.experiment == "w").expect("the run's manifest is written");
    assert_eq!(run.status(), Status::Failed);
    assert!(run.reason().unwrap_or("").contains("interrupted by SIGINT while generating the seeded checkpoint"), "{:?}", run.reason());
    assert!(!generating(), "no temporary folder left");
}

/// `parlab run specs ARGS --wait` in a suite while this process holds the lock of `locked`
/// (relative to the suite's folder): it says who it waits for (`doing` the holder), and Ctrl-C
/// ends the wait at once (exit 130, saying `while {waiting}`) with nothing run.
fn ctrl_c_ends_a_wait(locked: &str, args: &[&str], doing: &str, waiting: &str) {
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let dir = suite.dir.path();
    let holder = parlab::manifest::lock::StoreLock::acquire(&dir.join(locked), false).unwrap();
    let mut child = controller()
        .args(["run", "specs", "--wait"])
        .args(args)
        .current_dir(dir)
        .env("PARLAB_MANIFESTS", dir.join("manifests"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once it says it waits (its handlers are installed by then), however slowly it starts.
    let (waits, said) = std::sync::mpsc::channel();
    let reader = std::io::BufReader::new(child.stderr.take().unwrap());
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(reader).map_while(Result::ok) {
            if line.contains("waiting for parlab") {
                let _ = waits.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if said.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("it never said it waits: {}", lines.join().unwrap_or_default());
    }
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let status = exit_after_signal(&mut child);
    assert!(sent.elapsed() < Duration::from_secs(5), "the wait outlasted Ctrl-C by {:?}", sent.elapsed());
    let said = lines.join().unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains(&format!("waiting for parlab (pid {}), which is {doing}", std::process::id())), "{said}");
    assert!(said.contains(&format!("interrupted by SIGINT while {waiting}")), "{said}");
    assert!(
        !suite.manifests().exists()
            || std::fs::read_dir(suite.manifests()).unwrap().all(|e| e.unwrap().path().extension().is_none_or(|x| x != "json")),
        "nothing ran"
    );
    drop(holder);
}

#[test]
fn a_run_waiting_for_a_render_says_for_whom_and_ctrl_c_ends_the_wait() {
    ctrl_c_ends_a_wait("register", &["--out", "register"], "rendering into", "waiting for the output folder before its first run");
}

#[test]
fn a_run_waiting_for_another_controller_says_for_whom_and_ctrl_c_ends_the_wait() {
    // The store's lock was a blocking flock, restarted by the signal handlers: Ctrl-C did nothing
    // until the other controller let go.
    ctrl_c_ends_a_wait("manifests", &["--no-report"], "writing manifests into", "waiting for the manifests folder before its first run");
}

#[test]
fn the_nightly_job_keeps_one_comparisons_json_junit_and_summary_and_promotes_a_passing_night() {
    // ci/nightly.sh on a one-run suite, two nights: the first becomes the baseline, the second
    // is compared once, and its JSON, JUnit and exit code tell the same story.
    let suite = Suite::new();
    suite.spec("one", &small_collectives("one", "60s", ""));
    let state = suite.dir.path().join("state");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/nightly.sh");
    let job = || {
        // Started from the suite's folder, with paths relative to it, as a CI job would.
        Command::new("bash")
            .arg(&script)
            .current_dir(suite.dir.path())
            .env("PARLAB_NIGHTLY_STATE", "state")
            .env("PARLAB_MANIFESTS", "manifests")
            .env("PARLAB_STATE", suite.dir.path().join(".parlab"))
            .env("NIGHTLY_SPECS", "specs")
            .env("NIGHTLY_LAUNCHES", "3")
            // Never `make build` from inside a test: the build's environment differs from the
            // tests' (cargo's for its test binaries), and would rebuild dependencies.
            .env("PARLAB_BIN", env!("CARGO_BIN_EXE_parlab"))
            .env_remove("GITHUB_STEP_SUMMARY")
            .env_remove("NIGHTLY_ARGS")
            .env_remove("NIGHTLY_REBASELINE")
            .env_remove("PARLAB_FAULT")
            .output()
            .unwrap()
    };
    let first = job();
    let said = |o: &Output| format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(o));
    assert_eq!(first.status.code(), Some(0), "{}", said(&first));
    assert!(said(&first).contains("first night"), "{}", said(&first));
    assert!(state.join("last-good").read_dir().unwrap().flatten().any(|e| e.path().extension().is_some_and(|x| x == "json")));
    assert!(suite.dir.path().join("reports/evidence.md").is_file(), "the register beside the manifests, not the project's");
    let second = job();
    let code = second.status.code();
    assert!(matches!(code, Some(0 | 4)), "{}", said(&second));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(state.join("out/nightly.json")).unwrap()).unwrap();
    let verdicts = json["comparison"]["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty(), "{json}");
    let findings = json["comparison"]["findings"].as_array().unwrap().len();
    let junit = std::fs::read_to_string(state.join("out/junit.xml")).unwrap();
    assert_eq!(code == Some(4), findings > 0, "exit {code:?} with {findings} findings in the JSON");
    assert_eq!(junit.matches("<failure").count() > 0, findings > 0, "the JUnit agrees with the JSON");
    assert!(said(&second).contains("## parlab nightly"), "the summary in the log: {}", said(&second));
    assert_eq!(parlab::nightly::history::read(&state.join("history")).len(), 1, "tonight appended once");
    // A passing night is the next baseline; a failing one is not.
    assert_eq!(said(&second).contains("tonight is the new last good night"), code == Some(0), "{}", said(&second));
}

/// Every file under `dir` (relative path, bytes), sorted.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            files.extend(tree(&p).into_iter().map(|(rel, bytes)| (Path::new(&entry.file_name()).join(rel), bytes)));
        } else {
            files.push((PathBuf::from(entry.file_name()), std::fs::read(&p).unwrap()));
        }
    }
    files.sort();
    files
}

#[test]
fn a_render_that_fails_midway_leaves_the_earlier_register_figures_and_tables_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reports");
    let args = ["report", "--manifests", "tests/fixtures/manifests", "--out", out.to_str().unwrap()];
    let first = parlab(root, &args, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::fs::write(out.join("figures/notes.txt"), "a user's note beside the figures").unwrap();
    std::fs::create_dir_all(out.join("figures/handmade")).unwrap();
    std::fs::write(out.join("figures/handmade/diagram.svg"), "<svg/>").unwrap();
    let before: Vec<(PathBuf, Vec<u8>)> = tree(&out).into_iter().filter(|(p, _)| !p.ends_with(".parlab.lock")).collect();
    assert!(before.iter().filter(|(p, _)| p.starts_with("figures")).count() > 1, "the fixtures render figures");
    // Files past 20 KiB cannot be written (as on a full disk): the render fails partway.
    let script = format!("trap '' XFSZ; ulimit -f 20; exec {PARLAB} {}", args.map(|a| format!("'{a}'")).join(" "));
    let failed = Command::new("bash").args(["-c", &script]).current_dir(root).env_remove("PARLAB_FAULT").output().unwrap();
    assert_ne!(failed.status.code(), Some(0), "{}", stderr(&failed));
    assert!(stderr(&failed).contains("File too large"), "{}", stderr(&failed));
    let after: Vec<(PathBuf, Vec<u8>)> = tree(&out).into_iter().filter(|(p, _)| !p.ends_with(".parlab.lock")).collect();
    let names = |t: &[(PathBuf, Vec<u8>)]| t.iter().map(|(p, _)| p.display().to_string()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(&before), "the same files, nothing staged left behind");
    assert!(after == before, "every earlier file byte for byte");
    // A render that succeeds replaces the figures and keeps the user's note.
    let again = parlab(root, &args, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(out.join("figures/notes.txt").is_file() && out.join("figures/handmade/diagram.svg").is_file(), "the user's files are kept");
    let staged: Vec<PathBuf> = tree(&out).into_iter().map(|(p, _)| p).filter(|p| p.to_string_lossy().contains(".new-")).collect();
    assert!(staged.is_empty(), "{staged:?}");
}

#[test]
fn a_figures_folder_that_is_a_link_is_written_through_and_kept_a_link() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let (out, site) = (dir.path().join("reports"), dir.path().join("site-figures"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&site).unwrap();
    std::os::unix::fs::symlink(&site, out.join("figures")).unwrap();
    let rendered = parlab(root, &["report", "--manifests", "tests/fixtures/manifests", "--out", out.to_str().unwrap()], &[]);
    assert_eq!(rendered.status.code(), Some(0), "{}", stderr(&rendered));
    assert!(out.join("figures").is_symlink(), "the link is kept");
    let drawn = std::fs::read_dir(&site).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "svg")).count();
    assert!(drawn > 1, "the figures land in the link's folder: {drawn}");
}

#[test]
fn a_render_from_another_working_folder_says_which_files_the_findings_cannot_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (elsewhere, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = root.join("tests/fixtures/manifests");
    let render = |cwd: &Path| {
        let args = ["report", "--manifests", store.to_str().unwrap(), "--out", out.path().to_str().unwrap()];
        let o = parlab(cwd, &args, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stderr(&o)
    };
    let away = render(elsewhere.path());
    assert!(away.contains("warning: the runs name files this working folder does not hold (models/"), "{away}");
    assert!(away.contains("render from the folder the runs were made in"), "{away}");
    // From the project, the model configs are there (the fixtures' synthetic specs are not).
    let home = render(root);
    assert!(!home.contains("(models/"), "{home}");
}

#[test]
fn a_render_from_another_working_folder_reads_the_runs_files_beside_their_manifests_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (elsewhere, project, outs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A project folder as `parlab run` leaves it: the manifests beside the models they name.
    let store = project.path().join("manifests");
    assert!(Command::new("cp").arg("-a").arg(root.join("tests/fixtures/manifests")).arg(&store).status().unwrap().success());
    std::os::unix::fs::symlink(root.join("models"), project.path().join("models")).unwrap();
    let render = |cwd: &Path, out: &str| {
        let out = outs.path().join(out);
        let args = ["report", "--manifests", store.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let o = parlab(cwd, &args, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        (stderr(&o), std::fs::read_to_string(out.join("evidence.md")).unwrap())
    };
    let (said, away) = render(elsewhere.path(), "away");
    let project_path = std::fs::canonicalize(project.path()).unwrap();
    assert!(said.contains(&format!("reading the runs' specs, model configs and templates in {}", project_path.display())), "{said}");
    assert!(!said.contains("(models/"), "the model configs were found: {said}");
    let (_, there) = render(project.path(), "there");
    assert!(away == there, "the same register from anywhere");
}

#[test]
fn a_render_into_another_manifests_folder_is_refused_and_the_folder_left_as_it_was() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let other = tempfile::tempdir().unwrap();
    assert!(Command::new("cp").arg("-a").arg(root.join("tests/fixtures/manifests/.")).arg(other.path()).status().unwrap().success());
    let before = tree(other.path());
    let args = ["report", "--manifests", "tests/fixtures/manifests", "--out", other.path().to_str().unwrap()];
    let out = parlab(root, &args, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is a manifests folder (it holds"), "{}", stderr(&out));
    let after: Vec<(PathBuf, Vec<u8>)> = tree(other.path()).into_iter().filter(|(p, _)| !p.ends_with(".parlab.lock")).collect();
    assert!(after == before, "nothing written into it");
}

/// A stop of a `launcher: srun` run cancels what srun allocated and lets that scancel run to its
/// end although parlab is being stopped by the very signal (`gates::OnSignal::Finish`): here with
/// an srun that queues forever (it names its job as Slurm's srun does and starts no rank) and a
/// scancel that takes a second, both stand-ins on `PATH`, outside any allocation.
#[test]
fn a_signal_during_an_srun_launch_runs_scancel_on_srun_s_job_to_its_end() {
    let suite = Suite::new();
    suite.spec("queued", &small_collectives("queued", "120s", "launcher: srun\n"));
    let bin = suite.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let (started, cancelled) = (suite.dir.path().join("srun.started"), suite.dir.path().join("scancel.log"));
    let script = |name: &str, body: String| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    script("srun", format!("echo 'srun: job 77 queued and waiting for resources' >&2\ntouch {}\nexec sleep 600\n", started.display()));
    script("scancel", format!("echo \"args: $*\" >> {0}\nsleep 1\necho finished >> {0}\n", cancelled.display()));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new(PARLAB)
        .args(["run", "specs", "--no-report"])
        .current_dir(suite.dir.path())
        .env("PARLAB_MANIFESTS", suite.manifests())
        .env("PATH", path)
        .env_remove("PARLAB_FAULT")
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_STEP_ID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(60), || started.exists()), "srun was never started");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: sends a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let log = std::fs::read_to_string(&cancelled).unwrap_or_default();
    assert_eq!(log, "args: --quiet 77\nfinished\n", "scancel of srun's job, run to its end during the stop");
    let m = suite.manifest("queued");
    assert_eq!(m.status(), Status::Failed);
    let reason = m.reason().unwrap_or("");
    assert!(reason.starts_with("interrupted"), "{reason}");
    assert!(reason.contains("cancelled Slurm job 77, which srun allocated for this launch, with scancel"), "{reason}");
    assert!(wait_until(Duration::from_secs(10), || suite.leftovers().is_empty()), "left behind: {:?}", suite.leftovers());
}

/// Output that cannot be written (a full disk behind `> plan.json`) fails the command with exit 1
/// and says so, instead of a panic (exit 101) or an exit 0 over a cut-off file; a stderr that
/// cannot be written does not stop a command whose output can.
#[test]
fn a_command_whose_output_cannot_be_written_says_so_and_exits_1() {
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    for args in [&["validate", "experiments"][..], &["plan", "experiments", "--json"], &["shape", "gpt2"], &["shape", "gpt2", "--json"]] {
        let out = Command::new(PARLAB).args(args).stdout(full()).stderr(Stdio::piped()).output().unwrap();
        let told = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {told}");
        assert!(
            told.contains("cannot write the output to stdout: No space left on device") && !told.contains("panicked"),
            "{args:?}: {told}"
        );
    }
    let out = Command::new(PARLAB).args(["validate", "experiments"]).stderr(full()).output().unwrap();
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).starts_with("ok: ")), (Some(0), true));
}

#[test]
fn a_manifests_folder_that_is_a_file_is_refused_and_nothing_is_made_beside_it() {
    let suite = Suite::new();
    suite.spec("tiny", &small_collectives("tiny", "60s", ""));
    let file = suite.dir.path().join("store");
    std::fs::write(&file, "not a folder\n").unwrap();
    let out = parlab(suite.dir.path(), &["run", "specs"], &[("PARLAB_MANIFESTS", file.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let says = format!("PARLAB_MANIFESTS={}: a file, not the folder the manifests are in", file.display());
    assert!(stderr(&out).contains(&says), "{}", stderr(&out));
    assert!(!suite.dir.path().join("store-reports").exists(), "no register folder beside it");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a folder\n");
}
