//! The dry run: the verified plan checked, step by step, against the folder as it is now, so
//! that a preview lists what the run would change and nothing else. The plan comes from the
//! journal alone and names every path the rewound turns touched, also those created and
//! removed again within them (a build's temp file, an editor's swap file, `sed -i`'s temp
//! file); a removal of a path that does not stand now, or a restoration of a path that already
//! holds its target, changes nothing and is counted as unchanged, as the run counts it.
//!
//! The preview mirrors `apply.rs` decision for decision: removals first (`parent_for_removal`,
//! as `remove_step` reaches the path), then restorations in order, each hard-link group's later
//! names linked, the others compared with [`Slot::matches`], the one rule the run uses to leave
//! a path as it is. A path below a directory that the run makes anew holds nothing by then.
//! What cannot be restored is listed with the reason the run would give: a capture that was
//! skipped (over `--max-blob`, a socket, a device), a staged pre-image never stored, a parent
//! that is a symlink. A blob missing or damaged refuses the whole run before it changes
//! anything: the preview then says so and lists only what cannot be restored.
//!
//! I/O: reads the folder (`lstat`, `readlink`, extended attributes and the bytes of files whose
//! size matches, to hash them) through descriptors beneath the root; changes nothing.

use super::apply::written_bytes;
use super::groups::{GroupKey, group_key};
use super::links::Anchors;
use super::plan::{Plan, Step};
use super::report::{FailedAt, Failure, Report};
use super::resolve::{Parents, cname};
use super::restore::{Slot, cannot_restore, parent_for_removal};
use super::step::{Op, Outcome, Rewrite, StepResult, sys_err};
use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use crate::sys::{self, Errno};
use std::collections::{HashMap, HashSet};
use std::os::fd::BorrowedFd;

/// Fills `report` with what running `plan` would do to the folder now, as `decided` (by
/// [`decide`]) says for its restorations; `anchors` are the hard-link groups' surviving names
/// the run would relink to.
pub(super) fn preview(
    root: BorrowedFd<'_>,
    plan: &Plan,
    anchors: &Anchors,
    decided: &Decided,
    report: &mut Report,
) {
    let mut parents = Parents::new(root);
    for step in &plan.remove {
        match stands_now(&mut parents, &step.path) {
            Ok(Outcome::Changed) => report.deleted.push(step.path.clone()),
            Ok(Outcome::Unchanged) => report.unchanged += 1,
            Err(e) => fail(report, &step.path, e.to_string()),
        }
    }
    for (step, decision) in plan.restore.iter().zip(&decided.0) {
        match decision {
            Ok(Decision::Unchanged) => report.unchanged += 1,
            Ok(Decision::Linked) => report.restored.push(step.path.clone()),
            Ok(Decision::Written) => {
                report.restored.push(step.path.clone());
                report.bytes += written_bytes(&step.target);
            }
            Err(e) => fail(report, &step.path, e.to_string()),
        }
    }
    anchors.report_unrestored(report);
}

/// The preview of a run that verification refused before it would change anything (a blob
/// missing or damaged: `problems`): the report says so, and lists every path it could not
/// restore (each path named, and every other path whose blob is the same).
pub(super) fn refused(plan: &Plan, problems: Vec<Failure>, report: &mut Report) {
    report.refused = true;
    report.failed = unrestorable(plan, problems);
}

/// For each restoration of `plan`, in order, what the run does to it: decided on the folder
/// as it stands before anything changes, by the walk the preview lists, so that the run does
/// exactly what its preview listed (an error is what the run meets again and reports).
/// Deciding as the run goes would differ from the preview where one step changes what a later
/// one finds, e.g. a file restored alone parts it from a name that then matches on its own.
pub(super) fn decide(root: BorrowedFd<'_>, plan: &Plan, anchors: &Anchors) -> Decided {
    let mut walk = Restores {
        parents: Parents::new(root),
        anchors,
        fresh: HashSet::new(),
        groups: HashSet::new(),
        stood: None,
    };
    let mut outcomes = Vec::with_capacity(plan.restore.len());
    let mut stood = Vec::with_capacity(plan.restore.len());
    for step in &plan.restore {
        walk.stood = None;
        outcomes.push(walk.step(step));
        stood.push(walk.stood.take());
    }
    Decided(outcomes, stood)
}

/// What the run does to each restoration of a plan, in order ([`decide`]), and what stood at
/// each path when it was decided, where the decision looked.
pub(super) struct Decided(Vec<StepResult<Decision>>, Vec<Option<Stood>>);

/// What stood at a restoration's own path when the preview looked: what `lstat` gave, or
/// `None` for nothing. The count of the space a run needs takes it from here instead of asking
/// again (`space::needed`: one `lstat` per restored path less, 5 % of a rewind of 10,000 files,
/// docs/BENCHMARKS.md).
pub(super) type Stood = Option<libc::stat>;

impl Decided {
    /// What stood at the path of each restoration of `plan` where the preview looked (`None`
    /// where it did not: a path below a directory the run makes anew, a name of a hard-link
    /// group linked or compared at another name, a path it could not reach).
    pub(super) fn stood(&self) -> &[Option<Stood>] {
        &self.1
    }

    /// Whether the run must write each restoration whatever stands there: those the preview
    /// lists as restored. One it found an error at is met again by the run, which reports it
    /// (or writes it where the error passed and the path does not match).
    pub(super) fn writes(self) -> Vec<Rewrite> {
        self.0
            .into_iter()
            .map(|d| match d {
                Ok(Decision::Written | Decision::Linked) => Rewrite::Always,
                Ok(Decision::Unchanged) | Err(_) => Rewrite::UnlessMatching,
            })
            .collect()
    }

