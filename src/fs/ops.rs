//! Undo, redo and relabel as the daemon runs them: like a rewind (`turns.rs`), with the gate
//! held exclusively, names refreshed, files held open for writing captured for the current
//! turn after, and the kernel's caches invalidated.

use super::CkptFs;
use crate::ids::Turn;
use crate::rewind::{self, Report, RewindError};
use crate::store::ops::RelabelError;

impl CkptFs {
    /// Runs `undo` (or `redo`) while holding back every other mutation (see
    /// [`rewind::undo_redo`]).
    pub fn undo_redo(
        &self,
        way: rewind::Direction,
        mode: rewind::Mode,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        self.rewind_part(mode == rewind::Mode::Preview, &mut |root, store| {
            rewind::undo_redo(root, store, way, mode, progress)
        })
    }

    /// Gives turn `turn` the label `label` (an operation of the log).
    pub fn relabel(&self, turn: Turn, label: Option<String>) -> Result<(), RelabelError> {
        let mut store = self.capture.lock();
        crate::store::ops::relabel(&mut store, turn, label)
    }
}
