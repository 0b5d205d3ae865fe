//! `parlab gates`: probe the machine and show the evidence.

use crate::gates::Gates;

/// Prints every probe's command, exit status and output.
pub fn run(as_json: bool) -> super::Result<i32> {
    let gates = Gates::probe_machine();
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
