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
//! Records (journal version 4, docs/FORMAT.md): `op_begin` / `op_done` around a partial
//! rewind, an undo or a redo (the saves in between carry `undo_of` = the `op_begin` seq),
//! `relabel`, `pruned`, and the counts on `rewind_done`. Older records are operations too:
//! `turn`, `rewind_begin`/`rewind_done` and `undo_done`.

use super::index::{Capture, Index, TurnInfo};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What an operation changed in the folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    /// Paths given back an earlier state.
    pub restored: u64,
    /// Paths removed.
    pub deleted: u64,
    /// Paths that could not be restored.
    pub failed: u64,
}

/// Which operation an `op_begin` record begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// `rewind N -- PATH…`.
    RewindPaths,
    /// `undo`.
    Undo,
    /// `redo`.
    Redo,
}

/// The payload of an `op_begin` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpBegin {
    /// What begins.
    pub kind: OpKind,
    /// A partial rewind's target turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Turn>,
    /// A partial rewind's paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<RelPath>,
    /// The id of the operation an undo or redo reverts or re-applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
}

/// An operation from before a prune, kept as text in the `pruned` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchivedOp {
    /// Its id.
    pub id: u64,
    /// When it ran (Unix seconds).
    pub time: u64,
    /// What it was, as `op log` said.
    pub text: String,
    /// Whether it was undone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
}

/// The payload of a `pruned` record, the last line of a journal a prune rewrote: the lines
/// before it restate the history that was kept (no operation of their own).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    /// The operation log before the prune (ids and texts), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archived: Vec<ArchivedOp>,
    /// The prune's own id.
    pub id: u64,
    /// Turns that can no longer be rewound to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_turns: Vec<u64>,
    /// Operations that could be undone (or redone) before, and no longer can.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_ops: Vec<u64>,
}

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
        /// The paths.
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
        dropped_turns: Vec<u64>,
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
            OpWhat::Relabel { turn, label } => match label {
                Some(l) => format!("label turn {turn} {l:?}"),
                None => format!("remove the label of turn {turn}"),
            },
            OpWhat::Prune {
                dropped_turns,
                lost_ops,
            } => {
                let n = dropped_turns.len();
                let mut s = format!("prune: forgot {n} turn{}", if n == 1 { "" } else { "s" });
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
        });
        id
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

/// The targets that revert a folder change applied at `begin` that saved `saves`: per path,
/// its save, else its first capture since `begin` (journal order).
fn revert_targets(index: &Index, begin: Seq, saves: &[Capture]) -> Vec<(RelPath, PreImage)> {
    let mut seen: HashSet<&RelPath> = HashSet::new();
    let mut out = Vec::new();
    let since = index.captures.partition_point(|c| c.seq <= begin);
    for c in saves.iter().chain(index.captures[since..].iter()) {
        if seen.insert(&c.path) {
            out.push((c.path.clone(), c.pre.clone()));
        }
    }
    out
}

impl Index {
    /// What `undo` (or, with `redo`, `redo`) would work on: the stack entry, and, when it
    /// changed the folder, the targets that give the folder back its state before it ran.
    pub fn revert_plan(&self, redo: bool) -> Option<(&Applied, Vec<(RelPath, PreImage)>)> {
        let top = if redo {
            self.ops.redo.last()?
        } else {
            self.ops.undo.last()?
        };
        let targets = match &top.change {
            Change::Folder { begin, saves, .. } => revert_targets(self, *begin, saves),
            _ => Vec::new(),
        };
        Some((top, targets))
    }

    /// `turn`: an operation, undoable unless it is the store's first turn.
    pub(super) fn op_turn(&mut self, seq: Seq, time: u64, turn: Turn, from: Option<Turn>) {
        match from {
            None => {
                self.ops
                    .push(seq, time, OpWhat::Created { turn }, OpState::Done);
            }
            Some(from) => {
                let id = self
                    .ops
                    .push(seq, time, OpWhat::Turn { turn, from }, OpState::Done);
                self.ops.new_op(Some(Applied {
                    op: id,
                    by: id,
                    change: Change::Turn {
                        switch: seq,
                        info: None,
                    },
                }));
            }
        }
    }

