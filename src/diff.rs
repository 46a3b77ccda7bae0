//! `diff`: what changed from the start of a turn to now, per path touched since.

use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use crate::sys::{self, Errno};
use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};

/// Largest file diffed as text; bigger ones are summarised.
const MAX_TEXT: u64 = 8 << 20;

/// One changed path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileChange {
    /// The path.
    pub path: String,
    /// `created`, `deleted`, `modified`, `mode`, `type`, `symlink`.
    pub change: String,
    /// Lines added (text files).
    pub added: usize,
    /// Lines removed (text files).
    pub removed: usize,
    /// A unified diff, `binary files differ`, or a one-line description.
    pub text: String,
}

/// What is at a path now.
enum Now {
    Absent,
    File {
        bytes: Option<Vec<u8>>,
        mode: u32,
        size: u64,
    },
    Dir {
        mode: u32,
    },
    Symlink(Vec<u8>),
    Other(u32),
}

fn now_at(root: BorrowedFd<'_>, path: &RelPath) -> Now {
    let Ok(fd) = sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
    else {
        return Now::Absent;
    };
    let Ok(st) = sys::fstat(fd.as_fd()) else {
        return Now::Absent;
    };
    let mode = st.st_mode & 0o7777;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let size = st.st_size as u64;
            let bytes = (size <= MAX_TEXT)
                .then(|| {
                    // without an atime update where allowed: a diff only looks
                    sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_NOATIME)
                        .or_else(|_| sys::reopen(fd.as_fd(), libc::O_RDONLY))
                        .ok()
                        .and_then(|r| read_all(r.as_fd()).ok())
                })
                .flatten();
            Now::File { bytes, mode, size }
        }
        libc::S_IFDIR => Now::Dir { mode },
        libc::S_IFLNK => {
            let name = CString::new(path.file_name().as_encoded_bytes()).unwrap_or_default();
            let parent = path.parent();
            let target = match &parent {
                None => sys::readlinkat(root, &name),
                Some(p) => {
                    sys::open_beneath(root, &p.to_cstring(), libc::O_PATH | libc::O_DIRECTORY, 0)
                        .and_then(|d| sys::readlinkat(d.as_fd(), &name))
                }
            };
            Now::Symlink(target.unwrap_or_default())
        }
        other => Now::Other(other),
    }
}

fn read_all(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = crate::sys::read_full(fd, &mut buf, out.len() as u64)?;
        out.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return Ok(out);
        }
    }
}

fn is_text(b: &[u8]) -> bool {
    !b.contains(&0) && std::str::from_utf8(b).is_ok()
}

fn text_diff(path: &str, old: &[u8], new: &[u8]) -> (String, usize, usize) {
    if !is_text(old) || !is_text(new) {
        return ("binary files differ\n".into(), 0, 0);
    }
    let (o, n) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let d = TextDiff::from_lines(o.as_ref(), n.as_ref());
    let (mut added, mut removed) = (0, 0);
    for c in d.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    (text, added, removed)
}

fn blob_bytes(store: &Store, id: &BlobId) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    store
        .blobs()
        .read_blob(id, &mut |chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        })
        .ok()?;
    Some(out)
}

/// Changes from the start of turn `turn` to now, limited to `only` (paths or their parents)
/// when given.
pub fn diff(root: BorrowedFd<'_>, store: &Store, turn: u64, only: &[RelPath]) -> Vec<FileChange> {
    let mut out = Vec::new();
    for (path, pre) in store.index().plan_targets(crate::ids::Turn(turn)) {
        if !only.is_empty() && !only.iter().any(|o| path.starts_with(o)) {
            continue;
        }
        let p = path.to_string();
        let now = now_at(root, &path);
        let mut push = |change: &str, added: usize, removed: usize, text: String| {
            out.push(FileChange {
                path: p.clone(),
                change: change.into(),
                added,
                removed,
                text,
            });
        };
        changes_of(store, &p, &pre, now, &mut push);
    }
    out
}

