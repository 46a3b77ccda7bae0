//! `.ckpt/turns/N/` as the core decides it (`past_tree`): the tree of every live turn, walked
//! through the store and the folder, is the model's snapshot of the folder when that turn began
//! (bytes, modes, symlinks, user xattrs, hard-link groups).

use super::*;
use ckpt_mount::past_tree::{Tree as PastTree, Was};
use ckpt_mount::store::journal::PreImage;
use common::reference::model::{Kind, Snap, Tree, Xattrs, tree_diff};

impl Case {
    /// Every live turn's tree is its snapshot.
    pub(super) fn check_past_trees(&self) -> Result<(), Failure> {
        let store = self.fs().capturer().lock();
        let index = store.index();
        for (k, rec) in self.turns.iter() {
            let Some(began) = index.began(turn_of(k)) else {
                return fail("past-tree", format!("the index has no turn {k}"));
            };
            let past = match store.past(began) {
                Ok(p) => p,
                Err(e) => return fail("past-tree", format!("the past of turn {k}: {e}")),
            };
            let tree = PastTree {
                past: &past,
                index,
                root: self.fs().root(),
            };
            let got = match walk(&tree, &store) {
                Ok(t) => t,
                Err(e) => return fail("past-tree", format!("walking turn {k}: {e}")),
            };
            if let Some(d) = tree_diff(&rec.tree, &got, check_xattrs()) {
                return fail(
                    "past-tree",
                    format!(
                        ".ckpt/turns/{} is not the folder when it began:\n{d}",
                        turn_of(k)
                    ),
                );
            }
        }
        Ok(())
    }
}

/// The whole tree of a moment, as `observe` reads the folder.
fn walk(tree: &PastTree<'_>, store: &Store) -> Result<Tree, String> {
    let mut out = Tree::default();
    let mut by_ino: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut stack: Vec<Option<RelPath>> = vec![None];
    while let Some(dir) = stack.pop() {
        let children = tree.children(dir.as_ref()).map_err(|e| e.to_string())?;
        for (name, was) in children {
            let rel = RelPath::join(dir.as_ref(), &name).map_err(|e| e.0)?;
            let path = rel.lossy().into_owned();
            let (snap, ino) = snap_of(tree, store, &rel, &was)?;
            if matches!(snap.kind, Kind::Dir { .. }) {
                stack.push(Some(rel));
            }
            if let Some(ino) = ino {
                by_ino.entry(ino).or_default().insert(path.clone());
            }
            out.entries.insert(path, snap);
        }
    }
    out.groups = by_ino.into_values().filter(|g| g.len() > 1).collect();
    Ok(out)
}

fn user_only(list: Option<&[ckpt_mount::xattrs::Xattr]>) -> Xattrs {
    list.unwrap_or_default()
        .iter()
        .filter_map(|x| {
            let name = String::from_utf8(x.name.clone()).ok()?;
            name.starts_with("user.").then(|| (name, x.value.clone()))
        })
        .collect()
}

/// One path's snapshot and, for a file, the inode the tree shows it on.
fn snap_of(
    tree: &PastTree<'_>,
    store: &Store,
    rel: &RelPath,
    was: &Was,
) -> Result<(Snap, Option<u64>), String> {
    match was {
        Was::Recorded(PreImage::File {
            blob,
            mode,
            ino,
            xattrs,
            ..
        }) => {
            let mut data = Vec::new();
            store
                .blobs()
                .read_blob(blob, &mut |c| {
                    data.extend_from_slice(c);
                    Ok(())
                })
                .map_err(|e| format!("{rel}: blob {blob}: {e}"))?;
            let kind = Kind::File { data, mode: *mode };
            let xattrs = user_only(xattrs.as_deref());
            Ok((Snap { kind, xattrs }, Some(*ino)))
        }
        Was::Recorded(PreImage::Dir { mode, xattrs, .. }) => Ok((
            Snap {
                kind: Kind::Dir { mode: *mode },
                xattrs: user_only(xattrs.as_deref()),
            },
            None,
        )),
        Was::Recorded(PreImage::Symlink { target, .. }) => Ok((
            Snap {
                kind: Kind::Symlink {
                    target: String::from_utf8_lossy(&target.0).into_owned(),
                },
                xattrs: Xattrs::new(),
            },
            None,
        )),
        Was::Recorded(other) => Err(format!(
            "{rel}: a pre-image the model never makes: {other:?}"
        )),
        Was::Folder(st) => {
            let full = tree.root;
            let fd = sys::open_beneath(full, &rel.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                .map_err(|e| format!("{rel}: {e}"))?;
            let mode = st.st_mode & 0o7777;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFREG => {
                    let f = sys::reopen(fd.as_fd(), libc::O_RDONLY)
                        .map_err(|e| format!("{rel}: {e}"))?;
                    let data = sys::read_to_end(f.as_fd()).map_err(|e| format!("{rel}: {e}"))?;
                    let xattrs = super::host::user_xattrs(f.as_fd());
                    Ok((
                        Snap {
                            kind: Kind::File { data, mode },
                            xattrs,
                        },
                        Some(st.st_ino),
                    ))
                }
                libc::S_IFDIR => {
                    let d = sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
                        .map_err(|e| format!("{rel}: {e}"))?;
                    let xattrs = super::host::user_xattrs(d.as_fd());
                    Ok((
                        Snap {
                            kind: Kind::Dir { mode },
                            xattrs,
                        },
                        None,
                    ))
                }
                libc::S_IFLNK => {
                    let t = sys::readlinkat(fd.as_fd(), c"").map_err(|e| format!("{rel}: {e}"))?;
                    let kind = Kind::Symlink {
                        target: String::from_utf8_lossy(&t).into_owned(),
                    };
                    Ok((
                        Snap {
                            kind,
                            xattrs: Xattrs::new(),
                        },
                        None,
                    ))
                }
                other => Err(format!(
                    "{rel}: a file type the model never makes: {other:o}"
                )),
            }
        }
    }
}
