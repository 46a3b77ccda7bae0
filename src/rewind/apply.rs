//! Apply: the verified plan carried out in order, with progress and the report filled in.
//! Removals first, deepest first; then restorations, shallowest first, each hard-link group
//! restored as one inode (its first name restored, relinked to a surviving name where the
//! inode still stands, its other names linked to it); then directory modes, deepest first.
//! This file is the order and the bookkeeping; what a step does to its one path, through
//! descriptors, is in `restore.rs`.
//!
//! I/O: it changes the folder (through `restore.rs`), sets directory modes, and removes the
//! temp files a cut-off run left ([`sweep_temps`]).

use super::Progress;
use super::groups::{GroupKey, group_key};
use super::links::Anchors;
use super::plan::{Plan, Step};
use super::report::{Failure, Report};
use super::resolve::{Parents, cname, open_parent};
use super::restore::{TEMP_PREFIX, link_step, remove_step, restore_step};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};

/// Removes what a rewind cut off by a crash left in the parents of its plan's paths: temp
/// files named `.ckpt-rewind-*` (never directories: those are made at their final name).
pub(super) fn sweep_temps(root: BorrowedFd<'_>, plan: &Plan) {
    let mut parents: HashMap<Option<RelPath>, &RelPath> = HashMap::new();
    for step in plan.steps() {
        parents.entry(step.path.parent()).or_insert(&step.path);
    }
    for child in parents.into_values() {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        let Ok(dir) = child.open_parent(root, flags) else {
            continue;
        };
        for e in sys::read_dir_all(dir.as_fd(), false).unwrap_or_default() {
            if !e.name.starts_with(TEMP_PREFIX.as_bytes()) || e.kind == libc::DT_DIR {
                continue;
            }
            if let Ok(c) = CString::new(e.name) {
                match sys::unlinkat(dir.as_fd(), &c, 0) {
                    Ok(()) => {
                        log::info!(target: "ckpt::rewind", "removed a temp file a cut-off rewind left: {}", c.to_string_lossy())
                    }
                    Err(e) => {
                        log::warn!(target: "ckpt::rewind", "cannot remove the temp file {}: {e}", c.to_string_lossy())
                    }
                }
            }
        }
    }
}

/// Applies `plan` (see the order above), calling `progress` before each step and recording
/// in `report` what changed and what failed. A step that fails is reported and the others
/// still run.
pub(super) fn apply(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    anchors: &Anchors,
    report: &mut Report,
    progress: Progress<'_>,
) {
    let total = plan.remove.len() + plan.restore.len();
    let mut done = 0;
    let tick = |done: &mut usize| {
        if *done > 0 {
            crate::failpoint::hit("rewind-step");
        }
        *done += 1;
        progress(*done, total);
    };
    // Which restorations write is decided before anything changes, as the preview decides it.
    let decided = std::time::Instant::now();
    let writes = super::preview::writes(root, plan, anchors);
    super::log_took("what to write decided", decided);
    // Each step changes only what stands at its own path (and temp names beside it), and says
    // so to `parents`.
    let mut parents = Parents::new(root);
    for step in &plan.remove {
        tick(&mut done);
        let removed = remove_step(&mut parents, &step.path);
        parents.changed(&step.path);
        match removed {
            Ok(true) => {
                report.deleted.push(step.path.clone());
                report.changed.push(step.path.clone());
            }
            Ok(false) => report.unchanged += 1,
            Err(reason) => report.failed.push(Failure {
                path: step.path.to_string(),
                reason,
            }),
        }
    }
    // Hard-link groups: the first path of a captured inode is restored, the others linked to it.
    // Where the inode still stands, proven the same (under a name in the plan or not), the
    // first path is linked to it and rewritten in place, so names the plan does not touch share
    // it again (the anchors were found before anything changed).
    let mut first_of_inode: HashMap<GroupKey, RelPath> = HashMap::new();
    let mut dir_modes: Vec<(RelPath, u32)> = Vec::new();
    for (step, write) in plan.restore.iter().zip(writes) {
        tick(&mut done);
        let result = restore_in_group(
            &mut parents,
            store,
            Decided { step, write },
            anchors,
            &mut first_of_inode,
            &mut dir_modes,
            report,
        );
        parents.changed(&step.path);
        match result {
            Ok(true) => {
                report.restored.push(step.path.clone());
                report.changed.push(step.path.clone());
            }
            Ok(false) => report.unchanged += 1,
            Err(reason) => report.failed.push(Failure {
                path: step.path.to_string(),
                reason,
            }),
        }
    }
    anchors.report_unrestored(report);
    set_dir_modes(root, dir_modes, report);
    // Only now is it known which recorded inodes lost their last name: one the plan restored
    // as a fresh file while the inode still had a name elsewhere (a name a later step
    // replaced) is gone by the end all the same, and records of its other names must follow.
    report.renewed.retain(|r| r.was.is_gone(root));
}

