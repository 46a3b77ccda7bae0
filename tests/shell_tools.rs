//! Real programs through the mount: each test sets up a folder, begins turn 2, snapshots the
//! tree, runs shell tools (coreutils, sed, tar, git, python3), rewinds to turn 2 and asserts
//! the tree is exactly what it was: bytes, modes, symlink targets, empty dirs and hard links.

mod common;
use common::{Mounted, Node, assert_same_tree, require_fuse, tree};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Writes `rel` below `dir` (making parents) with `mode`.
fn put(dir: &Path, rel: &str, body: &str, mode: u32) {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("create parents");
    }
    std::fs::write(&p, body).expect("write file");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Runs `script` in turn 2 and checks that rewinding to 2 gives back exactly the tree from
/// before it, through the mount and on disk after unmounting.
fn check_turn(m: &mut Mounted, script: &str, with_git: bool) {
    m.turn(2);
    let before = tree(&m.dir, with_git);
    m.sh(script);
    let after = tree(&m.dir, with_git);
    assert_ne!(
        before, after,
        "the script changed nothing, so the test proves nothing"
    );
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, with_git));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, with_git));
}

/// Mounts after `setup`, runs `turn1` (if any) in turn 1, then `check_turn`.
fn case(setup: impl FnOnce(&Path), turn1: &str, script: &str, with_git: bool) {
    let mut m = Mounted::with(setup);
    if !turn1.is_empty() {
        m.sh(turn1);
    }
    check_turn(&mut m, script, with_git);
}

fn basic_files(d: &Path) {
    put(d, "a.txt", "alpha\n", 0o644);
    put(d, "b.txt", "bravo\n", 0o644);
    put(d, "c.txt", "charlie\n", 0o640);
    put(d, "dir/inner.txt", "inner\n", 0o644);
}

fn nested_tree(d: &Path) {
    put(d, "top/readme.md", "# top\n", 0o644);
    put(d, "top/sub/secret.key", "s3cr3t\n", 0o600);
    put(d, "top/sub/run.sh", "#!/bin/sh\necho hi\n", 0o755);
    put(d, "top/sub/deeper/leaf.txt", "leaf\n", 0o644);
    std::fs::create_dir_all(d.join("top/empty")).expect("mkdir empty");
    std::fs::create_dir_all(d.join("top/sub/also-empty")).expect("mkdir empty");
    std::os::unix::fs::symlink("../readme.md", d.join("top/sub/link")).expect("symlink");
    std::os::unix::fs::symlink("/nonexistent/target", d.join("top/dangling")).expect("symlink");
    std::fs::set_permissions(d.join("top/sub"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod dir");
}

#[test]
fn rm_of_files() {
    if !require_fuse() {
        return;
    }
    case(
        basic_files,
        "",
        "rm a.txt; rm -f c.txt dir/inner.txt",
        false,
    );
}

#[test]
fn rm_rf_of_a_nested_tree() {
    if !require_fuse() {
        return;
    }
    case(nested_tree, "", "rm -rf top", false);
}

#[test]
fn rm_rf_of_a_tree_made_in_turn_1() {
    if !require_fuse() {
        return;
    }
    let turn1 = "mkdir -p t/e t/s/d && echo x > t/s/f && chmod 600 t/s/f \
                 && printf '#!/bin/sh\\n' > t/s/x && chmod 755 t/s/x && ln -s ../s/f t/e/l";
    case(|_| {}, turn1, "rm -rf t", false);
}

#[test]
fn sed_in_place() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            basic_files(d);
            put(d, "exec.sh", "#!/bin/sh\necho alpha\n", 0o750);
        },
        "",
        "sed -i 's/alpha/ALPHA/' a.txt exec.sh; sed -i '1d' dir/inner.txt",
        false,
    );
}

#[test]
fn mv_of_a_file_and_over_an_existing_file() {
    if !require_fuse() {
        return;
    }
    case(
        basic_files,
        "",
        "mv a.txt renamed.txt; mv b.txt c.txt; mv dir/inner.txt outer.txt",
        false,
    );
}

