//! Retention: forget the oldest turns, the undo and redo history, and the blobs nothing refers
//! to any more.
//!
//! A prune is planned first ([`plan`], which reads and changes nothing: `prune --dry-run`
//! prints the plan, and the CLI shows it before asking), then applied ([`apply`]). It is one
//! of two kinds:
//!
//! - **It forgets nothing** (no turn is dropped and the undo and redo history is kept, the
//!   default when no turn is dropped): it removes only the blobs no journal record names (what
//!   `fsck` calls orphans). The journal stays as it is, byte for byte, so every undo, redo and
//!   rewound turn stays within reach; it is no operation of the log, having nothing to undo.
//! - **It forgets** (turns dropped, or the undo and redo history dropped on request): it
//!   rewrites the journal, the one operation that does. The kept records are written to a new
//!   file, synced, and renamed over the old one (atomic), then the store reopens it. It is an
//!   operation of the operation log (`ops/`) that cannot be undone: it forgets what undo and
//!   redo would need, and says so (the operations that can no longer be undone or redone, the
//!   rewound turns no undo can bring back); the log of the operations before it is kept as
//!   text in its `pruned` record, the last line of the rewritten journal.
//!
//! It runs only on explicit request, never per capture.

use super::journal::{self, Line, PreImage, Record};
use super::{Store, StoreError, io};
use crate::ids::{BlobId, Seq, Turn};
use crate::sys;
use crate::tree::{Durability, TempFile};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::os::fd::AsFd;

/// What a prune that drops no turn does with the undo and redo history (a prune that drops a
/// turn forgets it whatever this says: the rewritten journal has no operations to undo).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoHistory {
    /// Keep it: every operation `undo` and `redo` could revert stays revertible.
    #[default]
    Keep,
    /// Forget it (`prune --drop-undo`), with the turns rewound by a rewind still undoable.
    Drop,
}

/// What to keep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    /// Keep at most this many of the newest turns (the current one always stays).
    pub keep_turns: Option<usize>,
    /// Drop the oldest turns until blobs and journal fit in this many bytes.
    pub max_size: Option<u64>,
    /// The undo and redo history, when no turn is dropped.
    pub undo: UndoHistory,
}

/// What a prune makes unrecoverable, by number: what the CLI asks about, and what it asks the
/// run to make unrecoverable, no more (the history may change between the question and the
/// run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unrecoverable {
    /// Turns forgotten: no rewind to their start any more.
    pub dropped_turns: Vec<Turn>,
    /// Operations that could be undone or redone before the prune and no longer can.
    pub lost_ops: Vec<u64>,
    /// Turns retired by a rewind that an undo could have brought back, and no longer can.
    pub lost_rewound_turns: Vec<Turn>,
}

impl Unrecoverable {
    /// Whether the prune loses nothing but blobs no record needs.
    pub fn is_empty(&self) -> bool {
        self.dropped_turns.is_empty()
            && self.lost_ops.is_empty()
            && self.lost_rewound_turns.is_empty()
    }
}

/// One thing a prune makes unrecoverable, as people read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Loss {
    /// A turn forgotten.
    Turn {
        /// Its number.
        turn: Turn,
        /// Its label.
        label: Option<String>,
    },
    /// An operation `undo` could revert.
    Undo {
        /// Its id.
        op: u64,
        /// What it was, as `op log` says.
        text: String,
    },
    /// An operation `redo` could re-apply.
    Redo {
        /// Its id.
        op: u64,
        /// What it was, as `op log` says.
        text: String,
    },
    /// A turn a rewind in effect retired, which undoing that rewind would bring back.
    RewoundTurn {
        /// Its number.
        turn: Turn,
        /// Its label.
        label: Option<String>,
        /// The rewind that retired it.
        by: u64,
    },
}

