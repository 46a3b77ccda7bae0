//! Namespace changes: mknod, mkdir, symlink, link, unlink, rmdir and rename, each captured
//! before the host call and reflected in the inode table after it.

use super::creds::CallerUmask;
use super::inode::HostId;
use super::resolve::Located;
use super::vfs::refuse_store;
use super::{Caller, Entry, FsError, FsResult, HostFs, cname};
use crate::capture::{PendingStage, StageBy, Staging, What, Who};
use crate::ids::NodeId;
use crate::relpath::RelPath;
use crate::sys::{self, Errno};
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

impl HostFs {
    pub(super) fn own_new(&self, dir: BorrowedFd<'_>, name: &CStr, caller: Caller) {
        // A root daemon creates as root; give the entry to the caller as a local fs would.
        if sys::geteuid() != 0 || (caller.uid == 0 && caller.gid == 0) {
            return;
        }
        let gid = match sys::fstat(dir) {
            Ok(st) if st.st_mode & libc::S_ISGID != 0 => st.st_gid,
            _ => caller.gid,
        };
        // Through an O_PATH descriptor of the new entry, so the chmod below cannot follow a
        // symlink put in its place.
        let Ok(fd) = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0) else {
            return;
        };
        let Ok(st) = sys::fstat(fd.as_fd()) else {
            return;
        };
        if sys::fchown(fd.as_fd(), caller.uid, gid).is_err() {
            return;
        }
        // Any chown, even root's, drops S_ISUID (and S_ISGID with group-execute) from a
        // non-directory; the caller created it with them (the kernel already stripped S_ISGID
        // where the caller may not have it), so put them back.
        let setid = st.st_mode & (libc::S_ISUID | libc::S_ISGID);
        if setid != 0 && st.st_mode & libc::S_IFMT != libc::S_IFLNK {
            let _ = sys::fchmod_any(fd.as_fd(), st.st_mode & 0o7777);
        }
    }

    pub(super) fn prepare_new(
        &self,
        parent: NodeId,
        name: &OsStr,
        caller: Caller,
    ) -> FsResult<(Arc<OwnedFd>, CString)> {
        refuse_store(parent, name)?;
        let dir = self.dir_fd(parent)?;
        let c = cname(name)?;
        let path = self.child_path(parent, name)?;
        self.capture
            .ensure(dir.as_fd(), &c, &path, Who::new(caller.pid, What::Create))
            .map_err(|e| FsError::capturing(&path, e))?;
        Ok((dir, c))
    }

    /// `mknod` (regular files, FIFOs, sockets, devices).
    pub(super) fn mknod(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        caller: Caller,
    ) -> FsResult<Entry> {
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(parent, name, caller)?;
        {
            let (perm, _umask) = CallerUmask::apply(dir.as_fd(), mode, umask);
            sys::mknodat(
                dir.as_fd(),
                &c,
                (mode & libc::S_IFMT) | perm,
                u64::from(rdev),
            )?;
        }
        self.own_new(dir.as_fd(), &c, caller);
        let st = sys::lstatat(dir.as_fd(), &c)?;
        Ok(self.entry(parent, name, &st))
    }

    /// `mkdir`.
    pub(super) fn mkdir(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        caller: Caller,
    ) -> FsResult<Entry> {
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(parent, name, caller)?;
        {
            let (perm, _umask) = CallerUmask::apply(dir.as_fd(), mode, umask);
            sys::mkdirat(dir.as_fd(), &c, perm)?;
        }
        self.own_new(dir.as_fd(), &c, caller);
        let st = sys::lstatat(dir.as_fd(), &c)?;
        Ok(self.entry(parent, name, &st))
    }

    /// `symlink`.
    pub(super) fn symlink(
        &self,
        parent: NodeId,
        name: &OsStr,
        target: &OsStr,
        caller: Caller,
    ) -> FsResult<Entry> {
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(parent, name, caller)?;
        sys::symlinkat(&cname(target)?, dir.as_fd(), &c)?;
        self.own_new(dir.as_fd(), &c, caller);
        let st = sys::lstatat(dir.as_fd(), &c)?;
        Ok(self.entry(parent, name, &st))
    }

    /// `link`.
    pub(super) fn host_link(
        &self,
        node: NodeId,
        newparent: NodeId,
        newname: &OsStr,
        caller: Caller,
    ) -> FsResult<Entry> {
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(newparent, newname, caller)?;
        let Located {
            dir: sdir,
            name: sname,
            path: spath,
        } = self.located(node)?;
        let sst = sys::lstatat(sdir.as_fd(), &sname)?;
        if self.read_inodes().get(node).map(|n| n.host) != Some(HostId::of(&sst)) {
            return Err(Errno(libc::ESTALE).into());
        }
        // The source changes too: its link count, and from now on its content can be written
        // through the new name, which a rewind removes. So its pre-image comes first.
        self.capture
            .ensure(
                sdir.as_fd(),
                &sname,
                &spath,
                Who::new(caller.pid, What::Link),
            )
            .map_err(|e| FsError::capturing(&spath, e))?;
        sys::linkat(sdir.as_fd(), &sname, dir.as_fd(), &c)?;
        let st = sys::lstatat(dir.as_fd(), &c)?;
        Ok(self.entry(newparent, newname, &st))
    }

    pub(super) fn remove(
        &self,
        parent: NodeId,
        name: &OsStr,
        what: Removal,
        caller: Caller,
    ) -> FsResult<()> {
        let flags = match what {
            Removal::File => 0,
            Removal::Dir => libc::AT_REMOVEDIR,
        };
        refuse_store(parent, name)?;
        let _gate = self.shared_gate();
        let dir = self.dir_fd(parent)?;
        let c = cname(name)?;
        let path = self.child_path(parent, name)?;
        let who = Who::new(caller.pid, What::Delete);
        // A file's removal may move it into the store (see `Capturer::stage`).
        let file = match what {
            Removal::File => sys::lstatat(dir.as_fd(), &c).ok(),
            Removal::Dir => None,
        };
        if file.is_none() {
            self.capture.ensure(dir.as_fd(), &c, &path, who)?;
        }
        let detached = self.detach_if_last(parent, name, dir.as_fd(), &c, file.as_ref());
        let removed_dir = match (&detached, what) {
            (Some(d), Removal::Dir) => self.removed_dir_fd(d.node, d.host, dir.as_fd(), &c),
            _ => None,
        };
        let removed = match &file {
            Some(st) => {
                let held_open = self.held_open(parent, name);
                let at = Staging {
                    parent: dir.as_fd(),
                    name: &c,
                    path: &path,
                    st,
                    held_open,
                };
                match self.capture.stage(at, who, StageBy::Move) {
                    Ok(Some(staged)) => {
                        staged.settle(true);
                        Ok(())
                    }
                    Ok(None) => sys::unlinkat(dir.as_fd(), &c, flags).map_err(FsError::from),
                    Err(e) => Err(FsError::capturing(&path, e)),
                }
            }
            None => sys::unlinkat(dir.as_fd(), &c, flags).map_err(FsError::from),
        };
        // A failed removal puts the detached node back as `detached` drops.
        removed?;
        if let Some(d) = detached {
            d.done();
        }
        let gone = self.write_inodes().unlink(parent, name);
        if let (Some(node), Removal::Dir) = (gone, what) {
            self.lock_dirs().map.remove(&node);
        }
        if let Some((node, fd)) = removed_dir {
            self.lock_ghosts().insert(node, fd);
        }
        Ok(())
    }

    /// Before `rmdir` of `name` in `dir`, the node it stands for being `node` (host inode
    /// `host`): a descriptor of the directory to keep as a ghost once it is gone (see
    /// [`super::resolve::Ghosts`]), the directory cache's when it has one.
    pub(super) fn removed_dir_fd(
        &self,
        node: NodeId,
        host: HostId,
        dir: BorrowedFd<'_>,
        name: &CStr,
    ) -> Option<(NodeId, Arc<OwnedFd>)> {
        if let Some(fd) = self.lock_dirs().get(node) {
            return Some((node, fd));
        }
        let fd = sys::openat(
            dir,
            name,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .ok()?;
        let st = sys::fstat(fd.as_fd()).ok()?;
        (HostId::of(&st) == host).then(|| (node, Arc::new(fd)))
    }

    /// Before removing or replacing `name` in `parent`: when it is the last name of its host
    /// inode (a directory, or a file with one link), stop mapping that inode to its node (see
    /// [`super::inode::InodeTable::detach`]). The guard returned puts it back unless the removal is done.
    pub(super) fn detach_if_last(
        &self,
        parent: NodeId,
        name: &OsStr,
        dir: BorrowedFd<'_>,
        c: &CStr,
        seen: Option<&libc::stat>,
    ) -> Option<Detached<'_>> {
        let st = match seen {
            Some(st) => *st,
            None => sys::lstatat(dir, c).ok()?,
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR && st.st_nlink > 1 {
            return None;
        }
        let mut t = self.write_inodes();
        let node = t.child(parent, name)?;
        if t.get(node).map(|n| n.host) != Some(HostId::of(&st)) {
            return None;
        }
        let host = t.detach(node)?;
        Some(Detached {
            fs: self,
            node,
            host,
            ghost: false,
            done: false,
        })
    }

    /// Whether any handle is open on the node `name` in `parent` names.
    pub(super) fn held_open(&self, parent: NodeId, name: &OsStr) -> bool {
        let Some(node) = self.read_inodes().child(parent, name) else {
            return false;
        };
        self.lock_handles().is_open(node)
    }

    /// `unlink`.
    pub(super) fn unlink(&self, parent: NodeId, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.remove(parent, name, Removal::File, caller)
    }

    /// `rmdir`.
    pub(super) fn rmdir(&self, parent: NodeId, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.remove(parent, name, Removal::Dir, caller)
    }

    /// `rename` / `renameat2` with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`.
    pub(super) fn rename(
        &self,
        parent: NodeId,
        name: &OsStr,
        newparent: NodeId,
        newname: &OsStr,
        flags: u32,
        caller: Caller,
    ) -> FsResult<()> {
        refuse_store(parent, name)?;
        refuse_store(newparent, newname)?;
        let _gate = self.shared_gate();
        let ends = RenameEnds {
            sdir: self.dir_fd(parent)?,
            ddir: self.dir_fd(newparent)?,
            sc: cname(name)?,
            dc: cname(newname)?,
            spath: self.child_path(parent, name)?,
            dpath: self.child_path(newparent, newname)?,
        };
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        // The source does not exist: let the kernel give its exact errno, capture nothing.
        let src = sys::lstatat(ends.sdir.as_fd(), &ends.sc)?;
        let dst = sys::lstatat(ends.ddir.as_fd(), &ends.dc).ok();
        let seen = RenameSeen {
            src,
            dst,
            flags,
            to: (newparent, newname),
        };
        let same_inode = seen.same_inode();
        let staged = if ends.spath != ends.dpath {
            self.capture_rename(&ends, &seen, caller)?
        } else {
            None
        };
        // A replaced destination loses its last name (unless it is the source itself); its link
        // count is the one seen before any staging link.
        let detached = if exchange || same_inode {
            None
        } else {
            self.detach_if_last(
                newparent,
                newname,
                ends.ddir.as_fd(),
                &ends.dc,
                dst.as_ref(),
            )
        };
        let detached = detached.map(|mut d| {
            self.keep_replaced(d.node, d.host, ends.ddir.as_fd(), &ends.dc);
            d.ghost = true;
            d
        });
        let renamed = sys::renameat2(
            ends.sdir.as_fd(),
            &ends.sc,
            ends.ddir.as_fd(),
            &ends.dc,
            flags,
        );
        if let Some(staged) = staged {
            staged.settle(renamed.is_ok());
        }
        // A failed rename puts the replaced node back as `detached` drops.
        renamed?;
        if let Some(d) = detached {
            d.done();
        }
        self.renamed_in_tables(parent, name, newparent, newname, exchange);
        Ok(())
    }

    /// The node table after a rename done on the host: the names moved (or swapped), and the
    /// cached descriptor of a directory renamed over dropped.
    fn renamed_in_tables(
        &self,
        parent: NodeId,
        name: &OsStr,
        newparent: NodeId,
        newname: &OsStr,
        exchange: bool,
    ) {
        let mut t = self.write_inodes();
        if exchange {
            t.exchange(parent, name, newparent, newname);
        } else {
            if let Some(replaced) = t.child(newparent, newname) {
                self.lock_dirs().map.remove(&replaced);
            }
            t.rename(parent, name, newparent, newname);
        }
    }

    /// The captures a rename needs before it runs: the source tree (mirrored at the
    /// destination when it is a directory), and the destination, which a rename over a
    /// regular file stages by a hard link instead of reading it (an editor's or `sed -i`'s
    /// save; see `Capturer::stage`). Returns the staged capture to settle after the rename.
    fn capture_rename(
        &self,
        ends: &RenameEnds,
        seen: &RenameSeen<'_>,
        caller: Caller,
    ) -> FsResult<Option<PendingStage<'_>>> {
        let who = Who::new(caller.pid, What::Rename);
        let RenameSeen {
            src,
            dst,
            flags,
            to: (newparent, newname),
        } = *seen;
        let same_inode = seen.same_inode();
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let (sdir, ddir) = (ends.sdir.as_fd(), ends.ddir.as_fd());
        // A directory is captured with everything below it (and mirrored at the destination);
        // anything else is one path, read outside the store lock (`Capturer::ensure`). The
        // kernel holds both parents locked for the rename, so neither name changes meanwhile.
        if src.st_mode & libc::S_IFMT == libc::S_IFDIR {
            let mirror = (ddir, ends.dc.as_c_str(), &ends.dpath);
            self.capture
                .ensure_tree(sdir, &ends.sc, &ends.spath, Some(mirror), who)
                .map_err(|e| FsError::capturing(&ends.spath, e))?;
        } else {
            self.capture
                .ensure(sdir, &ends.sc, &ends.spath, who)
                .map_err(|e| FsError::capturing(&ends.spath, e))?;
        }
        let dst_is_dir = dst.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        match dst {
            Some(d)
                if !exchange
                    && !same_inode
                    && flags & libc::RENAME_NOREPLACE == 0
                    && d.st_mode & libc::S_IFMT == libc::S_IFREG =>
            {
                let held_open = self.held_open(newparent, newname);
                let at = Staging {
                    parent: ddir,
                    name: &ends.dc,
                    path: &ends.dpath,
                    st: &d,
                    held_open,
                };
                self.capture
                    .stage(at, who, StageBy::Link)
                    .map_err(|e| FsError::capturing(&ends.dpath, e))
            }
            _ if dst_is_dir => {
                let back = exchange.then_some((sdir, ends.sc.as_c_str(), &ends.spath));
                self.capture
                    .ensure_tree(ddir, &ends.dc, &ends.dpath, back, who)
                    .map_err(|e| FsError::capturing(&ends.dpath, e))?;
                Ok(None)
            }
            _ => {
                self.capture
                    .ensure(ddir, &ends.dc, &ends.dpath, who)
                    .map_err(|e| FsError::capturing(&ends.dpath, e))?;
                Ok(None)
            }
        }
    }

    /// Keeps a file or directory that a rename is about to replace reachable while the kernel
    /// holds its node (see `Ghosts`), if the name still holds that inode.
    fn keep_replaced(&self, node: NodeId, host: HostId, ddir: BorrowedFd<'_>, dc: &CStr) {
        if let Ok(fd) = sys::openat(ddir, dc, libc::O_PATH | libc::O_NOFOLLOW, 0)
            && sys::fstat(fd.as_fd()).is_ok_and(|st| {
                matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR)
                    && HostId::of(&st) == host
            })
        {
            self.lock_ghosts().insert(node, Arc::new(fd));
        }
    }
}

