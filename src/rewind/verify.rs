//! Verification, before anything changes: every path of the plan re-validated (the journal is
//! untrusted) and every blob it restores present and whole, so that a rewind either starts
//! with everything it needs or is refused with the folder untouched.
//!
//! I/O: it reads (and hashes) the store's blobs; it never touches the folder.

use super::plan::{Plan, Step};
use super::report::{Failure, RewindError};
use crate::ids::BlobId;
use crate::relpath::RelPath;
use crate::store::Store;
use crate::store::journal::PreImage;
use std::collections::{HashMap, HashSet};

/// Checks a plan before anything changes: paths re-validated, every blob present and whole.
/// Each blob is read once, for the first step that restores it; a large plan's blobs are read
/// in parts on several threads (`rewind/parts.rs`), the problems kept in the plan's order.
pub fn verify(plan: &Plan, store: &Store) -> Vec<Failure> {
    verify_in_parts(plan, store, super::parts::parts_for)
}

/// [`verify`], its blobs read in `parts(blobs)` parts.
fn verify_in_parts(plan: &Plan, store: &Store, parts: impl Fn(usize) -> usize) -> Vec<Failure> {
    let valid = |step: &&Step| RelPath::new(step.path.as_bytes()).is_ok();
    let mut blobs: Vec<&BlobId> = Vec::new();
    let mut listed: HashSet<&BlobId> = HashSet::new();
    for step in plan.steps().filter(valid) {
        if let PreImage::File { blob, .. } = &step.target
            && listed.insert(blob)
        {
            blobs.push(blob);
        }
    }
    let bad: HashMap<&BlobId, String> =
        super::parts::in_parts(&blobs, parts(blobs.len()), |part| {
            part.iter()
                .filter_map(|&blob| Some((blob, blob_problem(store, blob)?)))
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect();
    // In the plan's order, each bad blob named at the first step that restores it.
    let mut problems = Vec::new();
    let mut reported: HashSet<&BlobId> = HashSet::new();
    for step in plan.steps() {
        let reason = if !valid(&step) {
            "invalid path in journal".to_string()
        } else if let PreImage::File { blob, .. } = &step.target
            && let Some(reason) = bad.get(blob)
            && reported.insert(blob)
        {
            reason.clone()
        } else {
            continue;
        };
        problems.push(Failure {
            path: step.path.clone().into(),
            reason,
        });
    }
    problems
}

/// Why `blob` cannot be restored, if it cannot.
fn blob_problem(store: &Store, blob: &BlobId) -> Option<String> {
    match store.blobs().verify(blob) {
        Ok(true) => None,
        Ok(false) => Some(format!("blob {} does not match its hash", blob.short())),
        Err(e) => Some(format!("blob {} unreadable: {e}", blob.short())),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::index::tests::file_with_blob as file;
    use std::os::fd::AsFd;

    #[test]
    fn blobs_verified_in_parts_give_the_problems_one_reading_gives_in_plan_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::for_test(root.as_fd()).expect("store");
        let good = store.blobs().put_bytes(b"stored bytes").expect("put").id;
        let mut targets = Vec::new();
        let mut missing = Vec::new();
        for i in 0..40 {
            let path = RelPath::new(format!("p{i:02}").as_bytes()).expect("relpath");
            let blob = if i % 7 == 3 {
                let id: BlobId = format!("{i:064x}").parse().expect("blob id");
                missing.push((path.to_string(), id));
                id
            } else {
                good
            };
            targets.push((path, file(blob)));
        }
        // A missing blob named twice is reported once, at its first path.
        targets.push((RelPath::new(b"q").expect("relpath"), file(missing[0].1)));
        let plan = super::super::plan(targets, &std::collections::HashSet::new());
        let one = verify_in_parts(&plan, &store, |_| 1);
        let at: Vec<String> = one.iter().map(|f| f.path.to_string()).collect();
        let want: Vec<&str> = missing.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(at, want, "{one:?}");
        for (f, (_, id)) in one.iter().zip(&missing) {
            assert!(f.reason.contains(&id.short()), "{f:?}");
        }
        for parts in [2, 3, 4, 8] {
            let split = verify_in_parts(&plan, &store, |_| parts);
            assert_eq!(format!("{split:?}"), format!("{one:?}"), "{parts} parts");
        }
    }
}
