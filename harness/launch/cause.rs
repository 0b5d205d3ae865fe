//! The cause a rank's log gives for its failure: its own error line, not the backtrace after it.
//!
//! A rank that fails prints its cause first ("memory allocation of … bytes failed", a Rust
//! panic's message, a torch error's first line), then noise: Rust's `stack backtrace:` frames
//! and `note:` lines, Open MPI's signal handler (`[host:pid] *** Process received signal ***`,
//! `[host:pid] [ 3] /lib/…(abort+0xd3)[0x…]`), a torch exception's `frame #N:` lines.

use std::path::{Path, PathBuf};

/// A rank's own error line and the log it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct RankCause {
    /// The line, a panic's `panicked at FILE:LINE:COL:` joined with its message.
    pub line: String,
    /// The rank's stderr file.
    pub log: PathBuf,
}

/// True for a line that is a backtrace frame, a note, a signal handler's report or blank.
pub fn is_noise(line: &str) -> bool {
    let text = line.trim();
    text.is_empty()
        || text == "stack backtrace:"
        || text.starts_with("note:")
        || is_rust_frame(text)
        || is_open_mpi_handler(text)
        || text.starts_with("frame #")
        || text.starts_with("Exception raised from ")
}

/// `12: parlab::rank::run` or `at ./harness/rank/mod.rs:40:5` of Rust's backtrace.
fn is_rust_frame(text: &str) -> bool {
    let numbered = text.split_once(": ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    numbered || text.strip_prefix("at ").is_some_and(is_source_location)
}

/// `FILE:LINE:COL`, the location under a Rust frame.
fn is_source_location(text: &str) -> bool {
    let mut parts = text.rsplitn(3, ':');
    let numeric = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_some_and(|file| !file.is_empty())
}

/// A line of Open MPI's signal handler: `[host:pid] ...` followed by its report or a frame.
fn is_open_mpi_handler(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('[').and_then(|r| r.split_once("] ")).map(|(_, r)| r.trim_start()) else {
        return false;
    };
    rest.starts_with("***")
        || rest.starts_with("Signal: ")
        || rest.starts_with("Signal code:")
        || rest.starts_with("Failing at address")
        || rest.starts_with('[')
}

/// The cause among a log's lines: the last line that is not noise, joined to the line before
/// when that one opens a panic (`thread 'main' panicked at FILE:LINE:COL:`).
pub fn cause_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !is_noise(l)).collect();
    let (last, before) = lines.split_last()?;
    match before.last() {
        Some(opening) if opening.contains(" panicked at ") && opening.ends_with(':') => Some(format!("{opening} {}", last.trim())),
        _ => Some(last.trim().to_string()),
    }
}

/// The lines of a rank's error message that are not noise, joined by ` | ` (a torch error
/// keeps its message and loses its `frame #N:` lines).
pub fn without_noise(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !is_noise(l)).collect::<Vec<_>>().join(" | ")
}

/// The cause `rank`'s stderr under `out` gives, when it has a line that is not noise.
pub fn of_rank(out: &Path, rank: u32) -> Option<RankCause> {
    let log = super::failure::rank_stderr(out, rank)?;
    let text = crate::files::read_log(&log)?;
    Some(RankCause { line: cause_line(&text)?, log })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOCATION: &str = "memory allocation of 1152921504606846976 bytes failed
stack backtrace:
   0: std::alloc::rust_oom
   5: parlab::rank::collectives::Case::new
             at ./harness/rank/collectives.rs:120:9
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
[vm:31676] *** Process received signal ***
[vm:31676] Signal: Aborted (6)
[vm:31676] Signal code:  (-6)
[vm:31676] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7f6870f7a050]
[vm:31676] [25] /work/parlab(+0xfd36e1)[0x560dae0b76e1]
[vm:31676] *** End of error message ***
";

    #[test]
    fn an_allocation_failure_is_the_cause_and_no_frame_is() {
        assert_eq!(cause_line(ALLOCATION).as_deref(), Some("memory allocation of 1152921504606846976 bytes failed"));
    }

    #[test]
    fn a_panic_keeps_its_location_and_message() {
        let panic = "parlab rank: starting\nthread 'main' panicked at harness/rank/decode.rs:10:5:\nindex out of bounds: the len is 3 but the index is 7\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            cause_line(panic).as_deref(),
            Some("thread 'main' panicked at harness/rank/decode.rs:10:5: index out of bounds: the len is 3 but the index is 7")
        );
    }

    #[test]
    fn a_torch_error_keeps_its_first_line_and_drops_its_frames() {
        let torch = "Internal torch error: DefaultCPUAllocator: not enough memory: you tried to allocate 4096 bytes.\nException raised from alloc_cpu at ../c10/core/impl/alloc_cpu.cpp:117 (most recent call first):\nframe #0: c10::Error::Error() + 0x99 (0x7f in /lib/libc10.so)\nframe #1: <unknown function> + 0x1 (0x7f in /lib/libc10.so)\n";
        assert_eq!(without_noise(torch), "Internal torch error: DefaultCPUAllocator: not enough memory: you tried to allocate 4096 bytes.");
        assert_eq!(
            cause_line(torch).as_deref(),
            Some("Internal torch error: DefaultCPUAllocator: not enough memory: you tried to allocate 4096 bytes.")
        );
    }

    #[test]
    fn a_log_of_noise_alone_has_no_cause() {
        assert_eq!(cause_line("\n[vm:1] *** Process received signal ***\n   3: main\n"), None);
        assert!(!is_noise("parlab rank 1: wrong result: all-reduce of 4 B"), "an ordinary error line is kept");
        assert!(!is_noise("rank 1: 1 of 1 values wrong"), "a line naming a rank is not a frame");
        assert!(!is_noise("at least 2 ranks: found 1"), "a sentence starting with `at` is not a location");
    }
}
