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
//! `resolve.rs` opens the directory holding a path, for every stage; `parts.rs` splits a
//! large rewind's saves, its verification and the runs of independent files it restores over
//! the machine's cores. This file holds the entry
//! points, their inputs and the journal records that frame a rewind, and re-exports the public
//! types of the stages, so every path `crate::rewind::X` stays as it was.

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
mod save;
mod space;
mod step;
mod undo;
mod unlock;
mod verify;

pub use agent::{AgentSplit, Conflicts, PathActors};
pub use plan::{Plan, Step, plan};
pub use report::{FailedAt, Failure, Report, RewindError, Summary};
pub use request::{Mode, Request, Scope};
pub use restore::remove_tree;
pub use space::{SizedPath, Space};
pub use undo::{Direction, complete_unfinished, undo_redo};
pub use verify::verify;

use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{PreImage, Record};
use apply::{apply, sweep_temps};
use groups::share_hard_links;
use links::Anchors;
use links::{link_anchors, uncaptured_links};
use save::{Attempt, read_for_partial, save_records, saved_before, saves_for_undo};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;
use step::Rewrite;
use verify::refuse_unless_verified;

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
/// partial rewind captures for the current turn. The caller must hold back every other
/// mutation of the folder while this runs.
pub fn run(
    root: BorrowedFd<'_>,
    store: &mut Store,
    req: &Request,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let dry_run = req.mode().dry_run();
    match req {
        Request::UndoLast { .. } => undo::rewind_undo(root, store, dry_run, progress),
        Request::To {
            to,
            scope: Scope::Folder,
            ..
        } => rewind(root, store, *to, req.mode(), progress),
        Request::To {
            to,
            scope: Scope::Paths(paths),
            ..
        } => rewind_paths(root, store, *to, paths, dry_run, max_blob, progress),
        Request::To {
            to,
            scope: Scope::Agent(conflicts),
            ..
        } => rewind_agent(root, store, *to, *conflicts, dry_run, max_blob, progress),
    }
}

/// Rewinds the whole folder to the start of turn `to`.
fn rewind(
    root: BorrowedFd<'_>,
    store: &mut Store,
    to: Turn,
    mode: Mode,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let preview = mode.dry_run();
    if store.index().unfinished_rewind.is_none()
        && let Some(r) = complete_unfinished(root, store, preview, DEFAULT_MAX_BLOB, progress)?
    {
        return Ok(r);
    }
    let mut times = StageTimes::start();
    let from = store.index().current_turn();
    let Chosen {
        to,
        targets,
        resume,
    } = targets_for(store, to)?;
    let plan = plan(
        store.index().with_current_identities(targets),
        &store.index().once_linked(),
    );
    times.end("plan");
    let mut report = Report {
        to,
        from,
        dry_run: preview,
        completes_cut_off: resume.is_some(),
        ..Report::default()
    };
    if preview {
        let anchors = link_anchors(root, &plan, &HashSet::new());
        dry_run(root, store, (&plan, &anchors), false, &mut report);
        return Ok(report);
    }
    refuse_unless_verified(&plan, store)?;
    times.end("verify");
    if resume.is_some() {
        // Temp files a run of this rewind cut off by a crash left behind.
        sweep_temps(root, &plan);
    }
    // Names outside the plan that the rewind rewrites in place (the surviving links of its
    // hard-link groups) are saved with everything else.
    let anchors = link_anchors(root, &plan, &HashSet::new());
    let writes = room_for_run(root, store, (&plan, &anchors), false)?;
    times.end("room");
    // What the rewind overwrites is read before the journal says it began: a failure here
    // refuses the rewind with nothing changed, nothing left open and nothing left in the store.
    let attempt = Attempt::begin(store)?;
    let saves = match saves_for_undo(root, store, &plan, &anchors.outside_plan(&plan)) {
        Ok(saves) => saves,
        Err(e) => return Err(attempt.refuse(store, e)),
    };
    times.end("read saves");
    let begin = resume.unwrap_or(Seq(store.index().last_seq.0 + 1));
    let open = resume.is_none().then_some(Record::RewindBegin { to, from });
    attempt.journal(
        store,
        open.into_iter().chain(save_records(saves, to, begin)),
    )?;
    times.end("journal saves");
    apply(
        root,
        store,
        (&plan, writes),
        &anchors,
        &mut report,
        progress,
    );
    times.end("apply");
    let steps = plan.remove.len() + plan.restore.len();
    finish(store, plan, &mut report, |counts| Record::RewindDone {
        begin,
        counts,
    })?;
    times.end("close");
    times.log(steps);
    Ok(report)
}

