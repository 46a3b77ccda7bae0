//! The journal's records: [`Record`], one per line, and every type a record carries — the
//! pre-image of a path ([`PreImage`]), who changed it ([`Touch`], [`AgentMark`]: version 4,
//! read by `crate::store::actors`) and the operation log's records ([`OpBegin`], [`OpCounts`],
//! [`Pruned`]: version 4, read by `crate::store::ops`). One format, one file: the index, the
//! actors and the operation log all read these types, and none of them defines one.
//!
//! No I/O: plain types and their serde form (docs/FORMAT.md).

use crate::identity::Handle;
use crate::ids::{BlobId, Seq, Turn};
use crate::relpath::RelPath;
use crate::xattrs::Xattr;
use serde::{Deserialize, Serialize};

/// The extended attributes of a pre-image, sorted by name. `None` on lines older than journal
/// version 3, which did not record them: a rewind then leaves a path's attributes as it finds
/// them.
pub type Xattrs = Option<Vec<Xattr>>;

/// An empty list is not written: on a version 3 line a missing list means "none".
fn no_xattrs(x: &Xattrs) -> bool {
    x.as_ref().is_none_or(Vec::is_empty)
}

/// A symlink target: any bytes, stored like a path (string or `{"hex": ...}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTarget(#[serde(with = "crate::relpath::text_or_hex")] pub Vec<u8>);

