//! Records a rank writes: one JSON line per timed sample, in `records-rank<N>.jsonl`.

use super::figure::Figure;
use crate::launch::Moment;
use serde::{Deserialize, Serialize};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// One timed sample of one figure on one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The rank that measured it.
    pub rank: u32,
    /// What was timed or counted.
    pub figure: Figure,
    /// Message or buffer size in bytes (0 when not applicable).
    pub size_bytes: u64,
    /// Repetition of the workload (0-based).
    pub repetition: u32,
    /// Iteration or step within the repetition (0-based).
    pub iteration: u32,
    /// Seconds.
    pub seconds: f64,
    /// The launch that measured it (0-based; a rank writes none, the collector tags launches
    /// after the first as it reads their folders).
    #[serde(default, skip_serializing_if = "is_first_launch")]
    pub launch: u32,
}

fn is_first_launch(n: &u32) -> bool {
    *n == 0
}

/// The records file of `rank` in `out`.
pub fn records_path(out: &Path, rank: u32) -> PathBuf {
    out.join(format!("records-rank{rank}.jsonl"))
}

/// Appends records to a rank's file, flushing on `flush` and on drop.
pub struct RecordSink {
    rank: u32,
    writer: BufWriter<std::fs::File>,
}

impl RecordSink {
    /// Opens (appending) the records file of `rank` in `out`.
    pub fn open(out: &Path, rank: u32) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(records_path(out, rank))?;
        Ok(RecordSink { rank, writer: BufWriter::new(file) })
    }

    /// Writes one sample.
    pub fn push(&mut self, figure: Figure, size_bytes: u64, repetition: u32, iteration: u32, seconds: f64) -> std::io::Result<()> {
        let record = Record { rank: self.rank, figure, size_bytes, repetition, iteration, seconds, launch: 0 };
        serde_json::to_writer(&mut self.writer, &record)?;
        self.writer.write_all(b"\n")
    }

    /// Flushes buffered records to disk.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

/// Reads every `records-rank*.jsonl` in `out`, in rank order.
pub fn read_records(out: &Path) -> std::io::Result<Vec<Record>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("records-rank") && n.ends_with(".jsonl")))
        .collect();
    files.sort();
    let mut records = Vec::new();
    for file in files {
        for (i, line) in std::fs::read_to_string(&file)?.lines().enumerate() {
            let record = serde_json::from_str(line)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}:{}: {e}", file.display(), i + 1)))?;
            records.push(record);
        }
    }
    Ok(records)
}

/// Appends `moment unix_seconds` to `out/timeline.txt` on rank 0 (parlab's own overhead, read by `ci/bench.sh`).
pub fn mark(out: &Path, rank: u32, moment: Moment) {
    if rank == 0 {
        crate::launch::write_timeline(out, moment);
    }
}
