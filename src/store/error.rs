//! [`StoreError`]: why the store could not be used (its errno: `src/errno.rs`).
//!
//! Kept apart from the store handle so that every part of the store (opening, appending,
//! staged captures, pruning) reports failures the same way, through [`io`] for system calls.
//! It sits below them: what it names comes from files that use nothing of it (the journal's
//! `ParseError`, the lock's failure, the layout's refusal in `refusal.rs`, `version.rs`).

use super::journal::ParseError;
use super::lock::{LOCK_WAIT, LockFailed, LockHolder};
use super::refusal::LayoutError;
use super::version::STORE_VERSION;
use crate::sys::Errno;
use std::fmt;

/// Why the store could not be used.
#[derive(Debug)]
pub enum StoreError {
    /// A system call failed.
    Io {
        /// What was being done.
        what: String,
        /// The errno.
        errno: Errno,
    },
    /// The store was written by an unknown format version.
    Version(String),
    /// The journal is damaged.
    Journal(ParseError),
    /// Another process held the store's lock for all of [`LOCK_WAIT`].
    Locked {
        /// Who holds it, when `/proc/locks` names it.
        holder: Option<LockHolder>,
    },
    /// No store exists in this folder.
    Missing,
    /// What `.ckpt/` holds is not laid out as a store this build opens as it is.
    Layout(LayoutError),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { what, errno } => write!(f, "{what}: {errno}"),
            Self::Version(v) => write!(
                f,
                "the store has format {:?}; this ckpt-mount reads {:?}",
                v.trim(),
                STORE_VERSION.trim()
            ),
            Self::Journal(e) => write!(f, "{e}"),
            Self::Locked {
                holder: Some(holder),
            } => write!(
                f,
                "the store is in use by another ckpt-mount process: {holder} still holds its lock after {} s",
                LOCK_WAIT.as_secs()
            ),
            Self::Locked { holder: None } => write!(
                f,
                "the store is in use by another ckpt-mount process (its lock is still held after {} s; /proc/locks names no holder in this pid namespace)",
                LOCK_WAIT.as_secs()
            ),
            Self::Missing => write!(f, "no ckpt-mount store in this folder"),
            Self::Layout(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<LockFailed> for StoreError {
    fn from(e: LockFailed) -> Self {
        match e {
            LockFailed::Io(what, errno) => io(what)(errno),
            LockFailed::Held(holder) => Self::Locked { holder },
        }
    }
}

/// Turns the errno of a failed system call into a [`StoreError::Io`] saying `what` was being
/// done: `sys::fsync(fd).map_err(io("sync journal"))?`.
pub(super) fn io(what: impl Into<String>) -> impl FnOnce(Errno) -> StoreError {
    let what = what.into();
    move |errno| StoreError::Io { what, errno }
}
