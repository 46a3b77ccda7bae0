//! The index: the state of a store as its journal says it is, rebuilt by replaying every line
//! in order with [`Index::apply`].
//!
//! This is the single place where the journal's meaning is decided: which turns exist, which
//! captures belong to them, what a rewind retired and an undo brought back, what a staged
//! pre-image became, which inode stands for a recorded one. Everything else reads the result.
//! The replay is pure: journal lines in, plain data out, no descriptors and no system calls,
//! so it can be tested on hand-written lines. The journal is untrusted input: a record that
//! does not fit (a `rewind_done` without its `rewind_begin`, a second `staged` for one
//! capture) is ignored, never trusted.

use super::actors::{ActorView, sort_actors};
use super::entries::{Capture, TurnInfo};
use super::journal::{Line, PreImage, Record};
use crate::identity::{FileId, Renewal};
use crate::ids::{Seq, Turn};
use crate::relpath::RelPath;
use std::collections::{BTreeMap, HashMap};

/// The state derived from replaying the journal.
#[derive(Debug, Default)]
pub struct Index {
    /// Turns not retired by a rewind, ascending.
    pub turns: Vec<TurnInfo>,
    /// Captures of those turns, in journal order.
    pub captures: Vec<Capture>,
    /// Paths captured in the current capture epoch, each with the seq of its newest capture
    /// (what a later change of the path in the epoch attributes itself to).
    pub captured_now: HashMap<RelPath, Seq>,
    /// The operation log, with what undo and redo work on (`ops/`).
    pub ops: super::ops::OpLog,
    /// Seq after which the captures are those of the current capture epoch: `captured_now`
    /// holds their paths. A turn begins one; so does every change of the folder by a rewind,
    /// an undo or a redo, so that what is changed after it is captured again for its undo.
    pub epoch: Seq,
    /// A rewind that began and never finished (the process died): `(begin seq, to, from)`.
    pub unfinished_rewind: Option<(Seq, Turn, Turn)>,
    /// Captures saved by the unfinished rewind (or partial rewind, undo or redo).
    pub unfinished_saved: Vec<Capture>,
    /// Highest seq seen.
    pub last_seq: Seq,
    /// Captures whose pre-image is still `Staged` (no `staged` record yet): seq -> host inode.
    pub pending: BTreeMap<Seq, u64>,
    /// Identities recreated by rewinds: recorded identity -> the file that stands for it now.
    pub renewed: HashMap<FileId, FileId>,
    /// Who changed what, and the agent marks (`super::actors`).
    pub actors: super::actors::Actors,
}

impl Index {
    /// The current turn (0 before the first turn record).
    pub fn current_turn(&self) -> Turn {
        self.turns.last().map_or(Turn::new(0), |t| t.turn)
    }

    /// The index a journal's lines describe, replayed in order.
    pub fn replay(lines: &[Line]) -> Self {
        let mut index = Self::default();
        for line in lines {
            index.apply(line);
        }
        index
    }

    /// Applies one journal line.
    pub fn apply(&mut self, line: &Line) {
        self.last_seq = line.seq;
        match &line.rec {
            Record::Turn {
                turn,
                label,
                by,
                conversation,
            } => {
                let from = (!self.turns.is_empty()).then(|| self.current_turn());
                self.begin_turn(TurnInfo {
                    turn: *turn,
                    label: label.clone(),
                    time: line.time,
                    by: by.clone(),
                    conversation: conversation.clone(),
                    began: line.seq,
                });
                self.epoch = line.seq;
                self.op_turn(line.seq, line.time, *turn, from);
            }
            Record::Capture {
                turn,
                path,
                pre,
                undo_of,
                pid,
                comm,
            } => {
                let cap = Capture {
                    seq: line.seq,
                    turn: *turn,
                    path: path.clone(),
                    pre: pre.clone(),
                    pid: *pid,
                    comm: comm.as_deref().map(|c| self.actors.name(c)),
                };
                self.add_capture(cap, undo_of.is_some());
            }
            Record::RewindBegin { to, from } => {
                self.unfinished_rewind = Some((line.seq, *to, *from));
                self.unfinished_saved.clear();
            }
            Record::RewindDone { begin, counts } => {
                self.finish_rewind(*begin, line.time);
                self.op_counts(*begin, *counts);
            }
            Record::Renewed { ids } => self.add_renewals(ids),
            Record::Staged { capture, pre } => self.resolve_staged(*capture, pre),
            Record::Touched(t) => self.actors.touched(t),
            Record::Agent(m) => self.actors.marked(line.seq, line.time, m),
            Record::HandOff(h) => self.actors.handed_off(h),
            Record::UndoDone { rewind } => self.op_legacy_undo(line.seq, line.time, *rewind),
            Record::OpBegin(op) => self.op_begin(line.seq, line.time, op),
            Record::OpDone { begin, counts } => self.op_done(*begin, *counts),
            Record::Relabel { turn, label } => {
                self.op_relabel(line.seq, line.time, *turn, label.clone());
            }
            Record::Pruned(p) => self.op_pruned(line.seq, line.time, p),
        }
    }

