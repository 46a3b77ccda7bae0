//! Hard links: which names of the plan were one inode when the target turn began, and which
//! names in the folder still hold that inode now. A rewind restores a group as one inode: its
//! first name is restored (rewritten in place, linked to a surviving name, when the inode still
//! stands), the others are linked to it, so names the plan does not touch share it again.
//! Kept apart because every rule here rests on the identity checks of [`crate::identity`]
//! (inode number plus file handle or birth time), and those are easy to get wrong.
//!
//! The groups themselves are formed by planning (`groups.rs`, pure). [`uncaptured_links`] and
//! [`link_anchors`] only read the folder (`lstat`, file handles, directory listings), before
//! the rewind changes anything; the links themselves are made by the apply stage.

use super::groups::{GroupKey, group_key};
use super::plan::Plan;
use super::report::{Failure, Report};
use super::resolve::{cname, open_parent, open_parent_raw};
use crate::capture::walk_tree;
use crate::identity::{FileId, Same};
use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use crate::sys;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd};

/// Names below the `paths` of a partial rewind that no rewound turn captured but that are, now,
/// a hard link of an inode some other name's capture describes: the inode's bytes changed
/// through that other name, so at the start of the turn this name held the captured state
/// too. (A name not captured in the rewound turns kept its inode through them.)
pub(super) fn uncaptured_links(
    root: BorrowedFd<'_>,
    all: &[(RelPath, PreImage)],
    chosen: &[(RelPath, PreImage)],
    paths: &[RelPath],
) -> Vec<(RelPath, PreImage)> {
    let captured: HashSet<&RelPath> = all.iter().map(|(p, _)| p).collect();
    let known: Vec<(FileId, &PreImage)> = all
        .iter()
        .filter(|(_, pre)| pre.nlink() > 1)
        .filter_map(|(_, pre)| pre.file_id().map(|id| (id, pre)))
        .collect();
    let mut out: Vec<(RelPath, PreImage)> = Vec::new();
    if known.is_empty() {
        return out;
    }
    let chosen: HashSet<&RelPath> = chosen.iter().map(|(p, _)| p).collect();
    for o in paths {
        let Ok(parent) = open_parent_raw(root, o) else {
            continue;
        };
        let _ = walk_tree(parent.as_fd(), &cname(o), o, &mut |p, dir, n| {
            if captured.contains(p) || chosen.contains(p) {
                return Ok(None);
            }
            let st = sys::lstatat(dir, n)?;
            let kind = st.st_mode & libc::S_IFMT;
            if st.st_nlink < 2 || (kind != libc::S_IFREG && kind != libc::S_IFLNK) {
                return Ok(Some(kind == libc::S_IFDIR));
            }
            let now = FileId::read_at(dir, n, 0, st.st_ino);
            if let Some((_, pre)) = known.iter().find(|(id, pre)| {
                id.is(&now) && matches!(pre, PreImage::Symlink { .. }) == (kind == libc::S_IFLNK)
            }) {
                out.push((p.clone(), (*pre).clone()));
            }
            Ok(Some(false))
        });
    }
    out
}

/// For each hard-linked inode of the plan, a path that holds that very inode now (proven by
/// its identity): a path of the plan when one does, else (when the plan has fewer names than
/// the inode had links) the first such name found by walking the folder; and the names found
/// that carry the inode's number but whose record cannot prove they are it. Found before the
/// rewind changes anything (names the plan removes are skipped), so that the names outside the
/// plan it will rewrite in place are saved first.
pub(super) struct Anchors {
    /// Per group, the name that holds its inode now.
    pub(super) found: HashMap<GroupKey, RelPath>,
    /// (name outside the plan, first name of the group in the plan).
    unproven: Vec<(RelPath, RelPath)>,
    /// First names of groups with names outside the plan that no record can find.
    unresolved: Vec<RelPath>,
}

impl Anchors {
    /// The anchors that are not paths of `plan`: names the rewind rewrites in place although
    /// no step names them.
    pub(super) fn outside_plan(&self, plan: &Plan) -> Vec<RelPath> {
        let planned: HashSet<&RelPath> = plan.steps().map(|s| &s.path).collect();
        self.found
            .values()
            .filter(|p| !planned.contains(p))
            .cloned()
            .collect()
    }

