//! The controller's termination signals: SIGINT, SIGTERM and SIGHUP are caught (not obeyed at
//! once) so the running launch can be ended in full and its run recorded before parlab exits.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first termination signal received, or 0.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// The signals `install` catches.
pub const CAUGHT: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn note(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP for the rest of the process's life, except SIGHUP or
/// SIGINT where the process was started ignoring it (`nohup` ignores SIGHUP; a shell's
/// background job SIGINT): that stays ignored, as whoever started parlab asked. SIGTERM is
/// always caught: parlab sends it to what it launched and must not pass on an ignored one.
pub fn install() {
    for sig in CAUGHT {
        if sig != libc::SIGTERM && ignored(sig) {
            continue;
        }
        // SAFETY: `note` only stores into an atomic, which is async-signal-safe; SA_RESTART keeps
        // interrupted system calls (reads, waits) from failing with EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The disposition of `sig` now (async-signal-safe: sigaction only).
fn disposition(sig: i32) -> libc::sighandler_t {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}

/// Whether `sig` is ignored.
pub fn ignored(sig: i32) -> bool {
    disposition(sig) == libc::SIG_IGN
}

/// Between fork and exec: gives back the default action to each signal [`install`] caught (one
/// neither ignored nor default), so a child that is to die of SIGTERM (its parent already
/// gone) dies before it execs, not into `note`'s copy in its own memory; an ignored SIGHUP or
/// SIGINT stays ignored in it. Async-signal-safe (sigaction and signal only).
pub fn default_in_child() {
    for sig in CAUGHT {
        let d = disposition(sig);
        if d != libc::SIG_IGN && d != libc::SIG_DFL {
            // SAFETY: signal with SIG_DFL is async-signal-safe and touches only this process.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
}

/// The termination signal received so far, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Fails with what was being done when a termination signal has been received: long work in
/// the controller (a seeded checkpoint, a reference answer) checks it between its pieces, so
/// Ctrl-C ends it within one piece instead of after it.
pub fn stop_if_received(doing: &str) -> anyhow::Result<()> {
    match received() {
        Some(sig) => anyhow::bail!("interrupted by {} while {doing}", name(sig)),
        None => Ok(()),
    }
}

/// The conventional exit status of a process ended by `sig` (130 for SIGINT, 143 for SIGTERM).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// The signal's name, e.g. `SIGINT`.
pub fn name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        other => format!("signal {other}"),
    }
}

/// Records `sig` as received (for tests of the paths that follow a signal).
pub fn simulate(sig: i32) {
    note(sig);
}
