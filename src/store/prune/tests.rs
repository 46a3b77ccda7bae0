//! The prune's tests: plans, runs and what each makes unrecoverable, on real stores.

use super::*;
use crate::relpath::RelPath;

/// Turns numbered `ns`.
fn turns(ns: impl IntoIterator<Item = u64>) -> Vec<Turn> {
    ns.into_iter().map(Turn::new).collect()
}

fn file_cap(s: &mut Store, turn: u64, path: &str, content: &[u8]) {
    let stored = s.blobs.put_bytes(content).expect("put");
    s.append(Record::Capture {
        turn: Turn::new(turn),
        path: RelPath::new(path.as_bytes()).expect("valid"),
        pre: PreImage::File {
            blob: stored.id,
            size: content.len() as u64,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 1,
            nlink: 1,
            fh: None,
            btime: None,
            xattrs: None,
        },
        undo_of: None,
        pid: None,
        comm: None,
    })
    .expect("append");
}

#[test]
fn keep_turns_drops_the_oldest_and_their_blobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::File::open(dir.path()).expect("open");
    let mut s = Store::for_test(root.as_fd()).expect("store");
    file_cap(&mut s, 1, "a", b"turn one bytes");
    for t in 2..=4 {
        s.append(Record::Turn {
            turn: Turn::new(t),
            label: Some(format!("t{t}")),
            by: Some(format!("gemini:s{t}")),
            conversation: Some(crate::store::journal::Conversation {
                session: Some(format!("s{t}")),
                transcript: Some(format!("/t/s{t}.json")),
                prompt: Some(format!("t{t}")),
                prompt_id: Some(format!("p{t}")),
                folders: vec!["/a".into(), "/b".into()],
            }),
        })
        .expect("turn");
        file_cap(&mut s, t, "a", format!("turn {t} bytes").as_bytes());
    }
    let r = prune(
        &mut s,
        Policy {
            keep_turns: Some(2),
            ..Policy::default()
        },
    )
    .expect("prune");
    assert_eq!(r.unrecoverable.dropped_turns, turns([1, 2]));
    assert_eq!(r.kept_turns, turns([3, 4]));
    assert_eq!(r.removed_blobs, 2);
    assert!(!s.index.has_turn(Turn::new(2)));
    assert_eq!(s.index.plan_targets(Turn::new(3)).len(), 1);
    drop(s);
    // The rewritten journal replays to the same index, and appends still work.
    let mut s = Store::reopen_for_test(root.as_fd()).expect("reopen");
    assert_eq!(
        s.index
            .turns
            .iter()
            .map(|t| t.turn.get())
            .collect::<Vec<_>>(),
        vec![3, 4]
    );
    assert_eq!(s.index.turns[0].label.as_deref(), Some("t3"));
    // Who began a kept turn, and where its conversation stood, are kept with it.
    assert_eq!(s.index.turns[0].by.as_deref(), Some("gemini:s3"));
    let conversation = s.index.turns[0].conversation.as_ref();
    assert_eq!(
        conversation.and_then(|c| c.transcript.as_deref()),
        Some("/t/s3.json")
    );
    s.append(Record::Turn {
        turn: Turn::new(5),
        label: None,
        by: None,
        conversation: None,
    })
    .expect("append after prune");
    assert_eq!(s.blobs.list().expect("list").len(), 2);
}

#[test]
fn keep_turns_counts_turns_and_keeps_every_step_of_a_kept_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::File::open(dir.path()).expect("open");
    let mut s = Store::for_test(root.as_fd()).expect("store");
    file_cap(&mut s, 1, "a", b"turn one bytes");
    let begin = |s: &mut Store, turn: Turn| {
        s.append(Record::Turn {
            turn,
            label: None,
            by: None,
            conversation: None,
        })
        .expect("turn");
    };
    for t in 2..=3 {
        begin(&mut s, Turn::new(t));
        for step in 1..=3 {
            begin(&mut s, Turn::with_step(t, step));
        }
    }
    let r = prune(
        &mut s,
        Policy {
            keep_turns: Some(1),
            ..Policy::default()
        },
    )
    .expect("prune");
    let kept: Vec<String> = r.kept_turns.iter().map(Turn::to_string).collect();
    assert_eq!(kept, ["3", "3.1", "3.2", "3.3"]);
    assert_eq!(
        r.unrecoverable.dropped_turns.len(),
        5,
        "1, 2 and 2.1 to 2.3"
    );
}

#[test]
fn max_size_keeps_the_current_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::File::open(dir.path()).expect("open");
    let mut s = Store::for_test(root.as_fd()).expect("store");
    file_cap(&mut s, 1, "a", &[1u8; 5000]);
    s.append(Record::Turn {
        turn: Turn::new(2),
        label: None,
        by: None,
        conversation: None,
    })
    .expect("turn");
    file_cap(&mut s, 2, "a", &[2u8; 5000]);
    let r = prune(
        &mut s,
        Policy {
            max_size: Some(1),
            ..Policy::default()
        },
    )
    .expect("prune");
    assert_eq!(r.kept_turns, turns([2]));
    assert_eq!(r.unrecoverable.dropped_turns, turns([1]));
}