/// What a prune did, or (`dry_run`) would do.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PruneReport {
    /// A plan only: nothing was changed.
    pub dry_run: bool,
    /// What it makes unrecoverable, by number.
    #[serde(flatten)]
    pub unrecoverable: Unrecoverable,
    /// The same, one entry each, for people: turns, then undo and redo steps, then rewound turns.
    pub lost: Vec<Loss>,
    /// Turns that can still be rewound to.
    pub kept_turns: Vec<Turn>,
    /// What became of the undo and redo history.
    pub undo_history: UndoHistory,
    /// Blobs removed.
    pub removed_blobs: usize,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// Store size afterwards.
    pub store_bytes: u64,
    /// The `--max-size` asked for, when the store is still over it afterwards (the current turn
    /// always stays, and a prune that drops no turn keeps the undo and redo history).
    pub over_max_size: Option<u64>,
    /// The prune's id in the operation log; none for a prune that forgets nothing, which is
    /// no operation.
    pub op: Option<u64>,
    /// A plan only: the bytes the same prune would free with the undo and redo history dropped
    /// too, when that is more.
    pub with_drop_undo: Option<u64>,
    /// A plan only: the bytes a prune keeping only the current turn would free, when that is
    /// more.
    pub keeping_one_turn: Option<u64>,
}

/// A prune, planned and not yet applied.
#[derive(Debug)]
pub struct Plan {
    report: PruneReport,
    /// Blobs plus journal, in bytes, when it was planned.
    before: u64,
    forget: Forget,
}

/// What applying a [`Plan`] writes.
#[derive(Debug)]
enum Forget {
    /// Only these blobs, which no record names: the journal stays.
    UnnamedBlobs(Vec<BlobId>),
    /// The journal, rewritten as `lines` (`text`, encoded once: its length is what the plan
    /// counts, its bytes what the prune writes), then these blobs, which no kept record names.
    History {
        lines: Vec<Line>,
        text: Vec<u8>,
        blobs: Vec<BlobId>,
    },
}

impl Plan {
    /// What the prune would do.
    pub fn report(&self) -> &PruneReport {
        &self.report
    }
}

/// Bytes of blobs referenced by captures of turns `>= from`.
fn bytes_needed(store: &Store, from: Turn, sizes: &HashMap<BlobId, u64>) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0;
    for c in store.index.captures.iter().filter(|c| c.turn >= from) {
        if let PreImage::File { blob, .. } = &c.pre
            && seen.insert(*blob)
        {
            total += sizes.get(blob).copied().unwrap_or(0);
        }
    }
    total
}

/// Bytes of blobs plus the journal.
fn store_bytes(store: &Store) -> Result<u64, StoreError> {
    let blobs: u64 = store
        .blobs
        .list()
        .map_err(io("list blobs"))?
        .iter()
        .map(|(_, s)| s)
        .sum();
    Ok(blobs + store.journal_len())
}

/// The first turn a prune by `policy` keeps. `before` is the store's size now.
fn keep_from(store: &Store, policy: Policy, sizes: &HashMap<BlobId, u64>, before: u64) -> Turn {
    let turns: Vec<Turn> = store.index.turns.iter().map(|t| t.turn).collect();
    let mut first = 0;
    if let Some(k) = policy.keep_turns {
        // Turns are counted, not their steps: keeping one turn keeps every step of it.
        let whole: Vec<usize> = (0..turns.len())
            .filter(|&i| i == 0 || turns[i].get() != turns[i - 1].get())
            .collect();
        first = whole
            .get(whole.len().saturating_sub(k.max(1)))
            .copied()
            .unwrap_or(0);
    }
    if let Some(limit) = policy.max_size {
        // A store that fits as it is loses nothing: measuring without the undo history (what
        // the loop below does, since dropping a turn drops it) would drop a turn for bytes the
        // history holds, and the history with it.
        let fits = first == 0 && policy.undo == UndoHistory::Keep && before <= limit;
        while !fits
            && first + 1 < turns.len()
            && bytes_needed(store, turns[first], sizes) + store.journal_len() > limit
        {
            first += 1;
        }
    }
    turns.get(first).copied().unwrap_or(Turn::new(0))
}

