//! Reading the folder back: the host tree (all but the store `.ckpt`) with each path's inode.

use super::*;

/// Calls `call` with a buffer of 4 KiB, then of the size it asks for while it reports `ERANGE`
/// (one call where the values are small, as the test's are).
pub(super) fn xattr_call(call: impl Fn(&mut [u8]) -> isize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = call(&mut buf);
        if n >= 0 {
            buf.truncate(n as usize);
            return Some(buf);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            return None;
        }
        let need = call(&mut []);
        if need < 0 {
            return None;
        }
        buf = vec![0u8; need as usize + 1];
    }
}

/// The user xattrs of a file or directory, by descriptor.
pub(super) fn user_xattrs(fd: std::os::fd::BorrowedFd<'_>) -> Xattrs {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let mut out = Xattrs::new();
    // SAFETY: the buffer is ours and its length is passed with it.
    let Some(names) =
        xattr_call(|b| unsafe { libc::flistxattr(raw, b.as_mut_ptr().cast(), b.len()) })
    else {
        return out;
    };
    for n in names.split(|c| *c == 0).filter(|n| !n.is_empty()) {
        let Some(name) = std::str::from_utf8(n)
            .ok()
            .filter(|n| n.starts_with("user."))
        else {
            continue;
        };
        let c = CString::new(name).expect("no NUL in an xattr name");
        // SAFETY: the name is NUL-terminated, the buffer is ours and its length is passed with it.
        if let Some(v) = xattr_call(|b| unsafe {
            libc::fgetxattr(raw, c.as_ptr(), b.as_mut_ptr().cast(), b.len())
        }) {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// Walks the host folder (all but the store `.ckpt`), never following a symlink.
pub(super) fn observe(root: &Path) -> Observed {
    let mut entries = BTreeMap::new();
    let mut inos = BTreeMap::new();
    let mut by_ino: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let listing =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()));
        for e in listing {
            let e = e.expect("directory entry");
            let name = e.file_name().into_string().expect("UTF-8 name");
            if rel.is_empty() && name == ".ckpt" {
                continue;
            }
            let path = join(&rel, &name);
            let full = root.join(&path);
            // A file (by its entry's type) is opened once and read whole through the descriptor;
            // anything else is looked at by path.
            let file = if e.file_type().expect("file type").is_file() {
                use std::os::unix::fs::OpenOptionsExt;
                Some(
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&full)
                        .expect("open"),
                )
            } else {
                None
            };
            let md = match &file {
                Some(f) => f.metadata().expect("fstat"),
                None => std::fs::symlink_metadata(&full).expect("lstat"),
            };
            let mode = md.permissions().mode() & 0o7777;
            let ft = md.file_type();
            let snap = if ft.is_dir() {
                stack.push(path.clone());
                let d = std::fs::File::open(&full).expect("open a directory");
                Snap {
                    kind: Kind::Dir { mode },
                    xattrs: user_xattrs(d.as_fd()),
                }
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&full).expect("readlink");
                Snap {
                    kind: Kind::Symlink {
                        target: target.to_string_lossy().into_owned(),
                    },
                    xattrs: Xattrs::new(),
                }
            } else if let (true, Some(mut f)) = (ft.is_file(), file) {
                use std::io::Read;
                by_ino.entry(md.ino()).or_default().insert(path.clone());
                let mut data = Vec::with_capacity(md.len() as usize + 1);
                f.read_to_end(&mut data).expect("read");
                Snap {
                    kind: Kind::File { data, mode },
                    xattrs: user_xattrs(f.as_fd()),
                }
            } else {
                panic!("{path}: a file type the test never makes");
            };
            let born = md
                .created()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            inos.insert(path.clone(), HKey(md.ino(), born));
            entries.insert(path, snap);
        }
    }
    let groups = by_ino.into_values().filter(|g| g.len() > 1).collect();
    Observed {
        tree: Tree { entries, groups },
        inos,
    }
}
