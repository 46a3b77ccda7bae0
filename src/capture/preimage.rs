//! Reading pre-images: what a name (or an open regular file) in the host tree is right now,
//! as a [`PreImage`], its file content put in the blob store.
//!
//! This is the capture's only contact with the host tree, kept apart from the policy in
//! `mod.rs` so that "how is a file read" can be checked without "when": no lock is taken
//! here and nothing is written to the journal. The rewind uses [`read_preimage`] and
//! [`walk_tree`] too, for the state it is about to overwrite. Nothing here follows a symlink,
//! opens a FIFO for more than a non-blocking stat, or reads a device.

use crate::identity::FileId;
use crate::relpath::RelPath;
use crate::store::blob::BlobStore;
use crate::store::journal::{LinkTarget, PreImage, Xattr};
use crate::sys::{self, Errno, SysResult};
use crate::xattrs::{self, Via};
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

/// Reads what `name` in `parent` is now, storing file content in `blobs`.
pub fn read_preimage(
    blobs: &BlobStore,
    parent: BorrowedFd<'_>,
    name: &CStr,
    max_blob: u64,
) -> SysResult<PreImage> {
    let st = match sys::lstatat(parent, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(PreImage::Absent),
        Err(e) => return Err(e),
    };
    let (mode, uid, gid) = (st.st_mode & 0o7777, st.st_uid, st.st_gid);
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => read_file_by_name(blobs, parent, name, &st, max_blob)?,
        libc::S_IFDIR => PreImage::Dir {
            mode,
            uid,
            gid,
            xattrs: Some(xattrs_by_name(parent, name)?),
        },
        libc::S_IFLNK => {
            let id = FileId::read_at(parent, name, 0, st.st_ino);
            PreImage::Symlink {
                target: LinkTarget(sys::readlinkat(parent, name)?),
                uid,
                gid,
                ino: Some(st.st_ino),
                nlink: Some(st.st_nlink),
                fh: id.fh,
                btime: id.btime,
                xattrs: Some(xattrs_by_name(parent, name)?),
            }
        }
        libc::S_IFIFO => PreImage::Fifo {
            mode,
            uid,
            gid,
            xattrs: Some(xattrs_by_name(parent, name)?),
        },
        libc::S_IFSOCK => PreImage::Skipped {
            was: "socket".into(),
            size: 0,
            reason: "sockets cannot be restored; the program that made it must make it again"
                .into(),
        },
        _ => PreImage::Skipped {
            was: "device".into(),
            size: 0,
            reason: "device nodes are not captured or restored".into(),
        },
    })
}

/// The regular file `name` in `parent`, whose `lstat` is `st`: opened (without updating its
/// atime) and read through [`read_open_file`], after checking the name still leads to `st`.
fn read_file_by_name(
    blobs: &BlobStore,
    parent: BorrowedFd<'_>,
    name: &CStr,
    st: &libc::stat,
    max_blob: u64,
) -> SysResult<PreImage> {
    if let Some(skipped) = over_max_blob(st.st_size as u64, max_blob) {
        return Ok(skipped);
    }
    let fd = sys::openat_noatime(
        parent,
        name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
    )?;
    let now = sys::fstat(fd.as_fd())?;
    if now.st_ino != st.st_ino || now.st_dev != st.st_dev {
        // Replaced between stat and open: nothing in the mount can do that while we hold
        // the gate, so this is an outside writer; refuse rather than store a mix.
        return Err(Errno(libc::EAGAIN));
    }
    read_open_file(blobs, fd.as_fd(), &now, max_blob)
}

/// A file of `size` bytes over `--max-blob` is recorded as skipped, its content not stored.
fn over_max_blob(size: u64, max_blob: u64) -> Option<PreImage> {
    (size > max_blob).then(|| PreImage::Skipped {
        was: "file".into(),
        size,
        reason: format!("{size} bytes is over the --max-blob limit of {max_blob} bytes"),
    })
}

/// The pre-image of the regular file open (readable) at `fd`, whose `fstat` is `st`: read from
/// offset 0 through the descriptor, so it is that inode's content whatever its name is now.
pub fn read_open_file(
    blobs: &BlobStore,
    fd: BorrowedFd<'_>,
    st: &libc::stat,
    max_blob: u64,
) -> SysResult<PreImage> {
    let size = st.st_size as u64;
    if let Some(skipped) = over_max_blob(size, max_blob) {
        return Ok(skipped);
    }
    let stored = blobs.put_fd_sized(fd, size)?;
    let id = FileId::of_fd(fd, st.st_ino);
    Ok(PreImage::File {
        blob: stored.id,
        size: stored.size,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        ino: st.st_ino,
        nlink: st.st_nlink,
        fh: id.fh,
        btime: id.btime,
        xattrs: Some(xattrs::read_all(Via::Open(fd))?),
    })
}

