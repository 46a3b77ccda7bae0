//! Every example in every `--help` runs. The subcommands are found by walking clap's command
//! tree (nested ones too), each one's `--help` is asked of the binary, and each `Example:` line
//! is run as written by bash, against a freshly prepared folder that is really mounted, and
//! must exit 0 (or the status the line documents with a trailing `# exits N`). Seen in issue
//! 14: the help's own `ckpt-mount diff 2 --stat src/` was a usage error.
//!
//! An example is never skipped. What makes one runnable here is a rule written below, the same
//! for every example, so an example added later is run by the same rules:
//!
//! 1. `ckpt-mount` is the binary under test, first on PATH.
//! 2. HOME is a scratch home. The folder the examples name, `~/src/site`, is in it: a README,
//!    `src/main.rs`, `src/lib.rs` and `notes.txt`, mounted, then turns 1, 2 and 3 each with
//!    changes (files modified, created, deleted, in `src/` and at the top), then turn 3
//!    rewound, so there is a last rewind for `--undo`. Turn 3 is current. Turn 2's changes to
//!    `src/lib.rs` and `src/util.rs` are made by scripts under `ckpt-mount run --as reviewer`
//!    and `--as codex`, and turn 3 is begun by Claude Code's hook (session `1f3a2b4c-…`, the
//!    test process standing for the agent CLI), so three agents are marked and
//!    `rewind --agent NAME` has each one's changes to rewind. A second folder, `~/src/lib`
//!    (`lib.rs`), is mounted too, and the hook of turn 3 runs with `--also ~/src/lib`, so the
//!    prompt began a turn in both (`rewind --all-folders`).
//! 3. The state: the folder is mounted, except for the examples of a subcommand in
//!    [`NEEDS_UNMOUNTED`] (`mount` mounts it itself).
//! 4. Where an example runs: one that names the folder (`~/src/site`) runs from the home
//!    directory, as from any other place; one that does not runs inside the mounted folder,
//!    which is what `--dir` defaults to.
//! 5. An agent an example starts after `--` (`claude`, `codex`, `gemini`, `aider`) is a stand-in script
//!    first on PATH: it changes a file in its working directory and notes that it ran (a real
//!    agent is never started, even where one is installed). The test checks that it ran.
//! 6. Standard input is empty, so an interactive program (a shell, an agent) ends at once;
//!    `MANPAGER` and `PAGER` are `cat`, so `man` prints instead of waiting for a terminal.
//! 7. A redirection's file gets its directory made first, as the user would with `mkdir -p`;
//!    one under an absolute path outside the scratch home (`> /etc/…`) is written under the
//!    scratch folder's `root/` instead. The test checks the file is written and not empty.

mod common;

use clap::CommandFactory;
use common::{bin, require_fuse};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Subcommands whose examples start from an unmounted folder (rule 3).
const NEEDS_UNMOUNTED: &[&str] = &["mount"];

/// Agents the examples may start, replaced by stand-ins (rule 5).
const AGENTS: &[&str] = &["claude", "codex", "gemini", "aider"];

/// The folder the examples name (rule 2), relative to HOME.
const SITE: &str = "src/site";

/// The second folder the agent works in (rule 2), relative to HOME.
const LIB: &str = "src/lib";

/// The Claude Code session whose hook begins turn 3 (rule 2).
const SESSION: &str = "1f3a2b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b";

/// One example: the subcommand path that shows it and the line.
struct Example {
    path: Vec<String>,
    line: String,
}

/// The `Example:` lines of every command's `--help`, walking the clap tree (clap's own `help`
/// subcommand aside).
fn examples() -> Vec<Example> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, found: &mut Vec<Example>) {
        let out = Command::new(bin())
            .args(path.iter())
            .arg("--help")
            .output()
            .expect("run --help");
        assert!(out.status.success(), "{path:?} --help failed");
        let help = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = help
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Example:"))
            .map(str::trim)
            .collect();
        assert!(
            path.len() != 1 || !lines.is_empty(),
            "`ckpt-mount {} --help` shows no example",
            path.join(" ")
        );
        found.extend(lines.into_iter().map(|line| Example {
            path: path.clone(),
            line: line.to_string(),
        }));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() == "help" {
                continue;
            }
            path.push(sub.get_name().to_string());
            walk(sub, path, found);
            path.pop();
        }
    }
    let mut found = Vec::new();
    walk(
        &ckpt_mount::cli::Cli::command(),
        &mut Vec::new(),
        &mut found,
    );
    found
}

