//! `parlab gates`: the machine's probes (cached for this machine and boot) and their evidence.

use crate::gates::cache::{self, Reprobe};

/// Prints every probe's command, exit status and output; where they came from goes to stderr.
pub fn run(as_json: bool, reprobe: bool) -> super::Result<i32> {
    let gates = obtain(reprobe);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&gates)?);
        return Ok(crate::exitcode::OK);
    }
    for p in &gates.probes {
        let status = p.exit_code.map_or("did not finish".into(), |c| format!("exit {c}"));
        println!("{:<20} $ {}  ({status})", p.name, p.command);
        for line in p.output.lines().take(8) {
            println!("{:<20}   {line}", "");
        }
    }
    Ok(crate::exitcode::OK)
}

/// The gates from the cache or probed (`reprobe`: always probed), saying on stderr which.
pub fn obtain(reprobe: bool) -> crate::gates::Gates {
    let (obtained, file) = cache::obtain(if reprobe { Reprobe::Always } else { Reprobe::IfChanged });
    for note in obtained.notes(&file) {
        eprintln!("{note}");
    }
    obtained.gates
}
