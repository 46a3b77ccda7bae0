//! One path as it was when a turn began, for `cat` and `restore`: which version that is (a
//! pre-image in the store, or the folder as it is now when no turn since changed the path:
//! the rewind rule), and its bytes copied out as a stream, so a large file never sits whole in
//! memory. The daemon answers with it for a mounted folder, the CLI itself for an unmounted one.

use crate::ids::{BlobId, Turn};
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::blob::BlobStore;
use crate::store::journal::{LinkTarget, PreImage};
use crate::sys;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};

/// Where the bytes of a file version are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A blob in the store.
    Store(BlobId),
    /// The folder: no turn since changed the path.
    Folder,
}

/// A path as it was when a turn began, as far as `cat` and `restore` can give it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OldVersion {
    /// A regular file.
    File {
        /// Where its bytes are.
        source: Source,
        /// Its size in bytes.
        size: u64,
        /// Its permission bits.
        mode: u32,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, its bytes as they are (in the JSON a string, or `{"hex": …}`).
        target: LinkTarget,
    },
}

/// The version of `path` at the start of `turn` (the current turn when `None`), or the one
/// line saying why there is none to copy out.
pub fn old_version(
    store: &Store,
    root: BorrowedFd<'_>,
    turn: Option<u64>,
    rel: &RelPath,
) -> Result<OldVersion, String> {
    let index = store.index();
    let turn = turn.map_or_else(|| index.current_turn(), Turn);
    if !index.has_turn(turn) {
        return Err(format!("turn {turn} does not exist"));
    }
    let recorded = index
        .captures
        .iter()
        .find(|c| c.turn >= turn && c.path == *rel)
        .map(|c| c.pre.clone());
    let when = format!("when turn {turn} began");
    match recorded {
        None => now(root, rel, &when),
        Some(PreImage::File {
            blob, size, mode, ..
        }) => Ok(OldVersion::File {
            source: Source::Store(blob),
            size,
            mode,
        }),
        Some(PreImage::Symlink { target, .. }) => Ok(OldVersion::Symlink { target }),
        Some(PreImage::Absent) => Err(format!("{rel} did not exist {when}")),
        Some(PreImage::Dir { .. }) => Err(format!(
            "{rel} was a directory {when}; give a file inside it"
        )),
        Some(PreImage::Fifo { .. }) => Err(format!("{rel} was a FIFO {when}: it has no bytes")),
        Some(PreImage::Skipped { reason, .. }) => Err(format!(
            "{rel} was not captured {when} ({reason}), so its bytes are not in the store"
        )),
        Some(PreImage::Staged { .. }) => Err(format!(
            "{rel}: its bytes from {when} are still being stored; try again"
        )),
    }
}

/// The version of a path no turn since changed: what stands in the folder now.
fn now(root: BorrowedFd<'_>, rel: &RelPath, when: &str) -> Result<OldVersion, String> {
    let fd = sys::open_beneath(root, &rel.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
        .map_err(|e| match e.0 {
            libc::ENOENT => format!("{rel} did not exist {when} (and does not now)"),
            _ => format!("{rel}: {e}"),
        })?;
    let st = sys::fstat(fd.as_fd()).map_err(|e| format!("{rel}: {e}"))?;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(OldVersion::File {
            source: Source::Folder,
            size: st.st_size as u64,
            mode: st.st_mode & 0o7777,
        }),
        libc::S_IFLNK => {
            // An `O_PATH | O_NOFOLLOW` descriptor of a symlink reads it with an empty name.
            let target = sys::readlinkat(fd.as_fd(), c"").map_err(|e| format!("{rel}: {e}"))?;
            Ok(OldVersion::Symlink {
                target: LinkTarget(target),
            })
        }
        libc::S_IFDIR => Err(format!(
            "{rel} was a directory {when}; give a file inside it"
        )),
        _ => Err(format!("{rel} was a special file {when}: it has no bytes")),
    }
}

/// Writes the bytes of the file version `v` of `path` to `out`, exactly `size` of them or an
/// error (a file in the folder that changed size meanwhile is an error, not a short copy).
pub fn copy_out(
    blobs: &BlobStore,
    root: BorrowedFd<'_>,
    rel: &RelPath,
    v: &OldVersion,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let OldVersion::File { source, size, .. } = v else {
        return Ok(());
    };
    let shown = rel;
    let mut written = 0u64;
    match source {
        Source::Store(blob) => {
            blobs
                .read_blob(blob, &mut |chunk| {
                    written += chunk.len() as u64;
                    out.write_all(chunk)
                        .map_err(|e| sys::Errno(e.raw_os_error().unwrap_or(libc::EIO)))
                })
                .map_err(|e| std::io::Error::other(format!("{shown}: reading blob {blob}: {e}")))?;
        }
        Source::Folder => {
            let fd = sys::open_beneath(
                root,
                &rel.to_cstring(),
                libc::O_RDONLY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let n = sys::read_full(fd.as_fd(), &mut buf, written)
                    .map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
                out.write_all(&buf[..n])?;
                written += n as u64;
                if n < buf.len() {
                    break;
                }
            }
        }
    }
    if written != *size {
        return Err(std::io::Error::other(format!(
            "{shown}: {written} bytes where {size} were expected (it changed while being copied)"
        )));
    }
    Ok(())
}
