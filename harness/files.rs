//! Reading input files safely: only regular files, only up to a size limit, errors naming the path.

use std::path::{Path, PathBuf};

/// Largest spec, config, hostfile or plan parlab reads (they are small text files).
pub const TEXT_LIMIT: u64 = 16 << 20;

/// Largest manifest parlab reads.
pub const MANIFEST_LIMIT: u64 = 256 << 20;

/// The path environment variable `name` gives, None where it is unset or empty (a shell's
/// `NAME= parlab …` clears a setting for one command; an empty path would be the working folder).
pub fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be inspected or read.
    #[error("{path}: cannot {action}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was attempted (`read`, `inspect`).
        action: &'static str,
        /// The cause (not a `source`, so a chain printer shows it once).
        cause: std::io::Error,
    },
    /// It is a folder, FIFO, device or socket.
    #[error("{path}: not a regular file ({what})")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// It is UTF-16 (it starts with a UTF-16 byte-order mark, as Windows tools write).
    #[error("{path} is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)")]
    Utf16 {
        /// The file.
        path: PathBuf,
    },
    /// It is not UTF-8 text: the first byte that is not, by line.
    #[error(
        "{path}:{line}: byte {byte} of the line (0x{value:02x}) is not UTF-8; parlab reads UTF-8 text (e.g. iconv -f LATIN1 -t UTF-8)"
    )]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The line holding it, from 1.
        line: usize,
        /// Its place in the line, from 1.
        byte: usize,
        /// Its value.
        value: u8,
    },
    /// It is larger than parlab reads for its purpose.
    #[error("{path}: {size} bytes is larger than the {limit} bytes parlab reads here")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

impl FileError {
    /// The message without the path, for callers that print the path themselves.
    pub fn reason(&self) -> String {
        match self {
            FileError::Io { action, cause, .. } => format!("cannot {action}: {cause}"),
            FileError::NotRegular { what, .. } => format!("not a regular file ({what})"),
            FileError::TooLarge { size, limit, .. } => format!("{size} bytes is larger than the {limit} bytes parlab reads here"),
            FileError::Utf16 { .. } => "UTF-16 text; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)".into(),
            FileError::NotUtf8 { line, byte, value, .. } => {
                format!("line {line}, byte {byte} (0x{value:02x}) is not UTF-8; parlab reads UTF-8 text (e.g. iconv -f LATIN1 -t UTF-8)")
            }
        }
    }
}

/// Checks that `path` is a regular file of at most `limit` bytes (following symlinks).
pub fn check_regular(path: &Path, limit: u64) -> Result<u64, FileError> {
    let meta = std::fs::metadata(path).map_err(|cause| FileError::Io { path: path.into(), action: "inspect", cause })?;
    if !meta.is_file() {
        return Err(FileError::NotRegular { path: path.into(), what: file_type_name(&meta.file_type()) });
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge { path: path.into(), size: meta.len(), limit });
    }
    Ok(meta.len())
}

/// Reads a regular text file of at most `limit` bytes, less a leading UTF-8 byte-order mark
/// (editors on Windows write one; YAML allows it, JSON and the tools' tables do not carry it);
/// a file that starts with a UTF-16 byte-order mark (either order) is refused as UTF-16.
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    check_regular(path, limit)?;
    let bytes = std::fs::read(path).map_err(|cause| FileError::Io { path: path.into(), action: "read", cause })?;
    if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        return Err(FileError::Utf16 { path: path.into() });
    }
    let text = String::from_utf8(bytes).map_err(|e| not_utf8(path, e.as_bytes(), e.utf8_error().valid_up_to()))?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// UTF-8's byte-order mark.
const BOM: &[u8] = &[0xef, 0xbb, 0xbf];

/// Where in `bytes` (of `path`) the first byte that is not UTF-8 lies: `at`, by line.
fn not_utf8(path: &Path, bytes: &[u8], at: usize) -> FileError {
    let before = &bytes[..at];
    // A byte-order mark is no byte of the line the reader sees (it is skipped).
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(if bytes.starts_with(BOM) { BOM.len() } else { 0 }, |i| i + 1);
    FileError::NotUtf8 {
        path: path.into(),
        line: before.iter().filter(|&&b| b == b'\n').count() + 1,
        byte: at - line_start + 1,
        value: bytes.get(at).copied().unwrap_or_default(),
    }
}

