//! Attributes: `stat` results as the kernel sees them, `getattr`/`setattr`/`readlink`, extended
//! attributes, and how long the kernel may cache a node's attributes (`attr_ttl`).

use super::creds::{acl_clears_setgid, setid_to_drop};
use super::inode::HostId;
use super::resolve::{AttrFd, Reach};
use super::{Caller, FsResult, HostFs, cname};
use crate::capture::{What, Who};
use crate::ids::{Fh, NodeId};
use crate::sys::{self, Errno};
use fuser::{FileAttr, FileType};
use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The extended attribute that holds a POSIX access ACL.
const ACL_ACCESS: &[u8] = b"system.posix_acl_access";

pub(super) fn now_ts() -> SystemTime {
    SystemTime::now()
}

pub(super) fn kind_of(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

pub(super) fn dt_kind(dt: u8) -> FileType {
    match dt {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_SOCK => FileType::Socket,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_BLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

pub(super) fn ts(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::new(sec.unsigned_abs(), 0) + Duration::new(0, nsec as u32)
    }
}

/// Converts a host stat to FUSE attributes.
pub fn attr_of(st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: fuser::INodeNo(st.st_ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: ts(st.st_atime, st.st_atime_nsec),
        mtime: ts(st.st_mtime, st.st_mtime_nsec),
        ctime: ts(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: kind_of(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// Time to set in a setattr.
#[derive(Debug, Clone, Copy)]
pub enum SetTime {
    /// The current time.
    Now,
    /// A given time.
    At(SystemTime),
}

/// Changes requested by a setattr.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    /// New mode.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
}

pub(super) fn timespec(t: Option<SetTime>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(SetTime::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(SetTime::At(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: i64::from(d.subsec_nanos()),
            },
            Err(e) => {
                let d = e.duration();
                let mut sec = -(d.as_secs() as i64);
                let mut nsec = -i64::from(d.subsec_nanos());
                if nsec < 0 {
                    sec -= 1;
                    nsec += 1_000_000_000;
                }
                libc::timespec {
                    tv_sec: sec,
                    tv_nsec: nsec,
                }
            }
        },
    }
}

pub(super) trait FromVecCompat {
    fn from_vec_compat(v: Vec<u8>) -> OsString;
}

impl FromVecCompat for OsString {
    fn from_vec_compat(v: Vec<u8>) -> OsString {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(v)
    }
}

/// A getxattr/listxattr answer.
#[derive(Debug)]
pub enum XattrReply {
    /// Only the size was asked.
    Size(u32),
    /// The bytes.
    Data(Vec<u8>),
}

impl HostFs {
    /// How long the kernel may cache `node`'s attributes: the TTL, but none (each `stat` asks)
    /// while the node is open read-write with kernel passthrough.
    ///
    /// With passthrough a shared mapping is the host file's own: a write to it updates the
    /// host's mtime and ctime at the page fault, as on ext4, and no FUSE request follows (not
    /// even for `msync`, which syncs the host file). Writes and truncations through the mount
    /// mark or refresh the kernel's attributes; a mapped write does not, so `stat` kept the
    /// mtime from before for the whole TTL (xfstests generic/080, 215). Only a read-write
    /// descriptor can map a file shared and writable; while one is open the attributes are
    /// not cached, and opening one drops those cached before ([`super::CkptFs::open`]). Open
    /// write-only or read-only files keep the TTL, and so do files open read-write without
    /// passthrough: there mapped pages reach the host only through the daemon's writes, after
    /// which the kernel marks the attributes stale itself. The one case left: a mapping kept
    /// after its descriptor is closed, written after a `stat` that followed the close (the
    /// kernel tells the daemon nothing of either).
    pub(super) fn host_attr_ttl(&self, node: NodeId) -> Duration {
        if self.passthrough.load(Ordering::Relaxed)
            && self.mappable_open.load(Ordering::Relaxed) > 0
            && self.lock_handles().find_on(node, |h| h.mappable).is_some()
        {
            return Duration::ZERO;
        }
        self.config.ttl
    }

    /// `getattr`.
    pub(super) fn host_getattr(&self, node: NodeId, fh: Option<Fh>) -> FsResult<FileAttr> {
        if let Some(h) = fh.and_then(|fh| self.lock_handles().get(fh)) {
            return Ok(attr_of(&sys::fstat(h.fd.as_fd())?));
        }
        let l = match self.reach(node)? {
            Reach::Root => return Ok(attr_of(&sys::fstat(self.root.as_fd())?)),
            // `fstat` of a file unlinked while open comes without a handle: an open one's.
            Reach::Unnamed(fd) => return Ok(attr_of(&sys::fstat(fd.as_fd())?)),
            Reach::Named(l) => l,
        };
        let st = sys::lstatat(l.dir.as_fd(), &l.name);
        let expect = self.read_inodes().get(node).map(|n| n.host);
        match st {
            Ok(st) if expect == Some(HostId::of(&st)) => Ok(attr_of(&st)),
            // Renamed over while this request was on its way: the file the caller resolved.
            Ok(_) | Err(Errno(libc::ENOENT)) => match self.ghost_fd(node) {
                Some(fd) => Ok(attr_of(&sys::fstat(fd.as_fd())?)),
                None => Err(Errno(libc::ESTALE).into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// `setattr`.
    pub(super) fn host_setattr(
        &self,
        node: NodeId,
        fh: Option<Fh>,
        set: SetAttr,
        caller: Caller,
    ) -> FsResult<FileAttr> {
        let _gate = self.shared_gate();
        let what = if set.size.is_some() {
            What::Write
        } else {
            What::Attr
        };
        self.capture_node(node, Who::new(caller.pid, what))?;
        let attr_fd = self.attr_fd(node)?;
        let fd = attr_fd.fd()?;
        // Set-id bits a local filesystem drops here that the kernel left (see `setid_to_drop`):
        // on truncation; on the empty setattr the kernel sends when a write must drop them;
        // on chown only S_ISGID (the host's chown drops the rest by itself).
        let chown = set.uid.is_some() || set.gid.is_some();
        let drop = if set.size.is_some()
            || chown
            || (set.mode.is_none() && set.atime.is_none() && set.mtime.is_none())
        {
            let d = setid_to_drop(&sys::fstat(fd.as_fd())?, caller);
            if chown && set.size.is_none() {
                d & libc::S_ISGID
            } else {
                d
            }
        } else {
            0
        };
        if let Some(size) = set.size {
            let handle = fh.and_then(|fh| self.lock_handles().get(fh));
            match handle.as_ref().filter(|h| h.writable) {
                Some(h) => sys::ftruncate(h.fd.as_fd(), size)?,
                _ => {
                    let w = sys::reopen(fd.as_fd(), libc::O_WRONLY)?;
                    sys::ftruncate(w.as_fd(), size)?;
                }
            }
        }
        if set.uid.is_some() || set.gid.is_some() {
            sys::fchown(
                fd.as_fd(),
                set.uid.unwrap_or(u32::MAX),
                set.gid.unwrap_or(u32::MAX),
            )?;
        }
        if let Some(mode) = set.mode {
            sys::fchmod_any(fd.as_fd(), mode & 0o7777 & !drop)?;
        } else if drop != 0 {
            let now = sys::fstat(fd.as_fd())?.st_mode;
            sys::fchmod_any(fd.as_fd(), now & 0o7777 & !drop)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let times = [timespec(set.atime), timespec(set.mtime)];
            match self.reach(node)? {
                Reach::Root => sys::utimensat(self.root.as_fd(), c".", &times)?,
                Reach::Named(l) => sys::utimensat(l.dir.as_fd(), &l.name, &times)?,
                // Unlinked while open: set the times through the open file itself.
                Reach::Unnamed(_) => sys::futimens_any(fd.as_fd(), &times)?,
            }
        }
        Ok(attr_of(&sys::fstat(fd.as_fd())?))
    }

    /// `readlink`.
    pub(super) fn readlink(&self, node: NodeId) -> FsResult<Vec<u8>> {
        let l = self.located(node)?;
        Ok(sys::readlinkat(l.dir.as_fd(), &l.name)?)
    }

    /// `getxattr`; with `size == 0` the value's length only.
    pub(super) fn host_getxattr(
        &self,
        node: NodeId,
        name: &OsStr,
        size: u32,
    ) -> FsResult<XattrReply> {
        let fd = self.attr_fd(node)?;
        let c = cname(name)?;
        let mut buf = vec![0u8; size as usize];
        let n = fd.getxattr(&c, &mut buf)?;
        if size == 0 {
            return Ok(XattrReply::Size(n as u32));
        }
        buf.truncate(n);
        Ok(XattrReply::Data(buf))
    }

    /// `listxattr`.
    pub(super) fn host_listxattr(&self, node: NodeId, size: u32) -> FsResult<XattrReply> {
        let fd = self.attr_fd(node)?;
        let mut buf = vec![0u8; size as usize];
        let n = fd.listxattr(&mut buf)?;
        if size == 0 {
            return Ok(XattrReply::Size(n as u32));
        }
        buf.truncate(n);
        Ok(XattrReply::Data(buf))
    }

    /// `setxattr`.
    pub(super) fn host_setxattr(
        &self,
        node: NodeId,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        caller: Caller,
    ) -> FsResult<()> {
        let _gate = self.shared_gate();
        self.capture_node(node, Who::new(caller.pid, What::Attr))?;
        let attr_fd = self.attr_fd(node)?;
        attr_fd.setxattr(&cname(name)?, value, flags)?;
        // An empty value removes the ACL, which changes no mode (the host's `set_acl` with no
        // ACL); a value sets one, and with it the mode, by the caller's rule.
        let result = if name.as_bytes() == ACL_ACCESS && !value.is_empty() {
            self.clear_setgid_for_acl(&attr_fd, caller)
        } else {
            Ok(())
        };
        self.attributes_changed(node);
        result
    }

    /// After an access ACL was set: clears `S_ISGID` where the caller's own set would have
    /// ([`acl_clears_setgid`]). The host applied the rule to the daemon's credentials, so the
    /// bit is still there exactly when the daemon may keep it and the caller may not. `chmod`
    /// with the permission bits the ACL just gave leaves the ACL as it is (its mask or group
    /// entry is those bits).
    fn clear_setgid_for_acl(&self, attr_fd: &AttrFd, caller: Caller) -> FsResult<()> {
        let fd = attr_fd.fd()?;
        let st = sys::fstat(fd)?;
        if acl_clears_setgid(&st, caller) {
            sys::fchmod_any(fd, st.st_mode & 0o7777 & !libc::S_ISGID)?;
        }
        Ok(())
    }

    /// `removexattr`.
    pub(super) fn host_removexattr(
        &self,
        node: NodeId,
        name: &OsStr,
        caller: Caller,
    ) -> FsResult<()> {
        let _gate = self.shared_gate();
        self.capture_node(node, Who::new(caller.pid, What::Attr))?;
        self.attr_fd(node)?.removexattr(&cname(name)?)?;
        self.attributes_changed(node);
        Ok(())
    }

    /// After a change that no reply carries attributes for (an xattr set or removed): the
    /// kernel's cached attributes of `node` are dropped, so the next `stat` asks the host.
    /// Setting `system.posix_acl_access` changes the mode (`setfacl -m g::rwx` is a chmod to
    /// the host), and every xattr change the ctime; without FUSE_POSIX_ACL the kernel marks
    /// only the ctime stale, so a `stat` asking for the mode alone kept the old one for the
    /// whole TTL (xfstests generic/375). Sent before the reply, while the kernel holds the
    /// inode for the request.
    pub(super) fn attributes_changed(&self, node: NodeId) {
        if let Some(inv) = self.invalidator.get() {
            inv.inval_attr(node);
        }
    }
}
