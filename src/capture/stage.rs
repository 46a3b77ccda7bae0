//! Staging: capturing a regular file's last name by moving (or linking) its inode into the
//! store's `staged/` folder, its bytes stored later by the `ckpt-stager` thread.
//!
//! A removal (`rm`) or a save by rename over a file (`sed -i`, editors) would otherwise read
//! and hash the whole file on the request path. Here the capture record is appended first
//! (pre-image `Staged`, pending), then one `rename` into `staged/<seq>` is both the capture and
//! the removal (or one `link` keeps the bytes across the rename over); the stager thread reads,
//! stores and records the bytes afterwards, off the request path and mostly outside the store
//! lock. Anything that must see a pending pre-image's bytes first ([`Capturer::lock`],
//! [`Capturer::settle_inode`], a prune) stores it itself. This is its own file because it is
//! the one capture path with a second thread, a second step the caller completes (the
//! [`PendingStage`] token, settled or, dropped, taken as failed), and a crash window (between
//! the record and the move) that `Store::open` recovers.

use super::{CaptureError, Capturer, Who, lock_store, read_preimage};
use crate::identity::FileId;
use crate::ids::{Epoch, Seq};
use crate::relpath::RelPath;
use crate::store::blob::BlobStore;
use crate::store::journal::{PreImage, Record};
use crate::store::{Store, StoredStage};
use crate::sync::Mutex;
use crate::sys::{self, SysResult};
use crate::xattrs::{self, Via};
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, mpsc};

/// How a file enters `staged/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageBy {
    /// Renamed there: its removal.
    Move,
    /// Hard-linked there: it is about to be renamed over.
    Link,
}

/// A staged pre-image waiting for its bytes to be stored: its capture's seq in journal `epoch`.
#[derive(Debug, Clone, Copy)]
struct Staged {
    epoch: Epoch,
    seq: Seq,
}

/// A staged pre-image whose removal or rename the caller has still to report, returned by
/// [`Capturer::stage`] (the shape of a rename guard: try, confirm, revert on drop). Settle it
/// with [`PendingStage::settle`] once the removal or rename is done or has failed. Dropped
/// unsettled (an early return, a panic), it is settled as not done: its bytes are stored at
/// once and its staged file removed, as after a failed rename, so no path can leave it behind.
/// Settling or dropping one takes the store lock: never while holding [`Capturer::lock`].
#[must_use = "settle it with `settle(done)` once the removal or rename is done or has failed"]
#[derive(Debug)]
pub struct PendingStage<'a> {
    capturer: &'a Capturer,
    /// `None` once settled.
    staged: Option<Staged>,
}

impl PendingStage<'_> {
    /// Reports the removal or rename that [`Capturer::stage`] prepared: when `done`, the
    /// staged name is the inode's last one and it goes to the stager; when the rename failed,
    /// the file still has its name (and can be written through it), so its bytes are stored
    /// now (what dropping it unsettled does too).
    pub fn settle(mut self, done: bool) {
        if let Some(staged) = self.staged.take() {
            if done {
                self.capturer.hand_to_stager(staged);
            } else {
                self.capturer.store_now(staged);
            }
        }
    }
}

impl Drop for PendingStage<'_> {
    fn drop(&mut self) {
        if let Some(staged) = self.staged.take() {
            // Never settled: as after a failed rename, its bytes are stored now.
            self.capturer.store_now(staged);
        }
    }
}

/// The `ckpt-stager` thread and the queue that hands it staged pre-images (by capture seq).
#[derive(Debug)]
pub(super) struct Stager {
    queue: mpsc::Sender<Staged>,
    thread: std::thread::JoinHandle<()>,
}

impl Stager {
    /// Starts the thread that stores the staged pre-images of `store` (`blobs` its blob store,
    /// `staged` its `staged/` folder); `None`, logged, when the thread cannot start.
    pub(super) fn start(
        store: &Arc<Mutex<Store>>,
        blobs: Arc<BlobStore>,
        staged: OwnedFd,
    ) -> Option<Self> {
        let (queue, rx) = mpsc::channel();
        let shared = Arc::clone(store);
        std::thread::Builder::new()
            .name("ckpt-stager".into())
            .spawn(move || run_stager(&shared, &blobs, &staged, &rx))
            .map(|thread| Stager { queue, thread })
            .map_err(|e| log::warn!(target: "ckpt::capture", "no stager thread: {e}"))
            .ok()
    }

    /// Closes the queue and waits for the thread to store everything it was handed.
    pub(super) fn stop(self) {
        let Stager { queue, thread } = self;
        drop(queue);
        let _ = thread.join();
    }
}

