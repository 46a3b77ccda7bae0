//! `hooks install|uninstall AGENT`: the agent's own settings get (or lose) one hook that runs
//! `ckpt-mount hook AGENT` at each prompt, and the agent its `/ckpt` command (`command.rs`);
//! and that hidden `hook` command itself, which begins the next turn, labelled with the
//! prompt's first line, in the mounted folder the agent works in, and tells the user through
//! the agent when the folder is not mounted.
//!
//! The hook command is this binary by its absolute path, so nothing else has to be installed.

mod command;
mod folders;
mod jsonc;
mod payload;
mod settings;
mod steps;
mod toml_roots;

pub use payload::{HookArgs, run_hook};

use super::{CliError, CliResult};
use clap::{Args, Subcommand, ValueEnum};
use settings::{Added, Json};
use std::path::{Path, PathBuf};

/// `ckpt-mount hooks`.
#[derive(Debug, Args)]
pub struct HooksArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: HooksAction,
}

/// `hooks install` and `hooks uninstall`.
#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// Add the hook to the agent's settings, and the /ckpt command beside them (running it
    /// again changes nothing)
    ///
    /// Example: ckpt-mount hooks install claude-code --dry-run
    ///
    /// Example: ckpt-mount hooks install claude-code --also ~/src/lib --dry-run
    ///
    /// Example: ckpt-mount hooks install claude-code --steps --dry-run
    Install(HookTarget),
    /// Remove exactly what install added (a /ckpt command you edited is kept, and named)
    ///
    /// Example: ckpt-mount hooks uninstall codex --project ~/src/site
    Uninstall(HookTarget),
}

/// Which agent, and whose settings.
#[derive(Debug, Args)]
pub struct HookTarget {
    /// The agent
    pub agent: Agent,
    /// Write the project's settings in DIR instead of your own
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print what would be written, and write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Install: begin each prompt's turn in the mounted folder DIR too, besides the one the
    /// agent works in and its own additional directories (repeatable)
    #[arg(long, value_name = "DIR")]
    pub also: Vec<PathBuf>,
    /// Also begin a step (5.1, 5.2, …) before each tool call that can change files, so that
    /// `rewind 5.2` goes back to just before that call (install only; an install without it
    /// removes the step hook)
    #[arg(long)]
    pub steps: bool,
}

/// The agents `hooks` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Agent {
    /// Claude Code: a UserPromptSubmit hook in settings.json
    ClaudeCode,
    /// OpenAI Codex CLI: a UserPromptSubmit hook in hooks.json
    Codex,
    /// Gemini CLI: a BeforeAgent hook in settings.json
    Gemini,
    /// aider: no prompt hook; use mount-scripts/aider/ckpt-aider
    Aider,
}

impl Agent {
    /// The agent's name as people write it.
    fn title(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
            Agent::Aider => "aider",
        }
    }

    /// The argument of `ckpt-mount hook` for this agent.
    pub fn arg(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Aider => "aider",
        }
    }

    /// The event that fires when the user submits a prompt, before the agent acts on it.
    fn event(self) -> &'static str {
        match self {
            Agent::Gemini => "BeforeAgent",
            _ => "UserPromptSubmit",
        }
    }
}

