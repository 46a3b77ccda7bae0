//! Room: whether the disks hold the space a rewind needs, asked before it changes anything.
//!
//! A rewind first stores what it overwrites or deletes (its saves for the undo; a partial
//! rewind's captures for the current turn), then writes what it restores into the folder. On a
//! full disk the saves would fail half-way; so the run asks first and, when the space is not
//! there, is refused in one line that names the space needed and free, the largest files the
//! rewound turns created (what to delete or move) and what to do. Its dry run (a whole or
//! partial rewind's, an undo's, a redo's) says the same and exits 1.
//!
//! The estimate never undercounts:
//! - **saves**: every regular file the saves read (each inode once; the same walk as `save.rs`,
//!   the same paths left out) takes what a new blob of its size takes ([`room_for`]: a small
//!   one its bytes in a pack, a larger one whole blocks of the store's disk and a block for its
//!   shard). Only when that does not fit are the files hashed, largest first, until it fits:
//!   a file whose bytes the store holds already, or another file of the saves has, takes
//!   nothing (the store keeps each content once).
//! - **journal**: [`RECORD`] bytes and twice its path for each path saved, [`CLOSING`] for each
//!   restoration and [`FRAME`] once: more than the records take.
//! - **writes**: each file the run writes (the restorations the preview lists as written),
//!   its size rounded up to whole blocks of the folder's disk; a block for each directory,
//!   symlink or FIFO it makes.
//! - What the rewind frees (the files it removes or replaces) is not counted: it is freed only
//!   as the run goes, and not at all while a process holds such a file open.
//!
//! The space free is what `statvfs` of the store's and the folder's held descriptors gives a
//! normal user (`f_bavail`). When both are on one filesystem (one device), saves and writes
//! are counted against it together.
//!
//! I/O: `lstat`s what the saves would read, reads and hashes files only when the first count
//! does not fit; changes nothing.

use super::links::Anchors;
use super::plan::Plan;
use super::preview::{Decided, Stood};
use super::resolve::{Parents, cname, open_parent_raw};
use super::room::{SizedPath, Space};
use crate::capture::walk_tree;
use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::blob::room_for;
use crate::store::journal::PreImage;
use crate::sys::{self, Errno};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd};

/// Journal bytes counted for each path saved, besides twice its path: more than a capture
/// record of a path with its usual extended attributes takes.
const RECORD: u64 = 512;
/// Journal bytes counted for each restoration: the records that close the rewind.
const CLOSING: u64 = 128;
/// Journal bytes counted once: the records that begin and end the operation.
const FRAME: u64 = 64 * 1024;
/// How many of the largest files the rewound turns created a refusal names.
const NAMED: usize = 3;

/// The space a run of `plan` needs and the space free: `decided` is what it does to each
/// restoration ([`super::preview::decide`]); its saves read every path of the plan and the
/// names outside it that it rewrites in place (`anchors`), leaving out `saved` (see
/// `save::saved_before`).
pub(super) fn needed(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    anchors: &Anchors,
    saved: &HashSet<&RelPath>,
    decided: &Decided,
) -> Space {
    let store_disk = disk(store.dir());
    let folder_disk = disk(root);
    let same_disk = match (&store_disk, &folder_disk) {
        (Some(s), Some(f)) => s.dev == f.dev,
        _ => true,
    };
    let store_block = store_disk.as_ref().map_or(4096, |d| d.block);
    let folder_block = folder_disk.as_ref().map_or(4096, |d| d.block);
    let extra = anchors.outside_plan(plan);
    let walked = walk(root, (plan, decided.stood()), &extra, saved);
    let journal = walked
        .records
        .saturating_mul(RECORD)
        .saturating_add(walked.path_bytes.saturating_mul(2))
        .saturating_add((plan.restore.len() as u64).saturating_mul(CLOSING))
        .saturating_add(FRAME);
    let blobs: u64 = walked
        .files
        .values()
        .map(|f| room_for(f.size, store_block))
        .sum();
    let write_bytes = decided
        .written(plan)
        .map(|s| match &s.target {
            PreImage::File { size, .. } => size.div_ceil(folder_block) * folder_block,
            _ => folder_block,
        })
        .sum();
    let mut created: Vec<&Found> = walked.files.values().filter(|f| f.created).collect();
    created.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.path.cmp(&b.path)));
    let mut space = Space {
        save_bytes: blobs.saturating_add(journal),
        write_bytes,
        store_free: store_disk.map(|d| d.free),
        folder_free: if same_disk {
            None
        } else {
            folder_disk.map(|d| d.free)
        },
        same_disk,
        fits: true,
        created: Vec::new(),
    };
    space.fits = space.fitting();
    if !space.fits {
        dedup(root, store, &walked, store_block, &mut space);
        // Named: the largest, and the next ones while they make a difference (a hundredth of
        // what is missing at least).
        let missing = space.missing();
        space.created = created
            .iter()
            .enumerate()
            .take_while(|(i, f)| *i == 0 || f.size.saturating_mul(100) >= missing)
            .take(NAMED)
            .map(|(_, f)| SizedPath {
                path: f.path.clone(),
                bytes: f.size,
            })
            .collect();
    }
    space
}

