//! The operation log: every turn switch, rewind (whole or partial), undo, redo, relabel and
//! prune is an operation with an id, a time and what it changed, replayed from the journal like
//! the rest of the index (pure: lines in, plain data out).
//!
//! Undo and redo work on two stacks, as in jj and editors. `undo` reverts the newest operation
//! on the undo stack; `redo` reverts the newest undo on the redo stack; any other new operation
//! empties the redo stack. Reverting is one rule for every operation that changed the folder
//! (a rewind, a partial rewind, an undo or a redo of one): the folder goes back to exactly what
//! it was before that operation ran, which is, per path, what the operation saved before
//! overwriting it (captures with `undo_of`), else the first capture taken since it began, else
//! the folder as it is (nothing changed the path since). The index goes back with it: the
//! captures taken since the reverted operation leave the index, kept with the undo (or redo)
//! that took them out, so that reverting *that* brings them back. Each capture lives in one
//! place at a time (the index, or the stack entry that holds it), never copied.
//!
//! A turn switch changes no path: its undo makes the previous turn current again, and the
//! captures of the undone turn become the previous turn's (a path the undone turn captured
//! first was, when it began, as it was when the previous turn began, because the previous
//! turn had not touched it: so a rewind to the previous turn stays exact). Its redo makes it
//! current again, and every capture taken since it first began is its own again.
//!
//! Records (journal version 4, docs/FORMAT.md; their types, [`OpBegin`], [`OpCounts`] and
//! [`Pruned`], are with every other record in `journal/record.rs`): `op_begin` / `op_done` around a partial
//! rewind, an undo or a redo (the saves in between carry `undo_of` = the `op_begin` seq),
//! `relabel`, `pruned`, and the counts on `rewind_done`. Older records are operations too:
//! `turn`, `rewind_begin`/`rewind_done` and `undo_done`.

use super::entries::{Capture, TurnInfo};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::journal::{OpBegin, OpCounts, OpKind, PreImage, Pruned};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What an operation was.
#[derive(Clone, Debug, PartialEq)]
pub enum OpWhat {
    /// The store was created with turn `turn` (not undoable).
    Created {
        /// The first turn.
        turn: Turn,
    },
    /// Turn `turn` began after `from`.
    Turn {
        /// The new turn.
        turn: Turn,
        /// The turn current before.
        from: Turn,
    },
    /// The folder was rewound to the start of `to`.
    Rewind {
        /// Target.
        to: Turn,
        /// Current turn before.
        from: Turn,
    },
    /// Some paths were rewound to the start of `to`.
    RewindPaths {
        /// Target.
        to: Turn,
        /// The paths, as the operation's words print them (quoted, as `RelPath` displays).
        paths: Vec<String>,
    },
    /// Operation `of` was undone.
    Undo {
        /// The operation undone.
        of: u64,
    },
    /// Operation `of` was redone.
    Redo {
        /// The operation redone.
        of: u64,
    },
    /// The folder was given back as it was just after operation `of` (`op restore`).
    RestoreOp {
        /// The operation whose end the folder was given.
        of: u64,
    },
    /// Turn `turn` was labelled.
    Relabel {
        /// The turn.
        turn: Turn,
        /// The new label.
        label: Option<String>,
    },
    /// A prune forgot turns and undo history.
    Prune {
        /// Turns forgotten.
        dropped_turns: Vec<Turn>,
        /// Operations that can no longer be undone or redone.
        lost_ops: Vec<u64>,
    },
    /// An operation from before a prune, as text.
    Archived {
        /// What `op log` said of it.
        text: String,
        /// Whether it had been undone.
        undone: bool,
    },
}

/// An operation's state in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpState {
    /// In effect (or, for an undo or redo, done).
    Done,
    /// Reverted by the undo with this id (a redo puts it back to `Done`).
    Undone(u64),
    /// Begun and cut off; the next mount, rewind, undo or redo completes it.
    Unfinished,
}

/// One operation of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct OpEntry {
    /// Its id (`#7`), counted from 1 in the order operations began.
    pub id: u64,
    /// The seq of the record that began it.
    pub seq: Seq,
    /// When it began (Unix seconds).
    pub time: u64,
    /// What it was.
    pub what: OpWhat,
    /// What it changed in the folder, when it changed the folder.
    pub counts: Option<OpCounts>,
    /// Whether it is in effect.
    pub state: OpState,
    /// The journal position just after it, where a capture epoch begins (its `turn`,
    /// `rewind_done` or `op_done` record): the folder as it was then is the first pre-image
    /// recorded after it per path (`crate::store::past`). `None` for an operation that begins
    /// no epoch (a relabel, a prune, an undo written before version 4, one from before a
    /// prune) or that has not finished.
    pub end: Option<Seq>,
}

