//! How a node reaches its host inode: the one place that turns a node id into a descriptor.
//!
//! [`HostFs::reach`] is the one way in: a node is reached by its first name (through
//! `dir_fd` and the bounded directory cache), or, when it lost its last name while something
//! holds it open, by an open handle's descriptor or a kept `O_PATH` one (`Ghosts`), as
//! [`Reach`] says. `names` lists every name of a hard-linked node; `node_fd` and `attr_fd`
//! give a descriptor of the inode itself.
//! Every descriptor reached by name is verified against the node's host identity (`verify`),
//! else `ESTALE`.

use super::files::Handle;
use super::inode::{HostId, ROOT};
use super::{FsError, FsResult, HostFs, cname, control};
use crate::ids::NodeId;
use crate::relpath::{RelPath, STORE_DIR};
use crate::sys::{self, Errno};
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// How a node reaches its host inode now ([`HostFs::reach`]).
pub(super) enum Reach {
    /// The folder's root, through the descriptor the daemon holds from before the mount.
    Root,
    /// By its first name.
    Named(Located),
    /// By no name: it lost its last one while held open (unlinked, replaced by a rename or a
    /// rewind); a descriptor of the inode itself, from an open handle or a kept [`Ghosts`]
    /// descriptor. A change made through it changes no path of the folder.
    Unnamed(OwnedFd),
}

/// A name of a node: its parent directory's descriptor (verified to be the parent's host
/// inode), the name in it, and the path from the folder's root.
pub(super) struct Located {
    /// The parent directory.
    pub(super) dir: Arc<OwnedFd>,
    /// The name in it.
    pub(super) name: CString,
    /// The path.
    pub(super) path: RelPath,
}

/// What a node's attributes and xattrs are read and changed through.
pub(super) enum AttrFd {
    /// One of the node's open handles: its descriptor is the node's inode itself, so it needs
    /// no lookup by name, no verification and no close, and xattr calls need no `/proc` path.
    /// (`chmod`, `chown`, xattr changes and writes' `security.capability` checks mostly come
    /// for files the caller holds open: `sed -i`'s temporary file, an untarred file.)
    Open(Arc<Handle>),
    /// A verified `O_PATH` descriptor ([`HostFs::node_fd`]).
    Path(OwnedFd),
}

impl AttrFd {
    pub(super) fn fd(&self) -> FsResult<BorrowedFd<'_>> {
        match self {
            AttrFd::Path(fd) => Ok(fd.as_fd()),
            AttrFd::Open(h) => Ok(h.fd.as_fd()),
        }
    }

    pub(super) fn getxattr(&self, name: &CStr, buf: &mut [u8]) -> FsResult<usize> {
        match self {
            AttrFd::Path(fd) => Ok(sys::getxattr(fd.as_fd(), name, buf)?),
            AttrFd::Open(_) => Ok(sys::fgetxattr(self.fd()?, name, buf)?),
        }
    }

    pub(super) fn listxattr(&self, buf: &mut [u8]) -> FsResult<usize> {
        match self {
            AttrFd::Path(fd) => Ok(sys::listxattr(fd.as_fd(), buf)?),
            AttrFd::Open(_) => Ok(sys::flistxattr(self.fd()?, buf)?),
        }
    }

    pub(super) fn setxattr(&self, name: &CStr, value: &[u8], flags: i32) -> FsResult<()> {
        match self {
            AttrFd::Path(fd) => Ok(sys::setxattr(fd.as_fd(), name, value, flags)?),
            AttrFd::Open(_) => Ok(sys::fsetxattr(self.fd()?, name, value, flags)?),
        }
    }

    pub(super) fn removexattr(&self, name: &CStr) -> FsResult<()> {
        match self {
            AttrFd::Path(fd) => Ok(sys::removexattr(fd.as_fd(), name)?),
            AttrFd::Open(_) => Ok(sys::fremovexattr(self.fd()?, name)?),
        }
    }
}

pub(super) struct DirCache {
    pub(super) map: HashMap<NodeId, (Arc<OwnedFd>, u64)>,
    pub(super) tick: u64,
    pub(super) cap: usize,
}

