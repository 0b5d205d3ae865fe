//! A run's link and backend as types: what carries its messages, named once both ways.
//!
//! Both serialise as the names specs, plans and manifests have always held (`mpi-shm`,
//! `nccl-no-p2p`, `mpi`), so run identities, which hash the serialised plan, do not change.

use crate::nccl::Setting;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a run's ranks exchange messages. Links compare, order and hash by name (as the
/// register sorts them), so a kept name equals the variant of the same name.
#[derive(Debug, Clone)]
pub enum Link {
    /// Open MPI's shared memory inside a host, TCP between hosts (`mpi-shm`).
    MpiShm,
    /// Open MPI over TCP everywhere, loopback inside one host (`mpi-tcp`).
    MpiTcp,
    /// Open MPI's own choice of transport (`mpi-auto`).
    MpiAuto,
    /// NCCL between GPUs under one of its settings (`nccl`, `nccl-no-p2p`, ...).
    Nccl(Setting),
    /// No link: a `kind: model` run, whose links are its tables' rows (the empty name).
    Absent,
    /// A name parlab does not measure over, kept as read: an imported tool's (`mpi`), a
    /// labelled import's, or a name from a file of another version.
    Named(String),
}

impl Link {
    /// Every link a run can be measured over, in listing order (MPI's, then NCCL's).
    pub fn measured() -> Vec<Link> {
        [Link::MpiShm, Link::MpiTcp, Link::MpiAuto].into_iter().chain(Setting::ALL.map(Link::Nccl)).collect()
    }

    /// The measured link called `name`, if any.
    pub fn measured_named(name: &str) -> Option<Link> {
        Link::measured().into_iter().find(|l| l.name() == name)
    }

    /// The link called `name`: a measured one, [`Link::Absent`] for the empty name, else the name kept.
    pub fn from_name(name: &str) -> Link {
        match name {
            "" => Link::Absent,
            _ => Link::measured_named(name).unwrap_or_else(|| Link::Named(name.to_string())),
        }
    }

    /// The name used in specs, plans, manifests and the register (the one table of names:
    /// [`Link::from_name`] reads it back).
    pub fn name(&self) -> &str {
        match self {
            Link::MpiShm => "mpi-shm",
            Link::MpiTcp => "mpi-tcp",
            Link::MpiAuto => "mpi-auto",
            Link::Nccl(setting) => setting.name(),
            Link::Absent => "",
            Link::Named(name) => name,
        }
    }

    /// The NCCL setting of an NCCL link; None for any other.
    pub fn nccl(&self) -> Option<Setting> {
        match self {
            Link::Nccl(setting) => Some(*setting),
            _ => None,
        }
    }

    /// The library that carries the link's messages (part of the run identity).
    pub fn backend(&self) -> Backend {
        match self {
            Link::Nccl(_) => Backend::Nccl,
            Link::Absent => Backend::Arithmetic,
            _ => Backend::Mpi,
        }
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for Link {
    fn eq(&self, other: &Link) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Link {}

impl std::hash::Hash for Link {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.name().hash(h)
    }
}

impl PartialOrd for Link {
    fn partial_cmp(&self, other: &Link) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Link {
    fn cmp(&self, other: &Link) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl From<&str> for Link {
    fn from(name: &str) -> Link {
        Link::from_name(name)
    }
}

impl Serialize for Link {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Link {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Link::from_name(&String::deserialize(d)?))
    }
}

/// The library that carries a run's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Open MPI.
    Mpi,
    /// NCCL (its ranks still meet over MPI).
    Nccl,
    /// None: a `kind: model` run computes the cost model's arithmetic.
    Arithmetic,
}

crate::named!(Backend { Mpi => "mpi", Nccl => "nccl", Arithmetic => "arithmetic" });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_measured_link_round_trips_through_its_name() {
        let names: Vec<String> = Link::measured().iter().map(|l| l.name().to_string()).collect();
        assert_eq!(names, ["mpi-shm", "mpi-tcp", "mpi-auto", "nccl", "nccl-no-p2p", "nccl-no-shm", "nccl-no-p2p-no-shm"]);
        for link in Link::measured() {
            assert_eq!(Link::from_name(link.name()), link);
            assert_eq!(serde_json::to_string(&link).unwrap(), format!("\"{}\"", link.name()));
            assert_eq!(serde_json::from_str::<Link>(&format!("\"{link}\"")).unwrap(), link);
        }
        assert_eq!(Link::from_name("nccl-no-shm"), Link::Nccl(Setting::NoShm));
    }

    #[test]
    fn other_names_are_kept_and_only_measured_ones_are_measured() {
        assert_eq!(Link::from_name(""), Link::Absent);
        assert_eq!(serde_json::to_string(&Link::Absent).unwrap(), "\"\"");
        assert_eq!(serde_json::from_str::<Link>("\"mpi\"").unwrap(), Link::Named("mpi".into()));
        assert_eq!(Link::from_name("nvswitch").name(), "nvswitch");
        assert_eq!(Link::measured_named("nvswitch"), None);
        assert_eq!(Link::measured_named("mpi-tcp"), Some(Link::MpiTcp));
        assert_eq!(Link::Named("mpi-tcp".into()), Link::MpiTcp);
        assert!(Link::MpiTcp < Link::Nccl(Setting::Default) && Link::Absent < Link::MpiAuto);
    }

    #[test]
    fn the_backend_follows_the_link() {
        assert_eq!(Link::MpiTcp.backend(), Backend::Mpi);
        assert_eq!(Link::Nccl(Setting::NoP2p).backend(), Backend::Nccl);
        assert_eq!(Link::Absent.backend(), Backend::Arithmetic);
        assert_eq!(serde_json::to_string(&Backend::Arithmetic).unwrap(), "\"arithmetic\"");
        assert_eq!(serde_json::from_str::<Backend>("\"nccl\"").unwrap(), Backend::Nccl);
    }
}
