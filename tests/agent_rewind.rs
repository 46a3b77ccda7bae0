//! Who changed what, and `rewind N --agent`, on real mounts: an editor-like shell loop (not
//! under `run`) writes and saves by rename while an agent-like script under `ckpt-mount run`
//! rewrites (`sed -i`), deletes (`rm`) and creates files, some of them the editor's too. The
//! preview lists restores and conflicts with who did what; the run restores exactly what only
//! the agent changed, byte for byte and mode for mode, and keeps the rest; `--conflicts rewind`
//! does what it says. And a mount where no agent was ever marked says that every change counts
//! as one actor, and refuses `--agent`.

mod common;
use common::output_text as text;
use common::{Mounted, Node, bin, require_fuse, tree};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

fn project(d: &std::path::Path) {
    let file = |name: &str, body: &str, mode: u32| {
        let p = d.join(name);
        std::fs::write(&p, body).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    file("agent_edit.txt", "colour = red\nsize = 3\n", 0o640);
    file("agent_del.txt", "delete me\n", 0o600);
    file("both.txt", "shared line\n", 0o644);
    file("editor.txt", "notes\n", 0o644);
    file("notes.md", "# draft 0\n", 0o644);
    file("run.sh", "#!/bin/sh\necho run\n", 0o755);
    std::fs::create_dir(d.join("src")).expect("mkdir");
    file("src/lib.rs", "fn red() {}\n", 0o644);
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `ckpt-mount run --as NAME -- sh -ec SCRIPT` in `m`'s folder, which must succeed.
fn run_as(m: &Mounted, name: &str, script: &str) {
    let o = Command::new(bin())
        .args(["run", "--as", name, "--", "sh", "-ec", script])
        .current_dir(&m.dir)
        .output()
        .expect("run the agent");
    assert!(o.status.success(), "{name}: {}", text(&o));
}

/// `sh -ec SCRIPT` in `m`'s folder, as the user (no agent), which must succeed.
fn user_sh(m: &Mounted, script: &str) {
    let o = Command::new("sh")
        .args(["-ec", script])
        .current_dir(&m.dir)
        .output()
        .expect("sh");
    assert!(o.status.success(), "{}", text(&o));
}

/// Every path of `before` but `except` is in `after` as it was, and nothing appeared or went.
fn assert_kept_except(
    before: &BTreeMap<String, Node>,
    after: &BTreeMap<String, Node>,
    except: &[&str],
) {
    for (path, node) in before {
        if !except.contains(&path.as_str()) {
            assert_eq!(after.get(path), Some(node), "{path}: kept");
        }
    }
    assert_eq!(
        after.keys().collect::<BTreeSet<_>>(),
        before.keys().collect::<BTreeSet<_>>(),
        "nothing appeared or went"
    );
}

/// The editor: appends to its file and saves two files by writing a temp file and renaming it
/// over the original, a few times, as an editor does; not under `run`, so not the agent.
const EDITOR: &str = r#"
for i in 1 2 3 4 5; do
  printf 'line %s\n' "$i" >> editor.txt
  printf '# draft %s\n' "$i" > .notes.md.swp && mv .notes.md.swp notes.md
  sleep 0.05
done
cp both.txt .both.tmp && printf 'editor was here\n' >> .both.tmp && mv .both.tmp both.txt
"#;

/// The agent: rewrites, deletes, creates, and rewrites one of the editor's files too.
const AGENT: &str = r#"
sed -i 's/red/blue/' agent_edit.txt src/lib.rs
rm agent_del.txt
printf 'generated\n' > agent_new.txt
mkdir gen && printf 'out\n' > gen/out.txt
chmod 700 run.sh
sleep 0.2
sed -i 's/shared/SHARED/' both.txt
"#;

/// The paths of a list in the `agent` part of a rewind report.
fn paths(report: &serde_json::Value, list: &str) -> BTreeSet<String> {
    report["agent"][list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} in {report}"))
        .iter()
        .map(|p| p["path"].as_str().expect("path").to_string())
        .collect()
}

/// The entries of `t` for `names` (absent ones as `None`).
fn pick<'a>(t: &'a BTreeMap<String, Node>, names: &[&str]) -> Vec<Option<&'a Node>> {
    names.iter().map(|n| t.get(*n)).collect()
}

