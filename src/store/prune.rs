//! Retention: forget the oldest turns and the blobs nothing refers to any more.
//!
//! Pruning is the one operation that rewrites the journal: the kept records are written to a
//! new file, synced, and renamed over the old one (atomic), then the store reopens it. It runs
//! only on explicit request, never per capture. It is an operation of the operation log
//! (`ops.rs`) that cannot be undone: it forgets what undo and redo would need, and says so
//! (the operations that can no longer be undone or redone); the log of the operations before
//! it is kept as text in its `pruned` record, the last line of the rewritten journal.

use super::journal::{self, Line, PreImage, Record};
use super::{Store, StoreError, io};
use crate::ids::{BlobId, Seq, Turn};
use crate::sys;
use crate::tree::{Durability, TempFile};
use serde::Serialize;
use std::collections::HashSet;
use std::os::fd::AsFd;

/// What to keep.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    /// Keep at most this many of the newest turns (the current one always stays).
    pub keep_turns: Option<usize>,
    /// Drop the oldest turns until blobs and journal fit in this many bytes.
    pub max_size: Option<u64>,
}

/// What a prune did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PruneReport {
    /// Turns forgotten.
    pub dropped_turns: Vec<u64>,
    /// Turns that can still be rewound to.
    pub kept_turns: Vec<u64>,
    /// Blobs removed.
    pub removed_blobs: usize,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// Store size afterwards.
    pub store_bytes: u64,
    /// Operations that could be undone or redone before the prune and no longer can.
    pub lost_ops: Vec<u64>,
    /// Turns retired by a rewind that an undo could have brought back, and no longer can.
    pub lost_rewound_turns: Vec<u64>,
    /// The prune's id in the operation log.
    pub op: u64,
}