/// Runs `hooks install` or `hooks uninstall`.
pub fn run(a: HooksArgs) -> CliResult {
    let (t, install) = match a.action {
        HooksAction::Install(t) => (t, true),
        HooksAction::Uninstall(t) => (t, false),
    };
    if t.agent == Agent::Aider {
        return Err(CliError::fail(
            "aider has no hook that runs when a prompt is submitted, so nothing was written: start it with mount-scripts/aider/ckpt-aider, which begins a new (unlabelled) turn each time aider waits for input",
        ));
    }
    let path = settings_path(t.agent, t.project.as_deref())?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::fail(format!("cannot find own executable: {e}")))?;
    let exe = shell_word(&exe.to_string_lossy());
    let also = also_words(&t.also, install)?;
    let command = format!("{exe} hook {}{also}", t.agent.arg());
    let agent = t.agent;
    let is_ours = move |e: &Json| e.str_of("command").is_some_and(|c| runs_our_hook(c, agent));
    let (old_text, mut doc) = Doc::read(agent, &path).map_err(|e| CliError::fail(e.to_string()))?;
    let title = agent.title();
    let shown = path.display();
    let want_steps = if install && t.steps {
        Steps::On
    } else {
        Steps::Off
    };
    let step_change = change_steps(
        &mut doc,
        agent,
        &steps::command(&exe, agent, &also),
        want_steps,
        &path,
    )?;
    let (changed, done) = if install {
        let added = doc
            .add(
                agent.event(),
                settings::Group {
                    entry: entry(agent, &command, "ckpt-mount-turn"),
                    matcher: None,
                },
                &is_ours,
                &path,
            )
            .map_err(|e| CliError::fail(e.to_string()))?;
        let done = match added {
            Added::AlreadyThere => {
                format!("the {title} hook is already in {shown}; nothing changed")
            }
            Added::Updated => format!("updated the {title} hook in {shown} to run {command}"),
            Added::Appended => format!(
                "installed the {title} hook in {shown}: each prompt begins a new ckpt-mount turn labelled with its first line, in whichever mounted folder {title} works in{}",
                also_said(&t.also)
            ),
        };
        (added != Added::AlreadyThere, done)
    } else if doc.remove(agent.event(), &is_ours) > 0 {
        (true, format!("removed the {title} hook from {shown}"))
    } else {
        (
            false,
            format!("the {title} hook is not in {shown}; nothing changed"),
        )
    };
    let (changed, done) = match step_change {
        Some(line) => (true, format!("{done}\n{line}")),
        None => (changed, done),
    };
    // A file that held nothing but our hook goes as it came.
    let new_text = if !install && doc.holds_nothing() {
        String::new()
    } else {
        doc.text()
    };
    let change = Change {
        path: &path,
        old_text: &old_text,
        new_text: &new_text,
        changed,
        done,
    };
    apply(&change, t.dry_run)?;
    let slash = command::path(agent, &path, t.project.is_some());
    if install {
        command::install(agent, slash.as_deref(), &exe, t.dry_run)?;
    } else {
        command::uninstall(agent, slash.as_deref(), t.dry_run)?;
    }
    if install && !t.dry_run {
        notes(agent, &doc.value(), &path);
    }
    Ok(())
}

/// The ` --also DIR` words of the hook command, each folder absolute and canonical (the hook
/// runs wherever the agent is); a usage error for `uninstall --also` or a folder that is not
/// one. A folder not mounted now is noted: the hook begins turns there once it is.
fn also_words(also: &[PathBuf], install: bool) -> Result<String, CliError> {
    if !install && !also.is_empty() {
        return Err(CliError::usage(
            "--also is for install: uninstall removes the hook whatever folders it names",
        ));
    }
    let mut out = String::new();
    for dir in also {
        let abs = dir
            .canonicalize()
            .map_err(|e| CliError::fail(format!("--also {}: {e}", dir.display())))?;
        if !abs.is_dir() {
            return Err(CliError::fail(format!(
                "--also {}: not a folder",
                abs.display()
            )));
        }
        if !crate::mounts::is_ckpt_mount(&abs) {
            println!(
                "note: {} is not mounted now; the hook begins turns there while it is",
                abs.display()
            );
        }
        out += &format!(" --also {}", shell_word(&abs.to_string_lossy()));
    }
    Ok(out)
}

/// The end of the install's sentence for the `--also` folders: `, and in DIR, DIR`.
fn also_said(also: &[PathBuf]) -> String {
    if also.is_empty() {
        return String::new();
    }
    let dirs: Vec<String> = also.iter().map(|d| d.display().to_string()).collect();
    format!(", and in {}", dirs.join(", "))
}

