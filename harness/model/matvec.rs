//! The decode step's matrix-vector products: `y = W x (+ b)` with `W` stored `[out, in]`,
//! streamed once row by row at memory bandwidth (libtorch's MKL `sgemv` reaches about half of
//! it on AMD machines; see ci/bench.sh `bench_decode`). Rows are split over the intra-op threads.
//!
//! One kernel runs per process, chosen at first use: the best this CPU supports (AVX-512,
//! then AVX2+FMA on x86_64; NEON on aarch64; else a portable kernel the compiler vectorises),
//! or the one `PARLAB_MATVEC_KERNEL` names (`avx512`, `avx2`, `neon`, `portable`), refused
//! with an error when unknown or unsupported here. [`active`] says which ran.

use super::row::f32s;
use tch::Tensor;

/// The environment variable that forces one kernel.
pub const KERNEL_ENV: &str = "PARLAB_MATVEC_KERNEL";

/// A matvec kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// x86_64 AVX-512F: 16 floats a vector, four rows share each load of `x`.
    Avx512,
    /// x86_64 AVX2 with FMA: 8 floats a vector, four rows with two accumulators each.
    Avx2,
    /// aarch64 NEON (Advanced SIMD): 4 floats a vector, four rows with two accumulators each.
    Neon,
    /// Plain Rust over fixed-width chunks with several accumulators, vectorised by the compiler.
    Portable,
}

crate::named!(Kernel { Avx512 => "avx512", Avx2 => "avx2", Neon => "neon", Portable => "portable" });

/// Why a kernel setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The setting names no kernel.
    #[error("{KERNEL_ENV}={0:?} is not a matvec kernel; use one of avx512, avx2, neon, portable (or leave it unset for the best this CPU supports)")]
    Unknown(String),
    /// The kernel needs CPU features this machine lacks.
    #[error("{KERNEL_ENV}={0}: this CPU does not support the {0} kernel (needs {1}); supported here: {2}")]
    Unsupported(&'static str, &'static str, String),
}

impl Kernel {
    /// The CPU features the kernel needs.
    pub fn needs(self) -> &'static str {
        match self {
            Kernel::Avx512 => "x86_64 avx512f",
            Kernel::Avx2 => "x86_64 avx2 and fma",
            Kernel::Neon => "aarch64 neon",
            Kernel::Portable => "nothing",
        }
    }

    /// Whether this CPU can run the kernel.
    pub fn supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "aarch64")]
            Kernel::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            Kernel::Portable => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The kernels this CPU supports, best first.
    pub fn supported_here() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.supported()).collect()
    }

    /// The best kernel this CPU supports.
    pub fn best() -> Kernel {
        Kernel::ALL.into_iter().find(|k| k.supported()).unwrap_or(Kernel::Portable)
    }

    /// The kernel a setting asks for: `None` or empty for the best; an error when unknown or unsupported.
    pub fn choose(setting: Option<&str>) -> Result<Kernel, KernelError> {
        let Some(name) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(Kernel::best());
        };
        let kernel =
            Kernel::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(name)).ok_or_else(|| KernelError::Unknown(name.to_string()))?;
        if !kernel.supported() {
            let here: Vec<&str> = Kernel::supported_here().into_iter().map(Kernel::name).collect();
            return Err(KernelError::Unsupported(kernel.name(), kernel.needs(), here.join(", ")));
        }
        Ok(kernel)
    }

    /// The kernel `PARLAB_MATVEC_KERNEL` asks for (the best when it is unset).
    pub fn from_env() -> Result<Kernel, KernelError> {
        Kernel::choose(std::env::var(KERNEL_ENV).ok().as_deref())
    }

    /// `y[r] = W[r] · x` for the rows of `w` (row-major, `y.len()` rows of `x.len()`).
    /// An unsupported kernel (never chosen by [`Kernel::choose`]) computes with the portable one.
    pub fn rows(self, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(w.len() >= y.len() * x.len(), "matvec: {} weights for {} rows of {}", w.len(), y.len(), x.len());
        if !self.supported() {
            return rows_portable(w, x, y);
        }
        match self {
            // SAFETY: `supported` checked the CPU features each kernel is compiled for.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => unsafe { x86::rows_avx512(w, x, y) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { x86::rows_avx2(w, x, y) },
            // SAFETY: as above.
            // NEON is in aarch64's baseline, where the call needs no `unsafe`.
            #[cfg(target_arch = "aarch64")]
            #[allow(unused_unsafe)]
            Kernel::Neon => unsafe { arm::rows_neon(w, x, y) },
            _ => rows_portable(w, x, y),
        }
    }
}