    /// `turn`: a turn begins; nothing is captured in it yet.
    fn begin_turn(&mut self, turn: TurnInfo) {
        self.turns.push(turn);
        self.captured_now.clear();
    }

    /// `capture`: a pre-image of the turn, or (`saved_by_rewind`, the record's `undo_of`) what
    /// the unfinished rewind overwrote, kept apart for its undo.
    fn add_capture(&mut self, cap: Capture, saved_by_rewind: bool) {
        if saved_by_rewind {
            self.unfinished_saved.push(cap);
            return;
        }
        if let PreImage::Staged { ino, .. } = &cap.pre {
            self.pending.insert(cap.seq, *ino);
        }
        if cap.turn == self.current_turn() {
            self.captured_now.insert(cap.path.clone(), cap.seq);
        }
        self.captures.push(cap);
    }

    /// `rewind_done`: the rewind begun at seq `begin` finished at `time`. Turns after its
    /// target and the captures of its target and later leave the index (kept for an undo),
    /// and the target turn begins afresh. Ignored unless it matches the unfinished rewind.
    fn finish_rewind(&mut self, begin: Seq, time: u64) {
        let Some((b, to, from)) = self.unfinished_rewind.take() else {
            return;
        };
        if b != begin {
            return;
        }
        let done = self.last_seq;
        let retired = retire_captures(&mut self.captures, to);
        let (retired_turns, kept_turns): (Vec<_>, Vec<_>) = std::mem::take(&mut self.turns)
            .into_iter()
            .partition(|t| t.turn > to);
        self.turns = kept_turns;
        // Turn `to` begins afresh at the moment of the rewind.
        let (old_time, old_began) = match self.turns.last_mut() {
            Some(t) if t.turn == to => (
                std::mem::replace(&mut t.time, time),
                std::mem::replace(&mut t.began, done),
            ),
            _ => {
                self.turns.push(TurnInfo {
                    turn: to,
                    label: None,
                    time,
                    by: None,
                    conversation: None,
                    began: done,
                });
                (time, done)
            }
        };
        self.epoch = b;
        self.captured_now.clear();
        let mut saved = std::mem::take(&mut self.unfinished_saved);
        // Kept until an undo or a prune: no room beyond what they hold.
        saved.shrink_to_fit();
        let effect = super::ops::Effect::Rewind {
            to,
            begin: b,
            old_time,
            new_time: time,
            old_began,
            new_began: done,
            retired_turns,
            retired,
        };
        self.op_rewind_done(b, from, effect, saved);
    }

    /// `renewed`: records naming each `was` identity now mean its `now` file.
    fn add_renewals(&mut self, ids: &[Renewal]) {
        for r in ids {
            if r.was != r.now {
                self.renewed.insert(r.was.clone(), r.now.clone());
            }
        }
    }

    /// `staged`: capture `capture`'s staged pre-image became `pre`.
    fn resolve_staged(&mut self, capture: Seq, pre: &PreImage) {
        // Only a pending capture is resolved, only once, and only to what a staged file
        // can become (the journal is untrusted input).
        if !matches!(pre, PreImage::File { .. } | PreImage::Skipped { .. })
            || self.pending.remove(&capture).is_none()
        {
            return;
        }
        if let Ok(i) = self.captures.binary_search_by_key(&capture, |c| c.seq)
            && matches!(self.captures[i].pre, PreImage::Staged { .. })
        {
            self.captures[i].pre = pre.clone();
        }
    }

