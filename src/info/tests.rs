//! The status and log views' own tests.

use super::*;
use std::os::fd::AsFd;

#[test]
fn a_pending_operation_is_named_with_its_turn_or_its_target() {
    use crate::store::journal::{OpBegin, OpKind};
    use crate::store::ops::UnfinishedOp;
    let mut index = Index::default();
    assert_eq!(pending(&index), None);
    index.unfinished_rewind = Some((Seq::new(7), Turn::new(2), Turn::new(3)));
    let p = pending(&index).expect("a cut-off rewind");
    assert_eq!((p.kind.as_str(), p.to), ("rewind", Some(Turn::new(2))));
    assert_eq!(p.with_article(), "a rewind to turn 2");
    index.unfinished_rewind = None;
    let op = |kind, to, paths: &[&str], target| UnfinishedOp {
        begin: Seq::new(9),
        id: 5,
        op: OpBegin {
            kind,
            to,
            paths: paths
                .iter()
                .map(|p| RelPath::new(p.as_bytes()).expect("path"))
                .collect(),
            target,
            merged: Vec::new(),
        },
    };
    index.ops.unfinished = Some(op(
        OpKind::RewindPaths,
        Some(Turn::new(1)),
        &["src", "a.txt"],
        None,
    ));
    let p = pending(&index).expect("a cut-off partial rewind");
    assert_eq!(p.with_article(), "a rewind of src, a.txt to turn 1");
    assert_eq!(p.kind, "rewind_paths");
    index.ops.unfinished = Some(op(OpKind::Undo, None, &[], Some(4)));
    assert_eq!(
        pending(&index).map(|p| p.with_article()),
        Some("an undo of #4".into())
    );
    index.ops.unfinished = Some(op(OpKind::Redo, None, &[], Some(4)));
    assert_eq!(
        pending(&index).map(|p| p.with_article()),
        Some("a redo of #4".into())
    );
}

use crate::store::journal::Record;

/// A folder with a store, and helpers to record captures as the capture policy would.
struct Folder {
    dir: tempfile::TempDir,
    root: std::fs::File,
    store: Store,
}

impl Folder {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::for_test(root.as_fd()).expect("store");
        Self { dir, root, store }
    }

    fn record(&mut self, rec: Record) -> Seq {
        self.store.append(rec).expect("append")
    }

    fn turn(&mut self, n: u64) {
        self.record(Record::Turn {
            turn: Turn::new(n),
            label: None,
            by: None,
            conversation: None,
        });
    }

    /// Captures `name` as it is now in turn `turn` (its bytes stored), as `comm` did.
    fn capture(&mut self, turn: u64, name: &str, comm: &str) {
        let cname = std::ffi::CString::new(name).expect("name");
        let pre =
            crate::capture::read_preimage(self.store.blobs(), self.root.as_fd(), &cname, u64::MAX)
                .expect("pre-image");
        self.record(Record::Capture {
            turn: Turn::new(turn),
            path: RelPath::new(name.as_bytes()).expect("path"),
            pre,
            undo_of: None,
            pid: Some(1),
            comm: Some(comm.into()),
        });
    }

    fn write(&self, name: &str, bytes: &str) {
        std::fs::write(self.dir.path().join(name), bytes).expect("write");
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.dir.path().join(name)).expect("remove");
    }

    /// `(turn, created, modified, deleted, bytes)` of each row.
    fn counts(&self) -> Vec<(u64, usize, usize, usize, u64)> {
        log_rows(&self.store, self.root.as_fd())
            .iter()
            .map(|r| (r.turn.get(), r.created, r.modified, r.deleted, r.bytes))
            .collect()
    }
}

const EIGHT: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

