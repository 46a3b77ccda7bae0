//! `.ckpt/turns/`: the folder at the start of every turn `log` lists, as read-only trees
//! (`.ckpt/turns/3/`, `.ckpt/turns/3#5/`), in the shape of ZFS's `.zfs/snapshot/`.
//!
//! This side only translates: what stood at a path and what a directory held is decided by
//! `crate::past_tree` over the moment's `crate::store::past::Past`, which is kept here per
//! moment and caught up with the journal before each answer (only the lines written since).
//!
//! Node ids are the view's own, from [`PAST_BASE`] up (above every host and fallback id), so
//! the router tells the sides apart by the number. A file or symlink is one node per inode
//! number within a moment: at the moment every inode the view shows was alive at once (what a
//! name holds now and nothing recorded since was there then; what was recorded was there
//! then), so the number names one file, and the names of a hard-link group share their node
//! as they share their inode. A directory is one node per path.
//!
//! Every change is refused with `EROFS`. A read of a file the folder still holds as it was is
//! checked after it reads: a record of the path written meanwhile (the live file changed while
//! it was read) sends the read to that record instead, so what a read returns is always the
//! moment's bytes. The check looks at the tree only when the journal changed since the handle
//! was last checked ([`JournalChanges`]): a read with nothing recorded since needs no lock.

use super::attrs::ts;
use super::{DirItem, Entry, FsResult, HostFs, XattrReply};
use crate::ids::{Epoch, Fh, NodeId, Seq};
use crate::past_tree::{Tree, Was};
use crate::relpath::RelPath;
use crate::store::JournalChanges;
use crate::store::journal::PreImage;
use crate::store::past::Past;
use crate::sync::Mutex;
use crate::sys::{self, Errno};
use fuser::{FileAttr, FileType};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The first node id of the view: `.ckpt/turns` itself.
pub(super) const PAST_BASE: u64 = 3 << 62;
/// `.ckpt/turns`.
pub(super) const PAST_TURNS: NodeId = NodeId::new(PAST_BASE);
/// The name of `.ckpt/turns` in `.ckpt/`.
pub(super) const TURNS_NAME: &str = "turns";

/// Whether `node` is one of the view's.
pub(super) fn is_past(node: NodeId) -> bool {
    node.get() >= PAST_BASE
}

/// Whether a handle is one of the view's (numbered from [`PAST_BASE`] up, above the control
/// side's).
pub(super) fn is_past_fh(fh: Fh) -> bool {
    fh.get() >= PAST_BASE
}

/// How long the kernel may keep a name or attributes of a moment's tree: what stood at a
/// moment never changes.
const TTL: Duration = Duration::from_secs(60);

/// How many moments' pasts are kept in memory at once.
const MAX_PASTS: usize = 8;

/// One moment's tree: where it began in the journal, in the journal's numbering then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct View {
    epoch: Epoch,
    began: Seq,
    /// When the turn began (the times recorded entries show).
    time: u64,
}

/// What a node is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A directory (or anything without an inode number) of a moment, by path (`None`: the
    /// moment's root).
    Path(View, Option<RelPath>),
    /// A file or symlink of a moment, by its inode number then.
    Ino(View, u64),
}

struct Node {
    key: Key,
    /// The path it was last found at (for an inode, one of its names).
    path: Option<RelPath>,
    lookups: u64,
}

#[derive(Default)]
struct Nodes {
    by_id: HashMap<NodeId, Node>,
    by_key: HashMap<Key, NodeId>,
    next: u64,
}

/// An open file of a moment.
enum Source {
    /// Bytes read whole from the store (a packed or compressed blob).
    Bytes(Arc<Vec<u8>>),
    /// A descriptor to read at any offset (an uncompressed blob).
    Fd(OwnedFd),
    /// The folder's file, still as it was: checked after each read.
    Folder {
        fd: OwnedFd,
        view: View,
        path: RelPath,
        /// The journal's count of changes when the tree last said the path was the folder's.
        checked: u64,
    },
}

/// One name of a listing, before the kernel is given its entry.
struct Listed {
    name: OsString,
    /// `None` for `.` and `..`.
    key: Option<Key>,
    path: Option<RelPath>,
    attr: FileAttr,
}

