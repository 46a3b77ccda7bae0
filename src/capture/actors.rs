//! Who is behind a request: its command name, and which marked agent it descends from.
//!
//! A process is an agent when it is a marked process (pid *and* start time, since pids are
//! reused) or descends from one, followed through `/proc/PID/stat` parent links; it is the
//! agent of the nearest mark above it (an agent's `run --as helper -- …` starts another
//! agent inside the first one's tree); a thread is whatever its process is. Each thread or process classified is remembered with a pidfd
//! (`crate::sys::pidfd_open_thread`) that proves its number still means it, so a request from a
//! known caller costs one `poll` and no `/proc` read; ancestors are remembered on the way up,
//! so a new child of a known process reads only its own two `/proc` files. Where the kernel
//! gives no pidfd for a thread (before Linux 6.9), the start time is read again instead.
//!
//! A process that left its parent (a daemon that double-forked, reparented to init or a
//! subreaper) no longer descends from the agent: its changes count as another actor's, with
//! one exception that proves descent: when the marked process leads its own session (`setsid`:
//! an agent CLI started that way, or in its own terminal) and still lives, every process of
//! that session was forked inside it (a session is joined only by birth), so it is that
//! agent's.
//!
//! The table is bounded ([`MAX_KNOWN`]): when full, exited entries go, then everything.

use crate::store::actors::Actor;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// The agent a process descends from, by its nearest mark's name; `None`: no mark above it.
type AgentOf = Option<Arc<str>>;

/// What a change was, as the first `touched` record of an actor on a path says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum What {
    /// Opened for writing, truncated, written through a descriptor.
    #[default]
    Write,
    /// Created (a file, directory, symlink, node, or a new hard link's name).
    Create,
    /// Removed (unlink, rmdir).
    Delete,
    /// Renamed from or over, or moved with a renamed directory.
    Rename,
    /// Mode, owner, times or extended attributes changed.
    Attr,
    /// Given another name by a hard link (the source of `link`).
    Link,
    /// Held open for writing across a turn switch, through a descriptor opened in
    /// `opened_in`: its writes reach the host without a request, so who holds it stands for
    /// who writes.
    Held {
        /// The turn the descriptor was opened in.
        opened_in: crate::ids::Turn,
    },
}

impl What {
    /// The word the journal and the views use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Rename => "rename",
            Self::Attr => "attr",
            Self::Link => "link",
            Self::Held { .. } => "held",
        }
    }
}

/// What `/proc` says of a thread or process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcInfo {
    /// Its process (itself for a process).
    pub tgid: u32,
    /// Its parent process.
    pub ppid: u32,
    /// Start time, clock ticks after boot.
    pub start: u64,
    /// Command name.
    pub comm: String,
    /// Its session (the pid of the session's leader).
    pub sid: u32,
}

/// Where process facts come from: `/proc` and pidfds ([`RealProcs`]), or a table in tests.
pub trait Procs {
    /// What `/proc` says of `pid`, `None` when it is gone.
    fn info(&mut self, pid: u32) -> Option<ProcInfo>;
    /// A handle that proves `pid` is still the same thread while it lives, if there is one.
    fn watch(&mut self, pid: u32) -> Option<OwnedFd>;
}

/// `/proc` and pidfds.
pub struct RealProcs;

impl Procs for RealProcs {
    fn info(&mut self, pid: u32) -> Option<ProcInfo> {
        read_proc(pid)
    }
    fn watch(&mut self, pid: u32) -> Option<OwnedFd> {
        crate::sys::pidfd_open_thread(pid).ok()
    }
}

/// Reads `/proc/PID/stat` (command, parent, start time) and the `Tgid` of `/proc/PID/status`.
pub fn read_proc(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let (comm, ppid, start) = parse_stat(&stat)?;
    let sid = parse_session(&stat).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|n| n.trim().parse().ok())?;
    Some(ProcInfo {
        tgid,
        ppid,
        start,
        comm,
        sid,
    })
}

/// The session (field 6) of a `/proc/PID/stat` line.
pub fn parse_session(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    rest.split_ascii_whitespace().nth(3)?.parse().ok()
}

