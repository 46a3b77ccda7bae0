//! What a piece of work that may still be refused stored anew (a rewind's saves, written
//! before its journal records): [`BlobStore::track_added`] lists the blobs and shard
//! directories its threads make, [`Added::take_back`] removes them when it is refused.

use super::BlobStore;
use crate::ids::BlobId;
use crate::sys::Errno;
use std::collections::HashSet;
use std::sync::Arc;
use std::thread::ThreadId;

/// What [`BlobStore::track_added`] lists: the blobs the tracked threads wrote anew (nothing
/// named them before), the shard directories they made, and where the packs ended when the
/// tracking began.
#[derive(Debug)]
pub(super) struct Tracking {
    /// The threads whose new blobs are listed: the one that began the tracking and those that
    /// [`BlobStore::join_tracking`] while it lives.
    threads: Vec<ThreadId>,
    added: Vec<BlobId>,
    shards: Vec<u8>,
    packs_end: Option<crate::store::pack::Mark>,
}

/// Blobs listed while a piece of work may still be refused (a rewind's saves, written before
/// its journal records): [`Added::take_back`] removes them, and with them every shard
/// directory the work made, so a refused rewind leaves nothing in the store; [`Added::keep`]
/// (or dropping it) stops listing and keeps them.
#[must_use = "keep the blobs or take them back"]
pub struct Added {
    blobs: Arc<BlobStore>,
}

/// A thread's part in a tracked piece of work ([`BlobStore::join_tracking`]), until dropped.
pub struct TrackingJoined<'a> {
    blobs: Option<&'a BlobStore>,
}

impl Drop for TrackingJoined<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.blobs {
            let me = std::thread::current().id();
            if let Some(t) = b.tracking.lock().as_mut() {
                t.threads.retain(|x| *x != me);
            }
        }
    }
}

impl Added {
    /// Stops listing: the blobs stay (their records are in the journal).
    pub fn keep(self) {}

    /// Removes every blob listed (nothing names them: the work that stored them was refused
    /// before its records were written), then every shard directory the work made, now empty.
    /// Packed blobs are cut off the end of their pack when nothing else was appended after
    /// them; otherwise (another writer's blob lies between) they stay, for the next prune to
    /// remove. Failures are logged and the rest still removed.
    pub fn take_back(self) {
        let Some(t) = self.blobs.tracking.lock().take() else {
            return;
        };
        let b = &self.blobs;
        let (packed, loose): (Vec<BlobId>, Vec<BlobId>) = t
            .added
            .iter()
            .partition(|id| b.packs.as_ref().is_some_and(|p| p.get(id).is_some()));
        if let (Some(packs), false) = (&b.packs, packed.is_empty()) {
            let ids: HashSet<BlobId> = packed.iter().copied().collect();
            let cut = t.packs_end.map_or(Ok(false), |end| {
                let _put = b.put_lock.lock();
                packs.take_back(end, &ids)
            });
            match cut {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    if let Err(e) = cut {
                        log::warn!(target: "ckpt::store", "cannot cut the packs back after a refused rewind: {e}");
                    }
                    // Left as they are, found by the next put of the same bytes (marking them
                    // for a compaction would drop them under a record that names them then);
                    // a prune removes them while no record does.
                    log::warn!(target: "ckpt::store", "{} small blobs of a refused rewind stay in blobs/packs until the next prune", packed.len());
                }
            }
        }
        for id in &loose {
            match b.remove(id) {
                Ok(()) | Err(Errno(libc::ENOENT)) => {}
                Err(e) => {
                    log::warn!(target: "ckpt::store", "cannot remove blob {id} of a refused rewind: {e}")
                }
            }
        }
        for shard in t.shards {
            b.remove_shard(shard);
        }
    }
}

impl Drop for Added {
    fn drop(&mut self) {
        // Kept, unless taken back (which took the list already).
        self.blobs.tracking.lock().take();
    }
}

impl BlobStore {
    /// Lists the blobs this thread stores anew from now on (and the shard directories it
    /// makes), with those of the threads that [`Self::join_tracking`], until the returned
    /// [`Added`] is kept or taken back. `None` when another piece of work is tracked already
    /// (then nothing is listed for this one, and nothing can be taken back).
    pub fn track_added(self: &Arc<Self>) -> Option<Added> {
        let mut t = self.tracking.lock();
        if t.is_some() {
            return None;
        }
        *t = Some(Tracking {
            threads: vec![std::thread::current().id()],
            added: Vec::new(),
            shards: Vec::new(),
            packs_end: self
                .packs
                .as_ref()
                .and_then(crate::store::pack::Packs::mark),
        });
        Some(Added {
            blobs: Arc::clone(self),
        })
    }

    /// Lists this thread's new blobs too while the returned guard lives, when a piece of work
    /// is tracked ([`Self::track_added`]): for the worker threads of the thread that began it.
    pub fn join_tracking(&self) -> TrackingJoined<'_> {
        let mut t = self.tracking.lock();
        let joined = t
            .as_mut()
            .map(|t| t.threads.push(std::thread::current().id()));
        TrackingJoined {
            blobs: joined.map(|()| self),
        }
    }

    /// A blob this thread found stored already and is about to name in a record (its put
    /// stored nothing): when a tracked piece of work stored it anew and this thread is not part
    /// of that work, the blob is no longer the work's to take back. A rewind refused after the
    /// stager, outside the rewind, found its saves' bytes already stored and journaled a record
    /// naming them would otherwise remove a blob that record needs (seen as `blob-missing` of
    /// the empty file's blob after `kill -9`s, `tests/faults.rs`).
    pub(super) fn note_found(&self, id: &BlobId) {
        let mut t = self.tracking.lock();
        let Some(t) = t.as_mut() else { return };
        if t.threads.contains(&std::thread::current().id()) {
            return;
        }
        t.added.retain(|a| a != id);
    }

    /// Notes a blob this thread stored anew, or a shard directory it made, when it is tracked.
    pub(super) fn note_added(&self, id: Option<&BlobId>, shard: Option<u8>) {
        let mut t = self.tracking.lock();
        let Some(t) = t.as_mut() else { return };
        if !t.threads.contains(&std::thread::current().id()) {
            return;
        }
        t.added.extend(id.copied());
        t.shards.extend(shard);
    }
}
