//! Who changed what: the state the index keeps of the journal's attribution records
//! ([`Actors`]: version 4; the records themselves, [`Touch`] and [`AgentMark`], are with every
//! other record in `journal/record.rs`), and how views name actors. The index answers who
//! changed a capture (`Index::actors_of` and the like, in `index.rs`), since it holds both
//! the captures and this state.
//!
//! - `touched` ([`Touch`]): an actor changed the path of a capture in that capture's turn.
//!   One record per (capture, actor): the first change of a path by each actor in a turn. The
//!   first actor's record is written with the capture itself, in the same `write(2)`.
//! - `agent` ([`AgentMark`]): a process (pid and start time, as `/proc/PID/stat` gives them) is
//!   the agent; every process that descends from it is too (`crate::capture::actors`).
//!
//! A touch names its capture by seq, so it follows the capture wherever rewinds, undos and
//! prunes take it: a touch counts exactly while its capture is in the index. The journal is
//! untrusted input: a touch whose capture is unknown is kept but names nothing (fsck says so).

use super::journal::{AgentMark, HandOff, Touch};
use crate::ids::{Seq, Turn};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// An actor: whether it is an agent (`None`: no agent was ever marked in this folder's
/// history, so every change counts as one actor), which one, and its command name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Actor {
    /// An agent (`true`), another process (`false`), or not known (`None`).
    pub agent: Option<bool>,
    /// The agent's name (its nearest mark's); `None` for another process, and for an agent
    /// recorded before agents had names (journal version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The command name (`comm`) of its process, `?` when unknown.
    pub comm: String,
}

impl Actor {
    /// Whether this actor is known to be the agent.
    pub fn is_agent(&self) -> bool {
        self.agent == Some(true)
    }

    /// `sed (agent claude-code:1f3a…)`, `vim`: how views name an actor. The command name and
    /// the agent's are quoted as a path is ([`crate::quote::quote_path`]): a process sets its
    /// own, newlines and escapes included.
    pub fn label(&self) -> String {
        let comm = crate::quote::quote_path(self.comm.as_bytes());
        match (&self.name, self.is_agent()) {
            (Some(name), true) => format!("{comm} (agent {})", quote_name(name)),
            (None, true) => format!("{comm} (agent)"),
            (_, false) => comm.into_owned(),
        }
    }
}

/// An agent's name as views print it: quoted as a path when odd, a long session id cut to
/// its first 8 characters (`claude-code:1f3a2b4c…`); `agents` and `--json` give it whole.
pub fn quote_name(name: &str) -> String {
    match name.split_once(':') {
        Some((cli, session)) if session.chars().count() > 12 => {
            let head: String = session.chars().take(8).collect();
            let quoted = crate::quote::quote_path(format!("{cli}:{head}").as_bytes()).into_owned();
            format!("{quoted}…")
        }
        _ => crate::quote::quote_path(name.as_bytes()).into_owned(),
    }
}

/// Whether `pattern`, as `--agent` takes it, names the agent `name`: the same name; every
/// session of an agent CLI (`claude-code` names `claude-code:1f3a…`); or a session by its
/// first characters (`claude-code:1f3a`).
pub fn names_agent(pattern: &str, name: &str) -> bool {
    if pattern == name {
        return true;
    }
    match name.strip_prefix(pattern) {
        Some(rest) => rest.starts_with(':') || pattern.contains(':'),
        None => false,
    }
}

impl Touch {
    /// The actor this touch is by.
    pub fn actor(&self) -> Actor {
        Actor {
            agent: self.agent,
            name: self.name.clone(),
            comm: self.comm.clone(),
        }
    }
}

/// Who owns a path's changes between two hand-offs: an agent by name (`None` for one recorded
/// before agents had names), or every process of no agent together (the user's editor and
/// shell are one owner: their edits are never told apart from each other).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// An agent.
    Agent(Option<String>),
    /// Any process that is no agent (or, before a first mark, any process at all).
    Others,
}

impl Owner {
    /// The owner an actor with this agent flag and name counts as.
    pub fn of(agent: Option<bool>, name: Option<&str>) -> Self {
        if agent == Some(true) {
            Self::Agent(name.map(str::to_string))
        } else {
            Self::Others
        }
    }
}

/// One actor of a path in a view: who, which process first, and what it first did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorView {
    /// Command name.
    pub comm: String,
    /// An agent, another process, or not known (no agent marked).
    pub agent: Option<bool>,
    /// The agent's name, when it is one that has a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The process of its first change (0 when unknown).
    pub pid: u32,
    /// What that first change was (`?` for a change the journal did not attribute; `held`:
    /// held open for writing across the turn switch).
    pub what: String,
    /// For `held`: the turn the descriptor was opened in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_in: Option<Turn>,
}

