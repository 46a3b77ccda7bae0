//! Turn switches and rewinds as the daemon runs them: the gate held exclusively, captures of
//! files held open for writing, names refreshed and the kernel's caches invalidated after.

use super::ctlfs::TurnControl;
use super::files::Handle;
use super::inode::{HostId, ROOT};
use super::resolve::Located;
use super::{CkptFs, FsResult, HostFs, cname};
use crate::capture::{HeldBy, TurnError, TurnStart};
use crate::identity::FileId;
use crate::ids::{NodeId, Turn};
use crate::ipc::JsonText;
use crate::relpath::RelPath;
use crate::rewind::{self, Report, RewindError};
use crate::sync::Mutex;
use crate::sys;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// A full rewind's report, and the same as the JSON text `.ckpt/rewind` now shows (the CLI's
/// answer is that text, not a second one).
pub struct Rewound {
    /// The report.
    pub report: Report,
    /// A whole rewind's report as JSON, kept for `.ckpt/rewind` (`None` for a partial one, or
    /// when it could not be encoded).
    pub text: Option<Arc<JsonText>>,
}

impl HostFs {
    /// Every name of every file held open for writing, each with its parent directory; a name
    /// that cannot be reached is its error, so the capture that needs it fails loudly.
    ///
    /// Collected before the store is locked, so that no table lock is taken under the store
    /// (`crate::sync`); the caller holds the gate exclusively, so no name changes between
    /// this and the captures.
    pub(super) fn held_for_write(&self) -> Vec<Held> {
        let mut nodes: HashMap<NodeId, Vec<HeldBy>> = HashMap::new();
        for h in self.lock_handles().values().filter(|h| h.writable) {
            let by = nodes.entry(h.node).or_default();
            if let Some(opener) = h.opener
                && !by.contains(&opener)
            {
                by.push(opener);
            }
        }
        let mut held = Vec::new();
        for (node, by) in nodes {
            match self.names(node) {
                Ok(names) => held.extend(names.into_iter().map(|l| (Ok(l), by.clone()))),
                Err(e) => held.push((Err(e), by)),
            }
        }
        held
    }