/// Whether the tool hook that begins steps is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Steps {
    /// `install --steps`: add it.
    On,
    /// `install` without `--steps`, or `uninstall`: take it out.
    Off,
}

/// Adds or removes the tool hook (`steps.rs`) in `doc`; the line that says what changed, if
/// anything did.
fn change_steps(
    doc: &mut Doc,
    agent: Agent,
    command: &str,
    want: Steps,
    path: &Path,
) -> Result<Option<String>, CliError> {
    let is_ours = move |e: &Json| {
        e.str_of("command")
            .is_some_and(|c| steps::runs_our_step_hook(c, agent))
    };
    let event = steps::event(agent);
    let title = agent.title();
    Ok(match want {
        Steps::On => {
            let group = settings::Group {
                entry: entry(agent, command, "ckpt-mount-step"),
                matcher: Some(steps::matcher(agent)),
            };
            match doc
                .add(event, group, &is_ours, path)
                .map_err(|e| CliError::fail(e.to_string()))?
            {
                Added::AlreadyThere => None,
                Added::Updated | Added::Appended => Some(format!(
                    "and a {event} hook: each {title} tool call that can change files ({}) begins a step of the turn",
                    steps::matcher(agent).replace('|', ", ")
                )),
            }
        }
        Steps::Off => (doc.remove(event, &is_ours) > 0)
            .then(|| format!("removed the {event} hook that began a step at each tool call")),
    })
}

/// An agent's settings as read: plain JSON, rewritten whole in the agents' own layout (Claude
/// Code's and Codex's parsers take nothing else), or, for Gemini CLI, JSON with comments,
/// changed in place with its comments and layout kept.
enum Doc {
    Plain(Json),
    Commented(jsonc::Commented),
}

impl Doc {
    /// The file's text (empty when there is none) and its settings.
    fn read(agent: Agent, path: &Path) -> Result<(String, Doc), settings::SettingsError> {
        if agent == Agent::Gemini {
            let text = settings::read_text(path)?.unwrap_or_default();
            let doc = jsonc::Commented::parse(path, &text)?;
            return Ok((text, Doc::Commented(doc)));
        }
        let (text, value) =
            settings::read(path)?.unwrap_or_else(|| (String::new(), Json::Object(Vec::new())));
        Ok((text, Doc::Plain(value)))
    }

    fn add(
        &mut self,
        event: &str,
        group: settings::Group<'_>,
        is_ours: &dyn Fn(&Json) -> bool,
        path: &Path,
    ) -> Result<Added, settings::SettingsError> {
        match self {
            Doc::Plain(v) => settings::add(v, event, group, is_ours, path),
            Doc::Commented(d) => d.add(event, &group, is_ours, path),
        }
    }

    fn remove(&mut self, event: &str, is_ours: &dyn Fn(&Json) -> bool) -> usize {
        match self {
            Doc::Plain(v) => settings::remove(v, event, is_ours),
            Doc::Commented(d) => d.remove(event, is_ours),
        }
    }

    /// Whether nothing is left in it (no setting; for Gemini CLI's, no comment either).
    fn holds_nothing(&self) -> bool {
        match self {
            Doc::Plain(v) => matches!(v, Json::Object(e) if e.is_empty()),
            Doc::Commented(d) => d.holds_nothing(),
        }
    }

    fn text(&self) -> String {
        match self {
            Doc::Plain(v) => settings::render(v),
            Doc::Commented(d) => d.text(),
        }
    }

    fn value(&self) -> Json {
        match self {
            Doc::Plain(v) => v.clone(),
            Doc::Commented(d) => d.value(),
        }
    }
}

/// A settings file's text before and after, and the line that says what was done.
struct Change<'a> {
    path: &'a Path,
    old_text: &'a str,
    /// Empty when the file goes.
    new_text: &'a str,
    changed: bool,
    done: String,
}

