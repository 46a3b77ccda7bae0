//! Turn switches: beginning a turn, and capturing for it the files held open for writing.
//!
//! A file held open for writing can be written in the new turn without another `open`, so
//! nothing on the request path would capture it first; these captures are taken here, at the
//! switch, read and recorded under the store lock (see `mod.rs`). They are apart
//! from the per-request policy because they run once per turn, for a list the caller (the
//! filesystem's handle table) supplies, and decide whether the turn may begin at all.

use super::{Capturer, Who, read_preimage};
use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::StoreError;
use crate::store::journal::Record;
use crate::sys::{Errno, ToErrno};
use std::ffi::CStr;
use std::os::fd::BorrowedFd;

/// One name of a file held open for writing: `(parent dir, name, path)`, or the error that
/// kept the name from being reached.
pub type HeldName<'a> = Result<(BorrowedFd<'a>, &'a CStr, &'a RelPath), Errno>;

/// Visits every name of every file held open for writing. It runs under the store lock, so it
/// must take no lock of its own (`crate::sync`): the filesystem collects the names first.
pub type OpenForWrite<'a> = dyn Fn(&mut dyn FnMut(HeldName<'_>)) + 'a;

/// Why a turn could not begin.
#[derive(Debug)]
pub enum TurnError {
    /// The number is 0 or greater than [`MAX_TURN`].
    OutOfRange,
    /// The number is not greater than the current turn.
    NotAfter {
        /// The current turn.
        current: Turn,
    },
    /// A file held open for writing could not be captured for the new turn.
    HeldOpen(Errno),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfRange => write!(f, "a turn is a whole number from 1 to {MAX_TURN}"),
            Self::NotAfter { current } => write!(
                f,
                "a new turn must be greater than the current turn {current}"
            ),
            Self::HeldOpen(e) => write!(
                f,
                "a file held open for writing cannot be captured for the new turn: {e}"
            ),
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

/// Largest number a turn may begin with: 2^32 - 1 (4,294,967,295). A new turn must be greater
/// than the current one, so one number near the old bound (2^53 - 1, the largest JSON readers
/// keep exact) left no later turn to begin; this bound leaves room forever for turns counted
/// one by one (a turn a second for 136 years) and for turns numbered by Unix time (until 2106),
/// stays exact in every JSON reader, and is what the control file, `ckpt-mount turn`, the hooks
/// and the daemon all refuse above.
pub const MAX_TURN: Turn = Turn::new(u32::MAX as u64);

/// A turn to begin: its number, its label, and the agent whose hook begins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStart {
    /// The new turn's number.
    pub turn: Turn,
    /// Its label (`echo "N label" > .ckpt/turn`, a hook's prompt).
    pub label: Option<String>,
    /// The agent whose hook begins it, by name (none: begun by hand).
    pub by: Option<String>,
}

impl TurnStart {
    /// Turn `turn`, unlabelled, begun by hand.
    pub fn new(turn: Turn) -> Self {
        Self {
            turn,
            label: None,
            by: None,
        }
    }

    /// Turn `turn` with the label `label`, begun by hand.
    pub fn labelled(turn: Turn, label: Option<String>) -> Self {
        Self {
            turn,
            label,
            by: None,
        }
    }
}

impl Capturer {
    /// Captures, for the current turn, the files held open for writing (after a rewind).
    /// Returns the paths that could not be captured, with why (a name that could not be
    /// reached is reported as `?`).
    pub fn begin_turn_captures(
        &self,
        open_for_write: &OpenForWrite<'_>,
    ) -> Vec<(Option<RelPath>, Errno)> {
        let mut store = self.lock_raw();
        let max_blob = self.max_blob;
        let mut failed = Vec::new();
        open_for_write(&mut |named| match named {
            Ok((dir, name, path)) => {
                if let Err(e) =
                    Self::ensure_locked(&mut store, max_blob, dir, name, path, Who::default(), None)
                {
                    failed.push((Some(path.clone()), e.to_errno()));
                }
            }
            Err(e) => failed.push((None, e)),
        });
        failed
    }

    /// Begins the turn `start` says; `open_for_write` lists the files held open for writing,
    /// captured for the new turn at once because their next writes need no `open`. Their
    /// pre-images are read first: if one cannot be, the turn does not begin (nothing is
    /// written), because its writes in the new turn could not be rewound.
    pub fn begin_turn(
        &self,
        start: TurnStart,
        open_for_write: &OpenForWrite<'_>,
    ) -> Result<bool, TurnError> {
        let TurnStart { turn: n, label, by } = start;
        let mut store = self.lock_raw();
        let current = store.index().current_turn();
        if n == current && label.is_none() {
            return Ok(false);
        }
        // The control file and the CLI refuse these first; a request over the socket (another
        // client, an older CLI) is held to the same bound here.
        if !(Turn::new(1)..=MAX_TURN).contains(&n) {
            return Err(TurnError::OutOfRange);
        }
        if n <= current {
            return Err(TurnError::NotAfter { current });
        }
        let max_blob = self.max_blob;
        let mut records = vec![Record::Turn { turn: n, label, by }];
        let mut seen = std::collections::HashSet::new();
        let mut failed = None;
        open_for_write(&mut |named| {
            let read = named.and_then(|(dir, name, path)| {
                if !seen.insert(path.clone()) {
                    return Ok(());
                }
                let pre = read_preimage(store.blobs(), dir, name, max_blob)?;
                records.push(Record::Capture {
                    turn: n,
                    path: path.clone(),
                    pre,
                    undo_of: None,
                    pid: None,
                    comm: None,
                });
                Ok(())
            });
            if let Err(e) = read {
                failed.get_or_insert(e);
            }
        });
        if let Some(e) = failed {
            log::warn!(target: "ckpt::turn", "turn {n} not begun: a file open for writing cannot be captured: {e}");
            return Err(TurnError::HeldOpen(e));
        }
        store.append_all(records).map_err(TurnError::Store)?;
        log::info!(target: "ckpt::turn", "turn {n} begins");
        Ok(true)
    }
}
