//! The identity rule: canonical encodings and sha256 digests of runs and answers.
//!
//! The run identity covers everything that can change what is computed or measured
//! (model config and weights, workload, dtype, the full parallel layout, backend,
//! link, threads, repetitions). The answer identity is the same without the layout,
//! backend, link, threads and repetitions: runs that share it must give one answer.

use crate::spec::plan::{Layout, ModelSource, Weights, Workload};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// How many hex digits of a digest the register and messages show.
pub const SHORT_LEN: usize = 12;

/// The first 12 hex digits of a digest (all of it when shorter), as the register shows it.
pub fn short(digest: &str) -> &str {
    digest.get(..SHORT_LEN).unwrap_or(digest)
}

/// A sha256 identity in hex, serialised as the bare string (so manifests keep their shape).
macro_rules! hex_identity {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a digest already computed (read back from a manifest, a plan or a name).
            pub fn new(hex: impl Into<String>) -> Self {
                $name(hex.into())
            }

            /// The first 12 hex digits, as the register shows it.
            pub fn short(&self) -> &str {
                short(&self.0)
            }

            /// The whole digest.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<std::path::Path> for $name {
            fn as_ref(&self) -> &std::path::Path {
                std::path::Path::new(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl From<String> for $name {
            fn from(hex: String) -> Self {
                $name(hex)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

hex_identity!(
    /// A run identity: the digest of everything that can change what is computed or measured.
    RunId
);

hex_identity!(
    /// An answer identity: the digest of model, kind and workload; runs sharing it must agree.
    AnswerId
);

/// The canonical encoding: JSON with object keys sorted and no whitespace.
pub fn canonical_json<T: Serialize>(value: &T) -> String {
    let value = serde_json::to_value(value).expect("plans serialize to JSON");
    sort_keys(value).to_string()
}

fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: std::collections::BTreeMap<String, Value> = map.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// Whether `text` has a run identity's form (64 hex digits), as a manifest's or a results
/// folder's name does.
pub fn is_run_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// sha256 of the canonical encoding, as 64 hex digits.
pub fn digest<T: Serialize>(value: &T) -> String {
    hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
}

/// The digest of what a hostfile tells mpirun: its hosts and their options, line by line, with
/// comments, blank lines and spacing left out (so a comment edited does not make every run of
/// it a new run, and lose its nightly history).
pub fn hostfile_digest(text: &str) -> String {
    let lines: Vec<String> = crate::launch::hosts::hostfile_lines(text).map(|(_, words)| words.join(" ")).collect();
    digest(&lines.join("\n"))
}

/// What identifies a model's answer: its config and weights, not its name or folder.
fn model_material(model: Option<&ModelSource>) -> Value {
    match model {
        None => Value::Null,
        Some(m) => {
            let weights = match &m.weights {
                Weights::Checkpoint { sha256, .. } => json!({ "sha256": sha256 }),
                Weights::Seeded { seed, generator, .. } => json!({ "seeded": { "seed": seed, "generator": generator } }),
            };
            json!({ "config_sha256": m.config_sha256, "weights": weights })
        }
    }
}

/// The inputs of one run's identities.
pub struct IdentityInput<'a> {
    /// The experiment kind (hashed by its name).
    pub kind: crate::spec::schema::Kind,
    /// The model, if any.
    pub model: Option<&'a ModelSource>,
    /// The workload's parameters.
    pub workload: &'a Workload,
    /// The parallel layout.
    pub layout: &'a Layout,
    /// The communication backend.
    pub backend: crate::spec::link::Backend,
    /// The link.
    pub link: &'a crate::spec::link::Link,
    /// Threads per rank.
    pub threads_per_rank: u32,
    /// Timed repetitions.
    pub repetitions: u32,
    /// Warm-up count.
    pub warmup: u32,
    /// Where ranks run: launcher and hostfile contents' digest.
    pub placement: Value,
    /// Where each rank computes: in the run identity, not the answer's (the CPU adds nothing,
    /// so identities made before devices existed stay as they were).
    pub device: crate::spec::schema::Device,
    /// How a CUDA decode step is issued: in the run identity, not the answer's (eager adds
    /// nothing, so identities made before graphs existed stay as they were).
    pub step: crate::spec::schema::StepMode,
}

/// The answer identity: model, kind and workload only.
pub fn answer_id(input: &IdentityInput) -> AnswerId {
    AnswerId(digest(&answer_material(input)))
}

fn answer_material(input: &IdentityInput) -> Value {
    json!({ "kind": input.kind.name(), "model": model_material(input.model), "workload": input.workload })
}

/// The run identity: the answer material plus layout, backend, link, threads and repetitions.
pub fn run_id(input: &IdentityInput) -> RunId {
    let mut material = json!({
        "answer": answer_material(input),
        "layout": input.layout,
        "backend": input.backend,
        "link": input.link,
        "threads_per_rank": input.threads_per_rank,
        "repetitions": input.repetitions,
        "warmup": input.warmup,
        "placement": input.placement,
    });
    if input.device != crate::spec::schema::Device::Cpu {
        material["device"] = json!(input.device.name());
    }
    if input.step != crate::spec::schema::StepMode::Eager {
        material["step"] = json!(input.step.name());
    }
    RunId(digest(&material))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostfiles_digest_is_of_what_mpirun_reads_not_its_comments_or_spacing() {
        let plain = hostfile_digest("node1 slots=4\nnode2 slots=4\n");
        assert_eq!(hostfile_digest("# the rack by the door\nnode1   slots=4  # fast\n\n\tnode2 slots=4"), plain);
        assert_ne!(hostfile_digest("node1 slots=4\nnode2 slots=2\n"), plain, "another slot count");
        assert_ne!(hostfile_digest("node2 slots=4\nnode1 slots=4\n"), plain, "another order places ranks elsewhere");
    }

    #[test]
    fn an_identity_serialises_as_its_bare_digest_and_shows_12_hex() {
        let hex = "0123456789abcdef".repeat(4);
        let id = RunId::new(hex.clone());
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{hex}\""));
        assert_eq!(serde_json::from_str::<RunId>(&format!("\"{hex}\"")).unwrap(), id);
        assert_eq!(id.short(), "0123456789ab");
        assert_eq!(AnswerId::new("abc").short(), "abc", "a digest shorter than 12 is shown whole, not a panic");
        assert_eq!(short("ab€€€€€"), "ab€€€€€", "a cut inside a character shows the whole text, not a panic");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[{"q":1,"p":2}],"x":2}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":2,"y":[{"p":2,"q":1}]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":2,"y":[{"p":2,"q":1}]},"b":1}"#);
        assert_ne!(digest(&a), digest(&json!({"b": 2})));
    }
}
