//! The command line: clap definitions and dispatch. Each subcommand lives in its own file.

mod agent;
mod complete;
mod conversations;
mod demo;
mod diff;
mod docs;
mod fsck;
mod hooks;
mod info;
mod interrupt;
mod moment;
mod mount;
mod ops;
mod picker;
mod prune;
mod restore_tree;
mod rewind;
mod run;
mod together;
mod turn;
mod versions;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// A failure the CLI reports in one line, with its exit code (1 failure, 2 usage).
#[derive(Debug)]
pub struct CliError {
    /// The line to print.
    pub message: String,
    /// The exit code.
    pub code: i32,
}

impl CliError {
    /// A reported failure (exit 1).
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
    /// Bad usage (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }
}

/// Result of a subcommand.
pub type CliResult = Result<(), CliError>;

/// Undo for AI coding agents: a FUSE passthrough that captures every change per turn.
#[derive(Debug, Parser)]
#[command(name = "ckpt-mount", version, about, long_about = None)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands. Each one's help ends with its `Example:` lines, one command line each, which
/// `tests/help_examples.rs` runs against a mounted folder (`verbatim_doc_comment` keeps them on
/// lines of their own).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount a folder over itself and capture every change per turn
    ///
    /// Example: ckpt-mount mount ~/src/site
    /// Example: ckpt-mount mount ~/src/site --max-blob 256M --compress
    /// Example: ckpt-mount mount ~/src/site -o ro,noatime
    #[command(verbatim_doc_comment)]
    Mount(mount::MountArgs),
    /// Unmount a folder; a busy mount is reported, not torn
    ///
    /// Example: ckpt-mount unmount ~/src/site
    #[command(verbatim_doc_comment)]
    Unmount(mount::UnmountArgs),
    /// Print the current turn, or begin turn N
    ///
    /// Example: ckpt-mount turn
    /// Example: ckpt-mount turn 4 -m "fix the build"
    /// Example: ckpt-mount turn --step -m "Bash: npm install"
    /// Example: ckpt-mount turn --dir ~/src/site
    /// Example: ckpt-mount turn --label 2 "refactor the parser"
    #[command(verbatim_doc_comment)]
    Turn(turn::TurnArgs),
    /// Restore the folder to the start of turn N (no N: pick it from a list on a terminal, else the current turn)
    ///
    /// Without N, on a terminal, and without --yes, --json, --dry-run or --agent NAME, the
    /// turns a rewind can go to are listed, newest first: number, label, agent, when it began,
    /// paths +created ~modified -deleted. Typing filters (words of the label or the agent, or
    /// the number); Enter picks, and the preview and the question follow as for `rewind N`;
    /// Esc changes nothing.
    ///
    /// After a rewind (whole or --agent) across turns an agent CLI's hook began, one line per
    /// agent session says how to take its conversation back to the same prompt (Claude Code
    /// and Gemini CLI: /rewind; Codex: Esc Esc); --json has them as `conversations`.
    ///
    /// Example: ckpt-mount rewind  # on a terminal: pick the turn from the list
    /// Example: ckpt-mount rewind 2 --dry-run
    /// Example: ckpt-mount rewind 2
    /// Example: ckpt-mount rewind -1 --dry-run
    /// Example: ckpt-mount rewind /second --dry-run
    /// Example: ckpt-mount rewind @23:59 --dry-run --json
    /// Example: ckpt-mount rewind 1 -- src/
    /// Example: ckpt-mount rewind 2 --agent --dry-run
    /// Example: ckpt-mount rewind 2 --agent --conflicts rewind
    /// Example: ckpt-mount rewind --agent claude-code:1f3a --dry-run
    /// Example: ckpt-mount rewind 3 --agent reviewer --agent codex
    /// Example: ckpt-mount rewind --undo
    /// Example: ckpt-mount rewind /third --all-folders --dry-run
    /// Example: ckpt-mount rewind 2 --json --dir ~/src/site
    #[command(verbatim_doc_comment)]
    Rewind(rewind::RewindArgs),
    /// List the operations (turn switches, rewinds, undos, redos, relabels, prunes), newest first
    ///
    /// Example: ckpt-mount op log
    /// Example: ckpt-mount op log --json
    #[command(verbatim_doc_comment)]
    Op(ops::OpArgs),
    /// Undo the last operation not yet undone (run again: the one before, at any depth)
    ///
    /// Example: ckpt-mount undo --dry-run
    /// Example: ckpt-mount undo
    /// Example: ckpt-mount undo --json --dir ~/src/site
    /// Example: ckpt-mount undo --all-folders --dry-run
    #[command(verbatim_doc_comment)]
    Undo(ops::UndoCommandArgs),
    /// Re-apply what the last undo undid (until a new turn, rewind or relabel)
    ///
    /// Example: ckpt-mount redo --dry-run
    /// Example: ckpt-mount redo
    #[command(verbatim_doc_comment)]
    Redo(ops::RedoCommandArgs),
    /// List turns as each ended: when, paths created/modified/deleted, bytes captured, who changed them, label
    ///
    /// Example: ckpt-mount log
    /// Example: ckpt-mount log --utc
    /// Example: ckpt-mount log --json
    #[command(verbatim_doc_comment)]
    Log(info::LogArgs),
    /// List the agents marked in the folder: their names, marks, the turns they began and changed
    ///
    /// Example: ckpt-mount agents
    /// Example: ckpt-mount agents --json
    #[command(verbatim_doc_comment)]
    Agents(agent::AgentsArgs),
    /// Show the folder, mount state, current turn and store size
    ///
    /// Example: ckpt-mount status
    /// Example: ckpt-mount status --json --dir ~/src/site
    #[command(verbatim_doc_comment)]
    Status(info::StatusArgs),
    /// Show what changed since the start of turn N (default: the current one), or in N..M
    ///
    /// Example: ckpt-mount diff
    /// Example: ckpt-mount diff 2 --stat src/
    /// Example: ckpt-mount diff 1 -- README.md
    /// Example: ckpt-mount diff 1..3 --json
    /// Example: ckpt-mount diff -1 --stat
    /// Example: ckpt-mount diff /second..3#4 --stat
    #[command(verbatim_doc_comment)]
    Diff(diff::DiffArgs),
    /// Show what one turn alone changed (from its start to the start of the next turn)
    ///
    /// Example: ckpt-mount show 2 --stat
    /// Example: ckpt-mount show 1 -- README.md
    /// Example: ckpt-mount show 3#4 --stat
    #[command(verbatim_doc_comment)]
    Show(diff::ShowArgs),
    /// Print a file as it was when turn N began (default: the current turn), rewinding nothing
    ///
    /// Example: ckpt-mount cat 2 -- README.md
    /// Example: ckpt-mount cat 1 --dir ~/src/site -- src/main.rs
    /// Example: ckpt-mount cat 3#4 -- src/main.rs
    /// Example: ckpt-mount cat /second -- src/util.rs
    #[command(verbatim_doc_comment)]
    Cat(versions::CatArgs),
    /// Copy a file (or symlink), or the whole folder, as it was when turn N began to a new path, rewinding nothing
    ///
    /// Example: ckpt-mount restore 2 --to README.old.md -- README.md
    /// Example: ckpt-mount restore -1 --to util.old.rs -- src/util.rs
    /// Example: ckpt-mount restore 2 --to ~/site-at-turn-2
    #[command(verbatim_doc_comment)]
    Restore(versions::RestoreArgs),
    /// Mount the folder if needed, run a command inside it as the agent, unmount when it exits
    ///
    /// Example: ckpt-mount run -- claude
    /// Example: ckpt-mount run --as reviewer -- codex
    /// Example: ckpt-mount run --dir ~/src/site -- bash
    #[command(verbatim_doc_comment)]
    Run(run::RunArgs),
    /// Forget the oldest turns or the undo history, and the blobs only they used
    ///
    /// Example: ckpt-mount prune --dry-run --keep-turns 2
    /// Example: ckpt-mount prune --keep-turns 2 --yes
    /// Example: ckpt-mount prune --max-size 2G
    /// Example: ckpt-mount prune --drop-undo --dry-run
    #[command(verbatim_doc_comment)]
    Prune(prune::PruneArgs),
    /// Check the store: re-hash blobs, check every record, report orphans
    ///
    /// Example: ckpt-mount fsck
    /// Example: ckpt-mount fsck --dir ~/src/site
    #[command(verbatim_doc_comment)]
    Fsck(fsck::FsckArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell
    ///
    /// Besides subcommands and options, the bash, zsh and fish scripts complete moments: where
    /// `rewind`, `diff`, `show`, `cat` or `restore` takes a turn, TAB offers the turns of the
    /// folder (--dir, else the mounted folder containing the current directory) as `log` names
    /// them (3, 3#5 for one rewind #5 retired), with their labels beside them in zsh and fish;
    /// after `/`, the labels. The scripts ask `ckpt-mount` on PATH at each TAB; where no
    /// folder is mounted they offer none.
    ///
    /// Example: ckpt-mount completions bash > ~/.local/share/bash-completion/completions/ckpt-mount
    /// Example: ckpt-mount completions zsh > ~/.zfunc/_ckpt-mount  # with fpath+=~/.zfunc in ~/.zshrc
    /// Example: ckpt-mount completions fish > ~/.config/fish/completions/ckpt-mount.fish
    #[command(verbatim_doc_comment)]
    Completions(docs::CompletionsArgs),
    /// Internal: the moments a completion script offers where a command takes one
    #[command(name = "__complete", hide = true)]
    Complete(complete::CompleteArgs),
    /// Print the man page (roff)
    ///
    /// Example: ckpt-mount man | man -l -
    /// Example: ckpt-mount man --out-dir ~/.local/share/man/man1
    #[command(verbatim_doc_comment)]
    Man(docs::ManArgs),
    /// Install or remove an agent's hook (a turn per prompt) and its /ckpt command
    ///
    /// The hook records each turn's agent, session, transcript and prompt; the /ckpt command
    /// (Claude Code and Gemini CLI: /ckpt; Codex: /prompts:ckpt) lists the turns and rewinds
    /// the folder from inside the agent, which runs `ckpt-mount log` and `ckpt-mount rewind N
    /// --yes` under its own permission prompt.
    ///
    /// An agent that works across several mounted folders gets each prompt's turn in all of
    /// them, with one prompt id: the folder it works in, its own additional directories
    /// (Claude Code: permissions.additionalDirectories; Gemini CLI: context.includeDirectories;
    /// Codex: sandbox_workspace_write.writable_roots) and the folders install --also names.
    /// `rewind N --all-folders` takes them back together, `undo --all-folders` undoes that.
    ///
    /// With --steps, each tool call that can change files also begins a step of the prompt's
    /// turn (5.1, 5.2, …, labelled with the call), a moment `rewind 5.2` goes back to.
    ///
    /// Example: ckpt-mount hooks install claude-code --dry-run
    /// Example: ckpt-mount hooks install claude-code --also ~/src/lib --dry-run
    /// Example: ckpt-mount hooks install claude-code --steps --dry-run
    #[command(verbatim_doc_comment)]
    Hooks(hooks::HooksArgs),
    /// Internal: what an agent's hook runs, with the agent's payload
    #[command(hide = true)]
    Hook(hooks::HookArgs),
    /// Build the seed scenario in a temp folder, run an agent turn with shell tools, rewind,
    /// and compare with the git recipes
    ///
    /// Example: ckpt-mount demo
    Demo(demo::DemoArgs),
}

