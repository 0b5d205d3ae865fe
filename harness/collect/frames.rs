//! Records as polars frames, and the parquet results files of a run.

use super::CollectError;
use crate::manifest::{ResultFiles, ResultsProblem};
use crate::rank::figure::Figure;
use crate::rank::records::{read_records, Record};
use polars::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// File name of every raw sample of a run.
pub const SAMPLES: &str = "samples.parquet";
/// File name of a run's per-size summary.
pub const SUMMARY: &str = "summary.parquet";

/// The folder launch `launch` (0-based) of a run writes into: the results folder itself for the
/// first launch (as a run of one launch always did), `out/launch-N` for the others.
pub fn launch_dir(out: &Path, launch: u32) -> std::path::PathBuf {
    match launch {
        0 => out.to_path_buf(),
        n => out.join(format!("launch-{n}")),
    }
}

/// How many launches wrote folders in `out` (the first, then `launch-1`, `launch-2`, ... in turn).
pub fn launches_in(out: &Path) -> u32 {
    (1..).find(|&n| !launch_dir(out, n).is_dir()).unwrap_or(1)
}

/// Reads the ranks' records of every launch in `out`; an error when a launch wrote none.
///
/// Records of launch N are tagged `launch: N` and their repetitions continue after the previous
/// launches' (launch 1 of a 3-repetition run holds repetitions 3 to 5), so a repetition names
/// one launch's repetition and every per-repetition reduction keeps the launches apart.
pub fn records(out: &Path) -> Result<Vec<Record>, CollectError> {
    let mut all = Vec::new();
    let mut offset: u32 = 0;
    for launch in 0..launches_in(out) {
        let dir = launch_dir(out, launch);
        let mut records = match read_records(&dir) {
            Ok(records) if records.is_empty() => return Err(CollectError::NoRecords { dir }),
            Ok(records) => records,
            Err(cause) => return Err(CollectError::ReadRecords { dir, cause }),
        };
        // Saturating: a repetition number comes from a file a rank wrote.
        let next = offset.saturating_add(records.iter().map(|r| r.repetition.saturating_add(1)).max().unwrap_or(0));
        for r in &mut records {
            r.launch = launch;
            r.repetition = r.repetition.saturating_add(offset);
        }
        offset = next;
        all.append(&mut records);
    }
    Ok(all)
}

/// Every record as one row: rank, figure, size_bytes, repetition, iteration, seconds, launch.
pub fn samples_frame(records: &[Record]) -> PolarsResult<DataFrame> {
    DataFrame::new_infer_height(vec![
        Column::new("rank".into(), records.iter().map(|r| r.rank).collect::<Vec<u32>>()),
        Column::new("figure".into(), records.iter().map(|r| r.figure.name()).collect::<Vec<String>>()),
        Column::new("size_bytes".into(), records.iter().map(|r| r.size_bytes).collect::<Vec<u64>>()),
        Column::new("repetition".into(), records.iter().map(|r| r.repetition).collect::<Vec<u32>>()),
        Column::new("iteration".into(), records.iter().map(|r| r.iteration).collect::<Vec<u32>>()),
        Column::new("seconds".into(), records.iter().map(|r| r.seconds).collect::<Vec<f64>>()),
        Column::new("launch".into(), records.iter().map(|r| r.launch).collect::<Vec<u32>>()),
    ])
}

/// Writes `frame` as parquet to `path` through a temporary file synced and renamed into place;
/// on failure (a full disk) the temporary file is removed and `path` is left as it was.
pub fn write_parquet(frame: &mut DataFrame, path: &Path) -> Result<(), CollectError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("results");
    let tmp = path.with_file_name(format!(".{name}.tmp.{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .map_err(|cause| CollectError::CreateResults { path: tmp.clone(), cause })
        .and_then(|mut file| {
            ParquetWriter::new(&mut file).finish(frame).map_err(|cause| CollectError::WriteParquet { path: path.into(), cause })?;
            file.sync_all().map_err(|cause| CollectError::SyncResults { path: tmp.clone(), cause })
        })
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|cause| CollectError::RenameResults { path: path.into(), cause }));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The results files a manifest names that are missing or not parquet files: `(path, why)`.
pub fn unreadable_results(results: Option<&ResultFiles>, manifests: &Path) -> Vec<(std::path::PathBuf, ResultsProblem)> {
    let files = results.into_iter().flat_map(ResultFiles::paths);
    files.map(|rel| manifests.join(rel)).filter_map(|path| parquet_problem(&path).map(|why| (path, why))).collect()
}

