//! Content-addressed blobs, named by the sha256 of their raw bytes: loose files
//! `blobs/<2 hex>/<62 hex>` (raw) or `….zst` (zstd), and small ones appended to the packs of
//! [`super::pack`]; readers accept every form (docs/FORMAT.md).
//!
//! Invariants: a loose blob only ever appears under its final name by `rename` of a complete
//! temp file, so a reader never sees a partial blob; identical bytes are stored once, in one
//! form or another. Temp files are `.tmp-<pid>-<n>` and are removed at open.

use crate::ids::BlobId;
use crate::sync::Mutex;
use crate::sys::{self, Errno, SysResult};
use crate::tree::{Durability, TempFile};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod tracking;
use tracking::Tracking;
pub use tracking::{Added, TrackingJoined};

const CHUNK: usize = 256 * 1024;

/// Outcome of storing content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The sha256 of the bytes.
    pub id: BlobId,
    /// Bytes read.
    pub size: u64,
    /// Whether new bytes were written (false when the blob already existed).
    pub new: bool,
}

/// The blob directory of a store.
#[derive(Debug)]
pub struct BlobStore {
    dir: OwnedFd,
    /// The 256 shard directories, each made and opened the first time a blob goes there (or is
    /// looked up there and found) and then held (empty for a read-only store), so that storing
    /// a blob costs no `mkdir` and no directory lookup, and opening a store costs no 256 of
    /// them (a store whose small blobs all go to packs needs none). Let go of again only when
    /// [`Added::take_back`] removes a shard that the work it took back made.
    shards: Vec<Mutex<Option<Arc<OwnedFd>>>>,
    durable: bool,
    compress: std::sync::atomic::AtomicBool,
    seq: AtomicU64,
    /// Blobs of at most [`SMALL`] bytes, appended to pack files (no inode per blob).
    packs: Option<super::pack::Packs>,
    /// The loose blobs' ids, listed at open and kept by this (the only) writer: a blob not in
    /// it is not loose, so storing a new small blob costs no `fstatat` of its two loose names.
    /// One that is in it is still looked up on disk (a blob deleted by hand is stored again).
    /// `None` for a read-only store, which always looks on disk.
    loose: Option<Mutex<HashSet<BlobId>>>,
    /// Held while a small blob is looked up and appended, and through a compaction: puts from
    /// the stager thread (outside the store lock) neither store a blob twice nor append to a
    /// pack a compaction is about to delete.
    put_lock: Mutex<()>,
    /// The blobs a piece of work is storing anew, listed while it may still be refused
    /// ([`BlobStore::track_added`]); `None` when no work is tracked.
    tracking: Mutex<Option<Tracking>>,
}

/// Suffix of a blob stored zstd-compressed; a blob without it holds the raw bytes.
const ZST: &str = ".zst";

/// A shard directory: held by the store, or opened for one call.
enum ShardFd {
    Held(Arc<OwnedFd>),
    Opened(OwnedFd),
}

impl AsFd for ShardFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Held(fd) => fd.as_fd(),
            Self::Opened(fd) => fd.as_fd(),
        }
    }
}

/// Reads of at most this size are hashed in memory before anything is written.
const SMALL: usize = 64 * 1024;

/// The most a new blob of `size` bytes takes on a disk that allocates whole blocks of `block`
/// bytes: a small one its bytes and its index line in a pack; a larger one a loose file of
/// whole blocks, and a block for the shard directory it may make (compression only takes less).
pub fn room_for(size: u64, block: u64) -> u64 {
    /// An index line of a pack: a sha256 in hex, an offset, a length and a letter.
    const INDEX_LINE: u64 = 100;
    let block = block.max(1);
    if size < SMALL as u64 {
        size + INDEX_LINE
    } else {
        size.div_ceil(block)
            .saturating_mul(block)
            .saturating_add(block)
    }
}

