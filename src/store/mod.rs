//! The store in `<folder>/.ckpt/`: a `VERSION` file, the journal, the blobs and a lock.
//!
//! The in-memory [`Index`] is derived from the journal alone by replaying it; nothing else is
//! mutable state. A daemon (or an offline command) holds an exclusive `flock` on `lock` while it
//! may append, so there is one writer at a time.

pub mod blob;
pub mod fsck;
pub mod journal;
pub mod pack;
pub mod prune;

use crate::identity::FileId;
use crate::relpath::{RelPath, STORE_DIR};
use crate::sys::{self, Errno};
use crate::xattrs::{self, Via};
use blob::BlobStore;
use journal::{Line, ParseError, PreImage, Record};
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Contents of the `VERSION` file of a store this build reads and writes. Version 2 is the
/// layout of docs/FORMAT.md: packs, `.zst` blobs, staged pre-images and journal lines up to
/// version 3 (inode identities and extended attributes).
pub const STORE_VERSION: &str = "ckpt-mount store 2\n";

/// A store this build migrates once, when it first opens it: version 1 had the same files,
/// and every line it wrote reads the same here (a version 1 build then refuses the store,
/// whose new lines it would misread).
pub(crate) const STORE_VERSION_1: &str = "ckpt-mount store 1\n";

/// Names of the mounted view's control files, kept in the real store as empty directories: a shell standing in the folder *under* the mount that runs
/// `echo N > .ckpt/turn` gets "Is a directory" instead of writing a stray file into the store
/// while nothing is captured.
pub const CONTROL_GUARDS: [&str; 2] = ["turn", "rewind"];

/// Why the store could not be used.
#[derive(Debug)]
pub enum StoreError {
    /// A system call failed.
    Io {
        /// What was being done.
        what: String,
        /// The errno.
        errno: Errno,
    },
    /// The store was written by an unknown format version.
    Version(String),
    /// The journal is damaged.
    Journal(ParseError),
    /// Another process holds the store's lock.
    Locked,
    /// No store exists in this folder.
    Missing,
}

impl StoreError {
    /// The errno a FUSE caller should see.
    pub fn errno(&self) -> i32 {
        match self {
            Self::Io { errno, .. } => errno.0,
            // A damaged or foreign store is an I/O problem from the caller's point of view.
            Self::Version(_) | Self::Journal(_) => libc::EIO,
            Self::Locked => libc::EBUSY,
            Self::Missing => libc::ENOENT,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { what, errno } => write!(f, "{what}: {errno}"),
            Self::Version(v) => write!(
                f,
                "the store has format {:?}; this ckpt-mount reads {:?}",
                v.trim(),
                STORE_VERSION.trim()
            ),
            Self::Journal(e) => write!(f, "{e}"),
            Self::Locked => write!(f, "the store is in use by another ckpt-mount process"),
            Self::Missing => write!(f, "no ckpt-mount store in this folder"),
        }
    }
}

impl std::error::Error for StoreError {}

fn io(what: impl Into<String>) -> impl FnOnce(Errno) -> StoreError {
    let what = what.into();
    move |errno| StoreError::Io { what, errno }
}

/// A turn as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInfo {
    /// Number.
    pub turn: u64,
    /// Label, if any.
    pub label: Option<String>,
    /// Unix time it began.
    pub time: u64,
}

/// A capture as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    /// Journal position.
    pub seq: u64,
    /// Turn.
    pub turn: u64,
    /// Path.
    pub path: RelPath,
    /// Pre-image.
    pub pre: PreImage,
    /// Process id behind it.
    pub pid: Option<u32>,
    /// Command name behind it.
    pub comm: Option<String>,
}

/// The last completed rewind, kept so that it can be undone.
#[derive(Debug, Clone, Default)]
pub struct LastRewind {
    /// Seq of its `rewind_begin`.
    pub begin: u64,
    /// Target turn.
    pub to: u64,
    /// Turn current before it.
    pub from: u64,
    /// What it overwrote or deleted, per path.
    pub saved: Vec<Capture>,
    /// Turns it retired.
    pub retired_turns: Vec<TurnInfo>,
    /// Captures it retired.
    pub retired: Vec<Capture>,
}

