//! One token through GPT-2 on plain `f32` slices: the decode step's small operations (layer
//! norm, attention of one query over the KV cache, residual adds) without a libtorch call each.
//!
//! A decode step of GPT-2 small streams 494 MB of weights through 49 matvecs and does some
//! 300 small operations beside them; as libtorch operators those cost a few microseconds of
//! dispatch each (2.5 ms a step measured here, against 18 ms of matvec). Written as loops over
//! slices they cost microseconds in all. Prefill (many rows) stays on libtorch's matmul.

use super::matvec::Kernel;
use tch::{Kind, Tensor};

/// The f32 elements of a contiguous CPU tensor.
pub fn f32s(t: &Tensor) -> &[f32] {
    assert!(t.kind() == Kind::Float && t.is_contiguous() && t.device() == tch::Device::Cpu, "expected a contiguous f32 host tensor");
    // SAFETY: a contiguous f32 tensor holds numel f32 values at data_ptr, alive as long as `t`.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) }
}

/// The f32 elements of a contiguous CPU tensor, writable.
pub fn f32s_mut(t: &mut Tensor) -> &mut [f32] {
    assert!(t.kind() == Kind::Float && t.is_contiguous() && t.device() == tch::Device::Cpu, "expected a contiguous f32 host tensor");
    // SAFETY: as `f32s`; `&mut Tensor` makes this the only view handed out through `t`.
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel()) }
}

/// `out = (x - mean) / sqrt(var + eps) * w + b` over the whole row (biased variance, as
/// `torch.nn.LayerNorm`); mean and variance accumulated in f64.
pub fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f64, out: &mut [f32]) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = x.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for (((o, &v), &w), &b) in out.iter_mut().zip(x).zip(w).zip(b) {
        *o = ((f64::from(v) - mean) * inv) as f32 * w + b;
    }
}

/// `h += a + b`, element by element (a residual add of a reduced output and its bias).
pub fn add_residual(h: &mut [f32], a: &[f32], b: &[f32]) {
    for ((h, &a), &b) in h.iter_mut().zip(a).zip(b) {
        *h += a + b;
    }
}

/// Where one sequence's keys and values live: `[heads, max_len, head_dim]`, filled to `len`.
pub struct Cache<'a> {
    /// Keys.
    pub k: &'a mut [f32],
    /// Values.
    pub v: &'a mut [f32],
    /// Positions the cache holds room for.
    pub max_len: usize,
}

/// Attention of one query position `pos` (whose q, k, v are the three `heads × head_dim`
/// blocks of `qkv`) over positions `0..=pos`: stores k and v at `pos` in `cache`, then writes
/// each head's softmax(q·k × scale)-weighted sum of values into `ctx` (`heads × head_dim`).
/// Compiled for the vector width of the matvec kernel this process uses.
pub fn attend(qkv: &[f32], cache: &mut Cache, pos: usize, head_dim: usize, scale: f32, ctx: &mut [f32]) {
    attend_with(super::matvec::active(), qkv, cache, pos, head_dim, scale, ctx)
}

/// [`attend`] compiled for `kernel`'s vector width (the portable build where this CPU lacks it).
fn attend_with(kernel: Kernel, qkv: &[f32], cache: &mut Cache, pos: usize, head_dim: usize, scale: f32, ctx: &mut [f32]) {
    match kernel {
        _ if !kernel.supported() => attend_body(Kernel::Portable, qkv, cache, pos, head_dim, scale, ctx),
        // SAFETY: the arm above took every kernel whose CPU features this machine lacks.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { attend_avx512(kernel, qkv, cache, pos, head_dim, scale, ctx) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { attend_avx2(kernel, qkv, cache, pos, head_dim, scale, ctx) },
        _ => attend_body(kernel, qkv, cache, pos, head_dim, scale, ctx),
    }
}