    /// Whether turn `n` can be rewound to.
    pub fn has_turn(&self, n: Turn) -> bool {
        self.turns.iter().any(|t| t.turn == n)
    }

    /// For each path touched in turns `>= n`, the oldest pre-image (rule: oldest wins).
    pub fn plan_targets(&self, n: Turn) -> Vec<(RelPath, PreImage)> {
        let mut seen: HashMap<&RelPath, usize> = HashMap::new();
        let mut out: Vec<(RelPath, PreImage)> = Vec::new();
        for c in self.captures.iter().filter(|c| c.turn >= n) {
            if !seen.contains_key(&c.path) {
                seen.insert(&c.path, out.len());
                out.push((c.path.clone(), c.pre.clone()));
            }
        }
        out
    }

    /// The identity that stands now for `id`, following what rewinds recreated (a chain is
    /// followed a bounded number of steps: the journal is untrusted input).
    pub fn current_identity(&self, id: &FileId) -> FileId {
        let mut cur = id;
        for _ in 0..64 {
            match self.renewed.get(cur) {
                Some(next) => cur = next,
                None => break,
            }
        }
        cur.clone()
    }

    /// The inodes (as they stand now, see [`Self::current_identity`]) that some live record
    /// saw with more than one link: older records of their other names look for them, so a
    /// rewind gives such a path back on the recorded inode or on a fresh one, never on an
    /// inode a rewound turn put in its place (`rewind::plan::MatchRule`).
    pub fn once_linked(&self) -> std::collections::HashSet<FileId> {
        self.captures
            .iter()
            .filter(|c| c.pre.nlink() > 1)
            .filter_map(|c| c.pre.file_id())
            .map(|id| self.current_identity(&id))
            .collect()
    }

    /// The inodes (as they stand now) that any record the index keeps saw with more than one
    /// link: a live capture, a capture the undo and redo stacks hold (retired turns, saves,
    /// moved captures) or a save of an operation under way. Only such an inode's records can
    /// look for it from another name, so only its renewal is worth proving and keeping
    /// (`rewind::renewals`); a record of a file that was always alone matches by content or
    /// is written fresh, whichever inode stands at its path.
    pub fn linked_identities(&self) -> std::collections::HashSet<FileId> {
        self.captures
            .iter()
            .chain(self.ops.held_captures())
            .chain(self.unfinished_saved.iter())
            .filter(|c| c.pre.nlink() > 1)
            .filter_map(|c| c.pre.file_id())
            .map(|id| self.current_identity(&id))
            .collect()
    }

    /// `targets` with every recorded inode identity replaced by the one that stands for it now.
    pub fn with_current_identities(
        &self,
        mut targets: Vec<(RelPath, PreImage)>,
    ) -> Vec<(RelPath, PreImage)> {
        if self.renewed.is_empty() {
            return targets;
        }
        for (_, pre) in &mut targets {
            let Some(id) = pre.file_id() else { continue };
            let now = self.current_identity(&id);
            if now != id {
                pre.set_file_id(now);
            }
        }
        targets
    }
}

/// Takes the captures of turn `to` and later out of `captures` (both keep journal order) and
/// returns them. Neither list gets room it does not need: a rewind of a large turn retires
/// every capture, and a copy of the whole list next to it was the largest item of a large
/// rewind's memory peak (docs/BENCHMARKS.md).
fn retire_captures(captures: &mut Vec<Capture>, to: Turn) -> Vec<Capture> {
    let n = captures.iter().filter(|c| c.turn >= to).count();
    let mut retired = if n == captures.len() {
        std::mem::take(captures)
    } else {
        let mut retired = Vec::with_capacity(n);
        retired.extend(captures.extract_if(.., |c| c.turn >= to));
        retired
    };
    captures.shrink_to_fit();
    retired.shrink_to_fit();
    retired
}

