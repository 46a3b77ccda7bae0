//! Verification, before anything changes: every path of the plan re-validated (the journal is
//! untrusted) and every blob it restores present and whole, so that a rewind either starts
//! with everything it needs or is refused with the folder untouched.
//!
//! I/O: it reads (and hashes) the store's blobs; it never touches the folder.

use super::plan::Plan;
use super::report::{Failure, RewindError};
use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use std::collections::HashSet;

/// Checks a plan before anything changes: paths re-validated, every blob present and whole.
pub fn verify(plan: &Plan, store: &Store) -> Vec<Failure> {
    let mut problems = Vec::new();
    let mut checked: HashSet<&BlobId> = HashSet::new();
    for step in plan.steps() {
        if RelPath::new(step.path.as_bytes()).is_err() {
            problems.push(Failure {
                path: step.path.to_string(),
                reason: "invalid path in journal".into(),
            });
            continue;
        }
        if let PreImage::File { blob, .. } = &step.target {
            if !checked.insert(blob) {
                continue;
            }
            match store.blobs().verify(blob) {
                Ok(true) => {}
                Ok(false) => problems.push(Failure {
                    path: step.path.to_string(),
                    reason: format!("blob {} does not match its hash", blob.short()),
                }),
                Err(e) => problems.push(Failure {
                    path: step.path.to_string(),
                    reason: format!("blob {} unreadable: {e}", blob.short()),
                }),
            }
        }
    }
    problems
}

/// [`verify`] as the entry points use it: any problem refuses the rewind before it changes
/// anything.
pub(super) fn refuse_unless_verified(plan: &Plan, store: &Store) -> Result<(), RewindError> {
    let problems = verify(plan, store);
    if !problems.is_empty() {
        return Err(RewindError::Refused(problems));
    }
    Ok(())
}
