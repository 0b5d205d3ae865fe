//! Free disk for a seeded checkpoint, checked when the plan is made: a decode run whose seeded
//! checkpoint is not yet on disk writes its `model.safetensors` (every parameter in float32)
//! into the checkpoints folder, so that filesystem needs those bytes free (`statvfs`'s blocks
//! available to an unprivileged user). A run past it is refused (exit 2) with both numbers and
//! the folder; `PARLAB_MAX_DISK` (bytes or a size) replaces the free figure for a user who
//! knows better (space freed before the run, a spec planned on one machine for another).

use super::plan::Weights;
use crate::model::ModelConfig;
use std::path::{Path, PathBuf};

/// The variable that overrides the free disk figure.
pub const MAX_DISK_ENV: &str = "PARLAB_MAX_DISK";

/// Bytes a generated checkpoint would write, and the folder it would write them into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskNeed {
    /// Bytes of `model.safetensors` (parameters × 4; the header's few KiB aside).
    pub bytes: u64,
    /// Parameters written.
    pub params: u64,
    /// The checkpoint's folder.
    pub folder: PathBuf,
}

/// The disk a plan may fill: the free bytes of a folder's filesystem, or the override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskLimit {
    /// `statvfs` of the nearest existing folder: blocks available × fragment size.
    Free {
        /// Bytes available.
        bytes: u64,
        /// The folder measured.
        measured: PathBuf,
    },
    /// `PARLAB_MAX_DISK`.
    Override {
        /// Bytes allowed.
        bytes: u64,
    },
}

impl DiskLimit {
    /// The limit for writing into `folder`: the override when set and readable, else the free
    /// bytes of the nearest folder that exists on the way to it; None when neither is known.
    pub fn for_folder(folder: &Path) -> Option<DiskLimit> {
        if let Some(bytes) = std::env::var(MAX_DISK_ENV).ok().and_then(|v| crate::units::parse_bytes(&v)) {
            return Some(DiskLimit::Override { bytes });
        }
        let measured = nearest_existing(folder);
        Some(DiskLimit::Free { bytes: free_bytes(&measured)?, measured })
    }

    fn bytes(&self) -> u64 {
        match self {
            DiskLimit::Free { bytes, .. } | DiskLimit::Override { bytes } => *bytes,
        }
    }

    fn describe(&self) -> String {
        match self {
            DiskLimit::Free { bytes, measured } => format!("its filesystem has {} free ({} by statvfs)", size(*bytes), measured.display()),
            DiskLimit::Override { bytes } => format!("{MAX_DISK_ENV} allows {}", size(*bytes)),
        }
    }
}

fn size(bytes: u64) -> String {
    crate::units::format_bytes(bytes as f64)
}

/// The first of `folder` and its ancestors that exists (`.` for a relative path none of whose
/// parts exist yet).
fn nearest_existing(folder: &Path) -> PathBuf {
    folder.ancestors().find(|p| !p.as_os_str().is_empty() && p.exists()).map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Bytes available to an unprivileged writer on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statvfs is a valid value for statvfs(3) to fill; the path is a
    // NUL-terminated string that outlives the call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let (available, fragment): (u64, u64) = (stat.f_bavail, stat.f_frsize);
    Some(available.saturating_mul(fragment))
}

/// What a decode run writes to disk before launching: its seeded checkpoint, unless one is
/// already there (a checkpoint file of the user's is read, never written).
pub fn checkpoint_need(cfg: &ModelConfig, weights: &Weights) -> Option<DiskNeed> {
    let Weights::Seeded { path, .. } = weights else { return None };
    if path.join("model.safetensors").is_file() {
        return None;
    }
    let params = crate::model::init::seeded_params(cfg)?;
    Some(DiskNeed { bytes: params.saturating_mul(4), params, folder: path.clone() })
}

/// The message refusing `need` past `limit`, or None when it fits.
pub fn refusal(need: &DiskNeed, limit: &DiskLimit) -> Option<String> {
    (need.bytes > limit.bytes()).then(|| {
        format!(
            "this run writes a seeded checkpoint of about {} ({} float32 parameters) into {}, {}: refused before anything is written (set {MAX_DISK_ENV} to a larger size to run it anyway)",
            size(need.bytes),
            need.params,
            need.folder.display(),
            limit.describe()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(bytes: u64) -> DiskNeed {
        DiskNeed { bytes, params: bytes / 4, folder: PathBuf::from(".parlab/checkpoints/big-seed0") }
    }

    #[test]
    fn a_checkpoint_past_the_free_disk_names_both_numbers_and_the_folder() {
        let limit = DiskLimit::Free { bytes: 1 << 30, measured: PathBuf::from(".parlab") };
        let message = refusal(&need(4 << 30), &limit).expect("4 GiB is past 1 GiB free");
        for part in ["4.0 GiB", "1073741824 float32 parameters", ".parlab/checkpoints/big-seed0", "1.0 GiB free", "statvfs", MAX_DISK_ENV] {
            assert!(message.contains(part), "{part} missing: {message}");
        }
        assert_eq!(refusal(&need(1 << 30), &limit), None, "exactly the free bytes fit");
        assert!(refusal(&need(2 << 30), &DiskLimit::Override { bytes: 1 << 30 }).unwrap().contains("PARLAB_MAX_DISK allows 1.0 GiB"));
    }

    #[test]
    fn the_free_bytes_of_a_real_filesystem_are_read_from_the_nearest_existing_folder() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("not/yet/made");
        assert_eq!(nearest_existing(&deep), dir.path());
        assert_eq!(nearest_existing(Path::new("no-such-folder-here/x")), PathBuf::from("."));
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0), "a temporary folder has some space");
        assert_eq!(free_bytes(Path::new("/no/such/path/at/all")), None);
    }
}