/// What a path was when a turn first touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PreImage {
    /// Nothing existed at the path.
    Absent,
    /// A regular file whose bytes are the blob `blob`.
    File {
        /// sha256 of the content (lower-case hex on the line; any other text makes the line
        /// corrupt).
        blob: BlobId,
        /// Size in bytes.
        size: u64,
        /// Full `st_mode` permission bits (`0o7777`).
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number, to restore in place and keep hard links shared.
        ino: u64,
        /// Link count when captured.
        nlink: u64,
        /// The inode's file handle (journal version 3), which with `ino` identifies it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, recorded where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Extended attributes, default ACLs included (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A symbolic link.
    Symlink {
        /// The link's target, never followed.
        target: LinkTarget,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number (journal version 3): symlinks can be hard-linked too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ino: Option<u64>,
        /// Link count when captured (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nlink: Option<u64>,
        /// The inode's file handle (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A named pipe.
    Fifo {
        /// Permission bits.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Extended attributes (journal version 3).
        #[serde(default, skip_serializing_if = "no_xattrs")]
        xattrs: Xattrs,
    },
    /// A regular file whose inode was moved into the store's `staged/` folder (named by the
    /// seq of the capture record) instead of being read and copied, because the mutation was
    /// its removal; a later `staged` record replaces this with `File` (or `Skipped`) once its
    /// bytes are stored. Journal version 2.
    Staged {
        /// Size in bytes.
        size: u64,
        /// Full `st_mode` permission bits (`0o7777`).
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Host inode number.
        ino: u64,
        /// Link count when captured (always 1: only a file's last name is staged).
        nlink: u64,
        /// The inode's file handle (journal version 3).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fh: Option<Handle>,
        /// Birth time in nanoseconds, where the filesystem gives no file handle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        btime: Option<i64>,
    },
    /// Something that was not stored; a rewind reports it instead of restoring it.
    Skipped {
        /// What the path was (`file`, `socket`, `device`).
        was: String,
        /// Size in bytes, when a file.
        size: u64,
        /// Why it was not stored.
        reason: String,
    },
}

impl PreImage {
    /// A file's pre-image with other bytes, the blob `blob` of `size` bytes: its mode, owner,
    /// inode and xattrs kept (`None` for any other kind).
    pub fn with_content(self, blob: BlobId, size: u64) -> Option<Self> {
        match self {
            Self::File {
                mode,
                uid,
                gid,
                ino,
                nlink,
                fh,
                btime,
                xattrs,
                ..
            } => Some(Self::File {
                blob,
                size,
                mode,
                uid,
                gid,
                ino,
                nlink,
                fh,
                btime,
                xattrs,
            }),
            _ => None,
        }
    }

    /// What a `Staged` pre-image becomes once its bytes are the blob `blob` of `size` bytes,
    /// with the extended attributes read from the staged file (`None` for any other kind).
    pub fn stored_as(&self, blob: BlobId, size: u64, xattrs: Xattrs) -> Option<Self> {
        match self {
            Self::Staged {
                mode,
                uid,
                gid,
                ino,
                fh,
                btime,
                ..
            } => Some(Self::File {
                blob,
                size,
                mode: *mode,
                uid: *uid,
                gid: *gid,
                ino: *ino,
                nlink: 1,
                fh: fh.clone(),
                btime: *btime,
                xattrs,
            }),
            _ => None,
        }
    }

    /// Whether only a version 3 line can hold this pre-image.
    fn needs_v3(&self) -> bool {
        match self {
            Self::File {
                fh, btime, xattrs, ..
            } => fh.is_some() || btime.is_some() || xattrs.is_some(),
            Self::Staged { fh, btime, .. } => fh.is_some() || btime.is_some(),
            Self::Symlink {
                ino,
                nlink,
                fh,
                btime,
                xattrs,
                ..
            } => {
                ino.is_some()
                    || nlink.is_some()
                    || fh.is_some()
                    || btime.is_some()
                    || xattrs.is_some()
            }
            Self::Dir { xattrs, .. } | Self::Fifo { xattrs, .. } => xattrs.is_some(),
            Self::Absent | Self::Skipped { .. } => false,
        }
    }

    /// The extended attributes recorded, when the line said.
    pub fn xattrs(&self) -> Option<&[Xattr]> {
        match self {
            Self::File { xattrs, .. }
            | Self::Dir { xattrs, .. }
            | Self::Symlink { xattrs, .. }
            | Self::Fifo { xattrs, .. } => xattrs.as_deref(),
            _ => None,
        }
    }

    /// The recorded identity of the inode: for files and symlinks (and staged files).
    pub fn file_id(&self) -> Option<crate::identity::FileId> {
        match self {
            Self::File { ino, fh, btime, .. } | Self::Staged { ino, fh, btime, .. } => {
                Some(crate::identity::FileId {
                    ino: *ino,
                    fh: fh.clone(),
                    btime: *btime,
                })
            }
            Self::Symlink {
                ino: Some(ino),
                fh,
                btime,
                ..
            } => Some(crate::identity::FileId {
                ino: *ino,
                fh: fh.clone(),
                btime: *btime,
            }),
            _ => None,
        }
    }

    /// Replaces the recorded identity (files, staged files and symlinks with one).
    pub fn set_file_id(&mut self, id: crate::identity::FileId) {
        match self {
            Self::File { ino, fh, btime, .. } | Self::Staged { ino, fh, btime, .. } => {
                (*ino, *fh, *btime) = (id.ino, id.fh, id.btime);
            }
            Self::Symlink {
                ino: ino @ Some(_),
                fh,
                btime,
                ..
            } => {
                (*ino, *fh, *btime) = (Some(id.ino), id.fh, id.btime);
            }
            _ => {}
        }
    }

    /// The link count recorded (files and, from version 3, symlinks).
    pub fn nlink(&self) -> u64 {
        match self {
            Self::File { nlink, .. } | Self::Staged { nlink, .. } => *nlink,
            Self::Symlink { nlink, .. } => nlink.unwrap_or(1),
            _ => 1,
        }
    }

    /// Short kind name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::File { .. } => "file",
            Self::Dir { .. } => "dir",
            Self::Symlink { .. } => "symlink",
            Self::Fifo { .. } => "fifo",
            Self::Staged { .. } => "staged",
            Self::Skipped { .. } => "skipped",
        }
    }
}

