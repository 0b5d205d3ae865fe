//! The decode step's matrix-vector products: `y = W x (+ b)` with `W` stored `[out, in]`,
//! streamed once row by row at memory bandwidth (libtorch's MKL `sgemv` reaches about half of
//! it on this AMD machine; see ci/bench.sh `bench_decode`). Rows are split over the intra-op threads.

use tch::{Kind, Tensor};

/// `y[r] = W[r] · x` for the rows of `w` (row-major, `y.len()` rows of `x.len()`), plainly.
fn rows_plain(w: &[f32], x: &[f32], y: &mut [f32]) {
    for (r, out) in y.iter_mut().enumerate() {
        *out = w[r * x.len()..][..x.len()].iter().zip(x).map(|(a, b)| a * b).sum();
    }
}

/// As [`rows_plain`] with AVX-512: four rows at a time, so four independent FMA chains share each load of `x`.
#[target_feature(enable = "avx512f")]
fn rows_avx512(w: &[f32], x: &[f32], y: &mut [f32]) {
    use std::arch::x86_64::*;
    let (n, body) = (x.len(), x.len() / 16 * 16);
    let tail = |r: usize| -> f32 { (body..n).map(|i| w[r * n + i] * x[i]).sum() };
    let mut r = 0;
    while r < y.len() {
        let rows = (y.len() - r).min(4);
        // SAFETY: every load reads 16 floats at offsets below `body` within rows `r..r + rows` of `w` and within `x`.
        unsafe {
            let mut acc = [_mm512_setzero_ps(); 4];
            for c in (0..body).step_by(16) {
                let xv = _mm512_loadu_ps(x.as_ptr().add(c));
                for (i, a) in acc.iter_mut().enumerate().take(rows) {
                    *a = _mm512_fmadd_ps(_mm512_loadu_ps(w.as_ptr().add((r + i) * n + c)), xv, *a);
                }
            }
            for (i, a) in acc.iter().enumerate().take(rows) {
                y[r + i] = _mm512_reduce_add_ps(*a) + tail(r + i);
            }
        }
        r += rows;
    }
}

fn rows(w: &[f32], x: &[f32], y: &mut [f32]) {
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has the feature the function is compiled for.
        unsafe { rows_avx512(w, x, y) }
    } else {
        rows_plain(w, x, y)
    }
}

/// The f32 elements of a contiguous CPU tensor.
fn slice(t: &Tensor) -> &[f32] {
    assert!(t.kind() == Kind::Float && t.is_contiguous(), "matvec wants contiguous f32 tensors");
    // SAFETY: a contiguous f32 tensor holds numel f32 values at data_ptr, alive as long as `t`.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) }
}

/// `x Wᵀ + b` for one row `x` (`[1, in]`) and `w` `[out, in]`: `[1, out]`.
pub fn matvec(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let x = x.contiguous();
    let (wv, xv) = (slice(w), slice(&x));
    let out = w.size()[0] as usize;
    assert_eq!(
        wv.len(),
        out * xv.len(),
        "matvec: weight of {} values is not [{out}, {}]",
        wv.len(),
        xv.len()
    );
    let mut y = vec![0f32; out];
    let threads = (tch::get_num_threads().max(1) as usize).min(out.div_ceil(64));
    pool::run(threads, &mut Job::new(wv, xv, &mut y));
    if let Some(b) = b {
        y.iter_mut().zip(slice(b)).for_each(|(a, b)| *a += b);
    }
    Tensor::from_slice(&y).view([1, out as i64])
}

/// One matvec split into row chunks, as raw parts so that pool threads can take a chunk each.
struct Job {
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
    fn new(w: &[f32], x: &[f32], y: &mut [f32]) -> Self {
        let out = y.len();
        Job {
            w: w.as_ptr(),
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            inner: x.len(),
            out,
            per: out,
        }
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
        // SAFETY: see the Sync impl; the ranges lie within the slices `new` was given.
        let (w, x, y) = unsafe {
            (
                std::slice::from_raw_parts(self.w.add(start * n), rows_here * n),
                std::slice::from_raw_parts(self.x, n),
                std::slice::from_raw_parts_mut(self.y.add(start), rows_here),
            )
        };
        rows(w, x, y);
    }
}

/// Persistent helper threads (started once) that take chunks of the current job as the caller
/// does; the caller claims chunks too, so a helper that lost its core only means fewer hands.
/// Helpers spin briefly for the next job (the next matvec follows within microseconds), then sleep.
mod pool {
    use super::Job;
    use std::sync::atomic::{AtomicUsize, Ordering::*};
    use std::sync::{Condvar, Mutex, OnceLock};

    /// Spin iterations before a helper sleeps, or a waiting caller yields (a few milliseconds).
    const SPIN: u32 = 200_000;
    /// Chunks per thread: small enough that the caller can pick up a late helper's share.
    const SPLIT: usize = 4;

    /// The current job and its claimed and finished chunks.
    struct State {
        job: *const Job,
        chunks: usize,
        next: usize,
    }

    // SAFETY: `job` is only dereferenced for chunks claimed before the caller sees them all done.
    unsafe impl Send for State {}

    struct Shared {
        state: Mutex<State>,
        generation: AtomicUsize,
        done: AtomicUsize,
        wake: Condvar,
    }

    static POOL: OnceLock<&'static Shared> = OnceLock::new();

    /// Claims and computes chunks of the current job until none is left.
    fn work(s: &Shared) {
        loop {
            let (job, i) = {
                let mut st = s.state.lock().expect("matvec pool lock");
                if st.next >= st.chunks {
                    return;
                }
                st.next += 1;
                (st.job, st.next - 1)
            };
            // SAFETY: the caller keeps the job alive until every claimed chunk is done.
            unsafe { (*job).chunk(i) };
            s.done.fetch_add(1, AcqRel);
        }
    }

    fn helper(s: &'static Shared) {
        let mut seen = 0;
        loop {
            let mut spins = 0;
            while s.generation.load(Acquire) == seen {
                if spins < SPIN {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    let g = s.state.lock().expect("matvec pool lock");
                    drop(
                        s.wake
                            .wait_while(g, |_| s.generation.load(Acquire) == seen)
                            .expect("matvec pool lock"),
                    );
                }
            }
            seen = s.generation.load(Acquire);
            work(s);
        }
    }

    /// Runs `job` split for `threads` threads, on this thread and on helpers; returns when all is done.
    pub(super) fn run(threads: usize, job: &mut Job) {
        if threads <= 1 {
            return job.chunk(0);
        }
        let s = *POOL.get_or_init(|| {
            let s: &'static Shared = Box::leak(Box::new(Shared {
                state: Mutex::new(State {
                    job: std::ptr::null(),
                    chunks: 0,
                    next: 0,
                }),
                generation: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                wake: Condvar::new(),
            }));
            let helpers = std::thread::available_parallelism().map_or(1, |n| n.get()).max(threads) - 1;
            for _ in 0..helpers {
                std::thread::spawn(move || helper(s));
            }
            s
        });
        let chunks = job.split(threads * SPLIT);
        s.done.store(0, Release);
        *s.state.lock().expect("matvec pool lock") = State { job, chunks, next: 0 };
        s.generation.fetch_add(1, AcqRel);
        s.wake.notify_all();
        work(s);
        let mut spins = 0u32;
        while s.done.load(Acquire) != chunks {
            spins += 1;
            if spins < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
