//! The operations that change the tree or hold a handle: the core's calls as the kernel
//! makes them, then the model's change.

use super::*;

impl Case {
    /// An operation that changes the tree (or holds a handle): the core's calls as the kernel
    /// makes them, then the model's change.
    pub(super) fn mutate(&mut self, op: Op) -> Result<(), Failure> {
        match op {
            Create(p, seed) | CreateHeld(p, seed) => self.create_file(op, p, seed)?,
            Replace(p, seed) => self.replace_file(p, seed)?,
            Write(p, seed) => self.write_file(p, seed)?,
            EditLine(p, line, seed) => self.edit_line(p, line, seed)?,
            Append(p, seed) => self.append_file(p, seed)?,
            Truncate(p, len) => self.truncate_file(p, len)?,
            Mkdir(p, mode) => self.make_dir(p, mode)?,
            Symlink(target, p) => self.make_symlink(target, p)?,
            Link(a, b) => self.make_link(a, b)?,
            Unlink(p) | Rmdir(p) => self.remove_entry(op, p)?,
            Rename(a, b) | Exchange(a, b) => self.rename_entry(op, a, b)?,
            Chmod(p, mode) => self.set_mode(p, mode)?,
            SetXattr(p, n, _) | RemoveXattr(p, n) => self.change_xattr(op, p, n)?,
            Open(p) => self.open_held(p)?,
            WriteHeld(n, off, seed) => self.write_held(n, off, seed)?,
            TruncHeld(n, len) => self.trunc_held(n, len)?,
            CloseHeld(n) => {
                let i = self.held_at(n);
                self.close_held(i);
            }
            Forget => self.forget_unheld()?,
            NextTurn(_) | Rewind(_) | RewindPaths(..) | Undo | Redo | Relabel(..)
            | RestoreAfter(_) | As(_) | RewindAgent(..) | MkdirAll(_) | RemoveAll(_) | Hold(_)
            | WriteLine(..) | Read(_) | Sh(_) | Settle => {
                unreachable!("not a mutation of the core tier")
            }
        }
        Ok(())
    }

    /// `create` with `content(seed)`, the handle held for `CreateHeld`, closed otherwise.
    fn create_file(&mut self, op: Op, p: &'static str, seed: u8) -> Result<(), Failure> {
        let (parent, name) = self.parent_node(p)?;
        self.expect_absent(parent, name)?;
        let (e, fh) = core(
            "create",
            self.fs()
                .create(parent, OsStr::new(name), 0o644, 0, libc::O_RDWR, self.who),
        )?;
        self.vfs.got(e.node);
        let data = content(seed);
        core("write", self.fs().write(fh, 0, &data))?;
        let id = self.model.new_inode(data, 0o644, Xattrs::new());
        self.model.tree.insert(p.to_string(), MEntry::File(id));
        self.touch(p);
        if matches!(op, CreateHeld(..)) {
            self.hold(Held {
                fh,
                node: e.node,
                ino: id,
            });
        } else {
            self.fs().release(fh);
        }
        Ok(())
    }

    /// A temporary file beside `p` renamed over it, as editors save.
    fn replace_file(&mut self, p: &'static str, seed: u8) -> Result<(), Failure> {
        let (parent, name) = self.parent_node(p)?;
        core("lookup", self.vfs.lookup(self.core.fs(), parent, name))?;
        let tmp = OsStr::new(REPLACE_TMP);
        self.expect_absent(parent, REPLACE_TMP)?;
        let (e, fh) = core(
            "create (temporary)",
            self.fs()
                .create(parent, tmp, 0o644, 0, libc::O_RDWR, self.who),
        )?;
        self.vfs.got(e.node);
        let data = content(seed);
        core("write", self.fs().write(fh, 0, &data))?;
        self.fs().release(fh);
        core(
            "rename (over the file)",
            self.fs()
                .rename(parent, tmp, parent, OsStr::new(name), 0, self.who),
        )?;
        let old = self.model.file(p).expect("valid");
        self.touch_inode(old);
        let id = self.model.new_inode(data, 0o644, Xattrs::new());
        self.model.tree.insert(p.to_string(), MEntry::File(id));
        Ok(())
    }

    /// Open, truncate with the handle (`O_TRUNC`), write.
    fn write_file(&mut self, p: &'static str, seed: u8) -> Result<(), Failure> {
        let node = self.node(p)?;
        let fh = core("open", self.fs().open(node, libc::O_WRONLY, self.who))?;
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        core(
            "setattr (O_TRUNC)",
            self.fs().setattr(node, Some(fh), set, self.who),
        )?;
        let data = content(seed);
        core("write", self.fs().write(fh, 0, &data))?;
        self.fs().release(fh);
        let id = self.model.file(p).expect("valid");
        self.resize_model(id, 0);
        self.write_model(id, 0, &data);
        Ok(())
    }