/// Plans a prune of `store` by `policy`, changing nothing.
pub fn plan(store: &Store, policy: Policy) -> Result<Plan, StoreError> {
    plan_with(store, policy, &blob_sizes(store)?)
}

/// Every blob of `store` with its size on disk.
fn blob_sizes(store: &Store) -> Result<HashMap<BlobId, u64>, StoreError> {
    Ok(store
        .blobs
        .list()
        .map_err(io("list blobs"))?
        .into_iter()
        .collect())
}

/// [`plan`], with the store's blobs listed already (`sizes`): a preview plans up to three
/// prunes of one store.
fn plan_with(
    store: &Store,
    policy: Policy,
    sizes: &HashMap<BlobId, u64>,
) -> Result<Plan, StoreError> {
    let blob_bytes: u64 = sizes.values().sum();
    let journal_now = store.journal_len();
    let before = blob_bytes + journal_now;
    let keep_from = keep_from(store, policy, sizes, before);
    let first = store.index.turns.first().map_or(Turn::new(0), |t| t.turn);
    let (forget, journal_after, report) = if keep_from <= first && policy.undo == UndoHistory::Keep
    {
        let named = super::fsck::named_blobs(&read_journal(store)?);
        let blobs = unused(sizes, &named);
        let report = PruneReport {
            undo_history: UndoHistory::Keep,
            ..PruneReport::default()
        };
        (Forget::UnnamedBlobs(blobs), journal_now, report)
    } else {
        let (unrecoverable, lost) = losses(store, keep_from);
        let pruned = super::journal::Pruned {
            archived: archive(&store.index),
            id: store.index.ops.ops.last().map_or(1, |o| o.id + 1),
            dropped_turns: unrecoverable.dropped_turns.clone(),
            lost_ops: unrecoverable.lost_ops.clone(),
        };
        let report = PruneReport {
            op: Some(pruned.id),
            unrecoverable,
            lost,
            undo_history: UndoHistory::Drop,
            ..PruneReport::default()
        };
        let lines = kept_lines(store, keep_from, pruned);
        let named: HashSet<BlobId> = lines.iter().filter_map(file_blob).collect();
        let blobs = unused(sizes, &named);
        let text: Vec<u8> = lines.iter().flat_map(journal::encode).collect();
        let len = text.len() as u64;
        (Forget::History { lines, text, blobs }, len, report)
    };
    let blobs = match &forget {
        Forget::UnnamedBlobs(b) | Forget::History { blobs: b, .. } => b,
    };
    let freed_blobs: u64 = blobs.iter().filter_map(|b| sizes.get(b)).sum();
    let after = blob_bytes.saturating_sub(freed_blobs) + journal_after;
    let report = PruneReport {
        dry_run: true,
        kept_turns: store
            .index
            .turns
            .iter()
            .map(|t| t.turn)
            .filter(|t| *t >= keep_from)
            .collect(),
        removed_blobs: blobs.len(),
        freed_bytes: before.saturating_sub(after),
        store_bytes: after,
        over_max_size: policy.max_size.filter(|limit| after > *limit),
        ..report
    };
    Ok(Plan {
        report,
        before,
        forget,
    })
}

/// What `prune --dry-run` says: the plan, and what the further ways to free space would
/// free.
pub fn preview(store: &Store, policy: Policy) -> Result<PruneReport, StoreError> {
    let sizes = blob_sizes(store)?;
    let mut report = plan_with(store, policy, &sizes)?.report;
    let more = |p: Policy| -> Result<Option<u64>, StoreError> {
        let freed = plan_with(store, p, &sizes)?.report.freed_bytes;
        Ok((freed > report.freed_bytes).then_some(freed))
    };
    if report.undo_history == UndoHistory::Keep {
        report.with_drop_undo = more(Policy {
            undo: UndoHistory::Drop,
            ..policy
        })?;
    }
    if report.kept_turns.len() > 1 {
        report.keeping_one_turn = more(Policy {
            keep_turns: Some(1),
            max_size: None,
            undo: UndoHistory::Drop,
        })?;
    }
    Ok(report)
}

