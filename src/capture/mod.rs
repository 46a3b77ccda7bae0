//! The capture policy: the pre-image of a path is recorded once per (turn, path), before the
//! first change of that turn reaches the host.
//!
//! Invariant: the pre-image of a path is in the journal (and its blob in the store) before
//! the mutation that needs it reaches the host filesystem; if capture fails, the caller fails
//! the mutation with the capture's errno. Nothing here follows a symlink, opens a FIFO for
//! more than a non-blocking stat, or reads a device.
//!
//! [`Capturer`] (this file) is the policy over an open store: [`Capturer::ensure`] captures a
//! name, [`Capturer::ensure_open_file`] a regular file through a descriptor the caller holds,
//! [`Capturer::ensure_tree`] a subtree (before a rename). The rest is one job per file:
//! - `preimage.rs`: reading what a name is now ([`read_preimage`], [`read_open_file`],
//!   [`walk_tree`]); no policy, no lock;
//! - `stage/`: capturing a removed or renamed-over file's last name by moving its inode into
//!   the store ([`Capturer::stage`]), its bytes stored later by the `ckpt-stager` thread;
//! - `turn.rs`: beginning a turn ([`Capturer::begin_turn`]) and capturing the files held open
//!   for writing across it.
//!
//! Every item is re-exported here: callers name `crate::capture::X`, never a submodule.
//!
//! The lock: every capture checks "does this turn have the path already?" and appends its
//! record under the store's mutex, so two requests on one path record it once. A request's
//! capture ([`Capturer::ensure`], [`Capturer::ensure_open_file`]) reads, hashes and stores the
//! pre-image's bytes between two short holds, outside the mutex; that stays exact because
//! every mutation of a path follows a recorded capture of it, and the filesystem's gate (held
//! shared around a request's capture and mutation) keeps turn switches out. Tree captures and
//! the turn switch's captures still read under it; a staged file's bytes are read by the stager
//! outside it (that file has no other name and no open descriptor). Lock order: the store,
//! then the stager queue; the actor classifier (`actors.rs`, which may read `/proc`) is taken
//! and released before the store; nothing takes the store while holding either
//! (`crate::sync`). A rewind takes the gate exclusively, then [`Capturer::lock`].

mod actors;
mod preimage;
mod stage;
mod turn;

pub use actors::{Classifier, ProcInfo, Procs, RealProcs, What, parse_session, read_proc};

pub use preimage::{read_open_file, read_preimage, walk_tree};
pub use stage::{PendingStage, StageBy, Staging};
pub use turn::{HeldBy, HeldName, MAX_TURN, OpenForWrite, TurnError, TurnStart};

use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::StoreError;
use crate::store::actors::{Actor, Owner};
use crate::store::blob::BlobStore;
use crate::store::journal::{AgentMark, HandOff, Touch};
use crate::store::journal::{PreImage, Record};
use crate::sync::{Mutex, MutexGuard, Rank};
use crate::sys::{self, Errno};
use preimage::mirrored_state;
use stage::Stager;
use std::ffi::CStr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// Why a capture failed, and so the change that needed it: the store could not record it, or
/// the pre-image could not be read from the host. The errno the caller gets is the store's
/// (`src/errno.rs`) or the host's own.
#[derive(Debug)]
pub enum CaptureError {
    /// The journal or the blob store failed.
    Store(StoreError),
    /// Reading what stands at the path, or storing its bytes as a blob, failed.
    Preimage(Errno),
}

impl From<StoreError> for CaptureError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<Errno> for CaptureError {
    fn from(e: Errno) -> Self {
        Self::Preimage(e)
    }
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Store(e) => write!(f, "{e}"),
            Self::Preimage(e) => write!(f, "reading or storing its pre-image: {e}"),
        }
    }
}

impl std::error::Error for CaptureError {}

/// The process behind a request and what the request does, recorded with each capture and
/// attributed once per (turn, path, actor) (`actors.rs`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Who {
    /// Its pid, as the kernel gives it: a thread id (0 when unknown, or the daemon's own work).
    pub pid: u32,
    /// What it does to the path.
    pub what: What,
}

impl Who {
    /// Thread `pid` doing `what`.
    pub fn new(pid: u32, what: What) -> Self {
        Self { pid, what }
    }
}

