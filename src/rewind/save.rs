//! Save for undo: before a rewind changes anything, the state now of every path it will touch
//! (and of everything below them, and of the surviving links it rewrites in place) is read and
//! journaled. A whole rewind saves it for its undo (captures with `undo_of`, whatever their
//! size); a partial rewind captures it for the current turn, like any other change. Kept apart
//! because this is the stage that makes a rewind undoable, and its one rule is that a failure
//! here refuses the rewind with nothing changed and nothing left in the store ([`Attempt`]).
//!
//! I/O: it reads the folder (never changes it), stores blobs and appends to the journal (or,
//! refused, removes those blobs again and cuts the journal back).

use super::plan::Plan;
use super::report::{Failure, RewindError};
use super::resolve::{Parents, cname};
use crate::capture::{read_preimage, walk_tree};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::journal::{PreImage, Record};
use crate::store::{JournalEnd, Store};
use crate::sys::Errno;
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// The state now of every path `plan` touches and of everything below them, except the paths
/// `skip` names: what a rewind saves for its undo, or a partial rewind captures for the current
/// turn, before it changes anything. A path whose parent is not there, not a directory or a
/// symlink has nothing at it in the folder (a rewind never writes through such a parent): it
/// is saved as absent; any other failure refuses the rewind before anything changes. A large
/// plan is read in parts on several threads ([`super::parts`]), with the same result.
fn read_current(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    extra: &[RelPath],
    skip: &Skip<'_>,
    max_blob: u64,
) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
    // Skipped targets are never restored, so never changed by this rewind: nothing to save (a
    // file over --max-blob would otherwise be stored whole here).
    let paths: Vec<&RelPath> = plan
        .steps()
        .filter(|s| !matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| &s.path)
        .chain(extra.iter())
        .collect();
    let reading = Reading {
        root,
        store,
        skip,
        max_blob,
    };
    reading.read(&paths, super::parts::parts_for(paths.len()))
}

/// Which paths a save leaves out.
type Skip<'s> = dyn Fn(&RelPath) -> bool + Sync + 's;

/// A reading of the folder's state now: below `root`, its blobs stored in `store` (files over
/// `max_blob` skipped), leaving out what `skip` names.
struct Reading<'a> {
    root: BorrowedFd<'a>,
    store: &'a Store,
    skip: &'a Skip<'a>,
    max_blob: u64,
}

impl Reading<'_> {
    /// [`read_current`] of `paths`, in `parts` parts. Each part walks its paths as one reading
    /// of the whole list would, but without knowing what the parts before it read: a walk of a
    /// directory in one part may cover paths of the next. Joined in order, each part's records
    /// of paths an earlier part read are dropped, which leaves exactly what one reading
    /// records, in its order: a reading skips a path it read already (and what lies below it,
    /// read with it).
    fn read(
        &self,
        paths: &[&RelPath],
        parts: usize,
    ) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
        // The saves' small blobs are written in batches, by every part into one: the caller
        // journals the saves only after this returns, once they are all on disk.
        let held = self.store.blobs().hold_pack_appends();
        let read = super::parts::in_parts(paths, parts, |part| {
            // What each part stores anew is listed, to be taken back if the rewind is refused.
            let _tracked = self.store.blobs().join_tracking();
            let joined = held.as_ref().map(|h| h.join());
            let mut read = self.part(part);
            if let Some(Err(e)) = joined.map(|j| j.finish()) {
                read.problems.push(unstored(e));
            }
            read
        });
        // One list of the right size, each part's given back as it is moved over: never two
        // copies of the saves at once, nor a list grown to twice what it holds.
        let mut all = ReadPart {
            records: Vec::with_capacity(read.iter().map(|p| p.records.len()).sum()),
            ..ReadPart::default()
        };
        for part in read {
            let seen = &all.seen;
            let fresh =
                super::close::drain_releasing(part.records).filter(|(p, _)| !seen.contains(p));
            all.records.extend(fresh);
            all.seen.extend(part.seen);
            all.problems.extend(part.problems);
        }
        if let Some(Err(e)) = held.map(|h| h.finish()) {
            all.problems.push(unstored(e));
        }
        if all.problems.is_empty() {
            Ok(all.records)
        } else {
            // Parts that walked the same directory report its failure once each.
            let mut reported = HashSet::new();
            all.problems.retain(|f| reported.insert(f.path.clone()));
            Err(RewindError::Refused(all.problems))
        }
    }

    /// One part of [`Reading::read`]: each path and what lies below it, in order, skipping what
    /// `skip` names and what the part read already.
    fn part(&self, paths: &[&RelPath]) -> ReadPart {
        let (skip, max_blob) = (self.skip, self.max_blob);
        let mut read = ReadPart::default();
        let ReadPart {
            records,
            seen,
            problems,
        } = &mut read;
        // Nothing changes while this reads, so the directory last opened stays good.
        let mut parents = Parents::new(self.root);
        for &path in paths {
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
                        path: path.into(),
                        reason: format!("cannot open its parent to save what is there: {e}"),
                    });
                    continue;
                }
            };
            let name = cname(path);
            let blobs = self.store.blobs();
            let mut at = None;
            let walked = walk_tree(parent, &name, path, &mut |p, dir, n| {
                if seen.contains(p) {
                    // Read already, with everything below it: not walked again (a plan names every
                    // path of a tree an agent created, and each of its directories would be).
                    return Ok(Some(false));
                }
                if skip(p) {
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
                    path: at.unwrap_or_else(|| path.clone()).into(),
                    reason: format!("cannot save what is there before changing it: {e}"),
                });
            }
        }
        read
    }
}

