//! `rewind N --agent [NAME]` against the model: real processes make the changes, two of them
//! marked as named agents (`a1`, `a2`; `a1` leads its own session and left an orphan in it,
//! which changes files too, as agent 1) and one a user's, so the core attributes every
//! change from `/proc` as it does under a mount; the model keeps, beside the folder, who
//! changed which path (and, for an `EditLine`, which line) since each turn began
//! (`Case::history`). A rewind takes back every agent's changes or one agent's, the other
//! agent then counting as another process, under `keep`, `rewind` or `merge`; after each the
//! model checks that
//!
//! - the split is right: a path only the agent changed is restored (unless something kept
//!   lies below it), a path another process also changed is a conflict, a path the agent never
//!   touched is the others'; no path another process changed is ever restored under `keep`;
//! - the folder is exact: each restored path as at the start of the turn, every other path as
//!   it was, on its inode;
//! - the preview said exactly what the run did, and the run (an operation) is undone and
//!   redone exactly by `undo` and `redo`, interleaved with turns, rewinds and partial rewinds;
//! - under `merge`, a text file both changed line by line is merged or kept as the lines say:
//!   a merged file has every line only the chosen agent edited as at the start of the turn and
//!   every line only others edited as it was; a file kept as overlapping has an edit of the
//!   chosen agent's on or next to a line another changed after it (diff3 counts adjacent
//!   lines as overlapping, as git does), and a text file is never called binary.
//!
//! Hard links and held handles are left out here (the main property covers them): which
//! process "changed" a name it never used, through another name of its inode, is a question
//! the journal does not ask. The core's own changes (a partial rewind's) are recorded in the
//! model as [`Actor::Daemon`] on every path the partial rewind may have overwritten, more than
//! the core records, so they only ever weaken what is asserted of a path.

use super::*;
use ckpt_mount::capture::read_proc;
use ckpt_mount::rewind::{Conflicts, PathActors};
use ckpt_mount::store::journal::AgentMark;
use std::process::{Child, Stdio};

/// The agents' processes, an orphan agent 1 left behind, and another process, alive for a
/// case (all `sleep`: the core reads only their `/proc` entries). Agent 1 leads its own session
/// (as an agent CLI in its own terminal); the orphan, reparented away from it, is in that
/// session.
pub(super) struct Procs {
    agents: [Child; 2],
    orphan: u32,
    other: Child,
}

impl Drop for Procs {
    fn drop(&mut self) {
        let [a1, a2] = &mut self.agents;
        for c in [a1, a2, &mut self.other] {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("kill")
            .args(["-9", &self.orphan.to_string()])
            .status();
    }
}

/// A session leader (`sleep`, exec'd by the shell that made the session) that left an orphan
/// `sleep` in its session: the leader, and the orphan's pid.
fn leader_with_orphan() -> (Child, u32) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "(sleep 100000 &); exec sleep 100000"])
        .stdin(Stdio::null());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent's; it runs in
    // the child between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut leader = cmd.spawn().expect("spawn the session leader");
    let sid = leader.id();
    for _ in 0..400 {
        let orphan = std::fs::read_dir("/proc").ok().and_then(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| *p != sid)
                .find(|p| {
                    // The `sleep` itself, not the subshell that forks it and exits.
                    ckpt_mount::capture::read_proc(*p)
                        .is_some_and(|i| i.sid == sid && i.comm == "sleep" && i.ppid != sid)
                })
        });
        if let Some(o) = orphan {
            return (leader, o);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = leader.kill();
    let _ = leader.wait();
    panic!("the session leader's orphan never showed");
}

/// The names of the two agents' marks.
const NAMES: [&str; 2] = ["a1", "a2"];

/// What an actor is to one agent rewind: one of the agents it takes back, another process
/// (the other agent included), or the core itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    Chosen,
    Other,
    Daemon,
}

/// `who` of `RewindAgent`: every agent (`0`) or agent `who` alone.
fn role(actor: Actor, who: u8) -> Role {
    match actor {
        Actor::Agent(n) if who == 0 || n == who => Role::Chosen,
        Actor::Agent(_) | Actor::User => Role::Other,
        Actor::Daemon => Role::Daemon,
    }
}

/// A path's roles since a turn began.
type Roles = BTreeMap<String, BTreeSet<Role>>;

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("100000")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sleep")
}

fn caller(c: &Child) -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        pid: c.id(),
    }
}