#[test]
fn rewind_agent_restores_what_only_the_agent_changed_and_keeps_the_rest() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(project);
    m.turn(2);
    let start = tree(&m.dir, false);
    // The editor and the agent at once.
    let editor = Command::new("sh")
        .args(["-ec", EDITOR])
        .current_dir(&m.dir)
        .spawn()
        .expect("editor");
    let agent = Command::new(bin())
        .args(["run", "--", "sh", "-ec", AGENT])
        .current_dir(&m.dir)
        .output()
        .expect("run the agent");
    assert!(agent.status.success(), "{}", text(&agent));
    assert!(
        editor.wait_with_output().expect("editor").status.success(),
        "the editor failed"
    );
    let before = tree(&m.dir, false);

    // Who changed what, per file.
    let stat = ok(m.cli(&["diff", "2", "--stat"]));
    assert!(stat.contains("sed (agent sh)"), "{stat}");
    assert!(stat.contains("mv"), "{stat}");
    assert!(!stat.contains("no agent marked"), "{stat}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["show", "2", "--json"]))).expect("json");
    let both = json
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["path"] == "both.txt")
        .expect("both.txt changed");
    let roles: BTreeSet<(String, bool)> = both["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .map(|a| {
            let comm = a["comm"].as_str().expect("comm").to_string();
            (comm, a["agent"].as_bool().expect("classified"))
        })
        .collect();
    assert!(roles.contains(&("sed".into(), true)), "{roles:?}");
    assert!(roles.contains(&("mv".into(), false)), "{roles:?}");
    let log: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["log", "--json"]))).expect("json");
    let turn2: BTreeSet<(String, Option<bool>)> = log[1]["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .map(|a| {
            (
                a["comm"].as_str().unwrap_or("").into(),
                a["agent"].as_bool(),
            )
        })
        .collect();
    for want in [("sed", true), ("rm", true), ("mv", false), ("cp", false)] {
        assert!(
            turn2.contains(&(want.0.to_string(), Some(want.1))),
            "{want:?} in {turn2:?}"
        );
    }

    // The preview lists everything first and changes nothing.
    let preview = ok(m.cli(&["rewind", "2", "--agent", "--dry-run"]));
    for want in [
        "restore  agent_edit.txt",
        "restore  agent_del.txt",
        "restore  src/lib.rs",
        "restore  run.sh",
        "delete   agent_new.txt",
        "delete   gen",
        "conflict both.txt: sed (agent sh) rename",
        "keep     editor.txt",
        "keep     notes.md: mv rename",
        "1 conflict kept",
    ] {
        assert!(preview.contains(want), "{want:?} in:\n{preview}");
    }
    assert!(!preview.contains("restore  both.txt"), "{preview}");
    assert_eq!(tree(&m.dir, false), before, "a dry run changes nothing");
    let report: serde_json::Value = serde_json::from_str(&ok(m.cli(&[
        "rewind",
        "2",
        "--agent",
        "--dry-run",
        "--json",
    ])))
    .expect("json");
    let agent_only = paths(&report, "agent_only");
    for p in [
        "agent_edit.txt",
        "agent_del.txt",
        "agent_new.txt",
        "gen",
        "gen/out.txt",
        "run.sh",
        "src/lib.rs",
    ] {
        assert!(agent_only.contains(p), "{p} in {agent_only:?}");
    }
    assert_eq!(
        paths(&report, "conflicts"),
        BTreeSet::from(["both.txt".into()])
    );
    let others = paths(&report, "others");
    assert!(
        others.contains("editor.txt") && others.contains("notes.md"),
        "{others:?}"
    );
    assert!(agent_only.is_disjoint(&others), "{agent_only:?} {others:?}");

    // The run: the agent's paths are as at the start of turn 2, everything else as it was.
    ok(m.cli(&["rewind", "2", "--agent"]));
    let after = tree(&m.dir, false);
    let restored = [
        "agent_edit.txt",
        "agent_del.txt",
        "agent_new.txt",
        "gen",
        "gen/out.txt",
        "run.sh",
        "src/lib.rs",
    ];
    assert_eq!(pick(&after, &restored), pick(&start, &restored));
    let kept = ["editor.txt", "notes.md", "both.txt"];
    assert_eq!(pick(&after, &kept), pick(&before, &kept));
    assert_ne!(pick(&after, &["both.txt"]), pick(&start, &["both.txt"]));
    let listed: BTreeSet<&String> = after.keys().collect();
    assert!(
        !listed
            .iter()
            .any(|p| p.contains(".swp") || p.contains(".tmp")),
        "{listed:?}"
    );

    // `--conflicts rewind`: the conflict goes back too; the editor's own files stay.
    ok(m.cli(&["rewind", "2", "--agent", "--conflicts", "rewind"]));
    let last = tree(&m.dir, false);
    assert_eq!(pick(&last, &["both.txt"]), pick(&start, &["both.txt"]));
    assert_eq!(pick(&last, &restored), pick(&start, &restored));
    assert_eq!(
        pick(&last, &["editor.txt", "notes.md"]),
        pick(&before, &["editor.txt", "notes.md"])
    );
}

