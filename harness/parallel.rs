//! An order-keeping parallel map over a slice, one scoped thread per core (no pool, no
//! dependency): for reading many small files, where each item costs about the same.

/// `f` of every item of `items`, computed on up to as many threads as the process has cores,
/// returned in the items' order.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = crate::gates::cpu_cores() as usize;
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let chunks: Vec<_> =
            items.chunks(items.len().div_ceil(threads)).map(|c| scope.spawn(move || c.iter().map(f).collect::<Vec<R>>())).collect();
        chunks.into_iter().flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
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
}
