//! Open files: handles, `open`/`create` (with the capture of the pre-image through the
//! handle's own descriptor), read, write, flush, release and the other per-handle calls.

use super::creds::{CallerUmask, setid_to_drop};
use super::handles::NodeHandle;
use super::resolve::{Located, Reach};
use super::{Caller, Entry, FsError, FsResult, HostFs};
use crate::capture::{HeldBy, What, Who};
use crate::ids::{Fh, NodeId};
use crate::relpath::RelPath;
use crate::sys::{self, Errno};
use std::ffi::{CStr, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// An open file of the folder: the daemon's descriptor of it, and how it was opened.
pub(super) struct Handle {
    pub(super) node: NodeId,
    pub(super) fd: OwnedFd,
    /// Opened for writing, or with `O_TRUNC`.
    pub(super) writable: bool,
    /// Seen by `fstat` to be a regular file when opened (so passthrough may back it without
    /// another `fstat`).
    pub(super) regular: bool,
    /// Opened read-write: a shared writable mapping of it can be made (see
    /// [`super::CkptFs::attr_ttl`]).
    pub(super) mappable: bool,
    /// Who opened it and in which turn (a handle open for writing): what a turn switch
    /// records as the actor of the file's later writes, which reach the host unseen.
    pub(super) opener: Option<HeldBy>,
}

impl NodeHandle for Handle {
    fn node(&self) -> NodeId {
        self.node
    }
}

/// The flags the daemon opens a handle's host file with, from the caller's open flags: without
/// `O_CREAT`, `O_EXCL` and `O_NOCTTY` (the kernel already resolved them), and without
/// `O_DIRECT`. The daemon's descriptor serves more than the caller's reads and writes: the
/// pre-image is read through it at open, the kernel writes back mmap'd pages and sends
/// `copy_file_range` through whichever handle it picks, and none of them is aligned as direct
/// I/O on the host requires (a write-open of an existing file with `O_DIRECT` failed with
/// `EINVAL` at the capture read; with `--no-passthrough` every read and write did). The
/// caller's direct I/O stays direct where it matters: the kernel bypasses its own page cache
/// for it, and with passthrough it opens its backing file with the caller's own flags,
/// `O_DIRECT` included, so reads and writes go to the disk as on the host. Only with
/// `--no-passthrough` does the data pass through the host's page cache (coherent with every
/// other access, durable on `fsync` as direct I/O is).
pub(super) fn host_open_flags(flags: i32) -> i32 {
    flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_DIRECT)
}