/// Threads a [`matvec`] uses (0: libtorch's intra-op thread count).
static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the threads every later [`matvec`] of this process uses, whatever libtorch's own setting.
pub fn set_threads(threads: usize) {
    THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
}

/// The threads a [`matvec`] uses now.
fn threads() -> usize {
    match THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => tch::get_num_threads().max(1) as usize,
        n => n,
    }
}

/// The kernel this process uses: chosen once, from `PARLAB_MATVEC_KERNEL` or the CPU. A refused
/// setting falls back to the best kernel here; callers that must refuse it call [`configured`] first.
pub fn active() -> Kernel {
    static ACTIVE: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
    *ACTIVE.get_or_init(|| Kernel::from_env().unwrap_or_else(|_| Kernel::best()))
}

/// The kernel this process will use, or the reason its setting is refused.
pub fn configured() -> Result<Kernel, KernelError> {
    Kernel::from_env().map(|_| active())
}

/// The SIMD features this CPU reports that the kernels care about (for the manifest).
pub fn cpu_features() -> Vec<&'static str> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        for (name, yes) in [("avx512f", has!("avx512f")), ("avx2", has!("avx2")), ("fma", has!("fma")), ("sse2", has!("sse2"))] {
            if yes {
                out.push(name);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("neon") {
        out.push("neon");
    }
    out
}

/// `y[r] = W[r] · x`, plainly: one running sum per row, in order (the reference the kernels are tested against).
pub fn rows_reference(w: &[f32], x: &[f32], y: &mut [f32]) {
    let n = x.len();
    for (r, out) in y.iter_mut().enumerate() {
        let mut s = 0.0f32;
        for (a, b) in w[r * n..(r + 1) * n].iter().zip(x) {
            s += a * b;
        }
        *out = s;
    }
}

/// Rows are taken four at a time, a quarter of the rows apart (`r`, `r + q`, `r + 2q`, `r + 3q`
/// with `q` this): four streams far apart keep more of memory's bandwidth busy than four
/// neighbouring rows, as the STREAM-class read does.
fn quarter(len: usize) -> usize {
    len.div_ceil(4)
}

/// How many of the rows `r + i q` (`i` < 4) lie below `len` (always a prefix of the four).
fn rows_in(r: usize, q: usize, len: usize) -> usize {
    (0..4).take_while(|i| r + i * q < len).count()
}

/// Floats per chunk of the portable kernel: one 256-bit or two 128-bit vectors per accumulator.
const LANES: usize = 8;

/// Four rows at a time (a quarter apart) over `LANES`-wide chunks, one array of accumulators per row; the lanes
/// are independent sums, so the compiler keeps each array in vector registers.
#[inline(always)]
fn rows_portable(w: &[f32], x: &[f32], y: &mut [f32]) {
    let n = x.len();
    let (xc, _) = x.as_chunks::<LANES>();
    let body = xc.len() * LANES;
    let q = quarter(y.len());
    for r in 0..q {
        let rows = rows_in(r, q, y.len());
        let row = |i: usize| &w[(r + i.min(rows - 1) * q) * n..][..n];
        let wc: [&[[f32; LANES]]; 4] = std::array::from_fn(|i| row(i).as_chunks::<LANES>().0);
        let mut acc = [[0f32; LANES]; 4];
        for (c, xv) in xc.iter().enumerate() {
            for (a, wr) in acc.iter_mut().zip(&wc).take(rows) {
                for ((s, w), x) in a.iter_mut().zip(&wr[c]).zip(xv) {
                    *s += w * x;
                }
            }
        }
        for (i, a) in acc.iter().enumerate().take(rows) {
            let tail: f32 = row(i)[body..].iter().zip(&x[body..]).map(|(a, b)| a * b).sum();
            y[r + i * q] = a.iter().sum::<f32>() + tail;
        }
    }
}

/// Floats per step and stream of the read kernel: one 512-bit or two 256-bit vectors.
const SUM_WIDTH: usize = 16;

/// The sum of `v` read as four streams at once (its four quarters, in lockstep, as the matvec
/// reads four rows: one stream per core leaves memory bandwidth unused on some CPUs), each over
/// `SUM_WIDTH`-wide chunks of independent lanes the compiler vectorises; then the rest.
#[inline(always)]
fn sum_portable(v: &[f32]) -> f64 {
    let quarter = v.len() / (4 * SUM_WIDTH) * SUM_WIDTH;
    let streams: [&[[f32; SUM_WIDTH]]; 4] = std::array::from_fn(|i| v[i * quarter..(i + 1) * quarter].as_chunks().0);
    let mut acc = [[0f32; SUM_WIDTH]; 4];
    for c in 0..quarter / SUM_WIDTH {
        for (a, s) in acc.iter_mut().zip(&streams) {
            for (x, y) in a.iter_mut().zip(&s[c]) {
                *x += y;
            }
        }
    }
    let lanes: f64 = acc.iter().flatten().map(|&a| f64::from(a)).sum();
    lanes + v[4 * quarter..].iter().map(|&a| f64::from(a)).sum::<f64>()
}

