//! `parlab gates`: the machine's probes (cached for this machine and boot) and their evidence.

use crate::gates::cache::{self, Reprobe};

/// Prints every probe's command, exit status and output; where they came from goes to stderr.
pub fn run(as_json: bool, reprobe: bool) -> super::Result<i32> {
    let gates = obtain(reprobe);
    if as_json {
        super::output::print_json(&gates)?;
        return Ok(crate::exitcode::OK);
    }
    let mut text = String::new();
    for p in &gates.probes {
        let status = p.exit_code.map_or("did not finish".into(), |c| format!("exit {c}"));
        text.push_str(&format!("{:<20} $ {}  ({status})\n", p.name, p.command));
        for line in p.output.lines().take(8) {
            text.push_str(&format!("{:<20}   {line}\n", ""));
        }
    }
    super::output::print(&text)?;
    Ok(crate::exitcode::OK)
}

/// The gates from the cache or probed (`reprobe`: always probed), saying on stderr which.
pub fn obtain(reprobe: bool) -> crate::gates::Gates {
    let (obtained, file) = cache::obtain(if reprobe { Reprobe::Always } else { Reprobe::IfChanged });
    for note in obtained.notes(&file) {
        crate::say!("{note}");
    }
    obtained.gates
}