/// The core's split of an agent rewind, as sets of paths.
struct SplitSets {
    agent_only: BTreeSet<String>,
    /// Conflicts, the merged ones (`--conflicts merge`) included.
    conflicts: BTreeSet<String>,
    /// Conflicts merged line by line.
    merged: BTreeSet<String>,
    others: BTreeSet<String>,
    /// Conflicts held back for what lies below them.
    blocked: BTreeSet<String>,
    /// Conflicts held back for the directory above them (path, directory).
    homeless: BTreeMap<String, String>,
}

/// A path as the model names it (the model's names are UTF-8).
fn text(p: &ckpt_mount::relpath::RelPath) -> String {
    p.lossy().into_owned()
}

impl SplitSets {
    fn of(split: &ckpt_mount::rewind::AgentSplit) -> Self {
        let names =
            |l: &[PathActors]| -> BTreeSet<String> { l.iter().map(|p| text(&p.path)).collect() };
        let merged: BTreeSet<String> = split.merged.iter().map(|m| text(&m.path)).collect();
        let mut conflicts = names(&split.conflicts);
        conflicts.extend(merged.iter().cloned());
        Self {
            agent_only: names(&split.agent_only),
            conflicts,
            merged,
            others: names(&split.others),
            blocked: split
                .conflicts
                .iter()
                .filter(|c| c.below.is_some())
                .map(|c| text(&c.path))
                .collect(),
            homeless: split
                .conflicts
                .iter()
                .filter_map(|c| Some((text(&c.path), text(c.above.as_ref()?))))
                .collect(),
        }
    }

    /// Each path listed in the wrong place, or not listed, for who changed it (`by`) since
    /// turn `k` began.
    fn disagreements(&self, k: u64, by: &Roles) -> Vec<String> {
        let listed: BTreeSet<&String> = self
            .agent_only
            .iter()
            .chain(&self.conflicts)
            .chain(&self.others)
            .collect();
        let mut lines: Vec<String> = listed
            .iter()
            .filter(|p| !by.contains_key(**p))
            .map(|p| format!("  {p}: listed, but nothing changed it since turn {k} began"))
            .collect();
        for (p, a) in by {
            let has = |x: Role| a.contains(&x);
            let mut wrong = |why: &str| lines.push(format!("  {p}: changed by {a:?}, {why}"));
            if (has(Role::Chosen) || has(Role::Other)) && !listed.contains(p) {
                wrong("not listed");
            }
            if self.agent_only.contains(p) && (has(Role::Other) || !has(Role::Chosen)) {
                wrong("taken for the agent's alone");
            }
            if self.others.contains(p) && has(Role::Chosen) {
                wrong("taken for the others' alone");
            }
            if self.conflicts.contains(p) && !has(Role::Chosen) {
                wrong("taken for a conflict");
            }
            // Only the agent (and nothing the core did): restored unless held back.
            if *a == BTreeSet::from([Role::Chosen])
                && !self.agent_only.contains(p)
                && !self.blocked.contains(p)
                && !self.homeless.contains_key(p)
            {
                wrong("the agent's alone, not restored");
            }
            if has(Role::Chosen) && has(Role::Other) && !self.conflicts.contains(p) {
                wrong("not a conflict");
            }
        }
        lines
    }
}

impl Case {
    /// Starts the three processes and marks the first two as the agents `a1` and `a2`; the
    /// third makes the changes until an `As(1)` or `As(2)`.
    pub(super) fn start_agent_case(&mut self) {
        let (leader, orphan) = leader_with_orphan();
        let procs = Procs {
            agents: [leader, sleeper()],
            orphan,
            other: sleeper(),
        };
        for (agent, name) in procs.agents.iter().zip(NAMES) {
            let pid = agent.id();
            let start = read_proc(pid).expect("the agent's /proc entry").start;
            let mark = AgentMark {
                pid,
                start,
                comm: "agent".into(),
                via: "run".into(),
                session: None,
                name: Some(name.into()),
            };
            self.fs()
                .capturer()
                .mark_agent(mark)
                .expect("mark the agent");
        }
        self.who = caller(&procs.other);
        self.actor = Actor::User;
        self.procs = Some(procs);
    }

    /// The changes that follow are agent `n`'s (1 or 2), the orphan agent 1 left's (3: agent
    /// 1's too), or the other process's (0).
    pub(super) fn act_as(&mut self, n: u8) {
        let Some(procs) = &self.procs else { return };
        (self.who, self.actor) = match n % 4 {
            0 => (caller(&procs.other), Actor::User),
            3 => (
                Caller {
                    uid: 0,
                    gid: 0,
                    pid: procs.orphan,
                },
                Actor::Agent(1),
            ),
            n => (caller(&procs.agents[usize::from(n - 1)]), Actor::Agent(n)),
        };
    }

