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
//!    the rewind is refused with nothing changed, naming what to free (the [`Space`] it
//!    measures, and the refusal's words, are in `room.rs`).
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
//!    stays open (with `--agent`, who changed what: `agent.rs` splits it). The journal
//!    records that close it (the files it recreated, then `RewindDone` unless a failure may
//!    pass on a second run) are written by `close.rs`.
//!
//! A run carries its folder, store, limits, progress and mode as one `Rewinder`
//! (`rewinder.rs`): its methods are the kinds of run (whole, paths, agent; undo and redo in
//! `undo.rs`), and every run that changes the folder ends in its one `carry_out` (room, saves,
//! journal, apply, close), framed as a whole rewind, a partial one or an undo/redo.
//!
//! `op_restore.rs` adds `op restore ID` to the `Rewinder`: every path the journal recorded
//! since an operation ended given that state, as a partial rewind gives its paths theirs.
//!
//! `resolve.rs` opens the directory holding a path, for every stage; `parts.rs` splits a
//! large rewind's saves, its verification and the runs of independent files it restores over
//! the machine's cores; `times.rs` logs where a run's time went. What is asked ([`Request`],
//! [`Scope`], [`Mode`], [`Conflicts`], [`Direction`]) is in `request.rs`.
//!
//! The files form no cycle: `request.rs`, `room.rs`, `report.rs` and `step.rs` hold the types
//! the stages share, below them; the stages use them and each other downwards; `rewinder.rs` (with
//! `undo.rs`, which adds methods to it) is above every stage, and this file above it. This
//! file holds only the entry point [`run`] and re-exports the public types of the stages, so
//! every path `crate::rewind::X` stays as it was.

mod agent;
mod apply;
mod close;
mod groups;
mod links;
mod merge;
mod op_restore;
mod parts;
mod plan;
mod preview;
mod renewals;
mod report;
mod request;
mod resolve;
mod restore;
mod rewinder;
mod room;
mod save;
mod space;
mod step;
mod times;
mod undo;
mod unlock;
mod verify;

pub use apply::Progress;
pub use plan::{Plan, Step, plan};
pub use report::{
    AgentSplit, ConversationBack, FailedAt, Failure, PathActors, Report, ReportJson, RewindError,
    Summary,
};
pub use request::{AgentScope, Agents, Conflicts, Direction, Fields, Mode, Request, Scope};
pub use restore::remove_tree;
pub use room::{SizedPath, Space};
pub(crate) use times::log_took;
pub use undo::{complete_unfinished, undo_redo};
pub use verify::verify;

use crate::store::Store;
use rewinder::{Limits, Rewinder};
use std::os::fd::BorrowedFd;

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
        Request::RestoreOp { id, .. } => rewinder.restore_op(*id),
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
            scope: Scope::Agent(agent),
            ..
        } => rewinder.agent(*to, agent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;
    use crate::relpath::RelPath;
    use crate::store::journal::{PreImage, Record};
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
                turn: Turn::new(2),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("turn");
        let long = "n".repeat(300);
        let paths = ["big", "small", "sub", "sub/inner", long.as_str()];
        for p in paths {
            store
                .append(Record::Capture {
                    turn: Turn::new(2),
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
                    to: Turn::new(2),
                    scope: Scope::Paths(asked.clone()),
                    mode: Mode::Apply,
                }
            } else {
                Request::folder(Turn::new(2))
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
        assert_eq!(store.index().current_turn(), Turn::new(2));
        assert_eq!(store.index().plan_targets(Turn::new(2)).len(), paths.len());
    }
}
