//! One path as it was when a turn began, for `cat` and `restore`: which version that is (a
//! pre-image in the store, or the folder as it is now when no turn since changed the path:
//! the rewind rule), and its bytes copied out as a stream, so a large file never sits whole in
//! memory. The daemon answers with it for a mounted folder, the CLI itself for an unmounted one.

use crate::ids::BlobId;
use crate::moment::Moment;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::blob::BlobStore;
use crate::store::journal::{LinkTarget, PreImage};
use crate::sys::{self, Errno, SysResult};
use crate::xattrs::{Via, Xattr};
use serde::{Deserialize, Serialize};
use std::fmt;
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
        /// Its extended attributes, sorted by name; `None` when they are not known (a capture
        /// recorded before journal version 3, or an answer from an older daemon).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        xattrs: Option<Vec<Xattr>>,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, its bytes as they are (in the JSON a string, or `{"hex": …}`).
        target: LinkTarget,
        /// Its extended attributes, as for a file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        xattrs: Option<Vec<Xattr>>,
    },
}

/// Why a path has no version to copy out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// The turn asked for is not in the index.
    NoSuchTurn(Moment),
    /// The journal could not be read (for a turn a rewind retired).
    Store(String),
    /// What the path was when `turn` began has no bytes to give.
    NoBytes {
        /// The path asked for.
        path: RelPath,
        /// The turn whose start was asked for.
        turn: Moment,
        /// Why.
        why: NoBytes,
    },
    /// A system call on what stands in the folder now failed.
    Io {
        /// The path asked for.
        path: RelPath,
        /// What was being done.
        doing: Reading,
        /// The errno.
        errno: Errno,
    },
}

/// Why the version of a path has no bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoBytes {
    /// The path did not exist.
    Absent,
    /// The path did not exist, and does not now (no turn since changed it).
    AbsentNow,
    /// It was a directory.
    Dir,
    /// It was a FIFO.
    Fifo,
    /// It was a socket or a device.
    Special,
    /// It was not captured, for this reason (over `--max-blob`, say).
    NotCaptured(String),
    /// Its capture is still being stored.
    Staged,
}

/// What [`VersionError::Io`] was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Opening the path beneath the folder's root.
    Open,
    /// `fstat` of it.
    Stat,
    /// Reading the symlink.
    Readlink,
    /// Reading its extended attributes.
    Xattrs,
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchTurn(turn) => write!(f, "turn {turn} does not exist"),
            Self::Store(e) => f.write_str(e),
            Self::NoBytes { path, turn, why } => {
                let when = format!("when turn {turn} began");
                match why {
                    NoBytes::Absent => write!(f, "{path} did not exist {when}"),
                    NoBytes::AbsentNow => {
                        write!(f, "{path} did not exist {when} (and does not now)")
                    }
                    NoBytes::Dir => {
                        write!(f, "{path} was a directory {when}; give a file inside it")
                    }
                    NoBytes::Fifo => write!(f, "{path} was a FIFO {when}: it has no bytes"),
                    NoBytes::Special => {
                        write!(f, "{path} was a special file {when}: it has no bytes")
                    }
                    NoBytes::NotCaptured(reason) => write!(
                        f,
                        "{path} was not captured {when} ({reason}), so its bytes are not in the store"
                    ),
                    NoBytes::Staged => write!(
                        f,
                        "{path}: its bytes from {when} are still being stored; try again"
                    ),
                }
            }
            // The operation stays out of the line, as it always has: the path and the errno
            // say enough to the person reading it.
            Self::Io { path, errno, .. } => write!(f, "{path}: {errno}"),
        }
    }
}

impl std::error::Error for VersionError {}

/// The one line an answer on the socket carries (`ipc::Response::fail`).
impl From<VersionError> for String {
    fn from(e: VersionError) -> Self {
        e.to_string()
    }
}

/// The version of `path` at the start of `turn` (the current turn when `None`), or why there
/// is none to copy out. A live turn's is the index's (the first capture of the path in it or a
/// later turn, as a rewind takes it); a retired turn's is the past the journal gives
/// (`crate::store::past`).
pub fn old_version(
    store: &Store,
    root: BorrowedFd<'_>,
    turn: Option<Moment>,
    rel: &RelPath,
) -> Result<OldVersion, VersionError> {
    let index = store.index();
    let turn = turn.unwrap_or_else(|| Moment::live(index.current_turn()));
    let recorded = match turn.rewound_by {
        None if !index.has_turn(turn.turn) => return Err(VersionError::NoSuchTurn(turn)),
        None => index
            .captures
            .iter()
            .find(|c| c.turn >= turn.turn && c.path == *rel)
            .map(|c| c.pre.clone()),
        Some(_) => {
            let (began, _) = index.span_of(turn).ok_or(VersionError::NoSuchTurn(turn))?;
            let past = store
                .past(began)
                .map_err(|e| VersionError::Store(e.to_string()))?;
            in_past(&past, index, root, rel)
        }
    };
    let no_bytes = |why| {
        Err(VersionError::NoBytes {
            path: rel.clone(),
            turn,
            why,
        })
    };
    match recorded {
        None => now(root, rel, turn),
        Some(PreImage::File {
            blob,
            size,
            mode,
            xattrs,
            ..
        }) => Ok(OldVersion::File {
            source: Source::Store(blob),
            size,
            mode,
            xattrs,
        }),
        Some(PreImage::Symlink { target, xattrs, .. }) => {
            Ok(OldVersion::Symlink { target, xattrs })
        }
        Some(PreImage::Absent) => no_bytes(NoBytes::Absent),
        Some(PreImage::Dir { .. }) => no_bytes(NoBytes::Dir),
        Some(PreImage::Fifo { .. }) => no_bytes(NoBytes::Fifo),
        Some(PreImage::Skipped { reason, .. }) => no_bytes(NoBytes::NotCaptured(reason)),
        Some(PreImage::Staged { .. }) => no_bytes(NoBytes::Staged),
    }
}

