//! The folder at one moment as a tree: what stood at a path, and what a directory held, given
//! the moment's [`Past`] (what was recorded since) and the folder as it is now (the rest). The
//! `.ckpt/turns/` view of the mount shows this; nothing here knows FUSE.
//!
//! Every host access goes through the folder's root descriptor, beneath it, never through a
//! symlink (`sys::open_beneath`): a name swapped for a symlink since the moment was recorded
//! before it was swapped, so the walk never needs to follow one.

use crate::relpath::{RelPath, STORE_DIR};
use crate::store::index::Index;
use crate::store::journal::PreImage;
use crate::store::past::Past;
use crate::sys::{self, Errno, SysResult};
use crate::versions::Then;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// What stood at a path at the moment.
#[derive(Debug, Clone)]
pub enum Was {
    /// As a pre-image recorded since says (never `Absent`).
    Recorded(PreImage),
    /// As the folder has it now (nothing changed it since): its `lstat`.
    Folder(libc::stat),
}

impl Was {
    /// Whether it was a directory.
    pub fn is_dir(&self) -> bool {
        match self {
            Self::Recorded(pre) => matches!(pre, PreImage::Dir { .. }),
            Self::Folder(st) => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
        }
    }
}

/// A moment of the folder, read through the folder's root.
pub struct Tree<'a> {
    /// What was recorded since the moment.
    pub past: &'a Past,
    /// The index (for identities rewinds renewed).
    pub index: &'a Index,
    /// The folder's root.
    pub root: BorrowedFd<'a>,
}

impl Tree<'_> {
    /// What stood at `rel` at the moment; `None` when nothing did.
    pub fn entry(&self, rel: &RelPath) -> SysResult<Option<Was>> {
        // The store is not part of the folder, at any moment.
        if rel.as_bytes().split(|b| *b == b'/').next() == Some(STORE_DIR.as_bytes()) {
            return Ok(None);
        }
        // One open and stat of the path: what decides whether a record names it, and what the
        // folder has there when none does.
        match crate::versions::in_past_or_now(self.past, self.index, self.root, rel)? {
            Then::Recorded(pre) => {
                Ok((!matches!(pre, PreImage::Absent)).then_some(Was::Recorded(pre)))
            }
            Then::AsNow(st) => Ok(st.map(Was::Folder)),
        }
    }

    /// What the directory `dir` (`None`: the root) held at the moment, by name, sorted.
    pub fn children(&self, dir: Option<&RelPath>) -> SysResult<Vec<(OsString, Was)>> {
        let mut out: std::collections::BTreeMap<OsString, Was> = Default::default();
        // What the folder holds now there, where nothing recorded the name since.
        if let Some(fd) = self.folder_dir(dir)? {
            for e in sys::read_dir_all(fd.as_fd(), false)? {
                let name = std::ffi::OsStr::from_bytes(&e.name).to_os_string();
                if dir.is_none() && e.name == STORE_DIR.as_bytes() {
                    continue;
                }
                let Ok(rel) = RelPath::join(dir, &name) else {
                    continue;
                };
                if self.past.recorded(&rel).is_some() {
                    continue;
                }
                if let Some(was) = self.entry(&rel)? {
                    out.insert(name, was);
                }
            }
        }
        // What was recorded there since and present at the moment (`entry` reads each as its
        // record says, a hard-linked file as its inode's oldest).
        for name in self.past.recorded_children(dir) {
            let Ok(rel) = RelPath::join(dir, name) else {
                continue;
            };
            if let Some(was) = self.entry(&rel)? {
                out.insert(name.clone(), was);
            }
        }
        Ok(out.into_iter().collect())
    }

    /// The folder's directory at `dir` now, opened for reading, when the moment's `dir` was a
    /// directory and the folder has one there (a recorded directory's children that came
    /// later were recorded absent, so what it holds now is safe to merge).
    fn folder_dir(&self, dir: Option<&RelPath>) -> SysResult<Option<OwnedFd>> {
        let Some(d) = dir else {
            return sys::reopen(self.root, libc::O_RDONLY | libc::O_DIRECTORY).map(Some);
        };
        if self.past.hidden_by_ancestor(d) {
            return Ok(None);
        }
        if let Some(pre) = self.past.recorded(d)
            && !matches!(pre, PreImage::Dir { .. })
        {
            return Ok(None);
        }
        match sys::open_beneath(
            self.root,
            &d.to_cstring(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        ) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Seq;
    use crate::store::past::test_lines::capture;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("path")
    }

    fn dir() -> PreImage {
        PreImage::Dir {
            mode: 0o755,
            uid: 0,
            gid: 0,
            xattrs: None,
        }
    }

    #[test]
    fn a_listing_merges_the_folder_with_what_was_recorded_since() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path();
        // Now: kept (unchanged), new (made since), sub/ (made since, with a file), .ckpt.
        std::fs::write(d.join("kept"), "k").expect("kept");
        std::fs::write(d.join("new"), "n").expect("new");
        std::fs::create_dir(d.join("sub")).expect("sub");
        std::fs::write(d.join("sub/inner"), "i").expect("inner");
        std::fs::create_dir(d.join(".ckpt")).expect("store");
        // Since the moment: `new` and `sub` made (recorded absent), `gone/` and `gone/f`
        // removed (recorded as they were).
        let lines = [
            capture(2, "new", PreImage::Absent),
            capture(3, "sub", PreImage::Absent),
            capture(4, "gone/f", PreImage::Absent),
            capture(5, "gone", dir()),
        ];
        let past = Past::from_lines(Seq::new(1), &lines);
        let index = Index::default();
        let root = std::fs::File::open(d).expect("root");
        let tree = Tree {
            past: &past,
            index: &index,
            root: root.as_fd(),
        };
        let names: Vec<String> = tree
            .children(None)
            .expect("list")
            .into_iter()
            .map(|(n, w)| {
                format!(
                    "{}{}",
                    n.to_string_lossy(),
                    if w.is_dir() { "/" } else { "" }
                )
            })
            .collect();
        assert_eq!(names, ["gone/", "kept"]);
        assert!(
            tree.entry(&rp("sub/inner")).expect("entry").is_none(),
            "under a later dir"
        );
        assert!(tree.entry(&rp("new")).expect("entry").is_none());
        assert!(matches!(tree.entry(&rp("kept")), Ok(Some(Was::Folder(_)))));
        // gone/f was recorded absent (made after the moment, inside gone): gone was empty.
        assert!(tree.children(Some(&rp("gone"))).expect("list").is_empty());
    }
}
