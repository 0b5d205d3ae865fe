//! Reads a Hugging Face GPT-2 `model.safetensors` through a memory map, copying out only
//! the rows and columns a rank holds (Conv1D weights are stored `[in, out]`).

use memmap2::Mmap;
use safetensors::tensor::Dtype as StDtype;
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};
use tch::{Kind, Tensor};

/// Errors reading a checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file could not be opened or mapped.
    #[error("{path}: cannot read: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The file is not a valid safetensors file.
    #[error("{path}: not a safetensors file: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A tensor is missing (with and without the `transformer.` prefix).
    #[error("{path}: no tensor `{name}` (looked for `transformer.{name}` and `{name}`)")]
    Missing {
        /// The file.
        path: PathBuf,
        /// The name looked for.
        name: String,
    },
    /// A tensor has a shape or type the model does not expect.
    #[error("{path}: tensor `{name}`: {message}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// A memory-mapped checkpoint.
pub struct Checkpoint {
    path: PathBuf,
    mmap: Mmap,
}

/// One tensor's raw little-endian bytes, shape and element type.
struct Raw<'a> {
    data: &'a [u8],
    shape: Vec<usize>,
    kind: Kind,
    elem: usize,
}

impl Checkpoint {
    /// Maps `path` (a `model.safetensors` file, or a folder holding one).
    pub fn open(path: &Path) -> Result<Self, WeightsError> {
        let path = if path.is_dir() { path.join("model.safetensors") } else { path.to_path_buf() };
        let io = |e: std::io::Error| WeightsError::Io { path: path.clone(), message: e.to_string() };
        crate::files::check_regular(&path, u64::MAX).map_err(|e| WeightsError::Io { path: path.clone(), message: e.reason() })?;
        let file = std::fs::File::open(&path).map_err(io)?;
        // SAFETY: the file is only read; parlab never writes a checkpoint in place (new ones are renamed in).
        let mmap = unsafe { Mmap::map(&file) }.map_err(io)?;
        SafeTensors::deserialize(&mmap).map_err(|e| WeightsError::Format { path: path.clone(), message: e.to_string() })?;
        Ok(Checkpoint { path, mmap })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tensors(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.mmap).expect("validated in open")
    }

    /// True when the file holds `name` (with or without the `transformer.` prefix).
    pub fn has(&self, name: &str) -> bool {
        let st = self.tensors();
        st.tensor(&format!("transformer.{name}")).is_ok() || st.tensor(name).is_ok()
    }

