//! Deterministic random numbers in pure Rust (splitmix64 + Box-Muller), so a seed
//! always means the same bytes on every machine.

/// splitmix64: a 64-bit generator with a one-word state (Steele, Lea and Flood).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
    spare: Option<f64>,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed, spare: None }
    }

    /// A generator for the stream named `name` under `seed` (independent of the order streams are drawn in).
    pub fn for_stream(seed: u64, name: &str) -> Self {
        Self::new(seed ^ fnv1a64(name.as_bytes()).rotate_left(17))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in (0, 1] (53 random bits).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal number (Box-Muller; the second value of each pair is kept for the next call).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let r = (-2.0 * self.uniform().ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * self.uniform();
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }

    /// A whole number in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// FNV-1a, 64 bits: turns a stream name into a seed offset.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_normals_look_normal() {
        let mut a = SplitMix64::for_stream(7, "wte");
        let mut b = SplitMix64::for_stream(7, "wte");
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(SplitMix64::for_stream(7, "wpe").next_u64(), SplitMix64::for_stream(7, "wte").next_u64());
        let xs: Vec<f64> = (0..20000).map(|_| a.normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
    }
}
