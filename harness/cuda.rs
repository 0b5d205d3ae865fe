//! The few CUDA runtime calls libtorch does not expose through tch: making a GPU current (NCCL
//! joins the current device), CUDA events (device-side timing, the way PyTorch's
//! `torch.cuda.Event` times a call) and an asynchronous copy into a buffer made beforehand
//! (tch's `copy_` always waits; its non-blocking `to` makes a new destination each call). The
//! runtime is the one libtorch_cuda loaded, found by `dlsym` in the process's global scope;
//! nothing CUDA is needed to build.

use std::ffi::{c_char, c_float, c_int, c_void, CStr};
use std::sync::OnceLock;

/// A CUDA runtime call that failed or could not be found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// The runtime is not loaded (no libtorch_cuda in this process).
    #[error("the CUDA runtime has no {0} here (libtorch_cuda not linked?)")]
    Missing(&'static str),
    /// A call returned an error code.
    #[error("{call} failed: CUDA error {code}")]
    Call {
        /// The call.
        call: &'static str,
        /// Its `cudaError_t`.
        code: i32,
    },
}

type Status = c_int;
type Event = *mut c_void;

struct Runtime {
    set_device: unsafe extern "C" fn(c_int) -> Status,
    event_create: unsafe extern "C" fn(*mut Event) -> Status,
    event_record: unsafe extern "C" fn(Event, *mut c_void) -> Status,
    event_synchronize: unsafe extern "C" fn(Event) -> Status,
    event_elapsed: unsafe extern "C" fn(*mut c_float, Event, Event) -> Status,
    event_destroy: unsafe extern "C" fn(Event) -> Status,
    memcpy_async: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> Status,
}

fn runtime() -> Result<&'static Runtime, CudaError> {
    static RUNTIME: OnceLock<Result<Runtime, CudaError>> = OnceLock::new();
    RUNTIME.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The address of `name` in the global scope as a function of type `F`.
///
/// # Safety
/// `F` must be `name`'s C signature.
unsafe fn global<F: Copy>(name: &'static CStr) -> Result<F, CudaError> {
    let address = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
    if address.is_null() {
        return Err(CudaError::Missing(name.to_str().unwrap_or("a CUDA symbol")));
    }
    Ok(std::mem::transmute_copy::<*mut c_void, F>(&address))
}

fn load() -> Result<Runtime, CudaError> {
    // SAFETY: each type is the CUDA runtime's documented C signature of its symbol.
    unsafe {
        Ok(Runtime {
            set_device: global(c"cudaSetDevice")?,
            event_create: global(c"cudaEventCreate")?,
            event_record: global(c"cudaEventRecord")?,
            event_synchronize: global(c"cudaEventSynchronize")?,
            event_elapsed: global(c"cudaEventElapsedTime")?,
            event_destroy: global(c"cudaEventDestroy")?,
            memcpy_async: global(c"cudaMemcpyAsync")?,
        })
    }
}

fn check(call: &'static str, code: Status) -> Result<(), CudaError> {
    if code == 0 {
        Ok(())
    } else {
        Err(CudaError::Call { call, code })
    }
}

/// Makes GPU `gpu` current for this thread.
pub fn set_device(gpu: usize) -> Result<(), CudaError> {
    let rt = runtime()?;
    // SAFETY: a plain call with an int.
    check("cudaSetDevice", unsafe { (rt.set_device)(gpu as c_int) })
}

/// The PCI address of visible GPU `gpu` (`0000:19:00.0`): the same physical GPU gives the same
/// address in every process of its host, whatever `CUDA_VISIBLE_DEVICES` numbers it there.
pub fn pci_bus_id(gpu: usize) -> Result<String, CudaError> {
    type BusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status;
    runtime()?;
    // SAFETY: the runtime's documented signature; looked up apart from [`Runtime`], so that the
    // rest works where it were missing.
    let bus_id: BusId = unsafe { global(c"cudaDeviceGetPCIBusId")? };
    let mut buf = [0 as c_char; 32];
    // SAFETY: the runtime writes at most `buf.len()` bytes, NUL-terminated, into the buffer.
    check("cudaDeviceGetPCIBusId", unsafe { bus_id(buf.as_mut_ptr(), buf.len() as c_int, gpu as c_int) })?;
    // SAFETY: NUL-terminated by the runtime; the last byte is kept NUL whatever it wrote.
    buf[buf.len() - 1] = 0;
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// Which way an asynchronous copy goes (the runtime's `cudaMemcpyKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    /// From host memory to the GPU (`cudaMemcpyHostToDevice`).
    HostToDevice = 1,
    /// From the GPU to host memory (`cudaMemcpyDeviceToHost`).
    DeviceToHost = 2,
}

