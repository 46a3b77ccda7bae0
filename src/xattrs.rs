//! Extended attributes of one inode, read whole for a pre-image and put back exactly by a
//! rewind: every name the caller can see (`user.*`, `trusted.*` as root, `security.*`, POSIX
//! ACLs `system.posix_acl_access` and `system.posix_acl_default`).
//!
//! Two ways to reach the inode: a descriptor open for I/O (`f*xattr`, no path walk), or any
//! descriptor, `O_PATH` included, through `/proc/self/fd/N` (for directories, symlinks and
//! FIFOs, which a capture never opens for I/O; the magic link resolves to the inode itself, a
//! symlink's own attributes included).

use crate::sys::{self, Errno, SysResult};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::fd::BorrowedFd;

/// One extended attribute: its full name (`user.x`, `trusted.x`, `security.x`,
/// `system.posix_acl_access`, ...) and its value, both any bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Xattr {
    /// The attribute's name.
    #[serde(with = "crate::relpath::text_or_hex")]
    pub name: Vec<u8>,
    /// Its value.
    #[serde(with = "crate::relpath::text_or_hex")]
    pub value: Vec<u8>,
}

/// How to reach the inode's attributes.
#[derive(Clone, Copy)]
pub enum Via<'a> {
    /// A descriptor open for reading or writing.
    Open(BorrowedFd<'a>),
    /// Any descriptor (`O_PATH`), through `/proc/self/fd`.
    Path(BorrowedFd<'a>),
}

impl Via<'_> {
    fn list(self, buf: &mut [u8]) -> SysResult<usize> {
        match self {
            Self::Open(fd) => sys::flistxattr(fd, buf),
            Self::Path(fd) => sys::listxattr(fd, buf),
        }
    }

    fn get(self, name: &CString, buf: &mut [u8]) -> SysResult<usize> {
        match self {
            Self::Open(fd) => sys::fgetxattr(fd, name, buf),
            Self::Path(fd) => sys::getxattr(fd, name, buf),
        }
    }

    fn set(self, name: &CString, value: &[u8]) -> SysResult<()> {
        match self {
            Self::Open(fd) => sys::fsetxattr(fd, name, value, 0),
            Self::Path(fd) => sys::setxattr(fd, name, value, 0),
        }
    }

    fn remove(self, name: &CString) -> SysResult<()> {
        match self {
            Self::Open(fd) => sys::fremovexattr(fd, name),
            Self::Path(fd) => sys::removexattr(fd, name),
        }
    }
}

/// Calls `fill` with a buffer of the size `probe` reports, growing it while the attribute grows
/// under us (`ERANGE`).
fn read_sized(mut probe: impl FnMut(&mut [u8]) -> SysResult<usize>) -> SysResult<Vec<u8>> {
    for _ in 0..8 {
        let size = probe(&mut [])?;
        if size == 0 {
            // Nothing to read (no attributes, or an empty value): no second call. Most files
            // have none, and this runs on every capture.
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; size];
        match probe(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Errno(libc::ERANGE)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno(libc::EAGAIN))
}

/// Every extended attribute of the inode, sorted by name. A filesystem without extended
/// attributes gives an empty list.
pub fn read_all(via: Via<'_>) -> SysResult<Vec<Xattr>> {
    let names = match read_sized(|b| via.list(b)) {
        Ok(n) => n,
        Err(Errno(libc::ENOTSUP)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let c = CString::new(name).map_err(|_| Errno(libc::EINVAL))?;
        match read_sized(|b| via.get(&c, b)) {
            Ok(value) => out.push(Xattr {
                name: name.to_vec(),
                value,
            }),
            // Removed between the list and the read: it is not there.
            Err(Errno(libc::ENODATA)) => {}
            Err(e) => return Err(e),
        }
    }
    out.sort();
    Ok(out)
}

/// Gives the inode exactly the attributes `want`: sets those that differ, removes those not in
/// `want`. Returns whether anything changed.
pub fn apply(via: Via<'_>, want: &[Xattr]) -> SysResult<bool> {
    let now = read_all(via)?;
    let mut changed = false;
    for x in &now {
        if !want.iter().any(|w| w.name == x.name) {
            let c = CString::new(x.name.clone()).map_err(|_| Errno(libc::EINVAL))?;
            match via.remove(&c) {
                Ok(()) | Err(Errno(libc::ENODATA)) => changed = true,
                Err(e) => return Err(e),
            }
        }
    }
    for w in want {
        if now.iter().any(|x| x == w) {
            continue;
        }
        let c = CString::new(w.name.clone()).map_err(|_| Errno(libc::EINVAL))?;
        via.set(&c, &w.value)?;
        changed = true;
    }
    Ok(changed)
}

/// Sets each attribute of `list` on the inode, one by one, going on past a failure; returns
/// those that could not be set with why (`EPERM` for a `trusted.` or `security.` name without
/// the privilege, `ENOTSUP` where the filesystem has no such attributes). For a copy made
/// elsewhere, which starts with none: nothing is removed.
pub fn set_each<'a>(via: Via<'_>, list: &'a [Xattr]) -> Vec<(&'a Xattr, Errno)> {
    let mut failed = Vec::new();
    for x in list {
        let set = CString::new(x.name.clone())
            .map_err(|_| Errno(libc::EINVAL))
            .and_then(|c| via.set(&c, &x.value));
        if let Err(e) = set {
            failed.push((x, e));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn x(name: &str, value: &[u8]) -> Xattr {
        Xattr {
            name: name.as_bytes().to_vec(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn read_then_apply_gives_back_exactly_the_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").expect("write");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .expect("open");
        let via = Via::Open(f.as_fd());
        let want = vec![x("user.a", b"1"), x("user.b", b"\0\xff binary")];
        if apply(via, &want).is_err() {
            return; // the filesystem under the test has no user xattrs
        }
        assert_eq!(read_all(via).expect("read"), want);
        // Changed, added and a removal: back to `want`.
        apply(via, &[x("user.a", b"2"), x("user.c", b"3")]).expect("apply");
        assert!(apply(via, &want).expect("apply"), "something changed");
        assert_eq!(read_all(via).expect("read"), want);
        assert!(!apply(via, &want).expect("apply"), "nothing left to change");
        // Through an O_PATH descriptor, the same.
        let dirfd = std::fs::File::open(dir.path()).expect("open dir");
        let opath =
            sys::openat(dirfd.as_fd(), c"f", libc::O_PATH | libc::O_NOFOLLOW, 0).expect("O_PATH");
        assert_eq!(read_all(Via::Path(opath.as_fd())).expect("read"), want);
    }
}
