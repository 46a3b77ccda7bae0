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
        if store.index().captured_now.contains_key(path) || !self.can_stage(&store, st, held_open) {
            // Captured already: attributed, with a hand-off when it changes hands (its bytes
            // read now, under the lock: a change of hands is rare); or not to be staged: read
            // now.
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
mod tests;
