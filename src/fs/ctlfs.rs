//! The `.ckpt/` control nodes as a filesystem of their own, beside the folder's (the router,
//! `vfs.rs`, sends each request to one side by its node id or handle number, as
//! fuse-backend-rs's VFS sends a request to its pseudo filesystem): attributes, listing, open
//! handles, content, and what a write to `.ckpt/turn` or `.ckpt/rewind` asks of the turns
//! ([`TurnControl`]).
//!
//! Its handles are its own, numbered from [`CONTROL_FH`] up, so a handle number alone says
//! which side serves a read, a write, a flush or a release; the host side never sees one.

use super::attrs::now_ts;
use super::control::{self, CTL_DIR, CTL_GITIGNORE, CTL_REWIND, CTL_TURN};
use super::{DirItem, Entry, FsResult, Rewound, SetAttr};
use crate::capture::{TurnError, TurnStart};
use crate::ids::{Fh, NodeId, Turn};
use crate::ipc::JsonText;
use crate::rewind::{self, RewindError};
use crate::sync::Mutex;
use crate::sys::{Errno, ToErrno};
use fuser::{FileAttr, FileType};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The first handle number of the control side; the host side's stay below it.
pub(super) const CONTROL_FH: u64 = 1 << 63;

/// Whether `fh` is a control file's handle.
pub(super) fn is_control_fh(fh: Fh) -> bool {
    fh.get() >= CONTROL_FH
}

/// What the control files read and what a write to them asks: the turn and rewind side of
/// the core (`turns.rs`).
pub(super) trait TurnControl {
    /// The current turn (`.ckpt/turn`).
    fn current_turn(&self) -> Turn;
    /// The last whole rewind's report as it was answered (`.ckpt/rewind`).
    fn last_report(&self) -> Option<Arc<JsonText>>;
    /// Begins turn `n` (a write to `.ckpt/turn`).
    fn begin_turn(&self, start: TurnStart) -> Result<bool, TurnError>;
    /// Runs a rewind (a write to `.ckpt/rewind`).
    fn rewind(&self, req: &rewind::Request) -> Result<Rewound, RewindError>;
    /// The turns a moment written to `.ckpt/rewind` can name.
    fn moments(&self) -> Vec<crate::moment::Candidate>;
}

/// An open control file.
struct ControlHandle {
    node: NodeId,
    /// What a read from offset 0 saw; later offsets read on in it.
    snapshot: Mutex<Vec<u8>>,
    /// Opened for writing and nothing written yet: closing it so is an empty input.
    unwritten: AtomicBool,
}

/// The `.ckpt/` side of the mount.
pub(super) struct ControlFs {
    /// The owner the control nodes show: the folder root's.
    uid: u32,
    gid: u32,
    /// The folder root's inode number, `..` of `.ckpt/` in its listing.
    root_ino: u64,
    handles: Mutex<HashMap<Fh, Arc<ControlHandle>>>,
    next_fh: AtomicU64,
}

impl ControlFs {
    /// The control side of a folder whose root is `root` (its `fstat`).
    pub(super) fn new(root: &libc::stat) -> Self {
        Self {
            uid: root.st_uid,
            gid: root.st_gid,
            root_ino: root.st_ino,
            handles: Mutex::leaf(HashMap::new()),
            next_fh: AtomicU64::new(CONTROL_FH),
        }
    }

    /// `lookup` in a control node: the entries of `.ckpt/`; nothing lies below a file.
    pub(super) fn lookup(&self, parent: NodeId, name: &OsStr) -> FsResult<Entry> {
        if parent != CTL_DIR {
            return Err(Errno(libc::ENOTDIR).into());
        }
        control::lookup(name.as_bytes())
            .map(|n| self.entry(n))
            .ok_or(Errno(libc::ENOENT).into())
    }

    /// `setattr` of a control node: `echo N > .ckpt/turn` truncates first, which is accepted
    /// and changes nothing; any other change is refused.
    pub(super) fn setattr(&self, node: NodeId, set: &SetAttr) -> FsResult<FileAttr> {
        if set.mode.is_none() && set.uid.is_none() && set.gid.is_none() && set.size == Some(0) {
            return Ok(self.attr(node));
        }
        Err(Errno(libc::EPERM).into())
    }

    /// `readdir(plus)` of a control node: the listing of `.ckpt/` after the cookie `offset`,
    /// each with its entry (fixed ids, no lookup count); a file is not a directory.
    pub(super) fn readdir(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        if node != CTL_DIR {
            return Err(Errno(libc::ENOTDIR).into());
        }
        for item in self.dir_items() {
            if item.offset <= offset {
                continue;
            }
            let dots = item.name == "." || item.name == "..";
            let entry = (!dots)
                .then(|| control::lookup(item.name.as_bytes()).map(|n| self.entry(n)))
                .flatten();
            if sink(&item, entry.as_ref()) {
                break;
            }
        }
        Ok(())
    }

    /// `open` of a control node: a handle with no descriptor. A read from offset 0 takes a
    /// fresh snapshot of the content (later offsets read on in it); each write is one whole
    /// input; a handle opened for writing and closed with nothing written is an empty input.
    pub(super) fn open(&self, node: NodeId, flags: i32) -> FsResult<Fh> {
        if node == CTL_DIR {
            return Err(Errno(libc::EISDIR).into());
        }
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        if writing && node == CTL_GITIGNORE {
            return Err(Errno(libc::EACCES).into());
        }
        let fh = Fh::new(self.next_fh.fetch_add(1, Ordering::Relaxed));
        let handle = ControlHandle {
            node,
            snapshot: Mutex::leaf(Vec::new()),
            unwritten: AtomicBool::new(writing),
        };
        self.handles.lock().insert(fh, Arc::new(handle));
        Ok(fh)
    }

