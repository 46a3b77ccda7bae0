//! A normal user's rewind into directories a rewound turn made read-only. Root's daemon may
//! change any directory; a user's may change only what the user may: after `chmod 500 dir` in
//! a turn, removing or restoring anything in `dir` failed with `EACCES`, and the rewind was
//! left unfinished. The directories the plan works in that the user owns but cannot write or
//! search are opened up (owner `w` and `x` added) before the first step and given their modes
//! back after the last, before the plan's own directory modes are set; a directory the plan
//! restores gets the mode it had at the start of the turn from those.

use super::plan::Plan;
use crate::relpath::RelPath;
use crate::sys;
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Owner write and search permission: what changing and reaching entries needs.
const OWNER_WX: u32 = libc::S_IWUSR | libc::S_IXUSR;

/// Directories opened up for a rewind, each held by a descriptor (so its mode goes back to
/// the very inode it was taken from, wherever a step moved it) with the mode it had.
pub(super) struct Unlocked {
    dirs: Vec<(OwnedFd, u32, String)>,
}

impl Unlocked {
    /// Opens up the root and every directory above a step of `plan` that the daemon's user owns
    /// but lacks write or search permission on, shallowest first (a directory is reached
    /// through those above it). Root's daemon needs none of it.
    pub(super) fn open_up(root: BorrowedFd<'_>, plan: &Plan) -> Self {
        let mut unlocked = Self { dirs: Vec::new() };
        let euid = sys::geteuid();
        if euid == 0 {
            return unlocked;
        }
        let mut above: HashSet<RelPath> = HashSet::new();
        for step in plan.steps() {
            let mut cur = step.path.parent();
            while let Some(p) = cur {
                cur = p.parent();
                if !above.insert(p) {
                    break;
                }
            }
        }
        let mut dirs: Vec<RelPath> = above.into_iter().collect();
        dirs.sort_by_key(RelPath::depth);
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        if let Ok(fd) = sys::openat(root, c".", flags, 0) {
            unlocked.open_one(fd, euid, ".");
        }
        for d in dirs {
            if let Ok(fd) = sys::open_beneath(root, &d.to_cstring(), flags, 0) {
                unlocked.open_one(fd, euid, &d.to_string());
            }
        }
        unlocked
    }

    /// Adds owner write and search permission to the directory `fd` (at `path`) when its user
    /// is `euid` and lacks either.
    fn open_one(&mut self, fd: OwnedFd, euid: u32, path: &str) {
        let Ok(st) = sys::fstat(fd.as_fd()) else {
            return;
        };
        let mode = st.st_mode & 0o7777;
        if st.st_uid != euid || mode & OWNER_WX == OWNER_WX {
            return;
        }
        match sys::fchmod_any(fd.as_fd(), mode | OWNER_WX) {
            Ok(()) => {
                log::debug!(target: "ckpt::rewind", "{path}: mode {mode:o} opened up for the rewind");
                self.dirs.push((fd, mode, path.to_string()));
            }
            Err(e) => {
                log::warn!(target: "ckpt::rewind", "{path}: cannot open up mode {mode:o} for the rewind: {e}");
            }
        }
    }

    /// Gives every directory opened up its mode back, deepest first.
    pub(super) fn close(self) {
        for (fd, mode, path) in self.dirs.into_iter().rev() {
            if let Err(e) = sys::fchmod_any(fd.as_fd(), mode) {
                log::warn!(target: "ckpt::rewind", "{path}: cannot give back mode {mode:o}: {e}");
            }
        }
    }
}