/// The state derived from replaying the journal.
#[derive(Debug, Default)]
pub struct Index {
    /// Turns not retired by a rewind, ascending.
    pub turns: Vec<TurnInfo>,
    /// Captures of those turns, in journal order.
    pub captures: Vec<Capture>,
    /// Paths captured in the current turn.
    pub captured_now: HashSet<RelPath>,
    /// The last rewind, unless undone.
    pub last_rewind: Option<LastRewind>,
    /// A rewind that began and never finished (the process died): `(begin seq, to, from)`.
    pub unfinished_rewind: Option<(u64, u64, u64)>,
    /// Captures saved by the unfinished rewind.
    pub unfinished_saved: Vec<Capture>,
    /// Highest seq seen.
    pub last_seq: u64,
    /// Captures whose pre-image is still `Staged` (no `staged` record yet): seq -> host inode.
    pub pending: std::collections::BTreeMap<u64, u64>,
    /// Identities recreated by rewinds: recorded identity -> the file that stands for it now.
    pub renewed: HashMap<crate::identity::FileId, crate::identity::FileId>,
}

impl Index {
    /// The current turn (0 before the first turn record).
    pub fn current_turn(&self) -> u64 {
        self.turns.last().map_or(0, |t| t.turn)
    }

    /// Applies one journal line.
    pub fn apply(&mut self, line: &Line) {
        self.last_seq = line.seq;
        match &line.rec {
            Record::Turn { turn, label } => {
                self.turns.push(TurnInfo {
                    turn: *turn,
                    label: label.clone(),
                    time: line.time,
                });
                self.captured_now.clear();
            }
            Record::Capture {
                turn,
                path,
                pre,
                undo_of,
                pid,
                comm,
            } => {
                let cap = Capture {
                    seq: line.seq,
                    turn: *turn,
                    path: path.clone(),
                    pre: pre.clone(),
                    pid: *pid,
                    comm: comm.clone(),
                };
                if undo_of.is_some() {
                    self.unfinished_saved.push(cap);
                } else {
                    if let PreImage::Staged { ino, .. } = pre {
                        self.pending.insert(line.seq, *ino);
                    }
                    if *turn == self.current_turn() {
                        self.captured_now.insert(path.clone());
                    }
                    self.captures.push(cap);
                }
            }
            Record::RewindBegin { to, from } => {
                self.unfinished_rewind = Some((line.seq, *to, *from));
                self.unfinished_saved.clear();
            }
            Record::RewindDone { begin } => {
                let Some((b, to, from)) = self.unfinished_rewind.take() else {
                    return;
                };
                if b != *begin {
                    return;
                }
                let (retired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.captures)
                    .into_iter()
                    .partition(|c| c.turn >= to);
                self.captures = kept;
                let (retired_turns, kept_turns): (Vec<_>, Vec<_>) = std::mem::take(&mut self.turns)
                    .into_iter()
                    .partition(|t| t.turn > to);
                self.turns = kept_turns;
                // Turn `to` begins afresh at the moment of the rewind.
                match self.turns.last_mut() {
                    Some(t) if t.turn == to => t.time = line.time,
                    _ => self.turns.push(TurnInfo {
                        turn: to,
                        label: None,
                        time: line.time,
                    }),
                }
                self.captured_now.clear();
                self.last_rewind = Some(LastRewind {
                    begin: b,
                    to,
                    from,
                    saved: std::mem::take(&mut self.unfinished_saved),
                    retired_turns,
                    retired,
                });
            }
            Record::Renewed { ids } => {
                for r in ids {
                    if r.was != r.now {
                        self.renewed.insert(r.was.clone(), r.now.clone());
                    }
                }
            }
            Record::Staged { capture, pre } => {
                // Only a pending capture is resolved, only once, and only to what a staged file
                // can become (the journal is untrusted input).
                if !matches!(pre, PreImage::File { .. } | PreImage::Skipped { .. })
                    || self.pending.remove(capture).is_none()
                {
                    return;
                }
                if let Ok(i) = self.captures.binary_search_by_key(capture, |c| c.seq)
                    && matches!(self.captures[i].pre, PreImage::Staged { .. })
                {
                    self.captures[i].pre = pre.clone();
                }
            }
            Record::UndoDone { rewind } => {
                let Some(last) = self.last_rewind.take() else {
                    return;
                };
                if last.begin != *rewind {
                    self.last_rewind = Some(last);
                    return;
                }
                // Work done after the rewind is what the undo reverted: it leaves the index.
                self.captures.retain(|c| c.turn < last.to);
                self.captures.extend(last.retired);
                self.captures.sort_by_key(|c| c.seq);
                // Turn `to` itself was kept (with its label) when the rewind ran.
                self.turns.retain(|t| t.turn <= last.to);
                let mut turns = last.retired_turns;
                turns.sort_by_key(|t| t.turn);
                self.turns.extend(turns);
                let cur = self.current_turn();
                self.captured_now = self
                    .captures
                    .iter()
                    .filter(|c| c.turn == cur)
                    .map(|c| c.path.clone())
                    .collect();
            }
        }
    }

