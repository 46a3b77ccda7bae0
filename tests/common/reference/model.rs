//! The model of the folder: what a tier expects the folder to hold, path by path (kind,
//! bytes, mode, symlink target, user xattrs, hard-link groups), the folder as read back with
//! each path's host inode, and the tree as paths over model inodes that an operation changes
//! (so hard links share bytes, mode and xattrs).

use super::super::paths::{parent, under};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub type Xattrs = BTreeMap<String, Vec<u8>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    File { data: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Symlink { target: String },
}

/// One path's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snap {
    pub kind: Kind,
    pub xattrs: Xattrs,
}

impl std::fmt::Display for Snap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::File { data, mode } => {
                write!(f, "file 0o{mode:o} {:?}", String::from_utf8_lossy(data))?
            }
            Kind::Dir { mode } => write!(f, "dir 0o{mode:o}")?,
            Kind::Symlink { target } => write!(f, "symlink -> {target:?}")?,
        }
        if !self.xattrs.is_empty() {
            let x: Vec<String> = self
                .xattrs
                .iter()
                .map(|(k, v)| format!("{k}={:?}", String::from_utf8_lossy(v)))
                .collect();
            write!(f, " xattrs {{{}}}", x.join(", "))?;
        }
        Ok(())
    }
}

/// A whole tree: every path's state, and the hard-link groups (paths sharing one inode, two or
/// more).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    pub entries: BTreeMap<String, Snap>,
    pub groups: BTreeSet<BTreeSet<String>>,
}

impl Tree {
    pub fn without_xattrs(&self) -> Tree {
        let mut t = self.clone();
        for s in t.entries.values_mut() {
            s.xattrs.clear();
        }
        t
    }

    pub fn group_of(&self, p: &str) -> Option<&BTreeSet<String>> {
        self.groups.iter().find(|g| g.contains(p))
    }
}

pub fn show(s: Option<&Snap>) -> String {
    s.map_or_else(|| "absent".to_string(), ToString::to_string)
}

/// `None` when equal, else the differences, one per line.
pub fn tree_diff(expected: &Tree, actual: &Tree, xattrs: bool) -> Option<String> {
    let (e, a) = if xattrs {
        (expected.clone(), actual.clone())
    } else {
        (expected.without_xattrs(), actual.without_xattrs())
    };
    if e == a {
        return None;
    }
    let keys: BTreeSet<&String> = e.entries.keys().chain(a.entries.keys()).collect();
    let mut lines: Vec<String> = keys
        .into_iter()
        .filter(|k| e.entries.get(*k) != a.entries.get(*k))
        .map(|k| {
            format!(
                "  {k}: expected {} / actual {}",
                show(e.entries.get(k)),
                show(a.entries.get(k))
            )
        })
        .collect();
    if e.groups != a.groups {
        lines.push(format!(
            "  hard-link groups: expected {:?} / actual {:?}",
            e.groups, a.groups
        ));
    }
    Some(lines.join("\n"))
}

/// A host inode's identity: its number and its birth time (nanoseconds; 0 where the
/// filesystem keeps none), so that a number freed and given to a new file is another inode.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HKey(pub u64, pub u128);

impl std::fmt::Debug for HKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ino {} born {}.{:09}",
            self.0,
            self.1 / 1_000_000_000,
            self.1 % 1_000_000_000
        )
    }
}

/// The host tree and each path's inode.
#[derive(Clone)]
pub struct Observed {
    pub tree: Tree,
    pub inos: BTreeMap<String, HKey>,
}

#[derive(Clone, Debug)]
pub enum MEntry {
    File(u64),
    Dir { mode: u32, xattrs: Xattrs },
    Symlink(String),
}

#[derive(Clone, Debug)]
pub struct MInode {
    pub data: Vec<u8>,
    pub mode: u32,
    pub xattrs: Xattrs,
}

/// The tree now: paths over model inodes.
#[derive(Default)]
pub struct Model {
    pub tree: BTreeMap<String, MEntry>,
    pub inodes: HashMap<u64, MInode>,
    pub next: u64,
    /// The host inode each live model inode is (learnt after each step), so that a model
    /// inode keeps its identity across the rebuild after a rewind when the host kept it.
    pub host_of: HashMap<u64, HKey>,
    /// The folder root's mode (for the set-gid bit a new directory inherits).
    pub root_mode: u32,
}

