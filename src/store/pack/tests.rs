//! The packs' own tests: appends held and not, reloads, compaction, taking back.

use super::*;

#[test]
fn put_read_reload_and_compact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::fs::File::open(dir.path()).expect("open");
    let a: BlobId = "a".repeat(64).parse().expect("blob id");
    let b: BlobId = "b".repeat(64).parse().expect("blob id");
    {
        let p = Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy)
            .expect("packs");
        p.put(&a, b"alpha", false).expect("put");
        p.put(&b, b"beta!", true).expect("put");
        assert_eq!(p.read(p.get(&a).expect("a")).expect("read"), b"alpha");
    }
    // A torn index line and a line pointing past the data are ignored on load.
    let idx = dir.path().join("packs/pack-0.idx");
    let mut text = std::fs::read(&idx).expect("idx");
    text.extend_from_slice(
        format!("{} 999 5 r\n{} 0 5", "c".repeat(64), "d".repeat(64)).as_bytes(),
    );
    std::fs::write(&idx, text).expect("write idx");
    let p =
        Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy).expect("reopen");
    assert_eq!(p.entries().len(), 2);
    assert!(p.get(&b).expect("b").compressed);
    assert!(p.remove(&a));
    p.compact().expect("compact");
    assert!(p.get(&a).is_none());
    assert_eq!(p.read(p.get(&b).expect("b")).expect("read"), b"beta!");
    assert!(!dir.path().join("packs/pack-0.dat").exists());
    let p = Packs::open(d.as_fd(), Access::ReadOnly, crate::tree::Durability::Lazy)
        .expect("reopen read-only");
    assert_eq!(p.entries(), vec![(b, 5)]);
}

/// `n` distinct blob ids (not the hashes of anything).
fn ids(n: usize) -> Vec<BlobId> {
    (0..n)
        .map(|i| format!("{i:064x}").parse().expect("blob id"))
        .collect()
}

/// The blobs a fresh open of the packs finds.
fn on_disk(d: &std::fs::File) -> Vec<(BlobId, u64)> {
    let mut e = Packs::open(d.as_fd(), Access::ReadOnly, crate::tree::Durability::Lazy)
        .expect("reopen")
        .entries();
    e.sort();
    e
}

/// An empty blob (the empty file's, zero bytes of data) is on disk once its put returns,
/// held or not: its index line was once left pending behind "no data pending", lost at a
/// `kill -9` or dropped with a hold, while a journal record named it (`blob-missing` of
/// e3b0c44298fc in `tests/faults.rs`).
#[test]
fn an_empty_blob_is_on_disk_once_put_held_or_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::fs::File::open(dir.path()).expect("open");
    let ids = ids(3);
    let p =
        Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy).expect("packs");
    p.put(&ids[0], b"", false).expect("put");
    assert_eq!(on_disk(&d), vec![(ids[0], 0)], "a lone empty put");
    {
        let held = p.hold_appends();
        p.put(&ids[1], b"", false).expect("put");
        held.finish().expect("finish");
    }
    assert_eq!(
        on_disk(&d),
        vec![(ids[0], 0), (ids[1], 0)],
        "an empty put held"
    );
    // Cut back after a refused piece of work: an empty blob pending is not "nothing".
    let end = p.mark().expect("mark");
    p.put(&ids[2], b"", false).expect("put");
    assert!(
        p.take_back(end, &ids[2..].iter().copied().collect())
            .expect("take back")
    );
    assert_eq!(on_disk(&d), vec![(ids[0], 0), (ids[1], 0)], "taken back");
    assert!(p.get(&ids[2]).is_none());
}