    /// Whether turn `n` can be rewound to.
    pub fn has_turn(&self, n: u64) -> bool {
        self.turns.iter().any(|t| t.turn == n)
    }

    /// For each path touched in turns `>= n`, the oldest pre-image (rule: oldest wins).
    pub fn plan_targets(&self, n: u64) -> Vec<(RelPath, PreImage)> {
        let mut seen: HashMap<&RelPath, usize> = HashMap::new();
        let mut out: Vec<(RelPath, PreImage)> = Vec::new();
        for c in self.captures.iter().filter(|c| c.turn >= n) {
            if !seen.contains_key(&c.path) {
                seen.insert(&c.path, out.len());
                out.push((c.path.clone(), c.pre.clone()));
            }
        }
        out
    }

    /// The identity that stands now for `id`, following what rewinds recreated (a chain is
    /// followed a bounded number of steps: the journal is untrusted input).
    pub fn current_identity(&self, id: &crate::identity::FileId) -> crate::identity::FileId {
        let mut cur = id;
        for _ in 0..64 {
            match self.renewed.get(cur) {
                Some(next) => cur = next,
                None => break,
            }
        }
        cur.clone()
    }

    /// `targets` with every recorded inode identity replaced by the one that stands for it now.
    pub fn with_current_identities(
        &self,
        mut targets: Vec<(RelPath, PreImage)>,
    ) -> Vec<(RelPath, PreImage)> {
        if self.renewed.is_empty() {
            return targets;
        }
        for (_, pre) in &mut targets {
            let Some(id) = pre.file_id() else { continue };
            let now = self.current_identity(&id);
            if now != id {
                pre.set_file_id(now);
            }
        }
        targets
    }

