//! Hidden, test-only fault injection: `PARLAB_FAULT=ACTION[:ARG]:rankN[@experiment]`.
//!
//! Actions: `exit:CODE` (the rank exits with CODE before its workload), `signal:SIG` (it sends
//! itself signal SIG), `hang` (it sleeps forever), `wrong` (its collective results are corrupted
//! after each operation, so the exact check fails), `slow:FACTOR` (every timed decode prefill
//! and step and every timed collective call takes FACTOR times as long: the rank waits
//! FACTOR − 1 times the measured time inside the timed region; `:rankN` may be left out, then
//! every rank is slowed).
//! `@experiment` limits it to one experiment.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable read (mpirun forwards it with `-x`).
pub const ENV: &str = crate::launch::command::FAULT_ENV;

/// An injected fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Exit with this code.
    Exit(i32),
    /// Raise this signal.
    Signal(i32),
    /// Sleep forever.
    Hang,
    /// Panic in rank code, as a libtorch error raised through tch does.
    Panic,
    /// Corrupt collective results.
    Wrong,
    /// Stretch every timed step by this factor (above 1).
    Slow(f64),
}

/// The largest slowdown factor accepted.
pub const MAX_SLOWDOWN: f64 = 100.0;

/// Parses a fault text for `rank` in `experiment`; None when it does not apply or is malformed.
pub fn parse(text: &str, rank: u32, experiment: &str) -> Option<Fault> {
    let (spec, only) = match text.split_once('@') {
        Some((s, e)) => (s, Some(e)),
        None => (text, None),
    };
    if only.is_some_and(|e| e != experiment) {
        return None;
    }
    let parts: Vec<&str> = spec.split(':').collect();
    if let ["slow", factor] = parts[..] {
        return slowdown(factor);
    }
    let target: u32 = parts.last()?.strip_prefix("rank")?.parse().ok()?;
    if target != rank {
        return None;
    }
    match (parts[0], parts.len()) {
        ("exit", 3) => parts[1].parse().ok().map(Fault::Exit),
        ("signal", 3) => parts[1].parse().ok().map(Fault::Signal),
        ("hang", 2) => Some(Fault::Hang),
        ("panic", 2) => Some(Fault::Panic),
        ("wrong", 2) => Some(Fault::Wrong),
        ("slow", 3) => slowdown(parts[1]),
        _ => None,
    }
}

/// Checks a fault text's grammar whatever rank and experiment it names: `parlab run` refuses a
/// malformed one (a mistyped fault would run the suite unharmed and a test relying on it pass).
pub fn check(text: &str) -> Result<(), String> {
    let spec = text.split_once('@').map_or(text, |(s, _)| s);
    let parts: Vec<&str> = spec.split(':').collect();
    let rank = |r: &str| r.strip_prefix("rank").is_some_and(|n| n.parse::<u32>().is_ok());
    let ok = match parts[..] {
        ["slow", factor] => slowdown(factor).is_some(),
        ["slow", factor, r] => slowdown(factor).is_some() && rank(r),
        ["exit", code, r] => code.parse::<i32>().is_ok_and(|c| (1..=255).contains(&c)) && rank(r),
        ["signal", sig, r] => sig.parse::<i32>().is_ok_and(strikes) && rank(r),
        ["hang", r] | ["panic", r] | ["wrong", r] => rank(r),
        _ => false,
    };
    ok.then_some(()).ok_or_else(|| {
        format!(
            "expected ACTION[:ARG]:rankN[@experiment], ACTION one of exit:CODE (1 to 255), signal:NUMBER (1 to 31, one whose default action ends or stops a process), hang, panic, wrong, slow:FACTOR (above 1, at most {MAX_SLOWDOWN}; `:rankN` optional)"
        )
    })
}

/// Whether signal `sig` harms a rank by default: a standard signal (1 to 31) whose default
/// action is not to ignore it (SIGCHLD, SIGCONT, SIGURG, SIGWINCH are ignored or resume).
fn strikes(sig: i32) -> bool {
    (1..=31).contains(&sig) && ![libc::SIGCHLD, libc::SIGCONT, libc::SIGURG, libc::SIGWINCH].contains(&sig)
}

/// A `slow` fault of `factor` (a finite number above 1, at most [`MAX_SLOWDOWN`]).
fn slowdown(factor: &str) -> Option<Fault> {
    factor.parse::<f64>().ok().filter(|f| f.is_finite() && *f > 1.0 && *f <= MAX_SLOWDOWN).map(Fault::Slow)
}

/// This rank's slowdown factor, once armed.
static SLOWDOWN: OnceLock<f64> = OnceLock::new();

