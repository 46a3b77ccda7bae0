//! Routing: each operation on a node goes either to the folder on the host (the other files of
//! this module) or to the virtual `.ckpt/` nodes (`ctlfs.rs`), decided here once, by the
//! node's id: control nodes have fixed ids (2 to 5, `control.rs`) that no host inode is ever
//! given (`inode.rs` gives host inodes ids from `FIRST_DYNAMIC` up, the root 1), so the range
//! alone says which side answers, in the shape of fuse-backend-rs's VFS index and its
//! `pseudo_fs`. Requests on an open handle route the same way by its number (control handles
//! are numbered from `ctlfs::CONTROL_FH` up). Neither side checks for the other: the host side
//! has no control handle in its table, and `ControlFs` knows nothing of the folder.
//!
//! Operations by a parent and a name (mknod, mkdir, symlink, create, link, unlink, rmdir,
//! rename) route on the parent the same way, through [`refuse_store`], the first check
//! of each of them (in `namespace.rs`, before any capture or host call): a control node as the
//! parent, or the store's own name at the root, refuses every change with `EPERM`, since
//! nothing in the mount may change the store.

use super::control::{self, CTL_DIR, CTL_REWIND};
use super::ctlfs::is_control_fh;
use super::inode::ROOT;
use super::{
    Caller, CkptFs, DirItem, Entry, FsResult, OpenedAs, Rewound, SetAttr, XattrReply, pastfs,
};
use crate::capture::{TurnError, TurnStart};
use crate::ids::{Fh, NodeId, Turn};
use crate::relpath::STORE_DIR;
use crate::rewind::{self, Report, RewindError};
use crate::store::ops::RelabelError;
use crate::sys::{self, Errno};
use fuser::FileAttr;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// Which side answers for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// One of the virtual `.ckpt/` nodes.
    Control,
    /// `.ckpt/turns/` and the read-only trees below it (`pastfs.rs`).
    Past,
    /// A file or directory of the folder.
    Host,
}

fn side(node: NodeId) -> Side {
    if control::is_control(node) {
        Side::Control
    } else if pastfs::is_past(node) {
        Side::Past
    } else {
        Side::Host
    }
}

/// Every change inside `.ckpt/turns/` is refused: the past is read-only.
fn read_only<T>() -> FsResult<T> {
    Err(Errno(libc::EROFS).into())
}

/// Whether `name` in `parent` is the store's own name at the root (`.ckpt`).
pub(super) fn is_store_name(parent: NodeId, name: &OsStr) -> bool {
    parent == ROOT && name.as_bytes() == STORE_DIR.as_bytes()
}

/// The routing of operations by a parent and a name that create, remove or rename: a
/// name inside a control node, or the store's own name at the root, is refused with
/// `EPERM` (the store is not part of the project: nothing may be created or removed
/// there); every other goes on to the host.
pub(super) fn refuse_store(parent: NodeId, name: &OsStr) -> FsResult<()> {
    if side(parent) == Side::Past {
        return read_only();
    }
    if side(parent) == Side::Control || is_store_name(parent, name) {
        return Err(Errno(libc::EPERM).into());
    }
    Ok(())
}

impl CkptFs {
    /// `lookup`. The store's name at the root (`.ckpt`) is the virtual control directory: the
    /// one place where the two sides meet.
    pub fn lookup(&self, parent: NodeId, name: &OsStr) -> FsResult<Entry> {
        match side(parent) {
            Side::Control
                if parent == CTL_DIR && name.as_bytes() == pastfs::TURNS_NAME.as_bytes() =>
            {
                Ok(self.past.turns_entry())
            }
            Side::Control => self.control.lookup(parent, name),
            Side::Past => self.past.lookup(&self.host, parent, name),
            // The name always holds the control directory: the kernel may keep it as it keeps
            // the folder's names (its attributes stay uncached), so a path walked into
            // `.ckpt/turns/` (a read of every file of a tree) costs no lookup of it each time.
            Side::Host if is_store_name(parent, name) => Ok(Entry {
                ttl: self.host.config.ttl,
                ..self.control.entry(CTL_DIR)
            }),
            Side::Host => self.host.host_lookup(parent, name),
        }
    }

