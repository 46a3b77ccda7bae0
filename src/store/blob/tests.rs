//! The blob store's own tests: storing, deduplication, compression, taking back.

use super::*;
use std::os::fd::AsFd;

fn store() -> (tempfile::TempDir, BlobStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fd = std::fs::File::open(dir.path()).expect("open");
    let s = BlobStore::open(fd.as_fd(), crate::tree::Durability::Lazy).expect("blob store");
    (dir, s)
}

#[test]
fn identical_bytes_are_stored_once() {
    let (dir, s) = store();
    let a = s.put_bytes(b"hello").expect("put");
    let b = s.put_bytes(b"hello").expect("put");
    assert!(a.new);
    assert!(!b.new);
    assert_eq!(
        a.id.to_hex(),
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    assert_eq!(s.list().expect("list").len(), 1);
    // Small blobs are appended to a pack, raw: the pack holds the bytes once.
    let pack = std::fs::read(dir.path().join("blobs/packs/pack-0.dat")).expect("read pack");
    assert_eq!(pack, b"hello");
    let idx = std::fs::read_to_string(dir.path().join("blobs/packs/pack-0.idx")).expect("idx");
    assert_eq!(idx, format!("{} 0 5 r\n", a.id));
    let mut back = Vec::new();
    s.read_blob(&a.id, &mut |c| {
        back.extend_from_slice(c);
        Ok(())
    })
    .expect("read");
    assert_eq!(back, b"hello");
}

#[test]
fn blobs_taken_back_leave_the_blob_directory_as_it_was() {
    let (dir, s) = store();
    let s = Arc::new(s);
    s.put_bytes(b"before").expect("put");
    let listing = || {
        let mut l: Vec<(String, u64)> = walk(&dir.path().join("blobs"));
        l.sort();
        l
    };
    let before = listing();
    let added = s.track_added().expect("tracking");
    assert!(s.track_added().is_none(), "one piece of work at a time");
    s.put_bytes(b"small, new").expect("put");
    s.put_bytes(b"before").expect("put an old one");
    s.put_bytes(&vec![3u8; SMALL + 1]).expect("put a large one");
    // A worker thread's blobs are listed once it joins.
    std::thread::scope(|t| {
        t.spawn(|| {
            let _joined = s.join_tracking();
            s.put_bytes(&vec![4u8; SMALL * 2])
                .expect("put from a worker");
        });
    });
    assert_ne!(listing(), before);
    added.take_back();
    assert_eq!(
        listing(),
        before,
        "packs cut back, loose blobs and their shards removed"
    );
    assert_eq!(s.list().expect("list").len(), 1);
    // Storing goes on as before, into shards made again.
    assert!(s.put_bytes(&vec![3u8; SMALL + 1]).expect("put again").new);
    assert!(s.put_bytes(b"small, new").expect("put again").new);
    // Kept, the blobs stay.
    let added = s.track_added().expect("tracking");
    s.put_bytes(b"kept").expect("put");
    added.keep();
    assert!(s.exists(&BlobId::of(b"kept")));
}

/// The stager stores a staged file's bytes outside a rewind: when a rewind's saves stored
/// the same bytes anew just before, the stager finds them stored and journals a record
/// naming them. A refusal of that rewind must leave them (regression: `blob-missing` of
/// the empty file's blob after `kill -9`s, `faults::fifty_kill_9s_lose_nothing_that_completed`).
#[test]
fn a_blob_another_thread_found_stored_is_not_taken_back() {
    let (_dir, s) = store();
    let s = Arc::new(s);
    let added = s.track_added().expect("tracking");
    let small = s.put_bytes(b"").expect("the saves store the empty file");
    let large = s.put_bytes(&vec![5u8; SMALL + 1]).expect("and a large one");
    assert!(small.new && large.new);
    std::thread::scope(|t| {
        t.spawn(|| {
            // The stager, not part of the rewind: both are found, not stored again.
            assert!(!s.put_bytes(b"").expect("stager put").new);
            assert!(!s.put_bytes(&vec![5u8; SMALL + 1]).expect("stager put").new);
        });
    });
    let packed_ours = s.put_bytes(b"the rewind's alone").expect("put");
    let loose_ours = s.put_bytes(&vec![6u8; SMALL + 1]).expect("put");
    added.take_back();
    assert!(
        s.exists(&small.id),
        "the stager's record names the empty blob"
    );
    assert!(s.exists(&large.id), "and the large one");
    assert!(
        !s.exists(&loose_ours.id),
        "a loose blob only the rewind stored goes"
    );
    assert!(
        s.exists(&packed_ours.id),
        "the pack is not cut past a blob that is not the rewind's: it stays for a prune"
    );
}

/// Every file below `d` with its size, and every directory (size 0), by relative path.
fn walk(d: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).expect("read_dir") {
        let p = e.expect("entry").path();
        let md = std::fs::metadata(&p).expect("stat");
        out.push((
            p.display().to_string(),
            if md.is_dir() { 0 } else { md.len() },
        ));
        if md.is_dir() {
            out.extend(walk(&p));
        }
    }
    out
}