/// Why `path` is not a readable parquet file (magic `PAR1` at both ends), if it is not.
fn parquet_problem(path: &Path) -> Option<ResultsProblem> {
    use std::io::{Read, Seek, SeekFrom};
    let size = match crate::files::check_regular(path, u64::MAX) {
        Ok(size) => size,
        Err(e) => return Some(ResultsProblem::Unreadable(e)),
    };
    let mut ends = [[0u8; 4]; 2];
    let read = std::fs::File::open(path).and_then(|mut f| {
        f.read_exact(&mut ends[0])?;
        f.seek(SeekFrom::End(-4))?;
        f.read_exact(&mut ends[1])
    });
    (size < 12 || read.is_err() || ends != [*b"PAR1"; 2]).then_some(ResultsProblem::NotParquet)
}

/// Reads a parquet file back into a frame.
pub fn read_parquet(path: &Path) -> Result<DataFrame, CollectError> {
    let file = std::fs::File::open(path).map_err(|cause| CollectError::OpenParquet { path: path.into(), cause })?;
    ParquetReader::new(file).finish().map_err(|cause| CollectError::ReadParquet { path: path.into(), cause })
}

/// Writes samples and summary into `out`; returns `manifest.results` (paths relative to `manifests`).
pub fn write_results(records: &[Record], summary: &mut DataFrame, out: &Path, manifests: &Path) -> Result<ResultFiles, CollectError> {
    let mut samples = samples_frame(records).map_err(|cause| CollectError::Frame { what: "samples", cause })?;
    write_parquet(&mut samples, &out.join(SAMPLES))?;
    write_parquet(summary, &out.join(SUMMARY))?;
    let rel = |name: &str| {
        let path = out.join(name);
        path.strip_prefix(manifests).unwrap_or(&path).to_path_buf()
    };
    Ok(ResultFiles { samples: rel(SAMPLES), summary: rel(SUMMARY) })
}

/// Per (repetition, iteration) of one figure and size: the slowest rank's time and the spread (max - min).
pub fn per_iteration(records: &[Record], figure: Figure, size: u64) -> (Vec<f64>, Vec<f64>) {
    let mut groups: BTreeMap<(u32, u32), (f64, f64)> = BTreeMap::new();
    for r in records.iter().filter(|r| r.figure == figure && r.size_bytes == size) {
        let e = groups.entry((r.repetition, r.iteration)).or_insert((f64::NEG_INFINITY, f64::INFINITY));
        e.0 = e.0.max(r.seconds);
        e.1 = e.1.min(r.seconds);
    }
    groups.values().map(|(max, min)| (*max, max - min)).unzip()
}

/// The distinct (figure, size) pairs of `records`, in first-seen order.
pub fn figures_and_sizes(records: &[Record]) -> Vec<(Figure, u64)> {
    let mut seen = Vec::new();
    for r in records {
        let key = (r.figure, r.size_bytes);
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::records::RecordSink;

    /// Writes two repetitions of one sample per rank (ranks 0 and 1) into `dir`, `seconds` each.
    fn write_launch(dir: &Path, seconds: f64) {
        std::fs::create_dir_all(dir).unwrap();
        for rank in 0..2 {
            let mut sink = RecordSink::open(dir, rank).unwrap();
            for rep in 0..2 {
                sink.push(Figure::DecodeStep, 0, rep, 0, seconds).unwrap();
            }
        }
    }

    #[test]
    fn every_launch_is_read_tagged_and_its_repetitions_kept_apart() {
        let out = tempfile::tempdir().unwrap();
        assert_eq!(launches_in(out.path()), 1);
        for (n, seconds) in [(0, 1.0), (1, 2.0), (2, 3.0)] {
            write_launch(&launch_dir(out.path(), n), seconds);
        }
        assert_eq!(launches_in(out.path()), 3);
        let recs = records(out.path()).unwrap();
        assert_eq!(recs.len(), 3 * 2 * 2);
        for r in &recs {
            assert_eq!((r.launch, r.seconds), (r.repetition / 2, f64::from(r.launch + 1)), "{r:?}");
        }
        let (slowest, _) = per_iteration(&recs, Figure::DecodeStep, 0);
        assert_eq!(slowest, vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0], "one sample per launch's repetition");
        std::fs::create_dir_all(launch_dir(out.path(), 3)).unwrap();
        match records(out.path()) {
            Err(CollectError::NoRecords { dir }) => assert_eq!(dir, launch_dir(out.path(), 3), "the launch that wrote nothing"),
            other => panic!("a launch that wrote nothing is an error, got {other:?}"),
        }
    }
}
