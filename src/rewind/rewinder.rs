//! [`Rewinder`]: one rewind, undo or redo under way: the folder, its store, the limits, the
//! progress callback and whether it changes anything, carried as one value whose methods are
//! the kinds of run (a whole rewind, a partial one, the agent's; `undo.rs` adds undo and redo)
//! and the stages they share. Every run that changes the folder ends in [`Rewinder::carry_out`]:
//! room, saves, journal, apply, close, framed as its [`Frame`] says.
//!
//! I/O: reads the folder and the store, and (unless previewing) changes both, through the
//! stages in the files beside this one.

use super::agent;
use super::apply::Progress;
use super::apply::{apply, sweep_temps};
use super::close::finish;
use super::groups::share_hard_links;
use super::links::{Anchors, link_anchors, uncaptured_links};
use super::merge;
use super::plan::{Plan, plan};
use super::preview;
use super::report::{AgentSplit, MergedPath};
use super::report::{Report, RewindError};
use super::request::{AgentScope, Agents, Conflicts, Direction, Mode};
use super::save::{Attempt, Saving, read_for_partial, save_records, saved_before, saves_for_undo};
use super::space;
use super::step::Rewrite;
use super::times::{StageTimes, log_took};
use super::verify::{refuse_unless_verified, verify};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{MergedTarget, OpBegin, OpKind};
use crate::store::journal::{PreImage, Record};
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};

/// The bounds a run works under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limits {
    /// The largest file a partial rewind captures for the current turn (a bigger one is
    /// recorded as skipped, with its reason), as any capture under `--max-blob`.
    pub(super) max_blob: u64,
}

impl Default for Limits {
    /// The default `--max-blob`: what a whole rewind, an undo or a redo that completes a
    /// partial rewind cut off by a crash captures under.
    fn default() -> Self {
        Self {
            max_blob: crate::capture::DEFAULT_MAX_BLOB,
        }
    }
}

/// One run on the folder behind `root` with its open store. The caller holds back every other
/// mutation of the folder while it runs.
pub(super) struct Rewinder<'a> {
    /// The folder's root.
    pub(super) root: BorrowedFd<'a>,
    /// Its store, open.
    pub(super) store: &'a mut Store,
    /// The bounds the run works under.
    pub(super) limits: Limits,
    /// Called with (steps done, steps in all) as the run applies its plan.
    pub(super) progress: Progress<'a>,
    /// Whether the run changes anything or only says what it would change.
    pub(super) mode: Mode,
    /// Where its time went (logged at debug at its end).
    times: StageTimes,
}

/// How a run that changes the folder is framed in the journal, and what it reads first.
pub(super) enum Frame<'p> {
    /// A whole rewind to `to`: `RewindBegin`, the saves for its undo, then `RewindDone`.
    Whole {
        /// The turn whose start the folder is given.
        to: Turn,
        /// The turn current before.
        from: Turn,
    },
    /// A partial rewind of `paths` to `to`: `op_begin`, captures for the current turn
    /// (`from`) and saves for its undo, then `op_done`.
    Partial {
        /// The turn whose start the paths are given.
        to: Turn,
        /// The turn current, which the captures belong to.
        from: Turn,
        /// The paths asked for.
        paths: &'p [RelPath],
        /// The paths given a merge's result, and that state.
        merged: &'p [MergedTarget],
    },
    /// `op restore` of the folder as just after operation `id`: `op_begin`, captures for the
    /// current turn (`from`) and saves for its undo, then `op_done`, as a partial rewind.
    RestoreOp {
        /// The operation whose end the folder is given.
        id: u64,
        /// The turn current, which the captures belong to.
        from: Turn,
    },
    /// An undo or redo (`way`) opened by `open`: the saves for its own undo, then `op_done`.
    Revert {
        /// Its `op_begin`.
        open: OpBegin,
        /// The turn current, which the saves belong to.
        from: Turn,
        /// Undo or redo.
        way: Direction,
    },
}

