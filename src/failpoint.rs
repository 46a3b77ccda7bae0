//! Named crash points, for the crash tests (`tests/crash_points.rs`): with the cargo feature
//! `failpoints` and `CKPT_FAILPOINT=NAME` (or `NAME:N`, the N-th time it is reached) in the
//! daemon's environment, the process kills itself with `SIGKILL` exactly at that point — no
//! destructor, no flush, as a crash or `kill -9` would. Without the feature every point
//! compiles to nothing.
//!
//! Points:
//! - `stage-after-record`: a removal's capture record is written, the file not yet moved into
//!   `staged/`;
//! - `blob-before-rename`: a loose blob's temp file is complete, not yet renamed into place;
//! - `pack-after-data`: a packed blob's bytes are appended, its index line is not;
//! - `rewind-step`: a rewind has applied N steps of its plan (`rewind-step:N`);
//! - `rewind-before-rename`: a rewind's temp file is complete, not yet renamed over its path;
//! - `partial-after-saves`, `undo-after-saves`, `redo-after-saves`, `restore-op-after-saves`: a
//!   partial rewind, an undo, a redo or an `op restore` has journaled its `op_begin` and what
//!   it overwrites, and changed nothing yet.

/// Stops the process here when `CKPT_FAILPOINT` names this point (feature `failpoints`).
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SPEC: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let spec = SPEC.get_or_init(|| {
        let v = std::env::var("CKPT_FAILPOINT").ok()?;
        Some(match v.split_once(':') {
            Some((n, count)) => (n.to_string(), count.parse().unwrap_or(1)),
            None => (v, 1),
        })
    });
    let Some((want, nth)) = spec else { return };
    if want != name {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        log::error!(target: "ckpt::failpoint", "failpoint {name} reached: killing the process");
        crate::sys::kill_self();
    }
}

/// Without the feature `failpoints`, nothing.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}
