//! The model of the folder's history: what each turn's start looked like, what an undo or redo
//! gives back, and who changed which path since.

use super::model::{HKey, Tree};
use std::collections::BTreeMap;

/// What the model knows of a turn's start.
#[derive(Clone)]
pub struct TurnRec {
    pub tree: Tree,
    pub inos: BTreeMap<String, HKey>,
    /// The model inode of each file path.
    pub ids: BTreeMap<String, u64>,
    /// The step at which the turn began (or began afresh, after a rewind to it).
    pub start: u64,
    /// Its label.
    pub label: Option<String>,
}

/// What an undo (or a redo) must give back: the state just before the operation it reverts
/// (for a redo: just before the undo it reverts).
pub struct UndoRec {
    pub tree: Tree,
    pub turns: BTreeMap<u64, TurnRec>,
    pub current: u64,
    /// The operation's step.
    pub at: u64,
    /// Paths the operation left on their inode, with that inode.
    pub kept: BTreeMap<String, HKey>,
    /// Whether it changed the folder (a rewind, partial rewind, or an undo or redo of one);
    /// reverting a turn switch or a relabel leaves the folder as it is.
    pub folder: bool,
    /// Who changed what, as it stood just before the operation (given back with the folder).
    pub history: Vec<Change>,
    /// The model inode of each file path just before the operation.
    pub ids: BTreeMap<String, u64>,
}

/// Who made a change, for `rewind --agent` (`agent_model.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Actor {
    /// A process below the marked agent.
    Agent,
    /// Any other process.
    User,
    /// The core itself: what a partial rewind overwrites (recorded without a process).
    Daemon,
}

/// One path changed by one actor at one step, in the history that led to the folder as it is.
#[derive(Clone, Debug)]
pub struct Change {
    pub step: u64,
    pub path: String,
    pub actor: Actor,
}