/// Writes the change (or, `dry_run`, prints it as a diff) and says what was done.
fn apply(c: &Change, dry_run: bool) -> CliResult {
    let shown = c.path.display();
    let existed = c.path.exists();
    let remove_file = c.changed && c.new_text.is_empty() && existed;
    if c.changed && dry_run {
        let how = match (existed, remove_file) {
            (_, true) => format!("would remove {shown}, which holds nothing else:"),
            (false, _) => format!("would create {shown}:"),
            (true, false) => format!("would change {shown}:"),
        };
        println!("{how}");
        print!("{}", diff(c.old_text, c.new_text, c.path));
    } else if remove_file {
        std::fs::remove_file(c.path)
            .map_err(|e| CliError::fail(format!("cannot remove {shown}: {e}")))?;
        println!("{}, and the file, which held nothing else", c.done);
    } else {
        if c.changed {
            settings::write(c.path, c.new_text).map_err(|e| CliError::fail(e.to_string()))?;
        }
        println!("{}", c.done);
    }
    Ok(())
}

/// The file the hook goes in: the project's, or the user's where the agent reads it (each
/// honours its own variable for a relocated configuration).
fn settings_path(agent: Agent, project: Option<&Path>) -> Result<PathBuf, CliError> {
    let (dot, file) = match agent {
        Agent::ClaudeCode => (".claude", "settings.json"),
        Agent::Codex => (".codex", "hooks.json"),
        Agent::Gemini | Agent::Aider => (".gemini", "settings.json"),
    };
    if let Some(p) = project {
        let dir = p
            .canonicalize()
            .map_err(|e| CliError::fail(format!("cannot open {}: {e}", p.display())))?;
        if !dir.is_dir() {
            return Err(CliError::fail(format!("{} is not a folder", dir.display())));
        }
        return Ok(dir.join(dot).join(file));
    }
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = || {
        var("HOME")
            .ok_or_else(|| CliError::fail("HOME is not set; name the project with --project DIR"))
    };
    let dir = match agent {
        Agent::ClaudeCode => {
            var("CLAUDE_CONFIG_DIR").map_or_else(|| home().map(|h| h.join(dot)), Ok)?
        }
        Agent::Codex => var("CODEX_HOME").map_or_else(|| home().map(|h| h.join(dot)), Ok)?,
        Agent::Gemini | Agent::Aider => var("GEMINI_CLI_HOME").map_or_else(home, Ok)?.join(dot),
    };
    Ok(dir.join(file))
}

/// The hook entry for the agent's settings; `name` is what Gemini CLI lists it as.
fn entry(agent: Agent, command: &str, name: &str) -> Json {
    match agent {
        // Gemini CLI names hooks, for `/hooks enable|disable NAME`.
        Agent::Gemini => Json::object(&[("name", name), ("type", "command"), ("command", command)]),
        _ => Json::object(&[("type", "command"), ("command", command)]),
    }
}

/// Whether a hook command runs `ckpt-mount hook AGENT` (whichever copy of the binary): the
/// entry install adds, and the one uninstall removes.
fn runs_our_hook(command: &str, agent: Agent) -> bool {
    runs_ckpt_mount_with(command, &["hook", agent.arg()])
}

/// Whether a hook command runs `ckpt-mount` (whichever copy) with the words `ours`, then only
/// `--also DIR` pairs: the prompt hook and the tool hook (`steps.rs`) are told apart so.
fn runs_ckpt_mount_with(command: &str, ours: &[&str]) -> bool {
    let Some((program, rest)) = first_word(command) else {
        return false;
    };
    let Some(words) = words(rest) else {
        return false;
    };
    let also = words.get(ours.len()..).unwrap_or_default();
    Path::new(&program)
        .file_name()
        .is_some_and(|n| n == "ckpt-mount")
        && words.get(..ours.len()).is_some_and(|w| w == ours)
        && also.len() % 2 == 0
        && also.chunks(2).all(|pair| pair[0] == "--also")
}

