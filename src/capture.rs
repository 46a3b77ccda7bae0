//! Reading pre-images from the host tree, and the capture policy: once per (turn, path).
//!
//! Invariant: the pre-image of a path is in the journal (and its blob in the store) before
//! the mutation that needs it reaches the host filesystem; if capture fails, the caller fails
//! the mutation with the capture's errno. Nothing here follows a symlink, opens a FIFO for
//! more than a non-blocking stat, or reads a device.

use crate::relpath::RelPath;
use crate::store::blob::BlobStore;
use crate::store::journal::{LinkTarget, PreImage, Record};
use crate::store::{Store, StoreError};
use crate::sys::{self, Errno, SysResult};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;

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
            let fd = sys::openat(
                parent,
                name,
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
                0,
            )?;
            let now = sys::fstat(fd.as_fd())?;
            if now.st_ino != st.st_ino || now.st_dev != st.st_dev {
                // Replaced between stat and open: nothing in the mount can do that while we hold
                // the gate, so this is an outside writer; refuse rather than store a mix.
                return Err(Errno(libc::EAGAIN));
            }
            let stored = blobs.put_fd_sized(fd.as_fd(), now.st_size as u64)?;
            PreImage::File {
                blob: stored.id,
                size: stored.size,
                mode,
                uid,
                gid,
                ino: st.st_ino,
                nlink: st.st_nlink,
            }
        }
        libc::S_IFDIR => PreImage::Dir { mode, uid, gid },
        libc::S_IFLNK => PreImage::Symlink {
            target: LinkTarget(sys::readlinkat(parent, name)?),
            uid,
            gid,
        },
        libc::S_IFIFO => PreImage::Fifo { mode, uid, gid },
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
    let dir = sys::openat(
        parent,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
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

/// Visits every file held open for writing: `(parent dir, name, path)`.
pub type OpenForWrite<'a> = dyn Fn(&mut dyn FnMut(BorrowedFd<'_>, &CStr, &RelPath)) + 'a;

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
    store: Mutex<Store>,
    max_blob: u64,
    comms: Mutex<HashMap<u32, String>>,
}

impl Capturer {
    /// Wraps an open store.
    pub fn new(store: Store, max_blob: u64) -> Self {
        Self {
            store: Mutex::new(store),
            max_blob,
            comms: Mutex::new(HashMap::new()),
        }
    }

    /// Locks the store for direct use (rewind, status).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic while holding the lock would have killed the daemon; recover the data anyway.
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let mut store = self.lock();
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
        let mut store = self.lock();
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
    pub fn begin_turn_captures(&self, open_for_write: &OpenForWrite<'_>) -> Result<(), Errno> {
        let mut store = self.lock();
        let max_blob = self.max_blob;
        let mut result = Ok(());
        open_for_write(&mut |dir, name, path| {
            if let Err(e) =
                Self::ensure_locked(&mut store, max_blob, dir, name, path, Who::default(), None)
            {
                result = Err(e);
            }
        });
        result
    }

    /// Begins turn `n`; `open_for_write` lists the files held open for writing, captured for
    /// the new turn at once because their next writes need no `open`.
    pub fn begin_turn(
        &self,
        n: u64,
        label: Option<String>,
        open_for_write: &OpenForWrite<'_>,
    ) -> Result<bool, TurnError> {
        let mut store = self.lock();
        let current = store.index.current_turn();
        if n == current && label.is_none() {
            return Ok(false);
        }
        if n <= current {
            return Err(TurnError::NotAfter { current });
        }
        store
            .append(Record::Turn { turn: n, label })
            .map_err(TurnError::Store)?;
        log::info!(target: "ckpt::turn", "turn {n} begins");
        let max_blob = self.max_blob;
        let mut failed = None;
        open_for_write(&mut |dir, name, path| {
            if let Err(e) =
                Self::ensure_locked(&mut store, max_blob, dir, name, path, Who::default(), None)
            {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            log::warn!(target: "ckpt::turn", "capturing a file open for writing at turn {n} failed: {e}");
        }
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
