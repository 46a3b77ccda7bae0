//! `ckpt-mount hook AGENT`: what an agent runs at each prompt. It reads the agent's payload,
//! begins the next turn in the mounted folder containing the payload's `cwd`, labelled with
//! the prompt's first line, and never blocks the prompt: a failure is shown to the user the
//! way each agent shows a hook's message, and the exit code stays 0.

use super::super::{CliError, CliResult, turn};
use crate::store::journal::Conversation;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Deserializer};
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
    /// Begin each turn in the mounted folder DIR too (repeatable; `hooks install --also`
    /// writes it)
    #[arg(long, value_name = "DIR")]
    pub also: Vec<PathBuf>,
    /// What the agent is about to do: a prompt begins a turn, a tool call a step of it
    /// (`hooks install --steps` writes `--on tool`)
    #[arg(long, value_enum, default_value_t = HookEvent::Prompt)]
    pub on: HookEvent,
}

/// The event a hook runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookEvent {
    /// A prompt was submitted: begin the next turn
    Prompt,
    /// A tool that can change files is about to run: begin the next step of the turn
    Tool,
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

impl HookAgent {
    /// The agent CLI as its marks name it (`claude-code:SESSION`).
    fn cli(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex | Self::CodexNotify => "codex",
            Self::Gemini => "gemini",
        }
    }
}

/// The name of the agent a hook marks: the agent CLI, with its session when the payload gave
/// one, so that two sessions in one folder are two agents (`claude-code:1f3a…`).
pub fn agent_name(agent: HookAgent, session: Option<&str>) -> String {
    match session.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => format!("{}:{s}", agent.cli()),
        None => agent.cli().to_string(),
    }
}

/// Runs `hook` (exit 0 whatever happens: a hook must not stop the agent).
pub fn run_hook(a: HookArgs) -> CliResult {
    match (a.agent, a.on) {
        (HookAgent::CodexNotify, _) => {
            codex_notify(a.payload.as_deref().unwrap_or("{}"), &a.also);
        }
        (agent, HookEvent::Prompt) => answer(agent, &a.also, begin),
        (agent, HookEvent::Tool) => answer(agent, &a.also, begin_step),
    }
    Ok(())
}

/// What a hook does with its payload's text: `Err` holds the messages for the user.
type HookAct = fn(HookAgent, &str, &[PathBuf]) -> Result<(), Vec<HookError>>;

/// The prompt and tool hooks: Claude Code, Codex and Gemini CLI send the same fields (`cwd`,
/// `prompt`; `tool_name`, `tool_input`) on stdin, and each shows the user a JSON
/// `systemMessage` printed on stdout with exit 0, without blocking the prompt or the tool.
/// Success prints nothing (Claude Code adds a hook's plain output to the model's context).
fn answer(agent: HookAgent, also: &[PathBuf], act: HookAct) {
    let mut text = String::new();
    let outcome = match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => act(agent, &text, also),
        Err(e) => Err(vec![HookError::ReadPayload(e)]),
    };
    if let Err(problems) = outcome {
        let lines: Vec<String> = problems
            .iter()
            .map(|p| format!("ckpt-mount: {p}"))
            .collect();
        for l in &lines {
            eprintln!("{l}");
        }
        // One message, however many folders failed: each agent shows one per hook run.
        let out = serde_json::json!({ "systemMessage": lines.join("\n") });
        let _ = writeln!(std::io::stdout(), "{out}");
    }
}

