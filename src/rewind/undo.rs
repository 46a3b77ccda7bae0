//! Undo and redo of the operation log (`crate::store::ops`): the index says what to revert
//! and, for an operation that changed the folder, the state to give back to every path; this
//! file applies it with the rewind's own stages (plan, verify, save, apply), so an undo and a
//! redo are exact as a rewind is, previewed as a rewind is, and undoable in turn.
//!
//! A run is framed by `op_begin` (with the saves of what it overwrites, in the same append)
//! and `op_done`; cut off by a crash, the next mount, rewind, undo or redo completes it first
//! (`complete_unfinished`), with the same targets: the index does not change until `op_done`.

use super::{
    Attempt, Progress, Report, RewindError, apply, finish, link_anchors, partial, plan,
    refuse_unless_verified, room_for_run, save_records, saves_for_undo, sweep_temps,
};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{PreImage, Record};
use crate::store::ops::{Change, OpBegin, OpKind, OpWhat};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// Which way an operation of the log is taken: back, or again after it was taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Take back the newest operation in effect (`undo`).
    Undo,
    /// Run again the newest operation undone (`redo`).
    Redo,
}

impl Direction {
    /// [`Direction::Redo`] when `redo` (the wire's and the CLI's flag).
    pub fn from_redo(redo: bool) -> Self {
        if redo { Self::Redo } else { Self::Undo }
    }
}

/// Runs `undo` or `redo` (`way`): reverts the newest operation on the undo stack, or re-applies
/// the newest one undone. A preview (`mode`) says what it would change in the folder.
pub fn undo_redo(
    root: BorrowedFd<'_>,
    store: &mut Store,
    way: Direction,
    mode: super::Mode,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let redo = way == Direction::Redo;
    let dry_run = mode == super::Mode::Preview;
    if let Some(r) = complete_unfinished(
        root,
        store,
        dry_run,
        crate::capture::DEFAULT_MAX_BLOB,
        progress,
    )? {
        return Ok(r);
    }
    if store.index().unfinished_rewind.is_some() {
        // A whole rewind cut off: it is completed first, as any rewind would.
        return super::rewind(root, store, Turn::default(), super::Mode::Apply, progress);
    }
    let kind = if redo { OpKind::Redo } else { OpKind::Undo };
    let Some((top, targets)) = store.index().revert_plan(redo) else {
        return Err(if redo {
            RewindError::NothingToRedo
        } else {
            RewindError::NoOpToUndo
        });
    };
    let target = top.op;
    let folder = matches!(top.change, Change::Folder { .. });
    run(
        root,
        store,
        (kind, target),
        folder.then_some(targets),
        dry_run,
        None,
        progress,
    )
}

/// `rewind --undo`: `undo`, when the newest operation in effect is a rewind (whole or partial).
pub(super) fn rewind_undo(
    root: BorrowedFd<'_>,
    store: &mut Store,
    dry_run: bool,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let index = store.index();
    let is_rewind = index
        .ops
        .undo
        .last()
        .and_then(|a| index.ops.get(a.op))
        .is_some_and(|o| matches!(o.what, OpWhat::Rewind { .. } | OpWhat::RewindPaths { .. }));
    if !is_rewind && index.ops.unfinished.is_none() && index.unfinished_rewind.is_none() {
        return Err(RewindError::NothingToUndo);
    }
    let mode = super::Mode::from_dry_run(dry_run);
    let mut report = undo_redo(root, store, Direction::Undo, mode, progress)?;
    report.undo = true;
    Ok(report)
}

