//! The stager's own tests: staging, storing, recovery.

use super::*;
use crate::capture::tests::{lstat, project, rp};
use crate::ids::Turn;
use crate::store::journal::PreImage;
use crate::sys::Errno;
use std::os::fd::AsFd;

/// A removal as the filesystem does it: staged (and done), or left to the caller.
fn remove_into_store(
    cap: &Capturer,
    parent: BorrowedFd<'_>,
    name: &CStr,
    path: &RelPath,
    st: &libc::stat,
    held_open: bool,
) -> bool {
    let at = Staging {
        parent,
        name,
        path,
        st,
        held_open,
    };
    let staged = cap.stage(at, Who::default(), StageBy::Move).expect("stage");
    staged.map(|s| s.settle(true)).is_some()
}

/// Stages `name` (in the folder's top) by a link, as before a rename over it.
fn link_stage<'a>(
    cap: &'a Capturer,
    root: &std::fs::File,
    name: &CStr,
    path: &str,
) -> PendingStage<'a> {
    let st = lstat(root, name);
    let who = Who::default();
    let path = rp(path);
    let at = Staging {
        parent: root.as_fd(),
        name,
        path: &path,
        st: &st,
        held_open: false,
    };
    cap.stage(at, who, StageBy::Link)
        .expect("stage")
        .expect("staged by a link")
}

fn content_of(store: &Store, pre: &PreImage) -> Vec<u8> {
    let PreImage::File { blob, .. } = pre else {
        panic!("not a stored file: {pre:?}");
    };
    let mut out = Vec::new();
    store
        .blobs()
        .read_blob(blob, &mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .expect("read blob");
    out
}

/// The stored bytes of every capture, in journal order.
fn captured_bytes(store: &Store) -> Vec<Vec<u8>> {
    store
        .index()
        .captures
        .iter()
        .map(|c| content_of(store, &c.pre))
        .collect()
}

fn staged_files(dir: &tempfile::TempDir) -> usize {
    std::fs::read_dir(dir.path().join(".ckpt/staged"))
        .expect("staged dir")
        .count()
}

/// The capture seq of a stage not settled yet.
fn seq_of(pending: &PendingStage<'_>) -> Seq {
    pending.staged.expect("not settled").seq
}

/// The captures a `staged` record of the journal file resolves, in journal order.
fn staged_records(dir: &tempfile::TempDir) -> Vec<u64> {
    let journal =
        std::fs::read_to_string(dir.path().join(".ckpt/journal.jsonl")).expect("read journal");
    journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|v| v["op"] == "staged")
        .map(|v| v["capture"].as_u64().expect("capture seq"))
        .collect()
}

/// What a stage never settled leaves, checked without `Capturer::lock` (which would
/// store it anyway): resolved in the journal and the index, its staged file gone.
fn assert_stored_at_once(dir: &tempfile::TempDir, cap: &Capturer, seq: Seq, bytes: &[u8]) {
    let records = staged_records(dir);
    let resolving = records.iter().filter(|s| **s == seq.get()).count();
    assert_eq!(resolving, 1, "one staged record in the journal resolves it");
    let store = cap.lock_raw();
    assert!(store.index().pending.is_empty(), "nothing left pending");
    let c = store.index().captures.iter().find(|c| c.seq == seq);
    assert_eq!(content_of(&store, &c.expect("its capture").pre), bytes);
    drop(store);
    assert_eq!(staged_files(dir), 0, "its staged file is removed");
}

