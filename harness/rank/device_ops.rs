//! Operations on a rank's own GPU, timed the way the collectives are (figures `<op>` per call
//! and `<op>@block` back to back): copies between host memory and the GPU (the host-device
//! link, pinned and pageable, both directions), and a read and a copy inside the GPU's memory
//! (its roofline; the read's α is the floor a kernel launch and synchronisation cost).
//!
//! - **Per call** (figure `<op>`): barrier, then one operation between two CUDA events on the
//!   stream it runs on, the end event waited for: the device's own time for the call, as
//!   PyTorch's `torch.cuda.Event` pair around one call measures it (the method of the anchors
//!   in `../shared/device/`), without the host's synchronisation cost.
//! - **Back to back** (figure `<op>@block`, [`super::collectives::blocks_of`] blocks): the
//!   block's operations are queued without waiting (a pinned host buffer lets a copy to the
//!   GPU be asynchronous), the device synchronised once, and the block's time divided by its
//!   calls: the link's or the memory's own time per call, as CUDA events around back-to-back
//!   calls measure it. A pageable copy is synchronous either way (the driver stages it through
//!   a pinned bounce buffer); pinned copies both ways are queued without waiting.
//!
//! Every copy lands in a destination made before the clock starts, as the anchors' `dst.copy_
//! (src, non_blocking=pinned)` does: pinned copies through [`crate::cuda::copy_async`] (tch's
//! non-blocking `to` would allocate a destination inside the event window), pageable ones
//! through `copy_`. Pinned host buffers come from libtorch's `pin_memory`; the GPU is local
//! rank mod the GPUs libtorch sees. After the calls and after each block the result is
//! checked: its sum (float64, exact for the small integers written; a read's within float32
//! summation) against the values written, in a destination zeroed (outside the clock) before
//! the last timed call and before each block.

use super::collectives::{blocks_of, value, Sweeps};
use super::figure::Figure;
use crate::cuda::{CopyDirection, EventTimer};
use crate::spec::Op;
use mpi::topology::SimpleCommunicator;
use mpi::traits::CommunicatorCollectives as _;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// One op's buffers at one size: the host buffer, the device buffer, and the last result.
struct DeviceCase {
    op: Op,
    gpu: Device,
    host: Tensor,
    device: Tensor,
    result: Tensor,
    bytes: u64,
    /// The float64 sum of the values written (what every result must hold).
    want: f64,
}

impl DeviceCase {
    fn new(op: Op, size: u64, rank: u32, gpu: Device) -> Self {
        let count = ((size / 4) as usize).max(1);
        let values: Vec<f32> = (0..count).map(|i| value(rank, i)).collect();
        let want = values.iter().map(|v| f64::from(*v)).sum();
        let host = Tensor::from_slice(&values);
        let host = if matches!(op, Op::HostToDevice | Op::DeviceToHost) { host.pin_memory(gpu) } else { host };
        let device = host.to_device(gpu);
        let result = match op {
            Op::DeviceToHost => host.zeros_like().pin_memory(gpu),
            Op::DeviceToHostPageable => host.zeros_like(),
            Op::DeviceRead => device.shallow_clone(),
            _ => device.zeros_like(),
        };
        DeviceCase { op, gpu, host, device, result, bytes: (count * 4) as u64, want }
    }

    /// Queues one operation into its result. Pinned copies are queued without waiting, into
    /// the buffer made once (copies queued back to back on one stream land in order, so the
    /// last result is the last copy's); pageable copies wait for themselves (the driver stages
    /// them through a bounce buffer), as `copy_` does.
    fn call(&mut self) -> anyhow::Result<()> {
        match self.op {
            Op::HostToDevice => self.queue_copy(CopyDirection::HostToDevice)?,
            Op::DeviceToHost => self.queue_copy(CopyDirection::DeviceToHost)?,
            Op::DeviceCopy | Op::DeviceToHostPageable => self.result.copy_(&self.device),
            Op::HostToDevicePageable => self.result.copy_(&self.host),
            _ => self.result = self.device.sum(Kind::Float),
        }
        Ok(())
    }

