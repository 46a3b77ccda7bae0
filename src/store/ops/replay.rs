//! The operation log's records applied to the index: what each operation, undo and redo
//! changes in the turns and captures (pure, as the rest of the replay).

use super::*;
use crate::store::index::Index;

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
    pub(in crate::store) fn op_turn(
        &mut self,
        seq: Seq,
        time: u64,
        turn: Turn,
        from: Option<Turn>,
    ) {
        match from {
            None => {
                let id = self
                    .ops
                    .push(seq, time, OpWhat::Created { turn }, OpState::Done);
                self.ops.set_end(id, seq);
            }
            Some(from) => {
                let id = self
                    .ops
                    .push(seq, time, OpWhat::Turn { turn, from }, OpState::Done);
                self.ops.set_end(id, seq);
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
    pub(in crate::store) fn op_rewind_done(
        &mut self,
        begin: Seq,
        from: Turn,
        effect: Effect,
        saves: Vec<Capture>,
    ) {
        let Effect::Rewind {
            to,
            new_time,
            new_began,
            ..
        } = &effect
        else {
            return;
        };
        let (to, time, done) = (*to, *new_time, *new_began);
        let id = self
            .ops
            .push(begin, time, OpWhat::Rewind { to, from }, OpState::Done);
        self.ops.set_end(id, done);
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
    pub(in crate::store) fn op_counts(&mut self, begin: Seq, counts: Option<OpCounts>) {
        if let Some(op) = self.ops.ops.iter_mut().rev().find(|o| o.seq == begin) {
            op.counts = counts;
        }
    }

    /// `undo_done` (written before version 4): the rewind begun at `rewind` was undone, and the
    /// work done after it left the index (kept for no redo).
    pub(in crate::store) fn op_legacy_undo(&mut self, seq: Seq, time: u64, rewind: Seq) {
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
            .map(|c| (c.path.clone(), c.seq))
            .collect();
    }

    /// `op_begin`.
    pub(in crate::store) fn op_begin(&mut self, seq: Seq, time: u64, op: &OpBegin) {
        let what = match op.kind {
            OpKind::RewindPaths => OpWhat::RewindPaths {
                to: op.to.unwrap_or(Turn::new(0)),
                paths: op.paths.iter().map(ToString::to_string).collect(),
            },
            OpKind::Undo => OpWhat::Undo {
                of: op.target.unwrap_or(0),
            },
            OpKind::Redo => OpWhat::Redo {
                of: op.target.unwrap_or(0),
            },
            OpKind::RestoreOp => OpWhat::RestoreOp {
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
        if matches!(op.kind, OpKind::RewindPaths | OpKind::RestoreOp) {
            // Paths changed after the partial rewind are captured again, so that its undo
            // finds their state just after it (the captures it writes itself count until it
            // is done: `op_done` begins the next epoch).
            self.epoch = seq;
            self.captured_now.clear();
        }
    }

    /// `op_done`: the operation begun at `begin` finished.
    pub(in crate::store) fn op_done(&mut self, begin: Seq, counts: Option<OpCounts>) {
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
            OpKind::RewindPaths | OpKind::RestoreOp => {
                self.ops.new_op(Some(Applied {
                    op: u.id,
                    by: u.id,
                    change: Change::Folder {
                        begin,
                        saves,
                        moved: Vec::new(),
                        restored: Vec::new(),
                        effect: Effect::Partial,
                    },
                }));
                self.end_partial(u.id);
            }
            OpKind::Undo => self.undo_top(u.id, u.op.target, begin, saves),
            OpKind::Redo => self.redo_top(u.id, u.op.target, begin, saves),
        }
    }

    /// A partial rewind (or `op restore`) `id` is done (its `op_done` the last line read): a
    /// new capture epoch begins, so that a path it restored is captured again at its next
    /// change, and the folder as it was just after it is recorded from here on
    /// ([`OpEntry::end`]).
    fn end_partial(&mut self, id: u64) {
        let done = self.last_seq;
        self.epoch = done;
        self.captured_now.clear();
        self.ops.set_end(id, done);
    }

    /// An undo or redo `id` that changed the folder is done: it began a capture epoch (at its
    /// `op_begin`, with nothing but its saves since), so the folder just after it is recorded
    /// from its `op_done` on. One of a turn switch or a relabel begins none.
    fn end_revert(&mut self, id: u64, change: &Change) {
        if matches!(change, Change::Folder { .. }) {
            self.ops.set_end(id, self.last_seq);
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
        self.end_revert(id, &change);
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
        self.end_revert(id, &change);
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
                let effect = |index: &mut Self| index.unretire(effect);
                self.flip_folder((begin, moved, restored), effect, at)
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
                let effect = |index: &mut Self| index.retire(effect);
                self.flip_folder((begin, moved, restored), effect, at)
            }
        }
    }

    /// What reverting (or re-applying) a folder change begun at `begin` does to the index, by
    /// the undo (or redo) begun at `at`: the captures it moved and restored swap places,
    /// `effect` retires or brings back its turns, and a new capture epoch begins.
    fn flip_folder(
        &mut self,
        (begin, moved, restored): (Seq, Vec<Capture>, Vec<Seq>),
        effect: impl FnOnce(&mut Self) -> Effect,
        at: Seq,
    ) -> Change {
        let (taken, restored) = self.swap_captures(begin, &restored, moved);
        let effect = effect(self);
        self.restart_epoch(at);
        Change::Folder {
            begin: at,
            saves: Vec::new(),
            moved: taken,
            restored,
            effect,
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
    pub(in crate::store) fn recompute_captured_now(&mut self) {
        let at = self.captures.partition_point(|c| c.seq <= self.epoch);
        self.captured_now = self.captures[at..]
            .iter()
            .map(|c| (c.path.clone(), c.seq))
            .collect();
    }

    /// A whole rewind's retired turns and captures come back; turn `to` gets its old start.
    fn unretire(&mut self, effect: Effect) -> Effect {
        let Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            old_began,
            new_began,
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
            t.began = old_began;
        }
        self.turns.extend(retired_turns);
        self.turns.sort_by_key(|t| t.turn);
        Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            old_began,
            new_began,
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
            old_began,
            new_began,
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
            t.began = new_began;
        }
        Effect::Rewind {
            to,
            begin,
            old_time,
            new_time,
            old_began,
            new_began,
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
    pub(in crate::store) fn op_relabel(
        &mut self,
        seq: Seq,
        time: u64,
        turn: Turn,
        label: Option<String>,
    ) {
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
    pub(in crate::store) fn op_pruned(&mut self, seq: Seq, time: u64, p: &Pruned) {
        self.ops.ops = p
            .archived
            .iter()
            .map(|a| OpEntry {
                id: a.id,
                seq: Seq::new(0),
                time: a.time,
                what: OpWhat::Archived {
                    text: a.text.clone(),
                    undone: a.undone,
                },
                counts: None,
                state: OpState::Done,
                end: None,
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