    /// `forget`: the kernel dropped `n` references to `node`.
    pub fn forget(&self, node: NodeId, n: u64) {
        // Control nodes are never forgotten: their ids are fixed.
        match side(node) {
            Side::Host => self.host.host_forget(node, n),
            Side::Past => self.past.forget(node, n),
            Side::Control => {}
        }
    }

    /// How long the kernel may cache `node`'s attributes.
    pub fn attr_ttl(&self, node: NodeId) -> Duration {
        match side(node) {
            // Control files change with every turn and rewind: never cached.
            Side::Control => Duration::ZERO,
            Side::Past => pastfs::PastFs::attr_ttl(node),
            Side::Host => self.host.host_attr_ttl(node),
        }
    }

    /// `getattr`.
    pub fn getattr(&self, node: NodeId, fh: Option<Fh>) -> FsResult<FileAttr> {
        match side(node) {
            Side::Control => Ok(self.control.attr(node)),
            Side::Past => self.past.getattr(&self.host, node),
            Side::Host => self.host.host_getattr(node, fh),
        }
    }

    /// `access`: whether the caller may access `node` as `mask` asks. The kernel asks only on
    /// mounts without `default_permissions` (single-user mounts, where the caller is the
    /// daemon's own user), so the host answers with the daemon's own effective ids; a control
    /// file answers from the attributes it shows.
    pub fn access(&self, node: NodeId, mask: i32) -> FsResult<()> {
        match side(node) {
            Side::Control => {
                let perm = u32::from(self.control.attr(node).perm);
                let wanted = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32;
                // The owner's bits: only the owner reaches a single-user mount.
                if (perm >> 6) & wanted == wanted {
                    Ok(())
                } else {
                    Err(Errno(libc::EACCES).into())
                }
            }
            Side::Past if mask & libc::W_OK != 0 => read_only(),
            Side::Past => {
                let attr = self.past.getattr(&self.host, node)?;
                let wanted = (mask & (libc::R_OK | libc::X_OK)) as u32;
                if (u32::from(attr.perm) >> 6) & wanted == wanted {
                    Ok(())
                } else {
                    Err(Errno(libc::EACCES).into())
                }
            }
            Side::Host => Ok(sys::access_fd(self.host.node_fd(node)?.as_fd(), mask)?),
        }
    }

    /// `setattr`.
    pub fn setattr(
        &self,
        node: NodeId,
        fh: Option<Fh>,
        set: SetAttr,
        caller: Caller,
    ) -> FsResult<FileAttr> {
        match side(node) {
            Side::Control => self.control.setattr(node, &set),
            Side::Past => read_only(),
            Side::Host => self.host.host_setattr(node, fh, set, caller),
        }
    }

    /// How the kernel is to serve the opens of `node` (the adapter turns it into `FOPEN_*`
    /// flags and a backing file).
    pub fn opened_as(&self, node: NodeId) -> OpenedAs {
        match side(node) {
            Side::Control => OpenedAs::Direct,
            Side::Past => OpenedAs::Past,
            Side::Host => OpenedAs::Host,
        }
    }

    /// Whether a write to `node` may run long: a write to `.ckpt/rewind` runs a whole rewind.
    /// The adapter answers such a write from a thread of its own, so the FUSE worker that
    /// received it goes on serving other requests meanwhile (reads and lookups; mutations
    /// wait for the rewind's exclusive gate whichever thread runs it).
    pub fn long_write(&self, node: NodeId) -> bool {
        node == CTL_REWIND
    }

    /// `open`.
    pub fn open(&self, node: NodeId, flags: i32, caller: Caller) -> FsResult<Fh> {
        match side(node) {
            Side::Control => self.control.open(node, flags),
            Side::Past => self.past.open(&self.host, node, flags),
            Side::Host => self.host.host_open(node, flags, caller),
        }
    }