/// What a rename found before it ran: what stood at the source and the destination, the flags
/// it was asked with, and the destination's parent node and name (as the kernel named them).
#[derive(Clone, Copy)]
struct RenameSeen<'a> {
    src: libc::stat,
    dst: Option<libc::stat>,
    flags: u32,
    to: (NodeId, &'a OsStr),
}

impl RenameSeen<'_> {
    /// Whether both names are already the one inode (a rename that only drops the source).
    fn same_inode(&self) -> bool {
        self.dst
            .is_some_and(|d| HostId::of(&d) == HostId::of(&self.src))
    }
}

/// Both ends of a rename: the directories, the names, and the paths beneath the folder.
struct RenameEnds {
    sdir: Arc<OwnedFd>,
    ddir: Arc<OwnedFd>,
    sc: CString,
    dc: CString,
    spath: RelPath,
    dpath: RelPath,
}

/// What `unlink` or `rmdir` removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Removal {
    /// A name of anything but a directory (`unlink`).
    File,
    /// A directory (`rmdir`).
    Dir,
}

/// A node taken out of the host-identity map before its last name is removed or replaced on
/// the host ([`HostFs::detach_if_last`]), after mountpoint-s3's `PendingRenameGuard`: dropped
/// before [`Detached::done`], it puts the node back (and drops the descriptor kept for it as
/// a ghost, if one was), so no error path of a removal or a rename has to.
pub(super) struct Detached<'a> {
    fs: &'a HostFs,
    /// The node.
    pub(super) node: NodeId,
    /// The host inode it stood for.
    pub(super) host: HostId,
    /// Whether a ghost descriptor was kept for it ([`HostFs::keep_replaced`]).
    ghost: bool,
    /// Whether the host change was made: nothing to put back.
    done: bool,
}

impl Detached<'_> {
    /// The removal or rename was made on the host: the node stays detached.
    pub(super) fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Detached<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.fs.write_inodes().reattach(self.node, self.host);
        if self.ghost {
            self.fs.lock_ghosts().remove(self.node);
        }
    }
}