impl ActorView {
    /// Who did what, as the views say it: `sed (agent helper) rename`, or for a file it held
    /// open for writing across the turn switch, `written through a descriptor python3 (pid
    /// 1234) opened in turn 3` (such writes reach the host without a request, so they are not
    /// seen one by one: who holds the descriptor stands for who writes).
    pub fn described(&self) -> String {
        let label = self.actor().label();
        match self.opened_in {
            Some(turn) => format!(
                "written through a descriptor {label} (pid {}) opened in turn {turn}",
                self.pid
            ),
            None => format!("{label} {}", self.what),
        }
    }

    /// The actor.
    pub fn actor(&self) -> Actor {
        Actor {
            agent: self.agent,
            name: self.name.clone(),
            comm: self.comm.clone(),
        }
    }
}

/// What the index knows of actors, replayed from the records above.
#[derive(Debug, Default)]
pub struct Actors {
    /// Every agent mark, in journal order, with its seq and time.
    pub marks: Vec<(Seq, u64, AgentMark)>,
    /// The touches of each capture, in journal order.
    pub by_capture: HashMap<Seq, Touches>,
    /// The hand-offs of each capture, in journal order (few: one per change of hands).
    pub handoffs: HashMap<Seq, Vec<HandOff>>,
    /// One copy of each command name and kind of change, shared by every touch that names it
    /// (a turn of 100,000 captures holds a handful of names, not 200,000 strings).
    names: HashSet<Arc<str>>,
}

/// The touches of one capture. Nearly every capture has exactly one (the touch written with
/// it), held inline: a `Vec` would allocate room for four (160 bytes) per captured path.
pub type Touches = smallvec::SmallVec<[HeldTouch; 1]>;

/// A touch as the index holds it: its capture is the key it is filed under, its names are
/// shared ([`Actors`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldTouch {
    /// The process of the first such change (0 when unknown).
    pub pid: u32,
    /// Its command name.
    pub comm: Arc<str>,
    /// Whether it descends from a marked agent; `None` when no agent was ever marked.
    pub agent: Option<bool>,
    /// The agent's name, when it is one that has a name.
    pub name: Option<Arc<str>>,
    /// What that first change was.
    pub what: Arc<str>,
    /// For `held`: the turn the descriptor was opened in.
    pub opened_in: Option<Turn>,
}

impl HeldTouch {
    /// The `touched` record of this touch of capture `capture`.
    pub fn record(&self, capture: Seq) -> Touch {
        Touch {
            capture,
            pid: self.pid,
            comm: self.comm.to_string(),
            agent: self.agent,
            name: self.name.as_deref().map(str::to_string),
            what: self.what.to_string(),
            opened_in: self.opened_in,
        }
    }
}

impl Actors {
    /// The shared copy of the name `s`.
    pub fn name(&mut self, s: &str) -> Arc<str> {
        if let Some(n) = self.names.get(s) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(s);
        self.names.insert(n.clone());
        n
    }

    /// A `touched` record.
    pub fn touched(&mut self, t: &Touch) {
        let held = HeldTouch {
            pid: t.pid,
            comm: self.name(&t.comm),
            agent: t.agent,
            name: t.name.as_deref().map(|n| self.name(n)),
            what: self.name(&t.what),
            opened_in: t.opened_in,
        };
        self.by_capture.entry(t.capture).or_default().push(held);
    }

    /// A `hand_off` record.
    pub fn handed_off(&mut self, h: &HandOff) {
        self.handoffs.entry(h.capture).or_default().push(h.clone());
    }

    /// Who owns the path of capture `capture` now, as hand-offs count owners: the agent by
    /// name, or the processes of no agent (`(Some(false), None)`); the first touch's, else the
    /// last hand-off's. `None`: nobody recorded (the daemon's own capture).
    pub fn owner(&self, capture: Seq) -> Option<Owner> {
        if let Some(h) = self.handoffs.get(&capture).and_then(|v| v.last()) {
            return Some(Owner::of(h.agent, h.name.as_deref()));
        }
        let t = self.by_capture.get(&capture)?.first()?;
        Some(Owner::of(t.agent, t.name.as_deref()))
    }

    /// An `agent` record at `seq`, `time`.
    pub fn marked(&mut self, seq: Seq, time: u64, m: &AgentMark) {
        self.marks.push((seq, time, m.clone()));
    }