    /// One line of a five-line text file replaced, through `O_TRUNC` and a write of the whole
    /// file, as `sed -i` and most editors leave a file (the same inode here).
    fn edit_line(&mut self, p: &'static str, line: u8, seed: u8) -> Result<(), Failure> {
        let id = self.model.file(p).expect("valid");
        let data = with_line(&self.model.inodes[&id].data, line % LINES, seed);
        let node = self.node(p)?;
        let fh = core("open", self.fs().open(node, libc::O_WRONLY, self.who))?;
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        core(
            "setattr (O_TRUNC)",
            self.fs().setattr(node, Some(fh), set, self.who),
        )?;
        core("write", self.fs().write(fh, 0, &data))?;
        self.fs().release(fh);
        self.resize_model(id, 0);
        self.write_model(id, 0, &data);
        Ok(())
    }

    /// Open with `O_APPEND` and write at the end.
    fn append_file(&mut self, p: &'static str, seed: u8) -> Result<(), Failure> {
        let node = self.node(p)?;
        let id = self.model.file(p).expect("valid");
        let fh = core(
            "open",
            self.fs()
                .open(node, libc::O_WRONLY | libc::O_APPEND, self.who),
        )?;
        let off = self.model.inodes[&id].data.len();
        let data = content(seed);
        core("write", self.fs().write(fh, off as u64, &data))?;
        self.fs().release(fh);
        self.write_model(id, off, &data);
        Ok(())
    }

    /// A setattr of the size without a handle.
    fn truncate_file(&mut self, p: &'static str, len: u8) -> Result<(), Failure> {
        let node = self.node(p)?;
        let set = SetAttr {
            size: Some(u64::from(len)),
            ..SetAttr::default()
        };
        core(
            "setattr (truncate)",
            self.fs().setattr(node, None, set, self.who),
        )?;
        let id = self.model.file(p).expect("valid");
        self.resize_model(id, usize::from(len));
        Ok(())
    }

    /// `mkdir`; the set-gid bit comes from the parent.
    fn make_dir(&mut self, p: &'static str, mode: u32) -> Result<(), Failure> {
        let (parent, name) = self.parent_node(p)?;
        self.expect_absent(parent, name)?;
        let e = core(
            "mkdir",
            self.fs().mkdir(parent, OsStr::new(name), mode, 0, self.who),
        )?;
        self.vfs.got(e.node);
        // mkdir keeps no set-uid/set-gid bit of its own; the set-gid bit comes from the
        // parent.
        let mode = (mode & 0o1777) | (self.model.dir_mode(parent_path(p)) & 0o2000);
        self.model.tree.insert(
            p.to_string(),
            MEntry::Dir {
                mode,
                xattrs: Xattrs::new(),
            },
        );
        self.touch(p);
        Ok(())
    }

    /// `symlink(target, p)`.
    fn make_symlink(&mut self, target: &'static str, p: &'static str) -> Result<(), Failure> {
        let (parent, name) = self.parent_node(p)?;
        self.expect_absent(parent, name)?;
        let e = core(
            "symlink",
            self.fs()
                .symlink(parent, OsStr::new(name), OsStr::new(target), self.who),
        )?;
        self.vfs.got(e.node);
        self.model
            .tree
            .insert(p.to_string(), MEntry::Symlink(target.to_string()));
        self.touch(p);
        Ok(())
    }

    /// `link(a, b)`.
    fn make_link(&mut self, a: &'static str, b: &'static str) -> Result<(), Failure> {
        let node = self.node(a)?;
        let (parent, name) = self.parent_node(b)?;
        self.expect_absent(parent, name)?;
        let e = core(
            "link",
            self.fs().link(node, parent, OsStr::new(name), self.who),
        )?;
        self.vfs.got(e.node);
        let id = self.model.file(a).expect("valid");
        self.model.tree.insert(b.to_string(), MEntry::File(id));
        self.touch(b);
        Ok(())
    }

    /// `unlink` or `rmdir`, after the kernel's lookup.
    fn remove_entry(&mut self, op: Op, p: &'static str) -> Result<(), Failure> {
        let (parent, name) = self.parent_node(p)?;
        core("lookup", self.vfs.lookup(self.core.fs(), parent, name))?;
        if matches!(op, Unlink(_)) {
            core(
                "unlink",
                self.fs().unlink(parent, OsStr::new(name), self.who),
            )?;
        } else {
            core("rmdir", self.fs().rmdir(parent, OsStr::new(name), self.who))?;
        }
        self.model.tree.remove(p);
        self.touch(p);
        Ok(())
    }