/// Turns 1 to 3, each capturing `a` (4,000 distinct bytes a turn), then a rewind to turn 1
/// that retires turns 2 and 3 (kept for its undo), and a blob no record names.
fn history(dir: &tempfile::TempDir) -> (std::fs::File, Store) {
    let root = std::fs::File::open(dir.path()).expect("open");
    let mut s = Store::for_test(root.as_fd()).expect("store");
    file_cap(&mut s, 1, "a", &[1u8; 4000]);
    for t in 2..=3u8 {
        s.append(Record::Turn {
            turn: Turn::new(u64::from(t)),
            label: None,
            by: None,
            conversation: None,
        })
        .expect("turn");
        file_cap(&mut s, u64::from(t), "a", &[t; 4000]);
    }
    let begin = s
        .append(Record::RewindBegin {
            to: Turn::new(1),
            from: Turn::new(3),
        })
        .expect("rewind");
    s.append(Record::RewindDone {
        begin,
        counts: None,
    })
    .expect("rewind done");
    s.blobs.put_bytes(&[9u8; 3000]).expect("orphan");
    (root, s)
}

fn journal(dir: &tempfile::TempDir) -> Vec<u8> {
    std::fs::read(dir.path().join(".ckpt/journal.jsonl")).expect("journal")
}

#[test]
fn a_prune_that_drops_no_turn_keeps_the_undo_history_and_the_journal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_root, mut s) = history(&dir);
    let before = journal(&dir);
    let undo: Vec<u64> = s.index.ops.undo.iter().map(|a| a.op).collect();
    let r = prune(
        &mut s,
        Policy {
            keep_turns: Some(20),
            ..Policy::default()
        },
    )
    .expect("prune");
    assert!(r.unrecoverable.is_empty() && r.lost.is_empty(), "{r:?}");
    assert_eq!((r.undo_history, r.op), (UndoHistory::Keep, None));
    assert_eq!(r.removed_blobs, 1, "only the blob no record names");
    assert_eq!(journal(&dir), before, "the journal is kept byte for byte");
    assert_eq!(
        s.index.ops.undo.iter().map(|a| a.op).collect::<Vec<_>>(),
        undo
    );
    assert_eq!(
        s.blobs.list().expect("list").len(),
        3,
        "the rewound turns' too"
    );
    assert!(super::super::fsck::check(s.dir()).clean());
}

#[test]
fn drop_undo_forgets_the_history_and_says_what_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_root, mut s) = history(&dir);
    let policy = Policy {
        undo: UndoHistory::Drop,
        ..Policy::default()
    };
    let preview = preview(&s, policy).expect("preview");
    let r = prune(&mut s, policy).expect("prune");
    assert_eq!(r.unrecoverable.dropped_turns, Vec::<Turn>::new());
    assert_eq!(r.unrecoverable.lost_ops, vec![2, 3, 4]);
    assert_eq!(r.unrecoverable.lost_rewound_turns, turns([2, 3]));
    assert_eq!(
        r.lost.last(),
        Some(&Loss::RewoundTurn {
            turn: Turn::new(3),
            label: None,
            by: 4
        })
    );
    assert_eq!(r.op, Some(5));
    // Turn 1 began afresh with the rewind: every capture left was held for its undo.
    assert_eq!(
        r.removed_blobs, 4,
        "the orphan and every blob the undo held"
    );
    assert!(s.index.ops.undo.is_empty());
    // The plan said it all, to the byte.
    assert!(preview.dry_run && !r.dry_run);
    assert_eq!(preview.unrecoverable, r.unrecoverable);
    assert_eq!(preview.lost, r.lost);
    assert_eq!(
        (
            preview.removed_blobs,
            preview.freed_bytes,
            preview.store_bytes
        ),
        (r.removed_blobs, r.freed_bytes, r.store_bytes)
    );
}

#[test]
fn a_plan_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_root, s) = history(&dir);
    let (journal_before, blobs_before) = (journal(&dir), s.blobs.list().expect("list"));
    for undo in [UndoHistory::Keep, UndoHistory::Drop] {
        let r = preview(
            &s,
            Policy {
                keep_turns: Some(1),
                max_size: Some(1),
                undo,
            },
        )
        .expect("preview");
        assert!(r.dry_run && r.freed_bytes > 0, "{r:?}");
    }
    assert_eq!(journal(&dir), journal_before);
    assert_eq!(s.blobs.list().expect("list"), blobs_before);
}

#[test]
fn a_store_over_max_size_only_by_its_undo_history_keeps_it_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_root, s) = history(&dir);
    let policy = Policy {
        max_size: Some(6000),
        ..Policy::default()
    };
    let r = preview(&s, policy).expect("preview");
    assert!(r.unrecoverable.is_empty(), "{r:?}");
    assert_eq!(r.over_max_size, Some(6000));
    assert!(r.with_drop_undo.is_some_and(|b| b > r.freed_bytes), "{r:?}");
    assert_eq!(r.keeping_one_turn, None, "one turn is all there is");
}