#[test]
fn a_stage_dropped_unsettled_is_stored_at_once_as_after_a_failed_rename() {
    let (dir, root, cap) = project();
    std::fs::write(dir.path().join("kept"), b"kept bytes").expect("write");
    std::fs::write(dir.path().join("removed"), b"removed bytes").expect("write");
    // A rename over `kept` whose caller returns early (its `?`) before settling the stage.
    let mut seq = None;
    let mut rename_over = || -> Result<(), Errno> {
        let pending = link_stage(&cap, &root, c"kept", "kept");
        seq = Some(seq_of(&pending));
        sys::renameat2(root.as_fd(), c"missing", root.as_fd(), c"kept", 0)?;
        pending.settle(true);
        Ok(())
    };
    assert_eq!(rename_over(), Err(Errno(libc::ENOENT)));
    let seq = seq.expect("staged");
    assert_stored_at_once(&dir, &cap, seq, b"kept bytes");
    assert_eq!(lstat(&root, c"kept").st_nlink, 1, "the staged link is gone");
    assert_eq!(
        std::fs::read(dir.path().join("kept")).expect("read"),
        b"kept bytes"
    );

    // A removal whose request thread panics after the move: stored during the unwind.
    let st = lstat(&root, c"removed");
    let mut seq = None;
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let path = rp("removed");
        let at = Staging {
            parent: root.as_fd(),
            name: c"removed",
            path: &path,
            st: &st,
            held_open: false,
        };
        let pending = cap
            .stage(at, Who::default(), StageBy::Move)
            .expect("stage")
            .expect("staged by a move");
        seq = Some(seq_of(&pending));
        panic!("the request thread fails before settling its stage");
    }));
    assert!(panicked.is_err());
    assert_stored_at_once(&dir, &cap, seq.expect("staged"), b"removed bytes");
    assert!(
        !dir.path().join("removed").exists(),
        "the move was the removal"
    );

    // Replayed from the journal: both resolutions hold.
    drop(cap);
    let store = Store::reopen_for_test(root.as_fd()).expect("reopen");
    assert_eq!(
        captured_bytes(&store),
        vec![b"kept bytes".to_vec(), b"removed bytes".to_vec()]
    );
}

#[test]
fn a_removed_file_is_moved_into_the_store_and_its_bytes_stored_later() {
    let (dir, root, cap) = project();
    std::fs::write(dir.path().join("a.txt"), b"turn-start bytes").expect("write");
    let st = lstat(&root, c"a.txt");
    let moved = remove_into_store(&cap, root.as_fd(), c"a.txt", &rp("a.txt"), &st, false);
    assert!(moved, "one rename was the capture and the removal");
    assert!(!dir.path().join("a.txt").exists());
    let store = cap.lock(); // settles whatever the stager has not done yet
    assert!(store.index().pending.is_empty());
    let c = store.index().captures.last().expect("a capture");
    assert_eq!(c.path, rp("a.txt"));
    assert_eq!(content_of(&store, &c.pre), b"turn-start bytes");
    drop(store);
    assert_eq!(staged_files(&dir), 0, "a stored pre-image leaves staged/");
    // Replayed from the journal: the resolution holds.
    drop(cap);
    let store = Store::reopen_for_test(root.as_fd()).expect("reopen");
    let c = store.index().captures.last().expect("a capture");
    assert_eq!(content_of(&store, &c.pre), b"turn-start bytes");
}

#[test]
fn a_file_renamed_over_is_staged_by_a_link_and_stored_whether_or_not_the_rename_happens() {
    let (dir, root, cap) = project();
    for (n, body) in [("saved", "old bytes"), ("kept", "kept bytes")] {
        std::fs::write(dir.path().join(n), body).expect("write");
    }
    std::fs::write(dir.path().join("new"), b"new bytes").expect("write");
    // An editor's save: the new file renamed over the old.
    let saved = link_stage(&cap, &root, c"saved", "saved");
    assert_eq!(
        lstat(&root, c"saved").st_nlink,
        2,
        "linked, still at its name"
    );
    std::fs::rename(dir.path().join("new"), dir.path().join("saved")).expect("rename");
    saved.settle(true);
    // A rename that failed: the file keeps its name and is stored at once.
    let kept = link_stage(&cap, &root, c"kept", "kept");
    let seq = seq_of(&kept);
    kept.settle(false);
    let pending = cap.lock_raw().index().pending.contains_key(&seq);
    assert!(!pending, "stored when the rename failed");
    assert_eq!(lstat(&root, c"kept").st_nlink, 1, "the staged link is gone");
    let store = cap.lock();
    let bytes = captured_bytes(&store);
    assert_eq!(bytes, vec![b"old bytes".to_vec(), b"kept bytes".to_vec()]);
    drop(store);
    assert_eq!(staged_files(&dir), 0);
    assert_eq!(
        std::fs::read(dir.path().join("saved")).expect("read"),
        b"new bytes"
    );
}