    /// Queues one pinned copy into the result: the host buffer to the GPU, or the GPU's back.
    fn queue_copy(&self, direction: CopyDirection) -> anyhow::Result<()> {
        let source = match direction {
            CopyDirection::HostToDevice => &self.host,
            CopyDirection::DeviceToHost => &self.device,
        };
        // SAFETY: both buffers are contiguous float32 of `bytes` bytes, made by `new` on the
        // sides `direction` names, and owned by this case, which waits for its copies (the end
        // event, or a block's synchronisation) before it is read or dropped.
        unsafe { crate::cuda::copy_async(&self.result, source, self.bytes as usize, direction)? };
        Ok(())
    }

    fn synchronize(&self) {
        crate::model::placement::synchronize(self.gpu);
    }

    /// Zeroes the destination and waits for it (outside any clock), so the next check sees
    /// what the calls after it wrote, not what an earlier one left.
    fn clear(&mut self) {
        if self.op != Op::DeviceRead {
            let _ = self.result.zero_();
        }
        self.synchronize();
    }

    /// Seconds of one operation between two CUDA events (the end event waited for, so a copy
    /// to pinned host memory has landed before its result is read).
    fn timed_call(&mut self, timer: &EventTimer) -> anyhow::Result<f64> {
        let mut called = Ok(());
        let seconds = timer.time(|| called = self.call())?;
        called.map(|()| seconds)
    }

    /// Fails when the last result does not hold what was sent (a read: within float32 summation),
    /// or when a pinned copy to the host landed in pageable memory (it would time the pageable
    /// path under the pinned name).
    fn check(&self, rank: u32, when: &str) -> anyhow::Result<()> {
        if self.op == Op::DeviceToHost && !self.result.is_pinned(self.gpu) {
            anyhow::bail!("{} of {} B ({when}): rank {rank}: the copy landed in pageable host memory", self.op.name(), self.bytes);
        }
        let got = self.result.sum(Kind::Double).double_value(&[]);
        let tolerance = if self.op == Op::DeviceRead { 1e-4 * self.want } else { 0.0 };
        if (got - self.want).abs() > tolerance || got.is_nan() {
            anyhow::bail!("wrong result: {} of {} B ({when}): rank {rank}: sum {got}, want {}", self.op.name(), self.bytes, self.want);
        }
        Ok(())
    }
}

/// Times `op` at every size of the sweep on this rank's GPU, recording into the sweeps' records.
pub fn sweep(s: &mut Sweeps, op: Op, world: &SimpleCommunicator, rank: u32) -> anyhow::Result<()> {
    let (params, repetition) = (s.params, s.repetition);
    let iterations = params.iterations;
    let ordinal = super::device::gpu_ordinal(s.plan)?;
    crate::cuda::set_device(ordinal)?;
    let (gpu, timer) = (Device::Cuda(ordinal), EventTimer::new()?);
    for &size in &params.sizes {
        let mut case = DeviceCase::new(op, size, rank, gpu);
        for _ in 0..s.plan.warmup {
            case.timed_call(&timer)?;
        }
        for iteration in 0..iterations {
            if iteration + 1 == iterations {
                case.clear();
            }
            world.barrier();
            s.mark_first_timed(rank);
            let seconds = case.timed_call(&timer)?;
            s.sink.push(Figure::Op(op), case.bytes, repetition, iteration, seconds)?;
        }
        case.check(rank, "per call")?;
        let (blocks, calls) = blocks_of(iterations);
        for block in 0..blocks {
            case.clear();
            world.barrier();
            let start = Instant::now();
            for _ in 0..calls {
                case.call()?;
            }
            case.synchronize();
            let seconds = start.elapsed().as_secs_f64();
            case.check(rank, &format!("back-to-back block {block}"))?;
            s.sink.push(Figure::OpBlock(op), case.bytes, repetition, block, seconds / f64::from(calls))?;
        }
    }
    Ok(())
}
