//! Looking back without rewinding: `diff N..M` (the start of one turn against the start of
//! another), `show N` (one turn alone), `cat N -- PATH` (a file as it was) and
//! `restore N -- PATH --to DEST` (copied out), mounted and on an unmounted folder, with bytes
//! compared.

mod common;
use common::{Mounted, require_fuse};
use std::process::Output;

/// `ckpt-mount ARGS --dir DIR -- PATH` (the folder before the `--`).
fn with_path(m: &Mounted, args: &[&str], path: &str) -> Output {
    std::process::Command::new(common::bin())
        .args(args)
        .arg("--dir")
        .arg(&m.dir)
        .arg("--")
        .arg(path)
        .output()
        .expect("run")
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn failed(o: Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Bytes that are not text, and larger than one read buffer and one blob chunk.
fn binary(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Turn 2 edits a.txt and creates b.txt and big.bin; turn 3 edits a.txt again, changes
/// big.bin and deletes b.txt; turn 4 retargets a symlink.
fn history(m: &Mounted) -> (Vec<u8>, Vec<u8>) {
    let (big1, big2) = (binary(3 << 20, 1), binary(3 << 20, 2));
    m.turn(2);
    std::fs::write(m.path("a.txt"), "one\ntwo\n").expect("write");
    std::fs::write(m.path("b.txt"), "bee\n").expect("write");
    std::fs::write(m.path("big.bin"), &big1).expect("write");
    m.turn(3);
    std::fs::write(m.path("a.txt"), "one\ntwo\nthree\n").expect("write");
    std::fs::write(m.path("big.bin"), &big2).expect("write");
    std::fs::remove_file(m.path("b.txt")).expect("rm");
    m.turn(4);
    std::fs::remove_file(m.path("link")).expect("rm link");
    std::os::unix::fs::symlink("b.txt", m.path("link")).expect("symlink");
    (big1, big2)
}

fn project(d: &std::path::Path) {
    std::fs::write(d.join("a.txt"), "one\n").expect("write");
    std::os::unix::fs::symlink("a.txt", d.join("link")).expect("symlink");
}

#[test]
fn diff_between_turns_and_show_of_one_turn_say_what_happened_then() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(project);
    history(&m);
    // The start of turn 2 against the start of turn 3: turn 2's work only.
    let between = ok(m.cli(&["diff", "2..3", "--stat"]));
    assert!(between.contains("a.txt"), "{between}");
    assert!(between.contains("b.txt   | created"), "{between}");
    assert!(
        between.contains("big.bin | created  bin - -> 3.0 MiB"),
        "{between}"
    );
    // Sorted by path.
    let order: Vec<usize> = ["a.txt", "b.txt", "big.bin"]
        .iter()
        .map(|p| between.find(p).expect(p))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{between}");
    // `show 2` is the same span.
    assert_eq!(ok(m.cli(&["show", "2", "--stat"])), between);
    // `show 3`: what turn 3 alone did.
    let json = ok(m.cli(&["show", "3", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let changes: Vec<(String, String)> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|c| {
            (
                c["path"].as_str().expect("path").to_string(),
                c["change"].as_str().expect("change").to_string(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("a.txt".to_string(), "modified".to_string()),
            ("b.txt".to_string(), "deleted".to_string()),
            ("big.bin".to_string(), "modified".to_string()),
        ]
    );
    let big = &v[2];
    assert_eq!(big["binary"], true);
    assert_eq!(big["size_before"], 3 << 20);
    assert_eq!(big["size_after"], 3 << 20);
    let a = &v[0];
    assert_eq!(a["added"], 1, "{a}");
    assert!(a["text"].as_str().expect("text").contains("+three"));
    // The last turn alone runs to now; a span must go forward and name live turns.
    let last = ok(m.cli(&["show", "4"]));
    assert!(last.contains("symlink a.txt -> b.txt"), "{last}");
    let o = m.cli(&["diff", "2..9"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a turn that does not exist: {o:?}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("turn 9 does not exist; the turns: 1, 2, 3, 4")
    );
    let o = m.cli(&["diff", "3..2"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn cat_and_restore_copy_out_old_versions_exactly() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(project);
    let (big1, _) = history(&m);
    let out = tempfile::tempdir().expect("tempdir");
    for mounted in [true, false] {
        if !mounted {
            m.unmount();
        }
        let cat = |turn: &str, path: &str| with_path(&m, &["cat", turn], path);
        assert_eq!(ok(cat("2", "a.txt")), "one\n");
        assert_eq!(ok(cat("3", "a.txt")), "one\ntwo\n");
        assert_eq!(ok(cat("4", "a.txt")), "one\ntwo\nthree\n");
        // Never changed since the start of turn 4: the folder's bytes.
        let o = cat("3", "big.bin");
        assert!(o.status.success(), "{o:?}");
        assert!(
            o.stdout == big1,
            "big.bin at turn 3: {} bytes",
            o.stdout.len()
        );
        assert!(failed(cat("2", "b.txt")).contains("b.txt did not exist when turn 2 began"));
        assert!(failed(cat("3", "link")).contains("was a symlink to a.txt"));
        // Copied out, with its mode, and never over an existing file without --force.
        let dest = out.path().join(format!("big-{mounted}.bin"));
        let dest_s = dest.to_str().expect("utf-8");
        let said = ok(with_path(&m, &["restore", "3", "--to", dest_s], "big.bin"));
        assert!(said.contains("3.0 MiB"), "{said}");
        assert!(std::fs::read(&dest).expect("dest") == big1);
        let again = with_path(&m, &["restore", "3", "--to", dest_s], "a.txt");
        assert!(failed(again).contains("--force"));
        assert!(
            std::fs::read(&dest).expect("dest") == big1,
            "dest untouched"
        );
        let link = out.path().join(format!("link-{mounted}"));
        ok(with_path(
            &m,
            &["restore", "4", "--to", link.to_str().expect("utf-8")],
            "link",
        ));
        assert_eq!(
            std::fs::read_link(&link).expect("readlink"),
            std::path::Path::new("a.txt")
        );
        let leftovers: Vec<_> = std::fs::read_dir(out.path())
            .expect("ls")
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".ckpt-restore-")
            })
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
    m.remount();
}

#[test]
fn diff_piped_into_head_ends_quietly() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(project);
    m.turn(2);
    let lines: String = (0..20000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(m.path("a.txt"), lines).expect("write");
    let o = m.sh_output(&format!("{} diff 2 --dir . | head -1", common::bin()));
    assert!(o.status.success(), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "modified a.txt\n");
}

/// `getfattr -d -m - -h` of `path` (every name this user can see, a symlink's own): its
/// `NAME="VALUE"` lines, as getfattr sorts them.
fn getfattr(path: &std::path::Path) -> Vec<String> {
    let o = std::process::Command::new("getfattr")
        .args(["-d", "-m", "-", "-h", "--absolute-names"])
        .arg(path)
        .output()
        .expect("getfattr");
    assert!(o.status.success(), "getfattr {}: {o:?}", path.display());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// `restore --to` gives the copy the extended attributes of the version it copies: those of
/// the pre-image when a later turn changed the file (`f`: its attributes changed and one
/// removed in turn 2, `setfattr` through the mount), those the file has in the folder when no
/// turn since changed it (`g`); mounted and on the unmounted folder, read back with getfattr.
fn restore_keeps_the_versions_xattrs() {
    if !common::require_program("getfattr") || !common::require_program("setfattr") {
        return;
    }
    let mut m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "one\n").expect("write");
        std::fs::write(d.join("g"), "gee\n").expect("write");
        let o = std::process::Command::new("sh")
            .arg("-ec")
            .arg(
                "setfattr -n user.a -v 1 f; setfattr -n user.b -v bee f; setfattr -n user.g -v G g",
            )
            .current_dir(d)
            .output()
            .expect("setfattr");
        assert!(o.status.success(), "{o:?}");
    });
    m.turn(2);
    m.sh("setfattr -n user.a -v 2 f; setfattr -x user.b f; echo two > f");
    let out = tempfile::tempdir().expect("tempdir");
    for mounted in [true, false] {
        if !mounted {
            m.unmount();
        }
        let dest = out.path().join(format!("f-{mounted}"));
        let said = ok(with_path(
            &m,
            &["restore", "2", "--to", dest.to_str().expect("utf-8")],
            "f",
        ));
        assert!(said.ends_with("(4 B, 2 extended attributes)\n"), "{said}");
        assert_eq!(getfattr(&dest), ["user.a=\"1\"", "user.b=\"bee\""]);
        assert_eq!(std::fs::read_to_string(&dest).expect("read"), "one\n");
        let dest = out.path().join(format!("g-{mounted}"));
        let said = ok(with_path(
            &m,
            &["restore", "2", "--to", dest.to_str().expect("utf-8")],
            "g",
        ));
        assert!(said.ends_with("(4 B, 1 extended attribute)\n"), "{said}");
        assert_eq!(getfattr(&dest), ["user.g=\"G\""]);
    }
    m.remount();
}

on_both_mounts!(
    restore_keeps_extended_attributes,
    restore_keeps_extended_attributes_on_a_users_mount,
    restore_keeps_the_versions_xattrs
);

/// What a copy cannot be given is said, one line each on stderr, and the rest is kept: a
/// `security.` attribute (root set it on the user's file) as a normal user, mounted and not;
/// as root, `trusted.` and `security.` attributes are kept, and file capabilities never are.
#[test]
fn restore_says_which_extended_attributes_it_cannot_keep() {
    use common::user::{USER, UserArea, tier_runs};
    let Some((uid, gid)) = tier_runs() else {
        return;
    };
    if !common::require_program("getfattr") || !common::require_program("setfattr") {
        return;
    }
    let area = UserArea::new(uid, gid);
    area.sh("printf 'one\\n' > site/f && setfattr -n user.a -v 1 site/f");
    let out = area.root.path().join("out");
    std::fs::create_dir(&out).expect("mkdir out");
    std::os::unix::fs::chown(&out, Some(uid), Some(gid)).expect("chown out");
    let root_sets = std::process::Command::new("setfattr")
        .args(["-n", "security.ckpt_test", "-v", "S"])
        .arg(area.site.join("f"))
        .status()
        .expect("setfattr");
    assert!(root_sets.success());
    area.sh("$ck mount site && echo 2 > site/.ckpt/turn && echo two > site/f");
    for (i, then) in ["true", "$ck unmount site"].iter().enumerate() {
        area.sh(then);
        let o = area.sh_as(
            USER,
            &format!("$ck restore 2 --dir site --to out/f{i} -- f"),
        );
        let (said, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{said}{err}");
        assert!(said.ends_with("(4 B, 1 extended attribute)\n"), "{said}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!(
                "out/f{i}: extended attribute security.ckpt_test not kept: Operation not permitted"
            )) && err.contains("(setting it needs a privilege this user lacks)"),
            "{err}"
        );
        let dest = area.root.path().join(format!("out/f{i}"));
        assert_eq!(getfattr(&dest), ["user.a=\"1\""]);
        assert_eq!(std::fs::read_to_string(&dest).expect("read"), "one\n");
    }

    // As root: trusted. and security. kept, a file capability said and left out.
    let m = Mounted::with(|d| {
        std::fs::write(d.join("f"), "one\n").expect("write");
        let o = std::process::Command::new("sh")
            .arg("-ec")
            .arg(
                "setfattr -n trusted.t -v T f; setfattr -n security.ckpt_test -v S f; \
                 setfattr -n security.capability -v 0sAQAAAgAgAAAAAAAAAAAAAAAAAAA= f",
            )
            .current_dir(d)
            .output()
            .expect("setfattr");
        assert!(o.status.success(), "{o:?}");
    });
    m.turn(2);
    m.sh("echo two > f");
    let dest = area.root.path().join("out/root-f");
    let o = with_path(
        &m,
        &["restore", "2", "--to", dest.to_str().expect("utf-8")],
        "f",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(ok(o.clone()).ends_with("(4 B, 2 extended attributes)\n"));
    assert!(
        err.contains("extended attribute security.capability not kept: file capabilities are not carried to a copy, as set-id bits are not"),
        "{err}"
    );
    assert_eq!(
        getfattr(&dest),
        ["security.ckpt_test=\"S\"", "trusted.t=\"T\""]
    );
}