    /// `rewind_done`: the whole rewind begun at `begin` is in effect.
    pub(super) fn op_rewind_done(
        &mut self,
        begin: Seq,
        from: Turn,
        effect: Effect,
        saves: Vec<Capture>,
    ) {
        let Effect::Rewind { to, new_time, .. } = &effect else {
            return;
        };
        let (to, time) = (*to, *new_time);
        let id = self
            .ops
            .push(begin, time, OpWhat::Rewind { to, from }, OpState::Done);
        self.ops.new_op(Some(Applied {
            op: id,
            by: id,
            change: Change::Folder {
                begin,
                saves,
                moved: Vec::new(),
                restored: Vec::new(),
                effect,
            },
        }));
    }

    /// Sets the counts of the last operation begun at `begin`.
    pub(super) fn op_counts(&mut self, begin: Seq, counts: Option<super::ops::OpCounts>) {
        if let Some(op) = self.ops.ops.iter_mut().rev().find(|o| o.seq == begin) {
            op.counts = counts;
        }
    }

    /// `undo_done` (written before version 4): the rewind begun at `rewind` was undone, and the
    /// work done after it left the index (kept for no redo).
    pub(super) fn op_legacy_undo(&mut self, seq: Seq, time: u64, rewind: Seq) {
        let matches = self.ops.undo.last().is_some_and(|a| {
            matches!(&a.change, Change::Folder { effect: Effect::Rewind { begin, .. }, .. } if *begin == rewind)
        });
        if !matches {
            return;
        }
        let Some(top) = self.ops.undo.pop() else {
            return;
        };
        let of = top.op;
        let id = self.ops.push(seq, time, OpWhat::Undo { of }, OpState::Done);
        if let Some(op) = self.ops.get_mut(of) {
            op.state = OpState::Undone(id);
        }
        let _ = self.revert(top, seq);
        self.ops.redo.clear();
        // As this record always meant: every path the current turn captured stays captured.
        let cur = self.current_turn();
        self.captured_now = self
            .captures
            .iter()
            .filter(|c| c.turn == cur)
            .map(|c| c.path.clone())
            .collect();
    }

    /// `op_begin`.
    pub(super) fn op_begin(&mut self, seq: Seq, time: u64, op: &OpBegin) {
        let what = match op.kind {
            OpKind::RewindPaths => OpWhat::RewindPaths {
                to: op.to.unwrap_or(Turn(0)),
                paths: op.paths.iter().map(ToString::to_string).collect(),
            },
            OpKind::Undo => OpWhat::Undo {
                of: op.target.unwrap_or(0),
            },
            OpKind::Redo => OpWhat::Redo {
                of: op.target.unwrap_or(0),
            },
        };
        let id = self.ops.push(seq, time, what, OpState::Unfinished);
        self.ops.unfinished = Some(UnfinishedOp {
            begin: seq,
            id,
            op: op.clone(),
        });
        self.unfinished_saved.clear();
        if op.kind == OpKind::RewindPaths {
            // Paths changed after the partial rewind are captured again, so that its undo
            // finds their state just after it (the captures it writes itself count).
            self.epoch = seq;
            self.captured_now.clear();
        }
    }

    /// `op_done`: the operation begun at `begin` finished.
    pub(super) fn op_done(&mut self, begin: Seq, counts: Option<OpCounts>) {
        let Some(u) = self.ops.unfinished.take() else {
            return;
        };
        if u.begin != begin {
            self.ops.unfinished = Some(u);
            return;
        }
        let saves = std::mem::take(&mut self.unfinished_saved);
        if let Some(op) = self.ops.get_mut(u.id) {
            op.state = OpState::Done;
            op.counts = counts;
        }
        match u.op.kind {
            OpKind::RewindPaths => self.ops.new_op(Some(Applied {
                op: u.id,
                by: u.id,
                change: Change::Folder {
                    begin,
                    saves,
                    moved: Vec::new(),
                    restored: Vec::new(),
                    effect: Effect::Partial,
                },
            })),
            OpKind::Undo => self.undo_top(u.id, u.op.target, begin, saves),
            OpKind::Redo => self.redo_top(u.id, u.op.target, begin, saves),
        }
    }

