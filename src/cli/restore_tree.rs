//! `restore N --to DEST` with no path: the whole folder as it was when turn N began, copied out
//! to a new directory, rewinding nothing. An unmounted folder is read through its store
//! (`crate::past_tree`); a mounted one through its `.ckpt/turns/N/`, the same tree the daemon
//! serves. Either way the copy keeps bytes, modes (not set-id), symlinks, hard-link groups,
//! extended attributes (any it cannot set named on stderr) and, as root, owners.
//!
//! Everything is written through descriptors, one name at a time below DEST (no path longer
//! than a name), and directory modes are set last, deepest first, so a read-only directory
//! is filled before it becomes one.

use super::{CliError, CliResult, Target};
use crate::past_tree::{Tree, Was};
use crate::relpath::RelPath;
use crate::store::journal::PreImage;
use crate::sys;
use crate::xattrs::{Via, Xattr};
use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What one name held, ready to be written.
struct Item {
    kind: ItemKind,
    mode: u32,
    owner: (u32, u32),
    xattrs: Vec<Xattr>,
}

enum ItemKind {
    Dir,
    /// A file: its bytes, and its inode (names sharing one are linked).
    File(Bytes, u64),
    Symlink(Vec<u8>),
    Fifo,
}

enum Bytes {
    Blob(crate::ids::BlobId),
    Fd(OwnedFd),
}

/// Where a moment's tree is read.
trait Source {
    /// The names directly in `dir` (`None`: the top), each with what it held.
    fn children(&self, dir: Option<&RelPath>) -> Result<Vec<(OsString, Item)>, String>;
    /// Writes a file's bytes to `out`.
    fn copy(&self, bytes: &Bytes, out: BorrowedFd<'_>) -> Result<(), String>;
}

/// Runs `restore N --to DEST` without a path.
pub fn restore_tree(t: Target, turn: Option<crate::moment::Moment>, dest: &Path) -> CliResult {
    let dest_fd = make_dest(dest)?;
    let mut w = Writer::new(dest_fd);
    let name = match t {
        Target::Offline(folder) => {
            let (root, store) = super::open_offline(&folder)?;
            let index = store.index();
            let m = turn.unwrap_or_else(|| crate::moment::Moment::live(index.current_turn()));
            let (began, _) = index
                .span_of(m)
                .ok_or_else(|| CliError::usage(format!("turn {m} does not exist")))?;
            let past = store
                .past(began)
                .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
            let tree = Tree {
                past: &past,
                index,
                root: root.as_fd(),
            };
            w.copy_all(&StoreSource {
                tree: &tree,
                store: &store,
            })?;
            m.to_string()
        }
        Target::Mounted(folder) => {
            let m = match turn {
                Some(m) => m,
                None => current_turn(&folder)?,
            };
            let view = folder.join(".ckpt/turns").join(m.to_string());
            let root = super::open_folder(&view)?;
            w.copy_all(&ViewSource { root })?;
            m.to_string()
        }
    };
    w.finish()?;
    println!(
        "restored the folder as it was when turn {name} began to {} ({} paths{})",
        dest.display(),
        w.written,
        w.xattr_note()
    );
    Ok(())
}

fn current_turn(folder: &Path) -> Result<crate::moment::Moment, CliError> {
    let text = std::fs::read_to_string(folder.join(".ckpt/turn"))
        .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
    let n = text
        .trim()
        .parse()
        .map_err(|_| CliError::fail(format!("{}: .ckpt/turn says {text:?}", folder.display())))?;
    Ok(crate::moment::Moment::live(n))
}

/// DEST, made as a new directory (or taken as an empty one), opened.
fn make_dest(dest: &Path) -> Result<OwnedFd, CliError> {
    let fail = |e: std::io::Error| CliError::fail(format!("{}: {e}", dest.display()));
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CliError::fail(format!(
                    "{} exists and is not empty; choose another --to",
                    dest.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(dest).map_err(fail)?;
        }
        Err(e) => return Err(fail(e)),
    }
    super::open_folder(dest).and_then(|fd| {
        sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))
    })
}

struct Writer {
    dest: OwnedFd,
    /// Each file's inode, as the first name written for it (its directory and name).
    linked: HashMap<u64, (std::sync::Arc<OwnedFd>, CString)>,
    /// Directories to give their modes, deepest last (set in reverse).
    dir_modes: Vec<(std::sync::Arc<OwnedFd>, u32)>,
    written: u64,
    xattr_failures: Vec<String>,
    as_root: bool,
}

impl Writer {
    fn new(dest: OwnedFd) -> Self {
        Self {
            dest,
            linked: HashMap::new(),
            dir_modes: Vec::new(),
            written: 0,
            xattr_failures: Vec::new(),
            as_root: sys::geteuid() == 0,
        }
    }