    /// The restorations of `plan` (the plan decided) that the run writes anew: content, a
    /// directory, a symlink or a FIFO made (not a name linked to another).
    pub(super) fn written<'p>(&self, plan: &'p Plan) -> impl Iterator<Item = &'p Step> {
        plan.restore
            .iter()
            .zip(&self.0)
            .filter(|(_, d)| matches!(d, Ok(Decision::Written)))
            .map(|(s, _)| s)
    }
}

fn fail(report: &mut Report, path: &RelPath, reason: String) {
    report.failed.push(Failure {
        path: path.into(),
        reason,
    });
}

/// The blob a step restores, if it restores a file.
fn step_blob(step: &Step) -> Option<&BlobId> {
    match &step.target {
        PreImage::File { blob, .. } => Some(blob),
        _ => None,
    }
}

/// The paths verification's `problems` leave unrestorable: each path they name, and every
/// other path restored from a blob they found missing or damaged (verification names one path
/// per blob), with its reason.
fn unrestorable(plan: &Plan, problems: Vec<Failure>) -> Vec<Failure> {
    let mut bad: HashMap<&BlobId, &str> = HashMap::new();
    for f in &problems {
        let blob = plan
            .steps()
            .find(|s| FailedAt::Path(s.path.clone()) == f.path)
            .and_then(step_blob);
        if let Some(b) = blob {
            bad.insert(b, &f.reason);
        }
    }
    let named: HashSet<&FailedAt> = problems.iter().map(|f| &f.path).collect();
    let mut out = Vec::new();
    for step in plan.steps() {
        let path = FailedAt::Path(step.path.clone());
        if named.contains(&path) {
            continue;
        }
        if let Some(reason) = step_blob(step).and_then(|b| bad.get(b)) {
            out.push(Failure {
                path,
                reason: (*reason).to_string(),
            });
        }
    }
    let mut all = problems;
    all.extend(out);
    all
}

/// What the run's removal would do to `path` now: changed where something stands, reached as
/// the removal reaches it.
fn stands_now(parents: &mut Parents<'_>, path: &RelPath) -> StepResult<Outcome> {
    let Some(parent) = parent_for_removal(parents, path)? else {
        return Ok(Outcome::Unchanged);
    };
    match sys::lstatat(parent, &cname(path)) {
        Ok(_) => Ok(Outcome::Changed),
        Err(Errno(libc::ENOENT)) => Ok(Outcome::Unchanged),
        Err(e) => Err(sys_err(Op::Remove)(e).on(path)),
    }
}

/// What restoring one step would do.
pub(super) enum Decision {
    /// Nothing: the path already holds its target.
    Unchanged,
    /// Content written or a path made (the report lists it as restored).
    Written,
    /// A later name of a hard-link group linked to its first (always done, as the run does).
    Linked,
}

/// The restorations of a plan, previewed in the run's order.
struct Restores<'a> {
    /// Nothing changes while a preview walks, so the directory last opened stays good.
    parents: Parents<'a>,
    anchors: &'a Anchors,
    /// Directories the run would make anew (nothing stood there, or something else did): every
    /// path below one holds nothing when its turn comes.
    fresh: HashSet<RelPath>,
    /// Hard-link groups whose first name has been seen.
    groups: HashSet<GroupKey>,
    /// What the step decided last found at its own path (see [`Stood`]).
    stood: Option<Stood>,
}

impl Restores<'_> {
    /// What the run would do to `step`'s path, as `apply.rs`'s `restore_in_group` does it: a
    /// later name of a hard-link group is linked; the first is compared where the group's
    /// inode stands now (the name the run relinks it to first, or the path itself).
    fn step(&mut self, step: &Step) -> StepResult<Decision> {
        // An absent target is no restoration: the run meets it after reaching the path, and
        // so does the comparison below.
        if let Some(e) =
            cannot_restore(&step.target).filter(|_| !matches!(step.target, PreImage::Absent))
        {
            return Err(e.on(&step.path));
        }
        let group = group_key(&step.target).filter(|_| step.target.nlink() > 1);
        let mut probe = &step.path;
        let mut relinked = false;
        if let Some(key) = group {
            if !self.groups.insert(key.clone()) {
                return Ok(Decision::Linked);
            }
            if let Some(anchor) = self.anchors.found.get(&key)
                && *anchor != step.path
            {
                probe = anchor;
                relinked = !self.one_inode(anchor, &step.path);
            }
        }
        let (changes, dir_stands) = self.compare(probe, step).map_err(|e| e.on(&step.path))?;
        let changes = changes || relinked;
        if matches!(step.target, PreImage::Dir { .. }) && !dir_stands {
            self.fresh.insert(step.path.clone());
        }
        Ok(if changes {
            Decision::Written
        } else {
            Decision::Unchanged
        })
    }

    /// Whether `a` and `b` are one inode now (as `link_step` finds a link already made).
    fn one_inode(&self, a: &RelPath, b: &RelPath) -> bool {
        let root = self.parents.root();
        let stat =
            |p: &RelPath| super::resolve::lstat_path(root, p).map(|st| (st.st_dev, st.st_ino));
        stat(a).is_some_and(|x| Some(x) == stat(b))
    }

    /// Whether giving `path` the target of `step` changes it, and whether a directory stands there
    /// now.
    fn compare(&mut self, path: &RelPath, step: &Step) -> StepResult<(bool, bool)> {
        let mut above = path.parent();
        while let Some(a) = above {
            if self.fresh.contains(&a) {
                return Ok((true, false));
            }
            above = a.parent();
        }
        let parent = self.parents.open(path)?;
        let name = cname(path);
        let mut slot = Slot::at(parent, &name, &step.target)?;
        if *path == step.path {
            self.stood = Some(slot.current());
        }
        slot.rule = step.rule;
        Ok((!slot.matches(), slot.is_dir()))
    }
}