    /// The paths a change names, as the core attributes them: both ends of a rename, with
    /// everything below a renamed directory at both places; the temporary file of a replace.
    pub(super) fn changed_paths(&self, op: Op) -> Vec<String> {
        let m = &self.model;
        let mirror = |from: &str, to: &str| -> Vec<String> {
            m.subtree(from)
                .into_iter()
                .map(|k| format!("{to}{}", &k[from.len()..]))
                .collect()
        };
        match op {
            Create(p, _)
            | CreateHeld(p, _)
            | Write(p, _)
            | Append(p, _)
            | Truncate(p, _)
            | Mkdir(p, _)
            | Symlink(_, p)
            | Unlink(p)
            | Rmdir(p)
            | Chmod(p, _)
            | SetXattr(p, ..)
            | RemoveXattr(p, _)
            | EditLine(p, ..)
            | Open(p) => vec![p.to_string()],
            Replace(p, _) => vec![join(parent(p), REPLACE_TMP), p.to_string()],
            Link(a, b) => vec![a.to_string(), b.to_string()],
            Rename(a, b) => {
                let mut v = m.subtree(a);
                v.extend(mirror(a, b));
                v.extend(m.subtree(b));
                v
            }
            Exchange(a, b) => {
                let mut v = m.subtree(a);
                v.extend(mirror(a, b));
                v.extend(m.subtree(b));
                v.extend(mirror(b, a));
                v
            }
            _ => Vec::new(),
        }
    }

    /// The core changed `paths` itself (a partial rewind).
    pub(super) fn daemon_changed(&mut self, paths: impl IntoIterator<Item = String>) {
        let step = self.step;
        self.history.extend(paths.into_iter().map(|path| Change {
            step,
            path,
            actor: Actor::Daemon,
            line: None,
        }));
    }

    /// Every path below one of `tops` (or one of them) there was before a rewind to `k`, is
    /// after it, was when `k` began, or that changed since then (absent ones too): what the
    /// rewind may have captured.
    pub(super) fn paths_below(
        &self,
        k: u64,
        tops: &[&str],
        before: &Observed,
        after: &Observed,
    ) -> BTreeSet<String> {
        let since = self.turns.start(k).start;
        before
            .tree
            .entries
            .keys()
            .chain(after.tree.entries.keys())
            .chain(self.turns.start(k).tree.entries.keys())
            .chain(
                self.history
                    .iter()
                    .filter(|c| c.step > since)
                    .map(|c| &c.path),
            )
            .filter(|p| tops.iter().any(|t| under(p, t)))
            .cloned()
            .collect()
    }

    /// Each path's role since turn `k` began, for a rewind of `who`'s changes.
    fn roles_since(&self, k: u64, who: u8) -> Roles {
        let since = self.turns.start(k).start;
        let mut by = Roles::new();
        for c in self.history.iter().filter(|c| c.step > since) {
            by.entry(c.path.clone())
                .or_default()
                .insert(role(c.actor, who));
        }
        by
    }

    pub(super) fn rewind_agent(
        &mut self,
        k: u64,
        (who, conflicts): (u8, u8),
        seen: Option<Observed>,
    ) -> Result<(), Failure> {
        let before = seen.unwrap_or_else(|| observe(&self.core.root));
        let who = who % 3;
        let policy = match conflicts % 3 {
            0 => Conflicts::Keep,
            1 => Conflicts::Rewind,
            _ => Conflicts::Merge,
        };
        let agents = match who {
            0 => rewind::Agents::Every,
            n => rewind::Agents::Named(vec![NAMES[usize::from(n - 1)].to_string()]),
        };
        let what = format!("rewind_agent({k}, {agents:?}, {policy:?})");
        let r = self.previewed_rewind(
            &what,
            k,
            rewind::Scope::Agent(rewind::AgentScope {
                agents,
                conflicts: policy,
            }),
        )?;
        let Some(split) = &r.agent else {
            return fail("agent-split", format!("{what}: the report has no split"));
        };
        let chosen: BTreeSet<String> = split.chosen().iter().map(ToString::to_string).collect();
        self.check_split(k, &what, split, (who, policy == Conflicts::Rewind))?;
        let after = observe(&self.core.root);
        let merged = SplitSets::of(split).merged;
        self.check_agent_folder(k, &what, &before, &after, (&chosen, &merged))?;
        if policy == Conflicts::Merge {
            self.check_merges(k, who, &what, split, (&before, &after))?;
        }
        self.push_folder_op(&before, &after);
        let tops: Vec<&str> = chosen.iter().map(String::as_str).collect();
        let captured = self.paths_below(k, &tops, &before, &after);
        self.daemon_changed(captured);
        let hint = self.turns.start(k).ids.clone();
        self.adopt(&after, &hint)?;
        self.seen = Some(after);
        Ok(())
    }

