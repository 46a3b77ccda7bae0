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
/// Each blob is read once, for the first step that restores it; a large plan's blobs are read
/// in parts on several threads (`rewind/parts.rs`), the problems kept in the plan's order.
pub fn verify(plan: &Plan, store: &Store) -> Vec<Failure> {
    verify_in_parts(plan, store, super::parts::parts_for)
}

/// [`verify`], its blobs read in `parts(blobs)` parts.
fn verify_in_parts(plan: &Plan, store: &Store, parts: fn(usize) -> usize) -> Vec<Failure> {
    let mut problems = Vec::new();
    let mut checked: HashSet<&BlobId> = HashSet::new();
    // Per blob to read, the path of the first step that restores it, and where its problem
    // goes among the invalid paths found meanwhile.
    let mut blobs: Vec<(&BlobId, &RelPath, usize)> = Vec::new();
    for step in plan.steps() {
        if RelPath::new(step.path.as_bytes()).is_err() {
            problems.push(Failure {
                path: step.path.to_string(),
                reason: "invalid path in journal".into(),
            });
            continue;
        }
        if let PreImage::File { blob, .. } = &step.target
            && checked.insert(blob)
        {
            blobs.push((blob, &step.path, problems.len()));
        }
    }
    drop(checked);
    let found = super::parts::in_parts(&blobs, parts(blobs.len()), |part| {
        part.iter()
            .filter_map(|&(blob, path, at)| Some((at, blob_problem(store, blob, path)?)))
            .collect::<Vec<_>>()
    });
    // Merged by position: a blob's problem comes after the invalid paths of the steps before
    // its first step.
    let mut merged = Vec::with_capacity(problems.len());
    let mut invalid = problems.into_iter().enumerate().peekable();
    for (at, failure) in found.into_iter().flatten() {
        while let Some((_, f)) = invalid.next_if(|(i, _)| *i < at) {
            merged.push(f);
        }
        merged.push(failure);
    }
    merged.extend(invalid.map(|(_, f)| f));
    merged
}

/// Why `blob`, restored first at `path`, cannot be restored, if it cannot.
fn blob_problem(store: &Store, blob: &BlobId, path: &RelPath) -> Option<Failure> {
    let reason = match store.blobs().verify(blob) {
        Ok(true) => return None,
        Ok(false) => format!("blob {} does not match its hash", blob.short()),
        Err(e) => format!("blob {} unreadable: {e}", blob.short()),
    };
    Some(Failure {
        path: path.to_string(),
        reason,
    })
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
    use crate::store::journal::Xattrs;
    use std::os::fd::AsFd;

    fn file(blob: BlobId) -> PreImage {
        PreImage::File {
            blob,
            size: 1,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 1,
            nlink: 1,
            fh: None,
            btime: None,
            xattrs: Xattrs::default(),
        }
    }

    #[test]
    fn blobs_verified_in_parts_give_the_problems_one_reading_gives_in_plan_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("open");
        let store = Store::open(root.as_fd(), true, false).expect("store");
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
        let plan = super::super::plan(targets);
        let one = verify_in_parts(&plan, &store, |_| 1);
        let at: Vec<&str> = one.iter().map(|f| f.path.as_str()).collect();
        let want: Vec<&str> = missing.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(at, want, "{one:?}");
        for (f, (_, id)) in one.iter().zip(&missing) {
            assert!(f.reason.contains(&id.short()), "{f:?}");
        }
        for parts in [2, 3, 4, 8] {
            let split = verify_in_parts(
                &plan,
                &store,
                match parts {
                    2 => |_| 2,
                    3 => |_| 3,
                    4 => |_| 4,
                    _ => |_| 8,
                },
            );
            assert_eq!(format!("{split:?}"), format!("{one:?}"), "{parts} parts");
        }
    }
}
