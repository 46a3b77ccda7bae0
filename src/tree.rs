//! Persisting a file beneath a directory the daemon holds: the one rule every writer of a
//! whole file follows (the store's small files, loose blobs, a rewind's installs).
//!
//! 1. Write a temp file next to where it goes (created `O_EXCL`, mode 0600, never through a
//!    symlink), named with a prefix its owner sweeps at open, so one left by a crash is found.
//! 2. When durability is asked, `fsync` it, so the rename never publishes a name whose bytes a
//!    crash could still lose.
//! 3. `rename` it over its final name: a reader sees the old file or the whole new one, never
//!    a part.
//! 4. When durability is asked, `fsync` the directory, so the rename itself survives a crash.
//!
//! A temp file that is not persisted is removed: on an error of any step, and when the
//! [`TempFile`] is dropped unpersisted (an early return, a panic). This is jj's
//! `persist_temp_file` and `tempfile`'s `NamedTempFile::persist`, on descriptors instead of
//! paths (a path could lead back into the mount).

use crate::sys::{self, SysResult};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Whether a persist syncs the file and its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fsync` the file before the rename and the directory after it.
    Synced,
    /// Leave both to the kernel's writeback (a crash may lose the newest files, never expose
    /// a partial one).
    Lazy,
}

impl Durability {
    /// `Synced` when `durable`.
    pub fn from_flag(durable: bool) -> Self {
        if durable { Self::Synced } else { Self::Lazy }
    }
}

/// A temp file being written in `dir`, removed unless [`Self::persist`] succeeds.
#[must_use = "a temp file not persisted is removed when dropped"]
pub struct TempFile<'d> {
    dir: BorrowedFd<'d>,
    name: CString,
    fd: OwnedFd,
    persisted: bool,
}

impl<'d> TempFile<'d> {
    /// Creates `name` in `dir` for writing (`O_EXCL`, 0600, not through a symlink).
    pub fn create(dir: BorrowedFd<'d>, name: CString) -> SysResult<Self> {
        let fd = sys::openat(
            dir,
            &name,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
            0o600,
        )?;
        Ok(Self {
            dir,
            name,
            fd,
            persisted: false,
        })
    }

    /// The descriptor to write the content through.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Steps 2–4 of the rule: moves the finished temp file over `to_name` in `to_dir`. The
    /// failpoint `crash_point` (test builds) is hit between the sync and the rename.
    pub fn persist(
        mut self,
        to_dir: BorrowedFd<'_>,
        to_name: &CStr,
        durability: Durability,
        crash_point: &'static str,
    ) -> SysResult<()> {
        if durability == Durability::Synced {
            sys::fsync(self.fd.as_fd(), true)?;
        }
        let renamed = rename_into_place(
            self.dir,
            &self.name,
            to_dir,
            to_name,
            durability,
            crash_point,
        );
        // Renamed, or removed by `rename_into_place` when the rename failed: nothing of the
        // temp name is left to remove either way.
        self.persisted = true;
        renamed
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = sys::unlinkat(self.dir, &self.name, 0);
        }
    }
}

/// Steps 3–4 of the rule for a finished temp entry of any type (a rewind's temp symlink or
/// FIFO as well as a file): renames `tmp` in `dir` over `to_name` in `to_dir` and, when asked,
/// syncs `to_dir`. On a failed rename the temp entry is removed.
pub fn rename_into_place(
    dir: BorrowedFd<'_>,
    tmp: &CStr,
    to_dir: BorrowedFd<'_>,
    to_name: &CStr,
    durability: Durability,
    crash_point: &'static str,
) -> SysResult<()> {
    crate::failpoint::hit(crash_point);
    if let Err(e) = sys::renameat2(dir, tmp, to_dir, to_name, 0) {
        let _ = sys::unlinkat(dir, tmp, 0);
        return Err(e);
    }
    if durability == Durability::Synced {
        sync_dir(to_dir)?;
    }
    Ok(())
}

/// `fsync` of a directory held by any descriptor (an `O_PATH` one is reopened for it).
pub fn sync_dir(dir: BorrowedFd<'_>) -> SysResult<()> {
    let d = sys::reopen(dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
    sys::fsync(d.as_fd(), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn dir() -> (tempfile::TempDir, OwnedFd) {
        let t = tempfile::tempdir().expect("tempdir");
        let c = CString::new(t.path().as_os_str().as_encoded_bytes()).expect("path");
        let fd = sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY).expect("open dir");
        (t, fd)
    }

    #[test]
    fn a_persisted_temp_file_replaces_the_old_one_whole() {
        let (t, d) = dir();
        std::fs::write(t.path().join("f"), b"old").expect("old");
        let tmp = TempFile::create(d.as_fd(), c".tmp-1".into()).expect("create");
        sys::write_all(tmp.fd(), b"new bytes", 0).expect("write");
        tmp.persist(d.as_fd(), c"f", Durability::Synced, "test")
            .expect("persist");
        assert_eq!(
            std::fs::read(t.path().join("f")).expect("read"),
            b"new bytes"
        );
        assert!(!t.path().join(".tmp-1").exists());
    }

    #[test]
    fn a_temp_file_dropped_or_failing_to_persist_is_removed() {
        let (t, d) = dir();
        {
            let tmp = TempFile::create(d.as_fd(), c".tmp-2".into()).expect("create");
            sys::write_all(tmp.fd(), b"x", 0).expect("write");
            assert!(t.path().join(".tmp-2").exists());
        }
        assert!(!t.path().join(".tmp-2").exists(), "dropped unpersisted");
        std::fs::create_dir(t.path().join("full")).expect("dir");
        std::fs::write(t.path().join("full/x"), b"").expect("x");
        let tmp = TempFile::create(d.as_fd(), c".tmp-3".into()).expect("create");
        // A file cannot be renamed over a non-empty directory.
        assert!(
            tmp.persist(d.as_fd(), c"full", Durability::Lazy, "test")
                .is_err()
        );
        assert!(
            !t.path().join(".tmp-3").exists(),
            "removed after a failed rename"
        );
        assert!(t.path().join("full/x").exists());
    }

    #[test]
    fn create_refuses_an_existing_name_and_symlinks() {
        let (t, d) = dir();
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(".tmp-4")).expect("symlink");
        assert!(TempFile::create(d.as_fd(), c".tmp-4".into()).is_err());
        assert_eq!(
            std::fs::read_link(t.path().join(".tmp-4")).expect("link"),
            std::path::Path::new("/etc/passwd")
        );
    }
}
