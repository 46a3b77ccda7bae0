//! Staged captures: a file whose mutation is its removal is moved into `staged/` (named by its
//! capture's seq) instead of being copied, and its capture records a `Staged` pre-image. This
//! file holds the store's half of that job: storing the staged bytes as a blob and appending
//! the `staged` record that says what the pre-image became (now, for one inode about to be
//! written, by the stager outside the lock, or all at once), and, when a store is opened,
//! recovering what a stopped daemon left staged or never moved.
//!
//! What a `staged` record *means* is decided by the replay ([`super::Index`]); this file only
//! does the I/O and appends the records.

use super::journal::{PreImage, Record, Xattr};
use super::{Store, StoreError, blob, io};
use crate::identity::FileId;
use crate::ids::{Epoch, Seq};
use crate::relpath::RelPath;
use crate::sys::{self, Errno};
use crate::xattrs::{self, Via};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A staged pre-image whose bytes the stager stored outside the store lock: its capture's
/// seq, the inode number of the staged file it read, the blob and the file's attributes.
#[derive(Debug)]
pub struct StoredStage {
    /// Seq of the capture.
    pub seq: Seq,
    /// Inode number of the staged file that was read.
    pub ino: u64,
    /// The stored bytes.
    pub blob: blob::Stored,
    /// Its extended attributes.
    pub xattrs: Vec<Xattr>,
}

/// What a staged pre-image resolves to when its bytes cannot be stored for good.
fn staged_skip(size: u64, reason: String) -> PreImage {
    PreImage::Skipped {
        was: "file".into(),
        size,
        reason,
    }
}

/// The file a pending staged capture (`pre`, of `path`) names, when it never reached `staged/`
/// and still stands at its path, proven the same inode (a number alone could be a file made
/// since): opened for reading beneath `root`, with its `fstat`. `ESTALE` when it is not.
pub(crate) fn open_unmoved(
    root: BorrowedFd<'_>,
    path: &RelPath,
    pre: &PreImage,
) -> Result<(OwnedFd, libc::stat), Errno> {
    let dir = path.open_parent(root, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)?;
    let name = path.file_name_cstring();
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = sys::openat_noatime(dir.as_fd(), &name, flags)?;
    let st = sys::fstat(fd.as_fd())?;
    let same = pre
        .file_id()
        .is_some_and(|id| id.is(&FileId::of_fd(fd.as_fd(), st.st_ino)));
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || !same {
        return Err(Errno(libc::ESTALE));
    }
    Ok((fd, st))
}