    /// Targets that undo the last rewind: what it saved, then the pre-images of work after it.
    pub fn undo_targets(&self) -> Option<Vec<(RelPath, PreImage)>> {
        let last = self.last_rewind.as_ref()?;
        let mut seen: HashSet<RelPath> = HashSet::new();
        let mut out = Vec::new();
        for c in &last.saved {
            if seen.insert(c.path.clone()) {
                out.push((c.path.clone(), c.pre.clone()));
            }
        }
        for c in self.captures.iter().filter(|c| c.turn >= last.to) {
            if seen.insert(c.path.clone()) {
                out.push((c.path.clone(), c.pre.clone()));
            }
        }
        Some(out)
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

/// A staged pre-image whose bytes the stager stored outside the store lock: its capture's
/// seq, the inode number of the staged file it read, the blob and the file's attributes.
#[derive(Debug)]
pub struct StoredStage {
    /// Seq of the capture.
    pub seq: u64,
    /// Inode number of the staged file that was read.
    pub ino: u64,
    /// The stored bytes.
    pub blob: blob::Stored,
    /// Its extended attributes.
    pub xattrs: Vec<crate::store::journal::Xattr>,
}

/// An open store.
#[derive(Debug)]
pub struct Store {
    dir: OwnedFd,
    journal: OwnedFd,
    _lock: OwnedFd,
    /// Content-addressed blobs.
    pub blobs: std::sync::Arc<BlobStore>,
    /// State replayed from the journal.
    pub index: Index,
    durable: bool,
    /// `staged/`: pre-images moved here by their removal, named by their capture's seq.
    staged: OwnedFd,
    /// The store's device: only a file on it can be staged (a rename cannot cross devices).
    dev: u64,
    /// Bumped whenever the journal is rewritten (prune renumbers every seq): a staged
    /// pre-image handed to the stager names its capture by `(epoch, seq)`.
    epoch: u64,
}

/// What a staged pre-image resolves to when its bytes cannot be stored for good.
fn staged_skip(size: u64, reason: String) -> PreImage {
    PreImage::Skipped {
        was: "file".into(),
        size,
        reason,
    }
}

/// Opens the store directory of a folder, creating it when `create` is set.
pub fn open_store_dir(root: BorrowedFd<'_>, create: bool) -> Result<OwnedFd, StoreError> {
    let name = CString::new(STORE_DIR).unwrap_or_default();
    if create {
        match sys::mkdirat(root, &name, 0o700) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(io("create .ckpt")(e)),
        }
    }
    match sys::openat(
        root,
        &name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    ) {
        Ok(fd) => Ok(fd),
        Err(Errno(libc::ENOENT)) => Err(StoreError::Missing),
        Err(e) => Err(io("open .ckpt")(e)),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Store {
    /// Opens the store of the folder behind `root`, taking its lock. With `create`, makes a new
    /// store (and begins turn 1) when none exists.
    pub fn open(root: BorrowedFd<'_>, create: bool, durable: bool) -> Result<Self, StoreError> {
        let dir = open_store_dir(root, create)?;
        let d = dir.as_fd();
        let lock = sys::openat(
            d,
            c"lock",
            libc::O_CREAT | libc::O_RDWR | libc::O_NOFOLLOW,
            0o600,
        )
        .map_err(io("open lock"))?;
        match sys::flock_try(lock.as_fd(), true) {
            Ok(()) => {}
            Err(Errno(libc::EWOULDBLOCK)) => return Err(StoreError::Locked),
            Err(e) => return Err(io("lock the store")(e)),
        }
        match read_small(d, c"VERSION") {
            Ok(v) if v == STORE_VERSION.as_bytes() => {}
            Ok(v) if v == STORE_VERSION_1.as_bytes() => {
                replace_small(d, c"VERSION", STORE_VERSION.as_bytes())
                    .map_err(io("migrate VERSION"))?;
                log::info!(target: "ckpt::store", "store migrated from format 1 to 2 (same files; new journal lines)");
            }
            Ok(v) => {
                return Err(StoreError::Version(
                    String::from_utf8_lossy(&v).into_owned(),
                ));
            }
            Err(Errno(libc::ENOENT)) if create => {
                write_new(d, c"VERSION", STORE_VERSION.as_bytes()).map_err(io("write VERSION"))?;
                write_new(d, c".gitignore", b"*\n").map_err(io("write .gitignore"))?;
            }
            Err(Errno(libc::ENOENT)) => return Err(StoreError::Missing),
            Err(e) => return Err(io("read VERSION")(e)),
        }
        for guard in CONTROL_GUARDS {
            let c = CString::new(guard).map_err(|_| io("guard name")(Errno(libc::EINVAL)))?;
            match sys::mkdirat(d, &c, 0o700) {
                // A regular file there is a stray write from under the mount: fsck names it.
                Ok(()) | Err(Errno(libc::EEXIST)) => {}
                Err(e) => return Err(io("create the control-file guards")(e)),
            }
        }
        let journal = sys::openat(
            d,
            c"journal.jsonl",
            libc::O_CREAT | libc::O_RDWR | libc::O_APPEND | libc::O_NOFOLLOW,
            0o600,
        )
        .map_err(io("open journal"))?;
        let bytes = sys::read_to_end(journal.as_fd()).map_err(io("read journal"))?;
        let parsed = journal::parse(&bytes).map_err(StoreError::Journal)?;
        if parsed.valid_len < bytes.len() {
            log::warn!(target: "ckpt::store", "journal has a torn last line of {} bytes; cutting it off", bytes.len() - parsed.valid_len);
            sys::ftruncate(journal.as_fd(), parsed.valid_len as u64)
                .map_err(io("truncate torn journal tail"))?;
        }
        let mut index = Index::default();
        for line in &parsed.lines {
            index.apply(line);
        }
        let blobs = std::sync::Arc::new(BlobStore::open(d, durable).map_err(io("open blobs"))?);
        match sys::mkdirat(d, c"staged", 0o700) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(io("create staged/")(e)),
        }
        let staged = sys::openat(
            d,
            c"staged",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(io("open staged/"))?;
        let dev = sys::fstat(staged.as_fd())
            .map_err(io("stat staged/"))?
            .st_dev;
        let mut store = Self {
            dir,
            journal,
            _lock: lock,
            blobs,
            index,
            durable,
            staged,
            dev,
            epoch: 0,
        };
        if store.index.turns.is_empty() {
            store.append(Record::Turn {
                turn: 1,
                label: None,
            })?;
        }
        // A daemon that stopped with pre-images still staged: store them now (one it never
        // moved is still at its name: read from there), and drop staged files no capture waits
        // for (their record was written, the unlink was not).
        store.recover_unmoved(root);
        store.settle();
        store.remove_stray_stages();
        Ok(store)
    }

    /// The `staged/` directory.
    pub fn staged_dir(&self) -> BorrowedFd<'_> {
        self.staged.as_fd()
    }

    /// The journal's numbering: changes when the journal is rewritten.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The device the store is on.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// Whether every record and blob is synced before the change it guards (`--durable`).
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// The name of capture `seq`'s staged file.
    pub fn staged_name(seq: u64) -> CString {
        CString::new(seq.to_string()).unwrap_or_default()
    }

    /// Stores the bytes of capture `seq`'s staged pre-image and records what it became. `Err`
    /// leaves it pending with its staged file in place (the bytes are not lost; a later call
    /// tries again).
    pub fn resolve_stage(&mut self, seq: u64) -> Result<(), StoreError> {
        self.resolve_stages(vec![seq])
    }

    /// [`Self::resolve_stage`] for many, with one journal append for all their records.
    pub fn resolve_stages(&mut self, seqs: Vec<u64>) -> Result<(), StoreError> {
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
        let done: Vec<u64> = records
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
    fn resolution(&mut self, seq: u64) -> Result<Option<PreImage>, StoreError> {
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
    fn staged_pre(&self, seq: u64) -> Option<(&PreImage, u64)> {
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
        epoch: u64,
        stored: Vec<StoredStage>,
    ) -> Result<Vec<u64>, StoreError> {
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
        let pending: Vec<u64> = self.index.pending.keys().copied().collect();
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
        let seqs: Vec<u64> = self
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
    fn recover_unmoved(&mut self, root: BorrowedFd<'_>) {
        let pending: Vec<u64> = self.index.pending.keys().copied().collect();
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

    fn remove_stray_stages(&self) {
        let Ok(list) = sys::reopen(self.staged.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY) else {
            return;
        };
        for e in sys::read_dir_all(list.as_fd(), false).unwrap_or_default() {
            let seq = std::str::from_utf8(&e.name)
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            if seq.is_some_and(|s| self.index.pending.contains_key(&s)) {
                continue;
            }
            if let Ok(name) = CString::new(e.name) {
                let _ = sys::unlinkat(self.staged.as_fd(), &name, 0);
            }
        }
    }

    /// The store directory descriptor (for the daemon log and tests).
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Appends one record (one `write(2)`), applies it to the index and returns its seq.
    pub fn append(&mut self, rec: Record) -> Result<u64, StoreError> {
        self.append_all(vec![rec])
    }

    /// Appends records in one `write(2)` (a torn write still leaves whole lines and at most one
    /// torn last line), applies them and returns the last seq.
    pub fn append_all(&mut self, recs: Vec<Record>) -> Result<u64, StoreError> {
        let time = now();
        let first = self.index.last_seq + 1;
        let lines: Vec<Line> = recs
            .into_iter()
            .zip(first..)
            .map(|(rec, seq)| Line {
                v: rec.version(),
                seq,
                time,
                rec,
            })
            .collect();
        let mut bytes = Vec::with_capacity(lines.len() * 256);
        for line in &lines {
            bytes.extend_from_slice(&journal::encode(line));
        }
        let n = sys::write(self.journal.as_fd(), &bytes).map_err(io("append to journal"))?;
        if n != bytes.len() {
            // A short append (disk full) leaves a torn tail; cut it so the journal stays whole.
            if let Ok(st) = sys::fstat(self.journal.as_fd()) {
                let _ = sys::ftruncate(
                    self.journal.as_fd(),
                    (st.st_size as u64).saturating_sub(n as u64),
                );
            }
            return Err(StoreError::Io {
                what: "append to journal".into(),
                errno: Errno(libc::ENOSPC),
            });
        }
        if self.durable {
            sys::fsync(self.journal.as_fd(), true).map_err(io("sync journal"))?;
        }
        for line in &lines {
            self.index.apply(line);
        }
        Ok(self.index.last_seq)
    }

    /// Total size of the journal in bytes.
    pub fn journal_len(&self) -> u64 {
        sys::fstat(self.journal.as_fd()).map_or(0, |st| st.st_size as u64)
    }
}

fn read_small(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Result<Vec<u8>, Errno> {
    let fd = sys::openat(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
    let mut buf = vec![0u8; 4096];
    let n = sys::pread(fd.as_fd(), &mut buf, 0)?;
    buf.truncate(n);
    Ok(buf)
}

/// Replaces a small file atomically: a synced temp file renamed over it, then the directory
/// synced, so a crash leaves the old content or the new, never a mix or nothing.
fn replace_small(dir: BorrowedFd<'_>, name: &std::ffi::CStr, bytes: &[u8]) -> Result<(), Errno> {
    let tmp = CString::new(format!(
        ".tmp-{}-{}",
        std::process::id(),
        name.to_string_lossy()
    ))
    .map_err(|_| Errno(libc::EINVAL))?;
    write_new(dir, &tmp, bytes)?;
    let synced = sys::openat(dir, &tmp, libc::O_RDONLY | libc::O_NOFOLLOW, 0)
        .and_then(|fd| sys::fsync(fd.as_fd(), false))
        .and_then(|()| sys::renameat2(dir, &tmp, dir, name, 0));
    if let Err(e) = synced {
        let _ = sys::unlinkat(dir, &tmp, 0);
        return Err(e);
    }
    let d = sys::reopen(dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
    sys::fsync(d.as_fd(), false)
}

fn write_new(dir: BorrowedFd<'_>, name: &std::ffi::CStr, bytes: &[u8]) -> Result<(), Errno> {
    let fd = sys::openat(
        dir,
        name,
        libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_NOFOLLOW,
        0o600,
    )?;
    sys::write_all(fd.as_fd(), bytes, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("valid")
    }

    fn file(blob: &str) -> PreImage {
        PreImage::File {
            blob: blob.into(),
            size: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 1,
            nlink: 1,
            fh: None,
            btime: None,
            xattrs: None,
        }
    }

    fn cap(turn: u64, path: &str, pre: PreImage) -> Record {
        Record::Capture {
            turn,
            path: rp(path),
            pre,
            undo_of: None,
            pid: None,
            comm: None,
        }
    }

    fn open(dir: &tempfile::TempDir) -> Store {
        let f = std::fs::File::open(dir.path()).expect("open");
        Store::open(f.as_fd(), true, false).expect("store")
    }

    #[test]
    fn rewinding_a_turn_also_undoes_later_turns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = open(&dir);
        s.append(cap(1, "f", file("one"))).expect("append");
        s.append(Record::Turn {
            turn: 2,
            label: None,
        })
        .expect("append");
        s.append(cap(2, "f", file("two"))).expect("append");
        s.append(Record::Turn {
            turn: 3,
            label: None,
        })
        .expect("append");
        s.append(cap(3, "f", file("three"))).expect("append");
        s.append(cap(3, "g", PreImage::Absent)).expect("append");
        assert_eq!(
            s.index.plan_targets(1),
            vec![(rp("f"), file("one")), (rp("g"), PreImage::Absent)]
        );
        assert_eq!(
            s.index.plan_targets(3),
            vec![(rp("f"), file("three")), (rp("g"), PreImage::Absent)]
        );
    }

    #[test]
    fn rewound_turns_leave_the_index_and_a_remount_replays_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut s = open(&dir);
            s.append(Record::Turn {
                turn: 2,
                label: Some("edit".into()),
            })
            .expect("append");
            s.append(cap(2, "f", file("two"))).expect("append");
            s.append(Record::Turn {
                turn: 3,
                label: None,
            })
            .expect("append");
            s.append(cap(3, "g", PreImage::Absent)).expect("append");
            let b = s
                .append(Record::RewindBegin { to: 2, from: 3 })
                .expect("append");
            s.append(Record::RewindDone { begin: b }).expect("append");
            assert_eq!(s.index.current_turn(), 2);
            assert!(s.index.plan_targets(2).is_empty());
            assert!(!s.index.has_turn(3));
        }
        let s = open(&dir);
        assert_eq!(s.index.current_turn(), 2);
        assert!(s.index.plan_targets(1).is_empty());
        assert_eq!(
            s.index.turns.iter().map(|t| t.turn).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn an_unfinished_rewind_is_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut s = open(&dir);
            s.append(Record::Turn {
                turn: 2,
                label: None,
            })
            .expect("append");
            s.append(cap(2, "f", file("two"))).expect("append");
            s.append(Record::RewindBegin { to: 2, from: 2 })
                .expect("append");
        }
        let s = open(&dir);
        assert_eq!(s.index.unfinished_rewind.map(|r| r.1), Some(2));
        assert_eq!(s.index.plan_targets(2).len(), 1);
    }

    #[test]
    fn undo_brings_back_retired_turns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = open(&dir);
        s.append(Record::Turn {
            turn: 2,
            label: None,
        })
        .expect("append");
        s.append(cap(2, "f", file("two"))).expect("append");
        s.append(Record::Turn {
            turn: 3,
            label: None,
        })
        .expect("append");
        let b = s
            .append(Record::RewindBegin { to: 2, from: 3 })
            .expect("append");
        s.append(Record::Capture {
            turn: 2,
            path: rp("f"),
            pre: file("now"),
            undo_of: Some(b),
            pid: None,
            comm: None,
        })
        .expect("append");
        s.append(Record::RewindDone { begin: b }).expect("append");
        s.append(cap(2, "h", PreImage::Absent)).expect("append");
        let undo = s.index.undo_targets().expect("undo");
        assert_eq!(
            undo,
            vec![(rp("f"), file("now")), (rp("h"), PreImage::Absent)]
        );
        s.append(Record::UndoDone { rewind: b }).expect("append");
        assert_eq!(s.index.current_turn(), 3);
        assert_eq!(s.index.plan_targets(2), vec![(rp("f"), file("two"))]);
        assert!(s.index.last_rewind.is_none());
    }

    #[test]
    fn a_store_of_another_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(open(&dir));
        std::fs::write(dir.path().join(".ckpt/VERSION"), "ckpt-mount store 9\n").expect("write");
        let f = std::fs::File::open(dir.path()).expect("open");
        assert!(matches!(
            Store::open(f.as_fd(), true, false),
            Err(StoreError::Version(_))
        ));
    }

    #[test]
    fn the_journal_is_append_only_json_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = open(&dir);
        let before = std::fs::read(dir.path().join(".ckpt/journal.jsonl")).expect("read");
        s.append(cap(1, "x", PreImage::Absent)).expect("append");
        let after = std::fs::read(dir.path().join(".ckpt/journal.jsonl")).expect("read");
        assert!(after.starts_with(&before), "earlier bytes were rewritten");
        let text = String::from_utf8(after).expect("utf8");
        assert_eq!(text.lines().count(), 2);
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            assert_eq!(v["v"], 1);
        }
    }
}
