//! The core on a folder (under /tmp, or on a small loop-mounted ext4 image), and the kernel's
//! side of it: the lookups it holds, the handles it keeps open.

use super::*;

/// Where the cases' folders are made, and the folders of finished cases, kept for the next
/// ones (a new folder costs a new store and a `mkdir`, a folder reused only a clear), and the
/// thread that takes each finished case's core down and makes its folder ready for another.
pub(super) struct Fixture {
    pub(super) kind: FixtureKind,
    pub(super) pool: Pool,
    pub(super) reaper: Option<std::sync::mpsc::Sender<Reap>>,
    pub(super) reaping: Option<std::thread::JoinHandle<()>>,
}

/// A finished case's core and its folder.
pub(super) type Reap = (CkptFs, (tempfile::TempDir, u32));

impl Drop for Fixture {
    fn drop(&mut self) {
        // Every core down and every folder cleared before the folders (and the image) go.
        drop(self.reaper.take());
        if let Some(t) = self.reaping.take()
            && let Err(e) = t.join()
            && !std::thread::panicking()
        {
            std::panic::resume_unwind(e);
        }
    }
}

pub(super) enum FixtureKind {
    /// Below /tmp.
    Tmp,
    /// On a loop-mounted ext4 image with few inodes.
    Loop(LoopImage),
}

/// Folders (each with its store's blob directory) ready for another case, with their use count.
pub(super) type Pool = std::sync::Arc<Mutex<Vec<(tempfile::TempDir, u32)>>>;

/// A folder serves this many cases, then a fresh one is made (its blobs are not pruned).
pub(super) const FOLDER_USES: u32 = 100;

impl Fixture {
    pub(super) fn tmp() -> Self {
        Self::new(FixtureKind::Tmp)
    }

    /// With the reaper thread: it drops each finished core (the capturer's stager, at a lowered
    /// priority, is joined and the store unlocked), then clears the folder (the project tree
    /// empty, the store without journal, so that a new store opened there begins at turn 1;
    /// its blobs kept, content-addressed, so harmless) and puts it in the pool, off the cases'
    /// path. A folder that served `FOLDER_USES` cases is removed instead.
    pub(super) fn new(kind: FixtureKind) -> Self {
        let pool = Pool::default();
        let (reaper, finished) = std::sync::mpsc::channel::<Reap>();
        let to = pool.clone();
        let reaping = std::thread::Builder::new()
            .name("core-reaper".into())
            .spawn(move || {
                for (fs, (dir, uses)) in finished {
                    drop(fs);
                    if uses >= FOLDER_USES {
                        continue;
                    }
                    clear(dir.path(), &[".ckpt"]);
                    let store = dir.path().join(".ckpt");
                    clear(&store, &["blobs", "VERSION", ".gitignore", "staged"]);
                    clear(&store.join("staged"), &[]);
                    // The blobs go with the journal (a store that holds blobs and no journal is
                    // refused, never reset); their shard directories stay, which is what the
                    // reuse saves.
                    clear_files(&store.join("blobs"));
                    to.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((dir, uses));
                }
            })
            .expect("the reaper thread");
        Self {
            kind,
            pool,
            reaper: Some(reaper),
            reaping: Some(reaping),
        }
    }

    pub(super) fn base(&self) -> &Path {
        match &self.kind {
            FixtureKind::Tmp => Path::new("/tmp"),
            FixtureKind::Loop(l) => &l.mnt,
        }
    }

    pub(super) fn name(&self) -> &'static str {
        match self.kind {
            FixtureKind::Tmp => "tmp",
            FixtureKind::Loop(_) => "loop-ext4",
        }
    }

    /// A folder for a case: one the reaper cleared, or a new one when none is ready.
    pub(super) fn folder(&self) -> (tempfile::TempDir, u32) {
        let reused = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        if let Some((dir, uses)) = reused {
            return (dir, uses + 1);
        }
        let dir = tempfile::Builder::new()
            .prefix("ckpt-core-")
            .tempdir_in(self.base())
            .expect("tempdir");
        (dir, 1)
    }
}

/// Removes every file below `dir`, keeping the directories.
pub(super) fn clear_files(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            clear_files(&e.path());
        } else {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes everything in `dir` but the names in `keep`.
pub(super) fn clear(dir: &Path, keep: &[&str]) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        if keep.iter().any(|k| e.file_name() == *k) {
            continue;
        }
        let p = e.path();
        if e.file_type().expect("file type").is_dir() {
            // Writable first, for a caller that is not root.
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700));
            clear(&p, &[]);
            std::fs::remove_dir(&p).expect("rmdir");
        } else {
            std::fs::remove_file(&p).expect("unlink");
        }
    }
}

/// A 64 MiB ext4 image with 2048 inodes, loop-mounted; unmounted on drop.
pub(super) struct LoopImage {
    pub(super) mnt: PathBuf,
    pub(super) _tmp: tempfile::TempDir,
}