    /// After a rewind changed `changed` on the host: the inode table's names follow (a name
    /// the rewind replaced no longer belongs to the node it had), before anything reads names
    /// again (the held-open captures at the end of a rewind). Returns what the kernel must be
    /// told about each changed name.
    pub(super) fn refresh_names<'a>(
        &self,
        changed: impl Iterator<Item = &'a RelPath>,
    ) -> Vec<ChangedName> {
        let open = self.open_descriptors();
        let mut out = Vec::with_capacity(changed.size_hint().0);
        // The last directory opened for a name the table cannot reach: the changed paths of a
        // tree the kernel never saw (a large rewind after `rm -rf`) come directory by directory.
        let mut unreached = LastDir::default();
        for path in changed {
            let parts: Vec<&[u8]> = path.as_bytes().split(|b| *b == b'/').collect();
            let mut parent = Some(ROOT);
            let t = self.read_inodes();
            for part in &parts[..parts.len() - 1] {
                parent = parent.and_then(|p| t.child(p, OsStr::from_bytes(part)));
            }
            drop(t);
            let Some(parent) = parent else {
                // The kernel holds no node of the name's directory, so no entry of it; but it
                // may know the inode now at the name by another name (a hard link elsewhere,
                // rewritten in place), whose attributes and pages changed with it.
                let holder = self
                    .host_at(path, &mut unreached)
                    .and_then(|host| self.read_inodes().node_of(host));
                if holder.is_some() {
                    out.push(ChangedName {
                        node: None,
                        holder,
                        entry: None,
                    });
                }
                continue;
            };
            let name = path.file_name();
            let node = self.read_inodes().child(parent, name);
            let dir = self.dir_fd(parent).ok();
            let cname = cname(name).ok();
            let now = dir
                .as_ref()
                .zip(cname.as_ref())
                .and_then(|(d, c)| sys::lstatat(d.as_fd(), c).ok())
                .map(|st| HostId::of(&st));
            // The node mapped to the inode now at the name, when the kernel knows that inode
            // by another name only: a surviving link the rewind rewrote in place.
            let holder = now
                .and_then(|host| self.read_inodes().node_of(host))
                .filter(|h| Some(*h) != node);
            let mut kept = self.write_inodes().refresh(parent, name, now);
            // A rewind may give an open file back a name it had (a hard link relinked to the
            // inode a descriptor still holds). The kernel has not looked that name up, so
            // without this the node would not know it, and the capture of the file at the
            // next turn switch would miss it: later writes through the descriptor would then
            // survive a rewind to that turn under that name.
            if let (Some(host), Some(d), Some(c)) = (now, &dir, &cname) {
                let held = self.read_inodes().node_of(host);
                let fd = held.and_then(|node| Some((node, &open.get(&node)?.fd)));
                if let Some((node, fd)) = fd
                    && let Ok(named) = FileId::of_name(d.as_fd(), c)
                    && FileId::of_fd(fd.as_fd(), host.ino).is(&named)
                {
                    self.write_inodes().attach(parent, name, node);
                    kept = false;
                }
            }
            out.push(ChangedName {
                node,
                holder,
                entry: (!kept).then(|| (parent, name.to_os_string())),
            });
        }
        // Names below what the rewind removed or replaced are gone with it.
        self.write_inodes().prune_unreachable();
        out
    }

    /// The host inode at `path` now, when it is a hard link (a name the inode table cannot
    /// reach: only an inode with another name can have a node), reached from the folder's
    /// root through `last`, the directory the previous such path was in.
    fn host_at(&self, path: &RelPath, last: &mut LastDir) -> Option<HostId> {
        let parent = path.parent();
        if last.fd.is_none() || last.parent != parent {
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            last.fd = path.open_parent(self.root.as_fd(), flags).ok();
            last.parent = parent;
        }
        let st = sys::lstatat(last.fd.as_ref()?.as_fd(), &path.file_name_cstring()).ok()?;
        (st.st_nlink > 1 && st.st_mode & libc::S_IFMT != libc::S_IFDIR).then(|| HostId::of(&st))
    }

    /// One descriptor per node held open through a handle, to prove which inode a name
    /// refers to (taken before any inode-table lock: `crate::sync`).
    fn open_descriptors(&self) -> HashMap<NodeId, Arc<Handle>> {
        let mut out = HashMap::new();
        for h in self.lock_handles().values() {
            out.entry(h.node).or_insert_with(|| h.clone());
        }
        out
    }

    /// Tells the kernel what a rewind changed (after the gate is released: a request blocked
    /// on the gate may hold a directory lock in the kernel that these calls need).
    pub(super) fn invalidate(&self, changed: &[ChangedName]) {
        let Some(inv) = self.invalidator.get().cloned() else {
            return;
        };
        // Each parent's inode too: that drops the kernel's cached listing of the directory.
        // The entry invalidation alone marks the directory changed only when the kernel still
        // has a dentry for the name, which a file removed while held open leaves it without.
        // A name that kept its inode (a file rewritten in place, a directory given back its
        // attributes) changed neither its entry nor its directory's listing: its inode's
        // attributes and cached pages are all the kernel must drop (half the notifications
        // of a large rewind, docs/BENCHMARKS.md).
        //
        // Every node whose file may have changed also forgets whose bytes its pages are, so
        // that no later open keeps them (`CkptFs::keeps_kernel_pages`), whatever the kernel
        // read through a descriptor still open between the change and this call.
        let mut parents = std::collections::HashSet::new();
        for c in changed {
            for node in [c.node, c.holder].into_iter().flatten() {
                self.read_inodes().distrust_pages(node);
                inv.inval_inode(node);
            }
            if let Some((parent, name)) = &c.entry {
                inv.inval_entry(*parent, name);
                parents.insert(*parent);
            }
        }
        for parent in parents {
            inv.inval_inode(parent);
        }
    }
}

