//! An order-keeping parallel map over a slice, one scoped thread per core (no pool, no
//! dependency): for reading many small files or building many tables, where items may cost
//! very different amounts.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item of `items`, computed on up to as many threads as the process has cores,
/// returned in the items' order. Each thread takes the next unclaimed item, so one costly item
/// does not leave the other threads idle behind a fixed share.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = (crate::gates::cpu_cores() as usize).min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let (f, next) = (&f, &AtomicUsize::new(0));
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { return mine };
                        mine.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// `a()` and `b()` computed at once, `b` on a second thread when the process has more than one core.
pub fn both<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    if crate::gates::cpu_cores() <= 1 {
        return (a(), b());
    }
    std::thread::scope(|scope| {
        let second = scope.spawn(b);
        let first = a();
        (first, second.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_items_order_for_any_length() {
        for n in [0usize, 1, 2, 3, 7, 1000] {
            let items: Vec<usize> = (0..n).collect();
            assert_eq!(super::map(&items, |i| i * 3), items.iter().map(|i| i * 3).collect::<Vec<_>>(), "{n} items");
        }
    }

    #[test]
    fn both_gives_each_closures_own_result() {
        let items = [1, 2, 3];
        assert_eq!(super::both(|| items.iter().sum::<i32>(), || items.len()), (6, 3));
    }
}
