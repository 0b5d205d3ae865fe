//! NCCL's C API, loaded at run time with `dlopen("libnccl.so.2")`: the library torch itself
//! loads (libtorch_cuda depends on it, so where parlab links libtorch_cuda the same copy is
//! found by its soname), with no NCCL header or library needed to build parlab.
//!
//! Why not `cudarc`'s `nccl` module: its loader does not try `libnccl.so.2` (the only name the
//! pip wheels and most distributions install without a development package) and its symbol
//! set is chosen at build time by a CUDA version feature, while this machine's build must run
//! on whatever CUDA the GPU machine's torch brings. The fifteen calls parlab makes are small.

use super::NcclError;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// `ncclResult_t`: 0 is success.
pub type NcclResult = c_int;
/// `ncclComm_t`: an opaque communicator.
pub type RawComm = *mut c_void;
/// `cudaStream_t`; null is the legacy default stream (the one libtorch uses unless told).
pub type Stream = *mut c_void;

/// `ncclUniqueId`: 128 opaque bytes rank 0 makes and every rank must receive.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The bytes.
    pub internal: [c_char; 128],
}

/// `ncclDataType_t` values parlab uses.
pub mod dtype {
    /// `ncclFloat32`.
    pub const FLOAT32: std::ffi::c_int = 7;
}

/// `ncclRedOp_t` `ncclSum`.
pub const SUM: c_int = 0;

type Collective = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, Stream) -> NcclResult;
type AllGather = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, Stream) -> NcclResult;
type PointToPoint = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, Stream) -> NcclResult;
type Group = unsafe extern "C" fn() -> NcclResult;
type OnComm = unsafe extern "C" fn(RawComm) -> NcclResult;

/// The NCCL entry points parlab calls, and where the library was found.
pub struct Library {
    /// The file the library was loaded from (`dladdr`), or the name asked for.
    pub path: String,
    /// `ncclGetVersion`'s code (e.g. 22809 for 2.28.9).
    pub version_code: i32,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> NcclResult,
    pub(super) comm_destroy: OnComm,
    pub(super) comm_abort: OnComm,
    error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    pub(super) all_reduce: Collective,
    pub(super) reduce_scatter: Collective,
    /// `ncclBroadcast(send, recv, count, type, root, comm, stream)`: same shape as [`Collective`].
    pub(super) broadcast: Collective,
    pub(super) all_gather: AllGather,
    /// `ncclSend(buf, count, type, peer, comm, stream)` (the buffer is only read).
    pub(super) send: PointToPoint,
    pub(super) recv: PointToPoint,
    pub(super) group_start: Group,
    pub(super) group_end: Group,
}

/// The names tried, in order: the soname torch links, then the development name.
const NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// The process's NCCL, loaded once (the error is kept and returned on every call).
pub fn get() -> Result<&'static Library, NcclError> {
    static LIBRARY: OnceLock<Result<Library, NcclError>> = OnceLock::new();
    LIBRARY.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Library, NcclError> {
    let mut failures = Vec::new();
    for name in NAMES {
        match open(name) {
            Ok(handle) => return Library::from_handle(handle, name),
            Err(why) => failures.push(format!("{name}: {why}")),
        }
    }
    Err(NcclError::NotLoadable(failures.join("; ")))
}

/// Why `dlopen` of a library name failed: the loader's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OpenError {
    /// The name holds a NUL byte.
    #[error("{0}")]
    BadName(String),
    /// The loader refused it (its `dlerror` text).
    #[error("{0}")]
    Loader(String),
}

fn open(name: &str) -> Result<*mut c_void, OpenError> {
    let c_name = CString::new(name).map_err(|e| OpenError::BadName(e.to_string()))?;
    // SAFETY: dlopen with a valid C string; the handle is kept for the process's life.
    let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(OpenError::Loader(last_dl_error()));
    }
    Ok(handle)
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call on this thread.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
    }
}