/// A directory opened by [`HostFs::host_at`], kept for the next name in it.
#[derive(Default)]
struct LastDir {
    /// Its path (`None`: the folder's root).
    parent: Option<RelPath>,
    fd: Option<OwnedFd>,
}

/// A name a rewind changed, as the kernel must be told of it.
pub(super) struct ChangedName {
    /// The node the kernel knew at the name before the rewind, if any.
    node: Option<NodeId>,
    /// Another node of the host inode at the name after the rewind (the kernel knows it by
    /// another name): its attributes and pages changed too when it was rewritten in place.
    holder: Option<NodeId>,
    /// The directory's node and the name, when the kernel's entry changed: `None` when the
    /// name still refers to its node's host inode (rewritten in place) or the kernel knows no
    /// node of its directory.
    entry: Option<(NodeId, OsString)>,
}

impl HostFs {
    /// After an operation that began a capture epoch (a rewind, a partial rewind, an undo, a
    /// redo): files still open for writing are captured for it, because their next writes need
    /// no `open`; one that cannot be is reported as failed (its next writes could not be undone).
    pub(super) fn capture_held_after(&self, report: &mut Report) {
        let held = self.held_for_write();
        let failed = self.capture.begin_turn_captures(&|f| visit_held(&held, f));
        for (path, e) in failed {
            let at = path.map_or(rewind::FailedAt::Unnamed, rewind::FailedAt::Path);
            log::warn!(target: "ckpt::rewind", "{}: held open for writing, not captured for the current turn: {e}", at);
            report.permanent.insert(at.clone());
            report.failed.push(rewind::Failure {
                path: at,
                reason: format!(
                    "held open for writing, and its state after the operation could not be captured for the current turn ({e}): later writes through that descriptor cannot be rewound"
                ),
            });
        }
    }
}

/// The turns as the daemon changes them: a turn switch, a rewind (whole or partial), an undo,
/// a redo or a relabel runs here, with every other change of the folder held back (the
/// folder side's gate taken exclusively), then the folder side's names refreshed, its files
/// held open for writing captured for the current turn and the kernel's caches invalidated.
/// It keeps the last whole rewind's report, which `.ckpt/rewind` shows.
pub(super) struct Turns {
    /// The last full rewind's report, as `.ckpt/rewind` shows it and as it was answered.
    last_report: Mutex<Option<Arc<JsonText>>>,
}

impl Turns {
    pub(super) fn new() -> Self {
        Self {
            last_report: Mutex::leaf(None),
        }
    }

    /// The last whole rewind's report as it was answered.
    pub(super) fn last_report(&self) -> Option<Arc<JsonText>> {
        self.last_report.lock().clone()
    }

    /// Runs `f` with every capture held back: the gate taken exclusively, as for a turn
    /// switch or a rewind. For a prune, which removes every blob no record names: a request's
    /// capture stores its pre-image's bytes before it takes the store's lock to record them,
    /// so a prune between the two would remove the bytes of a capture about to be recorded.
    pub(super) fn with_captures_held<T>(&self, host: &HostFs, f: impl FnOnce() -> T) -> T {
        let _gate = host.exclusive_gate();
        f()
    }

    /// Begins the turn `start` says; returns whether the turn changed.
    pub(super) fn begin_turn(&self, host: &HostFs, start: TurnStart) -> Result<bool, TurnError> {
        let _gate = host.exclusive_gate();
        let held = host.held_for_write();
        let begun = host.capture.begin_turn(start, &|f| visit_held(&held, f));
        host.refresh_turn_now();
        begun
    }

