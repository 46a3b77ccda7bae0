//! Pack files: small blobs appended to one file instead of one file each.
//!
//! Creating a file per captured pre-image costs an inode allocation, and on ext4 after mass
//! deletions that allocation dominates the capture (measured: most of the daemon's CPU in
//! `ext4 recently_deleted`). Small blobs therefore go to `blobs/packs/pack-N.dat`, appended with
//! one `write(2)` (or, for a caller that holds its appends, many in one: [`Packs::hold_appends`]),
//! and get one line in `blobs/packs/pack-N.idx`: `<sha256 hex> <offset> <length> <r|z>\n` (raw
//! or zstd). Invariants: data is written before its index line, and the journal record that
//! names the blob after both, so a torn tail of either file names nothing; index lines that are
//! torn or point past the end of their data file are ignored when loading.

use crate::ids::BlobId;
use crate::sync::Mutex;
use crate::sys::{self, Errno, SysResult};
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// A pack is closed for appends past this size.
const PACK_LIMIT: u64 = 256 << 20;

/// Where a packed blob is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    /// Pack number.
    pub pack: u32,
    /// Byte offset in the data file.
    pub off: u64,
    /// Stored length (compressed length when `compressed`).
    pub len: u32,
    /// Whether the stored bytes are zstd.
    pub compressed: bool,
}

/// Where the packs end: the pack appended to, and the lengths of its data and index files
/// once what is held now is written ([`Packs::mark`], [`Packs::take_back`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pack: u32,
    size: u64,
    idx_size: u64,
    /// The empty blobs (no data) at `size` already: only their index lines tell them from one
    /// appended after the mark, at the same offset.
    empty_at_end: Vec<BlobId>,
}

impl Mark {
    /// Whether the blob at `l` was appended after this mark.
    fn precedes(&self, id: &BlobId, l: &Loc) -> bool {
        l.pack > self.pack
            || (l.pack == self.pack
                && l.off >= self.size
                && !(l.len == 0 && l.off == self.size && self.empty_at_end.contains(id)))
    }
}

/// Appends a batch held in memory ([`Packs::hold_appends`]) are gathered into, until they are
/// written in one `write(2)` each for data and index lines.
const HOLD_LIMIT: usize = 1 << 20;

struct Writer {
    pack: u32,
    data: OwnedFd,
    idx: OwnedFd,
    /// Bytes of the data file, with the pending ones.
    size: u64,
    /// Bytes of the index file, known so a failed append is cut back without asking.
    idx_size: u64,
    /// The threads whose appends are held ([`Packs::hold_appends`], and the threads that
    /// [`HeldAppends::join`]ed that hold); anyone else's are written at once, after what is held.
    holders: Vec<std::thread::ThreadId>,
    pending: Pending,
}

impl Writer {
    /// Whether the calling thread's appends are held.
    fn holds_for_this_thread(&self) -> bool {
        self.holders.contains(&std::thread::current().id())
    }
}

/// Appends not written yet: one blob between its `put` and its write, or, for the holders, a
/// batch. A rewind saving 100,000 files, two small `write(2)`s each (data, index line), made
/// them 8 % of its system calls. Another thread's append writes the batch first, so nothing it
/// journals after its own append can name a blob that is not on disk; the holders journal
/// nothing naming these blobs before [`HeldAppends::finish`] has written them (a hold shared
/// by worker threads is journaled by the thread that began it, after every worker finished).
#[derive(Default)]
struct Pending {
    /// The last `data.len()` bytes of [`Writer::size`].
    data: Vec<u8>,
    /// Their index lines.
    lines: Vec<u8>,
    /// Their blobs, taken out of the index again if writing them fails.
    ids: Vec<BlobId>,
    /// Why held blobs were lost (a failed write, maybe on another thread's append): every
    /// holder's [`HeldAppends::finish`] fails with it, so none journals what names them.
    lost: Option<Errno>,
}

/// While it lives, the packs' appends from this thread are held in memory and written in
/// large batches; [`Self::finish`] writes the rest (dropping it does too, logging a failure).
pub struct HeldAppends<'a> {
    packs: &'a Packs,
    active: bool,
}

