//! Hard-link groups, as planning forms them: which targets of a rewind were one inode when
//! the target turn began (same inode number and file handle), and the one pre-image each group
//! is restored from. Pure: no I/O. Apart from `links.rs`, which looks for the group's surviving
//! names in the folder, so that planning depends on nothing that reads the folder.

use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use std::collections::HashMap;

/// The inode a hard-linked file or symlink target names: its number and, where recorded, its
/// handle (two targets of one group were captured while they were one inode, so they agree).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct GroupKey {
    pub(super) symlink: bool,
    pub(super) ino: u64,
    pub(super) fh: Option<crate::store::journal::Handle>,
}

/// The group a file or symlink target belongs to, when it records an identity; `None` for
/// any other target.
pub(super) fn group_key(t: &PreImage) -> Option<GroupKey> {
    borrowed_key(t).map(|k| GroupKey {
        symlink: k.symlink,
        ino: k.ino,
        fh: k.fh.map(crate::store::journal::Handle::from_bytes),
    })
}

/// Names whose pre-images carry one inode (number and handle), at least one of them
/// hard-linked, were one inode when the target turn began: each target is the oldest
/// pre-image of its path in the rewound turns, and a path's inode only changes through a
/// captured operation, so all of them describe the folder at that one moment, when no two
/// live files share a number. Each gets the oldest of their pre-images (the first in
/// `targets`), with the largest link count, so they are restored as one inode with its content
/// from the start of the turn.
pub(super) fn share_hard_links(mut targets: Vec<(RelPath, PreImage)>) -> Vec<(RelPath, PreImage)> {
    // Per inode (borrowed keys: no copy of a handle per file), the first target that names it
    // and the largest link count recorded for it.
    let mut groups: HashMap<BorrowedKey<'_>, (usize, u64)> = HashMap::new();
    for (i, (_, t)) in targets.iter().enumerate() {
        if let Some(k) = borrowed_key(t) {
            let g = groups.entry(k).or_insert((i, 0));
            g.1 = g.1.max(t.nlink());
        }
    }
    // Only the groups with more than one link change anything.
    let shared: Vec<(usize, usize, u64)> = targets
        .iter()
        .enumerate()
        .filter_map(|(i, (_, t))| {
            let (first, n) = *groups.get(&borrowed_key(t)?)?;
            (n > 1).then_some((i, first, n))
        })
        .collect();
    drop(groups);
    for (i, first, n) in shared {
        let mut t = targets[first].1.clone();
        match &mut t {
            PreImage::File { nlink, .. } => *nlink = n,
            PreImage::Symlink { nlink, .. } => *nlink = Some(n),
            _ => {}
        }
        targets[i].1 = t;
    }
    targets
}

/// A [`GroupKey`] that borrows its handle from the pre-image.
#[derive(PartialEq, Eq, Hash)]
struct BorrowedKey<'a> {
    symlink: bool,
    ino: u64,
    fh: Option<&'a [u8]>,
}

fn borrowed_key(t: &PreImage) -> Option<BorrowedKey<'_>> {
    let (symlink, ino, fh) = match t {
        PreImage::File { ino, fh, .. } => (false, *ino, fh.as_ref()),
        PreImage::Symlink {
            ino: Some(ino), fh, ..
        } => (true, *ino, fh.as_ref()),
        _ => return None,
    };
    Some(BorrowedKey {
        symlink,
        ino,
        fh: fh.map(|h| h.0.as_slice()),
    })
}
