//! Save for undo: before a rewind changes anything, the state now of every path it will touch
//! (and of everything below them, and of the surviving links it rewrites in place) is read and
//! journaled. A whole rewind saves it for its undo (captures with `undo_of`, whatever their
//! size); a partial rewind captures it for the current turn, like any other change. Kept apart
//! because this is the stage that makes a rewind undoable, and its one rule is that a failure
//! here refuses the rewind with nothing changed.
//!
//! I/O: it reads the folder (never changes it), stores blobs and appends to the journal.

use super::plan::Plan;
use super::report::{Failure, RewindError};
use super::resolve::{Parents, cname};
use crate::capture::{read_preimage, walk_tree};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{PreImage, Record};
use crate::sys::Errno;
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// The state now of every path `plan` touches and of everything below them, except the paths
/// `skip` names: what a rewind saves for its undo, or a partial rewind captures for the current
/// turn, before it changes anything. A path whose parent is not there, not a directory or a
/// symlink has nothing at it in the folder (a rewind never writes through such a parent): it
/// is saved as absent; any other failure refuses the rewind before anything changes.
fn read_current(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    extra: &[RelPath],
    skip: &dyn Fn(&RelPath) -> bool,
    max_blob: u64,
) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
    let mut records = Vec::new();
    let mut seen: HashSet<RelPath> = HashSet::new();
    let mut problems = Vec::new();
    // Skipped targets are never restored, so never changed by this rewind: nothing to save (a
    // file over --max-blob would otherwise be stored whole here).
    let paths = plan
        .steps()
        .filter(|s| !matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| &s.path)
        .chain(extra.iter());
    // The saves' small blobs are written in batches: the caller journals the saves only after
    // this returns, once they are all on disk.
    let held = store.blobs().hold_pack_appends();
    // Nothing changes while this reads, so the directory last opened stays good.
    let mut parents = Parents::new(root);
    for path in paths {
        let parent = match parents.raw(path) {
            Ok(p) => p,
            Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV)) => {
                // Nothing stands at the path now, and the rewind may create it (below a file
                // it turns back into a directory, say): "absent" is its state now, saved so
                // that rewinding the current turn (or the undo) removes it again.
                if !skip(path) && seen.insert(path.clone()) {
                    records.push((path.clone(), PreImage::Absent));
                }
                continue;
            }
            Err(e) => {
                problems.push(Failure {
                    path: path.to_string(),
                    reason: format!("cannot open its parent to save what is there: {e}"),
                });
                continue;
            }
        };
        let name = cname(path);
        let blobs = store.blobs();
        let mut at = None;
        let walked = walk_tree(parent, &name, path, &mut |p, dir, n| {
            if skip(p) || seen.contains(p) {
                return Ok(None);
            }
            at = Some(p.clone());
            let pre = read_preimage(blobs, dir, n, max_blob)?;
            let is_dir = matches!(pre, PreImage::Dir { .. });
            records.push((p.clone(), pre));
            seen.insert(p.clone());
            Ok(Some(is_dir))
        });
        if let Err(e) = walked {
            problems.push(Failure {
                path: at.unwrap_or_else(|| path.clone()).to_string(),
                reason: format!("cannot save what is there before changing it: {e}"),
            });
        }
    }
    if let Some(Err(e)) = held.map(|h| h.finish()) {
        problems.push(Failure {
            path: ".ckpt/blobs/packs".into(),
            reason: format!("cannot store what the rewind saves for its undo: {e}"),
        });
    }
    if problems.is_empty() {
        Ok(records)
    } else {
        Err(RewindError::Refused(problems))
    }
}

/// What a rewind to `to` must save before it changes anything, whatever its size (an undo must
/// be exact); paths a cut-off run of the same rewind saved already keep that first save.
pub(super) fn saves_for_undo(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    extra: &[RelPath],
) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
    let already: HashSet<&RelPath> = store
        .index()
        .unfinished_saved
        .iter()
        .map(|c| &c.path)
        .collect();
    read_current(root, store, plan, extra, &|p| already.contains(p), u64::MAX)
}

/// Journals `saves` as captures of turn `to` that the undo of the rewind begun at `begin`
/// restores (records with `undo_of`).
pub(super) fn record_saves(
    store: &mut Store,
    saves: Vec<(RelPath, PreImage)>,
    to: Turn,
    begin: Seq,
) -> Result<(), RewindError> {
    if !saves.is_empty() {
        // Handed over one by one: each save's path and pre-image move into its journal line
        // and the index, never copied into a second list first, and the list's memory is
        // given back as the index's list of them grows.
        let records = super::drain_releasing(saves).map(|(path, pre)| Record::Capture {
            turn: to,
            path,
            pre,
            undo_of: Some(begin),
            pid: None,
            comm: None,
        });
        store.append_all(records).map_err(RewindError::Store)?;
    }
    Ok(())
}

/// What a partial rewind changes, read before it changes it: `(captures, saves)`. A path the
/// current capture epoch has not captured is captured for the current turn, like any other
/// change (under `max_blob`); one it has is saved for the undo (whatever its size), because its
/// capture holds an older state. A run cut off by a crash kept what it read: those paths are
/// left out. `extra` are the surviving links outside the plan it rewrites in place.
#[allow(clippy::type_complexity)]
pub(super) fn read_for_partial(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    extra: &[RelPath],
    max_blob: u64,
) -> Result<(Vec<(RelPath, PreImage)>, Vec<(RelPath, PreImage)>), RewindError> {
    let index = store.index();
    let resumed = index.ops.unfinished.is_some();
    let captured = &index.captured_now;
    let saved: HashSet<&RelPath> = index.unfinished_saved.iter().map(|c| &c.path).collect();
    if resumed {
        // The epoch restarted when the cut-off run began: what it captured or saved is kept.
        let skip = |p: &RelPath| captured.contains_key(p) || saved.contains(p);
        let captures = read_current(root, store, plan, extra, &skip, max_blob)?;
        return Ok((captures, Vec::new()));
    }
    let captures = read_current(
        root,
        store,
        plan,
        extra,
        &|p| captured.contains_key(p),
        max_blob,
    )?;
    let saves = read_current(
        root,
        store,
        plan,
        extra,
        &|p| !captured.contains_key(p),
        u64::MAX,
    )?;
    Ok((captures, saves))
}