/// The command name, parent pid and start time of a `/proc/PID/stat` line. The name is
/// between the first `(` and the last `)`, and may hold spaces and parentheses itself.
pub fn parse_stat(stat: &[u8]) -> Option<(String, u32, u64)> {
    let open = stat.iter().position(|b| *b == b'(')?;
    let close = stat.iter().rposition(|b| *b == b')')?;
    let comm = String::from_utf8_lossy(stat.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // Fields after the name, from field 3 (state): ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((comm, ppid, start))
}

/// How many threads and processes are remembered at most (each holds a pidfd).
pub const MAX_KNOWN: usize = 256;
/// How far up the parent links a walk goes at most.
const MAX_DEPTH: usize = 128;

/// A classified thread or process.
#[derive(Debug)]
struct Known {
    start: u64,
    comm: String,
    agent: AgentOf,
    watch: Option<OwnedFd>,
}

/// The marks (each with its agent's name), and every thread and process classified so far.
#[derive(Debug, Default)]
pub struct Classifier {
    marks: HashMap<(u32, u64), Arc<str>>,
    any_marked: bool,
    known: HashMap<u32, Known>,
}

impl Classifier {
    /// A classifier with the marks a store recorded, in journal order: `(pid, start, name)`
    /// (a process marked again under another name is that agent from then on).
    pub fn new(marks: impl IntoIterator<Item = (u32, u64, String)>) -> Self {
        let marks: HashMap<(u32, u64), Arc<str>> = marks
            .into_iter()
            .map(|(pid, start, name)| ((pid, start), Arc::from(name)))
            .collect();
        Self {
            any_marked: !marks.is_empty(),
            marks,
            known: HashMap::new(),
        }
    }

    /// Marks process `pid` started at `start` as the agent `name`: what was classified before
    /// may now descend from it, so it is classified again.
    pub fn mark(&mut self, pid: u32, start: u64, name: &str) {
        self.marks.insert((pid, start), Arc::from(name));
        self.any_marked = true;
        self.known.clear();
    }

    /// How many threads and processes are remembered.
    pub fn known(&self) -> usize {
        self.known.len()
    }

    /// The actor behind thread `pid` (`None` for pid 0: the daemon's own work). Without a
    /// mark in the folder's history, the agent flag is `None`: every change is one actor.
    pub fn actor(&mut self, pid: u32, procs: &mut dyn Procs) -> Option<Actor> {
        if pid == 0 {
            return None;
        }
        let (comm, agent) = self
            .classify(pid, procs)
            .unwrap_or_else(|| ("?".into(), None));
        Some(Actor {
            agent: self.any_marked.then_some(agent.is_some()),
            name: agent.map(|n| n.to_string()),
            comm,
        })
    }

    /// The remembered command name and agent of `pid`, if it is still the same thread.
    fn valid(&mut self, pid: u32, procs: &mut dyn Procs) -> Option<(String, AgentOf)> {
        let k = self.known.get(&pid)?;
        let same = match &k.watch {
            Some(fd) => !crate::sys::pidfd_exited(fd.as_fd()),
            None => procs.info(pid).is_some_and(|i| i.start == k.start),
        };
        if same {
            return Some((k.comm.clone(), k.agent.clone()));
        }
        self.known.remove(&pid);
        None
    }

    /// Remembers `pid` (bounded: exited entries go first, then all).
    fn remember(
        &mut self,
        pid: u32,
        start: u64,
        comm: String,
        agent: AgentOf,
        procs: &mut dyn Procs,
    ) {
        if self.known.len() >= MAX_KNOWN {
            self.known.retain(|_, k| {
                k.watch
                    .as_ref()
                    .is_some_and(|fd| !crate::sys::pidfd_exited(fd.as_fd()))
            });
            if self.known.len() >= MAX_KNOWN {
                self.known.clear();
            }
        }
        let watch = procs.watch(pid);
        self.known.insert(
            pid,
            Known {
                start,
                comm,
                agent,
                watch,
            },
        );
    }

    /// The command name of `pid`'s process and the agent it descends from.
    fn classify(&mut self, pid: u32, procs: &mut dyn Procs) -> Option<(String, AgentOf)> {
        if let Some(k) = self.valid(pid, procs) {
            return Some(k);
        }
        let info = procs.info(pid)?;
        if info.tgid != 0 && info.tgid != pid {
            // A thread: whatever its process is, named as its process is.
            let (comm, agent) = self.classify(info.tgid, procs)?;
            self.remember(pid, info.start, comm.clone(), agent.clone(), procs);
            return Some((comm, agent));
        }
        let comm = info.comm.clone();
        let agent = self.walk(pid, info, procs);
        Some((comm, agent))
    }

    /// The agent whose marked process leads session `sid` and still lives (so every process of
    /// the session was forked inside it), if any.
    fn session_leader(&self, sid: u32, procs: &mut dyn Procs) -> AgentOf {
        if sid <= 1 {
            return None;
        }
        let (&(_, start), name) = self.marks.iter().find(|((p, _), _)| *p == sid)?;
        let leader = procs.info(sid)?;
        (leader.start == start && leader.sid == sid).then(|| name.clone())
    }

    /// Walks up from process `pid` (with its `info`) to a mark, a remembered ancestor, or the
    /// top, and remembers every process on the way with the answer: the nearest mark's agent.
    fn walk(&mut self, pid: u32, info: ProcInfo, procs: &mut dyn Procs) -> AgentOf {
        let mut chain: Vec<(u32, u64, String)> = Vec::new();
        let sid = info.sid;
        let mut cur = (pid, info);
        let agent = loop {
            let (p, i) = cur;
            chain.push((p, i.start, i.comm.clone()));
            if let Some(name) = self.marks.get(&(p, i.start)) {
                break Some(name.clone());
            }
            if i.ppid <= 1 || chain.len() > MAX_DEPTH {
                break self.session_leader(sid, procs);
            }
            if let Some((_, agent)) = self.valid(i.ppid, procs) {
                break agent;
            }
            match procs.info(i.ppid) {
                Some(parent) => cur = (i.ppid, parent),
                // The parent exited between the two reads: the caller was reparented.
                None => break None,
            }
        };
        for (p, start, comm) in chain {
            self.remember(p, start, comm, agent.clone(), procs);
        }
        agent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process table, counting reads; no pidfds, so every use re-reads the start time.
    #[derive(Default)]
    struct Table {
        procs: HashMap<u32, ProcInfo>,
        reads: usize,
    }

    impl Table {
        fn add(&mut self, pid: u32, ppid: u32, start: u64, comm: &str) {
            self.thread(pid, pid, ppid, start, comm);
        }
        fn thread(&mut self, tid: u32, tgid: u32, ppid: u32, start: u64, comm: &str) {
            self.procs.insert(
                tid,
                ProcInfo {
                    tgid,
                    ppid,
                    start,
                    comm: comm.into(),
                    sid: 10,
                },
            );
        }
        /// Makes `pid` a member of session `sid`.
        fn in_session(&mut self, pid: u32, sid: u32) {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.sid = sid;
            }
        }
    }

    impl Procs for Table {
        fn info(&mut self, pid: u32) -> Option<ProcInfo> {
            self.reads += 1;
            self.procs.get(&pid).cloned()
        }
        fn watch(&mut self, _: u32) -> Option<OwnedFd> {
            None
        }
    }

    /// init(1) → sshd(10) → bash(20) → claude(30) → sh(40) → sed(50); bash(20) → vim(60);
    /// claude's thread 31.
    fn table() -> Table {
        let mut t = Table::default();
        t.add(1, 0, 1, "init");
        t.add(10, 1, 5, "sshd");
        t.add(20, 10, 7, "bash");
        t.add(30, 20, 9, "claude");
        t.thread(31, 30, 20, 11, "libuv-worker");
        t.add(40, 30, 12, "sh");
        t.add(50, 40, 13, "sed");
        t.add(60, 20, 14, "vim");
        t
    }

    /// An actor of no agent, or (`agent` true) of the agent `claude`, marked as (30, 9).
    fn actor(agent: Option<bool>, comm: &str) -> Option<Actor> {
        Some(Actor {
            agent,
            name: (agent == Some(true)).then(|| "claude".into()),
            comm: comm.into(),
        })
    }

    fn claude() -> [(u32, u64, String); 1] {
        [(30, 9, "claude".into())]
    }

    #[test]
    fn descendants_of_the_marked_process_are_the_agent_and_others_are_not() {
        let mut t = table();
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(50, &mut t), actor(Some(true), "sed"));
        assert_eq!(c.actor(40, &mut t), actor(Some(true), "sh"));
        assert_eq!(c.actor(30, &mut t), actor(Some(true), "claude"));
        assert_eq!(
            c.actor(31, &mut t),
            actor(Some(true), "claude"),
            "a thread is its process, by its process's name"
        );
        assert_eq!(c.actor(60, &mut t), actor(Some(false), "vim"));
        assert_eq!(c.actor(20, &mut t), actor(Some(false), "bash"));
        assert_eq!(c.actor(0, &mut t), None, "the daemon's own work");
    }

    #[test]
    fn without_a_mark_everything_is_one_actor() {
        let mut t = table();
        let mut c = Classifier::new(Vec::new());
        assert_eq!(c.actor(50, &mut t), actor(None, "sed"));
        assert_eq!(c.actor(60, &mut t), actor(None, "vim"));
        c.mark(30, 9, "claude");
        assert_eq!(c.actor(50, &mut t), actor(Some(true), "sed"));
        assert_eq!(c.actor(60, &mut t), actor(Some(false), "vim"));
    }

    #[test]
    fn a_process_is_the_agent_of_the_nearest_mark_above_it() {
        let mut t = table();
        // claude (30) runs `ckpt-mount run --as helper` as sh (40): sed below it is the
        // helper's; claude's own thread and vim are as before.
        let mut c = Classifier::new([(30, 9, "claude".into()), (40, 12, "helper".into())]);
        let named = |comm: &str, name: &str| {
            Some(Actor {
                agent: Some(true),
                name: Some(name.into()),
                comm: comm.into(),
            })
        };
        assert_eq!(c.actor(50, &mut t), named("sed", "helper"));
        assert_eq!(c.actor(40, &mut t), named("sh", "helper"));
        assert_eq!(c.actor(31, &mut t), named("claude", "claude"));
        assert_eq!(c.actor(60, &mut t), actor(Some(false), "vim"));
        // Marked again under another name (a new session of the agent CLI): from then on.
        c.mark(30, 9, "claude:2");
        assert_eq!(c.actor(31, &mut t), named("claude", "claude:2"));
        assert_eq!(c.actor(50, &mut t), named("sed", "helper"));
    }

    #[test]
    fn an_orphan_in_the_session_a_living_marked_leader_leads_is_its_agent() {
        let mut t = table();
        // claude (30) leads its own session; an orphan of it (reparented to init) is in it,
        // another orphan is in the terminal's session (10).
        t.in_session(30, 30);
        t.add(90, 1, 40, "nohup");
        t.in_session(90, 30);
        t.add(91, 1, 41, "daemon");
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(90, &mut t), actor(Some(true), "nohup"));
        assert_eq!(c.actor(91, &mut t), actor(Some(false), "daemon"));
        // A leader that is gone (its pid now another process's) proves nothing.
        let mut t = table();
        t.add(30, 20, 99, "other");
        t.in_session(30, 30);
        t.add(90, 1, 140, "nohup");
        t.in_session(90, 30);
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(90, &mut t), actor(Some(false), "nohup"));
        // Nor does a marked process that leads no session.
        let mut t = table();
        t.add(90, 1, 40, "nohup");
        t.in_session(90, 30);
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(90, &mut t), actor(Some(false), "nohup"));
    }

    #[test]
    fn a_reused_pid_is_not_the_marked_process() {
        let mut t = table();
        // The mark names pid 30 started at tick 8: an earlier process with that number.
        let mut c = Classifier::new([(30, 8, "claude".into())]);
        assert_eq!(c.actor(50, &mut t), actor(Some(false), "sed"));
        // A remembered process whose pid comes back with another start time is classified
        // again: pid 60 is now a child of the agent.
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(60, &mut t), actor(Some(false), "vim"));
        t.add(60, 30, 99, "node");
        assert_eq!(c.actor(60, &mut t), actor(Some(true), "node"));
    }

    #[test]
    fn a_known_caller_and_its_known_ancestors_are_not_walked_again() {
        let mut t = table();
        let mut c = Classifier::new(claude());
        c.actor(50, &mut t);
        // sed, sh, claude: three reads to reach the mark.
        assert_eq!(t.reads, 3);
        t.reads = 0;
        c.actor(50, &mut t);
        assert_eq!(t.reads, 1, "only its start time is checked (no pidfd here)");
        t.add(70, 40, 15, "awk");
        t.reads = 0;
        assert_eq!(c.actor(70, &mut t), actor(Some(true), "awk"));
        assert_eq!(t.reads, 2, "its own line, then sh's start time: remembered");
    }

    #[test]
    fn a_process_whose_parent_is_gone_is_not_the_agent() {
        let mut t = table();
        t.add(80, 77, 20, "orphan");
        let mut c = Classifier::new(claude());
        assert_eq!(c.actor(80, &mut t), actor(Some(false), "orphan"));
        assert_eq!(
            c.actor(99, &mut t),
            actor(Some(false), "?"),
            "a caller gone before it is read"
        );
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line =
            b"4231 (a (b) c) S 4200 4231 4190 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_stat(line), Some(("a (b) c".to_string(), 4200, 98765)));
        assert_eq!(parse_session(line), Some(4190));
        assert_eq!(parse_stat(b"12 (x) S"), None);
    }

    #[test]
    fn real_processes_descend_from_a_marked_one_and_are_remembered_by_pidfd() {
        let me = std::process::id();
        let mine = read_proc(me).expect("/proc/self");
        assert_eq!(mine.tgid, me);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .expect("spawn sh");
        let sh = child.id();
        // The grandchild: sleep, once the shell has started it.
        let mut sleep = None;
        for _ in 0..200 {
            let children = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children"))
                .unwrap_or_default();
            if let Some(p) = children.split_whitespace().next() {
                sleep = p.parse::<u32>().ok();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sleep = sleep.expect("sleep started");
        let sh_start = read_proc(sh).expect("sh").start;
        let mut c = Classifier::new([(sh, sh_start, "sh".into())]);
        let mut procs = RealProcs;
        let got = c.actor(sleep, &mut procs).expect("an actor");
        assert_eq!(got.agent, Some(true), "{got:?}");
        let me_actor = c.actor(me, &mut procs).expect("an actor");
        assert_eq!(me_actor.agent, Some(false), "the test's own process");
        assert!(c.known() >= 2);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The touches of `path`'s capture in the current turn, as (command, agent, what).
    fn touches(cap: &crate::capture::Capturer, path: &str) -> Vec<(String, Option<bool>, String)> {
        let store = cap.lock();
        let path = crate::capture::tests::rp(path);
        let seq = store.index().capture_seq_now(&path).expect("captured");
        store.index().actors.by_capture[&seq]
            .iter()
            .map(|t| (t.comm.to_string(), t.agent, t.what.to_string()))
            .collect()
    }

    fn journal_lines(dir: &tempfile::TempDir) -> usize {
        std::fs::read_to_string(dir.path().join(".ckpt/journal.jsonl"))
            .expect("journal")
            .lines()
            .count()
    }

    #[test]
    fn each_actor_is_recorded_once_per_path_and_turn() {
        use crate::capture::Who;
        use std::os::fd::AsFd;
        let (dir, root, cap) = crate::capture::tests::project();
        std::fs::write(dir.path().join("f"), b"x").expect("write");
        let f = crate::capture::tests::rp("f");
        let me = std::process::id();
        let my_comm = read_proc(me).expect("/proc/self").comm;
        let mut sleep = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let other = sleep.id();
        cap.ensure(root.as_fd(), c"f", &f, Who::new(me, What::Write))
            .expect("ensure");
        let after_first = journal_lines(&dir);
        for what in [What::Write, What::Attr, What::Rename] {
            cap.ensure(root.as_fd(), c"f", &f, Who::new(me, what))
                .expect("ensure");
        }
        assert_eq!(
            journal_lines(&dir),
            after_first,
            "no record for a known actor"
        );
        for _ in 0..3 {
            cap.ensure(root.as_fd(), c"f", &f, Who::new(other, What::Delete))
                .expect("ensure");
        }
        assert_eq!(
            journal_lines(&dir),
            after_first + 1,
            "one record for a new one"
        );
        assert_eq!(
            touches(&cap, "f"),
            vec![
                (my_comm.clone(), None, "write".to_string()),
                ("sleep".to_string(), None, "delete".to_string()),
            ],
            "no agent marked: the agent flag is unknown"
        );
        // Marked: `sleep` is the agent, and the test is not; in turn 2 each is recorded again.
        let start = read_proc(other).expect("sleep").start;
        cap.mark_agent(crate::store::journal::AgentMark {
            pid: other,
            start,
            comm: "sleep".into(),
            via: "run".into(),
            session: None,
            name: None,
        })
        .expect("mark");
        cap.begin_turn(
            crate::capture::TurnStart::new(crate::ids::Turn::new(2)),
            &|_| {},
        )
        .expect("turn 2");
        for who in [me, other, me, other] {
            cap.ensure(root.as_fd(), c"f", &f, Who::new(who, What::Write))
                .expect("ensure");
        }
        assert_eq!(
            touches(&cap, "f"),
            vec![
                (my_comm, Some(false), "write".to_string()),
                ("sleep".to_string(), Some(true), "write".to_string()),
            ]
        );
        // A remount replays the same: the dedup set is the journal's.
        drop(cap);
        let store = crate::store::Store::reopen_for_test(root.as_fd()).expect("reopen");
        let seq = store.index().capture_seq_now(&f).expect("captured");
        assert_eq!(store.index().actors.by_capture[&seq].len(), 2);
        assert_eq!(store.index().actors.marks.len(), 1);
        let _ = sleep.kill();
        let _ = sleep.wait();
    }
}
