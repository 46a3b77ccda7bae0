//! The store in `<folder>/.ckpt/`: a `VERSION` file, the journal, the blobs and a lock.
//!
//! The in-memory [`Index`] is derived from the journal alone by replaying it; nothing else is
//! mutable state. A daemon (or an offline command) holds an exclusive `flock` on `lock` while it
//! may append, so there is one writer at a time.
//!
//! This file holds the handle, [`Store`]: opening a store (lock, `VERSION` check and
//! migration, journal replay, recovery) and appending records. The rest is one job per file:
//! - [`index`]: what the journal means, replayed from its lines with no I/O, and the actors of
//!   its captures; it holds [`entries`] (a turn, a capture), the [`actors`] state (touches and
//!   agent marks) and the operation log ([`ops`]: undo and redo, its replay in `ops/replay.rs`);
//! - [`journal`]: the records (every type a line carries, `journal/record.rs`) and their
//!   encoding; [`blob`] and [`pack`]: the stored bytes;
//! - `staged.rs`: storing staged pre-images and recording what they became;
//! - `lock.rs`: the one-writer lock, waited for while a daemon exits, its holder named;
//! - `error.rs`: [`StoreError`], below every part that returns it (it names the journal's
//!   `ParseError`, the lock's failure, the layout's refusal and the format it reads, all from
//!   files that use nothing of it); `version.rs`: what `VERSION` holds; `files.rs`: the small
//!   files read and written on open;
//! - [`layout`]: what `.ckpt/` holds, checked before anything opens or writes it (a symlink,
//!   blobs without a journal, no `VERSION` beside a history: refused, never reset), refused
//!   with a [`refusal::LayoutError`];
//!   [`start_over`]: the explicit way past a lost journal or `VERSION`;
//! - [`fsck`] checks a store, [`prune`] forgets old turns.
//!
//! The files form no cycle: each uses only files below it (a relabel, which appends a
//! record, is a method of [`Store`], not of the operation log the index holds).

pub mod actors;
pub mod blob;
pub mod entries;
mod error;
mod files;
pub mod fsck;
pub mod index;
pub mod journal;
pub mod layout;
mod lock;
pub mod moments;
pub mod ops;
pub mod pack;
pub mod past;
pub mod prune;
pub mod refusal;
mod staged;
pub mod start_over;
mod version;

pub use entries::{Capture, TurnInfo};
pub use error::StoreError;
pub use index::Index;
pub use layout::open_store_dir;
pub use lock::{LOCK_WAIT, LockHolder};
pub use staged::StoredStage;
pub use version::STORE_VERSION;

use crate::ids::{Epoch, Seq, Turn};
use crate::sys::{self, Errno};
use blob::BlobStore;
use error::io;
use files::{read_small, replace_small, write_new};
use journal::{Line, Record};
pub(crate) use staged::open_unmoved;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use version::STORE_VERSION_1;

/// Bytes of encoded records [`Store::append_all`] writes at once.
const APPEND_BATCH: usize = 1 << 20;

/// Names of the mounted view's control files, kept in the real store as empty directories: a shell standing in the folder *under* the mount that runs
/// `echo N > .ckpt/turn` gets "Is a directory" instead of writing a stray file into the store
/// while nothing is captured.
pub const CONTROL_GUARDS: [&str; 2] = ["turn", "rewind"];

/// An open store.
#[derive(Debug)]
pub struct Store {
    dir: OwnedFd,
    journal: OwnedFd,
    _lock: OwnedFd,
    /// Content-addressed blobs.
    blobs: std::sync::Arc<BlobStore>,
    /// State replayed from the journal, changed by appending records (`append`) and, for one
    /// case an untrusted journal can make (a staged capture a rewind retired), by dropping its
    /// pending entry (`staged.rs`); outside the store it is read only (`index()`).
    index: Index,
    durable: bool,
    /// `staged/`: pre-images moved here by their removal, named by their capture's seq.
    staged: OwnedFd,
    /// The store's device: only a file on it can be staged (a rename cannot cross devices).
    dev: u64,
    /// Bumped whenever the journal is rewritten (prune renumbers every seq): a staged
    /// pre-image handed to the stager names its capture by `(epoch, seq)`.
    epoch: Epoch,
    /// Counts every change of the journal, for readers that must not take the store lock.
    changes: std::sync::Arc<JournalChanges>,
}

