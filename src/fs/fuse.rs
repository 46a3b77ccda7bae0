//! The fuser adapter: translate each request into a core call and the result into a reply.
//! What to answer is the core's decision (TTLs in [`Entry`], negative entries'
//! [`CkptFs::negative_ttl`], direct I/O or passthrough in [`OpenedAs`]); what lives here is
//! how fuser says it: its `INodeNo` and `FileHandle` as the core's [`NodeId`] and [`Fh`] (the
//! one place they are converted, `translate.rs`), the node id swapped into `st_ino` (`fix`), kernel
//! passthrough's backing ids (one per inode, as the kernel requires), the negotiation at
//! `init`, and the log level of each errno. Every request method is a few lines.

mod backing;
mod translate;

use super::{CkptFs, Entry, FsError, Invalidator, OpenedAs, SetAttr, XattrReply};
use crate::ids::{Fh, NodeId};
use backing::BackingIds;
use fuser::BackingId;
use fuser::{
    CopyFileRangeFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, IoctlFlags, KernelConfig, LockOwner, Notifier, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};
use translate::{At, caller, failed, fix, named, on, placeholder_attr, time};

/// The `fuser::Filesystem` over a shared core.
pub struct FuseAdapter {
    /// The core.
    pub fs: Arc<CkptFs>,
    /// Ask for kernel passthrough of file I/O (reads, writes, mmap bypass the daemon).
    pub want_passthrough: bool,
    passthrough: AtomicBool,
    backing: BackingIds,
}

impl FuseAdapter {
    /// An adapter over `fs`.
    pub fn new(fs: Arc<CkptFs>, want_passthrough: bool) -> Self {
        Self {
            fs,
            want_passthrough,
            passthrough: AtomicBool::new(false),
            backing: BackingIds::default(),
        }
    }

    /// The backing id to pass `fh` through with: shared by every open of one node (the kernel
    /// requires one backing file per inode), registered on first use.
    fn backing_for(
        &self,
        node: NodeId,
        fh: Fh,
        register: impl FnOnce(std::os::fd::BorrowedFd<'_>) -> std::io::Result<BackingId>,
    ) -> Option<Arc<BackingId>> {
        if !self.passthrough.load(Ordering::Relaxed) {
            return None;
        }
        self.backing.for_handle(node, fh, || {
            let id = self.fs.with_backing_fd(fh, register).ok()?;
            id.map_err(|e| {
                let path = self.fs.log_path(node, None);
                log::debug!(target: "ckpt::fuse", "no passthrough for {path}: {e}");
            })
            .ok()
        })
    }

    /// The open flags of a file whose reads the daemon serves: no `FLUSH`, and the kernel's
    /// pages kept where they are proven the file's ([`CkptFs::keeps_kernel_pages`]).
    fn read_flags(&self, node: NodeId, fh: Fh) -> FopenFlags {
        if self.fs.keeps_kernel_pages(node, fh) {
            FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::FOPEN_NOFLUSH
        }
    }
}

impl FuseAdapter {
    /// [`failed`], on this adapter's core.
    fn errno(&self, op: &str, at: At<'_>, e: FsError) -> Errno {
        failed(&self.fs, op, at, e)
    }

