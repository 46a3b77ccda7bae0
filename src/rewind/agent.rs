//! `rewind N --agent [NAME]…`: which paths the partial rewind restores, from who changed them
//! since the start of turn N. Pure: the index in, the split out; the rewind itself is the
//! partial rewind of the chosen paths (`Rewinder::agent` in `rewinder.rs`). "The agent" below
//! is the agents asked for: every agent, or those the names pick ([`Agents`]); every other
//! agent counts as another process.
//!
//! A path changed since the start of N by the agent alone is restored. A path changed only by
//! other processes is kept. A path both changed is a conflict: kept unless
//! [`Conflicts::Rewind`] says to restore it too. A change the journal cannot attribute (a
//! capture from before journal version 4; a file held open for writing across a turn switch
//! before version 5, which names the descriptor's opener) is never taken for the agent's. A path the agent alone changed that stands where something
//! else must be kept below it (the agent created `dir`, an editor then wrote `dir/notes`) is a
//! conflict too, since restoring it would remove what is kept; and so is one that would come
//! back below a directory that another change, kept, made something else or removed (the
//! agent deleted `dir/a`, then `dir` went in a partial rewind): it has nowhere to go.

use super::report::{AgentSplit, PathActors, RewindError};
use super::request::{AgentScope, Agents, Conflicts};
use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::actors::{ActorView, names_agent};
use crate::store::index::Index;
use crate::store::journal::PreImage;
use std::collections::HashMap;

/// Refuses names that pick no agent ever marked in the folder: a typo must not rewind nothing
/// and call it done. Refused when no agent was ever marked at all: every change then counts as
/// one actor, and nothing can be told apart.
pub fn check_names(index: &Index, agents: &Agents) -> Result<(), RewindError> {
    if !index.actors.any_marked() {
        return Err(RewindError::NoAgent);
    }
    let known = index.actors.agent_names();
    for pattern in agents.names() {
        if !known.iter().any(|n| names_agent(pattern, n)) {
            return Err(RewindError::UnknownAgent {
                name: pattern.clone(),
                known,
            });
        }
    }
    Ok(())
}

/// The turn `rewind --agent NAME` goes back to when no turn is given: the start of the latest
/// turn one of the named agents began (its hook began it), else of the turn it was last marked
/// in (`run --as NAME` begins no turn). Every agent (`--agent` alone), or no agent flag: the
/// current turn, as for any rewind.
pub fn default_turn(index: &Index, agents: Option<&Agents>) -> Result<Turn, RewindError> {
    let Some(agents @ Agents::Named(_)) = agents else {
        return Ok(index.current_turn());
    };
    check_names(index, agents)?;
    let began = index
        .turns
        .iter()
        .rev()
        .find(|t| t.by.is_some() && agents.covers_name(t.by.as_deref()))
        .map(|t| t.turn);
    if let Some(turn) = began {
        return Ok(turn);
    }
    // The turn current when the newest of their marks was recorded (turns in history, by
    // the time each began: the last one begun by then).
    let marked = index
        .actors
        .marks
        .iter()
        .rev()
        .find(|(_, _, m)| agents.covers_name(Some(&m.name())))
        .map(|(_, time, _)| *time);
    let turn_at = |time: u64| {
        index
            .turns
            .iter()
            .rev()
            .find(|t| t.time <= time)
            .map(|t| t.turn)
    };
    Ok(marked
        .and_then(turn_at)
        .unwrap_or_else(|| index.current_turn()))
}