/// How many times the journal changed (a batch appended, a tail cut back, the whole rewritten),
/// read without the store lock: a reader that saw one count under the lock and sees the same
/// count later knows nothing was recorded in between (`.ckpt/turns/` skips its check of a
/// read so). Only the store bumps it, under its lock, right after the change is in the journal
/// and the index, and before the store is unlocked: every change of the folder comes after
/// the record that guards it, so a changed byte of the folder comes after its bump.
#[derive(Debug, Default)]
pub struct JournalChanges(std::sync::atomic::AtomicU64);

impl JournalChanges {
    /// The count now. Sequentially consistent, as the bump is: a reader that fences after
    /// reading a file's bytes and then loads this sees every bump made before the bytes it
    /// read were written.
    pub fn count(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn bump(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Creates (when missing) and opens the store's `staged/` directory in the store directory
/// `d`; with the device it is on.
fn open_staged_dir(d: BorrowedFd<'_>) -> Result<(OwnedFd, u64), StoreError> {
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
    Ok((staged, dev))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks the `VERSION` of the store directory `d`: this build's passes, version 1 is
/// migrated, any other is refused. With `create`, a store without one is new (`layout::check`
/// refused it if it held anything): its `VERSION` and `.gitignore` are written, `VERSION`
/// synced and renamed into place, so a crash never leaves an empty one beside a journal.
fn check_version(d: BorrowedFd<'_>, create: bool) -> Result<(), StoreError> {
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
            replace_small(d, c"VERSION", STORE_VERSION.as_bytes()).map_err(io("write VERSION"))?;
            write_new(d, c".gitignore", b"*\n").map_err(io("write .gitignore"))?;
        }
        Err(Errno(libc::ENOENT)) => return Err(StoreError::Missing),
        Err(e) => return Err(io("read VERSION")(e)),
    }
    Ok(())
}

/// Makes the [`CONTROL_GUARDS`] directories in the store directory `d` (kept when present).
fn make_control_guards(d: BorrowedFd<'_>) -> Result<(), StoreError> {
    for guard in CONTROL_GUARDS {
        let c = CString::new(guard).map_err(|_| io("guard name")(Errno(libc::EINVAL)))?;
        match sys::mkdirat(d, &c, 0o700) {
            // A regular file there is a stray write from under the mount: fsck names it.
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(io("create the control-file guards")(e)),
        }
    }
    Ok(())
}

/// Opens (creating) the journal of the store directory `d` for appending, cuts off a torn
/// last line, and replays the rest into an [`Index`].
fn open_journal(d: BorrowedFd<'_>) -> Result<(OwnedFd, Index), StoreError> {
    let journal = sys::openat(
        d,
        c"journal.jsonl",
        libc::O_CREAT | libc::O_RDWR | libc::O_APPEND | libc::O_NOFOLLOW,
        0o600,
    )
    .map_err(io("open journal"))?;
    let bytes = sys::read_to_end(journal.as_fd()).map_err(io("read journal"))?;
    let parsed = journal::parse(&bytes).map_err(StoreError::Journal)?;
    // Cutting a torn line that is all there is would leave an empty journal: not over blobs
    // it cannot name.
    layout::check_torn_only(d, &parsed, bytes.len())?;
    if parsed.valid_len < bytes.len() {
        log::warn!(target: "ckpt::store", "journal has a torn last line of {} bytes; cutting it off", bytes.len() - parsed.valid_len);
        sys::ftruncate(journal.as_fd(), parsed.valid_len as u64)
            .map_err(io("truncate torn journal tail"))?;
    }
    Ok((journal, Index::replay(&parsed.lines)))
}

/// What [`Store::open`] does when the folder has no store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    /// Make a new one and begin turn 1 (`mount`).
    Create,
    /// Refuse ([`StoreError::Missing`]): reading a folder's history never makes one.
    Refuse,
}

#[cfg(test)]
impl Store {
    /// A unit test's store: made when the folder has none, persisted lazily.
    pub(crate) fn for_test(root: BorrowedFd<'_>) -> Result<Self, StoreError> {
        Self::open(root, IfMissing::Create, crate::tree::Durability::Lazy)
    }