    /// `link`: a new name `newname` in `newparent` for `node`.
    pub fn link(
        &self,
        node: NodeId,
        newparent: NodeId,
        newname: &OsStr,
        caller: Caller,
    ) -> FsResult<Entry> {
        match side(node) {
            // No second name for a control file, anywhere.
            Side::Control => Err(Errno(libc::EPERM).into()),
            Side::Past => read_only(),
            Side::Host => self.host.host_link(node, newparent, newname, caller),
        }
    }

    /// `readdir`: entries after the cookie `offset`; `sink` returns true when the reply is
    /// full (that entry was not sent).
    pub fn readdir(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem) -> bool,
    ) -> FsResult<()> {
        match side(node) {
            Side::Control => self.readdir_control(node, offset, &mut |item, _| sink(item)),
            Side::Past => self
                .past
                .readdir(&self.host, node, offset, &mut |item, entry| {
                    // A plain readdir sends no entries: each lookup counted is given back.
                    if let Some(e) = entry {
                        self.past.forget(e.node, 1);
                    }
                    sink(item)
                }),
            Side::Host => self.host.host_readdir(node, offset, sink),
        }
    }

    /// `readdirplus`: as `readdir`, with an entry (and a lookup) for each name but `.`/`..`.
    pub fn readdirplus(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        match side(node) {
            Side::Control => self.readdir_control(node, offset, sink),
            Side::Past => self.past.readdir(&self.host, node, offset, sink),
            Side::Host => self.host.host_readdirplus(node, offset, sink),
        }
    }

    /// `fsyncdir`: the directory's entries made durable on the host.
    pub fn fsyncdir(&self, node: NodeId, datasync: bool) -> FsResult<()> {
        match side(node) {
            // Nothing of the control directory is on disk, nor is the past changed.
            Side::Control | Side::Past => Ok(()),
            Side::Host => self.host.host_fsyncdir(node, datasync),
        }
    }

    /// `getxattr`; with `size == 0` the value's length only.
    pub fn getxattr(&self, node: NodeId, name: &OsStr, size: u32) -> FsResult<XattrReply> {
        match side(node) {
            Side::Control => Err(Errno(libc::ENODATA).into()),
            Side::Past => self.past.getxattr(&self.host, node, name, size),
            Side::Host => self.host.host_getxattr(node, name, size),
        }
    }

    /// `listxattr`.
    pub fn listxattr(&self, node: NodeId, size: u32) -> FsResult<XattrReply> {
        match side(node) {
            // Control nodes have no extended attributes: an empty list.
            Side::Control => Ok(if size == 0 {
                XattrReply::Size(0)
            } else {
                XattrReply::Data(Vec::new())
            }),
            Side::Past => self.past.listxattr(&self.host, node, size),
            Side::Host => self.host.host_listxattr(node, size),
        }
    }

    /// `setxattr`.
    pub fn setxattr(
        &self,
        node: NodeId,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        caller: Caller,
    ) -> FsResult<()> {
        match side(node) {
            Side::Control => Err(Errno(libc::EPERM).into()),
            Side::Past => read_only(),
            Side::Host => self.host.host_setxattr(node, name, value, flags, caller),
        }
    }

    /// `removexattr`.
    pub fn removexattr(&self, node: NodeId, name: &OsStr, caller: Caller) -> FsResult<()> {
        match side(node) {
            Side::Control => Err(Errno(libc::EPERM).into()),
            Side::Past => read_only(),
            Side::Host => self.host.host_removexattr(node, name, caller),
        }
    }
}

impl CkptFs {
    /// `.ckpt/`'s listing: the control files, then `turns` (the past's side).
    fn readdir_control(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        let mut full = false;
        self.control.readdir(node, offset, &mut |item, entry| {
            full = sink(item, entry);
            full
        })?;
        if full {
            return Ok(());
        }
        let turns_offset = control::ENTRIES.len() as u64 + 3;
        if node == CTL_DIR && offset < turns_offset {
            let entry = self.past.turns_entry();
            let item = DirItem {
                ino: entry.node.get(),
                offset: turns_offset,
                kind: fuser::FileType::Directory,
                name: pastfs::TURNS_NAME.into(),
            };
            sink(&item, Some(&entry));
        }
        Ok(())
    }
}

