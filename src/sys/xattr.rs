//! Extended attributes of one inode, in two sets of calls: `getxattr` and friends take an
//! `O_PATH` descriptor and go through its `/proc/self/fd` entry (the `f*` calls refuse `O_PATH`
//! descriptors); `fgetxattr` and friends take a descriptor opened for I/O and walk no path.
//!
//! What the attributes mean for a capture or a rewind is `src/xattrs.rs`'s business; this file
//! only makes the calls.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd};

use super::fd::proc_fd_path;
use super::{SysResult, check, check_size};

/// Calls `f` on the extended attribute call's result for the inode behind an `O_PATH` fd.
fn xattr_path(fd: BorrowedFd<'_>) -> CString {
    proc_fd_path(fd)
}

/// `getxattr(2)`: with an empty `buf`, returns the size only.
pub fn getxattr(fd: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> SysResult<usize> {
    let p = xattr_path(fd);
    // SAFETY: `buf` is writable for its length (0 allowed with a null-safe pointer).
    check_size(unsafe {
        libc::getxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}

/// `listxattr(2)`.
pub fn listxattr(fd: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<usize> {
    let p = xattr_path(fd);
    // SAFETY: `buf` is writable for its length.
    check_size(unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// `setxattr(2)`.
pub fn setxattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8], flags: i32) -> SysResult<()> {
    let p = xattr_path(fd);
    // SAFETY: `value` is readable for its length.
    check(unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
    .map(drop)
}

/// `removexattr(2)`.
pub fn removexattr(fd: BorrowedFd<'_>, name: &CStr) -> SysResult<()> {
    let p = xattr_path(fd);
    // SAFETY: plain syscall on valid strings.
    check(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) }).map(drop)
}

/// `fgetxattr(2)`, for a descriptor opened for I/O (the calls above take `O_PATH` ones, which
/// `fgetxattr` refuses): no path walk through `/proc`. With an empty `buf`, the size only.
pub fn fgetxattr(fd: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: `buf` is writable for its length (0 allowed with a null-safe pointer).
    check_size(unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}

/// `flistxattr(2)`, as [`fgetxattr`].
pub fn flistxattr(fd: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: `buf` is writable for its length.
    check_size(unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// `fsetxattr(2)`, as [`fgetxattr`].
pub fn fsetxattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8], flags: i32) -> SysResult<()> {
    // SAFETY: `value` is readable for its length.
    check(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
    .map(drop)
}

/// `fremovexattr(2)`, as [`fgetxattr`].
pub fn fremovexattr(fd: BorrowedFd<'_>, name: &CStr) -> SysResult<()> {
    // SAFETY: plain syscall on a valid string.
    check(unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) }).map(drop)
}
