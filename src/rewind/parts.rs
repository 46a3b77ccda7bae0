//! Work split over the machine's cores: a list cut into contiguous parts, each handled on a
//! scoped thread (the calling thread takes the first), the results given back in the list's
//! order. Only for work whose parts cannot see each other's: the stages that only read (saving
//! what a rewind overwrites, verifying the blobs it restores) and runs of restorations that
//! each touch only their own path and inode (`apply.rs`, `independent_files`). A large
//! rewind is bound by the system calls each path costs, and those run in parallel on the host
//! filesystem (docs/BENCHMARKS.md).
//!
//! I/O: none of its own.

/// Items each part gets at least: a list of fewer than twice this is handled on the calling
/// thread alone (a thread, its parents and its share of the held batch cost more than a few
/// hundred paths do).
const ITEMS_PER_PART: usize = 2048;

/// Parts at most, whatever the machine has: past a few, the host filesystem's locks and the
/// store's put lock, not the cores, set the pace.
const MAX_PARTS: usize = 4;

/// How many parts a list of `items` is cut into on this machine.
pub(super) fn parts_for(items: usize) -> usize {
    if items < 2 * ITEMS_PER_PART {
        return 1;
    }
    (items / ITEMS_PER_PART).clamp(1, cores())
}

/// The cores this process may use, at most [`MAX_PARTS`], asked once: the answer reads the
/// process's cgroup files, and the apply asks for every run of files, thousands of times in a
/// rewind of a recreated tree (docs/BENCHMARKS.md).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, MAX_PARTS)
    })
}

/// `work` over `items` cut into `parts` contiguous parts (fewer when there are fewer items),
/// each on its own thread but the first, which the calling thread takes; the results in the
/// order of the parts. A panic in a part is raised again on the calling thread, as if the work
/// had run there.
pub(super) fn in_parts<T, R, F>(items: &[T], parts: usize, work: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&[T]) -> R + Sync,
{
    in_parts_first_here(items, parts, &work, &work)
}

/// [`in_parts`], the first part handled by `first`, which need not be shareable between
/// threads (it may report progress, say), the others by `rest`.
pub(super) fn in_parts_first_here<T, R>(
    items: &[T],
    parts: usize,
    first: impl FnOnce(&[T]) -> R,
    rest: &(impl Fn(&[T]) -> R + Sync),
) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    let size = items.len().div_ceil(parts.max(1)).max(1);
    let mut chunks = items.chunks(size);
    let head = chunks.next().unwrap_or(&[]);
    if chunks.len() == 0 {
        return vec![first(head)];
    }
    std::thread::scope(|s| {
        let others: Vec<_> = chunks.map(|c| s.spawn(move || rest(c))).collect();
        let mut results = vec![first(head)];
        for h in others {
            results.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_item_once_in_order() {
        for n in [0usize, 1, 2, 3, 7, 100, 1001] {
            for parts in [0usize, 1, 2, 3, 4, 16] {
                let items: Vec<usize> = (0..n).collect();
                let threads = std::sync::Mutex::new(std::collections::HashSet::new());
                let out = in_parts(&items, parts, |c| {
                    threads
                        .lock()
                        .expect("lock")
                        .insert(std::thread::current().id());
                    c.to_vec()
                });
                let flat: Vec<usize> = out.concat();
                assert_eq!(flat, items, "{n} items in {parts} parts");
                let used = threads.lock().expect("lock").len();
                let want = if n == 0 { 1 } else { parts.clamp(1, n) };
                assert!(used <= want, "{n} items, {parts} parts: {used} threads");
                if n >= 16 && parts > 1 {
                    assert!(used > 1, "{n} items in {parts} parts ran on one thread");
                }
            }
        }
    }

    #[test]
    fn small_lists_stay_on_the_calling_thread() {
        assert_eq!(parts_for(0), 1);
        assert_eq!(parts_for(ITEMS_PER_PART - 1), 1);
        assert!(parts_for(100 * ITEMS_PER_PART) <= MAX_PARTS);
    }

    #[test]
    fn a_panic_in_a_part_reaches_the_caller() {
        let items: Vec<usize> = (0..10).collect();
        let caught = std::panic::catch_unwind(|| {
            in_parts(&items, 2, |c| {
                assert!(!c.contains(&9), "part with 9");
                c.len()
            })
        });
        assert!(caught.is_err());
    }
}
