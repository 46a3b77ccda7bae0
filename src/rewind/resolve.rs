//! How every stage reaches a path of the plan: the directory holding it, opened beneath the
//! folder's root without following any symlink, and the reason a failed open gives in the
//! report. Kept in one place because saving, applying and the hard-link search all need the
//! same refusal of a symlinked parent.
//!
//! I/O: opens (`O_PATH`) directories of the folder; it changes nothing.

use super::step::{Cause, Op, ParentError, StepError};
use crate::relpath::RelPath;
use crate::sys::{self, Errno};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The directory holding `path`, resolved beneath `root` without following any symlink.
pub(super) fn open_parent_raw(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, Errno> {
    path.open_parent(root, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
}

/// What stands at `path` now (`lstat`, reached without following a symlink), if anything can
/// be reached there.
pub(super) fn lstat_path(root: BorrowedFd<'_>, path: &RelPath) -> Option<libc::stat> {
    let parent = open_parent_raw(root, path).ok()?;
    sys::lstatat(parent.as_fd(), &cname(path)).ok()
}

/// [`open_parent_raw`], failing with the reason a report gives: a parent that is a symlink
/// (or lies beyond one) is refused, never followed.
pub(super) fn open_parent(root: BorrowedFd<'_>, path: &RelPath) -> Result<OwnedFd, StepError> {
    open_parent_raw(root, path).map_err(|e| refusal(root, path, e))
}

/// Why the directory holding `path` could not be opened (`e`), as a report gives it.
fn refusal(root: BorrowedFd<'_>, path: &RelPath, e: Errno) -> StepError {
    let why = match e.0 {
        libc::ELOOP | libc::EXDEV => ParentError::Symlink,
        // The parent itself is a symlink (opened as the link, which is not a directory).
        libc::ENOTDIR
            if path.parent().is_some_and(|p| {
                sys::open_beneath(root, &p.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                    .and_then(|fd| sys::fstat(fd.as_fd()))
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
            }) =>
        {
            ParentError::Symlink
        }
        libc::ENOTDIR => ParentError::NotDir,
        libc::ENOENT => ParentError::Missing,
        _ => ParentError::Other(e),
    };
    StepError::new(Op::OpenParent, Cause::Parent(why)).on(path)
}

/// The directory holding each path of a walk over the plan, kept open from one path to the
/// next: the plan's paths are sorted, so runs of them share a directory, and resolving it
/// again for every path (an `openat2` beneath the root and a `close`, once per stage) was a
/// tenth of a large rewind's system calls (docs/BENCHMARKS.md). A stage that changes the
/// folder calls [`Parents::changed`] after each step, so a directory a step replaced or
/// removed is never reached through the descriptor of what stood there before.
pub(super) struct Parents<'r> {
    root: BorrowedFd<'r>,
    /// The directory last opened, and its path (`None`: the root).
    last: Option<(Option<RelPath>, OwnedFd)>,
}

impl<'r> Parents<'r> {
    pub(super) fn new(root: BorrowedFd<'r>) -> Self {
        Self { root, last: None }
    }

    /// The folder's root.
    pub(super) fn root(&self) -> BorrowedFd<'r> {
        self.root
    }

    /// [`open_parent_raw`], reusing the directory last opened when it is `path`'s.
    pub(super) fn raw(&mut self, path: &RelPath) -> Result<BorrowedFd<'_>, Errno> {
        let parent = path.parent();
        let dir = match self.last.take() {
            Some((p, fd)) if p == parent => (p, fd),
            _ => (parent, open_parent_raw(self.root, path)?),
        };
        Ok(self.last.insert(dir).1.as_fd())
    }

    /// [`open_parent`], reusing the directory last opened when it is `path`'s.
    pub(super) fn open(&mut self, path: &RelPath) -> Result<BorrowedFd<'_>, StepError> {
        let root = self.root;
        self.raw(path).map_err(|e| refusal(root, path, e))
    }

    /// A step changed what stands at `path`: a directory kept open at or below it may be gone
    /// or replaced, and is let go.
    pub(super) fn changed(&mut self, path: &RelPath) {
        if let Some((Some(dir), _)) = &self.last
            && dir.starts_with(path)
        {
            self.last = None;
        }
    }
}

/// The last component of `path`, as the name `*at` calls take beside [`open_parent`]'s
/// descriptor.
pub(super) fn cname(path: &RelPath) -> CString {
    path.file_name_cstring()
}
