//! The passthrough core: every FUSE operation as a plain method over the host folder, with
//! capture before each mutation. It never sees fuser's `Request` or `Reply*` types, so tests
//! drive it on a temp dir without a kernel (tests/core_model.rs).
//!
//! Where things live. The folder's side is `CkptFs` itself (one `impl CkptFs` block per file
//! below); the `.ckpt/` side is its own type, `ctlfs::ControlFs`, with its own nodes and
//! handles, reached only through the router:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the `CkptFs` state, its locks and their order, capture of a node |
//! | `vfs.rs` | the router: each operation to the host side or to `ControlFs`, by node id or handle number |
//! | `error.rs` | `FsError`: the errno for the kernel, what failed inside for the log |
//! | `resolve.rs` | `Reach`, the one way a node reaches its host inode: by name, or unnamed while held open |
//! | `attrs.rs` | `stat` as the kernel sees it, getattr/setattr/readlink, xattrs, attribute TTLs |
//! | `files.rs` | host handles, open/create (capture through the handle), read, write, release |
//! | `namespace.rs` | mknod, mkdir, symlink, link, unlink, rmdir, rename; the `Detached` guard |
//! | `dirs.rs` | readdir(plus) resumed at the host's cookie, fsyncdir, statfs |
//! | `creds.rs` | caller groups and `CAP_FSETID`, set-id bits to drop, the caller's umask |
//! | `control.rs`, `ctlfs.rs` | the virtual `.ckpt/` nodes: ids and parsing; `ControlFs`, which serves them |
//! | `turns.rs`, `ops.rs` | turn switches, rewinds, undo, redo, relabel: gate, held-open captures, cache invalidation; what the control files ask (`TurnControl`) |
//! | `inode.rs`, `handles.rs` | the node table (node id ↔ host identity, names) and handle table |
//! | `fuse.rs` | the fuser adapter: converts each request, calls the core, replies |
//! | `fuse/backing.rs` | passthrough's backing ids, one per node while an open holds it |
//!
//! Every mutating operation reads the same way: take `gate` shared, capture what it will
//! change (`capture_node` / `Capturer::ensure`), reach the inode (`CkptFs::reach`), make
//! the host call through descriptors, then update the tables.
//!
//! Descriptors: the folder root is held from before the mount (so no path ever leads back into
//! the mount); directories are reached by `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from
//! the root and kept in a bounded cache; files are opened per handle; files replaced by a
//! rename are kept reachable while the kernel holds them (`Ghosts`, bounded). The daemon's
//! descriptor count is bounded by those plus the open handles, never by the size of the tree.
//!
//! Lock order (written once, in `crate::sync`, and checked in test builds): `gate` →
//! `inodes` → `dirs` → `handles` → `ghosts` → the store (inside `Capturer`). No lock but `gate`
//! and the store is held across host I/O. Mutations take `gate` shared; a turn switch or a
//! rewind takes it exclusively, so they see no mutation half done. The lock helpers below are
//! the only way to take these locks.

mod attrs;
pub mod control;
mod creds;
mod ctlfs;
mod dirs;
mod error;
mod files;
pub mod fuse;
mod handles;
pub mod inode;
mod namespace;
mod ops;
mod pastfs;
mod resolve;
mod turns;
mod vfs;

pub use attrs::{SetAttr, SetTime, XattrReply, attr_of};
pub use error::{FsError, FsResult};
pub use turns::Rewound;

use crate::capture::{Capturer, Who};
use crate::ids::NodeId;
use crate::relpath::RelPath;
use crate::sync::{Mutex, MutexGuard, Rank, ReadGuard, RwLock, WriteGuard};
use crate::sys;
use ctlfs::ControlFs;
use files::Handle;
use fuser::{FileAttr, FileType};
use handles::HandleTable;
use inode::{HostId, InodeTable};
use resolve::{DirCache, Ghosts, Located, Reach};
use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use turns::Turns;

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
    /// Attributes. Inside the core `attr.ino` carries the host inode number; the adapter
    /// replaces it with [`Self::node`] before replying, because fuser sends one number as both
    /// the node id and `st_ino` (so `stat` through the mount shows the node id).
    pub attr: FileAttr,
    /// The node id the kernel will use.
    pub node: NodeId,
    /// How long the kernel may cache the name.
    pub ttl: Duration,
    /// How long the kernel may cache the attributes ([`CkptFs::attr_ttl`]).
    pub attr_ttl: Duration,
}

