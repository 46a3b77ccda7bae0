//! The `/ckpt` command `hooks install` puts beside the hook: a custom command of the agent
//! (Claude Code: `commands/ckpt.md`; Gemini CLI: `commands/ckpt.toml`; Codex: the prompt file
//! `prompts/ckpt.md`, `/prompts:ckpt`) that lists the turns of the folder and rewinds it to the
//! one the user names, from inside the agent. It is a prompt, not a program: it tells the agent
//! to run `ckpt-mount log` and then `ckpt-mount rewind N --yes` with its shell tool, so the
//! agent's own permission prompt shows the command before it runs.
//!
//! `hooks uninstall` removes the file when it is the one install writes (for whichever copy of
//! the binary); a file the user wrote or edited is kept, and said so.

use super::{Agent, first_word, settings, shell_word};
use crate::cli::{CliError, CliResult};
use std::path::{Path, PathBuf};

/// Where the agent reads the command, beside its settings file `settings_path` (the user's or
/// the project's, as the hook's); `None` for Codex in a project, which reads custom prompts
/// from `$CODEX_HOME/prompts` alone.
pub fn path(agent: Agent, settings_path: &Path, project: bool) -> Option<PathBuf> {
    let dir = settings_path.parent()?;
    match agent {
        Agent::ClaudeCode => Some(dir.join("commands").join("ckpt.md")),
        Agent::Gemini => Some(dir.join("commands").join("ckpt.toml")),
        Agent::Codex if !project => Some(dir.join("prompts").join("ckpt.md")),
        Agent::Codex | Agent::Aider => None,
    }
}

/// The first words of the prompt the command sends: the hook begins no turn for it (nor for
/// the command as typed, [`is_ckpt_prompt`]), since it changes no file but by the rewind.
const MARK: &str = "ckpt-mount /ckpt, the user typed:";

/// Whether a prompt is the `/ckpt` command, as typed (`/ckpt 3`, `/prompts:ckpt 3`) or as the
/// agent expanded it: the hook begins no turn for it.
pub fn is_ckpt_prompt(prompt: &str) -> bool {
    let p = prompt.trim_start();
    let called = |name: &str| {
        p.strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
    };
    called("/ckpt") || called("/prompts:ckpt") || p.starts_with(MARK)
}

/// What the list is run with: off a terminal `log` fits its rows in 100 columns, which would
/// cut the labels the agent matches the user's words against.
const WIDE: &str = "COLUMNS=400 ";

/// How the user calls it in the agent.
fn invocation(agent: Agent) -> &'static str {
    match agent {
        Agent::Codex => "/prompts:ckpt",
        _ => "/ckpt",
    }
}

/// What the command asks the agent to do; `args` is the agent's placeholder for what the user
/// typed after the command, `exe` the binary as one shell word.
fn body(agent: Agent, args: &str, exe: &str) -> String {
    let title = agent.title();
    format!(
        r#"{MARK} {args}

Rewind this folder with ckpt-mount to the turn the user names (a turn began at each of
their prompts). Run each command below with your shell tool, in this conversation's working
directory, exactly as written (N replaced by the turn's number), and nothing else.

1. List the turns (wide, so that no label is cut):

```sh
{WIDE}{exe} log
```

2. If the user typed nothing, show them that list and stop. Otherwise find the turn they
   mean: a number is the turn of that number (the first column); words name the turn whose
   label (the last column: the prompt that began it) contains them. If no turn or several
   fit, show the list, ask which one, and stop.

3. Rewind the folder to the start of that turn, N being its number:

```sh
{exe} rewind N --yes
```

4. Tell the user what it printed, in full. The files are back as they were when that turn
   began; your own conversation is not: each `conversation:` line says how the user takes
   {title}'s conversation back to the same prompt. Do not change any file yourself.
"#
    )
}

/// The file install writes for `agent`, the binary `exe` (one shell word).
pub fn render(agent: Agent, exe: &str) -> String {
    let description = "List the ckpt-mount turns of this folder, or rewind it to the start of one";
    let note = format!(
        "Installed by `ckpt-mount hooks install {0}`; `ckpt-mount hooks uninstall {0}` removes it unless it was edited.",
        agent.arg()
    );
    match agent {
        // A TOML basic string: a quote or backslash of the binary's path escaped.
        Agent::Gemini => format!(
            "# {note}\ndescription = \"{description}\"\nprompt = \"\"\"\n{}\"\"\"\n",
            body(agent, "{{args}}", exe)
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        ),
        _ => format!(
            "---\ndescription: {description}\nargument-hint: \"[turn number, or words of its prompt]\"\n---\n<!-- {note} -->\n\n{}",
            body(agent, "$ARGUMENTS", exe)
        ),
    }
}

/// The binary a file names when it is one install wrote (for whichever copy of the binary):
/// the program of its first `sh` block, when rendering for it gives the file back exactly.
fn ours(agent: Agent, text: &str) -> Option<String> {
    let (_, after) = text.split_once("```sh\n")?;
    let line = after.lines().next()?.strip_prefix(WIDE)?;
    let line = match agent {
        Agent::Gemini => toml_unescape(line),
        _ => line.to_string(),
    };
    let (program, rest) = first_word(&line)?;
    (rest == " log" && render(agent, &shell_word(&program)) == text).then_some(program)
}

/// A line of a TOML basic string as [`render`] escapes it: `\\` and `\"` back to `\` and `"`.
fn toml_unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('\\' | '"'))) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// What is at the command's path now.
enum Found {
    Nothing,
    /// The file install writes for this binary.
    Same,
    /// One install wrote for another copy of the binary.
    OtherBinary(String),
    /// Something else: the user's own, or edited.
    Theirs,
}

