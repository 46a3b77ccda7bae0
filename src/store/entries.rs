//! The index's entries: a turn ([`TurnInfo`]) and a capture ([`Capture`]) as the index knows
//! them. Kept below the index because the operation log holds them too: what an undo took out
//! of the index stays with that undo until a redo puts it back (`ops/`). No I/O.

use super::journal::PreImage;
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;

/// A turn as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInfo {
    /// Number.
    pub turn: Turn,
    /// Label, if any.
    pub label: Option<String>,
    /// Unix time it began.
    pub time: u64,
    /// The agent whose hook began it, by name (none: begun by hand).
    pub by: Option<String>,
    /// Where the agent's conversation stood when its hook began it (none: begun by hand, or
    /// the payload said nothing of it).
    pub conversation: Option<super::journal::Conversation>,
    /// The journal position where it began (its `turn` record, or the `rewind_done` of the
    /// rewind that began it afresh): the folder at its start is, per path, the first
    /// pre-image recorded after it, else the folder now (`crate::store::past`).
    pub began: Seq,
}

/// A capture as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    /// Journal position.
    pub seq: Seq,
    /// Turn.
    pub turn: Turn,
    /// Path.
    pub path: RelPath,
    /// Pre-image.
    pub pre: PreImage,
    /// Process id behind it.
    pub pid: Option<u32>,
    /// Command name behind it (shared with every capture and touch that names it).
    pub comm: Option<std::sync::Arc<str>>,
}