    fn handle(&self, fh: Fh) -> FsResult<Arc<ControlHandle>> {
        Ok(self
            .handles
            .lock()
            .get(&fh)
            .cloned()
            .ok_or(Errno(libc::EBADF))?)
    }

    /// `read` of an open control file: from offset 0 a fresh snapshot of its content.
    pub(super) fn read(
        &self,
        fh: Fh,
        offset: u64,
        size: u32,
        turns: &dyn TurnControl,
    ) -> FsResult<Vec<u8>> {
        let h = self.handle(fh)?;
        let mut snap = h.snapshot.lock();
        if offset == 0 || snap.is_empty() {
            *snap = Self::content(h.node, turns);
        }
        let start = (offset as usize).min(snap.len());
        let end = (start + size as usize).min(snap.len());
        Ok(snap[start..end].to_vec())
    }

    /// `write` to an open control file: each write is one whole input.
    pub(super) fn write(&self, fh: Fh, data: &[u8], turns: &dyn TurnControl) -> FsResult<u32> {
        let h = self.handle(fh)?;
        h.unwritten.store(false, Ordering::Relaxed);
        Self::input(h.node, data, turns).map(|()| data.len() as u32)
    }

    /// `flush` (each `close`): a control file opened for writing and closed without a byte
    /// written got empty input, which is `EINVAL` like any other bad input.
    pub(super) fn flush(&self, fh: Fh) -> FsResult<()> {
        if self.handle(fh)?.unwritten.swap(false, Ordering::Relaxed) {
            return Err(Errno(libc::EINVAL).into());
        }
        Ok(())
    }

    /// `release`.
    pub(super) fn release(&self, fh: Fh) {
        self.handles.lock().remove(&fh);
    }

    pub(super) fn attr(&self, node: NodeId) -> FileAttr {
        let (kind, perm, size) = match node {
            CTL_DIR => (FileType::Directory, 0o755, 0),
            CTL_GITIGNORE => (FileType::RegularFile, 0o444, 2),
            _ => (FileType::RegularFile, 0o644, 0),
        };
        let t = now_ts();
        FileAttr {
            // A control node shows its node id as its inode number (the adapter puts the node
            // id in `st_ino` of every entry anyway).
            ino: fuser::INodeNo(node.get()),
            size,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    pub(super) fn entry(&self, node: NodeId) -> Entry {
        Entry {
            attr: self.attr(node),
            node,
            ttl: Duration::ZERO,
            attr_ttl: Duration::ZERO,
        }
    }

    /// The control directory's listing; `offset` cookies 1, 2, … in this order. A control
    /// node's `d_ino` is its node id, as its `st_ino` is.
    fn dir_items(&self) -> Vec<DirItem> {
        let mut v = vec![
            DirItem {
                ino: CTL_DIR.get(),
                offset: 1,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirItem {
                ino: self.root_ino,
                offset: 2,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for (i, (n, name)) in control::ENTRIES.iter().enumerate() {
            v.push(DirItem {
                ino: n.get(),
                offset: i as u64 + 3,
                kind: FileType::RegularFile,
                name: (*name).into(),
            });
        }
        v
    }

    fn content(node: NodeId, turns: &dyn TurnControl) -> Vec<u8> {
        match node {
            CTL_TURN => format!("{}\n", turns.current_turn()).into_bytes(),
            CTL_REWIND => {
                let text = turns.last_report();
                let json = text.as_ref().map_or("{}", |t| t.get());
                format!("{json}\n").into_bytes()
            }
            CTL_GITIGNORE => b"*\n".to_vec(),
            _ => Vec::new(),
        }
    }

    fn input(node: NodeId, data: &[u8], turns: &dyn TurnControl) -> FsResult<()> {
        match node {
            CTL_TURN => {
                let input = control::parse_turn(data).ok_or(Errno(libc::EINVAL))?;
                Ok(turns
                    .begin_turn(TurnStart::labelled(input.turn, input.label))
                    .map(drop)
                    .map_err(|e| e.to_errno())?)
            }
            CTL_REWIND => {
                let input = control::parse_rewind(data).ok_or(Errno(libc::EINVAL))?;
                let req = match input {
                    control::RewindInput::To(spec) => {
                        // A moment that names no live turn is bad input, as a bad number is.
                        let m = spec
                            .resolve(&turns.moments(), crate::moment::Use::Rewind)
                            .map_err(|_| Errno(libc::EINVAL))?;
                        rewind::Request::folder(m.turn)
                    }
                    control::RewindInput::Undo => rewind::Request::UndoLast {
                        mode: rewind::Mode::Apply,
                    },
                };
                match turns.rewind(&req) {
                    Ok(r) if r.report.ok() => Ok(()),
                    // Partly restored: the report (readable from .ckpt/rewind) says what failed.
                    Ok(_) => Err(Errno(libc::EIO).into()),
                    Err(e) => Err(e.to_errno().into()),
                }
            }
            _ => Err(Errno(libc::EACCES).into()),
        }
    }
}
