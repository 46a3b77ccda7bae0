//! What a rewind tells its caller: the [`Report`] of what it did, or in a dry run would do
//! (restored, deleted, failed, unchanged, bytes written, whether it stays open), the
//! [`Failure`] of one path, and the [`RewindError`] when it did not start. Kept apart because every stage fills these in and every caller (the daemon's control
//! files, the CLI, the tests) reads them.
//!
//! No I/O: plain types, their rendering and the errno a writer of `.ckpt/rewind` sees.

use super::request::Conflicts;
use super::room::Space;
use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::StoreError;
use crate::store::actors::ActorView;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A path that could not be restored, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Where.
    pub path: FailedAt,
    /// Why.
    pub reason: String,
}

/// Where a rewind failed: a path of the folder (in the JSON as every path is, a string or,
/// for a name that is not UTF-8, `{"hex": …}`; the CLI quotes it to print it), or a place
/// that is not one: the store, `".ckpt"` (no path of the folder is that: the store is hidden
/// from it), or a file whose name was not found, `null` (not `"?"`, which a file may be
/// named).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailedAt {
    /// A path of the folder.
    Path(RelPath),
    /// The store (`.ckpt`); the reason says what in it.
    Store,
    /// A file held open for writing whose name was not found.
    Unnamed,
}

impl From<RelPath> for FailedAt {
    fn from(p: RelPath) -> Self {
        Self::Path(p)
    }
}

impl From<&RelPath> for FailedAt {
    fn from(p: &RelPath) -> Self {
        Self::Path(p.clone())
    }
}

/// As a person reads it: a path quoted as git quotes one.
impl std::fmt::Display for FailedAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Path(p) => write!(f, "{p}"),
            Self::Store => f.write_str(".ckpt"),
            Self::Unnamed => f.write_str("?"),
        }
    }
}

impl Serialize for FailedAt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Path(p) => p.serialize(s),
            Self::Store => s.serialize_str(STORE),
            Self::Unnamed => s.serialize_none(),
        }
    }
}

/// What [`FailedAt::Store`] is in the JSON.
const STORE: &str = ".ckpt";

/// Read back as written: `null` is the unnamed file, `".ckpt"` the store (which no path of the
/// folder can be: [`RelPath::new`] refuses it), anything else a path.
impl<'de> Deserialize<'de> for FailedAt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A path as text (maybe the store), or in its other form (`{"hex": …}`).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Other(RelPath),
        }
        Ok(match Option::<Raw>::deserialize(d)? {
            None => Self::Unnamed,
            Some(Raw::Text(t)) if t == STORE => Self::Store,
            Some(Raw::Text(t)) => {
                Self::Path(RelPath::new(t.as_bytes()).map_err(serde::de::Error::custom)?)
            }
            Some(Raw::Other(p)) => Self::Path(p),
        })
    }
}

/// What a rewind did, or, in a dry run, what it would do to the folder as it is now: the same
/// lists either way, so a preview and the run after it can be compared line by line.
/// Serialised with its [`Summary`] (counted when serialised, so failures added after the
/// rewind itself, by the daemon, are counted too).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(into = "ReportJson")]
pub struct Report {
    /// Target turn.
    pub to: Turn,
    /// Turn current before.
    pub from: Turn,
    /// Whether nothing was changed on purpose: the lists say what a run would do.
    pub dry_run: bool,
    /// Whether this undid the previous rewind.
    pub undo: bool,
    /// The operation-log words for an undo or redo (`undo of #7 (rewind to turn 3 …)`).
    pub op: Option<String>,
    /// The paths a partial rewind was asked for (empty for the whole folder).
    pub only: Vec<RelPath>,
    /// Whether this completes a rewind that was cut off, instead of the one asked for.
    pub completes_cut_off: bool,
    /// Paths given back their earlier content or kind (the plan's own paths, shared: a copy
    /// of each as text was 5 MB of a 100,000-path rewind's peak; text only when serialised).
    pub restored: Vec<RelPath>,
    /// Paths removed.
    pub deleted: Vec<RelPath>,
    /// Paths that could not be restored.
    pub failed: Vec<Failure>,
    /// Paths of the plan that already were as at the start of the turn (left as they are).
    pub unchanged: usize,
    /// Bytes of file content written (or to write, in a dry run).
    pub bytes: u64,
    /// Whether the rewind stays open because a failure may pass: running it again completes it.
    pub unfinished: bool,
    /// Dry runs: whether the run would be refused before changing anything (a blob it needs is
    /// missing or damaged; `failed` says which paths need it).
    pub refused: bool,
    /// Paths whose state changed, for cache invalidation (not serialised).
    pub changed: Vec<RelPath>,
    /// Failed paths that no second run can restore (not serialised).
    pub permanent: HashSet<FailedAt>,
    /// Fresh files that now stand for recorded identities (journaled, not serialised).
    pub renewed: Vec<crate::identity::Renewal>,
    /// `--agent`: who changed what since the start of the turn, and what is restored or kept.
    pub agent: Option<AgentSplit>,
    /// Dry runs: the space the run needs on the disks and the space free; when it does not
    /// fit, the run would be refused before changing anything.
    pub space: Option<Space>,
}