#[test]
fn a_stage_stored_after_a_prune_renumbered_the_journal_is_not_recorded_twice() {
    let (dir, root, cap) = project();
    drop(cap);
    let mut store = Store::reopen_for_test(root.as_fd()).expect("store");
    // A line the prune drops (turn 1's), for the one it adds (its `pruned` record): the
    // renumbered journal then gives the next capture the seq of the staged one.
    store
        .append(Record::Capture {
            turn: Turn::new(1),
            path: rp("x"),
            pre: PreImage::Absent,
            undo_of: None,
            pid: None,
            comm: None,
        })
        .expect("turn 1 capture");
    store
        .append(Record::Turn {
            turn: Turn::new(2),
            label: None,
            by: None,
            conversation: None,
        })
        .expect("turn 2");
    std::fs::write(dir.path().join("f"), b"bytes").expect("write");
    let st = lstat(&root, c"f");
    let pre = PreImage::Staged {
        size: 5,
        mode: 0o644,
        uid: 0,
        gid: 0,
        ino: st.st_ino,
        nlink: 1,
        fh: None,
        btime: None,
    };
    Capturer::record(&mut store, &rp("f"), pre, Who::default(), None).expect("record");
    let (seq, epoch) = (store.index().last_seq, store.epoch());
    let name = Store::staged_name(seq);
    sys::renameat2(root.as_fd(), c"f", store.staged_dir(), &name, 0).expect("move");
    // What the stager stored outside the lock, for that (epoch, seq).
    let fd = sys::openat(store.staged_dir(), &name, libc::O_RDONLY, 0).expect("open");
    let blob = store.blobs().put_fd(fd.as_fd()).expect("put");
    // A prune meanwhile: it stores every pending stage first, then renumbers every seq.
    store.settle();
    let policy = crate::store::prune::Policy {
        keep_turns: Some(1),
        max_size: None,
        undo: crate::store::prune::UndoHistory::Drop,
    };
    crate::store::prune::prune(&mut store, policy).expect("prune");
    assert_eq!(store.epoch(), epoch.next());
    // A new stage after the prune gets the same seq (renumbered) and, by inode reuse, the
    // same inode number: the late result must not become its pre-image.
    let pre = PreImage::Staged {
        size: 5,
        mode: 0o644,
        uid: 0,
        gid: 0,
        ino: st.st_ino,
        nlink: 1,
        fh: None,
        btime: None,
    };
    Capturer::record(&mut store, &rp("g"), pre, Who::default(), None).expect("record g");
    assert_eq!(
        store.index().last_seq,
        seq,
        "the collision this guards against"
    );
    let late = store
        .record_stored_stages(
            epoch,
            vec![crate::store::StoredStage {
                seq,
                ino: st.st_ino,
                blob,
                xattrs: Vec::new(),
            }],
        )
        .expect("late record");
    assert!(late.is_empty(), "a stale (epoch, seq) names nothing");
    assert!(
        store.index().pending.contains_key(&seq),
        "g still waits for its own bytes"
    );
    let f = store.index().captures.iter().find(|c| c.path == rp("f"));
    assert_eq!(content_of(&store, &f.expect("f").pre), b"bytes");
}

