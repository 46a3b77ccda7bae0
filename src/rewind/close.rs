//! Closing a rewind (or an operation) after its apply stage: the journal records of the files
//! it recreated, then `RewindDone` or `OpDone` with its counts, unless a failure may pass on a
//! second run ([`finish`]); and [`drain_releasing`], how a rewind hands its large lists to the
//! journal without keeping them whole.
//!
//! I/O: appends to the journal.

use super::plan::Plan;
use super::report::{FailedAt, Report, RewindError};
use crate::store::Store;
use crate::store::journal::OpCounts;
use crate::store::journal::{PreImage, Record};
use std::collections::HashSet;

/// What a report says the run changed, as the operation log keeps it.
fn counts_of(report: &Report) -> OpCounts {
    OpCounts {
        restored: report.restored.len() as u64,
        deleted: report.deleted.len() as u64,
        failed: report.failed.len() as u64,
    }
}

/// Ends a rewind (or an operation) after its apply stage: journals the files it recreated,
/// then closes it with the record `close` makes of its counts (`RewindDone` or `OpDone`),
/// unless a failure in the report may pass on a second run: then it stays open and the report
/// says it is unfinished. The plan is let go of first: it holds a copy of every target's
/// pre-image, and the index's map of renewals, the last large thing a rewind of a whole
/// recreated tree builds, would otherwise grow beside it.
pub(super) fn finish(
    store: &mut Store,
    plan: Plan,
    report: &mut Report,
    close: impl FnOnce(Option<OpCounts>) -> Record,
) -> Result<(), RewindError> {
    let may_pass = failures_may_pass(&plan, report);
    drop(plan);
    record_renewals(store, report)?;
    if may_pass {
        report.unfinished = true;
        return Ok(());
    }
    store
        .append(close(Some(counts_of(report))))
        .map_err(RewindError::Store)?;
    Ok(())
}

/// Whether a failure in `report` may pass on a second run. A pre-image that was never stored
/// fails every time; anything else (a parent swapped for a symlink meanwhile, an I/O error)
/// may succeed on a second run. Such a rewind stays open, its turns in the index, so that
/// running it again completes it instead of leaving a mix.
fn failures_may_pass(plan: &Plan, report: &Report) -> bool {
    let permanent: HashSet<FailedAt> = plan
        .steps()
        .filter(|s| matches!(s.target, PreImage::Skipped { .. }))
        .map(|s| FailedAt::Path(s.path.clone()))
        .chain(report.permanent.iter().cloned())
        .collect();
    report.failed.iter().any(|f| !permanent.contains(&f.path))
}

/// Records the files the rewind recreated for records that carry an identity, so those records
/// name the new files from now on (see [`crate::identity::Renewal`]).
fn record_renewals(store: &mut Store, report: &mut Report) -> Result<(), RewindError> {
    if report.renewed.is_empty() {
        return Ok(());
    }
    // In records of at most `RENEWALS_PER_RECORD`, written in the journal's usual batches: a
    // rewind that recreated a whole tree (every file of an `rm -rf`) would otherwise encode
    // one line holding every identity, 9 MB for the Linux tree, at the rewind's peak.
    // The list is let go of as it is written: it would otherwise stay whole beside the
    // index's map of them while that fills.
    let mut ids = drain_releasing(std::mem::take(&mut report.renewed));
    let records = std::iter::from_fn(move || {
        let chunk: Vec<_> = ids.by_ref().take(RENEWALS_PER_RECORD).collect();
        (!chunk.is_empty()).then_some(Record::Renewed { ids: chunk })
    });
    store.append_all(records).map_err(RewindError::Store)?;
    Ok(())
}

/// The items of `list` in order, its memory given back as they are taken (every
/// [`RELEASE_EVERY`] items). A rewind hands its large lists (the saves, the renewals) to the
/// journal, and the index builds its own copy of each as they are applied: consumed whole,
/// a list stays allocated beside that copy until the last item is taken.
pub(super) fn drain_releasing<T>(mut list: Vec<T>) -> impl Iterator<Item = T> {
    // Taken from the end, where taking is free and the room behind can be given back.
    list.reverse();
    let mut taken = 0usize;
    std::iter::from_fn(move || {
        let item = list.pop()?;
        taken += 1;
        if taken.is_multiple_of(RELEASE_EVERY) {
            list.shrink_to_fit();
        }
        Some(item)
    })
}

/// How many items [`drain_releasing`] takes between two releases of memory.
const RELEASE_EVERY: usize = 4096;

/// How many renewals one journal record holds at most (about 100 KB of JSON).
const RENEWALS_PER_RECORD: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_releasing_yields_every_item_in_order() {
        for n in [
            0,
            1,
            RELEASE_EVERY - 1,
            RELEASE_EVERY,
            RELEASE_EVERY + 1,
            10_000,
        ] {
            let list: Vec<usize> = (0..n).collect();
            let out: Vec<usize> = drain_releasing(list).collect();
            assert_eq!(out, (0..n).collect::<Vec<_>>(), "{n} items");
        }
        // Taken in part, what is left is the rest, in order.
        let mut it = drain_releasing((0..10_000).collect::<Vec<usize>>());
        let first: Vec<usize> = it.by_ref().take(5_000).collect();
        assert_eq!(first, (0..5_000).collect::<Vec<_>>());
        assert_eq!(it.next(), Some(5_000));
    }
}
