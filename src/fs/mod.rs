//! The passthrough core: every FUSE operation as a plain method over the host folder, with
//! capture before each mutation. It never sees fuser's `Request` or `Reply*` types, so tests
//! drive it on a temp dir without a kernel.
//!
//! Descriptors: the folder root is held from before the mount (so no path ever leads back into
//! the mount); directories are reached by `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from
//! the root and kept in a bounded cache; files are opened per handle; files replaced by a
//! rename are kept reachable while the kernel holds them (`Ghosts`, bounded). The daemon's
//! descriptor count is bounded by those plus the open handles, never by the size of the tree.
//!
//! Lock order: `gate` → `inodes` → `dirs` → `handles` → `ghosts` → the store (inside
//! `Capturer`). No lock but `gate` and the store is held across host I/O. Mutations take
//! `gate` shared; a turn switch or a rewind takes it exclusively, so they see no mutation half
//! done.

pub mod control;
pub mod fuse;
mod handles;
pub mod inode;

use crate::capture::{Capturer, StageBy, TurnError, Who};
use crate::relpath::{RelPath, STORE_DIR};
use crate::rewind::{self, Report, RewindError};
use crate::sys::{self, Errno};
use control::{CTL_DIR, CTL_GITIGNORE, CTL_REWIND, CTL_TURN};
use fuser::{FileAttr, FileType};
use handles::{HandleTable, NodeHandle};
use inode::{HostId, InodeTable, ROOT};
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Result of a core operation: the errno goes to the kernel as is.
pub type FsResult<T> = Result<T, Errno>;

/// Who asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller {
    /// uid.
    pub uid: u32,
    /// gid.
    pub gid: u32,
    /// pid.
    pub pid: u32,
}

/// An entry reply.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Attributes; `attr.ino` is the host inode number, shown as `st_ino`.
    pub attr: FileAttr,
    /// The node id the kernel will use.
    pub node: u64,
    /// How long the kernel may cache the name.
    pub ttl: Duration,
    /// How long the kernel may cache the attributes ([`CkptFs::attr_ttl`]).
    pub attr_ttl: Duration,
}

/// One directory entry for readdir.
#[derive(Debug, Clone)]
pub struct DirItem {
    /// Inode number shown as `d_ino`.
    pub ino: u64,
    /// Offset of the next entry.
    pub offset: u64,
    /// Kind.
    pub kind: FileType,
    /// Name.
    pub name: OsString,
}

/// The kernel-cache side of the mount, implemented by the fuser adapter.
pub trait Invalidator: Send + Sync {
    /// Drop the cached dentry `name` in `parent`.
    fn inval_entry(&self, parent: u64, name: &OsStr);
    /// Drop cached attributes and pages of `node`.
    fn inval_inode(&self, node: u64);
    /// Drop only the cached attributes (and ACLs) of `node`, keeping its pages.
    fn inval_attr(&self, node: u64);
}

/// Settings of the core.
#[derive(Debug, Clone, Copy)]
pub struct FsConfig {
    /// Entry and attribute cache TTL for the project tree.
    pub ttl: Duration,
    /// Descriptors kept in the directory cache.
    pub dir_cache: usize,
}

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            dir_cache: 1024,
        }
    }
}

enum HandleKind {
    File {
        writable: bool,
        /// Seen by `fstat` to be a regular file when opened (so passthrough may back it
        /// without another `fstat`).
        regular: bool,
        /// Opened read-write: a shared writable mapping of it can be made (see
        /// [`CkptFs::attr_ttl`]).
        mappable: bool,
    },
    Control {
        node: u64,
        snapshot: Mutex<Vec<u8>>,
        /// Opened for writing and nothing written yet: closing it so is an empty input.
        unwritten: AtomicBool,
    },
}

struct Handle {
    node: u64,
    fd: Option<OwnedFd>,
    kind: HandleKind,
}

/// What a node's attributes and xattrs are read and changed through.
enum AttrFd {
    /// One of the node's open handles: its descriptor is the node's inode itself, so it needs
    /// no lookup by name, no verification and no close, and xattr calls need no `/proc` path.
    /// (`chmod`, `chown`, xattr changes and writes' `security.capability` checks mostly come
    /// for files the caller holds open: `sed -i`'s temporary file, an untarred file.)
    Open(Arc<Handle>),
    /// A verified `O_PATH` descriptor ([`CkptFs::node_fd`]).
    Path(OwnedFd),
}

impl AttrFd {
    fn fd(&self) -> FsResult<BorrowedFd<'_>> {
        match self {
            AttrFd::Path(fd) => Ok(fd.as_fd()),
            // `attr_fd` only picks handles with a descriptor
            AttrFd::Open(h) => h.fd.as_ref().map(AsFd::as_fd).ok_or(Errno(libc::EBADF)),
        }
    }

    fn getxattr(&self, name: &CStr, buf: &mut [u8]) -> FsResult<usize> {
        match self {
            AttrFd::Path(fd) => sys::getxattr(fd.as_fd(), name, buf),
            AttrFd::Open(_) => sys::fgetxattr(self.fd()?, name, buf),
        }
    }

    fn listxattr(&self, buf: &mut [u8]) -> FsResult<usize> {
        match self {
            AttrFd::Path(fd) => sys::listxattr(fd.as_fd(), buf),
            AttrFd::Open(_) => sys::flistxattr(self.fd()?, buf),
        }
    }

    fn setxattr(&self, name: &CStr, value: &[u8], flags: i32) -> FsResult<()> {
        match self {
            AttrFd::Path(fd) => sys::setxattr(fd.as_fd(), name, value, flags),
            AttrFd::Open(_) => sys::fsetxattr(self.fd()?, name, value, flags),
        }
    }

    fn removexattr(&self, name: &CStr) -> FsResult<()> {
        match self {
            AttrFd::Path(fd) => sys::removexattr(fd.as_fd(), name),
            AttrFd::Open(_) => sys::fremovexattr(self.fd()?, name),
        }
    }
}

impl NodeHandle for Handle {
    fn node(&self) -> u64 {
        self.node
    }
}

impl Handle {
    fn mappable(&self) -> bool {
        matches!(self.kind, HandleKind::File { mappable: true, .. })
    }
}

struct DirCache {
    map: HashMap<u64, (Arc<OwnedFd>, u64)>,
    tick: u64,
    cap: usize,
}

impl DirCache {
    fn get(&mut self, node: u64) -> Option<Arc<OwnedFd>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&node).map(|(fd, t)| {
            *t = tick;
            fd.clone()
        })
    }

    fn put(&mut self, node: u64, fd: Arc<OwnedFd>) {
        self.tick += 1;
        if self.map.len() >= self.cap {
            // Drop the older half: amortised O(1) per insert, bounded descriptors.
            let mut ticks: Vec<u64> = self.map.values().map(|(_, t)| *t).collect();
            ticks.sort_unstable();
            let cut = ticks[ticks.len() / 2];
            self.map.retain(|_, (_, t)| *t > cut);
        }
        self.map.insert(node, (fd, self.tick));
    }
}

/// At most this many replaced files are kept reachable (see [`Ghosts`]).
const GHOSTS: usize = 256;

/// `O_PATH` descriptors of what lost its last name while the kernel may still hold its node:
/// regular files that a rename replaced, and directories removed or renamed over.
///
/// A process that resolved a replaced file's path just before the rename can still open or
/// stat the file it resolved, as on a local filesystem. Without them it gets `ESTALE`, and the
/// kernel's one retry fails too when the name is replaced again meanwhile (`make -j` renaming
/// over a header that others read).
///
/// A directory held open (a shell's working directory, an `opendir` stream) answers `fstat`
/// after `rmdir` or a rename over it, with `st_nlink` 0, as on ext4 (xfstests generic/035).
/// The mount keeps no directory handles (`FuseAdapter::opendir`), so the daemon cannot tell
/// an open directory from one merely cached: it keeps the descriptor of every directory it
/// removes while the kernel holds the node (usually the one the directory cache already had,
/// so `rm -rf` opens nothing more).
///
/// Dropped when the kernel forgets the node; the oldest goes first past [`GHOSTS`].
#[derive(Default)]
struct Ghosts {
    map: HashMap<u64, Arc<OwnedFd>>,
    order: std::collections::VecDeque<u64>,
}