impl Report {
    /// Whether everything was restored (in a dry run: whether everything can be).
    pub fn ok(&self) -> bool {
        self.failed.is_empty()
    }

    /// Whether the folder is (or, in a dry run, would be) left as it was: nothing restored or
    /// deleted.
    pub fn changes_nothing(&self) -> bool {
        self.restored.is_empty() && self.deleted.is_empty()
    }

    /// The paths the rewind failed on and does not list in `changed`, each once: their state
    /// on the host may have changed all the same, since a step can fail after writing (a file
    /// restored in place that ran out of space half-way, then its mode not set), so what the
    /// kernel cached of them is dropped too. Nothing is built for a rewind without failures.
    pub fn failed_not_changed(&self) -> Vec<RelPath> {
        let mut failed: Vec<RelPath> = self
            .failed
            .iter()
            .filter_map(|f| match &f.path {
                FailedAt::Path(p) => Some(p.clone()),
                FailedAt::Store | FailedAt::Unnamed => None,
            })
            .collect();
        if failed.is_empty() {
            return failed;
        }
        failed.sort();
        failed.dedup();
        let changed: HashSet<&RelPath> = self.changed.iter().collect();
        failed.retain(|p| !changed.contains(p));
        failed
    }

    /// The counts of the lists, with the paths left unchanged and the bytes written.
    pub fn summary(&self) -> Summary {
        Summary {
            restored: self.restored.len(),
            deleted: self.deleted.len(),
            failed: self.failed.len(),
            unchanged: self.unchanged,
            bytes: self.bytes,
        }
    }
}

/// A rewind's counts, as `--json` gives them beside the lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Paths restored (or to restore).
    pub restored: usize,
    /// Paths deleted (or to delete).
    pub deleted: usize,
    /// Paths that could not be (or cannot be) restored.
    pub failed: usize,
    /// Paths of the plan already as at the start of the turn.
    pub unchanged: usize,
    /// Bytes of file content written (or to write).
    pub bytes: u64,
}

/// A [`Report`] as it is serialised, and as the CLI reads it back from the daemon: the fields
/// a caller reads, and the summary (the report's own bookkeeping, such as the paths whose
/// cache to drop, stays behind).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportJson {
    /// Target turn.
    pub to: Turn,
    /// The moment as it was given, when it named the turn another way than by its number
    /// (`-1`, `@10:42`, `/fix the build`); `to` is the turn it resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// Turn current before.
    pub from: Turn,
    /// Whether nothing was changed on purpose: the lists say what a run would do.
    pub dry_run: bool,
    /// Whether this undid the previous rewind.
    pub undo: bool,
    /// The operation-log words for an undo or redo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// The paths a partial rewind was asked for (empty for the whole folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<RelPath>,
    /// Whether this completes a rewind that was cut off, instead of the one asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completes_cut_off: bool,
    /// Paths given back their earlier content or kind.
    pub restored: Vec<RelPath>,
    /// Paths removed.
    pub deleted: Vec<RelPath>,
    /// Paths that could not be restored.
    pub failed: Vec<Failure>,
    /// Whether the rewind stays open because a failure may pass.
    pub unfinished: bool,
    /// Dry runs: whether the run would be refused before changing anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// `--agent`: who changed what since the start of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSplit>,
    /// Dry runs: the space the run needs on the disks and the space free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<Space>,
    /// The counts of the lists.
    pub summary: Summary,
    /// After a rewind across turns an agent CLI began: how to take each of those agents'
    /// conversations back to the same prompt (filled in by the CLI, `cli/conversations.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversations: Vec<ConversationBack>,
}

/// An agent CLI's conversation to take back with the folder, one per session: the agent CLI
/// (`claude-code`, `codex`, `gemini`), its session and transcript as the hook recorded them,
/// the prompt to go back to (the first that session sent in the turns rewound), and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationBack {
    /// The agent CLI, as `hooks install` names it.
    pub agent: String,
    /// Its session (`None`: the hook's payload gave none).
    pub session: Option<String>,
    /// The conversation's transcript file, as the hook's payload named it.
    pub transcript: Option<String>,
    /// The prompt the conversation goes back to: the first line of the first prompt the
    /// session sent in the turns the rewind took back (`None`: not known, as for Codex's
    /// notify program).
    pub prompt: Option<String>,
    /// The turn that prompt began.
    pub turn: Turn,
    /// What to do in the agent, in words.
    pub how: String,
}

