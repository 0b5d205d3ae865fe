//! One token through a Llama-family block on plain `f32` slices (the decode step's small
//! operations): RMSNorm, grouped-query attention over the KV cache, SwiGLU's gate.

use crate::model::row::{softmax, Cache};

/// `out = x / sqrt(mean(x²) + eps) * w` over the whole row (mean accumulated in f64).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f64, out: &mut [f32]) {
    let mean = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len() as f64;
    let inv = (1.0 / (mean + eps).sqrt()) as f32;
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(w) {
        *o = w * (v * inv);
    }
}

/// RMSNorm of every head (`w.len()` values each) of `x`, in place (Qwen3's q/k norms).
pub fn rms_norm_heads(x: &mut [f32], w: &[f32], eps: f64) {
    let mut out = vec![0f32; w.len()];
    for head in x.chunks_exact_mut(w.len()) {
        rms_norm(head, w, eps, &mut out);
        head.copy_from_slice(&out);
    }
}

/// `gate[i] = silu(gate[i]) · up[i]`: SwiGLU's product, into `gate`.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// One position's queries (every query head held), keys and values (every key/value head held).
pub struct Position<'a> {
    /// The position.
    pub pos: usize,
    /// Queries, one head after another.
    pub q: &'a [f32],
    /// Keys, one head after another.
    pub k: &'a [f32],
    /// Values, one head after another.
    pub v: &'a [f32],
}

/// Grouped-query attention of one position: stores its keys and values at `pos` in `cache`
/// (`[kv_heads, max_len, head_dim]`), then writes each query head's softmax(q·k × scale)-weighted
/// sum of its key/value head's values into `ctx`; query head `h` reads key/value head `kv_of[h]`.
pub fn attend_grouped(at_pos: &Position, kv_of: &[usize], cache: &mut Cache, scale: f32, ctx: &mut [f32]) {
    let Position { pos, q, k, v } = *at_pos;
    let head_dim = q.len() / kv_of.len();
    let at = |h: usize, p: usize| (h * cache.max_len + p) * head_dim;
    for (j, (kj, vj)) in k.chunks_exact(head_dim).zip(v.chunks_exact(head_dim)).enumerate() {
        cache.k[at(j, pos)..at(j, pos) + head_dim].copy_from_slice(kj);
        cache.v[at(j, pos)..at(j, pos) + head_dim].copy_from_slice(vj);
    }
    let kernel = crate::model::matvec::active();
    let keys = pos + 1;
    let mut scores = vec![0f32; keys];
    for (h, &j) in kv_of.iter().enumerate() {
        let qh = &q[h * head_dim..(h + 1) * head_dim];
        kernel.rows(&cache.k[at(j, 0)..at(j, keys)], qh, &mut scores);
        scores.iter_mut().for_each(|s| *s *= scale);
        softmax(&mut scores);
        let out = &mut ctx[h * head_dim..(h + 1) * head_dim];
        out.fill(0.0);
        for (p, &s) in scores.iter().enumerate() {
            for (o, &x) in out.iter_mut().zip(&cache.v[at(j, p)..at(j, p) + head_dim]) {
                *o += s * x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_scales_to_unit_mean_square_times_the_gain() {
        let mut out = [0f32; 2];
        rms_norm(&[3.0, 4.0], &[1.0, 2.0], 0.0, &mut out);
        let r = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / r).abs() < 1e-6 && (out[1] - 8.0 / r).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn two_query_heads_sharing_one_kv_head_read_the_same_keys() {
        let (hd, max_len) = (2, 4);
        let (mut kc, mut vc) = (vec![0f32; hd * max_len], vec![0f32; hd * max_len]);
        let mut cache = Cache { k: &mut kc, v: &mut vc, max_len };
        let mut ctx = vec![0f32; 2 * hd];
        let first = Position { pos: 0, q: &[1.0, 0.0, 0.0, 1.0], k: &[1.0, 1.0], v: &[5.0, 7.0] };
        attend_grouped(&first, &[0, 0], &mut cache, 1.0, &mut ctx);
        // One key: every head's softmax is 1 on it, so each context is that value.
        assert_eq!(ctx, vec![5.0, 7.0, 5.0, 7.0]);
        let second = Position { pos: 1, q: &[10.0, 0.0, 0.0, 10.0], k: &[1.0, -1.0], v: &[1.0, 1.0] };
        attend_grouped(&second, &[0, 0], &mut cache, 1.0, &mut ctx);
        // Head 0 scores keys (1,1),(1,-1) at 10, 10: even; head 1 at 10, -10: the first.
        assert!((ctx[0] - 3.0).abs() < 1e-5 && (ctx[2] - 5.0).abs() < 1e-5, "{ctx:?}");
    }
}