    fn raw(&self, name: &str) -> Result<Raw<'_>, WeightsError> {
        let st = self.tensors();
        let view = st
            .tensor(&format!("transformer.{name}"))
            .or_else(|_| st.tensor(name))
            .map_err(|_| WeightsError::Missing { path: self.path.clone(), name: name.into() })?;
        let (kind, elem) = match view.dtype() {
            StDtype::F32 => (Kind::Float, 4),
            StDtype::F16 => (Kind::Half, 2),
            StDtype::BF16 => (Kind::BFloat16, 2),
            other => return Err(self.bad(name, format!("element type {other:?}; expected F32, F16 or BF16"))),
        };
        Ok(Raw { data: view.data(), shape: view.shape().to_vec(), kind, elem })
    }

    fn bad(&self, name: &str, message: String) -> WeightsError {
        WeightsError::Shape { path: self.path.clone(), name: name.into(), message }
    }

    /// The shape of tensor `name`.
    pub fn shape(&self, name: &str) -> Result<Vec<usize>, WeightsError> {
        Ok(self.raw(name)?.shape)
    }

    /// Checks that tensor `name` has shape `want`; the error names the tensor and both shapes.
    pub fn expect_shape(&self, name: &str, want: &[usize]) -> Result<(), WeightsError> {
        let got = self.shape(name)?;
        if got == want {
            Ok(())
        } else {
            Err(self.bad(name, format!("shape {got:?}, but config.json implies {want:?}")))
        }
    }

    /// The index of the first NaN or infinite element of tensor `name`, if any.
    pub fn first_non_finite(&self, name: &str) -> Result<Option<usize>, WeightsError> {
        let raw = self.raw(name)?;
        let chunks = raw.data.chunks_exact(raw.elem);
        Ok(match raw.kind {
            Kind::Float => chunks.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite()).position(|ok| !ok),
            Kind::Half => chunks.map(|b| u16::from_le_bytes([b[0], b[1]]) & 0x7c00 != 0x7c00).position(|ok| !ok),
            _ => chunks.map(|b| u16::from_le_bytes([b[0], b[1]]) & 0x7f80 != 0x7f80).position(|ok| !ok),
        })
    }

    /// Every tensor name in the file, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tensors().names().into_iter().cloned().collect();
        names.sort();
        names
    }

    /// Fails on the first tensor holding a NaN or infinite value, naming it and the element.
    pub fn check_finite(&self) -> Result<(), WeightsError> {
        for name in self.names() {
            if let Some(i) = self.first_non_finite(&name)? {
                return Err(self.bad(&name, format!("element {i} is NaN or infinite")));
            }
        }
        Ok(())
    }

    /// Rows `[start, end)` of a 2-D tensor (or elements of a 1-D one), as f32.
    pub fn rows(&self, name: &str, start: usize, end: usize) -> Result<Tensor, WeightsError> {
        let raw = self.raw(name)?;
        let (n, width) = match raw.shape[..] {
            [n] => (n, 1),
            [n, w] => (n, w),
            _ => return Err(self.bad(name, format!("shape {:?}; expected 1 or 2 dimensions", raw.shape))),
        };
        if start > end || end > n {
            return Err(self.bad(name, format!("rows {start}..{end} asked of {n}")));
        }
        let bytes = &raw.data[start * width * raw.elem..end * width * raw.elem];
        let mut size = vec![(end - start) as i64];
        if raw.shape.len() == 2 {
            size.push(width as i64);
        }
        Ok(Tensor::from_data_size(bytes, &size, raw.kind).to_kind(Kind::Float))
    }

    /// The whole tensor, as f32.
    pub fn full(&self, name: &str) -> Result<Tensor, WeightsError> {
        let n = self.shape(name)?.first().copied().unwrap_or(0);
        self.rows(name, 0, n)
    }

    /// Columns of a 2-D tensor: the concatenation of the given `[start, end)` ranges, as f32.
    pub fn columns(&self, name: &str, ranges: &[(usize, usize)]) -> Result<Tensor, WeightsError> {
        let raw = self.raw(name)?;
        let [rows, width] = raw.shape[..] else {
            return Err(self.bad(name, format!("shape {:?}; expected 2 dimensions", raw.shape)));
        };
        if let Some(r) = ranges.iter().find(|r| r.0 > r.1 || r.1 > width) {
            return Err(self.bad(name, format!("columns {}..{} asked of {width}", r.0, r.1)));
        }
        let cols: usize = ranges.iter().map(|r| r.1 - r.0).sum();
        let mut out = Vec::with_capacity(rows * cols * raw.elem);
        for row in 0..rows {
            for &(a, b) in ranges {
                let base = row * width * raw.elem;
                out.extend_from_slice(&raw.data[base + a * raw.elem..base + b * raw.elem]);
            }
        }
        Ok(Tensor::from_data_size(&out, &[rows as i64, cols as i64], raw.kind).to_kind(Kind::Float))
    }

    /// Elements of a 1-D tensor: the concatenation of the given `[start, end)` ranges, as f32.
    pub fn elements(&self, name: &str, ranges: &[(usize, usize)]) -> Result<Tensor, WeightsError> {
        let parts = ranges.iter().map(|&(a, b)| self.rows(name, a, b)).collect::<Result<Vec<_>, _>>()?;
        Ok(Tensor::cat(&parts, 0))
    }
}

/// Reads single rows of a 2-D tensor straight from the map (the embedding lookup of a decode step).
pub struct RowReader {
    offset: usize,
    width: usize,
    rows: usize,
    elem: usize,
    kind: Kind,
}

impl Checkpoint {
    /// A reader for rows of the 2-D tensor `name`.
    pub fn row_reader(&self, name: &str) -> Result<RowReader, WeightsError> {
        let raw = self.raw(name)?;
        let [rows, width] = raw.shape[..] else {
            return Err(self.bad(name, format!("shape {:?}; expected 2 dimensions", raw.shape)));
        };
        let offset = raw.data.as_ptr() as usize - self.mmap.as_ptr() as usize;
        Ok(RowReader { offset, width, rows, elem: raw.elem, kind: raw.kind })
    }

    /// Rows `ids` of the tensor behind `reader`, stacked as an f32 `[ids.len(), width]` tensor.
    pub fn read_rows(&self, reader: &RowReader, ids: &[u32]) -> Result<Tensor, WeightsError> {
        let row_bytes = reader.width * reader.elem;
        let mut out = Vec::with_capacity(ids.len() * row_bytes);
        for &id in ids {
            let id = id as usize;
            if id >= reader.rows {
                return Err(WeightsError::Shape {
                    path: self.path.clone(),
                    name: "row".into(),
                    message: format!("row {id} asked of {}", reader.rows),
                });
            }
            let start = reader.offset + id * row_bytes;
            out.extend_from_slice(&self.mmap[start..start + row_bytes]);
        }
        Ok(Tensor::from_data_size(&out, &[ids.len() as i64, reader.width as i64], reader.kind).to_kind(Kind::Float))
    }
}