impl Ghosts {
    fn insert(&mut self, node: u64, fd: Arc<OwnedFd>) {
        if self.map.insert(node, fd).is_none() {
            self.order.push_back(node);
        }
        while self.map.len() > GHOSTS {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.map.remove(&old);
        }
    }

    fn remove(&mut self, node: u64) {
        if self.map.remove(&node).is_some() {
            self.order.retain(|n| *n != node);
        }
    }
}

/// The core filesystem.
pub struct CkptFs {
    root: Arc<OwnedFd>,
    root_host: HostId,
    inodes: RwLock<InodeTable>,
    dirs: Mutex<DirCache>,
    handles: Mutex<HandleTable<Handle>>,
    ghosts: Mutex<Ghosts>,
    next_fh: AtomicU64,
    gate: RwLock<()>,
    capture: Capturer,
    config: FsConfig,
    last_report: Mutex<String>,
    invalidator: OnceLock<Arc<dyn Invalidator>>,
    /// The kernel passes file I/O through to the host (set by the adapter at init).
    passthrough: AtomicBool,
    /// Open handles that are [`Handle::mappable`].
    mappable_open: AtomicUsize,
    uid: u32,
    gid: u32,
}

fn cname(name: &OsStr) -> FsResult<CString> {
    sys::cstr(name)
}

fn now_ts() -> SystemTime {
    SystemTime::now()
}