impl From<Report> for ReportJson {
    fn from(r: Report) -> Self {
        let summary = r.summary();
        Self {
            to: r.to,
            spec: None,
            from: r.from,
            dry_run: r.dry_run,
            undo: r.undo,
            op: r.op,
            only: r.only,
            completes_cut_off: r.completes_cut_off,
            restored: r.restored,
            deleted: r.deleted,
            failed: r.failed,
            unfinished: r.unfinished,
            refused: r.refused,
            agent: r.agent,
            space: r.space,
            summary,
            conversations: Vec::new(),
        }
    }
}

/// One path and who changed it since the start of the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathActors {
    /// The path.
    pub path: RelPath,
    /// Who changed it (the agent first), with the process and kind of each one's first change.
    pub actors: Vec<ActorView>,
    /// For a conflict the agent alone changed: what others changed below it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub below: Option<RelPath>,
    /// For a conflict the agent alone changed: the directory above it that a kept change made
    /// something else, or removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub above: Option<RelPath>,
    /// Under `--conflicts merge`, why the conflict was not merged: the overlapping hunks, or
    /// why it is not merged line by line (a binary file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<String>,
}

/// A conflict merged line by line (`--conflicts merge`): the agents' edits taken back, every
/// other actor's lines kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedPath {
    /// The path.
    pub path: RelPath,
    /// Who changed it.
    pub actors: Vec<ActorView>,
    /// What the merge changes in it, as a unified diff from the file as it is now.
    pub diff: String,
}

/// The paths changed since the start of the turn, by who changed them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSplit {
    /// What is done with the conflicts.
    pub conflicts_policy: Conflicts,
    /// The agents whose changes are rewound, as `--agent NAME` named them (none: every agent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Changed by the agent alone: restored.
    pub agent_only: Vec<PathActors>,
    /// Changed by the agent and others: kept, unless `conflicts_policy` is `rewind`.
    pub conflicts: Vec<PathActors>,
    /// Changed by others alone: kept.
    pub others: Vec<PathActors>,
    /// Conflicts merged line by line (`--conflicts merge`): restored to the merge's result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedPath>,
}

impl AgentSplit {
    /// The paths the rewind restores.
    pub fn chosen(&self) -> Vec<RelPath> {
        let mut out: Vec<&PathActors> = self.agent_only.iter().collect();
        if self.conflicts_policy == Conflicts::Rewind {
            // Not one whose restore would remove what others changed below it, nor one with no
            // directory to come back in.
            out.extend(
                self.conflicts
                    .iter()
                    .filter(|c| c.below.is_none() && c.above.is_none()),
            );
        }
        let mut paths: Vec<RelPath> = out.iter().map(|p| p.path.clone()).collect();
        paths.extend(self.merged.iter().map(|m| m.path.clone()));
        paths
    }
}

