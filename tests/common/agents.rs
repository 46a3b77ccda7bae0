//! What the agent-integration tests share (`hooks.rs`, `steps.rs`, `multi_folder.rs`): a
//! temporary home for the agents' settings, `ckpt-mount` run with it, the installed hook
//! commands read back, and a hook command run as the agents run one.

use super::bin;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A temporary home with nothing of the agents in it.
pub fn home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ckpt-hooks-home-")
        .tempdir_in("/tmp")
        .expect("tempdir")
}

/// `ckpt-mount ARGS` with HOME set to `home` and the agents' own variables unset.
pub fn ckpt(home: &Path, args: &[&str]) -> Output {
    ckpt_env(home, args, &[])
}

/// [`ckpt`], with `env` set too.
pub fn ckpt_env(home: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("GEMINI_CLI_HOME");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run ckpt-mount")
}

/// Runs `command` the way the agents run a hook command (`sh -c`), with `payload` on stdin.
pub fn run_hook_command(command: &str, payload: &str, env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.as_bytes())
        .expect("write payload");
    child.wait_with_output().expect("wait hook")
}

/// The hook groups of `event` in a settings file: each group's `matcher` and commands.
pub fn hook_groups(settings: &Path, event: &str) -> Vec<(Option<String>, Vec<String>)> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(settings).expect("read settings")).expect("json");
    v["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let commands = g["hooks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["command"].as_str().map(str::to_string))
                .collect();
            (g["matcher"].as_str().map(str::to_string), commands)
        })
        .collect()
}

/// The hook commands of `event` in a settings file, every group's.
pub fn hook_commands(settings: &Path, event: &str) -> Vec<String> {
    hook_groups(settings, event)
        .into_iter()
        .flat_map(|(_, commands)| commands)
        .collect()
}
