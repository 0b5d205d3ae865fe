//! Counts the values a checkpoint folder stores by reading safetensors headers (8-byte
//! little-endian length, then JSON), and explains why the count differs from the formula:
//! non-parameter buffers, a tied head stored twice, a second copy of the weights.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Errors reading a header.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The path is not a regular file (a folder, a FIFO, missing where an index names it).
    #[error("{path}: {why}; a checkpoint's safetensors files must be regular files")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The header is not valid safetensors.
    #[error("{path}: not a safetensors file ({message})")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Headers larger than this are refused (the format's own limit is 100 MB).
const MAX_HEADER: u64 = 100 << 20;

/// Tensor names and element counts of one safetensors file.
pub fn read_header(path: &Path) -> Result<BTreeMap<String, u64>, HeaderError> {
    let io = |e: std::io::Error| HeaderError::Io { path: path.into(), message: e.to_string() };
    let bad = |m: String| HeaderError::Format { path: path.into(), message: m };
    // Checked by type before it is opened: opening a FIFO would wait for a writer.
    crate::files::check_regular(path, u64::MAX).map_err(|e| match e {
        crate::files::FileError::Io { cause, .. } if cause.kind() != std::io::ErrorKind::NotFound => io(cause),
        e => HeaderError::NotAFile { path: path.into(), why: e.reason() },
    })?;
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad("shorter than 8 bytes".into()),
        _ => io(e),
    })?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER {
        return Err(bad(format!("header length {n} is implausible")));
    }
    let mut buf = vec![0u8; n as usize];
    f.read_exact(&mut buf).map_err(|_| bad("header is truncated".into()))?;
    let json: Value = serde_json::from_slice(&buf).map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let obj = json.as_object().ok_or_else(|| bad("header is not a JSON object".into()))?;
    let data_len = f.metadata().map_err(io)?.len().saturating_sub(8 + n);
    let mut out = BTreeMap::new();
    for (name, t) in obj.iter().filter(|(k, _)| *k != "__metadata__") {
        let shape = t.get("shape").and_then(Value::as_array).ok_or_else(|| bad(format!("tensor {name} has no shape")))?;
        let count = values_of(shape).map_err(|m| bad(format!("tensor {name}: {m}")))?;
        check_data(t, count, data_len).map_err(|m| bad(format!("tensor {name}: {m}")))?;
        out.insert(name.clone(), count);
    }
    Ok(out)
}

/// Bits of one value of a safetensors dtype, None for a name the format does not define (the
/// list of safetensors 0.8, whose loader refuses any other name).
fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" | "F8_E4M3FNUZ" | "F8_E5M2FNUZ" => 8,
        "U16" | "I16" | "F16" | "BF16" => 16,
        "U32" | "I32" | "F32" => 32,
        "U64" | "I64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// Checks a tensor's dtype and `data_offsets` against its `count` values and the `data_len`
/// bytes after the header, as safetensors' loader does: a dtype it defines, values of fewer bits
/// than a byte ending on a byte, exactly their bytes between the offsets (the loader also checks
/// that tensors neither overlap nor leave gaps, which this count does not need).
fn check_data(t: &Value, count: u64, data_len: u64) -> Result<(), String> {
    let dtype = t.get("dtype").and_then(Value::as_str).ok_or("no dtype")?;
    let bits = dtype_bits(dtype).ok_or_else(|| format!("dtype {dtype:?} is not one safetensors defines"))?;
    let offsets = t.get("data_offsets").and_then(Value::as_array).filter(|o| o.len() == 2).ok_or("no data_offsets [begin, end]")?;
    let (Some(begin), Some(end)) = (offsets[0].as_u64(), offsets[1].as_u64()) else {
        return Err("data_offsets are not byte counts".into());
    };
    if end < begin {
        return Err(format!("data_offsets [{begin}, {end}] end before they begin"));
    }
    // In 128 bits: 2^58 float64 values are 2^61 bytes, whose 2^64 bits a u64 cannot hold.
    let want_bits = u128::from(count) * u128::from(bits);
    if want_bits % 8 != 0 {
        return Err(format!("its {count} {dtype} values are {want_bits} bits, which do not end on a byte"));
    }
    let want = u64::try_from(want_bits / 8).map_err(|_| "its bytes pass 2^64")?;
    if end - begin != want {
        return Err(format!("data_offsets [{begin}, {end}] hold {} bytes, its {count} {dtype} values {want}", end - begin));
    }
    if end > data_len {
        return Err(format!("data_offsets end at byte {end}, past the {data_len} bytes of data the file holds"));
    }
    Ok(())
}