/// The default `--max-blob`, for captures a partial rewind completed after a crash takes.
const DEFAULT_MAX_BLOB: u64 = crate::capture::DEFAULT_MAX_BLOB;

/// What a report says the run changed, as the operation log keeps it.
fn counts_of(report: &Report) -> crate::store::ops::OpCounts {
    crate::store::ops::OpCounts {
        restored: report.restored.len() as u64,
        deleted: report.deleted.len() as u64,
        failed: report.failed.len() as u64,
    }
}

/// What a whole rewind works from.
struct Chosen {
    /// The turn whose start the folder is given.
    to: Turn,
    /// Per path, its state then: its oldest pre-image in the rewound turns.
    targets: Vec<(RelPath, PreImage)>,
    /// Where the journal says a rewind that was cut off began, when this run completes it
    /// instead of what was asked.
    resume: Option<Seq>,
}

/// What `req` rewinds to: the turn of a rewind that was cut off, else the turn asked for.
fn targets_for(store: &Store, to: Turn) -> Result<Chosen, RewindError> {
    if let Some((begin, to, _)) = store.index().unfinished_rewind {
        // A rewind was cut off: finish it first, whatever was asked.
        log::warn!(target: "ckpt::rewind", "completing the rewind to turn {to} that was cut off");
        Ok(Chosen {
            to,
            targets: store.index().plan_targets(to),
            resume: Some(begin),
        })
    } else {
        if !store.index().has_turn(to) {
            return Err(RewindError::NoSuchTurn {
                turn: to,
                known: store.index().turns.iter().map(|t| t.turn).collect(),
            });
        }
        Ok(Chosen {
            to,
            targets: store.index().plan_targets(to),
            resume: None,
        })
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

/// Rewinds only `paths` (what lies below them, and the directories above them) to the start of
/// turn `to`. This is a change made in the current turn like any other: what it overwrites is
/// captured for the current turn first, so no turn leaves the index, and rewinding the current
/// turn undoes it, under the same `max_blob` limit as any other capture (a bigger file is
/// recorded as skipped, with its reason). It is also an operation of its own (`op_begin` /
/// `op_done`): what it overwrites that the current turn had captured already is saved for its
/// undo (whatever its size), so `undo` gives the folder back exactly as it was.
fn rewind_paths(
    root: BorrowedFd<'_>,
    store: &mut Store,
    to: Turn,
    paths: &[RelPath],
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    if let Some(r) = complete_unfinished(root, store, dry_run, max_blob, progress)? {
        return Ok(r);
    }
    partial(root, store, (to, paths), dry_run, max_blob, progress, None)
}

/// A partial rewind of `paths`; `resume` is the `op_begin` of a run cut off by a crash,
/// completed now.
fn partial(
    root: BorrowedFd<'_>,
    store: &mut Store,
    (to, paths): (Turn, &[RelPath]),
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
    resume: Option<Seq>,
) -> Result<Report, RewindError> {
    let all = all_targets(store, to)?;
    // What lies at or below a path asked for is restored; an ancestor only where no directory
    // stands now (then as it was at the start of the turn): one that exists keeps its mode,
    // owner, xattrs and times, as nobody asked to rewind it.
    let targets: Vec<(RelPath, PreImage)> = all
        .iter()
        .filter(|(p, pre)| {
            paths.iter().any(|o| {
                p.starts_with(o)
                    || (o.starts_with(p)
                        && matches!(pre, PreImage::Dir { .. })
                        && !is_dir_now(root, p))
            })
        })
        .cloned()
        .collect();
    let report = Report {
        to,
        from: store.index().current_turn(),
        dry_run,
        only: paths.to_vec(),
        completes_cut_off: resume.is_some(),
        ..Report::default()
    };
    let chosen = Partial {
        all,
        targets,
        paths,
        max_blob,
    };
    rewind_partial(root, store, chosen, report, progress, resume)
}

/// Rewinds what only the agent changed since the start of turn `to` (and, with
/// [`Conflicts::Rewind`], what the agent and others both changed), keeping every other path as
/// it is: a partial rewind of exactly those paths (`agent.rs` chooses them), whose report says
/// who changed what. Like any partial rewind it is an operation that `undo` takes back.
fn rewind_agent(
    root: BorrowedFd<'_>,
    store: &mut Store,
    to: Turn,
    conflicts: Conflicts,
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    if let Some(r) = complete_unfinished(root, store, dry_run, max_blob, progress)? {
        return Ok(r);
    }
    let all = all_targets(store, to)?;
    let dir_now = |d: &RelPath| is_dir_now(root, d);
    let split = agent::split(store.index(), to, conflicts, &dir_now)?;
    let paths = split.chosen();
    let wanted: HashSet<&RelPath> = paths.iter().collect();
    let targets: Vec<(RelPath, PreImage)> = all
        .iter()
        .filter(|(p, _)| wanted.contains(p))
        .cloned()
        .collect();
    let report = Report {
        to,
        from: store.index().current_turn(),
        dry_run,
        agent: Some(split),
        ..Report::default()
    };
    let chosen = Partial {
        all,
        targets,
        paths: &paths,
        max_blob,
    };
    rewind_partial(root, store, chosen, report, progress, None)
}

/// Whether a directory stands at `d` now (reached without following a symlink).
fn is_dir_now(root: BorrowedFd<'_>, d: &RelPath) -> bool {
    resolve::lstat_path(root, d).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// Every target of a rewind to `to`, with hard-link groups formed over all of them before a
/// partial rewind chooses: a name's own first capture may come after a write through another
/// name of its inode, whose earlier capture holds the bytes of the start of the turn.
fn all_targets(store: &Store, to: Turn) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
    if !store.index().has_turn(to) {
        return Err(RewindError::NoSuchTurn {
            turn: to,
            known: store.index().turns.iter().map(|t| t.turn).collect(),
        });
    }
    Ok(share_hard_links(
        store
            .index()
            .with_current_identities(store.index().plan_targets(to)),
    ))
}

/// What a partial rewind works from: every target of the turn, the chosen ones, the paths
/// asked for and the capture limit.
struct Partial<'a> {
    all: Vec<(RelPath, PreImage)>,
    targets: Vec<(RelPath, PreImage)>,
    paths: &'a [RelPath],
    max_blob: u64,
}

/// Runs a partial rewind (see [`rewind_paths`]): what it overwrites is captured for the current
/// turn and saved for its undo between its `op_begin` and the changes, and `op_done` closes it.
fn rewind_partial(
    root: BorrowedFd<'_>,
    store: &mut Store,
    chosen: Partial<'_>,
    mut report: Report,
    progress: Progress<'_>,
    resume: Option<Seq>,
) -> Result<Report, RewindError> {
    let Partial {
        all,
        mut targets,
        paths,
        max_blob,
    } = chosen;
    targets.extend(uncaptured_links(root, &all, &targets, paths));
    let plan = plan(targets, &store.index().once_linked());
    // A name outside the chosen paths that a rewound turn changed no longer holds what it held
    // when the turn began: it is no anchor (in a whole rewind every such name is in the plan).
    let changed: HashSet<&RelPath> = all.iter().map(|(p, _)| p).collect();
    let anchors = link_anchors(root, &plan, &changed);
    if report.dry_run {
        dry_run(root, store, (&plan, &anchors), true, &mut report);
        return Ok(report);
    }
    refuse_unless_verified(&plan, store)?;
    if resume.is_some() {
        sweep_temps(root, &plan);
    }
    let writes = room_for_run(root, store, (&plan, &anchors), true)?;
    let extra = anchors.outside_plan(&plan);
    let attempt = Attempt::begin(store)?;
    let (captures, saves) = match read_for_partial(root, store, &plan, &extra, max_blob) {
        Ok(read) => read,
        Err(e) => return Err(attempt.refuse(store, e)),
    };
    let begin = resume.unwrap_or(Seq(store.index().last_seq.0 + 1));
    let op = resume.is_none().then(|| {
        Record::OpBegin(crate::store::ops::OpBegin {
            kind: crate::store::ops::OpKind::RewindPaths,
            to: Some(report.to),
            paths: paths.to_vec(),
            target: None,
        })
    });
    let records = op
        .into_iter()
        .chain(captures.into_iter().map(|(path, pre)| Record::Capture {
            turn: report.from,
            path,
            pre,
            undo_of: None,
            pid: None,
            comm: None,
        }))
        .chain(save_records(saves, report.from, begin));
    attempt.journal(store, records)?;
    crate::failpoint::hit("partial-after-saves");
    apply(
        root,
        store,
        (&plan, writes),
        &anchors,
        &mut report,
        progress,
    );
    finish(store, plan, &mut report, |counts| Record::OpDone {
        begin,
        counts,
    })?;
    Ok(report)
}

/// The dry run of `plan` (with the hard-link `anchors` the run would relink to) into `report`:
/// what the run would do to the folder as it is now (`preview.rs`), and whether the disks
/// have the room it needs (`space.rs`), its saves those of a `partial` rewind or not. A blob
/// missing or damaged refuses the run: the preview then says so and nothing more.
fn dry_run(
    root: BorrowedFd<'_>,
    store: &Store,
    (plan, anchors): (&Plan, &Anchors),
    partial: bool,
    report: &mut Report,
) {
    let problems = verify(plan, store);
    if !problems.is_empty() {
        preview::refused(plan, problems, report);
        return;
    }
    let decided = preview::decide(root, plan, anchors);
    preview::preview(root, plan, anchors, &decided, report);
    let saved = saved_before(store, partial);
    report.space = Some(space::needed(root, store, plan, anchors, &saved, &decided));
}

/// Refuses the run of `plan` before it changes or stores anything when the disks lack the
/// room it needs (`space.rs`), naming the space needed and free, the largest files the rewound
/// turns created and what to do; else which of its restorations it writes whatever stands
/// there (decided, as its preview decides it, on the folder as it stands before anything
/// changes).
fn room_for_run(
    root: BorrowedFd<'_>,
    store: &Store,
    (plan, anchors): (&Plan, &Anchors),
    partial: bool,
) -> Result<Vec<Rewrite>, RewindError> {
    let started = std::time::Instant::now();
    let decided = preview::decide(root, plan, anchors);
    log_took("what to write decided", started);
    let saved = saved_before(store, partial);
    let space = space::needed(root, store, plan, anchors, &saved, &decided);
    if !space.fits {
        log::warn!(target: "ckpt::rewind", "rewind refused before changing anything: {}", space.shortfall());
        return Err(RewindError::NoSpace(Box::new(space)));
    }
    Ok(decided.writes())
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
            let r = if partial {
                rewind_paths(
                    root.as_fd(),
                    &mut store,
                    Turn(2),
                    &asked,
                    false,
                    u64::MAX,
                    &none,
                )
            } else {
                let req = Request::folder(Turn(2));
                run(root.as_fd(), &mut store, &req, u64::MAX, &none)
            };
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