impl Kernel {
    /// The sum of `v`, read once at this kernel's vector width: the STREAM-class read of `membw`.
    pub fn sum(self, v: &[f32]) -> f64 {
        if !self.supported() {
            return sum_portable(v);
        }
        match self {
            // SAFETY: `supported` checked the CPU features each function is compiled for.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => unsafe { x86::sum_avx512(v) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { x86::sum_avx2(v) },
            // SAFETY: as above.
            // NEON is in aarch64's baseline, where the call needs no `unsafe`.
            #[cfg(target_arch = "aarch64")]
            #[allow(unused_unsafe)]
            Kernel::Neon => unsafe { arm::sum_neon(v) },
            _ => sum_portable(v),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The portable read kernel compiled for AVX-512 (512-bit vectors).
    #[target_feature(enable = "avx512f")]
    pub(super) fn sum_avx512(v: &[f32]) -> f64 {
        super::sum_portable(v)
    }

    /// The portable read kernel compiled for AVX2 (256-bit vectors).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn sum_avx2(v: &[f32]) -> f64 {
        super::sum_portable(v)
    }

    /// The dot product of `w[from..n]` and `x[from..n]`, plainly (the tail after the vectors).
    fn tail(w: &[f32], x: &[f32], from: usize) -> f32 {
        (from..x.len()).map(|i| w[i] * x[i]).sum()
    }

    /// AVX-512: four rows at a time (a quarter of the rows apart), so four independent FMA chains
    /// share each load of `x`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn rows_avx512(w: &[f32], x: &[f32], y: &mut [f32]) {
        let (n, body) = (x.len(), x.len() / 16 * 16);
        // SAFETY: every load reads 16 floats below `body` <= n of `x` and of rows `r + i * q < y.len()` of `w`.
        unsafe {
            let q = super::quarter(y.len());
            for r in 0..q {
                let rows = super::rows_in(r, q, y.len());
                let mut acc = [_mm512_setzero_ps(); 4];
                for c in (0..body).step_by(16) {
                    let xv = _mm512_loadu_ps(x.as_ptr().add(c));
                    for (i, a) in acc.iter_mut().enumerate().take(rows) {
                        *a = _mm512_fmadd_ps(_mm512_loadu_ps(w.as_ptr().add((r + i * q) * n + c)), xv, *a);
                    }
                }
                for (i, a) in acc.iter().enumerate().take(rows) {
                    y[r + i * q] = _mm512_reduce_add_ps(*a) + tail(&w[(r + i * q) * n..(r + i * q + 1) * n], x, body);
                }
            }
        }
    }

    /// The sum of the eight lanes of `v`.
    #[target_feature(enable = "avx2,fma")]
    fn hsum256(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    /// AVX2+FMA: four rows at a time (a quarter apart) with two accumulators each (eight FMA chains), 16 floats a step,
    /// then one 8-float step, then the scalar tail.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn rows_avx2(w: &[f32], x: &[f32], y: &mut [f32]) {
        let n = x.len();
        // SAFETY: every load reads 8 floats below body8 <= n of `x` and of rows `r + i * q < y.len()` of `w`.
        unsafe {
            let (body16, body8) = (n / 16 * 16, n / 8 * 8);
            let (xp, wp) = (x.as_ptr(), w.as_ptr());
            let q = super::quarter(y.len());
            for r in 0..q {
                let rows = super::rows_in(r, q, y.len());
                let mut acc = [[_mm256_setzero_ps(); 2]; 4];
                for c in (0..body16).step_by(16) {
                    let (x0, x1) = (_mm256_loadu_ps(xp.add(c)), _mm256_loadu_ps(xp.add(c + 8)));
                    for (i, a) in acc.iter_mut().enumerate().take(rows) {
                        let row = wp.add((r + i * q) * n + c);
                        a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(row), x0, a[0]);
                        a[1] = _mm256_fmadd_ps(_mm256_loadu_ps(row.add(8)), x1, a[1]);
                    }
                }
                if body8 > body16 {
                    let x0 = _mm256_loadu_ps(xp.add(body16));
                    for (i, a) in acc.iter_mut().enumerate().take(rows) {
                        a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(wp.add((r + i * q) * n + body16)), x0, a[0]);
                    }
                }
                for (i, a) in acc.iter().enumerate().take(rows) {
                    let v = hsum256(_mm256_add_ps(a[0], a[1]));
                    y[r + i * q] = v + tail(&w[(r + i * q) * n..(r + i * q + 1) * n], x, body8);
                }
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;

    include!("matvec_neon.rs");

    /// The portable read kernel compiled for NEON (128-bit vectors).
    #[target_feature(enable = "neon")]
    pub(super) fn sum_neon(v: &[f32]) -> f64 {
        super::sum_portable(v)
    }

    /// [`rows_neon_body`] compiled for NEON.
    #[target_feature(enable = "neon")]
    pub(super) fn rows_neon(w: &[f32], x: &[f32], y: &mut [f32]) {
        rows_neon_body(w, x, y)
    }
}

/// The NEON kernel's code over a plain-Rust stand-in for the five intrinsics it calls, so every
/// CPU's tests run its indexing, tails and sums (an aarch64 build runs the real instructions).
#[cfg(test)]
mod arm_emulated {
    use self::intrinsics::*;

