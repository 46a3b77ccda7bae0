//! The inode table: FUSE node ids <-> host inodes, with the names the kernel knows them by.
//!
//! Rules:
//! 1. Identity is the host `(dev, ino)`, so one host file is one FUSE node (hard links share).
//! 2. Every reply that hands the kernel an entry adds one lookup; `forget` subtracts, and the
//!    node is dropped at zero. The root (node 1) is pinned.
//! 3. A node holds no descriptor: it is reached through its parent's name, so the daemon's
//!    descriptor count does not grow with the tree (the process may hold only 20,000).
//! 4. Names are kept per node (`aliases`) and indexed by parent, then name, updated by every
//!    rename, unlink and rmdir the daemon performs.
//! 5. Memory grows with the nodes the kernel holds (a `find` over 80,000 files holds them
//!    all): a name is stored once, shared by its node's aliases and the index; a node's first
//!    alias is inline; a lookup by name allocates nothing.

use crate::ids::NodeId;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One name in a directory, shared by the node's aliases and the table's index.
pub type Name = Arc<OsStr>;

/// The names a node is known by: nearly always one (hard links and a rename's overlap add
/// more), held inline.
pub type Aliases = smallvec::SmallVec<[(NodeId, Name); 1]>;

/// The root node id.
pub const ROOT: NodeId = NodeId::new(1);
/// Host inode numbers below this are never used as node ids (the virtual control files live
/// there).
pub const FIRST_DYNAMIC: u64 = 16;
/// Node ids for host inodes whose own number cannot serve (another device, or taken).
const FALLBACK_BASE: u64 = 1 << 62;

/// Below this many entries of room, a map of the table is not shrunk (see
/// [`InodeTable::shrink_if_sparse`]).
const SPARSE_FLOOR: usize = 4096;

/// A host inode's identity, as far as the kernel's view of a node goes: device, number and
/// file type. The host recycles inode numbers, and a number that comes back as another type
/// (a file removed, a directory made where it stood, as a rewind does) is another inode to
/// the kernel: one node for both, and the kernel's cached inode of the first type would meet
/// attributes of the second, which it refuses with `EIO` for good. A number that comes back
/// with the same type may stay on its node: the kernel asks for everything again after the
/// invalidation every such change sends, and the capture's own "same file" is decided by
/// [`crate::identity::FileId`], never by this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostId {
    /// Device.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// File type (`st_mode & S_IFMT`).
    pub kind: u32,
}

impl HostId {
    /// From a stat result.
    pub fn of(st: &libc::stat) -> Self {
        Self {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: st.st_mode & libc::S_IFMT,
        }
    }
}

/// One node.
#[derive(Debug)]
pub struct Node {
    /// The host inode.
    pub host: HostId,
    /// Kernel lookups not yet forgotten.
    pub nlookup: u64,
    /// `(parent node, name)` pairs this node is known by.
    pub aliases: Aliases,
    /// The file whose bytes the kernel may hold in this node's page cache, as
    /// [`crate::identity::FileId::fingerprint`] gives it: recorded at each open the daemon
    /// serves reads for, cleared when a rewind changes the file behind the kernel's back; 0
    /// for none. Atomic, so that an open needs only the table's read lock.
    pages_of: AtomicU64,
}

/// The table.
#[derive(Debug)]
pub struct InodeTable {
    nodes: HashMap<NodeId, Node>,
    by_host: HashMap<HostId, NodeId>,
    /// Directory node -> name -> node.
    by_name: HashMap<NodeId, HashMap<Name, NodeId>>,
    root_dev: u64,
    /// The last fallback node id handed out (from [`FALLBACK_BASE`] up).
    next: u64,
}