    /// The core's split against the model's history.
    fn check_split(
        &self,
        k: u64,
        what: &str,
        split: &ckpt_mount::rewind::AgentSplit,
        (who, rewind_conflicts): (u8, bool),
    ) -> Result<(), Failure> {
        let by = self.roles_since(k, who);
        let sets = SplitSets::of(split);
        let mut lines = sets.disagreements(k, &by);
        lines.extend(self.held_back_disagreements(k, &by, &sets, rewind_conflicts));
        if lines.is_empty() {
            return Ok(());
        }
        fail(
            "agent-split",
            format!(
                "{what}: who changed what, against the model:\n{}",
                lines.join("\n")
            ),
        )
    }

    /// The paths held back for what lies below them or above them, against the model: below,
    /// not a directory at the start of the turn with a kept path under it; above, something
    /// at the start of the turn, under a directory changed since that is not one now.
    fn held_back_disagreements(
        &self,
        k: u64,
        by: &Roles,
        sets: &SplitSets,
        rewind_conflicts: bool,
    ) -> Vec<String> {
        let none = BTreeSet::new();
        let kept = |q: &String| {
            let a = by.get(q).unwrap_or(&none);
            let agent_alone = a.iter().all(|x| *x == Role::Chosen) && !a.is_empty();
            !(agent_alone || (a.contains(&Role::Chosen) && rewind_conflicts))
        };
        let then = &self.turns.start(k).tree.entries;
        let mut lines = Vec::new();
        for p in &sets.blocked {
            let then_dir = matches!(then.get(p).map(|s| &s.kind), Some(Kind::Dir { .. }));
            let below = by.keys().any(|q| q != p && under(q, p) && kept(q));
            if then_dir || !below {
                let why = if then_dir {
                    "it was a directory"
                } else {
                    "nothing kept lies below"
                };
                lines.push(format!(
                    "  {p}: held back for what lies below it, but {why}"
                ));
            }
        }
        for (p, d) in &sets.homeless {
            let now_dir = matches!(self.model.tree.get(d.as_str()), Some(MEntry::Dir { .. }));
            if !under(p, d) || p == d || !by.contains_key(d) || now_dir || !then.contains_key(p) {
                lines.push(format!(
                    "  {p}: held back for {d} above it, which is {} and was {}changed since",
                    if now_dir {
                        "a directory"
                    } else {
                        "no directory"
                    },
                    if by.contains_key(d) { "" } else { "not " }
                ));
            }
        }
        lines
    }

    /// The restored paths as at the start of turn `k`, every other path as it was and on its
    /// inode.
    fn check_agent_folder(
        &self,
        k: u64,
        what: &str,
        before: &Observed,
        after: &Observed,
        (chosen, merged): (&BTreeSet<String>, &BTreeSet<String>),
    ) -> Result<(), Failure> {
        let then = &self.turns.start(k).tree;
        let mut want = before.tree.clone();
        for p in chosen.iter().filter(|p| !merged.contains(*p)) {
            match then.entries.get(p) {
                Some(s) => want.entries.insert(p.clone(), s.clone()),
                None => want.entries.remove(p),
            };
        }
        // A merged file's bytes are the merge's (`check_merges`); its mode and xattrs as they
        // were.
        for p in merged {
            if let (
                Some(Snap {
                    kind: Kind::File { data: want, .. },
                    ..
                }),
                Some(Snap {
                    kind: Kind::File { data: got, .. },
                    ..
                }),
            ) = (want.entries.get_mut(p), after.tree.entries.get(p))
            {
                want.clone_from(got);
            }
        }
        if let Some(d) = tree_diff(&want, &after.tree, self.xattrs) {
            return fail(
                "agent-content",
                format!(
                    "{what}: not the agent's paths ({chosen:?}) as at the start of turn {k} and the rest as it was:\n{d}"
                ),
            );
        }
        let moved: Vec<String> = before
            .inos
            .iter()
            .filter(|(p, _)| !chosen.contains(*p))
            .filter(|(p, ino)| after.inos.get(*p) != Some(ino))
            .map(|(p, ino)| format!("  {p}: {ino:?} before, {:?} now", after.inos.get(p)))
            .collect();
        if moved.is_empty() {
            return Ok(());
        }
        fail(
            "agent-inode",
            format!(
                "{what}: paths it keeps are on other inodes:\n{}",
                moved.join("\n")
            ),
        )
    }
}