/// The stager thread: stores the bytes of each staged pre-image it is handed, outside the
/// store lock (a staged file has no other name and no open descriptor, so its bytes cannot
/// change; the blob store orders its own puts), then records what each became, a batch per
/// lock and journal write, and removes their staged files.
fn run_stager(
    store: &Mutex<Store>,
    blobs: &BlobStore,
    staged: &OwnedFd,
    queue: &mpsc::Receiver<Staged>,
) {
    // Below the request threads: it works in their gaps, and the client's turn is not slowed.
    sys::lower_thread_priority(STAGER_NICE);
    while let Ok(first) = queue.recv() {
        // Whatever has queued up meanwhile (in the same journal epoch) goes in the same batch.
        let epoch = first.epoch;
        let mut batch = vec![first.seq];
        let mut next = None;
        for s in queue.try_iter().take(STAGER_BATCH - 1) {
            if s.epoch != epoch {
                next = Some(s);
                break;
            }
            batch.push(s.seq);
        }
        store_staged_batch(store, blobs, staged, epoch, batch);
        if let Some(s) = next {
            store_staged_batch(store, blobs, staged, s.epoch, vec![s.seq]);
        }
    }
}

/// One batch of the stager: stores the bytes, then records and removes the staged files.
fn store_staged_batch(
    store: &Mutex<Store>,
    blobs: &BlobStore,
    staged: &OwnedFd,
    epoch: Epoch,
    batch: Vec<Seq>,
) {
    let stored: Vec<StoredStage> = batch
        .into_iter()
        .filter_map(|seq| {
            let name = Store::staged_name(seq);
            let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
            let fd = sys::openat_noatime(staged.as_fd(), &name, flags).ok()?;
            let st = sys::fstat(fd.as_fd()).ok()?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return None; // left for `settle`, which records why
            }
            let read = blobs
                .put_fd_sized(fd.as_fd(), st.st_size as u64)
                .and_then(|b| Ok((b, xattrs::read_all(Via::Open(fd.as_fd()))?)));
            match read {
                Ok((blob, xattrs)) => Some(StoredStage {
                    seq,
                    ino: st.st_ino,
                    blob,
                    xattrs,
                }),
                Err(e) => {
                    log::warn!(target: "ckpt::capture", "staged pre-image {seq} not stored yet: {e}");
                    None
                }
            }
        })
        .collect();
    let done = match lock_store(store).record_stored_stages(epoch, stored) {
        Ok(done) => done,
        Err(e) => {
            log::warn!(target: "ckpt::capture", "recording stored pre-images failed: {e}");
            return;
        }
    };
    for seq in done {
        let _ = sys::unlinkat(staged.as_fd(), &Store::staged_name(seq), 0);
    }
}

/// The stager thread's nice value (the request threads run at the process's own).
const STAGER_NICE: i32 = 10;
/// Most staged pre-images stored per lock of the store.
const STAGER_BATCH: usize = 256;

/// A name about to go away by a removal or a rename over it, as [`Capturer::stage`] takes it:
/// `name` in the directory `parent`, at `path`, `st` its `lstat`, and whether a handle of the
/// mount holds its file open (then it is captured the usual way: its writes go on).
#[derive(Clone, Copy)]
pub struct Staging<'a> {
    /// The directory.
    pub parent: BorrowedFd<'a>,
    /// The name in it.
    pub name: &'a CStr,
    /// Its path in the folder.
    pub path: &'a RelPath,
    /// Its `lstat`.
    pub st: &'a libc::stat,
    /// Whether a handle holds the file open.
    pub held_open: bool,
}

impl Capturer {
    /// A settled, done stage: its bytes are the stager's to store.
    fn hand_to_stager(&self, staged: Staged) {
        let queue = self.stager.lock().as_ref().map(|s| s.queue.clone());
        if queue.is_none_or(|q| q.send(staged).is_err()) {
            // The stager stopped: store it here rather than leave it for the next settle.
            self.store_now(staged);
        }
    }

    /// A stage settled as not done (or never settled): its bytes are stored now.
    fn store_now(&self, staged: Staged) {
        let mut store = self.lock_raw();
        if store.epoch() != staged.epoch {
            return; // a prune stored it before renumbering
        }
        if let Err(e) = store.resolve_stage(staged.seq) {
            log::warn!(target: "ckpt::capture", "staged pre-image {} not stored yet: {e}", staged.seq);
        }
    }