/// Why a rewind did not start.
#[derive(Debug)]
pub enum RewindError {
    /// The turn is not in the index.
    NoSuchTurn {
        /// The turn asked for.
        turn: Turn,
        /// The turns that exist.
        known: Vec<Turn>,
    },
    /// Nothing to undo.
    NothingToUndo,
    /// `--agent`, but no agent was ever marked: every change counts as one actor.
    NoAgent,
    /// `--agent NAME`, and no agent marked in the folder has that name.
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The names of the agents marked.
        known: Vec<String>,
    },
    /// No operation to undo (`undo`; `NothingToUndo` is `rewind --undo`'s).
    NoOpToUndo,
    /// Nothing undone to redo.
    NothingToRedo,
    /// Verification failed before any change: the listed problems.
    Refused(Vec<Failure>),
    /// The disks lack the room the rewind needs: refused before any change.
    NoSpace(Box<Space>),
    /// `op restore ID`: the folder as it was just after that operation cannot be had.
    Unrestorable(crate::store::ops::Unrestorable),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for RewindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchTurn { turn, known } => {
                let list: Vec<String> = known.iter().map(Turn::to_string).collect();
                write!(f, "turn {turn} does not exist (turns: {})", list.join(", "))
            }
            Self::NothingToUndo => write!(f, "there is no rewind to undo"),
            Self::NoAgent => write!(
                f,
                "no agent was ever marked in this folder, so every change counts as one actor and the agent's cannot be told apart: run the agent with `ckpt-mount run -- CMD` or install its hook (`ckpt-mount hooks install`), or rewind without --agent"
            ),
            Self::UnknownAgent { name, known } => {
                let list: Vec<String> = known
                    .iter()
                    .map(|n| crate::quote::quote_path(n.as_bytes()).into_owned())
                    .collect();
                write!(
                    f,
                    "no agent named {} was ever marked in this folder (agents: {}; `ckpt-mount agents` lists them){}",
                    crate::quote::quote_path(name.as_bytes()),
                    list.join(", "),
                    if name.parse::<u64>().is_ok() {
                        format!(
                            "; to rewind every agent's changes since turn {name}, put the turn first: rewind {name} --agent"
                        )
                    } else {
                        String::new()
                    }
                )
            }
            Self::NoOpToUndo => write!(
                f,
                "there is no operation to undo (ckpt-mount op log lists them)"
            ),
            Self::NothingToRedo => write!(
                f,
                "there is nothing to redo: no undo since the last operation (ckpt-mount op log lists them)"
            ),
            Self::Refused(p) => {
                write!(f, "rewind refused before changing anything: ")?;
                let parts: Vec<String> = p
                    .iter()
                    .map(|x| format!("{}: {}", x.path, x.reason))
                    .collect();
                write!(f, "{}", parts.join("; "))
            }
            Self::NoSpace(space) => write!(
                f,
                "rewind refused before changing anything: {}",
                space.shortfall()
            ),
            Self::Unrestorable(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("a valid path")
    }

    fn failure(path: &str) -> Failure {
        Failure {
            path: p(path).into(),
            reason: "no space left".into(),
        }
    }

    #[test]
    fn a_path_that_failed_is_touched_as_much_as_one_that_changed() {
        let report = Report {
            changed: vec![p("a"), p("d/b")],
            failed: vec![
                failure("d/b"),
                failure("c"),
                failure("c"),
                Failure {
                    path: FailedAt::Store,
                    reason: "cannot store".into(),
                },
            ],
            ..Report::default()
        };
        // Changed first, in order; each failed path once; nothing that is no path.
        let failed = report.failed_not_changed();
        let touched: Vec<&RelPath> = report.changed.iter().chain(&failed).collect();
        assert_eq!(touched, vec![&p("a"), &p("d/b"), &p("c")]);
        assert!(Report::default().failed_not_changed().is_empty());
    }

    #[test]
    fn a_name_that_is_not_utf8_keeps_its_bytes_in_the_json() {
        let odd = RelPath::new(b"dir/caf\xe9").expect("a valid path");
        let report = Report {
            restored: vec![odd.clone(), p("plain")],
            failed: vec![Failure {
                path: odd.clone().into(),
                reason: "gone".into(),
            }],
            only: vec![odd],
            ..Report::default()
        };
        let json = serde_json::to_value(&report).expect("encode");
        let hex = serde_json::json!({"hex": "6469722f636166e9"});
        assert_eq!(json["restored"], serde_json::json!([hex, "plain"]));
        assert_eq!(json["failed"][0]["path"], hex);
        assert_eq!(json["only"], serde_json::json!([hex]));
        assert_eq!(
            crate::quote::quote_json_path(&json["restored"][0]),
            r#""dir/caf\351""#
        );
    }

    #[test]
    fn where_a_rewind_failed_reads_back_as_written() {
        let odd = RelPath::new(b"caf\xe9").expect("a valid path");
        let places = [
            FailedAt::Path(p("?")),
            FailedAt::Path(p("dir/a")),
            FailedAt::Path(odd),
            FailedAt::Store,
            FailedAt::Unnamed,
        ];
        for at in places {
            let json = serde_json::to_value(&at).expect("encode");
            let back: FailedAt = serde_json::from_value(json.clone()).expect("decode");
            assert_eq!(back, at, "{json}");
        }
        // A file named `?` and the file whose name was not found no longer read the same.
        assert_eq!(
            serde_json::to_value(FailedAt::Unnamed).expect("encode"),
            serde_json::Value::Null
        );
        assert_eq!(
            serde_json::to_value(FailedAt::Path(p("?"))).expect("encode"),
            serde_json::json!("?")
        );
        // As a person reads them: as before.
        assert_eq!(FailedAt::Unnamed.to_string(), "?");
        assert_eq!(FailedAt::Store.to_string(), ".ckpt");
    }

    #[test]
    fn a_report_reads_back_as_the_json_it_was_written_as() {
        let report = Report {
            to: Turn::new(2),
            from: Turn::new(4),
            op: Some("undo of #3".into()),
            restored: vec![p("a"), RelPath::new(b"b\xff").expect("a valid path")],
            deleted: vec![p("c")],
            failed: vec![
                failure("d"),
                Failure {
                    path: FailedAt::Unnamed,
                    reason: "held open".into(),
                },
            ],
            unchanged: 3,
            bytes: 12,
            ..Report::default()
        };
        let json = serde_json::to_value(&report).expect("encode");
        let back: ReportJson = serde_json::from_value(json.clone()).expect("decode");
        assert_eq!(back, ReportJson::from(report));
        assert_eq!(serde_json::to_value(&back).expect("encode"), json);
        assert_eq!(back.summary.failed, 2);
    }
}