    /// An undo (id `id`, begun at `begin`, having saved `saves`) of the top of the undo stack,
    /// which must be operation `target`.
    fn undo_top(&mut self, id: u64, target: Option<u64>, begin: Seq, saves: Vec<Capture>) {
        if self.ops.undo.last().map(|a| a.op) != target {
            return;
        }
        let Some(top) = self.ops.undo.pop() else {
            return;
        };
        let op = top.op;
        if let Some(e) = self.ops.get_mut(op) {
            e.state = OpState::Undone(id);
        }
        let change = self.revert(top, begin);
        let change = match change {
            Change::Folder {
                moved,
                restored,
                effect,
                begin: b,
                ..
            } => Change::Folder {
                begin: b,
                saves,
                moved,
                restored,
                effect,
            },
            other => other,
        };
        self.ops.redo.push(Applied { op, by: id, change });
    }

    /// A redo (id `id`, begun at `begin`, having saved `saves`) of the top of the redo stack.
    fn redo_top(&mut self, id: u64, target: Option<u64>, begin: Seq, saves: Vec<Capture>) {
        if self.ops.redo.last().map(|a| a.op) != target {
            return;
        }
        let Some(top) = self.ops.redo.pop() else {
            return;
        };
        let op = top.op;
        if let Some(e) = self.ops.get_mut(op) {
            e.state = OpState::Done;
        }
        let change = self.reapply(top, begin);
        let change = match change {
            Change::Folder {
                moved,
                restored,
                effect,
                begin: b,
                ..
            } => Change::Folder {
                begin: b,
                saves,
                moved,
                restored,
                effect,
            },
            other => other,
        };
        self.ops.undo.push(Applied { op, by: id, change });
    }

    /// Reverts `applied` in the index, by the undo begun at `at`: returns what reverting the
    /// undo (a redo) changes (for a folder change, `saves` is left for the caller to fill).
    fn revert(&mut self, applied: Applied, at: Seq) -> Change {
        match applied.change {
            Change::Turn { switch, .. } => {
                let info = self.undo_turn_switch(switch);
                Change::Turn { switch, info }
            }
            Change::Relabel {
                turn,
                before,
                after,
            } => {
                self.set_label(turn, before.clone());
                Change::Relabel {
                    turn,
                    before,
                    after,
                }
            }
            Change::Folder {
                begin,
                moved,
                restored,
                effect,
                ..
            } => {
                let (taken, restored) = self.swap_captures(begin, &restored, moved);
                let effect = self.unretire(effect);
                self.restart_epoch(at);
                Change::Folder {
                    begin: at,
                    saves: Vec::new(),
                    moved: taken,
                    restored,
                    effect,
                }
            }
        }
    }

    /// Re-applies `undone` in the index, by the redo begun at `at` (the mirror of `revert`).
    fn reapply(&mut self, undone: Applied, at: Seq) -> Change {
        match undone.change {
            Change::Turn { switch, info } => {
                self.redo_turn_switch(switch, info);
                Change::Turn { switch, info: None }
            }
            Change::Relabel {
                turn,
                before,
                after,
            } => {
                self.set_label(turn, after.clone());
                Change::Relabel {
                    turn,
                    before,
                    after,
                }
            }
            Change::Folder {
                begin,
                moved,
                restored,
                effect,
                ..
            } => {
                let (taken, restored) = self.swap_captures(begin, &restored, moved);
                let effect = self.retire(effect);
                self.restart_epoch(at);
                Change::Folder {
                    begin: at,
                    saves: Vec::new(),
                    moved: taken,
                    restored,
                    effect,
                }
            }
        }
    }

    /// Reverting an application begun at `begin` that put back the captures `restored` and
    /// took out `moved`: the captures taken since it began and those it put back leave the
    /// index (returned, to be put back when this is reverted in turn), and `moved` comes back
    /// (its seqs returned, to be taken out then).
    fn swap_captures(
        &mut self,
        begin: Seq,
        restored: &[Seq],
        moved: Vec<Capture>,
    ) -> (Vec<Capture>, Vec<Seq>) {
        let mut taken = self.take_captures_since(begin);
        if !restored.is_empty() {
            let restored: HashSet<Seq> = restored.iter().copied().collect();
            let (out, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.captures)
                .into_iter()
                .partition(|c| restored.contains(&c.seq));
            self.captures = kept;
            taken.extend(out);
            taken.sort_by_key(|c| c.seq);
        }
        let back = moved.iter().map(|c| c.seq).collect();
        self.put_back(moved);
        (taken, back)
    }