    /// Runs the rewind `req` (see [`rewind::run`]) while holding back every other mutation,
    /// then invalidates the kernel's caches for everything that changed. A whole rewind's
    /// report, written as JSON once, is what `.ckpt/rewind` shows from then on.
    pub(super) fn rewind(
        &self,
        host: &HostFs,
        req: &rewind::Request,
        progress: rewind::Progress<'_>,
    ) -> Result<Rewound, RewindError> {
        let max_blob = host.capture.max_blob();
        let dry_run = req.mode() == rewind::Mode::Preview;
        let report = self.change_folder(host, dry_run, &mut |root, store| {
            rewind::run(root, store, req, max_blob, progress)
        })?;
        if !req.whole() {
            return Ok(Rewound { report, text: None });
        }
        // Nothing in a report fails to encode (plain fields, string keys); were it to, the
        // rewind has happened all the same: `.ckpt/rewind` shows no report, and the CLI's
        // answer says it could not be encoded.
        let text = JsonText::of(&report)
            .map_err(|e| log::error!(target: "ckpt::rewind", "the rewind's report could not be written as JSON: {e}"))
            .ok();
        *self.last_report.lock() = text.clone();
        Ok(Rewound { report, text })
    }

    /// Runs an operation that changes the folder (`run`: a rewind, whole or partial, an undo or
    /// a redo) with the gate held exclusively, then refreshes names, captures the files held
    /// open for writing and tells the kernel what changed.
    pub(super) fn change_folder(
        &self,
        host: &HostFs,
        dry_run: bool,
        run: &mut dyn FnMut(
            BorrowedFd<'_>,
            &mut crate::store::Store,
        ) -> Result<Report, RewindError>,
    ) -> Result<Report, RewindError> {
        let report = {
            let _gate = host.exclusive_gate();
            let mut store = host.capture.lock();
            let report = run(host.root.as_fd(), &mut store)?;
            drop(store);
            let mut report = report;
            let mut refreshed = Vec::new();
            if !dry_run {
                let started = std::time::Instant::now();
                host.lock_dirs().map.clear();
                let failed = report.failed_not_changed();
                refreshed = host.refresh_names(report.changed.iter().chain(&failed));
                // Files still open for writing belong to the current turn from now on (the
                // operation began a capture epoch, `crate::store::ops`).
                host.capture_held_after(&mut report);
                host.lock_dirs().map.clear();
                host.refresh_turn_now();
                rewind::log_took("inode names refreshed", started);
            }
            (report, refreshed)
        };
        let (report, refreshed) = report;
        if !dry_run {
            let started = std::time::Instant::now();
            host.invalidate(&refreshed);
            rewind::log_took("kernel caches invalidated", started);
        }
        Ok(report)
    }
}

/// The turns as the control files see them: `.ckpt/turn` and `.ckpt/rewind` read and begin
/// turns and rewinds as the control socket does.
impl TurnControl for CkptFs {
    fn current_turn(&self) -> Turn {
        self.host.capture.current_turn()
    }

    fn last_report(&self) -> Option<Arc<JsonText>> {
        self.turns.last_report()
    }

    fn begin_turn(&self, start: TurnStart) -> Result<bool, TurnError> {
        self.turns.begin_turn(&self.host, start)
    }

    fn rewind(&self, req: &rewind::Request) -> Result<Rewound, RewindError> {
        self.turns.rewind(&self.host, req, &|_, _| {})
    }

    fn moments(&self) -> Vec<crate::moment::Candidate> {
        self.host.capture.lock().index().candidates()
    }
}

/// Passes each collected name of a file held open for writing to `f`, as the capture's
/// `OpenForWrite` visitor wants them.
fn visit_held(held: &[Held], f: &mut dyn FnMut(crate::capture::HeldName<'_>)) {
    for (name, by) in held {
        match name {
            Ok(l) => f(Ok((l.dir.as_fd(), &l.name, &l.path, by))),
            Err(e) => f(Err(e.errno())),
        }
    }
}

/// One name of a file held open for writing (or why it could not be reached), and who holds
/// it open.
pub(super) type Held = (FsResult<Located>, Vec<HeldBy>);