pub(super) fn run(cmd: &str, args: &[&OsStr]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LoopImage {
    pub(super) fn fixture() -> Result<Fixture, String> {
        Ok(Fixture::new(FixtureKind::Loop(Self::mount()?)))
    }

    pub(super) fn mount() -> Result<Self, String> {
        if sys::geteuid() != 0 {
            return Err("not root".into());
        }
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-core-loop-")
            .tempdir_in("/tmp")
            .map_err(|e| format!("tempdir: {e}"))?;
        let img = tmp.path().join("img");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| format!("mkdir: {e}"))?;
        run(
            "truncate",
            &["-s".as_ref(), "64M".as_ref(), img.as_os_str()],
        )?;
        run(
            "mkfs.ext4",
            &[
                "-q".as_ref(),
                "-N".as_ref(),
                "2048".as_ref(),
                img.as_os_str(),
            ],
        )?;
        run(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                img.as_os_str(),
                mnt.as_os_str(),
            ],
        )?;
        Ok(Self { mnt, _tmp: tmp })
    }
}

impl Drop for LoopImage {
    fn drop(&mut self) {
        if run("umount", &[self.mnt.as_os_str()]).is_err() {
            let _ = run("umount", &["-l".as_ref(), self.mnt.as_os_str()]);
        }
    }
}

/// The loop fixture, or `None` (with a message) where it cannot be made; under `CI=true` that is
/// a failure.
pub(super) fn loop_fixture() -> Option<Fixture> {
    match LoopImage::fixture() {
        Ok(f) => Some(f),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "the loop-mounted ext4 fixture cannot be made ({e}); under CI=true that is a failure"
            )
        }
        Err(e) => {
            eprintln!(
                "skipping: the loop-mounted ext4 fixture cannot be made ({e}); needs root and mount -o loop (set CI=true to make this a failure)"
            );
            None
        }
    }
}

/// New files and directories get exactly the mode asked for (the daemon runs with umask 0 too).
pub(super) fn zero_umask() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        sys::set_umask(0);
    });
}

/// The core over a fresh folder, built as the daemon builds it.
pub(super) struct Core {
    pub(super) fs: Option<CkptFs>,
    pub(super) root: PathBuf,
    pub(super) dir: Option<(tempfile::TempDir, u32)>,
    pub(super) reaper: std::sync::mpsc::Sender<Reap>,
}

impl Drop for Core {
    fn drop(&mut self) {
        // To the reaper, which takes the core down before the folder is reused.
        if let (Some(fs), Some(d)) = (self.fs.take(), self.dir.take()) {
            let _ = self.reaper.send((fs, d));
        }
    }
}

impl Core {
    pub(super) fn fs(&self) -> &CkptFs {
        self.fs.as_ref().expect("the core")
    }

    pub(super) fn new(fx: &Fixture) -> Self {
        let (dir, uses) = fx.folder();
        let root = dir.path().to_path_buf();
        let c = CString::new(root.as_os_str().as_bytes()).expect("no NUL in the folder path");
        let fd = sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY).expect("open the folder");
        let store = Store::open(
            fd.as_fd(),
            ckpt_mount::store::IfMissing::Create,
            ckpt_mount::tree::Durability::Lazy,
        )
        .expect("open the store");
        let capturer = Capturer::new(store, DEFAULT_MAX_BLOB);
        let fs = CkptFs::new(fd, capturer, FsConfig::default()).expect("the core");
        Self {
            fs: Some(fs),
            root,
            dir: Some((dir, uses)),
            reaper: fx.reaper.clone().expect("the reaper"),
        }
    }
}

/// The kernel's side: lookups it holds per node (each entry reply adds one; `forget` returns
/// them), and path walks by `lookup` from the root.
#[derive(Default)]
pub(super) struct Vfs {
    pub(super) lookups: HashMap<NodeId, u64>,
}

impl Vfs {
    pub(super) fn got(&mut self, node: NodeId) {
        if node != ROOT {
            *self.lookups.entry(node).or_default() += 1;
        }
    }

    pub(super) fn lookup(
        &mut self,
        fs: &CkptFs,
        parent: NodeId,
        name: &str,
    ) -> Result<NodeId, FsError> {
        let e = fs.lookup(parent, OsStr::new(name))?;
        self.got(e.node);
        Ok(e.node)
    }

    pub(super) fn node(&mut self, fs: &CkptFs, path: &str) -> Result<NodeId, String> {
        let mut n = ROOT;
        if path.is_empty() {
            return Ok(n);
        }
        for c in path.split('/') {
            n = self
                .lookup(fs, n, c)
                .map_err(|e| format!("lookup of {c:?} on the way to {path:?}: {e}"))?;
        }
        Ok(n)
    }

    /// Forgets every lookup but one of each node a handle holds.
    pub(super) fn forget_all(&mut self, fs: &CkptFs, pinned: &HashSet<NodeId>) {
        for (node, n) in std::mem::take(&mut self.lookups) {
            let keep = u64::from(pinned.contains(&node));
            if n > keep {
                fs.forget(node, n - keep);
            }
            if keep > 0 {
                self.lookups.insert(node, keep);
            }
        }
    }
}

/// A handle held open: the core's handle and node, and the model inode it writes.
pub(super) struct Held {
    pub(super) fh: Fh,
    pub(super) node: NodeId,
    pub(super) ino: u64,
}
