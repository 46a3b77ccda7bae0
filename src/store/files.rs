//! Small whole files of the store's top directory (`VERSION`, `.gitignore`): read at once,
//! written new, or replaced atomically. Used when a store is opened or migrated.

use crate::sys::{self, Errno};
use crate::tree::{Durability, TempFile};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd};

/// The first 4 KiB of `name` in `dir` (all of a small file), without following a symlink.
pub(super) fn read_small(dir: BorrowedFd<'_>, name: &CStr) -> Result<Vec<u8>, Errno> {
    let fd = sys::openat(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
    let mut buf = vec![0u8; 4096];
    let n = sys::pread(fd.as_fd(), &mut buf, 0)?;
    buf.truncate(n);
    Ok(buf)
}

/// Replaces a small file atomically: a synced temp file renamed over it, then the directory
/// synced, so a crash leaves the old content or the new, never a mix or nothing.
pub(super) fn replace_small(dir: BorrowedFd<'_>, name: &CStr, bytes: &[u8]) -> Result<(), Errno> {
    let tmp = CString::new(format!(
        ".tmp-{}-{}",
        std::process::id(),
        name.to_string_lossy()
    ))
    .map_err(|_| Errno(libc::EINVAL))?;
    // A leftover of a crashed process that had the same pid (the name is ours alone).
    let _ = sys::unlinkat(dir, &tmp, 0);
    let file = TempFile::create(dir, tmp)?;
    sys::write_all(file.fd(), bytes, 0)?;
    file.persist(dir, name, Durability::Synced, "store-small-before-rename")
}

/// Writes `bytes` to `name` in `dir`, created (mode 0600) or truncated, never through a
/// symlink.
pub(super) fn write_new(dir: BorrowedFd<'_>, name: &CStr, bytes: &[u8]) -> Result<(), Errno> {
    let fd = sys::openat(
        dir,
        name,
        libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_NOFOLLOW,
        0o600,
    )?;
    sys::write_all(fd.as_fd(), bytes, 0)
}
