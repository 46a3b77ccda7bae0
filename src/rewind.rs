//! Rewind: a pure plan from the journal's targets, verified before anything changes, then
//! applied through descriptors that never follow a symlink, with a report.
//!
//! Order of application: paths that must not exist are removed deepest first; then every
//! other path is restored shallowest first, so parents exist before children; directory modes
//! are set last, deepest first, so a read-only directory never blocks its own children.
//! A rewind saves what it overwrites or deletes (records with `undo_of`) before changing it.

use crate::capture::{read_preimage, walk_tree};
use crate::identity::{FileId, Same};
use crate::relpath::RelPath;
use crate::store::journal::{PreImage, Record, Xattr};
use crate::store::{Store, StoreError};
use crate::sys::{self, Errno};
use crate::xattrs::{self, Via};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// One path and the state it must be given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The path.
    pub path: RelPath,
    /// Its state at the start of the target turn.
    pub target: PreImage,
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

/// The inode a hard-linked file or symlink target names: its number and, where recorded, its
/// handle (two targets of one group were captured while they were one inode, so they agree).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    symlink: bool,
    ino: u64,
    fh: Option<crate::store::journal::Handle>,
}

fn group_key(t: &PreImage) -> Option<GroupKey> {
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
fn share_hard_links(mut targets: Vec<(RelPath, PreImage)>) -> Vec<(RelPath, PreImage)> {
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

/// Builds the plan from per-path targets, oldest pre-image first (pure: no I/O).
pub fn plan(targets: Vec<(RelPath, PreImage)>) -> Plan {
    let targets = share_hard_links(targets);
    let non_dir: HashSet<RelPath> = targets
        .iter()
        .filter(|(_, t)| !matches!(t, PreImage::Dir { .. }))
        .map(|(p, _)| p.clone())
        .collect();
    // A path below one that is not a directory at the target time is covered by that one.
    let covered = |p: &RelPath| {
        let mut cur = p.parent();
        while let Some(a) = cur {
            if non_dir.contains(&a) {
                return true;
            }
            cur = a.parent();
        }
        false
    };
    let mut remove = Vec::new();
    let mut restore = Vec::new();
    for (path, target) in targets {
        if covered(&path) {
            continue;
        }
        let step = Step { path, target };
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

/// A path that could not be restored, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The path.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What a rewind did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Target turn.
    pub to: u64,
    /// Turn current before.
    pub from: u64,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// Whether this undid the previous rewind.
    pub undo: bool,
    /// Paths given back their earlier content or kind.
    pub restored: Vec<String>,
    /// Paths removed.
    pub deleted: Vec<String>,
    /// Paths that could not be restored.
    pub failed: Vec<Failure>,
    /// Whether the rewind stays open because a failure may pass: running it again completes it.
    pub unfinished: bool,
    /// The plan (dry runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Paths whose state changed, for cache invalidation (not serialised).
    #[serde(skip)]
    pub changed: Vec<RelPath>,
    /// Failed paths that no second run can restore (not serialised).
    #[serde(skip)]
    pub permanent: HashSet<String>,
    /// Fresh files that now stand for recorded identities (journaled, not serialised).
    #[serde(skip)]
    pub renewed: Vec<crate::identity::Renewal>,
}

impl Report {
    /// Whether everything was restored.
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Why a rewind did not start.
#[derive(Debug)]
pub enum RewindError {
    /// The turn is not in the index.
    NoSuchTurn {
        /// The turn asked for.
        turn: u64,
        /// The turns that exist.
        known: Vec<u64>,
    },
    /// Nothing to undo.
    NothingToUndo,
    /// Verification failed before any change: the listed problems.
    Refused(Vec<Failure>),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for RewindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchTurn { turn, known } => {
                let list: Vec<String> = known.iter().map(u64::to_string).collect();
                write!(f, "turn {turn} does not exist (turns: {})", list.join(", "))
            }
            Self::NothingToUndo => write!(f, "there is no rewind to undo"),
            Self::Refused(p) => {
                write!(f, "rewind refused before changing anything: ")?;
                let parts: Vec<String> = p
                    .iter()
                    .map(|x| format!("{}: {}", x.path, x.reason))
                    .collect();
                write!(f, "{}", parts.join("; "))
            }
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

impl RewindError {
    /// The errno a writer of `.ckpt/rewind` sees.
    pub fn errno(&self) -> i32 {
        match self {
            Self::NoSuchTurn { .. } | Self::NothingToUndo => libc::EINVAL,
            Self::Refused(_) => libc::EIO,
            Self::Store(e) => e.errno(),
        }
    }
}

/// Called with (steps done, steps in all) as a rewind applies its plan.
pub type Progress<'a> = &'a dyn Fn(usize, usize);

/// What to rewind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request {
    /// Target turn (ignored with `undo`).
    pub to: u64,
    /// Plan only.
    pub dry_run: bool,
    /// Undo the last rewind instead.
    pub undo: bool,
}

/// Checks a plan before anything changes: paths re-validated, every blob present and whole.
pub fn verify(plan: &Plan, store: &Store) -> Vec<Failure> {
    let mut problems = Vec::new();
    let mut checked: HashSet<&str> = HashSet::new();
    for step in plan.steps() {
        if RelPath::new(step.path.as_bytes()).is_err() {
            problems.push(Failure {
                path: step.path.to_string(),
                reason: "invalid path in journal".into(),
            });
            continue;
        }
        if let PreImage::File { blob, .. } = &step.target {
            if !checked.insert(blob.as_str()) {
                continue;
            }
            match store.blobs.verify(blob) {
                Ok(true) => {}
                Ok(false) => problems.push(Failure {
                    path: step.path.to_string(),
                    reason: format!(
                        "blob {} does not match its hash",
                        &blob[..12.min(blob.len())]
                    ),
                }),
                Err(e) => problems.push(Failure {
                    path: step.path.to_string(),
                    reason: format!("blob {} unreadable: {e}", &blob[..12.min(blob.len())]),
                }),
            }
        }
    }
    problems
}

/// Runs a rewind on the folder behind `root` with its open store. The caller must hold back
/// every other mutation of the folder while this runs.
pub fn rewind(
    root: BorrowedFd<'_>,
    store: &mut Store,
    req: Request,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    let from = store.index.current_turn();
    let (to, targets, resume) = if req.undo {
        let last = store
            .index
            .last_rewind
            .as_ref()
            .ok_or(RewindError::NothingToUndo)?;
        (
            last.from,
            store.index.undo_targets().unwrap_or_default(),
            None,
        )
    } else if let Some((begin, to, _)) = store.index.unfinished_rewind {
        // A rewind was cut off: finish it first, whatever was asked.
        log::warn!(target: "ckpt::rewind", "completing the rewind to turn {to} that was cut off");
        (to, store.index.plan_targets(to), Some(begin))
    } else {
        if !store.index.has_turn(req.to) {
            return Err(RewindError::NoSuchTurn {
                turn: req.to,
                known: store.index.turns.iter().map(|t| t.turn).collect(),
            });
        }
        (req.to, store.index.plan_targets(req.to), None)
    };
    let plan = plan(store.index.with_current_identities(targets));
    let problems = verify(&plan, store);
    if !problems.is_empty() {
        return Err(RewindError::Refused(problems));
    }
    let mut report = Report {
        to,
        from,
        dry_run: req.dry_run,
        undo: req.undo,
        ..Report::default()
    };
    if req.dry_run {
        report.plan = Some(plan);
        return Ok(report);
    }
    if req.undo || resume.is_some() {
        // Temp files a run of this rewind (or undo) cut off by a crash left behind.
        sweep_temps(root, &plan);
    }
    if req.undo {
        // An undo is not itself undoable: it saves nothing and is closed by one record. Cut
        // off midway, running it again completes it (the same targets apply again).
        let rewind = store.index.last_rewind.as_ref().map_or(0, |l| l.begin);
        let anchors = link_anchors(root, &plan, &HashSet::new());
        apply(root, store, &plan, &anchors, &mut report, progress);
        record_renewals(store, &mut report)?;
        store
            .append(Record::UndoDone { rewind })
            .map_err(RewindError::Store)?;
        return Ok(report);
    }
    // Names outside the plan that the rewind rewrites in place (the surviving links of its
    // hard-link groups) are saved with everything else.
    let anchors = link_anchors(root, &plan, &HashSet::new());
    // What the rewind overwrites is read before the journal says it began: a failure here
    // refuses the rewind with nothing changed and nothing left open.
    let saves = saves_for_undo(root, store, &plan, &anchors.outside_plan(&plan))?;
    let begin = match resume {
        Some(b) => b,
        None => store
            .append(Record::RewindBegin { to, from })
            .map_err(RewindError::Store)?,
    };
    if !saves.is_empty() {
        let records = saves
            .into_iter()
            .map(|(path, pre)| Record::Capture {
                turn: to,
                path,
                pre,
                undo_of: Some(begin),
                pid: None,
                comm: None,
            })
            .collect();
        store.append_all(records).map_err(RewindError::Store)?;
    }
    apply(root, store, &plan, &anchors, &mut report, progress);
    record_renewals(store, &mut report)?;
    // A pre-image that was never stored fails every time; anything else (a parent swapped for
    // a symlink meanwhile, an I/O error) may succeed on a second run. Such a rewind stays open,
    // its turns in the index, so that running it again completes it instead of leaving a mix.
    let permanent: HashSet<String> = plan
        .steps()
        .filter(|s| matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| s.path.to_string())
        .chain(report.permanent.iter().cloned())
        .collect();
    if report.failed.iter().any(|f| !permanent.contains(&f.path)) {
        report.unfinished = true;
        return Ok(report);
    }
    store
        .append(Record::RewindDone { begin })
        .map_err(RewindError::Store)?;
    Ok(report)
}

/// The directory holding `path`, resolved beneath `root` without following any symlink.
fn open_parent_raw(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, Errno> {
    path.open_parent(root, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
}

fn open_parent(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, String> {
    open_parent_raw(root, path).map_err(|e| match e.0 {
        libc::ELOOP | libc::EXDEV => "a parent directory is a symlink: refused".to_string(),
        // The parent itself is a symlink (opened as the link, which is not a directory).
        libc::ENOTDIR
            if path.parent().is_some_and(|p| {
                sys::open_beneath(root, &p.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                    .and_then(|fd| sys::fstat(fd.as_fd()))
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
            }) =>
        {
            "a parent directory is a symlink: refused".to_string()
        }
        libc::ENOTDIR => "a parent is not a directory".to_string(),
        libc::ENOENT => "its parent directory is missing".to_string(),
        _ => format!("cannot open its parent: {e}"),
    })
}

fn cname(path: &RelPath) -> CString {
    path.file_name_cstring()
}

/// Rewinds only `paths` (what lies below them, and the directories above them) to the start of
/// turn `to`. This is a change made in the current turn like any other: what it overwrites is
/// captured for the current turn first, so no turn leaves the index, and rewinding the current
/// turn undoes it, under the same `max_blob` limit as any other capture (a bigger file is
/// recorded as skipped, with its reason).
pub fn rewind_paths(
    root: BorrowedFd<'_>,
    store: &mut Store,
    to: u64,
    paths: &[RelPath],
    dry_run: bool,
    max_blob: u64,
    progress: Progress<'_>,
) -> Result<Report, RewindError> {
    if !store.index.has_turn(to) {
        return Err(RewindError::NoSuchTurn {
            turn: to,
            known: store.index.turns.iter().map(|t| t.turn).collect(),
        });
    }
    // Hard-link groups are formed over every target before choosing the paths: a name's own
    // first capture may come after a write through another name of its inode, whose earlier
    // capture holds the bytes of the start of the turn.
    let all = share_hard_links(
        store
            .index
            .with_current_identities(store.index.plan_targets(to)),
    );
    let mut targets: Vec<(RelPath, PreImage)> = all
        .iter()
        .filter(|(p, pre)| {
            paths.iter().any(|o| {
                p.starts_with(o) || (o.starts_with(p) && matches!(pre, PreImage::Dir { .. }))
            })
        })
        .cloned()
        .collect();
    targets.extend(uncaptured_links(root, &all, &targets, paths));
    let plan = plan(targets);
    let problems = verify(&plan, store);
    if !problems.is_empty() {
        return Err(RewindError::Refused(problems));
    }
    let from = store.index.current_turn();
    let mut report = Report {
        to,
        from,
        dry_run,
        ..Report::default()
    };
    if dry_run {
        report.plan = Some(plan);
        return Ok(report);
    }
    // A name outside the chosen paths that a rewound turn changed no longer holds what it held
    // when the turn began: it is no anchor (in a whole rewind every such name is in the plan).
    let changed: HashSet<&RelPath> = all.iter().map(|(p, _)| p).collect();
    let anchors = link_anchors(root, &plan, &changed);
    let captured = &store.index.captured_now;
    let extra = anchors.outside_plan(&plan);
    let records: Vec<Record> = read_current(
        root,
        store,
        &plan,
        &extra,
        &|p| captured.contains(p),
        max_blob,
    )?
    .into_iter()
    .map(|(path, pre)| Record::Capture {
        turn: from,
        path,
        pre,
        undo_of: None,
        pid: None,
        comm: None,
    })
    .collect();
    if !records.is_empty() {
        store.append_all(records).map_err(RewindError::Store)?;
    }
    apply(root, store, &plan, &anchors, &mut report, progress);
    record_renewals(store, &mut report)?;
    Ok(report)
}

/// Names below the `paths` of a partial rewind that no rewound turn captured but that are, now,
/// a hard link of an inode some other name's capture describes: the inode's bytes changed
/// through that other name, so at the start of the turn this name held the captured state
/// too. (A name not captured in the rewound turns kept its inode through them.)
fn uncaptured_links(
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
                return Ok(());
            }
            let st = sys::lstatat(dir, n)?;
            let kind = st.st_mode & libc::S_IFMT;
            if st.st_nlink < 2 || (kind != libc::S_IFREG && kind != libc::S_IFLNK) {
                return Ok(());
            }
            let now = FileId::read_at(dir, n, 0, st.st_ino);
            if let Some((_, pre)) = known.iter().find(|(id, pre)| {
                id.is(&now) && matches!(pre, PreImage::Symlink { .. }) == (kind == libc::S_IFLNK)
            }) {
                out.push((p.clone(), (*pre).clone()));
            }
            Ok(())
        });
    }
    out
}

/// Records the files the rewind recreated for records that carry an identity, so those records
/// name the new files from now on (see [`crate::identity::Renewal`]).
fn record_renewals(store: &mut Store, report: &mut Report) -> Result<(), RewindError> {
    if report.renewed.is_empty() {
        return Ok(());
    }
    let ids = std::mem::take(&mut report.renewed);
    store
        .append(Record::Renewed { ids })
        .map_err(RewindError::Store)?;
    Ok(())
}

/// The state now of every path `plan` touches and of everything below them, except the paths
/// `skip` names: what a rewind saves for its undo, or a partial rewind captures for the current
/// turn, before it changes anything. A path whose parent is not there, not a directory or a
/// symlink has nothing at it in the folder (a rewind never writes through such a parent) and
/// is left out; any other failure refuses the rewind before anything changes.
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
    for path in paths {
        let parent = match open_parent_raw(root, path) {
            Ok(p) => p,
            Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV)) => continue,
            Err(e) => {
                problems.push(Failure {
                    path: path.to_string(),
                    reason: format!("cannot open its parent to save what is there: {e}"),
                });
                continue;
            }
        };
        let name = cname(path);
        let blobs = &store.blobs;
        let mut at = None;
        let walked = walk_tree(parent.as_fd(), &name, path, &mut |p, dir, n| {
            if !skip(p) && !seen.contains(p) {
                at = Some(p.clone());
                records.push((p.clone(), read_preimage(blobs, dir, n, max_blob)?));
                seen.insert(p.clone());
            }
            Ok(())
        });
        if let Err(e) = walked {
            problems.push(Failure {
                path: at.unwrap_or_else(|| path.clone()).to_string(),
                reason: format!("cannot save what is there before changing it: {e}"),
            });
        }
    }
    if problems.is_empty() {
        Ok(records)
    } else {
        Err(RewindError::Refused(problems))
    }
}

/// What a rewind to `to` must save before it changes anything, whatever its size (an undo must
/// be exact); paths a cut-off run of the same rewind saved already keep that first save.
fn saves_for_undo(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    extra: &[RelPath],
) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
    let already: HashSet<&RelPath> = store
        .index
        .unfinished_saved
        .iter()
        .map(|c| &c.path)
        .collect();
    read_current(root, store, plan, extra, &|p| already.contains(p), u64::MAX)
}

