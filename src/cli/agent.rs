//! Marking the agent: `run` marks itself (the parent of the command it runs) before the
//! command starts, so the command's whole process tree is the agent from its first change; a
//! hook marks the agent CLI that ran it. The mark goes to the folder's daemon, which journals
//! it (`crate::store::journal::AgentMark`).

use super::CliError;
use crate::capture::read_proc;
use crate::engine::Query;
use crate::ids::Turn;
use crate::info::agents::AgentRow;
use crate::ipc::{MarkAgentAnswer, Request};
use crate::store::journal::AgentMark;
use std::path::Path;

/// Shells an agent may run its hook command through (`sh -c "…"`): the agent is above them.
const SHELLS: [&str; 8] = [
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox",
];

/// Who is marked, and as which agent: what [`mark`] sends the daemon.
pub struct MarkOf {
    /// The process (its tree is the agent's).
    pub pid: u32,
    /// The command name to record (its own when `None`: `run` marks itself, and records the
    /// command it runs).
    pub comm: Option<String>,
    /// The agent's name (`run --as NAME`, `claude-code:SESSION`).
    pub name: String,
    /// Who marks it: `run` or `hook`.
    pub via: &'static str,
    /// The agent's session id, when a hook's payload gave one.
    pub session: Option<String>,
}

/// Asks the daemon of the mounted `folder` to mark a process, and what descends from it, as
/// the agent `of.name`. `Ok(true)` when it is a new mark.
pub fn mark(folder: &Path, of: MarkOf) -> Result<bool, CliError> {
    let pid = of.pid;
    let info = read_proc(pid)
        .ok_or_else(|| CliError::fail(format!("cannot read /proc/{pid} to mark the agent")))?;
    let mark = AgentMark {
        pid,
        start: info.start,
        comm: of.comm.unwrap_or(info.comm),
        via: of.via.into(),
        session: of.session,
        name: Some(of.name),
    };
    let answer: MarkAgentAnswer = super::ask_daemon(folder, &Request::MarkAgent { mark })?;
    Ok(answer.added)
}

/// The agent CLI behind a hook: this process's parent, or, when that is a shell the agent ran
/// the hook command through, the first ancestor that is not a shell.
pub fn hook_caller() -> Option<u32> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..8 {
        let info = read_proc(pid)?;
        if !SHELLS.contains(&info.comm.as_str()) || info.ppid <= 1 {
            return Some(pid);
        }
        pid = info.ppid;
    }
    Some(pid)
}

/// `ckpt-mount agents`.
#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    /// Print the list as JSON
    #[arg(long)]
    pub json: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

/// Runs `agents`: every agent marked in the folder, with its marks and turns.
pub fn agents(a: AgentsArgs) -> super::CliResult {
    let rows: Vec<AgentRow> = super::query(super::target(a.dir)?, Query::Agents, |_, e| {
        CliError::fail(e.to_string())
    })?;
    if a.json {
        super::print_json(&rows);
        return Ok(());
    }
    print!("{}", agents_table(&rows));
    Ok(())
}

/// The table `agents` prints: one row per agent, or a sentence when there is none.
fn agents_table(rows: &[AgentRow]) -> String {
    if rows.is_empty() {
        return format!(
            "no agent marked in this folder: {}\n",
            crate::store::actors::HOW_TO_MARK
        );
    }
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                crate::store::actors::quote_name(&r.name),
                marks_text(r),
                turns_text(&r.began),
                changed_text(r),
            ]
        })
        .collect();
    let head = ["AGENT", "MARKED", "BEGAN TURNS", "CHANGED"];
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let line = |c: [&str; 4]| {
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w - s.chars().count().min(w)));
        format!(
            "{}  {}  {}  {}\n",
            pad(c[0], widths[0]),
            pad(c[1], widths[1]),
            pad(c[2], widths[2]),
            c[3]
        )
        .trim_end()
        .to_string()
            + "\n"
    };
    let mut out = line(head);
    for c in &cells {
        out += &line([&c[0], &c[1], &c[2], &c[3]]);
    }
    out
}

/// `hook: claude 1234`, `run: sh 4000, 4100`: who marked the agent, and its processes.
fn marks_text(r: &AgentRow) -> String {
    let mut vias: Vec<&str> = r.marks.iter().map(|m| m.via.as_str()).collect();
    vias.dedup();
    let comm = r.marks.first().map_or("?", |m| m.comm.as_str());
    let pids: Vec<String> = r.marks.iter().map(|m| m.pid.to_string()).collect();
    format!(
        "{}: {} {}",
        vias.join("+"),
        crate::quote::quote_path(comm.as_bytes()),
        pids.join(", ")
    )
}