    include!("matvec_neon.rs");

    /// `std::arch::aarch64`'s intrinsics used by the NEON kernel, lane by lane.
    #[allow(non_camel_case_types)]
    mod intrinsics {
        /// Four f32 lanes.
        #[derive(Clone, Copy)]
        pub struct float32x4_t([f32; 4]);

        /// Loads four floats from `p`.
        pub unsafe fn vld1q_f32(p: *const f32) -> float32x4_t {
            // SAFETY: the caller passes four readable floats, as for the real intrinsic.
            float32x4_t(unsafe { std::ptr::read_unaligned(p as *const [f32; 4]) })
        }

        /// Four lanes of `v`.
        pub unsafe fn vdupq_n_f32(v: f32) -> float32x4_t {
            float32x4_t([v; 4])
        }

        /// `a + b · c` per lane, fused (FMLA).
        pub unsafe fn vfmaq_f32(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
            float32x4_t(std::array::from_fn(|i| b.0[i].mul_add(c.0[i], a.0[i])))
        }

        /// `a + b` per lane.
        pub unsafe fn vaddq_f32(a: float32x4_t, b: float32x4_t) -> float32x4_t {
            float32x4_t(std::array::from_fn(|i| a.0[i] + b.0[i]))
        }

        /// The sum of the four lanes (FADDP twice: pairs first).
        pub unsafe fn vaddvq_f32(a: float32x4_t) -> f32 {
            (a.0[0] + a.0[1]) + (a.0[2] + a.0[3])
        }
    }

    /// The emulated kernel.
    pub(super) fn rows(w: &[f32], x: &[f32], y: &mut [f32]) {
        rows_neon_body(w, x, y)
    }
}

/// `x Wᵀ + b` for one row `x` (`[1, in]`) and `w` `[out, in]`: `[1, out]`.
pub fn matvec(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let x = x.contiguous();
    let y = matvec_row(w, f32s(&x), b.map(f32s));
    Tensor::from_slice(&y).view([1, y.len() as i64])
}

/// `W x + b` on slices for `w` `[out, in]`: `out` values.
pub fn matvec_row(w: &Tensor, x: &[f32], b: Option<&[f32]>) -> Vec<f32> {
    let mut y = vec![0f32; w.size()[0] as usize];
    matvec_rows_into(w, x, 0, &mut y);
    if let Some(b) = b {
        y.iter_mut().zip(b).for_each(|(a, b)| *a += b);
    }
    y
}

/// Rows `first..first + y.len()` of `W x` for `w` `[out, in]`, into `y`: a piece of a
/// row-parallel product ([`matvec_row`] is all of them).
pub fn matvec_rows_into(w: &Tensor, x: &[f32], first: usize, y: &mut [f32]) {
    let wv = f32s(w);
    let out = w.size()[0] as usize;
    assert!(
        first + y.len() <= out && wv.len() == out * x.len(),
        "matvec: rows {first}..{} of a [{out}, {}] weight",
        first + y.len(),
        x.len()
    );
    rows_threaded(active(), threads(), &wv[first * x.len()..(first + y.len()) * x.len()], x, y);
}

/// `y = W x` with `kernel`, the rows split over up to `threads` threads (this one and the pool's).
pub fn rows_threaded(kernel: Kernel, threads: usize, w: &[f32], x: &[f32], y: &mut [f32]) {
    assert!(w.len() >= y.len() * x.len(), "matvec: {} weights for {} rows of {}", w.len(), y.len(), x.len());
    let threads = threads.max(1).min(y.len().div_ceil(64));
    pool::run(threads, &mut Job::new(kernel, w, x, y));
}

/// Floats per row of a threaded read (16 KiB, as a GPT-2 feed-forward row): chunks are whole rows.
const READ_ROW: usize = 4096;

/// The sum of `v` read once with `kernel` by up to `threads` threads (this one and the pool's,
/// taking chunks as they come free, as the matvec does): the STREAM-class read of `membw`.
pub fn read_threaded(kernel: Kernel, threads: usize, v: &[f32]) -> f64 {
    let rows = v.len() / READ_ROW;
    let threads = threads.max(1).min(rows.div_ceil(16).max(1));
    let mut sums = vec![0f64; threads * pool::SPLIT + 1];
    if rows > 0 {
        pool::run(threads, &mut Job::sum(kernel, &v[..rows * READ_ROW], READ_ROW, &mut sums));
    }
    sums.iter().sum::<f64>() + kernel.sum(&v[rows * READ_ROW..])
}

/// One matvec split into row chunks, as raw parts so that pool threads can take a chunk each.
struct Job {
    kernel: Kernel,
    /// A read instead of a matvec: chunk `i`'s sum goes to `sums[i]` (`x` and `y` unused).
    sums: *mut f64,
    w: *const f32,
    x: *const f32,
    y: *mut f32,
    inner: usize,
    out: usize,
    per: usize,
}

// SAFETY: a Job is only used while `matvec` waits for every chunk, so its pointers stay valid,
// and chunks write disjoint ranges of `y`.
unsafe impl Sync for Job {}

impl Job {
    fn new(kernel: Kernel, w: &[f32], x: &[f32], y: &mut [f32]) -> Self {
        let out = y.len();
        let sums = std::ptr::null_mut();
        Job { kernel, sums, w: w.as_ptr(), x: x.as_ptr(), y: y.as_mut_ptr(), inner: x.len(), out, per: out }
    }

