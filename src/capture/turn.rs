//! Turn switches: beginning a turn, and capturing for it the files held open for writing.
//!
//! A file held open for writing can be written in the new turn without another `open`, so
//! nothing on the request path would capture it first; these captures are taken here, at the
//! switch, read and recorded under the store lock (see `mod.rs`). They are apart
//! from the per-request policy because they run once per turn, for a list the caller (the
//! filesystem's handle table) supplies, and decide whether the turn may begin at all.
//!
//! Such a file's writes reach the host without a request, so they cannot be attributed one by
//! one: the processes that opened its descriptors ([`HeldBy`]) are recorded as its actors in
//! the new turn (`held`), which is what `rewind --agent` and the views then say.

use super::{Capturer, What, Who, read_preimage};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::StoreError;
use crate::store::actors::Actor;
use crate::store::journal::{Conversation, Record};
use crate::sys::{Errno, ToErrno};
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::BorrowedFd;

/// Who holds a file open for writing: the process that opened the descriptor, and the turn it
/// was opened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldBy {
    /// The process (thread) that opened it.
    pub pid: u32,
    /// The turn current when it was opened.
    pub opened_in: Turn,
}

/// One name of a file held open for writing: `(parent dir, name, path, who holds it)`, or the
/// error that kept the name from being reached.
pub type HeldName<'a> = Result<(BorrowedFd<'a>, &'a CStr, &'a RelPath, &'a [HeldBy]), Errno>;

/// Visits every name of every file held open for writing. It runs under the store lock, so it
/// must take no lock of its own (`crate::sync`): the filesystem collects the names first.
pub type OpenForWrite<'a> = dyn Fn(&mut dyn FnMut(HeldName<'_>)) + 'a;

/// Who a holder is, as a change: `held` through a descriptor opened in its turn.
fn held(h: HeldBy) -> Who {
    Who::new(
        h.pid,
        What::Held {
            opened_in: h.opened_in,
        },
    )
}

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
    /// A step (`N.S`) names a turn other than the current one.
    StepOutsideTurn {
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
            Self::StepOutsideTurn { current } => write!(
                f,
                "a step N.S begins within the current turn {}: N must be {}",
                current,
                current.get()
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
    /// Where that agent's conversation stood, as its hook's payload said.
    pub conversation: Option<Conversation>,
}

impl TurnStart {
    /// Turn `turn`, unlabelled, begun by hand.
    pub fn new(turn: Turn) -> Self {
        Self {
            turn,
            label: None,
            by: None,
            conversation: None,
        }
    }

    /// Turn `turn` with the label `label`, begun by hand.
    pub fn labelled(turn: Turn, label: Option<String>) -> Self {
        Self {
            turn,
            label,
            by: None,
            conversation: None,
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
        let actors = self.holders(open_for_write);
        let mut store = self.lock_raw();
        let max_blob = self.max_blob;
        let mut failed = Vec::new();
        open_for_write(&mut |named| match named {
            Ok((dir, name, path, held_by)) => {
                let mut who = held_by.iter().map(|h| (held(*h), actors.get(&h.pid)));
                let (first, actor) = who.next().unwrap_or((Who::default(), None));
                let mut r =
                    Self::ensure_locked(&mut store, max_blob, dir, name, path, first, actor);
                for (w, actor) in who {
                    r = r.and_then(|()| Self::attribute(&mut store, path, w, actor));
                }
                if let Err(e) = r {
                    failed.push((Some(path.clone()), e.to_errno()));
                }
            }
            Err(e) => failed.push((None, e)),
        });
        failed
    }

    /// The actor of each process that holds a file open for writing, classified before the
    /// store is locked (classifying may read `/proc`).
    fn holders(&self, open_for_write: &OpenForWrite<'_>) -> HashMap<u32, Actor> {
        let mut pids: Vec<HeldBy> = Vec::new();
        open_for_write(&mut |named| {
            if let Ok((_, _, _, held_by)) = named {
                pids.extend_from_slice(held_by);
            }
        });
        pids.into_iter()
            .filter_map(|h| Some((h.pid, self.actor(held(h))?)))
            .collect()
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
        let TurnStart {
            turn: n,
            label,
            by,
            conversation,
        } = start;
        let actors = self.holders(open_for_write);
        let mut store = self.lock_raw();
        let current = store.index().current_turn();
        if n == current && label.is_none() {
            return Ok(false);
        }
        // The control file and the CLI refuse these first; a request over the socket (another
        // client, an older CLI) is held to the same bound here.
        if !(Turn::new(1)..=MAX_TURN).contains(&n.whole()) {
            return Err(TurnError::OutOfRange);
        }
        if n <= current {
            return Err(TurnError::NotAfter { current });
        }
        // A step lives inside the current turn: `5.3` after `5` or `5.1`, never after `4` (no
        // turn 5 began) nor after `6`.
        if n.is_step() && n.get() != current.get() {
            return Err(TurnError::StepOutsideTurn { current });
        }
        let max_blob = self.max_blob;
        let mut records = vec![Record::Turn {
            turn: n,
            label,
            by,
            conversation,
        }];
        let mut seen = std::collections::HashSet::new();
        let mut failed = None;
        let base = store.index().last_seq.get();
        open_for_write(&mut |named| {
            let read = named.and_then(|(dir, name, path, held_by)| {
                if !seen.insert(path.clone()) {
                    return Ok(());
                }
                let pre = read_preimage(store.blobs(), dir, name, max_blob)?;
                let first = held_by.first();
                records.push(Record::Capture {
                    turn: n,
                    path: path.clone(),
                    pre,
                    undo_of: None,
                    pid: first.map(|h| h.pid),
                    comm: first
                        .and_then(|h| actors.get(&h.pid))
                        .map(|a| a.comm.clone()),
                });
                // The seq this capture gets when the records are appended.
                let capture = Seq::new(base + records.len() as u64);
                let mut recorded: Vec<&Actor> = Vec::new();
                for h in held_by {
                    let Some(actor) = actors.get(&h.pid) else {
                        continue;
                    };
                    if !recorded.contains(&actor) {
                        recorded.push(actor);
                        records.push(Record::Touched(super::touch(capture, held(*h), actor)));
                    }
                }
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