/// Replays made from records and from hand-written journal text alone: no store, no
/// directory, no descriptor; what they assert is decided here and nowhere else.
/// Who changed what, as the index answers it: the actors of captures (their touches, kept by
/// [`super::actors::Actors`], with the capture's own process).
impl Index {
    /// The seq of the capture of `path` in the current turn, if it has one.
    pub fn capture_seq_now(&self, path: &RelPath) -> Option<Seq> {
        let cur = self.current_turn();
        let is_now = |c: &Capture| c.turn == cur && c.path == *path;
        // The newest capture of the path, when it is of the current capture epoch.
        if let Some(seq) = self.captured_now.get(path)
            && let Ok(i) = self.captures.binary_search_by_key(seq, |c| c.seq)
            && is_now(&self.captures[i])
        {
            return Some(*seq);
        }
        // Captured in this turn before the epoch (rare: a partial rewind, undo or redo began
        // one since).
        self.captures
            .iter()
            .rev()
            .find(|c| is_now(c))
            .map(|c| c.seq)
    }

    /// The actors of capture `c`: its touches, and the capture's own process unless the touch
    /// written with it stands for it. A capture without one (written before journal version
    /// 4, or by the daemon: what a partial rewind overwrote, or before version 5 a file held
    /// open for writing across a turn switch, whose holders version 5 records) adds an actor
    /// from what it recorded, never taken for the agent.
    pub fn actors_of(&self, c: &Capture) -> Vec<ActorView> {
        let touches = self
            .actors
            .by_capture
            .get(&c.seq)
            .map_or(&[][..], |ts| ts.as_slice());
        let own = c.pid.filter(|p| *p != 0);
        let represented = own.is_some_and(|p| touches.iter().any(|t| t.pid == p));
        let mut out = Vec::with_capacity(touches.len() + 1);
        if !represented {
            out.push(ActorView {
                comm: c.comm.as_deref().unwrap_or("?").to_string(),
                agent: self.actors.any_marked().then_some(false),
                name: None,
                pid: own.unwrap_or(0),
                what: "?".into(),
                opened_in: None,
            });
        }
        out.extend(touches.iter().map(|t| ActorView {
            comm: t.comm.to_string(),
            agent: t.agent,
            name: t.name.as_deref().map(str::to_string),
            pid: t.pid,
            what: t.what.to_string(),
            opened_in: t.opened_in,
        }));
        out
    }