#[test]
fn a_path_the_agent_created_holding_another_process_s_file_is_a_conflict_kept_whatever_the_flag() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::new();
    m.turn(2);
    let agent = Command::new(bin())
        .args([
            "run",
            "--",
            "sh",
            "-ec",
            "mkdir build && echo a > build/a.o",
        ])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(agent.status.success(), "{}", text(&agent));
    std::fs::write(m.path("build/mine.txt"), "mine\n").expect("write");
    for flag in ["keep", "rewind"] {
        let preview = ok(m.cli(&["rewind", "2", "--agent", "--conflicts", flag, "--dry-run"]));
        assert!(
            preview.contains(
                "conflict build: mkdir (agent sh) create; kept, build/mine.txt below it is kept"
            ),
            "{preview}"
        );
        assert!(preview.contains("delete   build/a.o"), "{preview}");
    }
    ok(m.cli(&["rewind", "2", "--agent", "--conflicts", "rewind"]));
    assert_eq!(
        std::fs::read_to_string(m.path("build/mine.txt")).expect("kept"),
        "mine\n"
    );
    assert!(!m.path("build/a.o").exists());
}

#[test]
fn without_a_marked_agent_every_change_is_one_actor_and_agent_rewinds_are_refused() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| std::fs::write(d.join("a.txt"), "one\n").expect("write"));
    m.turn(2);
    m.sh("sed -i s/one/two/ a.txt && echo new > b.txt");
    let status = ok(m.cli(&["status"]));
    assert!(
        status.contains("agent:    no agent marked: every change counts as one actor"),
        "{status}"
    );
    let stat = ok(m.cli(&["diff", "2", "--stat"]));
    assert!(stat.contains("no agent marked"), "{stat}");
    assert!(stat.contains("sed"), "{stat}");
    let log = ok(m.cli(&["log"]));
    assert!(log.contains("no agent marked"), "{log}");
    let before = tree(&m.dir, false);
    let o = m.cli(&["rewind", "2", "--agent"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no agent was ever marked in this folder"),
        "{}",
        text(&o)
    );
    assert_eq!(tree(&m.dir, false), before, "nothing changed");
    // Once `run` marks an agent, the views tell the two apart, and the status names it.
    let o = Command::new(bin())
        .args(["run", "--", "touch", "c.txt"])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    let status = ok(m.cli(&["status"]));
    assert!(
        status.contains("agent:    touch (pid") && status.contains("marked by run"),
        "{status}"
    );
    let stat = ok(m.cli(&["diff", "2", "--stat"]));
    assert!(stat.contains("touch (agent touch)"), "{stat}");
    assert!(!stat.contains("no agent marked"), "{stat}");
}