    /// A read of `v` as rows of `inner` floats; chunk `i`'s sum goes to `sums[i]`, which must
    /// have room for as many chunks as `split` is asked for.
    fn sum(kernel: Kernel, v: &[f32], inner: usize, sums: &mut [f64]) -> Self {
        let out = v.len() / inner;
        let (w, y) = (v.as_ptr(), std::ptr::null_mut());
        Job { kernel, sums: sums.as_mut_ptr(), w, x: w, y, inner, out, per: out }
    }

    /// Splits into about `chunks` chunks of whole 4-row groups; returns how many there are.
    fn split(&mut self, chunks: usize) -> usize {
        self.per = self.out.div_ceil(chunks).div_ceil(4) * 4;
        self.out.div_ceil(self.per)
    }

    /// Computes chunk `i` (rows `i * per..`), if there is one.
    fn chunk(&self, i: usize) {
        let (start, n) = (i * self.per, self.inner);
        if start >= self.out {
            return;
        }
        let rows_here = self.per.min(self.out - start);
        if !self.sums.is_null() {
            // SAFETY: see the Sync impl; the rows lie within the buffer `sum` was given and
            // `sums` has room for every chunk, each written by the one thread that claimed it.
            unsafe {
                let w = std::slice::from_raw_parts(self.w.add(start * n), rows_here * n);
                *self.sums.add(i) = self.kernel.sum(w);
            }
            return;
        }
        // SAFETY: see the Sync impl; the ranges lie within the slices `new` was given.
        let (w, x, y) = unsafe {
            (
                std::slice::from_raw_parts(self.w.add(start * n), rows_here * n),
                std::slice::from_raw_parts(self.x, n),
                std::slice::from_raw_parts_mut(self.y.add(start), rows_here),
            )
        };
        self.kernel.rows(w, x, y);
    }
}

/// Persistent helper threads that take chunks of the current job as the caller does; the
/// caller claims chunks too, so a helper that lost its core only means fewer hands. A job split
/// for `threads` threads seats at most `threads - 1` helpers (started as first needed), so a
/// rank labelled N threads computes on N whatever the machine's cores. Helpers spin briefly for
/// the next job (the next matvec follows within microseconds), then sleep.
mod pool {
    use super::Job;
    use std::sync::atomic::{AtomicUsize, Ordering::*};
    use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

    /// Spin iterations before a helper sleeps, or a waiting caller yields (a few milliseconds).
    const SPIN: u32 = 200_000;
    /// Chunks per thread: small enough that the caller can pick up a late helper's share.
    pub(super) const SPLIT: usize = 4;

    /// The current job, its claimed chunks and the helpers it may still seat.
    struct State {
        job: *const Job,
        generation: usize,
        chunks: usize,
        next: usize,
        seats: usize,
    }