impl Case {
    /// Under `--conflicts merge`, each text file the chosen agents and others changed line by
    /// line since turn `k` began (only `EditLine` changes since, on a file of five lines then)
    /// against its lines: merged, every line only the chosen edited is as at the start of `k`
    /// and every line only others edited as it was; kept as overlapping, some line the chosen
    /// edited is on or next to a line another edited after; never called binary.
    fn check_merges(
        &self,
        k: u64,
        who: u8,
        what: &str,
        split: &ckpt_mount::rewind::AgentSplit,
        (before, after): (&Observed, &Observed),
    ) -> Result<(), Failure> {
        let since = self.turns.start(k).start;
        let then = &self.turns.start(k).tree.entries;
        let mut lines = Vec::new();
        let file_lines = |t: &BTreeMap<String, Snap>, p: &str| -> Option<Vec<Vec<u8>>> {
            match &t.get(p)?.kind {
                Kind::File { data, .. } if data.ends_with(b"\n") => Some(
                    data[..data.len() - 1]
                        .split(|b| *b == b'\n')
                        .map(<[u8]>::to_vec)
                        .collect(),
                ),
                _ => None,
            }
        };
        let merged: BTreeSet<String> = split.merged.iter().map(|m| text(&m.path)).collect();
        let kept: BTreeMap<String, String> = split
            .conflicts
            .iter()
            .filter_map(|c| Some((text(&c.path), c.merge.clone()?)))
            .collect();
        for p in merged.iter().chain(kept.keys()) {
            let edits: Vec<&Change> = self
                .history
                .iter()
                .filter(|c| c.step > since && c.path == *p)
                .collect();
            let at_start = file_lines(then, p);
            let lined = edits.iter().all(|c| c.line.is_some())
                && at_start
                    .as_ref()
                    .is_some_and(|l| l.len() == usize::from(LINES));
            if !lined {
                count("merge (not line by line)", true);
                continue;
            }
            let chosen_at = |c: &&Change| role(c.actor, who) == Role::Chosen;
            let overlap = edits.iter().filter(|c| chosen_at(c)).any(|c| {
                let i = c.line.unwrap_or(0);
                edits.iter().any(|o| {
                    !chosen_at(o) && o.step > c.step && o.line.unwrap_or(0).abs_diff(i) <= 1
                })
            });
            if let Some(why) = kept.get(p) {
                count("merge kept (line by line)", true);
                if !why.starts_with("overlapping edits") {
                    lines.push(format!("  {p}: a text file, kept: {why}"));
                } else if !overlap {
                    lines.push(format!(
                        "  {p}: kept as overlapping, but no edits overlap:\n{why}"
                    ));
                }
                continue;
            }
            let (Some(start), Some(was), Some(now)) = (
                at_start,
                file_lines(&before.tree.entries, p),
                file_lines(&after.tree.entries, p),
            ) else {
                lines.push(format!(
                    "  {p}: merged, but not a text file of {LINES} lines"
                ));
                continue;
            };
            count("merged (line by line)", true);
            for i in 0..usize::from(LINES) {
                let by: BTreeSet<Role> = edits
                    .iter()
                    .filter(|c| c.line.map(usize::from) == Some(i))
                    .map(|c| role(c.actor, who))
                    .collect();
                let want = match by.iter().collect::<Vec<_>>()[..] {
                    [] | [Role::Other] => was.get(i),
                    [Role::Chosen] => start.get(i),
                    _ => continue,
                };
                if want != now.get(i) {
                    lines.push(format!(
                        "  {p} line {i} (edited by {by:?}): {:?}, want {:?}",
                        now.get(i).map(|l| String::from_utf8_lossy(l).into_owned()),
                        want.map(|l| String::from_utf8_lossy(l).into_owned())
                    ));
                }
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        fail(
            "agent-merge",
            format!(
                "{what}: the merges against the lines:\n{}",
                lines.join("\n")
            ),
        )
    }
}

/// Replays a resolved agent case (a regression).
fn agent_ops(ops: &[Op]) {
    let setup = Setup {
        links: false,
        agent: true,
    };
    replay_ops(Case::with(&Fixture::tmp(), setup), ops).unwrap_or_else(|e| panic!("{e}"));
}

/// Agent rewinds, split and folder, match the model (`CKPT_CORE_CASES`, `CKPT_CORE_SEED`).
#[test]
fn agent_rewinds_match_the_model() {
    let setup = Setup {
        links: false,
        agent: true,
    };
    let strategy = (
        prop::collection::vec(core_tier::agent_step(), 5..60),
        any::<u8>(),
    );
    run_property(&Fixture::tmp(), setup, strategy);
}

/// Merges against the lines: both agents and the user edit lines of three text files, and
/// agent rewinds take one agent's (or every agent's) back, mostly with `--conflicts merge`
/// (`CKPT_CORE_CASES`, `CKPT_CORE_SEED`).
#[test]
fn agent_merges_match_the_lines() {
    let setup = Setup {
        links: false,
        agent: true,
    };
    let strategy = (
        prop::collection::vec(core_tier::merge_step(), 5..50).prop_map(|steps| {
            let mut all = core_tier::merge_prefix();
            all.extend(steps);
            all
        }),
        any::<u8>(),
    );
    run_property(&Fixture::tmp(), setup, strategy);
}

/// Found by the merge property (the default seed), shrunk, when the model padded a short file
/// with empty lines: agent 1 edits line 1, the user line 3, of a file whose lines 1 to 3 were
/// all empty; diff3 (git's too) cannot tell which empty line changed and calls it an overlap,
/// while the model's oracle counted lines by number. The model now pads with distinct lines;
/// the case stays as a merge of two edits two lines apart, which must merge cleanly.
#[test]
fn regression_a_merge_of_edits_two_lines_apart() {
    agent_ops(&[
        Create("a", 0),
        Create("b", 1),
        Create("c", 2),
        EditLine("c", 0, 0),
        EditLine("a", 0, 1),
        EditLine("c", 0, 2),
        NextTurn(1), // turn 2
        EditLine("b", 4, 0),
        NextTurn(1), // turn 3
        As(1),
        EditLine("b", 1, 0),
        As(0),
        EditLine("b", 3, 0),
        NextTurn(1), // turn 4
        RewindAgent(3, 0, 2),
        Undo,
        Redo,
        RewindAgent(3, 2, 2),
    ]);
}

/// The plain story: the agent rewrites, creates and deletes, another process edits, both touch
/// one file; the agent's paths come back, the other's and the shared one stay.
#[test]
fn an_agent_rewind_keeps_what_another_process_changed() {
    agent_ops(&[
        Create("a", 1),
        Create("b", 2),
        Mkdir("c", 0o755),
        NextTurn(1), // turn 2
        As(1),
        Write("a", 3),
        Create("c/a", 4),
        Unlink("b"),
        As(0),
        Create("c/b", 5),
        Write("a", 6),
        As(1),
        RewindAgent(2, 0, 0),
        Undo,
        Redo,
        RewindAgent(2, 0, 1),
        Undo,
        Rewind(1),
    ]);
}

/// Found by the agent model (the default seed, before the fix),
/// shrunk: the agent deleted `c/b`, then a partial rewind (the core's own change, kept)
/// removed `c`; the agent rewind restored `c/b` into a directory that is gone and stopped,
/// unfinished, on "its parent directory is missing". `c/b` is now a conflict with nowhere to
/// come back (`above`), kept.
#[test]
fn regression_an_agent_rewind_keeps_a_path_whose_directory_a_kept_change_removed() {
    agent_ops(&[
        Mkdir("a", 0o644),
        Symlink("a", "b"),
        Mkdir("c", 0o644),
        Exchange("a", "c"),
        Unlink("b"),
        As(1),
        Rename("a", "b"),
        Rename("b", "c/a"),
        Create("c/b", 0),
        Write("c/b", 0),
        NextTurn(1), // turn 2
        NextTurn(1), // turn 3
        Unlink("c/b"),
        Mkdir("a", 0o644),
        RewindPaths(1, "c"),
        RewindAgent(3, 0, 0), // c/b: its parent directory is missing (unfinished), before
        Undo,
        RewindAgent(3, 0, 1),
    ]);
}