    /// A unit test's store opened again: refused when the folder has none.
    pub(crate) fn reopen_for_test(root: BorrowedFd<'_>) -> Result<Self, StoreError> {
        Self::open(root, IfMissing::Refuse, crate::tree::Durability::Lazy)
    }
}

impl Store {
    /// Appends a `relabel` of `turn` (refused for a turn that is not live).
    pub fn relabel(&mut self, turn: Turn, label: Option<String>) -> Result<(), ops::RelabelError> {
        if !self.index().has_turn(turn) {
            let known = self.index().turns.iter().map(|t| t.turn).collect();
            return Err(ops::RelabelError::NoSuchTurn { turn, known });
        }
        self.append(Record::Relabel { turn, label })
            .map(|_| ())
            .map_err(ops::RelabelError::Store)
    }

    /// Opens the store of the folder behind `root`, taking its lock; `missing` says whether a
    /// folder without one gets a new one (beginning turn 1), and `durability` how records and
    /// blobs are persisted (`--durable`: synced before the change they guard). A store whose
    /// files are not laid out as one (a symlink, blobs without a journal, no `VERSION`:
    /// [`layout`]) is refused before anything in it is written, the lock file included.
    pub fn open(
        root: BorrowedFd<'_>,
        missing: IfMissing,
        durability: crate::tree::Durability,
    ) -> Result<Self, StoreError> {
        let create = missing == IfMissing::Create;
        let durable = durability == crate::tree::Durability::Synced;
        let dir = open_store_dir(root, create)?;
        let d = dir.as_fd();
        layout::check(d)?;
        let lock = lock::take(d)?;
        check_version(d, create)?;
        make_control_guards(d)?;
        let (journal, index) = open_journal(d)?;
        let blobs = std::sync::Arc::new(BlobStore::open(d, durability).map_err(io("open blobs"))?);
        let (staged, dev) = open_staged_dir(d)?;
        let mut store = Self {
            dir,
            journal,
            _lock: lock,
            blobs,
            index,
            durable,
            staged,
            dev,
            epoch: Epoch::new(0),
            changes: std::sync::Arc::default(),
        };
        if store.index.turns.is_empty() {
            store.append(Record::Turn {
                turn: Turn::new(1),
                label: Some("mounted".into()),
                by: None,
                conversation: None,
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

    /// The journal's numbering: changes when the journal is rewritten.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The count of the journal's changes, to read without this lock ([`JournalChanges`]).
    pub fn changes(&self) -> &std::sync::Arc<JournalChanges> {
        &self.changes
    }

    /// The device the store is on.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// Whether every record and blob is synced before the change it guards (`--durable`).
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// The content-addressed blobs.
    pub fn blobs(&self) -> &std::sync::Arc<BlobStore> {
        &self.blobs
    }

    /// The state the journal describes, replayed from it and kept up to date by every append.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The store directory descriptor (for the daemon log and tests).
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Appends one record (one `write(2)`), applies it to the index and returns its seq.
    pub fn append(&mut self, rec: Record) -> Result<Seq, StoreError> {
        self.append_all([rec])
    }

    /// Appends records, applies them and returns the last seq. They are written in batches of
    /// about `APPEND_BATCH` (1 MiB), one `write(2)` each (a torn write still leaves whole lines
    /// and at most one torn last line), and each batch is applied once written: a rewind's
    /// hundred thousand saves never sit in memory as one encoded buffer. A failed batch leaves
    /// the ones before it written and applied, as one record at a time would.
    pub fn append_all(
        &mut self,
        recs: impl IntoIterator<Item = Record>,
    ) -> Result<Seq, StoreError> {
        let time = now();
        let mut lines: Vec<Line> = Vec::new();
        let mut bytes = Vec::new();
        for rec in recs {
            let seq = Seq::new(self.index.last_seq.get() + 1 + lines.len() as u64);
            let line = Line {
                v: rec.version(),
                seq,
                time,
                rec,
            };
            bytes.extend_from_slice(&journal::encode(&line));
            lines.push(line);
            if bytes.len() >= APPEND_BATCH {
                self.write_batch(&bytes, &mut lines)?;
                bytes.clear();
            }
        }
        if !lines.is_empty() {
            self.write_batch(&bytes, &mut lines)?;
        }
        Ok(self.index.last_seq)
    }

    /// Writes one batch of encoded `lines` in one `write(2)`, then applies and drops them.
    fn write_batch(&mut self, bytes: &[u8], lines: &mut Vec<Line>) -> Result<(), StoreError> {
        let n = sys::write(self.journal.as_fd(), bytes).map_err(io("append to journal"))?;
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
        for line in lines.drain(..) {
            self.index.apply(&line);
        }
        // Counted once the lines are in the journal and the index (a count read under the lock
        // never counts a record the index lacks) and before returning to the caller, which
        // changes the folder only then: a changed byte of the folder comes after its count
        // (what `.ckpt/turns/` relies on to skip its check of a read).
        self.changes.bump();
        Ok(())
    }

    /// Every line of the journal as it is on disk now (a torn last line left out).
    pub fn read_lines(&self) -> Result<Vec<journal::Line>, StoreError> {
        let bytes = sys::read_to_end(self.journal.as_fd()).map_err(io("read journal"))?;
        Ok(journal::parse(&bytes).map_err(StoreError::Journal)?.lines)
    }

    /// The whole lines of the journal after its first `from` bytes (which must end a line),
    /// and how many bytes they take (a torn last line is left for a later read).
    pub fn read_lines_from(&self, from: u64) -> Result<(Vec<journal::Line>, u64), StoreError> {
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = sys::pread(self.journal.as_fd(), &mut buf, from + bytes.len() as u64)
                .map_err(io("read journal"))?;
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n]);
        }
        let parsed = journal::parse(&bytes).map_err(StoreError::Journal)?;
        Ok((parsed.lines, parsed.valid_len as u64))
    }

    /// Total size of the journal in bytes.
    pub fn journal_len(&self) -> u64 {
        sys::fstat(self.journal.as_fd()).map_or(0, |st| st.st_size as u64)
    }

    /// Where the journal ends now, for [`Store::roll_back`].
    pub fn journal_end(&self) -> Result<JournalEnd, StoreError> {
        let st = sys::fstat(self.journal.as_fd()).map_err(io("stat journal"))?;
        Ok(JournalEnd {
            len: st.st_size as u64,
            last_seq: self.index.last_seq,
        })
    }

    /// Cuts the journal back to `end`, taken before an operation that was then refused wrote
    /// some of its records (an append of several batches that failed part-way): the records
    /// after it leave the journal, and the index is replayed from what stays, as an open of
    /// the store would. Nothing happens when nothing was appended since.
    pub fn roll_back(&mut self, end: JournalEnd) -> Result<(), StoreError> {
        if self.index.last_seq == end.last_seq && self.journal_len() == end.len {
            return Ok(());
        }
        sys::ftruncate(self.journal.as_fd(), end.len).map_err(io("cut the journal back"))?;
        if self.durable {
            sys::fsync(self.journal.as_fd(), true).map_err(io("sync journal"))?;
        }
        let bytes = sys::read_to_end(self.journal.as_fd()).map_err(io("read journal"))?;
        let parsed = journal::parse(&bytes).map_err(StoreError::Journal)?;
        self.index = Index::replay(&parsed.lines);
        self.changes.bump();
        log::info!(target: "ckpt::store", "journal cut back to seq {} after a refused operation", end.last_seq);
        Ok(())
    }
}

/// Where the journal ended at one moment ([`Store::journal_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalEnd {
    len: u64,
    last_seq: Seq,
}

#[cfg(test)]
mod tests {
    use super::index::tests::{cap, file};
    use super::*;
    use journal::PreImage;

