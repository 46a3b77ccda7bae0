//! `op restore ID`: the folder as it was just after operation `ID`, in one step, the turns
//! untouched. Every path the journal recorded after that operation ended is given its first
//! pre-image recorded since (what it was then: `crate::store::past`); a path nothing recorded
//! since is as it was then already and stays. It runs as a partial rewind runs (captures for
//! the current turn, saves for its undo, `op_begin` of kind `restore_op` and `op_done`), so
//! `undo` takes it back exactly and a run cut off by a crash is completed with the same
//! targets: those read from the journal as it stood before its `op_begin`.
//!
//! I/O: reads the journal, the folder and the store, and (unless previewing) changes both
//! through the stages a whole rewind uses.

use super::links::link_anchors;
use super::plan::plan;
use super::report::{Report, RewindError};
use super::rewinder::{Frame, Rewinder};
use super::save::Saving;
use crate::ids::{Seq, Turn};
use std::collections::HashSet;

impl Rewinder<'_> {
    /// `op restore ID`: completes first what a crash cut off (as every run does), then gives
    /// the folder back as it was just after operation `id`.
    pub(super) fn restore_op(&mut self, id: u64) -> Result<Report, RewindError> {
        if let Some(r) = self.complete_unfinished()? {
            return Ok(r);
        }
        if self.store.index().unfinished_rewind.is_some() {
            // A whole rewind cut off: completed first, as any rewind would be.
            return self.whole(Turn::default());
        }
        self.restore_after(id, None)
    }

    /// Gives the folder back as it was just after operation `id`; `resume` is the `op_begin` of
    /// a run cut off by a crash, completed now with the targets it had (the journal before it).
    pub(super) fn restore_after(
        &mut self,
        id: u64,
        resume: Option<Seq>,
    ) -> Result<Report, RewindError> {
        let index = self.store.index();
        let (op, end) = index
            .ops
            .moment_after(id)
            .map_err(RewindError::Unrestorable)?;
        let words = op.words();
        let until = resume.unwrap_or(index.last_seq.next());
        let past = self
            .store
            .past_until(end, until)
            .map_err(RewindError::Store)?;
        let index = self.store.index();
        let plan = plan(
            index.with_current_identities(past.targets()),
            &index.once_linked(),
        );
        // Every name changed since the operation ended is in the plan, as in a whole rewind:
        // a name outside it that holds an inode of the plan is an anchor.
        let anchors = link_anchors(self.root, &plan, &HashSet::new());
        let from = index.current_turn();
        let mut report = Report {
            to: from,
            from,
            dry_run: self.previews(),
            op: Some(format!(
                "restore of the folder as just after #{id} ({words})"
            )),
            completes_cut_off: resume.is_some(),
            ..Report::default()
        };
        if self.previews() {
            self.dry_run((&plan, &anchors), Saving::Partial, &mut report);
            return Ok(report);
        }
        self.verified(&plan, resume)?;
        let frame = Frame::RestoreOp { id, from };
        self.carry_out(plan, &anchors, frame, resume, &mut report)?;
        Ok(report)
    }
}