impl Cli {
    /// Our own usage errors (exit 2): what clap's rules do not say and no folder is needed to
    /// know, such as turn 0 or `prune --keep-turns 0`. Pure: it opens nothing, so [`run()`],
    /// which calls it first, refuses bad usage before it touches any folder.
    pub fn check(&self) -> CliResult {
        match &self.command {
            Command::Mount(a) => a.check(),
            Command::Turn(a) => a.check(),
            Command::Rewind(a) => a.check(),
            Command::Prune(a) => a.check(),
            _ => Ok(()),
        }
    }
}

/// Runs the parsed command: [`Cli::check`], then the subcommand.
pub fn run(cli: Cli) -> CliResult {
    cli.check()?;
    match cli.command {
        Command::Mount(a) => mount::mount(a),
        Command::Unmount(a) => mount::unmount(a),
        Command::Turn(a) => turn::run(a),
        Command::Rewind(a) => rewind::run(a),
        Command::Log(a) => info::log(a),
        Command::Agents(a) => agent::agents(a),
        Command::Op(a) => ops::op(a),
        Command::Undo(a) => ops::undo(a),
        Command::Redo(a) => ops::redo(a),
        Command::Status(a) => info::status(a),
        Command::Demo(a) => demo::run(a),
        Command::Completions(a) => docs::completions(a),
        Command::Complete(a) => complete::run(a),
        Command::Man(a) => docs::man(a),
        Command::Fsck(a) => fsck::run(a),
        Command::Prune(a) => prune::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Show(a) => diff::show(a),
        Command::Cat(a) => versions::cat(a),
        Command::Restore(a) => versions::restore(a),
        Command::Run(a) => run::run(a),
        Command::Hooks(a) => hooks::run(a),
        Command::Hook(a) => hooks::run_hook(a),
    }
}

