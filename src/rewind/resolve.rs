//! How every stage reaches a path of the plan: the directory holding it, opened beneath the
//! folder's root without following any symlink, and the reason a failed open gives in the
//! report. Kept in one place because saving, applying and the hard-link search all need the
//! same refusal of a symlinked parent.
//!
//! I/O: opens (`O_PATH`) directories of the folder; it changes nothing.

use crate::relpath::RelPath;
use crate::sys::{self, Errno};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The directory holding `path`, resolved beneath `root` without following any symlink.
pub(super) fn open_parent_raw(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, Errno> {
    path.open_parent(root, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
}

/// [`open_parent_raw`], failing with the reason a report gives: a parent that is a symlink
/// (or lies beyond one) is refused, never followed.
pub(super) fn open_parent(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, String> {
    open_parent_raw(root, path).map_err(|e| match e.0 {
        libc::ELOOP | libc::EXDEV => "a parent directory is a symlink: refused".to_string(),
        // The parent itself is a symlink (opened as the link, which is not a directory).
        libc::ENOTDIR
            if path.parent().is_some_and(|p| {
                sys::open_beneath(root, &p.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                    .and_then(|fd| sys::fstat(fd.as_fd()))
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
            }) =>
        {
            "a parent directory is a symlink: refused".to_string()
        }
        libc::ENOTDIR => "a parent is not a directory".to_string(),
        libc::ENOENT => "its parent directory is missing".to_string(),
        _ => format!("cannot open its parent: {e}"),
    })
}

/// The last component of `path`, as the name `*at` calls take beside [`open_parent`]'s
/// descriptor.
pub(super) fn cname(path: &RelPath) -> CString {
    path.file_name_cstring()
}
