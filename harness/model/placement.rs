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
}

impl Placement {
    /// The host, in float32: one row takes parlab's row kernels, several take libtorch's.
    pub fn cpu() -> Self {
        Placement { device: Device::Cpu, kind: Kind::Float }
    }

    /// CUDA device `ordinal` in element type `kind`.
    pub fn cuda(ordinal: usize, kind: Kind) -> Self {
        Placement { device: Device::Cuda(ordinal), kind }
    }

    /// True where parlab's row kernels apply (host memory, float32); elsewhere libtorch computes every step.
    pub fn rows_on_host(&self) -> bool {
        self.device == Device::Cpu && self.kind == Kind::Float
    }

    /// True on a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self.device, Device::Cuda(_))
    }

    /// `t` on this device in this element type (itself when it already is).
    pub fn place(&self, t: Tensor) -> Tensor {
        if t.device() == self.device && t.kind() == self.kind {
            return t;
        }
        t.to_device(self.device).to_kind(self.kind)
    }

    /// Waits for the device's queued work (a no-op on the CPU), so a clock read after it times the work.
    pub fn synchronize(&self) {
        if let Device::Cuda(ordinal) = self.device {
            tch::Cuda::synchronize(ordinal as i64);
        }
    }

    /// Bytes per element.
    pub fn element_bytes(&self) -> u64 {
        self.kind.elt_size_in_bytes() as u64
    }

    /// `cpu` or `cuda:N`, with the element type: what the register shows as having run.
    pub fn describe(&self) -> String {
        let device = match self.device {
            Device::Cuda(n) => format!("cuda:{n}"),
            _ => "cpu".to_string(),
        };
        format!("{device} {:?}", self.kind).to_lowercase()
    }
}

/// A host float32 copy of `t` (for MPI buffers, logits and comparisons); `t` itself when it is one.
pub fn on_host(t: &Tensor) -> Tensor {
    if t.device() == Device::Cpu && t.kind() == Kind::Float {
        return t.shallow_clone();
    }
    t.to_device(Device::Cpu).to_kind(Kind::Float)
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
        let half = Placement { device: Device::Cpu, kind: Kind::BFloat16 };
        assert!(!half.rows_on_host());
        let h = half.place(t.shallow_clone());
        assert_eq!(h.kind(), Kind::BFloat16);
        assert_eq!(Vec::<f32>::try_from(&on_host(&h)).unwrap(), vec![1.5, -2.0]);
        assert_eq!(half.element_bytes(), 2);
        assert_eq!(p.describe(), "cpu float");
    }
}
