//! The work of the commands that read or tidy a store (`status`, `status --log`, `log`,
//! `agents`, `op log`, `diff`, `prune`, `fsck`), in one place: the daemon runs it for the CLI's requests
//! with its store locked, and the CLI runs it itself on a folder that is not mounted, so the
//! two answers cannot differ.
//!
//! A [`Query`] in, a typed [`Answer`] out: the answer is what the daemon sends as its reply's
//! data, and what the CLI reads back as the same type. Turn switches and rewinds are not
//! queries: on a mounted folder they go through the filesystem core (`CkptFs::begin_turn`,
//! `CkptFs::rewind`), which holds every other change back while they run and invalidates the
//! kernel's caches after; offline, the CLI calls `crate::rewind` on the opened store itself.

use crate::daemon_log::{DaemonLog, DaemonLogError};
use crate::diff::FileChange;
use crate::info::agents::AgentRow;
use crate::info::op_show::OpShow;
use crate::info::{Status, TurnRow};
use crate::moment::Moment;
use crate::relpath::RelPath;
use crate::store::fsck::FsckReport;
use crate::store::ops::OpRow;
use crate::store::prune::{Policy, PruneReport, Unrecoverable};
use crate::store::{Store, StoreError};
use serde::Serialize;
use std::os::fd::BorrowedFd;

/// What the engine answers: a request that reads or tidies the store, and nothing else.
#[derive(Debug, Clone)]
pub enum Query {
    /// `status`.
    Status,
    /// `log`: a row per turn.
    Log,
    /// The moments `log` lists, without their counts (shell completion).
    Moments,
    /// `agents`: a row per agent marked.
    Agents,
    /// `op log`: a row per operation, newest first.
    OpLog,
    /// `op show ID`: what operation `ID` changed.
    OpShow {
        /// The operation's id.
        id: u64,
    },
    /// `status --log`: the last `lines` lines of the daemon's log.
    DaemonLog {
        /// How many lines.
        lines: usize,
    },
    /// `fsck`.
    Fsck,
    /// `diff` and `show`.
    Diff(DiffQuery),
    /// `prune`, or its dry run.
    Prune(PruneQuery),
}

/// `diff` and `show`: changes from the start of `turn` (default: current) to now, or to the
/// start of `to`, or (`show`) what turn `turn` alone changed, below `paths`.
#[derive(Debug, Clone)]
pub struct DiffQuery {
    /// The turn, live or retired.
    pub turn: Option<Moment>,
    /// The later turn whose start ends the range (default: now).
    pub to: Option<Moment>,
    /// Only what turn `turn` changed.
    pub show: bool,
    /// Only these paths (and what is below them); everything when empty.
    pub paths: Vec<RelPath>,
}

/// `prune`: what to keep, whether only to plan, and (applying) what the preview the user
/// answered made unrecoverable.
#[derive(Debug, Clone)]
pub struct PruneQuery {
    /// What to keep.
    pub policy: Policy,
    /// Plan only.
    pub dry_run: bool,
    /// Go ahead only if the prune makes exactly this unrecoverable.
    pub expect: Option<Unrecoverable>,
}

/// The engine's answer to a [`Query`], one variant per query; written as the payload alone
/// (untagged), which is the JSON the CLI prints with `--json`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// To [`Query::Status`].
    Status(Box<Status>),
    /// To [`Query::Log`].
    Log(Vec<TurnRow>),
    /// To [`Query::Moments`].
    Moments(Vec<crate::info::MomentRow>),
    /// To [`Query::Agents`].
    Agents(Vec<AgentRow>),
    /// To [`Query::OpLog`].
    OpLog(Vec<OpRow>),
    /// To [`Query::OpShow`].
    OpShow(Box<OpShow>),
    /// To [`Query::DaemonLog`].
    DaemonLog(DaemonLog),
    /// To [`Query::Fsck`].
    Fsck(FsckReport),
    /// To [`Query::Diff`].
    Diff(Vec<FileChange>),
    /// To [`Query::Prune`].
    Prune(PruneReport),
}

/// An [`Answer`] taken for another query's (a caller's mistake, said in one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherAnswer {
    /// The answer wanted.
    pub wanted: &'static str,
}

impl std::fmt::Display for OtherAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the engine answered another query than {}", self.wanted)
    }
}

impl std::error::Error for OtherAnswer {}

/// Each answer's payload taken out of an [`Answer`].
macro_rules! answers {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl TryFrom<Answer> for $ty {
            type Error = OtherAnswer;
            fn try_from(a: Answer) -> Result<Self, OtherAnswer> {
                match a {
                    Answer::$variant(v) => Ok(v),
                    _ => Err(OtherAnswer { wanted: stringify!($variant) }),
                }
            }
        }
    )*};
}

