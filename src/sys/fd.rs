//! Descriptors and the names in a directory: opening (`openat`, `openat2` beneath a root,
//! reopening an `O_PATH` descriptor, file handles), `stat`, creating, linking, renaming and
//! removing entries, and setting owner, mode and times.
//!
//! Every call here takes a directory descriptor and one name (or a descriptor alone), never a
//! path from the caller's root: this is how the daemon reaches the host tree without following
//! a symlink or a `..` it did not check. Data through an open descriptor is in `io.rs`.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::{Errno, SysResult, check, check_size};

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
    openat_noatime_as(dir, name, flags).map(|(fd, _)| fd)
}

/// [`openat_noatime`], with the flags the descriptor got (with or without `O_NOATIME`).
pub fn openat_noatime_as(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: i32,
) -> SysResult<(OwnedFd, i32)> {
    let quiet = flags | libc::O_NOATIME;
    match openat(dir, name, quiet, 0) {
        Err(Errno(libc::EPERM)) => Ok((openat(dir, name, flags, 0)?, flags)),
        r => Ok((r?, quiet)),
    }
}

/// Runs `read` with `O_NOATIME` set on `fd`, then clears it again: for reading a pre-image
/// through a descriptor that was opened for the caller (whose own reads must keep updating
/// atime), before the descriptor is handed over. `flags` are the status flags `fd` was opened
/// with (the caller opened it, so no `F_GETFL` is asked); when they have `O_NOATIME` already,
/// `read` just runs. Where the flag cannot be set (not the owner, no `CAP_FOWNER`), `read` runs
/// all the same.
pub fn without_atime<T>(fd: BorrowedFd<'_>, flags: i32, read: impl FnOnce() -> T) -> T {
    let set = flags & libc::O_NOATIME == 0
        // SAFETY: F_SETFL takes plain integers; it changes only the status flags it may
        // (O_APPEND, O_NONBLOCK, O_NOATIME, ...), the others in `flags` are ignored.
        && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NOATIME) } == 0;
    let out = read();
    if set {
        // SAFETY: as above; the flags it was opened with, given back.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) };
    }
    out
}

/// The status flags of `fd` (`F_GETFL`).
pub fn status_flags(fd: BorrowedFd<'_>) -> SysResult<i32> {
    // SAFETY: F_GETFL takes no argument and returns a plain integer.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })
}

/// Clears `O_NOATIME` on `fd` when it is set, so reads through it update the atime again.
pub fn keep_atime(fd: BorrowedFd<'_>) -> SysResult<()> {
    let flags = status_flags(fd)?;
    if flags & libc::O_NOATIME != 0 {
        // SAFETY: F_SETFL takes a plain integer; only O_NOATIME changes among the flags given
        // back.
        check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NOATIME) })?;
    }
    Ok(())
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
    let bytes = path.to_bytes();
    if bytes.len() >= BENEATH_CHUNK {
        return open_beneath_chained(dir, bytes, flags, mode);
    }
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

/// The longest path [`open_beneath`] hands the kernel at once: below `PATH_MAX` (4,096 bytes
/// with its NUL), which the kernel refuses with `ENAMETOOLONG`.
const BENEATH_CHUNK: usize = 4000;

/// [`open_beneath`] of a path too long for one call: a chain of descriptors, each directory
/// opened beneath the one before it by a piece of the path shorter than [`BENEATH_CHUNK`]
/// (split between components), with the same rules (no symlink, no `..`), so that a tree
/// deeper than `PATH_MAX` is reached as any other (a rename can move a tree made on the host
/// under a longer name).
fn open_beneath_chained(
    dir: BorrowedFd<'_>,
    bytes: &[u8],
    flags: i32,
    mode: u32,
) -> SysResult<OwnedFd> {
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let mut cur: Option<OwnedFd> = None;
    let mut rest = bytes;
    while rest.len() >= BENEATH_CHUNK {
        // The last separator that leaves a piece short enough; a single component longer
        // than that is no valid name (NAME_MAX is 255).
        let cut = rest[..BENEATH_CHUNK]
            .iter()
            .rposition(|b| *b == b'/')
            .filter(|i| *i > 0)
            .ok_or(Errno(libc::ENAMETOOLONG))?;
        let piece = CString::new(&rest[..cut]).map_err(|_| Errno(libc::EINVAL))?;
        let base = cur.as_ref().map_or(dir, |f| f_borrow(f));
        cur = Some(open_beneath(base, &piece, dir_flags, 0)?);
        rest = &rest[cut + 1..];
    }
    let last = CString::new(rest).map_err(|_| Errno(libc::EINVAL))?;
    let base = cur.as_ref().map_or(dir, |f| f_borrow(f));
    open_beneath(base, &last, flags, mode)
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
/// Opens `/proc/self/fd` or any absolute directory path for `O_PATH` use.
pub fn open_path(path: &CStr, flags: i32) -> SysResult<OwnedFd> {
    // SAFETY: `path` is a valid C string.
    let r = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    check(r)?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// `faccessat2(fd, "", mask, AT_EMPTY_PATH | AT_EACCESS)`: whether this process, with its
/// effective ids, may access the inode `fd` refers to (an `O_PATH` descriptor will do) as
/// `mask` asks (`R_OK`, `W_OK`, `X_OK`, or `F_OK`).
pub fn access_fd(fd: BorrowedFd<'_>, mask: i32) -> SysResult<()> {
    // SAFETY: the path is a valid empty C string and the other arguments are integers; the
    // kernel reads nothing else of ours.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mask,
            libc::AT_EMPTY_PATH | libc::AT_EACCESS,
        )
    };
    check(ret as libc::c_int).map(drop)
}