/// Bytes of blobs referenced by captures of turns `>= from`.
fn bytes_needed(store: &Store, from: Turn, sizes: &std::collections::HashMap<BlobId, u64>) -> u64 {
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

/// Applies `policy` to an open store.
pub fn prune(store: &mut Store, policy: Policy) -> Result<PruneReport, StoreError> {
    let turns: Vec<Turn> = store.index.turns.iter().map(|t| t.turn).collect();
    let Some(&current) = turns.last() else {
        return Ok(PruneReport::default());
    };
    let mut first_kept_idx = 0;
    if let Some(k) = policy.keep_turns {
        first_kept_idx = turns.len().saturating_sub(k.max(1));
    }
    if let Some(limit) = policy.max_size {
        let sizes: std::collections::HashMap<BlobId, u64> = store
            .blobs
            .list()
            .map_err(io("list blobs"))?
            .into_iter()
            .collect();
        while first_kept_idx + 1 < turns.len()
            && bytes_needed(store, turns[first_kept_idx], &sizes) + store.journal_len() > limit
        {
            first_kept_idx += 1;
        }
    }
    let keep_from = turns.get(first_kept_idx).copied().unwrap_or(current);
    let before = store_bytes(store)?;
    let ops = &store.index.ops;
    let lost_ops: Vec<u64> = ops
        .undo
        .iter()
        .chain(ops.redo.iter())
        .map(|a| a.op)
        .collect();
    let mut lost_rewound_turns: Vec<u64> =
        ops.rewound_turns().iter().map(|(t, _)| t.turn.0).collect();
    lost_rewound_turns.sort_unstable();
    lost_rewound_turns.dedup();
    let dropped_turns: Vec<u64> = turns
        .iter()
        .filter(|t| **t < keep_from)
        .map(|t| t.0)
        .collect();
    let pruned = super::ops::Pruned {
        archived: archive(&store.index),
        id: store.index.ops.ops.last().map_or(1, |o| o.id + 1),
        dropped_turns: dropped_turns.clone(),
        lost_ops: lost_ops.clone(),
    };
    let op = pruned.id;
    rewrite_journal(store, keep_from, pruned)?;
    let referenced: HashSet<BlobId> = store
        .index
        .captures
        .iter()
        .filter_map(|c| match &c.pre {
            PreImage::File { blob, .. } => Some(*blob),
            _ => None,
        })
        .collect();
    let mut removed = 0;
    for (id, _) in store.blobs.list().map_err(io("list blobs"))? {
        if !referenced.contains(&id) {
            store.blobs.remove(&id).map_err(io("remove blob"))?;
            removed += 1;
        }
    }
    store.blobs.compact().map_err(io("compact packs"))?;
    let after = store_bytes(store)?;
    Ok(PruneReport {
        dropped_turns,
        kept_turns: store.index.turns.iter().map(|t| t.turn.0).collect(),
        removed_blobs: removed,
        freed_bytes: before.saturating_sub(after),
        store_bytes: after,
        lost_ops,
        lost_rewound_turns,
        op,
    })
}

/// The operation log so far, as text for the `pruned` record.
fn archive(index: &super::Index) -> Vec<super::ops::ArchivedOp> {
    index
        .ops
        .ops
        .iter()
        .map(|o| super::ops::ArchivedOp {
            id: o.id,
            time: o.time,
            text: o.describe(),
            undone: matches!(o.state, super::ops::OpState::Undone(_))
                || matches!(o.what, super::ops::OpWhat::Archived { undone: true, .. }),
        })
        .collect()
}

/// Writes the journal anew with only the turns `>= keep_from` and their captures, then the
/// `pruned` record.
fn rewrite_journal(
    store: &mut Store,
    keep_from: Turn,
    pruned: super::ops::Pruned,
) -> Result<(), StoreError> {
    let lines = kept_lines(store, keep_from, pruned);
    let mut bytes = Vec::new();
    for l in &lines {
        bytes.extend(journal::encode(l));
    }
    let d = store.dir.as_fd();
    let tmp = c"journal.jsonl.new";
    // A leftover of a prune cut off by a crash (the name is the prune's alone).
    let _ = sys::unlinkat(d, tmp, 0);
    let file = TempFile::create(d, tmp.into()).map_err(io("write new journal"))?;
    sys::write_all(file.fd(), &bytes, 0).map_err(io("write new journal"))?;
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
    Ok(())
}

/// The lines of the rewritten journal, numbered from 1: each kept turn with its captures and
/// their touches (renumbered to name their capture's new seq), every agent mark after the
/// first kept turn, then the `pruned` record.
fn kept_lines(store: &Store, keep_from: Turn, pruned: super::ops::Pruned) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut seq = 0;
    let mut push = |time: u64, rec: Record| {
        seq += 1;
        lines.push(Line {
            v: rec.version(),
            seq: Seq(seq),
            time,
            rec,
        });
        Seq(seq)
    };
    let kept = store.index.turns.iter().filter(|t| t.turn >= keep_from);
    for (i, t) in kept.enumerate() {
        let label = t.label.clone();
        push(
            t.time,
            Record::Turn {
                turn: t.turn,
                label,
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
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    push(now, Record::Pruned(pruned));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relpath::RelPath;

    fn file_cap(s: &mut Store, turn: u64, path: &str, content: &[u8]) {
        let stored = s.blobs.put_bytes(content).expect("put");
        s.append(Record::Capture {
            turn: Turn(turn),
            path: RelPath::new(path.as_bytes()).expect("valid"),
            pre: PreImage::File {
                blob: stored.id,
                size: content.len() as u64,
                mode: 0o644,
                uid: 0,
                gid: 0,
                ino: 1,
                nlink: 1,
                fh: None,
                btime: None,
                xattrs: None,
            },
            undo_of: None,
            pid: None,
            comm: None,
        })
        .expect("append");
    }

    #[test]
    fn keep_turns_drops_the_oldest_and_their_blobs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut s = Store::open(root.as_fd(), true, false).expect("store");
        file_cap(&mut s, 1, "a", b"turn one bytes");
        for t in 2..=4 {
            s.append(Record::Turn {
                turn: Turn(t),
                label: Some(format!("t{t}")),
            })
            .expect("turn");
            file_cap(&mut s, t, "a", format!("turn {t} bytes").as_bytes());
        }
        let r = prune(
            &mut s,
            Policy {
                keep_turns: Some(2),
                max_size: None,
            },
        )
        .expect("prune");
        assert_eq!(r.dropped_turns, vec![1, 2]);
        assert_eq!(r.kept_turns, vec![3, 4]);
        assert_eq!(r.removed_blobs, 2);
        assert!(!s.index.has_turn(Turn(2)));
        assert_eq!(s.index.plan_targets(Turn(3)).len(), 1);
        drop(s);
        // The rewritten journal replays to the same index, and appends still work.
        let mut s = Store::open(root.as_fd(), false, false).expect("reopen");
        assert_eq!(
            s.index.turns.iter().map(|t| t.turn.0).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert_eq!(s.index.turns[0].label.as_deref(), Some("t3"));
        s.append(Record::Turn {
            turn: Turn(5),
            label: None,
        })
        .expect("append after prune");
        assert_eq!(s.blobs.list().expect("list").len(), 2);
    }

    #[test]
    fn max_size_keeps_the_current_turn() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut s = Store::open(root.as_fd(), true, false).expect("store");
        file_cap(&mut s, 1, "a", &[1u8; 5000]);
        s.append(Record::Turn {
            turn: Turn(2),
            label: None,
        })
        .expect("turn");
        file_cap(&mut s, 2, "a", &[2u8; 5000]);
        let r = prune(
            &mut s,
            Policy {
                keep_turns: None,
                max_size: Some(1),
            },
        )
        .expect("prune");
        assert_eq!(r.kept_turns, vec![2]);
        assert_eq!(r.dropped_turns, vec![1]);
    }
}