#[test]
fn a_turn_keeps_the_counts_it_ended_with_through_later_turns_a_rewind_and_its_undo() {
    let mut f = Folder::new();
    // Turn 1 creates eight files, and a scratch file it removes again.
    for name in EIGHT.iter().chain(&["scratch"]) {
        f.capture(1, name, "touch");
        f.write(name, "12345\n");
    }
    f.remove("scratch");
    assert_eq!(f.counts(), vec![(1, 8, 0, 0, 0)], "scratch is not created");
    // Turn 2 deletes three of them and rewrites one.
    f.turn(2);
    for name in ["a", "b", "c", "d"] {
        f.capture(2, name, "rm");
    }
    for name in ["a", "b", "c"] {
        f.remove(name);
    }
    f.write("d", "changed\n");
    let both = vec![(1, 8, 0, 0, 0), (2, 0, 1, 3, 24)];
    assert_eq!(f.counts(), both);
    // Turn 3 removes what turn 1 made and turn 2 left: turns 1 and 2 stay as they ended.
    f.turn(3);
    for name in &EIGHT[3..] {
        f.capture(3, name, "rm");
        f.remove(name);
    }
    assert_eq!(f.counts()[..2], both);
    assert_eq!(f.counts()[2], (3, 0, 0, 5, 32));
    // A rewind to the start of turn 2 (the folder put back as it began, as the rewind
    // does): turn 1 still created eight, turn 2 begins afresh.
    let begin = f.record(Record::RewindBegin {
        to: Turn::new(2),
        from: Turn::new(3),
    });
    // What the rewind overwrote: the five names turn 3 removed were absent.
    for name in &EIGHT[3..] {
        f.record(Record::Capture {
            turn: Turn::new(2),
            path: RelPath::new(name.as_bytes()).expect("valid"),
            pre: PreImage::Absent,
            undo_of: Some(begin),
            pid: None,
            comm: None,
        });
    }
    f.record(Record::RewindDone {
        begin,
        counts: None,
    });
    for name in EIGHT {
        f.write(name, "12345\n");
    }
    // Turn 3 stays listed, rewound, as it stood when the rewind ran; so does the work turn 2
    // had done before it (retired too), beside turn 2 begun afresh.
    let rows = log_rows(&f.store, f.root.as_fd());
    assert_eq!(rows.last().map(|r| r.rewound_by.is_some()), Some(true));
    assert_eq!(
        f.counts(),
        vec![
            (1, 8, 0, 0, 0),
            (2, 0, 4, 0, 24),
            (2, 0, 0, 0, 0),
            (3, 0, 0, 5, 32)
        ]
    );
    // Its undo brings turns 2 and 3 back, as they ended.
    f.record(Record::UndoDone { rewind: begin });
    for name in EIGHT {
        f.remove(name);
    }
    assert_eq!(
        f.counts(),
        vec![(1, 8, 0, 0, 0), (2, 0, 1, 3, 24), (3, 0, 0, 5, 32)]
    );
}

#[test]
fn turns_are_listed_by_number_whatever_the_journal_order() {
    let mut f = Folder::new();
    f.turn(3);
    f.write("x", "x\n");
    f.capture(3, "x", "sh");
    // A journal may hold a lower turn after a higher one (replayed as it comes).
    f.turn(2);
    let rows = log_rows(&f.store, f.root.as_fd());
    assert_eq!(
        rows.iter().map(|r| r.turn.get()).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(rows[2].programs, vec!["sh".to_string()]);
    assert!(rows[0].time_iso.ends_with('Z'), "{}", rows[0].time_iso);
}

#[test]
fn dedup_counts_every_kept_pre_image_against_the_blobs_it_uses() {
    let mut f = Folder::new();
    let content = "the same bytes in two files\n".repeat(40);
    f.write("one", &content);
    f.write("two", &content);
    f.turn(2);
    f.capture(2, "one", "sed");
    f.capture(2, "two", "sed");
    let before = status(&f.store, "f", None);
    assert_eq!(before.preimage_bytes, 2 * content.len() as u64);
    assert!(before.preimage_blob_bytes > 0);
    assert!(before.dedup_ratio >= 2.0, "{before:?}");
    assert_eq!(before.unused_blob_bytes, 0);
    // A rewind retires turn 2's captures but keeps them for its undo: same figures.
    let begin = f.record(Record::RewindBegin {
        to: Turn::new(2),
        from: Turn::new(2),
    });
    f.record(Record::RewindDone {
        begin,
        counts: None,
    });
    let after = status(&f.store, "f", None);
    assert_eq!(after.preimage_bytes, before.preimage_bytes);
    assert_eq!(after.dedup_ratio, before.dedup_ratio);
    // A second rewind keeps the first one's undo too (undo goes any depth): same figures,
    // and no blob is unused.
    let begin = f.record(Record::RewindBegin {
        to: Turn::new(2),
        from: Turn::new(2),
    });
    f.record(Record::RewindDone {
        begin,
        counts: None,
    });
    let later = status(&f.store, "f", None);
    assert_eq!(later.preimage_bytes, before.preimage_bytes);
    assert_eq!(later.dedup_ratio, before.dedup_ratio);
    assert_eq!(later.unused_blob_bytes, 0);
}

#[test]
fn a_file_over_max_blob_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("big"), vec![b'x'; 100]).expect("write");
    let root = std::fs::File::open(dir.path()).expect("open");
    let store = Store::for_test(root.as_fd()).expect("store");
    let pre =
        crate::capture::read_preimage(store.blobs(), root.as_fd(), c"big", 10).expect("pre-image");
    let PreImage::Skipped { reason, was, .. } = pre else {
        panic!("not skipped: {pre:?}");
    };
    assert_eq!(was, "file");
    assert!(reason.contains(OVER_MAX_BLOB), "{reason}");
}
