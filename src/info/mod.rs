//! Status and the per-turn log, computed from an open store (the daemon's or an offline one;
//! the daemon's log is `crate::daemon_log`). Both name the captures that stored nothing (a
//! file over `--max-blob`, a socket, a device): a rewind cannot restore those, and the user
//! should learn it when it happens, not at rewind time.
//!
//! The log describes each turn as it stood when it ended, by the rule `diff N..M` and rewinds
//! use (`crate::diff::Range`): the state of a path at the start of turn M is the oldest
//! pre-image captured in turns `>= M`, else the folder as it is now. A turn ends where the next
//! live turn begins (the last one: now), so its counts do not change as later turns work.

pub mod agents;
pub mod op_show;

use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::actors::ActorView;
use crate::store::index::Index;
use crate::store::journal::AgentMark;
use crate::store::journal::PreImage;
use crate::store::{Capture, TurnInfo};
use crate::sys;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::BorrowedFd;

/// A turn as moments name it, without what it changed: what shell completion offers at a TAB,
/// read from the index alone (a [`TurnRow`] counts each turn's paths, which takes longer on a
/// long history than a keypress may).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MomentRow {
    /// Turn number.
    pub turn: Turn,
    /// The rewind (operation id) that retired this turn; none for a live turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound_by: Option<u64>,
    /// Unix time it began.
    pub time: u64,
    /// Label.
    pub label: Option<String>,
}

impl From<crate::moment::Candidate> for MomentRow {
    fn from(c: crate::moment::Candidate) -> Self {
        Self {
            turn: c.moment.turn,
            rewound_by: c.moment.rewound_by,
            time: c.time,
            label: c.label,
        }
    }
}

impl From<TurnRow> for MomentRow {
    fn from(r: TurnRow) -> Self {
        Self {
            turn: r.turn,
            rewound_by: r.rewound_by,
            time: r.time,
            label: r.label,
        }
    }
}

/// Every moment `log` lists, in its order, as [`MomentRow`]s.
pub fn moment_rows(store: &Store) -> Vec<MomentRow> {
    store
        .index()
        .candidates()
        .into_iter()
        .map(MomentRow::from)
        .collect()
}

/// One row of `ckpt-mount log`: a turn as it stood when it ended (the current one: now).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TurnRow {
    /// Turn number.
    pub turn: Turn,
    /// Label.
    pub label: Option<String>,
    /// Unix time it began.
    pub time: u64,
    /// The same moment in ISO 8601, UTC (`2026-12-02T09:14:05Z`).
    #[serde(default)]
    pub time_iso: String,
    /// Paths absent when the turn began and present when it ended (a path created and
    /// removed again within the turn is not counted).
    pub created: usize,
    /// Paths the turn changed that were present when it began and when it ended.
    pub modified: usize,
    /// Paths present when the turn began and absent when it ended.
    pub deleted: usize,
    /// Bytes of the files the turn changed, as they were before it changed them: the size of
    /// the file pre-images captured in the turn, before dedup and compression (what a rewind
    /// of the turn writes back).
    pub bytes: u64,
    /// Command names of the processes behind the captures.
    pub programs: Vec<String>,
    /// Who changed the turn's paths: each actor once (command name, whether it is the agent,
    /// the process and kind of its first change), the agent first.
    #[serde(default)]
    pub actors: Vec<ActorView>,
    /// Captures of the turn that stored nothing: a rewind cannot restore these paths.
    pub skipped: Vec<SkippedCapture>,
    /// The rewind (operation id) that retired this turn, while that rewind is in effect
    /// (`undo` brings the turn back); none for a live turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound_by: Option<u64>,
    /// The agent whose hook began it, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Where that agent's conversation stood when its hook began the turn: its session and
    /// transcript file (the prompt is the label's line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<crate::store::journal::Conversation>,
}

/// A capture that stored nothing, so that no rewind can restore its path to what it was.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkippedCapture {
    /// The turn it belongs to.
    pub turn: Turn,
    /// The path.
    pub path: RelPath,
    /// What the path was (`file`, `socket`, `device`).
    pub was: String,
    /// Its size in bytes, when a file.
    pub size: u64,
    /// Whether it is a file over the `--max-blob` limit.
    pub over_max_blob: bool,
    /// Why it was not stored, as the journal says.
    pub reason: String,
}