fn kind_of(mode: u32) -> FileType {
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

fn dt_kind(dt: u8) -> FileType {
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

fn ts(sec: i64, nsec: i64) -> SystemTime {
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

fn timespec(t: Option<SetTime>) -> libc::timespec {
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

/// `CAP_FSETID`: keeps set-id bits across writes, truncates and chowns.
const CAP_FSETID: u32 = 4;

/// What the FUSE request does not carry of the caller's credentials (its supplementary groups
/// and effective capabilities), read from `/proc/PID/status` of the calling thread, which is
/// blocked in its system call meanwhile. Without it: only the request's gid, and `CAP_FSETID`
/// for uid 0.
struct CallerCreds {
    groups: Vec<u32>,
    fsetid: bool,
}

impl CallerCreds {
    fn of(caller: Caller) -> Self {
        let mut creds = Self {
            groups: vec![caller.gid],
            fsetid: caller.uid == 0,
        };
        if caller.pid == 0 {
            return creds;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", caller.pid)) else {
            return creds;
        };
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("Groups:") {
                creds
                    .groups
                    .extend(v.split_whitespace().filter_map(|g| g.parse::<u32>().ok()));
            } else if let Some(v) = line.strip_prefix("CapEff:")
                && let Ok(caps) = u64::from_str_radix(v.trim(), 16)
            {
                creds.fsetid = caps & (1 << CAP_FSETID) != 0;
            }
        }
        creds
    }
}

/// The set-id bits a local filesystem drops from a regular file when `caller` writes to it,
/// truncates it or opens it with `O_TRUNC` (the kernel's `setattr_should_drop_suidgid`): none
/// for a caller with `CAP_FSETID`; else `S_ISUID`, and `S_ISGID` when group-execute is set or
/// the caller is not in the file's group. The FUSE kernel module applies only the first two
/// rules by itself, and none on `open(O_TRUNC)` with atomic truncation.
fn setid_to_drop(st: &libc::stat, caller: Caller) -> u32 {
    let mode = st.st_mode;
    if mode & libc::S_IFMT != libc::S_IFREG || mode & (libc::S_ISUID | libc::S_ISGID) == 0 {
        return 0;
    }
    let creds = CallerCreds::of(caller);
    if creds.fsetid {
        return 0;
    }
    let mut drop = mode & libc::S_ISUID;
    if mode & libc::S_ISGID != 0
        && (mode & libc::S_IXGRP != 0 || !creds.groups.contains(&st.st_gid))
    {
        drop |= libc::S_ISGID;
    }
    drop
}

thread_local! {
    /// Whether this thread has a umask of its own (`unshare(CLONE_FS)`); `None` until asked.
    static OWN_UMASK: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread's umask is its own, making it so on the first call.
fn own_umask() -> bool {
    OWN_UMASK.with(|own| {
        if let Some(v) = own.get() {
            return v;
        }
        let ok = match sys::unshare_fs() {
            Ok(()) => true,
            Err(e) => {
                log::warn!(target: "ckpt::fuse", "no umask of its own for this thread ({e}): creations check the parent's default ACL instead");
                false
            }
        };
        own.set(Some(ok));
        ok
    })
}

/// The caller's umask in force for one creating system call, restored when dropped.
struct CallerUmask(Option<u32>);

impl CallerUmask {
    /// The mode to create an entry with in `dir`, requested as `mode` by a caller whose umask
    /// is `umask`, and the umask to create it under.
    ///
    /// POSIX: the umask applies unless the parent directory has a default ACL, which then
    /// gives the permissions instead. The mount asks for `FUSE_DONT_MASK`, so the kernel sends
    /// the mode unmasked and leaves that to the daemon (without it, it masked the mode first
    /// and a default ACL could not undo that: xfstests generic/099, 319, 444, 697). The host
    /// knows whether the parent has a default ACL, so the daemon creates with the caller's
    /// umask as its own: this thread's, made its own by `unshare(CLONE_FS)`, the way virtiofsd
    /// does it (two `umask` calls, no lookup). Where a thread cannot have its own, the daemon
    /// reads the parent's default ACL and masks the mode itself when it has none.
    fn apply(dir: BorrowedFd<'_>, mode: u32, umask: u32) -> (u32, Self) {
        let mode = mode & 0o7777;
        let umask = umask & 0o777;
        if own_umask() {
            return (mode, Self(Some(sys::set_umask(umask))));
        }
        let inherits =
            sys::getxattr(dir, c"system.posix_acl_default", &mut []).is_ok_and(|n| n > 0);
        (if inherits { mode } else { mode & !umask }, Self(None))
    }
}

impl Drop for CallerUmask {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            sys::set_umask(old);
        }
    }
}

impl CkptFs {
    /// A core over the folder behind `root` (an `O_PATH` directory descriptor) and its store.
    pub fn new(root: OwnedFd, capture: Capturer, config: FsConfig) -> FsResult<Self> {
        let st = sys::fstat(root.as_fd())?;
        let root_host = HostId::of(&st);
        Ok(Self {
            root: Arc::new(root),
            root_host,
            inodes: RwLock::new(InodeTable::new(root_host)),
            dirs: Mutex::new(DirCache {
                map: HashMap::new(),
                tick: 0,
                cap: config.dir_cache.max(2),
            }),
            handles: Mutex::new(HandleTable::new()),
            ghosts: Mutex::new(Ghosts::default()),
            next_fh: AtomicU64::new(1),
            gate: RwLock::new(()),
            capture,
            config,
            last_report: Mutex::new("{}\n".into()),
            invalidator: OnceLock::new(),
            passthrough: AtomicBool::new(false),
            mappable_open: AtomicUsize::new(0),
            uid: st.st_uid,
            gid: st.st_gid,
        })
    }

    /// Connects the kernel-cache invalidator (after the session exists).
    pub fn set_invalidator(&self, inv: Arc<dyn Invalidator>) {
        let _ = self.invalidator.set(inv);
    }

    /// Tells the core that the kernel passes file reads, writes and mmap through to the host.
    pub fn set_passthrough(&self, on: bool) {
        self.passthrough.store(on, Ordering::Relaxed);
    }

    /// How long the kernel may cache `node`'s attributes: the TTL, but none (each `stat` asks)
    /// while the node is open read-write with kernel passthrough.
    ///
    /// With passthrough a shared mapping is the host file's own: a write to it updates the
    /// host's mtime and ctime at the page fault, as on ext4, and no FUSE request follows (not
    /// even for `msync`, which syncs the host file). Writes and truncations through the mount
    /// mark or refresh the kernel's attributes; a mapped write does not, so `stat` kept the
    /// mtime from before for the whole TTL (xfstests generic/080, 215). Only a read-write
    /// descriptor can map a file shared and writable; while one is open the attributes are
    /// not cached, and opening one drops those cached before ([`Self::open`]). Open
    /// write-only or read-only files keep the TTL, and so do files open read-write without
    /// passthrough: there mapped pages reach the host only through the daemon's writes, after
    /// which the kernel marks the attributes stale itself. The one case left: a mapping kept
    /// after its descriptor is closed, written after a `stat` that followed the close (the
    /// kernel tells the daemon nothing of either).
    pub fn attr_ttl(&self, node: u64) -> Duration {
        if control::is_control(node) {
            return Duration::ZERO;
        }
        if self.passthrough.load(Ordering::Relaxed)
            && self.mappable_open.load(Ordering::Relaxed) > 0
            && self
                .lock_handles()
                .find_on(node, Handle::mappable)
                .is_some()
        {
            return Duration::ZERO;
        }
        self.config.ttl
    }

    /// The capture engine (for the control socket).
    pub fn capturer(&self) -> &Capturer {
        &self.capture
    }

    /// The folder root descriptor.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Number of nodes the kernel holds (status).
    pub fn node_count(&self) -> usize {
        self.read_inodes().len()
    }

    fn read_inodes(&self) -> std::sync::RwLockReadGuard<'_, InodeTable> {
        self.inodes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_inodes(&self) -> std::sync::RwLockWriteGuard<'_, InodeTable> {
        self.inodes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn shared_gate(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn exclusive_gate(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_handles(&self) -> std::sync::MutexGuard<'_, HandleTable<Handle>> {
        self.handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_ghosts(&self) -> std::sync::MutexGuard<'_, Ghosts> {
        self.ghosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The replaced file a node still stands for, if one is kept (see [`Ghosts`]).
    fn ghost_fd(&self, node: u64) -> Option<OwnedFd> {
        let fd = self
            .lock_ghosts()
            .map
            .get(&node)
            .and_then(|fd| fd.try_clone().ok())?;
        // A file renamed over may be a staged pre-image: stored before anything can write it.
        let st = sys::fstat(fd.as_fd()).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            self.capture.settle_inode(st.st_ino).ok()?;
        }
        Some(fd)
    }

    fn lock_dirs(&self) -> std::sync::MutexGuard<'_, DirCache> {
        self.dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The relative path of a node (`None` for the root).
    fn path_of(&self, node: u64) -> FsResult<Option<RelPath>> {
        if node == ROOT {
            return Ok(None);
        }
        let names = self
            .read_inodes()
            .names_of(node)
            .ok_or(Errno(libc::ESTALE))?;
        let mut bytes = Vec::new();
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                bytes.push(b'/');
            }
            bytes.extend_from_slice(n.as_bytes());
        }
        RelPath::new(&bytes)
            .map(Some)
            .map_err(|_| Errno(libc::ESTALE))
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> FsResult<RelPath> {
        let p = self.path_of(parent)?;
        RelPath::join(p.as_ref(), name).map_err(|_| Errno(libc::EINVAL))
    }

    /// A directory descriptor for a node, verified to be the node's host inode.
    fn dir_fd(&self, node: u64) -> FsResult<Arc<OwnedFd>> {
        if node == ROOT {
            return Ok(self.root.clone());
        }
        if let Some(fd) = self.lock_dirs().get(node) {
            return Ok(fd);
        }
        let path = self.path_of(node)?.ok_or(Errno(libc::ESTALE))?;
        let fd = sys::open_beneath(
            self.root.as_fd(),
            &path.to_cstring(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| {
            if e.0 == libc::ENOENT {
                Errno(libc::ESTALE)
            } else {
                e
            }
        })?;
        let st = sys::fstat(fd.as_fd())?;
        let expect = self.read_inodes().get(node).map(|n| n.host);
        if expect != Some(HostId::of(&st)) {
            return Err(Errno(libc::ESTALE));
        }
        let fd = Arc::new(fd);
        self.lock_dirs().put(node, fd.clone());
        Ok(fd)
    }

    /// The parent descriptor and name of a non-root node.
    fn locate(&self, node: u64) -> FsResult<(Arc<OwnedFd>, CString, RelPath)> {
        let path = self.path_of(node)?.ok_or(Errno(libc::EINVAL))?;
        let parent_node = self
            .read_inodes()
            .get(node)
            .and_then(|n| n.aliases.first().map(|a| a.0));
        let parent_node = parent_node.ok_or(Errno(libc::ESTALE))?;
        let dir = self.dir_fd(parent_node)?;
        let name = cname(path.file_name())?;
        Ok((dir, name, path))
    }

    /// An `O_PATH` descriptor of a node, verified against its host identity.
    fn node_fd(&self, node: u64) -> FsResult<OwnedFd> {
        if node == ROOT {
            return sys::openat(self.root.as_fd(), c".", libc::O_PATH | libc::O_DIRECTORY, 0);
        }
        let (dir, name, _) = match self.locate(node) {
            Ok(l) => l,
            Err(e) => return self.orphan_fd(node).ok_or(e),
        };
        let fd = sys::openat(dir.as_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            .and_then(|fd| self.verify(node, fd.as_fd()).map(|_| fd));
        match fd {
            // Renamed over while this request was on its way: the file the caller resolved.
            Err(Errno(libc::ESTALE | libc::ENOENT)) => {
                self.ghost_fd(node).ok_or(Errno(libc::ESTALE))
            }
            r => r,
        }
    }

    /// The descriptor to read or change `node`'s attributes through: an open file handle's
    /// when the node has one, else [`Self::node_fd`]. A handle's descriptor is the inode the
    /// node stands for whatever its names are now, which is what `node_fd` verifies by name.
    fn attr_fd(&self, node: u64) -> FsResult<AttrFd> {
        match self.open_file(node) {
            Some(h) => Ok(AttrFd::Open(h)),
            None => self.node_fd(node).map(AttrFd::Path),
        }
    }

    /// One of `node`'s open file handles (with its descriptor), if it has any.
    fn open_file(&self, node: u64) -> Option<Arc<Handle>> {
        self.lock_handles().find_on(node, |h| {
            h.fd.is_some() && matches!(h.kind, HandleKind::File { .. })
        })
    }

    /// For a node that has lost every name (unlinked, or replaced by a rename or a rewind,
    /// while still open): a duplicate of one of its open handles' descriptors, so `fstat`,
    /// `fchmod`, `fchown`, `ftruncate`, `futimens` and xattrs on the open file keep working as
    /// on a local filesystem. `None` while the node still has a name or nothing holds it open.
    fn orphan_fd(&self, node: u64) -> Option<OwnedFd> {
        if node == ROOT || self.read_inodes().is_reachable(node) {
            return None;
        }
        match self.open_file(node) {
            Some(h) => h.fd.as_ref().and_then(|fd| fd.try_clone().ok()),
            None => self.ghost_fd(node),
        }
    }

    fn verify(&self, node: u64, fd: BorrowedFd<'_>) -> FsResult<libc::stat> {
        let st = sys::fstat(fd)?;
        let expect = self.read_inodes().get(node).map(|n| n.host);
        if expect != Some(HostId::of(&st)) {
            return Err(Errno(libc::ESTALE));
        }
        Ok(st)
    }

    fn entry(&self, parent: u64, name: &OsStr, st: &libc::stat) -> Entry {
        let node = self.write_inodes().remember(parent, name, HostId::of(st));
        Entry {
            attr: attr_of(st),
            node,
            ttl: self.config.ttl,
            attr_ttl: self.attr_ttl(node),
        }
    }

    fn is_store_name(parent: u64, name: &OsStr) -> bool {
        parent == ROOT && name.as_bytes() == STORE_DIR.as_bytes()
    }

    fn refuse_store(parent: u64, name: &OsStr) -> FsResult<()> {
        if parent == CTL_DIR || Self::is_store_name(parent, name) {
            // The store is not part of the project: nothing may be created or removed there.
            return Err(Errno(libc::EPERM));
        }
        Ok(())
    }

    fn control_attr(&self, node: u64) -> FileAttr {
        let (kind, perm, size) = match node {
            CTL_DIR => (FileType::Directory, 0o755, 0),
            CTL_GITIGNORE => (FileType::RegularFile, 0o444, 2),
            _ => (FileType::RegularFile, 0o644, 0),
        };
        let t = now_ts();
        FileAttr {
            ino: fuser::INodeNo(node),
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

    fn control_entry(&self, node: u64) -> Entry {
        Entry {
            attr: self.control_attr(node),
            node,
            ttl: Duration::ZERO,
            attr_ttl: Duration::ZERO,
        }
    }

    // ---- lookups and attributes ----

    /// How long the kernel may remember that a name does not exist: as long as one that does.
    pub fn negative_ttl(&self) -> Duration {
        self.config.ttl
    }

    /// `lookup`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Entry> {
        if parent == CTL_DIR {
            return control::lookup(name.as_bytes())
                .map(|n| self.control_entry(n))
                .ok_or(Errno(libc::ENOENT));
        }
        if Self::is_store_name(parent, name) {
            return Ok(self.control_entry(CTL_DIR));
        }
        if control::is_control(parent) {
            return Err(Errno(libc::ENOTDIR));
        }
        let dir = self.dir_fd(parent)?;
        let st = sys::lstatat(dir.as_fd(), &cname(name)?)?;
        Ok(self.entry(parent, name, &st))
    }

    /// `forget`.
    pub fn forget(&self, node: u64, n: u64) {
        if control::is_control(node) {
            return;
        }
        let gone_dir = {
            let mut t = self.write_inodes();
            t.forget(node, n);
            t.get(node).is_none()
        };
        if gone_dir {
            self.lock_dirs().map.remove(&node);
            self.lock_ghosts().remove(node);
        }
    }

    /// `getattr`.
    pub fn getattr(&self, node: u64, fh: Option<u64>) -> FsResult<FileAttr> {
        if control::is_control(node) {
            return Ok(self.control_attr(node));
        }
        if let Some(h) = fh.and_then(|fh| self.lock_handles().get(fh))
            && let Some(fd) = &h.fd
        {
            return Ok(attr_of(&sys::fstat(fd.as_fd())?));
        }
        if node == ROOT {
            return Ok(attr_of(&sys::fstat(self.root.as_fd())?));
        }
        let (dir, name, _) = match self.locate(node) {
            Ok(l) => l,
            // `fstat` of a file unlinked while open comes without a handle: use an open one.
            Err(e) => {
                let fd = self.orphan_fd(node).ok_or(e)?;
                return Ok(attr_of(&sys::fstat(fd.as_fd())?));
            }
        };
        let st = sys::lstatat(dir.as_fd(), &name);
        let expect = self.read_inodes().get(node).map(|n| n.host);
        match st {
            Ok(st) if expect == Some(HostId::of(&st)) => Ok(attr_of(&st)),
            // Renamed over while this request was on its way: the file the caller resolved.
            Ok(_) | Err(Errno(libc::ENOENT)) => match self.ghost_fd(node) {
                Some(fd) => Ok(attr_of(&sys::fstat(fd.as_fd())?)),
                None => Err(Errno(libc::ESTALE)),
            },
            Err(e) => Err(e),
        }
    }

    /// Captures a node before a change of it (no capture for the root itself).
    fn capture_node(&self, node: u64, who: Who) -> FsResult<()> {
        if node == ROOT {
            return Ok(());
        }
        let (dir, name, path) = match self.locate(node) {
            Ok(l) => l,
            // Open but no longer in the tree: a change to it changes no project path.
            Err(_) if self.orphan_fd(node).is_some() => return Ok(()),
            Err(e) => return Err(e),
        };
        self.capture.ensure(dir.as_fd(), &name, &path, who)?;
        self.capture_other_names(node, &path, who)
    }

    /// Every name the kernel knows `node` by, each located from its own parent.
    /// Every name of `node`, with its parent's descriptor. A name whose parent is gone
    /// (`ENOENT`, `ESTALE`: nothing stands at that name any more) is left out; any other
    /// failure to reach a parent is the caller's error, so no name goes uncaptured unseen.
    fn names(&self, node: u64) -> FsResult<Vec<(Arc<OwnedFd>, CString, RelPath)>> {
        let aliases = self
            .read_inodes()
            .get(node)
            .map(|n| n.aliases.clone())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(aliases.len());
        for (parent, name) in &aliases {
            let found = self
                .child_path(*parent, name)
                .and_then(|path| Ok((self.dir_fd(*parent)?, cname(name)?, path)));
            match found {
                Ok(n) => out.push(n),
                Err(Errno(libc::ENOENT | libc::ESTALE)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Captures the names of `node` other than `done`: a change to a hard-linked inode
    /// changes it under each of its names, and the kernel does not say which name a request
    /// came through (names other than the first would otherwise go uncaptured).
    fn capture_other_names(&self, node: u64, done: &RelPath, who: Who) -> FsResult<()> {
        for (dir, name, path) in self.names(node)? {
            if path != *done {
                self.capture.ensure(dir.as_fd(), &name, &path, who)?;
            }
        }
        Ok(())
    }

    /// `setattr`.
    pub fn setattr(
        &self,
        node: u64,
        fh: Option<u64>,
        set: SetAttr,
        caller: Caller,
    ) -> FsResult<FileAttr> {
        if control::is_control(node) {
            // `echo N > .ckpt/turn` truncates first; that is accepted and changes nothing.
            if set.mode.is_none() && set.uid.is_none() && set.gid.is_none() && set.size == Some(0) {
                return Ok(self.control_attr(node));
            }
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        self.capture_node(node, Who { pid: caller.pid })?;
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
            match handle.as_ref().and_then(|h| h.fd.as_ref()) {
                Some(hfd) if h_writable(handle.as_deref()) == Some(true) => {
                    sys::ftruncate(hfd.as_fd(), size)?
                }
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
            match self.parent_and_name(node) {
                // Unlinked while open: set the times through the open file itself.
                Err(_) if self.orphan_fd(node).is_some() => sys::futimens_any(fd.as_fd(), &times)?,
                Err(e) => return Err(e),
                Ok((Some(dir), name)) => sys::utimensat(dir.as_fd(), &name, &times)?,
                Ok((None, _)) => sys::utimensat(self.root.as_fd(), c".", &times)?,
            }
        }
        Ok(attr_of(&sys::fstat(fd.as_fd())?))
    }

    fn parent_and_name(&self, node: u64) -> FsResult<(Option<Arc<OwnedFd>>, CString)> {
        if node == ROOT {
            return Ok((None, CString::from(c".")));
        }
        let (dir, name, _) = self.locate(node)?;
        Ok((Some(dir), name))
    }

    /// `readlink`.
    pub fn readlink(&self, node: u64) -> FsResult<Vec<u8>> {
        let (dir, name, _) = self.locate(node)?;
        sys::readlinkat(dir.as_fd(), &name)
    }

    // ---- namespace changes ----

    fn own_new(&self, dir: BorrowedFd<'_>, name: &CStr, caller: Caller) {
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

    fn prepare_new(
        &self,
        parent: u64,
        name: &OsStr,
        caller: Caller,
    ) -> FsResult<(Arc<OwnedFd>, CString)> {
        Self::refuse_store(parent, name)?;
        if control::is_control(parent) {
            return Err(Errno(libc::EPERM));
        }
        let dir = self.dir_fd(parent)?;
        let c = cname(name)?;
        let path = self.child_path(parent, name)?;
        self.capture
            .ensure(dir.as_fd(), &c, &path, Who { pid: caller.pid })?;
        Ok((dir, c))
    }

    /// `mknod` (regular files, FIFOs, sockets, devices).
    pub fn mknod(
        &self,
        parent: u64,
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
    pub fn mkdir(
        &self,
        parent: u64,
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
    pub fn symlink(
        &self,
        parent: u64,
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
    pub fn link(
        &self,
        node: u64,
        newparent: u64,
        newname: &OsStr,
        caller: Caller,
    ) -> FsResult<Entry> {
        if control::is_control(node) {
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        let (dir, c) = self.prepare_new(newparent, newname, caller)?;
        let (sdir, sname, spath) = self.locate(node)?;
        let sst = sys::lstatat(sdir.as_fd(), &sname)?;
        if self.read_inodes().get(node).map(|n| n.host) != Some(HostId::of(&sst)) {
            return Err(Errno(libc::ESTALE));
        }
        // The source changes too: its link count, and from now on its content can be written
        // through the new name, which a rewind removes. So its pre-image comes first.
        self.capture
            .ensure(sdir.as_fd(), &sname, &spath, Who { pid: caller.pid })?;
        sys::linkat(sdir.as_fd(), &sname, dir.as_fd(), &c)?;
        let st = sys::lstatat(dir.as_fd(), &c)?;
        Ok(self.entry(newparent, newname, &st))
    }

    fn remove(&self, parent: u64, name: &OsStr, flags: i32, caller: Caller) -> FsResult<()> {
        Self::refuse_store(parent, name)?;
        if control::is_control(parent) {
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        let dir = self.dir_fd(parent)?;
        let c = cname(name)?;
        let path = self.child_path(parent, name)?;
        let who = Who { pid: caller.pid };
        // A file's removal may move it into the store (see `Capturer::stage`).
        let file = if flags == 0 {
            sys::lstatat(dir.as_fd(), &c).ok()
        } else {
            None
        };
        if file.is_none() {
            self.capture.ensure(dir.as_fd(), &c, &path, who)?;
        }
        let detached = self.detach_if_last(parent, name, dir.as_fd(), &c, file.as_ref());
        let removed_dir = match detached {
            Some((node, host)) if flags & libc::AT_REMOVEDIR != 0 => {
                self.removed_dir_fd(node, host, dir.as_fd(), &c)
            }
            _ => None,
        };
        let removed = match &file {
            Some(st) => {
                let held_open = self.held_open(parent, name);
                let by = StageBy::Move;
                match self
                    .capture
                    .stage(dir.as_fd(), &c, &path, st, held_open, who, by)
                {
                    Ok(Some(staged)) => {
                        staged.settle(true);
                        Ok(())
                    }
                    Ok(None) => sys::unlinkat(dir.as_fd(), &c, flags),
                    Err(e) => Err(e),
                }
            }
            None => sys::unlinkat(dir.as_fd(), &c, flags),
        };
        if let Err(e) = removed {
            if let Some((node, host)) = detached {
                self.write_inodes().reattach(node, host);
            }
            return Err(e);
        }
        let gone = self.write_inodes().unlink(parent, name);
        if let (Some(node), true) = (gone, flags & libc::AT_REMOVEDIR != 0) {
            self.lock_dirs().map.remove(&node);
        }
        if let Some((node, fd)) = removed_dir {
            self.lock_ghosts().insert(node, fd);
        }
        Ok(())
    }

    /// Before `rmdir` of `name` in `dir`, the node it stands for being `node` (host inode
    /// `host`): a descriptor of the directory to keep as a ghost once it is gone (see
    /// [`Ghosts`]), the directory cache's when it has one.
    fn removed_dir_fd(
        &self,
        node: u64,
        host: HostId,
        dir: BorrowedFd<'_>,
        name: &CStr,
    ) -> Option<(u64, Arc<OwnedFd>)> {
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
    /// [`InodeTable::detach`]). Returns what to put back if the removal fails.
    fn detach_if_last(
        &self,
        parent: u64,
        name: &OsStr,
        dir: BorrowedFd<'_>,
        c: &CStr,
        seen: Option<&libc::stat>,
    ) -> Option<(u64, HostId)> {
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
        t.detach(node).map(|host| (node, host))
    }

    /// Whether any handle is open on the node `name` in `parent` names.
    fn held_open(&self, parent: u64, name: &OsStr) -> bool {
        let Some(node) = self.read_inodes().child(parent, name) else {
            return false;
        };
        self.lock_handles().is_open(node)
    }

    /// `unlink`.
    pub fn unlink(&self, parent: u64, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.remove(parent, name, 0, caller)
    }

    /// `rmdir`.
    pub fn rmdir(&self, parent: u64, name: &OsStr, caller: Caller) -> FsResult<()> {
        self.remove(parent, name, libc::AT_REMOVEDIR, caller)
    }

    /// `rename` / `renameat2` with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`.
    pub fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        caller: Caller,
    ) -> FsResult<()> {
        Self::refuse_store(parent, name)?;
        Self::refuse_store(newparent, newname)?;
        if control::is_control(parent) || control::is_control(newparent) {
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        let sdir = self.dir_fd(parent)?;
        let ddir = self.dir_fd(newparent)?;
        let (sc, dc) = (cname(name)?, cname(newname)?);
        let spath = self.child_path(parent, name)?;
        let dpath = self.child_path(newparent, newname)?;
        let who = Who { pid: caller.pid };
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        // The source does not exist: let the kernel give its exact errno, capture nothing.
        let src = sys::lstatat(sdir.as_fd(), &sc)?;
        let dst = sys::lstatat(ddir.as_fd(), &dc).ok();
        let same_inode = dst.is_some_and(|d| HostId::of(&d) == HostId::of(&src));
        let mut staged = None;
        if spath != dpath {
            let src_is_dir = src.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let mirror = src_is_dir.then_some((ddir.as_fd(), dc.as_c_str(), &dpath));
            self.capture
                .ensure_tree(sdir.as_fd(), &sc, &spath, mirror, who)?;
            let dst_is_dir = dst.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            match dst {
                // A file renamed over (an editor's or `sed -i`'s save): staged by a hard link
                // instead of read and copied (see `Capturer::stage`).
                Some(d)
                    if !exchange
                        && !same_inode
                        && flags & libc::RENAME_NOREPLACE == 0
                        && d.st_mode & libc::S_IFMT == libc::S_IFREG =>
                {
                    let held_open = self.held_open(newparent, newname);
                    let by = StageBy::Link;
                    staged =
                        self.capture
                            .stage(ddir.as_fd(), &dc, &dpath, &d, held_open, who, by)?;
                }
                _ => {
                    let back =
                        (exchange && dst_is_dir).then_some((sdir.as_fd(), sc.as_c_str(), &spath));
                    self.capture
                        .ensure_tree(ddir.as_fd(), &dc, &dpath, back, who)?;
                }
            }
        }
        // A replaced destination loses its last name (unless it is the source itself); its link
        // count is the one seen before any staging link.
        let detached = if exchange || same_inode {
            None
        } else {
            self.detach_if_last(newparent, newname, ddir.as_fd(), &dc, dst.as_ref())
        };
        // The replaced file or directory stays reachable while the kernel holds its node.
        if let Some((node, host)) = detached
            && let Ok(fd) = sys::openat(ddir.as_fd(), &dc, libc::O_PATH | libc::O_NOFOLLOW, 0)
            && sys::fstat(fd.as_fd()).is_ok_and(|st| {
                matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR)
                    && HostId::of(&st) == host
            })
        {
            self.lock_ghosts().insert(node, Arc::new(fd));
        }
        let renamed = sys::renameat2(sdir.as_fd(), &sc, ddir.as_fd(), &dc, flags);
        if let Some(staged) = staged {
            staged.settle(renamed.is_ok());
        }
        if let Err(e) = renamed {
            if let Some((node, host)) = detached {
                self.write_inodes().reattach(node, host);
                self.lock_ghosts().remove(node);
            }
            return Err(e);
        }
        let mut t = self.write_inodes();
        if exchange {
            t.exchange(parent, name, newparent, newname);
        } else {
            if let Some(replaced) = t.child(newparent, newname) {
                self.lock_dirs().map.remove(&replaced);
            }
            t.rename(parent, name, newparent, newname);
        }
        Ok(())
    }

    // ---- files ----

    fn add_handle(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if h.mappable() {
            self.mappable_open.fetch_add(1, Ordering::Relaxed);
        }
        self.lock_handles().insert(fh, h);
        fh
    }

    fn handle(&self, fh: u64) -> FsResult<Arc<Handle>> {
        self.lock_handles().get(fh).ok_or(Errno(libc::EBADF))
    }

    fn handle_fd(&self, fh: u64) -> FsResult<Arc<Handle>> {
        let h = self.handle(fh)?;
        if h.fd.is_none() {
            return Err(Errno(libc::EBADF));
        }
        Ok(h)
    }

    /// `open`.
    pub fn open(&self, node: u64, flags: i32, caller: Caller) -> FsResult<u64> {
        let fh = self.open_handle(node, flags, caller)?;
        if flags & libc::O_ACCMODE == libc::O_RDWR
            && self.passthrough.load(Ordering::Relaxed)
            && !control::is_control(node)
        {
            // Attributes cached before (from the lookup that led here) would outlive a write
            // through a shared mapping of this descriptor (see `attr_ttl`).
            self.attributes_changed(node);
        }
        Ok(fh)
    }

    fn open_handle(&self, node: u64, flags: i32, caller: Caller) -> FsResult<u64> {
        if control::is_control(node) {
            if node == CTL_DIR {
                return Err(Errno(libc::EISDIR));
            }
            let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
            if writing && node == CTL_GITIGNORE {
                return Err(Errno(libc::EACCES));
            }
            return Ok(self.add_handle(Handle {
                node,
                fd: None,
                kind: HandleKind::Control {
                    node,
                    snapshot: Mutex::new(Vec::new()),
                    unwritten: AtomicBool::new(writing),
                },
            }));
        }
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let mappable = flags & libc::O_ACCMODE == libc::O_RDWR;
        let clean = host_open_flags(flags);
        let (dir, name, path) = match self.locate(node) {
            Ok(l) => l,
            Err(e) => {
                // `/proc/PID/fd/N` of a file unlinked while open: reopen that open file.
                let orphan = self.orphan_fd(node).ok_or(e)?;
                let fd = sys::reopen(orphan.as_fd(), clean | libc::O_NOFOLLOW)?;
                return Ok(self.add_handle(Handle {
                    node,
                    fd: Some(fd),
                    kind: HandleKind::File {
                        writable,
                        regular: false,
                        mappable,
                    },
                }));
            }
        };
        if writable && flags & libc::O_TRUNC == 0 {
            match self.open_for_write(node, &dir, &name, &path, clean, caller) {
                Err(Errno(libc::EACCES | libc::EPERM)) => {} // no read access: capture by name
                r => return r,
            }
        }
        let gate = writable.then(|| self.shared_gate());
        let mut setid_drop = 0;
        if writable {
            let st = sys::lstatat(dir.as_fd(), &name)?;
            if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                let who = Who { pid: caller.pid };
                self.capture.ensure(dir.as_fd(), &name, &path, who)?;
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
            Err(Errno(libc::ESTALE)) => (self.reopen_ghost(node, clean)?, false),
            Err(e) => return Err(e),
        };
        Ok(self.add_handle(Handle {
            node,
            fd: Some(fd),
            kind: HandleKind::File {
                writable,
                regular,
                mappable,
            },
        }))
    }

    /// Opens, with `flags`, the file a node renamed over still stands for (`ESTALE` if none).
    fn reopen_ghost(&self, node: u64, flags: i32) -> FsResult<OwnedFd> {
        let ghost = self.ghost_fd(node).ok_or(Errno(libc::ESTALE))?;
        sys::reopen(ghost.as_fd(), flags | libc::O_NOFOLLOW)
    }

    /// `open` for writing without truncation: the file is opened first, read-write, and its
    /// pre-image read through that descriptor (no second lookup and open by name). Opening
    /// changes no byte, so capturing after it is still before the first mutation. The daemon's
    /// descriptor may read although the caller's may not: the kernel checked the caller, never
    /// sends a read for a write-only handle, and passthrough opens its own backing file with
    /// the caller's flags.
    fn open_for_write(
        &self,
        node: u64,
        dir: &OwnedFd,
        name: &CStr,
        path: &RelPath,
        clean: i32,
        caller: Caller,
    ) -> FsResult<u64> {
        let _gate = self.shared_gate();
        let read_write = (clean & !libc::O_ACCMODE) | libc::O_RDWR;
        let fd = sys::openat(dir.as_fd(), name, read_write | libc::O_NOFOLLOW, 0)?;
        let (fd, regular) = match self.verify(node, fd.as_fd()) {
            Ok(st) => {
                let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
                if regular {
                    let who = Who { pid: caller.pid };
                    self.capture.ensure_open_file(fd.as_fd(), &st, path, who)?;
                    self.capture_other_names(node, path, who)?;
                }
                (fd, regular)
            }
            // Renamed over while this request was on its way: the file the caller resolved,
            // which no name reaches any more, so there is nothing to capture.
            Err(Errno(libc::ESTALE)) => (self.reopen_ghost(node, clean)?, false),
            Err(e) => return Err(e),
        };
        Ok(self.add_handle(Handle {
            node,
            fd: Some(fd),
            kind: HandleKind::File {
                writable: true,
                regular,
                mappable: clean & libc::O_ACCMODE == libc::O_RDWR,
            },
        }))
    }

    /// `create`: make and open a new file.
    pub fn create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        caller: Caller,
    ) -> FsResult<(Entry, u64)> {
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
            fd: Some(fd),
            kind: HandleKind::File {
                writable: true,
                regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
                // No attributes of the new file were cached before it could be mapped, and it
                // is empty: it grows by a write or a truncation first, and both refresh them.
                mappable: flags & libc::O_ACCMODE == libc::O_RDWR,
            },
        });
        Ok((entry, fh))
    }

    /// `read`.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let h = self.handle(fh)?;
        if let HandleKind::Control { node, snapshot, .. } = &h.kind {
            let mut snap = snapshot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if offset == 0 || snap.is_empty() {
                *snap = self.control_content(*node);
            }
            let start = (offset as usize).min(snap.len());
            let end = (start + size as usize).min(snap.len());
            return Ok(snap[start..end].to_vec());
        }
        let fd = h.fd.as_ref().ok_or(Errno(libc::EBADF))?;
        let mut buf = vec![0u8; size as usize];
        let n = crate::sys::read_full(fd.as_fd(), &mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// `write`.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> FsResult<u32> {
        let h = self.handle(fh)?;
        if let HandleKind::Control {
            node, unwritten, ..
        } = &h.kind
        {
            unwritten.store(false, Ordering::Relaxed);
            return self.control_write(*node, data).map(|()| data.len() as u32);
        }
        let fd = h.fd.as_ref().ok_or(Errno(libc::EBADF))?;
        let _gate = self.shared_gate();
        let n = sys::pwrite(fd.as_fd(), data, offset)?;
        Ok(n as u32)
    }

    /// Calls `register` with the descriptor of an open handle's regular file, to make it the
    /// kernel's passthrough backing file. The handle's own descriptor serves, whatever its
    /// access mode: the kernel opens a backing file of its own for every open, with that
    /// open's flags, from the registered file's path (one registration serves every open of
    /// the inode).
    pub fn with_backing_fd<R>(
        &self,
        fh: u64,
        register: impl FnOnce(BorrowedFd<'_>) -> R,
    ) -> FsResult<R> {
        let h = self.handle_fd(fh)?;
        let fd = h.fd.as_ref().ok_or(Errno(libc::EBADF))?;
        let regular = match h.kind {
            HandleKind::File { regular: true, .. } => true,
            _ => sys::fstat(fd.as_fd())?.st_mode & libc::S_IFMT == libc::S_IFREG,
        };
        if !regular {
            return Err(Errno(libc::EINVAL));
        }
        Ok(register(fd.as_fd()))
    }

    /// `flush` (each `close`): a control file opened for writing and closed without a byte
    /// written got empty input, which is `EINVAL` like any other bad input.
    pub fn flush(&self, fh: u64) -> FsResult<()> {
        match self.handle(fh)?.kind {
            HandleKind::Control { ref unwritten, .. }
                if unwritten.swap(false, Ordering::Relaxed) =>
            {
                Err(Errno(libc::EINVAL))
            }
            _ => Ok(()),
        }
    }

    /// `release`.
    pub fn release(&self, fh: u64) {
        // Closed after the lock is released: a close can take as long as a flush.
        let handle = self.lock_handles().remove(fh);
        if handle.as_ref().is_some_and(|h| h.mappable()) {
            self.mappable_open.fetch_sub(1, Ordering::Relaxed);
        }
        drop(handle);
    }

    /// `fsync`.
    pub fn fsync(&self, fh: u64, datasync: bool) -> FsResult<()> {
        let h = self.handle(fh)?;
        match &h.fd {
            Some(fd) => sys::fsync(fd.as_fd(), datasync),
            None => Ok(()),
        }
    }

    /// `fallocate` (the handle is writable, so its file was captured at open).
    pub fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> FsResult<()> {
        let h = self.handle_fd(fh)?;
        let _gate = self.shared_gate();
        let fd = h.fd.as_ref().ok_or(Errno(libc::EBADF))?;
        sys::fallocate(fd.as_fd(), mode, offset, length)
    }

    /// `lseek` (`SEEK_DATA` / `SEEK_HOLE`).
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> FsResult<i64> {
        let h = self.handle_fd(fh)?;
        let fd = h.fd.as_ref().ok_or(Errno(libc::EBADF))?;
        sys::lseek(fd.as_fd(), offset, whence)
    }

    /// `copy_file_range` between two handles.
    pub fn copy_file_range(
        &self,
        fh_in: u64,
        off_in: u64,
        fh_out: u64,
        off_out: u64,
        len: u64,
    ) -> FsResult<u32> {
        let hi = self.handle_fd(fh_in)?;
        let ho = self.handle_fd(fh_out)?;
        let _gate = self.shared_gate();
        let (fi, fo) = (
            hi.fd.as_ref().ok_or(Errno(libc::EBADF))?,
            ho.fd.as_ref().ok_or(Errno(libc::EBADF))?,
        );
        let n = sys::copy_file_range(
            fi.as_fd(),
            off_in,
            fo.as_fd(),
            off_out,
            len.min(u64::from(u32::MAX)),
        )?;
        Ok(n as u32)
    }

    // ---- directories ----

    /// The control directory's listing; `offset` cookies 1, 2, … in this order.
    fn control_dir_items(&self) -> Vec<DirItem> {
        let mut v = vec![
            DirItem {
                ino: CTL_DIR,
                offset: 1,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirItem {
                ino: self.root_host.ino,
                offset: 2,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for (i, (n, name)) in control::ENTRIES.iter().enumerate() {
            v.push(DirItem {
                ino: *n,
                offset: i as u64 + 3,
                kind: FileType::RegularFile,
                name: (*name).into(),
            });
        }
        v
    }

    /// Feeds `f` the entries of a directory after the cookie `offset`, with the directory's
    /// descriptor (`None` for the control directory), until it returns true (reply full) or
    /// the listing ends.
    ///
    /// Stateless: the mount answers OPENDIR with ENOSYS, so the kernel keeps no handle here
    /// and caches listings itself (see `FuseAdapter::opendir`). The cookies are the host
    /// filesystem's own `d_off`, so a listing resumed after concurrent changes behaves as
    /// it does on the host: no snapshot to go stale, nothing held between calls.
    fn each_dir_item(
        &self,
        node: u64,
        offset: u64,
        f: &mut dyn FnMut(&DirItem, Option<BorrowedFd<'_>>) -> FsResult<bool>,
    ) -> FsResult<()> {
        if node == CTL_DIR {
            for item in self.control_dir_items() {
                if item.offset > offset && f(&item, None)? {
                    break;
                }
            }
            return Ok(());
        }
        if control::is_control(node) {
            return Err(Errno(libc::ENOTDIR));
        }
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
                if f(&item, Some(dir.as_fd()))? {
                    return Ok(());
                }
            }
        }
    }

    /// `readdir`: entries after the cookie `offset`; `sink` returns true when the reply is
    /// full (that entry was not sent).
    pub fn readdir(
        &self,
        node: u64,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem) -> bool,
    ) -> FsResult<()> {
        self.each_dir_item(node, offset, &mut |item, _| Ok(sink(item)))
    }

    /// `readdirplus`: as `readdir`, with an entry (and a lookup) for each name but `.`/`..`.
    pub fn readdirplus(
        &self,
        node: u64,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        self.each_dir_item(node, offset, &mut |item, dir| {
            let dots = item.name == "." || item.name == "..";
            let entry = if dots {
                None
            } else if node == CTL_DIR {
                control::lookup(item.name.as_bytes()).map(|n| self.control_entry(n))
            } else {
                let d = dir.ok_or(Errno(libc::EBADF))?;
                match sys::lstatat(d, &cname(&item.name)?) {
                    Ok(st) => Some(self.entry(node, &item.name, &st)),
                    Err(Errno(libc::ENOENT)) => return Ok(false), // gone since getdents
                    Err(e) => return Err(e),
                }
            };
            let full = sink(item, entry.as_ref());
            if full {
                // Not sent: the kernel got no reference, so take the lookup back.
                if let Some(e) = entry.filter(|e| !control::is_control(e.node)) {
                    self.forget(e.node, 1);
                }
            }
            Ok(full)
        })
    }

    /// `fsyncdir`: the directory's entries made durable on the host.
    pub fn fsyncdir(&self, node: u64, datasync: bool) -> FsResult<()> {
        if control::is_control(node) {
            return Ok(());
        }
        let dir = self.dir_fd(node)?;
        let rd = sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        sys::fsync(rd.as_fd(), datasync)
    }

    /// `statfs`.
    pub fn statfs(&self) -> FsResult<libc::statvfs> {
        sys::fstatvfs(self.root.as_fd())
    }

    // ---- extended attributes ----

    /// `getxattr`; with `size == 0` the value's length only.
    pub fn getxattr(&self, node: u64, name: &OsStr, size: u32) -> FsResult<XattrReply> {
        if control::is_control(node) {
            return Err(Errno(libc::ENODATA));
        }
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
    pub fn listxattr(&self, node: u64, size: u32) -> FsResult<XattrReply> {
        if control::is_control(node) {
            return Ok(if size == 0 {
                XattrReply::Size(0)
            } else {
                XattrReply::Data(Vec::new())
            });
        }
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
    pub fn setxattr(
        &self,
        node: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        caller: Caller,
    ) -> FsResult<()> {
        if control::is_control(node) {
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        self.capture_node(node, Who { pid: caller.pid })?;
        self.attr_fd(node)?.setxattr(&cname(name)?, value, flags)?;
        self.attributes_changed(node);
        Ok(())
    }

    /// `removexattr`.
    pub fn removexattr(&self, node: u64, name: &OsStr, caller: Caller) -> FsResult<()> {
        if control::is_control(node) {
            return Err(Errno(libc::EPERM));
        }
        let _gate = self.shared_gate();
        self.capture_node(node, Who { pid: caller.pid })?;
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
    fn attributes_changed(&self, node: u64) {
        if let Some(inv) = self.invalidator.get() {
            inv.inval_attr(node);
        }
    }

    // ---- turns and rewinds ----

    fn control_content(&self, node: u64) -> Vec<u8> {
        match node {
            CTL_TURN => format!("{}\n", self.capture.lock().index.current_turn()).into_bytes(),
            CTL_REWIND => self
                .last_report
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
                .into_bytes(),
            CTL_GITIGNORE => b"*\n".to_vec(),
            _ => Vec::new(),
        }
    }

    fn control_write(&self, node: u64, data: &[u8]) -> FsResult<()> {
        match node {
            CTL_TURN => {
                let input = control::parse_turn(data).ok_or(Errno(libc::EINVAL))?;
                self.begin_turn(input.turn, input.label)
                    .map(drop)
                    .map_err(|e| match e {
                        TurnError::NotAfter { .. } => Errno(libc::EINVAL),
                        TurnError::HeldOpen(e) => e,
                        TurnError::Store(s) => Errno(s.errno()),
                    })
            }
            CTL_REWIND => {
                let input = control::parse_rewind(data).ok_or(Errno(libc::EINVAL))?;
                let req = match input {
                    control::RewindInput::To(n) => rewind::Request {
                        to: n,
                        ..Default::default()
                    },
                    control::RewindInput::Undo => rewind::Request {
                        undo: true,
                        ..Default::default()
                    },
                };
                match self.rewind(req, &|_, _| {}) {
                    Ok(r) if r.ok() => Ok(()),
                    // Partly restored: the report (readable from .ckpt/rewind) says what failed.
                    Ok(_) => Err(Errno(libc::EIO)),
                    Err(e) => Err(Errno(e.errno())),
                }
            }
            _ => Err(Errno(libc::EACCES)),
        }
    }

    /// Calls `f` for every name of every file held open for writing; a name that cannot be
    /// reached is passed as its error, so the capture that needs it fails loudly.
    fn each_open_for_write(&self, f: &mut dyn FnMut(crate::capture::HeldName<'_>)) {
        let nodes: Vec<u64> = self
            .lock_handles()
            .values()
            .filter(|h| matches!(h.kind, HandleKind::File { writable: true, .. }))
            .map(|h| h.node)
            .collect();
        for node in nodes {
            match self.names(node) {
                Ok(names) => {
                    for (dir, name, path) in names {
                        f(Ok((dir.as_fd(), &name, &path)));
                    }
                }
                Err(e) => f(Err(e)),
            }
        }
    }

    /// Begins turn `n`; returns whether the turn changed.
    pub fn begin_turn(&self, n: u64, label: Option<String>) -> Result<bool, TurnError> {
        let _gate = self.exclusive_gate();
        self.capture
            .begin_turn(n, label, &|f| self.each_open_for_write(f))
    }

    /// Rewinds the folder while holding back every other mutation, then invalidates the
    /// kernel's caches for everything that changed.
    pub fn rewind(
        &self,
        req: rewind::Request,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        let report = {
            let _gate = self.exclusive_gate();
            let mut store = self.capture.lock();
            let mut report = rewind::rewind(self.root.as_fd(), &mut store, req, progress)?;
            drop(store);
            let mut refreshed = Vec::new();
            if !req.dry_run {
                // Directories the rewind replaced must not be reached through cached
                // descriptors.
                self.lock_dirs().map.clear();
                refreshed = self.refresh_names(&report.changed);
                // Files still open for writing belong to the new current turn from now on; one
                // that cannot be captured is reported (its next writes could not be undone).
                let failed = self
                    .capture
                    .begin_turn_captures(&|f| self.each_open_for_write(f));
                for (path, e) in failed {
                    log::warn!(target: "ckpt::rewind", "{path}: held open for writing, not captured for the current turn: {e}");
                    report.permanent.insert(path.clone());
                    report.failed.push(rewind::Failure {
                        path,
                        reason: format!(
                            "held open for writing, and its state after the rewind could not be captured for the current turn ({e}): later writes through that descriptor cannot be rewound"
                        ),
                    });
                }
                self.lock_dirs().map.clear();
            }
            (report, refreshed)
        };
        let (report, refreshed) = report;
        if !req.dry_run {
            self.invalidate(&refreshed);
        }
        let json = serde_json::to_string(&report).unwrap_or_default() + "\n";
        *self
            .last_report
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = json;
        Ok(report)
    }

    /// Rewinds only some paths (see [`rewind::rewind_paths`]), holding back other mutations.
    pub fn rewind_paths(
        &self,
        to: u64,
        paths: &[RelPath],
        dry_run: bool,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        let report = {
            let _gate = self.exclusive_gate();
            let mut store = self.capture.lock();
            let report = rewind::rewind_paths(
                self.root.as_fd(),
                &mut store,
                to,
                paths,
                dry_run,
                self.capture.max_blob(),
                progress,
            )?;
            drop(store);
            let mut refreshed = Vec::new();
            if !dry_run {
                self.lock_dirs().map.clear();
                refreshed = self.refresh_names(&report.changed);
            }
            (report, refreshed)
        };
        let (report, refreshed) = report;
        if !dry_run {
            self.invalidate(&refreshed);
        }
        Ok(report)
    }

    /// After a rewind changed `changed` on the host: the inode table's names follow (a name
    /// the rewind replaced no longer belongs to the node it had), before anything reads names
    /// again (the held-open captures at the end of a rewind). Returns what the kernel must be
    /// told: each changed name's node (if the kernel knew one) and parent.
    fn refresh_names(&self, changed: &[RelPath]) -> Vec<(Option<u64>, u64, OsString)> {
        let mut out = Vec::with_capacity(changed.len());
        for path in changed {
            let parts: Vec<&[u8]> = path.as_bytes().split(|b| *b == b'/').collect();
            let mut parent = Some(ROOT);
            let t = self.read_inodes();
            for part in &parts[..parts.len() - 1] {
                parent = parent.and_then(|p| t.child(p, OsStr::from_bytes(part)));
            }
            drop(t);
            let Some(parent) = parent else { continue };
            let name = path.file_name();
            let node = self.read_inodes().child(parent, name);
            let now = self
                .dir_fd(parent)
                .ok()
                .and_then(|d| {
                    cname(name)
                        .ok()
                        .and_then(|c| sys::lstatat(d.as_fd(), &c).ok())
                })
                .map(|st| HostId::of(&st));
            self.write_inodes().refresh(parent, name, now);
            out.push((node, parent, name.to_os_string()));
        }
        // Names below what the rewind removed or replaced are gone with it.
        self.write_inodes().prune_unreachable();
        out
    }

    /// Tells the kernel what a rewind changed (after the gate is released: a request blocked
    /// on the gate may hold a directory lock in the kernel that these calls need).
    fn invalidate(&self, changed: &[(Option<u64>, u64, OsString)]) {
        let Some(inv) = self.invalidator.get().cloned() else {
            return;
        };
        // Each parent's inode too: that drops the kernel's cached listing of the directory.
        // The entry invalidation alone marks the directory changed only when the kernel still
        // has a dentry for the name, which a file removed while held open leaves it without.
        let mut parents = std::collections::HashSet::new();
        for (node, parent, name) in changed {
            if let Some(node) = node {
                inv.inval_inode(*node);
            }
            inv.inval_entry(*parent, name);
            parents.insert(*parent);
        }
        for parent in parents {
            inv.inval_inode(parent);
        }
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
fn host_open_flags(flags: i32) -> i32 {
    flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_DIRECT)
}

fn h_writable(h: Option<&Handle>) -> Option<bool> {
    match h?.kind {
        HandleKind::File { writable, .. } => Some(writable),
        _ => None,
    }
}

trait FromVecCompat {
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
