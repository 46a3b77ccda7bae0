//! The lock order of the daemon, written once and checked in test builds.
//!
//! Every lock that is ever held while another is taken has a [`Rank`]; a thread may only take
//! a lock of a higher rank than every ranked lock it already holds:
//!
//! | rank | lock | held across host I/O | taken by |
//! |---|---|---|---|
//! | 1 | `CkptFs::gate` (shared by mutations, exclusive by turn switches and rewinds) | yes | `fs/mod.rs` |
//! | 2 | `CkptFs::inodes` (node table) | no | `fs/mod.rs` |
//! | 3 | `CkptFs::dirs` (directory descriptor cache) | no | `fs/mod.rs` |
//! | 4 | `CkptFs::handles` (open handles) | no | `fs/mod.rs` |
//! | 5 | `CkptFs::ghosts` (replaced files kept reachable) | no | `fs/mod.rs` |
//! | 6 | the store (`Capturer`'s mutex around `Store`) | yes | `capture/mod.rs` |
//! | 7 | the blob store's put lock | yes | `store/blob.rs` |
//!
//! Locks not in the table (the pack index, the actor classifier of `capture/actors.rs`, the last
//! rewind report, the stager's queue) are leaves: nothing is taken while one is held.
//!
//! The check: with `debug_assertions` or the test feature `failpoints` (which the test suite
//! builds with), each ranked guard records its rank in a thread-local list while it lives, and
//! taking a lock whose rank is not above every rank held panics with both names: an inversion
//! found by any test instead of a deadlock found by a user. Other builds keep only the rank
//! beside the guard (one byte, no check).

use std::ops::{Deref, DerefMut};

/// A lock's place in the order (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// `CkptFs::gate`.
    Gate = 1,
    /// `CkptFs::inodes`.
    Inodes = 2,
    /// `CkptFs::dirs`.
    Dirs = 3,
    /// `CkptFs::handles`.
    Handles = 4,
    /// `CkptFs::ghosts`.
    Ghosts = 5,
    /// The store behind `Capturer`.
    Store = 6,
    /// `BlobStore`'s put lock.
    BlobPut = 7,
}

#[cfg(any(debug_assertions, feature = "failpoints"))]
mod check {
    use super::Rank;
    use std::cell::RefCell;

    thread_local! {
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    /// Records `rank` as held by this thread, after checking it comes after every rank held.
    pub fn acquire(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(top) = held.iter().max()
                && *top >= rank
            {
                let order = held.clone();
                drop(held);
                panic!("lock order violated: taking {rank:?} while holding {order:?} (see src/lock_order.rs)");
            }
            held.push(rank);
        });
    }

    /// Forgets the most recent hold of `rank` by this thread.
    pub fn release(rank: Rank) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|r| *r == rank) {
                held.remove(i);
            }
        });
    }

    /// The ranks this thread holds now (for tests).
    pub fn held() -> Vec<Rank> {
        HELD.with(|held| held.borrow().clone())
    }
}

#[cfg(not(any(debug_assertions, feature = "failpoints")))]
mod check {
    use super::Rank;
    #[inline(always)]
    pub fn acquire(_: Rank) {}
    #[inline(always)]
    pub fn release(_: Rank) {}
    pub fn held() -> Vec<Rank> {
        Vec::new()
    }
}

/// The ranks the calling thread holds (empty in builds without the check).
pub fn held() -> Vec<Rank> {
    check::held()
}

/// A lock guard that holds its rank while it lives.
#[must_use = "the lock is released when the guard is dropped"]
pub struct Ranked<G> {
    guard: G,
    rank: Rank,
}

impl<G> Ranked<G> {
    /// Takes a lock of `rank` through `lock`, after checking the order.
    pub fn take(rank: Rank, lock: impl FnOnce() -> G) -> Self {
        check::acquire(rank);
        Self {
            guard: lock(),
            rank,
        }
    }
}

impl<G> Drop for Ranked<G> {
    fn drop(&mut self) {
        check::release(self.rank);
    }
}

impl<G: Deref> Deref for Ranked<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut> DerefMut for Ranked<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    fn locks_in_order_are_taken_and_released() {
        let (a, b) = (Mutex::new(1), Mutex::new(2));
        {
            let _a = Ranked::take(Rank::Inodes, || a.lock());
            let _b = Ranked::take(Rank::Handles, || b.lock());
            assert_eq!(held(), vec![Rank::Inodes, Rank::Handles]);
        }
        assert!(held().is_empty());
        // The same lock again after it was released is fine.
        let _a = Ranked::take(Rank::Inodes, || a.lock());
        assert_eq!(held(), vec![Rank::Inodes]);
    }

    #[test]
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    fn an_inversion_panics_naming_both_locks() {
        let (store, handles) = (Mutex::new(()), Mutex::new(()));
        let err = std::thread::spawn(move || {
            let _s = Ranked::take(Rank::Store, || store.lock());
            let _h = Ranked::take(Rank::Handles, || handles.lock());
        })
        .join()
        .expect_err("taking the handle table while holding the store must panic");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("taking Handles while holding [Store]"),
            "{msg}"
        );
    }
}