impl InodeTable {
    /// A table holding only the root.
    pub fn new(root: HostId) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                host: root,
                nlookup: 1,
                aliases: Aliases::new(),
                pages_of: AtomicU64::new(0),
            },
        );
        let mut by_host = HashMap::new();
        by_host.insert(root, ROOT);
        Self {
            nodes,
            by_host,
            by_name: HashMap::new(),
            root_dev: root.dev,
            next: FALLBACK_BASE,
        }
    }

    /// A node by id.
    pub fn get(&self, ino: NodeId) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    /// Number of nodes (for status and memory tests).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether only the root is left.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// The child known as `name` in `parent`, if the kernel has looked it up.
    pub fn child(&self, parent: NodeId, name: &OsStr) -> Option<NodeId> {
        self.by_name.get(&parent)?.get(name).copied()
    }

    /// Files `name` in `parent` as naming `ino`; returns the node it named before, if another.
    fn index_name(&mut self, parent: NodeId, name: &Name, ino: NodeId) -> Option<NodeId> {
        self.by_name
            .entry(parent)
            .or_default()
            .insert(name.clone(), ino)
            .filter(|old| *old != ino)
    }

    /// `name` in `parent` as the table holds it (shared with its index and aliases) and the
    /// node it names, or a new copy when the table has no such name: one allocation per name,
    /// however many places hold it.
    fn held_name(&self, parent: NodeId, name: &OsStr) -> (Name, Option<NodeId>) {
        match self
            .by_name
            .get(&parent)
            .and_then(|m| m.get_key_value(name))
        {
            Some((held, ino)) => (held.clone(), Some(*ino)),
            None => (Arc::from(name), None),
        }
    }

    /// Takes `name` in `parent` out of the index; returns the node it named.
    fn unindex_name(&mut self, parent: NodeId, name: &OsStr) -> Option<NodeId> {
        let names = self.by_name.get_mut(&parent)?;
        let ino = names.remove(name)?;
        if names.is_empty() {
            // A directory emptied (an `rm -rf`) gives its map back.
            self.by_name.remove(&parent);
        }
        Some(ino)
    }

    /// The names from the root down to `ino` (empty for the root), or `None` when the node has
    /// lost every name (deleted, or replaced by a rewind).
    pub fn names_of(&self, ino: NodeId) -> Option<Vec<Name>> {
        let mut out = Vec::new();
        let mut cur = ino;
        let mut hops = 0;
        while cur != ROOT {
            let node = self.nodes.get(&cur)?;
            let (parent, name) = node.aliases.first()?;
            out.push(name.clone());
            cur = *parent;
            hops += 1;
            if hops > 4096 {
                return None; // a cycle would be a bug; never loop forever on a FUSE thread
            }
        }
        out.reverse();
        Some(out)
    }

    /// Whether `ino` still has a path from the root: [`Self::names_of`] without building it
    /// (asked on every lookup, so it allocates nothing).
    pub fn is_reachable(&self, ino: NodeId) -> bool {
        let mut cur = ino;
        for _ in 0..=4096 {
            if cur == ROOT {
                return true;
            }
            match self.nodes.get(&cur).and_then(|n| n.aliases.first()) {
                Some((parent, _)) => cur = *parent,
                None => return false,
            }
        }
        false // a cycle would be a bug; never loop forever on a FUSE thread
    }

    /// Records that the kernel got an entry for `name` in `parent` referring to `host`.
    pub fn remember(&mut self, parent: NodeId, name: &OsStr, host: HostId) -> NodeId {
        let ino = match self.by_host.get(&host) {
            Some(&ino) => ino,
            None => self.add_node(host),
        };
        let (name, named) = self.held_name(parent, name);
        // A name looked up again (the common case) is indexed already.
        if named != Some(ino)
            && let Some(old) = self.index_name(parent, &name, ino)
        {
            self.drop_alias(old, parent, &name);
        }
        // `names_of` follows the first alias. When that one hangs below a directory that lost
        // its names (removed behind the kernel's back by a rewind, and its host inode number
        // reused since by a path restored elsewhere), the name just verified takes its place.
        let stale_first = self
            .nodes
            .get(&ino)
            .and_then(|n| n.aliases.first())
            .is_some_and(|(p, _)| !self.is_reachable(*p));
        if let Some(node) = self.nodes.get_mut(&ino) {
            if stale_first {
                node.aliases
                    .retain(|(p, n)| !(*p == parent && **n == *name));
                node.aliases.insert(0, (parent, name));
            } else if !node.aliases.iter().any(|(p, n)| *p == parent && *n == name) {
                node.aliases.push((parent, name));
            }
            if ino != ROOT {
                node.nlookup += 1;
            }
        }
        ino
    }

    /// A node for `host`, which has none yet: the host inode number itself, so `st_ino` and
    /// `d_ino` agree with the host; a fallback id when it cannot be used.
    fn add_node(&mut self, host: HostId) -> NodeId {
        let own =
            host.dev == self.root_dev && host.ino >= FIRST_DYNAMIC && host.ino < FALLBACK_BASE;
        let ino = if own && !self.nodes.contains_key(&NodeId::new(host.ino)) {
            NodeId::new(host.ino)
        } else {
            self.next += 1;
            NodeId::new(self.next)
        };
        self.nodes.insert(
            ino,
            Node {
                host,
                nlookup: 0,
                aliases: Aliases::new(),
                pages_of: AtomicU64::new(0),
            },
        );
        self.by_host.insert(host, ino);
        ino
    }

    fn drop_alias(&mut self, ino: NodeId, parent: NodeId, name: &OsStr) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.aliases
                .retain(|(p, n)| !(*p == parent && **n == *name));
        }
    }

    /// The name `name` in `parent` is gone (unlink, rmdir, or replaced).
    pub fn unlink(&mut self, parent: NodeId, name: &OsStr) -> Option<NodeId> {
        let ino = self.unindex_name(parent, name)?;
        self.drop_alias(ino, parent, name);
        Some(ino)
    }

    /// A rename the daemon performed: the node at the old name now has the new one.
    pub fn rename(&mut self, parent: NodeId, name: &OsStr, newparent: NodeId, newname: &OsStr) {
        self.unlink(newparent, newname);
        if let Some(ino) = self.unlink(parent, name) {
            self.give_first_name(ino, newparent, newname);
        }
    }

    /// `RENAME_EXCHANGE`: the two names swap nodes.
    pub fn exchange(&mut self, parent: NodeId, name: &OsStr, newparent: NodeId, newname: &OsStr) {
        let a = self.unlink(parent, name);
        let b = self.unlink(newparent, newname);
        for (ino, p, n) in [(a, newparent, newname), (b, parent, name)] {
            if let Some(ino) = ino {
                self.give_first_name(ino, p, n);
            }
        }
    }

    /// `ino` is now known first as `name` in `parent` (a free name: the caller unlinked it).
    fn give_first_name(&mut self, ino: NodeId, parent: NodeId, name: &OsStr) {
        let name: Name = Arc::from(name);
        self.index_name(parent, &name, ino);
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.aliases.insert(0, (parent, name));
        }
    }

    /// Stops mapping the host inode of `ino` to it, just before the daemon removes that inode's
    /// last name: the host may give its number to a new file at once, and the new file must get
    /// a node of its own, never one the kernel may still hold for the old inode (a reused node
    /// id makes the kernel splice the new directory onto the dead one's dentry: `ESTALE`).
    /// Returns the host id, for [`Self::reattach`] if the removal fails.
    pub fn detach(&mut self, ino: NodeId) -> Option<HostId> {
        let host = self.nodes.get(&ino).filter(|_| ino != ROOT)?.host;
        if self.by_host.get(&host) != Some(&ino) {
            return None;
        }
        self.by_host.remove(&host);
        Some(host)
    }

    /// Undoes [`Self::detach`] after a removal that failed, unless another node took the host
    /// inode meanwhile.
    pub fn reattach(&mut self, ino: NodeId, host: HostId) {
        if self.nodes.contains_key(&ino) && !self.by_host.contains_key(&host) {
            self.by_host.insert(host, ino);
        }
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub fn forget(&mut self, ino: NodeId, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.nlookup = node.nlookup.saturating_sub(n);
        if node.nlookup > 0 {
            return;
        }
        if let Some(node) = self.nodes.remove(&ino) {
            for (p, name) in &node.aliases {
                if self.child(*p, name) == Some(ino) {
                    self.unindex_name(*p, name);
                }
            }
            if self.by_host.get(&node.host) == Some(&ino) {
                self.by_host.remove(&node.host);
            }
            self.shrink_if_sparse();
        }
    }

    /// Gives memory back once most nodes are forgotten: a map keeps the room of its largest
    /// size, and after an `rm -rf` of a tree the kernel held whole (80,000 nodes), that room
    /// was 12 MB the daemon held for nothing. A map shrinks to twice what it holds when it has
    /// room for four times as much, so the rehashing stays proportional to the removals.
    fn shrink_if_sparse(&mut self) {
        fn shrink<K: Eq + std::hash::Hash, V>(m: &mut HashMap<K, V>) {
            if m.capacity() > SPARSE_FLOOR && m.capacity() / 4 > m.len() {
                m.shrink_to(m.len() * 2);
            }
        }
        shrink(&mut self.nodes);
        shrink(&mut self.by_host);
        shrink(&mut self.by_name);
    }

    /// Drops every name whose parent has no path from the root any more: the names below a
    /// directory that a rewind removed or replaced behind the kernel's back. They name nothing
    /// now, and left in place they would lead a node whose host inode number is reused to a
    /// wrong path.
    pub fn prune_unreachable(&mut self) {
        let dead: Vec<NodeId> = self
            .by_name
            .keys()
            .filter(|p| !self.is_reachable(**p))
            .copied()
            .collect();
        for p in dead {
            for (name, ino) in self.by_name.remove(&p).unwrap_or_default() {
                self.drop_alias(ino, p, &name);
            }
        }
    }

    /// The node the kernel knows for `host`, if any.
    pub fn node_of(&self, host: HostId) -> Option<NodeId> {
        self.by_host.get(&host).copied()
    }

    /// Gives `ino` the name `name` in `parent` that it has on the host although the kernel has
    /// not looked it up (a rewind relinked it; the caller proved the identity). Adds no lookup:
    /// the kernel holds no entry for the name.
    pub fn attach(&mut self, parent: NodeId, name: &OsStr, ino: NodeId) {
        if !self.nodes.contains_key(&ino) || ino == ROOT {
            return;
        }
        let (name, named) = self.held_name(parent, name);
        if named == Some(ino) {
            return;
        }
        if let Some(old) = self.index_name(parent, &name, ino) {
            self.drop_alias(old, parent, &name);
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.aliases.push((parent, name));
        }
    }

    /// At an open whose reads the daemon serves: whether the pages the kernel holds for
    /// `ino` are still the bytes of `now` (the file opened), so the open may keep them
    /// (`FOPEN_KEEP_CACHE`). They are when the last such open recorded the same file and no
    /// rewind changed it since: every other change of its bytes passes through the kernel,
    /// which keeps its own pages in step. Records `now` for the next open; an unproven file
    /// (`None`) is never trusted.
    ///
    /// Why the identity and not only the node: the host recycles inode numbers, a number
    /// that comes back as a file stays on its node, and the kernel may still hold that node's
    /// inode with the pages of the file that had the number before.
    pub fn pages_still_valid(&self, ino: NodeId, now: Option<NonZeroU64>) -> bool {
        let Some(node) = self.nodes.get(&ino) else {
            return false;
        };
        let now = now.map_or(0, NonZeroU64::get);
        // Relaxed: the value is its own message; the invalidations that go with a rewind's
        // clearing are ordered by the rewind's own sequence, not by this word.
        let before = node.pages_of.swap(now, Ordering::Relaxed);
        now != 0 && before == now
    }

    /// A rewind changed `ino`'s file where the kernel did not see it: the next open drops
    /// whatever pages the kernel holds for it.
    pub fn distrust_pages(&self, ino: NodeId) {
        if let Some(node) = self.nodes.get(&ino) {
            node.pages_of.store(0, Ordering::Relaxed);
        }
    }

    /// After a rewind changed what `name` in `parent` is: keep the name only while it still
    /// refers to the same host inode. Returns whether it was kept (a file rewritten in place).
    pub fn refresh(&mut self, parent: NodeId, name: &OsStr, now: Option<HostId>) -> bool {
        let Some(ino) = self.child(parent, name) else {
            return false;
        };
        let same = self.nodes.get(&ino).is_some_and(|n| Some(n.host) == now);
        if !same {
            self.unlink(parent, name);
        }
        same
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(ino: u64) -> HostId {
        HostId {
            dev: 1,
            ino,
            kind: libc::S_IFREG,
        }
    }

    /// The path `names_of` gives, joined with `/`.
    fn path(t: &InodeTable, ino: NodeId) -> Option<String> {
        let names = t.names_of(ino)?;
        let names: Vec<String> = names
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        Some(names.join("/"))
    }

    #[test]
    fn hard_links_share_a_node_and_names_follow_renames() {
        let mut t = InodeTable::new(h(2));
        let d = t.remember(ROOT, OsStr::new("d"), h(10));
        let a = t.remember(d, OsStr::new("a"), h(11));
        let b = t.remember(ROOT, OsStr::new("b"), h(11));
        assert_eq!(a, b);
        t.rename(ROOT, OsStr::new("d"), ROOT, OsStr::new("e"));
        assert_eq!(path(&t, a), Some("e/a".to_string()));
        assert!(t.is_reachable(a) && t.is_reachable(d) && t.is_reachable(ROOT));
        t.unlink(d, OsStr::new("a"));
        assert_eq!(path(&t, a), Some("b".to_string()));
        t.unlink(ROOT, OsStr::new("e"));
        assert!(!t.is_reachable(d), "d lost its only name");
        assert!(t.is_reachable(a), "a is still reachable as b");
        t.forget(a, 2);
        assert!(t.get(a).is_none());
        assert_eq!(t.child(ROOT, OsStr::new("b")), None);
    }

    #[test]
    fn kernel_pages_are_kept_only_for_the_file_that_filled_them() {
        let fp = |n: u64| NonZeroU64::new(n);
        let mut t = InodeTable::new(h(2));
        let f = t.remember(ROOT, OsStr::new("f"), h(20));
        assert!(
            !t.pages_still_valid(f, fp(1)),
            "a fresh node holds no pages"
        );
        t.distrust_pages(f);
        assert!(!t.pages_still_valid(f, fp(1)), "first open: nothing known");
        assert!(t.pages_still_valid(f, fp(1)), "same file again");
        t.distrust_pages(f);
        assert!(!t.pages_still_valid(f, fp(1)), "a rewind changed it");
        assert!(
            t.pages_still_valid(f, fp(1)),
            "pages dropped and refilled since"
        );
        // The number came back as another file (a rewind removed f, the host gave 20 to the
        // next file): the same node, another identity.
        t.unlink(ROOT, OsStr::new("f"));
        let g = t.remember(ROOT, OsStr::new("g"), h(20));
        assert_eq!(g, f, "a recycled number of the same type stays on its node");
        assert!(!t.pages_still_valid(g, fp(2)), "another file's pages");
        assert!(t.pages_still_valid(g, fp(2)));
        assert!(!t.pages_still_valid(g, None), "unproven: never trusted");
        assert!(!t.pages_still_valid(g, None));
        assert!(
            !t.pages_still_valid(NodeId::new(999), fp(3)),
            "no such node"
        );
    }

    #[test]
    fn forgetting_most_nodes_gives_their_room_back_and_keeps_the_rest() {
        let mut t = InodeTable::new(h(2));
        let d = t.remember(ROOT, OsStr::new("d"), h(10));
        let files: Vec<NodeId> = (0..20_000)
            .map(|i| t.remember(d, OsStr::new(&format!("f{i}")), h(100 + i)))
            .collect();
        let full = t.nodes.capacity();
        for (i, ino) in files.iter().enumerate().skip(10) {
            t.unlink(d, OsStr::new(&format!("f{i}")));
            t.forget(*ino, 1);
        }
        // Shrunk down to the floor below which it is not worth it.
        for room in [t.nodes.capacity(), t.by_host.capacity()] {
            assert!(room <= SPARSE_FLOOR && room * 4 < full, "{room} of {full}");
        }
        // What was kept is whole: every kept name leads to its node, and back.
        for (i, ino) in files.iter().enumerate().take(10) {
            assert_eq!(t.child(d, OsStr::new(&format!("f{i}"))), Some(*ino));
            assert_eq!(path(&t, *ino), Some(format!("d/f{i}")));
            assert_eq!(t.node_of(h(100 + i as u64)), Some(*ino));
        }
    }

    #[test]
    fn a_fresh_name_replaces_one_below_a_removed_directory() {
        let mut t = InodeTable::new(h(2));
        let d = t.remember(ROOT, OsStr::new("d"), h(10));
        let e = t.remember(d, OsStr::new("e"), h(11));
        // `d` is removed behind the kernel's back; `e` keeps its alias below a nameless `d`.
        t.refresh(ROOT, OsStr::new("d"), None);
        assert_eq!(t.names_of(e), None);
        // A new directory `top` gets `e`'s host inode number: the fresh name must win.
        let top = t.remember(ROOT, OsStr::new("top"), h(11));
        assert_eq!(top, e);
        assert_eq!(path(&t, top), Some("top".to_string()));
    }

    #[test]
    fn names_below_a_removed_directory_die_with_it() {
        let mut t = InodeTable::new(h(2));
        let d = t.remember(ROOT, OsStr::new("d"), h(20));
        let f = t.remember(d, OsStr::new("f"), h(21));
        // A rewind removed `d` (and `d/f`) while the kernel still holds both nodes.
        t.refresh(ROOT, OsStr::new("d"), None);
        t.prune_unreachable();
        assert_eq!(t.names_of(f), None);
        assert_eq!(t.child(d, OsStr::new("f")), None);
        // The host reuses `d`'s inode number for a new file `c`, then `f`'s for `c0`: `c0` must
        // not be reached as `c/f` through the old alias.
        assert_eq!(t.remember(ROOT, OsStr::new("c"), h(20)), d);
        let c0 = t.remember(ROOT, OsStr::new("c0"), h(21));
        assert_eq!(path(&t, c0), Some("c0".to_string()));
    }

    #[test]
    fn a_host_inode_number_reused_after_its_last_name_went_gets_a_new_node() {
        let mut t = InodeTable::new(h(2));
        let old = t.remember(ROOT, OsStr::new("old"), h(30));
        // The daemon removes `old`'s last name; the kernel has not forgotten the node yet.
        assert_eq!(t.detach(old), Some(h(30)));
        t.unlink(ROOT, OsStr::new("old"));
        let new = t.remember(ROOT, OsStr::new("new"), h(30));
        assert_ne!(new, old, "a new file must not get the old file's node");
        assert_eq!(path(&t, new), Some("new".to_string()));
        t.forget(old, 1);
        assert_eq!(t.child(ROOT, OsStr::new("new")), Some(new));
        assert_eq!(t.remember(ROOT, OsStr::new("new"), h(30)), new);
        // A failed removal puts the mapping back.
        let kept = t.remember(ROOT, OsStr::new("kept"), h(31));
        let host2 = t.detach(kept).expect("mapped");
        t.reattach(kept, host2);
        assert_eq!(t.remember(ROOT, OsStr::new("kept"), h(31)), kept);
    }

    #[test]
    fn a_name_relinked_behind_the_kernel_is_attached_without_a_lookup() {
        let mut t = InodeTable::new(h(2));
        let held = t.remember(ROOT, OsStr::new("b"), h(40));
        let other = t.remember(ROOT, OsStr::new("c"), h(41));
        // A rewind links `b`'s inode as `a` (the kernel never looked `a` up) and over `c`.
        t.attach(ROOT, OsStr::new("a"), held);
        t.attach(ROOT, OsStr::new("c"), held);
        assert_eq!(t.child(ROOT, OsStr::new("a")), Some(held));
        assert_eq!(t.child(ROOT, OsStr::new("c")), Some(held));
        assert_eq!(t.names_of(other), None, "c no longer names the other node");
        let mut names: Vec<_> = t
            .get(held)
            .expect("held")
            .aliases
            .iter()
            .map(|(_, n)| n.to_string_lossy().into_owned())
            .collect::<Vec<String>>();
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
        // Attaching twice adds nothing, and no lookup was added: one forget drops the node.
        t.attach(ROOT, OsStr::new("a"), held);
        assert_eq!(t.get(held).expect("held").aliases.len(), 3);
        t.forget(held, 1);
        assert!(t.get(held).is_none());
        assert_eq!(t.child(ROOT, OsStr::new("a")), None);
    }

    #[test]
    fn exchange_swaps_and_forget_saturates() {
        let mut t = InodeTable::new(h(2));
        let x = t.remember(ROOT, OsStr::new("x"), h(3));
        let y = t.remember(ROOT, OsStr::new("y"), h(4));
        t.exchange(ROOT, OsStr::new("x"), ROOT, OsStr::new("y"));
        assert_eq!(t.child(ROOT, OsStr::new("x")), Some(y));
        assert_eq!(t.child(ROOT, OsStr::new("y")), Some(x));
        t.forget(x, 100);
        assert!(t.get(x).is_none());
        t.forget(ROOT, 100);
        assert!(t.get(ROOT).is_some());
    }
}
