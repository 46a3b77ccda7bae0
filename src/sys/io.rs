//! Data through an open descriptor: positioned reads and writes and the loops over them
//! (`read_full`, `write_all`, `read_to_end`), `fsync`, `fallocate`, `lseek`,
//! `copy_file_range`, `ftruncate`, `flock`, and `pipe`.
//!
//! Apart from `read_file` (which opens its file with `fd.rs`'s `openat`), nothing here takes a
//! name: the caller already holds the descriptor, opened and checked with `fd.rs`.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::fd::openat;
use super::{Errno, SysResult, check, check_size};

/// `ftruncate(2)`.
pub fn ftruncate(fd: BorrowedFd<'_>, size: u64) -> SysResult<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) }).map(drop)
}

/// `pread(2)`.
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> SysResult<usize> {
    // SAFETY: `buf` is writable for its length.
    check_size(unsafe {
        libc::pread(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            off as libc::off_t,
        )
    })
}

/// `pwrite(2)`.
pub fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], off: u64) -> SysResult<usize> {
    // SAFETY: `buf` is readable for its length.
    check_size(unsafe {
        libc::pwrite(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            off as libc::off_t,
        )
    })
}

/// The whole file open as `fd`, read from offset 0, when it holds at most `size` bytes (what
/// `fstat` just said, or a bound): read into a buffer one byte larger, where one `pread` that
/// falls short of it is the common case (the end reached: a second call would only confirm
/// it). `None` when the file holds more than `size` bytes (it grew since it was sized), so
/// that the caller reads it its general way.
pub fn read_if_at_most(fd: BorrowedFd<'_>, size: usize) -> SysResult<Option<Vec<u8>>> {
    let mut buf = vec![0u8; size + 1];
    let n = match pread(fd, &mut buf, 0) {
        Ok(n) if n == size => n,
        Ok(_) | Err(super::Errno(libc::EINTR)) => read_full(fd, &mut buf, 0)?,
        Err(e) => return Err(e),
    };
    if n > size {
        return Ok(None);
    }
    buf.truncate(n);
    Ok(Some(buf))
}

/// Reads until `buf` is full or end of file.
pub fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> SysResult<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = match pread(fd, &mut buf[got..], off + got as u64) {
            Ok(n) => n,
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// Writes all of `buf` at `off`.
pub fn write_all(fd: BorrowedFd<'_>, buf: &[u8], off: u64) -> SysResult<()> {
    let mut done = 0;
    while done < buf.len() {
        match pwrite(fd, &buf[done..], off + done as u64) {
            Ok(0) => return Err(Errno(libc::EIO)),
            Ok(n) => done += n,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads a whole file from offset 0 through `fd`.
pub fn read_to_end(fd: BorrowedFd<'_>) -> SysResult<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = pread(fd, &mut buf, out.len() as u64)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Reads the whole file `name` in `dir` (never through a symlink).
pub fn read_file(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<Vec<u8>> {
    use std::os::fd::AsFd;
    let fd = openat(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
    read_to_end(fd.as_fd())
}

/// `write(2)` at the descriptor's offset (used with `O_APPEND`).
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> SysResult<usize> {
    // SAFETY: `buf` is readable for its length.
    check_size(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// `fsync(2)` or `fdatasync(2)`.
pub fn fsync(fd: BorrowedFd<'_>, datasync: bool) -> SysResult<()> {
    // SAFETY: plain syscall.
    check(unsafe {
        if datasync {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    })
    .map(drop)
}

/// `fallocate(2)`.
pub fn fallocate(fd: BorrowedFd<'_>, mode: i32, off: u64, len: u64) -> SysResult<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) })
        .map(drop)
}

/// `lseek(2)`.
pub fn lseek(fd: BorrowedFd<'_>, off: i64, whence: i32) -> SysResult<i64> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, whence) };
    if r < 0 { Err(Errno::last()) } else { Ok(r) }
}

/// `copy_file_range(2)` between two descriptors at explicit offsets.
pub fn copy_file_range(
    fd_in: BorrowedFd<'_>,
    off_in: u64,
    fd_out: BorrowedFd<'_>,
    off_out: u64,
    len: u64,
) -> SysResult<usize> {
    let mut oi = off_in as libc::loff_t;
    let mut oo = off_out as libc::loff_t;
    // SAFETY: offsets are valid pointers to loff_t for the duration of the call.
    check_size(unsafe {
        libc::copy_file_range(
            fd_in.as_raw_fd(),
            &mut oi,
            fd_out.as_raw_fd(),
            &mut oo,
            len as usize,
            0,
        )
    })
}

/// `flock(2)`, non-blocking.
pub fn flock_try(fd: BorrowedFd<'_>, exclusive: bool) -> SysResult<()> {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    } | libc::LOCK_NB;
    // SAFETY: plain syscall.
    check(unsafe { libc::flock(fd.as_raw_fd(), op) }).map(drop)
}
/// Creates a pipe whose ends are close-on-exec.
pub fn pipe() -> SysResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: the kernel just returned both descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
