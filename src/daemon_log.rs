//! The end of the daemon's log (`status --log`): `.ckpt/daemon.log`, hidden from the mount,
//! read through the store's descriptor by the daemon or by the CLI on an unmounted folder.

use crate::store::Store;
use crate::sys::{self, Errno};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, BorrowedFd};

/// The end of the daemon's log, `.ckpt/daemon.log` (a daemon in the background logs there).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DaemonLog {
    /// Whether the file exists (a daemon run with `--foreground` logs to its terminal instead).
    pub exists: bool,
    /// Its last lines, oldest first.
    pub lines: Vec<String>,
}

/// Why the daemon's log could not be read: opening or reading it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonLogError {
    /// `open` or `read`.
    pub doing: &'static str,
    /// The errno.
    pub errno: Errno,
}

impl std::fmt::Display for DaemonLogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot {} .ckpt/daemon.log: {}", self.doing, self.errno)
    }
}

impl std::error::Error for DaemonLogError {}

/// The last `n` lines of the daemon's log in the store, read through the store's descriptor.
pub fn daemon_log(store: &Store, n: usize) -> Result<DaemonLog, DaemonLogError> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = match sys::openat(store.dir(), c"daemon.log", flags, 0) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT)) => {
            return Ok(DaemonLog {
                exists: false,
                lines: Vec::new(),
            });
        }
        Err(errno) => {
            return Err(DaemonLogError {
                doing: "open",
                errno,
            });
        }
    };
    let lines = tail(fd.as_fd(), n).map_err(|errno| DaemonLogError {
        doing: "read",
        errno,
    })?;
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