/// Where an agent's conversation stood when its hook began a turn, as the hook's payload said:
/// what `rewind` needs to tell the user how to take that conversation back with the files.
/// Each field is optional (a payload may lack it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// The agent CLI's session id (`session_id`; Codex's notify program: `thread-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The conversation's transcript file, as the payload named it (`transcript_path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    /// The prompt that began the turn, by its first line as the turn's label first was (kept
    /// apart from the label, which `turn --label` may change); none when the hook ran before
    /// the prompt was known (Codex's notify program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// One id for the prompt, the same in every folder it began a turn in at once (an agent
    /// working across several mounted folders): what `rewind --all-folders` finds the turns of
    /// one prompt by. None when the prompt began a turn in one folder only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    /// Every folder the prompt began a turn in at once, this one included, as absolute paths
    /// (lossy UTF-8): whom `rewind --all-folders` expects to find a turn of `prompt_id` in,
    /// and what `log` names as sharing the turn. Empty with no `prompt_id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folders: Vec<String>,
}

/// One journal line's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Record {
    /// Turn `turn` begins.
    Turn {
        /// The new turn number.
        turn: Turn,
        /// Optional label given with `echo "N label" > .ckpt/turn`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The agent whose hook began it, by its mark's name (journal version 5; absent for
        /// a turn begun by hand, by `.ckpt/turn`, or on older lines).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// Where the agent's conversation stood when its hook began the turn: its session and
        /// transcript (journal version 5, with `by`; absent on a turn begun by hand and on
        /// older lines, which a reader that does not know the field ignores).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<Conversation>,
    },
    /// The pre-image of `path` for `turn`.
    Capture {
        /// The turn this pre-image belongs to.
        turn: Turn,
        /// The path, relative to the folder.
        path: RelPath,
        /// What the path was.
        pre: PreImage,
        /// When set, this capture saves what rewind `undo_of` (a `rewind_begin` seq) overwrote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo_of: Option<Seq>,
        /// Process that caused the capture.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// Its command name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<String>,
    },
    /// A rewind to the start of `to` started, from current turn `from`.
    RewindBegin {
        /// Target turn.
        to: Turn,
        /// Turn current before the rewind.
        from: Turn,
    },
    /// The rewind begun at seq `begin` finished; turns >= `to` leave the index.
    RewindDone {
        /// Seq of the matching `rewind_begin`.
        begin: Seq,
        /// What it changed (journal version 4).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<OpCounts>,
    },
    /// The rewind begun at seq `rewind` was undone: its turns come back.
    UndoDone {
        /// Seq of the `rewind_begin` that was undone.
        rewind: Seq,
    },
    /// Files a rewind or undo recreated from their records: records naming each `was`
    /// identity now mean its `now` file (journal version 3).
    Renewed {
        /// The identities, old and new.
        ids: Vec<crate::identity::Renewal>,
    },
    /// The staged pre-image of capture `capture` is stored: `pre` (a `file`, or `skipped` when
    /// its bytes could not be read) replaces it. Journal version 2.
    Staged {
        /// Seq of the capture whose pre-image was staged.
        capture: Seq,
        /// What it resolved to.
        pre: PreImage,
    },
    /// An actor changed the path of a capture in its turn (journal version 4).
    Touched(Touch),
    /// A process and its descendants are the agent from here on (journal version 4).
    Agent(AgentMark),
    /// The path of a capture changes hands in its turn: its state as another agent (or a
    /// process of no agent) first changes it (journal version 5).
    HandOff(HandOff),
    /// An operation of the operation log began: a partial rewind, an undo or a redo (journal
    /// version 4; see `crate::store::ops`).
    OpBegin(OpBegin),
    /// The operation begun at seq `begin` finished (journal version 4).
    OpDone {
        /// Seq of its `op_begin`.
        begin: Seq,
        /// What it changed in the folder.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<OpCounts>,
    },
    /// Turn `turn` is given the label `label` (none: unlabelled), an operation of its own
    /// (journal version 4).
    Relabel {
        /// The turn.
        turn: Turn,
        /// Its new label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A prune rewrote the journal (journal version 4): what it made unrecoverable.
    Pruned(Pruned),
}

