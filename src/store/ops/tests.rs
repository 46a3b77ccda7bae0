//! Replays of hand-made records: no store, no folder.
use super::*;
use crate::store::index::Index;
use crate::store::index::tests::{cap, file, rp};
use crate::store::journal::{Line, Record};

/// Applies `rec` as the next line at time `seq * 10`; returns its seq.
fn push(index: &mut Index, rec: Record) -> Seq {
    let seq = index.last_seq.next();
    index.apply(&Line {
        v: rec.version(),
        seq,
        time: seq.get() * 10,
        rec,
    });
    seq
}

fn turn(n: u64) -> Record {
    Record::Turn {
        turn: Turn::new(n),
        label: None,
        by: None,
        conversation: None,
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
            merged: Vec::new(),
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

/// Begins a rewind from turn `from` to `to` that saves `pre` of `path` for its undo; returns
/// the seq of its beginning.
fn rewind_saving(index: &mut Index, (to, from): (Turn, Turn), path: &str, pre: PreImage) -> Seq {
    let b = push(index, Record::RewindBegin { to, from });
    push(
        index,
        Record::Capture {
            turn: to,
            path: rp(path),
            pre,
            undo_of: Some(b),
            pid: None,
            comm: None,
        },
    );
    b
}

fn turns_of(index: &Index) -> Vec<u64> {
    index.turns.iter().map(|t| t.turn.get()).collect()
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
        index.plan_targets(Turn::new(1)),
        vec![(rp("a"), file("a1")), (rp("b"), PreImage::Absent)]
    );
    // A path changed after the undo is captured again (for a redo to find).
    assert_eq!(
        crate::store::index::tests::captured_paths(&index),
        HashSet::from([rp("a"), rp("b")])
    );
    push(&mut index, cap(1, "c", file("c1")));
    undo_or_redo(&mut index, OpKind::Redo);
    assert_eq!(turns_of(&index), vec![1, 2]);
    assert_eq!(
        index.plan_targets(Turn::new(2)),
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
    let b = rewind_saving(&mut index, (Turn::new(1), Turn::new(2)), "f", file("now"));
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
            turn: Turn::new(1),
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
    assert_eq!(
        index.plan_targets(Turn::new(2)),
        vec![(rp("f"), file("two"))]
    );
    // Its redo gives back `g`'s capture, taken after the rewind.
    undo_or_redo(&mut index, OpKind::Redo);
    assert_eq!(turns_of(&index), vec![1]);
    assert_eq!(
        index.plan_targets(Turn::new(1)),
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
            to: Some(Turn::new(1)),
            paths: vec![rp("a")],
            target: None,
            merged: Vec::new(),
        }),
    );
    assert!(index.captured_now.is_empty());
    push(
        &mut index,
        Record::Capture {
            turn: Turn::new(1),
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
    let rows = op_rows(&index.ops);
    assert_eq!(rows[0].text, "rewind a to turn 1 (restored 1, deleted 0)");
    assert!(rows[0].next_undo);
}

/// A file pre-image of inode `ino` with `nlink` names.
fn file_of(ino: u64, nlink: u64) -> PreImage {
    let mut pre = file("x");
    if let PreImage::File {
        ino: i, nlink: n, ..
    } = &mut pre
    {
        (*i, *n) = (ino, nlink);
    }
    pre
}

fn id(ino: u64) -> crate::identity::FileId {
    crate::identity::FileId {
        ino,
        fh: None,
        btime: None,
    }
}

#[test]
fn linked_identities_count_every_record_kept_and_follow_renewals() {
    let mut index = Index::default();
    push(&mut index, turn(1));
    push(&mut index, turn(2));
    push(&mut index, cap(2, "alone", file_of(7, 1)));
    push(&mut index, cap(2, "pair", file_of(5, 2)));
    assert_eq!(index.linked_identities(), HashSet::from([id(5)]));
    // A rewind retires turn 2's captures to its undo entry and saves a group it replaces:
    // both are records an undo or a redo restores, so both count.
    let b = rewind_saving(
        &mut index,
        (Turn::new(1), Turn::new(2)),
        "group",
        file_of(8, 3),
    );
    // While the rewind runs, its saves count too.
    assert_eq!(index.linked_identities(), HashSet::from([id(5), id(8)]));
    push(
        &mut index,
        Record::RewindDone {
            begin: b,
            counts: None,
        },
    );
    assert!(index.captures.is_empty(), "turn 2's captures retired");
    assert_eq!(index.linked_identities(), HashSet::from([id(5), id(8)]));
    // A renewal: records of inode 8 now mean inode 10.
    push(
        &mut index,
        Record::Renewed {
            ids: vec![crate::identity::Renewal {
                was: id(8),
                now: id(10),
            }],
        },
    );
    assert_eq!(index.linked_identities(), HashSet::from([id(5), id(10)]));
}

/// An `op_begin` of `kind` (target `target`) and its `op_done` with one path restored.
fn op_run(index: &mut Index, kind: OpKind, target: Option<u64>) -> (Seq, Seq) {
    let b = push(
        index,
        Record::OpBegin(OpBegin {
            kind,
            to: (kind == OpKind::RewindPaths).then(|| Turn::new(1)),
            paths: Vec::new(),
            target,
            merged: Vec::new(),
        }),
    );
    let done = push(
        index,
        Record::OpDone {
            begin: b,
            counts: Some(OpCounts {
                restored: 1,
                deleted: 0,
                failed: 0,
            }),
        },
    );
    (b, done)
}

#[test]
fn a_partial_rewind_ends_its_capture_epoch_when_done() {
    let mut index = Index::default();
    push(&mut index, turn(1));
    let b = push(
        &mut index,
        Record::OpBegin(OpBegin {
            kind: OpKind::RewindPaths,
            to: Some(Turn::new(1)),
            paths: vec![rp("a")],
            target: None,
            merged: Vec::new(),
        }),
    );
    // What the partial rewind captures for the current turn counts while it runs…
    push(&mut index, cap(1, "a", file("a0")));
    assert!(index.captured_now.contains_key(&rp("a")));
    let done = push(
        &mut index,
        Record::OpDone {
            begin: b,
            counts: None,
        },
    );
    // …and not after: a path it restored is captured again at its next change, so the
    // folder just after it is recorded.
    assert!(index.captured_now.is_empty());
    assert_eq!(index.epoch, done);
    let (op, end) = index.ops.moment_after(2).expect("a moment");
    assert_eq!((op.seq, end), (b, done));
}

#[test]
fn an_op_restore_is_an_operation_undo_takes_back_and_each_op_knows_where_it_ended() {
    let mut index = Index::default();
    let t1 = push(&mut index, turn(1));
    let t2 = push(&mut index, turn(2));
    push(
        &mut index,
        Record::Relabel {
            turn: Turn::new(2),
            label: Some("x".into()),
        },
    );
    let (_, partial_end) = op_run(&mut index, OpKind::RewindPaths, None);
    assert_eq!(index.ops.moment_after(1).map(|(_, s)| s), Ok(t1));
    assert_eq!(index.ops.moment_after(2).map(|(_, s)| s), Ok(t2));
    assert!(matches!(
        index.ops.moment_after(3),
        Err(Unrestorable::NoMoment { id: 3, .. })
    ));
    assert_eq!(index.ops.moment_after(4).map(|(_, s)| s), Ok(partial_end));
    assert_eq!(
        index.ops.moment_after(9),
        Err(Unrestorable::NoSuchOp {
            id: 9,
            newest: Some(4)
        })
    );
    let (b, done) = op_run(&mut index, OpKind::RestoreOp, Some(2));
    assert_eq!(index.ops.moment_after(5).map(|(_, s)| s), Ok(done));
    assert_eq!(index.epoch, done);
    let rows = op_rows(&index.ops);
    assert_eq!(
        rows[0].text,
        "restore the folder as just after #2 (restored 1, deleted 0)"
    );
    assert_eq!(rows[0].kind, "restore_op");
    assert!(rows[0].next_undo);
    assert_eq!(
        index.current_turn(),
        Turn::new(2),
        "the turns do not change"
    );
    // Undone like a partial rewind, then redone; an undo of a folder change ends at its
    // op_done too, one of a relabel does not.
    let (_, undo_end) = op_run(&mut index, OpKind::Undo, Some(5));
    assert_eq!(index.ops.get(5).map(|o| o.state), Some(OpState::Undone(6)));
    assert_eq!(index.ops.moment_after(6).map(|(_, s)| s), Ok(undo_end));
    op_run(&mut index, OpKind::Redo, Some(5));
    assert_eq!(index.ops.get(5).map(|o| o.state), Some(OpState::Done));
    let top = index.ops.undo.last().expect("in effect");
    assert!(matches!(top.change, Change::Folder { begin: at, .. } if at > b));
    op_run(&mut index, OpKind::Undo, Some(5));
    op_run(&mut index, OpKind::Undo, Some(4));
    op_run(&mut index, OpKind::Undo, Some(3));
    assert!(matches!(
        index.ops.moment_after(10),
        Err(Unrestorable::NoMoment { .. })
    ));
    // A cut-off one has no moment yet.
    push(
        &mut index,
        Record::OpBegin(OpBegin {
            kind: OpKind::RestoreOp,
            to: None,
            paths: Vec::new(),
            target: Some(1),
            merged: Vec::new(),
        }),
    );
    assert_eq!(
        index.ops.moment_after(11),
        Err(Unrestorable::Unfinished { id: 11 })
    );
}