impl TryFrom<Answer> for OpShow {
    type Error = OtherAnswer;
    fn try_from(a: Answer) -> Result<Self, OtherAnswer> {
        match a {
            Answer::OpShow(v) => Ok(*v),
            _ => Err(OtherAnswer { wanted: "OpShow" }),
        }
    }
}

impl TryFrom<Answer> for Status {
    type Error = OtherAnswer;
    fn try_from(a: Answer) -> Result<Self, OtherAnswer> {
        match a {
            Answer::Status(v) => Ok(*v),
            _ => Err(OtherAnswer { wanted: "Status" }),
        }
    }
}

answers!(
    Log => Vec<TurnRow>,
    Moments => Vec<crate::info::MomentRow>,
    Agents => Vec<AgentRow>,
    OpLog => Vec<OpRow>,
    DaemonLog => DaemonLog,
    Fsck => FsckReport,
    Diff => Vec<FileChange>,
    Prune => PruneReport,
);

/// Why the engine could not answer.
#[derive(Debug)]
pub enum EngineError {
    /// A turn asked for is not in the history.
    NoSuchTurn(Moment),
    /// A range `N..M` whose end is not after its start.
    BackwardRange {
        /// Its start.
        from: Moment,
        /// Its end.
        to: Moment,
    },
    /// A prune would now make something else unrecoverable than its preview showed.
    HistoryChanged,
    /// The store failed (planning or applying a prune).
    Store(StoreError),
    /// The daemon's log could not be read.
    DaemonLog(DaemonLogError),
    /// `op show`: the operation cannot be shown.
    OpShow(crate::info::op_show::ShowError),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchTurn(t) => write!(f, "turn {t} does not exist"),
            Self::BackwardRange { from, to } => write!(
                f,
                "a range of turns N..M needs N to begin before M (got {from}..{to}: turn {to} began first)"
            ),
            Self::HistoryChanged => f.write_str(
                "the history changed since the preview: nothing pruned; run the prune again to see what it would forget now",
            ),
            Self::Store(e) => write!(f, "{e}"),
            Self::DaemonLog(e) => write!(f, "{e}"),
            Self::OpShow(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            Self::DaemonLog(e) => Some(e),
            Self::OpShow(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// Answers `query` from `store`. `root` is the folder's root (`diff` and `log` compare with the
/// folder as it is now), `folder` its name for `status`, and `daemon` the pid of the daemon
/// answering (`None` offline).
pub fn query(
    root: BorrowedFd<'_>,
    store: &mut Store,
    folder: &str,
    daemon: Option<u32>,
    query: &Query,
) -> Result<Answer, EngineError> {
    Ok(match query {
        Query::Status => Answer::Status(Box::new(crate::info::status(store, folder, daemon))),
        Query::Log => Answer::Log(crate::info::log_rows(store, root)),
        Query::Moments => Answer::Moments(crate::info::moment_rows(store)),
        Query::Agents => Answer::Agents(crate::info::agents::agent_rows(store.index())),
        Query::OpLog => Answer::OpLog(crate::store::ops::op_rows(&store.index().ops)),
        Query::OpShow { id } => Answer::OpShow(Box::new(
            crate::info::op_show::op_show(store, root, *id).map_err(EngineError::OpShow)?,
        )),
        Query::DaemonLog { lines } => Answer::DaemonLog(
            crate::daemon_log::daemon_log(store, *lines).map_err(EngineError::DaemonLog)?,
        ),
        Query::Fsck => Answer::Fsck(crate::store::fsck::check(store.dir())),
        Query::Diff(q) => Answer::Diff(diff(root, store, q)?),
        Query::Prune(q) if q.dry_run => {
            Answer::Prune(crate::store::prune::preview(store, q.policy)?)
        }
        Query::Prune(q) => Answer::Prune(prune(store, q.policy, q.expect.as_ref())?),
    })
}

/// `prune` (not its dry run), refused when it would make anything else unrecoverable than
/// `expect` (what the preview the user said yes to showed).
fn prune(
    store: &mut Store,
    policy: Policy,
    expect: Option<&Unrecoverable>,
) -> Result<PruneReport, EngineError> {
    use crate::store::prune;
    let plan = prune::plan(store, policy)?;
    if let Some(expect) = expect
        && *expect != plan.report().unrecoverable
    {
        return Err(EngineError::HistoryChanged);
    }
    Ok(prune::apply(store, plan)?)
}

/// `diff` and `show`: what changed from the start of `turn` (the current one when not given)
/// to now, to the start of a later turn `to`, or (`show`) within turn `turn` alone, below
/// `paths` (everything when empty). A turn a rewind retired is read from the journal's past.
fn diff(
    root: BorrowedFd<'_>,
    store: &Store,
    q: &DiffQuery,
) -> Result<Vec<FileChange>, EngineError> {
    use crate::diff::Range;
    let index = store.index();
    let from = q.turn.unwrap_or_else(|| Moment::live(index.current_turn()));
    if from.rewound_by.is_some() || q.to.is_some_and(|t| t.rewound_by.is_some()) {
        return diff_past(root, store, from, q);
    }
    let (from_turn, to_turn) = (from.turn, q.to.map(|t| t.turn));
    if !index.has_turn(from_turn) {
        return Err(EngineError::NoSuchTurn(from));
    }
    let range = match (to_turn, q.show) {
        // The turn alone ends where the next live turn begins; the last one, now.
        (_, true) => match index.turns.iter().find(|t| t.turn > from_turn) {
            Some(next) => Range::Between(from_turn, next.turn),
            None => Range::Since(from_turn),
        },
        (Some(to), false) if to <= from_turn => {
            return Err(EngineError::BackwardRange {
                from,
                to: Moment::live(to),
            });
        }
        (Some(to), false) if !index.has_turn(to) => {
            return Err(EngineError::NoSuchTurn(Moment::live(to)));
        }
        (Some(to), false) => Range::Between(from_turn, to),
        (None, false) => Range::Since(from_turn),
    };
    Ok(crate::diff::diff(root, store, range, &q.paths))
}

/// `diff` and `show` where a turn a rewind retired is one end: both ends are read from the
/// journal's past (`crate::store::past`).
fn diff_past(
    root: BorrowedFd<'_>,
    store: &Store,
    from: Moment,
    q: &DiffQuery,
) -> Result<Vec<FileChange>, EngineError> {
    use crate::store::moments::End;
    let index = store.index();
    let (began, end) = index.span_of(from).ok_or(EngineError::NoSuchTurn(from))?;
    let end = match (q.show, q.to) {
        (true, _) => end,
        (false, None) => End::Now,
        (false, Some(to)) => {
            let (to_began, _) = index.span_of(to).ok_or(EngineError::NoSuchTurn(to))?;
            if to_began <= began {
                return Err(EngineError::BackwardRange { from, to });
            }
            End::At(to_began)
        }
    };
    let from_past = store.past(began)?;
    let to_past = match end {
        End::At(seq) => Some(store.past(seq)?),
        End::Now => None,
    };
    // Who changed what: the captures of the turn, and for a longer range every capture the
    // index still has after its start (retired with it, or live).
    let mut captures = index.captures_of(from);
    if !q.show {
        captures.extend(index.captures.iter().filter(|c| c.seq > began));
    }
    Ok(crate::diff::diff_past(
        root,
        store,
        (&from_past, to_past.as_ref()),
        captures.into_iter(),
        &q.paths,
    ))
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
        let mut ask = |q: &Query| query(root.as_fd(), &mut store, "f", None, q);
        let status = Status::try_from(ask(&Query::Status).expect("status")).expect("a status");
        assert_eq!(status.turn, crate::ids::Turn::new(1), "{status:?}");
        let diff = |turn| {
            Query::Diff(DiffQuery {
                turn,
                to: None,
                show: false,
                paths: Vec::new(),
            })
        };
        assert_eq!(
            ask(&diff(Some(Moment::live(crate::ids::Turn::new(9)))))
                .map_err(|e| e.to_string())
                .err(),
            Some("turn 9 does not exist".to_string())
        );
        let changes = ask(&diff(None)).expect("diff");
        let json = serde_json::to_value(&changes).expect("encode");
        assert_eq!(json, serde_json::json!([]), "nothing captured yet");
        let log = ask(&Query::DaemonLog { lines: 50 }).expect("daemon log");
        let json = serde_json::to_value(&log).expect("encode");
        assert_eq!(json, serde_json::json!({"exists": false, "lines": []}));
        let fsck = ask(&Query::Fsck).expect("fsck");
        let json = serde_json::to_value(&fsck).expect("encode");
        assert_eq!(json["findings"], serde_json::json!([]), "{json}");
        // A turn switch or a rewind is no query: the type has no such variant.
        assert!(Vec::<TurnRow>::try_from(fsck).is_err());
    }
}
