//! Reading pre-images from the host tree, and the capture policy: once per (turn, path).
//!
//! Invariant: the pre-image of a path is in the journal (and its blob in the store) before
//! the mutation that needs it reaches the host filesystem; if capture fails, the caller fails
//! the mutation with the capture's errno. Nothing here follows a symlink, opens a FIFO for
//! more than a non-blocking stat, or reads a device.

use crate::identity::FileId;
use crate::relpath::RelPath;
use crate::store::blob::BlobStore;
use crate::store::journal::{LinkTarget, PreImage, Record, Xattr};
use crate::store::{Store, StoreError};
use crate::sys::{self, Errno, SysResult};
use crate::xattrs::{self, Via};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};

/// Reads what `name` in `parent` is now, storing file content in `blobs`.
pub fn read_preimage(
    blobs: &BlobStore,
    parent: BorrowedFd<'_>,
    name: &CStr,
    max_blob: u64,
) -> SysResult<PreImage> {
    let st = match sys::lstatat(parent, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(PreImage::Absent),
        Err(e) => return Err(e),
    };
    let (mode, uid, gid) = (st.st_mode & 0o7777, st.st_uid, st.st_gid);
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let size = st.st_size as u64;
            if size > max_blob {
                return Ok(PreImage::Skipped {
                    was: "file".into(),
                    size,
                    reason: format!(
                        "{size} bytes is over the --max-blob limit of {max_blob} bytes"
                    ),
                });
            }
            let fd = sys::openat_noatime(
                parent,
                name,
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
            )?;
            let now = sys::fstat(fd.as_fd())?;
            if now.st_ino != st.st_ino || now.st_dev != st.st_dev {
                // Replaced between stat and open: nothing in the mount can do that while we hold
                // the gate, so this is an outside writer; refuse rather than store a mix.
                return Err(Errno(libc::EAGAIN));
            }
            read_open_file(blobs, fd.as_fd(), &now, max_blob)?
        }
        libc::S_IFDIR => PreImage::Dir {
            mode,
            uid,
            gid,
            xattrs: Some(xattrs_by_name(parent, name)?),
        },
        libc::S_IFLNK => {
            let id = FileId::read_at(parent, name, 0, st.st_ino);
            PreImage::Symlink {
                target: LinkTarget(sys::readlinkat(parent, name)?),
                uid,
                gid,
                ino: Some(st.st_ino),
                nlink: Some(st.st_nlink),
                fh: id.fh,
                btime: id.btime,
                xattrs: Some(xattrs_by_name(parent, name)?),
            }
        }
        libc::S_IFIFO => PreImage::Fifo {
            mode,
            uid,
            gid,
            xattrs: Some(xattrs_by_name(parent, name)?),
        },
        libc::S_IFSOCK => PreImage::Skipped {
            was: "socket".into(),
            size: 0,
            reason: "sockets cannot be restored; the program that made it must make it again"
                .into(),
        },
        _ => PreImage::Skipped {
            was: "device".into(),
            size: 0,
            reason: "device nodes are not captured or restored".into(),
        },
    })
}

/// The pre-image of the regular file open (readable) at `fd`, whose `fstat` is `st`: read from
/// offset 0 through the descriptor, so it is that inode's content whatever its name is now.
pub fn read_open_file(
    blobs: &BlobStore,
    fd: BorrowedFd<'_>,
    st: &libc::stat,
    max_blob: u64,
) -> SysResult<PreImage> {
    let size = st.st_size as u64;
    if size > max_blob {
        return Ok(PreImage::Skipped {
            was: "file".into(),
            size,
            reason: format!("{size} bytes is over the --max-blob limit of {max_blob} bytes"),
        });
    }
    let stored = blobs.put_fd_sized(fd, size)?;
    let id = FileId::of_fd(fd, st.st_ino);
    Ok(PreImage::File {
        blob: stored.id,
        size: stored.size,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        ino: st.st_ino,
        nlink: st.st_nlink,
        fh: id.fh,
        btime: id.btime,
        xattrs: Some(xattrs::read_all(Via::Open(fd))?),
    })
}