/// [`attend`] compiled for AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn attend_avx512(kernel: Kernel, qkv: &[f32], cache: &mut Cache, pos: usize, head_dim: usize, scale: f32, ctx: &mut [f32]) {
    attend_body(kernel, qkv, cache, pos, head_dim, scale, ctx)
}

/// [`attend`] compiled for AVX2 with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attend_avx2(kernel: Kernel, qkv: &[f32], cache: &mut Cache, pos: usize, head_dim: usize, scale: f32, ctx: &mut [f32]) {
    attend_body(kernel, qkv, cache, pos, head_dim, scale, ctx)
}

#[inline(always)]
fn attend_body(kernel: Kernel, qkv: &[f32], cache: &mut Cache, pos: usize, head_dim: usize, scale: f32, ctx: &mut [f32]) {
    let width = qkv.len() / 3;
    let heads = width / head_dim;
    let (q, kv) = qkv.split_at(width);
    let (k, v) = kv.split_at(width);
    let keys = pos + 1;
    let mut scores = vec![0f32; keys];
    for h in 0..heads {
        let at = |p: usize| (h * cache.max_len + p) * head_dim;
        cache.k[at(pos)..at(pos) + head_dim].copy_from_slice(&k[h * head_dim..(h + 1) * head_dim]);
        cache.v[at(pos)..at(pos) + head_dim].copy_from_slice(&v[h * head_dim..(h + 1) * head_dim]);
        let qh = &q[h * head_dim..(h + 1) * head_dim];
        // The keys of head `h` are `keys` consecutive rows: their dot products with q are a matvec.
        kernel.rows(&cache.k[at(0)..at(keys)], qh, &mut scores);
        scores.iter_mut().for_each(|s| *s *= scale);
        softmax(&mut scores);
        let out = &mut ctx[h * head_dim..(h + 1) * head_dim];
        out.fill(0.0);
        for (p, &s) in scores.iter().enumerate() {
            for (o, &x) in out.iter_mut().zip(&cache.v[at(p)..at(p) + head_dim]) {
                *o += s * x;
            }
        }
    }
}

/// GPT-2's `gelu_new` in place: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, with tanh from
/// [`exp_fast`] so that the loop vectorises (libtorch's operator cost 30 µs a call here).
pub fn gelu_tanh(v: &mut [f32]) {
    gelu_with(super::matvec::active(), v)
}

/// [`gelu_tanh`] compiled for `kernel`'s vector width (the portable build where this CPU lacks it).
fn gelu_with(kernel: Kernel, v: &mut [f32]) {
    match kernel {
        _ if !kernel.supported() => gelu_body(v),
        // SAFETY: the arm above took every kernel whose CPU features this machine lacks.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => unsafe { gelu_avx512(v) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { gelu_avx2(v) },
        _ => gelu_body(v),
    }
}

/// [`gelu_tanh`] compiled for AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn gelu_avx512(v: &mut [f32]) {
    gelu_body(v)
}

/// [`gelu_tanh`] compiled for AVX2 with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gelu_avx2(v: &mut [f32]) {
    gelu_body(v)
}

#[inline(always)]
fn gelu_body(v: &mut [f32]) {
    const C: f32 = 0.797_884_6; // √(2/π)
    for x in v.iter_mut() {
        let u = C * (*x + 0.044_715 * *x * *x * *x);
        // tanh(u) = 1 - 2 / (exp(2u) + 1), with 2u clamped where tanh is ±1 in f32.
        let t = 1.0 - 2.0 / (exp_fast((2.0 * u).clamp(-30.0, 30.0)) + 1.0);
        *x = 0.5 * *x * (1.0 + t);
    }
}