#[test]
fn held_appends_are_readable_at_once_and_on_disk_when_finished_or_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::fs::File::open(dir.path()).expect("open");
    let ids = ids(6);
    let mut p =
        Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy).expect("packs");
    p.limit = 50; // rolls over to a new pack while holding
    let held = p.hold_appends();
    for (i, id) in ids[..4].iter().enumerate() {
        p.put(id, format!("held blob {i:02}!").as_bytes(), false)
            .expect("put");
    }
    assert_eq!(
        p.read(p.get(&ids[3]).expect("held")).expect("read"),
        b"held blob 03!",
        "a held blob reads back before it is written"
    );
    let partial = on_disk(&d);
    assert!(partial.len() < 4, "some appends are held: {partial:?}");
    // Another thread that finds a held blob stored (deduplication) has it written first.
    std::thread::scope(|s| {
        s.spawn(|| p.write_held_of_others().expect("write"));
    });
    assert_eq!(
        on_disk(&d).len(),
        4,
        "written before another thread relies on them"
    );
    p.put(&ids[4], b"held, then", false).expect("put");
    // Another thread's append writes what is held first, then its own.
    let other: BlobId = "e".repeat(64).parse().expect("blob id");
    std::thread::scope(|s| {
        s.spawn(|| p.put(&other, b"other thread", false).expect("put"));
    });
    assert_eq!(on_disk(&d).len(), 6, "written before the other append");
    p.put(&ids[5], b"held again", false).expect("put");
    assert_eq!(on_disk(&d).len(), 6);
    held.finish().expect("finish");
    assert_eq!(on_disk(&d).len(), 7);
    let reopened =
        Packs::open(d.as_fd(), Access::ReadOnly, crate::tree::Durability::Lazy).expect("reopen");
    for (i, id) in ids[..4].iter().enumerate() {
        let loc = reopened.get(id).expect("packed");
        let want = format!("held blob {i:02}!");
        assert_eq!(reopened.read(loc).expect("read"), want.as_bytes());
    }
    // Dropped without finishing: written all the same.
    let seventh: BlobId = "7".repeat(64).parse().expect("blob id");
    {
        let _held = p.hold_appends();
        p.put(&seventh, b"dropped", false).expect("put");
        assert_eq!(on_disk(&d).len(), 7);
    }
    assert_eq!(on_disk(&d).len(), 8);
}

#[test]
fn threads_that_join_a_hold_add_to_its_batch_until_the_last_finishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::fs::File::open(dir.path()).expect("open");
    let ids = ids(5);
    let p =
        Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy).expect("packs");
    let held = p.hold_appends();
    p.put(&ids[0], b"the holder's", false).expect("put");
    std::thread::scope(|s| {
        s.spawn(|| {
            let joined = held.join();
            p.put(&ids[1], b"a worker's", false).expect("put");
            // A worker's append does not write the batch, nor does its check before it
            // takes a blob as stored: the batch is one.
            p.write_held_of_others().expect("write");
            assert_eq!(on_disk(&d).len(), 0, "held for the whole group");
            assert_eq!(
                p.read(p.get(&ids[0]).expect("held")).expect("read"),
                b"the holder's"
            );
            joined.finish().expect("finish");
            // A worker's finish writes what it stored (and what is held with it).
            assert_eq!(on_disk(&d).len(), 2);
        });
    });
    p.put(&ids[2], b"held on", false).expect("put");
    assert_eq!(
        on_disk(&d).len(),
        2,
        "the hold goes on for its first thread"
    );
    // A thread outside the group has the batch written before it relies on the index.
    std::thread::scope(|s| {
        s.spawn(|| p.write_held_of_others().expect("write"));
    });
    assert_eq!(on_disk(&d).len(), 3);
    // A guard that holds nothing lends nothing: joining it holds nothing.
    let inactive = p.hold_appends();
    std::thread::scope(|s| {
        s.spawn(|| {
            let joined = inactive.join();
            p.put(&ids[3], b"not held", false).expect("put");
            assert_eq!(on_disk(&d).len(), 4, "written at once");
            joined.finish().expect("finish");
        });
    });
    inactive.finish().expect("finish");
    p.put(&ids[4], b"held last", false).expect("put");
    assert_eq!(on_disk(&d).len(), 4);
    held.finish().expect("finish");
    assert_eq!(on_disk(&d).len(), 5);
}

#[test]
fn a_compaction_that_rolls_over_to_several_new_packs_keeps_every_live_blob() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::fs::File::open(dir.path()).expect("open");
    let ids = ids(12);
    let mut p =
        Packs::open(d.as_fd(), Access::ReadWrite, crate::tree::Durability::Lazy).expect("packs");
    p.limit = 40; // a new pack every few blobs
    for (i, id) in ids.iter().enumerate() {
        p.put(id, format!("blob number {i:02}").as_bytes(), false)
            .expect("put");
    }
    assert!(p.remove(&ids[0]));
    p.compact().expect("compact");
    let live = &ids[1..];
    let check = |p: &Packs| {
        for (i, id) in live.iter().enumerate() {
            let loc = p.get(id).unwrap_or_else(|| panic!("blob {} lost", i + 1));
            let want = format!("blob number {:02}", i + 1);
            assert_eq!(p.read(loc).expect("read"), want.as_bytes());
        }
        assert!(p.get(&ids[0]).is_none());
    };
    check(&p);
    let packs = std::fs::read_dir(dir.path().join("packs"))
        .expect("ls")
        .count();
    assert!(packs > 2, "the compaction rolled over ({packs} pack files)");
    drop(p);
    check(
        &Packs::open(d.as_fd(), Access::ReadOnly, crate::tree::Durability::Lazy).expect("reopen"),
    );
}