    // SAFETY: `job` is only dereferenced for chunks claimed before the caller sees them all done.
    unsafe impl Send for State {}

    struct Shared {
        /// Held by the caller whose job is in flight: the pool holds one job at a time.
        turn: Mutex<()>,
        state: Mutex<State>,
        /// The state's generation, read by spinning helpers without the lock.
        generation: AtomicUsize,
        done: AtomicUsize,
        /// Threads (the caller included) that computed a chunk of the current job.
        hands: AtomicUsize,
        helpers: AtomicUsize,
        wake: Condvar,
    }

    static POOL: OnceLock<&'static Shared> = OnceLock::new();

    fn lock(s: &Shared) -> MutexGuard<'_, State> {
        s.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims and computes chunks of job `generation` until none is left; a helper first takes
    /// a seat, and returns at once where the job has none left (or is over).
    fn work(s: &Shared, generation: usize, helper: bool) {
        if helper {
            let mut st = lock(s);
            if st.generation != generation || st.seats == 0 {
                return;
            }
            st.seats -= 1;
        }
        let mut first = true;
        loop {
            let (job, i) = {
                let mut st = lock(s);
                if st.generation != generation || st.next >= st.chunks {
                    return;
                }
                st.next += 1;
                (st.job, st.next - 1)
            };
            if std::mem::take(&mut first) {
                s.hands.fetch_add(1, AcqRel);
            }
            // SAFETY: the caller keeps the job alive until every claimed chunk is done.
            unsafe { (*job).chunk(i) };
            s.done.fetch_add(1, AcqRel);
        }
    }

    fn helper(s: &'static Shared) {
        let mut seen = s.generation.load(Acquire);
        loop {
            let mut spins = 0;
            while s.generation.load(Acquire) == seen {
                if spins < SPIN {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    let g = lock(s);
                    drop(s.wake.wait_while(g, |_| s.generation.load(Acquire) == seen).unwrap_or_else(std::sync::PoisonError::into_inner));
                }
            }
            seen = s.generation.load(Acquire);
            work(s, seen, true);
        }
    }

    fn shared() -> &'static Shared {
        POOL.get_or_init(|| {
            Box::leak(Box::new(Shared {
                turn: Mutex::new(()),
                state: Mutex::new(State { job: std::ptr::null(), generation: 0, chunks: 0, next: 0, seats: 0 }),
                generation: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                hands: AtomicUsize::new(0),
                helpers: AtomicUsize::new(0),
                wake: Condvar::new(),
            }))
        })
    }

    /// Starts helpers until there are `wanted` (called with the turn held: one caller at a time).
    fn start_helpers(s: &'static Shared, wanted: usize) {
        while s.helpers.load(Acquire) < wanted {
            std::thread::spawn(move || helper(s));
            s.helpers.fetch_add(1, AcqRel);
        }
    }

