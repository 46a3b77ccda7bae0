//! The `.ckpt/` control nodes as the core serves them: attributes, listing, content, and what
//! a write to `.ckpt/turn` or `.ckpt/rewind` does.

use super::attrs::now_ts;
use super::control::{self, CTL_DIR, CTL_GITIGNORE, CTL_REWIND, CTL_TURN};
use super::files::{Handle, HandleKind};
use super::{CkptFs, DirItem, Entry, FsResult, SetAttr};
use crate::ids::{Fh, NodeId};
use crate::rewind;
use crate::sys::{Errno, ToErrno};
use fuser::{FileAttr, FileType};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

impl CkptFs {
    /// `lookup` in a control node: the entries of `.ckpt/`; nothing lies below a file.
    pub(super) fn ctl_lookup(&self, parent: NodeId, name: &OsStr) -> FsResult<Entry> {
        if parent != CTL_DIR {
            return Err(Errno(libc::ENOTDIR).into());
        }
        control::lookup(name.as_bytes())
            .map(|n| self.control_entry(n))
            .ok_or(Errno(libc::ENOENT).into())
    }

    /// `setattr` of a control node: `echo N > .ckpt/turn` truncates first, which is accepted
    /// and changes nothing; any other change is refused.
    pub(super) fn ctl_setattr(&self, node: NodeId, set: &SetAttr) -> FsResult<FileAttr> {
        if set.mode.is_none() && set.uid.is_none() && set.gid.is_none() && set.size == Some(0) {
            return Ok(self.control_attr(node));
        }
        Err(Errno(libc::EPERM).into())
    }

    /// `readdir(plus)` of a control node: the listing of `.ckpt/` after the cookie `offset`,
    /// each with its entry (fixed ids, no lookup count); a file is not a directory.
    pub(super) fn ctl_readdir(
        &self,
        node: NodeId,
        offset: u64,
        sink: &mut dyn FnMut(&DirItem, Option<&Entry>) -> bool,
    ) -> FsResult<()> {
        if node != CTL_DIR {
            return Err(Errno(libc::ENOTDIR).into());
        }
        for item in self.control_dir_items() {
            if item.offset <= offset {
                continue;
            }
            let dots = item.name == "." || item.name == "..";
            let entry = (!dots)
                .then(|| control::lookup(item.name.as_bytes()).map(|n| self.control_entry(n)))
                .flatten();
            if sink(&item, entry.as_ref()) {
                break;
            }
        }
        Ok(())
    }

    /// `open` of a control node: a handle with no descriptor. A read from offset 0 takes a
    /// fresh snapshot of the content (later offsets read on in it); each write is one whole
    /// input; a handle opened for writing and closed with nothing written is an empty input.
    pub(super) fn open_control(&self, node: NodeId, flags: i32) -> FsResult<Fh> {
        if node == CTL_DIR {
            return Err(Errno(libc::EISDIR).into());
        }
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        if writing && node == CTL_GITIGNORE {
            return Err(Errno(libc::EACCES).into());
        }
        Ok(self.add_handle(Handle {
            node,
            fd: None,
            kind: HandleKind::Control {
                node,
                snapshot: crate::sync::Mutex::leaf(Vec::new()),
                unwritten: AtomicBool::new(writing),
            },
        }))
    }

    pub(super) fn control_attr(&self, node: NodeId) -> FileAttr {
        let (kind, perm, size) = match node {
            CTL_DIR => (FileType::Directory, 0o755, 0),
            CTL_GITIGNORE => (FileType::RegularFile, 0o444, 2),
            _ => (FileType::RegularFile, 0o644, 0),
        };
        let t = now_ts();
        FileAttr {
            // A control node shows its node id as its inode number (the adapter puts the node
            // id in `st_ino` of every entry anyway).
            ino: fuser::INodeNo(node.0),
            size,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    pub(super) fn control_entry(&self, node: NodeId) -> Entry {
        Entry {
            attr: self.control_attr(node),
            node,
            ttl: Duration::ZERO,
            attr_ttl: Duration::ZERO,
        }
    }

    /// The control directory's listing; `offset` cookies 1, 2, … in this order. A control
    /// node's `d_ino` is its node id, as its `st_ino` is.
    pub(super) fn control_dir_items(&self) -> Vec<DirItem> {
        let mut v = vec![
            DirItem {
                ino: CTL_DIR.0,
                offset: 1,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirItem {
                ino: self.root_host.ino,
                offset: 2,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for (i, (n, name)) in control::ENTRIES.iter().enumerate() {
            v.push(DirItem {
                ino: n.0,
                offset: i as u64 + 3,
                kind: FileType::RegularFile,
                name: (*name).into(),
            });
        }
        v
    }

    pub(super) fn control_content(&self, node: NodeId) -> Vec<u8> {
        match node {
            CTL_TURN => format!("{}\n", self.capture.current_turn()).into_bytes(),
            CTL_REWIND => {
                let text = self.last_report.lock().clone();
                let json = text.as_ref().map_or("{}", |t| t.get());
                format!("{json}\n").into_bytes()
            }
            CTL_GITIGNORE => b"*\n".to_vec(),
            _ => Vec::new(),
        }
    }

    pub(super) fn control_write(&self, node: NodeId, data: &[u8]) -> FsResult<()> {
        match node {
            CTL_TURN => {
                let input = control::parse_turn(data).ok_or(Errno(libc::EINVAL))?;
                Ok(self
                    .begin_turn(input.turn, input.label)
                    .map(drop)
                    .map_err(|e| e.to_errno())?)
            }
            CTL_REWIND => {
                let input = control::parse_rewind(data).ok_or(Errno(libc::EINVAL))?;
                let req = match input {
                    control::RewindInput::To(n) => rewind::Request::folder(n),
                    control::RewindInput::Undo => rewind::Request::UndoLast {
                        mode: rewind::Mode::Apply,
                    },
                };
                match self.rewind(&req, &|_, _| {}) {
                    Ok(r) if r.report.ok() => Ok(()),
                    // Partly restored: the report (readable from .ckpt/rewind) says what failed.
                    Ok(_) => Err(Errno(libc::EIO).into()),
                    Err(e) => Err(e.to_errno().into()),
                }
            }
            _ => Err(Errno(libc::EACCES).into()),
        }
    }
}