/// The words the capture of a file over `--max-blob` gives as its reason
/// (`crate::capture::read_preimage`; a unit test below holds the two together).
const OVER_MAX_BLOB: &str = "over the --max-blob limit";

/// Every capture of an active turn that stored nothing, in journal order.
pub fn skipped_captures(store: &Store) -> Vec<SkippedCapture> {
    store
        .index()
        .captures
        .iter()
        .filter_map(|c| match &c.pre {
            PreImage::Skipped { was, size, reason } => Some(SkippedCapture {
                turn: c.turn,
                path: c.path.clone(),
                was: was.clone(),
                size: *size,
                over_max_blob: was == "file" && reason.contains(OVER_MAX_BLOB),
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// Whether anything stands at `path` in the folder now (a symlink is not followed).
fn exists(root: BorrowedFd<'_>, path: &RelPath) -> bool {
    sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0).is_ok()
}

/// Whether a pre-image says something stood at its path.
fn present(pre: &PreImage) -> bool {
    !matches!(pre, PreImage::Absent)
}

/// The oldest pre-image of each path captured in the turns after the one being counted, with
/// its journal position: the state each was in when that turn ended.
type Later<'a> = HashMap<&'a RelPath, (Seq, &'a PreImage)>;

/// The rows of every live turn, by turn number (whatever order the journal left them in).
/// Each live turn ends where the next live one begins; a row for a turn that is no longer
/// live (a rewound one, say) would be counted apart and leave these bounds as they are.
pub fn log_rows(store: &Store, root: BorrowedFd<'_>) -> Vec<TurnRow> {
    let index = store.index();
    let skipped = skipped_captures(store);
    let mut rows = rows_of(
        index,
        index.turns.iter().collect(),
        index.captures.iter().collect(),
        HashMap::new(),
        &skipped,
        root,
    );
    // Turns a rewind in effect retired, as they stood when that rewind ran: each ends where
    // the next retired turn begins, the last one at the rewind, whose saves say what every
    // path it changed was then. The turn it went back to is one of them when it had done
    // work before the rewind: that work is retired too, and its row keeps its counts.
    let retired = index.retired();
    for a in &index.ops.undo {
        let crate::store::ops::Change::Folder { saves, .. } = &a.change else {
            continue;
        };
        let of_op: Vec<&crate::store::moments::Retired<'_>> =
            retired.iter().filter(|r| r.by == a.op).collect();
        let Some(first) = of_op.first() else {
            continue;
        };
        let at_rewind: Later<'_> = saves
            .iter()
            .map(|c| (&c.path, (Seq::new(u64::MAX), &c.pre)))
            .collect();
        let mut more = rows_of(
            index,
            of_op.iter().map(|r| &r.info).collect(),
            first.captures.iter().collect(),
            at_rewind,
            &[],
            root,
        );
        for r in &mut more {
            r.rewound_by = Some(a.op);
        }
        rows.extend(more);
    }
    rows.sort_by_key(|r| (r.turn, r.rewound_by.is_none(), r.rewound_by));
    rows
}

/// The rows of `turns` whose captures are `captures`; `later` holds what each path was when
/// the last of them ended, for paths something after it captured.
fn rows_of<'a>(
    index: &Index,
    mut turns: Vec<&'a TurnInfo>,
    captures: Vec<&'a Capture>,
    mut later: Later<'a>,
    skipped: &[SkippedCapture],
    root: BorrowedFd<'_>,
) -> Vec<TurnRow> {
    turns.sort_by_key(|t| t.turn);
    turns.dedup_by_key(|t| t.turn);
    let mut by_turn: BTreeMap<Turn, Vec<&Capture>> = BTreeMap::new();
    for c in captures {
        by_turn.entry(c.turn).or_default().push(c);
    }
    // Newest first, so that `later` grows by one turn's captures per step.
    let mut rows = Vec::with_capacity(turns.len());
    for (i, info) in turns.iter().enumerate().rev() {
        let next = turns.get(i + 1).map(|t| t.turn);
        let own = captures_between(&by_turn, info.turn, next);
        let mut row = count_turn(info, &own, &later, root);
        row.actors = index.actors_over(own.iter().copied());
        row.skipped = skipped
            .iter()
            .filter(|c| c.turn == info.turn)
            .cloned()
            .collect();
        rows.push(row);
        for c in own {
            later
                .entry(&c.path)
                .and_modify(|e| {
                    if c.seq < e.0 {
                        *e = (c.seq, &c.pre);
                    }
                })
                .or_insert((c.seq, &c.pre));
        }
    }
    rows.reverse();
    rows
}

/// The captures of turns from `from` up to (not including) `next`, in journal order (more
/// than one turn only when a turn between two live ones has captures and no turn record).
fn captures_between<'a>(
    by_turn: &BTreeMap<Turn, Vec<&'a Capture>>,
    from: Turn,
    next: Option<Turn>,
) -> Vec<&'a Capture> {
    let upper = next.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
    let mut own: Vec<&Capture> = by_turn
        .range((std::ops::Bound::Included(from), upper))
        .flat_map(|(_, caps)| caps.iter().copied())
        .collect();
    own.sort_by_key(|c| c.seq);
    own
}

/// The row of turn `info`, whose captures are `own`: each path it touched, from its oldest
/// pre-image of the turn (the start) to its state at the start of the next live turn (`later`)
/// or, when no later turn captured it, the folder now (one `O_PATH` open, no read).
fn count_turn(
    info: &TurnInfo,
    own: &[&Capture],
    later: &Later<'_>,
    root: BorrowedFd<'_>,
) -> TurnRow {
    let mut row = TurnRow {
        turn: info.turn,
        label: info.label.clone(),
        time: info.time,
        time_iso: crate::units::iso8601_utc(crate::units::unix_seconds(info.time)),
        created: 0,
        modified: 0,
        deleted: 0,
        bytes: 0,
        programs: Vec::new(),
        actors: Vec::new(),
        skipped: Vec::new(),
        rewound_by: None,
        by: info.by.clone(),
        conversation: info.conversation.clone(),
    };
    let mut programs = BTreeSet::new();
    let mut counted = HashSet::new();
    for c in own {
        if let PreImage::File { size, .. } | PreImage::Staged { size, .. } = c.pre {
            row.bytes += size;
        }
        if let Some(comm) = &c.comm {
            programs.insert(comm.to_string());
        }
        // The first capture of a path is its oldest in the turn (journal order).
        if !counted.insert(&c.path) {
            continue;
        }
        let start = match later.get(&c.path) {
            Some((seq, pre)) if *seq < c.seq => present(pre),
            _ => present(&c.pre),
        };
        let end = match later.get(&c.path) {
            Some((_, pre)) => present(pre),
            None => exists(root, &c.path),
        };
        match (start, end) {
            (false, true) => row.created += 1,
            (true, true) => row.modified += 1,
            (true, false) => row.deleted += 1,
            (false, false) => {}
        }
    }
    row.programs = programs.into_iter().collect();
    row
}

/// `ckpt-mount status` data: what the engine computes from the store, and what the daemon of
/// a mounted folder adds of its own. A field an older daemon did not send reads as its
/// default (`status` then leaves out what it would say of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// The folder.
    pub folder: String,
    /// Whether a daemon serves it.
    pub mounted: bool,
    /// The daemon's pid.
    pub pid: Option<u32>,
    /// Current turn.
    pub turn: Turn,
    /// Captures in the current turn.
    pub captures_this_turn: usize,
    /// Bytes in blobs plus the journal.
    pub store_bytes: u64,
    /// Bytes of the journal.
    pub journal_bytes: u64,
    /// Number of blobs.
    pub blobs: usize,
    /// Size of every file pre-image the store keeps for a rewind or an undo (those of the live
    /// turns, and those the last rewind retired or saved for its undo), before dedup and
    /// compression.
    pub preimage_bytes: u64,
    /// Bytes on disk of the blobs those pre-images use (each blob once).
    pub preimage_blob_bytes: u64,
    /// Bytes on disk of blobs no pre-image uses any more (a prune removes them).
    pub unused_blob_bytes: u64,
    /// `preimage_bytes / preimage_blob_bytes`: how much dedup (identical contents stored once)
    /// and compression save; 1.0 when no file pre-image is kept.
    pub dedup_ratio: f64,
    /// Turns that can be rewound to.
    pub turns: Vec<Turn>,
    /// Size above which `status` warns: 1 GiB or 10 % of the free space, whichever is less.
    pub warn_bytes: u64,
    /// Bytes free (to a normal user) on the store's filesystem, when known: what the warning's
    /// 10 % is of.
    pub free_bytes: Option<u64>,
    /// Size of the store's filesystem, when known: `status` says when the disk is full or
    /// nearly ([`disk_nearly_full`]).
    pub disk_bytes: Option<u64>,
    /// Captures of the active turns that stored nothing: a rewind cannot restore these paths.
    pub skipped: Vec<SkippedCapture>,
    /// The agent marks of the folder's history, oldest first; empty when none was marked
    /// (every change then counts as one actor). None only in an older daemon's answer.
    pub agents: Option<Vec<AgentMark>>,
    /// A rewind, undo or redo that began and did not end, which the next mount, rewind, undo
    /// or redo completes first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// The daemon's: how many nodes the kernel holds (none offline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// The daemon's: how file reads and writes are served, and why (none offline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// The daemon's: the user it runs as (none offline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

/// What an answer without a field says of it: nothing is deduplicated, and the store is
/// never too large to warn of.
impl Default for Status {
    fn default() -> Self {
        Self {
            folder: String::new(),
            mounted: false,
            pid: None,
            turn: Turn::new(0),
            captures_this_turn: 0,
            store_bytes: 0,
            journal_bytes: 0,
            blobs: 0,
            preimage_bytes: 0,
            preimage_blob_bytes: 0,
            unused_blob_bytes: 0,
            dedup_ratio: 1.0,
            turns: Vec::new(),
            warn_bytes: u64::MAX,
            free_bytes: None,
            disk_bytes: None,
            skipped: Vec::new(),
            agents: None,
            pending: None,
            nodes: None,
            io: None,
            uid: None,
        }
    }
}

/// A rewind (whole or partial), undo or redo that began and did not end: cut off by a crash
/// (the daemon killed, the machine down), or left open by a path it could not restore. The
/// journal cannot tell the two apart (both end before the closing record), and needs not:
/// the next mount, rewind, undo or redo completes it first, with the same targets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    /// Its kind: `rewind`, `rewind_paths`, `undo` or `redo`.
    pub kind: String,
    /// What it is, in words without an article: `rewind to turn 2`, `rewind of src to turn
    /// 2`, `undo of #4`.
    pub what: String,
    /// The turn a rewind goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Turn>,
}

impl Pending {
    /// [`Pending::what`] with its article (`a rewind to turn 2`, `an undo of #4`).
    pub fn with_article(&self) -> String {
        let article = if self.what.starts_with('u') {
            "an"
        } else {
            "a"
        };
        format!("{article} {}", self.what)
    }
}

/// The operation of `index` that began and did not end, if any (see [`Pending`]): a whole
/// rewind first, as it is completed first.
pub fn pending(index: &Index) -> Option<Pending> {
    pending_rewind(index).or_else(|| pending_op(index))
}

/// The whole rewind of `index` that began and did not end, if any.
pub fn pending_rewind(index: &Index) -> Option<Pending> {
    let (_, to, _) = index.unfinished_rewind?;
    Some(Pending {
        kind: "rewind".into(),
        what: format!("rewind to turn {to}"),
        to: Some(to),
    })
}

/// The partial rewind, undo or redo of `index` that began and did not end, if any.
pub fn pending_op(index: &Index) -> Option<Pending> {
    use crate::store::journal::OpKind;
    let u = index.ops.unfinished.as_ref()?;
    let of = |word: &str| match u.op.target {
        Some(id) => format!("{word} of #{id}"),
        None => word.to_string(),
    };
    let (kind, what) = match u.op.kind {
        OpKind::RewindPaths => {
            let paths: Vec<String> = u.op.paths.iter().map(RelPath::to_string).collect();
            let to = u.op.to.map_or(String::new(), |t| format!(" to turn {t}"));
            (
                "rewind_paths",
                format!("rewind of {}{to}", paths.join(", ")),
            )
        }
        OpKind::Undo => ("undo", of("undo")),
        OpKind::Redo => ("redo", of("redo")),
        OpKind::RestoreOp => (
            "restore_op",
            match u.op.target {
                Some(id) => format!("restore of the folder as just after #{id}"),
                None => "restore of the folder as just after an operation".to_string(),
            },
        ),
    };
    Some(Pending {
        kind: kind.into(),
        what,
        to: u.op.to,
    })
}

/// Every capture whose pre-image the store keeps: the live turns', and those a rewind
/// retired or saved, kept for its undo.
fn kept_captures(index: &Index) -> impl Iterator<Item = &Capture> {
    index
        .captures
        .iter()
        .chain(index.ops.held_captures())
        .chain(index.unfinished_saved.iter())
}

/// Computes status from a store.
pub fn status(store: &Store, folder: &str, pid: Option<u32>) -> Status {
    let blobs: HashMap<crate::ids::BlobId, u64> = store
        .blobs()
        .list()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let blob_bytes: u64 = blobs.values().sum();
    let mut used = HashSet::new();
    let (mut preimage_bytes, mut preimage_blob_bytes) = (0u64, 0u64);
    for c in kept_captures(store.index()) {
        if let PreImage::File { size, blob, .. } = &c.pre {
            preimage_bytes += size;
            if used.insert(*blob) {
                preimage_blob_bytes += blobs.get(blob).copied().unwrap_or(0);
            }
        }
    }
    let cur = store.index().current_turn();
    let journal_bytes = store.journal_len();
    let vfs = sys::fstatvfs(store.dir()).ok();
    let free = vfs.map(|s| s.f_bavail.saturating_mul(s.f_frsize));
    let disk = vfs.map(|s| s.f_blocks.saturating_mul(s.f_frsize));
    Status {
        folder: folder.to_string(),
        mounted: pid.is_some(),
        pid,
        turn: cur,
        captures_this_turn: store.index().captured_now.len(),
        store_bytes: blob_bytes + journal_bytes,
        journal_bytes,
        blobs: blobs.len(),
        preimage_bytes,
        preimage_blob_bytes,
        unused_blob_bytes: blob_bytes.saturating_sub(preimage_blob_bytes),
        dedup_ratio: if preimage_blob_bytes == 0 {
            1.0
        } else {
            preimage_bytes as f64 / preimage_blob_bytes as f64
        },
        turns: store.index().turns.iter().map(|t| t.turn).collect(),
        warn_bytes: warn_threshold(free),
        free_bytes: free,
        disk_bytes: disk,
        skipped: skipped_captures(store),
        agents: Some(
            store
                .index()
                .actors
                .marks
                .iter()
                .map(|(_, _, m)| m.clone())
                .collect(),
        ),
        pending: pending(store.index()),
        nodes: None,
        io: None,
        uid: None,
    }
}

/// Whether a disk of `disk` bytes with `free` bytes free is full or nearly: less free than
/// [`NEARLY_FULL`] or a twentieth of the disk, whichever is less. Captures need room on the
/// store's disk (a change whose capture cannot be stored fails), and a rewind needs room for
/// what it saves.
pub fn disk_nearly_full(free: u64, disk: u64) -> bool {
    free < NEARLY_FULL.min(disk / 20)
}

/// The free space under which a disk counts as nearly full, whatever its size.
pub const NEARLY_FULL: u64 = 256 << 20;

/// The store size `status` warns past: 1 GiB, or 10 % of the `free` bytes when that is less.
fn warn_threshold(free: Option<u64>) -> u64 {
    (1u64 << 30).min(free.unwrap_or(u64::MAX) / 10)
}

#[cfg(test)]
mod tests;
