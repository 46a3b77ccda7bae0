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
    /// The turns and the current one (their highest number used is not given back: numbers
    /// keep growing past every one used).
    pub turns: Turns<TurnRec>,
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
    /// A process below marked agent 1 or 2 (each a named agent of its own).
    Agent(u8),
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
    /// For an edit of one line (`EditLine`): which.
    pub line: Option<u8>,
}

/// The turns that exist, each with what a tier recorded at its start (`S`), the current turn
/// and the highest number used: a rewind to `k` drops the turns after `k` and begins `k`
/// again, and new turn numbers keep growing past every number used.
#[derive(Clone)]
pub struct Turns<S> {
    starts: BTreeMap<u64, S>,
    /// The turn the folder is in.
    pub current: u64,
    /// The highest turn number used so far.
    pub max_used: u64,
}

impl<S> Turns<S> {
    /// Turn 1 (the mount), begun with `first`.
    pub fn new(first: S) -> Self {
        Self::new_at(1, first)
    }

    /// The first turn numbered `key` (a tier that numbers turns its own way), begun with
    /// `first`.
    pub fn new_at(key: u64, first: S) -> Self {
        Self {
            starts: BTreeMap::from([(key, first)]),
            current: key,
            max_used: key,
        }
    }

    /// The number of the turn `gap` above the highest used.
    pub fn next_number(&self, gap: u8) -> u64 {
        self.max_used + u64::from(gap)
    }

    /// Turn `n` is the current one (its start recorded by [`Turns::record`]).
    pub fn enter(&mut self, n: u64) {
        self.current = n;
        self.max_used = self.max_used.max(n);
    }

    /// Records what turn `n` began with.
    pub fn record(&mut self, n: u64, start: S) {
        self.starts.insert(n, start);
    }

    /// Begins turn `n` with `start`.
    pub fn begin(&mut self, n: u64, start: S) {
        self.enter(n);
        self.record(n, start);
    }

    /// After a rewind to `k`: the turns after `k` are gone, and `k` begins again with `start`.
    pub fn rewound(&mut self, k: u64, start: S) {
        self.starts.retain(|t, _| *t <= k);
        self.starts.insert(k, start);
        self.current = k;
    }

    /// The live turn this selector picks (modulo the number of live turns).
    pub fn pick(&self, sel: u8) -> u64 {
        let live = self.live();
        live[usize::from(sel) % live.len()]
    }

    /// The live turns, oldest first.
    pub fn live(&self) -> Vec<u64> {
        self.starts.keys().copied().collect()
    }

    /// What turn `k` began with, if it is live.
    pub fn get(&self, k: u64) -> Option<&S> {
        self.starts.get(&k)
    }

    /// What turn `k` began with; `k` must be live.
    pub fn start(&self, k: u64) -> &S {
        &self.starts[&k]
    }

    /// What turn `k` began with, to change, if it is live.
    pub fn get_mut(&mut self, k: u64) -> Option<&mut S> {
        self.starts.get_mut(&k)
    }

    /// Every live turn with what it began with, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &S)> {
        self.starts.iter().map(|(k, s)| (*k, s))
    }

    /// The record of the current turn.
    pub fn current_mut(&mut self) -> &mut S {
        let n = self.current;
        self.starts.get_mut(&n).expect("the current turn is live")
    }

    /// The records of turn `k` and every later live turn, oldest first.
    pub fn since(&self, k: u64) -> impl Iterator<Item = &S> {
        self.starts.range(k..).map(|(_, s)| s)
    }
}