impl Record {
    /// Whether the record names a step (`N.S`), which only a version 7 line can hold: an
    /// older build would read `"5.3"` as no turn at all, or a rewind to step 5.3 as one to
    /// turn 5, so such a line must be refused by it rather than misread.
    fn holds_step(&self) -> bool {
        let step = |t: &Turn| t.is_step();
        match self {
            Self::Turn { turn, .. } | Self::Capture { turn, .. } | Self::Relabel { turn, .. } => {
                step(turn)
            }
            Self::RewindBegin { to, from } => step(to) || step(from),
            Self::OpBegin(op) => op.to.as_ref().is_some_and(step),
            Self::Pruned(p) => p.dropped_turns.iter().any(step),
            Self::Touched(t) => t.opened_in.as_ref().is_some_and(step),
            _ => false,
        }
    }

    /// The oldest journal version that can hold this record: a record is written with the
    /// version its content needs, so a pre-image read from an old line (attributes unknown)
    /// is written back by a prune as an old line and stays "unknown".
    pub fn version(&self) -> u32 {
        if self.holds_step() {
            return 7;
        }
        let pre = match self {
            Self::Capture { pre, .. } | Self::Staged { pre, .. } => pre,
            Self::Renewed { .. } => return 3,
            Self::Touched(Touch { name: Some(_), .. })
            | Self::Touched(Touch {
                opened_in: Some(_), ..
            })
            | Self::Agent(AgentMark { name: Some(_), .. })
            | Self::Turn { by: Some(_), .. }
            | Self::Turn {
                conversation: Some(_),
                ..
            } => return 5,
            Self::Touched(_) | Self::Agent(_) => return 4,
            Self::HandOff(_) => return 5,
            Self::OpBegin(OpBegin {
                kind: OpKind::RestoreOp,
                ..
            }) => return 6,
            Self::OpBegin(op) if !op.merged.is_empty() => return 5,
            Self::OpBegin(..) | Self::OpDone { .. } | Self::Relabel { .. } | Self::Pruned(..) => {
                return 4;
            }
            Self::RewindDone {
                counts: Some(..), ..
            } => return 4,
            _ => return 1,
        };
        if pre.needs_v3() {
            3
        } else if matches!(self, Self::Staged { .. }) || matches!(pre, PreImage::Staged { .. }) {
            2
        } else {
            1
        }
    }

    /// After reading a line of version `v`: from version 3 on, a pre-image whose list of
    /// extended attributes is missing has none (the list is only written when not empty).
    pub(super) fn read_as_version(&mut self, v: u32) {
        if v < 3 {
            return;
        }
        if let Self::Capture { pre, .. } | Self::Staged { pre, .. } = self
            && let PreImage::File { xattrs, .. }
            | PreImage::Dir { xattrs, .. }
            | PreImage::Symlink { xattrs, .. }
            | PreImage::Fifo { xattrs, .. } = pre
            && xattrs.is_none()
        {
            *xattrs = Some(Vec::new());
        }
    }
}

/// What an operation changed in the folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    /// Paths given back an earlier state.
    pub restored: u64,
    /// Paths removed.
    pub deleted: u64,
    /// Paths that could not be restored.
    pub failed: u64,
}

/// Which operation an `op_begin` record begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// `rewind N -- PATH…`.
    RewindPaths,
    /// `undo`.
    Undo,
    /// `redo`.
    Redo,
    /// `op restore ID` (journal version 6): the folder as it was just after operation
    /// `target`, every path given its first pre-image recorded after that operation ended.
    RestoreOp,
}