/// Requests on an open handle go to the side that opened it, told by its number alone
/// (`is_control_fh`), as requests on a node go by its id.
impl CkptFs {
    /// `read`.
    pub fn read(&self, fh: Fh, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        if pastfs::is_past_fh(fh) {
            return self.past.read(&self.host, fh, offset, size);
        }
        if is_control_fh(fh) {
            return self.control.read(fh, offset, size, self);
        }
        self.host.host_read(fh, offset, size)
    }

    /// `write`.
    pub fn write(&self, fh: Fh, offset: u64, data: &[u8]) -> FsResult<u32> {
        if pastfs::is_past_fh(fh) {
            return read_only();
        }
        if is_control_fh(fh) {
            return self.control.write(fh, data, self);
        }
        self.host.host_write(fh, offset, data)
    }

    /// `flush` (each `close`): nothing to do for a file of the folder (the mount keeps no
    /// write-back cache; locks are the kernel's).
    pub fn flush(&self, fh: Fh) -> FsResult<()> {
        if pastfs::is_past_fh(fh) {
            return Ok(());
        }
        if is_control_fh(fh) {
            return self.control.flush(fh);
        }
        Ok(())
    }

    /// `release`.
    pub fn release(&self, fh: Fh) {
        if pastfs::is_past_fh(fh) {
            return self.past.release(fh);
        }
        if is_control_fh(fh) {
            return self.control.release(fh);
        }
        self.host.host_release(fh);
    }

    /// `fsync`: a control file has nothing to sync (every input is acted on when written).
    pub fn fsync(&self, fh: Fh, datasync: bool) -> FsResult<()> {
        if pastfs::is_past_fh(fh) {
            return Ok(());
        }
        if is_control_fh(fh) {
            return Ok(());
        }
        self.host.host_fsync(fh, datasync)
    }
}

/// The folder side's own operations: a control node cannot be their subject (the kernel
/// asks them only of nodes it got from the folder's side, or refuses them on a control node
/// itself: `create` and the others by name are refused inside `.ckpt/` by `refuse_store`).
impl CkptFs {
    /// `create`: make and open a new file.
    pub fn create(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        caller: Caller,
    ) -> FsResult<(Entry, Fh)> {
        self.host.create(parent, name, mode, umask, flags, caller)
    }

    /// `mknod`.
    pub fn mknod(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        caller: Caller,
    ) -> FsResult<Entry> {
        self.host.mknod(parent, name, mode, umask, rdev, caller)
    }

    /// `mkdir`.
    pub fn mkdir(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        caller: Caller,
    ) -> FsResult<Entry> {
        self.host.mkdir(parent, name, mode, umask, caller)
    }

    /// `symlink`.
    pub fn symlink(
        &self,
        parent: NodeId,
        name: &OsStr,
        target: &OsStr,
        caller: Caller,
    ) -> FsResult<Entry> {
        self.host.symlink(parent, name, target, caller)
    }

    /// `unlink`.
    pub fn unlink(&self, parent: NodeId, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.host.unlink(parent, name, caller)
    }

    /// `rmdir`.
    pub fn rmdir(&self, parent: NodeId, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.host.rmdir(parent, name, caller)
    }

    /// `rename` / `renameat2` with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`.
    pub fn rename(
        &self,
        parent: NodeId,
        name: &OsStr,
        newparent: NodeId,
        newname: &OsStr,
        flags: u32,
        caller: Caller,
    ) -> FsResult<()> {
        self.host
            .rename(parent, name, newparent, newname, flags, caller)
    }

    /// `readlink` (no control node is a symlink: `EINVAL` as for any non-link).
    pub fn readlink(&self, node: NodeId) -> FsResult<Vec<u8>> {
        match side(node) {
            Side::Control => Err(Errno(libc::EINVAL).into()),
            Side::Past => self.past.readlink(&self.host, node),
            Side::Host => self.host.readlink(node),
        }
    }

