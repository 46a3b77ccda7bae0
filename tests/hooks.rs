//! The agent hooks in mount-scripts/, driven with recorded payloads against a real mount.

mod common;
use common::{Mounted, bin, require_fuse};
use std::io::Write;
use std::process::{Command, Stdio};

fn script(rel: &str) -> String {
    format!("{}/mount-scripts/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn run_hook(payload: &str) -> std::process::Output {
    let bin_dir = std::path::Path::new(bin())
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(script("claude-code/ckpt-turn-hook"))
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(payload.as_bytes())
        .expect("write payload");
    child.wait_with_output().expect("wait hook")
}

#[test]
fn claude_code_hook_begins_a_labelled_turn_per_prompt() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    let recorded =
        std::fs::read_to_string(script("claude-code/payload.example.json")).expect("payload");
    let payload = recorded.replace("/home/me/src/site", &m.dir.display().to_string());
    let out = run_hook(&payload);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn"),
        "2\n"
    );
    let out = run_hook(&payload.replace("Make the header blue", "Now the footer"));
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(m.path(".ckpt/turn")).expect("turn"),
        "3\n"
    );
    let log = m.cli(&["log", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&log.stdout).expect("json");
    let labels: Vec<String> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["label"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(labels, vec!["", "Make the header blue", "Now the footer"]);
}

#[test]
fn claude_code_hook_never_blocks_the_prompt() {
    let out = run_hook(r#"{"cwd":"/nonexistent/folder","prompt":"hi"}"#);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a ckpt-mount folder"));
    let out = run_hook("this is not json");
    assert!(out.status.success());
}