impl<'a> HeldAppends<'a> {
    /// Holds the calling thread's appends too, in the same batch, until the guard this returns
    /// is finished: for the worker threads of the thread that began the hold, which journals
    /// what they store only after each of them finished. Nothing is held when this guard holds
    /// nothing.
    pub fn join(&self) -> HeldAppends<'a> {
        let active = self.active && self.packs.join_holding();
        HeldAppends {
            packs: self.packs,
            active,
        }
    }

    /// Writes what is held and stops holding.
    pub fn finish(mut self) -> SysResult<()> {
        if !std::mem::take(&mut self.active) {
            // It held nothing: another hold, on this thread or not, is not its to stop.
            return Ok(());
        }
        self.packs.stop_holding()
    }
}

impl Drop for HeldAppends<'_> {
    fn drop(&mut self) {
        if self.active
            && let Err(e) = self.packs.stop_holding()
        {
            log::error!(target: "ckpt::store", "held pack appends could not be written: {e}");
        }
    }
}

/// Appends `buf` whole to `fd` (opened `O_APPEND`).
fn append_all(fd: BorrowedFd<'_>, buf: &[u8]) -> SysResult<()> {
    let mut done = 0;
    while done < buf.len() {
        match sys::write(fd, &buf[done..]) {
            Ok(0) => return Err(Errno(libc::ENOSPC)),
            Ok(n) => done += n,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The packs of a blob store.
pub struct Packs {
    dir: OwnedFd,
    index: Mutex<HashMap<BlobId, Loc>>,
    readers: Mutex<HashMap<u32, Arc<OwnedFd>>>,
    writer: Mutex<Option<Writer>>,
    dead: Mutex<HashSet<BlobId>>,
    durable: bool,
    /// Size past which `put` starts the next pack ([`PACK_LIMIT`]; smaller in tests).
    limit: u64,
}

impl std::fmt::Debug for Packs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packs").finish_non_exhaustive()
    }
}

fn name(pack: u32, ext: &str) -> CString {
    CString::new(format!("pack-{pack}.{ext}")).unwrap_or_default()
}

/// Parses one index line (a line whose first field is not a blob id is not one).
fn parse_line(line: &[u8], pack: u32) -> Option<(BlobId, Loc)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut it = text.split(' ');
    let id: BlobId = it.next()?.parse().ok()?;
    let off = it.next()?.parse().ok()?;
    let len = it.next()?.parse().ok()?;
    let compressed = match it.next()? {
        "r" => false,
        "z" => true,
        _ => return None,
    };
    if it.next().is_some() {
        return None;
    }
    Some((
        id,
        Loc {
            pack,
            off,
            len,
            compressed,
        },
    ))
}

/// Whether [`Packs::open`] may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Creates `packs/` when missing, and appends to the last pack.
    ReadWrite,
    /// Reads only (`BlobStore::open_readonly`: `fsck`, a look at a store another process has).
    ReadOnly,
}

impl Packs {
    /// Opens `packs/` under the blob directory (creating it for [`Access::ReadWrite`]) and loads
    /// every index; `durability` says whether appends are synced.
    pub fn open(
        blobs: BorrowedFd<'_>,
        access: Access,
        durability: crate::tree::Durability,
    ) -> SysResult<Self> {
        let writable = access == Access::ReadWrite;
        let durable = durability == crate::tree::Durability::Synced;
        if writable {
            match sys::mkdirat(blobs, c"packs", 0o700) {
                Ok(()) | Err(Errno(libc::EEXIST)) => {}
                Err(e) => return Err(e),
            }
        }
        let dir = sys::openat(
            blobs,
            c"packs",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        let listing = sys::reopen(dir.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)?;
        let mut packs: Vec<u32> = sys::read_dir_all(listing.as_fd(), false)?
            .iter()
            .filter_map(|e| {
                let n = std::str::from_utf8(&e.name).ok()?;
                n.strip_prefix("pack-")?.strip_suffix(".dat")?.parse().ok()
            })
            .collect();
        packs.sort_unstable();
        let mut index = HashMap::new();
        for &p in &packs {
            let size = sys::lstatat(dir.as_fd(), &name(p, "dat")).map_or(0, |st| st.st_size as u64);
            let idx = match sys::read_file(dir.as_fd(), &name(p, "idx")) {
                Ok(b) => b,
                Err(Errno(libc::ENOENT)) => Vec::new(),
                Err(e) => return Err(e),
            };
            for line in idx.split(|b| *b == b'\n') {
                if let Some((id, loc)) = parse_line(line, p)
                    && loc.off + u64::from(loc.len) <= size
                {
                    index.insert(id, loc);
                }
            }
        }
        let packs = Self {
            dir,
            index: Mutex::leaf(index),
            readers: Mutex::leaf(HashMap::new()),
            writer: Mutex::leaf(None),
            dead: Mutex::leaf(HashSet::new()),
            durable,
            limit: PACK_LIMIT,
        };
        if writable {
            let last = packs_last(&packs)?;
            *packs.writer.lock() = Some(packs.open_writer(last)?);
        }
        Ok(packs)
    }

    fn open_writer(&self, pack: u32) -> SysResult<Writer> {
        let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_APPEND | libc::O_NOFOLLOW;
        let data = sys::openat(self.dir.as_fd(), &name(pack, "dat"), flags, 0o600)?;
        let idx = sys::openat(self.dir.as_fd(), &name(pack, "idx"), flags, 0o600)?;
        if self.durable {
            // A new pack's names must survive a power loss with the records that point into it.
            self.sync_dir()?;
        }
        let size = sys::fstat(data.as_fd())?.st_size as u64;
        let idx_size = sys::fstat(idx.as_fd())?.st_size as u64;
        Ok(Writer {
            pack,
            data,
            idx,
            size,
            idx_size,
            holders: Vec::new(),
            pending: Pending::default(),
        })
    }

    /// Holds this thread's appends in memory until the guard is finished or dropped (see
    /// `Pending`). When another thread holds them already, nothing is held for this one.
    pub fn hold_appends(&self) -> HeldAppends<'_> {
        let mut guard = self.writer.lock();
        let active = match guard.as_mut() {
            Some(w) if w.holders.is_empty() => {
                w.holders.push(std::thread::current().id());
                w.pending.lost = None;
                true
            }
            _ => false,
        };
        HeldAppends {
            packs: self,
            active,
        }
    }