    /// The captures taken after `seq`, out of the index.
    fn take_captures_since(&mut self, seq: Seq) -> Vec<Capture> {
        let at = self.captures.partition_point(|c| c.seq <= seq);
        // Every staged pre-image is stored before an undo or redo runs (`Store::settle`).
        self.captures.split_off(at)
    }

    /// Captures back into the index, in journal order.
    fn put_back(&mut self, caps: Vec<Capture>) {
        if caps.is_empty() {
            return;
        }
        self.captures.extend(caps);
        self.captures.sort_by_key(|c| c.seq);
    }

    /// Nothing is captured since `seq`: the next change of any path is captured again.
    fn restart_epoch(&mut self, seq: Seq) {
        self.epoch = seq;
        self.recompute_captured_now();
    }

    /// `captured_now`: the paths captured since the epoch began.
    pub(super) fn recompute_captured_now(&mut self) {
        let at = self.captures.partition_point(|c| c.seq <= self.epoch);
        self.captured_now = self.captures[at..].iter().map(|c| c.path.clone()).collect();
    }

    /// A whole rewind's retired turns and captures come back; turn `to` gets its old start.
    fn unretire(&mut self, effect: Effect) -> Effect {
        let Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            retired_turns,
            retired,
        } = effect
        else {
            return Effect::Partial;
        };
        self.put_back(retired);
        self.turns.retain(|t| t.turn <= to);
        if let Some(t) = self.turns.iter_mut().find(|t| t.turn == to) {
            t.time = old_time;
        }
        self.turns.extend(retired_turns);
        self.turns.sort_by_key(|t| t.turn);
        Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            retired_turns: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// A whole rewind's effect again: the turns after `to` and the captures of `to` and later
    /// taken before it began leave the index.
    fn retire(&mut self, effect: Effect) -> Effect {
        let Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            ..
        } = effect
        else {
            return Effect::Partial;
        };
        let (retired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.captures)
            .into_iter()
            .partition(|c| c.turn >= to && c.seq < begin);
        self.captures = kept;
        let (retired_turns, kept_turns): (Vec<_>, Vec<_>) = std::mem::take(&mut self.turns)
            .into_iter()
            .partition(|t| t.turn > to);
        self.turns = kept_turns;
        if let Some(t) = self.turns.iter_mut().find(|t| t.turn == to) {
            t.time = new_time;
        }
        Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            retired_turns,
            retired,
        }
    }

    /// Undoes the turn switch recorded at `switch`: the current turn leaves, its captures
    /// become the previous turn's. Returns the turn that left (`None`: nothing to undo).
    fn undo_turn_switch(&mut self, switch: Seq) -> Option<TurnInfo> {
        if self.turns.len() < 2 {
            return None;
        }
        let info = self.turns.pop()?;
        let prev = self.current_turn();
        for c in &mut self.captures {
            if c.turn == info.turn {
                c.turn = prev;
            }
        }
        // Paths the undone turn captured stay captured; any other path changed from now on
        // is captured again, so that a redo finds it.
        self.epoch = switch;
        self.recompute_captured_now();
        Some(info)
    }

    /// Redoes the turn switch recorded at `switch`: `info` is current again, with every
    /// capture taken since it first began.
    fn redo_turn_switch(&mut self, switch: Seq, info: Option<TurnInfo>) {
        let Some(info) = info else { return };
        let prev = self.current_turn();
        for c in &mut self.captures {
            if c.turn == prev && c.seq > switch {
                c.turn = info.turn;
            }
        }
        self.turns.push(info);
        self.epoch = switch;
        self.recompute_captured_now();
    }

    fn set_label(&mut self, turn: Turn, label: Option<String>) {
        if let Some(t) = self.turns.iter_mut().find(|t| t.turn == turn) {
            t.label = label;
        }
    }

    /// `relabel`: an operation, undoable.
    pub(super) fn op_relabel(&mut self, seq: Seq, time: u64, turn: Turn, label: Option<String>) {
        let Some(before) = self
            .turns
            .iter()
            .find(|t| t.turn == turn)
            .map(|t| t.label.clone())
        else {
            return;
        };
        self.set_label(turn, label.clone());
        let id = self.ops.push(
            seq,
            time,
            OpWhat::Relabel {
                turn,
                label: label.clone(),
            },
            OpState::Done,
        );
        self.ops.new_op(Some(Applied {
            op: id,
            by: id,
            change: Change::Relabel {
                turn,
                before,
                after: label,
            },
        }));
    }

    /// `pruned`: the history before it is text; nothing can be undone or redone across it.
    pub(super) fn op_pruned(&mut self, seq: Seq, time: u64, p: &Pruned) {
        self.ops.ops = p
            .archived
            .iter()
            .map(|a| OpEntry {
                id: a.id,
                seq: Seq(0),
                time: a.time,
                what: OpWhat::Archived {
                    text: a.text.clone(),
                    undone: a.undone,
                },
                counts: None,
                state: OpState::Done,
            })
            .collect();
        self.ops.next_id = p.id;
        self.ops.undo.clear();
        self.ops.redo.clear();
        self.ops.push(
            seq,
            time,
            OpWhat::Prune {
                dropped_turns: p.dropped_turns.clone(),
                lost_ops: p.lost_ops.clone(),
            },
            OpState::Done,
        );
    }
}