impl Model {
    pub fn new_inode(&mut self, data: Vec<u8>, mode: u32, xattrs: Xattrs) -> u64 {
        self.next += 1;
        self.inodes.insert(self.next, MInode { data, mode, xattrs });
        self.next
    }

    pub fn snapshot(&self) -> Tree {
        let mut entries = BTreeMap::new();
        let mut by: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for (p, e) in &self.tree {
            let snap = match e {
                MEntry::File(id) => {
                    by.entry(*id).or_default().insert(p.clone());
                    let i = &self.inodes[id];
                    Snap {
                        kind: Kind::File {
                            data: i.data.clone(),
                            mode: i.mode,
                        },
                        xattrs: i.xattrs.clone(),
                    }
                }
                MEntry::Dir { mode, xattrs } => Snap {
                    kind: Kind::Dir { mode: *mode },
                    xattrs: xattrs.clone(),
                },
                MEntry::Symlink(t) => Snap {
                    kind: Kind::Symlink { target: t.clone() },
                    xattrs: Xattrs::new(),
                },
            };
            entries.insert(p.clone(), snap);
        }
        Tree {
            entries,
            groups: by.into_values().filter(|g| g.len() > 1).collect(),
        }
    }

    pub fn file_ids(&self) -> BTreeMap<String, u64> {
        self.tree
            .iter()
            .filter_map(|(p, e)| match e {
                MEntry::File(id) => Some((p.clone(), *id)),
                _ => None,
            })
            .collect()
    }

    pub fn is_dir(&self, p: &str) -> bool {
        p.is_empty() || matches!(self.tree.get(p), Some(MEntry::Dir { .. }))
    }

    pub fn file(&self, p: &str) -> Option<u64> {
        match self.tree.get(p) {
            Some(MEntry::File(id)) => Some(*id),
            _ => None,
        }
    }

    pub fn dir_mode(&self, p: &str) -> u32 {
        match self.tree.get(p) {
            Some(MEntry::Dir { mode, .. }) => *mode,
            _ => self.root_mode,
        }
    }

    pub fn same_inode(&self, a: &str, b: &str) -> bool {
        matches!((self.file(a), self.file(b)), (Some(x), Some(y)) if x == y)
    }

    pub fn names_of(&self, id: u64) -> Vec<String> {
        self.tree
            .iter()
            .filter(|(_, e)| matches!(e, MEntry::File(i) if *i == id))
            .map(|(p, _)| p.clone())
            .collect()
    }

    pub fn subtree(&self, p: &str) -> Vec<String> {
        self.tree.keys().filter(|k| under(k, p)).cloned().collect()
    }

    pub fn has_children(&self, p: &str) -> bool {
        self.tree.keys().any(|k| k != p && under(k, p))
    }

    pub fn take_subtree(&mut self, p: &str) -> Vec<(String, MEntry)> {
        let keys = self.subtree(p);
        keys.into_iter()
            .map(|k| {
                let v = self.tree.remove(&k).expect("listed");
                (k[p.len()..].to_string(), v)
            })
            .collect()
    }

    pub fn put_subtree(&mut self, p: &str, items: Vec<(String, MEntry)>) {
        for (suffix, v) in items {
            self.tree.insert(format!("{p}{suffix}"), v);
        }
    }

    pub fn rename(&mut self, a: &str, b: &str) {
        self.tree.remove(b);
        let moved = self.take_subtree(a);
        self.put_subtree(b, moved);
    }

    pub fn exchange(&mut self, a: &str, b: &str) {
        let ta = self.take_subtree(a);
        let tb = self.take_subtree(b);
        self.put_subtree(b, ta);
        self.put_subtree(a, tb);
    }

    pub fn xattrs_mut(&mut self, p: &str) -> Option<&mut Xattrs> {
        match self.tree.get_mut(p)? {
            MEntry::File(id) => self.inodes.get_mut(id).map(|i| &mut i.xattrs),
            MEntry::Dir { xattrs, .. } => Some(xattrs),
            MEntry::Symlink(_) => None,
        }
    }

    pub fn xattrs(&self, p: &str) -> Option<&Xattrs> {
        match self.tree.get(p)? {
            MEntry::File(id) => self.inodes.get(id).map(|i| &i.xattrs),
            MEntry::Dir { xattrs, .. } => Some(xattrs),
            MEntry::Symlink(_) => None,
        }
    }