    fn copy_all(&mut self, src: &dyn Source) -> CliResult {
        let top = std::sync::Arc::new(
            sys::reopen(self.dest.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| CliError::fail(format!("opening the destination: {e}")))?,
        );
        let mut stack: Vec<(Option<RelPath>, std::sync::Arc<OwnedFd>)> = vec![(None, top)];
        while let Some((dir, fd)) = stack.pop() {
            let children = src.children(dir.as_ref()).map_err(CliError::fail)?;
            for (name, item) in children {
                let rel = RelPath::join(dir.as_ref(), &name).map_err(|e| CliError::fail(e.0))?;
                if let Some(sub) = self.write(src, &fd, &rel, item)? {
                    stack.push((Some(rel), sub));
                }
            }
        }
        Ok(())
    }

    /// Writes one name; returns a directory's descriptor to fill.
    fn write(
        &mut self,
        src: &dyn Source,
        dir: &std::sync::Arc<OwnedFd>,
        rel: &RelPath,
        item: Item,
    ) -> Result<Option<std::sync::Arc<OwnedFd>>, CliError> {
        let name = rel.file_name_cstring();
        let err = |e: sys::Errno| CliError::fail(format!("{rel}: {e}"));
        self.written += 1;
        let (fd, sub) = match &item.kind {
            ItemKind::Dir => {
                sys::mkdirat(dir.as_fd(), &name, 0o700).map_err(err)?;
                let d = std::sync::Arc::new(
                    sys::openat(
                        dir.as_fd(),
                        &name,
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                        0,
                    )
                    .map_err(err)?,
                );
                self.dir_modes
                    .push((std::sync::Arc::clone(&d), item.mode & 0o777));
                (None, Some(d))
            }
            ItemKind::File(bytes, ino) => {
                if let Some((first_dir, first_name)) = self.linked.get(ino) {
                    sys::linkat(first_dir.as_fd(), first_name, dir.as_fd(), &name).map_err(err)?;
                    return Ok(None);
                }
                let f = sys::openat(
                    dir.as_fd(),
                    &name,
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
                    0o600,
                )
                .map_err(err)?;
                src.copy(bytes, f.as_fd())
                    .map_err(|e| CliError::fail(format!("{rel}: {e}")))?;
                self.linked
                    .insert(*ino, (std::sync::Arc::clone(dir), name.clone()));
                (Some(f), None)
            }
            ItemKind::Symlink(target) => {
                let t = CString::new(target.clone())
                    .map_err(|_| CliError::fail(format!("{rel}: a NUL in its target")))?;
                sys::symlinkat(&t, dir.as_fd(), &name).map_err(err)?;
                return Ok(None);
            }
            ItemKind::Fifo => {
                sys::mknodat(dir.as_fd(), &name, libc::S_IFIFO | 0o600, 0).map_err(err)?;
                (
                    Some(
                        sys::openat(dir.as_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                            .map_err(err)?,
                    ),
                    None,
                )
            }
        };
        let target: BorrowedFd<'_> = match (&fd, &sub) {
            (Some(f), _) => f.as_fd(),
            (None, Some(d)) => d.as_fd(),
            (None, None) => return Ok(sub),
        };
        self.finish_inode(target, rel, &item);
        if !matches!(item.kind, ItemKind::Dir) {
            sys::fchmod_any(target, item.mode & 0o777).map_err(err)?;
        }
        Ok(sub)
    }

    /// Owner (as root) and extended attributes of a written inode.
    fn finish_inode(&mut self, fd: BorrowedFd<'_>, rel: &RelPath, item: &Item) {
        if self.as_root {
            let _ = sys::fchown(fd, item.owner.0, item.owner.1);
        }
        let wanted: Vec<Xattr> = item
            .xattrs
            .iter()
            .filter(|x| x.name != b"security.capability")
            .cloned()
            .collect();
        for (x, e) in crate::xattrs::set_each(Via::Path(fd), &wanted) {
            self.xattr_failures.push(format!(
                "{rel}: extended attribute {} not kept: {e}",
                String::from_utf8_lossy(&x.name)
            ));
        }
    }

    /// Directory modes, deepest first; the failures said.
    fn finish(&mut self) -> CliResult {
        for (fd, mode) in self.dir_modes.iter().rev() {
            sys::fchmod_any(fd.as_fd(), *mode)
                .map_err(|e| CliError::fail(format!("setting a directory's mode: {e}")))?;
        }
        for line in &self.xattr_failures {
            eprintln!("ckpt-mount: {line}");
        }
        Ok(())
    }

    fn xattr_note(&self) -> String {
        match self.xattr_failures.len() {
            0 => String::new(),
            n => format!("; {n} extended attributes not kept, named above"),
        }
    }
}

/// An unmounted folder's moment, through its store.
struct StoreSource<'a> {
    tree: &'a Tree<'a>,
    store: &'a crate::store::Store,
}

impl Source for StoreSource<'_> {
    fn children(&self, dir: Option<&RelPath>) -> Result<Vec<(OsString, Item)>, String> {
        let list = self.tree.children(dir).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for (name, was) in list {
            let rel = RelPath::join(dir, &name).map_err(|e| e.0)?;
            out.push((name, self.item(&rel, was)?));
        }
        Ok(out)
    }

    fn copy(&self, bytes: &Bytes, out: BorrowedFd<'_>) -> Result<(), String> {
        match bytes {
            Bytes::Blob(id) => {
                let mut at = 0u64;
                self.store
                    .blobs()
                    .read_blob(id, &mut |chunk| {
                        sys::write_all(out, chunk, at)?;
                        at += chunk.len() as u64;
                        Ok(())
                    })
                    .map_err(|e| format!("reading blob {id}: {e}"))?;
                Ok(())
            }
            Bytes::Fd(fd) => copy_fd(fd.as_fd(), out),
        }
    }
}