/// The largest file a hand-off stores (a bigger one is recorded as skipped): a hand-off is
/// only read for a line-by-line merge, which merges no bigger file (`rewind --agent
/// --conflicts merge`), so a change of hands of a large file costs no read of it.
pub const HANDOFF_MAX: u64 = 8 << 20;

/// The default `--max-blob`: bigger files are recorded as skipped, not stored.
pub const DEFAULT_MAX_BLOB: u64 = 1 << 30;

/// The capture policy over an open store.
#[derive(Debug)]
pub struct Capturer {
    store: Arc<Mutex<Store>>,
    /// The store's blobs, reachable without the store lock: a request's pre-image is read,
    /// hashed and stored outside it, and only recorded under it.
    blobs: Arc<BlobStore>,
    max_blob: u64,
    /// Who is behind a request: its command name, and whether it is the agent.
    actors: Mutex<Classifier>,
    /// Hands staged pre-images (by capture seq) to the thread that stores their bytes.
    stager: Mutex<Option<Stager>>,
}

/// Locks the store (its place in the lock order: `crate::sync`).
fn lock_store(store: &Mutex<Store>) -> StoreGuard<'_> {
    store.lock()
}

/// The store, locked (its place in the lock order: `crate::sync`).
pub type StoreGuard<'a> = MutexGuard<'a, Store>;

impl Drop for Capturer {
    fn drop(&mut self) {
        let stager = self.stager.get_mut().take();
        if let Some(stager) = stager {
            stager.stop();
        }
        lock_store(&self.store).settle();
    }
}

impl Capturer {
    /// Wraps an open store, starting the thread that stores staged pre-images (without it,
    /// when the thread cannot start, nothing is staged).
    pub fn new(store: Store, max_blob: u64) -> Self {
        let staged = store.staged_dir().try_clone_to_owned();
        let blobs = Arc::clone(store.blobs());
        let marks = store
            .index()
            .actors
            .marks
            .iter()
            .map(|(_, _, m)| (m.pid, m.start, m.name()));
        let actors = Mutex::leaf(Classifier::new(marks));
        let store = Arc::new(Mutex::ranked(Rank::Store, store));
        let stager = staged
            .ok()
            .and_then(|staged| Stager::start(&store, Arc::clone(&blobs), staged));
        Self {
            store,
            blobs,
            max_blob,
            actors,
            stager: Mutex::leaf(stager),
        }
    }