/// The values a tensor of `shape` holds: every dimension a count, their product within 2^63.
fn values_of(shape: &[Value]) -> Result<u64, String> {
    let mut count: u64 = 1;
    for d in shape {
        let n = d.as_u64().ok_or_else(|| format!("shape entry {d} is not a count"))?;
        count = count.checked_mul(n).filter(|&c| c <= i64::MAX as u64).ok_or_else(|| {
            let dims: Vec<String> = shape.iter().map(Value::to_string).collect();
            format!("shape [{}] holds more than 2^63 values", dims.join(", "))
        })?;
    }
    Ok(count)
}

/// One reason the checkpoint's count differs from the formula.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    /// Values this reason accounts for (stored minus formula).
    pub values: i64,
    /// The reason, in words.
    pub reason: String,
}

/// The formula against a checkpoint folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointCount {
    /// The files that form the checkpoint.
    pub files: Vec<PathBuf>,
    /// Values in those files.
    pub stored_values: u64,
    /// The formula's parameters.
    pub formula_params: u64,
    /// Reasons for the difference, each with the values it accounts for.
    pub explained: Vec<Explained>,
    /// What no reason accounts for (0 when the formula is exact).
    pub unexplained: i64,
}

fn safetensors_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    files
}

/// The files `model.safetensors.index.json` names, or `model.safetensors`, or every file.
fn checkpoint_files(dir: &Path, all: &[PathBuf]) -> Vec<PathBuf> {
    let index = std::fs::read_to_string(dir.join("model.safetensors.index.json")).ok();
    let indexed = index.and_then(|t| serde_json::from_str::<Value>(&t).ok()).and_then(|v| {
        let map = v.get("weight_map")?.as_object()?.clone();
        let mut files: Vec<PathBuf> = map.values().filter_map(Value::as_str).map(|f| dir.join(f)).collect();
        files.sort();
        files.dedup();
        Some(files)
    });
    if let Some(files) = indexed {
        return files;
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return vec![single];
    }
    all.to_vec()
}

fn is_buffer(name: &str) -> bool {
    let last_two = |suffix: &str| name == suffix || name.ends_with(&format!(".{suffix}"));
    last_two("attn.bias") || last_two("attn.masked_bias") || name.ends_with("rotary_emb.inv_freq")
}

/// Counts the checkpoint in `dir` against `formula_params`, explaining the difference;
/// None when the folder holds no safetensors file.
pub fn count_checkpoint(dir: &Path, formula_params: u64, tied: bool) -> Result<Option<CheckpointCount>, HeaderError> {
    let all = safetensors_in(dir);
    if all.is_empty() {
        return Ok(None);
    }
    let files = checkpoint_files(dir, &all);
    let mut tensors = BTreeMap::new();
    for f in &files {
        tensors.extend(read_header(f)?);
    }
    let stored = tensors.values().try_fold(0u64, |sum, &n| sum.checked_add(n).filter(|&s| s <= i64::MAX as u64)).ok_or_else(|| {
        HeaderError::Format { path: dir.to_path_buf(), message: "its tensors hold more than 2^63 values together".into() }
    })?;
    let mut explained = Vec::new();
    let buffers: Vec<(&String, &u64)> = tensors.iter().filter(|(n, _)| is_buffer(n)).collect();
    if !buffers.is_empty() {
        let values: u64 = buffers.iter().map(|(_, c)| **c).sum();
        explained.push(Explained {
            values: values as i64,
            reason: format!(
                "{} non-parameter buffers stored in the file (causal masks or rotary tables), e.g. {}",
                buffers.len(),
                buffers[0].0
            ),
        });
    }
    if tied {
        if let Some(head) = tensors.iter().find(|(n, _)| n.ends_with("lm_head.weight")).map(|(_, c)| *c) {
            explained
                .push(Explained { values: head as i64, reason: "the tied output head is stored a second time as lm_head.weight".into() });
        }
    }
    for extra in all.iter().filter(|f| !files.contains(f)) {
        let values: u64 = read_header(extra)?.values().sum();
        let name = extra.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        explained.push(Explained {
            values: 0,
            reason: format!("{name} ({values} values) is a second copy outside the checkpoint, not counted"),
        });
    }
    let accounted: i64 = explained.iter().map(|e| e.values).sum();
    let unexplained = stored as i64 - formula_params as i64 - accounted;
    Ok(Some(CheckpointCount { files, stored_values: stored, formula_params, explained, unexplained }))
}

