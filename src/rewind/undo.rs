//! Undo and redo of the operation log (`crate::store::ops`): the index says what to revert
//! and, for an operation that changed the folder, the state to give back to every path; this
//! file applies it with the rewind's own stages (plan, verify, save, apply), so an undo and a
//! redo are exact as a rewind is, previewed as a rewind is, and undoable in turn.
//!
//! A run is framed by `op_begin` (with the saves of what it overwrites, in the same append)
//! and `op_done`; cut off by a crash, the next mount, rewind, undo or redo completes it first
//! (`complete_unfinished`), with the same targets: the index does not change until `op_done`.

use super::apply::Progress;
use super::links::link_anchors;
use super::plan::plan;
use super::report::{Report, RewindError};
use super::request::{Direction, Mode};
use super::rewinder::{Frame, Limits, Rewinder};
use super::save::Saving;
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{OpBegin, OpKind};
use crate::store::journal::{PreImage, Record};
use crate::store::ops::{Change, OpWhat};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// The error when there is nothing to take the way `way`.
fn nothing(way: Direction) -> RewindError {
    match way {
        Direction::Undo => RewindError::NoOpToUndo,
        Direction::Redo => RewindError::NothingToRedo,
    }
}

/// Runs `undo` or `redo` (`way`): reverts the newest operation on the undo stack, or re-applies
/// the newest one undone. A preview (`mode`) says what it would change in the folder.
pub fn undo_redo(
    root: BorrowedFd<'_>,
    store: &mut Store,
    way: Direction,
    mode: Mode,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    Rewinder::new(root, store, Limits::default(), progress, mode).undo_redo(way)
}

