//! Rewind: a pure plan from the journal's targets, verified before anything changes, then
//! applied through descriptors that never follow a symlink, with a report.
//!
//! Order of application: paths that must not exist are removed deepest first; then every
//! other path is restored shallowest first, so parents exist before children; directory modes
//! are set last, deepest first, so a read-only directory never blocks its own children.
//! A rewind saves what it overwrites or deletes (records with `undo_of`) before changing it.

use crate::capture::{read_preimage, walk_tree};
use crate::relpath::RelPath;
use crate::store::journal::{PreImage, Record};
use crate::store::{Store, StoreError};
use crate::sys::{self, Errno};
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

/// Names whose pre-images carry one inode number, at least one of them hard-linked, were one
/// inode when the target turn began (a path's inode only changes through a captured operation).
/// Each gets the oldest of their pre-images (the first in `targets`), with the largest link
/// count, so they are restored as one inode with its content from the start of the turn.
fn share_hard_links(mut targets: Vec<(RelPath, PreImage)>) -> Vec<(RelPath, PreImage)> {
    let mut canon: HashMap<u64, PreImage> = HashMap::new();
    let mut most: HashMap<u64, u64> = HashMap::new();
    for (_, t) in &targets {
        if let PreImage::File { ino, nlink, .. } = t {
            canon.entry(*ino).or_insert_with(|| t.clone());
            let m = most.entry(*ino).or_insert(0);
            *m = (*m).max(*nlink);
        }
    }
    for (_, t) in &mut targets {
        if let PreImage::File { ino, .. } = t {
            let n = most.get(ino).copied().unwrap_or(1);
            if let (
                true,
                Some(PreImage::File {
                    blob,
                    size,
                    mode,
                    uid,
                    gid,
                    ..
                }),
            ) = (n > 1, canon.get(ino))
            {
                *t = PreImage::File {
                    blob: blob.clone(),
                    size: *size,
                    mode: *mode,
                    uid: *uid,
                    gid: *gid,
                    ino: *ino,
                    nlink: n,
                };
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
    let plan = plan(targets);
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
    if req.undo {
        // An undo is not itself undoable: it saves nothing and is closed by one record. Cut
        // off midway, running it again completes it (the same targets apply again).
        let rewind = store.index.last_rewind.as_ref().map_or(0, |l| l.begin);
        apply(root, store, &plan, &mut report, progress);
        store
            .append(Record::UndoDone { rewind })
            .map_err(RewindError::Store)?;
        return Ok(report);
    }
    let begin = match resume {
        Some(b) => b,
        None => store
            .append(Record::RewindBegin { to, from })
            .map_err(RewindError::Store)?,
    };
    save_for_undo(root, store, &plan, begin, to).map_err(RewindError::Store)?;
    apply(root, store, &plan, &mut report, progress);
    // A pre-image that was never stored fails every time; anything else (a parent swapped for
    // a symlink meanwhile, an I/O error) may succeed on a second run. Such a rewind stays open,
    // its turns in the index, so that running it again completes it instead of leaving a mix.
    let permanent: HashSet<String> = plan
        .steps()
        .filter(|s| matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| s.path.to_string())
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

fn open_parent(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, String> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let r = match path.parent() {
        None => sys::openat(root, c".", flags, 0),
        Some(p) => sys::open_beneath(root, &p.to_cstring(), flags, 0),
    };
    r.map_err(|e| match e.0 {
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
    CString::new(path.file_name().as_encoded_bytes()).unwrap_or_default()
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
    let targets: Vec<(RelPath, PreImage)> = store
        .index
        .plan_targets(to)
        .into_iter()
        .filter(|(p, pre)| {
            paths.iter().any(|o| {
                p.starts_with(o) || (o.starts_with(p) && matches!(pre, PreImage::Dir { .. }))
            })
        })
        .collect();
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
    let mut records = Vec::new();
    for step in plan.steps() {
        if matches!(step.target, PreImage::Skipped { .. }) {
            continue; // never restored, so this rewind leaves it as it is
        }
        let Ok(parent) = open_parent(root, &step.path) else {
            continue;
        };
        let name = cname(&step.path);
        let blobs = &store.blobs;
        let captured = &store.index.captured_now;
        let _ = walk_tree(parent.as_fd(), &name, &step.path, &mut |p, dir, n| {
            if !captured.contains(p) {
                records.push((p.clone(), read_preimage(blobs, dir, n, max_blob)?));
            }
            Ok(())
        });
    }
    for (path, pre) in records {
        if !store.index.captured_now.contains(&path) {
            store
                .append(Record::Capture {
                    turn: from,
                    path,
                    pre,
                    undo_of: None,
                    pid: None,
                    comm: None,
                })
                .map_err(RewindError::Store)?;
        }
    }
    apply(root, store, &plan, &mut report, progress);
    Ok(report)
}

fn save_for_undo(
    root: BorrowedFd<'_>,
    store: &mut Store,
    plan: &Plan,
    begin: u64,
    to: u64,
) -> Result<(), StoreError> {
    let already: HashSet<RelPath> = store
        .index
        .unfinished_saved
        .iter()
        .map(|c| c.path.clone())
        .collect();
    let mut records = Vec::new();
    for step in plan.steps() {
        if matches!(step.target, PreImage::Skipped { .. }) {
            // Never restored, so never changed by this rewind: nothing to save (a file over
            // --max-blob would otherwise be stored whole here).
            continue;
        }
        let Ok(parent) = open_parent(root, &step.path) else {
            continue;
        };
        let name = cname(&step.path);
        let blobs = &store.blobs;
        // Saved whatever their size: an undo must be exact.
        let max = u64::MAX;
        let _ = walk_tree(parent.as_fd(), &name, &step.path, &mut |p, dir, n| {
            if !already.contains(p) {
                records.push((p.clone(), read_preimage(blobs, dir, n, max)?));
            }
            Ok(())
        });
    }
    for (path, pre) in records {
        if matches!(pre, PreImage::Absent)
            && store.index.unfinished_saved.iter().any(|c| c.path == path)
        {
            continue;
        }
        store.append(Record::Capture {
            turn: to,
            path,
            pre,
            undo_of: Some(begin),
            pid: None,
            comm: None,
        })?;
    }
    Ok(())
}

fn apply(
    root: BorrowedFd<'_>,
    store: &Store,
    plan: &Plan,
    report: &mut Report,
    progress: Progress<'_>,
) {
    let total = plan.remove.len() + plan.restore.len();
    let mut done = 0;
    let tick = |done: &mut usize| {
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
    // Where the inode still stands (under a name in the plan or not), the first path is linked
    // to it and rewritten in place, so names the plan does not touch share it again.
    let anchors = link_anchors(root, plan);
    let mut first_of_inode: HashMap<u64, RelPath> = HashMap::new();
    let mut dir_modes: Vec<(RelPath, u32)> = Vec::new();
    for step in &plan.restore {
        tick(&mut done);
        let result = match &step.target {
            PreImage::File { ino, nlink, .. } if *nlink > 1 => match first_of_inode.get(ino) {
                Some(first) => link_step(root, first, &step.path),
                None => {
                    first_of_inode.insert(*ino, step.path.clone());
                    let relinked = match anchors.get(ino) {
                        Some(anchor) if *anchor != step.path => {
                            report.changed.push(anchor.clone());
                            link_step(root, anchor, &step.path).map(drop)
                        }
                        _ => Ok(()),
                    };
                    relinked.and_then(|()| restore_step(root, store, step, &mut dir_modes))
                }
            },
            _ => restore_step(root, store, step, &mut dir_modes),
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

fn temp_name() -> CString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    CString::new(format!(".ckpt-rewind-{}-{n}", std::process::id())).unwrap_or_default()
}

fn chown_entry(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) {
    // Only root may give files away; as a user the files stay ours, which is what they were.
    if sys::geteuid() == 0 {
        let _ = sys::lchownat(dir, name, uid, gid);
    }
}

/// Restores one path; `Ok(false)` when it already matched.
fn restore_step(
    root: BorrowedFd<'_>,
    store: &Store,
    step: &Step,
    dir_modes: &mut Vec<(RelPath, u32)>,
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
        PreImage::Dir { mode, uid, gid } => {
            if let Some(st) = current.filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR) {
                dir_modes.push((step.path.clone(), *mode));
                if st.st_uid != *uid || st.st_gid != *gid {
                    chown_entry(dir, &name, *uid, *gid);
                }
                return Ok(st.st_mode & 0o7777 != *mode || st.st_uid != *uid || st.st_gid != *gid);
            }
            if current.is_some() {
                remove_tree(dir, &name).map_err(err("cannot remove what is there"))?;
            }
            sys::mkdirat(dir, &name, 0o700).map_err(err("cannot create directory"))?;
            chown_entry(dir, &name, *uid, *gid);
            dir_modes.push((step.path.clone(), *mode));
            Ok(true)
        }
        PreImage::File {
            blob,
            mode,
            uid,
            gid,
            ino,
            ..
        } => {
            let same_inode =
                cur_kind == Some(libc::S_IFREG) && current.is_some_and(|st| st.st_ino == *ino);
            if same_inode {
                // In place: the inode (and every hard link to it) keeps its identity.
                let fd = sys::openat(
                    dir,
                    &name,
                    libc::O_WRONLY | libc::O_TRUNC | libc::O_NOFOLLOW,
                    0,
                )
                .map_err(err("cannot open for writing"))?;
                copy_blob(store, blob, fd.as_fd()).map_err(err("cannot write"))?;
                sys::fchmod_any(fd.as_fd(), *mode).map_err(err("cannot set mode"))?;
                chown_entry(dir, &name, *uid, *gid);
                return Ok(true);
            }
            let tmp = temp_name();
            let fd = sys::openat(
                dir,
                &tmp,
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
                0o600,
            )
            .map_err(err("cannot create"))?;
            let written = copy_blob(store, blob, fd.as_fd())
                .and_then(|()| sys::fchmod_any(fd.as_fd(), *mode))
                .map_err(err("cannot write"));
            if let Err(e) = written {
                let _ = sys::unlinkat(dir, &tmp, 0);
                return Err(e);
            }
            chown_entry(dir, &tmp, *uid, *gid);
            replace_with(dir, &tmp, &name, cur_kind)
        }
        PreImage::Symlink { target, uid, gid } => {
            if cur_kind == Some(libc::S_IFLNK)
                && sys::readlinkat(dir, &name).ok().as_deref() == Some(&target.0[..])
            {
                return Ok(false);
            }
            let tmp = temp_name();
            let t = CString::new(target.0.clone())
                .map_err(|_| "symlink target contains NUL".to_string())?;
            sys::symlinkat(&t, dir, &tmp).map_err(err("cannot create symlink"))?;
            chown_entry(dir, &tmp, *uid, *gid);
            replace_with(dir, &tmp, &name, cur_kind)
        }
        PreImage::Fifo { mode, uid, gid } => {
            if cur_kind == Some(libc::S_IFIFO) {
                return Ok(false);
            }
            let tmp = temp_name();
            sys::mknodat(dir, &tmp, libc::S_IFIFO | (*mode & 0o7777), 0)
                .map_err(err("cannot create fifo"))?;
            let _ = sys::openat(dir, &tmp, libc::O_PATH | libc::O_NOFOLLOW, 0)
                .map(|fd| sys::fchmod_any(fd.as_fd(), *mode));
            chown_entry(dir, &tmp, *uid, *gid);
            replace_with(dir, &tmp, &name, cur_kind)
        }
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
    sys::renameat2(dir, tmp, dir, name, 0).map_err(|e| {
        let _ = sys::unlinkat(dir, tmp, 0);
        format!("cannot move into place: {e}")
    })?;
    Ok(true)
}

/// For each hard-linked inode of the plan, a path that holds it now: a path of the plan when one
/// does, else (when the plan has fewer names than the inode had links) the first name found by
/// walking the folder. Called after the removals.
fn link_anchors(root: BorrowedFd<'_>, plan: &Plan) -> HashMap<u64, RelPath> {
    let mut anchors = HashMap::new();
    let Ok(dev) = sys::fstat(root).map(|st| st.st_dev) else {
        return anchors;
    };
    let mut groups: HashMap<u64, (Vec<&RelPath>, u64)> = HashMap::new();
    for step in &plan.restore {
        if let PreImage::File { ino, nlink, .. } = &step.target
            && *nlink > 1
        {
            let g = groups.entry(*ino).or_insert_with(|| (Vec::new(), 0));
            g.0.push(&step.path);
            g.1 = g.1.max(*nlink);
        }
    }
    let holds = |p: &RelPath, ino: u64| {
        open_parent(root, p)
            .ok()
            .and_then(|d| sys::lstatat(d.as_fd(), &cname(p)).ok())
            .is_some_and(|st| {
                st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_ino == ino && st.st_dev == dev
            })
    };
    let mut wanted = HashSet::new();
    for (ino, (members, nlink)) in &groups {
        if let Some(p) = members.iter().find(|p| holds(p, *ino)) {
            anchors.insert(*ino, (*p).clone());
        } else if (members.len() as u64) < *nlink {
            wanted.insert(*ino);
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
        find_inodes(top.as_fd(), None, dev, &restored, &mut wanted, &mut anchors);
    }
    anchors
}

/// Walks the directory `dir` (at `path`, `None` for the root; never into the store, through a
/// symlink or onto another device) for regular files whose inode is in `wanted`, skipping the
/// paths in `restored` (the plan's restore paths, each with whether its target is a directory).
fn find_inodes(
    dir: BorrowedFd<'_>,
    path: Option<&RelPath>,
    dev: u64,
    restored: &HashMap<&RelPath, bool>,
    wanted: &mut HashSet<u64>,
    found: &mut HashMap<u64, RelPath>,
) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = sys::read_dir_all(dir, false) else {
        return;
    };
    for e in entries {
        if wanted.is_empty() {
            return;
        }
        // `.ckpt` at the top is not a valid path, so the store is never walked.
        let Ok(child) = RelPath::join(path, std::ffi::OsStr::from_bytes(&e.name)) else {
            continue;
        };
        let Ok(name) = CString::new(e.name) else {
            continue;
        };
        let kind = match e.kind {
            libc::DT_UNKNOWN => {
                match sys::lstatat(dir, &name).map(|st| st.st_mode & libc::S_IFMT) {
                    Ok(libc::S_IFDIR) => libc::DT_DIR,
                    Ok(libc::S_IFREG) => libc::DT_REG,
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
            if sys::fstat(sub.as_fd()).is_ok_and(|st| st.st_dev == dev)
                && restored.get(&child) != Some(&false)
            {
                find_inodes(sub.as_fd(), Some(&child), dev, restored, wanted, found);
            }
        } else if kind == libc::DT_REG
            && wanted.contains(&e.ino)
            && !restored.contains_key(&child)
            && let Ok(st) = sys::lstatat(dir, &name)
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_dev == dev
            && wanted.remove(&st.st_ino)
        {
            found.insert(st.st_ino, child);
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
        crate::store::blob::write_all(dst, chunk, off)?;
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
