//! How fuser's values become the core's and back, for `fuse.rs`: its `INodeNo` and
//! `FileHandle` as the core's [`NodeId`] and [`Fh`] (the one place they are converted), a
//! request's caller, what a failed request was about and its log line, the node id swapped
//! into `st_ino`, and times to set.

use crate::fs::{Caller, CkptFs, Entry, FsError, SetTime};
use crate::ids::{Fh, NodeId};
use fuser::{Errno, FileHandle, FileType, INodeNo, Request, TimeOrNow};
use std::ffi::OsStr;
use std::time::SystemTime;

// The kernel's numbers and the core's: the same values, and the one place where one becomes
// the other. Elsewhere a `u64` becomes a node id or a handle only where the core makes its own
// (the node table, the control nodes' fixed ids, the handle allocators).
impl From<INodeNo> for NodeId {
    fn from(ino: INodeNo) -> Self {
        NodeId::new(ino.0)
    }
}

impl From<NodeId> for INodeNo {
    fn from(node: NodeId) -> Self {
        INodeNo(node.get())
    }
}

impl From<FileHandle> for Fh {
    fn from(fh: FileHandle) -> Self {
        Fh::new(fh.0)
    }
}

impl From<Fh> for FileHandle {
    fn from(fh: Fh) -> Self {
        FileHandle(fh.get())
    }
}

pub(super) fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

/// What a failed request was about, named by path in its log line: a node, a name in a
/// directory node, and for a request between two (a rename, a link, a copy) the other one.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    node: INodeNo,
    name: Option<&'a OsStr>,
    to: Option<(INodeNo, Option<&'a OsStr>)>,
}

/// A request on `node`.
pub(super) fn on(node: INodeNo) -> At<'static> {
    At {
        node,
        name: None,
        to: None,
    }
}

/// A request on `name` in the directory `parent`.
pub(super) fn named(parent: INodeNo, name: &OsStr) -> At<'_> {
    At {
        node: parent,
        name: Some(name),
        to: None,
    }
}

impl<'a> At<'a> {
    /// The same request, from here to `node` (and `name` in it).
    pub(super) fn to(self, node: INodeNo, name: Option<&'a OsStr>) -> Self {
        Self {
            to: Some((node, name)),
            ..self
        }
    }
}

/// The reply to a failed request: the errno as the core gave it, logged with the operation,
/// the path it was about and what the core says failed inside it (debug for outcomes a
/// filesystem gives every day, a warning for the rest and for anything of the daemon's own
/// that failed, such as the store). Which errno each failure gets is decided in `src/errno.rs`
/// and the core, not here.
pub(super) fn failed(fs: &CkptFs, op: &str, at: At<'_>, e: FsError) -> Errno {
    let everyday = !e.daemon_failed()
        && matches!(
            e.errno().0,
            libc::ENOENT
                | libc::EEXIST
                | libc::ENODATA
                | libc::ENOTEMPTY
                | libc::EPERM
                | libc::EACCES
                | libc::EINVAL
                | libc::ENAMETOOLONG
                | libc::ENOTDIR
                | libc::ELOOP
        );
    let level = if everyday {
        log::Level::Debug
    } else {
        log::Level::Warn
    };
    if log::log_enabled!(target: "ckpt::fuse", level) {
        // Named by path, quoted, never by node id: the core knows the names.
        let one = |node: INodeNo, name| fs.log_path(node.into(), name);
        let path = match at.to {
            None => one(at.node, at.name),
            Some((node, name)) => format!("{} -> {}", one(at.node, at.name), one(node, name)),
        };
        log::log!(target: "ckpt::fuse", level, "{op} {path} failed: {e}");
    }
    Errno::from_i32(e.errno().0)
}

/// The kernel identifies nodes by node id; `st_ino` shows the host inode (kept in `attr.ino`).
/// fuser writes `attr.ino` as the entry's node id, so swap them here and let the kernel use
/// the node id; `st_ino` then equals the node id, which is stable per host inode.
pub(super) fn fix(e: Entry) -> fuser::FileAttr {
    let mut a = e.attr;
    a.ino = e.node.into();
    a
}

/// Attributes the kernel does not keep: those of `.` and `..` in a listing, of a negative entry.
pub(super) fn placeholder_attr(ino: INodeNo, kind: FileType) -> fuser::FileAttr {
    fuser::FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

pub(super) fn time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(s) => SetTime::At(s),
    })
}
