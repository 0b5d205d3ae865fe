//! Reading input files safely: only regular files, only up to a size limit, errors naming the path.

use std::path::{Path, PathBuf};

/// Largest spec, config, hostfile or plan parlab reads (they are small text files).
pub const TEXT_LIMIT: u64 = 16 << 20;

/// Largest manifest parlab reads.
pub const MANIFEST_LIMIT: u64 = 256 << 20;

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
    let text = String::from_utf8(bytes).map_err(|_| FileError::Io {
        path: path.into(),
        action: "read",
        cause: std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"),
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
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
        assert!(read_text(&f, 1 << 10).unwrap_err().to_string().ends_with("cannot read: stream did not contain valid UTF-8"));
    }
}
