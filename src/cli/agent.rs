//! Marking the agent: `run` marks itself (the parent of the command it runs) before the
//! command starts, so the command's whole process tree is the agent from its first change; a
//! hook marks the agent CLI that ran it. The mark goes to the folder's daemon, which journals
//! it (`crate::store::journal::AgentMark`).

use super::CliError;
use crate::capture::read_proc;
use crate::ipc::{MarkAgentAnswer, Request};
use crate::store::journal::AgentMark;
use std::path::Path;

/// Shells an agent may run its hook command through (`sh -c "…"`): the agent is above them.
const SHELLS: [&str; 8] = [
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox",
];

/// Asks the daemon of the mounted `folder` to mark process `pid` as the agent, named `comm`
/// (its own command name when `None`), marked `via` `run` or `hook`. `Ok(true)` when it is a
/// new mark.
pub fn mark(
    folder: &Path,
    pid: u32,
    comm: Option<String>,
    via: &str,
    session: Option<String>,
) -> Result<bool, CliError> {
    let info = read_proc(pid)
        .ok_or_else(|| CliError::fail(format!("cannot read /proc/{pid} to mark the agent")))?;
    let mark = AgentMark {
        pid,
        start: info.start,
        comm: comm.unwrap_or(info.comm),
        via: via.into(),
        session,
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