/// Completes a partial rewind, undo or redo that a crash cut off (`None` when there is none).
/// Its saves are kept; what it had not saved is saved now, and its plan applied again.
pub fn complete_unfinished(
    root: BorrowedFd<'_>,
    store: &mut Store,
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Option<Report>, RewindError> {
    let Some(u) = store.index().ops.unfinished.clone() else {
        return Ok(None);
    };
    log::warn!(target: "ckpt::rewind", "completing operation #{} that was cut off", u.id);
    let report = match u.op.kind {
        OpKind::RewindPaths => {
            let to = u.op.to.unwrap_or(Turn(0));
            let paths = u.op.paths.clone();
            partial(
                root,
                store,
                (to, &paths),
                dry_run,
                max_blob,
                progress,
                Some(u.begin),
            )?
        }
        OpKind::Undo | OpKind::Redo => {
            let redo = u.op.kind == OpKind::Redo;
            let (top, targets) = store.index().revert_plan(redo).ok_or(if redo {
                RewindError::NothingToRedo
            } else {
                RewindError::NoOpToUndo
            })?;
            let folder = matches!(top.change, Change::Folder { .. });
            let target = u.op.target.unwrap_or(top.op);
            run(
                root,
                store,
                (u.op.kind, target),
                folder.then_some(targets),
                dry_run,
                Some(u.begin),
                progress,
            )?
        }
    };
    Ok(Some(report))
}

/// The turn current after undoing (or redoing) operation `what`.
fn turn_after(what: &OpWhat, redo: bool, now: Turn) -> Turn {
    match (what, redo) {
        (OpWhat::Rewind { from, .. } | OpWhat::Turn { from, .. }, false) => *from,
        (OpWhat::Rewind { to, .. }, true) => *to,
        (OpWhat::Turn { turn, .. }, true) => *turn,
        _ => now,
    }
}

/// Runs one undo or redo of operation `target`: `targets` are the states to give back (`None`
/// for an operation that changed no path: a turn switch or a relabel). `resume` is the
/// `op_begin` of a run cut off by a crash.
fn run(
    root: BorrowedFd<'_>,
    store: &mut Store,
    (kind, target): (OpKind, u64),
    targets: Option<Vec<(RelPath, PreImage)>>,
    dry_run: bool,
    resume: Option<Seq>,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let redo = kind == OpKind::Redo;
    let from = store.index().current_turn();
    let entry = store.index().ops.get(target).cloned();
    let word = if redo { "redo" } else { "undo" };
    let text = entry.as_ref().map_or_else(
        || format!("{word} of #{target}"),
        |e| format!("{word} of #{target}: {}", e.words()),
    );
    let mut report = Report {
        to: entry
            .as_ref()
            .map_or(from, |e| turn_after(&e.what, redo, from)),
        from,
        dry_run,
        op: Some(text),
        completes_cut_off: resume.is_some(),
        ..Report::default()
    };
    let begin = resume.unwrap_or(Seq(store.index().last_seq.0 + 1));
    let open = Record::OpBegin(OpBegin {
        kind,
        to: None,
        paths: Vec::new(),
        target: Some(target),
    });
    let Some(targets) = targets else {
        if !dry_run {
            let mut records = Vec::new();
            if resume.is_none() {
                records.push(open);
            }
            records.push(Record::OpDone {
                begin,
                counts: None,
            });
            store.append_all(records).map_err(RewindError::Store)?;
        }
        return Ok(report);
    };
    let plan = plan(
        store.index().with_current_identities(targets),
        &store.index().once_linked(),
    );
    let anchors = link_anchors(root, &plan, &HashSet::new());
    if dry_run {
        super::dry_run(root, store, (&plan, &anchors), false, &mut report);
        return Ok(report);
    }
    refuse_unless_verified(&plan, store)?;
    if resume.is_some() {
        sweep_temps(root, &plan);
    }
    let writes = room_for_run(root, store, (&plan, &anchors), false)?;
    // What the run overwrites is saved (for its own undo) before anything changes; a failure
    // here refuses it with nothing changed, nothing begun and nothing left in the store.
    let attempt = Attempt::begin(store)?;
    let saves = match saves_for_undo(root, store, &plan, &anchors.outside_plan(&plan)) {
        Ok(saves) => saves,
        Err(e) => return Err(attempt.refuse(store, e)),
    };
    let open = resume.is_none().then_some(open);
    attempt.journal(
        store,
        open.into_iter().chain(save_records(saves, from, begin)),
    )?;
    crate::failpoint::hit(if redo {
        "redo-after-saves"
    } else {
        "undo-after-saves"
    });
    apply(
        root,
        store,
        (&plan, writes),
        &anchors,
        &mut report,
        progress,
    );
    finish(store, plan, &mut report, |counts| Record::OpDone {
        begin,
        counts,
    })?;
    report.to = store.index().current_turn();
    Ok(report)
}
