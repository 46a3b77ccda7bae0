//! The turn picker of `rewind` with no turn, driven as a person drives it: the command runs on
//! a real terminal (a tmux pane, which is a terminal emulator: what it shows is the screen a
//! person reads, redraws and all), the test reads the screen, types a filter, presses Enter or
//! Esc or Ctrl-C, answers the question, and checks the folder and the operation log after.
//! Each runs on root's mount and on a normal user's own mount. CI installs tmux (`.ci/run`).

mod common;

use common::{Mounted, assert_same_tree, bin, tree};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long the screen may take to show what a step waits for.
const PATIENCE: Duration = Duration::from_secs(30);

/// One command on a terminal of its own: a tmux server on a private socket with one pane,
/// 120 columns by 40 rows, running the command, kept on the screen after the command exits so
/// that its last screen can be read, and its exit code. Dropping it ends
/// the server and what still runs in it.
struct Terminal {
    dir: tempfile::TempDir,
}

impl Terminal {
    /// Runs `program` with `args` in `cwd` on a new terminal.
    fn start(cwd: &Path, program: &str, args: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ckpt-tmux-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        std::fs::write(dir.path().join("tmux.conf"), "set -g remain-on-exit on\n")
            .expect("tmux.conf");
        let t = Self { dir };
        let cwd = cwd.to_str().expect("a UTF-8 folder");
        // The exit code is written to a file by a shell around the command: tmux 3.3 can mark
        // a pane dead before it has reaped the command, and then never say its status.
        let exit_file = t.dir.path().join("exit");
        let script = format!("\"$0\" \"$@\"; echo $? > '{}'", exit_file.display());
        let mut line = vec!["new-session", "-d", "-x", "120", "-y", "40", "-c", cwd];
        line.extend_from_slice(&["sh", "-c", &script, program]);
        line.extend_from_slice(args);
        let o = t.tmux(&line);
        assert!(o.status.success(), "tmux: {}", common::output_text(&o));
        t
    }