/// The address of `symbol` in `handle`, as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the C signature of `symbol`.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &str) -> Result<F, NcclError> {
    let c_name = CString::new(name).map_err(|_| NcclError::MissingSymbol(name.into()))?;
    let address = libc::dlsym(handle, c_name.as_ptr());
    if address.is_null() {
        return Err(NcclError::MissingSymbol(name.into()));
    }
    Ok(std::mem::transmute_copy::<*mut c_void, F>(&address))
}

impl Library {
    fn from_handle(handle: *mut c_void, name: &str) -> Result<Self, NcclError> {
        // SAFETY: each type below is the documented C signature of its symbol (nccl.h, 2.x).
        unsafe {
            let get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult = symbol(handle, "ncclGetVersion")?;
            let mut version_code = 0;
            let library = Library {
                path: loaded_from(get_version as *const c_void).unwrap_or_else(|| name.to_string()),
                version_code: 0,
                get_unique_id: symbol(handle, "ncclGetUniqueId")?,
                comm_init_rank: symbol(handle, "ncclCommInitRank")?,
                comm_destroy: symbol(handle, "ncclCommDestroy")?,
                comm_abort: symbol(handle, "ncclCommAbort")?,
                error_string: symbol(handle, "ncclGetErrorString")?,
                all_reduce: symbol(handle, "ncclAllReduce")?,
                reduce_scatter: symbol(handle, "ncclReduceScatter")?,
                broadcast: symbol(handle, "ncclBroadcast")?,
                all_gather: symbol(handle, "ncclAllGather")?,
                send: symbol(handle, "ncclSend")?,
                recv: symbol(handle, "ncclRecv")?,
                group_start: symbol(handle, "ncclGroupStart")?,
                group_end: symbol(handle, "ncclGroupEnd")?,
            };
            library.check("ncclGetVersion", get_version(&mut version_code))?;
            Ok(Library { version_code, ..library })
        }
    }

    /// The version as NCCL writes it (`2.28.9`).
    pub fn version(&self) -> String {
        version_text(self.version_code)
    }

    /// `Ok` for success, else the call's name, code and NCCL's own message.
    pub fn check(&self, call: &'static str, code: NcclResult) -> Result<(), NcclError> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static C string for any code.
        let message = unsafe { CStr::from_ptr((self.error_string)(code)) }.to_string_lossy().into_owned();
        Err(NcclError::Call { call, code, message })
    }

    /// A fresh unique id (rank 0 makes it; every rank must use the same one).
    pub fn unique_id(&self) -> Result<UniqueId, NcclError> {
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: `id` is a valid out-pointer.
        self.check("ncclGetUniqueId", unsafe { (self.get_unique_id)(&mut id) })?;
        Ok(id)
    }

    /// `ncclCommInitRank` on the current CUDA device; blocks until every rank has joined.
    pub fn init_rank(&self, ranks: u32, id: UniqueId, rank: u32) -> Result<RawComm, NcclError> {
        let mut comm: RawComm = std::ptr::null_mut();
        // SAFETY: `comm` is a valid out-pointer; the id is passed by value as the C API takes it.
        self.check("ncclCommInitRank", unsafe { (self.comm_init_rank)(&mut comm, ranks as c_int, id, rank as c_int) })?;
        Ok(comm)
    }
}

/// NCCL's version code as text: `major*10000 + minor*100 + patch` since 2.9, `*1000 + *100` before.
pub fn version_text(code: i32) -> String {
    if code >= 10_000 {
        format!("{}.{}.{}", code / 10_000, code % 10_000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// The file that holds `address` (`dladdr`), if the loader knows it.
fn loaded_from(address: *const c_void) -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address inside a loaded object.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_read_as_nccl_writes_them() {
        assert_eq!(version_text(22809), "2.28.9");
        assert_eq!(version_text(21803), "2.18.3");
        assert_eq!(version_text(2708), "2.7.8");
    }
}