/// What a part of [`Reading::read`] read.
#[derive(Default)]
struct ReadPart {
    records: Vec<(RelPath, PreImage)>,
    /// The paths of `records`.
    seen: HashSet<RelPath>,
    problems: Vec<Failure>,
}

/// The failure of storing a rewind's saves.
fn unstored(e: Errno) -> Failure {
    Failure {
        path: super::report::FailedAt::Store,
        reason: format!("cannot store what the rewind saves for its undo: {e}"),
    }
}

/// The store as a rewind found it before its saves: a rewind refused before it changes the
/// folder (a path it cannot read, the store full half-way) leaves nothing behind in the store,
/// neither a blob only its saves stored nor a journal record, so a second attempt finds the
/// space the first one found.
pub(super) struct Attempt {
    end: JournalEnd,
    added: Option<crate::store::blob::Added>,
}

impl Attempt {
    /// Notes where the journal ends and lists the blobs stored anew from now on.
    pub(super) fn begin(store: &Store) -> Result<Self, RewindError> {
        Ok(Self {
            end: store.journal_end().map_err(RewindError::Store)?,
            added: store.blobs().track_added(),
        })
    }

    /// Journals `records` (the operation's begin and its saves) as one append: written, the
    /// rewind goes on and its blobs stay; failed (the disk filled up meanwhile), it is refused
    /// with nothing left behind.
    pub(super) fn journal(
        self,
        store: &mut Store,
        records: impl IntoIterator<Item = Record>,
    ) -> Result<(), RewindError> {
        match store.append_all(records) {
            Ok(_) => {
                if let Some(a) = self.added {
                    a.keep();
                }
                Ok(())
            }
            Err(e) => Err(self.refuse(store, RewindError::Store(e))),
        }
    }

    /// The rewind is refused with `e` before changing anything: the journal is cut back to
    /// where it ended, then the blobs stored anew since are removed (no record names them).
    pub(super) fn refuse(self, store: &mut Store, e: RewindError) -> RewindError {
        match store.roll_back(self.end) {
            Ok(()) => {
                if let Some(a) = self.added {
                    a.take_back();
                }
            }
            Err(r) => {
                // The blobs stay: a record that could not be cut off may name them.
                log::error!(target: "ckpt::rewind", "a refused rewind's records could not be cut off the journal: {r}");
                if let Some(a) = self.added {
                    a.keep();
                }
            }
        }
        e
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
    let already = saved_before(store, Saving::ForUndo);
    read_current(root, store, plan, extra, &|p| already.contains(p), u64::MAX)
}

/// What a run reads before it changes the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Saving {
    /// The saves for its undo only (a whole rewind, an undo, a redo).
    ForUndo,
    /// A partial rewind's two readings: captures for the current turn of what it had not
    /// captured, and saves for the undo of what it had.
    Partial,
}

/// The paths a rewind's saves leave out: those a run of it cut off by a crash saved already
/// and, for a partial rewind, captured for the current turn. Every other path it changes is
/// read (a partial rewind's in two readings: captures and saves).
pub(super) fn saved_before(store: &Store, saving: Saving) -> HashSet<&RelPath> {
    let partial = saving == Saving::Partial;
    let index = store.index();
    let mut out: HashSet<&RelPath> = HashSet::new();
    if partial && index.ops.unfinished.is_none() {
        return out;
    }
    out.extend(index.unfinished_saved.iter().map(|c| &c.path));
    if partial {
        out.extend(index.captured_now.keys());
    }
    out
}

