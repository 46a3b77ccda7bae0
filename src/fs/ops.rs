//! Undo, redo and relabel as the daemon runs them: like a rewind (`turns.rs`), with the gate
//! held exclusively, names refreshed, files held open for writing captured for the current
//! turn after, and the kernel's caches invalidated.

use super::*;

impl CkptFs {
    /// Runs `undo` (or `redo`) while holding back every other mutation (see
    /// [`rewind::undo_redo`]).
    pub fn undo_redo(
        &self,
        redo: bool,
        dry_run: bool,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        let (report, refreshed) = {
            let _gate = self.exclusive_gate();
            let mut store = self.capture.lock();
            let mut report =
                rewind::undo_redo(self.root.as_fd(), &mut store, redo, dry_run, progress)?;
            drop(store);
            let mut refreshed = Vec::new();
            if !dry_run {
                self.lock_dirs().map.clear();
                refreshed = self.refresh_names(&report.changed);
                self.capture_held_after(&mut report);
                self.lock_dirs().map.clear();
            }
            (report, refreshed)
        };
        if !dry_run {
            self.invalidate(&refreshed);
        }
        Ok(report)
    }

    /// After an operation that began a capture epoch (a partial rewind, an undo, a redo):
    /// files still open for writing are captured for it, as after a rewind, because their next
    /// writes need no `open`; one that cannot be is reported as failed.
    pub(super) fn capture_held_after(&self, report: &mut Report) {
        let held = self.held_for_write();
        let failed = self.capture.begin_turn_captures(&|f| {
            for name in &held {
                match name {
                    Ok((dir, name, path)) => f(Ok((dir.as_fd(), name, path))),
                    Err(e) => f(Err(*e)),
                }
            }
        });
        for (path, e) in failed {
            log::warn!(target: "ckpt::rewind", "{path}: held open for writing, not captured after the operation: {e}");
            report.permanent.insert(path.clone());
            report.failed.push(rewind::Failure {
                path,
                reason: format!(
                    "held open for writing, and its state could not be captured ({e}): later writes through that descriptor cannot be undone"
                ),
            });
        }
    }

    /// Gives turn `turn` the label `label` (an operation of the log).
    pub fn relabel(&self, turn: Turn, label: Option<String>) -> Result<(), String> {
        let mut store = self.capture.lock();
        crate::store::ops::relabel(&mut store, turn, label)
    }
}