impl StoreSource<'_> {
    fn item(&self, rel: &RelPath, was: Was) -> Result<Item, String> {
        let pre = match was {
            Was::Recorded(pre) => pre,
            Was::Folder(st) => {
                let fd = sys::open_beneath(
                    self.tree.root,
                    &rel.to_cstring(),
                    libc::O_PATH | libc::O_NOFOLLOW,
                    0,
                )
                .map_err(|e| format!("{rel}: {e}"))?;
                return folder_item(fd, &st).map_err(|e| format!("{rel}: {e}"));
            }
        };
        let xattrs = pre.xattrs().map(<[Xattr]>::to_vec).unwrap_or_default();
        Ok(match pre {
            PreImage::File {
                blob,
                mode,
                uid,
                gid,
                ino,
                ..
            } => Item {
                kind: ItemKind::File(Bytes::Blob(blob), ino),
                mode,
                owner: (uid, gid),
                xattrs,
            },
            PreImage::Dir { mode, uid, gid, .. } => Item {
                kind: ItemKind::Dir,
                mode,
                owner: (uid, gid),
                xattrs,
            },
            PreImage::Symlink {
                target, uid, gid, ..
            } => Item {
                kind: ItemKind::Symlink(target.0),
                mode: 0o777,
                owner: (uid, gid),
                xattrs: Vec::new(),
            },
            PreImage::Fifo { mode, uid, gid, .. } => Item {
                kind: ItemKind::Fifo,
                mode,
                owner: (uid, gid),
                xattrs,
            },
            other => return Err(format!("{rel}: its bytes are not in the store ({other:?})")),
        })
    }
}

/// What a name of a folder (or a mounted tree) holds, read through `fd` (`O_PATH`).
fn folder_item(fd: OwnedFd, st: &libc::stat) -> Result<Item, sys::Errno> {
    let owner = (st.st_uid, st.st_gid);
    let mode = st.st_mode & 0o7777;
    let xattrs = |fd: BorrowedFd<'_>| crate::xattrs::read_all(Via::Path(fd)).unwrap_or_default();
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Item {
            kind: ItemKind::Dir,
            mode,
            owner,
            xattrs: xattrs(fd.as_fd()),
        },
        libc::S_IFREG => {
            let x = xattrs(fd.as_fd());
            let r = sys::reopen(fd.as_fd(), libc::O_RDONLY)?;
            Item {
                kind: ItemKind::File(Bytes::Fd(r), st.st_ino),
                mode,
                owner,
                xattrs: x,
            }
        }
        libc::S_IFLNK => Item {
            kind: ItemKind::Symlink(sys::readlinkat(fd.as_fd(), c"")?),
            mode,
            owner,
            xattrs: Vec::new(),
        },
        libc::S_IFIFO => Item {
            kind: ItemKind::Fifo,
            mode,
            owner,
            xattrs: xattrs(fd.as_fd()),
        },
        _ => return Err(sys::Errno(libc::EOPNOTSUPP)),
    })
}

fn copy_fd(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> Result<(), String> {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = sys::read_full(from, &mut buf, at).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        sys::write_all(to, &buf[..n], at).map_err(|e| e.to_string())?;
        at += n as u64;
    }
}

/// A mounted folder's moment, through its `.ckpt/turns/N/` (the daemon's tree).
struct ViewSource {
    root: OwnedFd,
}

impl Source for ViewSource {
    fn children(&self, dir: Option<&RelPath>) -> Result<Vec<(OsString, Item)>, String> {
        let d = match dir {
            None => sys::reopen(self.root.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY),
            Some(rel) => sys::open_beneath(
                self.root.as_fd(),
                &rel.to_cstring(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ),
        }
        .map_err(|e| format!("{}: {e}", dir.map_or_else(|| ".".into(), |r| r.to_string())))?;
        let mut out = Vec::new();
        for e in sys::read_dir_all(d.as_fd(), false).map_err(|e| e.to_string())? {
            let name = std::ffi::OsStr::from_bytes(&e.name).to_os_string();
            let c = CString::new(e.name.clone()).map_err(|_| "a NUL in a name".to_string())?;
            let fd = sys::openat(d.as_fd(), &c, libc::O_PATH | libc::O_NOFOLLOW, 0)
                .map_err(|e| e.to_string())?;
            let st = sys::fstat(fd.as_fd()).map_err(|e| e.to_string())?;
            out.push((name, folder_item(fd, &st).map_err(|e| e.to_string())?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn copy(&self, bytes: &Bytes, out: BorrowedFd<'_>) -> Result<(), String> {
        match bytes {
            Bytes::Fd(fd) => copy_fd(fd.as_fd(), out),
            Bytes::Blob(_) => Err("a mounted tree has no blobs".into()),
        }
    }
}