    /// Writes the appends another thread holds, if any: before this thread takes a blob as
    /// stored because the index has it (a stager's file whose bytes a rewind just saved), so
    /// that what it journals next never names bytes still in memory.
    pub fn write_held_of_others(&self) -> SysResult<()> {
        let mut guard = self.writer.lock();
        match guard.as_mut() {
            Some(w) if !w.holders.is_empty() && !w.holds_for_this_thread() => self.write_pending(w),
            _ => Ok(()),
        }
    }

    /// Adds this thread to a hold that is on; `false` when none is (the packs were closed).
    fn join_holding(&self) -> bool {
        let mut guard = self.writer.lock();
        match guard.as_mut() {
            Some(w) if !w.holders.is_empty() => {
                w.holders.push(std::thread::current().id());
                true
            }
            _ => false,
        }
    }

    /// Writes the held appends and stops holding for this thread. A loss is reported to every
    /// holder until the last one stops.
    fn stop_holding(&self) -> SysResult<()> {
        let mut guard = self.writer.lock();
        let Some(w) = guard.as_mut() else {
            return Ok(());
        };
        let written = self.write_pending(w);
        let me = std::thread::current().id();
        if let Some(at) = w.holders.iter().position(|t| *t == me) {
            w.holders.swap_remove(at);
        }
        let lost = if w.holders.is_empty() {
            // A batch's room is given back with the hold.
            std::mem::take(&mut w.pending).lost
        } else {
            w.pending.lost
        };
        written.and(lost.map_or(Ok(()), Err))
    }

    /// Writes what is pending in `w`: the data, then its index lines. On failure both files are
    /// cut back and the blobs leave the index, as if never put.
    fn write_pending(&self, w: &mut Writer) -> SysResult<()> {
        let Writer {
            data,
            idx,
            size,
            idx_size,
            holders,
            pending,
            ..
        } = w;
        // Nothing pending is no index line pending: an empty blob adds a line and no data.
        if pending.ids.is_empty() {
            return Ok(());
        }
        let start = *size - pending.data.len() as u64;
        let written = append_all(data.as_fd(), &pending.data)
            .and_then(|()| {
                crate::failpoint::hit("pack-after-data");
                if self.durable {
                    sys::fsync(data.as_fd(), true)?;
                }
                append_all(idx.as_fd(), &pending.lines)
            })
            .and_then(|()| {
                if self.durable {
                    sys::fsync(idx.as_fd(), true)?;
                }
                Ok(())
            });
        match written {
            Ok(()) => *idx_size += pending.lines.len() as u64,
            Err(e) => {
                if !holders.is_empty() {
                    pending.lost.get_or_insert(e);
                }
                // The index first: cut off after a crash between the two, data past the last
                // line is only unused room, where a line past the data would name the bytes
                // the next append puts there.
                let _ = sys::ftruncate(idx.as_fd(), *idx_size);
                let _ = sys::ftruncate(data.as_fd(), start);
                let mut index = self.index.lock();
                for id in &pending.ids {
                    index.remove(id);
                }
                *size = start;
            }
        }
        pending.data.clear();
        pending.lines.clear();
        pending.ids.clear();
        written
    }

