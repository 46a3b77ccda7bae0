//! Steps within a turn, as a user meets them: `hooks install claude-code --steps` into a
//! temporary home, the installed prompt and tool hooks run with the agent's payloads against
//! a real mount while real programs change the folder, and every tool call is then a moment
//! one step away: `log`, `.ckpt/turns/N.S`, `cat`, `/TEXT`, `rewind N.S` (the whole folder
//! compared with a snapshot taken just before that call, so nothing else changed), `undo`.

mod common;
use common::agents::{ckpt, home, hook_groups, run_hook_command};
use common::output_text as text;
use common::{Mounted, bin, tree};
use std::path::Path;
use std::process::{Command, Output};

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("json")
}

/// Runs `command` as the agents run a hook (`sh -c`, the payload on stdin); it must succeed
/// silently.
fn run_hook(command: &str, payload: &serde_json::Value) {
    let o = run_hook_command(command, &payload.to_string(), &[]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
}

fn project(d: &Path) {
    std::fs::create_dir_all(d.join("src")).expect("src");
    std::fs::write(d.join("src/lib.rs"), "pub fn one() -> u8 { 1 }\n").expect("lib");
    std::fs::write(d.join("package.json"), "{\"name\": \"site\"}\n").expect("package");
    std::fs::write(d.join(".env"), "TOKEN=secret\n").expect(".env");
    std::fs::hard_link(d.join("src/lib.rs"), d.join("lib-link.rs")).expect("link");
    std::os::unix::fs::symlink("src/lib.rs", d.join("current")).expect("symlink");
}

/// The turns `log` lists, as it names them, with their labels.
fn listed(m: &Mounted) -> Vec<(String, String)> {
    json(m.cli(&["log", "--json"]))
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let turn = match &r["turn"] {
                serde_json::Value::String(s) => s.clone(),
                n => n.to_string(),
            };
            let name = match r["rewound_by"].as_u64() {
                Some(k) => format!("{turn}#{k}"),
                None => turn,
            };
            (name, r["label"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

fn every_tool_call_is_a_moment_one_step_away() {
    let m = Mounted::with(project);
    let h = home();
    ok(ckpt(
        h.path(),
        &["hooks", "install", "claude-code", "--steps"],
    ));
    let settings = h.path().join(".claude/settings.json");
    let prompt = hook_groups(&settings, "UserPromptSubmit");
    let tool = hook_groups(&settings, "PreToolUse");
    assert_eq!(tool.len(), 1, "{tool:?}");
    assert_eq!(
        tool[0].0.as_deref(),
        Some("Bash|Edit|Write|MultiEdit|NotebookEdit"),
        "reads and searches begin no step"
    );
    let (prompt_hook, tool_hook) = (&prompt[0].1[0], &tool[0].1[0]);
    let cwd = m.dir.display().to_string();
    let call = |name: &str, input: serde_json::Value| {
        let payload = serde_json::json!({
            "session_id": "s1", "cwd": cwd, "hook_event_name": "PreToolUse",
            "tool_name": name, "tool_input": input,
        });
        run_hook(tool_hook, &payload);
    };
    run_hook(
        prompt_hook,
        &serde_json::json!({"session_id": "s1", "cwd": cwd, "prompt": "Add two and install deps"}),
    );
    // Before each call, the folder as that call's step must give it back.
    let at_edit = tree(&m.dir, true);
    call(
        "Edit",
        serde_json::json!({"file_path": m.path("src/lib.rs"), "old_string": "1"}),
    );
    m.sh("sed -i 's/one() -> u8 { 1 }/two() -> u8 { 2 }/' src/lib.rs");
    let at_install = tree(&m.dir, true);
    call("Bash", serde_json::json!({"command": "npm install"}));
    m.sh(
        "mkdir -p node_modules/left-pad && echo 'module.exports = 1' > node_modules/left-pad/index.js \
         && echo '{\"lockfileVersion\": 3}' > package-lock.json && sed -i 's/site/site2/' package.json \
         && rm .env && chmod 600 lib-link.rs",
    );
    let at_clean = tree(&m.dir, true);
    call(
        "Bash",
        serde_json::json!({"command": "rm -rf src && ln -sfn gone current"}),
    );
    m.sh("rm -rf src && ln -sfn gone current");
    let at_end = tree(&m.dir, true);
    assert_eq!(
        listed(&m),
        [
            ("1", "mounted"),
            ("2", "Add two and install deps"),
            ("2.1", "Edit: src/lib.rs"),
            ("2.2", "Bash: npm install"),
            ("2.3", "Bash: rm -rf src && ln -sfn gone current"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // The past as a folder, and one file of it.
    assert_eq!(tree(&m.path(".ckpt/turns/2.2"), true), at_install);
    assert_eq!(tree(&m.path(".ckpt/turns/2.1"), true), at_edit);
    let cat = Command::new(bin())
        .args(["cat", "2.2", "--dir"])
        .arg(&m.dir)
        .args(["--", "src/lib.rs"])
        .output()
        .expect("cat");
    assert_eq!(ok(cat), "pub fn two() -> u8 { 2 }\n");
    // Every moment form reaches a step.
    let dry = json(m.cli(&["rewind", "/npm install", "--dry-run", "--json"]));
    assert_eq!(dry["to"].as_str(), Some("2.2"), "{dry}");
    // Back to just before `npm install`: the whole folder as it was then, nothing else.
    ok(m.cli(&["rewind", "2.2", "--yes"]));
    assert_eq!(tree(&m.dir, true), at_install);
    ok(m.cli(&["undo", "--yes"]));
    assert_eq!(tree(&m.dir, true), at_end);
    ok(m.cli(&["rewind", "2.3", "--yes"]));
    assert_eq!(tree(&m.dir, true), at_clean);
    // The next prompt begins turn 3, and `-1` counts prompts, not tool calls.
    run_hook(
        prompt_hook,
        &serde_json::json!({"session_id": "s1", "cwd": cwd, "prompt": "Now the docs"}),
    );
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn"),
        "3\n"
    );
    m.sh("echo docs > README.md");
    let back = json(m.cli(&["rewind", "-1", "--yes", "--json"]));
    assert_eq!(back["to"].as_u64(), Some(2), "{back}");
    assert_eq!(tree(&m.dir, true), at_edit);
}

on_both_mounts!(
    /// Steps from the installed hooks, on root's mount.
    every_tool_call_is_a_moment_on_roots_mount,
    every_tool_call_is_a_moment_on_a_users_mount,
    every_tool_call_is_a_moment_one_step_away
);

fn a_tool_call_is_a_step_in_every_folder_of_its_prompt() {
    let (a, b) = (Mounted::with(project), Mounted::with(project));
    let h = home();
    let b_dir = b.dir.canonicalize().expect("b").display().to_string();
    ok(ckpt(
        h.path(),
        &[
            "hooks",
            "install",
            "claude-code",
            "--steps",
            "--also",
            &b_dir,
        ],
    ));
    let settings = h.path().join(".claude/settings.json");
    let tool = hook_groups(&settings, "PreToolUse");
    let tool_hook = &tool[0].1[0];
    assert!(
        tool_hook.ends_with(&format!("--on tool --also {b_dir}")),
        "{tool_hook}"
    );
    let prompt_hook = &hook_groups(&settings, "UserPromptSubmit")[0].1[0];
    let cwd = a.dir.display().to_string();
    run_hook(
        prompt_hook,
        &serde_json::json!({"session_id": "s2", "cwd": cwd, "prompt": "Bump both"}),
    );
    let before_call = [tree(&a.dir, true), tree(&b.dir, true)];
    run_hook(
        tool_hook,
        &serde_json::json!({"session_id": "s2", "cwd": cwd, "tool_name": "Bash",
            "tool_input": {"command": "sed -i s/1/2/ src/lib.rs ../b/src/lib.rs"}}),
    );
    for m in [&a, &b] {
        m.sh("sed -i 's/1/2/' src/lib.rs && rm .env && mkdir -p out && echo x > out/y");
        let listed = listed(m);
        assert_eq!(
            listed.last(),
            Some(&(
                "2.1".to_string(),
                "Bash: sed -i s/1/2/ src/lib.rs ../b/src/lib.rs".to_string()
            )),
            "{listed:?}"
        );
    }
    // The call's steps share one id, so one rewind takes both folders back to just before it.
    ok(a.cli(&["rewind", "2.1", "--all-folders", "--yes"]));
    assert_eq!([tree(&a.dir, true), tree(&b.dir, true)], before_call);
    ok(b.cli(&["undo", "--all-folders", "--yes"]));
    assert_eq!(a.sh("cat out/y"), "x\n");
    assert_eq!(b.sh("cat out/y"), "x\n");
}

on_both_mounts!(
    /// A tool call's step in each folder of the prompt, rewound together, on root's mount.
    a_tool_call_is_a_step_in_every_folder_on_roots_mount,
    a_tool_call_is_a_step_in_every_folder_on_a_users_mount,
    a_tool_call_is_a_step_in_every_folder_of_its_prompt
);

fn a_step_begins_only_within_the_current_turn() {
    let m = Mounted::with(|d| std::fs::write(d.join("f"), "a\n").expect("f"));
    let write = |text: &str| std::fs::write(m.path(".ckpt/turn"), text);
    write("2\n").expect("turn 2");
    write("2.1 by hand\n").expect("step 2.1");
    m.sh("echo b > f");
    for refused in ["1.1\n", "3.1\n", "2.1\n2\n", "2.0\n", "2.x\n"] {
        let e = write(refused).expect_err(refused);
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{refused:?}");
    }
    // Numbers may be skipped, as turns' may; `turn --step` takes the next.
    write("2.5\n").expect("step 2.5");
    assert_eq!(ok(m.cli(&["turn", "--step", "-m", "next"])), "2.6\n");
    m.sh("echo c > f");
    let refused = m.cli(&["turn", "1.2"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    ok(m.cli(&["rewind", "2.1", "--yes"]));
    assert_eq!(m.sh("cat f"), "a\n");
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn"),
        "2.1\n"
    );
}

on_both_mounts!(
    /// The control file's rules for steps.
    a_step_begins_only_within_the_current_turn_on_roots_mount,
    a_step_begins_only_within_the_current_turn_on_a_users_mount,
    a_step_begins_only_within_the_current_turn
);

#[test]
fn steps_are_installed_and_removed_for_each_agent() {
    for (agent, settings, event, matcher) in [
        (
            "claude-code",
            ".claude/settings.json",
            "PreToolUse",
            "Bash|Edit|Write|MultiEdit|NotebookEdit",
        ),
        (
            "codex",
            ".codex/hooks.json",
            "PreToolUse",
            "Bash|apply_patch",
        ),
        (
            "gemini",
            ".gemini/settings.json",
            "BeforeTool",
            "run_shell_command|write_file|replace",
        ),
    ] {
        let h = home();
        let path = h.path().join(settings);
        ok(ckpt(h.path(), &["hooks", "install", agent, "--steps"]));
        let groups = hook_groups(&path, event);
        assert_eq!(groups.len(), 1, "{agent}: {groups:?}");
        assert_eq!(groups[0].0.as_deref(), Some(matcher), "{agent}");
        assert!(
            groups[0].1[0].ends_with(&format!("hook {agent} --on tool")),
            "{agent}: {groups:?}"
        );
        let again = ok(ckpt(h.path(), &["hooks", "install", agent, "--steps"]));
        assert!(again.contains("nothing changed"), "{agent}: {again}");
        assert_eq!(hook_groups(&path, event), groups, "{agent}: twice is once");
        // An install without --steps states the wish: the step hook goes, the prompt's stays.
        let said = ok(ckpt(h.path(), &["hooks", "install", agent]));
        assert!(said.contains("removed the"), "{agent}: {said}");
        assert!(hook_groups(&path, event).is_empty(), "{agent}");
        ok(ckpt(h.path(), &["hooks", "install", agent, "--steps"]));
        ok(ckpt(h.path(), &["hooks", "uninstall", agent]));
        assert!(
            !path.exists() || hook_groups(&path, event).is_empty(),
            "{agent}: uninstall removes both"
        );
    }
}
