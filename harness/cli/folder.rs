//! A folder as the user named it (after its flag, as its environment variable, or bare for a
//! default), and the refusals that name it that way: one wording for every command.

use super::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};

/// What a manifests folder holds, for [`Folder::not_a_file`]: "the folder the manifests are in".
pub const MANIFESTS_HOLD: &str = "the manifests are in";

/// What a nightly history folder holds, for [`Folder::not_a_file`].
pub const HISTORY_HOLDS: &str = "of the nightly history";

/// What named a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedBy {
    /// A flag (`--manifests`).
    Flag(&'static str),
    /// An environment variable (`PARLAB_MANIFESTS`).
    Variable(&'static str),
    /// Nothing: the command's default.
    Default,
}

/// A folder's path with what named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    /// The path as given.
    pub path: PathBuf,
    /// What named it.
    pub named_by: NamedBy,
}

impl Folder {
    /// `path`, given after `flag`.
    pub fn flag(path: &Path, flag: &'static str) -> Folder {
        Folder { path: path.to_path_buf(), named_by: NamedBy::Flag(flag) }
    }

    /// The manifests folder: `--manifests` where the flag was given, else `PARLAB_MANIFESTS`
    /// where it is set, else the default `manifests/`.
    pub fn manifests(given: Option<PathBuf>) -> Folder {
        match given {
            Some(path) => Folder { path, named_by: NamedBy::Flag("--manifests") },
            None => {
                let named_by = match crate::files::env_path("PARLAB_MANIFESTS") {
                    Some(_) => NamedBy::Variable("PARLAB_MANIFESTS"),
                    None => NamedBy::Default,
                };
                Folder { path: crate::manifest::manifests_dir(), named_by }
            }
        }
    }

    /// Refuses the folder when it is a file (`holds`: "the manifests are in" for "the folder
    /// the manifests are in"), exit 2; a missing one is left to the caller.
    pub fn not_a_file(&self, holds: &str) -> Result<()> {
        if self.path.exists() && !self.path.is_dir() {
            return Err(Error::Usage(format!("{self}: a file, not the folder {holds}")));
        }
        Ok(())
    }

    /// [`Folder::not_a_file`], and refuses a missing folder as `no such {what}` (`what`:
    /// "baseline manifests folder"), followed by `hint` where there is one, and one that cannot
    /// be listed (read as empty, it would render a register of nothing and remove its figures).
    pub fn existing(&self, holds: &str, what: &str, hint: &str) -> Result<()> {
        self.not_a_file(holds)?;
        if !self.path.is_dir() {
            return Err(Error::Usage(format!("{self}: no such {what}{hint}")));
        }
        self.listable(what)
    }

    /// Refuses a folder that is there but cannot be listed (`what`: "manifests folder"); a
    /// missing one is the caller's.
    pub fn listable(&self, what: &str) -> Result<()> {
        match self.path.is_dir().then(|| std::fs::read_dir(&self.path)) {
            Some(Err(e)) => Err(Error::Usage(format!("{self}: cannot list the {what}: {e}"))),
            _ => Ok(()),
        }
    }

    /// Refuses a register's output folder (its stamp names the manifests it was rendered from)
    /// given as a manifests folder to write into: a manifest there would make the next render
    /// of it refuse the folder (it holds a store's manifests), and the register would not
    /// describe it.
    pub fn not_a_register(&self) -> Result<()> {
        match crate::report::origin::rendered_from(&self.path) {
            Some(from) => Err(Error::Usage(format!(
                "{self}: a register's folder (rendered from {}), not a manifests folder, the folder {MANIFESTS_HOLD}",
                from.display()
            ))),
            None => Ok(()),
        }
    }

    /// Refuses a folder parlab keeps inside a manifests folder (a run's results folder
    /// `<store>/<run_id>`, `superseded`, `_gates`) given as one to write into (manifests, a
    /// register): no render reads a manifest there, and a rerun of that run removes its
    /// results folder with whatever was written into it.
    pub fn not_inside_a_store(&self) -> Result<()> {
        let absolute = std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone());
        let (Some(name), Some(parent)) = (absolute.file_name().and_then(|n| n.to_str()), absolute.parent()) else { return Ok(()) };
        let manifest = parent.join(format!("{name}.json"));
        let run_folder = crate::identity::is_run_id(name)
            && crate::manifest::file_schema(&manifest).is_some_and(|schema| schema.starts_with("parlab.manifest/"));
        let store_folder = matches!(name, "superseded" | "_gates") && crate::report::origin::a_manifest_in(parent).is_some();
        if run_folder || store_folder {
            return Err(Error::Usage(format!(
                "{self}: a folder parlab keeps inside the manifests folder {} (a run's results, superseded runs or gates), which no render reads and a rerun may remove: name another folder",
                parent.display()
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Folder {
    /// The path as the user gave it: `--manifests DIR`, `PARLAB_MANIFESTS=DIR`, or bare.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.named_by {
            NamedBy::Flag(flag) => write!(f, "{flag} {}", self.path.display()),
            NamedBy::Variable(variable) => write!(f, "{variable}={}", self.path.display()),
            NamedBy::Default => write!(f, "{}", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_named_as_the_user_named_it() {
        let path = Path::new("store");
        assert_eq!(Folder::flag(path, "--manifests").to_string(), "--manifests store");
        let from_variable = Folder { path: path.into(), named_by: NamedBy::Variable("PARLAB_MANIFESTS") };
        assert_eq!(from_variable.to_string(), "PARLAB_MANIFESTS=store");
        assert_eq!(Folder { path: path.into(), named_by: NamedBy::Default }.to_string(), "store");
    }

    #[test]
    fn a_file_and_a_missing_folder_are_refused_by_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e = Folder::flag(&file, "--history").not_a_file(HISTORY_HOLDS).unwrap_err().to_string();
        assert!(e.ends_with("f: a file, not the folder of the nightly history") && e.starts_with("--history "), "{e}");
        let missing = Folder::flag(&dir.path().join("gone"), "--baseline");
        assert!(missing.not_a_file(MANIFESTS_HOLD).is_ok(), "a missing folder is the caller's");
        let e = missing.existing(MANIFESTS_HOLD, "baseline manifests folder", " (hint)").unwrap_err().to_string();
        assert!(e.ends_with("gone: no such baseline manifests folder (hint)"), "{e}");
        assert!(Folder::flag(dir.path(), "--baseline").existing(MANIFESTS_HOLD, "folder", "").is_ok());
    }
}