/// Why a hook begun no turn, or did not mark the agent: the message the user is shown.
#[derive(Debug)]
enum HookError {
    /// Stdin could not be read.
    ReadPayload(std::io::Error),
    /// The payload is not JSON.
    NotJson(serde_json::Error),
    /// No `cwd` in the payload, and no working directory of our own.
    NoWorkingDir(std::io::Error),
    /// The agent process that ran the hook is not found.
    NoCaller,
    /// Beginning the turn or marking the agent failed (the CLI's one line).
    Command(CliError),
    /// A folder the hook was told to act in, and did not (`--also` of a folder not mounted).
    Warning(String),
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ReadPayload(e) => write!(f, "cannot read the hook's payload: {e}"),
            Self::NotJson(e) => {
                write!(f, "the hook's payload is not JSON ({e}); no turn was begun")
            }
            Self::NoWorkingDir(e) => write!(f, "no working directory: {e}"),
            Self::NoCaller => f.write_str(
                "cannot find the agent process that ran the hook; its changes are not told apart",
            ),
            Self::Command(e) => f.write_str(&e.message),
            Self::Warning(w) => f.write_str(w),
        }
    }
}

impl From<CliError> for HookError {
    fn from(e: CliError) -> Self {
        Self::Command(e)
    }
}

/// What the hook reads of a prompt payload (Claude Code, Codex and Gemini CLI send the same
/// fields). A field missing, or of another type, reads as none: a hook must not stop the
/// agent over a payload it half understands.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PromptPayload {
    /// The agent's working directory.
    #[serde(deserialize_with = "text")]
    cwd: Option<String>,
    /// The prompt.
    #[serde(deserialize_with = "text")]
    prompt: Option<String>,
    /// The agent's session id.
    #[serde(deserialize_with = "text")]
    session_id: Option<String>,
    /// The conversation's transcript file (Claude Code, Gemini CLI; Codex's may be null).
    #[serde(deserialize_with = "text")]
    transcript_path: Option<String>,
}

/// What the hook reads of Codex's `notify` payload (same leniency as [`PromptPayload`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NotifyPayload {
    /// The event; only `agent-turn-complete` begins a turn.
    #[serde(rename = "type", deserialize_with = "text")]
    kind: Option<String>,
    /// The agent's working directory.
    #[serde(deserialize_with = "text")]
    cwd: Option<String>,
    /// The prompts of the turn that ended; the last one labels the next turn.
    #[serde(rename = "input-messages", deserialize_with = "last_text")]
    last_input: Option<String>,
    /// Codex's thread, its session.
    #[serde(rename = "thread-id", deserialize_with = "text")]
    thread_id: Option<String>,
}

/// A payload read from JSON text: an error when it is not JSON; a value that is not an object
/// (or fields of other types) read as nothing given.
fn payload<T: Default + serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

/// A field that is a string, else none.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })
}

/// A list's last item, when the field is a list and that item a string; else none.
fn last_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Array(mut items) => match items.pop() {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    })
}