/// Arms a `slow` fault for the rest of the process (other faults leave it unarmed).
pub fn arm(fault: Option<Fault>) {
    if let Some(Fault::Slow(factor)) = fault {
        eprintln!("parlab rank: injected fault: every timed step {factor}x as long");
        let _ = SLOWDOWN.set(factor);
    }
}

/// Inside a timed region that has taken `elapsed` so far: waits (factor − 1) × `elapsed` when a
/// `slow` fault is armed, so the region measures factor × as long; otherwise returns at once.
/// Waits under two milliseconds spin (a sleep would overshoot a microsecond collective).
pub fn stretch(elapsed: Duration) {
    let Some(factor) = SLOWDOWN.get() else { return };
    let wait = elapsed.mul_f64(factor - 1.0);
    if wait >= Duration::from_millis(2) {
        std::thread::sleep(wait);
    } else {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// [`stretch`] for a rank's own work in a region that also communicated: `elapsed` less the
/// `communicating` time (which includes waiting for other ranks) is stretched, so a slowed split
/// run is slowed by the factor on every rank's compute, and one rank's stretch is not stretched
/// again by the rank that waited for it.
pub fn stretch_own_work(elapsed: Duration, communicating: Duration) {
    stretch(elapsed.saturating_sub(communicating));
}

/// The fault the environment asks of `rank` in `experiment`.
pub fn from_env(rank: u32, experiment: &str) -> Option<Fault> {
    std::env::var(ENV).ok().and_then(|t| parse(&t, rank, experiment))
}

/// Carries out exit, signal and hang faults (the `wrong` fault is the workload's to apply).
pub fn strike(fault: Option<Fault>) {
    match fault {
        Some(Fault::Exit(code)) => {
            eprintln!("parlab rank: injected fault: exiting with status {code}");
            std::process::exit(code);
        }
        Some(Fault::Signal(sig)) => {
            eprintln!("parlab rank: injected fault: raising signal {sig}");
            // SAFETY: restoring the default action and raising only affect this process. The
            // default action is restored first: the Rust runtime and Open MPI install SIGSEGV and
            // SIGBUS handlers that would otherwise return from a raised (not faulting) signal.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        }
        Some(Fault::Hang) => {
            eprintln!("parlab rank: injected fault: hanging");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        Some(Fault::Panic) => panic!("injected fault: a panic in rank code"),
        Some(Fault::Wrong | Fault::Slow(_)) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_fault_is_refused_whatever_it_names() {
        for good in ["exit:3:rank1", "signal:9:rank0@x", "hang:rank1", "wrong:rank0", "slow:1.5", "slow:2:rank1@decode"] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for good in ["signal:1:rank0", "signal:15:rank0", "signal:19:rank0", "signal:31:rank0", "exit:255:rank0", "exit:1:rank0"] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        // Faults that could never strike: a signal past 31 or one ignored by default, an exit
        // code of 0 or past 255 (256 exits 0).
        for never in
            ["signal:90:rank1", "signal:0:rank1", "signal:17:rank1", "signal:28:rank1", "exit:0:rank1", "exit:256:rank1", "exit:-1:rank1"]
        {
            assert!(check(never).is_err(), "{never}");
        }
        for bad in ["slow:200", "slow:0.5", "slow:abc", "signal:FOO:rank1", "bogus", "hang", "exit:3:1", "hang:rank1:x"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_faults_for_the_named_rank_and_experiment() {
        assert_eq!(parse("exit:3:rank1", 1, "x"), Some(Fault::Exit(3)));
        assert_eq!(parse("exit:3:rank1", 0, "x"), None);
        assert_eq!(parse("signal:9:rank0", 0, "x"), Some(Fault::Signal(9)));
        assert_eq!(parse("hang:rank1@slow", 1, "slow"), Some(Fault::Hang));
        assert_eq!(parse("hang:rank1@slow", 1, "other"), None);
        assert_eq!(parse("wrong:rank1", 1, "x"), Some(Fault::Wrong));
        assert_eq!(parse("panic:rank1", 1, "x"), Some(Fault::Panic));
        assert_eq!(parse("explode:rank1", 1, "x"), None);
        assert_eq!(parse("slow:1.5", 3, "x"), Some(Fault::Slow(1.5)), "every rank");
        assert_eq!(parse("slow:1.5@decode", 0, "decode"), Some(Fault::Slow(1.5)));
        assert_eq!(parse("slow:1.5@decode", 0, "collectives"), None);
        assert_eq!(parse("slow:2:rank1", 1, "x"), Some(Fault::Slow(2.0)));
        assert_eq!(parse("slow:2:rank1", 0, "x"), None);
        for bad in ["slow:1", "slow:0.5", "slow:nan", "slow:inf", "slow:1000", "slow", "slow:fast"] {
            assert_eq!(parse(bad, 0, "x"), None, "{bad}");
        }
    }
}