/// Parses sizes such as `1048576`, `512K`, `64M`, `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in {s:?} (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size too large: {s:?}"))
}

/// Where a command acts: a mounted folder (through its daemon) or an unmounted one.
#[derive(Debug, Clone)]
pub enum Target {
    /// Served by a daemon.
    Mounted(PathBuf),
    /// Not mounted: the store is opened directly.
    Offline(PathBuf),
}

/// Resolves `--dir` (default: the current directory) to the ckpt-mount folder containing it:
/// an agent's hook passes its working directory, which may be any subfolder. A `--dir` that no
/// folder contains is taken as it is, so opening it says there is no store there.
pub fn target(dir: Option<PathBuf>) -> Result<Target, CliError> {
    let folder = match dir {
        Some(d) => {
            let given = d
                .canonicalize()
                .map_err(|e| match crate::mounts::canonical(&d) {
                    Ok(c) if crate::mounts::state(&c) == crate::mounts::MountState::Dead => {
                        CliError::fail(crate::mounts::dead_mount_line(&c))
                    }
                    _ => CliError::fail(format!("cannot open {}: {e}", d.display())),
                })?;
            crate::mounts::find_folder(&given).unwrap_or(given)
        }
        None => {
            let cwd = std::env::current_dir()
                .map_err(|e| CliError::fail(format!("no current directory: {e}")))?;
            crate::mounts::find_folder(&cwd).ok_or_else(|| {
                CliError::fail("not inside a ckpt-mount folder (use --dir DIR, or mount one first)")
            })?
        }
    };
    match crate::mounts::state(&folder) {
        crate::mounts::MountState::Live => {
            warn_if_under_the_mount(&folder);
            Ok(Target::Mounted(folder))
        }
        crate::mounts::MountState::Dead => {
            Err(CliError::fail(crate::mounts::dead_mount_line(&folder)))
        }
        crate::mounts::MountState::NotMounted => Ok(Target::Offline(folder)),
    }
}

