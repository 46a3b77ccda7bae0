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

use crate::sys::{self, SysResult};
use serde::{Deserialize, Serialize};
use std::ffi::CStr;
use std::os::fd::BorrowedFd;

/// A file handle as `name_to_handle_at(2)` gives it (handle type, then the handle's bytes),
/// in hex: on ext4, xfs, btrfs and tmpfs it holds the inode's generation, which changes when
/// the inode number is handed to a new file.
///
/// Held inline up to 16 bytes (ext4's and tmpfs's take 12, xfs's 12 or 16): every capture,
/// and every renewal twice, carries one, and a heap block each would cost 32 bytes more.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Handle(pub smallvec::SmallVec<[u8; 16]>);

impl Handle {
    /// The handle whose bytes (type first) are `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(smallvec::SmallVec::from_slice(bytes))
    }
}

impl Serialize for Handle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::relpath::hex(&self.0))
    }
}

impl<'de> Deserialize<'de> for Handle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = String::deserialize(d)?;
        crate::relpath::unhex(&t)
            .map(|b| Self::from_bytes(&b))
            .ok_or_else(|| serde::de::Error::custom("bad hex handle"))
    }
}

/// What identifies one inode across time on one filesystem.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileId {
    /// Inode number.
    pub ino: u64,
    /// File handle, where the filesystem gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fh: Option<Handle>,
    /// Birth time in nanoseconds, recorded only where there is no handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub btime: Option<i64>,
}

/// A rewind (or undo) that gave a path back its recorded state as a fresh file: records that
/// name the inode `was` (other names of the same hard-link group, captured in turns the rewind
/// left in the index or brought back) now mean the inode `now`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renewal {
    /// The identity the records carry.
    pub was: FileId,
    /// The file that now stands for it.
    pub now: FileId,
}

/// Whether an inode still has a name, as far as its handle can tell ([`FileId::standing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Proven to have no name left.
    Gone,
    /// Proven to have a name somewhere on the filesystem.
    Named,
    /// The handle cannot tell: no handle recorded, or opening by handle is not permitted.
    Unknown,
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
                fh: Some(Handle::from_bytes(&h)),
                btime: None,
            },
            Err(_) => FileId {
                ino,
                fh: None,
                btime: sys::birth_time_at(dir, name, flags),
            },
        }
    }

    /// Whether the inode this identity names still has a name on the filesystem of
    /// `mount_fd`, as its handle tells: [`Standing::Gone`] when the handle no longer opens
    /// (`ESTALE`) or opens an inode with no links (freed, or only held open). Without a
    /// handle, or where `open_by_handle_at` is refused (it needs `CAP_DAC_READ_SEARCH`, which
    /// a normal user's daemon lacks), [`Standing::Unknown`]: the caller looks for a name.
    pub fn standing(&self, mount_fd: BorrowedFd<'_>) -> Standing {
        let Some(fh) = &self.fh else {
            return Standing::Unknown;
        };
        // `open_by_handle_at` refuses an `O_PATH` descriptor as its mount descriptor.
        let Ok(mount) = sys::reopen(mount_fd, libc::O_RDONLY | libc::O_DIRECTORY) else {
            return Standing::Unknown;
        };
        match sys::open_by_handle(std::os::fd::AsFd::as_fd(&mount), &fh.0, libc::O_PATH) {
            Err(sys::Errno(libc::ESTALE)) => Standing::Gone,
            Err(_) => Standing::Unknown,
            Ok(fd) => match sys::fstat(std::os::fd::AsFd::as_fd(&fd)) {
                Ok(st) if st.st_nlink == 0 => Standing::Gone,
                Ok(_) => Standing::Named,
                Err(_) => Standing::Unknown,
            },
        }
    }

    /// A 64-bit digest of a proven identity (number and handle, or number and birth time),
    /// `None` where nothing beyond the number was read. For what must only tell whether a
    /// node still denotes the file it did, cheaply per node: two files told apart by their
    /// handles share a digest with a chance of 2^-64.
    pub fn fingerprint(&self) -> Option<std::num::NonZeroU64> {
        use std::hash::{Hash, Hasher};
        if self.fh.is_none() && self.btime.is_none() {
            return None;
        }
        // SipHash with fixed keys: the same identity gives the same digest for the daemon's
        // whole life, which is all a digest held in memory needs.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        std::num::NonZeroU64::new(h.finish()).or(std::num::NonZeroU64::new(1))
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
            fh: fh.map(Handle::from_bytes),
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
    fn fingerprints_tell_proven_identities_apart_and_unproven_ones_have_none() {
        let a = id(7, Some(b"gen1"), None);
        assert_eq!(a.fingerprint(), a.clone().fingerprint(), "stable");
        assert_ne!(a.fingerprint(), id(7, Some(b"gen2"), None).fingerprint());
        assert_ne!(a.fingerprint(), id(8, Some(b"gen1"), None).fingerprint());
        assert_ne!(
            id(7, None, Some(5)).fingerprint(),
            id(7, None, Some(6)).fingerprint()
        );
        assert!(a.fingerprint().is_some());
        assert_eq!(
            id(7, None, None).fingerprint(),
            None,
            "a number proves nothing"
        );
    }

    #[test]
    fn a_removed_file_is_gone_and_a_linked_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = sys::open_path(
            &std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).expect("path"),
            libc::O_PATH | libc::O_DIRECTORY,
        )
        .expect("open O_PATH, as the daemon holds its root");
        std::fs::write(dir.path().join("f"), b"x").expect("write");
        std::fs::hard_link(dir.path().join("f"), dir.path().join("g")).expect("link");
        let id = FileId::of_name(root.as_fd(), c"f").expect("identity");
        if sys::geteuid() != 0 {
            assert_eq!(id.standing(root.as_fd()), Standing::Unknown, "no root");
            return;
        }
        std::fs::remove_file(dir.path().join("f")).expect("rm");
        assert_eq!(id.standing(root.as_fd()), Standing::Named, "still g");
        std::fs::remove_file(dir.path().join("g")).expect("rm");
        assert_eq!(id.standing(root.as_fd()), Standing::Gone, "no name left");
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