impl OpEntry {
    /// One line saying what the operation did (`rewind to turn 3 (restored 4, deleted 2)`).
    pub fn describe(&self) -> String {
        let mut s = self.words();
        if let Some(c) = self.counts {
            s += &format!(" (restored {}, deleted {}", c.restored, c.deleted);
            if c.failed > 0 {
                s += &format!(", failed {}", c.failed);
            }
            s.push(')');
        }
        s
    }

    /// What the operation was, without its counts (`rewind to turn 3 (from turn 5)`).
    pub fn words(&self) -> String {
        match &self.what {
            OpWhat::Created { turn } => format!("turn {turn} begins (store created)"),
            OpWhat::Turn { turn, from } => format!("turn {turn} begins (after turn {from})"),
            OpWhat::Rewind { to, from } => format!("rewind to turn {to} (from turn {from})"),
            OpWhat::RewindPaths { to, paths } => {
                format!("rewind {} to turn {to}", paths.join(", "))
            }
            OpWhat::Undo { of } => format!("undo of #{of}"),
            OpWhat::Redo { of } => format!("redo of #{of}"),
            OpWhat::RestoreOp { of } => format!("restore the folder as just after #{of}"),
            OpWhat::Relabel { turn, label } => match label {
                Some(l) => format!("label turn {turn} {l:?}"),
                None => format!("remove the label of turn {turn}"),
            },
            OpWhat::Prune {
                dropped_turns,
                lost_ops,
            } => {
                let n = dropped_turns.len();
                let mut s = match n {
                    0 => "prune: kept every turn".to_string(),
                    1 => "prune: forgot 1 turn".to_string(),
                    n => format!("prune: forgot {n} turns"),
                };
                if !lost_ops.is_empty() {
                    let ids: Vec<String> = lost_ops.iter().map(|i| format!("#{i}")).collect();
                    s += &format!("; {} can no longer be undone or redone", ids.join(", "));
                }
                s
            }
            OpWhat::Archived { text, .. } => text.clone(),
        }
    }

    /// The kind's name in `op log --json`.
    pub fn kind(&self) -> &'static str {
        match self.what {
            OpWhat::Created { .. } => "created",
            OpWhat::Turn { .. } => "turn",
            OpWhat::Rewind { .. } => "rewind",
            OpWhat::RewindPaths { .. } => "rewind_paths",
            OpWhat::Undo { .. } => "undo",
            OpWhat::Redo { .. } => "redo",
            OpWhat::RestoreOp { .. } => "restore_op",
            OpWhat::Relabel { .. } => "relabel",
            OpWhat::Prune { .. } => "prune",
            OpWhat::Archived { .. } => "archived",
        }
    }
}

/// What reverting an operation's application changes.
#[derive(Clone, Debug)]
pub enum Change {
    /// A turn switch (at seq `switch`): undone, its turn's record is kept here (`info`).
    Turn {
        /// Seq of the `turn` record.
        switch: Seq,
        /// The undone turn, while it is undone.
        info: Option<TurnInfo>,
    },
    /// A relabel.
    Relabel {
        /// The turn.
        turn: Turn,
        /// The label before.
        before: Option<String>,
        /// The label after.
        after: Option<String>,
    },
    /// An operation that changed the folder, applied by the op whose begin seq is `begin`.
    Folder {
        /// Seq of the record that began the application (`rewind_begin` or `op_begin`).
        begin: Seq,
        /// What it saved before overwriting (captures with `undo_of`).
        saves: Vec<Capture>,
        /// Captures it took out of the index (those taken since what it reverted, and those
        /// that what it reverted had put back).
        moved: Vec<Capture>,
        /// The seqs of the captures it put back into the index (what it reverted had taken
        /// out): reverting it takes them out again.
        restored: Vec<Seq>,
        /// What it did to the turns.
        effect: Effect,
    },
}

/// What an operation that changed the folder did to the turns.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Nothing (a partial rewind is a change in the current turn).
    Partial,
    /// A whole rewind to `to`, begun at seq `begin`: the turns after `to` and the captures of
    /// `to` and later left the index (held here while it is in effect).
    Rewind {
        /// Target.
        to: Turn,
        /// Seq of its `rewind_begin`.
        begin: Seq,
        /// When turn `to` began before the rewind.
        old_time: u64,
        /// When it began afresh (the rewind).
        new_time: u64,
        /// Where turn `to` began in the journal before the rewind.
        old_began: Seq,
        /// Where it began afresh (the `rewind_done`).
        new_began: Seq,
        /// Turns it retired, while in effect.
        retired_turns: Vec<TurnInfo>,
        /// Captures it retired, while in effect.
        retired: Vec<Capture>,
    },
}