/// `saves` as the journal's captures of turn `to` that the undo of the operation begun at
/// `begin` restores (records with `undo_of`). Handed over one by one: each save's path and
/// pre-image move into its journal line and the index, never copied into a second list first,
/// and the list's memory is given back as the index's list of them grows.
pub(super) fn save_records(
    saves: Vec<(RelPath, PreImage)>,
    to: Turn,
    begin: Seq,
) -> impl Iterator<Item = Record> {
    super::close::drain_releasing(saves).map(move |(path, pre)| Record::Capture {
        turn: to,
        path,
        pre,
        undo_of: Some(begin),
        pid: None,
        comm: None,
    })
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
    let captured = &index.captured_now;
    if index.ops.unfinished.is_some() {
        // The epoch restarted when the cut-off run began: what it captured or saved is kept.
        let kept = saved_before(store, Saving::Partial);
        let captures = read_current(root, store, plan, extra, &|p| kept.contains(p), max_blob)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn rel(p: &str) -> RelPath {
        RelPath::new(p.as_bytes()).expect("relpath")
    }

    /// A reading of everything but what `skip` names, whatever its size.
    fn reading<'a>(root: BorrowedFd<'a>, store: &'a Store, skip: &'a Skip<'a>) -> Reading<'a> {
        Reading {
            root,
            store,
            skip,
            max_blob: u64::MAX,
        }
    }

    /// A tree where walks of directories cross the parts' borders: `deep/` with nested
    /// directories, its paths named one by one too (as a plan of a tree an agent created names
    /// them), files, a symlink, a FIFO, and paths that are absent or lie below a file or a
    /// symlinked directory.
    fn tree(root: &std::path::Path) -> Vec<RelPath> {
        let mut named = vec![rel("deep")];
        for d in 0..6 {
            let dir = format!("deep/d{d}");
            std::fs::create_dir_all(root.join(&dir).join("inner")).expect("mkdir");
            named.push(rel(&dir));
            for f in 0..20 {
                let file = format!("{dir}/f{f}");
                std::fs::write(root.join(&file), format!("bytes of {file}")).expect("write");
                named.push(rel(&file));
            }
            std::fs::write(root.join(&dir).join("inner/x"), "inner").expect("write");
        }
        std::fs::write(root.join("top"), "top file").expect("write");
        std::os::unix::fs::symlink("deep", root.join("link")).expect("symlink");
        let dir = std::fs::File::open(root).expect("open");
        crate::sys::mknodat(dir.as_fd(), c"fifo", libc::S_IFIFO | 0o600, 0).expect("mkfifo");
        for p in [
            "top",
            "link",
            "fifo",
            "missing",
            "top/below-a-file",
            "link/d0",
            "deep/d3/inner/x",
        ] {
            named.push(rel(p));
        }
        // A directory named after its children, a walk of a part covering a later part's paths.
        named.push(rel("deep/d5"));
        named
    }

    #[test]
    fn reading_in_parts_records_what_one_reading_records_in_its_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let named = tree(dir.path());
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::for_test(root.as_fd()).expect("store");
        let paths: Vec<&RelPath> = named.iter().collect();
        let skip_none = |_: &RelPath| false;
        let skip_inner = |p: &RelPath| p.as_bytes().ends_with(b"/inner");
        let skips: [&Skip<'_>; 2] = [&skip_none, &skip_inner];
        for skip in skips {
            let one = reading(root.as_fd(), &store, skip)
                .read(&paths, 1)
                .expect("one");
            let got: HashSet<&RelPath> = one.iter().map(|(p, _)| p).collect();
            assert_eq!(got.len(), one.len(), "each path recorded once");
            for want in ["deep/d0/inner/x", "missing", "top/below-a-file", "link/d0"] {
                assert!(got.contains(&rel(want)), "{want} recorded");
            }
            for (p, pre) in &one {
                match p.to_string().as_str() {
                    "missing" | "top/below-a-file" | "link/d0" => {
                        assert_eq!(*pre, PreImage::Absent, "{p}")
                    }
                    "fifo" => assert!(matches!(pre, PreImage::Fifo { .. })),
                    "link" => assert!(matches!(pre, PreImage::Symlink { .. })),
                    s if s.ends_with("/inner") => assert!(!skip(p), "{p} skipped"),
                    _ => {}
                }
            }
            for parts in 2..=5 {
                let split = reading(root.as_fd(), &store, skip)
                    .read(&paths, parts)
                    .expect("parts");
                assert_eq!(split, one, "{parts} parts");
            }
        }
        // Every blob a reading stored is on disk and whole once it returned.
        drop(store);
        let reopened = Store::reopen_for_test(root.as_fd()).expect("reopen");
        let one = reading(root.as_fd(), &reopened, &|_| false)
            .read(&paths, 3)
            .expect("read");
        for (p, pre) in &one {
            if let PreImage::File { blob, .. } = pre {
                assert_eq!(reopened.blobs().verify(blob), Ok(true), "{p}");
            }
        }
    }

    #[test]
    fn a_failure_in_any_part_refuses_and_is_reported_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let named = tree(dir.path());
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::for_test(root.as_fd()).expect("store");
        // A name no path may have on this filesystem: each part that walks there fails.
        let long = format!("deep/d4/{}", "n".repeat(300));
        let mut paths: Vec<&RelPath> = named.iter().collect();
        let bad = RelPath::new(long.as_bytes()).expect("a valid relative path");
        paths.insert(3, &bad);
        paths.push(&bad);
        for parts in 1..=4 {
            match reading(root.as_fd(), &store, &|_| false).read(&paths, parts) {
                Err(RewindError::Refused(problems)) => {
                    let at: Vec<String> = problems.iter().map(|f| f.path.to_string()).collect();
                    assert_eq!(
                        at,
                        std::slice::from_ref(&long),
                        "{parts} parts: {problems:?}"
                    );
                }
                other => panic!("{parts} parts: not refused: {:?}", other.map(|r| r.len())),
            }
        }
    }
}