/// Who changed what since the start of `to`, split for `rewind --agent`; `dir_now` says whether
/// a path is a directory in the folder now. Refused when no agent was ever marked, or a name
/// picks none ([`check_names`]).
pub fn split(
    index: &Index,
    to: Turn,
    scope: &AgentScope,
    dir_now: &dyn Fn(&RelPath) -> bool,
) -> Result<AgentSplit, RewindError> {
    check_names(index, &scope.agents)?;
    let conflicts = scope.conflicts;
    let by_path = index.actors_by_path(index.captures.iter().filter(|c| c.turn >= to));
    let targets: HashMap<RelPath, PreImage> = index.plan_targets(to).into_iter().collect();
    let agent_alone = |actors: &[ActorView]| actors.iter().all(|a| scope.agents.covers(a));
    let has_agent = |actors: &[ActorView]| actors.iter().any(|a| scope.agents.covers(a));
    // What the policy restores, before anything holds a path back.
    let wanted = |actors: &[ActorView]| {
        agent_alone(actors) || (has_agent(actors) && conflicts == Conflicts::Rewind)
    };
    // Every directory above a path that stays as it is, with one such path: restoring
    // something there that is not a directory would remove it.
    let mut above_kept: HashMap<RelPath, RelPath> = HashMap::new();
    for (path, actors) in &by_path {
        if !wanted(actors) {
            let mut up = path.parent();
            while let Some(dir) = up {
                up = dir.parent();
                above_kept.entry(dir).or_insert_with(|| path.clone());
            }
        }
    }
    let mut out = AgentSplit {
        conflicts_policy: conflicts,
        agents: scope.agents.names().to_vec(),
        ..AgentSplit::default()
    };
    let mut paths: Vec<&RelPath> = by_path.keys().collect();
    paths.sort();
    let mut restoring: std::collections::HashSet<RelPath> = std::collections::HashSet::new();
    for path in paths {
        let actors = &by_path[path];
        let entry = |below: Option<&RelPath>, above: Option<&RelPath>| PathActors {
            path: path.clone(),
            actors: actors.clone(),
            below: below.cloned(),
            above: above.cloned(),
            merge: None,
        };
        let replaces_below = !matches!(targets.get(path), Some(PreImage::Dir { .. }));
        let below = above_kept.get(path).filter(|_| replaces_below);
        // Something to put back at the path needs every directory above it: one changed since
        // the start of the turn that stays as it is now must be a directory now. (Paths are in
        // order, so every directory above was decided before.)
        let above = if matches!(targets.get(path), None | Some(PreImage::Absent)) {
            None
        } else {
            let mut up = path.parent();
            std::iter::from_fn(|| {
                let d = up.take()?;
                up = d.parent();
                Some(d)
            })
            .find(|d| by_path.contains_key(d) && !restoring.contains(d) && !dir_now(d))
        };
        let blocked = below.is_some() || above.is_some();
        let e = entry(below, above.as_ref());
        if !blocked && wanted(actors) {
            restoring.insert(path.clone());
        }
        match (agent_alone(actors), has_agent(actors), blocked) {
            (_, true, true) => out.conflicts.push(e),
            (true, _, false) => out.agent_only.push(e),
            (false, true, false) => out.conflicts.push(e),
            _ => out.others.push(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Seq;
    use crate::store::journal::{AgentMark, Touch};
    use crate::store::journal::{Line, Record};

    /// An index replayed from records: a mark, turn 2, then captures with their touches.
    struct Journal(Index);

    impl Journal {
        fn new() -> Self {
            let mut j = Self(Index::default());
            j.add(Record::Turn {
                turn: Turn::new(1),
                label: None,
                by: None,
                conversation: None,
            });
            j.add(Record::Agent(AgentMark {
                pid: 30,
                start: 9,
                comm: "claude".into(),
                via: "hook".into(),
                session: None,
                name: Some("claude".into()),
            }));
            j.add(Record::Turn {
                turn: Turn::new(2),
                label: None,
                by: None,
                conversation: None,
            });
            j
        }

        fn add(&mut self, rec: Record) -> Seq {
            let seq = self.0.last_seq.next();
            self.0.apply(&Line {
                v: rec.version(),
                seq,
                time: 0,
                rec,
            });
            seq
        }

        /// `path` (that was `pre`) changed by each of `by` (command, agent) in turn 2.
        fn changed(&mut self, path: &str, pre: PreImage, by: &[(&str, bool)]) {
            let path = RelPath::new(path.as_bytes()).expect("valid");
            // Each actor's process by its name; the capture is the first one's, as the daemon
            // writes it (none for a capture the daemon makes itself).
            let pid_of = |comm: &str| 100 + comm.bytes().map(u32::from).sum::<u32>();
            let capture = match self.0.capture_seq_now(&path) {
                Some(seq) => seq,
                None => self.add(Record::Capture {
                    turn: Turn::new(2),
                    path,
                    pre,
                    undo_of: None,
                    pid: by.first().map(|(comm, _)| pid_of(comm)),
                    comm: by.first().map(|(comm, _)| comm.to_string()),
                }),
            };
            for (comm, agent) in by {
                self.add(Record::Touched(Touch {
                    capture,
                    pid: pid_of(comm),
                    comm: (*comm).into(),
                    agent: Some(*agent),
                    name: agent.then(|| "claude".into()),
                    what: "write".into(),
                    opened_in: None,
                }));
            }
        }
    }

    /// Every agent's changes, conflicts handled by `conflicts`.
    fn every(conflicts: Conflicts) -> AgentScope {
        AgentScope {
            agents: Agents::Every,
            conflicts,
        }
    }

    fn dir() -> PreImage {
        PreImage::Dir {
            mode: 0o755,
            uid: 0,
            gid: 0,
            xattrs: None,
        }
    }

    fn names(list: &[PathActors]) -> Vec<std::borrow::Cow<'_, str>> {
        list.iter().map(|p| p.path.lossy()).collect()
    }

    #[test]
    fn paths_split_by_who_changed_them() {
        let mut j = Journal::new();
        j.changed("agent.txt", PreImage::Absent, &[("sed", true)]);
        j.changed("mine.txt", PreImage::Absent, &[("vim", false)]);
        j.changed("both.txt", PreImage::Absent, &[("sed", true)]);
        j.changed("both.txt", PreImage::Absent, &[("vim", false)]);
        j.changed("src", dir(), &[("chmod", true)]);
        j.changed("src/mine.rs", PreImage::Absent, &[("vim", false)]);
        let s = split(&j.0, Turn::new(2), &every(Conflicts::Keep), &|_| true).expect("split");
        assert_eq!(names(&s.agent_only), vec!["agent.txt", "src"]);
        assert_eq!(names(&s.conflicts), vec!["both.txt"]);
        assert_eq!(names(&s.others), vec!["mine.txt", "src/mine.rs"]);
        let both = &s.conflicts[0].actors;
        assert_eq!(
            both.iter()
                .map(|a| (a.comm.as_str(), a.agent))
                .collect::<Vec<_>>(),
            vec![("sed", Some(true)), ("vim", Some(false))],
            "the agent first"
        );
        let chosen: Vec<String> = s.chosen().iter().map(RelPath::to_string).collect();
        assert_eq!(chosen, vec!["agent.txt", "src"]);
        let s = split(&j.0, Turn::new(2), &every(Conflicts::Rewind), &|_| true).expect("split");
        let chosen: Vec<String> = s.chosen().iter().map(RelPath::to_string).collect();
        assert_eq!(chosen, vec!["agent.txt", "src", "both.txt"]);
    }

    #[test]
    fn what_the_agent_created_around_a_kept_path_is_a_conflict() {
        let mut j = Journal::new();
        j.changed("gen", PreImage::Absent, &[("mkdir", true)]);
        j.changed("gen/a.o", PreImage::Absent, &[("cc", true)]);
        j.changed("gen/notes", PreImage::Absent, &[("vim", false)]);
        for policy in [Conflicts::Keep, Conflicts::Rewind] {
            let s = split(&j.0, Turn::new(2), &every(policy), &|_| true).expect("split");
            assert_eq!(names(&s.agent_only), vec!["gen/a.o"]);
            assert_eq!(names(&s.conflicts), vec!["gen"]);
            assert_eq!(
                s.conflicts[0].below.as_ref().map(RelPath::lossy).as_deref(),
                Some("gen/notes")
            );
            let chosen: Vec<String> = s.chosen().iter().map(RelPath::to_string).collect();
            assert_eq!(chosen, vec!["gen/a.o"], "{policy:?}");
        }
    }

    #[test]
    fn what_the_agent_deleted_below_a_directory_another_change_removed_is_a_conflict() {
        let mut j = Journal::new();
        j.changed("docs", dir(), &[("rm", false)]);
        j.changed(
            "docs/a.md",
            crate::store::index::tests::file("a"),
            &[("rm", true)],
        );
        j.changed("src", dir(), &[("chmod", false)]);
        j.changed(
            "src/b.rs",
            crate::store::index::tests::file("b"),
            &[("sed", true)],
        );
        // `docs` is gone now (the other process removed it); `src` is still a directory.
        let dir_now = |p: &RelPath| p.to_string() == "src";
        for policy in [Conflicts::Keep, Conflicts::Rewind] {
            let s = split(&j.0, Turn::new(2), &every(policy), &dir_now).expect("split");
            assert_eq!(names(&s.agent_only), vec!["src/b.rs"], "{policy:?}");
            assert_eq!(names(&s.conflicts), vec!["docs/a.md"], "{policy:?}");
            assert_eq!(
                s.conflicts[0].above.as_ref().map(RelPath::lossy).as_deref(),
                Some("docs")
            );
            let chosen: Vec<String> = s.chosen().iter().map(RelPath::to_string).collect();
            assert_eq!(chosen, vec!["src/b.rs"], "{policy:?}");
        }
    }

    /// `changed`, by actors that may be named agents: (command, agent name).
    fn changed_by(j: &mut Journal, path: &str, by: &[(&str, Option<&str>)]) {
        let p = RelPath::new(path.as_bytes()).expect("valid");
        let capture = match j.0.capture_seq_now(&p) {
            Some(seq) => seq,
            None => j.add(Record::Capture {
                turn: Turn::new(2),
                path: p,
                pre: PreImage::Absent,
                undo_of: None,
                pid: Some(7),
                comm: by.first().map(|(c, _)| c.to_string()),
            }),
        };
        for (comm, name) in by {
            j.add(Record::Touched(Touch {
                capture,
                pid: 7,
                comm: (*comm).into(),
                agent: Some(name.is_some()),
                name: name.map(str::to_string),
                what: "write".into(),
                opened_in: None,
            }));
        }
    }

    #[test]
    fn a_named_agent_is_rewound_alone_and_other_agents_count_as_others() {
        let mut j = Journal::new();
        j.add(Record::Agent(AgentMark {
            pid: 40,
            start: 9,
            comm: "codex".into(),
            via: "hook".into(),
            session: Some("t1".into()),
            name: Some("codex:t1".into()),
        }));
        changed_by(&mut j, "mine-claude", &[("sed", Some("claude"))]);
        changed_by(&mut j, "mine-codex", &[("awk", Some("codex:t1"))]);
        changed_by(&mut j, "user", &[("vim", None)]);
        changed_by(
            &mut j,
            "shared",
            &[("sed", Some("claude")), ("awk", Some("codex:t1"))],
        );
        let named = |names: &[&str]| AgentScope {
            agents: Agents::Named(names.iter().map(|n| n.to_string()).collect()),
            conflicts: Conflicts::Keep,
        };
        let s = split(&j.0, Turn::new(2), &named(&["codex"]), &|_| true).expect("split");
        assert_eq!(names(&s.agent_only), vec!["mine-codex"]);
        assert_eq!(names(&s.conflicts), vec!["shared"]);
        assert_eq!(names(&s.others), vec!["mine-claude", "user"]);
        assert_eq!(s.agents, vec!["codex".to_string()]);
        // Both by name: what either or both changed is theirs; the user's stays.
        let s = split(&j.0, Turn::new(2), &named(&["claude", "codex:t"]), &|_| {
            true
        })
        .expect("split");
        assert_eq!(
            names(&s.agent_only),
            vec!["mine-claude", "mine-codex", "shared"]
        );
        assert_eq!(names(&s.others), vec!["user"]);
        // Every agent: the same here.
        let s = split(&j.0, Turn::new(2), &every(Conflicts::Keep), &|_| true).expect("split");
        assert_eq!(
            names(&s.agent_only),
            vec!["mine-claude", "mine-codex", "shared"]
        );
        // A name no agent has is refused, naming those there are.
        let e = split(&j.0, Turn::new(2), &named(&["gemini"]), &|_| true).expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "no agent named gemini was ever marked in this folder (agents: claude, codex:t1; `ckpt-mount agents` lists them)"
        );
    }

    #[test]
    fn without_a_turn_a_named_agent_goes_back_to_the_latest_turn_it_began() {
        let mut j = Journal::new();
        let turn = |n: u64, by: Option<&str>| Record::Turn {
            turn: Turn::new(n),
            label: None,
            by: by.map(str::to_string),
            conversation: None,
        };
        j.add(turn(3, Some("claude")));
        j.add(turn(4, None));
        j.add(turn(5, Some("codex:t1")));
        let named = |n: &str| Agents::Named(vec![n.to_string()]);
        assert_eq!(
            default_turn(&j.0, Some(&named("claude"))).ok(),
            Some(Turn::new(3))
        );
        assert!(matches!(
            default_turn(&j.0, Some(&named("codex"))),
            Err(RewindError::UnknownAgent { .. })
        ));
        assert_eq!(
            default_turn(&j.0, Some(&Agents::Every)).ok(),
            Some(Turn::new(5))
        );
        assert_eq!(default_turn(&j.0, None).ok(), Some(Turn::new(5)));
    }

    #[test]
    fn an_unattributed_change_is_never_the_agents_and_no_mark_refuses() {
        let mut j = Journal::new();
        // A capture no touch names: a file held open for writing across the turn switch.
        j.changed("held.log", PreImage::Absent, &[]);
        j.changed("held.log", PreImage::Absent, &[("node", true)]);
        let s = split(&j.0, Turn::new(2), &every(Conflicts::Keep), &|_| true).expect("split");
        assert_eq!(names(&s.conflicts), vec!["held.log"]);
        let unmarked = Index::default();
        assert!(matches!(
            split(&unmarked, Turn::new(1), &every(Conflicts::Keep), &|_| true),
            Err(RewindError::NoAgent)
        ));
    }
}