    fn reply_entry(&self, reply: ReplyEntry, r: Result<Entry, FsError>, op: &str, at: At<'_>) {
        match r {
            Ok(e) => reply.entry_with_ttls(&e.attr_ttl, &e.ttl, &fix(e), Generation(0)),
            Err(e) => reply.error(self.errno(op, at, e)),
        }
    }
}

/// Sends invalidations through the session's notifier.
pub struct KernelInvalidator(pub Notifier);

impl Invalidator for KernelInvalidator {
    fn inval_entry(&self, parent: NodeId, name: &OsStr) {
        let _ = self.0.inval_entry(parent.into(), name);
    }
    fn inval_inode(&self, node: NodeId) {
        let _ = self.0.inval_inode(node.into(), 0, 0);
    }
    fn inval_attr(&self, node: NodeId) {
        // A negative offset: attributes only, no page of the file is dropped.
        let _ = self.0.inval_inode(node.into(), -1, 0);
    }
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // No FUSE_ATOMIC_O_TRUNC: with it the kernel sends O_TRUNC in OPEN, before it checks
        // for ETXTBSY, so `open(running_binary, O_RDONLY | O_TRUNC)` would truncate the binary
        // under the running process and then fail. Without it the kernel checks first, then
        // truncates through SETATTR (one more round trip per O_TRUNC open), dropping set-id
        // bits on the way as for any truncation.
        //
        // FUSE_HANDLE_KILLPRIV_V2: the daemon drops set-id bits itself (it already does, by
        // the local-filesystem rules in `setid_to_drop`, on truncation, chown and the empty
        // setattr a write by a caller without CAP_FSETID still sends), so the kernel stops
        // refreshing attributes before each chown and marks inodes S_NOSEC: a file written
        // in many `write` calls costs one `security.capability` GETXATTR, not one per call.
        //
        // FUSE_DONT_MASK: the kernel sends the mode of a create, mkdir and mknod unmasked,
        // with the caller's umask beside it, and the daemon applies the umask only where the
        // parent has no default ACL (`CallerUmask`). fuser asks for none of these by itself
        // (only FUSE_ASYNC_READ, FUSE_BIG_WRITES and FUSE_MAX_PAGES).
        let want = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_EXPORT_SUPPORT
            | InitFlags::FUSE_HANDLE_KILLPRIV_V2
            | InitFlags::FUSE_DONT_MASK;
        let _ = config.add_capabilities(want & config.capabilities());
        let _ = config.set_max_write(1 << 20);
        // Passthrough is correct here because capture happens at open and at turn boundaries,
        // never per write. It needs kernel >= 6.9 and CAP_SYS_ADMIN; without them, plain I/O.
        if self.want_passthrough
            && config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH)
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(2).is_ok()
        {
            self.passthrough.store(true, Ordering::Relaxed);
            self.fs.set_passthrough(true);
            log::info!(target: "ckpt::fuse", "kernel passthrough for file I/O is on");
        }
        // Where the daemon serves every read, opens keep the kernel's pages of a file they are
        // proven to hold (`read_flags`), and FUSE_AUTO_INVAL_DATA makes the kernel drop them
        // when a refresh of the attributes shows another mtime: a file changed behind the
        // mount's back (by a process whose working directory is the folder under it) is read
        // again within the attribute TTL, as its attributes are. Not with passthrough: there
        // it would refresh attributes at each read the daemon serves (the TTL is 0 while a
        // file may be mapped) for pages no open keeps.
        if !self.passthrough.load(Ordering::Relaxed) {
            let _ =
                config.add_capabilities(InitFlags::FUSE_AUTO_INVAL_DATA & config.capabilities());
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.into(), name) {
            // Node id 0 is a negative entry the kernel keeps for the TTL: the next lookup of
            // a name that does not exist (compilers' search paths, git's .gitignore probes)
            // costs no request. Safe as positive entries are: every creation passes through
            // the kernel's own dentry, and a rewind invalidates each name it restores.
            Err(e) if e.is(libc::ENOENT) => reply.entry(
                &self.fs.negative_ttl(),
                &placeholder_attr(INodeNo(0), FileType::RegularFile),
                Generation(0),
            ),
            r => self.reply_entry(reply, r, "lookup", named(parent, name)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.into(), nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.into(), fh.map(Fh::from)) {
            Ok(mut a) => {
                a.ino = ino;
                reply.attr(&self.fs.attr_ttl(ino.into()), &a);
            }
            Err(e) => reply.error(self.errno("getattr", on(ino), e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: time(atime),
            mtime: time(mtime),
        };
        match self
            .fs
            .setattr(ino.into(), fh.map(Fh::from), set, caller(req))
        {
            Ok(mut a) => {
                a.ino = ino;
                reply.attr(&self.fs.attr_ttl(ino.into()), &a);
            }
            Err(e) => reply.error(self.errno("setattr", on(ino), e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.into()) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(self.errno("readlink", on(ino), e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(
            reply,
            self.fs
                .mknod(parent.into(), name, mode, umask, rdev, caller(req)),
            "mknod",
            named(parent, name),
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry(
            reply,
            self.fs.mkdir(parent.into(), name, mode, umask, caller(req)),
            "mkdir",
            named(parent, name),
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs.unlink(parent.into(), name, caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("unlink", named(parent, name), e)),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs.rmdir(parent.into(), name, caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("rmdir", named(parent, name), e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.reply_entry(
            reply,
            self.fs
                .symlink(parent.into(), link_name, target.as_os_str(), caller(req)),
            "symlink",
            named(parent, link_name),
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.fs.rename(
            parent.into(),
            name,
            newparent.into(),
            newname,
            flags.bits(),
            caller(req),
        ) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno(
                "rename",
                named(parent, name).to(newparent, Some(newname)),
                e,
            )),
        }
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.reply_entry(
            reply,
            self.fs
                .link(ino.into(), newparent.into(), newname, caller(req)),
            "link",
            on(ino).to(newparent, Some(newname)),
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.into(), flags.0, caller(req)) {
            Ok(fh) => match self.fs.opened_as(ino.into()) {
                OpenedAs::Direct => reply.opened(fh.into(), FopenFlags::FOPEN_DIRECT_IO),
                OpenedAs::Past => reply.opened(
                    fh.into(),
                    FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_NOFLUSH,
                ),
                OpenedAs::Host => {
                    let f = FopenFlags::FOPEN_NOFLUSH;
                    match self.backing_for(ino.into(), fh, |fd| reply.open_backing(fd)) {
                        Some(id) => reply.opened_passthrough(fh.into(), f, &id),
                        None => {
                            self.fs.reads_served_here(fh);
                            reply.opened(fh.into(), self.read_flags(ino.into(), fh))
                        }
                    }
                }
            },
            Err(e) => reply.error(self.errno("open", on(ino), e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs.read(fh.into(), offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(self.errno("read", on(ino), e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if self.fs.long_write(ino.into()) {
            // A rewind: answered from its own thread (see `CkptFs::long_write`). Should the
            // thread not start, the reply is dropped unanswered and fuser answers EIO.
            let fs = Arc::clone(&self.fs);
            let data = data.to_vec();
            let started = std::thread::Builder::new()
                .name("ckpt-ctl-write".into())
                .spawn(move || match fs.write(fh.into(), offset, &data) {
                    Ok(n) => reply.written(n),
                    Err(e) => reply.error(failed(&fs, "write", on(ino), e)),
                });
            if let Err(e) = started {
                log::warn!(target: "ckpt::fuse", "no thread for a write to .ckpt/rewind: {e}");
            }
            return;
        }
        match self.fs.write(fh.into(), offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.errno("write", on(ino), e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.fs.flush(fh.into()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("flush", on(ino), e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.backing.release(fh.into());
        self.fs.release(fh.into());
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.fs.fsync(fh.into(), datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("fsync", on(ino), e)),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // ENOSYS here makes the kernel stop sending OPENDIR and RELEASEDIR for good and open
        // every directory with FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR: two round trips fewer
        // per directory walked, and repeated listings served from the kernel's cache (it
        // drops a directory's cache on every change made through the mount, and on the
        // entry invalidations a rewind sends). Listing needs no handle (`CkptFs::readdir`).
        reply.error(Errno::ENOSYS);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.fs.readdir(ino.into(), offset, &mut |d| {
            reply.add(INodeNo(d.ino), d.offset, d.kind, &d.name)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("readdir", on(ino), e)),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let r = self
            .fs
            .readdirplus(ino.into(), offset, &mut |d, entry| match entry {
                // One TTL for both here: a node whose attributes may not be cached (rare: open
                // read-write) gets its name looked up again too.
                Some(e) => reply.add(
                    e.node.into(),
                    d.offset,
                    &d.name,
                    &e.ttl.min(e.attr_ttl),
                    &fix(*e),
                    Generation(0),
                ),
                None => {
                    // `.` and `..`: the kernel takes no reference for them.
                    let attr = placeholder_attr(INodeNo(d.ino), d.kind);
                    reply.add(
                        INodeNo(d.ino),
                        d.offset,
                        &d.name,
                        &Duration::ZERO,
                        &attr,
                        Generation(0),
                    )
                }
            });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("readdirplus", on(ino), e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.fs.fsyncdir(ino.into(), datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("fsyncdir", on(ino), e)),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(self.errno("statfs", on(ino), e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        match self
            .fs
            .setxattr(ino.into(), name, value, flags, caller(req))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("setxattr", on(ino), e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.fs.getxattr(ino.into(), name, size) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(e) => reply.error(self.errno("getxattr", on(ino), e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.fs.listxattr(ino.into(), size) {
            Ok(XattrReply::Size(n)) => reply.size(n),
            Ok(XattrReply::Data(d)) => reply.data(&d),
            Err(e) => reply.error(self.errno("listxattr", on(ino), e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs.removexattr(ino.into(), name, caller(req)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("removexattr", on(ino), e)),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Asked only without default_permissions (see `CkptFs::access`).
        match self.fs.access(ino.into(), mask.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("access", on(ino), e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self
            .fs
            .create(parent.into(), name, mode, umask, flags, caller(req))
        {
            Ok((e, fh)) => match self.backing_for(e.node, fh, |fd| reply.open_backing(fd)) {
                Some(id) => reply.created_passthrough(
                    &e.ttl,
                    &fix(e),
                    Generation(0),
                    fh.into(),
                    FopenFlags::FOPEN_NOFLUSH,
                    &id,
                ),
                None => {
                    let f = self.read_flags(e.node, fh);
                    reply.created(&e.ttl, &fix(e), Generation(0), fh.into(), f)
                }
            },
            Err(e) => reply.error(self.errno("create", named(parent, name), e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match self.fs.fallocate(fh.into(), offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.errno("fallocate", on(ino), e)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        match self.fs.lseek(fh.into(), offset, whence) {
            Ok(o) => reply.offset(o),
            Err(e) => reply.error(self.errno("lseek", on(ino), e)),
        }
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        match self
            .fs
            .copy_file_range(fh_in.into(), offset_in, fh_out.into(), offset_out, len)
        {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.errno("copy_file_range", on(ino_in).to(ino_out, None), e)),
        }
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        // The kernel asks for every ioctl on an open file (Python's isatty `TCGETS` on each
        // `open`), never caching a refusal: answer what a regular file answers, cheaply and
        // without fuser's default multi-line warning per call.
        reply.error(Errno::ENOTTY);
    }
}
