//! Status, the per-turn log and the daemon's log, computed from an open store (the daemon's or
//! an offline one). Both status and the log name the captures that stored nothing (a file over
//! `--max-blob`, a socket, a device): a rewind cannot restore those, and the user should learn
//! it when it happens, not at rewind time.

use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys::{self, Errno};
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};
use std::os::fd::{AsFd, BorrowedFd};

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
    /// Captures of the turn that stored nothing: a rewind cannot restore these paths.
    pub skipped: Vec<SkippedCapture>,
}

/// A capture that stored nothing, so that no rewind can restore its path to what it was.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SkippedCapture {
    /// The turn it belongs to.
    pub turn: u64,
    /// The path.
    pub path: String,
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
                turn: c.turn.0,
                path: c.path.to_string(),
                was: was.clone(),
                size: *size,
                over_max_blob: was == "file" && reason.contains(OVER_MAX_BLOB),
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
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

fn exists(root: BorrowedFd<'_>, path: &crate::relpath::RelPath) -> bool {
    sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0).is_ok()
}

/// The rows of every active turn, oldest first.
pub fn log_rows(store: &Store, root: BorrowedFd<'_>) -> Vec<TurnRow> {
    let skipped = skipped_captures(store);
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
                skipped: skipped
                    .iter()
                    .filter(|c| c.turn == t.turn.0)
                    .cloned()
                    .collect(),
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
    /// Captures of the active turns that stored nothing: a rewind cannot restore these paths.
    pub skipped: Vec<SkippedCapture>,
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
        skipped: skipped_captures(store),
    }
}

fn warn_threshold(store: &Store) -> u64 {
    let free =
        sys::fstatvfs(store.dir()).map_or(u64::MAX, |s| s.f_bavail.saturating_mul(s.f_frsize));
    (1u64 << 30).min(free / 10)
}

/// The end of the daemon's log, `.ckpt/daemon.log` (a daemon in the background logs there).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DaemonLog {
    /// Whether the file exists (a daemon run with `--foreground` logs to its terminal instead).
    pub exists: bool,
    /// Its last lines, oldest first.
    pub lines: Vec<String>,
}

/// The last `n` lines of the daemon's log in the store, read through the store's descriptor.
pub fn daemon_log(store: &Store, n: usize) -> Result<DaemonLog, String> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = match sys::openat(store.dir(), c"daemon.log", flags, 0) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT)) => {
            return Ok(DaemonLog {
                exists: false,
                lines: Vec::new(),
            });
        }
        Err(e) => return Err(format!("cannot open .ckpt/daemon.log: {e}")),
    };
    let lines = tail(fd.as_fd(), n).map_err(|e| format!("cannot read .ckpt/daemon.log: {e}"))?;
    Ok(DaemonLog {
        exists: true,
        lines,
    })
}

/// The last `n` lines of the file at `fd`, read backwards a chunk at a time until they are
/// all in (a last line without its newline, being written, counts as a line).
fn tail(fd: BorrowedFd<'_>, n: usize) -> Result<Vec<String>, Errno> {
    const CHUNK: u64 = 64 * 1024;
    let size = sys::fstat(fd)?.st_size as u64;
    let mut start = size;
    let mut bytes: Vec<u8> = Vec::new();
    // One newline more than lines wanted proves the first of them whole.
    while start > 0 && bytes.iter().filter(|b| **b == b'\n').count() <= n {
        let from = start.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (start - from) as usize];
        let got = sys::read_full(fd, &mut chunk, from)?;
        chunk.truncate(got);
        chunk.extend_from_slice(&bytes);
        bytes = chunk;
        start = from;
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        // Begins mid-line: not one of the lines asked for.
        lines.remove(0);
    }
    let keep = lines.len().saturating_sub(n);
    Ok(lines[keep..].iter().map(|l| (*l).to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_file_over_max_blob_is_named_as_such() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("big"), vec![b'x'; 100]).expect("write");
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::open(root.as_fd(), true, false).expect("store");
        let pre = crate::capture::read_preimage(store.blobs(), root.as_fd(), c"big", 10)
            .expect("pre-image");
        let PreImage::Skipped { reason, was, .. } = pre else {
            panic!("not skipped: {pre:?}");
        };
        assert_eq!(was, "file");
        assert!(reason.contains(OVER_MAX_BLOB), "{reason}");
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(4096), "4.0 KiB");
        assert_eq!(human_size(2 << 30), "2.0 GiB");
        assert_eq!(human_size(1536 << 20), "1.5 GiB");
    }

    #[test]
    fn the_tail_is_the_last_lines_however_the_chunks_fall() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        assert_eq!(
            tail(f.as_fd(), 3).expect("tail"),
            vec!["line 19997", "line 19998", "line 19999"]
        );
        let all = tail(f.as_fd(), 50_000).expect("tail");
        assert_eq!(all.len(), 20_000);
        assert_eq!(all[0], "line 0");
        assert!(tail(f.as_fd(), 0).expect("tail").is_empty());
        std::fs::write(&path, "a\nbeing writ").expect("write");
        let f = std::fs::File::open(&path).expect("open");
        assert_eq!(tail(f.as_fd(), 1).expect("tail"), vec!["being writ"]);
        std::fs::write(&path, "").expect("write");
        let f = std::fs::File::open(&path).expect("open");
        assert!(tail(f.as_fd(), 5).expect("tail").is_empty());
    }
}