/// Removes what a rewind cut off by a crash left in the parents of its plan's paths: temp
/// files named `.ckpt-rewind-*` (never directories: those are made at their final name).
fn sweep_temps(root: BorrowedFd<'_>, plan: &Plan) {
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

fn apply(
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
    for step in &plan.remove {
        tick(&mut done);
        match remove_step(root, &step.path) {
            Ok(true) => {
                report.deleted.push(step.path.to_string());
                report.changed.push(step.path.clone());
            }
            Ok(false) => {}
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
    for step in &plan.restore {
        tick(&mut done);
        let group = group_key(&step.target).filter(|_| step.target.nlink() > 1);
        let result = match group {
            Some(key) => match first_of_inode.get(&key) {
                Some(first) => link_step(root, first, &step.path),
                None => {
                    first_of_inode.insert(key.clone(), step.path.clone());
                    let relinked = match anchors.found.get(&key) {
                        Some(anchor) if *anchor != step.path => {
                            report.changed.push(anchor.clone());
                            link_step(root, anchor, &step.path).map(drop)
                        }
                        _ => Ok(()),
                    };
                    relinked.and_then(|()| {
                        restore_step(root, store, step, &mut dir_modes, &mut report.renewed)
                    })
                }
            },
            None => restore_step(root, store, step, &mut dir_modes, &mut report.renewed),
        };
        match result {
            Ok(true) => {
                report.restored.push(step.path.to_string());
                report.changed.push(step.path.clone());
            }
            Ok(false) => {}
            Err(reason) => report.failed.push(Failure {
                path: step.path.to_string(),
                reason,
            }),
        }
    }
    for (candidate, member) in &anchors.unproven {
        // Left as it is: writing into it could change a file no rewound turn touched.
        report.permanent.insert(candidate.to_string());
        report.failed.push(Failure {
            path: candidate.to_string(),
            reason: format!(
                "not restored: it may be a hard link of {member} as it was when the turn began, \
                 but its record (store version 1) cannot prove it is the same file"
            ),
        });
    }
    for first in &anchors.unresolved {
        report.permanent.insert(first.to_string());
        report.failed.push(Failure {
            path: first.to_string(),
            reason: "restored, but it had hard links outside the rewound paths when the turn \
                     began, and its record (store version 1) cannot find them: they keep what \
                     they hold now"
                .into(),
        });
    }
    set_dir_modes(root, dir_modes, report);
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

/// Removes whatever is at `path`; `Ok(false)` when nothing was there.
fn remove_step(root: BorrowedFd<'_>, path: &RelPath) -> Result<bool, String> {
    let parent = match open_parent(root, path) {
        Ok(p) => p,
        // A missing parent means the path is already absent.
        Err(_)
            if sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                .is_err() =>
        {
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    remove_tree(parent.as_fd(), &cname(path)).map_err(|e| format!("cannot remove: {e}"))
}

/// Removes `name` in `dir` and, if it is a directory, everything below it; never follows links.
pub fn remove_tree(dir: BorrowedFd<'_>, name: &CStr) -> Result<bool, Errno> {
    let st = match sys::lstatat(dir, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(false),
        Err(e) => return Err(e),
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let d = sys::openat(
            dir,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        for e in sys::read_dir_all(d.as_fd(), false)? {
            let c = CString::new(e.name).map_err(|_| Errno(libc::EINVAL))?;
            remove_tree(d.as_fd(), &c)?;
        }
        sys::unlinkat(dir, name, libc::AT_REMOVEDIR)?;
    } else {
        sys::unlinkat(dir, name, 0)?;
    }
    Ok(true)
}

/// Names of a rewind's temp files, in the directory of the path they replace.
const TEMP_PREFIX: &str = ".ckpt-rewind-";

fn temp_name() -> CString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("{TEMP_PREFIX}{}-{n}", std::process::id())).unwrap_or_default()
}

/// Gives the inode behind `fd` its owner (as root: only root may give files away; as a user
/// the files stay ours, which is what they were), then its extended attributes, then its mode:
/// a chown clears set-id bits and capabilities, and an ACL sets the group bits, so the mode
/// goes last. `xattrs: None` (a record that did not say) leaves the attributes as they are.
fn set_attributes(
    fd: BorrowedFd<'_>,
    via: Via<'_>,
    owner: (u32, u32),
    xattrs: Option<&[Xattr]>,
    mode: Option<u32>,
) -> Result<(), String> {
    if sys::geteuid() == 0 {
        sys::fchown(fd, owner.0, owner.1).map_err(|e| format!("cannot set owner: {e}"))?;
    }
    if let Some(x) = xattrs {
        xattrs::apply(via, x).map_err(|e| format!("cannot set extended attributes: {e}"))?;
    }
    if let Some(mode) = mode {
        sys::fchmod_any(fd, mode).map_err(|e| format!("cannot set mode: {e}"))?;
    }
    Ok(())
}

/// Owner, extended attributes and mode (see [`set_attributes`]) for `name` in `dir`, reached
/// through an `O_PATH` descriptor that never follows it (directories, symlinks, FIFOs).
fn set_attributes_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    what: &str,
    (owner, xattrs, mode): ((u32, u32), Option<&[Xattr]>, Option<u32>),
) -> Result<(), String> {
    let fd = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
        .map_err(|e| format!("cannot open {what}: {e}"))?;
    set_attributes(fd.as_fd(), Via::Path(fd.as_fd()), owner, xattrs, mode)
}

/// Whether what stands at `name` (its `lstat` is `st`) already has the owner, mode and extended
/// attributes `target` records (`mode: None` for symlinks).
fn attributes_match(
    dir: BorrowedFd<'_>,
    name: &CStr,
    st: &libc::stat,
    owner: (u32, u32),
    mode: Option<u32>,
    xattrs: Option<&[Xattr]>,
) -> bool {
    let owner_ok = sys::geteuid() != 0 || (st.st_uid, st.st_gid) == owner;
    let mode_ok = mode.is_none_or(|m| st.st_mode & 0o7777 == m);
    let xattrs_ok = xattrs.is_none_or(|want| {
        sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
            .and_then(|fd| xattrs::read_all(Via::Path(fd.as_fd())))
            .is_ok_and(|now| now == want)
    });
    owner_ok && mode_ok && xattrs_ok
}

/// Restores one path; `Ok(false)` when it already matched.
fn restore_step(
    root: BorrowedFd<'_>,
    store: &Store,
    step: &Step,
    dir_modes: &mut Vec<(RelPath, u32)>,
    renewed: &mut Vec<crate::identity::Renewal>,
) -> Result<bool, String> {
    let parent = open_parent(root, &step.path)?;
    let dir = parent.as_fd();
    let name = cname(&step.path);
    let current = match sys::lstatat(dir, &name) {
        Ok(st) => Some(st),
        Err(Errno(libc::ENOENT)) => None,
        Err(e) => return Err(format!("cannot stat: {e}")),
    };
    let cur_kind = current.map(|st| st.st_mode & libc::S_IFMT);
    // Whether the inode at the path is proven to be the one the record names.
    let proven_same = |kind: u32| {
        let recorded = step.target.file_id();
        current.is_some_and(|st| {
            cur_kind == Some(kind)
                && recorded.is_some_and(|id| id.is(&FileId::read_at(dir, &name, 0, st.st_ino)))
        })
    };
    let err = |what: &str| {
        let what = what.to_string();
        move |e: Errno| format!("{what}: {e}")
    };
    match &step.target {
        PreImage::Absent => Err("internal: absent target in the restore list".into()),
        PreImage::Skipped { reason, .. } => Err(format!("not restored: {reason}")),
        // Every staged pre-image is stored before a rewind plans; one left is a journal that
        // never resolved it.
        PreImage::Staged { .. } => {
            Err("not restored: its staged pre-image was never stored".into())
        }
        PreImage::Dir {
            mode,
            uid,
            gid,
            xattrs,
        } => {
            let exists = cur_kind == Some(libc::S_IFDIR);
            let matched = exists
                && current.is_some_and(|st| {
                    attributes_match(
                        dir,
                        &name,
                        &st,
                        (*uid, *gid),
                        Some(*mode),
                        xattrs.as_deref(),
                    )
                });
            if !exists {
                if current.is_some() {
                    remove_tree(dir, &name).map_err(err("cannot remove what is there"))?;
                }
                sys::mkdirat(dir, &name, 0o700).map_err(err("cannot create directory"))?;
            }
            if !matched {
                // The mode is set with the others, last (see `set_dir_modes`).
                let attrs = ((*uid, *gid), xattrs.as_deref(), None);
                set_attributes_at(dir, &name, "the directory", attrs)?;
            }
            dir_modes.push((step.path.clone(), *mode));
            Ok(!matched)
        }
        PreImage::File {
            blob,
            mode,
            uid,
            gid,
            xattrs,
            ..
        } => {
            let attrs = |fd: BorrowedFd<'_>| {
                set_attributes(
                    fd,
                    Via::Open(fd),
                    (*uid, *gid),
                    xattrs.as_deref(),
                    Some(*mode),
                )
            };
            if proven_same(libc::S_IFREG) {
                // In place: the inode (and every hard link to it) keeps its identity.
                let fd = sys::openat(
                    dir,
                    &name,
                    libc::O_WRONLY | libc::O_TRUNC | libc::O_NOFOLLOW,
                    0,
                )
                .map_err(err("cannot open for writing"))?;
                copy_blob(store, blob, fd.as_fd()).map_err(err("cannot write"))?;
                attrs(fd.as_fd())?;
                return Ok(true);
            }
            // Anything else, a file whose identity cannot be proven included, is replaced by a
            // fresh file: never a write into an inode that may be another file.
            let tmp = temp_name();
            let fd = sys::openat(
                dir,
                &tmp,
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
                0o600,
            )
            .map_err(err("cannot create"))?;
            let written = copy_blob(store, blob, fd.as_fd())
                .map_err(err("cannot write"))
                .and_then(|()| attrs(fd.as_fd()));
            let put = Install {
                dir,
                tmp: &tmp,
                name: &name,
                cur_kind,
            };
            put.finish(written, &step.target, renewed)
        }
        PreImage::Symlink {
            target,
            uid,
            gid,
            xattrs,
            ..
        } => {
            let same_target = cur_kind == Some(libc::S_IFLNK)
                && sys::readlinkat(dir, &name).ok().as_deref() == Some(&target.0[..]);
            let matched = same_target
                && current.is_some_and(|st| {
                    attributes_match(dir, &name, &st, (*uid, *gid), None, xattrs.as_deref())
                });
            if matched {
                return Ok(false);
            }
            if same_target && proven_same(libc::S_IFLNK) {
                // The recorded inode (hard links included): its owner and attributes only.
                let attrs = ((*uid, *gid), xattrs.as_deref(), None);
                set_attributes_at(dir, &name, "the symlink", attrs)?;
                return Ok(true);
            }
            let tmp = temp_name();
            let t = CString::new(target.0.clone())
                .map_err(|_| "symlink target contains NUL".to_string())?;
            sys::symlinkat(&t, dir, &tmp).map_err(err("cannot create symlink"))?;
            let attrs = ((*uid, *gid), xattrs.as_deref(), None);
            let finished = set_attributes_at(dir, &tmp, "the new symlink", attrs);
            let put = Install {
                dir,
                tmp: &tmp,
                name: &name,
                cur_kind,
            };
            put.finish(finished, &step.target, renewed)
        }
        PreImage::Fifo {
            mode,
            uid,
            gid,
            xattrs,
        } => {
            let matched = cur_kind == Some(libc::S_IFIFO)
                && current.is_some_and(|st| {
                    attributes_match(
                        dir,
                        &name,
                        &st,
                        (*uid, *gid),
                        Some(*mode),
                        xattrs.as_deref(),
                    )
                });
            if matched {
                return Ok(false);
            }
            let tmp = temp_name();
            sys::mknodat(dir, &tmp, libc::S_IFIFO | (*mode & 0o7777), 0)
                .map_err(err("cannot create fifo"))?;
            let attrs = ((*uid, *gid), xattrs.as_deref(), Some(*mode));
            let finished = set_attributes_at(dir, &tmp, "the new fifo", attrs);
            let put = Install {
                dir,
                tmp: &tmp,
                name: &name,
                cur_kind,
            };
            put.finish(finished, &step.target, renewed)
        }
    }
}

/// A temp file a restore made next to the path it replaces.
struct Install<'a> {
    dir: BorrowedFd<'a>,
    tmp: &'a CStr,
    name: &'a CStr,
    /// What stands at `name` now (`S_IF*`), if anything.
    cur_kind: Option<u32>,
}

impl Install<'_> {
    /// When the temp file was `finished` (content and attributes), moves it over the path and
    /// notes the renewal of the record's identity; else removes it and gives the error.
    fn finish(
        &self,
        finished: Result<(), String>,
        target: &PreImage,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> Result<bool, String> {
        if let Err(e) = finished {
            let _ = sys::unlinkat(self.dir, self.tmp, 0);
            return Err(e);
        }
        replace_with(self.dir, self.tmp, self.name, self.cur_kind)?;
        note_renewal(self.dir, self.name, target, renewed);
        Ok(true)
    }
}

/// A fresh file now stands for the inode `target` records: when that inode is proven to have
/// no name left (a rewind removed it, say), records of its other names mean the new file from
/// now on (see [`crate::identity::Renewal`]). An inode that still has a name somewhere is
/// itself what those records mean, and nothing is noted.
fn note_renewal(
    dir: BorrowedFd<'_>,
    name: &CStr,
    target: &PreImage,
    renewed: &mut Vec<crate::identity::Renewal>,
) {
    if let (Some(was), Ok(now)) = (target.file_id(), FileId::of_name(dir, name))
        && was.is_gone(dir)
    {
        renewed.push(crate::identity::Renewal { was, now });
    }
}

/// Moves `tmp` over `name`, removing a directory that stands there first.
fn replace_with(
    dir: BorrowedFd<'_>,
    tmp: &CStr,
    name: &CStr,
    cur_kind: Option<u32>,
) -> Result<bool, String> {
    if cur_kind == Some(libc::S_IFDIR)
        && let Err(e) = remove_tree(dir, name)
    {
        let _ = sys::unlinkat(dir, tmp, 0);
        return Err(format!("cannot remove the directory there: {e}"));
    }
    crate::failpoint::hit("rewind-before-rename");
    sys::renameat2(dir, tmp, dir, name, 0).map_err(|e| {
        let _ = sys::unlinkat(dir, tmp, 0);
        format!("cannot move into place: {e}")
    })?;
    Ok(true)
}

/// For each hard-linked inode of the plan, a path that holds that very inode now (proven by
/// its identity): a path of the plan when one does, else (when the plan has fewer names than
/// the inode had links) the first such name found by walking the folder; and the names found
/// that carry the inode's number but whose record cannot prove they are it. Found before the
/// rewind changes anything (names the plan removes are skipped), so that the names outside the
/// plan it will rewrite in place are saved first.
struct Anchors {
    found: HashMap<GroupKey, RelPath>,
    /// (name outside the plan, first name of the group in the plan).
    unproven: Vec<(RelPath, RelPath)>,
    /// First names of groups with names outside the plan that no record can find.
    unresolved: Vec<RelPath>,
}

impl Anchors {
    /// The anchors that are not paths of `plan`: names the rewind rewrites in place although
    /// no step names them.
    fn outside_plan(&self, plan: &Plan) -> Vec<RelPath> {
        let planned: HashSet<&RelPath> = plan.steps().map(|s| &s.path).collect();
        self.found
            .values()
            .filter(|p| !planned.contains(p))
            .cloned()
            .collect()
    }
}

/// One group the walk looks for.
struct Wanted {
    key: GroupKey,
    id: FileId,
    first: RelPath,
}

fn link_anchors(root: BorrowedFd<'_>, plan: &Plan, changed: &HashSet<&RelPath>) -> Anchors {
    let mut anchors = Anchors {
        found: HashMap::new(),
        unproven: Vec::new(),
        unresolved: Vec::new(),
    };
    let Ok(dev) = sys::fstat(root).map(|st| st.st_dev) else {
        return anchors;
    };
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
    let holds = |p: &RelPath, key: &GroupKey, id: &FileId| {
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
    };
    let mut wanted: HashMap<u64, Vec<Wanted>> = HashMap::new();
    for (key, (members, nlink, id)) in &groups {
        if let Some(p) = members.iter().find(|p| holds(p, key, id)) {
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
    if !wanted.is_empty()
        && let Ok(top) = sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
    {
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
            wanted: &mut wanted,
            anchors: &mut anchors,
        };
        walk.dir(top.as_fd(), None);
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

fn link_step(root: BorrowedFd<'_>, first: &RelPath, path: &RelPath) -> Result<bool, String> {
    let fparent = open_parent(root, first)?;
    let parent = open_parent(root, path)?;
    let (fname, name) = (cname(first), cname(path));
    let fst =
        sys::lstatat(fparent.as_fd(), &fname).map_err(|e| format!("cannot stat {first}: {e}"))?;
    let cur = sys::lstatat(parent.as_fd(), &name).ok();
    // Two names that exist at once with one number and device are one inode.
    if cur.is_some_and(|st| st.st_ino == fst.st_ino && st.st_dev == fst.st_dev) {
        return Ok(true);
    }
    let tmp = temp_name();
    sys::linkat(fparent.as_fd(), &fname, parent.as_fd(), &tmp)
        .map_err(|e| format!("cannot link: {e}"))?;
    replace_with(
        parent.as_fd(),
        &tmp,
        &name,
        cur.map(|st| st.st_mode & libc::S_IFMT),
    )
}

/// Writes a blob's original bytes into `dst` from offset 0 (decompressing when stored so).
fn copy_blob(store: &Store, id: &str, dst: BorrowedFd<'_>) -> Result<(), Errno> {
    let mut off = 0u64;
    store.blobs.read_blob(id, &mut |chunk| {
        crate::sys::write_all(dst, chunk, off)?;
        off += chunk.len() as u64;
        Ok(())
    })?;
    Ok(())
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
        let p = plan(vec![
            (rp("a/b/c"), PreImage::Absent),
            (rp("x"), dir()),
            (rp("a/b"), dir()),
            (rp("x/y/z"), dir()),
            (rp("a/b/c/d"), PreImage::Absent),
            (rp("x/y"), dir()),
        ]);
        let rm: Vec<String> = p.remove.iter().map(|s| s.path.to_string()).collect();
        assert_eq!(rm, vec!["a/b/c"], "a/b/c/d is covered by removing a/b/c");
        let rs: Vec<String> = p.restore.iter().map(|s| s.path.to_string()).collect();
        assert_eq!(rs, vec!["x", "a/b", "x/y", "x/y/z"]);
    }

    #[test]
    fn paths_below_a_file_target_are_dropped() {
        let file = PreImage::File {
            blob: "0".repeat(64),
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
        let p = plan(vec![
            (rp("a"), file),
            (rp("a/x"), PreImage::Absent),
            (rp("a/y"), dir()),
        ]);
        assert_eq!(p.remove.len(), 0);
        assert_eq!(p.restore.len(), 1);
    }
}