/// Applies a plan made by [`plan`] on this store, with nothing appended since.
pub fn apply(store: &mut Store, plan: Plan) -> Result<PruneReport, StoreError> {
    let blobs = match plan.forget {
        Forget::UnnamedBlobs(blobs) => blobs,
        Forget::History { lines, text, blobs } => {
            rewrite_journal(store, lines, &text)?;
            blobs
        }
    };
    for id in &blobs {
        store.blobs.remove(id).map_err(io("remove blob"))?;
    }
    if !blobs.is_empty() {
        store.blobs.compact().map_err(io("compact packs"))?;
    }
    let after = store_bytes(store)?;
    Ok(PruneReport {
        dry_run: false,
        freed_bytes: plan.before.saturating_sub(after),
        store_bytes: after,
        ..plan.report
    })
}

/// Plans and applies a prune by `policy`.
pub fn prune(store: &mut Store, policy: Policy) -> Result<PruneReport, StoreError> {
    let plan = plan(store, policy)?;
    apply(store, plan)
}

/// The blob a line's file pre-image names.
fn file_blob(line: &Line) -> Option<BlobId> {
    match &line.rec {
        Record::Capture {
            pre: PreImage::File { blob, .. },
            ..
        }
        | Record::HandOff(crate::store::journal::HandOff {
            pre: PreImage::File { blob, .. },
            ..
        }) => Some(*blob),
        _ => None,
    }
}

/// The blobs of `sizes` that `named` does not hold, in a stable order.
fn unused(sizes: &HashMap<BlobId, u64>, named: &HashSet<BlobId>) -> Vec<BlobId> {
    let mut out: Vec<BlobId> = sizes
        .keys()
        .filter(|b| !named.contains(b))
        .copied()
        .collect();
    out.sort_unstable();
    out
}

/// The journal's lines as they are on disk (a torn tail left out, as replay does).
fn read_journal(store: &Store) -> Result<Vec<Line>, StoreError> {
    let bytes = sys::read_to_end(store.journal.as_fd()).map_err(io("read journal"))?;
    Ok(journal::parse(&bytes).map_err(StoreError::Journal)?.lines)
}

/// What forgetting the turns before `keep_from` and the undo and redo history loses.
fn losses(store: &Store, keep_from: Turn) -> (Unrecoverable, Vec<Loss>) {
    let index = &store.index;
    let ops = &index.ops;
    let mut lost = Vec::new();
    let mut u = Unrecoverable::default();
    for t in index.turns.iter().filter(|t| t.turn < keep_from) {
        u.dropped_turns.push(t.turn);
        lost.push(Loss::Turn {
            turn: t.turn,
            label: t.label.clone(),
        });
    }
    let text = |id: u64| {
        ops.get(id)
            .map_or_else(String::new, super::ops::OpEntry::describe)
    };
    for a in &ops.undo {
        u.lost_ops.push(a.op);
        lost.push(Loss::Undo {
            op: a.op,
            text: text(a.op),
        });
    }
    for a in &ops.redo {
        u.lost_ops.push(a.op);
        lost.push(Loss::Redo {
            op: a.op,
            text: text(a.op),
        });
    }
    let mut rewound = ops.rewound_turns();
    rewound.sort_by_key(|(t, _)| t.turn);
    rewound.dedup_by_key(|(t, _)| t.turn);
    for (t, by) in rewound {
        u.lost_rewound_turns.push(t.turn);
        lost.push(Loss::RewoundTurn {
            turn: t.turn,
            label: t.label.clone(),
            by,
        });
    }
    (u, lost)
}