#[test]
fn mv_of_a_directory() {
    if !require_fuse() {
        return;
    }
    case(nested_tree, "", "mv top moved", false);
}

#[test]
fn mv_of_a_directory_onto_and_into_existing_empty_dirs() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            nested_tree(d);
            put(d, "other/x.txt", "x\n", 0o644);
            std::fs::create_dir(d.join("onto")).expect("mkdir");
            std::fs::create_dir(d.join("into")).expect("mkdir");
        },
        "",
        "mv -T top onto; mv other into",
        false,
    );
}

#[test]
fn mv_of_a_directory_then_a_new_dir_at_the_old_name() {
    if !require_fuse() {
        return;
    }
    case(
        nested_tree,
        "",
        "mv top old-top; mkdir -p top/sub; echo new > top/readme.md; echo n2 > top/sub/run.sh; \
         chmod 700 top",
        false,
    );
}

#[test]
fn cp_r_new_and_over_existing() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            nested_tree(d);
            put(d, "dst/readme.md", "will be overwritten\n", 0o600);
        },
        "",
        "cp -r top copy; cp -rT top dst; cp -a top archive",
        false,
    );
}

#[test]
fn truncate_to_zero_and_to_one_megabyte() {
    if !require_fuse() {
        return;
    }
    case(
        basic_files,
        "",
        "truncate -s 0 a.txt; truncate -s 1M b.txt; truncate -s 1M new.bin",
        false,
    );
}

#[test]
fn chmod_of_files_and_dirs() {
    if !require_fuse() {
        return;
    }
    case(
        nested_tree,
        "",
        "chmod 000 top/readme.md; chmod +x top/sub/secret.key; chmod 700 top/empty; \
         chmod -R go-rwx top/sub; chmod 4755 top/sub/run.sh",
        false,
    );
}

#[test]
fn ln_hard_links() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            basic_files(d);
            put(d, "pair1", "shared one\n", 0o644);
            std::fs::hard_link(d.join("pair1"), d.join("pair2")).expect("hard link");
        },
        "",
        "ln a.txt a-link; ln b.txt dir/b-link; sed -i 's/one/two/' pair1",
        false,
    );
}

#[test]
fn hard_link_pair_rewritten_by_sed_gets_its_sharing_back() {
    if !require_fuse() {
        return;
    }
    let m_setup = |d: &Path| {
        put(d, "p/first", "shared one\n", 0o640);
        std::fs::hard_link(d.join("p/first"), d.join("second")).expect("hard link");
    };
    let mut m = Mounted::with(m_setup);
    m.turn(2);
    let before = tree(&m.dir, false);
    assert!(
        matches!(before.get("second"), Some(Node::File { link_group: 1, .. })),
        "setup has a shared pair"
    );
    m.sh("sed -i 's/one/two/' second");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn hard_link_made_in_turn_1_then_both_names_rewritten() {
    if !require_fuse() {
        return;
    }
    case(
        |d| put(d, "f", "one\n", 0o644),
        "ln f g",
        "sed -i 's/one/two/' f; echo three > g",
        false,
    );
}

#[test]
fn hard_link_pair_appended_through_one_name() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            put(d, "one", "shared\n", 0o644);
            std::fs::hard_link(d.join("one"), d.join("two")).expect("hard link");
            put(d, "three", "other\n", 0o644);
        },
        "",
        "echo more >> one; chmod 600 two; ln -f three one",
        false,
    );
}

