//! The plan: from per-path targets (each path's oldest pre-image in the rewound turns) to the
//! ordered steps a rewind applies. Kept apart so the order of a rewind can be read, and tested,
//! without a folder or a store.
//!
//! Pure: no I/O. It forms the hard-link groups first (`groups::share_hard_links`, pure as well),
//! then drops paths that lie below a target that is not a directory, and sorts removals deepest
//! first and restorations shallowest first.

use super::groups::share_hard_links;
use crate::identity::FileId;
use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use serde::Serialize;
use std::collections::HashSet;

/// One path and the state it must be given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The path.
    pub path: RelPath,
    /// Its state at the start of the target turn.
    pub target: PreImage,
    /// What makes the path "already as it was" (see `MatchRule`).
    #[serde(skip)]
    pub rule: MatchRule,
}

/// When a file found at its path with the recorded bytes and attributes is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchRule {
    /// Whatever inode holds them (a `sed -i` that put the bytes back leaves the new file).
    #[default]
    Content,
    /// Only on the inode recorded: the record's inode was once a hard link of other names, so
    /// older records of those names look for it; a file a rewound turn put there in its place
    /// is written afresh, and the fresh file stands for the recorded inode from then on.
    SameInode,
}

/// A rewind plan: steps in the order they are applied.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    /// Removals, deepest first.
    pub remove: Vec<Step>,
    /// Restorations, shallowest first.
    pub restore: Vec<Step>,
}

impl Plan {
    /// Every step, in application order.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.remove.iter().chain(self.restore.iter())
    }
}

/// Builds the plan from per-path targets, oldest pre-image first (pure: no I/O); a target
/// whose inode is among `once_linked` (inodes any record saw with more than one link) matches
/// only on that inode (`MatchRule::SameInode`).
pub fn plan(targets: Vec<(RelPath, PreImage)>, once_linked: &HashSet<FileId>) -> Plan {
    let targets = share_hard_links(targets);
    // Which paths lie below one that is not a directory at the target time (covered by that
    // one), decided on borrowed paths: a rewind of 100,000 paths holds no second copy of them.
    let covered: Vec<bool> = {
        let non_dir: HashSet<&RelPath> = targets
            .iter()
            .filter(|(_, t)| !matches!(t, PreImage::Dir { .. }))
            .map(|(p, _)| p)
            .collect();
        targets
            .iter()
            .map(|(p, _)| {
                let mut cur = p.parent();
                while let Some(a) = cur {
                    if non_dir.contains(&a) {
                        return true;
                    }
                    cur = a.parent();
                }
                false
            })
            .collect()
    };
    // Each list gets the room it needs and no more: a plan lives through the whole rewind,
    // and a doubled list's slack was a third of it at 100,000 paths.
    let removals = targets
        .iter()
        .zip(&covered)
        .filter(|((_, t), covered)| !**covered && matches!(t, PreImage::Absent))
        .count();
    let kept = covered.iter().filter(|c| !**c).count();
    let mut remove = Vec::with_capacity(removals);
    let mut restore = Vec::with_capacity(kept - removals);
    for ((path, target), covered) in targets.into_iter().zip(covered) {
        if covered {
            continue;
        }
        let rule = match target.file_id() {
            Some(id) if once_linked.contains(&id) => MatchRule::SameInode,
            _ => MatchRule::Content,
        };
        let step = Step { path, target, rule };
        if matches!(step.target, PreImage::Absent) {
            remove.push(step);
        } else {
            restore.push(step);
        }
    }
    remove.sort_by(|a, b| {
        b.path
            .depth()
            .cmp(&a.path.depth())
            .then_with(|| a.path.cmp(&b.path))
    });
    restore.sort_by(|a, b| {
        a.path
            .depth()
            .cmp(&b.path.depth())
            .then_with(|| a.path.cmp(&b.path))
    });
    Plan { remove, restore }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("valid")
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
    fn plan_orders_removals_deepest_first_and_restores_shallowest_first() {
        let p = plan(
            vec![
                (rp("a/b/c"), PreImage::Absent),
                (rp("x"), dir()),
                (rp("a/b"), dir()),
                (rp("x/y/z"), dir()),
                (rp("a/b/c/d"), PreImage::Absent),
                (rp("x/y"), dir()),
            ],
            &HashSet::new(),
        );
        let rm: Vec<String> = p.remove.iter().map(|s| s.path.to_string()).collect();
        assert_eq!(rm, vec!["a/b/c"], "a/b/c/d is covered by removing a/b/c");
        let rs: Vec<String> = p.restore.iter().map(|s| s.path.to_string()).collect();
        assert_eq!(rs, vec!["x", "a/b", "x/y", "x/y/z"]);
    }

    #[test]
    fn paths_below_a_file_target_are_dropped() {
        let file = PreImage::File {
            blob: "0".repeat(64).parse().expect("a blob id"),
            size: 0,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 1,
            nlink: 1,
            fh: None,
            btime: None,
            xattrs: None,
        };
        let p = plan(
            vec![
                (rp("a"), file),
                (rp("a/x"), PreImage::Absent),
                (rp("a/y"), dir()),
            ],
            &HashSet::new(),
        );
        assert_eq!(p.remove.len(), 0);
        assert_eq!(p.restore.len(), 1);
    }
}