/// Begins the next turn for a prompt payload, as begun by the agent (the CLI and its
/// session), in every folder [`super::folders::hook_folders`] names; the errors are the
/// messages for the user, one per folder that failed (the others still begin theirs).
fn begin(agent: HookAgent, text: &str, also: &[PathBuf]) -> Result<(), Vec<HookError>> {
    let payload: PromptPayload = payload(text).map_err(|e| vec![HookError::NotJson(e)])?;
    if payload
        .prompt
        .as_deref()
        .is_some_and(super::command::is_ckpt_prompt)
    {
        // `/ckpt` rewinds; a turn of its own would only stand in the list it shows.
        return Ok(());
    }
    let cwd = working_dir(payload.cwd.as_deref()).map_err(|e| vec![e])?;
    let label = payload.prompt.as_deref().and_then(label_of);
    let name = agent_name(agent, payload.session_id.as_deref());
    let conversation = conversation(
        payload.session_id.as_deref(),
        payload.transcript_path,
        label.clone(),
    );
    let folders = super::folders::hook_folders(agent, &cwd, also);
    let begun = Begin {
        label,
        name,
        session: payload.session_id,
        conversation: shared(conversation, &folders.all()),
    };
    let mut problems: Vec<HookError> = folders
        .warnings
        .iter()
        .map(|w| HookError::Warning(w.clone()))
        .collect();
    for folder in folders.all() {
        if let Err(e) = begun.begin_in(&folder) {
            problems.push(e);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// One prompt's turn, as each of its folders gets it.
struct Begin {
    label: Option<String>,
    name: String,
    session: Option<String>,
    conversation: Option<Conversation>,
}

impl Begin {
    /// Begins the turn in `folder` and marks the agent there.
    fn begin_in(&self, folder: &Path) -> Result<(), HookError> {
        let (label, by, c) = (
            self.label.clone(),
            Some(self.name.clone()),
            self.conversation.clone(),
        );
        if turn::begin_next(folder, turn::Next::Turn, label, by, c)?.is_some() {
            mark_caller(folder, self.name.clone(), self.session.clone())?;
        }
        Ok(())
    }
}

/// What the hook reads of a tool call's payload (`PreToolUse`, Gemini CLI's `BeforeTool`),
/// as leniently as [`PromptPayload`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ToolPayload {
    /// The agent's working directory.
    #[serde(deserialize_with = "text")]
    cwd: Option<String>,
    /// The agent's session id.
    #[serde(deserialize_with = "text")]
    session_id: Option<String>,
    /// The tool about to run.
    #[serde(deserialize_with = "text")]
    tool_name: Option<String>,
    /// Its arguments.
    tool_input: serde_json::Value,
}

/// Begins the next step of the current turn for a tool call, in every folder the prompt's
/// turn was begun in (`hooks install --steps`): labelled with the call, begun by the agent.
fn begin_step(agent: HookAgent, text: &str, also: &[PathBuf]) -> Result<(), Vec<HookError>> {
    let payload: ToolPayload = payload(text).map_err(|e| vec![HookError::NotJson(e)])?;
    let cwd = working_dir(payload.cwd.as_deref()).map_err(|e| vec![e])?;
    let tool = payload.tool_name.as_deref().unwrap_or("tool");
    let label = super::steps::label(tool, &payload.tool_input, Some(&cwd));
    let by = agent_name(agent, payload.session_id.as_deref());
    let folders = super::folders::hook_folders(agent, &cwd, also);
    // One call's steps share an id across folders, as a prompt's turns do, so that
    // `rewind --all-folders` finds them together.
    let conversation = shared(None, &folders.all());
    let mut problems: Vec<HookError> = Vec::new();
    for folder in folders.all() {
        let (l, b, c) = (label.clone(), Some(by.clone()), conversation.clone());
        if let Err(e) = turn::begin_next(&folder, turn::Next::Step, l, b, c) {
            problems.push(e.into());
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The conversation with the prompt's id and its folders, when the prompt begins a turn in
/// more than one folder (a prompt of one folder is recorded as it always was).
fn shared(conversation: Option<Conversation>, folders: &[PathBuf]) -> Option<Conversation> {
    if folders.len() < 2 {
        return conversation;
    }
    let mut c = conversation.unwrap_or_default();
    c.prompt_id = Some(prompt_id(c.session.as_deref()));
    c.folders = folders.iter().map(|f| f.display().to_string()).collect();
    Some(c)
}

/// A new prompt id: 16 hex digits of a hash of the session, the time to the nanosecond and
/// this process, so two prompts never share one (and the id says nothing of them).
fn prompt_id(session: Option<&str>) -> String {
    use sha2::Digest;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{}\0{nanos}\0{}", session.unwrap_or(""), std::process::id());
    let hash = sha2::Sha256::digest(seed.as_bytes());
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Where the agent's conversation stands, from its payload's session and transcript (blank
/// ones are none) and the prompt's first line; none when it gave none of them.
fn conversation(
    session: Option<&str>,
    transcript: Option<String>,
    prompt: Option<String>,
) -> Option<Conversation> {
    let session = session
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let transcript = transcript.filter(|t| !t.trim().is_empty());
    let any = session.is_some() || transcript.is_some() || prompt.is_some();
    any.then_some(Conversation {
        session,
        transcript,
        prompt,
        ..Conversation::default()
    })
}

/// Marks the agent CLI that ran this hook (and what it runs) as the agent `name` in the
/// mounted folder `folder`, with the agent's session id when its payload gave one.
fn mark_caller(folder: &Path, name: String, session: Option<String>) -> Result<(), HookError> {
    let caller = super::super::agent::hook_caller().ok_or(HookError::NoCaller)?;
    let of = super::super::agent::MarkOf {
        pid: caller,
        comm: None,
        name,
        via: "hook",
        session,
    };
    super::super::agent::mark(folder, of)?;
    Ok(())
}

/// The payload's `cwd`, else this process's working directory (where the agent ran us).
fn working_dir(cwd: Option<&str>) -> Result<PathBuf, HookError> {
    match cwd {
        Some(c) if !c.is_empty() => Ok(PathBuf::from(c)),
        _ => std::env::current_dir().map_err(HookError::NoWorkingDir),
    }
}

/// Codex's `notify` program, for Codex versions without prompt hooks: Codex runs it after each
/// agent turn and shows nothing it prints, so a failure is appended to a log file (named in
/// mount-scripts/README.md). The next turn's prompt is not known yet, so the label names the
/// prompt it follows.
fn codex_notify(arg: &str, also: &[PathBuf]) {
    let Ok(payload) = payload::<NotifyPayload>(arg) else {
        return notify_failed("the notify payload is not JSON; no turn was begun");
    };
    if payload.kind.as_deref() != Some("agent-turn-complete") {
        return;
    }
    let cwd = match working_dir(payload.cwd.as_deref()) {
        Ok(c) => c,
        Err(e) => return notify_failed(&e.to_string()),
    };
    let last = payload.last_input.as_deref().and_then(label_of);
    let folders = super::folders::hook_folders(HookAgent::CodexNotify, &cwd, also);
    let conversation = conversation(payload.thread_id.as_deref(), None, None);
    let begun = Begin {
        label: last.map(|l| format!("after: {l}")),
        name: agent_name(HookAgent::CodexNotify, payload.thread_id.as_deref()),
        session: payload.thread_id,
        conversation: shared(conversation, &folders.all()),
    };
    for w in &folders.warnings {
        notify_failed(w);
    }
    for folder in folders.all() {
        if let Err(e) = begun.begin_in(&folder) {
            notify_failed(&e.to_string());
        }
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

    #[test]
    fn a_payload_field_of_another_type_reads_as_none() {
        let p: PromptPayload =
            payload(r#"{"cwd": 3, "prompt": "fix it", "session_id": null}"#).expect("json");
        assert_eq!(
            (p.cwd, p.prompt.as_deref(), p.session_id),
            (None, Some("fix it"), None)
        );
        let n: NotifyPayload = payload(
            r#"{"type": "agent-turn-complete", "input-messages": ["a", "b"], "thread-id": "t"}"#,
        )
        .expect("json");
        assert_eq!(n.last_input.as_deref(), Some("b"));
        assert_eq!(n.thread_id.as_deref(), Some("t"));
        let p: PromptPayload = payload(
            r#"{"session_id": "s1", "transcript_path": "/t/s1.jsonl", "prompt": "\n fix it \n"}"#,
        )
        .expect("json");
        let c = conversation(
            p.session_id.as_deref(),
            p.transcript_path,
            Some("fix it".into()),
        );
        assert_eq!(
            c,
            Some(Conversation {
                session: Some("s1".into()),
                transcript: Some("/t/s1.jsonl".into()),
                prompt: Some("fix it".into()),
                ..Conversation::default()
            })
        );
        assert_eq!(conversation(Some(" "), Some(String::new()), None), None);
        let not_an_object: NotifyPayload = payload("[1]").expect("json");
        assert!(not_an_object.kind.is_none());
        assert!(payload::<PromptPayload>("{").is_err());
    }
}