    // Validity of operations (a resolved operation replayed from a list is skipped when the
    // tree it meets makes it invalid).

    pub fn can_make(&self, p: &str) -> bool {
        !p.is_empty() && !self.tree.contains_key(p) && self.is_dir(parent(p))
    }

    pub fn rename_ok(&self, a: &str, b: &str) -> bool {
        let Some(src) = self.tree.get(a) else {
            return false;
        };
        if b.is_empty() || a == b || under(b, a) || !self.is_dir(parent(b)) {
            return false;
        }
        let src_dir = matches!(src, MEntry::Dir { .. });
        match self.tree.get(b) {
            None => true,
            Some(MEntry::Dir { .. }) => src_dir && !self.has_children(b),
            Some(_) => !src_dir && !self.same_inode(a, b),
        }
    }

    pub fn exchange_ok(&self, a: &str, b: &str) -> bool {
        self.tree.contains_key(a)
            && self.tree.contains_key(b)
            && a != b
            && !under(a, b)
            && !under(b, a)
            && !self.same_inode(a, b)
    }

    /// Learns which host inode each model inode is, and drops the model inodes nothing
    /// reaches (no name, no held handle).
    /// Fails when a model inode is another host inode than before (an operation other than a
    /// rewind never replaces an inode).
    pub fn sync(&mut self, host: &Observed, held: &[u64]) -> Result<(), String> {
        for (p, e) in &self.tree {
            if let (MEntry::File(id), Some(k)) = (e, host.inos.get(p))
                && let Some(was) = self.host_of.insert(*id, *k)
                && was != *k
            {
                return Err(format!(
                    "{p} is on another inode ({k:?}) than before ({was:?})"
                ));
            }
        }
        let mut live: HashSet<u64> = held.iter().copied().collect();
        live.extend(self.tree.values().filter_map(|e| match e {
            MEntry::File(id) => Some(*id),
            _ => None,
        }));
        self.inodes.retain(|id, _| live.contains(id));
        self.host_of.retain(|id, _| live.contains(id));
        Ok(())
    }

    /// Rebuilds the model from the host: one model inode per host inode, the same one as before
    /// where the host inode is the same. Returns the model inode of each host inode number.
    /// The model after a rewind or undo, from the host. A new host inode at a path that `hint`
    /// (the state given back) gives a model inode no name holds any more is that inode again,
    /// as the core takes it (a recreated file renews the identity of one that is gone).
    pub fn adopt(&mut self, host: &Observed, hint: &BTreeMap<String, u64>) -> HashMap<u64, u64> {
        let was: HashMap<HKey, u64> = self.host_of.iter().map(|(id, k)| (*k, *id)).collect();
        let live: HashSet<u64> = host
            .inos
            .values()
            .filter_map(|k| was.get(k))
            .copied()
            .collect();
        let mut old = std::mem::take(&mut self.inodes);
        self.tree.clear();
        self.host_of.clear();
        let mut ids: HashMap<u64, u64> = HashMap::new();
        for (p, s) in &host.tree.entries {
            let e = match &s.kind {
                Kind::Dir { mode } => MEntry::Dir {
                    mode: *mode,
                    xattrs: s.xattrs.clone(),
                },
                Kind::Symlink { target } => MEntry::Symlink(target.clone()),
                Kind::File { data, mode } => {
                    let key = host.inos[p];
                    let id = match ids.get(&key.0) {
                        Some(id) => *id,
                        None => {
                            let inode = MInode {
                                data: data.clone(),
                                mode: *mode,
                                xattrs: s.xattrs.clone(),
                            };
                            let renewed = hint
                                .get(p)
                                .copied()
                                .filter(|x| !live.contains(x) && !self.inodes.contains_key(x));
                            let id = match (was.get(&key), renewed) {
                                (Some(id), _) => *id,
                                (None, Some(x)) => x,
                                (None, None) => {
                                    self.next += 1;
                                    self.next
                                }
                            };
                            old.remove(&id);
                            self.inodes.insert(id, inode);
                            self.host_of.insert(id, key);
                            ids.insert(key.0, id);
                            id
                        }
                    };
                    MEntry::File(id)
                }
            };
            self.tree.insert(p.clone(), e);
        }
        // Inodes no name reaches any more stay for the handles that hold them.
        self.inodes.extend(old);
        ids
    }
}