/// An operation in effect (on the undo stack) or undone (on the redo stack).
#[derive(Clone, Debug)]
pub struct Applied {
    /// The operation's id.
    pub op: u64,
    /// The id of the operation whose run is the one to revert: `op` itself, or the redo that
    /// re-applied it (on the undo stack); the undo that reverted it (on the redo stack).
    pub by: u64,
    /// What reverting it changes.
    pub change: Change,
}

/// An `op_begin` not yet followed by its `op_done`.
#[derive(Clone, Debug, PartialEq)]
pub struct UnfinishedOp {
    /// Seq of the `op_begin`.
    pub begin: Seq,
    /// Its id.
    pub id: u64,
    /// What it is.
    pub op: OpBegin,
}

/// The operation log as the index keeps it.
#[derive(Debug, Default)]
pub struct OpLog {
    /// Every operation, oldest first.
    pub ops: Vec<OpEntry>,
    /// Operations in effect that `undo` can revert, newest last.
    pub undo: Vec<Applied>,
    /// Operations undone that `redo` can re-apply, newest last.
    pub redo: Vec<Applied>,
    /// A partial rewind, undo or redo that began and never finished.
    pub unfinished: Option<UnfinishedOp>,
    /// The id the next operation gets.
    next_id: u64,
}

impl OpLog {
    /// The operation with id `id`.
    pub fn get(&self, id: u64) -> Option<&OpEntry> {
        let i = self.ops.binary_search_by_key(&id, |o| o.id).ok()?;
        self.ops.get(i)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut OpEntry> {
        let i = self.ops.binary_search_by_key(&id, |o| o.id).ok()?;
        self.ops.get_mut(i)
    }

    /// Adds an operation and returns its id.
    fn push(&mut self, seq: Seq, time: u64, what: OpWhat, state: OpState) -> u64 {
        self.next_id = self.next_id.max(1);
        let id = self.next_id;
        self.next_id += 1;
        self.ops.push(OpEntry {
            id,
            seq,
            time,
            what,
            counts: None,
            state,
            end: None,
        });
        id
    }

    /// Operation `id` ended at journal position `end`, where a capture epoch begins.
    fn set_end(&mut self, id: u64, end: Seq) {
        if let Some(op) = self.get_mut(id) {
            op.end = Some(end);
        }
    }

    /// The journal position just after operation `id`, from which the folder as it was then
    /// is read (see [`OpEntry::end`]), or why there is none.
    pub fn moment_after(&self, id: u64) -> Result<(&OpEntry, Seq), Unrestorable> {
        let Some(op) = self.get(id) else {
            return Err(Unrestorable::NoSuchOp {
                id,
                newest: self.ops.last().map(|o| o.id),
            });
        };
        match (&op.what, op.state, op.end) {
            (OpWhat::Archived { .. }, ..) => Err(Unrestorable::Archived { id }),
            (_, OpState::Unfinished, _) => Err(Unrestorable::Unfinished { id }),
            (_, _, Some(end)) => Ok((op, end)),
            (_, _, None) => Err(Unrestorable::NoMoment {
                id,
                words: op.words(),
            }),
        }
    }

    /// A new operation (not an undo or redo): nothing undone can be redone any more.
    fn new_op(&mut self, applied: Option<Applied>) {
        self.redo.clear();
        self.undo.extend(applied);
    }

    /// Every capture the stacks hold (for `status`: their pre-images are kept for an undo or
    /// a redo).
    pub fn held_captures(&self) -> Vec<&Capture> {
        let mut out = Vec::new();
        for a in self.undo.iter().chain(self.redo.iter()) {
            if let Change::Folder {
                saves,
                moved,
                effect,
                ..
            } = &a.change
            {
                out.extend(saves.iter().chain(moved.iter()));
                if let Effect::Rewind { retired, .. } = effect {
                    out.extend(retired.iter());
                }
            }
        }
        out
    }

    /// Turns a rewind in effect retired, with the id of that rewind.
    pub fn rewound_turns(&self) -> Vec<(&TurnInfo, u64)> {
        let mut out = Vec::new();
        for a in &self.undo {
            if let Change::Folder {
                effect: Effect::Rewind { retired_turns, .. },
                ..
            } = &a.change
            {
                out.extend(retired_turns.iter().map(|t| (t, a.op)));
            }
        }
        out
    }
}

/// Why the folder as it was just after an operation cannot be had (`op show`, `op restore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrestorable {
    /// No operation has this id.
    NoSuchOp {
        /// The id asked for.
        id: u64,
        /// The newest operation's id.
        newest: Option<u64>,
    },
    /// It is from before a prune: only its words are kept.
    Archived {
        /// Its id.
        id: u64,
    },
    /// It was cut off and has not finished.
    Unfinished {
        /// Its id.
        id: u64,
    },
    /// It changed no path and began no moment of the folder (a relabel, a prune, an undo
    /// written before journal version 4).
    NoMoment {
        /// Its id.
        id: u64,
        /// What it was.
        words: String,
    },
}

