//! Rewind: a pure plan from the journal's targets, verified before anything changes, then
//! applied through descriptors that never follow a symlink, with a report.
//!
//! Order of application: paths that must not exist are removed deepest first; then every
//! other path is restored shallowest first, so parents exist before children; directory modes
//! are set last, deepest first, so a read-only directory never blocks its own children.
//! A rewind saves what it overwrites or deletes (records with `undo_of`) before changing it.
//!
//! The stages, in the order [`run`] runs them for a whole or a partial rewind, and the files
//! that hold them:
//!
//! 1. **plan** (`plan.rs`, pure): the journal's targets become a [`Plan`]; names that were one
//!    inode share one target (`links.rs`).
//! 2. **verify** (`verify.rs`): every path valid, every blob present and whole, or the rewind
//!    is refused with nothing changed.
//!    Then **room** (`space.rs`): what it will write is decided (`preview.rs`, as its dry run
//!    decides it) and the space its saves and writes take is compared with the space free, or
//!    the rewind is refused with nothing changed, naming what to free.
//! 3. **save for undo** (`save.rs`): the surviving links of hard-link groups are found
//!    (`links.rs`), then what the rewind will overwrite or delete is read and journaled —
//!    for the undo (a whole rewind, between `RewindBegin` and the changes) or for the current
//!    turn (a partial rewind).
//! 4. **apply** (`apply.rs` for the order, `restore.rs` for each path): removals,
//!    restorations and links through descriptors, directory modes last. Each step ends in an
//!    outcome (changed or unchanged) or a `StepError` saying what it was doing, on which path,
//!    with which errno (`step.rs`); the report keeps its text as the failure's reason.
//!    A dry run stops after verification and previews instead (`preview.rs`): each step of the
//!    plan checked against the folder as it is now, by the rules `apply.rs` and `restore.rs`
//!    follow, so its report lists what the run would change and what it could not restore.
//! 5. **report** (`report.rs`): what was restored, deleted or failed, and whether the rewind
//!    stays open. The journal records that close it (the files it recreated, then
//!    `RewindDone` unless a failure may pass on a second run) are written by this file.
//!
//! A run carries its folder, store, limits, progress and mode as one `Rewinder`
//! (`rewinder.rs`): its methods are the kinds of run (whole, paths, agent; undo and redo in
//! `undo.rs`), and every run that changes the folder ends in its one `carry_out` (room, saves,
//! journal, apply, close), framed as a whole rewind, a partial one or an undo/redo.
//!
//! `resolve.rs` opens the directory holding a path, for every stage; `parts.rs` splits a
//! large rewind's saves, its verification and the runs of independent files it restores over
//! the machine's cores. This file holds the entry point [`run`], the journal records that close
//! a rewind, and re-exports the public types of the stages, so every path `crate::rewind::X`
//! stays as it was.

mod agent;
mod apply;
mod groups;
mod links;
mod parts;
mod plan;
mod preview;
mod renewals;
mod report;
mod request;
mod resolve;
mod restore;
mod rewinder;
mod save;
mod space;
mod step;
mod undo;
mod unlock;
mod verify;

pub use agent::{AgentSplit, Conflicts, PathActors};
pub use plan::{Plan, Step, plan};
pub use report::{FailedAt, Failure, Report, ReportJson, RewindError, Summary};
pub use request::{Mode, Request, Scope};
pub use restore::remove_tree;
pub use space::{SizedPath, Space};
pub use undo::{Direction, complete_unfinished, undo_redo};
pub use verify::verify;

use crate::store::Store;
use crate::store::journal::{PreImage, Record};
use rewinder::{Limits, Rewinder};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// Called with (steps done, steps in all) as a rewind applies its plan.
pub type Progress<'a> = &'a dyn Fn(usize, usize);

/// Where a rewind's time went, stage by stage, logged once at its end (`RUST_LOG=debug`): the
/// figures docs/BENCHMARKS.md reads a large rewind's cost from.
struct StageTimes {
    last: std::time::Instant,
    stages: Vec<(&'static str, std::time::Duration)>,
}

impl StageTimes {
    fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Ends the stage `name` (it began where the previous one ended).
    fn end(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.stages.push((name, now - self.last));
        self.last = now;
    }

