//! Apply: the verified plan carried out in order, with progress and the report filled in.
//! Removals first, deepest first; then restorations, shallowest first, each hard-link group
//! restored as one inode (its first name restored, relinked to a surviving name where the
//! inode still stands, its other names linked to it); then directory modes, deepest first.
//! A long run of restorations that cannot affect one another (regular files of one inode
//! each, at one depth: `independent_files`) is carried out in parts on several threads, with
//! the result and the report of carrying it out in order.
//! This file is the order and the bookkeeping; what a step does to its one path, through
//! descriptors, is in `restore.rs`.
//!
//! I/O: it changes the folder (through `restore.rs`), sets directory modes, and removes the
//! temp files a cut-off run left ([`sweep_temps`]).

use super::groups::{GroupKey, group_key};
use super::links::Anchors;
use super::plan::{Plan, Step};
use super::report::{Failure, Report};
use super::resolve::{Parents, cname, open_parent};
use super::restore::{TEMP_PREFIX, link_step, remove_step, restore_step};
use super::step::{Cause, Op, Outcome, Rewrite, StepError, StepResult, sys_err};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};

/// Called with (steps done, steps in all) as a rewind applies its plan.
pub type Progress<'a> = &'a dyn Fn(usize, usize);

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
/// still run. `writes` says which restorations are rewritten whatever stands there, decided
/// before anything changed as the preview decides it ([`super::preview::decide`]).
pub(super) fn apply(
    root: BorrowedFd<'_>,
    store: &Store,
    (plan, writes): (&Plan, Vec<Rewrite>),
    anchors: &Anchors,
    report: &mut Report,
    progress: Progress<'_>,
) {
    let steps = Steps {
        done: 0.into(),
        total: plan.remove.len() + plan.restore.len(),
    };
    // Each step changes only what stands at its own path (and temp names beside it), and says
    // so to `parents`.
    let unlocked = super::unlock::Unlocked::open_up(root, plan);
    let mut parents = Parents::new(root);
    for step in &plan.remove {
        progress(steps.tick(), steps.total);
        let removed = remove_step(&mut parents, &step.path);
        parents.changed(&step.path);
        record(report, step, removed, |r| &mut r.deleted);
    }
    let decided: Vec<Decided<'_>> = plan
        .restore
        .iter()
        .zip(writes)
        .map(|(step, rewrite)| Decided { step, rewrite })
        .collect();
    let restorer = Restorer {
        root,
        store,
        anchors,
        steps: &steps,
        progress,
    };
    let dir_modes = restorer.all(&decided, parents, report);
    anchors.report_unrestored(report);
    unlocked.close();
    set_dir_modes(root, dir_modes, report);
    // Only now is it known which recorded inodes lost their last name: one the plan restored
    // as a fresh file while the inode still had a name elsewhere (a name a later step
    // replaced) is gone by the end all the same, and records of its other names must follow.
    let linked = store.index().linked_identities();
    super::renewals::keep_proven_gone(root, &linked, &mut report.renewed);
}

/// Steps done, for the failpoint and the progress a rewind reports, shared by the threads that
/// apply in parts.
struct Steps {
    done: std::sync::atomic::AtomicUsize,
    total: usize,
}

impl Steps {
    /// One more step begins: the crash point between two steps, then how many have begun.
    fn tick(&self) -> usize {
        let before = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if before > 0 {
            crate::failpoint::hit("rewind-step");
        }
        before + 1
    }
}

/// The restorations of a plan, in order (see the order above).
struct Restorer<'a> {
    root: BorrowedFd<'a>,
    store: &'a Store,
    anchors: &'a Anchors,
    steps: &'a Steps,
    progress: Progress<'a>,
}