/// How the kernel is to serve an open file: decided here, translated by the adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedAs {
    /// A control file: direct I/O, so every read and write reaches the daemon and a read is
    /// never stale; never passed through.
    Direct,
    /// A file of the folder: the kernel may pass reads, writes and mmap through to the host
    /// file (capture happens at open and at turn boundaries, never per write), and sends no
    /// FLUSH on close (nothing here needs one: no writeback cache, locks are the kernel's).
    Host,
    /// A file of a moment (`.ckpt/turns/`): read by the daemon, its pages kept (what stood at a
    /// moment never changes), never passed through (a read of the folder's file is checked
    /// after it reads), and no FLUSH sent on close (nothing is written there: one round trip
    /// less per file read).
    Past,
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
    fn inval_entry(&self, parent: NodeId, name: &OsStr);
    /// Drop cached attributes and pages of `node`.
    fn inval_inode(&self, node: NodeId);
    /// Drop only the cached attributes (and ACLs) of `node`, keeping its pages.
    fn inval_attr(&self, node: NodeId);
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

/// The core filesystem: the router (`vfs.rs`) over the folder's side ([`HostFs`]) and the
/// `.ckpt/` side (`ControlFs`), and the turns (`Turns`), which change the folder as a whole.
/// Its public methods are the operations the adapter, the daemon and the tests call.
pub struct CkptFs {
    host: HostFs,
    control: ControlFs,
    past: pastfs::PastFs,
    turns: Turns,
}

/// The folder's side of the mount: every operation on the folder's files, passed through to
/// the host with capture before each mutation.
pub struct HostFs {
    root: Arc<OwnedFd>,
    inodes: RwLock<InodeTable>,
    dirs: Mutex<DirCache>,
    handles: Mutex<HandleTable<Handle>>,
    ghosts: Mutex<Ghosts>,
    next_fh: AtomicU64,
    gate: RwLock<()>,
    capture: Capturer,
    config: FsConfig,
    invalidator: OnceLock<Arc<dyn Invalidator>>,
    /// The kernel passes file I/O through to the host (set by the adapter at init).
    passthrough: AtomicBool,
    /// Open handles that are [`Handle::mappable`].
    mappable_open: AtomicUsize,
    /// The current turn, as a handle opened now records it ([`Handle::opener`]): changed only
    /// with `gate` held exclusively (a turn switch, a rewind, an undo or redo), so a request
    /// holding it shared reads the turn it runs in without the store's lock.
    turn_now: AtomicU64,
    /// The current step within [`Self::turn_now`] (0: none), changed with it.
    step_now: AtomicU32,
}

fn cname(name: &OsStr) -> FsResult<CString> {
    Ok(sys::cstr(name)?)
}

impl CkptFs {
    /// A core over the folder behind `root` (an `O_PATH` directory descriptor) and its store.
    pub fn new(root: OwnedFd, capture: Capturer, config: FsConfig) -> FsResult<Self> {
        let st = sys::fstat(root.as_fd())?;
        let changes = Arc::clone(capture.lock().changes());
        Ok(Self {
            host: HostFs::new(root, &st, capture, config),
            control: ControlFs::new(&st),
            past: pastfs::PastFs::new(&st, changes),
            turns: Turns::new(),
        })
    }

    /// Connects the kernel-cache invalidator (after the session exists).
    pub fn set_invalidator(&self, inv: Arc<dyn Invalidator>) {
        let _ = self.host.invalidator.set(inv);
    }

    /// Tells the core that the kernel passes file reads, writes and mmap through to the host.
    pub fn set_passthrough(&self, on: bool) {
        self.host.passthrough.store(on, Ordering::Relaxed);
    }

    /// Whether the kernel passes file I/O through to the host (decided at FUSE init).
    pub fn passthrough(&self) -> bool {
        self.host.passthrough()
    }

    /// The capture engine (for the control socket).
    pub fn capturer(&self) -> &Capturer {
        &self.host.capture
    }

    /// The folder root descriptor.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.host.root.as_fd()
    }

    /// Number of nodes the kernel holds (status).
    pub fn node_count(&self) -> usize {
        self.host.read_inodes().len()
    }

    /// How long the kernel may remember that a name does not exist: as long as one that does.
    pub fn negative_ttl(&self) -> Duration {
        self.host.config.ttl
    }

    /// The path a log line names for `node`, or for `name` in the directory `node` (see
    /// `HostFs::log_path`).
    pub fn log_path(&self, node: NodeId, name: Option<&OsStr>) -> String {
        self.host.log_path(node, name)
    }
}

