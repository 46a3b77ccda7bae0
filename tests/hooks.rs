//! The agent integrations as a user meets them: `hooks install` into a temporary home (run
//! twice, beside other settings, on a broken file, then `uninstall`), the installed command run
//! with a recorded payload against a real mount, and the scripts in mount-scripts/.

mod common;
use common::agents::{ckpt, ckpt_env, home, hook_commands, run_hook_command};
use common::mount_script as script;
use common::output_text as text;
use common::{Mounted, bin, require_fuse, transcript};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The recorded Claude Code payload, its `cwd` pointed at `cwd`.
fn recorded_payload(cwd: &Path) -> String {
    let recorded =
        std::fs::read_to_string(script("claude-code/payload.example.json")).expect("payload");
    recorded.replace("/home/me/src/site", &cwd.display().to_string())
}

fn labels(m: &Mounted) -> Vec<String> {
    let log = m.cli(&["log", "--json"]);
    assert!(log.status.success(), "{}", text(&log));
    let rows: serde_json::Value = serde_json::from_slice(&log.stdout).expect("json");
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| r["label"].as_str().unwrap_or("").to_string())
        .collect()
}

fn current_turn(m: &Mounted) -> String {
    std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn")
}

/// Where each agent keeps the user's settings, under a home.
fn user_settings(agent: &str, home: &Path) -> PathBuf {
    match agent {
        "claude-code" => home.join(".claude/settings.json"),
        "codex" => home.join(".codex/hooks.json"),
        _ => home.join(".gemini/settings.json"),
    }
}

#[test]
fn installing_twice_changes_nothing_the_second_time() {
    for (agent, event) in [
        ("claude-code", "UserPromptSubmit"),
        ("codex", "UserPromptSubmit"),
        ("gemini", "BeforeAgent"),
    ] {
        let h = home();
        let o = ckpt(h.path(), &["hooks", "install", agent]);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        let settings = user_settings(agent, h.path());
        let first = std::fs::read(&settings).expect("settings written");
        let mtime = std::fs::metadata(&settings).expect("meta").modified().ok();
        assert_eq!(
            hook_commands(&settings, event),
            vec![format!("{} hook {agent}", bin())],
            "{agent}"
        );
        let o = ckpt(h.path(), &["hooks", "install", agent]);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        assert!(text(&o).contains("already"), "{agent}: {}", text(&o));
        assert_eq!(
            std::fs::read(&settings).expect("settings"),
            first,
            "{agent}"
        );
        assert_eq!(
            std::fs::metadata(&settings).expect("meta").modified().ok(),
            mtime,
            "{agent}: the second install rewrote the file"
        );
    }
}

