//! The work of the commands that read or tidy a store (`status`, `status --log`, `log`,
//! `diff`, `prune`, `fsck`), in one place: the daemon runs it for the CLI's requests with its store locked, and
//! the CLI runs it itself on a folder that is not mounted, so the two answers cannot differ.
//!
//! Turn switches and rewinds are not here: on a mounted folder they go through the filesystem
//! core (`CkptFs::begin_turn`, `CkptFs::rewind`), which holds every other change back while they
//! run and invalidates the kernel's caches after; offline, the CLI calls `crate::rewind` on the
//! opened store itself.

use crate::ipc::Request;
use crate::relpath::RelPath;
use crate::store::Store;
use std::os::fd::BorrowedFd;

/// Answers `req` from `store`, as the JSON the CLI prints or reads, or says why not (a turn
/// switch or a rewind is not the engine's: see the module header). `root` is the folder's root (`diff` and `log`
/// compare with the folder as it is now), `folder` its name for `status`, and `daemon` the pid
/// of the daemon answering (`None` offline).
pub fn query(
    root: BorrowedFd<'_>,
    store: &mut Store,
    folder: &str,
    daemon: Option<u32>,
    req: &Request,
) -> Result<serde_json::Value, String> {
    match req {
        Request::Status => json(crate::info::status(store, folder, daemon)),
        Request::Log => json(crate::info::log_rows(store, root)),
        Request::OpLog => json(crate::store::ops::op_rows(store.index())),
        Request::DaemonLog { lines } => crate::info::daemon_log(store, *lines).and_then(json),
        Request::Fsck => json(crate::store::fsck::check(store.dir())),
        Request::Diff {
            turn,
            to,
            show,
            paths,
        } => diff(root, store, (*turn, *to, *show), paths),
        Request::Prune {
            keep_turns,
            max_size,
            undo,
            dry_run,
            expect,
        } => {
            let policy = crate::store::prune::Policy {
                keep_turns: *keep_turns,
                max_size: *max_size,
                undo: *undo,
            };
            if *dry_run {
                crate::store::prune::preview(store, policy)
                    .map_err(|e| e.to_string())
                    .and_then(json)
            } else {
                prune(store, policy, expect.as_ref())
            }
        }
        Request::Cat { .. } => Err("a file's bytes are streamed, not answered as JSON".into()),
        Request::Turn { .. }
        | Request::Rewind { .. }
        | Request::Undo { .. }
        | Request::Relabel { .. } => {
            Err("turn switches and rewinds are not answered from the store alone".into())
        }
        Request::MarkAgent { .. } => {
            Err("only a mounted folder's daemon can tell the agent's changes apart".into())
        }
    }
}

/// `prune` (not its dry run), refused when it would make anything else unrecoverable than
/// `expect` (what the preview the user said yes to showed).
fn prune(
    store: &mut Store,
    policy: crate::store::prune::Policy,
    expect: Option<&crate::store::prune::Unrecoverable>,
) -> Result<serde_json::Value, String> {
    use crate::store::prune;
    let plan = prune::plan(store, policy).map_err(|e| e.to_string())?;
    if let Some(expect) = expect
        && *expect != plan.report().unrecoverable
    {
        return Err(
            "the history changed since the preview: nothing pruned; run the prune again to see what it would forget now"
                .into(),
        );
    }
    prune::apply(store, plan)
        .map_err(|e| e.to_string())
        .and_then(json)
}

/// `diff` and `show`: what changed from the start of `turn` (the current one when not given)
/// to now, to the start of a later turn `to`, or (`show`) within turn `turn` alone, below
/// `paths` (everything when empty).
fn diff(
    root: BorrowedFd<'_>,
    store: &Store,
    (turn, to, show): (Option<u64>, Option<u64>, bool),
    only: &[RelPath],
) -> Result<serde_json::Value, String> {
    use crate::diff::Range;
    use crate::ids::Turn;
    let index = store.index();
    let from = turn.map_or_else(|| index.current_turn(), Turn);
    if !index.has_turn(from) {
        return Err(format!("turn {from} does not exist"));
    }
    let range = match (to.map(Turn), show) {
        // The turn alone ends where the next live turn begins; the last one, now.
        (_, true) => match index.turns.iter().find(|t| t.turn > from) {
            Some(next) => Range::Between(from, next.turn),
            None => Range::Since(from),
        },
        (Some(to), false) if to <= from => {
            return Err(format!(
                "a range of turns N..M needs N before M (got {from}..{to})"
            ));
        }
        (Some(to), false) if !index.has_turn(to) => {
            return Err(format!("turn {to} does not exist"));
        }
        (Some(to), false) => Range::Between(from, to),
        (None, false) => Range::Since(from),
    };
    json(crate::diff::diff(root, store, range, only))
}

fn json(v: impl serde::Serialize) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn store_requests_are_answered_and_turns_and_rewinds_are_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.txt"), b"a\n").expect("file");
        let root = std::fs::File::open(dir.path()).expect("open");
        let mut store = Store::for_test(root.as_fd()).expect("store");
        let status = query(root.as_fd(), &mut store, "f", None, &Request::Status).expect("status");
        assert_eq!(status["turn"], 1, "{status}");
        let diff = Request::Diff {
            turn: Some(9),
            to: None,
            show: false,
            paths: Vec::new(),
        };
        assert_eq!(
            query(root.as_fd(), &mut store, "f", None, &diff),
            Err("turn 9 does not exist".to_string())
        );
        let diff = Request::Diff {
            turn: None,
            to: None,
            show: false,
            paths: Vec::new(),
        };
        let changes = query(root.as_fd(), &mut store, "f", None, &diff).expect("diff");
        assert_eq!(changes, serde_json::json!([]), "nothing captured yet");
        let log = Request::DaemonLog { lines: 50 };
        let log = query(root.as_fd(), &mut store, "f", None, &log).expect("daemon log");
        assert_eq!(log, serde_json::json!({"exists": false, "lines": []}));
        let fsck = query(root.as_fd(), &mut store, "f", None, &Request::Fsck).expect("fsck");
        assert_eq!(fsck["findings"], serde_json::json!([]), "{fsck}");
        let turn = Request::Turn {
            set: Some(2),
            label: None,
        };
        assert!(query(root.as_fd(), &mut store, "f", None, &turn).is_err());
    }
}
