//! Steps: with `hooks install AGENT --steps`, the agent also runs `ckpt-mount hook AGENT --on
//! tool` before each tool call that can change files, and that begins the next step of the
//! current turn (`5.1`, `5.2`, …), labelled with the call (`Bash: npm install`, `Edit:
//! src/lib.rs`). A step is a turn switch in all but its number, so `rewind 5.3` returns the
//! folder to just before that call, however many calls the prompt made.
//!
//! Off by default: an agent makes tens of tool calls per prompt, each a row of `log`, the
//! picker and `.ckpt/turns/`, and most users go back to a prompt, not a call. Only the tools
//! that can change files begin one (the matchers below): reads, searches and web fetches
//! change nothing a rewind could give back.

use super::Agent;
use crate::cli::hooks::payload::label_of;
use serde_json::Value;
use std::path::Path;

/// The event the agent fires before a tool runs.
pub fn event(agent: Agent) -> &'static str {
    match agent {
        Agent::Gemini => "BeforeTool",
        _ => "PreToolUse",
    }
}

/// The tools a step begins for, as the agent's matcher (a regular expression over tool
/// names): those that write files or run commands.
pub fn matcher(agent: Agent) -> &'static str {
    match agent {
        Agent::ClaudeCode => "Bash|Edit|Write|MultiEdit|NotebookEdit",
        Agent::Gemini => "run_shell_command|write_file|replace",
        // Codex runs PreToolUse for its shell (`Bash`) and, from 0.124, for `apply_patch`.
        Agent::Codex | Agent::Aider => "Bash|apply_patch",
    }
}

/// The words after the binary in the tool hook's command, before its `--also DIR` pairs.
fn words(agent: Agent) -> [&'static str; 4] {
    ["hook", agent.arg(), "--on", "tool"]
}

/// The tool hook's command, `exe` being the binary as one shell word and `also` the
/// ` --also DIR` words the prompt hook has (a step is begun in the same folders as its turn).
pub fn command(exe: &str, agent: Agent, also: &str) -> String {
    format!("{exe} {}{also}", words(agent).join(" "))
}

/// Whether a hook command is the tool hook `install --steps` adds (whichever copy of the
/// binary).
pub fn runs_our_step_hook(command: &str, agent: Agent) -> bool {
    super::runs_ckpt_mount_with(command, &words(agent))
}

/// A step's label from a tool call: the tool and what it works on, cut as a prompt's label is.
/// `cwd` shortens paths inside the agent's working directory.
pub fn label(tool: &str, input: &Value, cwd: Option<&Path>) -> Option<String> {
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    let path = |p: &str| {
        let rel = cwd.and_then(|c| Path::new(p).strip_prefix(c).ok());
        rel.map_or_else(|| p.to_string(), |r| r.display().to_string())
    };
    let what = match tool {
        // Codex's apply_patch carries the patch in `command`: the first file it names.
        "apply_patch" => field("command")
            .or_else(|| field("patch"))
            .and_then(patched_file)
            .map(|p| path(&p)),
        _ => field("command")
            .map(str::to_string)
            .or_else(|| field("file_path").map(path))
            .or_else(|| field("notebook_path").map(path))
            .or_else(|| field("path").map(path)),
    };
    match what.as_deref().and_then(label_of) {
        Some(w) => label_of(&format!("{tool}: {w}")),
        None => label_of(tool),
    }
}

/// The first file an `apply_patch` patch adds, updates or deletes.
fn patched_file(patch: &str) -> Option<String> {
    patch.lines().find_map(|l| {
        ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .map(|f| f.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_step_is_labelled_with_the_tool_and_what_it_works_on() {
        let cwd = Some(Path::new("/p"));
        let l = |tool: &str, input: Value| label(tool, &input, cwd);
        assert_eq!(
            l("Bash", json!({"command": "npm install\nnpm test"})),
            Some("Bash: npm install".into())
        );
        assert_eq!(
            l(
                "Edit",
                json!({"file_path": "/p/src/lib.rs", "old_string": "a"})
            ),
            Some("Edit: src/lib.rs".into())
        );
        assert_eq!(
            l("write_file", json!({"file_path": "/elsewhere/x"})),
            Some("write_file: /elsewhere/x".into())
        );
        assert_eq!(
            l(
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: /p/a.txt\n@@\n-x\n+y\n"})
            ),
            Some("apply_patch: a.txt".into())
        );
        assert_eq!(l("Write", json!({})), Some("Write".into()));
        let long = l("Bash", json!({"command": "x".repeat(300)})).expect("label");
        assert_eq!(long.chars().count(), 100);
    }

    #[test]
    fn the_tool_hook_is_told_apart_from_the_prompt_hook() {
        let c = command("'/a b/ckpt-mount'", Agent::ClaudeCode, "");
        assert!(runs_our_step_hook(&c, Agent::ClaudeCode), "{c}");
        let with_also = command("/x/ckpt-mount", Agent::ClaudeCode, " --also '/d e'");
        assert!(
            runs_our_step_hook(&with_also, Agent::ClaudeCode),
            "{with_also}"
        );
        assert!(!runs_our_step_hook(&c, Agent::Gemini));
        assert!(!super::super::runs_our_hook(&c, Agent::ClaudeCode));
        assert!(!runs_our_step_hook(
            "/x/ckpt-mount hook claude-code",
            Agent::ClaudeCode
        ));
    }
}