/// Queues a copy of `source`'s bytes into `destination` on the legacy default stream (the one
/// libtorch and [`EventTimer`] use), as `dst.copy_(src, non_blocking=True)` does in PyTorch,
/// without allocating. Host memory should be pinned for the copy to be asynchronous.
///
/// # Safety
/// Both tensors must be contiguous, hold at least `bytes` bytes on the sides `direction`
/// names, and stay alive and unwritten until the stream has run the copy.
pub unsafe fn copy_async(destination: &tch::Tensor, source: &tch::Tensor, bytes: usize, direction: CopyDirection) -> Result<(), CudaError> {
    let rt = runtime()?;
    let (to, from) = (destination.data_ptr(), source.data_ptr().cast_const());
    check("cudaMemcpyAsync", (rt.memcpy_async)(to, from, bytes, direction as c_int, std::ptr::null_mut()))
}

/// A pair of CUDA events around work queued on the current device's default stream (the
/// stream libtorch's kernels and copies use): the device's own time for that work.
pub struct EventTimer {
    start: Event,
    end: Event,
}

impl EventTimer {
    /// Two events on the current device.
    pub fn new() -> Result<Self, CudaError> {
        let rt = runtime()?;
        let mut timer = EventTimer { start: std::ptr::null_mut(), end: std::ptr::null_mut() };
        // SAFETY: valid out-pointers into the timer, which destroys whichever event was made
        // if the other one fails (and never one it does not own: it is not copied out of).
        check("cudaEventCreate", unsafe { (rt.event_create)(&mut timer.start) })?;
        check("cudaEventCreate", unsafe { (rt.event_create)(&mut timer.end) })?;
        Ok(timer)
    }

    /// Seconds between the two events around `work` (which queues device work and may block).
    pub fn time(&self, work: impl FnOnce()) -> Result<f64, CudaError> {
        let rt = runtime()?;
        let stream = std::ptr::null_mut();
        // SAFETY: events made by this timer; the null stream is the legacy default stream.
        unsafe {
            check("cudaEventRecord", (rt.event_record)(self.start, stream))?;
            work();
            check("cudaEventRecord", (rt.event_record)(self.end, stream))?;
            check("cudaEventSynchronize", (rt.event_synchronize)(self.end))?;
            let mut ms: c_float = 0.0;
            check("cudaEventElapsedTime", (rt.event_elapsed)(&mut ms, self.start, self.end))?;
            Ok(f64::from(ms) * 1e-3)
        }
    }
}

impl Drop for EventTimer {
    fn drop(&mut self) {
        if let Ok(rt) = runtime() {
            for event in [self.start, self.end].into_iter().filter(|e| !e.is_null()) {
                // SAFETY: an event this timer made, destroyed once.
                unsafe { (rt.event_destroy)(event) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_the_runtime_says_so_instead_of_crashing() {
        if tch::Cuda::device_count() > 0 {
            assert_eq!(set_device(0), Ok(()));
            let timer = EventTimer::new().unwrap();
            assert!(timer.time(|| {}).unwrap() >= 0.0);
            let address = pci_bus_id(0).unwrap();
            assert!(address.contains(':') && address.len() >= 7, "{address}");
            return;
        }
        assert!(pci_bus_id(0).is_err(), "no GPU has a PCI address here");
        match set_device(0) {
            Err(CudaError::Call { call: "cudaSetDevice", code }) => assert_ne!(code, 0),
            Err(CudaError::Missing(name)) => {
                let linked = crate::gates::LINKED_TORCH_CUDA;
                assert!(!linked, "{name}")
            }
            other => panic!("cudaSetDevice(0) without a GPU: {other:?}"),
        }
        println!("no CUDA device here: the CUDA event timer is not exercised on this machine");
    }
}
