//! Undo, redo and relabel as the daemon runs them: like a rewind (`turns.rs`), with the gate
//! held exclusively, names refreshed, files held open for writing captured for the current
//! turn after, and the kernel's caches invalidated.

use super::HostFs;
use super::turns::Turns;
use crate::ids::Turn;
use crate::rewind::{self, Report, RewindError};
use crate::store::ops::RelabelError;

impl Turns {
    /// Runs `undo` (or `redo`) while holding back every other mutation (see
    /// [`rewind::undo_redo`]).
    pub(super) fn undo_redo(
        &self,
        host: &HostFs,
        way: rewind::Direction,
        mode: rewind::Mode,
        progress: rewind::Progress<'_>,
    ) -> Result<Report, RewindError> {
        self.change_folder(host, mode == rewind::Mode::Preview, &mut |root, store| {
            rewind::undo_redo(root, store, way, mode, progress)
        })
    }

    /// Gives turn `turn` the label `label` (an operation of the log).
    pub(super) fn relabel(
        &self,
        host: &HostFs,
        turn: Turn,
        label: Option<String>,
    ) -> Result<(), RelabelError> {
        let mut store = host.capture.lock();
        store.relabel(turn, label)
    }
}