#[test]
fn hard_link_pair_edited_in_two_turns_comes_back_from_the_older_one() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| {
        put(d, "f", "one\n", 0o644);
        std::fs::hard_link(d.join("f"), d.join("g")).expect("hard link");
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("echo appended >> g");
    m.turn(3);
    m.sh("sed -i 's/one/two/' f");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn hard_link_edited_through_a_name_the_kernel_learnt_second() {
    if !require_fuse() {
        return;
    }
    // FUSE `open` names no path: the daemon captures the inode under the first name it knows
    // it by (`b`, looked up first here), while `sed -i a` then captures `a` with the appended
    // bytes. The rewind must still give both names the bytes from the start of the turn.
    let mut m = Mounted::with(|d| {
        put(d, "a", "one\n", 0o644);
        std::fs::hard_link(d.join("a"), d.join("b")).expect("hard link");
    });
    m.sh("cat b > /dev/null");
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh("echo appended >> a; sed -i 's/one/two/' a");
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn ln_s_symlinks() {
    if !require_fuse() {
        return;
    }
    case(
        |d| {
            basic_files(d);
            std::os::unix::fs::symlink("a.txt", d.join("l")).expect("symlink");
        },
        "",
        "ln -s a.txt new-link; ln -sfn b.txt l; ln -s ../a.txt dir/up; ln -s dir dirlink",
        false,
    );
}

#[test]
fn mkdir_p() {
    if !require_fuse() {
        return;
    }
    case(
        basic_files,
        "",
        "mkdir -p x/y/z dir/more/levels; mkdir -m 700 priv",
        false,
    );
}

#[test]
fn tar_x_over_existing_files() {
    if !require_fuse() {
        return;
    }
    let src = tempfile::tempdir().expect("tempdir");
    let s = src.path().join("content");
    put(&s, "a.txt", "alpha from tar\n", 0o600);
    put(
        &s,
        "dir/inner.txt",
        "inner from tar, longer than before\n",
        0o755,
    );
    put(&s, "dir/new/added.txt", "added\n", 0o644);
    std::os::unix::fs::symlink("a.txt", s.join("b.txt")).expect("symlink");
    let tarball = src.path().join("x.tar");
    let st = Command::new("tar")
        .arg("cf")
        .arg(&tarball)
        .arg("-C")
        .arg(&s)
        .arg(".")
        .status()
        .expect("run tar");
    assert!(st.success(), "tar cf failed");
    case(
        basic_files,
        "",
        &format!("tar xf {}", tarball.display()),
        false,
    );
}

const GIT_REPO: &str = "git init -q -b main . && printf 'one\\n' > a.txt && mkdir -p src \
    && printf 'fn main() {}\\n' > src/main.rs && printf 'target\\n*.log\\n' > .gitignore \
    && git add -A && git commit -qm first \
    && git checkout -qb feature && printf 'two\\n' > a.txt && git rm -q src/main.rs \
    && mkdir -p lib && printf 'lib\\n' > lib/lib.rs && chmod 755 lib/lib.rs \
    && git add -A && git commit -qm second && git checkout -q main";

#[test]
fn git_checkout_of_another_branch() {
    if !require_fuse() {
        return;
    }
    case(|_| {}, GIT_REPO, "git checkout -q feature", true);
}

#[test]
fn git_stash_u() {
    if !require_fuse() {
        return;
    }
    case(
        |_| {},
        &format!("{GIT_REPO} && echo dirty >> a.txt && echo untracked > u.txt"),
        "git stash -u -q",
        true,
    );
}

#[test]
fn git_clean_fdx() {
    if !require_fuse() {
        return;
    }
    case(
        |_| {},
        &format!(
            "{GIT_REPO} && mkdir -p target/debug build && echo bin > target/debug/app \
             && echo log > x.log && echo u > untracked.txt && echo b > build/out"
        ),
        "git clean -fdxq",
        true,
    );
}

#[test]
fn git_commit_am() {
    if !require_fuse() {
        return;
    }
    case(
        |_| {},
        &format!("{GIT_REPO} && echo more >> a.txt && echo changed > src/main.rs"),
        "git commit -qam third && git gc -q",
        true,
    );
}

#[test]
fn editor_save_by_rename() {
    if !require_fuse() {
        return;
    }
    // vim: a swap file beside the file, a backup by rename, a new file written in its place;
    // VSCode-like: write a temp file, fsync, rename over the original.
    let script = r#"python3 - <<'EOF'
import os
def vim_save(path, data):
    swp = os.path.join(os.path.dirname(path) or '.', '.' + os.path.basename(path) + '.swp')
    with open(swp, 'wb') as s:
        s.write(b'b0VIM swap')
    mode = os.stat(path).st_mode & 0o7777
    os.rename(path, path + '~')
    with open(path, 'wb') as f:
        f.write(data)
    os.chmod(path, mode)
    os.unlink(path + '~')
    os.unlink(swp)
def code_save(path, data):
    tmp = path + '.tmp.1234'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    os.replace(tmp, path)
vim_save('a.txt', b'alpha saved by vim\n')
code_save('dir/inner.txt', b'inner saved by code\n')
code_save('a.txt', b'and again\n')
EOF"#;
    case(basic_files, "", script, false);
}

#[test]
fn o_rdwr_write_in_place() {
    if !require_fuse() {
        return;
    }
    let script = r#"python3 - <<'EOF'
import os
fd = os.open('a.txt', os.O_RDWR)
os.pwrite(fd, b'ALP', 0)
os.pwrite(fd, b'-tail-beyond-the-end', 10)
os.close(fd)
fd = os.open('b.txt', os.O_RDWR)
os.pwrite(fd, b'B', 0)
os.ftruncate(fd, 3)
os.close(fd)
EOF"#;
    case(basic_files, "", script, false);
}

#[test]
fn o_append() {
    if !require_fuse() {
        return;
    }
    case(
        basic_files,
        "",
        "echo more >> a.txt; echo x >> a.txt; echo new >> fresh.txt",
        false,
    );
}

#[test]
fn mmap_writes() {
    if !require_fuse() {
        return;
    }
    let script = r#"python3 - <<'EOF'
import mmap, os
with open('a.txt', 'r+b') as f:
    m = mmap.mmap(f.fileno(), 0)
    m[0:5] = b'ALPHA'
    m.flush()
    m.close()
fd = os.open('big.bin', os.O_RDWR)
m = mmap.mmap(fd, 0)
for i in range(0, len(m), 4096):
    m[i] = 0x41
m.flush()
m.close()
os.close(fd)
EOF"#;
    case(
        |d| {
            basic_files(d);
            let data: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
            std::fs::write(d.join("big.bin"), data).expect("write big");
        },
        "",
        script,
        false,
    );
}

fn wait_for(path: &Path, what: &str) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_file_open_for_writing_across_the_turn_boundary() {
    if !require_fuse() {
        return;
    }
    let signals = tempfile::tempdir().expect("tempdir");
    let ready = signals.path().join("ready");
    let go = signals.path().join("go");
    let mut m = Mounted::with(|d| put(d, "log.txt", "original content\n", 0o644));
    let script = format!(
        r#"
import os, time
fd = os.open('log.txt', os.O_WRONLY)
os.pwrite(fd, b'TURN1', 0)
open({ready:?}, 'w').close()
while not os.path.exists({go:?}):
    time.sleep(0.005)
os.pwrite(fd, b'TURN2', 5)
os.write(fd, b'appended-in-turn-2')
os.close(fd)
"#,
        ready = ready.display().to_string(),
        go = go.display().to_string()
    );
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .current_dir(&m.dir)
        .spawn()
        .expect("spawn python3");
    wait_for(&ready, "the writer's first write");
    m.turn(2);
    let before = tree(&m.dir, false);
    assert_eq!(
        before.get("log.txt"),
        Some(&Node::File {
            mode: 0o644,
            data: b"TURN1nal content\n".to_vec(),
            link_group: 0
        })
    );
    std::fs::write(&go, "").expect("signal");
    let st = child.wait().expect("wait for python3");
    assert!(st.success(), "writer failed");
    assert_ne!(before, tree(&m.dir, false));
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, false));
}

