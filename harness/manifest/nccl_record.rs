//! What a rank's NCCL was and chose, as the manifest carries it (`Launch::nccl`) and each rank
//! writes it (`nccl-rank<N>.json`). Plain data: `nccl` takes the record and reads NCCL's log
//! into [`Transports`] (`nccl::transport`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rank's NCCL: where it ran, which library, what it was told and what it chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankRecord {
    /// The rank.
    pub rank: u32,
    /// The CUDA device it joined on.
    pub gpu: u32,
    /// The library file.
    pub library: String,
    /// `ncclGetVersion`, as text.
    pub version: String,
    /// Every `NCCL_*` variable in the rank's environment when it joined (`KEY=VALUE`).
    pub variables: Vec<String>,
    /// What NCCL logged (empty where the user sent the log elsewhere).
    pub transports: Transports,
    /// Why the transports are not known, where they are not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unlogged: String,
}

/// The transports of one rank's connections, as NCCL logged them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transports {
    /// NCCL's version line (`NCCL version 2.28.9+cuda13.0`), if logged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Connections per transport (`P2P/CUMEM/read` → 24).
    pub connections: BTreeMap<String, u32>,
    /// The `NCCL_*` settings NCCL reported taking from the environment (`NCCL_P2P_DISABLE set by environment to 1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(unlogged: &str, transports: Transports) -> RankRecord {
        RankRecord {
            rank: 1,
            gpu: 3,
            library: "/usr/lib/libnccl.so.2".into(),
            version: "2.28.9".into(),
            variables: vec!["NCCL_P2P_DISABLE=1".into()],
            transports,
            unlogged: unlogged.into(),
        }
    }

    #[test]
    fn the_json_keeps_its_field_names_and_order() {
        let t = Transports {
            version: "NCCL version 2.28.9+cuda13.0".into(),
            connections: BTreeMap::from([("SHM/direct/direct".to_string(), 2), ("NET/Socket/0".to_string(), 1)]),
            environment: vec!["NCCL_P2P_DISABLE set by environment to 1".into()],
        };
        let full = record("", t);
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(
            text,
            r#"{"rank":1,"gpu":3,"library":"/usr/lib/libnccl.so.2","version":"2.28.9","variables":["NCCL_P2P_DISABLE=1"],"transports":{"version":"NCCL version 2.28.9+cuda13.0","connections":{"NET/Socket/0":1,"SHM/direct/direct":2},"environment":["NCCL_P2P_DISABLE set by environment to 1"]}}"#
        );
        let unlogged = serde_json::to_string(&record("NCCL_DEBUG_FILE unset: no log", Transports::default())).unwrap();
        assert_eq!(
            unlogged,
            r#"{"rank":1,"gpu":3,"library":"/usr/lib/libnccl.so.2","version":"2.28.9","variables":["NCCL_P2P_DISABLE=1"],"transports":{"connections":{}},"unlogged":"NCCL_DEBUG_FILE unset: no log"}"#
        );
        assert_eq!(serde_json::from_str::<RankRecord>(&text).unwrap(), full);
    }
}
