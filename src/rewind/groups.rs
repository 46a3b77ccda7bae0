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
    let id = t.file_id()?;
    let symlink = match t {
        PreImage::File { .. } => false,
        PreImage::Symlink { .. } => true,
        _ => return None,
    };
    Some(GroupKey {
        symlink,
        ino: id.ino,
        fh: id.fh,
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
    let mut canon: HashMap<GroupKey, PreImage> = HashMap::new();
    let mut most: HashMap<GroupKey, u64> = HashMap::new();
    for (_, t) in &targets {
        if let Some(k) = group_key(t) {
            let m = most.entry(k.clone()).or_insert(0);
            *m = (*m).max(t.nlink());
            canon.entry(k).or_insert_with(|| t.clone());
        }
    }
    for (_, t) in &mut targets {
        let Some(k) = group_key(t) else { continue };
        let n = most.get(&k).copied().unwrap_or(1);
        if n <= 1 {
            continue;
        }
        if let Some(c) = canon.get(&k) {
            *t = c.clone();
            match t {
                PreImage::File { nlink, .. } => *nlink = n,
                PreImage::Symlink { nlink, .. } => *nlink = Some(n),
                _ => {}
            }
        }
    }
    targets
}
