//! Where and in what precision a model part computes: one value a rank chooses once and passes
//! down to the weights, the KV cache and every activation.

use tch::{Device, Kind, Tensor};

/// A part's device and element type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placement {
    /// The libtorch device holding weights, cache and activations.
    pub device: Device,
    /// The element type of weights, cache and activations.
    pub kind: Kind,
    /// Whether one row on the host in float32 takes parlab's row kernels (else libtorch
    /// computes every step with the fused operations a GPU takes; false lets the CPU check
    /// that path against the row kernels).
    pub row_kernels: bool,
}

impl Placement {
    /// The host, in float32: one row takes parlab's row kernels, several take libtorch's.
    pub fn cpu() -> Self {
        Placement { device: Device::Cpu, kind: Kind::Float, row_kernels: true }
    }

    /// The host in element type `kind`: float32 takes the row kernels for one row; half
    /// precision is computed by libtorch's operations (the row kernels are float32).
    pub fn cpu_in(kind: Kind) -> Self {
        Placement { kind, row_kernels: kind == Kind::Float, ..Self::cpu() }
    }

    /// The host in float32 computing every step the way a GPU does (libtorch's fused operations):
    /// the GPU's code path, checkable where there is no GPU.
    pub fn cpu_as_gpu() -> Self {
        Placement { row_kernels: false, ..Self::cpu() }
    }

    /// CUDA device `ordinal` in element type `kind`.
    pub fn cuda(ordinal: usize, kind: Kind) -> Self {
        Placement { device: Device::Cuda(ordinal), kind, row_kernels: false }
    }

    /// True where parlab's row kernels apply (host memory, float32); elsewhere libtorch computes every step.
    pub fn rows_on_host(&self) -> bool {
        self.row_kernels && self.device == Device::Cpu && self.kind == Kind::Float
    }

    /// True on a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self.device, Device::Cuda(_))
    }

    /// `t` on this device in this element type (itself when it already is).
    pub fn place(&self, t: Tensor) -> Tensor {
        moved(t, self.device, self.kind)
    }

    /// Waits for the device's queued work (a no-op on the CPU), so a clock read after it times the work.
    pub fn synchronize(&self) {
        synchronize(self.device);
    }

    /// Bytes per element.
    pub fn element_bytes(&self) -> u64 {
        self.kind.elt_size_in_bytes() as u64
    }

    /// `cpu float32`, `cuda:0 bfloat16`: the placement in words, for messages.
    pub fn describe(&self) -> String {
        let device = match self.device {
            Device::Cuda(n) => format!("cuda:{n}"),
            _ => "cpu".to_string(),
        };
        let kind = match self.kind {
            Kind::Float => "float32".to_string(),
            Kind::BFloat16 => "bfloat16".to_string(),
            Kind::Half => "float16".to_string(),
            other => format!("{other:?}").to_lowercase(),
        };
        format!("{device} {kind}")
    }
}

/// `t` on `like`'s device in `like`'s element type (itself when it already is).
pub fn like(t: Tensor, like: &Tensor) -> Tensor {
    moved(t, like.device(), like.kind())
}

/// A host float32 copy of `t` (for MPI buffers, logits and comparisons); `t` itself when it is one.
pub fn on_host(t: &Tensor) -> Tensor {
    moved(t.shallow_clone(), Device::Cpu, Kind::Float)
}

/// Waits for `device`'s queued work (a no-op on the CPU).
pub fn synchronize(device: Device) {
    if let Device::Cuda(ordinal) = device {
        tch::Cuda::synchronize(ordinal as i64);
    }
}

/// `t` on `device` in `kind`: itself when it already is, else moved and cast once.
fn moved(t: Tensor, device: Device, kind: Kind) -> Tensor {
    if t.device() == device && t.kind() == kind {
        return t;
    }
    t.to_device(device).to_kind(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_placement_leaves_host_float_tensors_alone_and_converts_others() {
        let p = Placement::cpu();
        assert!(p.rows_on_host() && !p.is_cuda());
        let t = Tensor::from_slice(&[1.5f32, -2.0]);
        let same = p.place(t.shallow_clone());
        assert_eq!(same.data_ptr(), t.data_ptr(), "a tensor already placed is not copied");
        let half = Placement { device: Device::Cpu, kind: Kind::BFloat16, row_kernels: true };
        assert!(!half.rows_on_host());
        let h = half.place(t.shallow_clone());
        assert_eq!(h.kind(), Kind::BFloat16);
        assert_eq!(Vec::<f32>::try_from(&on_host(&h)).unwrap(), vec![1.5, -2.0]);
        assert_eq!(half.element_bytes(), 2);
        assert_eq!(p.describe(), "cpu float32");
        assert_eq!(Placement::cuda(1, Kind::BFloat16).describe(), "cuda:1 bfloat16");
    }
}
