//! Open handles, indexed both by handle number and by node, so the questions asked on every
//! unlink and rename-over ("is this node open?", "give me a descriptor of this orphan") cost
//! the same with ten open files as with ten thousand.

use crate::ids::{Fh, NodeId};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;
use std::sync::Arc;

/// Handles by number, plus the numbers open on each node.
pub(super) struct HandleTable<H> {
    by_fh: HashMap<Fh, Arc<H>>,
    by_node: HashMap<NodeId, Vec<Fh>>,
}

/// What the table needs to know of a handle.
pub(super) trait NodeHandle {
    fn node(&self) -> NodeId;
}

impl<H: NodeHandle> HandleTable<H> {
    pub(super) fn new() -> Self {
        Self {
            by_fh: HashMap::new(),
            by_node: HashMap::new(),
        }
    }

    pub(super) fn insert(&mut self, fh: Fh, h: H) {
        // Handle numbers are never reused; should one be, it leaves its old node first.
        self.remove(fh);
        self.by_node.entry(h.node()).or_default().push(fh);
        self.by_fh.insert(fh, Arc::new(h));
    }

    pub(super) fn get(&self, fh: Fh) -> Option<Arc<H>> {
        self.by_fh.get(&fh).cloned()
    }

    pub(super) fn remove(&mut self, fh: Fh) -> Option<Arc<H>> {
        let h = self.by_fh.remove(&fh)?;
        remove_fh(&mut self.by_node, h.node(), fh);
        Some(h)
    }

    /// Whether any handle is open on `node`.
    pub(super) fn is_open(&self, node: NodeId) -> bool {
        self.by_node.contains_key(&node)
    }

    /// The first handle on `node` that `want` accepts.
    pub(super) fn find_on(&self, node: NodeId, want: impl Fn(&H) -> bool) -> Option<Arc<H>> {
        self.by_node
            .get(&node)?
            .iter()
            .filter_map(|fh| self.by_fh.get(fh))
            .find(|h| want(h))
            .cloned()
    }

    /// Every open handle.
    pub(super) fn values(&self) -> impl Iterator<Item = &Arc<H>> {
        self.by_fh.values()
    }

    #[cfg(test)]
    fn nodes_indexed(&self) -> usize {
        self.by_node.len()
    }
}

fn remove_fh<K: Eq + Hash>(by_node: &mut HashMap<K, Vec<Fh>>, node: K, fh: Fh) {
    if let Entry::Occupied(mut e) = by_node.entry(node) {
        e.get_mut().retain(|&f| f != fh);
        if e.get().is_empty() {
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct H {
        node: NodeId,
        writable: bool,
    }

    impl NodeHandle for H {
        fn node(&self) -> NodeId {
            self.node
        }
    }

    fn h(node: NodeId, writable: bool) -> H {
        H { node, writable }
    }

    #[test]
    fn a_node_stays_open_until_its_last_handle_is_released() {
        let mut t = HandleTable::new();
        t.insert(Fh::new(1), h(NodeId::new(7), false));
        t.insert(Fh::new(2), h(NodeId::new(7), true));
        t.insert(Fh::new(3), h(NodeId::new(8), false));
        assert!(
            t.is_open(NodeId::new(7)) && t.is_open(NodeId::new(8)) && !t.is_open(NodeId::new(9))
        );
        assert_eq!(
            t.find_on(NodeId::new(7), |h| h.writable).map(|h| h.node),
            Some(NodeId::new(7))
        );
        assert!(t.find_on(NodeId::new(8), |h| h.writable).is_none());

        assert_eq!(t.remove(Fh::new(2)).map(|h| h.node), Some(NodeId::new(7)));
        assert!(t.is_open(NodeId::new(7)), "handle 1 still holds node 7");
        assert!(t.find_on(NodeId::new(7), |h| h.writable).is_none());
        assert!(t.remove(Fh::new(2)).is_none(), "a handle is released once");
        t.remove(Fh::new(1));
        t.remove(Fh::new(3));
        assert!(!t.is_open(NodeId::new(7)) && !t.is_open(NodeId::new(8)));
        assert_eq!(t.nodes_indexed(), 0, "no empty entries are left behind");
        assert_eq!(t.values().count(), 0);
    }

    #[test]
    fn reinserting_a_number_moves_it_to_the_new_node() {
        let mut t = HandleTable::new();
        t.insert(Fh::new(1), h(NodeId::new(7), false));
        t.insert(Fh::new(1), h(NodeId::new(8), false));
        assert!(!t.is_open(NodeId::new(7)));
        assert!(t.is_open(NodeId::new(8)));
        t.remove(Fh::new(1));
        assert_eq!(t.nodes_indexed(), 0);
    }
}