    /// `statfs`: the folder's filesystem.
    pub fn statfs(&self) -> FsResult<libc::statvfs> {
        self.host.statfs()
    }

    /// See `HostFs::with_backing_fd` (control files are never passed through).
    pub fn with_backing_fd<R>(
        &self,
        fh: Fh,
        register: impl FnOnce(BorrowedFd<'_>) -> R,
    ) -> FsResult<R> {
        self.host.with_backing_fd(fh, register)
    }

    /// See `HostFs::reads_served_here`.
    pub fn reads_served_here(&self, fh: Fh) {
        self.host.reads_served_here(fh);
    }

    /// See `HostFs::keeps_kernel_pages`.
    pub fn keeps_kernel_pages(&self, node: NodeId, fh: Fh) -> bool {
        self.host.keeps_kernel_pages(node, fh)
    }

    /// `fallocate`.
    pub fn fallocate(&self, fh: Fh, offset: u64, length: u64, mode: i32) -> FsResult<()> {
        self.host.fallocate(fh, offset, length, mode)
    }

    /// `lseek` (`SEEK_DATA` / `SEEK_HOLE`).
    pub fn lseek(&self, fh: Fh, offset: i64, whence: i32) -> FsResult<i64> {
        self.host.lseek(fh, offset, whence)
    }

    /// `copy_file_range` between two handles.
    pub fn copy_file_range(
        &self,
        fh_in: Fh,
        off_in: u64,
        fh_out: Fh,
        off_out: u64,
        len: u64,
    ) -> FsResult<u32> {
        self.host
            .copy_file_range(fh_in, off_in, fh_out, off_out, len)
    }
}

/// The turns (`Turns`): each runs with the folder side's changes held back.
impl CkptFs {
    /// Runs `f` with every capture held back: the gate taken exclusively, as for a turn
    /// switch or a rewind (for a prune, see `Turns::with_captures_held`).
    pub fn with_captures_held<T>(&self, f: impl FnOnce() -> T) -> T {
        self.turns.with_captures_held(&self.host, f)
    }

    /// Begins the turn `start` says; returns whether the turn changed.
    pub fn begin_turn(&self, start: TurnStart) -> Result<bool, TurnError> {
        self.turns.begin_turn(&self.host, start)
    }

    /// Runs the rewind `req` (see [`rewind::run`]) while holding back every other mutation,
    /// then invalidates the kernel's caches for everything that changed. A whole rewind's
    /// report, written as JSON once, is what `.ckpt/rewind` shows from then on.
    pub fn rewind(
        &self,
        req: &rewind::Request,
        progress: rewind::Progress<'_>,
    ) -> Result<Rewound, RewindError> {
        self.turns.rewind(&self.host, req, progress)
    }

    /// Runs `undo` (or `redo`) while holding back every other mutation (see
    /// [`rewind::undo_redo`]).
    pub fn undo_redo(
        &self,
        way: rewind::Direction,
        mode: rewind::Mode,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        self.turns.undo_redo(&self.host, way, mode, progress)
    }

    /// Gives turn `turn` the label `label` (an operation of the log).
    pub fn relabel(&self, turn: Turn, label: Option<String>) -> Result<(), RelabelError> {
        self.turns.relabel(&self.host, turn, label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::control::{CTL_GITIGNORE, CTL_TURN};

    #[test]
    fn control_ids_route_to_the_control_side_and_every_other_id_to_the_host() {
        for id in [CTL_DIR, CTL_TURN, CTL_REWIND, CTL_GITIGNORE] {
            assert_eq!(side(id), Side::Control, "{id}");
        }
        for id in [
            ROOT,
            NodeId::new(CTL_GITIGNORE.get() + 1),
            NodeId::new(1 << 40),
        ] {
            assert_eq!(side(id), Side::Host, "{id}");
        }
    }
}