/// The shell words of a command's rest, as [`first_word`] reads each.
fn words(mut rest: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    while !rest.trim().is_empty() {
        let (word, more) = first_word(rest)?;
        out.push(word);
        rest = more;
    }
    Some(out)
}

/// The first shell word of a command (bare, or single-quoted as [`shell_word`] writes it) and
/// the rest.
fn first_word(command: &str) -> Option<(String, &str)> {
    let s = command.trim_start();
    if !s.starts_with('\'') {
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        return Some((s[..end].to_string(), &s[end..]));
    }
    let mut word = String::new();
    let mut rest = s;
    while let Some(r) = rest.strip_prefix('\'') {
        let close = r.find('\'')?;
        word.push_str(&r[..close]);
        rest = &r[close + 1..];
        match rest.strip_prefix("\\'") {
            Some(r) => {
                word.push('\'');
                rest = r;
            }
            None => break,
        }
    }
    Some((word, rest))
}

/// `s` as one shell word: bare when it is plain, else single-quoted.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A unified diff of a settings file, for `--dry-run`.
fn diff(old: &str, new: &str, path: &Path) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(&name, &name)
        .to_string()
}

/// What the user still needs to know after an install: another hook that also begins turns,
/// and what each agent needs before it runs hooks at all.
fn notes(agent: Agent, value: &Json, path: &Path) {
    for c in settings::commands(value, agent.event()) {
        if first_word(&c).is_some_and(|(p, _)| p.ends_with("ckpt-turn-hook")) {
            println!(
                "note: {} also runs {c}, which begins a turn too; remove it, or each prompt begins two turns",
                path.display()
            );
        }
    }
    match agent {
        Agent::Codex => {
            println!(
                "note: Codex asks you to review and trust a new hook before it runs it (older versions also need `codex_hooks = true` under [features] in config.toml)"
            );
            if let Some(dir) = path.parent() {
                codex_hooks_off_note(&dir.join("config.toml"));
            }
        }
        Agent::Gemini => println!(
            "note: Gemini CLI runs hooks only while its hooks system is on: check with /hooks panel"
        ),
        Agent::ClaudeCode | Agent::Aider => {}
    }
}

/// Says so when Codex's config.toml turns hooks off (a plain line match: the file is TOML,
/// which this reads no further).
fn codex_hooks_off_note(config: &Path) {
    let Ok(text) = std::fs::read_to_string(config) else {
        return;
    };
    let off = text.lines().any(|l| {
        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        l == "hooks=false" || l == "codex_hooks=false"
    });
    if off {
        println!(
            "note: {} turns Codex's hooks off; the hook will not run until it is set to true",
            config.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_command_is_recognised_however_the_binary_path_is_quoted() {
        for path in ["/usr/local/bin/ckpt-mount", "/home/a b/it's/ckpt-mount"] {
            let c = format!("{} hook codex", shell_word(path));
            assert!(runs_our_hook(&c, Agent::Codex), "{c}");
            assert!(!runs_our_hook(&c, Agent::ClaudeCode), "{c}");
            assert_eq!(first_word(&c).map(|w| w.0), Some(path.to_string()));
        }
        assert!(!runs_our_hook("/x/ckpt-turn-hook", Agent::ClaudeCode));
        assert!(!runs_our_hook(
            "/x/ckpt-mount hook claude-code --x",
            Agent::ClaudeCode
        ));
        assert!(!runs_our_hook("'/x/ckpt-mount", Agent::ClaudeCode));
        let also = format!("/x/ckpt-mount hook gemini --also {}", shell_word("/a b"));
        assert!(runs_our_hook(&also, Agent::Gemini), "{also}");
        assert!(!runs_our_hook(
            "/x/ckpt-mount hook gemini --also",
            Agent::Gemini
        ));
        assert!(!runs_our_hook(
            "/x/ckpt-mount hook gemini --x /a",
            Agent::Gemini
        ));
    }
}