/// The `user.*` extended attributes of `p`, sorted.
fn xattrs(p: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let o = Command::new("getfattr")
        .args(["-d", "-m", "^user\\.", "--absolute-names", "-e", "hex"])
        .arg(p)
        .output()
        .expect("getfattr (package attr)");
    let mut out: Vec<(String, Vec<u8>)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    out.sort();
    out
}

#[test]
fn the_agent_s_hard_links_and_extended_attributes_are_rewound_exactly() {
    if !require_fuse() || !common::require_program("setfattr") {
        return;
    }
    let m = Mounted::with(|d| {
        std::fs::write(d.join("data.bin"), [0u8, 1, 2, 255]).expect("write");
        std::fs::write(d.join("pair.txt"), "pair\n").expect("write");
        std::fs::hard_link(d.join("pair.txt"), d.join("pair-link.txt")).expect("link");
        std::fs::write(d.join("mine.txt"), "mine\n").expect("write");
    });
    let st = Command::new("setfattr")
        .args(["-n", "user.origin", "-v", "human"])
        .arg(m.path("data.bin"))
        .status()
        .expect("setfattr");
    assert!(st.success());
    m.turn(2);
    let start = tree(&m.dir, false);
    let data_xattrs = xattrs(&m.path("data.bin"));
    assert_eq!(data_xattrs.len(), 1, "{data_xattrs:?}");
    let agent = Command::new(bin())
        .args([
            "run",
            "--",
            "sh",
            "-ec",
            "setfattr -n user.origin -v agent data.bin; setfattr -n user.extra -v 1 data.bin; \
             printf 'PAIR\\n' >> pair-link.txt; ln data.bin data-link.bin",
        ])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(agent.status.success(), "{}", text(&agent));
    std::fs::write(m.path("mine.txt"), "mine, edited\n").expect("write");
    let agents = ["data.bin", "data-link.bin", "pair.txt", "pair-link.txt"];
    let changed = tree(&m.dir, false);
    assert_ne!(pick(&changed, &agents), pick(&start, &agents));
    assert_ne!(xattrs(&m.path("data.bin")), data_xattrs);
    ok(m.cli(&["rewind", "2", "--agent"]));
    let after = tree(&m.dir, false);
    assert_eq!(
        pick(&after, &agents),
        pick(&start, &agents),
        "bytes, modes and hard-link groups"
    );
    assert_eq!(xattrs(&m.path("data.bin")), data_xattrs);
    assert_eq!(
        std::fs::read_to_string(m.path("mine.txt")).expect("read"),
        "mine, edited\n"
    );
}