impl BlobStore {
    /// Opens (creating if needed) the blob directory under the store directory.
    pub fn open(store: BorrowedFd<'_>, durability: Durability) -> SysResult<Self> {
        let durable = durability == Durability::Synced;
        match sys::mkdirat(store, c"blobs", 0o700) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
        let dir = sys::openat(
            store,
            c"blobs",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        let shards = (0..256).map(|_| Mutex::leaf(None)).collect();
        let packs = Some(super::pack::Packs::open(
            dir.as_fd(),
            super::pack::Access::ReadWrite,
            durability,
        )?);
        let mut s = Self {
            dir,
            packs,
            shards,
            durable,
            compress: std::sync::atomic::AtomicBool::new(false),
            seq: AtomicU64::new(0),
            loose: None,
            put_lock: Mutex::ranked(crate::sync::Rank::BlobPut, ()),
            tracking: Mutex::leaf(None),
        };
        s.loose = Some(Mutex::leaf(s.scan_shards()));
        Ok(s)
    }

    /// Opens the blob directory without creating anything or removing temp files (fsck).
    pub fn open_readonly(store: BorrowedFd<'_>) -> SysResult<Self> {
        let dir = sys::openat(
            store,
            c"blobs",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        Ok(Self {
            packs: super::pack::Packs::open(
                dir.as_fd(),
                super::pack::Access::ReadOnly,
                Durability::Lazy,
            )
            .ok(),
            dir,
            shards: Vec::new(),
            durable: false,
            compress: std::sync::atomic::AtomicBool::new(false),
            seq: AtomicU64::new(0),
            loose: None,
            put_lock: Mutex::ranked(crate::sync::Rank::BlobPut, ()),
            tracking: Mutex::leaf(None),
        })
    }

    fn shard(&self, id: &BlobId, create: bool) -> SysResult<ShardFd> {
        if let Some(cell) = self.shards.get(usize::from(id.as_bytes()[0])) {
            if let Some(fd) = cell.lock().as_ref() {
                return Ok(ShardFd::Held(Arc::clone(fd)));
            }
            // Opened without the cell's lock held; another thread may set it meanwhile: the
            // same directory, so either does.
            let fd = Arc::new(self.open_shard(id, create)?);
            *cell.lock() = Some(Arc::clone(&fd));
            return Ok(ShardFd::Held(fd));
        }
        self.open_shard(id, create).map(ShardFd::Opened)
    }

    /// Removes the shard directory `shard` if it is empty, and lets go of its descriptor (the
    /// next blob stored there makes it again).
    fn remove_shard(&self, shard: u8) {
        if let Some(cell) = self.shards.get(usize::from(shard)) {
            cell.lock().take();
        }
        let Ok(name) = CString::new(format!("{shard:02x}")) else {
            return;
        };
        match sys::unlinkat(self.dir.as_fd(), &name, libc::AT_REMOVEDIR) {
            Ok(()) | Err(Errno(libc::ENOENT | libc::ENOTEMPTY | libc::EEXIST)) => {}
            Err(e) => {
                log::warn!(target: "ckpt::store", "cannot remove the empty blob shard {shard:02x}: {e}")
            }
        }
    }

    fn open_shard(&self, id: &BlobId, create: bool) -> SysResult<OwnedFd> {
        let name =
            CString::new(format!("{:02x}", id.as_bytes()[0])).map_err(|_| Errno(libc::EINVAL))?;
        if create {
            match sys::mkdirat(self.dir.as_fd(), &name, 0o700) {
                Ok(()) => {
                    self.note_added(None, Some(id.as_bytes()[0]));
                    // A new shard's name in `blobs/` is synced before a blob in it is relied on.
                    if self.durable {
                        crate::tree::sync_dir(self.dir.as_fd())?;
                    }
                }
                Err(Errno(libc::EEXIST)) => {}
                Err(e) => return Err(e),
            }
        }
        sys::openat(
            self.dir.as_fd(),
            &name,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
    }

    /// Stores new blobs zstd-compressed (level 3). Blobs already stored keep their form;
    /// readers take either.
    pub fn set_compress(&self, on: bool) {
        self.compress.store(on, Ordering::Relaxed);
    }

    fn compressing(&self) -> bool {
        self.compress.load(Ordering::Relaxed)
    }

    /// The two names a loose blob can have in its shard: the last 62 hex characters of its id,
    /// with or without [`ZST`].
    fn names(id: &BlobId) -> SysResult<(CString, CString)> {
        let hex = id.to_hex();
        let raw = CString::new(&hex[2..]).map_err(|_| Errno(libc::EINVAL))?;
        let zst = CString::new(format!("{}{ZST}", &hex[2..])).map_err(|_| Errno(libc::EINVAL))?;
        Ok((raw, zst))
    }

    /// Opens a blob: its descriptor, and whether it is compressed.
    fn find(&self, id: &BlobId) -> SysResult<(OwnedFd, bool)> {
        let shard = self.shard(id, false)?;
        let (raw, zst) = Self::names(id)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW;
        match sys::openat(shard.as_fd(), &raw, flags, 0) {
            Ok(fd) => Ok((fd, false)),
            Err(Errno(libc::ENOENT)) => {
                sys::openat(shard.as_fd(), &zst, flags, 0).map(|fd| (fd, true))
            }
            Err(e) => Err(e),
        }
    }

    /// A descriptor to read the blob's bytes at any offset, when they are stored as they are
    /// (a loose, uncompressed blob); `None` for a packed or compressed one, or none at all.
    pub fn open_plain(&self, id: &BlobId) -> Option<OwnedFd> {
        if self.packs.as_ref().is_some_and(|p| p.get(id).is_some()) {
            return None;
        }
        match self.find(id) {
            Ok((fd, false)) => Some(fd),
            _ => None,
        }
    }

    /// Whether the blob exists (in either form).
    pub fn exists(&self, id: &BlobId) -> bool {
        self.stored_form(id).is_some()
    }

    /// `Some(compressed?)` when the blob exists.
    pub fn stored_form(&self, id: &BlobId) -> Option<bool> {
        if let Some(loc) = self.packs.as_ref().and_then(|p| p.get(id)) {
            return Some(loc.compressed);
        }
        if let Some(loose) = &self.loose
            && !loose.lock().contains(id)
        {
            return None;
        }
        let shard = self.shard(id, false).ok()?;
        let (raw, zst) = Self::names(id).ok()?;
        if sys::lstatat(shard.as_fd(), &raw).is_ok() {
            Some(false)
        } else if sys::lstatat(shard.as_fd(), &zst).is_ok() {
            Some(true)
        } else {
            None
        }
    }

    /// Streams a blob's original bytes to `sink`, decompressing when needed; returns the size.
    pub fn read_blob(
        &self,
        id: &BlobId,
        sink: &mut dyn FnMut(&[u8]) -> SysResult<()>,
    ) -> SysResult<u64> {
        if let Some(packs) = &self.packs
            && let Some(loc) = packs.get(id)
        {
            let stored = packs.read(loc)?;
            let bytes = if loc.compressed {
                zstd::stream::decode_all(&stored[..]).map_err(|_| Errno(libc::EIO))?
            } else {
                stored
            };
            sink(&bytes)?;
            return Ok(bytes.len() as u64);
        }
        let (fd, compressed) = self.find(id)?;
        let mut total = 0u64;
        if compressed {
            use std::io::Read;
            let mut dec =
                zstd::stream::read::Decoder::new(std::fs::File::from(fd)).map_err(Errno::from)?;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = match dec.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // A damaged frame is corrupt data, whatever errno-less error zstd gives.
                    Err(e) => return Err(Errno(e.raw_os_error().unwrap_or(libc::EIO))),
                };
                if n == 0 {
                    return Ok(total);
                }
                sink(&buf[..n])?;
                total += n as u64;
            }
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = sys::read_full(fd.as_fd(), &mut buf, total)?;
            if n == 0 {
                return Ok(total);
            }
            sink(&buf[..n])?;
            total += n as u64;
        }
    }

    /// Re-hashes a blob; `Ok(false)` when its bytes do not match its name (or a compressed
    /// blob does not decompress).
    pub fn verify(&self, id: &BlobId) -> SysResult<bool> {
        let mut h = Sha256::new();
        match self.read_blob(id, &mut |b| {
            h.update(b);
            Ok(())
        }) {
            Ok(_) => Ok(BlobId::finish(h) == *id),
            Err(Errno(libc::EIO)) if self.stored_form(id) == Some(true) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Stores the whole content of `src` (read from offset 0), streaming with constant memory.
    pub fn put_fd(&self, src: BorrowedFd<'_>) -> SysResult<Stored> {
        self.put_fd_sized(src, SMALL as u64)
    }

    /// As [`Self::put_fd`], for a file the caller has just seen to be `size_hint` bytes long:
    /// a small file is read into a buffer of its size (plus one byte, to see it did not grow)
    /// instead of a zeroed 64 KiB one per capture.
    pub fn put_fd_sized(&self, src: BorrowedFd<'_>, size_hint: u64) -> SysResult<Stored> {
        if let Ok(hint) = usize::try_from(size_hint)
            && hint < SMALL
            && let Some(bytes) = sys::read_if_at_most(src, hint)?
        {
            return self.put_bytes(&bytes);
        }
        // Large, or grew since it was sized: the general way.
        let mut small = vec![0u8; SMALL];
        let first = sys::read_full(src, &mut small, 0)?;
        if first < SMALL {
            // Small file: hash first, write only if new.
            return self.put_bytes(&small[..first]);
        }
        let tmp = TempFile::create(self.dir.as_fd(), self.temp_name())?;
        let mut h = Sha256::new();
        let mut out = BlobWriter::new(tmp.fd(), self.compressing())?;
        h.update(&small);
        out.write(&small)?;
        let mut off = SMALL as u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = sys::read_full(src, &mut buf, off)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write(&buf[..n])?;
            off += n as u64;
        }
        out.finish()?;
        let id = BlobId::finish(h);
        if self.exists(&id) {
            self.note_found(&id);
            // The temp file is removed as it drops.
            return Ok(Stored {
                id,
                size: off,
                new: false,
            });
        }
        self.publish(tmp, id, off)
    }

    /// Holds this thread's small-blob appends in memory and writes them in large batches until
    /// the guard is finished (`None`: no packs, nothing to hold). For a caller that journals
    /// nothing naming the blobs it stores before it finishes the guard (a rewind's saves).
    pub fn hold_pack_appends(&self) -> Option<super::pack::HeldAppends<'_>> {
        self.packs.as_ref().map(super::pack::Packs::hold_appends)
    }

    /// Stores bytes held in memory.
    pub fn put_bytes(&self, bytes: &[u8]) -> SysResult<Stored> {
        self.put_hashed(&BlobId::of(bytes), bytes)
    }

    /// Stores bytes whose sha256 the caller computed (`id`; the caller's duty to be right).
    pub fn put_hashed(&self, id: &BlobId, bytes: &[u8]) -> SysResult<Stored> {
        let id = *id;
        let size = bytes.len() as u64;
        if bytes.len() <= SMALL
            && let Some(packs) = &self.packs
        {
            let _put = self.put_lock.lock();
            packs.write_held_of_others()?;
            if self.exists(&id) {
                self.note_found(&id);
                return Ok(Stored {
                    id,
                    size,
                    new: false,
                });
            }
            if self.compressing() {
                let packed = zstd::bulk::compress(bytes, ZSTD_LEVEL).map_err(Errno::from)?;
                packs.put(&id, &packed, true)?;
            } else {
                packs.put(&id, bytes, false)?;
            }
            self.note_added(Some(&id), None);
            return Ok(Stored {
                id,
                size,
                new: true,
            });
        }
        let shard = self.shard(&id, true)?;
        if self.exists(&id) {
            self.note_found(&id);
            return Ok(Stored {
                id,
                size,
                new: false,
            });
        }
        let tmp = TempFile::create(shard.as_fd(), self.temp_name())?;
        if self.compressing() {
            let packed = zstd::bulk::compress(bytes, ZSTD_LEVEL).map_err(Errno::from)?;
            sys::write_all(tmp.fd(), &packed, 0)?;
        } else {
            sys::write_all(tmp.fd(), bytes, 0)?;
        }
        self.publish(tmp, id, size)
    }

    /// Puts a finished temp file in place as the loose blob `id` (`size` raw bytes), by the
    /// one rule of `crate::tree`: synced with `--durable`.
    fn publish(&self, tmp: TempFile<'_>, id: BlobId, size: u64) -> SysResult<Stored> {
        let shard = self.shard(&id, true)?;
        let (raw, zst) = Self::names(&id)?;
        let final_name = if self.compressing() { zst } else { raw };
        tmp.persist(
            shard.as_fd(),
            &final_name,
            self.durability(),
            "blob-before-rename",
        )?;
        self.note_loose(&id);
        self.note_added(Some(&id), None);
        Ok(Stored {
            id,
            size,
            new: true,
        })
    }

    /// How loose blobs are persisted: synced with `--durable` (see `crate::tree`).
    fn durability(&self) -> Durability {
        Durability::from_flag(self.durable)
    }

    fn temp_name(&self) -> CString {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        CString::new(format!(".tmp-{}-{n}", std::process::id())).unwrap_or_default()
    }

    /// Every blob id present, with its size (for fsck, status and prune).
    pub fn list(&self) -> SysResult<Vec<(BlobId, u64)>> {
        let mut out = self
            .packs
            .as_ref()
            .map(super::pack::Packs::entries)
            .unwrap_or_default();
        let top = sys::reopen(self.dir.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)?;
        for shard in sys::read_dir_all(top.as_fd(), false)? {
            if shard.name.len() != 2 {
                continue;
            }
            let Ok(name) = CString::new(shard.name.clone()) else {
                continue;
            };
            let Ok(sfd) = sys::openat(
                top.as_fd(),
                &name,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ) else {
                continue;
            };
            for e in sys::read_dir_all(sfd.as_fd(), false)? {
                let Ok(rest) = String::from_utf8(e.name.clone()) else {
                    continue;
                };
                let rest = rest.strip_suffix(ZST).unwrap_or(&rest);
                // A name that is not an id is no blob (and never reaches the callers).
                let Ok(id) = format!("{}{rest}", String::from_utf8_lossy(&shard.name)).parse()
                else {
                    continue;
                };
                let Ok(cname) = CString::new(e.name) else {
                    continue;
                };
                let size = sys::lstatat(sfd.as_fd(), &cname)
                    .map(|st| st.st_size as u64)
                    .unwrap_or(0);
                out.push((id, size));
            }
        }
        Ok(out)
    }

    /// Removes a blob (prune).
    pub fn remove(&self, id: &BlobId) -> SysResult<()> {
        if self.packs.as_ref().is_some_and(|p| p.remove(id)) {
            return Ok(());
        }
        if let Some(loose) = &self.loose {
            loose.lock().remove(id);
        }
        let shard = self.shard(id, false)?;
        let (raw, zst) = Self::names(id)?;
        match sys::unlinkat(shard.as_fd(), &raw, 0) {
            Err(Errno(libc::ENOENT)) => sys::unlinkat(shard.as_fd(), &zst, 0),
            r => r,
        }
    }

    /// Rewrites the packs without the blobs `remove` dropped from them.
    pub fn compact(&self) -> SysResult<()> {
        let _put = self.put_lock.lock();
        self.packs
            .as_ref()
            .map_or(Ok(()), super::pack::Packs::compact)
    }

    fn note_loose(&self, id: &BlobId) {
        if let Some(loose) = &self.loose {
            loose.lock().insert(*id);
        }
    }

    /// Removes stale temp files and lists the loose blobs (one pass over the shards at open).
    fn scan_shards(&self) -> HashSet<BlobId> {
        let mut loose = HashSet::new();
        let Ok(top) = sys::reopen(self.dir.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY) else {
            return loose;
        };
        let Ok(entries) = sys::read_dir_all(top.as_fd(), false) else {
            return loose;
        };
        for e in entries {
            if let Ok(name) = CString::new(e.name.clone()) {
                if e.name.starts_with(b".tmp-") {
                    let _ = sys::unlinkat(top.as_fd(), &name, 0);
                } else if e.name.len() == 2
                    && let Ok(sfd) =
                        sys::openat(top.as_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
                {
                    for t in sys::read_dir_all(sfd.as_fd(), false).unwrap_or_default() {
                        if t.name.starts_with(b".tmp-") {
                            if let Ok(tn) = CString::new(t.name) {
                                let _ = sys::unlinkat(sfd.as_fd(), &tn, 0);
                            }
                            continue;
                        }
                        let rest = t.name.strip_suffix(ZST.as_bytes()).unwrap_or(&t.name);
                        let mut id = e.name.clone();
                        id.extend_from_slice(rest);
                        if let Ok(id) = String::from_utf8(id)
                            && let Ok(id) = id.parse::<BlobId>()
                        {
                            loose.insert(id);
                        }
                    }
                }
            }
        }
        loose
    }
}

/// zstd level for compressed blobs: fast, and most of zlib-6's ratio on source trees.
const ZSTD_LEVEL: i32 = 3;

/// Writes a blob's temp file, raw or through a zstd encoder.
enum BlobWriter<'a> {
    Raw { fd: BorrowedFd<'a>, off: u64 },
    Zstd(zstd::stream::write::Encoder<'static, std::fs::File>),
}

impl<'a> BlobWriter<'a> {
    fn new(fd: BorrowedFd<'a>, compress: bool) -> SysResult<Self> {
        if !compress {
            return Ok(Self::Raw { fd, off: 0 });
        }
        let file = std::fs::File::from(fd.try_clone_to_owned().map_err(Errno::from)?);
        zstd::stream::write::Encoder::new(file, ZSTD_LEVEL)
            .map(Self::Zstd)
            .map_err(Errno::from)
    }

    fn write(&mut self, bytes: &[u8]) -> SysResult<()> {
        match self {
            Self::Raw { fd, off } => {
                sys::write_all(*fd, bytes, *off)?;
                *off += bytes.len() as u64;
                Ok(())
            }
            Self::Zstd(enc) => std::io::Write::write_all(enc, bytes).map_err(Errno::from),
        }
    }

    fn finish(self) -> SysResult<()> {
        match self {
            Self::Raw { .. } => Ok(()),
            Self::Zstd(enc) => enc.finish().map(drop).map_err(Errno::from),
        }
    }
}

#[cfg(test)]
mod tests;
