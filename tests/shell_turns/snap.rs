//! Snapshots of the tree through the mount (per path: type, bytes, mode, owner, symlink
//! target, `user.*` xattrs; hard-link groups; inode identities) and their differences.

use super::*;

/// What one path is, apart from its hard-link sharing (kept apart in `Snap::links`).
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// `link_group` is always 0 here.
    pub(super) node: Node,
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// Extended attributes of the `user.*` namespace.
    pub(super) xattrs: BTreeMap<String, Vec<u8>>,
}

/// A path's identity on the host filesystem (read below the mount).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Id {
    pub(super) ino: u64,
    pub(super) ctime: (i64, i64),
    pub(super) mtime: (i64, i64),
    pub(super) dir: bool,
}

pub(super) type Tree = BTreeMap<String, Node>;

/// The whole folder at one moment, `.git` included, `.ckpt` not.
#[derive(Clone)]
pub(super) struct Snap {
    pub(super) entries: BTreeMap<String, Entry>,
    /// Every set of two or more paths sharing one inode.
    pub(super) links: BTreeSet<BTreeSet<String>>,
    /// Identities of the same paths, from the host side.
    pub(super) ids: BTreeMap<String, Id>,
}

pub(super) fn user_xattrs(p: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let names = xattr::list(p).unwrap_or_else(|e| panic!("listxattr {}: {e}", p.display()));
    for name in names {
        let name = name.to_string_lossy().into_owned();
        if !name.starts_with("user.") {
            continue;
        }
        let value = xattr::get(p, &name)
            .unwrap_or_else(|e| panic!("getxattr {} {name}: {e}", p.display()))
            .unwrap_or_default();
        out.insert(name, value);
    }
    out
}

pub(super) fn id_of(md: &std::fs::Metadata) -> Id {
    Id {
        ino: md.ino(),
        ctime: (md.ctime(), md.ctime_nsec()),
        mtime: (md.mtime(), md.mtime_nsec()),
        dir: md.is_dir(),
    }
}

/// Host-side identities of every path of `t`.
pub(super) fn ids_of(host: &Path, t: &Tree) -> BTreeMap<String, Id> {
    t.keys()
        .map(|p| {
            let md = std::fs::symlink_metadata(host.join(p))
                .unwrap_or_else(|e| panic!("lstat below the mount {p}: {e}"));
            (p.clone(), id_of(&md))
        })
        .collect()
}

impl Snap {
    pub(super) fn take(mount: &Path, host: &Path) -> Self {
        let t = tree(mount, true);
        let mut groups: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        let mut entries = BTreeMap::new();
        for (path, node) in &t {
            let p = mount.join(path);
            let md = std::fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("lstat {path}: {e}"));
            let node = match node.clone() {
                Node::File {
                    mode,
                    data,
                    link_group,
                } => {
                    if link_group != 0 {
                        groups.entry(link_group).or_default().insert(path.clone());
                    }
                    Node::File {
                        mode,
                        data,
                        link_group: 0,
                    }
                }
                n => n,
            };
            let xattrs = if matches!(node, Node::Symlink { .. }) {
                BTreeMap::new()
            } else {
                user_xattrs(&p)
            };
            entries.insert(
                path.clone(),
                Entry {
                    node,
                    uid: md.uid(),
                    gid: md.gid(),
                    xattrs,
                },
            );
        }
        Snap {
            entries,
            // A group of one: another name of the inode is outside the folder or open-unlinked.
            links: groups.into_values().filter(|g| g.len() > 1).collect(),
            ids: ids_of(host, &t),
        }
    }
}

pub(super) fn show(e: Option<&Entry>) -> String {
    let Some(e) = e else {
        return "absent".to_string();
    };
    let mut s = match &e.node {
        Node::File { mode, data, .. } => format!(
            "file {mode:o} {} bytes {:?}",
            data.len(),
            String::from_utf8_lossy(&data[..data.len().min(48)])
        ),
        Node::Dir { mode } => format!("dir {mode:o}"),
        Node::Symlink { target } => format!("symlink -> {}", target.display()),
        Node::Fifo { mode } => format!("fifo {mode:o}"),
    };
    if (e.uid, e.gid) != (0, 0) {
        s.push_str(&format!(" owner {}:{}", e.uid, e.gid));
    }
    for (k, v) in &e.xattrs {
        s.push_str(&format!(" {k}={:?}", String::from_utf8_lossy(v)));
    }
    s
}

/// One difference found by a check, with the kind it counts as in the summary.
pub(super) struct Diff {
    pub(super) kind: &'static str,
    pub(super) line: String,
}

pub(super) fn diff(kind: &'static str, line: String) -> Diff {
    Diff { kind, line }
}

/// The difference a command that should have succeeded makes when it did not: its exit code
/// and what it said.
pub(super) fn failed_command(
    kind: &'static str,
    what: &str,
    out: &std::process::Output,
) -> Option<Diff> {
    (!out.status.success()).then(|| {
        diff(
            kind,
            format!(
                "  {what} exited {:?}: {}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        )
    })
}

/// Differences between what a rewind had to give back and what it gave.
pub(super) fn compare(want: &Snap, got: &Snap) -> Vec<Diff> {
    let mut out = Vec::new();
    let keys: BTreeSet<&String> = want.entries.keys().chain(got.entries.keys()).collect();
    for k in keys {
        let (w, g) = (want.entries.get(k), got.entries.get(k));
        if w == g {
            continue;
        }
        let kind = match (w, g) {
            (Some(w), Some(g)) if w.node == g.node && (w.uid, w.gid) == (g.uid, g.gid) => "xattr",
            (Some(w), Some(g)) if w.node == g.node => "owner",
            _ if k == ".git" || k.starts_with(".git/") => "git",
            _ => "tree",
        };
        out.push(diff(
            kind,
            format!("  {k}: expected {} / actual {}", show(w), show(g)),
        ));
    }
    for g in want.links.difference(&got.links) {
        out.push(diff(
            "links",
            format!("  hard-link group {g:?} expected, not there"),
        ));
    }
    for g in got.links.difference(&want.links) {
        out.push(diff(
            "links",
            format!("  hard-link group {g:?} there, not expected"),
        ));
    }
    out
}
