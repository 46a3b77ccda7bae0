//! One path at a time, through descriptors that never follow a symlink: a path is removed
//! ([`remove_step`]), given its recorded state ([`restore_step`]), or linked to the first name
//! of its hard-link group ([`link_step`]). A path that already holds its recorded state is
//! left as it is ([`Slot::matches`], the rule a dry run's preview uses too). Whatever is not
//! rewritten in place is built as a temp file (`.ckpt-rewind-*`) beside the path, given its
//! content and attributes, and renamed over it, so a path never holds a half-restored file.
//! Kept apart from `apply.rs`, which decides the order, because this is where the syscalls that
//! give a path its state are made (`apply.rs` only sets directory modes and sweeps old temp
//! files).
//!
//! I/O: all of it changes the folder (but [`Slot::matches`], which only reads it), beneath the
//! directory `resolve.rs` opens; blobs are read from the store.

use super::plan::{MatchRule, Step};
use super::resolve::{Parents, cname, open_parent};
use super::step::{Cause, Node, Op, Outcome, Rewrite, StepError, StepResult, sys_err};
use crate::identity::{FileId, Same};
use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::{PreImage, Xattr};
use crate::sys::{self, Errno};
use crate::xattrs::{self, Via};

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Removes whatever is at `path` (unchanged when nothing was there).
pub(super) fn remove_step(parents: &mut Parents<'_>, path: &RelPath) -> StepResult<Outcome> {
    let Some(parent) = parent_for_removal(parents, path)? else {
        return Ok(Outcome::Unchanged);
    };
    remove_tree(parent, &cname(path))
        .map(Outcome::changed_if)
        .map_err(|e| sys_err(Op::Remove)(e).on(path))
}