    /// Runs `job` split for `threads` threads, on this thread and on at most `threads - 1`
    /// helpers; returns, when all is done, how many threads computed a part of it. A caller
    /// that finds another thread's job in flight (parallel unit tests; a rank calls from one
    /// thread) computes its own alone: replacing the job in flight left both callers waiting
    /// for ever, each for the other's chunks.
    pub(super) fn run(threads: usize, job: &mut Job) -> usize {
        if threads <= 1 {
            job.chunk(0);
            return 1;
        }
        let s = shared();
        let Ok(_turn) = s.turn.try_lock() else {
            job.chunk(0);
            return 1;
        };
        start_helpers(s, threads - 1);
        let chunks = job.split(threads * SPLIT);
        s.done.store(0, Release);
        s.hands.store(0, Release);
        let generation = {
            let mut st = lock(s);
            let generation = st.generation + 1;
            *st = State { job, generation, chunks, next: 0, seats: threads - 1 };
            // Published under the lock: a helper that checked it there is already waiting.
            s.generation.store(generation, Release);
            generation
        };
        s.wake.notify_all();
        work(s, generation, false);
        let mut spins = 0u32;
        while s.done.load(Acquire) != chunks {
            spins += 1;
            if spins < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        s.hands.load(Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) that are not all alike.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Shapes with one row, rows not a multiple of 4, widths below, at and around 8 and 16.
    const SHAPES: [(usize, usize); 14] =
        [(1, 1), (1, 7), (1, 16), (1, 17), (2, 3), (3, 8), (4, 15), (5, 16), (6, 24), (7, 31), (9, 33), (13, 100), (64, 768), (67, 771)];

    #[test]
    fn a_job_split_for_n_threads_computes_on_at_most_n_whatever_helpers_the_pool_has() {
        let (rows, width) = (4096, 64);
        let (w, x) = (values(rows * width, 3), values(width, 5));
        let mut want = vec![0f32; rows];
        Kernel::Portable.rows(&w, &x, &mut want);
        let mut y = vec![0f32; rows];
        // A job split for four starts three helpers; a job split for two may seat one of them.
        pool::run(4, &mut Job::new(Kernel::Portable, &w, &x, &mut y));
        let most = (0..300).map(|_| pool::run(2, &mut Job::new(Kernel::Portable, &w, &x, &mut y))).max();
        assert!(most <= Some(2), "a job split for 2 threads computed on {most:?}");
        assert_eq!(y, want);
    }

    #[test]
    fn every_supported_kernel_matches_the_plain_reference_on_odd_shapes() {
        let here = Kernel::supported_here();
        assert!(here.contains(&Kernel::Portable));
        for kernel in here {
            for (rows, width) in SHAPES {
                let (w, x) = (values(rows * width, rows as u32), values(width, width as u32 + 7));
                let mut want = vec![0f32; rows];
                rows_reference(&w, &x, &mut want);
                let mut got = vec![f32::NAN; rows];
                kernel.rows(&w, &x, &mut got);
                for r in 0..rows {
                    let scale: f32 = w[r * width..(r + 1) * width].iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
                    let err = (got[r] - want[r]).abs();
                    assert!(err <= 1e-5 * scale.max(1.0), "{} at {rows}x{width}, row {r}: {} vs {}", kernel.name(), got[r], want[r]);
                }
            }
        }
    }

    #[test]
    fn threads_of_one_process_asking_for_the_pool_at_once_each_get_their_answer() {
        let (rows, width) = (512, 256);
        let (w, x) = (values(rows * width, 3), values(width, 5));
        let mut want = vec![0f32; rows];
        rows_reference(&w, &x, &mut want);
        let (w, x, want) = (std::sync::Arc::new(w), std::sync::Arc::new(x), std::sync::Arc::new(want));
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let (w, x, want, done) = (w.clone(), x.clone(), want.clone(), done.clone());
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    let mut got = vec![f32::NAN; rows];
                    rows_threaded(Kernel::Portable, 2, &w, &x, &mut got);
                    let close = got.iter().zip(want.iter()).all(|(g, r)| (g - r).abs() <= 1e-3 * r.abs().max(1.0));
                    if !close {
                        let _ = done.send(false);
                        return;
                    }
                }
                let _ = done.send(true);
            });
        }
        for _ in 0..2 {
            let answer = finished.recv_timeout(std::time::Duration::from_secs(60));
            assert_eq!(answer, Ok(true), "each caller's rows, within a minute (they waited on each other for ever)");
        }
    }

    #[test]
    fn the_neon_kernels_code_matches_the_plain_reference_on_odd_shapes_here_too() {
        for (rows, width) in SHAPES {
            let (w, x) = (values(rows * width, rows as u32), values(width, width as u32 + 7));
            let mut want = vec![0f32; rows];
            rows_reference(&w, &x, &mut want);
            let mut got = vec![f32::NAN; rows];
            arm_emulated::rows(&w, &x, &mut got);
            for r in 0..rows {
                let scale: f32 = w[r * width..(r + 1) * width].iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
                let err = (got[r] - want[r]).abs();
                assert!(err <= 1e-5 * scale.max(1.0), "emulated neon at {rows}x{width}, row {r}: {} vs {}", got[r], want[r]);
            }
        }
    }

    #[test]
    fn every_supported_read_kernel_sums_exactly() {
        for kernel in Kernel::supported_here() {
            for n in [0usize, 1, 63, 64, 65, 1000, 4099] {
                let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
                let want: f64 = v.iter().map(|&x| f64::from(x)).sum();
                assert_eq!(kernel.sum(&v), want, "{} over {n}", kernel.name());
            }
        }
    }

    #[test]
    fn the_threaded_read_sums_every_value_once() {
        for n in [0usize, 5, READ_ROW, READ_ROW * 37 + 11] {
            let v: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
            let want: f64 = v.iter().map(|&x| f64::from(x)).sum();
            for kernel in Kernel::supported_here() {
                assert_eq!(read_threaded(kernel, 2, &v), want, "{} over {n}", kernel.name());
            }
        }
    }

    #[test]
    fn this_cpu_runs_its_vector_kernels() {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                assert!(Kernel::supported_here().contains(&Kernel::Avx512));
                assert_eq!(Kernel::best(), Kernel::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                assert!(Kernel::supported_here().contains(&Kernel::Avx2));
            }
            assert!(!Kernel::Neon.supported());
        }
        #[cfg(target_arch = "aarch64")]
        assert_eq!(Kernel::best(), Kernel::Neon);
    }

    #[test]
    fn settings_choose_a_kernel_or_are_refused_with_a_reason() {
        assert_eq!(Kernel::choose(None), Ok(Kernel::best()));
        assert_eq!(Kernel::choose(Some("  ")), Ok(Kernel::best()));
        assert_eq!(Kernel::choose(Some("portable")), Ok(Kernel::Portable));
        assert_eq!(
            Kernel::choose(Some("AVX2")).map(Kernel::name),
            if Kernel::Avx2.supported() {
                Ok("avx2")
            } else {
                Err(KernelError::Unsupported(
                    "avx2",
                    "x86_64 avx2 and fma",
                    Kernel::supported_here().iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                ))
            }
        );
        let unknown = Kernel::choose(Some("sse9")).unwrap_err();
        assert_eq!(unknown, KernelError::Unknown("sse9".into()));
        assert!(unknown.to_string().contains("avx512, avx2, neon, portable"), "{unknown}");
        let missing = Kernel::ALL.into_iter().find(|k| !k.supported()).expect("no CPU has both NEON and AVX");
        let refused = Kernel::choose(Some(missing.name())).unwrap_err();
        assert!(refused.to_string().contains("does not support"), "{refused}");
        assert!(refused.to_string().contains("portable"), "names what is supported: {refused}");
    }

    #[test]
    fn the_threaded_matvec_adds_the_bias_and_matches_the_reference() {
        let (rows, width) = (301, 45);
        let (w, x, b) = (values(rows * width, 3), values(width, 4), values(rows, 5));
        let mut want = vec![0f32; rows];
        rows_reference(&w, &x, &mut want);
        let (wt, xt, bt) = (
            Tensor::from_slice(&w).view([rows as i64, width as i64]),
            Tensor::from_slice(&x).view([1, width as i64]),
            Tensor::from_slice(&b),
        );
        tch::set_num_threads(2);
        let y: Vec<f32> = Vec::try_from(matvec(&xt, &wt, Some(&bt)).view([-1])).expect("f32 values");
        assert_eq!(y.len(), rows);
        for r in 0..rows {
            assert!((y[r] - (want[r] + b[r])).abs() <= 1e-4, "row {r}: {} vs {}", y[r], want[r] + b[r]);
        }
    }

    /// The `bench_matvec` section of ci/bench.sh: every supported kernel's matvec over a 512 MiB
    /// matrix against the STREAM-class read of as many bytes, interleaved A B A B, ratio per pair.
    #[test]
    #[ignore = "benchmark: run by ci/bench.sh bench_matvec"]
    fn bench_kernels_against_the_read() {
        let threads: usize = std::env::var("BENCH_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
        let (rows, width) = (32768usize, 4096usize);
        let w = vec![1f32; rows * width];
        let (x, mut y) = (vec![1f32; width], vec![0f32; rows]);
        let bytes = (w.len() * 4) as f64;
        let time = |f: &mut dyn FnMut()| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        };
        let mut ratios: Vec<(Kernel, Vec<f64>)> = Kernel::supported_here().into_iter().map(|k| (k, Vec::new())).collect();
        for pair in 0..6 {
            for (kernel, rs) in ratios.iter_mut() {
                // Alternate which goes first, so neither always follows the other.
                let read_once = || time(&mut || assert_eq!(read_threaded(Kernel::best(), threads, &w), w.len() as f64));
                let (read, mv) = if pair % 2 == 0 {
                    let read = read_once();
                    (read, time(&mut || rows_threaded(*kernel, threads, &w, &x, &mut y)))
                } else {
                    let mv = time(&mut || rows_threaded(*kernel, threads, &w, &x, &mut y));
                    (read_once(), mv)
                };
                assert_eq!(y[rows - 1], width as f32);
                if pair > 0 {
                    rs.push(read / mv);
                    println!(
                        "bench: pair {pair} {:<8} matvec {:6.2} GB/s  read {:6.2} GB/s  matvec/read bandwidth {:.3}",
                        kernel.name(),
                        bytes / mv / 1e9,
                        bytes / read / 1e9,
                        read / mv
                    );
                }
            }
        }
        for (kernel, mut rs) in ratios {
            rs.sort_by(f64::total_cmp);
            println!(
                "bench: {:<8} matvec/read bandwidth median {:.3} [min {:.3}, max {:.3}] over {} pairs, {threads} threads",
                kernel.name(),
                rs[rs.len() / 2],
                rs[0],
                rs[rs.len() - 1],
                rs.len()
            );
        }
    }
}