/// `14 paths in turns 2-3`, `-`.
fn changed_text(r: &AgentRow) -> String {
    if r.paths == 0 {
        return "-".into();
    }
    let paths = if r.paths == 1 { "path" } else { "paths" };
    let turns = if r.changed_in.len() == 1 {
        "turn"
    } else {
        "turns"
    };
    format!(
        "{} {paths} in {turns} {}",
        r.paths,
        turns_text(&r.changed_in)
    )
}

/// Turn numbers, runs of consecutive ones as ranges: `2-5, 7`; `-` for none.
fn turns_text(turns: &[Turn]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for t in turns.iter().map(|t| t.get()) {
        run = match run {
            Some((a, b)) if t == b + 1 => Some((a, t)),
            Some((a, b)) => {
                parts.push(range_text(a, b));
                Some((t, t))
            }
            None => Some((t, t)),
        };
    }
    if let Some((a, b)) = run {
        parts.push(range_text(a, b));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn range_text(a: u64, b: u64) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::agents::MarkRow;

    #[test]
    fn the_table_names_each_agent_its_marks_and_turns() {
        let mark = |pid, via: &str, comm: &str| MarkRow {
            pid,
            comm: comm.into(),
            via: via.into(),
            session: None,
            time: 0,
        };
        let t = |v: &[u64]| v.iter().map(|n| Turn::new(*n)).collect::<Vec<_>>();
        let rows = vec![
            AgentRow {
                name: "claude-code:1f3a2b4c-5d6e-7f80".into(),
                marks: vec![mark(1234, "hook", "claude")],
                began: t(&[2, 3, 4, 7]),
                changed_in: t(&[2, 3, 4, 7]),
                paths: 14,
            },
            AgentRow {
                name: "helper".into(),
                marks: vec![mark(4000, "run", "sh"), mark(4100, "run", "sh")],
                began: Vec::new(),
                changed_in: t(&[3]),
                paths: 1,
            },
        ];
        assert_eq!(
            agents_table(&rows),
            concat!(
                "AGENT                  MARKED              BEGAN TURNS  CHANGED\n",
                "claude-code:1f3a2b4c…  hook: claude 1234   2-4, 7       14 paths in turns 2-4, 7\n",
                "helper                 run: sh 4000, 4100  -            1 path in turn 3\n",
            )
        );
        assert!(agents_table(&[]).starts_with("no agent marked in this folder"));
    }
}

/// `--agent [NAME]` on the views (`log`, `show`, `diff`): only what agents changed, or (with
/// NAME, repeatable) what those agents changed.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentFilter {
    /// Only what agents changed; with NAME (repeatable), what that agent changed
    /// (`claude-code` picks every Claude Code session, `claude-code:1f3a` one)
    #[arg(long = "agent", value_name = "NAME", num_args = 0..=1)]
    pub agent: Option<Vec<String>>,
}

impl AgentFilter {
    /// The agents asked for; `None` when the flag is not given.
    pub fn agents(&self) -> Option<crate::rewind::Agents> {
        self.agent.clone().map(crate::rewind::Agents::from_names)
    }

    /// Refuses names no agent of the folder `dir` has, listing those it has: a typo must not
    /// print an empty view and call it done.
    pub fn check(&self, dir: Option<&std::path::Path>) -> super::CliResult {
        let Some(crate::rewind::Agents::Named(names)) = self.agents() else {
            return Ok(());
        };
        let rows: Vec<AgentRow> = super::query(
            super::target(dir.map(std::path::Path::to_path_buf))?,
            Query::Agents,
            |_, e| CliError::fail(e.to_string()),
        )?;
        let known: Vec<String> = rows.into_iter().map(|r| r.name).collect();
        for name in &names {
            if !known
                .iter()
                .any(|k| crate::store::actors::names_agent(name, k))
            {
                let e = crate::rewind::RewindError::UnknownAgent {
                    name: name.clone(),
                    known: known.clone(),
                };
                return Err(CliError::fail(e.to_string()));
            }
        }
        Ok(())
    }

    /// Whether a path or turn these `actors` changed is shown.
    pub fn keeps(&self, actors: &[crate::store::actors::ActorView]) -> bool {
        match self.agents() {
            None => true,
            Some(agents) => actors.iter().any(|a| agents.covers(a)),
        }
    }
}