/// The `.ckpt/turns/` side.
pub(super) struct PastFs {
    /// The last directory listed, kept for the rest of its pieces.
    last_listing: Mutex<Option<(NodeId, Arc<Vec<Listed>>)>>,
    nodes: Mutex<Nodes>,
    pasts: Mutex<HashMap<View, Arc<Mutex<Past>>>>,
    handles: Mutex<HashMap<Fh, Arc<Mutex<Source>>>>,
    next_fh: AtomicU64,
    /// The store's count of journal changes (the same store all along: a prune rewrites its
    /// journal, not the store).
    changes: Arc<JournalChanges>,
    uid: u32,
    gid: u32,
}

impl PastFs {
    pub(super) fn new(root: &libc::stat, changes: Arc<JournalChanges>) -> Self {
        Self {
            last_listing: Mutex::leaf(None),
            nodes: Mutex::leaf(Nodes {
                next: PAST_BASE + 1,
                ..Nodes::default()
            }),
            pasts: Mutex::leaf(HashMap::new()),
            handles: Mutex::leaf(HashMap::new()),
            next_fh: AtomicU64::new(PAST_BASE),
            changes,
            uid: root.st_uid,
            gid: root.st_gid,
        }
    }

    /// The moments, named as `log` names them, with their views.
    fn moments(&self, host: &HostFs) -> Vec<(String, View)> {
        let store = host.capture.lock();
        let index = store.index();
        index
            .moments_began()
            .into_iter()
            .map(|(c, began)| {
                let view = View {
                    epoch: store.epoch(),
                    began,
                    time: c.time,
                };
                (c.moment.to_string(), view)
            })
            .collect()
    }

