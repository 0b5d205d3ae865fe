//! One writer per folder: an advisory `flock` on `<folder>/.parlab.lock` (the manifests folder
//! for `run`, the output folder for a register render), held for the life of the command, with
//! the holder's pid written inside so a second writer can name it.

use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside a manifests folder.
pub const LOCK_FILE: &str = ".parlab.lock";

/// Why the store could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("{path}: another parlab process (pid {holder}) is writing this folder; wait for it to finish, or pass --wait to wait for it")]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid as it wrote it (`unknown` if unreadable or that process has ended).
        holder: String,
    },
    /// The lock file could not be opened or locked.
    #[error("{path}: cannot {action}: {cause}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What was attempted.
        action: &'static str,
        /// The cause (not a `source`, so a chain printer shows it once).
        cause: std::io::Error,
    },
}

/// A held lock; released when dropped (or when the process ends, however it ends).
#[derive(Debug)]
pub struct StoreLock {
    _file: std::fs::File,
    path: PathBuf,
}

impl StoreLock {
    /// Locks the folder `dir` (created if missing); with `wait`, blocks until the holder is done.
    pub fn acquire(dir: &Path, wait: bool) -> Result<StoreLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |cause| LockError::Io { path: path.clone(), action: "lock", cause };
        std::fs::create_dir_all(dir).map_err(|cause| LockError::Io { path: dir.to_path_buf(), action: "create the folder", cause })?;
        let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        let mode = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
        // SAFETY: flock on a file descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), mode) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LockError::Held { holder: holder(&mut file), path });
            }
            return Err(io(err));
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(StoreLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder it locks.
    pub fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// The pid the holder wrote into the lock file. A holder that has just taken the lock writes
/// its pid a moment later: an empty file is read again, for up to 0.5 s, before it is `unknown`.
fn holder(file: &mut std::fs::File) -> String {
    for _ in 0..10 {
        let mut text = String::new();
        let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
        if !text.trim().is_empty() {
            return match text.trim().parse::<u32>() {
                // A pid whose process has ended is not the holder (another tool took the lock since).
                Ok(pid) if crate::host::process_exists(pid) => pid.to_string(),
                _ => "unknown".into(),
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    "unknown".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_that_writes_its_pid_a_moment_after_locking_is_named_not_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // Another holder's first moment: the file locked, its pid not yet written.
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        // SAFETY: flock on a file descriptor this test owns.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        let writer = {
            let mut file = file.try_clone().unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(150));
                writeln!(file, "{}", std::process::id()).unwrap();
            })
        };
        match StoreLock::acquire(dir.path(), false) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, std::process::id().to_string()),
            other => panic!("expected the lock held: {other:?}"),
        }
        writer.join().unwrap();
    }
}