/// The operation log so far, as text for the `pruned` record.
fn archive(index: &super::Index) -> Vec<super::journal::ArchivedOp> {
    index
        .ops
        .ops
        .iter()
        .map(|o| super::journal::ArchivedOp {
            id: o.id,
            time: o.time,
            text: o.describe(),
            undone: matches!(o.state, super::ops::OpState::Undone(_))
                || matches!(o.what, super::ops::OpWhat::Archived { undone: true, .. }),
        })
        .collect()
}

/// Writes the journal anew as `lines` (see [`kept_lines`]), encoded as `bytes`, and replays
/// them.
fn rewrite_journal(store: &mut Store, lines: Vec<Line>, bytes: &[u8]) -> Result<(), StoreError> {
    let d = store.dir.as_fd();
    let tmp = c"journal.jsonl.new";
    // A leftover of a prune cut off by a crash (the name is the prune's alone).
    let _ = sys::unlinkat(d, tmp, 0);
    let file = TempFile::create(d, tmp.into()).map_err(io("write new journal"))?;
    sys::write_all(file.fd(), bytes, 0).map_err(io("write new journal"))?;
    // Synced, renamed over the journal, the directory synced: the rule of `crate::tree`.
    file.persist(
        d,
        c"journal.jsonl",
        Durability::Synced,
        "prune-before-rename",
    )
    .map_err(io("replace journal"))?;
    let journal = sys::openat(
        d,
        c"journal.jsonl",
        libc::O_RDWR | libc::O_APPEND | libc::O_NOFOLLOW,
        0,
    )
    .map_err(io("reopen journal"))?;
    let index = super::Index::replay(&lines);
    store.journal = journal;
    store.index = index;
    store.epoch = store.epoch.next();
    store.changes.bump();
    Ok(())
}

/// The lines of the rewritten journal, numbered from 1: each kept turn with its captures and
/// their touches (renumbered to name their capture's new seq), every agent mark after the
/// first kept turn, then the `pruned` record.
fn kept_lines(store: &Store, keep_from: Turn, pruned: super::journal::Pruned) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut seq = 0;
    let mut push = |time: u64, rec: Record| {
        seq += 1;
        lines.push(Line {
            v: rec.version(),
            seq: Seq::new(seq),
            time,
            rec,
        });
        Seq::new(seq)
    };
    let kept = store.index.turns.iter().filter(|t| t.turn >= keep_from);
    for (i, t) in kept.enumerate() {
        push(
            t.time,
            Record::Turn {
                turn: t.turn,
                label: t.label.clone(),
                by: t.by.clone(),
                conversation: t.conversation.clone(),
            },
        );
        if i == 0 {
            // Every agent mark is kept: without them the views could not tell "no agent was
            // marked" from "these changes are not the agent's".
            for (_, time, m) in &store.index.actors.marks {
                push(*time, Record::Agent(m.clone()));
            }
        }
        for c in store.index.captures.iter().filter(|c| c.turn == t.turn) {
            let capture = push(
                t.time,
                Record::Capture {
                    turn: c.turn,
                    path: c.path.clone(),
                    pre: c.pre.clone(),
                    undo_of: None,
                    pid: c.pid,
                    comm: c.comm.as_deref().map(str::to_string),
                },
            );
            let touches = store.index.actors.by_capture.get(&c.seq);
            for touch in touches.into_iter().flatten() {
                push(t.time, Record::Touched(touch.record(capture)));
            }
            let handoffs = store.index.actors.handoffs.get(&c.seq);
            for h in handoffs.into_iter().flatten() {
                let h = crate::store::journal::HandOff {
                    capture,
                    ..h.clone()
                };
                push(t.time, Record::HandOff(h));
            }
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    push(now, Record::Pruned(pruned));
    lines
}

#[cfg(test)]
mod tests;