/// `e^x` for |x| ≤ 87 within a few ulp, branch-free so that loops of it vectorise: `2^n e^r`
/// with `n` the nearest integer to `x log2 e`, `r = x - n ln 2` (ln 2 in two parts, Cody and
/// Waite) and `e^r` its Taylor polynomial of degree 7 (|r| ≤ 0.35).
#[inline(always)]
pub fn exp_fast(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let n = (x * std::f32::consts::LOG2_E).round();
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// In-place softmax: subtracts the largest score before exponentiating.
#[inline(always)]
pub fn softmax(s: &mut [f32]) {
    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in s.iter_mut() {
        *v /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(v: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v).view(shape)
    }

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
        }
    }

    fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn layer_norm_matches_libtorch() {
        let (x, w, b) = (seeded(77, 1), seeded(77, 2), seeded(77, 3));
        let mut out = vec![0f32; 77];
        layer_norm(&x, &w, &b, 1e-5, &mut out);
        let want = tensor(&x, &[1, 77]).layer_norm([77], Some(&tensor(&w, &[77])), Some(&tensor(&b, &[77])), 1e-5, false);
        close(&out, f32s(&want.contiguous()), 1e-5);
    }

    #[test]
    fn attention_of_one_query_matches_libtorch_over_the_whole_cache() {
        let (heads, hd, max_len, pos) = (3usize, 13usize, 9usize, 6usize);
        let (k0, v0) = (seeded(heads * max_len * hd, 4), seeded(heads * max_len * hd, 5));
        let qkv = seeded(3 * heads * hd, 6);
        let mut ctx = vec![0f32; heads * hd];
        let (mut k, mut v) = (k0.clone(), v0.clone());
        for kernel in Kernel::supported_here() {
            (k, v) = (k0.clone(), v0.clone());
            attend_with(kernel, &qkv, &mut Cache { k: &mut k, v: &mut v, max_len }, pos, hd, 0.25, &mut ctx);
            let mut again = vec![0f32; heads * hd];
            attend_with(Kernel::Portable, &qkv, &mut Cache { k: &mut k0.clone(), v: &mut v0.clone(), max_len }, pos, hd, 0.25, &mut again);
            close(&ctx, &again, 1e-5);
        }
        let (kt, vt) = (tensor(&k, &[heads as i64, max_len as i64, hd as i64]), tensor(&v, &[heads as i64, max_len as i64, hd as i64]));
        let new_k = tensor(&qkv[heads * hd..2 * heads * hd], &[heads as i64, hd as i64]);
        assert!(kt.select(1, pos as i64).equal(&new_k), "the new key is stored at its position");
        let q = tensor(&qkv[..heads * hd], &[heads as i64, 1, hd as i64]);
        let (keys, values) = (kt.narrow(1, 0, pos as i64 + 1), vt.narrow(1, 0, pos as i64 + 1));
        let probs = (q.matmul(&keys.transpose(1, 2)) * 0.25).softmax(-1, Kind::Float);
        let want = probs.matmul(&values).contiguous().view([-1]);
        close(&ctx, f32s(&want), 1e-5);
    }

    #[test]
    fn fast_exp_and_gelu_match_the_library_functions() {
        for i in -870..=870 {
            let x = i as f32 / 10.0;
            let (got, want) = (exp_fast(x), x.exp());
            assert!((got - want).abs() <= 4.0 * f32::EPSILON * want, "exp({x}) = {got}, want {want}");
        }
        let xs: Vec<f32> = (-400..=400).map(|i| i as f32 / 40.0).chain([0.0, -0.0, 1e-8, -50.0, 50.0]).collect();
        let want = Tensor::from_slice(&xs).gelu("tanh");
        for kernel in Kernel::supported_here() {
            let mut got = xs.clone();
            gelu_with(kernel, &mut got);
            close(&got, f32s(&want), 1e-6);
        }
    }

    #[test]
    fn residual_add_adds_both() {
        let mut h = vec![1.0, 2.0, 3.0];
        add_residual(&mut h, &[0.5, 0.5, 0.5], &[1.0, 0.0, -1.0]);
        assert_eq!(h, [2.5, 2.5, 2.5]);
    }
}