/// An orphan the agent leaves running: a process whose parent exits before it writes is
/// adopted by `run` (the child subreaper of its command), not by init, so it still descends
/// from the mark and its file is the agent's, rewound by `rewind --agent`; the user's file
/// written beside it stays.
fn an_orphan_of_the_agent_is_the_agent() {
    let m = Mounted::with(project);
    m.turn(2);
    let start = tree(&m.dir, false);
    // The subshell forks the writer and exits at once: the writer is an orphan from then on,
    // writing while the command still runs.
    let agent = Command::new(bin())
        .args([
            "run",
            "--",
            "sh",
            "-ec",
            "( (sleep 0.3; echo orphan > orphan.log; sed -i s/red/blue/ src/lib.rs) & ); \
             echo main > agent_new.txt; sleep 1.2",
        ])
        .current_dir(&m.dir)
        .output()
        .expect("run the agent");
    assert!(agent.status.success(), "{}", text(&agent));
    std::fs::write(m.path("editor.txt"), "the user's line\n").expect("write");
    let before = tree(&m.dir, false);
    assert!(before.contains_key("orphan.log"), "the orphan wrote");
    let json: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["show", "2", "--json"]))).expect("json");
    for path in ["orphan.log", "src/lib.rs", "agent_new.txt"] {
        let change = json
            .as_array()
            .expect("changes")
            .iter()
            .find(|c| c["path"] == path)
            .unwrap_or_else(|| panic!("{path} changed: {json}"));
        let agents: Vec<bool> = change["actors"]
            .as_array()
            .expect("actors")
            .iter()
            .map(|a| a["agent"].as_bool().expect("classified"))
            .collect();
        assert_eq!(agents, vec![true], "{path}: {change}");
    }
    ok(m.cli(&["rewind", "2", "--agent", "-y"]));
    let after = tree(&m.dir, false);
    for (path, node) in &after {
        let want = if path == "editor.txt" {
            before.get(path)
        } else {
            start.get(path)
        };
        assert_eq!(Some(node), want, "{path} after rewind --agent");
    }
    let mut want: BTreeSet<&String> = start.keys().collect();
    want.extend(before.keys().filter(|p| *p == "editor.txt"));
    assert_eq!(
        after.keys().collect::<BTreeSet<_>>(),
        want,
        "the agent's and its orphan's files gone, nothing else"
    );
}

on_both_mounts!(
    an_orphan_the_agent_left_running_is_the_agent,
    an_orphan_the_agent_left_running_is_the_agent_on_a_users_mount,
    an_orphan_of_the_agent_is_the_agent
);

