//! A rank's own guard against outliving its run: it exits when its launcher is gone (the rank
//! was re-parented, e.g. after the controller and mpirun were killed) or when the run's timeout
//! has passed with a margin (the supervisor should have ended it by then).

use std::time::{Duration, Instant};

/// How often the watchdog looks.
const POLL: Duration = Duration::from_millis(200);

/// The exit status of a rank the watchdog ended.
pub const ORPHANED_EXIT: i32 = 125;

/// Starts the watchdog thread for a run whose supervisor kills it after `timeout_s`.
pub fn start(timeout_s: f64) {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let margin = 2.0 * crate::launch::supervise::GRACE.as_secs_f64() + 5.0;
    // A NaN survives `clamp`; `try_from` refuses it (and anything past 1e9 s) without a panic.
    let limit = Duration::try_from_secs_f64((timeout_s + margin).clamp(1.0, 1e9)).unwrap_or(Duration::from_secs(1_000_000_000));
    let started = Instant::now();
    let spawned = std::thread::Builder::new().name("parlab-watchdog".into()).spawn(move || loop {
        std::thread::sleep(POLL);
        // SAFETY: getppid has no preconditions.
        let now_parent = unsafe { libc::getppid() };
        let why = if now_parent != parent {
            Some(format!("its launcher (pid {parent}) is gone"))
        } else if started.elapsed() > limit {
            Some(format!("the run's timeout plus {margin:.0} s has passed"))
        } else {
            None
        };
        if let Some(why) = why {
            eprintln!("parlab rank (pid {}): exiting because {why}", std::process::id());
            // SAFETY: _exit only ends the process; nothing this rank holds needs a destructor.
            unsafe { libc::_exit(ORPHANED_EXIT) }
        }
    });
    if let Err(e) = spawned {
        eprintln!("parlab rank: could not start the watchdog thread: {e}");
    }
}