/// Opens `name` in `dir` read-write, for a caller's write-opening with `clean` flags: the
/// capture reads the file's pre-image through this descriptor before the caller gets it.
/// Returns it with the status flags it was opened with.
///
/// Where no caller's read will go through it, it is opened with `O_NOATIME` from the start,
/// so the capture's read needs no flag changed: a write-only caller cannot read (the kernel
/// refuses reads, mappings and copies from a mount file opened without read access before
/// they reach the daemon), and with kernel `passthrough` the kernel reads the host file
/// through a backing file of its own, opened with the caller's flags. Otherwise the caller's
/// reads are served through this descriptor and must update the atime, so the capture sets
/// and clears the flag around its read ([`sys::without_atime`]); a passthrough the kernel
/// then refuses gives the flag back ([`HostFs::reads_served_here`]). `O_NOATIME` needs the
/// file's owner or `CAP_FOWNER`: without them the descriptor is opened as usual.
pub(super) fn open_to_capture(
    dir: &OwnedFd,
    name: &CStr,
    clean: i32,
    passthrough: bool,
) -> FsResult<(OwnedFd, i32)> {
    let flags = (clean & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_NOFOLLOW;
    if passthrough || clean & libc::O_ACCMODE == libc::O_WRONLY {
        return Ok(sys::openat_noatime_as(dir.as_fd(), name, flags)?);
    }
    Ok((sys::openat(dir.as_fd(), name, flags, 0)?, flags))
}

impl HostFs {
    pub(super) fn add_handle(&self, h: Handle) -> Fh {
        let fh = Fh::new(self.next_fh.fetch_add(1, Ordering::Relaxed));
        if h.mappable {
            self.mappable_open.fetch_add(1, Ordering::Relaxed);
        }
        self.lock_handles().insert(fh, h);
        fh
    }

    pub(super) fn handle(&self, fh: Fh) -> FsResult<Arc<Handle>> {
        self.lock_handles().get(fh).ok_or(Errno(libc::EBADF).into())
    }

    /// `open` of a file of the folder.
    pub(super) fn host_open(&self, node: NodeId, flags: i32, caller: Caller) -> FsResult<Fh> {
        let fh = self.open_handle(node, flags, caller)?;
        if flags & libc::O_ACCMODE == libc::O_RDWR && self.passthrough.load(Ordering::Relaxed) {
            // Attributes cached before (from the lookup that led here) would outlive a write
            // through a shared mapping of this descriptor (see `attr_ttl`).
            self.attributes_changed(node);
        }
        Ok(fh)
    }

    pub(super) fn open_handle(&self, node: NodeId, flags: i32, caller: Caller) -> FsResult<Fh> {
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let mappable = flags & libc::O_ACCMODE == libc::O_RDWR;
        let clean = host_open_flags(flags);
        let Located { dir, name, path } = match self.reach(node)? {
            Reach::Named(l) => l,
            // `/proc/PID/fd/N` of a file unlinked while open: reopen that open file.
            Reach::Unnamed(orphan) => return self.open_orphan(node, orphan, clean, caller),
            Reach::Root => return Err(Errno(libc::EINVAL).into()),
        };
        if writable && flags & libc::O_TRUNC == 0 {
            match self.open_for_write(node, &dir, &name, &path, clean, caller) {
                Err(e) if e.is(libc::EACCES) || e.is(libc::EPERM) => {} // no read access: capture by name
                r => return r,
            }
        }
        let gate = writable.then(|| self.shared_gate());
        let mut setid_drop = 0;
        if writable {
            let st = sys::lstatat(dir.as_fd(), &name)?;
            if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                let who = Who::new(caller.pid, What::Write);
                self.capture
                    .ensure(dir.as_fd(), &name, &path, who)
                    .map_err(|e| FsError::capturing(&path, e))?;
                self.capture_other_names(node, &path, who)?;
                if flags & libc::O_TRUNC != 0 {
                    setid_drop = setid_to_drop(&st, caller);
                }
            }
        }
        let fd = sys::openat(dir.as_fd(), &name, clean | libc::O_NOFOLLOW, 0)?;
        if setid_drop != 0 {
            // Truncated here, not through setattr, so nothing else drops them. (The mount does
            // not ask for FUSE_ATOMIC_O_TRUNC, so the kernel sends O_TRUNC as a setattr.)
            let st = self.verify(node, fd.as_fd())?;
            sys::fchmod_any(fd.as_fd(), st.st_mode & 0o7777 & !setid_drop)?;
        }
        drop(gate);
        let (fd, regular) = match self.verify(node, fd.as_fd()) {
            Ok(st) => {
                if writable {
                    self.capture.settle_inode(st.st_ino)?;
                }
                (fd, st.st_mode & libc::S_IFMT == libc::S_IFREG)
            }
            // Renamed over while this request was on its way: the file the caller resolved.
            Err(e) if e.is(libc::ESTALE) => (self.reopen_ghost(node, clean)?, false),
            Err(e) => return Err(e),
        };
        Ok(self.add_handle(Handle {
            node,
            fd,
            writable,
            regular,
            mappable,
            opener: writable.then(|| self.opener(caller)),
        }))
    }

    /// Opens a file unlinked while open (through `/proc/PID/fd/N`) by reopening `orphan`, a
    /// descriptor of it ([`Reach::Unnamed`]).
    fn open_orphan(
        &self,
        node: NodeId,
        orphan: OwnedFd,
        clean: i32,
        caller: Caller,
    ) -> FsResult<Fh> {
        let fd = sys::reopen(orphan.as_fd(), clean | libc::O_NOFOLLOW)?;
        let writable = clean & libc::O_ACCMODE != libc::O_RDONLY || clean & libc::O_TRUNC != 0;
        Ok(self.add_handle(Handle {
            node,
            fd,
            writable,
            regular: false,
            mappable: clean & libc::O_ACCMODE == libc::O_RDWR,
            opener: writable.then(|| self.opener(caller)),
        }))
    }

    /// The opener of a handle opened for writing now by `caller`.
    fn opener(&self, caller: Caller) -> HeldBy {
        HeldBy {
            pid: caller.pid,
            opened_in: self.turn_now(),
        }
    }

    /// `open` for writing without truncation: the file is opened first, read-write, and its
    /// pre-image read through that descriptor (no second lookup and open by name). Opening
    /// changes no byte, so capturing after it is still before the first mutation. The daemon's
    /// descriptor may read although the caller's may not: the kernel checked the caller, never
    /// sends a read for a write-only handle, and passthrough opens its own backing file with
    /// the caller's flags.
    pub(super) fn open_for_write(
        &self,
        node: NodeId,
        dir: &OwnedFd,
        name: &CStr,
        path: &RelPath,
        clean: i32,
        caller: Caller,
    ) -> FsResult<Fh> {
        let _gate = self.shared_gate();
        let (fd, flags) = open_to_capture(dir, name, clean, self.passthrough())?;
        let (fd, regular) = match self.verify(node, fd.as_fd()) {
            Ok(st) => {
                let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
                if regular {
                    let who = Who::new(caller.pid, What::Write);
                    self.capture
                        .ensure_open_file(fd.as_fd(), flags, &st, path, who)
                        .map_err(|e| FsError::capturing(path, e))?;
                    self.capture_other_names(node, path, who)?;
                }
                (fd, regular)
            }
            // Renamed over while this request was on its way: the file the caller resolved,
            // which no name reaches any more, so there is nothing to capture.
            Err(e) if e.is(libc::ESTALE) => (self.reopen_ghost(node, clean)?, false),
            Err(e) => return Err(e),
        };
        Ok(self.add_handle(Handle {
            node,
            fd,
            writable: true,
            regular,
            mappable: clean & libc::O_ACCMODE == libc::O_RDWR,
            opener: Some(self.opener(caller)),
        }))
    }

    /// `create`: make and open a new file.
    pub(super) fn create(
        &self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        caller: Caller,
    ) -> FsResult<(Entry, Fh)> {
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(parent, name, caller)?;
        let fd = {
            let (perm, _umask) = CallerUmask::apply(dir.as_fd(), mode, umask);
            sys::openat(
                dir.as_fd(),
                &c,
                host_open_flags(flags) | libc::O_CREAT | libc::O_NOFOLLOW,
                perm,
            )?
        };
        self.own_new(dir.as_fd(), &c, caller);
        let st = sys::fstat(fd.as_fd())?;
        let entry = self.entry(parent, name, &st);
        let fh = self.add_handle(Handle {
            node: entry.node,
            fd,
            writable: true,
            regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
            // No attributes of the new file were cached before it could be mapped, and it
            // is empty: it grows by a write or a truncation first, and both refresh them.
            mappable: flags & libc::O_ACCMODE == libc::O_RDWR,
            opener: Some(self.opener(caller)),
        });
        Ok((entry, fh))
    }

    /// `read` of a file of the folder.
    pub(super) fn host_read(&self, fh: Fh, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let h = self.handle(fh)?;
        let mut buf = vec![0u8; size as usize];
        let n = crate::sys::read_full(h.fd.as_fd(), &mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// `write` to a file of the folder (the handle is writable, so its file was captured at
    /// open).
    pub(super) fn host_write(&self, fh: Fh, offset: u64, data: &[u8]) -> FsResult<u32> {
        let h = self.handle(fh)?;
        let _gate = self.shared_gate();
        let n = sys::pwrite(h.fd.as_fd(), data, offset)?;
        Ok(n as u32)
    }

    /// Calls `register` with the descriptor of an open handle's regular file, to make it the
    /// kernel's passthrough backing file. The handle's own descriptor serves, whatever its
    /// access mode: the kernel opens a backing file of its own for every open, with that
    /// open's flags, from the registered file's path (one registration serves every open of
    /// the inode).
    pub(super) fn with_backing_fd<R>(
        &self,
        fh: Fh,
        register: impl FnOnce(BorrowedFd<'_>) -> R,
    ) -> FsResult<R> {
        let h = self.handle(fh)?;
        let regular =
            h.regular || sys::fstat(h.fd.as_fd())?.st_mode & libc::S_IFMT == libc::S_IFREG;
        if !regular {
            return Err(Errno(libc::EINVAL).into());
        }
        Ok(register(h.fd.as_fd()))
    }

    /// The kernel did not take `fh`'s descriptor for passthrough: the daemon serves the
    /// caller's reads through it, and they must update the atime as reads do on the host. A
    /// read-write open was opened with `O_NOATIME` in the expectation of passthrough
    /// (`open_to_capture`); the flag is cleared here, before the open is answered.
    pub(super) fn reads_served_here(&self, fh: Fh) {
        if !self.passthrough() {
            return;
        }
        let Ok(h) = self.handle(fh) else { return };
        if h.mappable
            && let Err(e) = sys::keep_atime(h.fd.as_fd())
        {
            let path = self.log_path(h.node, None);
            log::warn!(target: "ckpt::fs", "reads of {path} through this open may leave its atime: {e}");
        }
    }

    /// Whether the open `fh` of `node`, whose reads the daemon serves, lets the kernel keep
    /// the pages it holds for the node (`FOPEN_KEEP_CACHE`) instead of dropping them: a file
    /// read again (a compiler's inputs at each build, `grep` run twice) is then read from
    /// memory, not through the daemon. Only where the kernel passes no file through: a
    /// passthrough open reads and writes the host file beside the node's pages, which would
    /// then fall out of step. The pages are the file's when this node's last open was of the
    /// same file and no rewind changed it since ([`super::inode::InodeTable::pages_still_valid`]);
    /// anything unproven drops them, as every open did before.
    pub(super) fn keeps_kernel_pages(&self, node: NodeId, fh: Fh) -> bool {
        if self.passthrough() {
            return false;
        }
        let Ok(h) = self.handle(fh) else {
            return false;
        };
        if !h.regular {
            return false;
        }
        let fd = &h.fd;
        let Some(ino) = self.read_inodes().get(node).map(|n| n.host.ino) else {
            return false;
        };
        let now = crate::identity::FileId::of_fd(fd.as_fd(), ino).fingerprint();
        self.read_inodes().pages_still_valid(node, now)
    }

    /// `release` of a file of the folder.
    pub(super) fn host_release(&self, fh: Fh) {
        // Closed after the lock is released: a close can take as long as a flush.
        let handle = self.lock_handles().remove(fh);
        if handle.as_ref().is_some_and(|h| h.mappable) {
            self.mappable_open.fetch_sub(1, Ordering::Relaxed);
        }
        drop(handle);
    }

    /// `fsync` of a file of the folder.
    pub(super) fn host_fsync(&self, fh: Fh, datasync: bool) -> FsResult<()> {
        let h = self.handle(fh)?;
        Ok(sys::fsync(h.fd.as_fd(), datasync)?)
    }

    /// `fallocate` (the handle is writable, so its file was captured at open).
    pub(super) fn fallocate(&self, fh: Fh, offset: u64, length: u64, mode: i32) -> FsResult<()> {
        let h = self.handle(fh)?;
        let _gate = self.shared_gate();
        Ok(sys::fallocate(h.fd.as_fd(), mode, offset, length)?)
    }

    /// `lseek` (`SEEK_DATA` / `SEEK_HOLE`).
    pub(super) fn lseek(&self, fh: Fh, offset: i64, whence: i32) -> FsResult<i64> {
        let h = self.handle(fh)?;
        Ok(sys::lseek(h.fd.as_fd(), offset, whence)?)
    }

    /// `copy_file_range` between two handles.
    pub(super) fn copy_file_range(
        &self,
        fh_in: Fh,
        off_in: u64,
        fh_out: Fh,
        off_out: u64,
        len: u64,
    ) -> FsResult<u32> {
        let hi = self.handle(fh_in)?;
        let ho = self.handle(fh_out)?;
        let _gate = self.shared_gate();
        let n = sys::copy_file_range(
            hi.fd.as_fd(),
            off_in,
            ho.fd.as_fd(),
            off_out,
            len.min(u64::from(u32::MAX)),
        )?;
        Ok(n as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{Capturer, DEFAULT_MAX_BLOB};
    use crate::fs::inode::ROOT;
    use crate::fs::{CkptFs, FsConfig};
    use crate::store::Store;

    fn status_flags(fs: &HostFs, fh: Fh) -> i32 {
        let h = fs.handle(fh).expect("handle");
        sys::status_flags(h.fd.as_fd()).expect("F_GETFL")
    }

    /// Which descriptors a write-opening leaves `O_NOATIME` on: those no caller's read goes
    /// through (write-only opens; read-write opens the kernel serves by passthrough), and not
    /// a read-write open whose reads the daemon serves, nor one whose passthrough the kernel
    /// refused.
    #[test]
    fn only_descriptors_no_caller_reads_through_keep_o_noatime() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), b"bytes").expect("write");
        let root = std::fs::File::open(dir.path()).expect("open the folder");
        let store = Store::for_test(root.as_fd()).expect("store");
        let fs = CkptFs::new(
            OwnedFd::from(root),
            Capturer::new(store, DEFAULT_MAX_BLOB),
            FsConfig::default(),
        )
        .expect("the core");
        let who = Caller {
            uid: 0,
            gid: 0,
            pid: 0,
        };
        let node = fs.lookup(ROOT, OsStr::new("f")).expect("lookup").node;
        let quiet = |flags: i32, passthrough: bool| {
            fs.set_passthrough(passthrough);
            let fh = fs.open(node, flags, who).expect("open");
            let before = status_flags(&fs.host, fh) & libc::O_NOATIME != 0;
            fs.reads_served_here(fh);
            let after = status_flags(&fs.host, fh) & libc::O_NOATIME != 0;
            fs.release(fh);
            (before, after)
        };
        assert_eq!(quiet(libc::O_WRONLY, false), (true, true), "write-only");
        assert_eq!(
            quiet(libc::O_WRONLY, true),
            (true, true),
            "write-only, passthrough"
        );
        assert_eq!(quiet(libc::O_RDWR, false), (false, false), "read-write");
        assert_eq!(
            quiet(libc::O_RDWR, true),
            (true, false),
            "read-write, passthrough expected and refused"
        );
    }
}
