//! CUDA graphs through libtorch's `at::cuda::CUDAGraph` (harness/cuda_graph.cpp, compiled by
//! build.rs where the torch built against has CUDA and the CUDA runtime's headers are found):
//! warm work up on the graph's side stream, capture what it issues there once, replay it.
//! Without the shim every call says why it was not built.

use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, CStr};

/// Why a graph could not be made, captured or replayed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// This binary has no capture (built against a CPU-only torch or without CUDA headers).
    #[error("this parlab was built without CUDA graph capture: {0}")]
    NotBuilt(&'static str),
    /// A libtorch call threw.
    #[error("CUDA graph {call}: {message}")]
    Call {
        /// The shim's function.
        call: &'static str,
        /// What libtorch said.
        message: String,
    },
    /// The work panicked while it was being captured or warmed up.
    #[error("the step panicked on the graph's stream: {0}")]
    Panicked(String),
}

/// Why this binary has no graph capture, when it has none.
pub fn absent() -> Option<&'static str> {
    if cfg!(parlab_cuda_graph) {
        return None;
    }
    Some(option_env!("PARLAB_CUDA_GRAPH_ABSENT").unwrap_or("no libtorch found at build time"))
}

#[repr(C)]
struct Raw {
    _opaque: [u8; 0],
}

#[cfg(parlab_cuda_graph)]
extern "C" {
    fn parlab_graph_new(device: c_int, out: *mut *mut Raw) -> *mut c_char;
    fn parlab_graph_enter(g: *mut Raw) -> *mut c_char;
    fn parlab_graph_leave(g: *mut Raw) -> *mut c_char;
    fn parlab_graph_capture_begin(g: *mut Raw) -> *mut c_char;
    fn parlab_graph_capture_end(g: *mut Raw) -> *mut c_char;
    fn parlab_graph_replay(g: *mut Raw) -> *mut c_char;
    fn parlab_graph_nodes(g: *mut Raw, kernels: *mut usize, all: *mut usize) -> *mut c_char;
    fn parlab_graph_free(g: *mut Raw);
}

/// Stand-ins where the shim is not built: never called (`CudaGraph::new` fails first).
#[cfg(not(parlab_cuda_graph))]
mod absent_shim {
    use super::*;
    pub unsafe fn parlab_graph_new(_: c_int, _: *mut *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_enter(_: *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_leave(_: *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_capture_begin(_: *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_capture_end(_: *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_replay(_: *mut Raw) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_nodes(_: *mut Raw, _: *mut usize, _: *mut usize) -> *mut c_char {
        std::ptr::null_mut()
    }
    pub unsafe fn parlab_graph_free(_: *mut Raw) {}
}
#[cfg(not(parlab_cuda_graph))]
use absent_shim::*;

/// The shim's answer: Ok for a null message, else the message (freed here).
fn checked(call: &'static str, message: *mut c_char) -> Result<(), GraphError> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null answer is a NUL-terminated string the shim malloc'ed for the caller.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned();
    // SAFETY: as above; freed once, here.
    unsafe { libc::free(message.cast()) };
    Err(GraphError::Call { call, message: text })
}

/// The message of a caught panic.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// What a captured graph holds: what one replay launches without the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphNodes {
    /// Kernel nodes: the kernels an eager step would have launched one by one.
    pub kernels: u64,
    /// Every node (kernels, copies, memsets, ...).
    pub all: u64,
}

/// One CUDA graph on one device, with the side stream it is captured on.
pub struct CudaGraph {
    raw: *mut Raw,
    captured: bool,
}

impl CudaGraph {
    /// A graph on CUDA device `ordinal` (fails where this binary has no capture or no such device).
    pub fn new(ordinal: usize) -> Result<Self, GraphError> {
        if let Some(why) = absent() {
            return Err(GraphError::NotBuilt(why));
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the shim writes a graph or leaves it null.
        checked("new", unsafe { parlab_graph_new(ordinal as c_int, &mut raw) })?;
        Ok(CudaGraph { raw, captured: false })
    }

    /// Runs `work` with the graph's side stream current (libtorch issues its kernels there), the
    /// device idle before and after: the warm-up PyTorch asks for before a capture.
    pub fn on_side_stream<T>(&mut self, work: impl FnOnce() -> T) -> Result<T, GraphError> {
        // SAFETY: `raw` is the live graph this value owns.
        checked("enter", unsafe { parlab_graph_enter(self.raw) })?;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        // SAFETY: as above; leaving restores the stream entered from, on every path.
        let left = checked("leave", unsafe { parlab_graph_leave(self.raw) });
        let value = result.map_err(|p| GraphError::Panicked(panic_text(p)))?;
        left.map(|_| value)
    }

    /// Captures what `work` issues into the graph (once), returning what `work` returned: tensors
    /// it allocated live in the graph's memory and hold each replay's results.
    pub fn capture<T>(&mut self, work: impl FnOnce() -> T) -> Result<T, GraphError> {
        let raw = self.raw;
        self.on_side_stream(|| {
            // SAFETY: `raw` is live; begin and end pair on this stream.
            checked("capture_begin", unsafe { parlab_graph_capture_begin(raw) })?;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            // SAFETY: as above; the capture is ended on every path.
            let ended = checked("capture_end", unsafe { parlab_graph_capture_end(raw) });
            let value = result.map_err(|p| GraphError::Panicked(panic_text(p)))?;
            ended.map(|_| value)
        })?
        .inspect(|_| self.captured = true)
    }

    /// The captured graph's nodes, counted by type.
    pub fn nodes(&self) -> Result<GraphNodes, GraphError> {
        if !self.captured {
            return Err(GraphError::Call { call: "nodes", message: "nothing was captured".into() });
        }
        let (mut kernels, mut all) = (0usize, 0usize);
        // SAFETY: `raw` is live and holds a captured graph; the out-pointers are valid.
        checked("nodes", unsafe { parlab_graph_nodes(self.raw, &mut kernels, &mut all) })?;
        Ok(GraphNodes { kernels: kernels as u64, all: all as u64 })
    }

    /// Launches the captured work once on the current stream (the caller synchronises).
    pub fn replay(&self) -> Result<(), GraphError> {
        if !self.captured {
            return Err(GraphError::Call { call: "replay", message: "nothing was captured".into() });
        }
        // SAFETY: `raw` is live and holds a captured graph.
        checked("replay", unsafe { parlab_graph_replay(self.raw) })
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `raw` came from parlab_graph_new and is freed once.
        unsafe { parlab_graph_free(self.raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_a_graph_is_refused_with_the_reason() {
        if tch::Cuda::is_available() {
            eprintln!("skipped: this machine has a CUDA device (the GPU check covers it)");
            return;
        }
        let refused = CudaGraph::new(0);
        if let Err(e) = &refused {
            eprintln!("refused as expected: {e}");
        }
        match refused {
            Err(GraphError::NotBuilt(why)) => assert!(!why.is_empty()),
            // The shim is built and ran libtorch's CUDA code, which found no device.
            Err(GraphError::Call { call: "new", message }) => assert!(!message.is_empty()),
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_shim_answer_is_a_message_or_success() {
        assert_eq!(checked("x", std::ptr::null_mut()), Ok(()));
        // SAFETY: strdup allocates with malloc, as the shim does.
        let m = unsafe { libc::strdup(c"no device".as_ptr()) };
        assert_eq!(checked("replay", m), Err(GraphError::Call { call: "replay", message: "no device".into() }));
    }
}