/// The extended attributes of `name` in `parent`, reached through an `O_PATH` descriptor
/// (directories, symlinks and FIFOs are never opened for I/O by a capture).
fn xattrs_by_name(parent: BorrowedFd<'_>, name: &CStr) -> SysResult<Vec<Xattr>> {
    let fd = sys::openat(parent, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
    xattrs::read_all(Via::Path(fd.as_fd()))
}

/// Calls `f(path, parent, name)` for `name` and, when it is a directory, everything below it
/// (parents before children). Never follows a symlink.
pub fn walk_tree(
    parent: BorrowedFd<'_>,
    name: &CStr,
    path: &RelPath,
    f: &mut dyn FnMut(&RelPath, BorrowedFd<'_>, &CStr) -> SysResult<()>,
) -> SysResult<()> {
    f(path, parent, name)?;
    let st = match sys::lstatat(parent, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(()),
        Err(e) => return Err(e),
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Ok(());
    }
    let dir = sys::openat_noatime(
        parent,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )?;
    for e in sys::read_dir_all(dir.as_fd(), false)? {
        let child_name = std::ffi::OsStr::from_bytes_compat(&e.name);
        let Ok(child) = RelPath::join(Some(path), child_name) else {
            continue;
        };
        let cname = CString::new(e.name).map_err(|_| Errno(libc::EINVAL))?;
        walk_tree(dir.as_fd(), &cname, &child, f)?;
    }
    Ok(())
}

trait FromBytesCompat {
    fn from_bytes_compat(b: &[u8]) -> &std::ffi::OsStr;
}

impl FromBytesCompat for std::ffi::OsStr {
    fn from_bytes_compat(b: &[u8]) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b)
    }
}

/// One name of a file held open for writing: `(parent dir, name, path)`, or the error that
/// kept the name from being reached.
pub type HeldName<'a> = Result<(BorrowedFd<'a>, &'a CStr, &'a RelPath), Errno>;

/// Visits every name of every file held open for writing.
pub type OpenForWrite<'a> = dyn Fn(&mut dyn FnMut(HeldName<'_>)) + 'a;

/// The process behind a request, recorded with each capture.
#[derive(Debug, Clone, Copy, Default)]
pub struct Who {
    /// Its pid (0 when unknown).
    pub pid: u32,
}