/// The changes of one path `p` from its pre-image `pre` to what stands there `now`, each
/// given to `push` as (kind of change, lines added, lines removed, text).
fn changes_of(
    store: &Store,
    p: &str,
    pre: &PreImage,
    now: Now,
    push: &mut dyn FnMut(&str, usize, usize, String),
) {
    match (pre, now) {
        (PreImage::Absent, Now::Absent) => {}
        (PreImage::Absent, Now::File { bytes, .. }) => {
            let (text, added, _) = text_diff(p, b"", bytes.as_deref().unwrap_or(b""));
            push("created", added, 0, text);
        }
        (PreImage::Absent, _) => push("created", 0, 0, "created\n".into()),
        (
            PreImage::File {
                blob, mode, size, ..
            },
            Now::File {
                bytes,
                mode: m2,
                size: s2,
            },
        ) => file_changes(store, p, (blob, *mode, *size), (bytes, m2, s2), push),
        (PreImage::File { blob, size, .. }, Now::Absent) => {
            let old = if *size <= MAX_TEXT {
                blob_bytes(store, blob)
            } else {
                None
            };
            let (text, _, removed) = text_diff(p, old.as_deref().unwrap_or(b""), b"");
            push("deleted", 0, removed, text);
        }
        (PreImage::Dir { mode, .. }, Now::Dir { mode: m2 }) => {
            if mode != &m2 {
                push("mode", 0, 0, format!("mode {mode:o} -> {m2:o}\n"));
            }
        }
        (PreImage::Symlink { target, .. }, Now::Symlink(t2)) => {
            if target.0 != t2 {
                push(
                    "symlink",
                    0,
                    0,
                    format!(
                        "symlink {} -> {}\n",
                        String::from_utf8_lossy(&target.0),
                        String::from_utf8_lossy(&t2)
                    ),
                );
            }
        }
        (PreImage::Fifo { .. }, Now::Other(libc::S_IFIFO)) => {}
        (PreImage::Skipped { reason, .. }, _) => {
            push("modified", 0, 0, format!("not captured: {reason}\n"))
        }
        (pre, Now::Absent) => push("deleted", 0, 0, format!("{} deleted\n", pre.kind())),
        (pre, _) => push(
            "type",
            0,
            0,
            format!("was a {}, now something else\n", pre.kind()),
        ),
    }
}

/// A regular file then and now: its content (a text diff, or sizes for a large file) and its
/// mode.
fn file_changes(
    store: &Store,
    p: &str,
    (blob, mode, size): (&BlobId, u32, u64),
    (bytes, m2, s2): (Option<Vec<u8>>, u32, u64),
    push: &mut dyn FnMut(&str, usize, usize, String),
) {
    let old = if size <= MAX_TEXT {
        blob_bytes(store, blob)
    } else {
        None
    };
    match (old, bytes) {
        (Some(old), Some(new)) => {
            if old != new {
                let (text, a, r) = text_diff(p, &old, &new);
                push("modified", a, r, text);
            }
        }
        _ => push(
            "modified",
            0,
            0,
            format!("large file: {size} -> {s2} bytes\n"),
        ),
    }
    if mode != m2 {
        push("mode", 0, 0, format!("mode {mode:o} -> {m2:o}\n"));
    }
}

/// The `--stat` summary of a diff.
pub fn stat(changes: &[FileChange]) -> String {
    let mut s = String::new();
    let width = changes.iter().map(|c| c.path.len()).max().unwrap_or(0);
    for c in changes {
        let bar = format!(
            "{}{}",
            "+".repeat(c.added.min(40)),
            "-".repeat(c.removed.min(40))
        );
        s.push_str(&format!(
            " {:<width$} | {:<9} {:>5} {bar}\n",
            c.path,
            c.change,
            c.added + c.removed
        ));
    }
    let (a, r): (usize, usize) = changes
        .iter()
        .fold((0, 0), |(a, r), c| (a + c.added, r + c.removed));
    s.push_str(&format!(
        " {} paths changed, {a} insertions(+), {r} deletions(-)\n",
        changes.len()
    ));
    s
}