/// The status an example documents (`# exits N` at its end), else 0.
fn expected_status(line: &str) -> i32 {
    line.rsplit_once("# exits ")
        .and_then(|(_, n)| {
            n.split_whitespace()
                .next()?
                .trim_end_matches(':')
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Unmounts the folder when dropped if it is mounted then, even when the test panics.
struct UnmountGuard(PathBuf);

impl Drop for UnmountGuard {
    fn drop(&mut self) {
        if !ckpt_mount::mounts::is_ckpt_mount(&self.0) {
            return;
        }
        let ok = Command::new(bin())
            .arg("unmount")
            .arg(&self.0)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// The scratch home with its prepared folder (rule 2) and the stand-ins (rule 5).
struct Scratch {
    home: PathBuf,
    site: PathBuf,
    lib: PathBuf,
    path_env: String,
    standin_log: PathBuf,
    // Dropped after the guard of whoever mounted the folder (see `run_example`).
    tmp: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-examples-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let home = tmp.path().join("home");
        let site = home.join(SITE);
        std::fs::create_dir_all(site.join("src")).expect("mkdir site");
        let lib = home.join(LIB);
        std::fs::create_dir_all(&lib).expect("mkdir lib");
        let bindir = tmp.path().join("bin");
        std::fs::create_dir(&bindir).expect("mkdir bin");
        std::os::unix::fs::symlink(bin(), bindir.join("ckpt-mount")).expect("symlink binary");
        let standin_log = tmp.path().join("standins-ran");
        for agent in AGENTS {
            let script = bindir.join(agent);
            std::fs::write(
                &script,
                "#!/bin/sh\n# A stand-in for the agent: one change in its working directory.\n\
                 echo \"$(basename \"$0\") was here\" >> agent-notes.txt\n\
                 basename \"$0\" >> \"$STANDIN_LOG\"\n",
            )
            .expect("write stand-in");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("chmod stand-in");
        }
        let path_env = format!(
            "{}:{}",
            bindir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Self {
            home,
            site,
            lib,
            path_env,
            standin_log,
            tmp,
        }
    }

    /// `ckpt-mount ARGS --dir SITE`, which must succeed.
    fn cli(&self, args: &[&str]) {
        let out = Command::new(bin())
            .args(args)
            .arg("--dir")
            .arg(&self.site)
            .output()
            .expect("run ckpt-mount");
        assert!(
            out.status.success(),
            "preparing the folder: ckpt-mount {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `ckpt-mount run --as NAME -- sh -c SCRIPT` in the folder, which must succeed.
    fn run_as(&self, name: &str, script: &str) {
        let out = Command::new(bin())
            .args(["run", "--as", name, "--dir"])
            .arg(&self.site)
            .args(["--", "sh", "-c", script])
            .current_dir(&self.site)
            .output()
            .expect("run ckpt-mount run");
        assert!(
            out.status.success(),
            "preparing the folder: run --as {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Claude Code's prompt hook for `prompt`, in session [`SESSION`]: the next turn begins.
    fn hook_claude_code(&self, prompt: &str) {
        use std::io::Write;
        let payload = serde_json::json!({
            "cwd": self.site,
            "prompt": prompt,
            "session_id": SESSION,
        });
        let mut child = Command::new(bin())
            .args(["hook", "claude-code", "--also"])
            .arg(&self.lib)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ckpt-mount hook");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(payload.to_string().as_bytes())
            .expect("write the payload");
        drop(stdin);
        let out = child.wait_with_output().expect("wait for the hook");
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "preparing the folder: the hook said: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.site.join(rel), text).expect("write through the mount");
    }

    /// `mount DIR`, which must succeed; the guard unmounts it.
    fn mount(dir: &Path) -> UnmountGuard {
        let out = Command::new(bin())
            .arg("mount")
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        UnmountGuard(dir.to_path_buf())
    }

    /// The files, then the mounts and their history (rule 2); returns the guards that
    /// unmount the folder and the second folder.
    fn prepare(&self) -> (UnmountGuard, UnmountGuard) {
        std::fs::write(self.lib.join("lib.rs"), "pub fn lib() {}\n").expect("write lib.rs");
        let lib_guard = Self::mount(&self.lib);
        self.write("README.md", "# site\n");
        self.write("notes.txt", "todo\n");
        self.write("src/main.rs", "fn main() {}\n");
        self.write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
        let guard = Self::mount(&self.site);
        // Turn 1.
        self.write("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
        self.write("src/util.rs", "pub fn two() -> u32 {\n    2\n}\n");
        // Turn 2.
        self.cli(&["turn", "2", "-m", "second"]);
        let lib = "printf 'pub fn one() -> u32 {\\n    1 + 0\\n}\\n' > src/lib.rs";
        self.run_as("reviewer", lib);
        self.run_as("codex", "echo '// codex' >> src/util.rs");
        self.write("README.md", "# site\n\nA small site.\n");
        std::fs::remove_file(self.site.join("notes.txt")).expect("rm notes.txt");
        // Turn 3, begun by Claude Code's hook (this process is the agent CLI that ran it),
        // then rewound: turn 3 is current and `rewind --undo` has a rewind to undo.
        self.hook_claude_code("third");
        self.write("src/main.rs", "fn main() {\n    println!(\"bye\");\n}\n");
        self.write("docs.md", "docs\n");
        self.cli(&["rewind", "3"]);
        // Turn 4 begun and undone: `redo` has it to re-apply, and `undo` and `rewind --undo`
        // still have the rewind to undo.
        self.cli(&["turn", "4"]);
        self.cli(&["undo"]);
        std::fs::write(self.lib.join("lib.rs"), "pub fn lib2() {}\n").expect("write lib.rs");
        (guard, lib_guard)
    }

    /// The file a redirection writes (rule 7), its directory made first.
    fn redirection_target(&self, line: &str) -> Option<PathBuf> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let target = words
            .iter()
            .position(|w| *w == ">" || *w == ">>")
            .and_then(|i| words.get(i + 1))?;
        let path = match target.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None if target.starts_with('/') => self.tmp.path().join("root").join(&target[1..]),
            None => self.site.join(target),
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir for a redirection");
        }
        Some(path)
    }

    /// The line as bash runs it: `> /abs` re-rooted (rule 7).
    fn runnable(&self, line: &str) -> String {
        let root = self.tmp.path().join("root");
        line.replace("> /", &format!("> {}/", root.display()))
    }

    fn run(&self, line: &str, cwd: &Path) -> Output {
        let mut child = Command::new("timeout");
        child
            .arg("300")
            .args(["bash", "-o", "pipefail", "-c", &self.runnable(line)])
            .current_dir(cwd)
            .env("PATH", &self.path_env)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("STANDIN_LOG", &self.standin_log)
            .env_remove("CKPT_FAILPOINT")
            .stdin(Stdio::null());
        child.output().expect("run bash")
    }
}

/// Runs one example by the rules; returns what went wrong, if anything.
fn run_example(ex: &Example) -> Option<String> {
    let scratch = Scratch::new();
    let (site_guard, lib_guard) = scratch.prepare();
    let mut guard = Some(site_guard);
    let sub = ex.path.first().map(String::as_str).unwrap_or_default();
    if NEEDS_UNMOUNTED.contains(&sub) {
        drop(guard.take());
        assert!(!ckpt_mount::mounts::is_ckpt_mount(&scratch.site));
    }
    let names_the_folder = ex.line.contains(&format!("~/{SITE}"));
    let cwd = if names_the_folder {
        scratch.home.clone()
    } else {
        scratch.site.clone()
    };
    let target = scratch.redirection_target(&ex.line);
    let out = scratch.run(&ex.line, &cwd);
    // Whatever the example left mounted is unmounted before the folder goes.
    drop(guard);
    drop(UnmountGuard(scratch.site.clone()));
    drop(lib_guard);
    let want = expected_status(&ex.line);
    let got = out.status.code().unwrap_or(-1);
    let said = format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if got != want {
        let usage = if got == 2 { " (a usage error)" } else { "" };
        return Some(format!(
            "{:?} exited {got}{usage}, not {want}\n{said}",
            ex.line
        ));
    }
    if let Some(t) = target
        && std::fs::metadata(&t).map_or(0, |m| m.len()) == 0
    {
        return Some(format!("{:?} wrote nothing to {}", ex.line, t.display()));
    }
    let ran = std::fs::read_to_string(&scratch.standin_log).unwrap_or_default();
    // An agent is started by what follows `--` (`run -- claude`); `hooks install codex` only
    // names one.
    let command: Vec<&str> = ex
        .line
        .split_whitespace()
        .skip_while(|w| *w != "--")
        .collect();
    for agent in AGENTS {
        if command.contains(agent) && !ran.lines().any(|l| l == *agent) {
            return Some(format!("{:?} never started {agent}\n{said}", ex.line));
        }
    }
    None
}

#[test]
fn every_example_of_every_help_runs_against_a_mounted_folder() {
    if !require_fuse() {
        return;
    }
    let all = examples();
    assert!(all.len() >= 13, "only {} examples found", all.len());
    let failures: Vec<String> = all.iter().filter_map(run_example).collect();
    assert!(
        failures.is_empty(),
        "{} of {} examples fail:\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_rules_read_what_the_examples_write() {
    assert_eq!(expected_status("ckpt-mount fsck"), 0);
    assert_eq!(
        expected_status("ckpt-mount fsck  # exits 1: the store is damaged"),
        1
    );
    let s = Scratch::new();
    assert_eq!(
        s.redirection_target("ckpt-mount completions bash > ~/.x/y"),
        Some(s.home.join(".x/y"))
    );
    let abs = s.redirection_target("ckpt-mount completions bash > /etc/b/c");
    assert_eq!(abs, Some(s.tmp.path().join("root/etc/b/c")));
    assert!(s.tmp.path().join("root/etc/b").is_dir());
    assert_eq!(
        s.runnable("a > /etc/b/c"),
        format!("a > {}/etc/b/c", s.tmp.path().join("root").display())
    );
    assert_eq!(s.redirection_target("ckpt-mount status"), None);
}