impl Frame<'_> {
    /// What the run reads before it changes anything.
    fn saving(&self) -> Saving {
        match self {
            Self::Partial { .. } | Self::RestoreOp { .. } => Saving::Partial,
            Self::Whole { .. } | Self::Revert { .. } => Saving::ForUndo,
        }
    }

    /// The crash point right after the saves are journaled, where there is one.
    fn after_saves(&self) -> Option<&'static str> {
        match self {
            Self::Whole { .. } => None,
            Self::Partial { .. } => Some("partial-after-saves"),
            Self::RestoreOp { .. } => Some("restore-op-after-saves"),
            Self::Revert {
                way: Direction::Redo,
                ..
            } => Some("redo-after-saves"),
            Self::Revert {
                way: Direction::Undo,
                ..
            } => Some("undo-after-saves"),
        }
    }

    /// The record that opens the run (none when it completes one that was cut off).
    fn open(&self) -> Record {
        match self {
            Self::Whole { to, from } => Record::RewindBegin {
                to: *to,
                from: *from,
            },
            Self::Partial {
                to, paths, merged, ..
            } => Record::OpBegin(OpBegin {
                kind: OpKind::RewindPaths,
                to: Some(*to),
                paths: paths.to_vec(),
                target: None,
                merged: merged.to_vec(),
            }),
            Self::RestoreOp { id, .. } => Record::OpBegin(OpBegin {
                kind: OpKind::RestoreOp,
                to: None,
                paths: Vec::new(),
                target: Some(*id),
                merged: Vec::new(),
            }),
            Self::Revert { open, .. } => Record::OpBegin(open.clone()),
        }
    }

    /// The record that closes the run begun at `begin`, with its counts.
    fn close(&self, begin: Seq, counts: Option<crate::store::journal::OpCounts>) -> Record {
        match self {
            Self::Whole { .. } => Record::RewindDone { begin, counts },
            Self::Partial { .. } | Self::RestoreOp { .. } | Self::Revert { .. } => {
                Record::OpDone { begin, counts }
            }
        }
    }

    /// The turn its saves are captures of.
    fn saves_turn(&self) -> Turn {
        match self {
            Self::Whole { to, .. } => *to,
            Self::Partial { from, .. }
            | Self::RestoreOp { from, .. }
            | Self::Revert { from, .. } => *from,
        }
    }
}

/// What a partial rewind works from: every target of the turn, the chosen ones and the paths
/// asked for.
struct Partial<'p> {
    all: Vec<(RelPath, PreImage)>,
    targets: Vec<(RelPath, PreImage)>,
    paths: &'p [RelPath],
    merged: &'p [MergedTarget],
}

