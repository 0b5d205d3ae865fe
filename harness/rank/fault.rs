//! Hidden, test-only fault injection: `PARLAB_FAULT=ACTION[:ARG]:rankN[@experiment]`.
//!
//! Actions: `exit:CODE` (the rank exits with CODE before its workload), `signal:SIG` (it sends
//! itself signal SIG), `hang` (it sleeps forever), `wrong` (its collective results are corrupted
//! after each operation, so the exact check fails). `@experiment` limits it to one experiment.

/// The environment variable read (mpirun forwards it with `-x`).
pub const ENV: &str = crate::launch::command::FAULT_ENV;

/// An injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Exit with this code.
    Exit(i32),
    /// Raise this signal.
    Signal(i32),
    /// Sleep forever.
    Hang,
    /// Corrupt collective results.
    Wrong,
}

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
    let target: u32 = parts.last()?.strip_prefix("rank")?.parse().ok()?;
    if target != rank {
        return None;
    }
    match (parts[0], parts.len()) {
        ("exit", 3) => parts[1].parse().ok().map(Fault::Exit),
        ("signal", 3) => parts[1].parse().ok().map(Fault::Signal),
        ("hang", 2) => Some(Fault::Hang),
        ("wrong", 2) => Some(Fault::Wrong),
        _ => None,
    }
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
        Some(Fault::Wrong) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_faults_for_the_named_rank_and_experiment() {
        assert_eq!(parse("exit:3:rank1", 1, "x"), Some(Fault::Exit(3)));
        assert_eq!(parse("exit:3:rank1", 0, "x"), None);
        assert_eq!(parse("signal:9:rank0", 0, "x"), Some(Fault::Signal(9)));
        assert_eq!(parse("hang:rank1@slow", 1, "slow"), Some(Fault::Hang));
        assert_eq!(parse("hang:rank1@slow", 1, "other"), None);
        assert_eq!(parse("wrong:rank1", 1, "x"), Some(Fault::Wrong));
        assert_eq!(parse("explode:rank1", 1, "x"), None);
    }
}