/// Appends a `relabel` of `turn` to the store (refused for a turn that is not live).
pub fn relabel(store: &mut super::Store, turn: Turn, label: Option<String>) -> Result<(), String> {
    if !store.index().has_turn(turn) {
        let known: Vec<String> = store
            .index()
            .turns
            .iter()
            .map(|t| t.turn.to_string())
            .collect();
        return Err(format!(
            "turn {turn} does not exist (turns: {})",
            known.join(", ")
        ));
    }
    store
        .append(super::journal::Record::Relabel { turn, label })
        .map(|_| ())
        .map_err(|e| e.to_string())
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
}

/// The operation log, newest first.
pub fn op_rows(index: &Index) -> Vec<OpRow> {
    let next_undo = index.ops.undo.last().map(|a| a.op);
    let next_redo = index.ops.redo.last().map(|a| a.op);
    index
        .ops
        .ops
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
            }
        })
        .collect()
}

/// Replays of hand-made records: no store, no folder.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::index::tests::{cap, file, rp};
    use crate::store::journal::{Line, Record};

    /// Applies `rec` as the next line at time `seq * 10`; returns its seq.
    fn push(index: &mut Index, rec: Record) -> Seq {
        let seq = Seq(index.last_seq.0 + 1);
        index.apply(&Line {
            v: rec.version(),
            seq,
            time: seq.0 * 10,
            rec,
        });
        seq
    }

    fn turn(n: u64) -> Record {
        Record::Turn {
            turn: Turn(n),
            label: None,
        }
    }

    fn undo_or_redo(index: &mut Index, kind: OpKind) {
        let target = match kind {
            OpKind::Redo => index.ops.redo.last().map(|a| a.op),
            _ => index.ops.undo.last().map(|a| a.op),
        };
        let b = push(
            index,
            Record::OpBegin(OpBegin {
                kind,
                to: None,
                paths: Vec::new(),
                target,
            }),
        );
        push(
            index,
            Record::OpDone {
                begin: b,
                counts: None,
            },
        );
    }

    fn turns_of(index: &Index) -> Vec<u64> {
        index.turns.iter().map(|t| t.turn.0).collect()
    }

    #[test]
    fn undoing_a_turn_switch_merges_its_captures_and_redo_splits_them_again() {
        let mut index = Index::default();
        push(&mut index, turn(1));
        push(&mut index, cap(1, "a", file("a1")));
        push(&mut index, turn(2));
        push(&mut index, cap(2, "a", file("a2")));
        push(&mut index, cap(2, "b", PreImage::Absent));
        undo_or_redo(&mut index, OpKind::Undo);
        assert_eq!(turns_of(&index), vec![1]);
        // Turn 1's own capture of `a` is older and wins; `b` is turn 1's now.
        assert_eq!(
            index.plan_targets(Turn(1)),
            vec![(rp("a"), file("a1")), (rp("b"), PreImage::Absent)]
        );
        // A path changed after the undo is captured again (for a redo to find).
        assert_eq!(index.captured_now, HashSet::from([rp("a"), rp("b")]));
        push(&mut index, cap(1, "c", file("c1")));
        undo_or_redo(&mut index, OpKind::Redo);
        assert_eq!(turns_of(&index), vec![1, 2]);
        assert_eq!(
            index.plan_targets(Turn(2)),
            vec![
                (rp("a"), file("a2")),
                (rp("b"), PreImage::Absent),
                (rp("c"), file("c1"))
            ]
        );
        let states: Vec<(u64, OpState)> = index.ops.ops.iter().map(|o| (o.id, o.state)).collect();
        assert_eq!(
            states,
            vec![
                (1, OpState::Done),
                (2, OpState::Done),
                (3, OpState::Done),
                (4, OpState::Done)
            ]
        );
        assert_eq!(index.ops.undo.last().map(|a| (a.op, a.by)), Some((2, 4)));
    }

    #[test]
    fn undo_two_deep_then_redo_gives_back_each_index_state() {
        let mut index = Index::default();
        push(&mut index, turn(1));
        push(&mut index, turn(2));
        push(&mut index, cap(2, "f", file("two")));
        let b = push(
            &mut index,
            Record::RewindBegin {
                to: Turn(1),
                from: Turn(2),
            },
        );
        push(
            &mut index,
            Record::Capture {
                turn: Turn(1),
                path: rp("f"),
                pre: file("now"),
                undo_of: Some(b),
                pid: None,
                comm: None,
            },
        );
        push(
            &mut index,
            Record::RewindDone {
                begin: b,
                counts: None,
            },
        );
        push(&mut index, cap(1, "g", PreImage::Absent));
        push(
            &mut index,
            Record::Relabel {
                turn: Turn(1),
                label: Some("x".into()),
            },
        );
        assert_eq!(turns_of(&index), vec![1]);
        undo_or_redo(&mut index, OpKind::Undo); // the relabel
        assert_eq!(index.turns[0].label, None);
        let (_, targets) = index.revert_plan(false).expect("the rewind");
        assert_eq!(
            targets,
            vec![(rp("f"), file("now")), (rp("g"), PreImage::Absent)]
        );
        undo_or_redo(&mut index, OpKind::Undo); // the rewind
        assert_eq!(turns_of(&index), vec![1, 2]);
        assert_eq!(index.plan_targets(Turn(2)), vec![(rp("f"), file("two"))]);
        // Its redo gives back `g`'s capture, taken after the rewind.
        undo_or_redo(&mut index, OpKind::Redo);
        assert_eq!(turns_of(&index), vec![1]);
        assert_eq!(
            index.plan_targets(Turn(1)),
            vec![(rp("g"), PreImage::Absent)]
        );
        undo_or_redo(&mut index, OpKind::Redo);
        assert_eq!(index.turns[0].label.as_deref(), Some("x"));
        assert!(index.ops.redo.is_empty());
        // A new operation empties the redo stack.
        undo_or_redo(&mut index, OpKind::Undo);
        assert_eq!(index.ops.redo.len(), 1);
        push(&mut index, turn(3));
        assert!(index.ops.redo.is_empty());
    }

    #[test]
    fn a_partial_rewind_restarts_the_capture_epoch_and_an_unfinished_one_is_remembered() {
        let mut index = Index::default();
        push(&mut index, turn(1));
        push(&mut index, cap(1, "a", file("a0")));
        let b = push(
            &mut index,
            Record::OpBegin(OpBegin {
                kind: OpKind::RewindPaths,
                to: Some(Turn(1)),
                paths: vec![rp("a")],
                target: None,
            }),
        );
        assert!(index.captured_now.is_empty());
        push(
            &mut index,
            Record::Capture {
                turn: Turn(1),
                path: rp("a"),
                pre: file("a1"),
                undo_of: Some(b),
                pid: None,
                comm: None,
            },
        );
        assert_eq!(index.ops.unfinished.as_ref().map(|u| u.begin), Some(b));
        push(
            &mut index,
            Record::OpDone {
                begin: b,
                counts: Some(OpCounts {
                    restored: 1,
                    deleted: 0,
                    failed: 0,
                }),
            },
        );
        assert!(index.ops.unfinished.is_none());
        let (_, targets) = index.revert_plan(false).expect("undoable");
        assert_eq!(targets, vec![(rp("a"), file("a1"))]);
        let rows = op_rows(&index);
        assert_eq!(rows[0].text, "rewind a to turn 1 (restored 1, deleted 0)");
        assert!(rows[0].next_undo);
    }
}