/// The payload of an `op_begin` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpBegin {
    /// What begins.
    pub kind: OpKind,
    /// A partial rewind's target turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Turn>,
    /// A partial rewind's paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<RelPath>,
    /// The id of the operation an undo or redo reverts or re-applies, or whose end an
    /// `op restore` gives the folder back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u64>,
    /// A partial rewind's paths that get a merge's result instead of their state at the start
    /// of `to` (`rewind --agent NAME --conflicts merge`, journal version 5): the state each is
    /// given, so that a run cut off by a crash completes with the same bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedTarget>,
}

/// A path a partial rewind gives a merge's result, and that state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedTarget {
    /// The path.
    pub path: RelPath,
    /// The state it is given.
    pub pre: PreImage,
}

/// An operation from before a prune, kept as text in the `pruned` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchivedOp {
    /// Its id.
    pub id: u64,
    /// When it ran (Unix seconds).
    pub time: u64,
    /// What it was, as `op log` said.
    pub text: String,
    /// Whether it was undone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
}

/// The payload of a `pruned` record, the last line of a journal a prune rewrote: the lines
/// before it restate the history that was kept (no operation of their own).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    /// The operation log before the prune (ids and texts), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archived: Vec<ArchivedOp>,
    /// The prune's own id.
    pub id: u64,
    /// Turns that can no longer be rewound to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_turns: Vec<Turn>,
    /// Operations that could be undone (or redone) before, and no longer can.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_ops: Vec<u64>,
}

/// A `touched` record: actor `comm` (process `pid`) changed the path of capture `capture` in
/// its turn, first by `what`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Touch {
    /// Seq of the capture record of the path in that turn.
    pub capture: Seq,
    /// The process of the first such change (0 when unknown).
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Whether it descends from a marked agent; absent when no agent was ever marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<bool>,
    /// The agent it descends from, by the name of the nearest mark above it (journal version
    /// 5); absent for another process, and on older lines, whose agent is unnamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What that first change was: `write`, `create`, `delete`, `rename`, `attr` or `link`;
    /// `held` (journal version 5): the file was held open for writing across the turn switch
    /// through a descriptor this process opened in turn `opened_in`.
    pub what: String,
    /// For `held`: the turn the descriptor was opened in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_in: Option<Turn>,
}

/// A `hand_off` record: the path of capture `capture`, changed in that capture's turn by one
/// owner (an agent, by name, or the processes of no agent), is first changed by another; `pre`
/// is its state at that moment, and the new owner's process is named as a touch names one.
/// With the capture's pre-image and the next turn's, the hand-offs cut a path's history in
/// the turn into spans of one owner each: what `rewind --agent NAME --conflicts merge` takes
/// back line by line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandOff {
    /// Seq of the capture record of the path in that turn.
    pub capture: Seq,
    /// The path's state when it changed hands.
    pub pre: PreImage,
    /// The process of the new owner's first change.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Whether it descends from a marked agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<bool>,
    /// The agent's name, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An `agent` record: process `pid`, started at `start` (clock ticks after boot, field 22 of
/// `/proc/PID/stat`), and everything that descends from it, is the agent from here on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMark {
    /// The process.
    pub pid: u32,
    /// Its start time: with the pid, what identifies it (pids are reused).
    pub start: u64,
    /// Its command name (for `run`, the command run).
    pub comm: String,
    /// Who marked it: `run` or `hook`.
    pub via: String,
    /// The agent's session id, when a hook's payload gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The agent's name (journal version 5): `run --as NAME` (default: the command's name),
    /// or the agent CLI with its session (`claude-code:1f3a…`). On older lines it is derived
    /// ([`AgentMark::name`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl AgentMark {
    /// The agent's name: the one recorded, else (a line older than version 5) the command
    /// name, with the session when a hook gave one.
    pub fn name(&self) -> String {
        match (&self.name, &self.session) {
            (Some(n), _) => n.clone(),
            (None, Some(s)) => format!("{}:{s}", self.comm),
            (None, None) => self.comm.clone(),
        }
    }
}