/// The directory holding `path`, for its removal; `None` when the path cannot stand (its
/// parent is missing or not a directory), an error when its parent cannot be reached but
/// something stands there (behind a symlinked parent, say).
pub(super) fn parent_for_removal<'p>(
    parents: &'p mut Parents<'_>,
    path: &RelPath,
) -> StepResult<Option<BorrowedFd<'p>>> {
    let root = parents.root();
    match parents.open(path) {
        Ok(p) => Ok(Some(p)),
        // A missing parent means the path is already absent.
        Err(_)
            if sys::open_beneath(root, &path.to_cstring(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                .is_err() =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Removes `name` in `dir` and, if it is a directory, everything below it; never follows links.
pub fn remove_tree(dir: BorrowedFd<'_>, name: &CStr) -> Result<bool, Errno> {
    let st = match sys::lstatat(dir, name) {
        Ok(st) => st,
        Err(Errno(libc::ENOENT)) => return Ok(false),
        Err(e) => return Err(e),
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        if !as_root() && st.st_mode & 0o700 != 0o700 && st.st_uid == sys::geteuid() {
            // A user's daemon lists and empties only a directory its owner may: one a turn
            // made read-only is opened up first (it goes, so its mode does not matter).
            let p = sys::openat(
                dir,
                name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            sys::fchmod_any(p.as_fd(), (st.st_mode & 0o7777) | 0o700)?;
        }
        let d = sys::openat(
            dir,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        for e in sys::read_dir_all(d.as_fd(), false)? {
            let c = CString::new(e.name).map_err(|_| Errno(libc::EINVAL))?;
            remove_tree(d.as_fd(), &c)?;
        }
        sys::unlinkat(dir, name, libc::AT_REMOVEDIR)?;
    } else {
        sys::unlinkat(dir, name, 0)?;
    }
    Ok(true)
}

/// Opens the regular file `name` in `dir` for writing in place. A user's daemon may not open
/// a file its owner made read-only (a group of hard links whose mode is 0500, say), which
/// root's may: the owner gives itself write permission first, and the restore sets the
/// file's recorded mode right after writing (its mode is given back if the open still fails).
fn open_in_place(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    let flags = libc::O_WRONLY | libc::O_NOFOLLOW;
    match sys::openat(dir, name, flags, 0) {
        Err(Errno(libc::EACCES)) if !as_root() => {
            let p = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
            let st = sys::fstat(p.as_fd())?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != sys::geteuid() {
                return Err(Errno(libc::EACCES));
            }
            let mode = st.st_mode & 0o7777;
            sys::fchmod_any(p.as_fd(), mode | libc::S_IWUSR)?;
            sys::openat(dir, name, flags, 0).inspect_err(|_| {
                let _ = sys::fchmod_any(p.as_fd(), mode);
            })
        }
        r => r,
    }
}

/// Names of a rewind's temp files, in the directory of the path they replace.
pub(super) const TEMP_PREFIX: &str = ".ckpt-rewind-";

/// A new temp file name: [`TEMP_PREFIX`], this process's id and a counter.
fn temp_name() -> CString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("{TEMP_PREFIX}{}-{n}", std::process::id())).unwrap_or_default()
}

/// Whether this process runs as root, asked once: only root may give files away, so only then
/// are owners restored and compared.
fn as_root() -> bool {
    static ROOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ROOT.get_or_init(|| sys::geteuid() == 0)
}

/// Gives the inode behind `fd` its owner (as root: only root may give files away; as a user
/// the files stay ours, which is what they were), then its extended attributes, then its mode:
/// a chown clears set-id bits and capabilities, and an ACL sets the group bits, so the mode
/// goes last. `xattrs: None` (a record that did not say) leaves the attributes as they are.
/// What already holds its recorded value is not set again: a chown or chmod is a journaled
/// inode update on the host, two of them a file in a large rewind (docs/BENCHMARKS.md).
/// `known`: the inode's `fstat`, when the caller has one that still holds (else it is asked).
fn set_attributes(
    fd: BorrowedFd<'_>,
    via: Via<'_>,
    owner: (u32, u32),
    xattrs: Option<&[Xattr]>,
    mode: Option<u32>,
    known: Option<&libc::stat>,
) -> StepResult<()> {
    let stat = || sys::fstat(fd).map_err(sys_err(Op::Stat));
    let mut st = match known {
        Some(st) => *st,
        None => stat()?,
    };
    let mut changed = false;
    if as_root() && (st.st_uid, st.st_gid) != owner {
        sys::fchown(fd, owner.0, owner.1).map_err(sys_err(Op::SetOwner))?;
        changed = true;
    }
    if let Some(x) = xattrs {
        changed |= xattrs::apply(via, x).map_err(sys_err(Op::SetXattrs))?;
    }
    if let Some(mode) = mode {
        if changed {
            // The chown or an ACL may have changed the mode bits just read.
            st = stat()?;
        }
        if st.st_mode & 0o7777 != mode {
            sys::fchmod_any(fd, mode).map_err(sys_err(Op::SetMode))?;
        }
    }
    Ok(())
}

/// Owner, extended attributes and mode (see [`set_attributes`]) for `name` in `dir`, reached
/// through an `O_PATH` descriptor that never follows it (directories, symlinks, FIFOs).
fn set_attributes_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    what: Node,
    (owner, xattrs, mode): ((u32, u32), Option<&[Xattr]>, Option<u32>),
) -> StepResult<()> {
    let fd = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
        .map_err(sys_err(Op::OpenNode(what)))?;
    set_attributes(fd.as_fd(), Via::Path(fd.as_fd()), owner, xattrs, mode, None)
}

/// Whether what stands at `name` (its `lstat` is `st`) already has the owner, mode and extended
/// attributes `target` records (`mode: None` for symlinks).
fn attributes_match(
    dir: BorrowedFd<'_>,
    name: &CStr,
    st: &libc::stat,
    owner: (u32, u32),
    mode: Option<u32>,
    xattrs: Option<&[Xattr]>,
) -> bool {
    owner_and_mode_match(st, owner, mode)
        && xattrs.is_none_or(|want| {
            sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
                .is_ok_and(|fd| xattrs_are(Via::Path(fd.as_fd()), want))
        })
}

/// Whether the extended attributes read through `via` are exactly `want` (a failed read
/// counts as not).
fn xattrs_are(via: Via<'_>, want: &[Xattr]) -> bool {
    xattrs::read_all(via).is_ok_and(|now| now == want)
}

/// Whether `st` has the owner (as root only: a user's files are all the user's) and the mode
/// (when one is given) of a target.
fn owner_and_mode_match(st: &libc::stat, owner: (u32, u32), mode: Option<u32>) -> bool {
    (!as_root() || (st.st_uid, st.st_gid) == owner) && mode.is_none_or(|m| st.st_mode & 0o7777 == m)
}

/// Restores one path (unchanged when it already matched). With [`Rewrite::Always`], it is
/// written even if it matches now (the run decided so before it began, as its preview did).
pub(super) fn restore_step(
    parents: &mut Parents<'_>,
    store: &Store,
    step: &Step,
    rewrite: Rewrite,
    dir_modes: &mut Vec<(RelPath, u32)>,
    renewed: &mut Vec<crate::identity::Renewal>,
) -> StepResult<Outcome> {
    restore_at(parents, store, step, rewrite, (dir_modes, renewed)).map_err(|e| e.on(&step.path))
}

/// [`restore_step`], its error not yet naming the path.
fn restore_at(
    parents: &mut Parents<'_>,
    store: &Store,
    step: &Step,
    rewrite: Rewrite,
    (dir_modes, renewed): (&mut Vec<(RelPath, u32)>, &mut Vec<crate::identity::Renewal>),
) -> StepResult<Outcome> {
    let parent = parents.open(&step.path)?;
    let name = cname(&step.path);
    let mut at = Slot::at(parent, &name, &step.target)?;
    at.rewrite = rewrite;
    at.rule = step.rule;
    if let Some(e) = cannot_restore(&step.target) {
        return Err(e);
    }
    match &step.target {
        // Answered by `cannot_restore` above.
        PreImage::Absent | PreImage::Skipped { .. } | PreImage::Staged { .. } => {
            Err(StepError::new(Op::Target, Cause::AbsentTarget))
        }
        PreImage::Dir {
            mode,
            uid,
            gid,
            xattrs,
        } => {
            let outcome = at.restore_dir((*uid, *gid), xattrs.as_deref())?;
            dir_modes.push((step.path.clone(), *mode));
            Ok(outcome)
        }
        PreImage::File {
            blob,
            mode,
            uid,
            gid,
            xattrs,
            ..
        } => at.restore_file(store, blob, (*uid, *gid), *mode, xattrs.as_deref(), renewed),
        PreImage::Symlink {
            target,
            uid,
            gid,
            xattrs,
            ..
        } => at.restore_symlink(&target.0, (*uid, *gid), xattrs.as_deref(), renewed),
        PreImage::Fifo {
            mode,
            uid,
            gid,
            xattrs,
        } => at.restore_fifo((*uid, *gid), *mode, xattrs.as_deref(), renewed),
    }
}

/// Why `target` cannot be restored at all, as the run and its preview both say it: a capture
/// that was skipped, a staged pre-image never stored, or a target that is no state to give
/// (`None`: it can be restored).
pub(super) fn cannot_restore(target: &PreImage) -> Option<StepError> {
    let cause = match target {
        PreImage::Absent => Cause::AbsentTarget,
        PreImage::Skipped { reason, .. } => Cause::Skipped(reason.clone()),
        // Every staged pre-image is stored before a rewind plans; one left is a journal that
        // never resolved it.
        PreImage::Staged { .. } => Cause::NeverStored,
        PreImage::Dir { .. }
        | PreImage::File { .. }
        | PreImage::Symlink { .. }
        | PreImage::Fifo { .. } => return None,
    };
    Some(StepError::new(Op::Target, cause))
}

/// A path [`restore_step`] is giving its recorded state (or a dry run is looking at): the
/// directory holding it, its name there, what stands there now, and the record.
pub(super) struct Slot<'a> {
    dir: BorrowedFd<'a>,
    name: &'a CStr,
    /// The `lstat` of what stands at the path now, if anything.
    current: Option<libc::stat>,
    /// Its kind (`S_IF*`).
    cur_kind: Option<u32>,
    /// The state the path must be given.
    target: &'a PreImage,
    /// Whether it is written even when it matches (decided before the run began).
    rewrite: Rewrite,
    /// What makes it match (the plan's [`MatchRule`] of the step).
    pub(super) rule: MatchRule,
}

impl<'a> Slot<'a> {
    /// `name` in `dir` as it is now, to be given `target`.
    pub(super) fn at(
        dir: BorrowedFd<'a>,
        name: &'a CStr,
        target: &'a PreImage,
    ) -> StepResult<Self> {
        let current = match sys::lstatat(dir, name) {
            Ok(st) => Some(st),
            Err(Errno(libc::ENOENT)) => None,
            Err(e) => return Err(sys_err(Op::Stat)(e)),
        };
        Ok(Self {
            dir,
            name,
            current,
            cur_kind: current.map(|st| st.st_mode & libc::S_IFMT),
            target,
            rewrite: Rewrite::UnlessMatching,
            rule: MatchRule::Content,
        })
    }

    /// Whether what stands at the path already is its target, so that restoring it changes
    /// nothing and it is left as it is: the same kind, owner, mode and extended attributes,
    /// and the same symlink target or the same bytes. One rule for the run and its dry run, so
    /// a preview lists exactly what the run then changes. A file of a hard-link group matches
    /// only where it holds the very inode recorded (proven by its identity): anywhere else only
    /// restoring the group makes its names one inode again. Nor does a file that was alone and
    /// now shares its inode with another name (a rewind linked it there): only a fresh file
    /// parts them again.
    pub(super) fn matches(&self) -> bool {
        if self.rewrite == Rewrite::Always {
            return false;
        }
        match self.target {
            PreImage::Dir {
                mode,
                uid,
                gid,
                xattrs,
            } => {
                self.cur_kind == Some(libc::S_IFDIR)
                    && self.attributes_match((*uid, *gid), Some(*mode), xattrs.as_deref())
            }
            PreImage::Symlink {
                target,
                uid,
                gid,
                xattrs,
                ..
            } => {
                self.links_to(&target.0)
                    && self.attributes_match((*uid, *gid), None, xattrs.as_deref())
            }
            PreImage::Fifo {
                mode,
                uid,
                gid,
                xattrs,
            } => {
                self.cur_kind == Some(libc::S_IFIFO)
                    && self.attributes_match((*uid, *gid), Some(*mode), xattrs.as_deref())
            }
            PreImage::File {
                blob,
                size,
                mode,
                uid,
                gid,
                nlink,
                xattrs,
                ..
            } => {
                // A file alone. Where the recorded inode was once a hard link of other names
                // (`MatchRule::SameInode`), only on that inode: a rewound turn that replaced the
                // file by one with the same bytes (`git checkout`, a save by rename) left an
                // inode older records of those names cannot find, so the path is written afresh
                // and the new file stands for the recorded inode (a renewal), as any recreated
                // file does; the inode found there may be known to other records, a fresh one
                // to none. Elsewhere any inode with the bytes will do (`sed -i` that put them
                // back), and the file keeps its inode and times.
                let alone = *nlink <= 1
                    && self.current.is_some_and(|st| st.st_nlink == 1)
                    && (self.rule == MatchRule::Content || !self.proven_other());
                // A name of a hard-link group that holds the very inode recorded: the group's
                // other names are linked to it by their own steps, so with the same bytes and
                // attributes it is left as it is (a capture that changed nothing, such as a
                // failed rename of a tree holding it, rewrites no file).
                let in_group = *nlink > 1 && self.proven_same(libc::S_IFREG);
                (alone || in_group)
                    && self.cur_kind == Some(libc::S_IFREG)
                    && self.current.is_some_and(|st| {
                        st.st_size as u64 == *size
                            && owner_and_mode_match(&st, (*uid, *gid), Some(*mode))
                    })
                    && self.holds_bytes_and_xattrs(blob, xattrs.as_deref())
            }
            PreImage::Absent | PreImage::Staged { .. } | PreImage::Skipped { .. } => false,
        }
    }

    /// What `lstat` gave for the path when the slot was made (`None`: nothing stood there).
    pub(super) fn current(&self) -> Option<libc::stat> {
        self.current
    }

    /// Whether a directory stands at the path.
    pub(super) fn is_dir(&self) -> bool {
        self.cur_kind == Some(libc::S_IFDIR)
    }

    /// Whether the path is a symlink to `link`.
    fn links_to(&self, link: &[u8]) -> bool {
        self.cur_kind == Some(libc::S_IFLNK)
            && sys::readlinkat(self.dir, self.name).ok().as_deref() == Some(link)
    }

    /// Whether the regular file at the path holds exactly the bytes of `blob` and the extended
    /// attributes `xattrs` (read without moving its access time, through one descriptor: the
    /// bytes first, which a rewound file most often differs in; any error counts as not).
    fn holds_bytes_and_xattrs(&self, blob: &BlobId, xattrs: Option<&[Xattr]>) -> bool {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let Ok(fd) = sys::openat_noatime(self.dir, self.name, flags) else {
            return false;
        };
        let Some(st) = sys::fstat(fd.as_fd()).ok().filter(|st| {
            self.current
                .is_some_and(|cur| (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino))
        }) else {
            return false;
        };
        BlobId::of_file_sized(fd.as_fd(), st.st_size as u64).is_ok_and(|id| id == *blob)
            && xattrs.is_none_or(|want| xattrs_are(Via::Open(fd.as_fd()), want))
    }

    /// Whether the inode at the path is proven another than the one the record names (a
    /// record without an identity, from store version 1, proves nothing either way).
    fn proven_other(&self) -> bool {
        let (Some(was), Some(st)) = (self.target.file_id(), self.current) else {
            return false;
        };
        was.same_as(&FileId::read_at(self.dir, self.name, 0, st.st_ino)) == Same::No
    }

    /// Whether the inode at the path is proven to be the one the record names.
    fn proven_same(&self, kind: u32) -> bool {
        let recorded = self.target.file_id();
        self.current.is_some_and(|st| {
            self.cur_kind == Some(kind)
                && recorded
                    .is_some_and(|id| id.is(&FileId::read_at(self.dir, self.name, 0, st.st_ino)))
        })
    }

    /// Whether what stands at the path has these attributes (see [`attributes_match`]).
    fn attributes_match(
        &self,
        owner: (u32, u32),
        mode: Option<u32>,
        xattrs: Option<&[Xattr]>,
    ) -> bool {
        self.current
            .is_some_and(|st| attributes_match(self.dir, self.name, &st, owner, mode, xattrs))
    }

    /// Puts the temp file `tmp` over the path (see [`Install::finish`]).
    fn install(
        &self,
        tmp: &CStr,
        finished: StepResult<()>,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> StepResult<Outcome> {
        let put = Install {
            dir: self.dir,
            tmp,
            name: self.name,
            cur_kind: self.cur_kind,
        };
        put.finish(finished, self.target, renewed)
    }

    /// A directory: made where there is none (whatever stands there removed first), then given
    /// its owner and attributes unless they match. Its mode is set later, with every other
    /// directory's (`set_dir_modes` in `apply.rs`).
    fn restore_dir(&self, owner: (u32, u32), xattrs: Option<&[Xattr]>) -> StepResult<Outcome> {
        let exists = self.cur_kind == Some(libc::S_IFDIR);
        let matched = self.matches();
        if !exists {
            if self.current.is_some() {
                remove_tree(self.dir, self.name).map_err(sys_err(Op::RemoveExisting))?;
            }
            sys::mkdirat(self.dir, self.name, 0o700).map_err(sys_err(Op::CreateDir))?;
        }
        if !matched {
            // The mode is set with the others, last (see `set_dir_modes`).
            let attrs = (owner, xattrs, None);
            set_attributes_at(self.dir, self.name, Node::Dir, attrs)?;
        }
        Ok(Outcome::changed_if(!matched))
    }

    /// A regular file with the bytes of `blob`: written in place when the inode there is proven
    /// the recorded one, else written into a fresh file that replaces the path.
    fn restore_file(
        &self,
        store: &Store,
        blob: &BlobId,
        owner: (u32, u32),
        mode: u32,
        xattrs: Option<&[Xattr]>,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> StepResult<Outcome> {
        if self.matches() {
            // The same bytes and attributes: rewriting would change nothing but its times.
            return Ok(Outcome::Unchanged);
        }
        let attrs = |fd: BorrowedFd<'_>, known: Option<&libc::stat>| {
            set_attributes(fd, Via::Open(fd), owner, xattrs, Some(mode), known)
        };
        if self.proven_same(libc::S_IFREG) {
            // In place: the inode (and every hard link to it) keeps its identity.
            // Written over, then cut to length, not opened with O_TRUNC: ext4 takes a
            // truncation to zero for a replace-by-truncate and starts writing the file back
            // when it is closed, a block write per file in a large rewind (docs/BENCHMARKS.md).
            let fd = open_in_place(self.dir, self.name).map_err(sys_err(Op::OpenForWriting))?;
            let st = sys::fstat(fd.as_fd()).map_err(sys_err(Op::Stat))?;
            if self
                .current
                .is_none_or(|cur| (cur.st_dev, cur.st_ino) != (st.st_dev, st.st_ino))
            {
                return Err(StepError::new(Op::Write, Cause::ChangedMeanwhile));
            }
            let written = copy_blob(store, blob, fd.as_fd()).map_err(sys_err(Op::Write))?;
            if st.st_size as u64 > written {
                sys::ftruncate(fd.as_fd(), written).map_err(sys_err(Op::Truncate))?;
            }
            // The write and the cut change neither owner nor mode, except that they drop the
            // set-id bits of a writer without CAP_FSETID: only then is the inode asked again.
            let setid = st.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0;
            attrs(fd.as_fd(), (!setid).then_some(&st))?;
            return Ok(Outcome::Changed);
        }
        // Anything else, a file whose identity cannot be proven included, is replaced by a
        // fresh file: never a write into an inode that may be another file.
        let tmp = temp_name();
        let fd = sys::openat(
            self.dir,
            &tmp,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW,
            0o600,
        )
        .map_err(sys_err(Op::Create))?;
        let written = copy_blob(store, blob, fd.as_fd())
            .map_err(sys_err(Op::Write))
            .and_then(|_| attrs(fd.as_fd(), None));
        self.install(&tmp, written, renewed)
    }

    /// A symlink to `link`: left as it is when it matches; given its owner and attributes
    /// only when it already points there and is proven the recorded inode; else replaced by a
    /// fresh symlink.
    fn restore_symlink(
        &self,
        link: &[u8],
        owner: (u32, u32),
        xattrs: Option<&[Xattr]>,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> StepResult<Outcome> {
        if self.matches() {
            return Ok(Outcome::Unchanged);
        }
        if self.links_to(link) && self.proven_same(libc::S_IFLNK) {
            // The recorded inode (hard links included): its owner and attributes only.
            let attrs = (owner, xattrs, None);
            set_attributes_at(self.dir, self.name, Node::Symlink, attrs)?;
            return Ok(Outcome::Changed);
        }
        let tmp = temp_name();
        let t = CString::new(link.to_vec())
            .map_err(|_| StepError::new(Op::CreateSymlink, Cause::NulInTarget))?;
        sys::symlinkat(&t, self.dir, &tmp).map_err(sys_err(Op::CreateSymlink))?;
        let attrs = (owner, xattrs, None);
        let finished = set_attributes_at(self.dir, &tmp, Node::NewSymlink, attrs);
        self.install(&tmp, finished, renewed)
    }

    /// A FIFO: left as it is when it matches, else replaced by a fresh one.
    fn restore_fifo(
        &self,
        owner: (u32, u32),
        mode: u32,
        xattrs: Option<&[Xattr]>,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> StepResult<Outcome> {
        if self.matches() {
            return Ok(Outcome::Unchanged);
        }
        let tmp = temp_name();
        sys::mknodat(self.dir, &tmp, libc::S_IFIFO | (mode & 0o7777), 0)
            .map_err(sys_err(Op::CreateFifo))?;
        let attrs = (owner, xattrs, Some(mode));
        let finished = set_attributes_at(self.dir, &tmp, Node::NewFifo, attrs);
        self.install(&tmp, finished, renewed)
    }
}

/// A temp file a restore made next to the path it replaces.
struct Install<'a> {
    dir: BorrowedFd<'a>,
    tmp: &'a CStr,
    name: &'a CStr,
    /// What stands at `name` now (`S_IF*`), if anything.
    cur_kind: Option<u32>,
}

impl Install<'_> {
    /// When the temp file was `finished` (content and attributes), moves it over the path and
    /// notes the renewal of the record's identity; else removes it and gives the error.
    fn finish(
        &self,
        finished: StepResult<()>,
        target: &PreImage,
        renewed: &mut Vec<crate::identity::Renewal>,
    ) -> StepResult<Outcome> {
        if let Err(e) = finished {
            let _ = sys::unlinkat(self.dir, self.tmp, 0);
            return Err(e);
        }
        replace_with(self.dir, self.tmp, self.name, self.cur_kind)?;
        note_renewal(self.dir, self.name, target, renewed);
        Ok(Outcome::Changed)
    }
}

/// A fresh file now stands for the inode `target` records: a candidate renewal, kept by the
/// apply stage when, at its end, that inode is proven to have no name left (records of its
/// other names then mean the new file, see [`crate::identity::Renewal`]). An inode that still
/// has a name then is itself what those records mean. Checked at the end, not here: a later
/// step may replace the inode's last name (a file that becomes a directory).
fn note_renewal(
    dir: BorrowedFd<'_>,
    name: &CStr,
    target: &PreImage,
    renewed: &mut Vec<crate::identity::Renewal>,
) {
    if let (Some(was), Ok(now)) = (target.file_id(), FileId::of_name(dir, name))
        && was != now
    {
        renewed.push(crate::identity::Renewal { was, now });
    }
}

/// Moves `tmp` over `name`, removing a directory that stands there first.
fn replace_with(
    dir: BorrowedFd<'_>,
    tmp: &CStr,
    name: &CStr,
    cur_kind: Option<u32>,
) -> StepResult<Outcome> {
    if cur_kind == Some(libc::S_IFDIR)
        && let Err(e) = remove_tree(dir, name)
    {
        let _ = sys::unlinkat(dir, tmp, 0);
        return Err(sys_err(Op::RemoveDirThere)(e));
    }
    // A rewind's installs are not synced one by one: the journal's `rewind_done` record, written
    // after them, is what a crash is judged by (an unfinished rewind is completed at the next
    // open).
    crate::tree::rename_into_place(
        dir,
        tmp,
        dir,
        name,
        crate::tree::Durability::Lazy,
        "rewind-before-rename",
    )
    .map_err(sys_err(Op::MoveIntoPlace))?;
    Ok(Outcome::Changed)
}

/// Makes `path` a hard link of the inode at `first` (a temp link moved over whatever stands
/// there); nothing changes when the two names are one inode already.
pub(super) fn link_step(
    parents: &mut Parents<'_>,
    first: &RelPath,
    path: &RelPath,
) -> StepResult<Outcome> {
    let fparent = open_parent(parents.root(), first)?;
    let parent = parents.open(path)?;
    let (fname, name) = (cname(first), cname(path));
    let fst =
        sys::lstatat(fparent.as_fd(), &fname).map_err(|e| sys_err(Op::StatLinked)(e).on(first))?;
    let cur = sys::lstatat(parent, &name).ok();
    // Two names that exist at once with one number and device are one inode.
    if cur.is_some_and(|st| st.st_ino == fst.st_ino && st.st_dev == fst.st_dev) {
        return Ok(Outcome::Unchanged);
    }
    let tmp = temp_name();
    sys::linkat(fparent.as_fd(), &fname, parent, &tmp)
        .map_err(|e| sys_err(Op::Link)(e).on(path))?;
    replace_with(parent, &tmp, &name, cur.map(|st| st.st_mode & libc::S_IFMT))
        .map_err(|e| e.on(path))
}

/// Writes a blob's original bytes into `dst` from offset 0 (decompressing when stored so);
/// returns how many it wrote.
fn copy_blob(store: &Store, id: &BlobId, dst: BorrowedFd<'_>) -> Result<u64, Errno> {
    let mut off = 0u64;
    store.blobs().read_blob(id, &mut |chunk| {
        crate::sys::write_all(dst, chunk, off)?;
        off += chunk.len() as u64;
        Ok(())
    })?;
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("a valid path")
    }

    #[test]
    fn a_step_says_what_it_was_doing_and_where() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("real")).expect("mkdir");
        std::os::unix::fs::symlink("real", dir.path().join("link")).expect("symlink");
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = crate::store::Store::for_test(root.as_fd()).expect("store");
        let mut parents = Parents::new(root.as_fd());
        // Beyond a symlinked parent: refused, never followed, with ELOOP kept.
        let e = parents.open(&p("link/f")).expect_err("refused");
        assert_eq!(e.op, Op::OpenParent);
        assert_eq!(e.path, Some(p("link/f")));
        assert_eq!(e.errno(), Errno(libc::ELOOP));
        assert_eq!(e.to_string(), "a parent directory is a symlink: refused");
        // Nothing to remove below a missing directory: unchanged, no error.
        let gone = remove_step(&mut parents, &p("missing/f")).expect("nothing there");
        assert_eq!(gone, Outcome::Unchanged);
        // A capture that was skipped cannot be restored, whatever the run decided.
        let step = Step {
            path: p("real/big"),
            target: PreImage::Skipped {
                was: "file".into(),
                size: 1 << 30,
                reason: "over --max-blob".into(),
            },
            rule: MatchRule::default(),
        };
        let (mut dirs, mut renewed) = (Vec::new(), Vec::new());
        let e = restore_step(
            &mut parents,
            &store,
            &step,
            Rewrite::Always,
            &mut dirs,
            &mut renewed,
        )
        .expect_err("not restorable");
        assert_eq!((e.op, e.path.clone()), (Op::Target, Some(p("real/big"))));
        assert_eq!(e.to_string(), "not restored: over --max-blob");
        assert!(!dir.path().join("real/big").exists());
    }
}
