//! The caller's credentials beyond what a FUSE request carries: supplementary groups and
//! `CAP_FSETID` (from `/proc/PID/status`), the set-id bits a local filesystem drops, and the
//! caller's umask applied for one creating system call (`FUSE_DONT_MASK`).

use super::Caller;
use crate::sys;
use std::os::fd::BorrowedFd;

/// `CAP_FSETID`: keeps set-id bits across writes, truncates and chowns.
pub(super) const CAP_FSETID: u32 = 4;

/// What the FUSE request does not carry of the caller's credentials (its supplementary groups
/// and effective capabilities), read from `/proc/PID/status` of the calling thread, which is
/// blocked in its system call meanwhile. Without it: only the request's gid, and `CAP_FSETID`
/// for uid 0.
pub(super) struct CallerCreds {
    pub(super) groups: Vec<u32>,
    pub(super) fsetid: bool,
}

impl CallerCreds {
    pub(super) fn of(caller: Caller) -> Self {
        let mut creds = Self {
            groups: vec![caller.gid],
            fsetid: caller.uid == 0,
        };
        if caller.pid == 0 {
            return creds;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", caller.pid)) else {
            return creds;
        };
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("Groups:") {
                creds
                    .groups
                    .extend(v.split_whitespace().filter_map(|g| g.parse::<u32>().ok()));
            } else if let Some(v) = line.strip_prefix("CapEff:")
                && let Ok(caps) = u64::from_str_radix(v.trim(), 16)
            {
                creds.fsetid = caps & (1 << CAP_FSETID) != 0;
            }
        }
        creds
    }
}

/// The set-id bits a local filesystem drops from a regular file when `caller` writes to it,
/// truncates it or opens it with `O_TRUNC` (the kernel's `setattr_should_drop_suidgid`): none
/// for a caller with `CAP_FSETID`; else `S_ISUID`, and `S_ISGID` when group-execute is set or
/// the caller is not in the file's group. The FUSE kernel module applies only the first two
/// rules by itself, and none on `open(O_TRUNC)` with atomic truncation.
pub(super) fn setid_to_drop(st: &libc::stat, caller: Caller) -> u32 {
    let mode = st.st_mode;
    if mode & libc::S_IFMT != libc::S_IFREG || mode & (libc::S_ISUID | libc::S_ISGID) == 0 {
        return 0;
    }
    let creds = CallerCreds::of(caller);
    if creds.fsetid {
        return 0;
    }
    let mut drop = mode & libc::S_ISUID;
    if mode & libc::S_ISGID != 0
        && (mode & libc::S_IXGRP != 0 || !creds.groups.contains(&st.st_gid))
    {
        drop |= libc::S_ISGID;
    }
    drop
}

/// Whether a local filesystem clears `S_ISGID` when `caller` sets the access ACL of the inode
/// whose attributes (after the set) are `st`: the kernel's `posix_acl_update_mode`, which
/// ext4, xfs and btrfs call when a `system.posix_acl_access` value is set, clears it from any
/// kind of inode unless the caller is in the inode's group or holds `CAP_FSETID`, even when
/// the ACL leaves the permission bits as they were (xfstests generic/375). The daemon sets the
/// ACL with its own credentials, which the host checks instead of the caller's (root's always
/// keep the bit), and without `FUSE_POSIX_ACL` the kernel leaves the rule to the daemon.
pub(super) fn acl_clears_setgid(st: &libc::stat, caller: Caller) -> bool {
    if st.st_mode & libc::S_ISGID == 0 {
        return false;
    }
    let creds = CallerCreds::of(caller);
    !creds.fsetid && !creds.groups.contains(&st.st_gid)
}

thread_local! {
    /// Whether this thread has a umask of its own (`unshare(CLONE_FS)`); `None` until asked.
    static OWN_UMASK: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread's umask is its own, making it so on the first call.
pub(super) fn own_umask() -> bool {
    OWN_UMASK.with(|own| {
        if let Some(v) = own.get() {
            return v;
        }
        let ok = match sys::unshare_fs() {
            Ok(()) => true,
            Err(e) => {
                log::warn!(target: "ckpt::fuse", "no umask of its own for this thread ({e}): creations check the parent's default ACL instead");
                false
            }
        };
        own.set(Some(ok));
        ok
    })
}

/// The caller's umask in force for one creating system call, restored when dropped.
pub(super) struct CallerUmask(Option<u32>);

impl CallerUmask {
    /// The mode to create an entry with in `dir`, requested as `mode` by a caller whose umask
    /// is `umask`, and the umask to create it under.
    ///
    /// POSIX: the umask applies unless the parent directory has a default ACL, which then
    /// gives the permissions instead. The mount asks for `FUSE_DONT_MASK`, so the kernel sends
    /// the mode unmasked and leaves that to the daemon (without it, it masked the mode first
    /// and a default ACL could not undo that: xfstests generic/099, 319, 444, 697). The host
    /// knows whether the parent has a default ACL, so the daemon creates with the caller's
    /// umask as its own: this thread's, made its own by `unshare(CLONE_FS)`, the way virtiofsd
    /// does it (two `umask` calls, no lookup). Where a thread cannot have its own, the daemon
    /// reads the parent's default ACL and masks the mode itself when it has none.
    pub(super) fn apply(dir: BorrowedFd<'_>, mode: u32, umask: u32) -> (u32, Self) {
        let mode = mode & 0o7777;
        let umask = umask & 0o777;
        if own_umask() {
            return (mode, Self(Some(sys::set_umask(umask))));
        }
        let inherits =
            sys::getxattr(dir, c"system.posix_acl_default", &mut []).is_ok_and(|n| n > 0);
        (if inherits { mode } else { mode & !umask }, Self(None))
    }
}

impl Drop for CallerUmask {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            sys::set_umask(old);
        }
    }
}