    /// Locks the store for direct use (rewind, status, diff, prune): every staged pre-image
    /// is stored first, so the index holds no `Staged` pre-image (unless its bytes could not be
    /// stored; they are then still in `staged/`, and a rewind reports the path).
    pub fn lock(&self) -> StoreGuard<'_> {
        let mut store = lock_store(&self.store);
        if !store.index().pending.is_empty() {
            store.settle();
        }
        store
    }

    /// Locks the store for capturing (pending staged pre-images may stay pending).
    fn lock_raw(&self) -> StoreGuard<'_> {
        lock_store(&self.store)
    }

    /// The current turn, read without storing the stager's backlog first (what
    /// [`Self::lock`] does): reading `.ckpt/turn`, which a shell prompt may do every time,
    /// must not wait for every pending staged capture to be stored.
    pub fn current_turn(&self) -> Turn {
        self.lock_raw().index().current_turn()
    }

    /// The size limit for stored file content.
    pub fn max_blob(&self) -> u64 {
        self.max_blob
    }

    /// The actor behind `who` (from `/proc`, remembered: `actors.rs`), `None` for the
    /// daemon's own work. Taken before the store, never under it (a leaf lock that may read
    /// `/proc`).
    fn actor(&self, who: Who) -> Option<Actor> {
        if who.pid == 0 {
            return None;
        }
        self.actors.lock().actor(who.pid, &mut RealProcs)
    }

    /// Marks process `pid`, started at `start`, and what descends from it, as the agent of the
    /// mark's name: the journal records it, and every caller is classified again. A process
    /// marked already under that name (a hook runs at every prompt) is not recorded again:
    /// `Ok(false)`.
    pub fn mark_agent(&self, mark: AgentMark) -> Result<bool, CaptureError> {
        let (pid, start, name) = (mark.pid, mark.start, mark.name());
        {
            let mut store = self.lock_raw();
            let marks = &store.index().actors.marks;
            // The newest mark of the process counts: a hook of a session the agent CLI
            // began since (`/clear`) names it anew.
            let newest = marks
                .iter()
                .rev()
                .find(|(_, _, m)| m.pid == pid && m.start == start);
            if newest.is_some_and(|(_, _, m)| m.name() == name) {
                return Ok(false);
            }
            store.append(Record::Agent(mark))?;
        }
        self.actors.lock().mark(pid, start, &name);
        Ok(true)
    }

    /// Records that `actor` changed `path`, captured already in this turn, unless it did
    /// before in this turn (one record per (turn, path, actor); checked in memory). A failure
    /// fails the mutation: a change nobody recorded could make `rewind --agent` take a path
    /// for the agent's alone.
    fn attribute(
        store: &mut Store,
        path: &RelPath,
        who: Who,
        actor: Option<&Actor>,
    ) -> Result<(), CaptureError> {
        let Some(actor) = actor else { return Ok(()) };
        let Some(capture) = store.index().capture_seq_now(path) else {
            return Ok(());
        };
        if store.index().actors.has_touch(capture, actor) {
            return Ok(());
        }
        store.append(Record::Touched(touch(capture, who, actor)))?;
        Ok(())
    }

    /// Records the pre-image of `path` (= `name` in `parent`) unless this turn has it already.
    ///
    /// The pre-image is read, hashed and its bytes stored outside the store lock, and only
    /// recorded under it, so one request's capture of a big file does not hold up every other
    /// request's. This is exact because every caller holds the gate shared (no turn switch in
    /// between) and every mutation of a path comes after a recorded capture of it: if another
    /// request recorded the path meanwhile, its pre-image was read before any mutation, and
    /// this one is dropped (its blob, if new, is an orphan that `prune` collects and `fsck`
    /// names as harmless).
    pub fn ensure(
        &self,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        who: Who,
    ) -> Result<(), CaptureError> {
        let actor = self.actor(who);
        let limit = {
            let mut store = self.lock_raw();
            if store.index().captured_now.contains_key(path) {
                if handoff_due(&store, path, actor.as_ref()).is_none() {
                    // The common case: attributed in memory, no journal write.
                    return Self::attribute(&mut store, path, who, actor.as_ref());
                }
                self.max_blob.min(HANDOFF_MAX)
            } else {
                self.max_blob
            }
        };
        let pre = read_preimage(&self.blobs, parent, name, limit)?;
        let mut store = self.lock_raw();
        if store.index().captured_now.contains_key(path) {
            return Self::hand_off(&mut store, path, pre, who, actor.as_ref());
        }
        Self::record(&mut store, path, pre, who, actor).map(drop)
    }

    /// For a path captured already in this turn: records `pre`, its state now, as a hand-off
    /// when `actor` is another owner than the path's ([`handoff_due`]), then attributes the
    /// change.
    fn hand_off(
        store: &mut Store,
        path: &RelPath,
        pre: PreImage,
        who: Who,
        actor: Option<&Actor>,
    ) -> Result<(), CaptureError> {
        if let (Some(capture), Some(a)) = (handoff_due(store, path, actor), actor) {
            log::debug!(target: "ckpt::capture", "hand-off path={path} to={}", a.label());
            store.append(Record::HandOff(HandOff {
                capture,
                pre,
                pid: who.pid,
                comm: a.comm.clone(),
                agent: a.agent,
                name: a.name.clone(),
            }))?;
        }
        Self::attribute(store, path, who, actor)
    }

    /// As [`Self::ensure`], for a regular file the caller holds open for reading (`st` its
    /// `fstat`, `flags` the status flags it was opened with): the pre-image is read through
    /// that descriptor, saving the lookup, open and identity check a capture by name costs.
    /// Read outside the store lock as `ensure` does.
    pub fn ensure_open_file(
        &self,
        fd: BorrowedFd<'_>,
        flags: i32,
        st: &libc::stat,
        path: &RelPath,
        who: Who,
    ) -> Result<(), CaptureError> {
        let actor = self.actor(who);
        let limit = {
            let mut store = self.lock_raw();
            store.settle_inode(st.st_ino)?;
            if store.index().captured_now.contains_key(path) {
                if handoff_due(&store, path, actor.as_ref()).is_none() {
                    return Self::attribute(&mut store, path, who, actor.as_ref());
                }
                self.max_blob.min(HANDOFF_MAX)
            } else {
                self.max_blob
            }
        };
        let pre = sys::without_atime(fd, flags, || read_open_file(&self.blobs, fd, st, limit))?;
        let mut store = self.lock_raw();
        // Settled again: the caller's handle is not registered yet, so an unlink while the
        // store was unlocked may have staged this very inode; its bytes are stored before the
        // caller can write through the descriptor it is about to get.
        store.settle_inode(st.st_ino)?;
        if store.index().captured_now.contains_key(path) {
            return Self::hand_off(&mut store, path, pre, who, actor.as_ref());
        }
        Self::record(&mut store, path, pre, who, actor).map(drop)
    }

    /// Appends the capture of `path` as `pre` in the current turn, with its first actor's
    /// `touched` record in the same write; returns the capture's seq.
    fn record(
        store: &mut Store,
        path: &RelPath,
        pre: PreImage,
        who: Who,
        actor: Option<Actor>,
    ) -> Result<crate::ids::Seq, CaptureError> {
        log::debug!(target: "ckpt::capture", "captured turn={} path={path} kind={}", store.index().current_turn(), pre.kind());
        let turn = store.index().current_turn();
        let capture = store.index().last_seq.next();
        let mut records = vec![Record::Capture {
            turn,
            path: path.clone(),
            pre,
            undo_of: None,
            pid: (who.pid != 0).then_some(who.pid),
            comm: actor.as_ref().map(|a| a.comm.clone()),
        }];
        if let Some(actor) = &actor {
            records.push(Record::Touched(touch(capture, who, actor)));
        }
        store.append_all(records)?;
        Ok(capture)
    }

    /// [`Self::ensure`] with the store already locked and the actor already known.
    fn ensure_locked(
        store: &mut Store,
        max_blob: u64,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        who: Who,
        actor: Option<&Actor>,
    ) -> Result<(), CaptureError> {
        if store.index().captured_now.contains_key(path) {
            if handoff_due(store, path, actor).is_none() {
                return Self::attribute(store, path, who, actor);
            }
            let pre = read_preimage(store.blobs(), parent, name, max_blob.min(HANDOFF_MAX))?;
            return Self::hand_off(store, path, pre, who, actor);
        }
        let pre = read_preimage(store.blobs(), parent, name, max_blob)?;
        Self::record(store, path, pre, who, actor.cloned()).map(drop)
    }

    /// Records `path` and everything below it, and, when `also_at` is given, the state of the
    /// mirrored paths under `also_at` that a rename of this subtree would create.
    pub fn ensure_tree(
        &self,
        parent: BorrowedFd<'_>,
        name: &CStr,
        path: &RelPath,
        also_at: Option<(BorrowedFd<'_>, &CStr, &RelPath)>,
        who: Who,
    ) -> Result<(), CaptureError> {
        let actor = self.actor(who);
        let mut store = self.lock_raw();
        let max_blob = self.max_blob;
        let mut mirrored: Vec<RelPath> = Vec::new();
        preimage::walk_tree_with::<CaptureError>(parent, name, path, &mut |p, dir, n| {
            Self::ensure_locked(&mut store, max_blob, dir, n, p, who, actor.as_ref())?;
            if also_at.is_some() && p != path {
                mirrored.push(p.clone());
            }
            Ok(None)
        })?;
        if let Some((dst_parent, dst_name, dst_path)) = also_at {
            for p in mirrored {
                let Some(target) = p.rebase(path, dst_path) else {
                    continue;
                };
                if store.index().captured_now.contains_key(&target) {
                    Self::attribute(&mut store, &target, who, actor.as_ref())?;
                    continue;
                }
                // Resolve the mirrored path below the destination without following links.
                let rel = target.as_bytes()[dst_path.as_bytes().len() + 1..].to_vec();
                let Some(pre) =
                    mirrored_state(dst_parent, dst_name, &rel, store.blobs(), max_blob)?
                else {
                    continue;
                };
                Self::record(&mut store, &target, pre, who, actor.clone())?;
            }
        }
        Ok(())
    }
}

