//! Every lock of the daemon: [`Mutex`] and [`RwLock`], poison-tolerant (a panic while one is
//! held ends the daemon; what it guarded is taken as it is), each either *ranked* (its place in
//! the lock order below, checked in test builds) or a *leaf* (no ranked lock is taken while it
//! is held, so a leaf never takes part in a deadlock of the order). Nothing else in the crate locks a `std::sync` lock.
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
//! | 7 | the blob store's put lock | yes | `store/blob/` |
//!
//! The leaves (some taken while another leaf is held, as the pack writer then the pack index;
//! none while a ranked lock is taken): the pack index and its readers and writer, the blob store's shard descriptors,
//! its loose-blob set and tracking, the actor classifier of `capture/actors.rs`, the stager's
//! queue, the last rewind report, a control file's snapshot, the kernel passthrough backing
//! ids.
//!
//! The check: with `debug_assertions` or the test feature `failpoints` (which the test suite
//! builds with), each ranked guard records its rank in a thread-local list while it lives, and
//! taking a lock whose rank is not above every rank held panics with both names: an inversion
//! found by any test instead of a deadlock found by a user. Other builds keep only the rank
//! beside the guard (two bytes, no check).

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
                panic!(
                    "lock order violated: taking {rank:?} while holding {order:?} (see src/sync.rs)"
                );
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

/// A lock guard that holds its rank (if it has one) while it lives.
#[must_use = "the lock is released when the guard is dropped"]
pub struct Ranked<G> {
    guard: G,
    rank: Option<Rank>,
}

impl<G> Ranked<G> {
    /// Takes a lock of `rank` (`None`: a leaf) through `lock`, after checking the order.
    fn take(rank: Option<Rank>, lock: impl FnOnce() -> G) -> Self {
        if let Some(rank) = rank {
            check::acquire(rank);
        }
        Self {
            guard: lock(),
            rank,
        }
    }
}

impl<G> Drop for Ranked<G> {
    fn drop(&mut self) {
        if let Some(rank) = self.rank {
            check::release(rank);
        }
    }
}

/// A mutual-exclusion lock (see the module header).
pub struct Mutex<T: ?Sized> {
    rank: Option<Rank>,
    inner: std::sync::Mutex<T>,
}

/// A [`Mutex`], locked.
pub type MutexGuard<'a, T> = Ranked<std::sync::MutexGuard<'a, T>>;

impl<T> Mutex<T> {
    /// A lock of the order, at `rank`.
    pub const fn ranked(rank: Rank, value: T) -> Self {
        Self {
            rank: Some(rank),
            inner: std::sync::Mutex::new(value),
        }
    }

    /// A leaf lock: nothing is taken while it is held.
    pub const fn leaf(value: T) -> Self {
        Self {
            rank: None,
            inner: std::sync::Mutex::new(value),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks, after checking the order; what a panicking holder left is taken as it is.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        Ranked::take(self.rank, || {
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    /// The value, through the exclusive borrow that needs no lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<T: ?Sized> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("rank", &self.rank)
            .finish_non_exhaustive()
    }
}

/// A reader-writer lock (see the module header).
pub struct RwLock<T: ?Sized> {
    rank: Option<Rank>,
    inner: std::sync::RwLock<T>,
}

/// A [`RwLock`], locked for reading.
pub type ReadGuard<'a, T> = Ranked<std::sync::RwLockReadGuard<'a, T>>;

/// A [`RwLock`], locked for writing.
pub type WriteGuard<'a, T> = Ranked<std::sync::RwLockWriteGuard<'a, T>>;

impl<T> RwLock<T> {
    /// A lock of the order, at `rank`.
    pub const fn ranked(rank: Rank, value: T) -> Self {
        Self {
            rank: Some(rank),
            inner: std::sync::RwLock::new(value),
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, after checking the order.
    pub fn read(&self) -> ReadGuard<'_, T> {
        Ranked::take(self.rank, || {
            self.inner
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    /// Locks for writing, after checking the order.
    pub fn write(&self) -> WriteGuard<'_, T> {
        Ranked::take(self.rank, || {
            self.inner
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
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

    #[test]
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    fn locks_in_order_are_taken_and_released() {
        let (a, b) = (
            RwLock::ranked(Rank::Inodes, 1),
            Mutex::ranked(Rank::Handles, 2),
        );
        let leaf = Mutex::leaf(3);
        {
            let _a = a.write();
            let _b = b.lock();
            let _leaf = leaf.lock();
            assert_eq!(
                held(),
                vec![Rank::Inodes, Rank::Handles],
                "a leaf is not ranked"
            );
        }
        assert!(held().is_empty());
        // The same lock again after it was released is fine.
        let _a = a.read();
        assert_eq!(held(), vec![Rank::Inodes]);
    }

    #[test]
    fn a_lock_a_panic_poisoned_still_gives_its_value() {
        let m = std::sync::Arc::new(Mutex::leaf(7));
        let held = std::sync::Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = held.lock();
            panic!("poisons the lock");
        })
        .join();
        assert_eq!(*m.lock(), 7);
    }

    #[test]
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    fn an_inversion_panics_naming_both_locks() {
        let (store, handles) = (
            Mutex::ranked(Rank::Store, ()),
            Mutex::ranked(Rank::Handles, ()),
        );
        let err = std::thread::spawn(move || {
            let _s = store.lock();
            let _h = handles.lock();
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