/// Two named agents and the user in one folder in one turn: `alice` edits and creates,
/// `bob` creates and leaves a `nohup`-style child that writes a log after `run` has exited,
/// the user writes beside them. `agents` lists both with their paths; `rewind --agent bob`
/// (no turn: the turn bob was marked in) takes back exactly bob's work, its orphan's log
/// included, and leaves alice's and the user's byte for byte, on their inodes; undo brings
/// bob's back. Then the three edit different lines of one file in one turn (the user saving by
/// rename): `--conflicts merge` takes back bob's line and keeps the other two's.
fn two_named_agents_and_the_user() {
    let m = Mounted::with(project);
    m.turn(2);
    let start = tree(&m.dir, false);
    run_as(
        &m,
        "alice",
        "sed -i s/red/blue/ agent_edit.txt; printf 'alice\\n' > alice.txt",
    );
    run_as(
        &m,
        "bob",
        "printf 'bob\\n' > bob.txt; rm agent_del.txt; \
         ( (sleep 0.4; echo 'bob was here' > bob.log) & ); exit 0",
    );
    std::fs::write(m.path("editor.txt"), "the user's line\n").expect("write");
    // bob's orphan writes after bob's `run` has exited.
    for _ in 0..50 {
        if m.path("bob.log").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = tree(&m.dir, false);
    assert!(before.contains_key("bob.log"), "bob's orphan wrote");
    let agents: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["agents", "--json"]))).expect("json");
    let summary: Vec<(String, u64)> = agents
        .as_array()
        .expect("rows")
        .iter()
        .map(|a| {
            (
                a["name"].as_str().expect("name").to_string(),
                a["paths"].as_u64().expect("paths"),
            )
        })
        .collect();
    // alice touched sed's temporary file too (created, renamed over agent_edit.txt).
    assert_eq!(
        summary,
        vec![("alice".to_string(), 3), ("bob".to_string(), 3)],
        "{agents}"
    );
    let stat = ok(m.cli(&["show", "2", "--stat"]));
    assert!(stat.contains("sh (agent bob)"), "{stat}");
    assert!(stat.contains("sed (agent alice)"), "{stat}");
    let preview = ok(m.cli(&["rewind", "--agent", "bob", "--dry-run"]));
    assert!(
        preview.contains("rewinding bob's changes to the start of turn 2"),
        "{preview}"
    );
    ok(m.cli(&["rewind", "--agent", "bob", "-y"]));
    let after = tree(&m.dir, false);
    let bobs = ["bob.txt", "bob.log", "agent_del.txt"];
    for (path, node) in &before {
        if !bobs.contains(&path.as_str()) {
            assert_eq!(after.get(path), Some(node), "{path}: not bob's, kept");
        }
    }
    for path in bobs {
        assert_eq!(after.get(path), start.get(path), "{path}: bob's, rewound");
    }
    assert_eq!(
        after.keys().filter(|p| !before.contains_key(*p)).count(),
        usize::from(!before.contains_key("agent_del.txt")),
        "nothing else appeared"
    );
    ok(m.cli(&["undo", "-y"]));
    assert_eq!(tree(&m.dir, false), before, "undo brings bob's work back");
    // A name no agent has is refused, and nothing changes.
    let o = m.cli(&["rewind", "--agent", "carol"]);
    assert!(!o.status.success());
    assert!(
        text(&o)
            .contains("no agent named carol was ever marked in this folder (agents: alice, bob"),
        "{}",
        text(&o)
    );
    assert_eq!(tree(&m.dir, false), before);
    // Turn 3: the three edit different lines of one file, the user saving by rename as an
    // editor does; bob's line is taken back, alice's and the user's kept, all else as it was.
    std::fs::write(m.path("shared.txt"), "l1\nl2\nl3\nl4\nl5\nl6\nl7\n").expect("write");
    m.turn(3);
    run_as(&m, "alice", "sed -i s/l1/alice/ shared.txt");
    user_sh(
        &m,
        "sed s/l7/mine/ shared.txt > .shared.swp && mv .shared.swp shared.txt",
    );
    run_as(&m, "bob", "sed -i s/l4/bob/ shared.txt");
    let before = tree(&m.dir, false);
    ok(m.cli(&[
        "rewind",
        "3",
        "--agent",
        "bob",
        "--conflicts",
        "merge",
        "-y",
    ]));
    assert_kept_except(&before, &tree(&m.dir, false), &["shared.txt"]);
    assert_eq!(
        std::fs::read_to_string(m.path("shared.txt")).expect("shared"),
        "alice\nl2\nl3\nl4\nl5\nl6\nmine\n"
    );
}

on_both_mounts!(
    two_named_agents_and_the_user_in_one_folder,
    two_named_agents_and_the_user_in_one_folder_on_a_users_mount,
    two_named_agents_and_the_user
);

/// A process that opened a file for writing in turn 2 and writes through that descriptor in
/// turn 3 (its writes reach the host without a request): the views and the preview of
/// `rewind 3 --agent` name it, in words, as the one whose descriptor wrote, and a rewind of
/// the agent's changes keeps its file; the agent's own file in turn 3 is rewound.
fn a_held_descriptor_is_its_openers() {
    let m = Mounted::with(project);
    m.turn(2);
    // The agent is marked in turn 2 already, so the holder is classified as another process.
    let agent = Command::new(bin())
        .args([
            "run",
            "--as",
            "bot",
            "--",
            "sh",
            "-c",
            "echo early > early.txt",
        ])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(agent.status.success(), "{}", text(&agent));
    let outside = tempfile::tempdir().expect("tempdir");
    let go = outside.path().join("go");
    let script = format!(
        "exec 3>>held.log; echo one >&3; while [ ! -e {go} ]; do sleep 0.02; done; echo two >&3",
        go = go.display()
    );
    let mut holder = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&m.dir)
        .spawn()
        .expect("holder");
    for _ in 0..200 {
        if std::fs::read(m.path("held.log")).is_ok_and(|b| b == b"one\n") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    m.turn(3);
    std::fs::write(&go, "").expect("go");
    assert!(holder.wait().expect("holder").success());
    let agent = Command::new(bin())
        .args(["run", "--as", "bot", "--", "sh", "-c", "echo bot > bot.txt"])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(agent.status.success(), "{}", text(&agent));
    let before = tree(&m.dir, false);
    let preview = ok(m.cli(&["rewind", "3", "--agent", "--dry-run"]));
    let pid = holder.id();
    assert!(
        preview.contains(&format!(
            "keep     held.log: written through a descriptor sh (pid {pid}) opened in turn 2"
        )),
        "{preview}"
    );
    assert!(!preview.contains("? ?"), "{preview}");
    assert!(preview.contains("delete   bot.txt"), "{preview}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["show", "3", "--json"]))).expect("json");
    let held = json
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["path"] == "held.log")
        .unwrap_or_else(|| panic!("held.log in {json}"));
    let actors = held["actors"].as_array().expect("actors");
    assert_eq!(actors.len(), 1, "{held}");
    assert_eq!(actors[0]["what"], "held");
    assert_eq!(actors[0]["opened_in"], 2);
    assert_eq!(actors[0]["agent"], false);
    ok(m.cli(&["rewind", "3", "--agent", "-y"]));
    let after = tree(&m.dir, false);
    let mut want = before.clone();
    want.remove("bot.txt");
    assert_eq!(after, want, "only the agent's file went");
}

