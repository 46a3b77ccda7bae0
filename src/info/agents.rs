//! `ckpt-mount agents`: every agent marked in the folder, by name, with its marks, the turns
//! its hook began and the turns in history it changed something in. Computed from the index
//! (the daemon's or an offline store's), like `log`.

use crate::ids::Turn;
use crate::relpath::RelPath;
use crate::store::index::Index;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};

/// One mark of an agent: a process (and what descends from it) that is the agent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MarkRow {
    /// The process.
    pub pid: u32,
    /// Its command name (for `run`, the command run).
    pub comm: String,
    /// Who marked it: `run` or `hook`.
    pub via: String,
    /// The agent CLI's session, when its hook gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Unix time of the mark.
    pub time: u64,
}

/// One row of `ckpt-mount agents`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentRow {
    /// The agent's name, as `rewind --agent NAME` takes it.
    pub name: String,
    /// Its marks, oldest first.
    pub marks: Vec<MarkRow>,
    /// The turns in history its hook began.
    pub began: Vec<Turn>,
    /// The turns in history in which it changed a path.
    pub changed_in: Vec<Turn>,
    /// How many paths it touched over those turns: every path it created, changed, renamed or
    /// removed, a temporary file it made and renamed away (`sed -i`) included.
    pub paths: usize,
}

/// Every agent marked, in the order of their first marks.
pub fn agent_rows(index: &Index) -> Vec<AgentRow> {
    let mut rows: Vec<AgentRow> = Vec::new();
    for (_, time, m) in &index.actors.marks {
        let name = m.name();
        let mark = MarkRow {
            pid: m.pid,
            comm: m.comm.clone(),
            via: m.via.clone(),
            session: m.session.clone(),
            time: *time,
        };
        match rows.iter_mut().find(|r| r.name == name) {
            Some(r) => r.marks.push(mark),
            None => rows.push(AgentRow {
                name,
                marks: vec![mark],
                began: Vec::new(),
                changed_in: Vec::new(),
                paths: 0,
            }),
        }
    }
    for row in &mut rows {
        row.began = index
            .turns
            .iter()
            .filter(|t| t.by.as_deref() == Some(row.name.as_str()))
            .map(|t| t.turn)
            .collect();
        let mut turns: BTreeSet<Turn> = BTreeSet::new();
        let mut paths: HashSet<&RelPath> = HashSet::new();
        for c in &index.captures {
            let by_it = index.actors.by_capture.get(&c.seq).is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.agent == Some(true) && t.name.as_deref() == Some(&*row.name))
            });
            if by_it {
                turns.insert(c.turn);
                paths.insert(&c.path);
            }
        }
        row.changed_in = turns.into_iter().collect();
        row.paths = paths.len();
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Seq;
    use crate::store::journal::{AgentMark, Line, PreImage, Record, Touch};

    fn add(index: &mut Index, rec: Record, time: u64) -> Seq {
        let seq = index.last_seq.next();
        index.apply(&Line {
            v: rec.version(),
            seq,
            time,
            rec,
        });
        seq
    }

    fn mark(pid: u32, name: &str, via: &str) -> Record {
        Record::Agent(AgentMark {
            pid,
            start: 1,
            comm: "x".into(),
            via: via.into(),
            session: None,
            name: Some(name.into()),
        })
    }

    fn turn(n: u64, by: Option<&str>) -> Record {
        Record::Turn {
            turn: Turn::new(n),
            label: None,
            by: by.map(str::to_string),
            conversation: None,
        }
    }

    fn changed(index: &mut Index, turn: u64, path: &str, by: Option<&str>) {
        let capture = add(
            index,
            Record::Capture {
                turn: Turn::new(turn),
                path: RelPath::new(path.as_bytes()).expect("valid"),
                pre: PreImage::Absent,
                undo_of: None,
                pid: Some(9),
                comm: Some("sed".into()),
            },
            0,
        );
        add(
            index,
            Record::Touched(Touch {
                capture,
                pid: 9,
                comm: "sed".into(),
                agent: Some(by.is_some()),
                name: by.map(str::to_string),
                what: "create".into(),
                opened_in: None,
            }),
            0,
        );
    }

    #[test]
    fn each_agent_lists_its_marks_the_turns_it_began_and_those_it_changed() {
        let mut index = Index::default();
        add(&mut index, turn(1, None), 10);
        add(&mut index, mark(30, "claude-code:s1", "hook"), 11);
        add(&mut index, mark(40, "helper", "run"), 12);
        add(&mut index, turn(2, Some("claude-code:s1")), 20);
        changed(&mut index, 2, "a", Some("claude-code:s1"));
        changed(&mut index, 2, "b", Some("helper"));
        changed(&mut index, 2, "c", None);
        add(&mut index, turn(3, Some("claude-code:s1")), 30);
        changed(&mut index, 3, "a", Some("claude-code:s1"));
        add(&mut index, mark(41, "helper", "run"), 31);
        let rows = agent_rows(&index);
        let summary: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{} marks={} began={:?} changed_in={:?} paths={}",
                    r.name,
                    r.marks.len(),
                    r.began.iter().map(|t| t.get()).collect::<Vec<_>>(),
                    r.changed_in.iter().map(|t| t.get()).collect::<Vec<_>>(),
                    r.paths,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                "claude-code:s1 marks=1 began=[2, 3] changed_in=[2, 3] paths=1",
                "helper marks=2 began=[] changed_in=[2] paths=1",
            ]
        );
    }
}
