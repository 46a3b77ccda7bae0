//! Status and per-turn log, computed from an open store (the daemon's or an offline one).

use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys;
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};
use std::os::fd::BorrowedFd;

/// One row of `ckpt-mount log`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnRow {
    /// Turn number.
    pub turn: u64,
    /// Label.
    pub label: Option<String>,
    /// Unix time it began.
    pub time: u64,
    /// Paths that did not exist at the start of the turn and exist now.
    pub created: usize,
    /// Paths that existed and still exist.
    pub modified: usize,
    /// Paths that existed and are gone now.
    pub deleted: usize,
    /// Bytes of file content captured.
    pub bytes: u64,
    /// Command names of the processes behind the captures.
    pub programs: Vec<String>,
}

fn exists(root: BorrowedFd<'_>, path: &crate::relpath::RelPath) -> bool {
    sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0).is_ok()
}

/// `size` bytes as people read them: `512 B`, `4.0 KiB`, `2.0 GiB`.
pub fn human_size(size: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if size < 1024 {
        return format!("{size} B");
    }
    let mut value = size as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The rows of every active turn, oldest first.
pub fn log_rows(store: &Store, root: BorrowedFd<'_>) -> Vec<TurnRow> {
    store
        .index()
        .turns
        .iter()
        .map(|t| {
            let mut row = TurnRow {
                turn: t.turn.0,
                label: t.label.clone(),
                time: t.time,
                created: 0,
                modified: 0,
                deleted: 0,
                bytes: 0,
                programs: Vec::new(),
            };
            let mut programs = BTreeSet::new();
            for c in store.index().captures.iter().filter(|c| c.turn == t.turn) {
                let now = exists(root, &c.path);
                match (&c.pre, now) {
                    (PreImage::Absent, true) => row.created += 1,
                    (PreImage::Absent, false) => {}
                    (_, true) => row.modified += 1,
                    (_, false) => row.deleted += 1,
                }
                if let PreImage::File { size, .. } = c.pre {
                    row.bytes += size;
                }
                if let Some(comm) = &c.comm {
                    programs.insert(comm.clone());
                }
            }
            row.programs = programs.into_iter().collect();
            row
        })
        .collect()
}

/// `ckpt-mount status` data.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The folder.
    pub folder: String,
    /// Whether a daemon serves it.
    pub mounted: bool,
    /// The daemon's pid.
    pub pid: Option<u32>,
    /// Current turn.
    pub turn: u64,
    /// Captures in the current turn.
    pub captures_this_turn: usize,
    /// Bytes in blobs plus the journal.
    pub store_bytes: u64,
    /// Number of blobs.
    pub blobs: usize,
    /// Captured file bytes divided by stored blob bytes.
    pub dedup_ratio: f64,
    /// Turns that can be rewound to.
    pub turns: Vec<u64>,
    /// Size above which `status` warns: 1 GiB or 10 % of the free space, whichever is less.
    pub warn_bytes: u64,
}

/// Computes status from a store.
pub fn status(store: &Store, folder: &str, pid: Option<u32>) -> Status {
    let blobs = store.blobs().list().unwrap_or_default();
    let blob_bytes: u64 = blobs.iter().map(|(_, s)| s).sum();
    let mut seen = HashSet::new();
    let mut captured = 0u64;
    for c in &store.index().captures {
        if let PreImage::File { size, blob, .. } = &c.pre {
            captured += size;
            seen.insert(*blob);
        }
    }
    let cur = store.index().current_turn().0;
    Status {
        folder: folder.to_string(),
        mounted: pid.is_some(),
        pid,
        turn: cur,
        captures_this_turn: store.index().captured_now.len(),
        store_bytes: blob_bytes + store.journal_len(),
        blobs: blobs.len(),
        dedup_ratio: if blob_bytes == 0 {
            1.0
        } else {
            captured as f64 / blob_bytes as f64
        },
        turns: store.index().turns.iter().map(|t| t.turn.0).collect(),
        warn_bytes: warn_threshold(store),
    }
}

fn warn_threshold(store: &Store) -> u64 {
    let free =
        sys::fstatvfs(store.dir()).map_or(u64::MAX, |s| s.f_bavail.saturating_mul(s.f_frsize));
    (1u64 << 30).min(free / 10)
}