on_both_mounts!(
    a_write_through_a_descriptor_held_across_a_turn_is_its_openers,
    a_write_through_a_descriptor_held_across_a_turn_is_its_openers_on_a_users_mount,
    a_held_descriptor_is_its_openers
);

/// `--conflicts merge`: the agent and the user edit different lines of one text file in the
/// same turn (the user saving by rename, as editors do), the same line of another, and a
/// binary file both: the agent's lines of the first are taken back and the user's kept,
/// byte for byte; the second (overlapping) and the binary one are kept whole, with the hunks
/// and the reason shown; the preview shows the merge as a diff; nothing else changes; undo
/// brings the agent's lines back.
fn merge_takes_back_the_agents_lines() {
    let m = Mounted::with(|d| {
        project(d);
        std::fs::write(d.join("doc.txt"), "one\ntwo\nthree\nfour\nfive\nsix\n").expect("doc");
        std::fs::write(d.join("other.txt"), "x\ny\n").expect("other");
        std::fs::write(d.join("bin.dat"), b"\0\x01bin\n").expect("bin");
    });
    m.turn(2);
    let bot = |script: &str| run_as(&m, "bot", script);
    let user = |script: &str| user_sh(&m, script);
    bot("sed -i s/one/ONE/ doc.txt; sed -i s/x/X/ other.txt; printf 'bot\\000' >> bin.dat");
    user(
        "sed s/five/FIVE/ doc.txt > .doc.swp && mv .doc.swp doc.txt; \
         sed -i 's/X/X, mine/' other.txt; printf 'me\\000' >> bin.dat",
    );
    bot("sed -i s/three/THREE/ doc.txt");
    let before = tree(&m.dir, false);
    let preview = ok(m.cli(&[
        "rewind",
        "2",
        "--agent",
        "bot",
        "--conflicts",
        "merge",
        "--dry-run",
    ]));
    assert!(
        preview.contains("merge    doc.txt: sed (agent bot) rename, mv rename, sed (agent bot) rename; bot's lines taken back, the others' kept")
            || preview.contains("merge    doc.txt: sed (agent bot) rename, mv rename; bot's lines taken back, the others' kept"),
        "{preview}"
    );
    for line in ["-ONE", "+one", "-THREE", "+three", " FIVE"] {
        assert!(
            preview
                .lines()
                .any(|l| l.trim_start() == line || l.ends_with(line)),
            "{line} in {preview}"
        );
    }
    assert!(
        preview.contains("conflict other.txt:") && preview.contains("overlapping edits"),
        "{preview}"
    );
    assert!(preview.contains("X, mine"), "the hunk is shown: {preview}");
    assert!(
        preview.contains("conflict bin.dat:")
            && preview.contains("not merged line by line: binary"),
        "{preview}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(m.cli(&[
        "rewind",
        "2",
        "--agent",
        "bot",
        "--conflicts",
        "merge",
        "--dry-run",
        "--json",
    ])))
    .expect("json");
    let merged = json["agent"]["merged"].as_array().expect("merged");
    assert_eq!(merged.len(), 1, "{json}");
    assert_eq!(merged[0]["path"], "doc.txt");
    assert!(merged[0]["diff"].as_str().expect("diff").contains("+one"));
    assert_eq!(tree(&m.dir, false), before, "a dry run changes nothing");
    ok(m.cli(&[
        "rewind",
        "2",
        "--agent",
        "bot",
        "--conflicts",
        "merge",
        "-y",
    ]));
    assert_kept_except(&before, &tree(&m.dir, false), &["doc.txt"]);
    assert_eq!(
        std::fs::read_to_string(m.path("doc.txt")).expect("doc"),
        "one\ntwo\nthree\nfour\nFIVE\nsix\n"
    );
    ok(m.cli(&["undo", "-y"]));
    assert_eq!(
        tree(&m.dir, false),
        before,
        "undo brings the agent's lines back"
    );
}