fn found(agent: Agent, path: &Path, text: &str) -> Result<Found, CliError> {
    let Some(old) = settings::read_text(path).map_err(|e| CliError::fail(e.to_string()))? else {
        return Ok(Found::Nothing);
    };
    Ok(if old == text {
        Found::Same
    } else if ours(agent, &old).is_some() {
        Found::OtherBinary(old)
    } else {
        Found::Theirs
    })
}

/// Installs the command for `agent` at `path` (`None`: the agent has none in this scope, which
/// a note says), or with `dry_run` prints what would be written.
pub fn install(agent: Agent, path: Option<&Path>, exe: &str, dry_run: bool) -> CliResult {
    let Some(path) = path else {
        println!(
            "note: Codex reads custom prompts only from $CODEX_HOME/prompts (~/.codex/prompts), so no /prompts:ckpt was installed for the project; `ckpt-mount hooks install codex` without --project installs it"
        );
        return Ok(());
    };
    let text = render(agent, exe);
    let shown = path.display();
    let call = invocation(agent);
    let old = match found(agent, path, &text)? {
        Found::Same => {
            println!("the {call} command is already in {shown}; nothing changed");
            return Ok(());
        }
        Found::Theirs => {
            println!(
                "note: {shown} is not the {call} command install writes (yours, or edited): left as it is"
            );
            return Ok(());
        }
        Found::Nothing => String::new(),
        Found::OtherBinary(old) => old,
    };
    if dry_run {
        let verb = if old.is_empty() { "create" } else { "change" };
        println!("would {verb} {shown}:");
        print!("{}", super::diff(&old, &text, path));
        return Ok(());
    }
    settings::write(path, &text).map_err(|e| CliError::fail(e.to_string()))?;
    if old.is_empty() {
        println!(
            "installed the {call} command in {shown}: {call} lists the turns, {call} N (or words of its prompt) rewinds the folder to the start of that turn, through {}'s own permission prompt",
            agent.title()
        );
    } else {
        println!("updated the {call} command in {shown} to run {exe}");
    }
    Ok(())
}

/// Removes the command install wrote at `path` (and its folder, when that leaves it empty);
/// keeps one the user wrote or edited, and says so.
pub fn uninstall(agent: Agent, path: Option<&Path>, dry_run: bool) -> CliResult {
    let Some(path) = path else { return Ok(()) };
    let shown = path.display();
    let call = invocation(agent);
    let Some(old) = settings::read_text(path).map_err(|e| CliError::fail(e.to_string()))? else {
        return Ok(());
    };
    // Which copy of the binary wrote it does not matter.
    match ours(agent, &old) {
        None => {
            println!(
                "kept {shown}: it is not the {call} command install wrote (edited since?); remove it yourself if you no longer want it"
            );
            Ok(())
        }
        Some(_) if dry_run => {
            println!("would remove {shown}");
            Ok(())
        }
        Some(_) => {
            std::fs::remove_file(path)
                .map_err(|e| CliError::fail(format!("cannot remove {shown}: {e}")))?;
            if let Some(dir) = path.parent() {
                // Only an empty folder goes: remove_dir refuses any other.
                let _ = std::fs::remove_dir(dir);
            }
            println!("removed the {call} command {shown}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_install_wrote_is_known_as_ours_for_any_binary_and_an_edited_one_is_not() {
        for agent in [Agent::ClaudeCode, Agent::Codex, Agent::Gemini] {
            for exe in [
                "/usr/local/bin/ckpt-mount",
                "/home/a b/it's/ckpt-mount",
                "/x/a\"\"\"b\\/ckpt-mount",
            ] {
                let text = render(agent, &shell_word(exe));
                assert_eq!(ours(agent, &text).as_deref(), Some(exe), "{agent:?}");
                let edited = text.replace("in full", "briefly");
                assert_eq!(ours(agent, &edited), None, "{agent:?}");
            }
        }
        assert_eq!(ours(Agent::ClaudeCode, ""), None);
        // Gemini CLI's string holds no bare quote or backslash, so no `\"\"\"` ends it early.
        let gemini = render(Agent::Gemini, &shell_word("/x/it's/a\"\"\"b"));
        let inside = gemini.split_once("prompt = \"\"\"\n").map(|(_, p)| p);
        let inside = inside
            .and_then(|p| p.strip_suffix("\"\"\"\n"))
            .unwrap_or_default();
        assert!(!inside.contains("\"\"\""), "{inside}");
        assert!(
            inside.contains("'/x/it'\\\\''s/a\\\"\\\"\\\"b' log"),
            "{inside}"
        );
    }

    #[test]
    fn the_command_as_typed_or_expanded_begins_no_turn() {
        let expanded = render(Agent::Gemini, "ckpt-mount");
        let sent = expanded
            .split_once("prompt = \"\"\"\n")
            .map(|(_, p)| p.replace("{{args}}", "3"))
            .unwrap_or_default();
        for p in ["/ckpt", "/ckpt 3", " /prompts:ckpt make it blue", &sent] {
            assert!(is_ckpt_prompt(p), "{p}");
        }
        for p in ["/ckpts", "make /ckpt", "/checkpoint"] {
            assert!(!is_ckpt_prompt(p), "{p}");
        }
    }
}