/// A restoration and whether the run must write it (see [`super::preview::writes`]).
#[derive(Clone, Copy)]
struct Decided<'a> {
    step: &'a Step,
    write: Option<bool>,
}

/// Restores one step, as a member of its hard-link group when its target has more than one
/// link: the group's first path (noted in `first_of_inode`) is linked to the group's anchor
/// when one stands elsewhere and then restored; every later path is linked to the first.
fn restore_in_group(
    parents: &mut Parents<'_>,
    store: &Store,
    decided: Decided<'_>,
    anchors: &Anchors,
    first_of_inode: &mut HashMap<GroupKey, RelPath>,
    dir_modes: &mut Vec<(RelPath, u32)>,
    report: &mut Report,
) -> Result<bool, String> {
    let step = decided.step;
    let group = group_key(&step.target).filter(|_| step.target.nlink() > 1);
    match group {
        Some(key) => match first_of_inode.get(&key) {
            Some(first) => link_step(parents, first, &step.path),
            None => {
                first_of_inode.insert(key.clone(), step.path.clone());
                let relinked = match anchors.found.get(&key) {
                    Some(anchor) if *anchor != step.path => {
                        report.changed.push(anchor.clone());
                        link_step(parents, anchor, &step.path).map(drop)
                    }
                    _ => Ok(()),
                };
                relinked.and_then(|()| restore_counted(parents, store, decided, dir_modes, report))
            }
        },
        None => restore_counted(parents, store, decided, dir_modes, report),
    }
}

/// [`restore_step`], adding the bytes of a file it wrote to the report's count.
fn restore_counted(
    parents: &mut Parents<'_>,
    store: &Store,
    decided: Decided<'_>,
    dir_modes: &mut Vec<(RelPath, u32)>,
    report: &mut Report,
) -> Result<bool, String> {
    let Decided { step, write } = decided;
    let changed = restore_step(
        parents,
        store,
        step,
        write == Some(true),
        dir_modes,
        &mut report.renewed,
    )?;
    if changed {
        report.bytes += written_bytes(&step.target);
    }
    Ok(changed)
}

/// The bytes restoring `target` writes: a file's size, nothing for any other kind.
pub(super) fn written_bytes(target: &PreImage) -> u64 {
    match target {
        PreImage::File { size, .. } => *size,
        _ => 0,
    }
}

/// Directory modes go last, deepest first, so a read-only directory never blocks its children.
fn set_dir_modes(root: BorrowedFd<'_>, mut dir_modes: Vec<(RelPath, u32)>, report: &mut Report) {
    dir_modes.sort_by_key(|d| std::cmp::Reverse(d.0.depth()));
    for (path, mode) in dir_modes {
        let r = open_parent(root, &path).and_then(|parent| {
            let fd = sys::openat(
                parent.as_fd(),
                &cname(&path),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(|e| e.to_string())?;
            sys::fchmod_any(fd.as_fd(), mode).map_err(|e| e.to_string())
        });
        if let Err(reason) = r {
            report.failed.push(Failure {
                path: path.to_string(),
                reason: format!("cannot set mode: {reason}"),
            });
        }
    }
}