    /// Reports the names this search left as they are: names outside the plan that carry a
    /// group's number but cannot be proven its inode, and first names of groups whose other
    /// names no record can find. No second run can change either, so both are permanent.
    pub(super) fn report_unrestored(&self, report: &mut Report) {
        for (candidate, member) in &self.unproven {
            // Left as it is: writing into it could change a file no rewound turn touched.
            report.permanent.insert(candidate.into());
            report.failed.push(Failure {
                path: candidate.into(),
                reason: format!(
                    "not restored: it may be a hard link of {member} as it was when the turn began, \
                     but its record (store version 1) cannot prove it is the same file"
                ),
            });
        }
        for first in &self.unresolved {
            report.permanent.insert(first.into());
            report.failed.push(Failure {
                path: first.into(),
                reason: "restored, but it had hard links outside the rewound paths when the turn \
                         began, and its record (store version 1) cannot find them: they keep what \
                         they hold now"
                    .into(),
            });
        }
    }
}

/// One group the walk looks for.
struct Wanted {
    key: GroupKey,
    id: FileId,
    first: RelPath,
}

/// Finds the [`Anchors`] of `plan`'s hard-link groups, before the rewind changes anything;
/// names in `changed` (changed by a rewound turn) are never anchors.
pub(super) fn link_anchors(
    root: BorrowedFd<'_>,
    plan: &Plan,
    changed: &HashSet<&RelPath>,
) -> Anchors {
    let mut anchors = Anchors {
        found: HashMap::new(),
        unproven: Vec::new(),
        unresolved: Vec::new(),
    };
    let Ok(dev) = sys::fstat(root).map(|st| st.st_dev) else {
        return anchors;
    };
    let mut wanted: HashMap<u64, Vec<Wanted>> = HashMap::new();
    for (key, (members, nlink, id)) in &restored_groups(plan) {
        if let Some(p) = members.iter().find(|p| holds(root, dev, p, key, id)) {
            anchors.found.insert(key.clone(), (*p).clone());
        } else if (members.len() as u64) < *nlink
            && let Some(first) = members.first()
        {
            wanted.entry(id.ino).or_default().push(Wanted {
                key: key.clone(),
                id: id.clone(),
                first: (*first).clone(),
            });
        }
    }
    if !wanted.is_empty() {
        search_folder(root, dev, plan, changed, &mut wanted, &mut anchors);
    }
    // Groups still wanted whose record proves nothing (store version 1): their other names
    // are somewhere in the folder, under numbers the journal does not know.
    for list in wanted.into_values() {
        for w in list {
            if w.id.fh.is_none() && w.id.btime.is_none() {
                anchors.unresolved.push(w.first);
            }
        }
    }
    anchors
}

/// The hard-link groups `plan` restores: per inode, the names the plan gives it (in plan
/// order), the largest link count recorded for it, and its identity.
fn restored_groups(plan: &Plan) -> HashMap<GroupKey, (Vec<&RelPath>, u64, FileId)> {
    let mut groups: HashMap<GroupKey, (Vec<&RelPath>, u64, FileId)> = HashMap::new();
    for step in &plan.restore {
        if let (Some(key), Some(id)) = (group_key(&step.target), step.target.file_id())
            && step.target.nlink() > 1
        {
            let g = groups.entry(key).or_insert_with(|| (Vec::new(), 0, id));
            g.0.push(&step.path);
            g.1 = g.1.max(step.target.nlink());
        }
    }
    groups
}

/// Whether `p` holds, now, the very inode `id` of the group `key`: of the group's kind, on the
/// folder's device `dev`, and proven by its identity.
fn holds(root: BorrowedFd<'_>, dev: u64, p: &RelPath, key: &GroupKey, id: &FileId) -> bool {
    open_parent(root, p)
        .ok()
        .and_then(|d| {
            let st = sys::lstatat(d.as_fd(), &cname(p)).ok()?;
            let kind = if key.symlink {
                libc::S_IFLNK
            } else {
                libc::S_IFREG
            };
            (st.st_mode & libc::S_IFMT == kind && st.st_dev == dev)
                .then(|| FileId::read_at(d.as_fd(), &cname(p), 0, st.st_ino))
        })
        .is_some_and(|now| id.is(&now))
}

