//! `ckpt-mount hook AGENT`: what an agent runs at each prompt. It reads the agent's payload,
//! begins the next turn in the mounted folder containing the payload's `cwd`, labelled with
//! the prompt's first line, and never blocks the prompt: a failure is shown to the user the
//! way each agent shows a hook's message, and the exit code stays 0.

use super::super::{CliResult, turn};
use clap::{Args, ValueEnum};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// `ckpt-mount hook` (hidden: agents run it, people run `hooks install`).
#[derive(Debug, Args)]
pub struct HookArgs {
    /// Whose payload this is
    pub agent: HookAgent,
    /// The payload, for Codex's notify program (which passes it as the last argument); the
    /// prompt hooks read theirs on stdin
    pub payload: Option<String>,
}

/// The payloads `hook` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookAgent {
    /// Claude Code's UserPromptSubmit, on stdin
    ClaudeCode,
    /// Codex's UserPromptSubmit, on stdin
    Codex,
    /// Gemini CLI's BeforeAgent, on stdin
    Gemini,
    /// Codex's `notify` program: agent-turn-complete, as an argument
    CodexNotify,
}

/// The longest label a hook gives a turn, in characters.
const LABEL_MAX: usize = 100;

/// A turn's label from a prompt: its first line that is not blank, trimmed, cut to
/// [`LABEL_MAX`] characters with an ellipsis. Every integration labels turns this way.
pub fn label_of(prompt: &str) -> Option<String> {
    let line = prompt.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() <= LABEL_MAX {
        return Some(line.to_string());
    }
    let mut cut: String = line.chars().take(LABEL_MAX - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    Some(cut)
}

/// Runs `hook` (exit 0 whatever happens: a hook must not stop the agent).
pub fn run_hook(a: HookArgs) -> CliResult {
    match a.agent {
        HookAgent::CodexNotify => codex_notify(a.payload.as_deref().unwrap_or("{}")),
        _ => prompt_hook(),
    }
    Ok(())
}

/// The prompt hooks: Claude Code, Codex and Gemini CLI send the same fields (`cwd`, `prompt`)
/// on stdin, and each shows the user a JSON `systemMessage` printed on stdout with exit 0,
/// without blocking the prompt. Success prints nothing (Claude Code adds a hook's plain output
/// to the model's context).
fn prompt_hook() {
    let mut text = String::new();
    let outcome = match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => begin(&text),
        Err(e) => Err(format!("cannot read the hook's payload: {e}")),
    };
    if let Err(message) = outcome {
        let line = format!("ckpt-mount: {message}");
        eprintln!("{line}");
        let out = serde_json::json!({ "systemMessage": line });
        let _ = writeln!(std::io::stdout(), "{out}");
    }
}

/// Begins the next turn for a prompt payload; the error is the message for the user.
fn begin(text: &str) -> Result<(), String> {
    let payload: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("the hook's payload is not JSON ({e}); no turn was begun"))?;
    let cwd = working_dir(&payload)?;
    let label = payload["prompt"].as_str().and_then(label_of);
    let session = payload["session_id"].as_str().map(str::to_string);
    if turn::begin_next(&cwd, label)
        .map_err(|e| e.message)?
        .is_some()
    {
        mark_caller(&cwd, session)?;
    }
    Ok(())
}

/// Marks the agent CLI that ran this hook (and what it runs) as the agent in the mounted folder
/// containing `cwd`, with the agent's session id when its payload gave one.
fn mark_caller(cwd: &Path, session: Option<String>) -> Result<(), String> {
    let Some(folder) = crate::mounts::find_folder(cwd) else {
        return Ok(());
    };
    let caller = super::super::agent::hook_caller()
        .ok_or("cannot find the agent process that ran the hook; its changes are not told apart")?;
    super::super::agent::mark(&folder, caller, None, "hook", session)
        .map(drop)
        .map_err(|e| e.message)
}

/// The payload's `cwd`, else this process's working directory (where the agent ran us).
fn working_dir(payload: &serde_json::Value) -> Result<PathBuf, String> {
    match payload["cwd"].as_str() {
        Some(c) if !c.is_empty() => Ok(PathBuf::from(c)),
        _ => std::env::current_dir().map_err(|e| format!("no working directory: {e}")),
    }
}

/// Codex's `notify` program, for Codex versions without prompt hooks: Codex runs it after each
/// agent turn and shows nothing it prints, so a failure is appended to a log file (named in
/// mount-scripts/README.md). The next turn's prompt is not known yet, so the label names the
/// prompt it follows.
fn codex_notify(arg: &str) {
    let Ok(payload) = serde_json::from_str::<serde_json::Value>(arg) else {
        return notify_failed("the notify payload is not JSON; no turn was begun");
    };
    if payload["type"].as_str() != Some("agent-turn-complete") {
        return;
    }
    let cwd = match working_dir(&payload) {
        Ok(c) => c,
        Err(e) => return notify_failed(&e),
    };
    let last = payload["input-messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m.as_str())
        .and_then(label_of);
    let label = last.map(|l| format!("after: {l}"));
    match turn::begin_next(&cwd, label) {
        Err(e) => notify_failed(&e.message),
        Ok(Some(_)) => {
            let session = payload["thread-id"].as_str().map(str::to_string);
            if let Err(e) = mark_caller(&cwd, session) {
                notify_failed(&e);
            }
        }
        Ok(None) => {}
    }
}

/// The log of the notify program's failures: `$CODEX_HOME/log/ckpt-mount-notify.log`
/// (default `~/.codex/log/…`), beside Codex's own logs.
pub fn notify_log() -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".codex")))?;
    Some(home.join("log").join("ckpt-mount-notify.log"))
}

fn notify_failed(message: &str) {
    let line = format!("ckpt-mount: {message}");
    eprintln!("{line}");
    let Some(log) = notify_log() else { return };
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
    {
        let _ = writeln!(f, "{secs} {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_the_first_line_cut_to_length() {
        assert_eq!(
            label_of("\n  Make the header blue \nand the footer").as_deref(),
            Some("Make the header blue")
        );
        assert_eq!(label_of(" \n\t\n"), None);
        let long = "é".repeat(150);
        let cut = label_of(&long).expect("label");
        assert_eq!(cut.chars().count(), LABEL_MAX);
        assert!(cut.ends_with('…'));
    }
}