    /// Runs `f` on the tree of `view`, its past caught up with the journal.
    fn with_tree<R>(
        &self,
        host: &HostFs,
        view: View,
        f: impl FnOnce(&Tree<'_>) -> FsResult<R>,
    ) -> FsResult<R> {
        self.with_tree_counted(host, view, f).map(|(r, _)| r)
    }

    /// [`Self::with_tree`], with the journal's count of changes the tree reflects (read under
    /// the same hold of the store lock, so it counts no record the tree does not show).
    fn with_tree_counted<R>(
        &self,
        host: &HostFs,
        view: View,
        f: impl FnOnce(&Tree<'_>) -> FsResult<R>,
    ) -> FsResult<(R, u64)> {
        let store = host.capture.lock();
        let count = store.changes().count();
        if store.epoch() != view.epoch {
            // The journal was rewritten (a prune): the view's nodes name nothing now.
            return Err(Errno(libc::ESTALE).into());
        }
        let past = {
            let mut pasts = self.pasts.lock();
            pasts.retain(|v, _| v.epoch == view.epoch);
            if pasts.len() >= MAX_PASTS && !pasts.contains_key(&view) {
                // Each holds what was recorded since its turn began: a handful is kept, the
                // others are read again from the journal when next used.
                pasts.clear();
            }
            Arc::clone(
                pasts
                    .entry(view)
                    .or_insert_with(|| Arc::new(Mutex::leaf(Past::new(view.began)))),
            )
        };
        let mut past = past.lock();
        store.catch_up(&mut past).map_err(|e| {
            log::warn!(target: "ckpt::past", "reading the journal for .ckpt/turns: {e}");
            Errno(libc::EIO)
        })?;
        let tree = Tree {
            past: &past,
            index: store.index(),
            root: host.root.as_fd(),
        };
        Ok((f(&tree)?, count))
    }

    /// What stood at `rel` in `view`, and the count of the journal's changes it reflects.
    fn entry_counted(&self, host: &HostFs, view: View, rel: &RelPath) -> FsResult<(Was, u64)> {
        self.with_tree_counted(host, view, |t| {
            Ok(t.entry(rel)?.ok_or(Errno(libc::ENOENT))?)
        })
    }

    fn node(&self, node: NodeId) -> FsResult<(Key, Option<RelPath>)> {
        let nodes = self.nodes.lock();
        let n = nodes.by_id.get(&node).ok_or(Errno(libc::ESTALE))?;
        Ok((n.key.clone(), n.path.clone()))
    }

    /// The node for `key` found at `path`, with one more lookup.
    fn intern(&self, key: Key, path: Option<RelPath>) -> NodeId {
        let mut nodes = self.nodes.lock();
        if let Some(id) = nodes.by_key.get(&key).copied() {
            if let Some(n) = nodes.by_id.get_mut(&id) {
                n.lookups += 1;
                n.path = path;
            }
            return id;
        }
        let id = NodeId::new(nodes.next);
        nodes.next += 1;
        nodes.by_key.insert(key.clone(), id);
        nodes.by_id.insert(
            id,
            Node {
                key,
                path,
                lookups: 1,
            },
        );
        id
    }

    /// `forget`.
    pub(super) fn forget(&self, node: NodeId, n: u64) {
        let mut nodes = self.nodes.lock();
        let gone = match nodes.by_id.get_mut(&node) {
            Some(x) => {
                x.lookups = x.lookups.saturating_sub(n);
                x.lookups == 0
            }
            None => false,
        };
        if gone && let Some(x) = nodes.by_id.remove(&node) {
            nodes.by_key.remove(&x.key);
        }
    }

    /// The entry `.ckpt/turns` has in `.ckpt/`: the name always holds the same node, so the
    /// kernel keeps it (a path walked into a tree costs no lookup of it each time); its
    /// attributes (the time now, for a listing that grows) are not kept.
    pub(super) fn turns_entry(&self) -> Entry {
        Entry {
            attr: self.turns_attr(),
            node: PAST_TURNS,
            ttl: TTL,
            attr_ttl: Duration::ZERO,
        }
    }

    fn turns_attr(&self) -> FileAttr {
        let t = super::attrs::now_ts();
        FileAttr {
            ino: fuser::INodeNo(PAST_TURNS.get()),
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: FileType::Directory,
            perm: 0o555,
            nlink: 1,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// `lookup`.
    pub(super) fn lookup(&self, host: &HostFs, parent: NodeId, name: &OsStr) -> FsResult<Entry> {
        if parent == PAST_TURNS {
            let view = self
                .moments(host)
                .into_iter()
                .find(|(n, _)| n.as_bytes() == name.as_encoded_bytes())
                .map(|(_, v)| v)
                .ok_or(Errno(libc::ENOENT))?;
            let attr = attr_of(&root_was(host.root.as_fd())?, view);
            return Ok(self.entry(Key::Path(view, None), None, attr));
        }
        let (key, path) = self.node(parent)?;
        let Key::Path(view, _) = key else {
            return Err(Errno(libc::ENOTDIR).into());
        };
        let rel = RelPath::join(path.as_ref(), name).map_err(|_| Errno(libc::ENOENT))?;
        let was = self.with_tree(host, view, |t| {
            Ok(t.entry(&rel)?.ok_or(Errno(libc::ENOENT))?)
        })?;
        let attr = attr_of(&was, view);
        Ok(self.entry(key_of(&was, view, &rel), Some(rel), attr))
    }

    fn entry(&self, key: Key, path: Option<RelPath>, mut attr: FileAttr) -> Entry {
        let node = self.intern(key, path);
        attr.ino = fuser::INodeNo(node.get());
        Entry {
            attr,
            node,
            ttl: TTL,
            attr_ttl: TTL,
        }
    }

    /// How long the kernel may keep `node`'s attributes.
    pub(super) fn attr_ttl(node: NodeId) -> Duration {
        if node == PAST_TURNS {
            Duration::ZERO
        } else {
            TTL
        }
    }

    /// What `node` is now, as its moment had it.
    fn was(&self, host: &HostFs, node: NodeId) -> FsResult<(View, Option<RelPath>, Was)> {
        self.was_counted(host, node)
            .map(|(view, path, was, _)| (view, path, was))
    }

    /// [`Self::was`], with the journal's count of changes it reflects (the moment's root,
    /// which needs no past, counts 0: it is never opened).
    fn was_counted(
        &self,
        host: &HostFs,
        node: NodeId,
    ) -> FsResult<(View, Option<RelPath>, Was, u64)> {
        let (key, path) = self.node(node)?;
        let view = match key {
            Key::Path(v, _) | Key::Ino(v, _) => v,
        };
        let (was, count) = match &path {
            // The moment's root is the folder's: its past is not needed.
            None => (root_was(host.root.as_fd())?, 0),
            Some(rel) => self.entry_counted(host, view, rel)?,
        };
        Ok((view, path, was, count))
    }

    /// `getattr`.
    pub(super) fn getattr(&self, host: &HostFs, node: NodeId) -> FsResult<FileAttr> {
        if node == PAST_TURNS {
            return Ok(self.turns_attr());
        }
        let (view, _, was) = self.was(host, node)?;
        let mut attr = attr_of(&was, view);
        attr.ino = fuser::INodeNo(node.get());
        Ok(attr)
    }

    /// `readdir` and `readdirplus`: the entries after cookie `offset`. A listing is computed
    /// once per directory and reused for the rest of it (the kernel asks in pieces).
    pub(super) fn readdir(
        &self,
        host: &HostFs,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        let items = {
            let last = self.last_listing.lock();
            match &*last {
                Some((n, items)) if *n == node && offset > 0 => Some(Arc::clone(items)),
                _ => None,
            }
        };
        let items = match items {
            Some(items) => items,
            None => {
                let items = Arc::new(self.listing(host, node)?);
                *self.last_listing.lock() = Some((node, Arc::clone(&items)));
                items
            }
        };
        for (i, item) in items.iter().enumerate().skip(offset as usize) {
            let entry = item
                .key
                .clone()
                .map(|key| self.entry(key, item.path.clone(), item.attr));
            let dir_item = DirItem {
                ino: entry.as_ref().map_or(node.get(), |e| e.node.get()),
                offset: i as u64 + 1,
                kind: item.attr.kind,
                name: item.name.clone(),
            };
            if sink(&dir_item, entry.as_ref()) {
                // Not sent: the lookup it counted is given back.
                if let Some(e) = entry {
                    self.forget(e.node, 1);
                }
                break;
            }
        }
        Ok(())
    }

    /// A directory's entries, `.` and `..` first.
    fn listing(&self, host: &HostFs, node: NodeId) -> FsResult<Vec<Listed>> {
        let dots = |name: &str| Listed {
            name: name.into(),
            key: None,
            path: None,
            attr: self.turns_attr(),
        };
        let mut out = vec![dots("."), dots("..")];
        if node == PAST_TURNS {
            // Each moment's root is the folder's root: no moment's past is needed to list them.
            let root = root_was(host.root.as_fd())?;
            for (name, view) in self.moments(host) {
                let attr = attr_of(&root, view);
                out.push(Listed {
                    name: name.into(),
                    key: Some(Key::Path(view, None)),
                    path: None,
                    attr,
                });
            }
            return Ok(out);
        }
        let (key, path) = self.node(node)?;
        let Key::Path(view, _) = key else {
            return Err(Errno(libc::ENOTDIR).into());
        };
        let children = self.with_tree(host, view, |t| Ok(t.children(path.as_ref())?))?;
        for (name, was) in children {
            let Ok(rel) = RelPath::join(path.as_ref(), &name) else {
                continue;
            };
            out.push(Listed {
                name,
                key: Some(key_of(&was, view, &rel)),
                attr: attr_of(&was, view),
                path: Some(rel),
            });
        }
        Ok(out)
    }

    /// `readlink`.
    pub(super) fn readlink(&self, host: &HostFs, node: NodeId) -> FsResult<Vec<u8>> {
        match self.was(host, node)? {
            (_, _, Was::Recorded(PreImage::Symlink { target, .. })) => Ok(target.0),
            (_, Some(rel), Was::Folder(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                let fd = sys::open_beneath(
                    host.root.as_fd(),
                    &rel.to_cstring(),
                    libc::O_PATH | libc::O_NOFOLLOW,
                    0,
                )?;
                Ok(sys::readlinkat(fd.as_fd(), c"")?)
            }
            _ => Err(Errno(libc::EINVAL).into()),
        }
    }

    /// `open`: reading only.
    pub(super) fn open(&self, host: &HostFs, node: NodeId, flags: i32) -> FsResult<Fh> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(Errno(libc::EROFS).into());
        }
        if node == PAST_TURNS {
            return Err(Errno(libc::EISDIR).into());
        }
        // The count is the tree's when it found the path: a change recorded between that and
        // the open below (the path swapped for another file) makes the first read check.
        let (view, path, was, checked) = self.was_counted(host, node)?;
        let source = match (was, path) {
            (Was::Recorded(pre), _) => self.stored(host, &pre)?,
            (Was::Folder(st), Some(rel)) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {
                let fd = sys::open_beneath(
                    host.root.as_fd(),
                    &rel.to_cstring(),
                    libc::O_RDONLY | libc::O_NOFOLLOW,
                    0,
                )?;
                Source::Folder {
                    fd,
                    view,
                    path: rel,
                    checked,
                }
            }
            (Was::Folder(_), _) => return Err(Errno(libc::EISDIR).into()),
        };
        let fh = Fh::new(self.next_fh.fetch_add(1, Ordering::Relaxed));
        self.handles
            .lock()
            .insert(fh, Arc::new(Mutex::leaf(source)));
        Ok(fh)
    }

    /// The bytes a recorded file had, from the store.
    fn stored(&self, host: &HostFs, pre: &PreImage) -> FsResult<Source> {
        let PreImage::File { blob, .. } = pre else {
            // Skipped, staged, or not a regular file: nothing to read.
            return Err(match pre {
                PreImage::Dir { .. } => Errno(libc::EISDIR),
                _ => Errno(libc::EIO),
            }
            .into());
        };
        let blobs = Arc::clone(host.capture.lock().blobs());
        if let Some(fd) = blobs.open_plain(blob) {
            return Ok(Source::Fd(fd));
        }
        let mut bytes = Vec::new();
        blobs.read_blob(blob, &mut |chunk| {
            bytes.extend_from_slice(chunk);
            Ok(())
        })?;
        Ok(Source::Bytes(Arc::new(bytes)))
    }

    /// `read`.
    pub(super) fn read(&self, host: &HostFs, fh: Fh, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let handle = self
            .handles
            .lock()
            .get(&fh)
            .cloned()
            .ok_or(Errno(libc::EBADF))?;
        // The handle's lock (a leaf) is not held while the store's (ranked) is taken below.
        let (data, folder) = {
            let source = handle.lock();
            let data = read_at(&source, offset, size)?;
            let folder = match &*source {
                Source::Folder { checked, .. } if self.nothing_recorded_since(*checked) => None,
                Source::Folder { view, path, .. } => Some((*view, path.clone())),
                _ => None,
            };
            (data, folder)
        };
        let Some((view, path)) = folder else {
            return Ok(data);
        };
        // Checked after the read: a record of the path written meanwhile means the live file
        // changed; the moment's bytes are that record's.
        match self.with_tree_counted(host, view, |t| Ok(t.entry(&path)?))? {
            (Some(Was::Folder(_)), count) => {
                if let Source::Folder { checked, .. } = &mut *handle.lock() {
                    // A read racing this one may have checked a later count: keep the later.
                    *checked = count.max(*checked);
                }
                Ok(data)
            }
            (Some(Was::Recorded(pre)), _) => {
                let stored = self.stored(host, &pre)?;
                let data = read_at(&stored, offset, size)?;
                *handle.lock() = stored;
                Ok(data)
            }
            (None, _) => Err(Errno(libc::EIO).into()),
        }
    }

    /// Whether nothing was recorded since the journal counted `checked` changes (when the tree
    /// last found the path unrecorded), asked right after a read of the folder's file: then
    /// the bytes read are the moment's and the tree need not be asked again.
    ///
    /// Exact, by order. The folder's file changes only after a record of it (or of another
    /// name of its inode) is in the journal: a capture, or the save of a rewind, is appended
    /// before the change it guards. The store counts the append after writing the record and
    /// before returning to the code that then changes the file (`Store::write_batch`), so the
    /// count moves before any byte changes; counting after the change (say, when the lock is
    /// let go) would let a read see new bytes with the old count. Here the fence keeps the
    /// count from being loaded before the read's bytes were: a read that saw a changed byte
    /// loads a count past `checked` and asks the tree, under the store lock, which shows the
    /// record. A read that loads `checked` saw only bytes the path had before any record
    /// since the check, which found it unrecorded: the moment's.
    fn nothing_recorded_since(&self, checked: u64) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.changes.count() == checked
    }

    /// `release`.
    pub(super) fn release(&self, fh: Fh) {
        self.handles.lock().remove(&fh);
    }

    /// `getxattr`.
    pub(super) fn getxattr(
        &self,
        host: &HostFs,
        node: NodeId,
        name: &OsStr,
        size: u32,
    ) -> FsResult<XattrReply> {
        let list = self.xattrs(host, node)?;
        let value = list
            .iter()
            .find(|x| x.name == name.as_encoded_bytes())
            .map(|x| x.value.clone())
            .ok_or(Errno(libc::ENODATA))?;
        reply(value, size)
    }

    /// `listxattr`.
    pub(super) fn listxattr(&self, host: &HostFs, node: NodeId, size: u32) -> FsResult<XattrReply> {
        let mut names = Vec::new();
        for x in self.xattrs(host, node)? {
            names.extend_from_slice(&x.name);
            names.push(0);
        }
        reply(names, size)
    }

    fn xattrs(&self, host: &HostFs, node: NodeId) -> FsResult<Vec<crate::xattrs::Xattr>> {
        if node == PAST_TURNS {
            return Ok(Vec::new());
        }
        match self.was(host, node)? {
            (_, _, Was::Recorded(pre)) => Ok(match pre {
                PreImage::File { xattrs, .. } | PreImage::Dir { xattrs, .. } => {
                    xattrs.unwrap_or_default()
                }
                _ => Vec::new(),
            }),
            // A symlink's attributes would be read through it: none shown.
            (_, _, Was::Folder(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Ok(Vec::new()),
            (_, path, Was::Folder(_)) => {
                let fd = match &path {
                    Some(rel) => sys::open_beneath(
                        host.root.as_fd(),
                        &rel.to_cstring(),
                        libc::O_PATH | libc::O_NOFOLLOW,
                        0,
                    )?,
                    None => sys::reopen(host.root.as_fd(), libc::O_PATH)?,
                };
                Ok(
                    crate::xattrs::read_all(crate::xattrs::Via::Path(fd.as_fd()))
                        .unwrap_or_default(),
                )
            }
        }
    }
}

fn reply(bytes: Vec<u8>, size: u32) -> FsResult<XattrReply> {
    if size == 0 {
        return Ok(XattrReply::Size(bytes.len() as u32));
    }
    if bytes.len() > size as usize {
        return Err(Errno(libc::ERANGE).into());
    }
    Ok(XattrReply::Data(bytes))
}

fn read_at(source: &Source, offset: u64, size: u32) -> FsResult<Vec<u8>> {
    match source {
        Source::Bytes(b) => {
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
            let end = start.saturating_add(size as usize).min(b.len());
            Ok(b[start..end].to_vec())
        }
        Source::Fd(fd) | Source::Folder { fd, .. } => {
            let mut buf = vec![0u8; size as usize];
            let n = sys::read_full(fd.as_fd(), &mut buf, offset)?;
            buf.truncate(n);
            Ok(buf)
        }
    }
}

/// The moment's root: the folder's root as it was (its mode, if a change of it was recorded,
/// is not kept apart from the folder's: the root is never captured).
fn root_was(root: std::os::fd::BorrowedFd<'_>) -> FsResult<Was> {
    Ok(Was::Folder(sys::fstat(root)?))
}

/// The node key of what stood at `rel`.
fn key_of(was: &Was, view: View, rel: &RelPath) -> Key {
    let ino = match was {
        Was::Recorded(PreImage::File { ino, .. } | PreImage::Staged { ino, .. }) => Some(*ino),
        Was::Recorded(PreImage::Symlink { ino, .. }) => *ino,
        Was::Recorded(_) => None,
        Was::Folder(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => Some(st.st_ino),
        Was::Folder(_) => None,
    };
    match ino {
        Some(ino) => Key::Ino(view, ino),
        None => Key::Path(view, Some(rel.clone())),
    }
}

/// The attributes of what stood somewhere: the folder's `lstat`, or what the pre-image
/// recorded (its times: the turn's start). Directories show one link: the count of the
/// moment's subdirectories is not kept, and 1 tells tree walkers not to count on it.
fn attr_of(was: &Was, view: View) -> FileAttr {
    let mut attr = match was {
        Was::Folder(st) => super::attr_of(st),
        Was::Recorded(pre) => recorded_attr(pre, view),
    };
    if attr.kind == FileType::Directory {
        attr.nlink = 1;
    }
    attr
}

fn recorded_attr(pre: &PreImage, view: View) -> FileAttr {
    let t = ts(crate::units::unix_seconds(view.time), 0);
    let (kind, perm, size, uid, gid, nlink) = match pre {
        PreImage::File {
            size,
            mode,
            uid,
            gid,
            nlink,
            ..
        }
        | PreImage::Staged {
            size,
            mode,
            uid,
            gid,
            nlink,
            ..
        } => (FileType::RegularFile, *mode, *size, *uid, *gid, *nlink),
        PreImage::Dir { mode, uid, gid, .. } => (FileType::Directory, *mode, 0, *uid, *gid, 1),
        PreImage::Symlink {
            target,
            uid,
            gid,
            nlink,
            ..
        } => (
            FileType::Symlink,
            0o777,
            target.0.len() as u64,
            *uid,
            *gid,
            nlink.unwrap_or(1),
        ),
        PreImage::Fifo { mode, uid, gid, .. } => (FileType::NamedPipe, *mode, 0, *uid, *gid, 1),
        PreImage::Skipped { size, .. } => (FileType::RegularFile, 0, *size, 0, 0, 1),
        PreImage::Absent => (FileType::RegularFile, 0, 0, 0, 0, 1),
    };
    FileAttr {
        ino: fuser::INodeNo(0),
        size,
        blocks: size.div_ceil(512),
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind,
        perm: (perm & 0o7777) as u16,
        nlink: u32::try_from(nlink).unwrap_or(u32::MAX),
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}