/// The most of a log parlab reads to explain a failure: its first and its last half of this.
pub const LOG_LIMIT: u64 = 1 << 20;

/// A log a process wrote (a rank's stderr, the launcher's), read to explain a failure: the
/// whole of it up to [`LOG_LIMIT`], else its first and last halves of that around a line that
/// says how much was left out; bytes that are not UTF-8 shown as U+FFFD. None where it cannot
/// be read.
pub fn read_log(path: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    if len <= LOG_LIMIT {
        file.read_to_end(&mut bytes).ok()?;
        return Some(String::from_utf8_lossy(&bytes).into_owned());
    }
    let half = LOG_LIMIT / 2;
    (&mut file).take(half).read_to_end(&mut bytes).ok()?;
    let mut tail = Vec::new();
    file.seek(SeekFrom::Start(len - half)).ok()?;
    file.take(half).read_to_end(&mut tail).ok()?;
    Some(format!(
        "{}\n[parlab: {} bytes of this log left out]\n{}",
        String::from_utf8_lossy(&bytes),
        len - 2 * half,
        String::from_utf8_lossy(&tail)
    ))
}

fn file_type_name(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_read_whole_or_by_its_ends_and_never_lost_to_a_bad_byte() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.log");
        std::fs::write(&small, b"first line\n\xff\xfe bad bytes\nlast line\n").unwrap();
        let text = read_log(&small).unwrap();
        assert!(text.starts_with("first line\n") && text.ends_with("last line\n") && text.contains('\u{fffd}'), "{text}");
        let big = dir.path().join("big.log");
        let mut bytes = b"the start\n".to_vec();
        bytes.resize(3 * LOG_LIMIT as usize, b'x');
        bytes.extend_from_slice(b"\nthe cause\n");
        std::fs::write(&big, &bytes).unwrap();
        let text = read_log(&big).unwrap();
        assert!(text.starts_with("the start\n") && text.ends_with("\nthe cause\n"), "the ends are kept");
        assert!(text.contains(&format!("[parlab: {} bytes of this log left out]", bytes.len() as u64 - LOG_LIMIT)));
        assert!(text.len() < LOG_LIMIT as usize + 100);
        assert_eq!(read_log(&dir.path().join("absent.log")), None);
    }

    #[test]
    fn a_leading_byte_order_mark_is_not_part_of_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("spec.yaml");
        std::fs::write(&f, "\u{feff}name: bom\n").unwrap();
        assert_eq!(read_text(&f, 1 << 10).unwrap(), "name: bom\n");
        std::fs::write(&f, "name: \u{feff}\n").unwrap();
        assert_eq!(read_text(&f, 1 << 10).unwrap(), "name: \u{feff}\n", "only a leading mark");
    }

    #[test]
    fn a_utf16_file_is_refused_as_utf16_in_either_byte_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out.txt");
        for mark in [[0xff, 0xfe], [0xfe, 0xff]] {
            std::fs::write(&f, [&mark[..], b"#\0 \0"].concat()).unwrap();
            let e = read_text(&f, 1 << 10).unwrap_err();
            assert!(matches!(e, FileError::Utf16 { .. }), "{e:?}");
            assert_eq!(e.to_string(), format!("{} is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)", f.display()));
        }
        std::fs::write(&f, [0x80, 0x81]).unwrap();
        assert_eq!(
            read_text(&f, 1 << 10).unwrap_err().to_string(),
            format!("{}:1: byte 1 of the line (0x80) is not UTF-8; parlab reads UTF-8 text (e.g. iconv -f LATIN1 -t UTF-8)", f.display())
        );
        // A Latin-1 `é` in a comment on the third line.
        std::fs::write(&f, b"# a\n# b\n# caf\xe9\n").unwrap();
        let e = read_text(&f, 1 << 10).unwrap_err();
        assert!(matches!(e, FileError::NotUtf8 { line: 3, byte: 6, value: 0xe9, .. }), "{e:?}");
        // Counted from the first byte the reader sees: after a byte-order mark.
        std::fs::write(&f, b"\xef\xbb\xbf# caf\xe9\n").unwrap();
        let e = read_text(&f, 1 << 10).unwrap_err();
        assert!(matches!(e, FileError::NotUtf8 { line: 1, byte: 6, .. }), "{e:?}");
    }
}