/// Walks the whole folder (see [`InodeSearch`]) for the groups still `wanted`: names outside
/// the plan that hold their inodes.
fn search_folder(
    root: BorrowedFd<'_>,
    dev: u64,
    plan: &Plan,
    changed: &HashSet<&RelPath>,
    wanted: &mut HashMap<u64, Vec<Wanted>>,
    anchors: &mut Anchors,
) {
    let Ok(top) = sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0) else {
        return;
    };
    // A name the plan restores to something else no longer holds the inode once the plan
    // has run: it is no anchor (and neither is anything below one that becomes a non-dir).
    let restored: HashMap<&RelPath, bool> = plan
        .restore
        .iter()
        .map(|s| (&s.path, matches!(s.target, PreImage::Dir { .. })))
        .collect();
    // Nor is anything the plan removes (the anchors are found before the removals).
    let removed: HashSet<&RelPath> = plan.remove.iter().map(|s| &s.path).collect();
    let mut walk = InodeSearch {
        dev,
        restored: &restored,
        removed: &removed,
        changed,
        wanted,
        anchors,
    };
    walk.dir(top.as_fd(), None);
}

/// A walk of the folder for the inodes of hard-link groups whose names lie outside the plan.
struct InodeSearch<'a> {
    dev: u64,
    /// The plan's restore paths, each with whether its target is a directory.
    restored: &'a HashMap<&'a RelPath, bool>,
    /// The plan's removals (never walked into).
    removed: &'a HashSet<&'a RelPath>,
    /// Names the rewound turns changed (never anchors).
    changed: &'a HashSet<&'a RelPath>,
    /// Groups still looked for, by inode number.
    wanted: &'a mut HashMap<u64, Vec<Wanted>>,
    anchors: &'a mut Anchors,
}

impl InodeSearch<'_> {
    /// Walks the directory `dir` (at `path`, `None` for the root; never into the store, through
    /// a symlink or onto another device).
    fn dir(&mut self, dir: BorrowedFd<'_>, path: Option<&RelPath>) {
        use std::os::unix::ffi::OsStrExt;
        let Ok(entries) = sys::read_dir_all(dir, false) else {
            return;
        };
        for e in entries {
            if self.wanted.is_empty() {
                return;
            }
            // `.ckpt` at the top is not a valid path, so the store is never walked.
            let Ok(child) = RelPath::join(path, std::ffi::OsStr::from_bytes(&e.name)) else {
                continue;
            };
            let Ok(name) = CString::new(e.name) else {
                continue;
            };
            if self.removed.contains(&child) {
                continue;
            }
            let kind = match e.kind {
                libc::DT_UNKNOWN => {
                    match sys::lstatat(dir, &name).map(|st| st.st_mode & libc::S_IFMT) {
                        Ok(libc::S_IFDIR) => libc::DT_DIR,
                        Ok(libc::S_IFREG) => libc::DT_REG,
                        Ok(libc::S_IFLNK) => libc::DT_LNK,
                        _ => continue,
                    }
                }
                k => k,
            };
            if kind == libc::DT_DIR {
                let Ok(sub) = sys::openat(
                    dir,
                    &name,
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                ) else {
                    continue;
                };
                if sys::fstat(sub.as_fd()).is_ok_and(|st| st.st_dev == self.dev)
                    && self.restored.get(&child) != Some(&false)
                {
                    self.dir(sub.as_fd(), Some(&child));
                }
            } else if (kind == libc::DT_REG || kind == libc::DT_LNK)
                && self.wanted.contains_key(&e.ino)
                && !self.restored.contains_key(&child)
                && !self.changed.contains(&child)
            {
                self.candidate(dir, &name, child, kind == libc::DT_LNK);
            }
        }
    }

    /// A file or symlink whose number one of the groups carries: an anchor when proven that
    /// inode, a name left as it is (and reported) when it cannot be proven either way.
    fn candidate(&mut self, dir: BorrowedFd<'_>, name: &CStr, child: RelPath, symlink: bool) {
        let Ok(st) = sys::lstatat(dir, name) else {
            return;
        };
        let kind = if symlink {
            libc::S_IFLNK
        } else {
            libc::S_IFREG
        };
        if st.st_mode & libc::S_IFMT != kind || st.st_dev != self.dev {
            return;
        }
        let now = FileId::read_at(dir, name, 0, st.st_ino);
        let Some(list) = self.wanted.get_mut(&st.st_ino) else {
            return;
        };
        let Some(i) = list
            .iter()
            .position(|w| w.key.symlink == symlink && w.id.same_as(&now) != Same::No)
        else {
            return;
        };
        let w = list.swap_remove(i);
        if w.id.is(&now) {
            self.anchors.found.insert(w.key, child);
        } else {
            self.anchors.unproven.push((child, w.first));
        }
        if list.is_empty() {
            self.wanted.remove(&st.st_ino);
        }
    }
}