impl std::fmt::Display for Unrestorable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchOp {
                id,
                newest: Some(n),
            } => write!(
                f,
                "operation #{id} does not exist (the operations are #1 to #{n}: see `ckpt-mount op log`)"
            ),
            Self::NoSuchOp { id, newest: None } => {
                write!(f, "operation #{id} does not exist (the log is empty)")
            }
            Self::Archived { id } => write!(
                f,
                "operation #{id} is from before a prune: only its words are kept, not the folder as it was then"
            ),
            Self::Unfinished { id } => write!(
                f,
                "operation #{id} was cut off and has not finished: the next mount, rewind, undo or redo completes it"
            ),
            Self::NoMoment { id, words } => write!(
                f,
                "operation #{id} ({words}) changed no path, and the folder just after it is not recorded apart from the operation before it: restore that one"
            ),
        }
    }
}

impl std::error::Error for Unrestorable {}

/// Why a turn could not be relabelled.
#[derive(Debug)]
pub enum RelabelError {
    /// The turn is not live.
    NoSuchTurn {
        /// The turn asked for.
        turn: Turn,
        /// The turns that are.
        known: Vec<Turn>,
    },
    /// The record could not be appended.
    Store(super::StoreError),
}

impl std::fmt::Display for RelabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchTurn { turn, known } => {
                let known: Vec<String> = known.iter().map(Turn::to_string).collect();
                write!(
                    f,
                    "turn {turn} does not exist (turns: {})",
                    known.join(", ")
                )
            }
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RelabelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            Self::NoSuchTurn { .. } => None,
        }
    }
}

/// One row of `ckpt-mount op log`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpRow {
    /// Its id.
    pub id: u64,
    /// When it began (Unix seconds).
    pub time: u64,
    /// The same moment in ISO 8601, UTC.
    pub time_iso: String,
    /// Its kind (`turn`, `rewind`, `rewind_paths`, `undo`, `redo`, `relabel`, `prune`, …).
    pub kind: String,
    /// What it did, in words.
    pub text: String,
    /// `done`, `undone` or `unfinished`.
    pub state: String,
    /// The undo that reverted it, while it is undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_by: Option<u64>,
    /// What it changed in the folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<OpCounts>,
    /// The operation `undo` reverts next / `redo` re-applies next.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_undo: bool,
    /// Whether `redo` re-applies this one next.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_redo: bool,
    /// A rewind's target turn (`redo --all-folders` finds a group's rewind by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<crate::ids::Turn>,
}

/// The operation log `log` (the index's `ops`), newest first.
pub fn op_rows(log: &OpLog) -> Vec<OpRow> {
    let next_undo = log.undo.last().map(|a| a.op);
    let next_redo = log.redo.last().map(|a| a.op);
    log.ops
        .iter()
        .rev()
        .map(|o| {
            let (state, undone_by) = match o.state {
                OpState::Done => match &o.what {
                    OpWhat::Archived { undone: true, .. } => ("undone", None),
                    _ => ("done", None),
                },
                OpState::Undone(by) => ("undone", Some(by)),
                OpState::Unfinished => ("unfinished", None),
            };
            OpRow {
                id: o.id,
                time: o.time,
                time_iso: crate::units::iso8601_utc(crate::units::unix_seconds(o.time)),
                kind: o.kind().to_string(),
                text: o.describe(),
                state: state.to_string(),
                undone_by,
                counts: o.counts,
                next_undo: next_undo == Some(o.id),
                next_redo: next_redo == Some(o.id),
                to: match &o.what {
                    OpWhat::Rewind { to, .. } => Some(*to),
                    _ => None,
                },
            }
        })
        .collect()
}

mod replay;
#[cfg(test)]
mod tests;