/// Takes out of `space` the files of `walked` whose bytes the store holds already (or another
/// of them has), hashed largest first, until it fits.
fn dedup(root: BorrowedFd<'_>, store: &Store, walked: &Walked, block: u64, space: &mut Space) {
    let mut files: Vec<(&(u64, u64), &Found)> = walked.files.iter().collect();
    files.sort_by(|a, b| {
        b.1.size
            .cmp(&a.1.size)
            .then_with(|| a.1.path.cmp(&b.1.path))
    });
    let mut hashed: HashSet<BlobId> = HashSet::new();
    for (inode, f) in files {
        if space.fitting() {
            break;
        }
        let Some(id) = content_id(root, &f.path, *inode) else {
            continue;
        };
        if store.blobs().exists(&id) || !hashed.insert(id) {
            space.save_bytes = space.save_bytes.saturating_sub(room_for(f.size, block));
        }
    }
    space.fits = space.fitting();
}

/// The sha256 of the file at `path`, if it still is the inode `(dev, ino)` (read without
/// moving its access time).
fn content_id(root: BorrowedFd<'_>, path: &RelPath, (dev, ino): (u64, u64)) -> Option<BlobId> {
    let parent = open_parent_raw(root, path).ok()?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = sys::openat_noatime(parent.as_fd(), &cname(path), flags).ok()?;
    let st = sys::fstat(fd.as_fd()).ok()?;
    if (st.st_dev, st.st_ino) != (dev, ino) {
        return None;
    }
    BlobId::of_file_sized(fd.as_fd(), st.st_size as u64).ok()
}

/// A filesystem as `statvfs` and `fstat` see it through a held descriptor.
struct Disk {
    dev: u64,
    /// Bytes a normal user may still use.
    free: u64,
    /// Its allocation unit.
    block: u64,
}

fn disk(fd: BorrowedFd<'_>) -> Option<Disk> {
    let vfs = sys::fstatvfs(fd).ok()?;
    let st = sys::fstat(fd).ok()?;
    Some(Disk {
        dev: st.st_dev,
        free: vfs.f_bavail.saturating_mul(vfs.f_frsize),
        block: vfs.f_frsize.max(512),
    })
}

/// A regular file the saves would read.
struct Found {
    /// Its first name met.
    path: RelPath,
    size: u64,
    /// Whether it lies at or below a path the rewind removes: a rewound turn created it.
    created: bool,
}

/// What the saves would read: their regular files (by inode), how many paths they record and
/// the length of those paths.
#[derive(Default)]
struct Walked {
    files: HashMap<(u64, u64), Found>,
    records: u64,
    path_bytes: u64,
}

impl Walked {
    fn record(&mut self, path: &RelPath) {
        self.records += 1;
        self.path_bytes += path.as_bytes().len() as u64;
    }