#[test]
fn files_with_other_names_or_held_open_are_copied_and_left_to_the_caller() {
    let (dir, root, cap) = project();
    std::fs::write(dir.path().join("linked"), b"shared").expect("write");
    std::fs::hard_link(dir.path().join("linked"), dir.path().join("other")).expect("link");
    std::fs::write(dir.path().join("open"), b"held").expect("write");
    for (name, path, held) in [(c"linked", "linked", false), (c"open", "open", true)] {
        let st = lstat(&root, name);
        let moved = remove_into_store(&cap, root.as_fd(), name, &rp(path), &st, held);
        assert!(!moved);
        assert!(dir.path().join(path).exists(), "the caller removes it");
    }
    let store = cap.lock();
    let bytes = captured_bytes(&store);
    assert_eq!(bytes, vec![b"shared".to_vec(), b"held".to_vec()]);
}

#[test]
fn a_staged_inode_opened_for_writing_is_stored_before_the_descriptor_is_used() {
    let (dir, root, cap) = project();
    std::fs::write(dir.path().join("f"), b"before").expect("write");
    // An open racing the removal got the inode just before it moved.
    let racing = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("f"))
        .expect("open");
    let st = lstat(&root, c"f");
    {
        // The removal's two steps, with the stager not told (so the stage stays pending).
        let mut store = cap.lock_raw();
        let pre = PreImage::Staged {
            size: st.st_size as u64,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            ino: st.st_ino,
            nlink: 1,
            fh: None,
            btime: None,
        };
        Capturer::record(&mut store, &rp("f"), pre, Who::default(), None).expect("record");
        let name = Store::staged_name(store.index().last_seq);
        sys::renameat2(root.as_fd(), c"f", store.staged_dir(), &name, 0).expect("move");
        assert_eq!(store.index().pending.len(), 1);
    }
    let fst = sys::fstat(racing.as_fd()).expect("fstat");
    cap.ensure_open_file(racing.as_fd(), libc::O_RDWR, &fst, &rp("f"), Who::default())
        .expect("the racing open");
    assert!(
        cap.lock_raw().index().pending.is_empty(),
        "stored at the open"
    );
    // Only now may the opener write.
    use std::io::Write;
    (&racing).write_all(b"AFTER").expect("write");
    let store = cap.lock();
    let c = store.index().captures.last().expect("capture");
    assert_eq!(content_of(&store, &c.pre), b"before");
}

#[test]
fn a_crash_between_the_record_and_the_move_is_recovered_from_the_folder_or_reported() {
    let (dir, root, cap) = project();
    drop(cap);
    // A bare store: dropping it is a daemon killed (no stager, nothing settled at exit).
    let mut store = Store::reopen_for_test(root.as_fd()).expect("store");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/kept"), b"still here").expect("write");
    let sub = std::fs::File::open(dir.path().join("sub")).expect("sub");
    // As the daemon records them: with the identity that proves the inode later.
    let kept_id = FileId::of_name(sub.as_fd(), c"kept").expect("identity");
    for (path, id) in [
        ("sub/kept", kept_id),
        (
            "lost",
            FileId {
                ino: 42,
                fh: None,
                btime: None,
            },
        ),
    ] {
        let pre = PreImage::Staged {
            size: 3,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: id.ino,
            nlink: 1,
            fh: id.fh,
            btime: id.btime,
        };
        Capturer::record(&mut store, &rp(path), pre, Who::default(), None).expect("rec");
    }
    drop(store);
    std::fs::write(dir.path().join(".ckpt/staged/999"), b"stray").expect("stray");
    let store = Store::reopen_for_test(root.as_fd()).expect("reopen");
    assert!(store.index().pending.is_empty());
    let pre_of = |p: &str| {
        let c = store.index().captures.iter().find(|c| c.path == rp(p));
        c.expect("capture").pre.clone()
    };
    // Never moved, still the same inode at its name: read from the folder.
    assert_eq!(content_of(&store, &pre_of("sub/kept")), b"still here");
    // Gone (or another inode): reported by any rewind, never guessed.
    let lost = pre_of("lost");
    assert!(
        matches!(&lost, PreImage::Skipped { reason, .. } if reason.contains("stopped")),
        "{lost:?}"
    );
    assert_eq!(
        staged_files(&dir),
        0,
        "a staged file no capture waits for is removed"
    );
}