/// The capture of `path` in this turn when `actor` changing it now is a change of hands: an
/// agent's change of a path another owner changed last in the turn, or another owner's of a
/// path an agent changed last ([`Owner`]: every process of no agent is one owner). Only once
/// an agent was marked: before, nothing is told apart. The state at that moment is what
/// `rewind --agent NAME --conflicts merge` needs to take NAME's edits back line by line.
fn handoff_due(store: &Store, path: &RelPath, actor: Option<&Actor>) -> Option<crate::ids::Seq> {
    let actor = actor?;
    actor.agent?;
    let capture = store.index().capture_seq_now(path)?;
    let now = Owner::of(actor.agent, actor.name.as_deref());
    let owner = store.index().actors.owner(capture);
    (owner.as_ref() != Some(&now)).then_some(capture)
}

/// The `touched` record of `actor` (as `who`) on the path of capture `capture`.
fn touch(capture: crate::ids::Seq, who: Who, actor: &Actor) -> Touch {
    Touch {
        capture,
        pid: who.pid,
        comm: actor.comm.clone(),
        agent: actor.agent,
        name: actor.name.clone(),
        what: who.what.as_str().into(),
        opened_in: match who.what {
            What::Held { opened_in } => Some(opened_in),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    //! Helpers shared with the other files' tests, and the test of what every kind of capture
    //! leaves of the file it read.
    use super::*;
    use std::os::fd::AsFd;

    pub(super) fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("valid")
    }

    /// A project folder with a store, its root descriptor and a capturer over it.
    pub(super) fn project() -> (tempfile::TempDir, std::fs::File, Capturer) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open root");
        let store = Store::for_test(root.as_fd()).expect("store");
        (dir, root, Capturer::new(store, DEFAULT_MAX_BLOB))
    }

    pub(super) fn lstat(root: &std::fs::File, name: &CStr) -> libc::stat {
        sys::lstatat(root.as_fd(), name).expect("lstat")
    }

    /// Sets `name`'s atime well before its mtime, so a plain read would update it (relatime).
    fn make_atime_stale(root: &std::fs::File, name: &CStr) -> i64 {
        let at = |sec| libc::timespec {
            tv_sec: sec,
            tv_nsec: 0,
        };
        sys::utimensat(root.as_fd(), name, &[at(1_000_000_000), at(1_500_000_000)])
            .expect("utimensat");
        1_000_000_000
    }

    #[test]
    fn captures_leave_the_atime_of_what_they_read_as_it_was() {
        let (dir, root, cap) = project();
        std::fs::create_dir(dir.path().join("tree")).expect("mkdir");
        for name in ["control", "by-name", "open", "tree/leaf"] {
            std::fs::write(dir.path().join(name), b"bytes").expect("write");
        }
        let names = [c"control", c"by-name", c"open", c"tree", c"tree/leaf"];
        let old = names.map(|n| make_atime_stale(&root, n))[0];
        // The filesystem under the test updates atime on a read, so the checks below can fail.
        std::fs::read(dir.path().join("control")).expect("read");
        assert_ne!(
            lstat(&root, c"control").st_atime,
            old,
            "this filesystem keeps no atime"
        );

        cap.ensure(root.as_fd(), c"by-name", &rp("by-name"), Who::default())
            .expect("capture by name");
        cap.ensure_tree(root.as_fd(), c"tree", &rp("tree"), None, Who::default())
            .expect("capture a tree");
        let open = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("open"))
            .expect("open");
        let st = sys::fstat(open.as_fd()).expect("fstat");
        let flags = libc::O_RDWR;
        cap.ensure_open_file(open.as_fd(), flags, &st, &rp("open"), Who::default())
            .expect("capture through the open descriptor");
        for (name, label) in [
            (c"by-name", "a capture by name"),
            (c"open", "a capture through the caller's descriptor"),
            (c"tree", "a tree capture (its listing)"),
            (c"tree/leaf", "a tree capture (a file in it)"),
        ] {
            assert_eq!(
                lstat(&root, name).st_atime,
                old,
                "{label} changed the atime"
            );
        }
        assert_eq!(
            cap.lock().index().captured_now.len(),
            4,
            "four paths were captured"
        );

        // The caller's own reads through that descriptor still update the atime.
        let mut buf = [0u8; 5];
        sys::pread(open.as_fd(), &mut buf, 0).expect("pread");
        assert_ne!(
            lstat(&root, c"open").st_atime,
            old,
            "the caller's descriptor kept O_NOATIME"
        );
    }
}
