//! Thin wrappers over the `*at` family of system calls: the only `unsafe` in the crate.
//!
//! Every call is relative to a descriptor the caller holds and never follows a symlink in the
//! final component unless the name says so. Errors keep the kernel's errno exactly.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// An errno value as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The errno left by the last failed libc call on this thread.
    pub fn last() -> Self {
        Self(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

impl From<io::Error> for Errno {
    fn from(e: io::Error) -> Self {
        // Non-OS errors (rare: serde, utf-8) have no errno; EIO is the honest answer.
        Self(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<Errno> for io::Error {
    fn from(e: Errno) -> Self {
        io::Error::from_raw_os_error(e.0)
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

/// `openat(2)`; `O_CLOEXEC` is always added.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> SysResult<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string and `dir` a live descriptor.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    check(fd)?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat(2)` for reading what the daemon only inspects (a pre-image, a listing, a diff),
/// with `O_NOATIME`: a capture must leave no trace on the file it records (a `chmod` through
/// the mount would otherwise change its atime). `O_NOATIME` needs the file's owner or
/// `CAP_FOWNER`; without them this is a plain `openat`.
pub fn openat_noatime(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> SysResult<OwnedFd> {
    match openat(dir, name, flags | libc::O_NOATIME, 0) {
        Err(Errno(libc::EPERM)) => openat(dir, name, flags, 0),
        r => r,
    }
}

/// Runs `read` with `O_NOATIME` set on `fd`, then clears it again: for reading a pre-image
/// through a descriptor that was opened for the caller (whose own reads must keep updating
/// atime), before the descriptor is handed over. Where the flag cannot be set (not the
/// owner, no `CAP_FOWNER`), `read` runs all the same.
pub fn without_atime<T>(fd: BorrowedFd<'_>, read: impl FnOnce() -> T) -> T {
    // SAFETY: F_GETFL and F_SETFL take and return plain integers.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    let set = flags >= 0
        && flags & libc::O_NOATIME == 0
        // SAFETY: as above.
        && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NOATIME) } == 0;
    let out = read();
    if set {
        // SAFETY: as above; F_SETFL only changes the status flags it was given back.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) };
    }
    out
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// Opens a relative path beneath `dir`, refusing `..` escapes and every symlink on the way
/// (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`). A final symlink is opened itself
/// when `flags` has `O_NOFOLLOW | O_PATH`.
pub fn open_beneath(dir: BorrowedFd<'_>, path: &CStr, flags: i32, mode: u32) -> SysResult<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
            u64::from(mode)
        } else {
            0
        },
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `how` is a properly initialised open_how of the size passed; `path` is valid.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        let e = Errno::last();
        if e.0 == libc::ENOSYS {
            return open_beneath_walk(dir, path, flags, mode);
        }
        return Err(e);
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Fallback for kernels without `openat2`: one `O_NOFOLLOW` component at a time.
fn open_beneath_walk(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: i32,
    mode: u32,
) -> SysResult<OwnedFd> {
    let bytes = path.to_bytes();
    let parts: Vec<&[u8]> = bytes
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let Some((last, dirs)) = parts.split_last() else {
        return openat(dir, c".", flags, mode);
    };
    let mut cur: Option<OwnedFd> = None;
    for part in dirs {
        if *part == b".." || *part == b"." {
            return Err(Errno(libc::EXDEV));
        }
        let name = CString::new(*part).map_err(|_| Errno(libc::EINVAL))?;
        let base = cur.as_ref().map_or(dir, |f| f_borrow(f));
        let next = openat(
            base,
            &name,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| {
            if e.0 == libc::ENOTDIR {
                Errno(libc::ELOOP)
            } else {
                e
            }
        })?;
        cur = Some(next);
    }
    if *last == b".." {
        return Err(Errno(libc::EXDEV));
    }
    let name = CString::new(*last).map_err(|_| Errno(libc::EINVAL))?;
    let base = cur.as_ref().map_or(dir, |f| f_borrow(f));
    openat(base, &name, flags | libc::O_NOFOLLOW, mode)
}

fn f_borrow(f: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    f.as_fd()
}

/// `fstatat(2)` without following a final symlink.
pub fn lstatat(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid out pointer of the right type; `name` is valid.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded, so it filled the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// `fstat(2)`, which also works on `O_PATH` descriptors.
pub fn fstat(fd: BorrowedFd<'_>) -> SysResult<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid out pointer of the right type.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// Largest file handle the kernel gives (`MAX_HANDLE_SZ`).
const MAX_HANDLE_SZ: usize = 128;

/// `name_to_handle_at(2)` for `name` in `dir` (an empty name with `AT_EMPTY_PATH` in `flags`
/// names `dir` itself), never following a final symlink: the handle's type (4 bytes, little
/// endian) followed by its bytes. `EOPNOTSUPP` where the filesystem gives no handles.
pub fn file_handle_at(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> SysResult<Vec<u8>> {
    // The header (two 32-bit fields) followed by the largest handle, 8-byte aligned.
    let mut buf = [0u64; 1 + MAX_HANDLE_SZ / 8];
    let fh = buf.as_mut_ptr().cast::<libc::file_handle>();
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `buf` is large and aligned enough for a `file_handle` header and
    // MAX_HANDLE_SZ bytes after it; `handle_bytes` is set to that capacity before the call.
    let ret = unsafe {
        (*fh).handle_bytes = MAX_HANDLE_SZ as libc::c_uint;
        libc::name_to_handle_at(
            dir.as_raw_fd(),
            name.as_ptr(),
            fh,
            &mut mount_id,
            flags & !libc::AT_SYMLINK_FOLLOW,
        )
    };
    check(ret)?;
    // SAFETY: the call succeeded, so the header is filled and `handle_bytes` (at most the
    // capacity we gave) bytes of handle follow it inside `buf`.
    let (kind, bytes) = unsafe {
        let n = ((*fh).handle_bytes as usize).min(MAX_HANDLE_SZ);
        let data = fh.cast::<u8>().add(8);
        ((*fh).handle_type, std::slice::from_raw_parts(data, n))
    };
    let mut out = kind.to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    Ok(out)
}

/// `open_by_handle_at(2)` of a handle [`file_handle_at`] gave (type, then bytes), on the
/// filesystem of `mount_fd`; `ESTALE` when the inode no longer exists. Needs
/// `CAP_DAC_READ_SEARCH` (`EPERM` otherwise).
pub fn open_by_handle(mount_fd: BorrowedFd<'_>, handle: &[u8], flags: i32) -> SysResult<OwnedFd> {
    if handle.len() < 4 || handle.len() - 4 > MAX_HANDLE_SZ {
        return Err(Errno(libc::EINVAL));
    }
    let (kind, bytes) = handle.split_at(4);
    let mut buf = [0u64; 1 + MAX_HANDLE_SZ / 8];
    let fh = buf.as_mut_ptr().cast::<libc::file_handle>();
    // SAFETY: `buf` is large and aligned enough for the header and MAX_HANDLE_SZ bytes after
    // it; `bytes` is at most MAX_HANDLE_SZ long (checked above).
    let fd = unsafe {
        (*fh).handle_bytes = bytes.len() as libc::c_uint;
        (*fh).handle_type = i32::from_le_bytes([kind[0], kind[1], kind[2], kind[3]]);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), fh.cast::<u8>().add(8), bytes.len());
        libc::open_by_handle_at(mount_fd.as_raw_fd(), fh, flags | libc::O_CLOEXEC)
    };
    check(fd)?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The birth time of `name` in `dir` (an empty name with `AT_EMPTY_PATH` in `flags` names
/// `dir`), in nanoseconds, when the filesystem records one; never follows a final symlink.
pub fn birth_time_at(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> Option<i64> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `stx` is a valid out pointer of the right type; `name` is a valid C string.
    let ret = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_DONT_SYNC,
            libc::STATX_BTIME,
            stx.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return None;
    }
    // SAFETY: statx succeeded; the struct was zeroed before, so every field is initialised.
    let stx = unsafe { stx.assume_init() };
    (stx.stx_mask & libc::STATX_BTIME != 0)
        .then(|| stx.stx_btime.tv_sec * 1_000_000_000 + i64::from(stx.stx_btime.tv_nsec))
}

/// `fstatfs(2)`.
pub fn fstatvfs(fd: BorrowedFd<'_>) -> SysResult<libc::statvfs> {
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `st` is a valid out pointer of the right type.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatvfs succeeded, so it filled the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// `mkdirat(2)`.
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `mknodat(2)`.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, rdev: u64) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe {
        libc::mknodat(
            dir.as_raw_fd(),
            name.as_ptr(),
            mode as libc::mode_t,
            rdev as libc::dev_t,
        )
    })
    .map(drop)
}

/// `symlinkat(2)`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

/// `readlinkat(2)`, returning the whole target.
pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> SysResult<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `buf` is writable for its full length.
    let n = check_size(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    buf.truncate(n);
    Ok(buf)
}

/// `unlinkat(2)`; pass `libc::AT_REMOVEDIR` for directories.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

/// `renameat2(2)` with `RENAME_NOREPLACE` / `RENAME_EXCHANGE` flags passed through.
pub fn renameat2(
    olddir: BorrowedFd<'_>,
    old: &CStr,
    newdir: BorrowedFd<'_>,
    new: &CStr,
    flags: u32,
) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe {
        libc::renameat2(
            olddir.as_raw_fd(),
            old.as_ptr(),
            newdir.as_raw_fd(),
            new.as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// `linkat(2)` without following symlinks.
pub fn linkat(
    olddir: BorrowedFd<'_>,
    old: &CStr,
    newdir: BorrowedFd<'_>,
    new: &CStr,
) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe {
        libc::linkat(
            olddir.as_raw_fd(),
            old.as_ptr(),
            newdir.as_raw_fd(),
            new.as_ptr(),
            0,
        )
    })
    .map(drop)
}

/// `fchownat(2)` on the entry itself (never through a symlink).
pub fn lchownat(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) -> SysResult<()> {
    // SAFETY: plain syscall on valid arguments.
    check(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `fchown(2)` of an open (or `O_PATH`) descriptor, through `AT_EMPTY_PATH`.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> SysResult<()> {
    // SAFETY: empty path with AT_EMPTY_PATH operates on `fd` itself.
    check(unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) })
        .map(drop)
}

/// Changes the mode of the inode behind `fd`, which may be an `O_PATH` descriptor: through
/// `fchmodat2(fd, "", AT_EMPTY_PATH)` (Linux 6.6+), else the descriptor's `/proc/self/fd`
/// entry; either way the inode already opened (no path race).
pub fn fchmod_any(fd: BorrowedFd<'_>, mode: u32) -> SysResult<()> {
    // 452 on every architecture (syscalls added since Linux 5.1 share one number); x32 adds
    // its usual syscall bit. Not every target of the libc crate defines it yet.
    #[cfg(not(all(target_arch = "x86_64", target_pointer_width = "32")))]
    const SYS_FCHMODAT2: libc::c_long = 452;
    #[cfg(all(target_arch = "x86_64", target_pointer_width = "32"))]
    const SYS_FCHMODAT2: libc::c_long = 0x4000_0000 + 452;
    static NO_FCHMODAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    // SAFETY: plain syscall; fchmod works on regular descriptors.
    let r = unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) };
    if r == 0 {
        return Ok(());
    }
    let e = Errno::last();
    if e.0 != libc::EBADF {
        return Err(e);
    }
    if !NO_FCHMODAT2.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: empty path with AT_EMPTY_PATH operates on `fd` itself.
        let r = unsafe {
            libc::syscall(
                SYS_FCHMODAT2,
                fd.as_raw_fd(),
                c"".as_ptr(),
                mode as libc::mode_t,
                libc::AT_EMPTY_PATH,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = Errno::last();
        if e.0 != libc::ENOSYS && e.0 != libc::EINVAL {
            return Err(e);
        }
        NO_FCHMODAT2.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let p = proc_fd_path(fd);
    // SAFETY: `p` is a valid C string naming our own descriptor.
    check(unsafe { libc::chmod(p.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `/proc/self/fd/N` for a descriptor, to reach the inode behind an `O_PATH` descriptor.
pub fn proc_fd_path(fd: BorrowedFd<'_>) -> CString {
    // The formatted string never contains NUL.
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// Reopens an `O_PATH` descriptor with real access flags through `/proc/self/fd`.
pub fn reopen(fd: BorrowedFd<'_>, flags: i32) -> SysResult<OwnedFd> {
    let p = proc_fd_path(fd);
    // SAFETY: `p` is valid; the result is checked.
    let r = unsafe {
        libc::open(
            p.as_ptr(),
            (flags & !libc::O_NOFOLLOW & !libc::O_CREAT) | libc::O_CLOEXEC,
        )
    };
    check(r)?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// Sets access and modification times of an entry without following a symlink.
pub fn utimensat(dir: BorrowedFd<'_>, name: &CStr, times: &[libc::timespec; 2]) -> SysResult<()> {
    // SAFETY: `times` points at two timespecs as the call expects.
    check(unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// Sets access and modification times of the inode behind `fd` (which may be an `O_PATH`
/// descriptor, or a file that has been unlinked) through its `/proc/self/fd` entry.
pub fn futimens_any(fd: BorrowedFd<'_>, times: &[libc::timespec; 2]) -> SysResult<()> {
    let p = proc_fd_path(fd);
    // SAFETY: `p` is a valid C string naming our own descriptor; `times` points at two
    // timespecs as the call expects.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

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

/// One directory entry as `getdents64` gives it.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Host inode number.
    pub ino: u64,
    /// `DT_*` type.
    pub kind: u8,
    /// The filesystem's cookie for the position after this entry (`d_off`): seeking the
    /// directory there resumes the listing with the next entry.
    pub next: u64,
    /// The name, never `.` or `..` unless `keep_dots` was asked.
    pub name: Vec<u8>,
}

/// Reads every entry of the directory behind `dir` (which must be opened for reading).
pub fn read_dir_all(dir: BorrowedFd<'_>, keep_dots: bool) -> SysResult<Vec<DirEntry>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    lseek(dir, 0, libc::SEEK_SET)?;
    loop {
        let chunk = read_dir_chunk(dir, &mut buf)?;
        if chunk.is_empty() {
            break;
        }
        out.extend(
            chunk
                .into_iter()
                .filter(|e| keep_dots || (e.name != b"." && e.name != b"..")),
        );
    }
    Ok(out)
}

/// One `getdents64` call from the directory's current position: the entries that fit in
/// `buf`, dots included; empty at the end.
pub fn read_dir_chunk(dir: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<Vec<DirEntry>> {
    // SAFETY: `buf` is writable for its length; getdents64 fills whole records.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(Errno::last());
    }
    let n = n as usize;
    let mut out = Vec::new();
    let mut pos = 0;
    // struct linux_dirent64: u64 d_ino, i64 d_off, u16 d_reclen, u8 d_type, char d_name[].
    while pos + 19 <= n {
        let word = |at: usize| {
            buf.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        };
        let (Some(ino), Some(next)) = (word(pos), word(pos + 8)) else {
            return Err(Errno(libc::EIO));
        };
        let reclen = u16::from_ne_bytes([buf[pos + 16], buf[pos + 17]]) as usize;
        let kind = buf[pos + 18];
        if reclen < 19 || pos + reclen > n {
            return Err(Errno(libc::EIO));
        }
        let name_bytes = &buf[pos + 19..pos + reclen];
        let len = name_bytes
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(name_bytes.len());
        out.push(DirEntry {
            ino,
            kind,
            next,
            name: name_bytes[..len].to_vec(),
        });
        pos += reclen;
    }
    Ok(out)
}

/// Creates a pipe whose ends are close-on-exec.
pub fn pipe() -> SysResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: the kernel just returned both descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `umount2(2)` of a path.
pub fn umount(path: &CStr, flags: i32) -> SysResult<()> {
    // SAFETY: plain syscall on a valid string.
    check(unsafe { libc::umount2(path.as_ptr(), flags) }).map(drop)
}

/// Sets the umask (the process's, or only this thread's after [`unshare_fs`]) and returns the
/// old one.
pub fn set_umask(mask: u32) -> u32 {
    // SAFETY: umask cannot fail.
    unsafe { libc::umask(mask as libc::mode_t) as u32 }
}

/// Gives the calling thread its own umask, working directory and root (`unshare(CLONE_FS)`),
/// so that [`set_umask`] on it changes no other thread's.
pub fn unshare_fs() -> SysResult<()> {
    // SAFETY: plain syscall on an integer flag; it only copies this thread's fs_struct.
    check(unsafe { libc::unshare(libc::CLONE_FS) }).map(drop)
}

/// Starts a new session (detach from the controlling terminal).
pub fn setsid() -> SysResult<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::setsid() }).map(drop)
}

/// `dup2(2)`, used in a child just before exec.
pub fn dup2(from: RawFd, to: RawFd) -> SysResult<()> {
    // SAFETY: plain syscall on integers.
    check(unsafe { libc::dup2(from, to) }).map(drop)
}

/// Effective uid of this process.
pub fn geteuid() -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether a process is still running (exists and has not exited as a zombie).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    // A zombie has exited (its descriptors and locks are gone once its last thread is) and
    // only waits for a reaper, which in a container may be slow: count it as dead.
    match std::fs::read(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .iter()
                .rposition(|b| *b == b')')
                .and_then(|i| stat.get(i + 2).copied());
            match state {
                Some(b'X') => false,
                // The leader is a zombie while the other threads are still exiting; they
                // still hold the descriptors (and the store lock) the group shares.
                Some(b'Z') => std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("Threads:"))
                            .and_then(|n| n.trim().parse::<u32>().ok())
                    })
                    .is_some_and(|n| n > 1),
                _ => true,
            }
        }
        Err(_) => true,
    }
}

/// Sends `sig` to `pid`.
pub fn kill(pid: i32, sig: i32) -> SysResult<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// Ends this process at once with `SIGKILL`, as a crash would (the crash tests' failpoints).
pub fn kill_self() -> ! {
    // SAFETY: plain syscalls; SIGKILL cannot be caught, so `kill` does not return.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
        libc::_exit(137)
    }
}

/// Opens `/proc/self/fd` or any absolute directory path for `O_PATH` use.
pub fn open_path(path: &CStr, flags: i32) -> SysResult<OwnedFd> {
    // SAFETY: `path` is a valid C string.
    let r = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    check(r)?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// The uid and gid of the peer of a connected Unix socket.
pub fn peer_cred(fd: BorrowedFd<'_>) -> SysResult<(u32, u32, i32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid out pointers of the right size.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok((cred.uid, cred.gid, cred.pid))
}

/// Takes ownership of an inherited descriptor number (the daemon's readiness pipe).
pub fn own_fd(n: RawFd) -> OwnedFd {
    // SAFETY: callers pass only a descriptor inherited for them alone (`--ready-fd`).
    unsafe { OwnedFd::from_raw_fd(n) }
}

/// Makes `cmd` start in a new session with `fd` duplicated to `target` (for the daemon).
pub fn detach_with_fd(cmd: &mut std::process::Command, fd: RawFd, target: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (setsid, dup2), allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            if libc::dup2(fd, target) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux: a nice value is per
/// thread). Best effort: a refusal leaves the thread as it was.
pub fn lower_thread_priority(nice: i32) {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    unsafe {
        let tid = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}