    fn open(dir: &tempfile::TempDir) -> Store {
        let f = std::fs::File::open(dir.path()).expect("open");
        Store::for_test(f.as_fd()).expect("store")
    }

    #[test]
    fn records_beyond_one_batch_are_all_written_in_order_and_replay_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Enough capture lines for several batches of APPEND_BATCH bytes.
        let n = 3 * APPEND_BATCH / 64;
        let paths: Vec<String> = (0..n).map(|i| format!("dir/file-{i:07}")).collect();
        let (last, before) = {
            let mut s = open(&dir);
            s.append(Record::Turn {
                turn: Turn::new(2),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("append");
            let first = s.index.last_seq;
            let last = s
                .append_all(paths.iter().map(|p| cap(2, p, PreImage::Absent)))
                .expect("append_all");
            assert_eq!(last.get(), first.get() + n as u64, "one seq per record");
            assert!(
                s.journal_len() > 2 * APPEND_BATCH as u64,
                "more than one batch"
            );
            (last, s.index.captures.clone())
        };
        assert_eq!(before.len(), n);
        let seen: Vec<&[u8]> = before.iter().map(|c| c.path.as_bytes()).collect();
        let want: Vec<&[u8]> = paths.iter().map(String::as_bytes).collect();
        assert_eq!(seen, want, "in the order given");
        let s = open(&dir);
        assert_eq!(s.index.last_seq, last);
        assert_eq!(s.index.captures, before, "a replay gives the same index");
    }

    #[test]
    fn rewound_turns_leave_the_index_and_a_remount_replays_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut s = open(&dir);
            s.append(Record::Turn {
                turn: Turn::new(2),
                label: Some("edit".into()),
                by: None,
                conversation: None,
            })
            .expect("append");
            s.append(cap(2, "f", file("two"))).expect("append");
            s.append(Record::Turn {
                turn: Turn::new(3),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("append");
            s.append(cap(3, "g", PreImage::Absent)).expect("append");
            let b = s
                .append(Record::RewindBegin {
                    to: Turn::new(2),
                    from: Turn::new(3),
                })
                .expect("append");
            s.append(Record::RewindDone {
                begin: b,
                counts: None,
            })
            .expect("append");
            assert_eq!(s.index.current_turn(), Turn::new(2));
            assert!(s.index.plan_targets(Turn::new(2)).is_empty());
            assert!(!s.index.has_turn(Turn::new(3)));
        }
        let s = open(&dir);
        assert_eq!(s.index.current_turn(), Turn::new(2));
        assert!(s.index.plan_targets(Turn::new(1)).is_empty());
        assert_eq!(
            s.index.turns.iter().map(|t| t.turn).collect::<Vec<_>>(),
            vec![Turn::new(1), Turn::new(2)]
        );
    }

    #[test]
    fn an_unfinished_rewind_is_remembered() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let mut s = open(&dir);
            s.append(Record::Turn {
                turn: Turn::new(2),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("append");
            s.append(cap(2, "f", file("two"))).expect("append");
            s.append(Record::RewindBegin {
                to: Turn::new(2),
                from: Turn::new(2),
            })
            .expect("append");
        }
        let s = open(&dir);
        assert_eq!(s.index.unfinished_rewind.map(|r| r.1), Some(Turn::new(2)));
        assert_eq!(s.index.plan_targets(Turn::new(2)).len(), 1);
    }

    #[test]
    fn a_journal_cut_back_is_as_it_was_and_replays_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = dir.path().join(".ckpt/journal.jsonl");
        let mut s = open(&dir);
        s.append(cap(1, "kept", PreImage::Absent)).expect("append");
        let (bytes, captures) = (
            std::fs::read(&journal).expect("read"),
            s.index.captures.clone(),
        );
        let end = s.journal_end().expect("end");
        s.roll_back(end).expect("nothing to cut");
        // Several batches, all written and applied, then taken back.
        let n = 2 * APPEND_BATCH / 64;
        s.append_all((0..n).map(|i| cap(1, &format!("gone/{i:07}"), PreImage::Absent)))
            .expect("append_all");
        assert!(s.journal_len() > APPEND_BATCH as u64);
        s.roll_back(end).expect("roll back");
        assert_eq!(std::fs::read(&journal).expect("read"), bytes);
        assert_eq!(s.index.captures, captures);
        assert_eq!(s.journal_end().expect("end"), end);
        // Appends go on from there, numbered as if nothing had been written.
        let seq = s.append(cap(1, "next", PreImage::Absent)).expect("append");
        assert_eq!(seq, end.last_seq.next());
        drop(s);
        assert_eq!(open(&dir).index.captures.len(), 2);
    }

    #[test]
    fn a_store_of_another_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(open(&dir));
        std::fs::write(dir.path().join(".ckpt/VERSION"), "ckpt-mount store 9\n").expect("write");
        let f = std::fs::File::open(dir.path()).expect("open");
        assert!(matches!(
            Store::for_test(f.as_fd()),
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