    /// `tmux ARGS` on this terminal's server.
    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.dir.path().join("socket"))
            .arg("-f")
            .arg(self.dir.path().join("tmux.conf"))
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux (CI installs it)")
    }

    /// The screen as a person sees it now: its lines, blank ones at the end left out.
    fn screen(&self) -> String {
        let o = self.tmux(&["capture-pane", "-p", "-t", "0"]);
        assert!(
            o.status.success(),
            "capture-pane: {}",
            common::output_text(&o)
        );
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }

    /// Waits until `ready` holds of the screen, and returns that screen; fails the test,
    /// showing the screen, after [`PATIENCE`].
    fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ready(&s) {
                return s;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "waited for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the screen shows `text`.
    fn wait_for(&self, text: &str) -> String {
        self.wait(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Types `text` as it is, one key at a time, as a person types.
    fn type_text(&self, text: &str) {
        for c in text.chars() {
            let o = self.tmux(&["send-keys", "-t", "0", "-l", &c.to_string()]);
            assert!(o.status.success(), "send-keys: {}", common::output_text(&o));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Presses a key by its tmux name (`Enter`, `Escape`, `C-c`).
    fn press(&self, key: &str) {
        let o = self.tmux(&["send-keys", "-t", "0", key]);
        assert!(o.status.success(), "send-keys: {}", common::output_text(&o));
    }

    /// Waits for the command to exit; its exit code, and the screen it left.
    fn exit(&self) -> (i32, String) {
        let start = Instant::now();
        let exit_file = self.dir.path().join("exit");
        loop {
            let o = self.tmux(&["display-message", "-p", "-t", "0", "#{pane_dead}"]);
            let dead = String::from_utf8_lossy(&o.stdout).trim() == "1";
            if let Some(code) = std::fs::read_to_string(&exit_file)
                .ok()
                .and_then(|c| c.trim().parse().ok())
                .filter(|_| dead)
            {
                return (code, self.screen());
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the command did not exit; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Whether tmux is there; under `CI=true` its absence is a failure (`.ci/run` installs it).
fn require_tmux() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmux is not installed: under CI=true this test must run (.ci/run installs it)"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: tmux is not installed (under CI=true this fails)"
        );
    }
    found
}

/// `ckpt-mount rewind` (no turn) on a terminal in the folder of `m`.
fn picker(m: &Mounted) -> Terminal {
    Terminal::start(&m.dir, bin(), &["rewind"])
}

/// Runs the CLI on `m`, which must succeed; its stdout.
fn cli(m: &Mounted, args: &[&str]) -> String {
    let o = m.cli(args);
    assert!(o.status.success(), "{args:?}: {}", common::output_text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What an agent's hook runs at a prompt: Claude Code's, for session `1f3a2b4c…`, beginning the
/// next turn labelled with the prompt's first line.
fn prompt(m: &Mounted, text: &str) {
    let payload = serde_json::json!({
        "hook_event_name": "UserPromptSubmit",
        "cwd": m.dir,
        "prompt": text,
        "session_id": "1f3a2b4c-0000-4000-8000-000000000001",
    })
    .to_string();
    let o = Command::new(bin())
        .args(["hook", "claude-code"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(payload.as_bytes())?;
            c.wait_with_output()
        })
        .expect("run the hook");
    assert!(o.status.success(), "hook: {}", common::output_text(&o));
}

/// The folder as it is, path by path.
type Tree = std::collections::BTreeMap<String, common::Node>;

/// A folder with three labelled turns after the first (`mounted`): 2 "add the parser" (begun
/// with `turn -m`), 3 "make the tests pass" (begun by Claude Code's hook; its prompt's first
/// line), 4 "tidy the docs"; each changes files. Returns the mount and the folder as it was
/// when turns 3 and 4 began.
fn three_turns() -> (Mounted, Tree, Tree) {
    let m = Mounted::with(|d| {
        std::fs::write(d.join("main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(d.join("README"), "a project\n").expect("write");
    });
    cli(&m, &["turn", "2", "-m", "add the parser"]);
    m.sh("printf 'fn parse() {}\\n' > parser.rs; printf 'mod parser;\\n' >> main.rs");
    prompt(&m, "make the tests pass\nand say why");
    let start_of_3 = tree(&m.dir, false);
    m.sh("printf '#[test] fn t() {}\\n' > tests.rs; rm parser.rs; printf 'x\\n' >> main.rs");
    cli(&m, &["turn", "4", "-m", "tidy the docs"]);
    let start_of_4 = tree(&m.dir, false);
    m.sh("printf 'a tidy project\\n' > README; mkdir docs; printf 'docs\\n' > docs/index.md");
    (m, start_of_3, start_of_4)
}

/// The list's lines on `screen`: those after the question, up to the help line.
fn listed(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.contains("Rewind to the start of which turn?"))
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// The local time a turn began, to the minute, as `date` prints it in this time zone.
fn local_minute(unix: u64) -> String {
    let o = Command::new("date")
        .arg("-d")
        .arg(format!("@{unix}"))
        .arg("+%Y-%m-%d %H:%M")
        .output()
        .expect("date");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The list on `screen` shows turns 4, 3, 2 and 1 in that order, each line with the cells
/// `log --json` (`rows`) gives: number, label, who began it (Claude Code's session for turn 3),
/// the local time it began, +created ~modified -deleted.
fn check_list(screen: &str, rows: &serde_json::Value) {
    let lines = listed(screen);
    assert_eq!(lines.len(), 4, "{screen}");
    let labels = [
        (4, "tidy the docs"),
        (3, "make the tests pass"),
        (2, "add the parser"),
        (1, "mounted"),
    ];
    for (line, (turn, label)) in lines.iter().zip(labels) {
        let row = &rows[turn - 1];
        assert_eq!(row["turn"], turn);
        let counts = format!(
            "+{} ~{} -{}",
            row["created"], row["modified"], row["deleted"]
        );
        let when = local_minute(row["time"].as_u64().expect("time"));
        // The cells: number, label, who (none for turn 1, which nothing changed), when, counts.
        let cells: Vec<&str> = line
            .trim_start_matches(['>', ' '])
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let n = cells.len();
        assert!(n >= 4, "the line of turn {turn}:\n{screen}");
        assert_eq!(
            [cells[0], cells[1], cells[n - 2], cells[n - 1]],
            [turn.to_string().as_str(), label, &when, &counts],
            "the line of turn {turn}:\n{screen}"
        );
        if turn == 3 {
            assert_eq!(cells[2], "claude-code:1f3a2b4c…", "who began it:\n{screen}");
        }
    }
}

/// `after` (an `op log --json`) is `before` with one rewind to turn 3 more, newest.
fn check_one_rewind_more(before: &str, after: &str) {
    let ops_after: serde_json::Value = serde_json::from_str(after).expect("op log json");
    let ops_before: serde_json::Value = serde_json::from_str(before).expect("op log json");
    let (after, before) = (
        ops_after.as_array().expect("ops"),
        ops_before.as_array().expect("ops"),
    );
    assert_eq!(
        after.len(),
        before.len() + 1,
        "one operation more: {ops_after}"
    );
    let texts = |ops: &[serde_json::Value]| -> Vec<String> {
        ops.iter().map(|o| o["text"].to_string()).collect()
    };
    assert_eq!(texts(&after[1..]), texts(before), "the rest as it was");
    assert_eq!(after[0]["kind"], "rewind", "{}", after[0]);
    assert_eq!(
        after[0]["text"], "rewind to turn 3 (from turn 4) (restored 3, deleted 2)",
        "{}",
        after[0]
    );
}

/// The list shows the live turns newest first, each with its label, who began it, when (local
/// time) and its counts; typing a word of a label leaves that turn alone; Enter shows the
/// preview and asks as `rewind 3` does; `y` puts the folder back as it was when turn 3 began,
/// byte for byte, and the operation log gains that one rewind.
fn pick_filter_and_rewind() {
    if !require_tmux() {
        return;
    }
    let (m, start_of_3, _) = three_turns();
    let ops_before = cli(&m, &["op", "log", "--json"]);
    let rows: serde_json::Value =
        serde_json::from_str(&cli(&m, &["log", "--json"])).expect("log json");
    let t = picker(&m);
    let screen = t.wait("the list of four turns", |s| listed(s).len() == 4);
    check_list(&screen, &rows);
    assert!(
        listed(&screen)[0].starts_with("> 4"),
        "the newest is selected:\n{screen}"
    );
    t.type_text("tests");
    let screen = t.wait("the list filtered to turn 3", |s| listed(s).len() == 1);
    assert!(
        listed(&screen)[0].starts_with("> 3  make the tests pass"),
        "{screen}"
    );
    t.press("Enter");
    let screen = t.wait_for("Proceed? [y/N]");
    assert!(screen.contains("turn 3: make the tests pass"), "{screen}");
    for line in [
        "delete   docs",
        "delete   tests.rs",
        "restore  README",
        "restore  main.rs",
        "restore  parser.rs",
        "Rewinding to the start of turn 3 will restore 3 paths",
    ] {
        assert!(
            screen.contains(line),
            "the preview says {line:?}:\n{screen}"
        );
    }
    t.type_text("y");
    t.press("Enter");
    let (code, screen) = t.exit();
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("rewound to the start of turn 3: 3 restored"),
        "{screen}"
    );
    assert_same_tree(&start_of_3, &tree(&m.dir, false));
    let ops_after = cli(&m, &["op", "log", "--json"]);
    check_one_rewind_more(&ops_before, &ops_after);
}

on_both_mounts!(
    the_picker_lists_filters_and_rewinds_to_the_turn_picked,
    the_picker_lists_filters_and_rewinds_to_the_turn_picked_on_a_users_mount,
    pick_filter_and_rewind
);

/// Esc in the picker, after typing a filter, changes nothing: the folder and the operation log
/// stay as they were, and the command ends as a "no" to the question does (exit 1). Ctrl-C
/// likewise, exiting 130.
fn esc_and_ctrl_c_change_nothing() {
    if !require_tmux() {
        return;
    }
    let (m, _, _) = three_turns();
    let before = tree(&m.dir, false);
    let ops = cli(&m, &["op", "log", "--json"]);
    for (key, want) in [("Escape", 1), ("C-c", 130)] {
        let t = picker(&m);
        t.wait("the list", |s| listed(s).len() == 4);
        t.type_text("pars");
        t.wait("the list filtered", |s| listed(s).len() == 1);
        t.press(key);
        let (code, screen) = t.exit();
        assert_eq!(code, want, "{key}:\n{screen}");
        assert!(
            screen.contains("ckpt-mount: cancelled: nothing changed"),
            "{key}:\n{screen}"
        );
        assert!(
            !screen.contains("Proceed?"),
            "{key}: nothing asked:\n{screen}"
        );
        assert_same_tree(&before, &tree(&m.dir, false));
        assert_eq!(
            cli(&m, &["op", "log", "--json"]),
            ops,
            "{key}: no operation"
        );
    }
}

on_both_mounts!(
    esc_or_ctrl_c_in_the_picker_changes_nothing,
    esc_or_ctrl_c_in_the_picker_changes_nothing_on_a_users_mount,
    esc_and_ctrl_c_change_nothing
);

/// Off a terminal `rewind` with no turn goes to the start of the current turn, as it always
/// has, without a picker: with stdin from /dev/null while stdout is still the terminal, and
/// with neither a terminal; so does `--dry-run` on the terminal.
fn off_a_terminal_as_before() {
    if !require_tmux() {
        return;
    }
    let (m, _, start_of_4) = three_turns();
    // On the terminal, --dry-run (as --yes and --json) without a turn: the current turn, no list.
    let t = Terminal::start(&m.dir, bin(), &["rewind", "--dry-run"]);
    let (code, screen) = t.exit();
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("which turn"), "no picker:\n{screen}");
    assert!(
        screen.contains("dry run, nothing changed: rewinding to the start of turn 4 would"),
        "{screen}"
    );
    let script = format!(
        "exec {} rewind --dir '{}' < /dev/null",
        bin(),
        m.dir.display()
    );
    let t = Terminal::start(&m.dir, "/bin/sh", &["-c", &script]);
    let (code, screen) = t.exit();
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("which turn"), "no picker:\n{screen}");
    assert!(
        screen.contains("rewound to the start of turn 4: 1 restored, 1 deleted"),
        "the current turn, as before:\n{screen}"
    );
    assert_same_tree(&start_of_4, &tree(&m.dir, false));
    // Neither a terminal: the plain run a script makes, now with nothing left to rewind.
    let o = Command::new(bin())
        .args(["rewind", "--dir"])
        .arg(&m.dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("rewind");
    let text = common::output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("which turn"), "{text}");
    assert!(
        text.contains("rewound to the start of turn 4: 0 restored, 0 deleted"),
        "{text}"
    );
}

on_both_mounts!(
    off_a_terminal_rewind_without_a_turn_is_as_before,
    off_a_terminal_rewind_without_a_turn_is_as_before_on_a_users_mount,
    off_a_terminal_as_before
);

/// On a folder that is not mounted the picker lists the same turns, read from the store, and
/// the rewind it leads to runs on the store as `rewind N` does there.
fn unmounted_folder() {
    if !require_tmux() {
        return;
    }
    let (mut m, _, start_of_4) = three_turns();
    m.unmount();
    let t = picker(&m);
    t.wait("the list of four turns", |s| listed(s).len() == 4);
    t.type_text("tidy");
    let screen = t.wait("the list filtered to turn 4", |s| listed(s).len() == 1);
    assert!(
        listed(&screen)[0].starts_with("> 4  tidy the docs"),
        "{screen}"
    );
    t.press("Enter");
    t.wait_for("Proceed? [y/N]");
    t.type_text("y");
    t.press("Enter");
    let (code, screen) = t.exit();
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("rewound to the start of turn 4: 1 restored, 1 deleted"),
        "{screen}"
    );
    assert_same_tree(&start_of_4, &tree(&m.dir, false));
}

on_both_mounts!(
    the_picker_works_on_an_unmounted_folder,
    the_picker_works_on_an_unmounted_folder_on_a_users_mount,
    unmounted_folder
);