impl HostFs {
    fn new(root: OwnedFd, st: &libc::stat, capture: Capturer, config: FsConfig) -> Self {
        let root_host = HostId::of(st);
        Self {
            root: Arc::new(root),
            inodes: RwLock::ranked(Rank::Inodes, InodeTable::new(root_host)),
            dirs: Mutex::ranked(
                Rank::Dirs,
                DirCache {
                    map: HashMap::new(),
                    tick: 0,
                    cap: config.dir_cache.max(2),
                },
            ),
            handles: Mutex::ranked(Rank::Handles, HandleTable::new()),
            ghosts: Mutex::ranked(Rank::Ghosts, Ghosts::default()),
            next_fh: AtomicU64::new(1),
            gate: RwLock::ranked(Rank::Gate, ()),
            capture,
            config,
            invalidator: OnceLock::new(),
            passthrough: AtomicBool::new(false),
            mappable_open: AtomicUsize::new(0),
            turn_now: AtomicU64::new(0),
            step_now: AtomicU32::new(0),
        }
        .with_turn_now()
    }

    /// Reads the current turn from the store into [`Self::turn_now`] (with `gate` held
    /// exclusively, or before the mount serves anything).
    fn with_turn_now(self) -> Self {
        self.refresh_turn_now();
        self
    }

    /// See [`Self::with_turn_now`].
    fn refresh_turn_now(&self) {
        let turn = self.capture.current_turn();
        self.turn_now.store(turn.get(), Ordering::Relaxed);
        self.step_now.store(turn.step(), Ordering::Relaxed);
    }

    /// The current turn, for a request that holds `gate` shared (so the turn and step it
    /// reads are the ones one switch stored together).
    fn turn_now(&self) -> crate::ids::Turn {
        crate::ids::Turn::with_step(
            self.turn_now.load(Ordering::Relaxed),
            self.step_now.load(Ordering::Relaxed),
        )
    }

    /// Whether the kernel passes file I/O through to the host (decided at FUSE init).
    fn passthrough(&self) -> bool {
        self.passthrough.load(Ordering::Relaxed)
    }

    fn read_inodes(&self) -> ReadGuard<'_, InodeTable> {
        self.inodes.read()
    }

    fn write_inodes(&self) -> WriteGuard<'_, InodeTable> {
        self.inodes.write()
    }

    fn shared_gate(&self) -> ReadGuard<'_, ()> {
        self.gate.read()
    }

    fn exclusive_gate(&self) -> WriteGuard<'_, ()> {
        self.gate.write()
    }

    fn lock_handles(&self) -> MutexGuard<'_, HandleTable<Handle>> {
        self.handles.lock()
    }

    fn lock_ghosts(&self) -> MutexGuard<'_, Ghosts> {
        self.ghosts.lock()
    }

    fn lock_dirs(&self) -> MutexGuard<'_, DirCache> {
        self.dirs.lock()
    }

    fn entry(&self, parent: NodeId, name: &OsStr, st: &libc::stat) -> Entry {
        let node = self.write_inodes().remember(parent, name, HostId::of(st));
        Entry {
            attr: attr_of(st),
            node,
            ttl: self.config.ttl,
            attr_ttl: self.host_attr_ttl(node),
        }
    }

    /// `lookup` in a directory of the folder.
    pub(super) fn host_lookup(&self, parent: NodeId, name: &OsStr) -> FsResult<Entry> {
        let dir = self.dir_fd(parent)?;
        let st = sys::lstatat(dir.as_fd(), &cname(name)?)?;
        Ok(self.entry(parent, name, &st))
    }

    /// `forget` of a node of the folder.
    pub(super) fn host_forget(&self, node: NodeId, n: u64) {
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

    /// Captures a node before a change of it (no capture for the root itself).
    fn capture_node(&self, node: NodeId, who: Who) -> FsResult<()> {
        let Located { dir, name, path } = match self.reach(node)? {
            Reach::Named(l) => l,
            // The root is never captured itself; a node open but no longer in the tree is
            // changed at no path of the folder.
            Reach::Root | Reach::Unnamed(_) => return Ok(()),
        };
        self.capture
            .ensure(dir.as_fd(), &name, &path, who)
            .map_err(|e| FsError::capturing(&path, e))?;
        self.capture_other_names(node, &path, who)
    }

    /// Captures the names of `node` other than `done`: a change to a hard-linked inode
    /// changes it under each of its names, and the kernel does not say which name a request
    /// came through (names other than the first would otherwise go uncaptured).
    fn capture_other_names(&self, node: NodeId, done: &RelPath, who: Who) -> FsResult<()> {
        for Located { dir, name, path } in self.names(node)? {
            if path != *done {
                self.capture
                    .ensure(dir.as_fd(), &name, &path, who)
                    .map_err(|e| FsError::capturing(&path, e))?;
            }
        }
        Ok(())
    }
}
