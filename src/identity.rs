//! "Is this the same file?" — the one rule, used by every decision that acts on a file because
//! it is the one a record describes (in-place restores, hard-link groups, anchors of a group
//! outside a rewind's plan, staged and recovered captures).
//!
//! An inode number alone proves nothing: ext4 hands a freed number to the next new file at
//! once, so a file created a moment ago can carry the number of one the journal recorded. The
//! identity is the number plus the inode's file handle (`name_to_handle_at`), which on ext4,
//! xfs, btrfs and tmpfs carries the inode's generation, drawn anew when a number is reused;
//! where the filesystem gives no handles, the birth time (`statx`) stands in. Two identities
//! are the same file only when the numbers agree and a handle (or, without handles on both
//! sides, a birth time) was recorded on both sides and agrees. Anything less is
//! [`Same::Unproven`], and callers take the safe path: a fresh file at the path, never a
//! write into an existing inode.

use crate::store::journal::Handle;
use crate::sys::{self, SysResult};
use std::ffi::CStr;
use std::os::fd::BorrowedFd;

/// What identifies one inode across time on one filesystem.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Inode number.
    pub ino: u64,
    /// File handle, where the filesystem gives one.
    pub fh: Option<Handle>,
    /// Birth time in nanoseconds, recorded only where there is no handle.
    pub btime: Option<i64>,
}

/// The answer to "is this the same file?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Same {
    /// Proven the same inode.
    Yes,
    /// Proven another inode.
    No,
    /// Cannot tell (a record without a handle or birth time, from store version 1).
    Unproven,
}

impl FileId {
    /// Compares a recorded identity with one read now.
    pub fn same_as(&self, now: &FileId) -> Same {
        if self.ino != now.ino {
            return Same::No;
        }
        match (&self.fh, &now.fh) {
            (Some(a), Some(b)) => return if a == b { Same::Yes } else { Same::No },
            (Some(_), None) | (None, Some(_)) => return Same::Unproven,
            (None, None) => {}
        }
        match (self.btime, now.btime) {
            (Some(a), Some(b)) if a == b => Same::Yes,
            (Some(_), Some(_)) => Same::No,
            _ => Same::Unproven,
        }
    }

    /// Whether `now` is proven to be this inode.
    pub fn is(&self, now: &FileId) -> bool {
        self.same_as(now) == Same::Yes
    }

    /// The identity of `name` in `dir` (an empty name with `AT_EMPTY_PATH` names `dir`), whose
    /// `lstat` gave `ino`; never follows a final symlink.
    pub fn read_at(dir: BorrowedFd<'_>, name: &CStr, flags: i32, ino: u64) -> FileId {
        match sys::file_handle_at(dir, name, flags) {
            Ok(h) => FileId {
                ino,
                fh: Some(Handle(h)),
                btime: None,
            },
            Err(_) => FileId {
                ino,
                fh: None,
                btime: sys::birth_time_at(dir, name, flags),
            },
        }
    }

    /// The identity of the inode behind `fd` (any descriptor, `O_PATH` included).
    pub fn of_fd(fd: BorrowedFd<'_>, ino: u64) -> FileId {
        Self::read_at(fd, c"", libc::AT_EMPTY_PATH, ino)
    }

    /// The identity of `name` in `dir` as it is now (after an `lstat`).
    pub fn of_name(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<FileId> {
        let st = sys::lstatat(dir, name)?;
        Ok(Self::read_at(dir, name, 0, st.st_ino))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn id(ino: u64, fh: Option<&[u8]>, btime: Option<i64>) -> FileId {
        FileId {
            ino,
            fh: fh.map(|h| Handle(h.to_vec())),
            btime,
        }
    }

    #[test]
    fn a_number_alone_proves_nothing() {
        assert_eq!(
            id(7, None, None).same_as(&id(7, Some(b"x"), None)),
            Same::Unproven
        );
        assert_eq!(
            id(7, None, None).same_as(&id(7, None, None)),
            Same::Unproven
        );
        assert_eq!(id(7, None, None).same_as(&id(8, None, None)), Same::No);
    }

    #[test]
    fn handles_decide_and_birth_times_stand_in_without_them() {
        assert_eq!(
            id(7, Some(b"a"), None).same_as(&id(7, Some(b"a"), None)),
            Same::Yes
        );
        assert_eq!(
            id(7, Some(b"a"), None).same_as(&id(7, Some(b"b"), None)),
            Same::No
        );
        assert_eq!(
            id(7, None, Some(5)).same_as(&id(7, None, Some(5))),
            Same::Yes
        );
        assert_eq!(
            id(7, None, Some(5)).same_as(&id(7, None, Some(6))),
            Same::No
        );
    }

    #[test]
    fn a_recycled_inode_number_is_another_file() {
        // ext4 hands a freed number out again at once; the handle tells the two apart.
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut seen = None;
        for round in 0..64 {
            let p = dir.path().join(format!("f{round}"));
            std::fs::write(&p, b"x").expect("write");
            let name = std::ffi::CString::new(format!("f{round}")).expect("name");
            let now = FileId::of_name(root.as_fd(), &name).expect("identity");
            assert!(now.is(&now.clone()), "an identity is itself");
            std::fs::remove_file(&p).expect("rm");
            if let Some(old) = seen.replace(now.clone())
                && old.ino == now.ino
            {
                assert_ne!(
                    old.same_as(&now),
                    Same::Yes,
                    "a reused number is another file"
                );
                return;
            }
        }
        // The filesystem under /tmp did not reuse a number in 64 rounds: nothing to check.
    }
}