/// What `rel` was at the past's moment when something recorded it, or an ancestor hid it, or
/// another name of its hard-link group recorded the file it holds now; `None`: as it is now.
pub fn in_past(
    past: &crate::store::past::Past,
    index: &crate::store::index::Index,
    root: BorrowedFd<'_>,
    rel: &RelPath,
) -> Option<PreImage> {
    match in_past_or_now(past, index, root, rel) {
        Ok(Then::Recorded(pre)) => Some(pre),
        Ok(Then::AsNow(_)) | Err(_) => None,
    }
}

/// What [`in_past_or_now`] found.
pub enum Then {
    /// As a record says ([`in_past`]'s `Some`).
    Recorded(PreImage),
    /// As the folder has it now: its `lstat` (`None`: nothing there now).
    AsNow(Option<libc::stat>),
}

/// [`in_past`], with the folder's `lstat` of `rel` when nothing recorded it: what the hard-link
/// test had to stat anyway, so a caller that wants it (`crate::past_tree`, on every name a
/// tree of `.ckpt/turns/` shows) stats the path once, not twice.
pub fn in_past_or_now(
    past: &crate::store::past::Past,
    index: &crate::store::index::Index,
    root: BorrowedFd<'_>,
    rel: &RelPath,
) -> SysResult<Then> {
    if past.hidden_by_ancestor(rel) {
        return Ok(Then::Recorded(PreImage::Absent));
    }
    if let Some(pre) = past.recorded(rel) {
        return Ok(Then::Recorded(pre.clone()));
    }
    let fd = match sys::open_beneath(root, &rel.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(Then::AsNow(None)),
        Err(e) => return Err(e),
    };
    let st = sys::fstat(fd.as_fd())?;
    // Another name of a recorded hard-link group holds a file a recorded pre-image names
    // (its link count may have dropped since: the other name was removed).
    let renewed = !index.renewed.is_empty();
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR || !(renewed || past.may_be_recorded(st.st_ino)) {
        return Ok(Then::AsNow(Some(st)));
    }
    let id = crate::identity::FileId::of_fd(fd.as_fd(), st.st_ino);
    Ok(
        match past.of_identity(&id, &|recorded| index.current_identity(recorded)) {
            Some(pre) => Then::Recorded(pre.clone()),
            None => Then::AsNow(Some(st)),
        },
    )
}

/// The version of a path no turn since changed: what stands in the folder now.
fn now(root: BorrowedFd<'_>, rel: &RelPath, turn: Moment) -> Result<OldVersion, VersionError> {
    let io = |doing| {
        move |errno| VersionError::Io {
            path: rel.clone(),
            doing,
            errno,
        }
    };
    let no_bytes = |why| VersionError::NoBytes {
        path: rel.clone(),
        turn,
        why,
    };
    let fd = sys::open_beneath(root, &rel.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
        .map_err(|e| match e.0 {
            libc::ENOENT => no_bytes(NoBytes::AbsentNow),
            _ => io(Reading::Open)(e),
        })?;
    let st = sys::fstat(fd.as_fd()).map_err(io(Reading::Stat))?;
    // What stands in the folder now carries its attributes as they are now.
    let xattrs = || {
        crate::xattrs::read_all(Via::Path(fd.as_fd()))
            .map(Some)
            .map_err(io(Reading::Xattrs))
    };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Ok(OldVersion::File {
            source: Source::Folder,
            size: st.st_size as u64,
            mode: st.st_mode & 0o7777,
            xattrs: xattrs()?,
        }),
        libc::S_IFLNK => {
            // An `O_PATH | O_NOFOLLOW` descriptor of a symlink reads it with an empty name.
            let target = sys::readlinkat(fd.as_fd(), c"").map_err(io(Reading::Readlink))?;
            Ok(OldVersion::Symlink {
                target: LinkTarget(target),
                xattrs: xattrs()?,
            })
        }
        libc::S_IFDIR => Err(no_bytes(NoBytes::Dir)),
        _ => Err(no_bytes(NoBytes::Special)),
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
