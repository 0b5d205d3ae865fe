//! A command's output on stdout: written whole, or the command fails saying why (a full disk
//! behind `> plan.json`); a closed pipe ends the process as it ends other Unix tools (SIGPIPE's
//! default is restored for every command but `run`). Warnings go to stderr with `say!`, which a
//! stderr that cannot be written for another reason (a full disk) does not stop.

use std::io::Write;

/// Writes `text` to stdout and flushes it; Err (exit 1) names why it could not be written.
pub fn print(text: &str) -> super::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| super::Error::Failed(anyhow::anyhow!("cannot write the output to stdout: {e}; it may be incomplete")))
}

/// Writes `text` and a newline to stdout, as [`print`].
pub fn print_line(text: &str) -> super::Result<()> {
    print(&format!("{text}\n"))
}

/// Writes `value` as pretty JSON and a newline to stdout, as [`print`].
pub fn print_json<T: serde::Serialize + ?Sized>(value: &T) -> super::Result<()> {
    print_line(&serde_json::to_string_pretty(value)?)
}