/// `targets` with each path of `merged` given its merged state instead (added when absent).
fn with_merged(
    mut targets: Vec<(RelPath, PreImage)>,
    merged: &[MergedTarget],
) -> Vec<(RelPath, PreImage)> {
    for m in merged {
        match targets.iter_mut().find(|(p, _)| *p == m.path) {
            Some((_, pre)) => *pre = m.pre.clone(),
            None => targets.push((m.path.clone(), m.pre.clone())),
        }
    }
    targets
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

impl<'a> Rewinder<'a> {
    /// A run on the folder behind `root` and its `store`.
    pub(super) fn new(
        root: BorrowedFd<'a>,
        store: &'a mut Store,
        limits: Limits,
        progress: Progress<'a>,
        mode: Mode,
    ) -> Self {
        Self {
            root,
            store,
            limits,
            progress,
            mode,
            times: StageTimes::start(),
        }
    }

    /// Whether the run only says what it would change.
    pub(super) fn previews(&self) -> bool {
        self.mode.dry_run()
    }

    /// The report a rewind to `to` begins with, before it runs: from the current turn, a dry
    /// run when previewing, completing the run cut off at `resume` when there is one.
    fn report(&self, to: Turn, resume: Option<Seq>) -> Report {
        Report {
            to,
            from: self.store.index().current_turn(),
            dry_run: self.previews(),
            completes_cut_off: resume.is_some(),
            ..Report::default()
        }
    }

    /// Rewinds the whole folder to the start of turn `to`.
    pub(super) fn whole(&mut self, to: Turn) -> Result<Report, RewindError> {
        if self.store.index().unfinished_rewind.is_none()
            && let Some(r) = self.complete_unfinished()?
        {
            return Ok(r);
        }
        self.times = StageTimes::start();
        let Chosen {
            to,
            targets,
            resume,
        } = self.targets_for(to)?;
        let plan = plan(
            self.store.index().with_current_identities(targets),
            &self.store.index().once_linked(),
        );
        self.times.end("plan");
        let mut report = self.report(to, resume);
        if self.previews() {
            let anchors = link_anchors(self.root, &plan, &HashSet::new());
            self.dry_run((&plan, &anchors), Saving::ForUndo, &mut report);
            return Ok(report);
        }
        self.verified(&plan, resume)?;
        // Names outside the plan that the rewind rewrites in place (the surviving links of its
        // hard-link groups) are saved with everything else; found once the temp files of a
        // cut-off run are gone.
        let anchors = link_anchors(self.root, &plan, &HashSet::new());
        self.carry_out(
            plan,
            &anchors,
            Frame::Whole {
                to,
                from: report.from,
            },
            resume,
            &mut report,
        )?;
        Ok(report)
    }

    /// What a whole rewind to `to` works from: the turn of a rewind that was cut off, else
    /// the turn asked for.
    fn targets_for(&self, to: Turn) -> Result<Chosen, RewindError> {
        let index = self.store.index();
        if let Some((begin, to, _)) = index.unfinished_rewind {
            // A rewind was cut off: finish it first, whatever was asked.
            log::warn!(target: "ckpt::rewind", "completing the rewind to turn {to} that was cut off");
            return Ok(Chosen {
                to,
                targets: index.plan_targets(to),
                resume: Some(begin),
            });
        }
        self.known_turn(to)?;
        Ok(Chosen {
            to,
            targets: index.plan_targets(to),
            resume: None,
        })
    }

    /// Refuses a turn the index does not have.
    fn known_turn(&self, to: Turn) -> Result<(), RewindError> {
        let index = self.store.index();
        if index.has_turn(to) {
            return Ok(());
        }
        Err(RewindError::NoSuchTurn {
            turn: to,
            known: index.turns.iter().map(|t| t.turn).collect(),
        })
    }

    /// Rewinds only `paths` (what lies below them, and the directories above them) to the start
    /// of turn `to`. This is a change made in the current turn like any other: what it
    /// overwrites is captured for the current turn first, so no turn leaves the index, and
    /// rewinding the current turn undoes it, under the run's `max_blob` as any other capture
    /// (a bigger file is recorded as skipped, with its reason). It is also an operation of its
    /// own (`op_begin` / `op_done`): what it overwrites that the current turn had captured
    /// already is saved for its undo (whatever its size), so `undo` gives the folder back
    /// exactly as it was.
    pub(super) fn paths(&mut self, to: Turn, paths: &[RelPath]) -> Result<Report, RewindError> {
        if let Some(r) = self.complete_unfinished()? {
            return Ok(r);
        }
        self.partial(to, (paths, &[]), None)
    }

    /// A partial rewind of `paths`, those of `merged` given a merge's result; `resume` is the
    /// `op_begin` of a run cut off by a crash, completed now.
    pub(super) fn partial(
        &mut self,
        to: Turn,
        (paths, merged): (&[RelPath], &[MergedTarget]),
        resume: Option<Seq>,
    ) -> Result<Report, RewindError> {
        let all = self.all_targets(to)?;
        // What lies at or below a path asked for is restored; an ancestor only where no
        // directory stands now (then as it was at the start of the turn): one that exists keeps
        // its mode, owner, xattrs and times, as nobody asked to rewind it.
        let targets: Vec<(RelPath, PreImage)> = all
            .iter()
            .filter(|(p, pre)| {
                paths.iter().any(|o| {
                    p.starts_with(o)
                        || (o.starts_with(p)
                            && matches!(pre, PreImage::Dir { .. })
                            && !self.is_dir_now(p))
                })
            })
            .cloned()
            .collect();
        let report = Report {
            only: paths.to_vec(),
            ..self.report(to, resume)
        };
        let chosen = Partial {
            all,
            targets: with_merged(targets, merged),
            paths,
            merged,
        };
        self.rewind_partial(chosen, report, resume)
    }

    /// Rewinds what only the agents `agent` names changed since the start of turn `to` (and,
    /// with `Conflicts::Rewind`, what they and others both changed), keeping every other
    /// path as it is: a partial rewind of exactly those paths (`agent.rs` chooses them), whose
    /// report says who changed what. Like any partial rewind it is an operation that `undo`
    /// takes back.
    pub(super) fn agent(&mut self, to: Turn, agent: &AgentScope) -> Result<Report, RewindError> {
        if let Some(r) = self.complete_unfinished()? {
            return Ok(r);
        }
        let all = self.all_targets(to)?;
        let dir_now = |d: &RelPath| self.is_dir_now(d);
        let mut split = agent::split(self.store.index(), to, agent, &dir_now)?;
        let merged = if agent.conflicts == Conflicts::Merge {
            self.merge_conflicts(&mut split, to, &agent.agents)?
        } else {
            Vec::new()
        };
        let paths = split.chosen();
        let wanted: HashSet<&RelPath> = paths.iter().collect();
        let targets: Vec<(RelPath, PreImage)> = all
            .iter()
            .filter(|(p, _)| wanted.contains(p))
            .cloned()
            .collect();
        let report = Report {
            agent: Some(split),
            ..self.report(to, None)
        };
        let chosen = Partial {
            all,
            targets: with_merged(targets, &merged),
            paths: &paths,
            merged: &merged,
        };
        self.rewind_partial(chosen, report, None)
    }

    /// `--conflicts merge`: each conflict that nothing holds back (below or above it) merged
    /// line by line (`merge.rs`). A clean merge moves the path to `split.merged`, with the
    /// diff the folder gets, and returns the state it is given: the file as it is now (mode,
    /// owner, xattrs, inode) with the merged bytes, stored as a blob. An overlap stays a
    /// conflict with its hunks; a binary file stays a conflict, saying so.
    fn merge_conflicts(
        &mut self,
        split: &mut AgentSplit,
        to: Turn,
        agents: &Agents,
    ) -> Result<Vec<MergedTarget>, RewindError> {
        let mut out = Vec::new();
        let mut kept = Vec::new();
        for mut c in std::mem::take(&mut split.conflicts) {
            if c.below.is_some() || c.above.is_some() {
                kept.push(c);
                continue;
            }
            match merge::merge(self.root, self.store, &c, to, agents) {
                merge::Merged::Clean { now, merged } => {
                    let Some(pre) = self.merged_state(&c.path, merged.as_bytes())? else {
                        c.merge = Some("not merged: the file cannot be read now".into());
                        kept.push(c);
                        continue;
                    };
                    split.merged.push(MergedPath {
                        diff: merge::unified_diff(&c.path, &now, &merged),
                        path: c.path.clone(),
                        actors: c.actors,
                    });
                    out.push(MergedTarget { path: c.path, pre });
                }
                merge::Merged::Overlap(hunks) => {
                    c.merge = Some(format!("overlapping edits, kept:\n{hunks}"));
                    kept.push(c);
                }
                merge::Merged::Whole(why) => {
                    c.merge = Some(format!("not merged line by line: {why}"));
                    kept.push(c);
                }
            }
        }
        split.conflicts = kept;
        Ok(out)
    }

    /// The state `path` is given by a merge: the file as it stands now (mode, owner, inode,
    /// xattrs) with `bytes`, stored as a blob; `None` when it cannot be read now.
    fn merged_state(&self, path: &RelPath, bytes: &[u8]) -> Result<Option<PreImage>, RewindError> {
        let Ok(parent) = super::resolve::open_parent_raw(self.root, path) else {
            return Ok(None);
        };
        let name = path.file_name_cstring();
        let blobs = self.store.blobs();
        let Ok(now) = crate::capture::read_preimage(blobs, parent.as_fd(), &name, merge::MERGE_MAX)
        else {
            return Ok(None);
        };
        if !matches!(now, PreImage::File { .. }) {
            return Ok(None);
        }
        let stored = blobs.put_bytes(bytes).map_err(|errno| {
            RewindError::Store(crate::store::StoreError::Io {
                what: format!("store the merge of {path}"),
                errno,
            })
        })?;
        Ok(now.with_content(stored.id, stored.size))
    }

    /// Whether a directory stands at `d` now (reached without following a symlink).
    fn is_dir_now(&self, d: &RelPath) -> bool {
        super::resolve::lstat_path(self.root, d)
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// Every target of a rewind to `to`, with hard-link groups formed over all of them before
    /// a partial rewind chooses: a name's own first capture may come after a write through
    /// another name of its inode, whose earlier capture holds the bytes of the start of the
    /// turn.
    fn all_targets(&self, to: Turn) -> Result<Vec<(RelPath, PreImage)>, RewindError> {
        self.known_turn(to)?;
        let index = self.store.index();
        Ok(share_hard_links(
            index.with_current_identities(index.plan_targets(to)),
        ))
    }

    /// Runs a partial rewind (see [`Rewinder::paths`]): what it overwrites is captured for the
    /// current turn and saved for its undo between its `op_begin` and the changes, and
    /// `op_done` closes it.
    fn rewind_partial(
        &mut self,
        chosen: Partial<'_>,
        mut report: Report,
        resume: Option<Seq>,
    ) -> Result<Report, RewindError> {
        let Partial {
            all,
            mut targets,
            paths,
            merged,
        } = chosen;
        targets.extend(uncaptured_links(self.root, &all, &targets, paths));
        let plan = plan(targets, &self.store.index().once_linked());
        // A name outside the chosen paths that a rewound turn changed no longer holds what it
        // held when the turn began: it is no anchor (in a whole rewind every such name is in
        // the plan).
        let changed: HashSet<&RelPath> = all.iter().map(|(p, _)| p).collect();
        let anchors = link_anchors(self.root, &plan, &changed);
        if self.previews() {
            self.dry_run((&plan, &anchors), Saving::Partial, &mut report);
            return Ok(report);
        }
        self.verified(&plan, resume)?;
        let frame = Frame::Partial {
            to: report.to,
            from: report.from,
            paths,
            merged,
        };
        self.carry_out(plan, &anchors, frame, resume, &mut report)?;
        Ok(report)
    }

    /// Refuses `plan` unless every path is valid and every blob present and whole; then, for
    /// a run that completes one cut off by a crash (`resume`), removes the temp files it left.
    pub(super) fn verified(&self, plan: &Plan, resume: Option<Seq>) -> Result<(), RewindError> {
        refuse_unless_verified(plan, self.store)?;
        if resume.is_some() {
            // Temp files a run of this rewind cut off by a crash left behind.
            sweep_temps(self.root, plan);
        }
        Ok(())
    }

    /// Carries out a verified `plan` (with the hard-link `anchors` it relinks to) and closes
    /// it, framed as `frame` says: refused when the disks lack the room; what it overwrites
    /// read and journaled with the record that opens it (unless it completes the run begun at
    /// `resume`), then applied, then closed (see [`finish`]). The reading and journaling happen
    /// before the folder changes: a failure there refuses the run with nothing changed,
    /// nothing left open and nothing left in the store.
    pub(super) fn carry_out(
        &mut self,
        plan: Plan,
        anchors: &Anchors,
        frame: Frame<'_>,
        resume: Option<Seq>,
        report: &mut Report,
    ) -> Result<(), RewindError> {
        let writes = self.room_for_run((&plan, anchors), frame.saving())?;
        self.times.end("room");
        let attempt = Attempt::begin(self.store)?;
        let begin = resume.unwrap_or(self.store.index().last_seq.next());
        let read = self.read_saves(&plan, anchors, &frame, begin);
        let reads = match read {
            Ok(reads) => reads,
            Err(e) => return Err(attempt.refuse(self.store, e)),
        };
        self.times.end("read saves");
        let open = resume.is_none().then(|| frame.open());
        attempt.journal(self.store, open.into_iter().chain(reads))?;
        self.times.end("journal saves");
        if let Some(point) = frame.after_saves() {
            crate::failpoint::hit(point);
        }
        let steps = plan.remove.len() + plan.restore.len();
        apply(
            self.root,
            self.store,
            (&plan, writes),
            anchors,
            report,
            self.progress,
        );
        self.times.end("apply");
        finish(self.store, plan, report, |counts| {
            frame.close(begin, counts)
        })?;
        self.times.end("close");
        self.times.log(steps);
        Ok(())
    }

    /// What the run journals before it changes the folder, read from it now: the saves for
    /// its undo and, for a partial rewind, its captures for the current turn first.
    fn read_saves(
        &self,
        plan: &Plan,
        anchors: &Anchors,
        frame: &Frame<'_>,
        begin: Seq,
    ) -> Result<Box<dyn Iterator<Item = Record>>, RewindError> {
        let extra = anchors.outside_plan(plan);
        let turn = frame.saves_turn();
        if frame.saving() == Saving::ForUndo {
            let saves = saves_for_undo(self.root, self.store, plan, &extra)?;
            return Ok(Box::new(save_records(saves, turn, begin)));
        }
        let max_blob = self.limits.max_blob;
        let (captures, saves) = read_for_partial(self.root, self.store, plan, &extra, max_blob)?;
        let captures = captures
            .into_iter()
            .map(move |(path, pre)| Record::Capture {
                turn,
                path,
                pre,
                undo_of: None,
                pid: None,
                comm: None,
            });
        Ok(Box::new(captures.chain(save_records(saves, turn, begin))))
    }

    /// The dry run of `plan` (with the hard-link `anchors` the run would relink to) into
    /// `report`: what the run would do to the folder as it is now (`preview.rs`), and whether
    /// the disks have the room it needs (`space.rs`), for what it would read first (`saving`).
    /// A blob missing or damaged refuses the run: the preview then says so and nothing more.
    pub(super) fn dry_run(
        &self,
        (plan, anchors): (&Plan, &Anchors),
        saving: Saving,
        report: &mut Report,
    ) {
        let problems = verify(plan, self.store);
        if !problems.is_empty() {
            preview::refused(plan, problems, report);
            return;
        }
        let decided = preview::decide(self.root, plan, anchors);
        preview::preview(self.root, plan, anchors, &decided, report);
        let saved = saved_before(self.store, saving);
        report.space = Some(space::needed(
            self.root, self.store, plan, anchors, &saved, &decided,
        ));
    }

    /// Refuses the run of `plan` before it changes or stores anything when the disks lack the
    /// room it needs (`space.rs`), naming the space needed and free, the largest files the
    /// rewound turns created and what to do; else which of its restorations it writes
    /// whatever stands there (decided, as its preview decides it, on the folder as it stands
    /// before anything changes).
    fn room_for_run(
        &self,
        (plan, anchors): (&Plan, &Anchors),
        saving: Saving,
    ) -> Result<Vec<Rewrite>, RewindError> {
        let started = std::time::Instant::now();
        let decided = preview::decide(self.root, plan, anchors);
        log_took("what to write decided", started);
        let saved = saved_before(self.store, saving);
        let space = space::needed(self.root, self.store, plan, anchors, &saved, &decided);
        if !space.fits {
            log::warn!(target: "ckpt::rewind", "rewind refused before changing anything: {}", space.shortfall());
            return Err(RewindError::NoSpace(Box::new(space)));
        }
        Ok(decided.writes())
    }
}