    /// Whether an agent was ever marked.
    pub fn any_marked(&self) -> bool {
        !self.marks.is_empty()
    }

    /// The name of every agent marked, in the order of their first marks.
    pub fn agent_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, _, m) in &self.marks {
            let n = m.name();
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// Whether `actor` already has a touch of capture `capture`: the dedup of attribution.
    pub fn has_touch(&self, capture: Seq, actor: &Actor) -> bool {
        self.by_capture.get(&capture).is_some_and(|ts| {
            ts.iter().any(|t| {
                t.agent == actor.agent
                    && t.name.as_deref() == actor.name.as_deref()
                    && *t.comm == *actor.comm
            })
        })
    }
}

/// Agents first (by name), then others by command name.
pub fn sort_actors(list: &mut [ActorView]) {
    list.sort_by(|a, b| {
        b.agent
            .unwrap_or(false)
            .cmp(&a.agent.unwrap_or(false))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.comm.cmp(&b.comm))
    });
}

/// `sed (agent), vim`: a list of actors as the views print it.
pub fn actors_text(list: &[ActorView]) -> String {
    let mut names: Vec<String> = Vec::new();
    for a in list {
        let l = a.actor().label();
        if !names.contains(&l) {
            names.push(l);
        }
    }
    names.join(", ")
}

/// Command names as one list for a view (`sed,vim`), each quoted as [`Actor::label`] quotes it.
pub fn programs_text(programs: &[String]) -> String {
    let quoted: Vec<_> = programs
        .iter()
        .map(|p| crate::quote::quote_path(p.as_bytes()))
        .collect();
    quoted.join(",")
}

/// The sentence the views print when no agent was ever marked in the folder's history.
pub const ONE_ACTOR: &str = "no agent marked: every change counts as one actor";

/// How to mark one, said where there is room (`status`).
pub const HOW_TO_MARK: &str = "run the agent with `ckpt-mount run -- CMD`, or install its hook with `ckpt-mount hooks install`";

