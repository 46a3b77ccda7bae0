//! One agent, several folders (issue 32): the Claude Code hook installed into a temporary home
//! with an additional directory in its settings and one more named with `--also`, run with
//! the agent's payload, begins one turn per prompt in each of those mounted folders under one
//! prompt id; `rewind --all-folders` takes all of them back to the start of that prompt's
//! turn, byte for byte (modes, symlinks, a git repository), and leaves a mounted folder outside
//! the group as it is; `undo --all-folders` gives every folder back exactly. On root's mount
//! and on the user ckpt-ci's own mounts.

mod common;
use common::agents::ckpt;
use common::{Mounted, Node, assert_same_tree, bin, on_a_terminal, output_text, tree};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The Claude Code hook command `hooks install` wrote into the home's settings.
fn installed_command(home: &Path) -> String {
    let settings = home.join(".claude/settings.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(settings).expect("settings")).expect("json");
    let commands: Vec<String> = v["hooks"]["UserPromptSubmit"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .collect();
    assert_eq!(commands.len(), 1, "{commands:?}");
    commands[0].clone()
}

/// Runs the installed hook as Claude Code does (`sh -c`, the payload on stdin): the recorded
/// payload, its `cwd` in `cwd` and its prompt `prompt`. The hook prints nothing on success.
fn prompt(command: &str, home: &Path, cwd: &Path, prompt: &str) {
    let o = hook(command, home, cwd, prompt);
    assert!(
        o.status.success() && o.stdout.is_empty(),
        "{}",
        output_text(&o)
    );
}

/// Runs a hook command as the agents do (`sh -c`, the payload on stdin; Claude Code, Codex and
/// Gemini CLI send the same fields), whatever it says.
fn hook(command: &str, home: &Path, cwd: &Path, prompt: &str) -> Output {
    let recorded =
        std::fs::read_to_string(common::mount_script("claude-code/payload.example.json"))
            .expect("payload");
    let mut v: serde_json::Value = serde_json::from_str(&recorded).expect("json");
    v["cwd"] = cwd.display().to_string().into();
    v["prompt"] = prompt.into();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("GEMINI_PROJECT_DIR")
        .env_remove("CODEX_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hook");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(v.to_string().as_bytes()).expect("payload");
    drop(stdin);
    child.wait_with_output().expect("hook")
}

/// Each turn's `conversation` in a folder's `log --json`, by turn.
fn conversations(m: &Mounted) -> Vec<(u64, serde_json::Value)> {
    let o = m.cli(&["log", "--json"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["turn"].as_u64().unwrap_or(0), r["conversation"].clone()))
        .collect()
}

/// A folder with a git repository, an executable, a symlink and a nested directory.
fn seeded(name: &str) -> Mounted {
    let m = Mounted::new();
    m.sh(&format!(
        "mkdir -p src/deep && printf 'one\\ntwo {name}\\n' > src/a.txt && \
         printf '#!/bin/sh\\necho {name}\\n' > run.sh && chmod 755 run.sh && \
         ln -s src/a.txt link && echo gone > src/deep/gone.txt && \
         git init -q && git add -A && git commit -qm seed"
    ));
    m
}

/// Every folder's tree, with its git directory.
fn trees(ms: &[&Mounted]) -> Vec<BTreeMap<String, Node>> {
    ms.iter().map(|m| tree(&m.dir, true)).collect()
}

fn assert_trees(expected: &[BTreeMap<String, Node>], ms: &[&Mounted]) {
    for (e, m) in expected.iter().zip(ms) {
        assert_same_tree(e, &tree(&m.dir, true));
    }
}

on_both_mounts!(
    a_prompt_across_folders_rewinds_and_undoes_together,
    a_prompt_across_folders_rewinds_and_undoes_together_on_a_users_mount,
    property
);

fn property() {
    let (a, b, c, outside) = (seeded("a"), seeded("b"), seeded("c"), seeded("d"));
    let home = tempfile::Builder::new()
        .prefix("ckpt-multi-home-")
        .tempdir_in("/tmp")
        .expect("home");
    // b is an additional directory twice over (the user's settings, and the project's by a
    // relative path): one folder, one turn. c is named with --also.
    std::fs::create_dir_all(home.path().join(".claude")).expect("mkdir");
    let settings = serde_json::json!({"permissions": {"additionalDirectories": [b.dir]}});
    std::fs::write(
        home.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .expect("w");
    let rel = Path::new("..")
        .join("..")
        .join(b.dir.strip_prefix("/tmp").expect("tmp"));
    let local = serde_json::json!({"permissions": {"additionalDirectories": [rel]}});
    a.sh(&format!(
        "mkdir .claude && printf '%s' '{local}' > .claude/settings.local.json && \
         git add -A && git commit -qm settings"
    ));
    let c_dir = c.dir.display().to_string();
    let o = ckpt(
        home.path(),
        &["hooks", "install", "claude-code", "--also", &c_dir],
    );
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        output_text(&o).contains(&format!(", and in {c_dir}\n")),
        "{}",
        output_text(&o)
    );
    let hook = installed_command(home.path());
    assert!(
        hook.ends_with(&format!(" hook claude-code --also {c_dir}")),
        "{hook}"
    );

    let group = [&a, &b, &c];
    let at_start = trees(&group);
    prompt(
        &hook,
        home.path(),
        &a.path("src"),
        "Rename the parser\nin every repo",
    );
    // The first prompt's changes, by the programs an agent runs.
    a.sh(
        "sed -i s/one/ONE/ src/a.txt && rm src/deep/gone.txt && mv run.sh go.sh && \
          git add -A && git commit -qm renamed",
    );
    b.sh(
        "sed -i 's/two/TWO/' src/a.txt && ln -sfn run.sh link && chmod 600 run.sh && \
          mkdir -p new/dir && echo new > new/dir/n.txt",
    );
    c.sh("rm -r src && git add -A && git commit -qm gone");
    outside.sh("echo outside >> src/a.txt && rm link");
    prompt(&hook, home.path(), &a.dir, "Now the tests");
    a.sh("echo more >> go.sh && git tag t1");
    b.sh("rm -r new && echo x > src/x");
    c.sh("echo back > back.txt && git add back.txt && git commit -qm back");
    outside.sh("echo more >> src/a.txt");
    let before_rewind = trees(&group);
    let outside_before = tree(&outside.dir, true);

    // Each folder has the two prompts' turns, and a turn of one prompt has one id everywhere.
    let ids: Vec<serde_json::Value> = group
        .iter()
        .map(|m| {
            let rows = conversations(m);
            assert_eq!(rows.len(), 3, "{}: {rows:?}", m.dir.display());
            let c = &rows[1].1;
            assert_eq!(c["folders"].as_array().map(Vec::len), Some(3), "{c}");
            assert_ne!(c["prompt_id"], rows[2].1["prompt_id"]);
            c["prompt_id"].clone()
        })
        .collect();
    assert!(
        ids[0].is_string() && ids.iter().all(|i| *i == ids[0]),
        "{ids:?}"
    );
    assert!(conversations(&outside).iter().all(|(_, c)| c.is_null()));
    let log = output_text(&a.cli(&["log"]));
    let line = format!("= one prompt in {}, {}", a.dir.display(), b.dir.display());
    assert!(log.contains(&line), "{log}");

    // The preview lists each folder of the group, and changes nothing.
    let dry = b.cli(&[
        "rewind",
        "/rename the parser",
        "--all-folders",
        "--dry-run",
        "--json",
    ]);
    assert!(dry.status.success(), "{}", output_text(&dry));
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).expect("json");
    let folders = plan["folders"].as_array().expect("folders");
    assert_eq!(folders.len(), 3, "{plan}");
    assert!(
        folders
            .iter()
            .all(|f| f["turn"] == 2 && f["report"]["dry_run"] == true)
    );
    assert_trees(&before_rewind, &group);

    // On a terminal: every folder's plan, one question; no, and nothing changed.
    let args = ["rewind", "/rename the parser", "--all-folders"];
    let (shown, code) = on_a_terminal("n", &args, &b.dir);
    assert_eq!(code, Some(1), "{shown}");
    assert_eq!(shown.matches("Proceed? [y/N]").count(), 1, "{shown}");
    for m in group {
        assert!(shown.contains(&format!("{}:", m.dir.display())), "{shown}");
    }
    assert!(shown.contains("cancelled: nothing changed"), "{shown}");
    assert_trees(&before_rewind, &group);

    let run = b.cli(&["rewind", "/rename the parser", "--all-folders", "--yes"]);
    assert!(run.status.success(), "{}", output_text(&run));
    assert_trees(&at_start, &group);
    assert_same_tree(&outside_before, &tree(&outside.dir, true));

    let undo = c.cli(&["undo", "--all-folders", "--yes"]);
    assert!(undo.status.success(), "{}", output_text(&undo));
    assert_trees(&before_rewind, &group);
    assert_same_tree(&outside_before, &tree(&outside.dir, true));

    // And forth again: the redo re-applies the group's rewind in each folder, then its undo.
    let redo = a.cli(&["redo", "--all-folders", "--yes"]);
    assert!(redo.status.success(), "{}", output_text(&redo));
    assert_trees(&at_start, &group);
    assert_same_tree(&outside_before, &tree(&outside.dir, true));
    let undo = b.cli(&["undo", "--all-folders", "--yes"]);
    assert!(undo.status.success(), "{}", output_text(&undo));
    assert_trees(&before_rewind, &group);
    let again = a.cli(&["redo", "--all-folders", "--yes"]);
    assert!(again.status.success(), "{}", output_text(&again));
    assert_trees(&at_start, &group);
    let refused = outside.cli(&["redo", "--all-folders", "--yes"]);
    assert!(!refused.status.success(), "{}", output_text(&refused));
    assert!(
        output_text(&refused).contains("redo it without --all-folders"),
        "{}",
        output_text(&refused)
    );

    // The outside folder has no turn of the prompt: it cannot lead a group rewind.
    let alone = outside.cli(&["rewind", "1", "--all-folders", "--yes"]);
    assert!(!alone.status.success());
    assert!(
        output_text(&alone).contains("without --all-folders"),
        "{}",
        output_text(&alone)
    );
}

on_both_mounts!(
    /// Gemini CLI's include directories and Codex's writable roots name the other folders; a
    /// folder that is not mounted is skipped (with a word when `--also` named it), at the
    /// prompt and at the rewind; `undo --all-folders` leaves a folder whose last operation is
    /// not the group's rewind alone.
    gemini_and_codex_settings_and_folders_left_alone,
    gemini_and_codex_settings_and_folders_left_alone_on_a_users_mount,
    settings_and_left_alone
);

fn settings_and_left_alone() {
    let (a, b) = (seeded("a"), seeded("b"));
    let mut c = seeded("c");
    let home = tempfile::Builder::new()
        .prefix("ckpt-multi-home-")
        .tempdir_in("/tmp")
        .expect("home");
    let unmounted = home.path().join("plain");
    std::fs::create_dir(&unmounted).expect("mkdir");
    // Gemini CLI: b by a relative path, in settings with comments; the unmounted folder too.
    std::fs::create_dir_all(home.path().join(".gemini")).expect("mkdir");
    let rel = Path::new("..")
        .join("..")
        .join(b.dir.strip_prefix("/tmp").expect("tmp"));
    let gemini = format!(
        "{{\n  // the library\n  \"context\": {{\"includeDirectories\": [{:?}, \"~/plain\"]}},\n}}\n",
        rel.display().to_string()
    );
    std::fs::write(home.path().join(".gemini/settings.json"), gemini).expect("write");
    // Codex: c, in the project's config.toml.
    let codex = format!(
        "[sandbox_workspace_write]\nwritable_roots = [\n  \"{}\",\n]\n",
        c.dir.display()
    );
    a.sh(&format!(
        "mkdir .codex && printf '%s' '{codex}' > .codex/config.toml"
    ));
    let plain = unmounted.display().to_string();
    let o = ckpt(
        home.path(),
        &["hooks", "install", "gemini", "--also", &plain],
    );
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("is not mounted now"),
        "{}",
        output_text(&o)
    );
    let v = std::fs::read_to_string(home.path().join(".gemini/settings.json")).expect("read");
    assert!(v.contains("// the library"), "{v}");

    let gemini_hook = format!("{} hook gemini --also '{plain}'", bin());
    let said = hook(&gemini_hook, home.path(), &a.dir, "gemini prompt");
    assert!(said.status.success());
    let message = String::from_utf8_lossy(&said.stdout);
    assert!(
        message.contains("systemMessage") && message.contains(&plain),
        "{message}"
    );
    a.sh("echo g >> src/a.txt");
    b.sh("echo g >> src/a.txt");
    prompt(
        &format!("{} hook codex", bin()),
        home.path(),
        &a.dir,
        "codex prompt",
    );
    let at_codex = tree(&a.dir, true);
    a.sh("echo x >> src/a.txt && git add -A && git commit -qm x");
    c.sh("rm run.sh");
    // Each prompt began turns in its agent's folders only.
    let folders = |m: &Mounted| -> Vec<usize> {
        conversations(m)
            .iter()
            .map(|(_, c)| c["folders"].as_array().map_or(0, Vec::len))
            .collect()
    };
    assert_eq!(folders(&a), vec![0, 2, 2]);
    assert_eq!(folders(&b), vec![0, 2]);
    assert_eq!(folders(&c), vec![0, 2]);

    // c is not mounted at the rewind: said, and left alone; a goes back.
    let c_after = tree(&c.dir, true);
    c.unmount();
    let run = a.cli(&["rewind", "/codex prompt", "--all-folders", "--yes"]);
    assert!(run.status.success(), "{}", output_text(&run));
    let text = output_text(&run);
    let said = format!("{}: left alone: it is not mounted", c.dir.display());
    assert!(text.contains(&said), "{text}");
    assert_same_tree(&at_codex, &tree(&a.dir, true));
    // A prompt whose own folder is not mounted still begins its turn in the others, and says
    // what failed.
    let turns_of_b = conversations(&b).len();
    let also_b = format!("{} hook claude-code --also '{}'", bin(), b.dir.display());
    let said = hook(&also_b, home.path(), &c.dir, "from an unmounted folder");
    assert!(said.status.success());
    let message = String::from_utf8_lossy(&said.stdout);
    assert!(message.contains("is not mounted"), "{message}");
    assert_eq!(conversations(&b).len(), turns_of_b + 1);
    c.remount();
    assert_same_tree(&c_after, &tree(&c.dir, true));

    // b's last operation is a turn, not the group's rewind to the gemini prompt: left alone.
    let run = b.cli(&["rewind", "/gemini prompt", "--all-folders", "--yes"]);
    assert!(run.status.success(), "{}", output_text(&run));
    let b_rewound = tree(&b.dir, true);
    b.sh("echo later > later.txt");
    let o = b.cli(&["turn", "9"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let b_now = tree(&b.dir, true);
    assert_ne!(b_rewound, b_now);
    let undo = a.cli(&["undo", "--all-folders", "--yes", "--json"]);
    assert!(undo.status.success(), "{}", output_text(&undo));
    let r: serde_json::Value = serde_json::from_slice(&undo.stdout).expect("json");
    let left = r["folders"][1]["left_alone"].as_str().unwrap_or_default();
    assert!(left.contains("is not the rewind to this prompt"), "{r}");
    assert_same_tree(&b_now, &tree(&b.dir, true));
}