    /// The actors over the captures `caps`, each once (its first touch kept), the agent first.
    pub fn actors_over<'a>(&self, caps: impl Iterator<Item = &'a Capture>) -> Vec<ActorView> {
        let mut list: Vec<ActorView> = Vec::new();
        for c in caps {
            for a in self.actors_of(c) {
                if !list.iter().any(|b| b.actor() == a.actor()) {
                    list.push(a);
                }
            }
        }
        sort_actors(&mut list);
        list
    }

    /// Per path, its actors over the captures `caps` (each actor once, the first touch kept),
    /// sorted: the agent first, then by command name.
    pub fn actors_by_path<'a>(
        &self,
        caps: impl Iterator<Item = &'a Capture>,
    ) -> HashMap<RelPath, Vec<ActorView>> {
        let mut out: HashMap<RelPath, Vec<ActorView>> = HashMap::new();
        for c in caps {
            let list = out.entry(c.path.clone()).or_default();
            for a in self.actors_of(c) {
                if !list.iter().any(|b| b.actor() == a.actor()) {
                    list.push(a);
                }
            }
        }
        for list in out.values_mut() {
            sort_actors(list);
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::journal;
    use crate::store::ops::{Change, Effect, OpWhat};

    pub(in crate::store) fn rp(s: &str) -> RelPath {
        RelPath::new(s.as_bytes()).expect("valid")
    }

    /// A file pre-image whose blob is that of the bytes `content` (a name per version).
    /// The paths the index holds as captured in the current epoch.
    pub(in crate::store) fn captured_paths(index: &Index) -> std::collections::HashSet<RelPath> {
        index.captured_now.keys().cloned().collect()
    }

    pub(crate) fn file(content: &str) -> PreImage {
        file_with_blob(crate::ids::BlobId::of(content.as_bytes()))
    }

    /// A file pre-image whose blob is `blob` (one that may not be stored).
    pub(crate) fn file_with_blob(blob: crate::ids::BlobId) -> PreImage {
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
            xattrs: None,
        }
    }

    pub(in crate::store) fn cap(turn: u64, path: &str, pre: PreImage) -> Record {
        Record::Capture {
            turn: Turn::new(turn),
            path: rp(path),
            pre,
            undo_of: None,
            pid: None,
            comm: None,
        }
    }

    #[test]
    fn retiring_captures_splits_them_by_turn_in_journal_order() {
        let c = |seq: u64, turn: u64, path: &str| Capture {
            seq: Seq::new(seq),
            turn: Turn::new(turn),
            path: rp(path),
            pre: PreImage::Absent,
            pid: None,
            comm: None,
        };
        let paths = |v: &[Capture]| v.iter().map(|c| c.path.to_string()).collect::<Vec<_>>();
        // Turns out of order, as an undo that brings retired captures back leaves them.
        let mut captures = vec![
            c(1, 1, "a"),
            c(2, 2, "b"),
            c(3, 1, "c"),
            c(4, 3, "d"),
            c(5, 2, "e"),
        ];
        let retired = retire_captures(&mut captures, Turn::new(2));
        assert_eq!(paths(&retired), ["b", "d", "e"]);
        assert_eq!(paths(&captures), ["a", "c"]);
        // Every capture retired: all of them, in order, and nothing left.
        let retired = retire_captures(&mut captures, Turn::new(1));
        assert_eq!(paths(&retired), ["a", "c"]);
        assert!(captures.is_empty());
        // None retired.
        let mut captures = vec![c(1, 1, "a"), c(2, 1, "b")];
        assert!(retire_captures(&mut captures, Turn::new(2)).is_empty());
        assert_eq!(paths(&captures), ["a", "b"]);
    }

    /// An index fed records the way a store appends them, starting like a new store (turn 1).
    struct Replay(Index);

    impl Replay {
        fn new() -> Self {
            let mut r = Self(Index::default());
            r.append(Record::Turn {
                turn: Turn::new(1),
                label: None,
                by: None,
                conversation: None,
            });
            r
        }

        /// Applies `rec` as the next line and returns its seq.
        fn append(&mut self, rec: Record) -> Seq {
            let seq = self.0.last_seq.next();
            self.0.apply(&Line {
                v: rec.version(),
                seq,
                time: 0,
                rec,
            });
            seq
        }
    }

    /// Parses hand-written journal text and replays it.
    fn replay_text(text: &str) -> Index {
        let parsed = journal::parse(text.as_bytes()).expect("a valid journal");
        assert_eq!(parsed.valid_len, text.len(), "no torn tail");
        Index::replay(&parsed.lines)
    }

    const BLOB: &str = "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3a94a8fe5ccb19ba61c4c0873";

    /// Two turns: a capture of a file that did not exist, a staged capture (a removal) and
    /// the `staged` line that later says what it became.
    const TWO_TURNS: &str = concat!(
        r#"{"v":1,"seq":1,"time":100,"op":"turn","turn":1}"#,
        "\n",
        r#"{"v":1,"seq":2,"time":101,"op":"capture","turn":1,"path":"a.txt","pre":{"kind":"absent"}}"#,
        "\n",
        r#"{"v":1,"seq":3,"time":200,"op":"turn","turn":2,"label":"edit"}"#,
        "\n",
        r#"{"v":2,"seq":4,"time":201,"op":"capture","turn":2,"path":"a.txt","pre":{"kind":"staged","size":5,"mode":420,"uid":0,"gid":0,"ino":77,"nlink":1},"pid":42,"comm":"rm"}"#,
        "\n",
        r#"{"v":1,"seq":5,"time":202,"op":"capture","turn":2,"path":"b.txt","pre":{"kind":"absent"}}"#,
        "\n",
        r#"{"v":2,"seq":6,"time":203,"op":"staged","capture":4,"pre":{"kind":"file","blob":"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3a94a8fe5ccb19ba61c4c0873","size":5,"mode":420,"uid":0,"gid":0,"ino":77,"nlink":1}}"#,
        "\n",
    );

    fn stored_a() -> PreImage {
        PreImage::File {
            blob: BLOB.parse().expect("a blob id"),
            size: 5,
            mode: 0o644,
            uid: 0,
            gid: 0,
            ino: 77,
            nlink: 1,
            fh: None,
            btime: None,
            xattrs: None,
        }
    }

    #[test]
    fn hand_written_lines_replay_into_turns_and_captures() {
        let index = replay_text(TWO_TURNS);
        assert_eq!(
            index.turns,
            vec![
                TurnInfo {
                    turn: Turn::new(1),
                    label: None,
                    time: 100,
                    by: None,
                    conversation: None,
                    began: Seq::new(1),
                },
                TurnInfo {
                    turn: Turn::new(2),
                    label: Some("edit".into()),
                    time: 200,
                    by: None,
                    conversation: None,
                    began: Seq::new(3),
                },
            ]
        );
        assert_eq!(
            index.captures,
            vec![
                Capture {
                    seq: Seq::new(2),
                    turn: Turn::new(1),
                    path: rp("a.txt"),
                    pre: PreImage::Absent,
                    pid: None,
                    comm: None,
                },
                Capture {
                    seq: Seq::new(4),
                    turn: Turn::new(2),
                    path: rp("a.txt"),
                    pre: stored_a(),
                    pid: Some(42),
                    comm: Some("rm".into()),
                },
                Capture {
                    seq: Seq::new(5),
                    turn: Turn::new(2),
                    path: rp("b.txt"),
                    pre: PreImage::Absent,
                    pid: None,
                    comm: None,
                },
            ]
        );
        assert_eq!(index.current_turn(), Turn::new(2));
        assert_eq!(index.last_seq, Seq::new(6));
        assert!(index.pending.is_empty(), "the staged line resolved it");
        assert_eq!(
            captured_paths(&index),
            std::collections::HashSet::from([rp("a.txt"), rp("b.txt")])
        );
        assert_eq!(
            index.plan_targets(Turn::new(1)),
            vec![
                (rp("a.txt"), PreImage::Absent),
                (rp("b.txt"), PreImage::Absent)
            ]
        );
        assert_eq!(
            index.plan_targets(Turn::new(2)),
            vec![(rp("a.txt"), stored_a()), (rp("b.txt"), PreImage::Absent)]
        );
    }

    #[test]
    fn hand_written_rewind_and_undo_retire_and_bring_back_turn_two() {
        let rewound = format!(
            "{TWO_TURNS}{}\n{}\n{}\n",
            r#"{"v":1,"seq":7,"time":300,"op":"rewind_begin","to":1,"from":2}"#,
            r#"{"v":1,"seq":8,"time":300,"op":"capture","turn":1,"path":"b.txt","pre":{"kind":"absent"},"undo_of":7}"#,
            r#"{"v":1,"seq":9,"time":301,"op":"rewind_done","begin":7}"#,
        );
        let index = replay_text(&rewound);
        assert_eq!(
            index.turns,
            vec![TurnInfo {
                turn: Turn::new(1),
                label: None,
                time: 301,
                by: None,
                conversation: None,
                began: Seq::new(9),
            }]
        );
        assert!(index.captures.is_empty());
        assert!(index.captured_now.is_empty());
        assert_eq!(index.unfinished_rewind, None);
        let (top, targets) = index.revert_plan(false).expect("a rewind to undo");
        let Change::Folder {
            begin,
            effect: Effect::Rewind { to, retired, .. },
            ..
        } = &top.change
        else {
            panic!("a whole rewind: {top:?}");
        };
        assert_eq!((*begin, *to), (Seq::new(7), Turn::new(1)));
        assert_eq!(
            index.ops.get(top.op).map(|o| o.what.clone()),
            Some(OpWhat::Rewind {
                to: Turn::new(1),
                from: Turn::new(2)
            })
        );
        assert_eq!(
            retired.iter().map(|c| c.seq.get()).collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        assert_eq!(targets, vec![(rp("b.txt"), PreImage::Absent)]);

        let undone = format!(
            "{rewound}{}\n",
            r#"{"v":1,"seq":10,"time":400,"op":"undo_done","rewind":7}"#
        );
        let index = replay_text(&undone);
        assert_eq!(
            index.turns.iter().map(|t| t.turn.get()).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(
            index
                .captures
                .iter()
                .map(|c| c.seq.get())
                .collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        assert!(
            index
                .ops
                .undo
                .iter()
                .all(|a| !matches!(a.change, Change::Folder { .. }))
        );
        assert_eq!(
            captured_paths(&index),
            std::collections::HashSet::from([rp("a.txt"), rp("b.txt")])
        );
    }

    #[test]
    fn lines_that_do_not_fit_are_ignored() {
        let text = format!(
            "{TWO_TURNS}{}\n{}\n{}\n",
            // A second `staged` for the same capture: already resolved.
            r#"{"v":2,"seq":7,"time":204,"op":"staged","capture":4,"pre":{"kind":"skipped","was":"file","size":5,"reason":"late"}}"#,
            // A `staged` for a capture that was never staged.
            r#"{"v":2,"seq":8,"time":205,"op":"staged","capture":5,"pre":{"kind":"skipped","was":"file","size":0,"reason":"no"}}"#,
            // A `rewind_done` without its `rewind_begin`.
            r#"{"v":1,"seq":9,"time":206,"op":"rewind_done","begin":3}"#,
        );
        let index = replay_text(&text);
        assert_eq!(index.captures[1].pre, stored_a());
        assert_eq!(index.captures[2].pre, PreImage::Absent);
        assert_eq!(index.turns.len(), 2);
        assert!(
            index
                .ops
                .ops
                .iter()
                .all(|o| !matches!(o.what, OpWhat::Rewind { .. }))
        );
        assert_eq!(index.last_seq, Seq::new(9));
    }

    #[test]
    fn rewinding_a_turn_also_undoes_later_turns() {
        let mut s = Replay::new();
        s.append(cap(1, "f", file("one")));
        s.append(Record::Turn {
            turn: Turn::new(2),
            label: None,
            by: None,
            conversation: None,
        });
        s.append(cap(2, "f", file("two")));
        s.append(Record::Turn {
            turn: Turn::new(3),
            label: None,
            by: None,
            conversation: None,
        });
        s.append(cap(3, "f", file("three")));
        s.append(cap(3, "g", PreImage::Absent));
        assert_eq!(
            s.0.plan_targets(Turn::new(1)),
            vec![(rp("f"), file("one")), (rp("g"), PreImage::Absent)]
        );
        assert_eq!(
            s.0.plan_targets(Turn::new(3)),
            vec![(rp("f"), file("three")), (rp("g"), PreImage::Absent)]
        );
    }

    #[test]
    fn undo_brings_back_retired_turns() {
        let mut s = Replay::new();
        s.append(Record::Turn {
            turn: Turn::new(2),
            label: None,
            by: None,
            conversation: None,
        });
        s.append(cap(2, "f", file("two")));
        s.append(Record::Turn {
            turn: Turn::new(3),
            label: None,
            by: None,
            conversation: None,
        });
        let b = s.append(Record::RewindBegin {
            to: Turn::new(2),
            from: Turn::new(3),
        });
        s.append(Record::Capture {
            turn: Turn::new(2),
            path: rp("f"),
            pre: file("now"),
            undo_of: Some(b),
            pid: None,
            comm: None,
        });
        s.append(Record::RewindDone {
            begin: b,
            counts: None,
        });
        s.append(cap(2, "h", PreImage::Absent));
        let (_, undo) = s.0.revert_plan(false).expect("undo");
        assert_eq!(
            undo,
            vec![(rp("f"), file("now")), (rp("h"), PreImage::Absent)]
        );
        s.append(Record::UndoDone { rewind: b });
        assert_eq!(s.0.current_turn(), Turn::new(3));
        assert_eq!(s.0.plan_targets(Turn::new(2)), vec![(rp("f"), file("two"))]);
        // A legacy undo cannot be redone; the turn switches before it can still be undone.
        assert!(s.0.ops.redo.is_empty());
    }
}