/// Writes a safetensors file of zero-filled float32 tensors (for tests and fixtures); the
/// data is a sparse hole, so a full-size header of a large model costs no disk space.
pub fn write_zeros(path: &Path, tensors: &[(&str, Vec<u64>)]) -> std::io::Result<()> {
    use std::io::Write;
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * 4;
        header.insert(name.to_string(), serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}));
        offset += bytes;
    }
    let mut text = Value::Object(header).to_string().into_bytes();
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut f = std::fs::File::create(path)?;
    f.write_all(&(text.len() as u64).to_le_bytes())?;
    f.write_all(&text)?;
    f.set_len(8 + text.len() as u64 + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `header` (JSON) and `data` bytes as a safetensors file.
    fn raw(path: &Path, header: &str, data: usize) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.resize(bytes.len() + data, 0);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_header_whose_offsets_the_data_cannot_hold_is_refused_naming_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("model.safetensors");
        raw(&f, r#"{"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}"#, 24);
        assert_eq!(read_header(&f).unwrap().get("w"), Some(&6));
        raw(&f, r#"{"w": {"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 3]}}"#, 24);
        assert_eq!(read_header(&f).unwrap().get("w"), Some(&6), "six 4-bit values in 3 bytes");
        raw(&f, r#"{"w": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}}"#, 24);
        assert_eq!(read_header(&f).unwrap().get("w"), Some(&4), "four 6-bit values in 3 bytes");
        for (header, says) in [
            (
                r#"{"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 24]}}"#,
                "tensor w: data_offsets [0, 24] hold 24 bytes, its 6 F16 values 12",
            ),
            (
                r#"{"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}}"#,
                "tensor w: data_offsets end at byte 32, past the 24 bytes",
            ),
            (
                r#"{"w": {"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 48]}}"#,
                "tensor w: data_offsets [0, 48] hold 48 bytes, its 6 F4 values 3",
            ),
            (
                r#"{"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}"#,
                "tensor w: its 3 F4 values are 12 bits, which do not end on a byte",
            ),
            (r#"{"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}"#, "tensor w: dtype \"F33\" is not one safetensors defines"),
            (
                r#"{"w": {"dtype": "F32", "shape": [6], "data_offsets": [8, 32]}}"#,
                "tensor w: data_offsets end at byte 32, past the 24 bytes",
            ),
            (r#"{"w": {"dtype": "F32", "shape": [2, 3]}}"#, "tensor w: no data_offsets"),
        ] {
            raw(&f, header, 24);
            let e = read_header(&f).unwrap_err().to_string();
            assert!(e.contains("not a safetensors file") && e.contains(says), "{header}: {e}");
        }
    }

    #[test]
    fn a_checkpoint_entry_that_is_not_a_regular_file_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("model.safetensors");
        std::fs::create_dir(&folder).unwrap();
        let e = count_checkpoint(dir.path(), 1, false).unwrap_err();
        assert!(matches!(e, HeaderError::NotAFile { .. }), "{e:?}");
        assert!(e.to_string().contains("not a regular file (a folder)"), "{e}");
        std::fs::remove_dir(&folder).unwrap();
        // A FIFO is refused by type: opening it would wait for a writer that never comes.
        let fifo = std::ffi::CString::new(folder.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = count_checkpoint(dir.path(), 1, false).unwrap_err();
        assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        std::fs::remove_file(&folder).unwrap();
        // A shard the index names but the folder lacks.
        raw(&dir.path().join("a.safetensors"), r#"{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}"#, 4);
        let index = r#"{"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}}"#;
        std::fs::write(dir.path().join("model.safetensors.index.json"), index).unwrap();
        let e = count_checkpoint(dir.path(), 1, false).unwrap_err();
        assert!(matches!(e, HeaderError::NotAFile { .. }) && e.to_string().contains("b.safetensors"), "{e}");
    }

    #[test]
    fn counts_gpt2_masks_as_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("model.safetensors");
        write_zeros(&f, &[("h.0.attn.c_attn.bias", vec![12]), ("h.0.attn.bias", vec![1, 1, 8, 8]), ("wte.weight", vec![10, 4])]).unwrap();
        let c = count_checkpoint(dir.path(), 52, true).unwrap().unwrap();
        assert_eq!(c.stored_values, 12 + 64 + 40);
        assert_eq!(c.explained[0].values, 64);
        assert_eq!(c.unexplained, 0);
    }

    #[test]
    fn tied_head_stored_twice_and_second_copies() {
        let dir = tempfile::tempdir().unwrap();
        write_zeros(&dir.path().join("model.safetensors"), &[("model.embed_tokens.weight", vec![10, 4]), ("lm_head.weight", vec![10, 4])])
            .unwrap();
        write_zeros(&dir.path().join("consolidated.safetensors"), &[("tok_embeddings.weight", vec![10, 4])]).unwrap();
        let c = count_checkpoint(dir.path(), 40, true).unwrap().unwrap();
        assert_eq!(c.stored_values, 80);
        assert_eq!(c.unexplained, 0);
        assert!(c.explained.iter().any(|e| e.reason.contains("consolidated.safetensors (40 values) is a second copy")));
        let untied = count_checkpoint(dir.path(), 40, false).unwrap().unwrap();
        assert_eq!(untied.unexplained, 40);
    }

    #[test]
    fn refuses_a_file_that_is_not_safetensors() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.safetensors");
        std::fs::write(&f, b"\x05\0\0\0\0\0\0\0nope!").unwrap();
        assert!(read_header(&f).unwrap_err().to_string().contains("not JSON"));
    }

    /// Writes a safetensors file whose header is `header` and whose data is 4 bytes.
    fn with_header(path: &Path, header: &str) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.extend([0u8; 4]);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn refuses_a_shape_that_is_not_counts_or_wraps_past_64_bits() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("model.safetensors");
        for (shape, says) in [
            ("[-1, 5]", "tensor wte: shape entry -1 is not a count"),
            ("[2.5]", "tensor wte: shape entry 2.5 is not a count"),
            ("[1099511627776, 1099511627776]", "tensor wte: shape [1099511627776, 1099511627776] holds more than 2^63 values"),
        ] {
            with_header(&f, &format!(r#"{{"wte": {{"dtype": "F32", "shape": {shape}, "data_offsets": [0, 4]}}}}"#));
            let err = read_header(&f).unwrap_err();
            assert!(matches!(err, HeaderError::Format { .. }) && err.to_string().ends_with(&format!("({says})")), "{err}");
        }
        let half = 1u64 << 62;
        let t = |n: &str| format!(r#""{n}": {{"dtype": "F32", "shape": [{half}], "data_offsets": [0, 4]}}"#);
        with_header(&f, &format!("{{{}, {}}}", t("a"), t("b")));
        // Each tensor's bytes are checked before the sum: 2^62 float32 values pass 2^64 bytes.
        let err = count_checkpoint(dir.path(), 1, false).unwrap_err();
        assert!(err.to_string().ends_with("(tensor a: its bytes pass 2^64)"), "{err}");
        // 2^58 float64 values are 2^61 bytes (2^64 bits): counted as bytes, not refused as too many.
        with_header(&f, &format!(r#"{{"a": {{"dtype": "F64", "shape": [{}], "data_offsets": [0, 4]}}}}"#, 1u64 << 58));
        let err = count_checkpoint(dir.path(), 1, false).unwrap_err();
        assert!(err.to_string().contains("its 288230376151711744 F64 values 2305843009213693952"), "{err}");
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir(&f).unwrap();
        assert!(matches!(read_header(&f).unwrap_err(), HeaderError::NotAFile { .. }), "a folder is not read as a short file");
    }
}