    /// Captures `name` in `parent` (= `path`, `st` its `lstat`) before its removal (`Move`) or
    /// before it is renamed over (`Link`). The last name of a regular file is captured by
    /// moving its inode into the store's `staged/` folder (`Move`: one `rename` is both the
    /// capture and the removal) or by a hard link there (`Link`); its bytes are read, hashed
    /// and stored later by the stager thread, off the request path. The capture record is
    /// written first, so a crash between the two leaves the file at its name, where the next
    /// open of the store reads it. Files with other names, held open, on another device, over
    /// `--max-blob`, or in a `--durable` store are captured the usual way.
    /// `Some(_)`: staged; the caller settles the [`PendingStage`] once its removal or rename is
    /// done or failed (a `Move` is done), and a token dropped unsettled counts as failed.
    /// `None`: captured the usual way (or this turn has it already), the caller removes or
    /// renames `name` itself.
    pub fn stage(
        &self,
        at: Staging<'_>,
        who: Who,
        by: StageBy,
    ) -> Result<Option<PendingStage<'_>>, CaptureError> {
        let Staging {
            parent,
            name,
            path,
            st,
            held_open,
        } = at;
        let actor = self.actor(who);
        let mut store = self.lock_raw();
        if store.index().captured_now.contains_key(path) {
            Self::attribute(&mut store, path, who, actor.as_ref())?;
            return Ok(None);
        }
        if !self.can_stage(&store, st, held_open) {
            Self::ensure_locked(
                &mut store,
                self.max_blob,
                parent,
                name,
                path,
                who,
                actor.as_ref(),
            )?;
            return Ok(None);
        }
        let id = FileId::read_at(parent, name, 0, st.st_ino);
        let pre = PreImage::Staged {
            size: st.st_size as u64,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            ino: st.st_ino,
            nlink: 1,
            fh: id.fh,
            btime: id.btime,
        };
        // The capture's seq (its touch, when there is one, follows it in the same write).
        let seq = Self::record(&mut store, path, pre, who, actor)?;
        crate::failpoint::hit("stage-after-record");
        if place_in_staged(&store, parent, name, seq, by).is_err() {
            // Still at its name (or gone): capture it the usual way, as this capture's
            // resolution; the caller's own removal or rename then gives its errno.
            resolve_unstaged(&mut store, parent, name, seq, self.max_blob)?;
            return Ok(None);
        }
        let staged = Staged {
            epoch: store.epoch(),
            seq,
        };
        // Unlocked before the token exists: dropping it takes the lock.
        drop(store);
        Ok(Some(PendingStage {
            capturer: self,
            staged: Some(staged),
        }))
    }

    /// Whether the file `st` (held open or not) can be staged: the last name of a regular
    /// file on the store's device, within `--max-blob`, the store not `--durable`, and a
    /// stager running to store its bytes.
    fn can_stage(&self, store: &Store, st: &libc::stat, held_open: bool) -> bool {
        st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_nlink == 1
            && !held_open
            && st.st_dev == store.dev()
            && !store.durable()
            && (st.st_size as u64) <= self.max_blob
            && self.stager.lock().is_some()
    }

    /// Before a descriptor that can write host inode `ino` is handed out: a pending staged
    /// pre-image of that inode is stored first, so no write can reach its bytes.
    pub fn settle_inode(&self, ino: u64) -> Result<(), CaptureError> {
        Ok(self.lock_raw().settle_inode(ino)?)
    }
}

/// Puts `name` in `parent` at capture `seq`'s name in `staged/`: renamed there (`Move`, never
/// over an existing name) or hard-linked there (`Link`).
fn place_in_staged(
    store: &Store,
    parent: BorrowedFd<'_>,
    name: &CStr,
    seq: Seq,
    by: StageBy,
) -> SysResult<()> {
    let staged_name = Store::staged_name(seq);
    match by {
        StageBy::Move => sys::renameat2(
            parent,
            name,
            store.staged_dir(),
            &staged_name,
            libc::RENAME_NOREPLACE,
        ),
        StageBy::Link => sys::linkat(parent, name, store.staged_dir(), &staged_name),
    }
}

/// Capture `seq` was recorded as staged but its file could not be put in `staged/`: resolves
/// it at once to what `name` in `parent` holds now, a stored file (or skipped); anything else
/// there is recorded as changed while it was being captured.
fn resolve_unstaged(
    store: &mut Store,
    parent: BorrowedFd<'_>,
    name: &CStr,
    seq: Seq,
    max_blob: u64,
) -> Result<(), CaptureError> {
    let pre = match read_preimage(store.blobs(), parent, name, max_blob) {
        Ok(pre @ (PreImage::File { .. } | PreImage::Skipped { .. })) => pre,
        Ok(other) => PreImage::Skipped {
            was: other.kind().into(),
            size: 0,
            reason: "it changed while it was being captured".into(),
        },
        Err(e) => return Err(e.into()),
    };
    store.append(Record::Staged { capture: seq, pre })?;
    Ok(())
}

#[cfg(test)]
mod tests {
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
}
