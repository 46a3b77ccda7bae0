//! A store written by a version-1 build (committed as `tests/fixtures/store-v1.tar.gz`: turns
//! 1–3 over a small project, a hard-linked pair, a symlink, a packed and a loose blob, staged
//! pre-images) still opens, migrates its `VERSION` once, and rewinds exactly where its records
//! can prove what they describe; where they cannot (hard links outside the rewound paths,
//! recorded by inode number only), the rewind says so and exits non-zero instead of guessing.
//!
//! Made with the version-1 binary by:
//! `printf 'hello v1\n' > a.txt; mkdir src; printf 'fn main() {}\n' > src/main.rs;
//!  ln a.txt a.link; ln -s a.txt sl; chmod 640 src/main.rs; ckpt-mount mount .; cd "$PWD";
//!  echo 2 > .ckpt/turn; printf 'changed\n' > a.txt; rm src/main.rs; echo new > new.txt;
//!  chmod 700 src; rm sl; ln -s elsewhere sl; head -c 100000 /dev/urandom > big.bin;
//!  echo "3 third" > .ckpt/turn; rm big.bin; printf 'again\n' >> a.txt; mkdir d3; echo x > d3/x`

mod common;
use common::{bin, require_fuse};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn unpack() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-v1-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.tar.gz");
    let st = Command::new("tar")
        .arg("-xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .expect("run tar");
    assert!(st.success(), "tar -x of the fixture failed");
    let dir = tmp.path().join("project");
    (tmp, dir)
}

fn cli(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("run ckpt-mount")
}

fn read(dir: &Path, p: &str) -> String {
    std::fs::read_to_string(dir.join(p)).unwrap_or_else(|e| panic!("read {p}: {e}"))
}

fn mode(dir: &Path, p: &str) -> u32 {
    std::fs::symlink_metadata(dir.join(p))
        .unwrap_or_else(|e| panic!("stat {p}: {e}"))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_version_1_store_opens_migrates_and_rewinds_what_its_records_prove() {
    let (_tmp, dir) = unpack();
    assert_eq!(read(&dir, ".ckpt/VERSION"), "ckpt-mount store 1\n");
    let o = cli(&dir, &["rewind", "3", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        read(&dir, ".ckpt/VERSION"),
        "ckpt-mount store 2\n",
        "migrated once, on the first open"
    );
    // Turn 3 began with a.txt (and its hard link a.link, never touched by name) holding
    // "changed": the record of a.txt is version 1, so the rewind cannot find a.link by a
    // proven identity, restores a.txt and reports a.link's group instead of guessing.
    assert_eq!(o.status.code(), Some(1), "not exact, so not 0: {out}");
    assert!(
        out.contains("a.txt") && out.contains("store version 1"),
        "{out}"
    );
    assert_eq!(read(&dir, "a.txt"), "changed\n");
    assert_eq!(
        std::fs::read(dir.join("big.bin")).expect("big.bin").len(),
        100_000
    );
    assert_eq!(read(&dir, "new.txt"), "new\n");
    assert!(!dir.join("d3").exists());
    assert_eq!(mode(&dir, "src"), 0o700);

    let o = cli(&dir, &["rewind", "2", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(read(&dir, "a.txt"), "hello v1\n", "{out}");
    assert_eq!(read(&dir, "src/main.rs"), "fn main() {}\n");
    assert_eq!(mode(&dir, "src/main.rs"), 0o640);
    assert_eq!(mode(&dir, "src"), 0o755);
    assert_eq!(
        std::fs::read_link(dir.join("sl")).expect("readlink"),
        Path::new("a.txt")
    );
    for gone in ["new.txt", "big.bin", "d3"] {
        assert!(!dir.join(gone).exists(), "{gone} did not exist at turn 2");
    }
    // The migrated store keeps working: a mount, a turn and an exact rewind with new records.
    if !require_fuse() {
        return;
    }
    let mut m = common::Mounted::adopt(&dir);
    m.turn(3);
    std::fs::write(dir.join("a.txt"), "turn 3\n").expect("write");
    std::fs::remove_file(dir.join("src/main.rs")).expect("rm");
    let o = m.cli(&["rewind", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read(&dir, "a.txt"), "hello v1\n");
    assert_eq!(read(&dir, "src/main.rs"), "fn main() {}\n");
    let ino = std::fs::metadata(dir.join("a.txt")).expect("stat").ino();
    assert!(ino > 0);
    m.unmount();
}