/// Completes a partial rewind, undo or redo that a crash cut off (`None` when there is none).
/// Its saves are kept; what it had not saved is saved now, and its plan applied again.
/// `max_blob` bounds what a partial rewind captures for the current turn.
pub fn complete_unfinished(
    root: BorrowedFd<'_>,
    store: &mut Store,
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Option<Report>, RewindError> {
    let mode = Mode::from_dry_run(dry_run);
    Rewinder::new(root, store, Limits { max_blob }, progress, mode).complete_unfinished()
}

impl Rewinder<'_> {
    /// Runs `undo` or `redo` (`way`), see [`undo_redo`].
    pub(super) fn undo_redo(&mut self, way: Direction) -> Result<Report, RewindError> {
        if let Some(r) = self.complete_unfinished()? {
            return Ok(r);
        }
        if self.store.index().unfinished_rewind.is_some() {
            // A whole rewind cut off: it is completed first, as any rewind would, and a
            // preview shows that completion (the undo or redo comes after it).
            return self.whole(Turn::default());
        }
        let Some((top, targets)) = self.store.index().revert_plan(way.redo()) else {
            return Err(nothing(way));
        };
        let target = top.op;
        let folder = matches!(top.change, Change::Folder { .. });
        self.revert((way, target), folder.then_some(targets), None)
    }

    /// `rewind --undo`: `undo`, when the newest operation in effect is a rewind (whole or
    /// partial).
    pub(super) fn undo_last(&mut self) -> Result<Report, RewindError> {
        let index = self.store.index();
        let is_rewind = index
            .ops
            .undo
            .last()
            .and_then(|a| index.ops.get(a.op))
            .is_some_and(|o| matches!(o.what, OpWhat::Rewind { .. } | OpWhat::RewindPaths { .. }));
        if !is_rewind && index.ops.unfinished.is_none() && index.unfinished_rewind.is_none() {
            return Err(RewindError::NothingToUndo);
        }
        let mut report = self.undo_redo(Direction::Undo)?;
        report.undo = true;
        Ok(report)
    }

    /// Completes a partial rewind, undo or redo that a crash cut off (`None` when there is
    /// none), see [`complete_unfinished`].
    pub(super) fn complete_unfinished(&mut self) -> Result<Option<Report>, RewindError> {
        let Some(u) = self.store.index().ops.unfinished.clone() else {
            return Ok(None);
        };
        log::warn!(target: "ckpt::rewind", "completing operation #{} that was cut off", u.id);
        let report = match u.op.kind {
            OpKind::RewindPaths => {
                let to = u.op.to.unwrap_or(Turn::new(0));
                self.partial(to, (&u.op.paths, &u.op.merged), Some(u.begin))?
            }
            OpKind::Undo | OpKind::Redo => {
                let way = Direction::from_redo(u.op.kind == OpKind::Redo);
                let (top, targets) = self
                    .store
                    .index()
                    .revert_plan(way.redo())
                    .ok_or(nothing(way))?;
                let folder = matches!(top.change, Change::Folder { .. });
                let target = u.op.target.unwrap_or(top.op);
                self.revert((way, target), folder.then_some(targets), Some(u.begin))?
            }
            OpKind::RestoreOp => self.restore_after(u.op.target.unwrap_or(0), Some(u.begin))?,
        };
        Ok(Some(report))
    }

    /// Runs one undo or redo (`way`) of operation `target`: `targets` are the states to give
    /// back (`None` for an operation that changed no path: a turn switch or a relabel).
    /// `resume` is the `op_begin` of a run cut off by a crash.
    fn revert(
        &mut self,
        (way, target): (Direction, u64),
        targets: Option<Vec<(RelPath, PreImage)>>,
        resume: Option<Seq>,
    ) -> Result<Report, RewindError> {
        let from = self.store.index().current_turn();
        let mut report = self.revert_report((way, target), from, resume);
        let open = OpBegin {
            kind: way.kind(),
            to: None,
            paths: Vec::new(),
            target: Some(target),
            merged: Vec::new(),
        };
        let Some(targets) = targets else {
            if !self.previews() {
                self.revert_in_log_only(open, resume)?;
            }
            return Ok(report);
        };
        let index = self.store.index();
        let plan = plan(index.with_current_identities(targets), &index.once_linked());
        let anchors = link_anchors(self.root, &plan, &HashSet::new());
        if self.previews() {
            self.dry_run((&plan, &anchors), Saving::ForUndo, &mut report);
            return Ok(report);
        }
        self.verified(&plan, resume)?;
        let frame = Frame::Revert { open, from, way };
        self.carry_out(plan, &anchors, frame, resume, &mut report)?;
        report.to = self.store.index().current_turn();
        Ok(report)
    }

    /// The report of an undo or redo (`way`) of operation `target`, before it runs.
    fn revert_report(
        &self,
        (way, target): (Direction, u64),
        from: Turn,
        resume: Option<Seq>,
    ) -> Report {
        let entry = self.store.index().ops.get(target);
        let word = match way {
            Direction::Undo => "undo",
            Direction::Redo => "redo",
        };
        let text = entry.map_or_else(
            || format!("{word} of #{target}"),
            |e| format!("{word} of #{target}: {}", e.words()),
        );
        Report {
            to: entry.map_or(from, |e| turn_after(&e.what, way, from)),
            from,
            dry_run: self.previews(),
            op: Some(text),
            completes_cut_off: resume.is_some(),
            ..Report::default()
        }
    }

    /// Reverts an operation that changed no path (a turn switch, a relabel): its `op_begin`
    /// (`open`, unless a run cut off wrote it already) and `op_done`, in one append.
    fn revert_in_log_only(
        &mut self,
        open: OpBegin,
        resume: Option<Seq>,
    ) -> Result<(), RewindError> {
        let begin = resume.unwrap_or(self.store.index().last_seq.next());
        let mut records = Vec::new();
        if resume.is_none() {
            records.push(Record::OpBegin(open));
        }
        records.push(Record::OpDone {
            begin,
            counts: None,
        });
        self.store.append_all(records).map_err(RewindError::Store)?;
        Ok(())
    }
}

/// The turn current after taking operation `what` the `way` asked.
fn turn_after(what: &OpWhat, way: Direction, now: Turn) -> Turn {
    match (what, way) {
        (OpWhat::Rewind { from, .. } | OpWhat::Turn { from, .. }, Direction::Undo) => *from,
        (OpWhat::Rewind { to, .. }, Direction::Redo) => *to,
        (OpWhat::Turn { turn, .. }, Direction::Redo) => *turn,
        _ => now,
    }
}