/// Whether this process's working directory is inside `folder` but on the filesystem *under*
/// its mount (a shell that stood there before the mount): what it changes there is not
/// captured.
pub fn cwd_under_the_mount(folder: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(cwd) = std::env::current_dir() else {
        return false;
    };
    if !cwd.starts_with(folder) {
        return false;
    }
    // Through the path, the mount; through ".", whatever the shell stands in.
    match (std::fs::metadata(folder), std::fs::metadata(".")) {
        (Ok(m), Ok(here)) => m.dev() != here.dev(),
        _ => false,
    }
}

/// The one line a command prints when its caller stands under the mount.
pub fn under_the_mount_line(folder: &std::path::Path) -> String {
    format!(
        "ckpt-mount: warning: this shell's working directory is the folder under the mount of {}, where changes are not captured; run: cd \"$PWD\"",
        folder.display()
    )
}

fn warn_if_under_the_mount(folder: &std::path::Path) {
    if cwd_under_the_mount(folder) {
        eprintln!("{}", under_the_mount_line(folder));
    }
}

/// Resolves `--dir` and the paths given after `--`, relative to that folder.
pub fn target_with_paths(
    dir: Option<PathBuf>,
    paths: &[PathBuf],
) -> Result<(Target, Vec<crate::relpath::RelPath>), CliError> {
    let t = target(dir)?;
    let folder = match &t {
        Target::Mounted(f) | Target::Offline(f) => f.clone(),
    };
    let rel = paths
        .iter()
        .map(|p| relative_path(&folder, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((t, rel))
}

/// A path given on the command line, as a validated path relative to `folder` (its bytes as
/// given: a name that is not UTF-8 is a path like any other).
pub fn relative_path(
    folder: &std::path::Path,
    p: &std::path::Path,
) -> Result<crate::relpath::RelPath, CliError> {
    use std::os::unix::ffi::OsStrExt;
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_default()
    };
    let rel = abs.strip_prefix(folder).unwrap_or(p);
    let mut bytes = rel.as_os_str().as_bytes();
    while let Some(shorter) = bytes.strip_suffix(b"/") {
        bytes = shorter;
    }
    crate::relpath::RelPath::new(bytes).map_err(|e| {
        CliError::usage(format!(
            "{}: {e}",
            crate::quote::quote_path(p.as_os_str().as_bytes())
        ))
    })
}

/// Calls the daemon and reads its answer as a `T`; a daemon that does not answer, or whose
/// answer cannot be read, is one line of error.
pub fn call<T: serde::de::DeserializeOwned>(
    folder: &std::path::Path,
    req: &crate::ipc::Request,
) -> Result<crate::ipc::Answer<T>, CliError> {
    crate::ipc::call(folder, req).map_err(|e| call_failed(folder, e))
}

/// The one line said when the daemon of `folder` gave no answer to read.
pub fn call_failed(folder: &std::path::Path, e: crate::ipc::CallError) -> CliError {
    match e {
        crate::ipc::CallError::Io(e) => CliError::fail(format!(
            "{} is mounted but its daemon does not answer: {e}",
            folder.display()
        )),
        crate::ipc::CallError::BadAnswer(e) => CliError::fail(format!(
            "{}: the daemon's answer cannot be read: {e}",
            folder.display()
        )),
    }
}

/// The payload of the daemon's answer to `req`, or its one line of error.
pub fn ask_daemon<T: serde::de::DeserializeOwned>(
    folder: &std::path::Path,
    req: &crate::ipc::Request,
) -> Result<T, CliError> {
    let answer = call::<T>(folder, req)?;
    match (answer.ok, answer.data) {
        (true, Some(data)) => Ok(data),
        (true, None) => Err(CliError::fail(format!(
            "{}: the daemon's answer has nothing in it",
            folder.display()
        ))),
        (false, _) => Err(CliError::fail(answer.error.unwrap_or_default())),
    }
}

/// Asks the engine `query` (`crate::engine`): through the daemon of a mounted folder, or on
/// the store of an unmounted one, the answer read as the same type either way. The daemon's
/// refusal is its one line; `offline` words the engine's refusal on an unmounted folder.
pub fn query<T>(
    t: Target,
    query: crate::engine::Query,
    offline: impl FnOnce(&std::path::Path, crate::engine::EngineError) -> CliError,
) -> Result<T, CliError>
where
    T: serde::de::DeserializeOwned
        + TryFrom<crate::engine::Answer, Error = crate::engine::OtherAnswer>,
{
    match t {
        Target::Mounted(folder) => ask_daemon(&folder, &crate::ipc::Request::from(query)),
        Target::Offline(folder) => {
            let (root, mut store) = open_offline(&folder)?;
            let name = folder.display().to_string();
            let root = std::os::fd::AsFd::as_fd(&root);
            let answer = crate::engine::query(root, &mut store, &name, None, &query)
                .map_err(|e| offline(&folder, e))?;
            T::try_from(answer).map_err(|e| CliError::fail(e.to_string()))
        }
    }
}

/// Prints an answer as `--json` prints it: pretty, the keys of each object in name order (the
/// order the answers were printed in when the CLI read them as untyped JSON).
pub fn print_json<T: serde::Serialize>(value: &T) {
    let text = serde_json::to_value(value).and_then(|v| serde_json::to_string_pretty(&v));
    println!("{}", text.unwrap_or_default());
}

/// Opens an unmounted folder as an `O_PATH` descriptor, from which its store is reached.
pub fn open_folder(folder: &std::path::Path) -> Result<std::os::fd::OwnedFd, CliError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(folder.as_os_str().as_bytes())
        .map_err(|_| CliError::fail("path contains NUL"))?;
    crate::sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| CliError::fail(format!("cannot open {}: {e}", folder.display())))
}

/// Opens the store of an unmounted folder (root descriptor and store).
pub fn open_offline(
    folder: &std::path::Path,
) -> Result<(std::os::fd::OwnedFd, crate::store::Store), CliError> {
    let root = open_folder(folder)?;
    let store = crate::store::Store::open(
        std::os::fd::AsFd::as_fd(&root),
        crate::store::IfMissing::Refuse,
        crate::tree::Durability::Lazy,
    )
    .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
    Ok((root, store))
}

#[cfg(test)]
mod tests;
