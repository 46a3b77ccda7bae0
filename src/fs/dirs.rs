//! Directory listings (`readdir`, `readdirplus`, resumed at the host's own cookie), `fsyncdir`
//! and `statfs`.

use super::attrs::{FromVecCompat, dt_kind};
use super::inode::ROOT;
use super::{DirItem, Entry, FsResult, HostFs, cname};
use crate::ids::NodeId;
use crate::relpath::STORE_DIR;
use crate::sys::{self, Errno};
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};

impl HostFs {
    /// Feeds `f` the entries of a directory after the cookie `offset`, with the directory's
    /// descriptor, until it returns true (reply full) or the listing ends.
    ///
    /// Stateless: the mount answers OPENDIR with ENOSYS, so the kernel keeps no handle here
    /// and caches listings itself (see `FuseAdapter::opendir`). The cookies are the host
    /// filesystem's own `d_off`, so a listing resumed after concurrent changes behaves as
    /// it does on the host: no snapshot to go stale, nothing held between calls.
    pub(super) fn each_dir_item(
        &self,
        node: NodeId,
        offset: u64,
        f: &mut dyn FnMut(&DirItem, BorrowedFd<'_>) -> FsResult<bool>,
    ) -> FsResult<()> {
        let dir = self.dir_fd(node)?;
        let rd = sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        if offset != 0 {
            sys::lseek(rd.as_fd(), offset as i64, libc::SEEK_SET)?;
        }
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let chunk = sys::read_dir_chunk(rd.as_fd(), &mut buf)?;
            if chunk.is_empty() {
                return Ok(());
            }
            for e in chunk {
                if node == ROOT && e.name == STORE_DIR.as_bytes() {
                    // `.ckpt` answers a lookup but is not listed (like a hidden `.zfs`), so
                    // tree walkers (`git clean -fdx`, `find -delete`, `rm -rf ./.*`, `cp -r
                    // .`) never stumble on the control files; naming it still reaches them.
                    continue;
                }
                let item = DirItem {
                    ino: e.ino,
                    offset: e.next,
                    kind: dt_kind(e.kind),
                    name: OsString::from_vec_compat(e.name),
                };
                if f(&item, dir.as_fd())? {
                    return Ok(());
                }
            }
        }
    }

    /// `readdir`: entries after the cookie `offset`; `sink` returns true when the reply is
    /// full (that entry was not sent).
    pub(super) fn host_readdir(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem) -> bool,
    ) -> FsResult<()> {
        self.each_dir_item(node, offset, &mut |item, _| Ok(sink(item)))
    }

    /// `readdirplus`: as `readdir`, with an entry (and a lookup) for each name but `.`/`..`.
    pub(super) fn host_readdirplus(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        self.each_dir_item(node, offset, &mut |item, dir| {
            let dots = item.name == "." || item.name == "..";
            let entry = if dots {
                None
            } else {
                match sys::lstatat(dir, &cname(&item.name)?) {
                    Ok(st) => Some(self.entry(node, &item.name, &st)),
                    Err(Errno(libc::ENOENT)) => return Ok(false), // gone since getdents
                    Err(e) => return Err(e.into()),
                }
            };
            let full = sink(item, entry.as_ref());
            if full {
                // Not sent: the kernel got no reference, so take the lookup back.
                if let Some(e) = entry {
                    self.host_forget(e.node, 1);
                }
            }
            Ok(full)
        })
    }

    /// `fsyncdir`: the directory's entries made durable on the host.
    pub(super) fn host_fsyncdir(&self, node: NodeId, datasync: bool) -> FsResult<()> {
        let dir = self.dir_fd(node)?;
        let rd = sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(sys::fsync(rd.as_fd(), datasync)?)
    }

    /// `statfs`.
    pub(super) fn statfs(&self) -> FsResult<libc::statvfs> {
        Ok(sys::fstatvfs(self.root.as_fd())?)
    }
}