    /// The regular file `st` at `path`, counted once per inode (at its first name met).
    fn file(&mut self, path: &RelPath, st: &libc::stat, created: bool) {
        self.files
            .entry((st.st_dev, st.st_ino))
            .or_insert_with(|| Found {
                path: path.clone(),
                size: st.st_size as u64,
                created,
            });
    }
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Walks what the saves read (`save.rs`'s `read_current`): every path of the plan whose
/// target was stored and the names `extra`, with everything below them, each once, leaving
/// out `saved`. A path that cannot be reached counts as one record (the saves refuse it, or
/// save it as absent). A restoration whose path the preview found holding no directory
/// (`stood`, aligned with `plan.restore`) is counted from what the preview found.
fn walk(
    root: BorrowedFd<'_>,
    (plan, stood): (&Plan, &[Option<Stood>]),
    extra: &[RelPath],
    saved: &HashSet<&RelPath>,
) -> Walked {
    let removed: HashSet<&RelPath> = plan.remove.iter().map(|s| &s.path).collect();
    let known = plan
        .remove
        .iter()
        .map(|_| None)
        .chain(stood.iter().copied());
    let paths = plan
        .steps()
        .zip(known)
        .filter(|(s, _)| !matches!(s.target, PreImage::Skipped { .. }))
        .map(|(s, known)| (&s.path, known))
        .chain(extra.iter().map(|p| (p, None)));
    let mut walked = Walked::default();
    let mut seen: HashSet<RelPath> = HashSet::new();
    let mut parents = Parents::new(root);
    for (path, known) in paths {
        if let Some(st) = known.filter(|st| st.is_none_or(|st| !is_dir(&st))) {
            // Nothing, or no directory: the one record the walk would make of it.
            if !seen.contains(path) && !saved.contains(path) {
                seen.insert(path.clone());
                walked.record(path);
                if let Some(st) = st.filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG) {
                    walked.file(path, &st, removed.contains(path));
                }
            }
            continue;
        }
        let Ok(parent) = parents.raw(path) else {
            if !saved.contains(path) && seen.insert(path.clone()) {
                walked.record(path);
            }
            continue;
        };
        let below_removed = removed.contains(path);
        let name = cname(path);
        // A failure to read is the saves' to report: what was walked is counted.
        let _ = walk_tree(parent, &name, path, &mut |p, dir, n| {
            if seen.contains(p) {
                return Ok(Some(false));
            }
            if saved.contains(p) {
                return Ok(None);
            }
            seen.insert(p.clone());
            walked.record(p);
            let st = match sys::lstatat(dir, n) {
                Ok(st) => st,
                Err(Errno(libc::ENOENT)) => return Ok(Some(false)),
                Err(e) => return Err(e),
            };
            let kind = st.st_mode & libc::S_IFMT;
            if kind == libc::S_IFREG {
                walked.file(p, &st, below_removed || removed.contains(p));
            }
            Ok(Some(kind == libc::S_IFDIR))
        });
    }
    walked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(save: u64, write: u64, store_free: u64, folder_free: Option<u64>) -> Space {
        let mut s = Space {
            save_bytes: save,
            write_bytes: write,
            store_free: Some(store_free),
            folder_free,
            same_disk: folder_free.is_none(),
            fits: true,
            created: vec![SizedPath {
                path: RelPath::new(b"big").expect("a valid path"),
                bytes: 5 << 20,
            }],
        };
        s.fits = s.fitting();
        s
    }

    #[test]
    fn saves_and_writes_on_one_disk_are_counted_together() {
        assert!(space(3, 4, 7, None).fits);
        assert!(!space(3, 4, 6, None).fits);
        assert!(space(3, 4, 3, Some(4)).fits);
        assert!(!space(3, 4, 3, Some(3)).fits);
        let mut unknown = space(3, 4, 0, None);
        unknown.store_free = None;
        assert!(unknown.fitting(), "an unknown free space refuses nothing");
    }

    #[test]
    fn the_shortfall_names_the_numbers_the_files_and_the_remedy() {
        assert_eq!(
            space(7 << 20, 1 << 20, 3 << 20, None).shortfall(),
            "not enough space on the disk of the folder and its store: the rewind needs 8.0 MiB (7.0 MiB to save what it overwrites and deletes, for its undo, and 1.0 MiB to write into the folder) and 3.0 MiB is free; the largest files the rewound turns created: big (5.0 MiB); free at least 5.0 MiB (delete or move files off that disk) or see what a prune would free (ckpt-mount prune --dry-run), then run it again"
        );
        assert_eq!(
            space(7 << 20, 0, 3 << 20, None).shortfall(),
            "not enough space on the disk of the folder and its store: the rewind needs 7.0 MiB (7.0 MiB to save what it overwrites and deletes, for its undo) and 3.0 MiB is free; the largest files the rewound turns created: big (5.0 MiB); free at least 4.0 MiB (delete or move files off that disk) or see what a prune would free (ckpt-mount prune --dry-run), then run it again"
        );
        assert_eq!(
            space(7 << 20, 1 << 20, 3 << 20, Some(8 << 20)).shortfall(),
            "not enough space: the rewind needs 7.0 MiB in the store, to save what it overwrites and deletes for its undo (3.0 MiB free on its disk), and 1.0 MiB in the folder (8.0 MiB free on its disk); the largest files the rewound turns created: big (5.0 MiB); free at least 4.0 MiB on the store's disk (delete or move files off that disk) or see what a prune would free (ckpt-mount prune --dry-run), then run it again"
        );
    }

    #[test]
    fn what_the_preview_found_counts_as_the_walk_would() {
        use crate::store::index::tests::file;
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("tree/sub")).expect("mkdir");
        for (name, len) in [("a", 10), ("b", 5000), ("tree/x", 7), ("tree/sub/y", 9)] {
            std::fs::write(d.join(name), vec![b'x'; len]).expect("write");
        }
        std::fs::hard_link(d.join("a"), d.join("a2")).expect("link");
        std::os::unix::fs::symlink("a", d.join("s")).expect("symlink");
        let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).expect("path");
        let root = sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY).expect("open");
        let r = root.as_fd();
        let p = |s: &str| RelPath::new(s.as_bytes()).expect("path");
        let dir_pre = PreImage::Dir {
            mode: 0o755,
            uid: 0,
            gid: 0,
            xattrs: None,
        };
        // Files, a second name of one, a symlink, a directory, a path with nothing, a tree
        // the rewind removes, and a path below it.
        let targets = vec![
            (p("a"), file("one")),
            (p("a2"), file("two")),
            (p("b"), file("three")),
            (p("s"), file("four")),
            (p("new"), file("five")),
            (p("tree"), PreImage::Absent),
            (p("tree/x"), file("six")),
            (p("sub2"), dir_pre),
        ];
        let plan = super::super::plan(targets, &HashSet::new());
        let anchors = super::super::links::link_anchors(r, &plan, &HashSet::new());
        let decided = super::super::preview::decide(r, &plan, &anchors);
        assert!(
            decided.stood().iter().filter(|s| s.is_some()).count() >= 5,
            "the preview looked at most paths"
        );
        let none = vec![None; plan.restore.len()];
        let saved = HashSet::new();
        let fast = walk(r, (&plan, decided.stood()), &[], &saved);
        let slow = walk(r, (&plan, &none), &[], &saved);
        let files = |w: &Walked| {
            let mut v: Vec<(String, u64, bool)> = w
                .files
                .values()
                .map(|f| (f.path.to_string(), f.size, f.created))
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            (fast.records, fast.path_bytes, files(&fast)),
            (slow.records, slow.path_bytes, files(&slow))
        );
        assert_eq!(
            files(&slow).len(),
            4,
            "a, b, tree/x, tree/sub/y: {:?}",
            files(&slow)
        );
    }

    #[test]
    fn a_large_blob_takes_whole_blocks_and_a_small_one_its_bytes() {
        assert_eq!(room_for(10, 4096), 110);
        assert_eq!(room_for(100_000, 4096), 102_400 + 4096);
        assert_eq!(room_for(1 << 20, 4096), (1 << 20) + 4096);
    }
}