impl Store {
    /// The `staged/` directory.
    pub fn staged_dir(&self) -> BorrowedFd<'_> {
        self.staged.as_fd()
    }

    /// The name of capture `seq`'s staged file.
    pub fn staged_name(seq: Seq) -> CString {
        CString::new(seq.to_string()).unwrap_or_default()
    }

    /// Stores the bytes of capture `seq`'s staged pre-image and records what it became. `Err`
    /// leaves it pending with its staged file in place (the bytes are not lost; a later call
    /// tries again).
    pub fn resolve_stage(&mut self, seq: Seq) -> Result<(), StoreError> {
        self.resolve_stages(vec![seq])
    }

    /// [`Self::resolve_stage`] for many, with one journal append for all their records.
    pub fn resolve_stages(&mut self, seqs: Vec<Seq>) -> Result<(), StoreError> {
        let mut records = Vec::new();
        let mut first_err = None;
        for seq in seqs {
            match self.resolution(seq) {
                Ok(Some(pre)) => records.push(Record::Staged { capture: seq, pre }),
                Ok(None) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        let done: Vec<Seq> = records
            .iter()
            .filter_map(|r| match r {
                Record::Staged { capture, .. } => Some(*capture),
                _ => None,
            })
            .collect();
        if !records.is_empty() {
            self.append_all(records)?;
        }
        for seq in done {
            let _ = sys::unlinkat(self.staged.as_fd(), &Self::staged_name(seq), 0);
        }
        first_err.map_or(Ok(()), Err)
    }

    /// What capture `seq`'s staged pre-image becomes, its bytes stored; `None` when nothing
    /// waits for it.
    fn resolution(&mut self, seq: Seq) -> Result<Option<PreImage>, StoreError> {
        let Some(&ino) = self.index.pending.get(&seq) else {
            return Ok(None);
        };
        let name = Self::staged_name(seq);
        let Some((staged, size)) = self.staged_pre(seq).map(|(p, size)| (p.clone(), size)) else {
            // Retired by a rewind (only an untrusted journal gets here): nothing waits for it.
            self.index.pending.remove(&seq);
            let _ = sys::unlinkat(self.staged.as_fd(), &name, 0);
            return Ok(None);
        };
        let pre = match sys::openat_noatime(
            self.staged.as_fd(),
            &name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        ) {
            Ok(fd) => {
                let st = sys::fstat(fd.as_fd()).map_err(io("stat a staged pre-image"))?;
                if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_ino != ino {
                    staged_skip(size, "its staged copy in the store was replaced".into())
                } else {
                    let stored = self
                        .blobs
                        .put_fd_sized(fd.as_fd(), st.st_size as u64)
                        .map_err(io("store a staged pre-image"))?;
                    let xattrs = xattrs::read_all(Via::Open(fd.as_fd()))
                        .map_err(io("read the attributes of a staged pre-image"))?;
                    staged
                        .stored_as(stored.id, stored.size, Some(xattrs))
                        .unwrap_or_else(|| staged_skip(size, "not a staged pre-image".into()))
                }
            }
            Err(Errno(libc::ENOENT)) => staged_skip(
                size,
                "the daemon stopped while moving it into the store, and it is not there".into(),
            ),
            Err(e) => return Err(io("open a staged pre-image")(e)),
        };
        Ok(Some(pre))
    }

    /// The pre-image of capture `seq` while it is still `Staged`, and its size.
    fn staged_pre(&self, seq: Seq) -> Option<(&PreImage, u64)> {
        let i = self
            .index
            .captures
            .binary_search_by_key(&seq, |c| c.seq)
            .ok()?;
        match &self.index.captures[i].pre {
            pre @ PreImage::Staged { size, .. } => Some((pre, *size)),
            _ => None,
        }
    }

    /// Records what staged pre-images became when their bytes were stored by the caller, outside
    /// the store lock: `(capture seq, inode of the staged file read, blob)`, all staged in
    /// journal `epoch`. One still pending
    /// with that inode is resolved (one journal append for all); the rest are left as they are
    /// (resolved meanwhile, or not this file). Returns the seqs resolved, whose staged files
    /// the caller may now remove.
    pub fn record_stored_stages(
        &mut self,
        epoch: Epoch,
        stored: Vec<StoredStage>,
    ) -> Result<Vec<Seq>, StoreError> {
        if epoch != self.epoch {
            // Renumbered by a prune since they were staged, which stored them itself first.
            return Ok(Vec::new());
        }
        let mut records = Vec::new();
        let mut done = Vec::new();
        for StoredStage {
            seq,
            ino,
            blob,
            xattrs,
        } in stored
        {
            if self.index.pending.get(&seq) != Some(&ino) {
                continue;
            }
            if let Some(pre) = self
                .staged_pre(seq)
                .and_then(|(p, _)| p.stored_as(blob.id, blob.size, Some(xattrs)))
            {
                records.push(Record::Staged { capture: seq, pre });
                done.push(seq);
            }
        }
        if !records.is_empty() {
            self.append_all(records)?;
        }
        Ok(done)
    }

    /// Resolves every pending staged pre-image (before anything reads the index as a whole).
    /// One that cannot be stored stays pending, its bytes in `staged/`, and is logged.
    pub fn settle(&mut self) {
        let pending: Vec<Seq> = self.index.pending.keys().copied().collect();
        for seq in pending {
            if let Err(e) = self.resolve_stage(seq) {
                log::warn!(target: "ckpt::store", "staged pre-image {seq} not stored yet: {e}");
            }
        }
    }

    /// Resolves the staged pre-image of host inode `ino`, if one is pending: before a
    /// descriptor that could write that inode is handed out.
    pub fn settle_inode(&mut self, ino: u64) -> Result<(), StoreError> {
        if self.index.pending.is_empty() {
            return Ok(());
        }
        let seqs: Vec<Seq> = self
            .index
            .pending
            .iter()
            .filter(|(_, i)| **i == ino)
            .map(|(s, _)| *s)
            .collect();
        for seq in seqs {
            self.resolve_stage(seq)?;
        }
        Ok(())
    }

    /// Pending staged pre-images whose file never reached `staged/` (the daemon stopped between
    /// the record and the rename): the file is still at its path, the same inode, and nothing
    /// has written it since (no mount served the folder meanwhile), so it is read from there.
    /// The path is resolved beneath `root` without following any symlink.
    pub(super) fn recover_unmoved(&mut self, root: BorrowedFd<'_>) {
        let pending: Vec<Seq> = self.index.pending.keys().copied().collect();
        let mut records = Vec::new();
        for seq in pending {
            if sys::lstatat(self.staged.as_fd(), &Self::staged_name(seq)).is_ok() {
                continue;
            }
            let Ok(i) = self.index.captures.binary_search_by_key(&seq, |c| c.seq) else {
                continue;
            };
            let c = &self.index.captures[i];
            if !matches!(c.pre, PreImage::Staged { .. }) {
                continue;
            }
            let read = open_unmoved(root, &c.path, &c.pre).and_then(|(fd, st)| {
                let blob = self.blobs.put_fd_sized(fd.as_fd(), st.st_size as u64)?;
                Ok((blob, xattrs::read_all(Via::Open(fd.as_fd()))?))
            });
            if let Some(pre) = read
                .ok()
                .and_then(|(b, x)| c.pre.stored_as(b.id, b.size, Some(x)))
            {
                log::info!(target: "ckpt::store", "{}: its pre-image was never moved into the store; stored from the folder", c.path);
                records.push(Record::Staged { capture: seq, pre });
            }
        }
        if !records.is_empty()
            && let Err(e) = self.append_all(records)
        {
            log::warn!(target: "ckpt::store", "recording recovered pre-images failed: {e}");
        }
    }

    /// Removes the files in `staged/` that no pending capture waits for (their `staged`
    /// record was written, the unlink was not).
    pub(super) fn remove_stray_stages(&self) {
        let Ok(list) = sys::reopen(self.staged.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY) else {
            return;
        };
        for e in sys::read_dir_all(list.as_fd(), false).unwrap_or_default() {
            let seq = std::str::from_utf8(&e.name)
                .ok()
                .and_then(|n| n.parse::<u64>().ok())
                .map(Seq::new);
            if seq.is_some_and(|s| self.index.pending.contains_key(&s)) {
                continue;
            }
            if let Ok(name) = CString::new(e.name) {
                let _ = sys::unlinkat(self.staged.as_fd(), &name, 0);
            }
        }
    }
}