    /// `rename`, or `renameat2(RENAME_EXCHANGE)`, after the kernel's lookups.
    fn rename_entry(&mut self, op: Op, a: &'static str, b: &'static str) -> Result<(), Failure> {
        let (sp, sn) = self.parent_node(a)?;
        core("lookup", self.vfs.lookup(self.core.fs(), sp, sn))?;
        let (dp, dn) = self.parent_node(b)?;
        if self.model.tree.contains_key(b) {
            core("lookup", self.vfs.lookup(self.core.fs(), dp, dn))?;
        } else {
            self.expect_absent(dp, dn)?;
        }
        let flags = if matches!(op, Exchange(..)) {
            libc::RENAME_EXCHANGE
        } else {
            0
        };
        core(
            "rename",
            self.fs()
                .rename(sp, OsStr::new(sn), dp, OsStr::new(dn), flags, self.who),
        )?;
        let mut paths = self.model.subtree(a);
        paths.extend(self.model.subtree(b));
        if matches!(op, Exchange(..)) {
            self.model.exchange(a, b);
        } else {
            self.model.rename(a, b);
        }
        paths.extend(self.model.subtree(a));
        paths.extend(self.model.subtree(b));
        for p in paths {
            self.touch(&p);
        }
        Ok(())
    }

    /// A setattr of the mode.
    fn set_mode(&mut self, p: &'static str, mode: u32) -> Result<(), Failure> {
        let node = self.node(p)?;
        let set = SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        };
        core(
            "setattr (mode)",
            self.fs().setattr(node, None, set, self.who),
        )?;
        match self.model.tree.get_mut(p) {
            Some(MEntry::Dir { mode: m, .. }) => {
                *m = mode;
                self.touch(p);
            }
            Some(MEntry::File(id)) => {
                let id = *id;
                self.model.inodes.get_mut(&id).expect("inode").mode = mode;
                self.touch_inode(id);
            }
            _ => unreachable!("valid"),
        }
        Ok(())
    }

    /// `setxattr` or `removexattr` of `XNAMES[n]`.
    fn change_xattr(&mut self, op: Op, p: &'static str, n: u8) -> Result<(), Failure> {
        let node = self.node(p)?;
        let name = XNAMES[usize::from(n) % XNAMES.len()];
        if let SetXattr(_, _, seed) = op {
            let v = content(seed);
            core(
                "setxattr",
                self.fs().setxattr(node, OsStr::new(name), &v, 0, self.who),
            )?;
            self.model
                .xattrs_mut(p)
                .expect("valid")
                .insert(name.to_string(), v);
        } else {
            core(
                "removexattr",
                self.fs().removexattr(node, OsStr::new(name), self.who),
            )?;
            self.model.xattrs_mut(p).expect("valid").remove(name);
        }
        match self.model.file(p) {
            Some(id) => self.touch_inode(id),
            None => self.touch(p),
        }
        Ok(())
    }

    /// Open read-write and hold the handle.
    fn open_held(&mut self, p: &'static str) -> Result<(), Failure> {
        let node = self.node(p)?;
        let fh = core("open", self.fs().open(node, libc::O_RDWR, self.who))?;
        let ino = self.model.file(p).expect("valid");
        self.hold(Held { fh, node, ino });
        Ok(())
    }

    /// `pwrite` through a held handle.
    fn write_held(&mut self, n: u8, off: u8, seed: u8) -> Result<(), Failure> {
        let h = &self.held[self.held_at(n)];
        let (fh, id) = (h.fh, h.ino);
        let data = content(seed);
        core("write", self.fs().write(fh, u64::from(off), &data))?;
        self.write_model(id, usize::from(off), &data);
        Ok(())
    }

    /// `ftruncate` through a held handle.
    fn trunc_held(&mut self, n: u8, len: u8) -> Result<(), Failure> {
        let h = &self.held[self.held_at(n)];
        let (fh, node, id) = (h.fh, h.node, h.ino);
        let set = SetAttr {
            size: Some(u64::from(len)),
            ..SetAttr::default()
        };
        core(
            "setattr (ftruncate)",
            self.fs().setattr(node, Some(fh), set, self.who),
        )?;
        self.resize_model(id, usize::from(len));
        Ok(())
    }

    /// The kernel forgets every node it does not hold open.
    fn forget_unheld(&mut self) -> Result<(), Failure> {
        // The kernel never forgets a file it holds open, nor the directories above it
        // (an open file pins its dentry, and a dentry its parent).
        let mut pinned: HashSet<NodeId> = self.held.iter().map(|h| h.node).collect();
        let held: HashSet<u64> = self.held.iter().map(|h| h.ino).collect();
        let fs = self.core.fs();
        for (path, _) in self
            .model
            .file_ids()
            .iter()
            .filter(|(_, i)| held.contains(i))
        {
            let mut node = ROOT;
            let parts: Vec<&str> = path.split('/').collect();
            for c in &parts[..parts.len() - 1] {
                let Ok(e) = fs.lookup(node, OsStr::new(c)) else {
                    break;
                };
                // This lookup is the test's own: give it back at once.
                fs.forget(e.node, 1);
                node = e.node;
                pinned.insert(node);
            }
        }
        self.vfs.forget_all(fs, &pinned);
        Ok(())
    }
}