    fn log(&self, steps: usize) {
        if log::log_enabled!(target: "ckpt::rewind", log::Level::Debug) {
            let stages: Vec<String> = self
                .stages
                .iter()
                .map(|(n, d)| format!("{n} {}", millis(*d)))
                .collect();
            log::debug!(target: "ckpt::rewind", "{steps} steps: {}", stages.join(", "));
        }
    }
}

/// Logs (at debug, with the stage times above) that `what` took the time since `since`: the
/// parts of a rewind outside its stages (deciding what to write, the mount's refresh).
pub(crate) fn log_took(what: &str, since: std::time::Instant) {
    log::debug!(target: "ckpt::rewind", "{what} in {}", millis(since.elapsed()));
}

fn millis(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Runs `req` on the folder behind `root` with its open store; `max_blob` bounds what a
/// partial rewind captures for the current turn (a whole rewind, and `rewind --undo`, complete
/// a partial rewind cut off by a crash under the default bound). The caller must hold back
/// every other mutation of the folder while this runs.
pub fn run(
    root: BorrowedFd<'_>,
    store: &mut Store,
    req: &Request,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let limits = if req.whole() {
        Limits::default()
    } else {
        Limits { max_blob }
    };
    let mut rewinder = Rewinder::new(root, store, limits, progress, req.mode());
    match req {
        Request::UndoLast { .. } => rewinder.undo_last(),
        Request::To {
            to,
            scope: Scope::Folder,
            ..
        } => rewinder.whole(*to),
        Request::To {
            to,
            scope: Scope::Paths(paths),
            ..
        } => rewinder.paths(*to, paths),
        Request::To {
            to,
            scope: Scope::Agent(conflicts),
            ..
        } => rewinder.agent(*to, *conflicts),
    }
}

/// What a report says the run changed, as the operation log keeps it.
fn counts_of(report: &Report) -> crate::store::ops::OpCounts {
    crate::store::ops::OpCounts {
        restored: report.restored.len() as u64,
        deleted: report.deleted.len() as u64,
        failed: report.failed.len() as u64,
    }
}

/// Ends a rewind (or an operation) after its apply stage: journals the files it recreated,
/// then closes it with the record `close` makes of its counts (`RewindDone` or `OpDone`),
/// unless a failure in the report may pass on a second run: then it stays open and the report
/// says it is unfinished. The plan is let go of first: it holds a copy of every target's
/// pre-image, and the index's map of renewals, the last large thing a rewind of a whole
/// recreated tree builds, would otherwise grow beside it.
fn finish(
    store: &mut Store,
    plan: Plan,
    report: &mut Report,
    close: impl FnOnce(Option<crate::store::ops::OpCounts>) -> Record,
) -> Result<(), RewindError> {
    let may_pass = failures_may_pass(&plan, report);
    drop(plan);
    record_renewals(store, report)?;
    if may_pass {
        report.unfinished = true;
        return Ok(());
    }
    store
        .append(close(Some(counts_of(report))))
        .map_err(RewindError::Store)?;
    Ok(())
}

/// Whether a failure in `report` may pass on a second run. A pre-image that was never stored
/// fails every time; anything else (a parent swapped for a symlink meanwhile, an I/O error)
/// may succeed on a second run. Such a rewind stays open, its turns in the index, so that
/// running it again completes it instead of leaving a mix.
fn failures_may_pass(plan: &Plan, report: &Report) -> bool {
    let permanent: HashSet<FailedAt> = plan
        .steps()
        .filter(|s| matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| FailedAt::Path(s.path.clone()))
        .chain(report.permanent.iter().cloned())
        .collect();
    report.failed.iter().any(|f| !permanent.contains(&f.path))
}

/// Records the files the rewind recreated for records that carry an identity, so those records
/// name the new files from now on (see [`crate::identity::Renewal`]).
fn record_renewals(store: &mut Store, report: &mut Report) -> Result<(), RewindError> {
    if report.renewed.is_empty() {
        return Ok(());
    }
    // In records of at most `RENEWALS_PER_RECORD`, written in the journal's usual batches: a
    // rewind that recreated a whole tree (every file of an `rm -rf`) would otherwise encode
    // one line holding every identity, 9 MB for the Linux tree, at the rewind's peak.
    // The list is let go of as it is written: it would otherwise stay whole beside the
    // index's map of them while that fills.
    let mut ids = drain_releasing(std::mem::take(&mut report.renewed));
    let records = std::iter::from_fn(move || {
        let chunk: Vec<_> = ids.by_ref().take(RENEWALS_PER_RECORD).collect();
        (!chunk.is_empty()).then_some(Record::Renewed { ids: chunk })
    });
    store.append_all(records).map_err(RewindError::Store)?;
    Ok(())
}

/// The items of `list` in order, its memory given back as they are taken (every
/// [`RELEASE_EVERY`] items). A rewind hands its large lists (the saves, the renewals) to the
/// journal, and the index builds its own copy of each as they are applied: consumed whole,
/// a list stays allocated beside that copy until the last item is taken.
fn drain_releasing<T>(mut list: Vec<T>) -> impl Iterator<Item = T> {
    // Taken from the end, where taking is free and the room behind can be given back.
    list.reverse();
    let mut taken = 0usize;
    std::iter::from_fn(move || {
        let item = list.pop()?;
        taken += 1;
        if taken.is_multiple_of(RELEASE_EVERY) {
            list.shrink_to_fit();
        }
        Some(item)
    })
}

/// How many items [`drain_releasing`] takes between two releases of memory.
const RELEASE_EVERY: usize = 4096;

/// How many renewals one journal record holds at most (about 100 KB of JSON).
const RENEWALS_PER_RECORD: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;
    use crate::relpath::RelPath;
    use std::collections::BTreeMap;
    use std::os::fd::AsFd;

    /// Every file and directory below `dir`, with the bytes of each file.
    fn bytes_below(dir: &std::path::Path) -> BTreeMap<String, Option<Vec<u8>>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir") {
                let p = e.expect("entry").path();
                let rel = p.strip_prefix(dir).expect("below").display().to_string();
                if p.is_dir() {
                    out.insert(rel, None);
                    stack.push(p);
                } else {
                    out.insert(rel, Some(std::fs::read(&p).expect("read")));
                }
            }
        }
        out
    }

    #[test]
    fn a_rewind_refused_while_saving_leaves_nothing_in_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut store = Store::for_test(root.as_fd()).expect("store");
        // Turn 2 created these paths; the last one's name is too long for any filesystem, so
        // saving what stands there fails after the others were stored (a large file as a
        // loose blob in a new shard, small ones in the pack).
        store
            .append(Record::Turn {
                turn: Turn(2),
                label: None,
            })
            .expect("turn");
        let long = "n".repeat(300);
        let paths = ["big", "small", "sub", "sub/inner", long.as_str()];
        for p in paths {
            store
                .append(Record::Capture {
                    turn: Turn(2),
                    path: RelPath::new(p.as_bytes()).expect("path"),
                    pre: PreImage::Absent,
                    undo_of: None,
                    pid: None,
                    comm: None,
                })
                .expect("capture");
        }
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("big"), &big).expect("write");
        std::fs::write(dir.path().join("small"), "small\n").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/inner"), "inner\n").expect("write");
        let store_dir = dir.path().join(".ckpt");
        let before = bytes_below(&store_dir);
        let asked: Vec<RelPath> = paths
            .iter()
            .map(|p| RelPath::new(p.as_bytes()).expect("path"))
            .collect();
        let none = |_: usize, _: usize| {};
        for partial in [false, true] {
            let req = if partial {
                Request::To {
                    to: Turn(2),
                    scope: Scope::Paths(asked.clone()),
                    mode: Mode::Apply,
                }
            } else {
                Request::folder(Turn(2))
            };
            let r = run(root.as_fd(), &mut store, &req, u64::MAX, &none);
            match r {
                Err(RewindError::Refused(problems)) => {
                    assert_eq!(problems.len(), 1, "{problems:?}");
                    assert_eq!(problems[0].path.to_string(), long);
                }
                other => panic!(
                    "partial {partial}: not refused: {:?}",
                    other.map(|r| r.ok())
                ),
            }
            assert_eq!(bytes_below(&store_dir), before, "partial {partial}");
            assert_eq!(std::fs::read(dir.path().join("big")).expect("read"), big);
            assert!(store.blobs().list().expect("list").is_empty());
        }
        // What the store holds replays as it was: turn 2 current, its captures in place.
        drop(store);
        let store = Store::reopen_for_test(root.as_fd()).expect("reopen");
        assert_eq!(store.index().current_turn(), Turn(2));
        assert_eq!(store.index().plan_targets(Turn(2)).len(), paths.len());
    }

    #[test]
    fn drain_releasing_yields_every_item_in_order() {
        for n in [
            0,
            1,
            RELEASE_EVERY - 1,
            RELEASE_EVERY,
            RELEASE_EVERY + 1,
            10_000,
        ] {
            let list: Vec<usize> = (0..n).collect();
            let out: Vec<usize> = drain_releasing(list).collect();
            assert_eq!(out, (0..n).collect::<Vec<_>>(), "{n} items");
        }
        // Taken in part, what is left is the rest, in order.
        let mut it = drain_releasing((0..10_000).collect::<Vec<usize>>());
        let first: Vec<usize> = it.by_ref().take(5_000).collect();
        assert_eq!(first, (0..5_000).collect::<Vec<_>>());
        assert_eq!(it.next(), Some(5_000));
    }
}
