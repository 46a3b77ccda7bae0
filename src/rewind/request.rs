//! What a rewind is asked to do, as every caller asks it ([`Request`]): the daemon for the
//! CLI's socket and for `.ckpt/rewind`, the CLI itself on an unmounted folder, the mount
//! completing a cut-off rewind. `super::run` is its one entry point. No I/O.

use super::report::RewindError;
use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::actors::{ActorView, names_agent};
use crate::store::index::Index;
use crate::store::journal::OpKind;
use serde::{Deserialize, Serialize};

/// What a rewind gives back.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// The whole folder: later turns leave the index (an undo brings them back).
    Folder,
    /// Only these paths, what lies below them, and a directory above them where none stands:
    /// a change of the current turn, itself an operation.
    Paths(Vec<RelPath>),
    /// Only what the agents asked for changed since the turn began, with what to do with the
    /// paths others changed too: a partial rewind of those paths.
    Agent(AgentScope),
}

/// `rewind --agent [NAME]…`: whose changes, and what to do with the paths others changed too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentScope {
    /// Whose changes are taken back.
    pub agents: Agents,
    /// What is done with a path they and others changed.
    pub conflicts: Conflicts,
}

/// Whose changes `rewind --agent` takes back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Agents {
    /// Every agent's (`--agent` alone).
    #[default]
    Every,
    /// The agents these patterns name (`--agent NAME`, repeated; see
    /// [`crate::store::actors::names_agent`]).
    Named(Vec<String>),
}

impl Agents {
    /// The agents `--agent` names: every agent when it is given without a name.
    pub fn from_names(names: Vec<String>) -> Self {
        if names.is_empty() {
            Self::Every
        } else {
            Self::Named(names)
        }
    }

    /// The names asked for (none: every agent).
    pub fn names(&self) -> &[String] {
        match self {
            Self::Every => &[],
            Self::Named(n) => n,
        }
    }

    /// Whether the actor `a` is one of these agents.
    pub fn covers(&self, a: &ActorView) -> bool {
        a.agent == Some(true) && self.covers_name(a.name.as_deref())
    }

    /// Whether an agent named `name` (`None`: one recorded before agents had names) is one
    /// of these.
    pub fn covers_name(&self, name: Option<&str>) -> bool {
        match self {
            Self::Every => true,
            Self::Named(patterns) => {
                name.is_some_and(|n| patterns.iter().any(|p| names_agent(p, n)))
            }
        }
    }
}

/// Whether a rewind changes the folder, or only says what it would change (the same lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Plan and report; change nothing.
    Preview,
    /// Change the folder.
    Apply,
}

impl Mode {
    /// [`Mode::Preview`] when `dry_run`.
    pub fn from_dry_run(dry_run: bool) -> Self {
        if dry_run { Self::Preview } else { Self::Apply }
    }

    pub(super) fn dry_run(self) -> bool {
        self == Self::Preview
    }
}

/// One rewind, as every caller asks for it: the daemon for the CLI's socket and for
/// `.ckpt/rewind`, the CLI itself on an unmounted folder, the mount completing a cut-off one.
/// [`run`](super::run) is its one entry point.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `scope` as it was at the start of turn `to`.
    To {
        /// The turn whose start is given back.
        to: Turn,
        /// What is given back.
        scope: Scope,
        /// Whether anything changes.
        mode: Mode,
    },
    /// Take back the last whole rewind (`rewind --undo`; `undo` takes back any operation).
    UndoLast {
        /// Whether anything changes.
        mode: Mode,
    },
    /// `op restore ID`: the folder as it was just after operation `id`, the turns untouched
    /// (a change of the current turn, itself an operation, as a partial rewind is).
    RestoreOp {
        /// The operation whose end is given back.
        id: u64,
        /// Whether anything changes.
        mode: Mode,
    },
}

impl Request {
    /// The whole folder as at the start of `to`, changed.
    pub fn folder(to: Turn) -> Self {
        Self::To {
            to,
            scope: Scope::Folder,
            mode: Mode::Apply,
        }
    }

    /// Whether anything changes.
    pub fn mode(&self) -> Mode {
        match self {
            Self::To { mode, .. } | Self::UndoLast { mode } | Self::RestoreOp { mode, .. } => *mode,
        }
    }

    /// The same request, run in `mode`.
    pub fn with_mode(self, mode: Mode) -> Self {
        match self {
            Self::To { to, scope, .. } => Self::To { to, scope, mode },
            Self::UndoLast { .. } => Self::UndoLast { mode },
            Self::RestoreOp { id, .. } => Self::RestoreOp { id, mode },
        }
    }

    /// Whether it gives back the whole folder (its report is the one `.ckpt/rewind` shows).
    pub fn whole(&self) -> bool {
        matches!(
            self,
            Self::To {
                scope: Scope::Folder,
                ..
            } | Self::UndoLast { .. }
        )
    }
}

/// A rewind as the wire (`ipc::Request::Rewind`) and the CLI's flags give it: the turn may be
/// left out, and the flags say the scope.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    /// The turn whose start is given back; none: the current turn, or, for named agents, the
    /// latest turn one of them began (`agent::default_turn`).
    pub to: Option<Turn>,
    /// `--undo`: the last whole rewind taken back.
    pub undo: bool,
    /// Only these paths.
    pub paths: Vec<RelPath>,
    /// Only the changes of these agents.
    pub agent: Option<AgentScope>,
}

impl Fields {
    /// The request these fields ask for on the folder whose history is `index`: the agents'
    /// changes when `agent` is given, else the paths when some are, else the whole folder or,
    /// with `undo`, the last whole rewind taken back.
    pub fn request(self, index: &Index, mode: Mode) -> Result<Request, RewindError> {
        let to = match self.to {
            Some(to) => to,
            None => super::agent::default_turn(index, self.agent.as_ref().map(|a| &a.agents))?,
        };
        let scope = match (self.agent, self.paths.is_empty()) {
            (Some(agent), _) => Scope::Agent(agent),
            (None, false) => Scope::Paths(self.paths),
            (None, true) if self.undo => return Ok(Request::UndoLast { mode }),
            (None, true) => Scope::Folder,
        };
        Ok(Request::To { to, scope, mode })
    }
}

/// What `rewind --agent` does with a path both the agent and another process changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conflicts {
    /// Leave it as it is now (the default): nobody's change to it is lost.
    #[default]
    Keep,
    /// Restore it too, as at the start of the turn: the other processes' changes to it go.
    Rewind,
    /// Take back the agent's edits of a text file line by line, keeping every line others
    /// changed; overlapping edits and binary files are kept, as with `Keep`.
    Merge,
}

/// Which way an operation of the log is taken: back, or again after it was taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Take back the newest operation in effect (`undo`).
    Undo,
    /// Run again the newest operation undone (`redo`).
    Redo,
}

impl Direction {
    /// [`Direction::Redo`] when `redo` (the wire's and the CLI's flag).
    pub fn from_redo(redo: bool) -> Self {
        if redo { Self::Redo } else { Self::Undo }
    }

    /// The kind of operation that takes this way.
    pub(super) fn kind(self) -> OpKind {
        match self {
            Self::Undo => OpKind::Undo,
            Self::Redo => OpKind::Redo,
        }
    }

    /// Whether this is a redo (the index's flag).
    pub(super) fn redo(self) -> bool {
        self == Self::Redo
    }
}
