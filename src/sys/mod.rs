//! Thin wrappers over the `*at` family of system calls: the only `unsafe` in the crate.
//!
//! Every call is relative to a descriptor the caller holds and never follows a symlink in the
//! final component unless the name says so. Errors keep the kernel's errno exactly.
//!
//! The crate denies `unsafe_code` (`src/lib.rs`); the `allow` below is the one exemption, and as
//! a lint level it covers every submodule. Each `unsafe` block carries a `// SAFETY:` comment
//! (`clippy::undocumented_unsafe_blocks` is denied in `Cargo.toml`).
//!
//! This file holds what every wrapper shares: [`Errno`], [`SysResult`], the return-value checks
//! and [`cstr`]. The wrappers live in one file per kind and are re-exported here, so callers
//! name them `sys::openat`, never `sys::fd::openat`:
//!
//! | file | holds |
//! |---|---|
//! | `fd.rs` | opening descriptors and acting on names in a directory: `openat`, `openat2`, file handles, `stat`, create, link, rename, unlink, owner, mode, times |
//! | `io.rs` | data through an open descriptor: `pread`/`pwrite` and their loops, `fsync`, `fallocate`, `lseek`, `copy_file_range`, `ftruncate`, `flock`, `pipe` |
//! | `xattr.rs` | extended attributes, by `O_PATH` descriptor or by open one |
//! | `dirent.rs` | directory listings through `getdents64` |
//! | `process.rs` | the process and its threads: umask, dumpability, sessions, signals, a uid's login name, `dup2`, socket peer credentials, descriptors passed to or from helpers, priority, mount and unmount |
//! | `term.rs` | what the reader of the CLI's output set up: the terminal's width, the local time zone |
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

// `io` below is the submodule; the standard library's is written out as `std::io`.
mod dirent;
mod fd;
mod io;
mod process;
mod term;
mod xattr;

pub use dirent::{DirEntry, read_dir_all, read_dir_chunk};
pub use fd::{
    access_fd, birth_time_at, fchmod_any, fchown, file_handle_at, fstat, fstatvfs, futimens_any,
    keep_atime, linkat, lstatat, mkdirat, mknodat, open_beneath, open_by_handle, open_path, openat,
    openat_noatime, openat_noatime_as, proc_fd_path, readlinkat, renameat2, reopen, status_flags,
    symlinkat, unlinkat, utimensat, without_atime,
};
pub use io::{
    copy_file_range, fallocate, flock_try, fsync, ftruncate, lseek, pipe, pread, pwrite, read_file,
    read_full, read_if_at_most, read_to_end, write, write_all,
};
pub use process::{
    block_sigint, children_of_self, default_sigchld, default_sigpipe, detach_with_fd, getegid,
    geteuid, inherit_fd, kill_self, lower_thread_priority, make_undumpable, map_large_allocations,
    mount, own_fd, peer_cred, pidfd_exited, pidfd_open_thread, process_alive, raise_nofile_limit,
    reap_ended_children, recv_fd, set_child_subreaper, set_umask, umount, unblock_sigint,
    unshare_fs, user_name, wait_any_child, wait_for_sigint,
};
pub use term::{local_time, terminal_columns};
pub use xattr::{
    fgetxattr, flistxattr, fremovexattr, fsetxattr, getxattr, listxattr, removexattr, setxattr,
};

/// An errno value as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The errno left by the last failed libc call on this thread.
    pub fn last() -> Self {
        Self(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

/// The errno a caller of the mount (or of a control file) sees for an error. Implemented for
/// every error type of the crate in one place, `src/errno.rs`, with the judgement calls
/// explained there; the trait lives here, at the bottom of the layers, so that any module can
/// ask for an errno without depending on the modules whose errors it maps.
pub trait ToErrno {
    /// The errno to answer with.
    fn to_errno(&self) -> Errno;
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Self {
        // Non-OS errors (rare: serde, utf-8) have no errno; EIO is the honest answer.
        Self(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

/// Result of a system call wrapper.
pub type SysResult<T> = Result<T, Errno>;

fn check(ret: libc::c_int) -> SysResult<libc::c_int> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

fn check_size(ret: libc::ssize_t) -> SysResult<usize> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as usize)
    }
}

/// Converts a name or relative path to a C string; an embedded NUL is `EINVAL`.
pub fn cstr(name: &OsStr) -> SysResult<CString> {
    CString::new(name.as_bytes()).map_err(|_| Errno(libc::EINVAL))
}