/// fsck: a `touched` record must name a capture before it (a capture of a turn, not one a
/// rewind saved for its undo); an `agent` record a process (pid above 0) with a command name.
/// Returns `(line seq, what is wrong)` for each record that does not.
pub fn check_records(lines: &[super::journal::Line]) -> Vec<(Seq, String)> {
    use super::journal::Record;
    let mut captures = std::collections::HashSet::new();
    let mut out = Vec::new();
    for l in lines {
        match &l.rec {
            Record::Capture { undo_of: None, .. } => {
                captures.insert(l.seq);
            }
            Record::Touched(t) if !captures.contains(&t.capture) => out.push((
                l.seq,
                format!(
                    "touched names capture {}, which is not a capture before it",
                    t.capture
                ),
            )),
            Record::Touched(t) if t.comm.is_empty() || t.what.is_empty() => {
                out.push((l.seq, "touched without a command name or a change".into()));
            }
            Record::HandOff(h) if !captures.contains(&h.capture) => out.push((
                l.seq,
                format!(
                    "hand_off names capture {}, which is not a capture before it",
                    h.capture
                ),
            )),
            Record::Agent(m) if m.pid == 0 || m.comm.is_empty() => {
                out.push((
                    l.seq,
                    "agent mark without a process or a command name".into(),
                ));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Turn;
    use crate::relpath::RelPath;
    use crate::store::Store;
    use crate::store::index::Index;
    use crate::store::journal::{PreImage, Record};
    use std::os::fd::AsFd;

    fn touch(capture: Seq, comm: &str, agent: bool) -> Record {
        Record::Touched(Touch {
            capture,
            pid: 7,
            comm: comm.into(),
            agent: Some(agent),
            name: agent.then(|| "claude".into()),
            what: "write".into(),
            opened_in: None,
        })
    }

    fn capture(turn: u64, path: &str) -> Record {
        Record::Capture {
            turn: Turn::new(turn),
            path: RelPath::new(path.as_bytes()).expect("valid"),
            pre: PreImage::Absent,
            undo_of: None,
            pid: Some(7),
            comm: Some("sed".into()),
        }
    }

    fn comms(index: &Index, path: &str) -> Vec<String> {
        let path = RelPath::new(path.as_bytes()).expect("valid");
        let caps = index.captures.iter().filter(|c| c.path == path);
        index
            .actors_over(caps)
            .into_iter()
            .map(|a| a.actor().label())
            .collect()
    }

    #[test]
    fn a_command_name_is_quoted_as_a_path_is() {
        let actor = |agent, comm: &str| Actor {
            agent,
            name: None,
            comm: comm.into(),
        };
        assert_eq!(actor(Some(true), "sed").label(), "sed (agent)");
        let named = |name: &str| Actor {
            agent: Some(true),
            name: Some(name.into()),
            comm: "sed".into(),
        };
        assert_eq!(named("helper").label(), "sed (agent helper)");
        assert_eq!(
            named("claude-code:1f3a2b4c-0000-1111").label(),
            "sed (agent claude-code:1f3a2b4c…)",
            "a long session id is cut"
        );
        assert_eq!(named("a\nb").label(), r#"sed (agent "a\nb")"#);
        assert_eq!(actor(Some(false), "x\ny").label(), r#""x\ny""#);
        assert_eq!(
            programs_text(&["vim".into(), "e\x1b[2J".into()]),
            r#"vim,"e\033[2J""#
        );
    }

    #[test]
    fn hand_offs_follow_their_captures_through_a_prune_with_their_blobs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("root");
        let mut s = Store::for_test(root.as_fd()).expect("store");
        s.append(Record::Agent(AgentMark {
            pid: 30,
            start: 9,
            comm: "claude".into(),
            via: "run".into(),
            session: None,
            name: Some("claude".into()),
        }))
        .expect("mark");
        for t in 2..=3 {
            s.append(Record::Turn {
                turn: Turn::new(t),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("turn");
        }
        let c = s.append(capture(3, "f")).expect("capture");
        s.append(touch(c, "sed", true)).expect("touch");
        let stored = s.blobs().put_bytes(b"the agent's\n").expect("blob");
        let mut pre = crate::store::index::tests::file_with_blob(stored.id);
        if let PreImage::File { size, .. } = &mut pre {
            *size = stored.size;
        }
        s.append(Record::HandOff(HandOff {
            capture: c,
            pre: pre.clone(),
            pid: 8,
            comm: "vim".into(),
            agent: Some(false),
            name: None,
        }))
        .expect("hand-off");
        assert_eq!(s.index().actors.owner(c), Some(Owner::Others));
        crate::store::prune::prune(
            &mut s,
            crate::store::prune::Policy {
                keep_turns: Some(1),
                max_size: None,
                undo: crate::store::prune::UndoHistory::Drop,
            },
        )
        .expect("prune");
        drop(s);
        let s = Store::reopen_for_test(root.as_fd()).expect("reopen");
        let f = RelPath::new(b"f").expect("valid");
        let now = s.index().capture_seq_now(&f).expect("captured");
        let handoffs = &s.index().actors.handoffs[&now];
        assert_eq!(handoffs.len(), 1);
        assert_eq!(handoffs[0].capture, now, "renumbered with its capture");
        assert_eq!(handoffs[0].pre, pre);
        assert!(s.blobs().exists(&stored.id), "its blob is kept");
        assert_eq!(s.index().actors.owner(now), Some(Owner::Others));
        let report = crate::store::fsck::check(s.dir());
        assert!(report.clean(), "{report:?}");
    }

    #[test]
    fn touches_follow_their_captures_through_rewinds_undos_and_prunes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::File::open(dir.path()).expect("root");
        let mut s = Store::for_test(root.as_fd()).expect("store");
        s.append(Record::Agent(AgentMark {
            pid: 30,
            start: 9,
            comm: "claude".into(),
            via: "run".into(),
            session: None,
            name: None,
        }))
        .expect("mark");
        for t in 2..=3 {
            s.append(Record::Turn {
                turn: Turn::new(t),
                label: None,
                by: None,
                conversation: None,
            })
            .expect("turn");
            let c = s.append(capture(t, "f")).expect("capture");
            s.append(touch(c, "sed", true)).expect("touch");
            s.append(touch(c, &format!("vim{t}"), false))
                .expect("touch");
        }
        assert_eq!(
            comms(s.index(), "f"),
            vec!["sed (agent claude)", "vim2", "vim3"]
        );
        let now = s
            .index()
            .capture_seq_now(&RelPath::new(b"f").expect("valid"));
        assert!(
            s.index().actors.has_touch(
                now.expect("captured now"),
                &Actor {
                    agent: Some(false),
                    name: None,
                    comm: "vim3".into()
                }
            ),
            "the dedup knows turn 3's touches"
        );
        // A rewind to turn 3 retires turn 3's capture, and with it its touches.
        let b = s
            .append(Record::RewindBegin {
                to: Turn::new(3),
                from: Turn::new(3),
            })
            .expect("begin");
        s.append(Record::RewindDone {
            begin: b,
            counts: None,
        })
        .expect("done");
        assert_eq!(comms(s.index(), "f"), vec!["sed (agent claude)", "vim2"]);
        assert_eq!(
            s.index()
                .capture_seq_now(&RelPath::new(b"f").expect("valid")),
            None
        );
        // Its undo brings them back, and the dedup finds the capture again.
        s.append(Record::UndoDone { rewind: b }).expect("undo");
        assert_eq!(
            comms(s.index(), "f"),
            vec!["sed (agent claude)", "vim2", "vim3"]
        );
        assert_eq!(
            s.index()
                .capture_seq_now(&RelPath::new(b"f").expect("valid")),
            now
        );
        // A prune renumbers every line: touches name their captures by the new seqs, and the
        // mark stays.
        crate::store::prune::prune(
            &mut s,
            crate::store::prune::Policy {
                keep_turns: Some(1),
                max_size: None,
                undo: crate::store::prune::UndoHistory::Drop,
            },
        )
        .expect("prune");
        assert_eq!(comms(s.index(), "f"), vec!["sed (agent claude)", "vim3"]);
        assert_eq!(s.index().actors.marks.len(), 1);
        drop(s);
        let s = Store::reopen_for_test(root.as_fd()).expect("reopen");
        assert_eq!(comms(s.index(), "f"), vec!["sed (agent claude)", "vim3"]);
        let text = std::fs::read_to_string(dir.path().join(".ckpt/journal.jsonl")).expect("read");
        let parsed = crate::store::journal::parse(text.as_bytes()).expect("parse");
        assert!(check_records(&parsed.lines).is_empty(), "{text}");
    }

    #[test]
    fn a_pattern_names_an_agent_its_sessions_or_a_session_by_its_start() {
        assert!(names_agent("helper", "helper"));
        assert!(names_agent("claude-code", "claude-code:1f3a"));
        assert!(names_agent("claude-code:", "claude-code:1f3a"));
        assert!(names_agent("claude-code:1f", "claude-code:1f3a"));
        assert!(!names_agent("claude", "claude-code:1f3a"));
        assert!(!names_agent("help", "helper"));
        assert!(!names_agent("claude-code:2", "claude-code:1f3a"));
    }

    #[test]
    fn a_version_4_journal_reads_with_its_agents_named_from_their_marks() {
        let text = concat!(
            r#"{"v":1,"seq":1,"time":0,"op":"turn","turn":1}"#,
            "\n",
            r#"{"v":4,"seq":2,"time":0,"op":"agent","pid":30,"start":9,"comm":"claude","via":"hook","session":"abc123"}"#,
            "\n",
            r#"{"v":4,"seq":3,"time":0,"op":"agent","pid":40,"start":9,"comm":"codex","via":"run"}"#,
            "\n",
            r#"{"v":1,"seq":4,"time":0,"op":"capture","turn":1,"path":"f","pre":{"kind":"absent"},"pid":7,"comm":"sed"}"#,
            "\n",
            r#"{"v":4,"seq":5,"time":0,"op":"touched","capture":4,"pid":7,"comm":"sed","agent":true,"what":"write"}"#,
            "\n",
        );
        let parsed = crate::store::journal::parse(text.as_bytes()).expect("parse");
        let index = Index::replay(&parsed.lines);
        assert_eq!(index.actors.agent_names(), vec!["claude:abc123", "codex"]);
        let f = RelPath::new(b"f").expect("valid");
        let caps = index.captures.iter().filter(|c| c.path == f);
        let actors = index.actors_over(caps);
        assert_eq!(actors.len(), 1);
        assert_eq!(
            actors[0].name, None,
            "an agent from before agents had names"
        );
        assert_eq!(actors[0].actor().label(), "sed (agent)");
        assert!(crate::rewind::Agents::Every.covers(&actors[0]));
        assert!(!crate::rewind::Agents::Named(vec!["claude".into()]).covers(&actors[0]));
    }

    #[test]
    fn fsck_names_a_touch_of_no_capture() {
        let text = concat!(
            r#"{"v":1,"seq":1,"time":0,"op":"turn","turn":1}"#,
            "\n",
            r#"{"v":4,"seq":2,"time":0,"op":"touched","capture":1,"pid":7,"comm":"sed","agent":true,"what":"write"}"#,
            "\n",
            r#"{"v":4,"seq":3,"time":0,"op":"agent","pid":0,"start":5,"comm":"","via":"run"}"#,
            "\n",
        );
        let parsed = crate::store::journal::parse(text.as_bytes()).expect("parse");
        let found: Vec<u64> = check_records(&parsed.lines)
            .iter()
            .map(|(s, _)| s.get())
            .collect();
        assert_eq!(found, vec![2, 3]);
    }
}
