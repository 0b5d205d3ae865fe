//! Rotary position embeddings as transformers' Llama applies them: angles `position ×
//! inv_freq` in float32, each head's halves rotated (`x cos + rotate_half(x) sin`).

use tch::{Kind, Tensor};

/// The rotation of heads `[heads, T, head_dim]` at positions `pos..pos + T`, in place of `x`.
pub fn rotate(x: &Tensor, inv_freq: &Tensor, pos: usize) -> Tensor {
    let t = x.size()[1];
    rotate_at(x, inv_freq, &Tensor::arange_start(pos as i64, pos as i64 + t, (Kind::Float, x.device())))
}

/// The rotation of heads `[heads, T, head_dim]` at the float32 `positions` `[T]` (a device
/// tensor: the fixed-shape step's position is read, not baked in).
pub fn rotate_at(x: &Tensor, inv_freq: &Tensor, positions: &Tensor) -> Tensor {
    let (t, hd) = (x.size()[1], x.size()[2]);
    let freqs = positions.view([t, 1]) * inv_freq.view([1, hd / 2]);
    let angles = Tensor::cat(&[&freqs, &freqs], -1);
    let (cos, sin) = (angles.cos().to_kind(x.kind()), angles.sin().to_kind(x.kind()));
    let half = hd / 2;
    let rotated = Tensor::cat(&[x.narrow(2, half, half).neg(), x.narrow(2, 0, half)], -1);
    x * cos + rotated * sin
}

/// The cosines and sines of position `pos` (`head_dim / 2` each, float32 as transformers').
pub fn angles_at(inv_freq: &[f32], pos: usize) -> (Vec<f32>, Vec<f32>) {
    inv_freq.iter().map(|&f| ((pos as f32) * f).cos()).zip(inv_freq.iter().map(|&f| ((pos as f32) * f).sin())).unzip()
}

/// Rotates every head of `x` (heads of `cos.len() * 2` values one after another) in place.
pub fn rotate_row(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = cos.len();
    for head in x.chunks_exact_mut(2 * half) {
        let (a, b) = head.split_at_mut(half);
        for i in 0..half {
            let (x1, x2) = (a[i], b[i]);
            a[i] = x1 * cos[i] - x2 * sin[i];
            b[i] = x2 * cos[i] + x1 * sin[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_rotation_equals_the_tensor_rotation() {
        let inv = [1.0f32, 0.1, 0.01];
        let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        let t = rotate(&Tensor::from_slice(&x).view([2, 1, 6]), &Tensor::from_slice(&inv), 5);
        let (cos, sin) = angles_at(&inv, 5);
        let mut row = x.clone();
        rotate_row(&mut row, &cos, &sin);
        let want = Vec::<f32>::try_from(&t.contiguous().view([-1])).unwrap();
        assert!(row.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "{row:?} vs {want:?}");
        // Position 0 rotates nothing; a rotation keeps each pair's length.
        let t0 = rotate(&Tensor::from_slice(&x).view([2, 1, 6]), &Tensor::from_slice(&inv), 0);
        assert_eq!(Vec::<f32>::try_from(&t0.contiguous().view([-1])).unwrap(), x);
        let norm = |v: &[f32], i: usize| v[i] * v[i] + v[i + 3] * v[i + 3];
        assert!((norm(&row, 1) - norm(&x, 1)).abs() < 1e-5);
    }
}