/// The extended attributes of `name` in `parent`, reached through an `O_PATH` descriptor
/// (directories, symlinks and FIFOs are never opened for I/O by a capture).
fn xattrs_by_name(parent: BorrowedFd<'_>, name: &CStr) -> SysResult<Vec<Xattr>> {
    let fd = sys::openat(parent, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
    xattrs::read_all(Via::Path(fd.as_fd()))
}

/// What [`walk_tree`] calls for each path: returns whether to walk below it, when it knows
/// (`Some(true)`: a directory it saw; `Some(false)`: not a directory, or one whose tree it
/// visited already), `None` for the walk to look.
pub type TreeVisitor<'a> =
    dyn FnMut(&RelPath, BorrowedFd<'_>, &CStr) -> SysResult<Option<bool>> + 'a;

/// A [`TreeVisitor`] whose errors are `E`.
pub(super) type TreeVisitorWith<'a, E> =
    dyn FnMut(&RelPath, BorrowedFd<'_>, &CStr) -> Result<Option<bool>, E> + 'a;

/// Calls `f(path, parent, name)` for `name` and, when it is a directory, everything below it
/// (parents before children). Never follows a symlink. `f` returns whether it found a
/// directory there, when it looked (`Some`): the walk then asks the filesystem no second time
/// (one `lstat` a path fewer when a rewind saves a tree); `None` and the walk looks itself.
pub fn walk_tree(
    parent: BorrowedFd<'_>,
    name: &CStr,
    path: &RelPath,
    f: &mut TreeVisitor<'_>,
) -> SysResult<()> {
    walk_tree_with(parent, name, path, f)
}

/// [`walk_tree`] for a visitor whose own errors are not only an errno (a capture's: the store
/// may fail with more to say).
pub(super) fn walk_tree_with<E: From<Errno>>(
    parent: BorrowedFd<'_>,
    name: &CStr,
    path: &RelPath,
    f: &mut TreeVisitorWith<'_, E>,
) -> Result<(), E> {
    let is_dir = match f(path, parent, name)? {
        Some(seen) => seen,
        None => match sys::lstatat(parent, name) {
            Ok(st) => st.st_mode & libc::S_IFMT == libc::S_IFDIR,
            Err(Errno(libc::ENOENT)) => false,
            Err(e) => return Err(e.into()),
        },
    };
    if !is_dir {
        return Ok(());
    }
    let dir = sys::openat_noatime(
        parent,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )?;
    for e in sys::read_dir_all(dir.as_fd(), false)? {
        let Ok(child) = RelPath::join(Some(path), OsStr::from_bytes(&e.name)) else {
            continue;
        };
        let cname = CString::new(e.name).map_err(|_| Errno(libc::EINVAL))?;
        walk_tree_with(dir.as_fd(), &cname, &child, f)?;
    }
    Ok(())
}

/// The state of `rel` below `dst_name` in `dst_parent`, or `None` when a component on the way
/// is not a directory (then the whole subtree is already covered by that component's capture).
pub(super) fn mirrored_state(
    dst_parent: BorrowedFd<'_>,
    dst_name: &CStr,
    rel: &[u8],
    blobs: &BlobStore,
    max_blob: u64,
) -> Result<Option<PreImage>, Errno> {
    let top = match sys::openat(
        dst_parent,
        dst_name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    ) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {
            return Ok(Some(PreImage::Absent));
        }
        Err(e) => return Err(e),
    };
    let (dir_part, leaf) = match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => (Some(&rel[..i]), &rel[i + 1..]),
        None => (None, rel),
    };
    let dir = match dir_part {
        None => top,
        Some(d) => {
            let c = CString::new(d).map_err(|_| Errno(libc::EINVAL))?;
            match sys::open_beneath(
                top.as_fd(),
                &c,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ) {
                Ok(fd) => fd,
                Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {
                    return Ok(Some(PreImage::Absent));
                }
                Err(e) => return Err(e),
            }
        }
    };
    let leaf = CString::new(leaf).map_err(|_| Errno(libc::EINVAL))?;
    read_preimage(blobs, dir.as_fd(), &leaf, max_blob).map(Some)
}
