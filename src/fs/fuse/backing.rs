//! Kernel passthrough's backing ids, held for the adapter: one per node while any open of it
//! is passed through (the kernel requires one backing file per inode), registered on the first
//! such open and given back with the last release.

use crate::ids::{Fh, NodeId};
use crate::sync::{Mutex, MutexGuard};
use fuser::BackingId;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Above this many nodes remembered, a release also forgets the nodes no open holds any more.
const PRUNE_ABOVE: usize = 4096;

/// Backing ids in use: strong per open handle, weak per node. Nothing keeps a backing id past
/// the last release of its node: a registered backing file pins its inode, so a kept one would
/// hold a deleted file's space until unmount (measured: `rm` of 8 MB freed nothing).
/// Generic over the id so that the rule is tested without a kernel (fuser's [`BackingId`]
/// gives its id back to the kernel when dropped).
pub(super) struct BackingIds<Id = BackingId>(Mutex<Held<Id>>);

struct Held<Id> {
    by_handle: HashMap<Fh, Arc<Id>>,
    by_node: HashMap<NodeId, Weak<Id>>,
}

impl<Id> Default for BackingIds<Id> {
    fn default() -> Self {
        Self(Mutex::leaf(Held {
            by_handle: HashMap::new(),
            by_node: HashMap::new(),
        }))
    }
}

impl<Id> BackingIds<Id> {
    fn lock(&self) -> MutexGuard<'_, Held<Id>> {
        self.0.lock()
    }

    /// The backing id to pass handle `fh` of `node` through with: the node's own if an open
    /// holds one, else the one `register` makes (`None` when it fails: the open is then served
    /// by the daemon). `register` runs under the lock, so two opens of one node cannot
    /// register two backing files for it.
    pub(super) fn for_handle(
        &self,
        node: NodeId,
        fh: Fh,
        register: impl FnOnce() -> Option<Id>,
    ) -> Option<Arc<Id>> {
        let mut held = self.lock();
        let id = match held.by_node.get(&node).and_then(Weak::upgrade) {
            Some(id) => id,
            None => {
                let id = Arc::new(register()?);
                held.by_node.insert(node, Arc::downgrade(&id));
                id
            }
        };
        held.by_handle.insert(fh, id.clone());
        Some(id)
    }

    /// Handle `fh` is released: its hold on its node's backing id goes (the id is given back
    /// to the kernel when no handle holds it).
    pub(super) fn release(&self, fh: Fh) {
        let mut held = self.lock();
        held.by_handle.remove(&fh);
        if held.by_node.len() > PRUNE_ABOVE {
            held.by_node.retain(|_, w| w.strong_count() > 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A registration that counts the ids given back.
    struct Id<'a>(u32, &'a AtomicU32);

    impl Drop for Id<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn opens_of_one_node_share_its_id_until_the_last_release() {
        let given_back = AtomicU32::new(0);
        let registered = AtomicU32::new(0);
        let register = || Some(Id(registered.fetch_add(1, Ordering::Relaxed), &given_back));
        let ids = BackingIds::default();
        let a = ids
            .for_handle(NodeId::new(20), Fh::new(1), register)
            .map(|id| id.0);
        let b = ids
            .for_handle(NodeId::new(20), Fh::new(2), register)
            .map(|id| id.0);
        let other = ids
            .for_handle(NodeId::new(21), Fh::new(3), register)
            .map(|id| id.0);
        assert_eq!((a, b, other), (Some(0), Some(0), Some(1)));
        ids.release(Fh::new(1));
        assert_eq!(
            given_back.load(Ordering::Relaxed),
            0,
            "handle 2 still holds node 20's id"
        );
        ids.release(Fh::new(2));
        assert_eq!(
            given_back.load(Ordering::Relaxed),
            1,
            "node 20's id given back"
        );
        let again = ids
            .for_handle(NodeId::new(20), Fh::new(4), register)
            .map(|id| id.0);
        assert_eq!(
            again,
            Some(2),
            "a new open after the last release registers again"
        );
        ids.release(Fh::new(3));
        ids.release(Fh::new(4));
        assert_eq!(given_back.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_failed_registration_holds_nothing_and_the_next_open_tries_again() {
        let given_back = AtomicU32::new(0);
        let ids = BackingIds::default();
        assert!(
            ids.for_handle(NodeId::new(20), Fh::new(1), || None)
                .is_none()
        );
        let id = ids.for_handle(NodeId::new(20), Fh::new(2), || Some(Id(7, &given_back)));
        assert_eq!(id.map(|id| id.0), Some(7));
        ids.release(Fh::new(1));
        assert_eq!(given_back.load(Ordering::Relaxed), 0);
        ids.release(Fh::new(2));
        assert_eq!(given_back.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn many_released_nodes_are_forgotten() {
        let given_back = AtomicU32::new(0);
        let ids = BackingIds::default();
        for n in 0..(PRUNE_ABOVE as u64 + 10) {
            let _ = ids.for_handle(NodeId::new(100 + n), Fh::new(n), || {
                Some(Id(0, &given_back))
            });
            ids.release(Fh::new(n));
        }
        assert!(ids.lock().by_node.len() <= PRUNE_ABOVE + 1);
        assert!(ids.lock().by_handle.is_empty());
    }
}