#[test]
fn reads_through_the_mount_show_restored_bytes_at_once() {
    if !require_fuse() {
        return;
    }
    let m = Mounted::with(|d| {
        put(d, "same-size.txt", "0123456789\n", 0o644);
        put(d, "replaced.txt", "short\n", 0o644);
        put(d, "shrunk.txt", "a much longer original line\n", 0o644);
        put(d, "d/gone.txt", "was here\n", 0o644);
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    m.sh(
        "python3 -c \"import os; fd=os.open('same-size.txt', os.O_RDWR); os.pwrite(fd, b'ABCDEFGHIJ', 0); os.close(fd)\"; \
         sed -i 's/short/a far longer replacement line/' replaced.txt; \
         truncate -s 3 shrunk.txt; rm -r d; echo new > new.txt",
    );
    // Read everything once, so the kernel caches pages, attributes and entries.
    let cached =
        m.sh("cat same-size.txt replaced.txt shrunk.txt new.txt; ls d 2>/dev/null || true");
    assert!(cached.contains("ABCDEFGHIJ"));
    m.rewind(2);
    let read = |rel: &str| m.sh(&format!("cat {rel}"));
    assert_eq!(read("same-size.txt"), "0123456789\n");
    assert_eq!(read("replaced.txt"), "short\n");
    assert_eq!(read("shrunk.txt"), "a much longer original line\n");
    assert_eq!(read("d/gone.txt"), "was here\n");
    assert!(
        !m.sh_output("cat new.txt").status.success(),
        "new.txt must be gone"
    );
    let sizes = m.sh("stat -c '%n %s' same-size.txt replaced.txt shrunk.txt");
    assert_eq!(sizes, "same-size.txt 11\nreplaced.txt 6\nshrunk.txt 28\n");
    assert_same_tree(&before, &tree(&m.dir, false));
}

/// Removed and renamed-over files are moved into the store and their bytes stored in the
/// background ("staged"): a rewind issued at once, while the stager may still be busy, is exact;
/// a file a reader holds open across its removal still reads its bytes and shows no link;
/// nothing is left in the store's `staged/` folder afterwards.
#[test]
fn staged_removals_and_saves_rewind_exactly_at_once_and_with_a_reader_holding_one() {
    if !require_fuse() {
        return;
    }
    let mut m = Mounted::with(|d| {
        for i in 0..300 {
            put(
                d,
                &format!("t/d{}/f{i}", i % 7),
                &format!("file {i}\n"),
                0o644,
            );
        }
        for i in 0..100 {
            put(d, &format!("s/f{i}.js"), &format!("let x = {i};\n"), 0o600);
        }
        put(d, "held", "held bytes\n", 0o640);
    });
    m.turn(2);
    let before = tree(&m.dir, false);
    let held = std::fs::File::open(m.dir.join("held")).expect("open held");
    m.sh("sed -i '1i // edited' s/*.js && rm -rf t held && echo new > t");
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        held.metadata().expect("fstat").nlink(),
        0,
        "removed: no link"
    );
    let mut bytes = String::new();
    (&held).read_to_string(&mut bytes).expect("read held");
    assert_eq!(bytes, "held bytes\n");
    drop(held);
    m.rewind(2);
    assert_same_tree(&before, &tree(&m.dir, false));
    // Once more, the rewind racing the stager harder: remove everything, rewind at once.
    m.turn(3);
    m.sh("rm -rf t s held");
    m.rewind(3);
    assert_same_tree(&before, &tree(&m.dir, false));
    m.unmount();
    assert_same_tree(&before, &tree(&m.dir, false));
    let left = std::fs::read_dir(m.dir.join(".ckpt/staged"))
        .expect("staged dir")
        .count();
    assert_eq!(
        left, 0,
        "every staged pre-image was stored and its file removed"
    );
    let journal = std::fs::read_to_string(m.dir.join(".ckpt/journal.jsonl")).expect("journal");
    let staged = journal.matches(r#""kind":"staged""#).count();
    assert!(
        staged >= 400,
        "the 300 removals and 100 saves of turn 2 were staged, not copied: {staged} staged"
    );
}
