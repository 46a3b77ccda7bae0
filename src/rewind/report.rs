//! What a rewind tells its caller: the [`Report`] of what it did (restored, deleted, failed,
//! whether it stays open), the [`Failure`] of one path, and the [`RewindError`] when it did not
//! start. Kept apart because every stage fills these in and every caller (the daemon's control
//! files, the CLI, the tests) reads them.
//!
//! No I/O: plain types, their rendering and the errno a writer of `.ckpt/rewind` sees.

use super::plan::Plan;
use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::StoreError;
use serde::Serialize;
use std::collections::HashSet;

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
    pub to: Turn,
    /// Turn current before.
    pub from: Turn,
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
        turn: Turn,
        /// The turns that exist.
        known: Vec<Turn>,
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
                let list: Vec<String> = known.iter().map(Turn::to_string).collect();
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
