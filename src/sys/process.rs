//! The process and its threads rather than a file: umask (per thread after
//! [`unshare_fs`]), starting the daemon in its own session with its readiness pipe, liveness,
//! `SIGINT` taken by a thread of its own (the CLI's Ctrl-C during a rewind),
//! dumpability, the effective uid and a uid's login name, a socket peer's credentials, descriptors passed to a helper
//! or received from one (`fusermount3`), thread priority, and mounting and unmounting.
//!
//! Kept apart from the file calls because none of these takes a descriptor of the host tree.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::{SysResult, check};

/// `umount2(2)` of a path.
pub fn umount(path: &CStr, flags: i32) -> SysResult<()> {
    // SAFETY: plain syscall on a valid string.
    check(unsafe { libc::umount2(path.as_ptr(), flags) }).map(drop)
}

/// `mount(2)` of a new filesystem: `source` (what mountinfo shows as the mount's source),
/// `target`, `fstype` (`fuse.SUBTYPE`), the `MS_*` `flags` and the filesystem's `data`.
pub fn mount(
    source: &CStr,
    target: &CStr,
    fstype: &CStr,
    flags: libc::c_ulong,
    data: &CStr,
) -> SysResult<()> {
    // SAFETY: plain syscall; every pointer is a valid NUL-terminated string for the call.
    check(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    })
    .map(drop)
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

/// Makes this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core dump, and its
/// `/proc/PID` entries belong to root, so other processes of the same user can no longer open
/// its descriptors through `/proc/PID/fd`, nor read its memory or environment; ptrace needs
/// `CAP_SYS_PTRACE`. The process itself keeps `/proc/self/fd` (the kernel always lets a thread
/// group reach its own entries). Cleared again by an `execve`, as the kernel does.
pub fn make_undumpable() -> SysResult<()> {
    // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers and touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }).map(drop)
}

/// Makes this process the child subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`): a
/// process below it whose parent exits is adopted by it instead of by init, so it still
/// descends from it.
pub fn set_child_subreaper() -> SysResult<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

/// Waits for any child of this process to end (`waitpid(-1, …, 0)`, retried on `EINTR`): its
/// pid and its raw wait status. `ECHILD` when there is none.
pub fn wait_any_child() -> SysResult<(i32, i32)> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer for the whole call.
        match check(unsafe { libc::waitpid(-1, &raw mut status, 0) }) {
            Ok(pid) => return Ok((pid, status)),
            Err(super::Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reaps the children of this process that have ended already (`waitpid(-1, …, WNOHANG)`),
/// without waiting for the others; how many it reaped.
pub fn reap_ended_children() -> usize {
    let mut reaped = 0;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out pointer for the whole call.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        if pid <= 0 {
            return reaped;
        }
        reaped += 1;
    }
}

/// The processes that are children of this one now (every thread's, from
/// `/proc/self/task/*/children`): after the command `run` ran has ended, the orphans of its
/// tree that `run`, their subreaper, adopted and that still run.
pub fn children_of_self() -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Effective uid of this process.
pub fn geteuid() -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::geteuid() }
}

/// Effective gid of this process.
pub fn getegid() -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::getegid() }
}