#[test]
fn loose_blobs_are_known_after_reopening_and_stored_again_when_deleted_by_hand() {
    let (dir, s) = store();
    let big = vec![7u8; SMALL + 1];
    let first = s.put_bytes(&big).expect("put");
    assert!(first.new);
    drop(s);
    // Reopened: the loose blob is found by the scan at open, so it is not stored twice.
    let d = std::fs::File::open(dir.path()).expect("open");
    let s = BlobStore::open(d.as_fd(), crate::tree::Durability::Lazy).expect("reopen");
    assert!(!s.put_bytes(&big).expect("put again").new);
    // Deleted by hand under a running store: found missing on disk, stored again.
    let hex = first.id.to_hex();
    let shard = dir.path().join("blobs").join(&hex[..2]);
    std::fs::remove_file(shard.join(&hex[2..])).expect("delete blob");
    assert!(!s.exists(&first.id));
    assert!(s.put_bytes(&big).expect("put after delete").new);
    assert!(s.verify(&first.id).expect("verify"));
    // A new small blob does not look for loose names at all, and is packed once.
    let small = s.put_bytes(b"small").expect("put small");
    assert!(small.new);
    assert!(!s.put_bytes(b"small").expect("put small again").new);
    assert_eq!(s.list().expect("list").len(), 2);
}

#[test]
fn compressed_blobs_read_back_verify_and_dedup_with_raw_ones() {
    let (dir, s) = store();
    let raw = s.put_bytes(b"stored raw first").expect("put");
    s.set_compress(true);
    assert!(
        !s.put_bytes(b"stored raw first").expect("put").new,
        "same bytes, stored once"
    );
    let text: Vec<u8> = b"fn main() { println!(\"hello\"); }\n".repeat(20_000);
    let path = dir.path().join("src.rs");
    std::fs::write(&path, &text).expect("write");
    let f = std::fs::File::open(&path).expect("open");
    let big = s.put_fd(f.as_fd()).expect("put big");
    let small = s.put_bytes(b"small and compressed").expect("put small");
    for st in [&big, &small] {
        assert_eq!(s.stored_form(&st.id), Some(true));
        assert!(s.verify(&st.id).expect("verify"));
    }
    assert_eq!(s.stored_form(&raw.id), Some(false));
    let mut back = Vec::new();
    s.read_blob(&big.id, &mut |c| {
        back.extend_from_slice(c);
        Ok(())
    })
    .expect("read");
    assert_eq!(back, text);
    let big_hex = big.id.to_hex();
    let on_disk = std::fs::metadata(
        dir.path()
            .join("blobs")
            .join(&big_hex[..2])
            .join(format!("{}.zst", &big_hex[2..])),
    )
    .expect("stat")
    .len();
    assert!(
        on_disk * 20 < text.len() as u64,
        "{on_disk} bytes for {}",
        text.len()
    );
    let ids: Vec<BlobId> = s
        .list()
        .expect("list")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(ids.contains(&big.id) && ids.contains(&raw.id));
    // A damaged compressed blob fails verification instead of erroring out.
    std::fs::write(
        dir.path()
            .join("blobs")
            .join(&big_hex[..2])
            .join(format!("{}.zst", &big_hex[2..])),
        b"junk",
    )
    .expect("damage");
    assert!(!s.verify(&big.id).expect("verify"));
    s.remove(&big.id).expect("remove");
    assert!(!s.exists(&big.id));
}

#[test]
fn a_size_hint_that_is_wrong_still_stores_the_whole_file() {
    let (dir, s) = store();
    for (len, hint) in [
        (1000usize, 10u64),
        (10, 1000),
        (SMALL + 5, 3),
        (0, 0),
        (7, 7),
    ] {
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let path = dir.path().join(format!("f{len}-{hint}"));
        std::fs::write(&path, &data).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let st = s.put_fd_sized(f.as_fd(), hint).expect("put");
        assert_eq!(st.size, len as u64, "len {len} hint {hint}");
        assert_eq!(st.id, BlobId::of(&data), "len {len} hint {hint}");
        assert!(s.exists(&st.id));
    }
}

#[test]
fn large_content_streams_and_verifies() {
    let (dir, s) = store();
    let data: Vec<u8> = (0..CHUNK * 3 + 17).map(|i| (i % 251) as u8).collect();
    let path = dir.path().join("big");
    std::fs::write(&path, &data).expect("write");
    let f = std::fs::File::open(&path).expect("open");
    let st = s.put_fd(f.as_fd()).expect("put");
    assert_eq!(st.size, data.len() as u64);
    assert_eq!(st.id, BlobId::of(&data));
    assert!(s.verify(&st.id).expect("verify"));
    let again = s.put_fd(f.as_fd()).expect("put");
    assert!(!again.new);
    // Damage the blob: verify must notice.
    let hex = st.id.to_hex();
    std::fs::write(
        dir.path().join("blobs").join(&hex[..2]).join(&hex[2..]),
        b"x",
    )
    .expect("damage");
    assert!(!s.verify(&st.id).expect("verify"));
}