#[test]
fn other_settings_survive_install_and_uninstall_unchanged() {
    let h = home();
    let settings = h.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
    // Pretty-printed with two spaces, keys in no sorted order: what the agent writes.
    let original = r#"{
  "permissions": {
    "allow": [
      "Bash(npm test)"
    ]
  },
  "hooks": {
    "UserPromptSubmit": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/remind-me"
          }
        ]
      }
    ],
    "Stop": [
      {
        "matcher": "",
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 5
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"#;
    std::fs::write(&settings, original).expect("write settings");
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        hook_commands(&settings, "UserPromptSubmit"),
        vec![
            "~/bin/remind-me".to_string(),
            format!("{} hook claude-code", bin())
        ]
    );
    assert_eq!(
        hook_commands(&settings, "Stop"),
        vec!["notify-send done".to_string()]
    );
    let o = ckpt(h.path(), &["hooks", "uninstall", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        original
    );
    // A second uninstall finds nothing of ours, and says so.
    let o = ckpt(h.path(), &["hooks", "uninstall", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not in"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        original
    );
}

#[test]
fn install_dry_run_and_uninstall_say_what_they_do() {
    let h = home();
    let hp = h.path().display().to_string();
    let mut t = String::new();
    for args in [
        &["hooks", "install", "claude-code", "--dry-run"][..],
        &["hooks", "install", "claude-code"],
        &["hooks", "install", "claude-code"],
        &["hooks", "uninstall", "claude-code", "--dry-run"],
        &["hooks", "uninstall", "claude-code"],
        &["hooks", "install", "aider"],
    ] {
        let o = ckpt(h.path(), args);
        t.push_str(&transcript(args, &o, &[(&hp, "[HOME]"), (bin(), "[BIN]")]));
    }
    // A file that held nothing but our hook is gone again, and aider wrote nothing.
    assert!(!h.path().join(".claude/settings.json").exists());
    assert!(
        std::fs::read_dir(h.path().join(".claude"))
            .expect("dir")
            .next()
            .is_none()
    );
    assert!(!h.path().join(".aider.conf.yml").exists());
    insta::assert_snapshot!(t);
}

#[test]
fn a_malformed_settings_file_is_refused_in_one_line_and_left_alone() {
    // A comment is not JSON to Claude Code and Codex; Gemini CLI allows comments, not this.
    for (agent, broken) in [
        (
            "claude-code",
            "{\n  \"model\": \"opus\",\n  // a comment\n}\n",
        ),
        ("codex", "{\n  \"model\": \"opus\",\n  // a comment\n}\n"),
        ("gemini", "{\n  // a comment\n  \"model\": 'pro'\n}\n"),
    ] {
        let h = home();
        let settings = user_settings(agent, h.path());
        std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
        std::fs::write(&settings, broken).expect("write");
        for args in [
            &["hooks", "install", agent][..],
            &["hooks", "uninstall", agent],
        ] {
            let o = ckpt(h.path(), args);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains("is not valid JSON"), "{args:?}: {err}");
            assert!(err.contains("nothing was written"), "{args:?}: {err}");
            assert_eq!(std::fs::read_to_string(&settings).expect("read"), broken);
        }
    }
}

/// Gemini CLI's settings may hold comments (it strips them before it parses): install adds
/// the hook and keeps every comment, trailing comma and line as it was; the installed hook
/// runs; uninstall gives back the file byte for byte; a file of comments alone stays.
#[test]
fn gemini_settings_with_comments_keep_them_through_install_and_uninstall() {
    let h = home();
    let settings = user_settings("gemini", h.path());
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
    let original = r#"// My Gemini CLI settings.
{
  /* which model, and why:
     the fast one */
  "model": { "name": "gemini-2.5-flash" }, // changed in May
  "general": {
    "vimMode": true, // trailing comma next
  },
}
"#;
    std::fs::write(&settings, original).expect("write settings");
    let o = ckpt(h.path(), &["hooks", "install", "gemini"]);
    assert!(o.status.success(), "{}", text(&o));
    let installed = std::fs::read_to_string(&settings).expect("settings");
    let ours = format!("\"command\": \"{} hook gemini\"", bin());
    assert_eq!(installed.matches(&ours).count(), 1, "{installed}");
    assert!(installed.contains("\"BeforeAgent\""), "{installed}");
    for line in original.lines().filter(|l| *l != "}") {
        assert!(installed.contains(line), "lost {line:?}:\n{installed}");
    }
    // Installing again changes nothing.
    let o = ckpt(h.path(), &["hooks", "install", "gemini"]);
    assert!(text(&o).contains("already"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        installed
    );
    let o = ckpt(h.path(), &["hooks", "uninstall", "gemini"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("removed the Gemini CLI hook"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        original
    );

    // Comments and an empty object: the hook comes and goes, the comments stay, and so does
    // the file.
    let bare = "// nothing set yet\n{}\n";
    std::fs::write(&settings, bare).expect("write settings");
    let o = ckpt(h.path(), &["hooks", "install", "gemini"]);
    assert!(o.status.success(), "{}", text(&o));
    let installed = std::fs::read_to_string(&settings).expect("settings");
    assert!(installed.starts_with("// nothing set yet\n"), "{installed}");
    assert!(installed.contains(&ours), "{installed}");
    let o = ckpt(h.path(), &["hooks", "uninstall", "gemini"]);
    assert!(o.status.success(), "{}", text(&o));
    let left = std::fs::read_to_string(&settings).expect("the file stays");
    assert!(left.starts_with("// nothing set yet\n"), "{left}");
    assert!(!left.contains("hook gemini"), "{left}");
}

#[test]
fn the_scope_is_the_users_own_or_the_projects() {
    let h = home();
    let project = h.path().join("site");
    std::fs::create_dir(&project).expect("mkdir");
    let o = ckpt(
        h.path(),
        &[
            "hooks",
            "install",
            "claude-code",
            "--project",
            &project.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        hook_commands(&project.join(".claude/settings.json"), "UserPromptSubmit").len(),
        1
    );
    // The /ckpt command goes with the hook; Codex reads prompts from its home alone.
    assert!(project.join(".claude/commands/ckpt.md").is_file());
    let p = project.display().to_string();
    let o = ckpt(h.path(), &["hooks", "install", "codex", "--project", &p]);
    assert!(
        text(&o).contains("no /prompts:ckpt was installed"),
        "{}",
        text(&o)
    );
    assert!(!project.join(".codex/prompts").exists());
    assert!(
        !h.path().join(".claude").exists(),
        "the user's settings were written"
    );
    // Each agent's own variable for a relocated configuration.
    let elsewhere = h.path().join("elsewhere");
    for (agent, var, file, command) in [
        (
            "claude-code",
            "CLAUDE_CONFIG_DIR",
            "settings.json",
            "commands/ckpt.md",
        ),
        ("codex", "CODEX_HOME", "hooks.json", "prompts/ckpt.md"),
        (
            "gemini",
            "GEMINI_CLI_HOME",
            ".gemini/settings.json",
            ".gemini/commands/ckpt.toml",
        ),
    ] {
        let o = ckpt_env(
            h.path(),
            &["hooks", "install", agent],
            &[(var, elsewhere.as_path())],
        );
        assert!(o.status.success(), "{agent}: {}", text(&o));
        assert!(elsewhere.join(file).is_file(), "{agent}: {}", text(&o));
        assert!(elsewhere.join(command).is_file(), "{agent}: {}", text(&o));
    }
    assert!(!h.path().join(".claude").exists());
    assert!(!h.path().join(".codex").exists());
    assert!(!h.path().join(".gemini").exists());
}

/// A `/ckpt` command the user edited stays through `install` and `uninstall`, which say so; one
/// install wrote for another copy of the binary is updated, then removed.
#[test]
fn an_edited_ckpt_command_is_kept_and_said() {
    let h = home();
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    let file = h.path().join(".claude/commands/ckpt.md");
    let ours = std::fs::read_to_string(&file).expect("read");
    let moved = ours.replace(bin(), "/opt/old/ckpt-mount");
    std::fs::write(&file, &moved).expect("write");
    let o = ckpt(h.path(), &["hooks", "install", "claude-code", "--dry-run"]);
    assert!(text(&o).contains("would change"), "{}", text(&o));
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(
        text(&o).contains("updated the /ckpt command"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), ours);
    let edited = format!("{ours}\nAlso run the tests afterwards.\n");
    std::fs::write(&file, &edited).expect("write");
    for action in ["install", "uninstall"] {
        let o = ckpt(h.path(), &["hooks", action, "claude-code"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains(&file.display().to_string()),
            "{action}: {}",
            text(&o)
        );
        assert_eq!(std::fs::read_to_string(&file).expect("read"), edited);
    }
    std::fs::write(&file, &moved).expect("write");
    let o = ckpt(h.path(), &["hooks", "uninstall", "claude-code"]);
    assert!(
        text(&o).contains("removed the /ckpt command"),
        "{}",
        text(&o)
    );
    assert!(!h.path().join(".claude/commands").exists());
}

#[test]
fn a_settings_file_behind_a_symlink_stays_a_symlink() {
    let h = home();
    let dotfiles = h.path().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).expect("mkdir");
    std::fs::create_dir_all(h.path().join(".claude")).expect("mkdir");
    std::fs::write(dotfiles.join("claude.json"), "{\"model\": \"opus\"}\n").expect("write");
    let link = h.path().join(".claude/settings.json");
    std::os::unix::fs::symlink(dotfiles.join("claude.json"), &link).expect("symlink");
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        hook_commands(&dotfiles.join("claude.json"), "UserPromptSubmit").len(),
        1
    );
}

/// A mounted folder with a subfolder, the agent's working directory.
/// Claude Code's hook installed in the scratch home `h`, and the recorded prompt payload for
/// the folder `sub`: the shell command the agent runs at a prompt (`HOOK < payload`).
fn claude_code_prompt(h: &Path, sub: &Path) -> String {
    let o = ckpt(h, &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    let commands = hook_commands(&user_settings("claude-code", h), "UserPromptSubmit");
    let payload = h.join("payload.json");
    std::fs::write(&payload, recorded_payload(sub)).expect("payload");
    format!("{} < {}", commands[0], payload.display())
}

fn mounted_with_subfolder() -> (Mounted, PathBuf) {
    let m = Mounted::with(|d| {
        std::fs::create_dir_all(d.join("src/deep")).expect("mkdir");
        std::fs::write(d.join("src/deep/page.html"), "<h1>blue</h1>\n").expect("write");
    });
    let sub = m.path("src/deep");
    (m, sub)
}

#[test]
fn the_installed_hook_begins_a_labelled_turn_from_a_subfolder() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    for (agent, event) in [
        ("claude-code", "UserPromptSubmit"),
        ("codex", "UserPromptSubmit"),
        ("gemini", "BeforeAgent"),
    ] {
        let h = home();
        let o = ckpt(h.path(), &["hooks", "install", agent]);
        assert!(o.status.success(), "{}", text(&o));
        let commands = hook_commands(&user_settings(agent, h.path()), event);
        assert_eq!(commands.len(), 1);
        let payload = recorded_payload(&sub).replace("Make the header", &format!("{agent}: make"));
        // The agent runs the hook from wherever it likes; the payload says where it works.
        let o = run_hook_command(&commands[0], &payload, &[]);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        assert!(
            o.stdout.is_empty(),
            "{agent}: success prints nothing: {}",
            text(&o)
        );
    }
    assert_eq!(current_turn(&m), "4\n");
    assert_eq!(
        labels(&m),
        vec![
            "mounted",
            "claude-code: make blue",
            "codex: make blue",
            "gemini: make blue"
        ]
    );
    // The turns capture: the next change is undone by rewinding the last one.
    std::fs::write(m.path("src/deep/page.html"), "<h1>red</h1>\n").expect("write");
    m.rewind(4);
    assert_eq!(
        std::fs::read_to_string(m.path("src/deep/page.html")).expect("read"),
        "<h1>blue</h1>\n"
    );
}

#[test]
fn the_hook_marks_the_agent_that_ran_it_so_its_changes_are_told_apart() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    let h = home();
    let prompt = claude_code_prompt(h.path(), &sub);
    // The agent CLI (here `timeout`, a program that is not a shell) runs the hook through
    // `sh -c`, as the agents do, at each of two prompts, and after each its tool writes a file.
    let script = format!("{prompt} && echo 1 > page2.html && {prompt} && echo 2 > page2.html");
    let o = Command::new("timeout")
        .args(["30", "sh", "-c", &script])
        .current_dir(&sub)
        .output()
        .expect("agent");
    assert!(o.status.success(), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    // The user, meanwhile, outside the agent's process tree.
    std::fs::write(sub.join("notes.html"), "mine\n").expect("write");
    let status = m.cli(&["status", "--json"]);
    assert!(status.status.success(), "{}", text(&status));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    let agents = status["agents"].as_array().expect("agents");
    assert_eq!(
        agents.len(),
        1,
        "marked once, however many prompts: {agents:?}"
    );
    assert_eq!(agents[0]["comm"], "timeout");
    assert_eq!(agents[0]["via"], "hook");
    assert_eq!(agents[0]["session"], "abc123");
    let show = m.cli(&["show", "--json"]);
    let changes: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
    let agent_of = |path: &str| {
        let c = changes
            .as_array()
            .expect("changes")
            .iter()
            .find(|c| c["path"] == path)
            .unwrap_or_else(|| panic!("{path} in {changes}"));
        c["actors"][0]["agent"].as_bool()
    };
    assert_eq!(agent_of("src/deep/page2.html"), Some(true));
    assert_eq!(agent_of("src/deep/notes.html"), Some(false));
    let preview = m.cli(&["rewind", "2", "--agent", "--dry-run"]);
    let preview = text(&preview);
    assert!(
        preview.contains("delete   src/deep/page2.html"),
        "{preview}"
    );
    assert!(
        preview.contains("keep     src/deep/notes.html"),
        "{preview}"
    );
}

/// Two Claude Code sessions in one folder, each in its own agent CLI process: each hook names
/// its session, so they are two agents (`claude-code:s-one`, `claude-code:s-two`); the turns
/// each began are recorded; `rewind --agent claude-code:s-one` without a turn goes back to the
/// start of the latest turn that session began and takes back that session's change alone,
/// keeping the other session's and the user's (anthropics/claude-code#28078).
#[test]
fn two_sessions_are_two_agents_and_one_is_rewound_alone() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    let h = home();
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    let commands = hook_commands(&user_settings("claude-code", h.path()), "UserPromptSubmit");
    let session = |id: &str, prompt: &str| {
        let mut payload: serde_json::Value =
            serde_json::from_str(&recorded_payload(&sub)).expect("payload");
        payload["session_id"] = serde_json::json!(id);
        payload["prompt"] = serde_json::json!(prompt);
        let file = h.path().join(format!("{id}.json"));
        std::fs::write(&file, payload.to_string()).expect("payload");
        format!("{} < {}", commands[0], file.display())
    };
    // Session one: a prompt, then its tool writes; session two the same, after it; session
    // one's second prompt and write come last. Each session is its own agent CLI process.
    let one = format!(
        "{} && echo one > one.html && sleep 0.6 && {} && echo again > one.html",
        session("s-one", "first of one"),
        session("s-one", "second of one")
    );
    let two = format!(
        "sleep 0.2 && {} && echo two > two.html",
        session("s-two", "first of two")
    );
    let spawn = |script: &str| {
        Command::new("timeout")
            .args(["30", "sh", "-c", script])
            .current_dir(&sub)
            .spawn()
            .expect("agent")
    };
    let (mut a, mut b) = (spawn(&one), spawn(&two));
    assert!(a.wait().expect("one").success());
    assert!(b.wait().expect("two").success());
    std::fs::write(sub.join("notes.html"), "mine\n").expect("write");
    let agents = m.cli(&["agents", "--json"]);
    let agents: serde_json::Value = serde_json::from_slice(&agents.stdout).expect("json");
    let rows: Vec<(String, Vec<u64>)> = agents
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let began = r["began"].as_array().expect("began");
            (
                r["name"].as_str().expect("name").to_string(),
                began.iter().map(|t| t.as_u64().expect("turn")).collect(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("claude-code:s-one".to_string(), vec![2, 4]),
            ("claude-code:s-two".to_string(), vec![3]),
        ],
        "{agents}"
    );
    let before = common::tree(&m.dir, false);
    let preview = text(&m.cli(&["rewind", "--agent", "claude-code:s-one", "--dry-run"]));
    assert!(
        preview.contains("rewinding claude-code:s-one's changes to the start of turn 4"),
        "{preview}"
    );
    let o = m.cli(&["rewind", "--agent", "claude-code:s-one", "-y"]);
    assert!(o.status.success(), "{}", text(&o));
    let after = common::tree(&m.dir, false);
    for (path, node) in &before {
        let want = if path == "src/deep/one.html" {
            "one\n"
        } else {
            assert_eq!(after.get(path), Some(node), "{path}: kept");
            continue;
        };
        match after.get(path) {
            Some(common::Node::File { data, .. }) => assert_eq!(data, want.as_bytes()),
            other => panic!("{path}: {other:?}"),
        }
    }
    assert_eq!(after.len(), before.len());
}

/// A hooked agent CLI that leads its own session (started by `setsid`, as in its own terminal):
/// a process it leaves behind, reparented to init, is still in its session, which only its
/// descendants can be in, so its changes are the agent's while the CLI lives.
#[test]
fn an_orphan_in_a_session_the_agent_cli_leads_is_the_agents() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    let h = home();
    let prompt = claude_code_prompt(h.path(), &sub);
    // `timeout` is the agent CLI: it leads the session `setsid` made, and lives until its
    // shell ends, after the orphan wrote.
    let script = format!("{prompt} && ( (sleep 0.3; echo orphan > orphan.html) & ) && sleep 1.2");
    let o = Command::new("setsid")
        .args(["--wait", "timeout", "30", "sh", "-c", &script])
        .current_dir(&sub)
        .output()
        .expect("agent");
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(sub.join("mine.html"), "mine\n").expect("write");
    let show = m.cli(&["show", "--json"]);
    let changes: serde_json::Value = serde_json::from_slice(&show.stdout).expect("json");
    let actor_of = |path: &str| {
        let c = changes
            .as_array()
            .expect("changes")
            .iter()
            .find(|c| c["path"] == path)
            .unwrap_or_else(|| panic!("{path} in {changes}"));
        c["actors"][0].clone()
    };
    let orphan = actor_of("src/deep/orphan.html");
    assert_eq!(orphan["agent"], true, "{orphan}");
    assert_eq!(orphan["name"], "claude-code:abc123", "{orphan}");
    assert_eq!(actor_of("src/deep/mine.html")["agent"], false);
}

#[test]
fn on_an_unmounted_folder_the_hook_tells_the_user_and_begins_nothing() {
    if !require_fuse() {
        return;
    }
    let (mut m, sub) = mounted_with_subfolder();
    m.unmount();
    let h = home();
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    let commands = hook_commands(&user_settings("claude-code", h.path()), "UserPromptSubmit");
    let o = run_hook_command(&commands[0], &recorded_payload(&sub), &[]);
    // Never blocks the prompt: exit 0, and the message in the field the agents show the user.
    assert!(o.status.success(), "{}", text(&o));
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let folder = m.dir.display().to_string();
    assert_eq!(
        shown,
        serde_json::json!({
            "systemMessage": format!(
                "ckpt-mount: {folder} is not mounted: changes are not being captured; mount it with: ckpt-mount mount {folder}"
            )
        })
    );
    let o = Command::new(bin())
        .args(["turn", "--dir"])
        .arg(&sub)
        .output()
        .expect("turn");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1\n",
        "a turn was begun"
    );
    m.remount();
}

#[test]
fn outside_any_ckpt_mount_folder_the_hook_stays_silent() {
    let h = home();
    let o = ckpt(h.path(), &["hooks", "install", "claude-code"]);
    assert!(o.status.success(), "{}", text(&o));
    let commands = hook_commands(&user_settings("claude-code", h.path()), "UserPromptSubmit");
    let o = run_hook_command(&commands[0], &recorded_payload(h.path()), &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    // A payload that is not JSON is said, not fatal.
    let o = run_hook_command(&commands[0], "this is not json", &[]);
    assert!(o.status.success());
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert!(
        shown["systemMessage"]
            .as_str()
            .is_some_and(|s| s.contains("not JSON")),
        "{shown}"
    );
}

#[test]
fn turn_dir_takes_any_path_inside_the_folder_and_refuses_an_unmounted_one() {
    if !require_fuse() {
        return;
    }
    let (mut m, sub) = mounted_with_subfolder();
    let turn = |args: &[&str]| {
        Command::new(bin())
            .args(["turn"])
            .args(args)
            .arg("--dir")
            .arg(&sub)
            .output()
            .expect("turn")
    };
    let o = turn(&["2", "-m", "from a subfolder"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(current_turn(&m), "2\n");
    m.unmount();
    let o = turn(&["3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let folder = m.dir.display().to_string();
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "ckpt-mount: {folder} is not mounted: changes are not being captured; mount it with: ckpt-mount mount {folder}\n"
        )
    );
    assert!(o.stdout.is_empty());
    // Printing the turn still works offline, and --offline begins one for recovery.
    let o = turn(&[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2\n", "{}", text(&o));
    let o = turn(&["3", "--offline", "-m", "recovery"]);
    assert!(o.status.success(), "{}", text(&o));
    m.remount();
    assert_eq!(current_turn(&m), "3\n");
    assert_eq!(labels(&m), vec!["mounted", "from a subfolder", "recovery"]);
}

/// PATH with the binary under test first, as a user who installed it has.
fn path_with_bin() -> String {
    let dir = Path::new(bin()).parent().expect("bin dir").to_path_buf();
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_claude_code_script_in_mount_scripts_still_works() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    let path = PathBuf::from(path_with_bin());
    let cmd = script("claude-code/ckpt-turn-hook");
    let o = run_hook_command(&cmd, &recorded_payload(&sub), &[("PATH", &path)]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(current_turn(&m), "2\n");
    assert_eq!(labels(&m), vec!["mounted", "Make the header blue"]);
}

/// The command `ckpt-aider` gives aider to run whenever it waits for input, as aider runs
/// it (`sh -c`, in the folder), after another agent's hook began a step: the next turn begins.
fn the_aider_scripts_command_begins_the_next_turn_after_a_step() {
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "a\n").expect("f"));
    std::fs::write(m.path(".ckpt/turn"), "2\n").expect("turn 2");
    std::fs::write(m.path(".ckpt/turn"), "2.1\n").expect("step 2.1");
    let script = std::fs::read_to_string(script("aider/ckpt-aider")).expect("ckpt-aider");
    // The double-quoted argument of --notifications-command, as bash expands it.
    let quoted = script
        .split("--notifications-command \"")
        .nth(1)
        .and_then(|rest| rest.split("\" \"$@\"").next())
        .expect("the notifications command");
    let command = quoted.replace("\\$", "$").replace("$bin", bin());
    let o = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(&m.dir)
        .output()
        .expect("sh");
    assert!(o.status.success(), "{command}: {}", text(&o));
    assert_eq!(current_turn(&m), "3\n", "{command}");
}

on_both_mounts!(
    /// On root's mount.
    the_aider_scripts_command_begins_the_next_turn_after_a_step_on_roots_mount,
    the_aider_scripts_command_begins_the_next_turn_after_a_step_on_a_users_mount,
    the_aider_scripts_command_begins_the_next_turn_after_a_step
);

#[test]
fn the_codex_notify_program_uses_the_payloads_cwd_and_logs_failures() {
    if !require_fuse() {
        return;
    }
    let (mut m, sub) = mounted_with_subfolder();
    let codex_home = home();
    let path = PathBuf::from(path_with_bin());
    let notify = |payload: &str| {
        Command::new(script("codex/ckpt-codex-notify"))
            .arg(payload)
            .env("PATH", &path)
            .env("CODEX_HOME", codex_home.path())
            .current_dir("/")
            .output()
            .expect("notify")
    };
    let payload = serde_json::json!({
        "type": "agent-turn-complete",
        "thread-id": "t1",
        "turn-id": "1",
        "cwd": sub,
        "input-messages": ["Make the header blue\nand keep the footer"],
        "last-assistant-message": "Done."
    })
    .to_string();
    let o = notify(&payload);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(current_turn(&m), "2\n");
    assert_eq!(labels(&m), vec!["mounted", "after: Make the header blue"]);
    m.unmount();
    let o = notify(&payload);
    assert!(o.status.success(), "{}", text(&o));
    let log = std::fs::read_to_string(codex_home.path().join("log/ckpt-mount-notify.log"))
        .expect("the failure is logged");
    assert!(
        log.contains(&format!("{} is not mounted", m.dir.display())),
        "{log}"
    );
    m.remount();
    assert_eq!(current_turn(&m), "2\n");
}

/// A prompt payload of `agent`'s hook (they send the same fields) for session `session`,
/// working in `cwd`.
fn prompt_payload(agent: &str, session: &str, cwd: &Path, prompt: &str) -> String {
    let event = if agent == "gemini" {
        "BeforeAgent"
    } else {
        "UserPromptSubmit"
    };
    serde_json::json!({
        "session_id": session,
        "transcript_path": format!("/tmp/{agent}/{session}.jsonl"),
        "cwd": cwd,
        "hook_event_name": event,
        "prompt": prompt,
    })
    .to_string()
}

/// Where `hooks install AGENT` puts the `/ckpt` command under a home, and the placeholder the
/// agent replaces with what the user typed after it.
fn slash_command(agent: &str, home: &Path) -> (PathBuf, &'static str) {
    match agent {
        "claude-code" => (home.join(".claude/commands/ckpt.md"), "$ARGUMENTS"),
        "codex" => (home.join(".codex/prompts/ckpt.md"), "$ARGUMENTS"),
        _ => (home.join(".gemini/commands/ckpt.toml"), "{{args}}"),
    }
}

/// The shell commands a `/ckpt` file tells the agent to run, in order: the `sh` blocks.
fn sh_blocks(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split_once("\n```").map(|(cmd, _)| cmd.to_string()))
        .collect()
}

/// The turn of `ckpt-mount log`'s text whose row holds `words`: the agent's step 2.
fn turn_named(log: &str, words: &str) -> String {
    let rows: Vec<&str> = log.lines().filter(|l| l.contains(words)).collect();
    assert_eq!(rows.len(), 1, "one turn holds {words:?} in:\n{log}");
    rows[0]
        .split_whitespace()
        .next()
        .expect("turn column")
        .to_string()
}

/// `/ckpt WORDS` as the agent runs it: the file's text with what the user typed put in, then
/// each command it names through the shell tool (`sh -c`) in the agent's working directory,
/// the turn found in the list the first one prints. Returns what the rewind printed.
fn run_slash_command(file: &Path, placeholder: &str, words: &str, cwd: &Path) -> String {
    let body = std::fs::read_to_string(file).expect("command file");
    assert!(body.contains(placeholder), "{body}");
    let sent = body.replace(placeholder, words);
    let blocks = sh_blocks(&sent);
    assert_eq!(blocks.len(), 2, "a log and a rewind: {sent}");
    let shell = |cmd: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        assert!(o.status.success(), "{cmd}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(blocks[0].ends_with(" log"), "{}", blocks[0]);
    let n = turn_named(&shell(&blocks[0]), words);
    assert!(blocks[1].ends_with(" rewind N --yes"), "{}", blocks[1]);
    shell(&blocks[1].replace(" N ", &format!(" {n} ")))
}

/// `hooks install` puts each agent's `/ckpt` command in its config home; run as the agent runs
/// it (the log, then the rewind of the turn whose prompt the user named), it takes the folder
/// back to the start of that turn and prints how to take the agent's conversation back too; the
/// `/ckpt` prompt itself begins no turn; `uninstall` takes the file out.
fn the_ckpt_command_rewinds_the_folder_as_the_agent_runs_it() {
    let (m, sub) = mounted_with_subfolder();
    let page = m.path("src/deep/page.html");
    for agent in ["claude-code", "codex", "gemini"] {
        let h = home();
        let o = ckpt(h.path(), &["hooks", "install", agent]);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        let event = if agent == "gemini" {
            "BeforeAgent"
        } else {
            "UserPromptSubmit"
        };
        let hook = hook_commands(&user_settings(agent, h.path()), event).remove(0);
        let session = format!("s-{agent}");
        let prompt = |p: &str| {
            let o = run_hook_command(&hook, &prompt_payload(agent, &session, &sub, p), &[]);
            assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
        };
        let before = std::fs::read_to_string(&page).expect("read");
        prompt(&format!("{agent}: make it red\nplease"));
        std::fs::write(&page, "<h1>red</h1>\n").expect("write");
        std::fs::write(sub.join("new.html"), "new\n").expect("write");
        prompt(&format!("{agent}: add a footer"));
        std::fs::write(&page, "<h1>red</h1>\n<footer/>\n").expect("write");
        let turn = current_turn(&m);
        prompt("/ckpt make it red");
        assert_eq!(current_turn(&m), turn, "{agent}: /ckpt began a turn");
        let (file, placeholder) = slash_command(agent, h.path());
        let said = run_slash_command(&file, placeholder, &format!("{agent}: make it red"), &sub);
        assert_eq!(std::fs::read_to_string(&page).expect("read"), before);
        assert!(!sub.join("new.html").exists(), "{agent}: {said}");
        let how = said
            .lines()
            .find(|l| l.starts_with("conversation: "))
            .unwrap_or_else(|| panic!("{agent}: no conversation line in {said}"));
        assert!(how.contains(&format!("session {session}")), "{how}");
        assert!(how.contains(&format!("\"{agent}: make it red\"")), "{how}");
        let o = ckpt(h.path(), &["hooks", "uninstall", agent]);
        assert!(o.status.success(), "{agent}: {}", text(&o));
        assert!(!file.exists(), "{agent}: {}", text(&o));
    }
}

on_both_mounts!(
    the_ckpt_command_rewinds_the_folder,
    the_ckpt_command_rewinds_the_folder_on_a_users_mount,
    the_ckpt_command_rewinds_the_folder_as_the_agent_runs_it
);

/// The hooks record each turn's session, transcript and prompt (`log --json`); a rewind across
/// turns two agents began says, per session, which prompt to take its conversation back to
/// (human and `--json`); `--agent NAME` only that agent's; a dry run, an undo and a rewind of
/// some paths say nothing of conversations.
#[test]
fn a_rewind_across_hooked_turns_says_how_to_take_each_conversation_back() {
    if !require_fuse() {
        return;
    }
    let (m, sub) = mounted_with_subfolder();
    let begin = |agent: &str, session: &str, p: &str| {
        let h = home();
        let o = ckpt(h.path(), &["hooks", "install", agent]);
        assert!(o.status.success(), "{}", text(&o));
        let event = if agent == "gemini" {
            "BeforeAgent"
        } else {
            "UserPromptSubmit"
        };
        let hook = hook_commands(&user_settings(agent, h.path()), event).remove(0);
        let o = run_hook_command(&hook, &prompt_payload(agent, session, &sub, p), &[]);
        assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
    };
    begin("claude-code", "c1", "make it red\nand bold");
    std::fs::write(sub.join("a.html"), "a\n").expect("write");
    begin("gemini", "g1", "add a footer");
    std::fs::write(sub.join("b.html"), "b\n").expect("write");
    begin("claude-code", "c1", "undo that");
    let log = m.cli(&["log", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&log.stdout).expect("json");
    assert_eq!(rows[1]["by"], "claude-code:c1");
    assert_eq!(
        rows[1]["conversation"],
        serde_json::json!({
            "session": "c1",
            "transcript": "/tmp/claude-code/c1.jsonl",
            "prompt": "make it red",
        })
    );
    assert_eq!(rows[1]["label"], "make it red");
    let dir = m.dir.display().to_string();
    for args in [
        &["rewind", "2", "--dry-run", "--dir", &dir][..],
        &["rewind", "2", "--yes", "--dir", &dir, "--", "src"],
    ] {
        let o = Command::new(bin()).args(args).output().expect("rewind");
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("conversation"), "{args:?}: {}", text(&o));
    }
    assert!(m.cli(&["undo"]).status.success());
    let o = m.cli(&["rewind", "2", "--yes"]);
    let t = transcript(&["rewind", "2", "--yes"], &o, &[(&dir, "[DIR]")]);
    insta::assert_snapshot!(t);
    let o = m.cli(&["undo"]);
    assert!(!text(&o).contains("conversation"), "{}", text(&o));
    let o = m.cli(&["rewind", "2", "--agent", "gemini", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(
        r["conversations"],
        serde_json::json!([{
            "agent": "gemini",
            "session": "g1",
            "transcript": "/tmp/gemini/g1.jsonl",
            "prompt": "add a footer",
            "turn": 3,
            "how": "run /rewind (or press Esc twice), pick \"add a footer\" and rewind the conversation only (the files are back already)",
        }])
    );
}