impl DirCache {
    pub(super) fn get(&mut self, node: NodeId) -> Option<Arc<OwnedFd>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&node).map(|(fd, t)| {
            *t = tick;
            fd.clone()
        })
    }

    pub(super) fn put(&mut self, node: NodeId, fd: Arc<OwnedFd>) {
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
pub(super) const GHOSTS: usize = 256;

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
pub(super) struct Ghosts {
    pub(super) map: HashMap<NodeId, Arc<OwnedFd>>,
    pub(super) order: std::collections::VecDeque<NodeId>,
}

impl Ghosts {
    pub(super) fn insert(&mut self, node: NodeId, fd: Arc<OwnedFd>) {
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

    pub(super) fn remove(&mut self, node: NodeId) {
        if self.map.remove(&node).is_some() {
            self.order.retain(|n| *n != node);
        }
    }
}

impl HostFs {
    /// The replaced file a node still stands for, if one is kept (see [`Ghosts`]).
    pub(super) fn ghost_fd(&self, node: NodeId) -> Option<OwnedFd> {
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

    /// The relative path of a node (`None` for the root).
    pub(super) fn path_of(&self, node: NodeId) -> FsResult<Option<RelPath>> {
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
        Ok(RelPath::new(&bytes)
            .map(Some)
            .map_err(|_| Errno(libc::ESTALE))?)
    }

    /// The path a log line names for `node`, or for `name` in the directory `node`: relative to
    /// the folder (`.` for its root), `.ckpt/…` for the control files, in double quotes and
    /// escaped as every path a person reads is ([`crate::quote::quote_path`]), never a node id (which means nothing to
    /// the person reading the log). A node the table no longer names (its last name removed, or
    /// forgotten by the kernel) is said to be one.
    pub(super) fn log_path(&self, node: NodeId, name: Option<&OsStr>) -> String {
        let mut raw: Vec<u8> = if control::is_control(node) {
            let ctl = control::ENTRIES.iter().find(|(n, _)| *n == node);
            ctl.map_or(STORE_DIR.to_string(), |(_, n)| format!("{STORE_DIR}/{n}"))
                .into_bytes()
        } else {
            match self.path_of(node) {
                Ok(p) => p.map(|p| p.as_bytes().to_vec()).unwrap_or_default(),
                Err(_) => {
                    return match name {
                        Some(n) => format!(
                            "{} in a directory no longer named",
                            crate::quote::quote_path(n.as_bytes())
                        ),
                        None => "a file no longer named".to_string(),
                    };
                }
            }
        };
        if let Some(n) = name {
            if !raw.is_empty() {
                raw.push(b'/');
            }
            raw.extend_from_slice(n.as_bytes());
        }
        if raw.is_empty() {
            raw.push(b'.');
        }
        crate::quote::quote_log_path(&raw)
    }

    pub(super) fn child_path(&self, parent: NodeId, name: &OsStr) -> FsResult<RelPath> {
        let p = self.path_of(parent)?;
        Ok(RelPath::join(p.as_ref(), name).map_err(|_| Errno(libc::EINVAL))?)
    }

    /// A directory descriptor for a node, verified to be the node's host inode.
    pub(super) fn dir_fd(&self, node: NodeId) -> FsResult<Arc<OwnedFd>> {
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
            return Err(Errno(libc::ESTALE).into());
        }
        let fd = Arc::new(fd);
        self.lock_dirs().put(node, fd.clone());
        Ok(fd)
    }

    /// How `node` reaches its host inode now: the one way in for every operation that needs
    /// it by name ([`Reach`]). A node with no name left is [`Reach::Unnamed`] when something
    /// still holds it open (else the error of reaching it by name, `ESTALE`).
    pub(super) fn reach(&self, node: NodeId) -> FsResult<Reach> {
        if node == ROOT {
            return Ok(Reach::Root);
        }
        match self.locate(node) {
            Ok(l) => Ok(Reach::Named(l)),
            // `/proc/PID/fd/N`, `fstat`, `fchmod` of a file unlinked while open.
            Err(e) => self.orphan_fd(node).map(Reach::Unnamed).ok_or(e),
        }
    }

    /// The first name of a node that must have one: `EINVAL` for the root (no parent holds
    /// it), `ESTALE` for a node no name reaches any more.
    pub(super) fn located(&self, node: NodeId) -> FsResult<Located> {
        match self.reach(node)? {
            Reach::Named(l) => Ok(l),
            Reach::Root => Err(Errno(libc::EINVAL).into()),
            Reach::Unnamed(_) => Err(Errno(libc::ESTALE).into()),
        }
    }

    /// The parent descriptor and name of a non-root node, by its first name.
    fn locate(&self, node: NodeId) -> FsResult<Located> {
        let path = self.path_of(node)?.ok_or(Errno(libc::EINVAL))?;
        let parent_node = self
            .read_inodes()
            .get(node)
            .and_then(|n| n.aliases.first().map(|a| a.0));
        let parent_node = parent_node.ok_or(Errno(libc::ESTALE))?;
        let dir = self.dir_fd(parent_node)?;
        let name = cname(path.file_name())?;
        Ok(Located { dir, name, path })
    }

    /// An `O_PATH` descriptor of a node, verified against its host identity.
    pub(super) fn node_fd(&self, node: NodeId) -> FsResult<OwnedFd> {
        let l = match self.reach(node)? {
            Reach::Root => {
                return Ok(sys::openat(
                    self.root.as_fd(),
                    c".",
                    libc::O_PATH | libc::O_DIRECTORY,
                    0,
                )?);
            }
            Reach::Unnamed(fd) => return Ok(fd),
            Reach::Named(l) => l,
        };
        let fd = sys::openat(l.dir.as_fd(), &l.name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            .map_err(FsError::from)
            .and_then(|fd| self.verify(node, fd.as_fd()).map(|_| fd));
        match fd {
            // Renamed over while this request was on its way: the file the caller resolved.
            Err(e) if e.is(libc::ESTALE) || e.is(libc::ENOENT) => {
                Ok(self.ghost_fd(node).ok_or(Errno(libc::ESTALE))?)
            }
            r => r,
        }
    }

    /// The descriptor to read or change `node`'s attributes through: an open file handle's
    /// when the node has one, else [`Self::node_fd`]. A handle's descriptor is the inode the
    /// node stands for whatever its names are now, which is what `node_fd` verifies by name.
    pub(super) fn attr_fd(&self, node: NodeId) -> FsResult<AttrFd> {
        match self.open_file(node) {
            Some(h) => Ok(AttrFd::Open(h)),
            None => self.node_fd(node).map(AttrFd::Path),
        }
    }

    /// One of `node`'s open file handles, if it has any.
    pub(super) fn open_file(&self, node: NodeId) -> Option<Arc<Handle>> {
        self.lock_handles().find_on(node, |_| true)
    }

    /// For a node that has lost every name (unlinked, or replaced by a rename or a rewind,
    /// while still open): a duplicate of one of its open handles' descriptors, so `fstat`,
    /// `fchmod`, `fchown`, `ftruncate`, `futimens` and xattrs on the open file keep working as
    /// on a local filesystem. `None` while the node still has a name or nothing holds it open.
    fn orphan_fd(&self, node: NodeId) -> Option<OwnedFd> {
        if node == ROOT || self.read_inodes().is_reachable(node) {
            return None;
        }
        match self.open_file(node) {
            Some(h) => h.fd.try_clone().ok(),
            None => self.ghost_fd(node),
        }
    }

    pub(super) fn verify(&self, node: NodeId, fd: BorrowedFd<'_>) -> FsResult<libc::stat> {
        let st = sys::fstat(fd)?;
        let expect = self.read_inodes().get(node).map(|n| n.host);
        if expect != Some(HostId::of(&st)) {
            return Err(Errno(libc::ESTALE).into());
        }
        Ok(st)
    }

    /// Every name of `node`, with its parent's descriptor. A name whose parent is gone
    /// (`ENOENT`, `ESTALE`: nothing stands at that name any more) is left out; any other
    /// failure to reach a parent is the caller's error, so no name goes uncaptured unseen.
    pub(super) fn names(&self, node: NodeId) -> FsResult<Vec<Located>> {
        let aliases = self
            .read_inodes()
            .get(node)
            .map(|n| n.aliases.clone())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(aliases.len());
        for (parent, name) in &aliases {
            let found = self.child_path(*parent, name).and_then(|path| {
                Ok(Located {
                    dir: self.dir_fd(*parent)?,
                    name: cname(name)?,
                    path,
                })
            });
            match found {
                Ok(n) => out.push(n),
                Err(e) if e.is(libc::ENOENT) || e.is(libc::ESTALE) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Opens, with `flags`, the file a node renamed over still stands for (`ESTALE` if none).
    pub(super) fn reopen_ghost(&self, node: NodeId, flags: i32) -> FsResult<OwnedFd> {
        let ghost = self.ghost_fd(node).ok_or(Errno(libc::ESTALE))?;
        Ok(sys::reopen(ghost.as_fd(), flags | libc::O_NOFOLLOW)?)
    }
}
