// The NEON matvec's body, included by `matvec.rs` twice: in `mod arm` over
// `std::arch::aarch64` (compiled for aarch64 with NEON enabled) and in the tests' `mod
// arm_emulated` over a plain-Rust stand-in for the same intrinsics, so its indexing runs
// everywhere. It names the intrinsics unqualified; the including module brings them in.

/// NEON: four rows at a time (a quarter apart) with two accumulators each, 8 floats a step, then
/// the scalar tail.
#[inline(always)]
fn rows_neon_body(w: &[f32], x: &[f32], y: &mut [f32]) {
    let n = x.len();
    // SAFETY: every load reads 4 floats below body <= n of `x` and of rows `r + i * q < y.len()` of `w`.
    unsafe {
        let body = n / 8 * 8;
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let q = super::quarter(y.len());
        for r in 0..q {
            let rows = super::rows_in(r, q, y.len());
            let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
            for c in (0..body).step_by(8) {
                let (x0, x1) = (vld1q_f32(xp.add(c)), vld1q_f32(xp.add(c + 4)));
                for (i, a) in acc.iter_mut().enumerate().take(rows) {
                    let row = wp.add((r + i * q) * n + c);
                    a[0] = vfmaq_f32(a[0], vld1q_f32(row), x0);
                    a[1] = vfmaq_f32(a[1], vld1q_f32(row.add(4)), x1);
                }
            }
            for (i, a) in acc.iter().enumerate().take(rows) {
                let row = &w[(r + i * q) * n..(r + i * q + 1) * n];
                let tail: f32 = (body..n).map(|k| row[k] * x[k]).sum();
                y[r + i * q] = vaddvq_f32(vaddq_f32(a[0], a[1])) + tail;
            }
        }
    }
}