    /// The bytes of `loc` while they are still held, not written.
    fn read_held(&self, loc: Loc) -> Option<Vec<u8>> {
        let guard = self.writer.lock();
        let w = guard.as_ref()?;
        let start = w.size - w.pending.data.len() as u64;
        if w.pack != loc.pack || loc.off < start {
            return None;
        }
        let from = usize::try_from(loc.off - start).ok()?;
        Some(w.pending.data.get(from..from + loc.len as usize)?.to_vec())
    }

    /// Makes the entries of `packs/` (new pack files, removed ones) durable.
    fn sync_dir(&self) -> SysResult<()> {
        crate::tree::sync_dir(self.dir.as_fd())
    }

    /// Where a blob is, if packed.
    pub fn get(&self, id: &BlobId) -> Option<Loc> {
        self.index.lock().get(id).copied()
    }

    /// Appends a blob's stored bytes (`compressed` says whether they are zstd).
    pub fn put(&self, id: &BlobId, stored: &[u8], compressed: bool) -> SysResult<()> {
        let len = u32::try_from(stored.len()).map_err(|_| Errno(libc::EFBIG))?;
        let mut guard = self.writer.lock();
        let Some(w) = guard.as_mut() else {
            return Err(Errno(libc::EROFS));
        };
        let holding = w.holds_for_this_thread();
        if !holding {
            // Another thread's held appends go first (see `Pending`).
            self.write_pending(w)?;
        }
        if w.size >= self.limit {
            self.write_pending(w)?;
            let mut next = self.open_writer(w.pack + 1)?;
            next.holders = std::mem::take(&mut w.holders);
            next.pending = std::mem::take(&mut w.pending);
            *w = next;
        }
        let off = w.size;
        let kind = if compressed { "z" } else { "r" };
        w.pending.data.extend_from_slice(stored);
        w.pending
            .lines
            .extend_from_slice(format!("{id} {off} {len} {kind}\n").as_bytes());
        w.pending.ids.push(*id);
        w.size += u64::from(len);
        self.index.lock().insert(
            *id,
            Loc {
                pack: w.pack,
                off,
                len,
                compressed,
            },
        );
        if !holding || w.pending.data.len() >= HOLD_LIMIT {
            self.write_pending(w)?;
        }
        Ok(())
    }

    /// Where the packs end now (`None` for read-only packs).
    pub fn mark(&self) -> Option<Mark> {
        let guard = self.writer.lock();
        let w = guard.as_ref()?;
        let empty_at_end = self
            .index
            .lock()
            .iter()
            .filter(|(_, l)| l.len == 0 && l.pack == w.pack && l.off == w.size)
            .map(|(id, _)| *id)
            .collect();
        Some(Mark {
            pack: w.pack,
            size: w.size,
            idx_size: w.idx_size + w.pending.lines.len() as u64,
            empty_at_end,
        })
    }

    /// Takes back the blobs `ids`, appended since `end`, by cutting the pack back to `end`:
    /// only when they are all that was appended since (the same pack, nothing held, no other
    /// blob past `end`). `Ok(false)` and nothing done otherwise.
    pub fn take_back(&self, end: Mark, ids: &HashSet<BlobId>) -> SysResult<bool> {
        let mut guard = self.writer.lock();
        let Some(w) = guard.as_mut() else {
            return Ok(false);
        };
        // Nothing to cut when the packs ended before the mark (appends lost since, a line
        // counted at the mark but never written): a cut would pad or split index lines.
        if w.pack != end.pack
            || !w.pending.ids.is_empty()
            || w.size < end.size
            || w.idx_size < end.idx_size
        {
            return Ok(false);
        }
        let mut index = self.index.lock();
        if index
            .iter()
            .any(|(id, l)| end.precedes(id, l) && !ids.contains(id))
        {
            return Ok(false);
        }
        // The index first, as in `write_pending`; once its lines are cut the blobs leave the
        // index in memory too, whatever the data file's cut gives (a data file longer than
        // its last line is only unused room).
        sys::ftruncate(w.idx.as_fd(), end.idx_size)?;
        w.idx_size = end.idx_size;
        index.retain(|id, l| !end.precedes(id, l));
        if sys::ftruncate(w.data.as_fd(), end.size).is_ok() {
            w.size = end.size;
        }
        Ok(true)
    }