impl<'a> Restorer<'a> {
    /// Restores every step of `decided`, each long run of independent files in parts; returns
    /// the directories' modes, to be set last.
    fn all(
        &self,
        decided: &[Decided<'_>],
        mut parents: Parents<'a>,
        report: &mut Report,
    ) -> Vec<(RelPath, u32)> {
        // Hard-link groups: the first path of a captured inode is restored, the others linked
        // to it. Where the inode still stands, proven the same (under a name in the plan or
        // not), the first path is linked to it and rewritten in place, so names the plan does
        // not touch share it again (the anchors were found before anything changed).
        let mut first_of_inode: HashMap<GroupKey, RelPath> = HashMap::new();
        let mut dir_modes: Vec<(RelPath, u32)> = Vec::new();
        let mut next = 0;
        while next < decided.len() {
            let run = &decided[next..next + independent_files(&decided[next..])];
            let parts = super::parts::parts_for(run.len());
            if parts > 1 {
                let results = self.files_in_parts(run, parts, report);
                for (d, result) in run.iter().zip(results) {
                    record(report, d.step, result, |r| &mut r.restored);
                }
                // A file restored over a directory removed it: nothing kept open may lead there.
                parents = Parents::new(self.root);
                next += run.len();
                continue;
            }
            // Too few to split: one by one, as any other restoration.
            for &d in &decided[next..next + run.len().max(1)] {
                (self.progress)(self.steps.tick(), self.steps.total);
                let result = restore_in_group(
                    &mut parents,
                    self.store,
                    d,
                    self.anchors,
                    &mut first_of_inode,
                    &mut dir_modes,
                    report,
                );
                parents.changed(&d.step.path);
                record(report, d.step, result, |r| &mut r.restored);
            }
            next += run.len().max(1);
        }
        dir_modes
    }

    /// Restores the independent files `run` (see [`independent_files`]) in `parts` parts, each
    /// part through its own parents; the results in `run`'s order. The calling thread's part
    /// reports the progress of all of them; the files recreated are added to `report.renewed`
    /// in `run`'s order, and the bytes written to `report.bytes`.
    fn files_in_parts(
        &self,
        run: &[Decided<'_>],
        parts: usize,
        report: &mut Report,
    ) -> Vec<StepResult<Outcome>> {
        let (root, store, steps) = (self.root, self.store, self.steps);
        let part = |part: &[Decided<'_>], progress: Option<Progress<'_>>| {
            let mut parents = Parents::new(root);
            let mut renewed = Vec::new();
            let mut results = Vec::with_capacity(part.len());
            for d in part {
                let done = steps.tick();
                if let Some(progress) = progress {
                    progress(done, steps.total);
                }
                let mut no_dirs = Vec::new();
                let result = restore_step(
                    &mut parents,
                    store,
                    d.step,
                    d.rewrite,
                    &mut no_dirs,
                    &mut renewed,
                );
                parents.changed(&d.step.path);
                results.push(result);
            }
            (results, renewed)
        };
        let progress = self.progress;
        let done_parts = super::parts::in_parts_first_here(
            run,
            parts,
            |first| part(first, Some(progress)),
            &|other| part(other, None),
        );
        log::info!(target: "ckpt::rewind", "restored {} files in {} parts, one thread each", run.len(), done_parts.len());
        let mut results = Vec::with_capacity(run.len());
        for (part_results, renewed) in done_parts {
            results.extend(part_results);
            report.renewed.extend(renewed);
        }
        for (d, result) in run.iter().zip(&results) {
            if matches!(result, Ok(Outcome::Changed)) {
                report.bytes += written_bytes(&d.step.target);
            }
        }
        results
    }
}

/// Notes in `report` what a step did: a change goes to the list `done` picks (deleted or
/// restored) and to the changed paths.
fn record(
    report: &mut Report,
    step: &Step,
    result: StepResult<Outcome>,
    done: fn(&mut Report) -> &mut Vec<RelPath>,
) {
    match result {
        Ok(Outcome::Changed) => {
            done(report).push(step.path.clone());
            report.changed.push(step.path.clone());
        }
        Ok(Outcome::Unchanged) => report.unchanged += 1,
        Err(e) => fail(report, &step.path, &e),
    }
}

/// Notes in `report` that `path` failed with `e`: the report keeps the reason as text, as it
/// is sent; the log keeps what was being done and the errno.
fn fail(report: &mut Report, path: &RelPath, e: &StepError) {
    log::debug!(target: "ckpt::rewind", "{path}: {:?} failed ({}): {e}", e.op, e.errno());
    report.failed.push(Failure {
        path: path.into(),
        reason: e.to_string(),
    });
}

/// How many of the first `decided` restorations can be carried out in any order, on several
/// threads, with the result (and report) of carrying them out in order: regular files of one
/// inode each (no hard-link group, so no link between them and no anchor), at one depth (none
/// lies below another: a file restored over a directory removes nothing another of them
/// needs), and no two recording the same inode (only a damaged journal says so; in order, the
/// later would win). Each then touches only its own path, temp names beside it, and the inode
/// it records, which no other of them writes; whether one is left as it is was decided before
/// anything changed, and nothing in the run can change that answer (links only go away).
fn independent_files(decided: &[Decided<'_>]) -> usize {
    let Some(first) = decided.first() else {
        return 0;
    };
    let depth = first.step.path.depth();
    let mut inodes = std::collections::HashSet::new();
    decided
        .iter()
        .take_while(|d| {
            let target = &d.step.target;
            matches!(target, PreImage::File { nlink, .. } if *nlink <= 1)
                && d.step.path.depth() == depth
                && target.file_id().is_none_or(|id| inodes.insert(id))
        })
        .count()
}

/// A restoration and whether the run must write it (see [`super::preview::decide`]).
#[derive(Clone, Copy)]
struct Decided<'a> {
    step: &'a Step,
    rewrite: Rewrite,
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
) -> StepResult<Outcome> {
    let step = decided.step;
    let group = group_key(&step.target).filter(|_| step.target.nlink() > 1);
    match group {
        // A later name is linked to the first, and counted restored whether or not it was
        // linked already, as the preview counts it.
        Some(key) => match first_of_inode.get(&key) {
            Some(first) => link_step(parents, first, &step.path).map(|_| Outcome::Changed),
            None => {
                first_of_inode.insert(key.clone(), step.path.clone());
                let relinked = match anchors.found.get(&key) {
                    Some(anchor) if *anchor != step.path => {
                        report.changed.push(anchor.clone());
                        link_step(parents, anchor, &step.path)
                    }
                    _ => Ok(Outcome::Unchanged),
                };
                // Relinked to the anchor, the path changed even when its content then
                // matches (the anchor holds the group's inode as it was).
                relinked.and_then(|linked| {
                    restore_counted(parents, store, decided, dir_modes, report)
                        .map(|written| written.or(linked))
                })
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
) -> StepResult<Outcome> {
    let Decided { step, rewrite } = decided;
    let outcome = restore_step(
        parents,
        store,
        step,
        rewrite,
        dir_modes,
        &mut report.renewed,
    )?;
    if outcome.changed() {
        report.bytes += written_bytes(&step.target);
    }
    Ok(outcome)
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
        if let Err(e) = set_dir_mode(root, &path, mode) {
            fail(report, &path, &e);
        }
    }
}

/// Gives the directory at `path` its `mode`; every failure, opening its parent included, is
/// one of setting its mode.
fn set_dir_mode(root: BorrowedFd<'_>, path: &RelPath, mode: u32) -> StepResult<()> {
    let parent = open_parent(root, path).map_err(|e| match e.cause {
        Cause::Parent(p) => StepError::new(Op::SetMode, Cause::Parent(p)).on(path),
        _ => e,
    })?;
    let fd = sys::openat(
        parent.as_fd(),
        &cname(path),
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .map_err(sys_err(Op::SetMode))?;
    sys::fchmod_any(fd.as_fd(), mode).map_err(|e| sys_err(Op::SetMode)(e).on(path))
}