on_both_mounts!(
    merge_takes_back_the_agents_lines_and_keeps_yours,
    merge_takes_back_the_agents_lines_and_keeps_yours_on_a_users_mount,
    merge_takes_back_the_agents_lines
);

/// The views fold a large tree to one line (`--expand` lists it) and take `--agent NAME`:
/// `show --stat`, `diff --stat` and `log` keep what that agent changed; a name no agent has is
/// refused, naming the agents there are.
fn views_fold_and_filter_by_agent() {
    let m = Mounted::with(project);
    m.turn(2);
    let o = Command::new(bin())
        .args([
            "run",
            "--as",
            "bot",
            "--",
            "sh",
            "-ec",
            "mkdir vendor; for i in $(seq 1 60); do echo $i > vendor/f$i.js; done; \
             echo bot >> agent_edit.txt",
        ])
        .current_dir(&m.dir)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(m.path("editor.txt"), "mine\n").expect("write");
    m.turn(3);
    std::fs::write(m.path("notes.md"), "# only mine\n").expect("write");
    let stat = ok(m.cli(&["show", "2", "--stat"]));
    assert!(
        stat.lines()
            .any(|l| l.starts_with(" vendor/") && l.contains("| 61 paths (61 created)")),
        "{stat}"
    );
    assert!(!stat.contains("vendor/f1.js"), "{stat}");
    let expanded = ok(m.cli(&["show", "2", "--stat", "--expand"]));
    assert!(expanded.contains("vendor/f60.js"), "{expanded}");
    let bots = ok(m.cli(&["show", "2", "--stat", "--agent", "bot"]));
    assert!(bots.contains("agent_edit.txt"), "{bots}");
    assert!(!bots.contains("editor.txt"), "{bots}");
    let diff = ok(m.cli(&["diff", "2", "--stat", "--agent", "bot"]));
    assert!(
        !diff.contains("notes.md") && !diff.contains("editor.txt"),
        "{diff}"
    );
    let log: serde_json::Value =
        serde_json::from_str(&ok(m.cli(&["log", "--json", "--agent", "bot"]))).expect("json");
    let turns: Vec<u64> = log
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["turn"].as_u64().expect("turn"))
        .collect();
    assert_eq!(turns, vec![2], "{log}");
    let o = m.cli(&["show", "2", "--agent", "ghost"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("no agent named ghost was ever marked in this folder (agents: bot;"),
        "{}",
        text(&o)
    );
}

on_both_mounts!(
    views_fold_large_trees_and_filter_by_agent,
    views_fold_large_trees_and_filter_by_agent_on_a_users_mount,
    views_fold_and_filter_by_agent
);
