//! `op show ID`: what operation `ID` changed in the folder, path by path, read from the
//! journal: the folder just before it (the first pre-image recorded after its beginning: its
//! own saves and captures come first) against the folder just after it (the first pre-image
//! recorded after its end, else the folder as it is now: `crate::store::past`). An operation
//! that changed no path says what it did to the turns instead.
//!
//! I/O: reads the journal, the store's blobs and the folder; changes nothing.

use crate::diff::FileChange;
use crate::identity::FileId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::ops::{OpEntry, OpState, OpWhat, Unrestorable};
use crate::store::past::Past;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;

/// The answer to `op show ID`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpShow {
    /// The operation's id.
    pub id: u64,
    /// When it began (Unix seconds).
    pub time: u64,
    /// Its kind, as `op log --json` names it.
    pub kind: String,
    /// What it was, with its counts, as `op log` says it.
    pub text: String,
    /// `done`, `undone` or `unfinished`.
    pub state: String,
    /// What it did to the turns, in words (`turn 3 current again; turns 4 and 5 retired`).
    pub turns: String,
    /// What it changed in the folder, path by path (empty for a turn switch or a relabel).
    pub changes: Vec<FileChange>,
}

/// `op show ID`, or why it cannot be shown (no such operation, one from before a prune, one
/// still cut off).
pub fn op_show(store: &Store, root: BorrowedFd<'_>, id: u64) -> Result<OpShow, ShowError> {
    let index = store.index();
    let op = index.ops.get(id).ok_or(Unrestorable::NoSuchOp {
        id,
        newest: index.ops.ops.last().map(|o| o.id),
    })?;
    match (&op.what, op.state) {
        (OpWhat::Archived { .. }, _) => return Err(Unrestorable::Archived { id }.into()),
        (_, OpState::Unfinished) => return Err(Unrestorable::Unfinished { id }.into()),
        _ => {}
    }
    let changes = match (changed_folder(op), op.end) {
        (true, Some(end)) => {
            let before = store.past(op.seq)?;
            let after = store.past(end)?;
            let linked = linked_names(store, root, [&before, &after]);
            crate::diff::diff_past_with(
                root,
                store,
                (&before, Some(&after)),
                std::iter::empty(),
                (&linked, &[]),
            )
        }
        _ => Vec::new(),
    };
    let state = match op.state {
        OpState::Done => "done",
        OpState::Undone(_) => "undone",
        OpState::Unfinished => "unfinished",
    };
    Ok(OpShow {
        id,
        time: op.time,
        kind: op.kind().to_string(),
        text: op.describe(),
        state: state.to_string(),
        turns: turns_words(store, op),
        changes,
    })
}

/// Names in the folder that neither past records but that hold, now, a hard-linked inode one
/// of them records: an operation that rewrote that inode in place changed them too (read as
/// `crate::versions::in_past` reads them). The folder is walked only when such an inode is
/// recorded.
fn linked_names(store: &Store, root: BorrowedFd<'_>, pasts: [&Past; 2]) -> Vec<RelPath> {
    let index = store.index();
    let ids: Vec<FileId> = pasts
        .iter()
        .flat_map(|p| p.linked_identities())
        .map(|id| index.current_identity(id))
        .collect();
    let mut out = Vec::new();
    if ids.is_empty() {
        return out;
    }
    let Ok(top) = sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0) else {
        return out;
    };
    let Ok(entries) = sys::read_dir_all(top.as_fd(), false) else {
        return out;
    };
    for e in entries {
        // `.ckpt` is no valid path: the store is never walked.
        let (Ok(path), Ok(name)) = (RelPath::new(&e.name), CString::new(e.name.clone())) else {
            continue;
        };
        let _ = crate::capture::walk_tree(top.as_fd(), &name, &path, &mut |p, dir, n| {
            if pasts.iter().any(|past| past.recorded(p).is_some()) {
                return Ok(None);
            }
            let st = sys::lstatat(dir, n)?;
            let kind = st.st_mode & libc::S_IFMT;
            if st.st_nlink < 2 || (kind != libc::S_IFREG && kind != libc::S_IFLNK) {
                return Ok(Some(kind == libc::S_IFDIR));
            }
            let now = FileId::read_at(dir, n, 0, st.st_ino);
            if ids.iter().any(|id| id.is(&now)) {
                out.push(p.clone());
            }
            Ok(Some(false))
        });
    }
    out
}

/// Whether `op` could have changed paths: a rewind, a partial one, an `op restore`, or an undo
/// or redo of one of them (which alone of undos and redos end a capture epoch:
/// `OpEntry::end`).
fn changed_folder(op: &OpEntry) -> bool {
    match &op.what {
        OpWhat::Rewind { .. } | OpWhat::RewindPaths { .. } | OpWhat::RestoreOp { .. } => true,
        OpWhat::Undo { .. } | OpWhat::Redo { .. } => op.end.is_some(),
        _ => false,
    }
}

/// What `op` did to the turns, in words.
fn turns_words(store: &Store, op: &OpEntry) -> String {
    let ops = &store.index().ops;
    let of_words = |of: &u64| {
        ops.get(*of)
            .map_or(format!("#{of}"), |o| format!("#{of}, {}", o.words()))
    };
    match &op.what {
        OpWhat::Created { turn } => format!("turn {turn} began; the store was created"),
        OpWhat::Turn { turn, from } => {
            format!("turn {turn} became current after turn {from}; the folder did not change")
        }
        OpWhat::Rewind { to, from } => format!(
            "turn {to} current again, begun afresh (from turn {from}); the turns after it retired"
        ),
        OpWhat::RewindPaths { .. } | OpWhat::RestoreOp { .. } => {
            "none: a change of the current turn".to_string()
        }
        OpWhat::Undo { of } => format!("took back {}", of_words(of)),
        OpWhat::Redo { of } => format!("ran again {}", of_words(of)),
        OpWhat::Relabel { turn, label } => match label {
            Some(l) => format!("turn {turn} labelled {l:?}; the folder did not change"),
            None => format!("the label of turn {turn} removed; the folder did not change"),
        },
        OpWhat::Prune { dropped_turns, .. } => format!(
            "{} turns forgotten; the folder did not change",
            dropped_turns.len()
        ),
        OpWhat::Archived { text, .. } => text.clone(),
    }
}

/// Why `op show` cannot show an operation.
#[derive(Debug)]
pub enum ShowError {
    /// The operation does not exist, is from before a prune, or is cut off.
    Op(Unrestorable),
    /// The journal could not be read.
    Store(crate::store::StoreError),
}

impl From<Unrestorable> for ShowError {
    fn from(e: Unrestorable) -> Self {
        Self::Op(e)
    }
}

impl From<crate::store::StoreError> for ShowError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Store(e)
    }
}

impl std::fmt::Display for ShowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Op(Unrestorable::Archived { id }) => write!(
                f,
                "operation #{id} is from before a prune and cannot be shown: only its words are kept (`ckpt-mount op log`), not what it changed"
            ),
            Self::Op(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "cannot read the journal: {e}"),
        }
    }
}

impl std::error::Error for ShowError {}