    /// The stored bytes of a packed blob.
    pub fn read(&self, loc: Loc) -> SysResult<Vec<u8>> {
        if let Some(bytes) = self.read_held(loc) {
            return Ok(bytes);
        }
        let fd = {
            let mut readers = self.readers.lock();
            match readers.get(&loc.pack) {
                Some(fd) => fd.clone(),
                None => {
                    let fd = Arc::new(sys::openat(
                        self.dir.as_fd(),
                        &name(loc.pack, "dat"),
                        libc::O_RDONLY | libc::O_NOFOLLOW,
                        0,
                    )?);
                    readers.insert(loc.pack, fd.clone());
                    fd
                }
            }
        };
        let mut buf = vec![0u8; loc.len as usize];
        let n = sys::read_full(fd.as_fd(), &mut buf, loc.off)?;
        if n != buf.len() {
            return Err(Errno(libc::EIO));
        }
        Ok(buf)
    }

    /// Every packed blob with its stored length.
    pub fn entries(&self) -> Vec<(BlobId, u64)> {
        let dead = self.dead.lock();
        self.index
            .lock()
            .iter()
            .filter(|(id, _)| !dead.contains(*id))
            .map(|(id, l)| (*id, u64::from(l.len)))
            .collect()
    }

    /// Marks a packed blob for removal by the next [`Packs::compact`].
    pub fn remove(&self, id: &BlobId) -> bool {
        if self.index.lock().contains_key(id) {
            self.dead.lock().insert(*id);
            true
        } else {
            false
        }
    }

    /// Rewrites the packs without the removed blobs (prune): live blobs are copied into a new
    /// pack, which is synced before the old packs are deleted.
    pub fn compact(&self) -> SysResult<()> {
        let dead: HashSet<BlobId> = std::mem::take(&mut *self.dead.lock());
        if dead.is_empty() {
            return Ok(());
        }
        let old: Vec<(BlobId, Loc)> = self.index.lock().iter().map(|(k, v)| (*k, *v)).collect();
        let old_packs: HashSet<u32> = old.iter().map(|(_, l)| l.pack).collect();
        let next = old_packs.iter().max().map_or(0, |m| m + 1);
        {
            // Held appends are written to the pack they were counted in, and the hold goes on
            // in the new one.
            let mut guard = self.writer.lock();
            let mut fresh = self.open_writer(next)?;
            if let Some(w) = guard.as_mut() {
                self.write_pending(w)?;
                fresh.holders = std::mem::take(&mut w.holders);
                fresh.pending = std::mem::take(&mut w.pending);
            }
            *guard = Some(fresh);
        }
        let mut fresh = HashMap::new();
        for (id, loc) in old.iter().filter(|(id, _)| !dead.contains(id)) {
            let bytes = self.read(*loc)?;
            fresh.insert(*id, *loc);
            self.put(id, &bytes, loc.compressed)?;
        }
        // `put` rolls over to a further pack past PACK_LIMIT: every pack from `next` on is new,
        // and each is synced (with the directory naming it) before the old ones go.
        let last = self.writer.lock().as_ref().map_or(next, |w| w.pack);
        for p in next..=last {
            for ext in ["dat", "idx"] {
                let fd = sys::openat(
                    self.dir.as_fd(),
                    &name(p, ext),
                    libc::O_RDONLY | libc::O_NOFOLLOW,
                    0,
                )?;
                sys::fsync(fd.as_fd(), false)?;
            }
        }
        self.sync_dir()?;
        self.readers.lock().retain(|p, _| !old_packs.contains(p));
        for p in old_packs {
            let _ = sys::unlinkat(self.dir.as_fd(), &name(p, "idx"), 0);
            let _ = sys::unlinkat(self.dir.as_fd(), &name(p, "dat"), 0);
        }
        self.index
            .lock()
            .retain(|id, l| fresh.contains_key(id) && l.pack >= next);
        self.sync_dir()
    }
}

/// The pack to append to: the newest one.
fn packs_last(p: &Packs) -> SysResult<u32> {
    Ok(p.index.lock().values().map(|l| l.pack).max().unwrap_or(0))
}

#[cfg(test)]
mod tests;