/// The login name of `uid` from the user database (`getpwuid_r(3)`: `/etc/passwd`, or NSS),
/// or `None` when it has none, the lookup fails, or the name is not UTF-8.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        // SAFETY: an all-zero `passwd` is valid (null pointers, zero ids); getpwuid_r only
        // writes it.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `pwd`, `buf` (with its true length) and `found` are valid for writes for the
        // whole call; the strings it stores in `pwd` point into `buf`, which outlives their use
        // below.
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` is a NUL-terminated string inside `buf`, alive here.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        return name.to_str().ok().map(str::to_owned);
    }
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

/// Ends this process at once with `SIGKILL`, as a crash would (the crash tests' failpoints).
pub fn kill_self() -> ! {
    // SAFETY: plain syscalls; SIGKILL cannot be caught, so `kill` does not return.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
        libc::_exit(137)
    }
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

/// Makes `cmd` inherit `fd` under its own number (clears `FD_CLOEXEC` in the child only), for
/// a helper that is told the number, such as `fusermount3` with `_FUSE_COMMFD`.
pub fn inherit_fd(cmd: &mut std::process::Command, fd: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and calls only fcntl, which is
    // async-signal-safe, allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Receives one descriptor sent with `SCM_RIGHTS` over a Unix socket (how `fusermount3` hands
/// over the `/dev/fuse` descriptor it mounted with). `ENODATA` when the peer closed the socket
/// without sending one (the helper failed; its stderr says why).
pub fn recv_fd(sock: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    };
    // Room for one descriptor's control message, aligned for `cmsghdr`.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is a valid empty header; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let received = loop {
        // SAFETY: `msg` points at live buffers of the stated sizes for the whole call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let e = super::Errno::last();
        if e.0 != libc::EINTR {
            return Err(e);
        }
    };
    if received == 0 {
        return Err(super::Errno(libc::ENODATA));
    }
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR reads only within msg_control.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        return Err(super::Errno(libc::ENODATA));
    }
    // SAFETY: `cmsg` is non-null and points inside `control`, which the kernel filled.
    let (level, kind, len) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type, (*cmsg).cmsg_len) };
    // SAFETY: CMSG_LEN is arithmetic on a constant.
    let want = unsafe { libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) } as usize;
    if level != libc::SOL_SOCKET || kind != libc::SCM_RIGHTS || len < want {
        return Err(super::Errno(libc::EPROTO));
    }
    // SAFETY: an SCM_RIGHTS message of at least one descriptor's length carries a descriptor
    // at CMSG_DATA; read unaligned because the data need not be aligned for an int.
    let fd = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>()) };
    // SAFETY: the kernel installed this descriptor in our table for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Restores the default action of `SIGPIPE` (end the process quietly), as a command-line
/// filter expects when its reader goes away (`ckpt-mount diff | head`). The Rust runtime
/// ignores the signal, which turns the next print into a panic; the daemon keeps it ignored,
/// because a client that hangs up must not end it.
pub fn default_sigpipe() {
    // SAFETY: installing SIG_DFL for SIGPIPE touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Restores the default disposition of `SIGCHLD`, which an ignoring parent passes on through
/// `execve`: ignored, the kernel reaps children by itself and `waitpid(-1)` blocks until every
/// child is gone (the daemon `run` mounted, an orphan it adopted) instead of returning the one
/// that ended.
pub fn default_sigchld() {
    // SAFETY: installing SIG_DFL for SIGCHLD touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
}

/// The set holding `SIGINT` alone.
fn sigint_set() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage, and sigemptyset initialises it before
    // sigaddset adds a valid signal number; neither can fail with these arguments.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks `SIGINT` in the calling thread and so in every thread it starts from now on: a
/// Ctrl-C then ends nothing and waits, pending, for [`wait_for_sigint`] in a thread of the
/// process. Call it before any thread that must not take the signal is started.
pub fn block_sigint() -> SysResult<()> {
    let set = sigint_set();
    // SAFETY: `set` is an initialised sigset_t; the old mask is not asked for (null).
    match unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } {
        0 => Ok(()),
        e => Err(super::Errno(e)),
    }
}

/// Unblocks `SIGINT` in the calling thread after [`block_sigint`]: a Ctrl-C pending since is
/// taken now, as it would have been then.
pub fn unblock_sigint() -> SysResult<()> {
    let set = sigint_set();
    // SAFETY: `set` is an initialised sigset_t; the old mask is not asked for (null).
    match unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) } {
        0 => Ok(()),
        e => Err(super::Errno(e)),
    }
}

/// Waits until a `SIGINT` blocked by [`block_sigint`] is pending, and takes it.
pub fn wait_for_sigint() -> SysResult<()> {
    let set = sigint_set();
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is an initialised sigset_t and `sig` a valid out pointer.
    match unsafe { libc::sigwait(&set, &mut sig) } {
        0 => Ok(()),
        e => Err(super::Errno(e)),
    }
}

/// Makes the C allocator give every allocation of `threshold` bytes or more its own mapping,
/// returned to the kernel when it is freed, instead of raising that threshold as it goes
/// (glibc's default, up to 32 MiB). The daemon's large allocations are its index's lists and
/// maps, which grow by doubling: from the heap, every old copy left a hole other threads'
/// arenas could not reuse, and a rewind of the Linux tree peaked at 195 MiB of RSS; with
/// 1 MiB, 136 MiB (docs/BENCHMARKS.md). Growing a mapped list is a `mremap`, not a copy.
/// Returns whether the allocator took the setting (only glibc's has it).
pub fn map_large_allocations(threshold: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let Ok(t) = libc::c_int::try_from(threshold) else {
            return false;
        };
        // SAFETY: mallopt only changes the allocator's tuning; it takes two plain integers.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, t) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = threshold;
        false
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit and returns the new
/// soft limit. The daemon holds a descriptor per open file and per node it resolves, and a
/// session's default soft limit (1,024 under PAM) is far below what a rewind of a big tree
/// needs; the hard limit is the ceiling an unprivileged process may raise to.
pub fn raise_nofile_limit() -> SysResult<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out pointer of the right type.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid, initialised rlimit.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// A descriptor of thread or process `tid` that becomes readable when it exits
/// (`pidfd_open(2)` with `PIDFD_THREAD`, Linux 6.9 and later, so that a thread that is not its
/// process's leader works too: the kernel names a request's caller by thread). Held, it proves
/// that `tid` still means the same thread: its number cannot be reused while it runs.
pub fn pidfd_open_thread(tid: u32) -> SysResult<OwnedFd> {
    // PIDFD_THREAD is O_EXCL (include/uapi/linux/pidfd.h).
    let flags = libc::O_EXCL as libc::c_uint;
    // SAFETY: plain syscall with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) };
    if r < 0 {
        return Err(super::Errno::last());
    }
    // SAFETY: on success the syscall returns a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Whether the thread or process of the pidfd `fd` has exited (a failed check counts as
/// exited, so the caller looks again rather than trusting a stale answer).
pub fn pidfd_exited(fd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout: never blocks.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r != 0
}