/// Why a turn could not begin.
#[derive(Debug)]
pub enum TurnError {
    /// The number is not greater than the current turn.
    NotAfter {
        /// The current turn.
        current: u64,
    },
    /// A file held open for writing could not be captured for the new turn.
    HeldOpen(Errno),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAfter { current } => write!(
                f,
                "a new turn must be greater than the current turn {current}"
            ),
            Self::HeldOpen(e) => write!(
                f,
                "a file held open for writing cannot be captured for the new turn: {e}"
            ),
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

/// Largest turn number accepted (keeps every number exact in JSON readers).
pub const MAX_TURN: u64 = (1 << 53) - 1;

/// The default `--max-blob`: bigger files are recorded as skipped, not stored.
pub const DEFAULT_MAX_BLOB: u64 = 1 << 30;

/// The capture policy over an open store.
#[derive(Debug)]
pub struct Capturer {
    store: Arc<Mutex<Store>>,
    max_blob: u64,
    comms: Mutex<HashMap<u32, String>>,
    /// Hands staged pre-images (by capture seq) to the thread that stores their bytes.
    stager: Mutex<Option<Stager>>,
}

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
pub struct Staged {
    epoch: u64,
    seq: u64,
}

#[derive(Debug)]
struct Stager {
    queue: mpsc::Sender<Staged>,
    thread: std::thread::JoinHandle<()>,
}

fn lock_store(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    // A panic while holding the lock would have killed the daemon; recover the data anyway.
    lock_ignoring_poison(store)
}

fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
    epoch: u64,
    batch: Vec<u64>,
) {
    let stored: Vec<crate::store::StoredStage> = batch
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
                Ok((blob, xattrs)) => Some(crate::store::StoredStage {
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

impl Drop for Capturer {
    fn drop(&mut self) {
        let stager = self
            .stager
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Stager { queue, thread }) = stager {
            drop(queue);
            let _ = thread.join();
        }
        lock_store(&self.store).settle();
    }
}

impl Capturer {
    /// Wraps an open store, starting the thread that stores staged pre-images (without it,
    /// when the thread cannot start, nothing is staged).
    pub fn new(store: Store, max_blob: u64) -> Self {
        let staged = store.staged_dir().try_clone_to_owned();
        let blobs = Arc::clone(&store.blobs);
        let store = Arc::new(Mutex::new(store));
        let stager = staged.ok().and_then(|staged| {
            let (queue, rx) = mpsc::channel();
            let shared = Arc::clone(&store);
            std::thread::Builder::new()
                .name("ckpt-stager".into())
                .spawn(move || run_stager(&shared, &blobs, &staged, &rx))
                .map(|thread| Stager { queue, thread })
                .map_err(|e| log::warn!(target: "ckpt::capture", "no stager thread: {e}"))
                .ok()
        });
        Self {
            store,
            max_blob,
            comms: Mutex::new(HashMap::new()),
            stager: Mutex::new(stager),
        }
    }

    /// Locks the store for direct use (rewind, status, diff, prune): every staged pre-image
    /// is stored first, so the index holds no `Staged` pre-image (unless its bytes could not be
    /// stored; they are then still in `staged/`, and a rewind reports the path).
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        let mut store = lock_store(&self.store);
        if !store.index.pending.is_empty() {
            store.settle();
        }
        store
    }

    /// Locks the store for capturing (pending staged pre-images may stay pending).
    fn lock_raw(&self) -> MutexGuard<'_, Store> {
        lock_store(&self.store)
    }

    /// The size limit for stored file content.
    pub fn max_blob(&self) -> u64 {
        self.max_blob
    }

    fn comm(&self, pid: u32) -> Option<String> {
        if pid == 0 {
            return None;
        }
        let mut cache = self
            .comms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(&pid) {
            return Some(c.clone());
        }
        let c = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim_end()
            .to_string();
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(pid, c.clone());
        Some(c)
    }

    /// Records the pre-image of `path` (= `name` in `parent`) unless this turn has it already.
    pub fn ensure(
        &self,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        who: Who,
    ) -> Result<(), Errno> {
        let mut store = self.lock_raw();
        if store.index.captured_now.contains(path) {
            return Ok(()); // the common case: no /proc read for the program's name
        }
        Self::ensure_locked(
            &mut store,
            self.max_blob,
            parent,
            name,
            path,
            who,
            self.comm(who.pid),
        )
    }

    /// After the removal or rename that [`Self::stage`] prepared: when `done`, the staged name
    /// is the inode's last one and it goes to the stager; when the rename failed, the file
    /// still has its name (and can be written through it), so its bytes are stored now.
    pub fn staged_done(&self, staged: Staged, done: bool) {
        if done {
            self.hand_to_stager(staged);
        } else {
            self.store_now(staged);
        }
    }

    fn hand_to_stager(&self, staged: Staged) {
        let queue = lock_ignoring_poison(&self.stager)
            .as_ref()
            .map(|s| s.queue.clone());
        if queue.is_none_or(|q| q.send(staged).is_err()) {
            // The stager stopped: store it here rather than leave it for the next settle.
            self.store_now(staged);
        }
    }

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
    /// `Some(_)`: staged, and the caller must call [`Self::staged_done`] (a `Move` is done);
    /// `None`: captured the usual way (or this turn has it already), the caller removes or
    /// renames `name` itself.
    #[allow(clippy::too_many_arguments)]
    pub fn stage(
        &self,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        st: &libc::stat,
        held_open: bool,
        who: Who,
        by: StageBy,
    ) -> Result<Option<Staged>, Errno> {
        let mut store = self.lock_raw();
        if store.index.captured_now.contains(path) {
            return Ok(None);
        }
        let comm = self.comm(who.pid);
        let stageable = st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_nlink == 1
            && !held_open
            && st.st_dev == store.dev()
            && !store.durable()
            && (st.st_size as u64) <= self.max_blob
            && lock_ignoring_poison(&self.stager).is_some();
        if !stageable {
            Self::ensure_locked(&mut store, self.max_blob, parent, name, path, who, comm)?;
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
        Self::record(&mut store, path, pre, who, comm)?;
        let seq = store.index.last_seq;
        crate::failpoint::hit("stage-after-record");
        let staged_name = Store::staged_name(seq);
        let staged = match by {
            StageBy::Move => sys::renameat2(
                parent,
                name,
                store.staged_dir(),
                &staged_name,
                libc::RENAME_NOREPLACE,
            ),
            StageBy::Link => sys::linkat(parent, name, store.staged_dir(), &staged_name),
        };
        if staged.is_err() {
            // Still at its name (or gone): capture it the usual way, as this capture's
            // resolution; the caller's own removal or rename then gives its errno.
            let pre = match read_preimage(&store.blobs, parent, name, self.max_blob) {
                Ok(pre @ (PreImage::File { .. } | PreImage::Skipped { .. })) => pre,
                Ok(other) => PreImage::Skipped {
                    was: other.kind().into(),
                    size: 0,
                    reason: "it changed while it was being captured".into(),
                },
                Err(e) => return Err(e),
            };
            store
                .append(Record::Staged { capture: seq, pre })
                .map_err(|e| Errno(e.errno()))?;
            return Ok(None);
        }
        Ok(Some(Staged {
            epoch: store.epoch(),
            seq,
        }))
    }

    /// Before a descriptor that can write host inode `ino` is handed out: a pending staged
    /// pre-image of that inode is stored first, so no write can reach its bytes.
    pub fn settle_inode(&self, ino: u64) -> Result<(), Errno> {
        self.lock_raw()
            .settle_inode(ino)
            .map_err(|e| Errno(e.errno()))
    }

    /// As [`Self::ensure`], for a regular file the caller holds open for reading (`st` its
    /// `fstat`): the pre-image is read through that descriptor, saving the lookup, open and
    /// identity check a capture by name costs.
    pub fn ensure_open_file(
        &self,
        fd: BorrowedFd<'_>,
        st: &libc::stat,
        path: &RelPath,
        who: Who,
    ) -> Result<(), Errno> {
        let mut store = self.lock_raw();
        store
            .settle_inode(st.st_ino)
            .map_err(|e| Errno(e.errno()))?;
        if store.index.captured_now.contains(path) {
            return Ok(());
        }
        let pre = sys::without_atime(fd, || read_open_file(&store.blobs, fd, st, self.max_blob))?;
        let comm = self.comm(who.pid);
        Self::record(&mut store, path, pre, who, comm)
    }

    fn record(
        store: &mut Store,
        path: &RelPath,
        pre: PreImage,
        who: Who,
        comm: Option<String>,
    ) -> Result<(), Errno> {
        log::debug!(target: "ckpt::capture", "captured turn={} path={path} kind={}", store.index.current_turn(), pre.kind());
        let turn = store.index.current_turn();
        store
            .append(Record::Capture {
                turn,
                path: path.clone(),
                pre,
                undo_of: None,
                pid: (who.pid != 0).then_some(who.pid),
                comm,
            })
            .map_err(|e| Errno(e.errno()))?;
        Ok(())
    }

    fn ensure_locked(
        store: &mut Store,
        max_blob: u64,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        who: Who,
        comm: Option<String>,
    ) -> Result<(), Errno> {
        if store.index.captured_now.contains(path) {
            return Ok(());
        }
        let pre = read_preimage(&store.blobs, parent, name, max_blob)?;
        Self::record(store, path, pre, who, comm)
    }

    /// Records `path` and everything below it, and, when `also_at` is given, the state of the
    /// mirrored paths under `also_at` that a rename of this subtree would create.
    pub fn ensure_tree(
        &self,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        also_at: Option<(BorrowedFd<'_>, &CStr, &RelPath)>,
        who: Who,
    ) -> Result<(), Errno> {
        let comm = self.comm(who.pid);
        let mut store = self.lock_raw();
        let max_blob = self.max_blob;
        let mut mirrored: Vec<RelPath> = Vec::new();
        walk_tree(parent, name, path, &mut |p, dir, n| {
            Self::ensure_locked(&mut store, max_blob, dir, n, p, who, comm.clone())?;
            if also_at.is_some() && p != path {
                mirrored.push(p.clone());
            }
            Ok(())
        })?;
        if let Some((dst_parent, dst_name, dst_path)) = also_at {
            for p in mirrored {
                let Some(target) = p.rebase(path, dst_path) else {
                    continue;
                };
                if store.index.captured_now.contains(&target) {
                    continue;
                }
                // Resolve the mirrored path below the destination without following links.
                let rel = target.as_bytes()[dst_path.as_bytes().len() + 1..].to_vec();
                let Some(pre) = mirrored_state(dst_parent, dst_name, &rel, &store.blobs, max_blob)?
                else {
                    continue;
                };
                let turn = store.index.current_turn();
                store
                    .append(Record::Capture {
                        turn,
                        path: target,
                        pre,
                        undo_of: None,
                        pid: Some(who.pid),
                        comm: comm.clone(),
                    })
                    .map_err(|e| Errno(e.errno()))?;
            }
        }
        Ok(())
    }

    /// Captures, for the current turn, the files held open for writing (after a rewind).
    /// Returns the paths that could not be captured, with why (a name that could not be
    /// reached is reported as `?`).
    pub fn begin_turn_captures(&self, open_for_write: &OpenForWrite<'_>) -> Vec<(String, Errno)> {
        let mut store = self.lock_raw();
        let max_blob = self.max_blob;
        let mut failed = Vec::new();
        open_for_write(&mut |named| match named {
            Ok((dir, name, path)) => {
                if let Err(e) =
                    Self::ensure_locked(&mut store, max_blob, dir, name, path, Who::default(), None)
                {
                    failed.push((path.to_string(), e));
                }
            }
            Err(e) => failed.push(("?".into(), e)),
        });
        failed
    }

    /// Begins turn `n`; `open_for_write` lists the files held open for writing, captured for
    /// the new turn at once because their next writes need no `open`. Their pre-images are
    /// read first: if one cannot be, the turn does not begin (nothing is written), because its
    /// writes in the new turn could not be rewound.
    pub fn begin_turn(
        &self,
        n: u64,
        label: Option<String>,
        open_for_write: &OpenForWrite<'_>,
    ) -> Result<bool, TurnError> {
        let mut store = self.lock_raw();
        let current = store.index.current_turn();
        if n == current && label.is_none() {
            return Ok(false);
        }
        if n <= current {
            return Err(TurnError::NotAfter { current });
        }
        let max_blob = self.max_blob;
        let mut records = vec![Record::Turn { turn: n, label }];
        let mut seen = std::collections::HashSet::new();
        let mut failed = None;
        open_for_write(&mut |named| {
            let read = named.and_then(|(dir, name, path)| {
                if !seen.insert(path.clone()) {
                    return Ok(());
                }
                let pre = read_preimage(&store.blobs, dir, name, max_blob)?;
                records.push(Record::Capture {
                    turn: n,
                    path: path.clone(),
                    pre,
                    undo_of: None,
                    pid: None,
                    comm: None,
                });
                Ok(())
            });
            if let Err(e) = read {
                failed.get_or_insert(e);
            }
        });
        if let Some(e) = failed {
            log::warn!(target: "ckpt::turn", "turn {n} not begun: a file open for writing cannot be captured: {e}");
            return Err(TurnError::HeldOpen(e));
        }
        store.append_all(records).map_err(TurnError::Store)?;
        log::info!(target: "ckpt::turn", "turn {n} begins");
        Ok(true)
    }
}

/// The state of `rel` below `dst_name` in `dst_parent`, or `None` when a component on the way
/// is not a directory (then the whole subtree is already covered by that component's capture).
fn mirrored_state(
    dst_parent: BorrowedFd<'_>,
    dst_name: &CStr,
    rel: &[u8],
    blobs: &BlobStore,
    max_blob: u64,
) -> Result<Option<PreImage>, Errno> {
    let top = match sys::openat(
        dst_parent,
        dst_name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    ) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {
            return Ok(Some(PreImage::Absent));
        }
        Err(e) => return Err(e),
    };
    let (dir_part, leaf) = match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => (Some(&rel[..i]), &rel[i + 1..]),
        None => (None, rel),
    };
    let dir = match dir_part {
        None => top,
        Some(d) => {
            let c = CString::new(d).map_err(|_| Errno(libc::EINVAL))?;
            match sys::open_beneath(
                top.as_fd(),
                &c,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ) {
                Ok(fd) => fd,
                Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {
                    return Ok(Some(PreImage::Absent));
                }
                Err(e) => return Err(e),
            }
        }
    };
    let leaf = CString::new(leaf).map_err(|_| Errno(libc::EINVAL))?;
    read_preimage(blobs, dir.as_fd(), &leaf, max_blob).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("valid")
    }

    /// A project folder with a store, its root descriptor and a capturer over it.
    fn project() -> (tempfile::TempDir, std::fs::File, Capturer) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open root");
        let store = Store::open(root.as_fd(), true, false).expect("store");
        (dir, root, Capturer::new(store, DEFAULT_MAX_BLOB))
    }

    fn lstat(root: &std::fs::File, name: &CStr) -> libc::stat {
        sys::lstatat(root.as_fd(), name).expect("lstat")
    }

    /// A removal as the filesystem does it: staged (and done), or left to the caller.
    fn remove_into_store(
        cap: &Capturer,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        st: &libc::stat,
        held_open: bool,
    ) -> bool {
        let staged = cap
            .stage(
                parent,
                name,
                path,
                st,
                held_open,
                Who::default(),
                StageBy::Move,
            )
            .expect("stage");
        staged.inspect(|s| cap.staged_done(*s, true)).is_some()
    }

    /// Stages `name` (in the folder's top) by a link, as before a rename over it.
    fn link_stage(cap: &Capturer, root: &std::fs::File, name: &CStr, path: &str) -> Staged {
        let st = lstat(root, name);
        let who = Who::default();
        cap.stage(
            root.as_fd(),
            name,
            &rp(path),
            &st,
            false,
            who,
            StageBy::Link,
        )
        .expect("stage")
        .expect("staged by a link")
    }

    fn content_of(store: &Store, pre: &PreImage) -> Vec<u8> {
        let PreImage::File { blob, .. } = pre else {
            panic!("not a stored file: {pre:?}");
        };
        let mut out = Vec::new();
        store
            .blobs
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
            .index
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

    /// Sets `name`'s atime well before its mtime, so a plain read would update it (relatime).
    fn make_atime_stale(root: &std::fs::File, name: &CStr) -> i64 {
        let at = |sec| libc::timespec {
            tv_sec: sec,
            tv_nsec: 0,
        };
        sys::utimensat(root.as_fd(), name, &[at(1_000_000_000), at(1_500_000_000)])
            .expect("utimensat");
        1_000_000_000
    }

    #[test]
    fn captures_leave_the_atime_of_what_they_read_as_it_was() {
        let (dir, root, cap) = project();
        std::fs::create_dir(dir.path().join("tree")).expect("mkdir");
        for name in ["control", "by-name", "open", "tree/leaf"] {
            std::fs::write(dir.path().join(name), b"bytes").expect("write");
        }
        let names = [c"control", c"by-name", c"open", c"tree", c"tree/leaf"];
        let old = names.map(|n| make_atime_stale(&root, n))[0];
        // The filesystem under the test updates atime on a read, so the checks below can fail.
        std::fs::read(dir.path().join("control")).expect("read");
        assert_ne!(
            lstat(&root, c"control").st_atime,
            old,
            "this filesystem keeps no atime"
        );

        cap.ensure(root.as_fd(), c"by-name", &rp("by-name"), Who::default())
            .expect("capture by name");
        cap.ensure_tree(root.as_fd(), c"tree", &rp("tree"), None, Who::default())
            .expect("capture a tree");
        let open = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("open"))
            .expect("open");
        let st = sys::fstat(open.as_fd()).expect("fstat");
        cap.ensure_open_file(open.as_fd(), &st, &rp("open"), Who::default())
            .expect("capture through the open descriptor");
        for (name, label) in [
            (c"by-name", "a capture by name"),
            (c"open", "a capture through the caller's descriptor"),
            (c"tree", "a tree capture (its listing)"),
            (c"tree/leaf", "a tree capture (a file in it)"),
        ] {
            assert_eq!(
                lstat(&root, name).st_atime,
                old,
                "{label} changed the atime"
            );
        }
        assert_eq!(
            cap.lock().index.captured_now.len(),
            4,
            "four paths were captured"
        );

        // The caller's own reads through that descriptor still update the atime.
        let mut buf = [0u8; 5];
        sys::pread(open.as_fd(), &mut buf, 0).expect("pread");
        assert_ne!(
            lstat(&root, c"open").st_atime,
            old,
            "the caller's descriptor kept O_NOATIME"
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
        assert!(store.index.pending.is_empty());
        let c = store.index.captures.last().expect("a capture");
        assert_eq!(c.path, rp("a.txt"));
        assert_eq!(content_of(&store, &c.pre), b"turn-start bytes");
        drop(store);
        assert_eq!(staged_files(&dir), 0, "a stored pre-image leaves staged/");
        // Replayed from the journal: the resolution holds.
        drop(cap);
        let store = Store::open(root.as_fd(), false, false).expect("reopen");
        let c = store.index.captures.last().expect("a capture");
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
        let seq = link_stage(&cap, &root, c"saved", "saved");
        assert_eq!(
            lstat(&root, c"saved").st_nlink,
            2,
            "linked, still at its name"
        );
        std::fs::rename(dir.path().join("new"), dir.path().join("saved")).expect("rename");
        cap.staged_done(seq, true);
        // A rename that failed: the file keeps its name and is stored at once.
        let seq = link_stage(&cap, &root, c"kept", "kept");
        cap.staged_done(seq, false);
        let pending = cap.lock_raw().index.pending.contains_key(&seq.seq);
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
        let mut store = Store::open(root.as_fd(), false, false).expect("store");
        store
            .append(Record::Turn {
                turn: 2,
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
        let (seq, epoch) = (store.index.last_seq, store.epoch());
        let name = Store::staged_name(seq);
        sys::renameat2(root.as_fd(), c"f", store.staged_dir(), &name, 0).expect("move");
        // What the stager stored outside the lock, for that (epoch, seq).
        let fd = sys::openat(store.staged_dir(), &name, libc::O_RDONLY, 0).expect("open");
        let blob = store.blobs.put_fd(fd.as_fd()).expect("put");
        // A prune meanwhile: it stores every pending stage first, then renumbers every seq.
        store.settle();
        let policy = crate::store::prune::Policy {
            keep_turns: Some(1),
            max_size: None,
        };
        crate::store::prune::prune(&mut store, policy).expect("prune");
        assert_eq!(store.epoch(), epoch + 1);
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
            store.index.last_seq, seq,
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
            store.index.pending.contains_key(&seq),
            "g still waits for its own bytes"
        );
        let f = store.index.captures.iter().find(|c| c.path == rp("f"));
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
            let name = Store::staged_name(store.index.last_seq);
            sys::renameat2(root.as_fd(), c"f", store.staged_dir(), &name, 0).expect("move");
            assert_eq!(store.index.pending.len(), 1);
        }
        let fst = sys::fstat(racing.as_fd()).expect("fstat");
        cap.ensure_open_file(racing.as_fd(), &fst, &rp("f"), Who::default())
            .expect("the racing open");
        assert!(
            cap.lock_raw().index.pending.is_empty(),
            "stored at the open"
        );
        // Only now may the opener write.
        use std::io::Write;
        (&racing).write_all(b"AFTER").expect("write");
        let store = cap.lock();
        let c = store.index.captures.last().expect("capture");
        assert_eq!(content_of(&store, &c.pre), b"before");
    }

    #[test]
    fn a_crash_between_the_record_and_the_move_is_recovered_from_the_folder_or_reported() {
        let (dir, root, cap) = project();
        drop(cap);
        // A bare store: dropping it is a daemon killed (no stager, nothing settled at exit).
        let mut store = Store::open(root.as_fd(), false, false).expect("store");
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
        let store = Store::open(root.as_fd(), false, false).expect("reopen");
        assert!(store.index.pending.is_empty());
        let pre_of = |p: &str| {
            let c = store.index.captures.iter().find(|c| c.path == rp(p));
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
