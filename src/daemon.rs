//! The mount daemon: open the folder, open its store, mount over the folder, serve FUSE
//! requests on several threads and control requests on a socket, until unmounted.

use crate::capture::Capturer;
use crate::fs::fuse::{FuseAdapter, KernelInvalidator};
use crate::fs::{CkptFs, FsConfig, Rewound};
use crate::ids::Turn;
use crate::ipc::{self, Request, Response};
use crate::relpath::RelPath;
use crate::rewind;
use crate::store::Store;
use crate::store::journal::Conversation;
use crate::sys;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// The folder (canonical).
    pub dir: PathBuf,
    /// Largest file content stored per capture.
    pub max_blob: u64,
    /// Let other users in (`allow_other`).
    pub allow_other: bool,
    /// fsync blobs and journal before each mutation proceeds.
    pub durable: bool,
    /// FUSE worker threads.
    pub threads: usize,
    /// Entry/attribute TTL in seconds.
    pub ttl_secs: u64,
    /// Kernel passthrough of file I/O when the kernel offers it.
    pub passthrough: bool,
    /// Store new blobs zstd-compressed.
    pub compress: bool,
    /// Have the kernel check permissions from the attributes we report (`default_permissions`)
    /// even on a single-user mount. See [`MountOptions::kernel_checks_permissions`].
    pub kernel_permissions: bool,
    /// The mount flags of `-o` (`ro`, `noatime` …).
    pub vfs: crate::vfs_options::VfsOptions,
}

impl MountOptions {
    /// Whether the kernel checks permissions (`default_permissions`). A mount others may enter
    /// (`allow_other`) needs it: the daemon acts with its own ids, not each caller's. A
    /// single-user mount does not: the kernel lets only the daemon's own user in, so the host
    /// filesystem, which the daemon's system calls meet with exactly that user's ids, decides
    /// as the kernel would, and the kernel no longer re-reads a directory's attributes after
    /// every create, unlink and rename in it (one round trip per file fewer; docs/BENCHMARKS.md).
    pub fn kernel_checks_permissions(&self) -> bool {
        self.allow_other || self.kernel_permissions
    }
}

fn init_log(store: &Store, foreground: bool) {
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if !foreground
        && let Ok(fd) = sys::openat(
            store.dir(),
            c"daemon.log",
            libc::O_CREAT | libc::O_WRONLY | libc::O_APPEND | libc::O_NOFOLLOW,
            0o600,
        )
    {
        b.target(env_logger::Target::Pipe(Box::new(std::fs::File::from(fd))));
    }
    let _ = b.try_init();
}

/// Answers one control request: what reads or tidies the store as the engine's
/// [`crate::engine::Query`]; a turn switch, rewind, agent mark, undo or relabel through the
/// filesystem core ([`change`]).
fn handle(
    fs: &CkptFs,
    folder: &str,
    io: &IoMode,
    req: Request,
    progress: crate::rewind::Progress<'_>,
) -> Response {
    match crate::engine::Query::try_from(req) {
        Ok(query) => store_query(fs, folder, io, &query),
        Err(req) => change(fs, req, progress),
    }
}

/// On a read-only mount (`-o ro`), the answer to a request that would change the folder: a
/// rewind, undo, redo or `op restore` (their dry runs change nothing and are answered). The kernel refuses
/// every write through such a mount, the control files' included; the daemon, which writes
/// beside the mount, refuses the same. Turn switches and relabels, which change only the
/// history, and every read of it go on.
fn refused_read_only(req: &Request) -> Option<Response> {
    let changes = matches!(
        req,
        Request::Rewind { dry_run: false, .. }
            | Request::Undo { dry_run: false, .. }
            | Request::RestoreOp { dry_run: false, .. }
    );
    changes.then(|| {
        Response::fail(
            "the folder is mounted read-only (-o ro): a rewind, undo, redo or op restore would change it (--dry-run shows what it would do); mount it without ro to change it",
        )
    })
}

/// A request that is not a query: a turn switch, rewind, agent mark, undo or relabel through
/// the filesystem core.
fn change(fs: &CkptFs, req: Request, progress: crate::rewind::Progress<'_>) -> Response {
    match req {
        Request::Turn {
            set,
            label,
            by,
            conversation,
        } => turn(fs, set, label, by, conversation),
        Request::Rewind {
            to,
            dry_run,
            undo,
            paths,
            agent,
            agents,
        } => {
            let fields = rewind::Fields {
                to,
                undo,
                paths,
                agent: agent.map(|conflicts| rewind::AgentScope {
                    agents: rewind::Agents::from_names(agents),
                    conflicts,
                }),
            };
            let mode = rewind::Mode::from_dry_run(dry_run);
            let req = fields.request(fs.capturer().lock().index(), mode);
            match req {
                Ok(req) => rewind_request(fs, &req, progress),
                Err(e) => Response::fail(e.to_string()),
            }
        }
        Request::MarkAgent { mark } => mark_agent(fs, mark),
        Request::Undo { redo, dry_run } => {
            let way = rewind::Direction::from_redo(redo);
            let mode = rewind::Mode::from_dry_run(dry_run);
            report_response(fs.undo_redo(way, mode, progress))
        }
        Request::RestoreOp { id, dry_run } => {
            let mode = rewind::Mode::from_dry_run(dry_run);
            rewind_request(fs, &rewind::Request::RestoreOp { id, mode }, progress)
        }
        Request::Relabel { turn, label } => relabel(fs, turn, label),
        // Streamed by the caller ([`cat_reply`]) before it comes here; answered the same way
        // should it ever come.
        Request::Cat { .. } => Response::fail("a file's bytes are streamed, not answered as JSON"),
        query => Response::fail(format!("not a change of the folder: {query:?}")),
    }
}

/// `turn`: the current turn (`set` none), or begin turn `set`, labelled, for the agent `by`
/// whose conversation stood where `conversation` says.
fn turn(
    fs: &CkptFs,
    set: Option<Turn>,
    label: Option<String>,
    by: Option<String>,
    conversation: Option<Conversation>,
) -> Response {
    let Some(n) = set else {
        return Response::ok(&ipc::TurnAnswer {
            turn: fs.capturer().current_turn(),
            changed: None,
        });
    };
    let start = crate::capture::TurnStart {
        turn: n,
        label,
        by,
        conversation,
    };
    match fs.begin_turn(start) {
        Ok(changed) => Response::ok(&ipc::TurnAnswer {
            turn: n,
            changed: Some(changed),
        }),
        Err(e) => Response::fail(e.to_string()),
    }
}

/// `agent`, `run` and the hooks: mark a process as the agent.
fn mark_agent(fs: &CkptFs, mark: crate::store::journal::AgentMark) -> Response {
    log::info!(target: "ckpt::actors", "agent marked by {}: {} (pid {}, start {})", mark.via, crate::quote::quote_path(mark.comm.as_bytes()), mark.pid, mark.start);
    match fs.capturer().mark_agent(mark) {
        Ok(added) => Response::ok(&ipc::MarkAgentAnswer { added }),
        Err(e) => Response::fail(format!("cannot record the agent: {e}")),
    }
}

/// `turn --label N TEXT`.
fn relabel(fs: &CkptFs, turn: Turn, label: Option<String>) -> Response {
    match fs.relabel(turn, label) {
        Ok(()) => Response::ok(&ipc::TurnAnswer {
            turn,
            changed: None,
        }),
        Err(e) => Response::fail(e.to_string()),
    }
}

/// `cat`: a file as it was when `turn` began, its bytes streamed after the answer (read from
/// the store's blobs or the folder without the store lock, which is held only to find them).
fn cat_reply(fs: &Arc<CkptFs>, turn: Option<crate::moment::Moment>, path: RelPath) -> ipc::Reply {
    let (found, blobs) = {
        let store = fs.capturer().lock();
        (
            crate::versions::old_version(&store, fs.root(), turn, &path),
            Arc::clone(store.blobs()),
        )
    };
    let version = match found {
        Ok(v) => v,
        Err(e) => return Response::fail(e).into(),
    };
    let root = match fs.root().try_clone_to_owned() {
        Ok(r) => r,
        Err(e) => return Response::fail(format!("dup: {e}")).into(),
    };
    ipc::Reply {
        response: Response::ok(&version),
        stream: Some(Box::new(move |out| {
            crate::versions::copy_out(&blobs, root.as_fd(), &path, &version, out)
        })),
    }
}

/// `rewind`: the answer to `req`, its report's JSON text sent as `.ckpt/rewind` keeps it.
fn rewind_request(
    fs: &CkptFs,
    req: &rewind::Request,
    progress: crate::rewind::Progress<'_>,
) -> Response {
    match fs.rewind(req, progress) {
        Ok(Rewound {
            report,
            text: Some(text),
        }) => {
            let ok = report.ok();
            drop(report);
            Response::with_shared(ok, failed_paths(ok), text)
        }
        Ok(Rewound { report, text: None }) => report_response(Ok(report)),
        Err(e) => report_response(Err(e)),
    }
}

/// The answer to a rewind, undo or redo: its report (a [`rewind::ReportJson`]), failed when a
/// path could not be restored.
fn report_response(result: Result<rewind::Report, rewind::RewindError>) -> Response {
    match result {
        Ok(r) => Response::with_text(r.ok(), failed_paths(r.ok()), &r),
        Err(e) => Response::fail(e.to_string()),
    }
}

/// The error line of a rewind's answer: none when every path was restored.
fn failed_paths(ok: bool) -> Option<String> {
    (!ok).then(|| "some paths could not be restored".to_string())
}

/// A query the engine answers (`status`, `log`, `diff`, `prune`, `fsck`), with the store
/// locked; `status` also says how many nodes the kernel holds, counted before the store is
/// locked because the node table comes first in the lock order (`crate::sync`). A prune
/// (not its dry run, which removes nothing) also holds every capture back
/// ([`CkptFs::with_captures_held`]): it removes the blobs no record names, and a capture stores
/// its bytes before it records them.
fn store_query(fs: &CkptFs, folder: &str, io: &IoMode, query: &crate::engine::Query) -> Response {
    use crate::engine::{Answer, Query};
    let nodes = matches!(query, Query::Status).then(|| fs.node_count());
    let ask = || {
        let mut store = fs.capturer().lock();
        crate::engine::query(
            fs.root(),
            &mut store,
            folder,
            Some(std::process::id()),
            query,
        )
    };
    let answer = match query {
        Query::Prune(p) if !p.dry_run => fs.with_captures_held(ask),
        _ => ask(),
    };
    match answer {
        Ok(Answer::Status(mut status)) => {
            status.nodes = nodes;
            status.io = Some(io.describe(fs.passthrough()));
            status.uid = Some(sys::geteuid());
            Response::ok(&status)
        }
        Ok(answer) => Response::ok(&answer),
        Err(e) => Response::fail(e.to_string()),
    }
}

/// Test builds: a panic anywhere in the daemon (a lock-order violation found by
/// `crate::sync`, say) is logged and ends the process, so the mount answers `ENOTCONN`
/// and the test fails at once, instead of a FUSE worker dying with its caller left waiting for
/// a reply that never comes. The store is crash-safe (the crash tests kill the daemon on
/// purpose), so nothing is lost that a remount does not recover.
#[cfg(any(debug_assertions, feature = "failpoints"))]
fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        log::error!(target: "ckpt::daemon", "{info}; aborting (test build)");
        std::process::abort();
    }));
}

/// Why the daemon did not mount the folder, or why its session ended badly: what it was doing,
/// on which folder, and the error underneath. Said as one line (on the readiness pipe, and by
/// `mount`).
#[derive(Debug)]
pub enum DaemonError {
    /// Making the process non-dumpable failed.
    Undumpable(sys::Errno),
    /// The folder's path has a NUL byte.
    NulInPath,
    /// The folder could not be opened.
    OpenFolder {
        /// The folder.
        dir: PathBuf,
        /// Why.
        errno: sys::Errno,
    },
    /// Its store could not be opened.
    Store {
        /// The folder.
        dir: PathBuf,
        /// Why.
        source: crate::store::StoreError,
    },
    /// A rewind, undo or redo a crash cut off could not be completed.
    CutOff {
        /// What it was (`rewind to turn 2`).
        what: String,
        /// Why.
        source: rewind::RewindError,
    },
    /// The control socket could not be opened.
    ControlSocket(std::io::Error),
    /// The folder's descriptor could not be duplicated.
    Dup(std::io::Error),
    /// The filesystem core could not start on the folder.
    Core(crate::fs::FsError),
    /// The mount failed.
    Mount {
        /// The folder.
        dir: PathBuf,
        /// Why, as the kernel or `fusermount3` said it.
        reason: String,
    },
    /// The control socket's thread could not start.
    ControlThread(std::io::Error),
    /// The FUSE session ended with an error.
    Session(std::io::Error),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undumpable(e) => write!(f, "cannot make the daemon non-dumpable: {e}"),
            Self::NulInPath => f.write_str("folder path contains NUL"),
            Self::OpenFolder { dir, errno } => write!(f, "cannot open {}: {errno}", dir.display()),
            Self::Store { dir, source } => write!(f, "{}: {source}", dir.display()),
            Self::CutOff { what, source } => {
                write!(f, "completing the cut-off {what} failed: {source}")
            }
            Self::ControlSocket(e) => write!(f, "cannot open the control socket: {e}"),
            Self::Dup(e) => write!(f, "dup: {e}"),
            Self::Core(e) => write!(f, "{e}"),
            Self::Mount { dir, reason } => write!(f, "cannot mount {}: {reason}", dir.display()),
            Self::ControlThread(e) => write!(f, "cannot start the control thread: {e}"),
            Self::Session(e) => write!(f, "FUSE session ended with an error: {e}"),
        }
    }
}

impl std::error::Error for DaemonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store { source, .. } => Some(source),
            Self::ControlSocket(e) | Self::Dup(e) | Self::ControlThread(e) | Self::Session(e) => {
                Some(e)
            }
            _ => None,
        }
    }
}

/// Runs the daemon in this process until the folder is unmounted. `ready` (when given)
/// receives `ok\n` once the mount answers, or one line of error.
pub fn run(
    opts: &MountOptions,
    foreground: bool,
    ready: Option<OwnedFd>,
) -> Result<(), DaemonError> {
    #[cfg(any(debug_assertions, feature = "failpoints"))]
    abort_on_panic();
    let mut ready = ready.map(std::fs::File::from);
    let result = run_inner(opts, foreground, &mut ready);
    if let (Err(e), Some(r)) = (&result, ready.as_mut()) {
        let _ = writeln!(r, "{e}");
    }
    result
}

/// Allocations of this size or more get their own mapping ([`sys::map_large_allocations`]):
/// above the blob store's 256 KiB read buffers, which a capture of a large file allocates
/// and frees in turn and which the heap serves best.
const LARGE_ALLOCATION: usize = 1 << 20;

fn run_inner(
    opts: &MountOptions,
    foreground: bool,
    ready: &mut Option<std::fs::File>,
) -> Result<(), DaemonError> {
    // Before the folder is opened: from then on the daemon holds descriptors of the whole tree
    // and of the store, and a user's daemon runs with that user's ids, so any other process of
    // the user (one the mount exists to watch, an agent's tool) could open them through
    // `/proc/PID/fd` and change files without a capture, or read the daemon's memory. A
    // non-dumpable process's `/proc` entries are root's; its own `/proc/self/fd`, which the
    // xattr and reopen calls use, stays open to it.
    sys::make_undumpable().map_err(DaemonError::Undumpable)?;
    // Before the journal's replay builds the index: its lists are the allocations this is for.
    let mapped = sys::map_large_allocations(LARGE_ALLOCATION);
    let dir = &opts.dir;
    let cpath = CString::new(dir.as_os_str().as_bytes()).map_err(|_| DaemonError::NulInPath)?;
    // Opened before the mount: afterwards this path leads into the mount itself.
    let root = sys::open_path(&cpath, libc::O_PATH | libc::O_DIRECTORY).map_err(|errno| {
        DaemonError::OpenFolder {
            dir: dir.clone(),
            errno,
        }
    })?;
    let store = open_store(opts, root.as_fd(), foreground, mapped, ready)?;
    let listener = ipc::listen(dir).map_err(DaemonError::ControlSocket)?;
    sys::set_umask(0);
    let root_for_fs = root.try_clone().map_err(DaemonError::Dup)?;
    let capturer = Capturer::new(store, opts.max_blob);
    let config = FsConfig {
        ttl: std::time::Duration::from_secs(opts.ttl_secs),
        ..FsConfig::default()
    };
    let fs = Arc::new(CkptFs::new(root_for_fs, capturer, config).map_err(DaemonError::Core)?);
    let io = IoMode::choose(opts.passthrough);
    let adapter = FuseAdapter::new(fs.clone(), io.passthrough_wanted());
    let session = open_session(adapter, opts)?;
    log_io_mode(&io);
    fs.set_invalidator(Arc::new(KernelInvalidator(session.notifier())));
    let folder = dir.display().to_string();
    let fs_ctl = fs.clone();
    let read_only = opts.vfs.read_only();
    std::thread::Builder::new()
        .name("ckpt-ctl-accept".into())
        .spawn(move || {
            ipc::serve(listener, move |req, progress| match req {
                Request::Cat { turn, path } => cat_reply(&fs_ctl, turn, path),
                req => match read_only.then(|| refused_read_only(&req)).flatten() {
                    Some(refused) => refused.into(),
                    None => handle(&fs_ctl, &folder, &io, req, progress).into(),
                },
            })
        })
        .map_err(DaemonError::ControlThread)?;
    log::info!(target: "ckpt::fuse", "mounted {} (turn {})", dir.display(), fs.capturer().current_turn());
    if let Some(r) = ready.as_mut() {
        let _ = writeln!(r, "ok");
    } else {
        // Started by a service manager itself, not by `mount` in the background.
        notify_service_manager_ready(dir);
    }
    *ready = None;
    let r = session.run();
    log::info!(target: "ckpt::fuse", "unmounted {}", dir.display());
    r.map_err(DaemonError::Session)
}

/// Opens the folder's store (made if missing), starts the log in it, and completes a rewind a
/// crash cut off, telling the waiting `mount` on `ready` (`mapped`: whether the allocator took
/// the large-allocation threshold, logged once the log is up).
fn open_store(
    opts: &MountOptions,
    root: BorrowedFd<'_>,
    foreground: bool,
    mapped: bool,
    ready: &mut Option<std::fs::File>,
) -> Result<Store, DaemonError> {
    let dir = &opts.dir;
    let mut store = Store::open(
        root,
        crate::store::IfMissing::Create,
        crate::tree::Durability::from_flag(opts.durable),
    )
    .map_err(|source| DaemonError::Store {
        dir: dir.clone(),
        source,
    })?;
    init_log(&store, foreground);
    // A user's session starts the daemon with a soft limit of 1,024 descriptors, which a
    // rewind of a big tree exceeds (EMFILE on lookups and opens); the hard limit is allowed.
    match sys::raise_nofile_limit() {
        Ok(n) => log::debug!(target: "ckpt::daemon", "open-file limit {n}"),
        Err(e) => log::warn!(target: "ckpt::daemon", "cannot raise the open-file limit: {e}"),
    }
    if !mapped {
        log::debug!(target: "ckpt::daemon", "the allocator keeps its own large-allocation threshold");
    }
    store.blobs().set_compress(opts.compress);
    for line in complete_cut_off(root, &mut store, opts.max_blob)? {
        log::info!(target: "ckpt::rewind", "{line}");
        if let Some(r) = ready.as_mut() {
            let _ = writeln!(r, "{READY_NOTE}{line}");
        }
    }
    Ok(store)
}

/// How a line the daemon sends on its readiness pipe before `ok` begins: something the user
/// should hear from `mount` (the rewind it completed before mounting), printed on its stderr.
pub const READY_NOTE: &str = "note: ";

/// Completes what a crash (or a path it could not restore) cut off, before the folder is
/// mounted: a whole rewind, then a partial rewind, undo or redo (each kept its own record of
/// being open, so both may be). Returns a line per operation completed, saying what was done.
fn complete_cut_off(
    root: BorrowedFd<'_>,
    store: &mut Store,
    max_blob: u64,
) -> Result<Vec<String>, DaemonError> {
    let mut lines = Vec::new();
    let cut_off = |pending: &crate::info::Pending| {
        let what = pending.what.clone();
        move |source| DaemonError::CutOff { what, source }
    };
    if let (Some((_, to, _)), Some(pending)) = (
        store.index().unfinished_rewind,
        crate::info::pending_rewind(store.index()),
    ) {
        announce_cut_off(&pending);
        let req = rewind::Request::folder(to);
        let report =
            rewind::run(root, store, &req, max_blob, &|_, _| {}).map_err(cut_off(&pending))?;
        lines.push(completed_line(&pending, &report));
    }
    if let Some(pending) = crate::info::pending_op(store.index()) {
        announce_cut_off(&pending);
        let done = rewind::complete_unfinished(root, store, false, max_blob, &|_, _| {})
            .map_err(cut_off(&pending))?;
        lines.extend(done.map(|report| completed_line(&pending, &report)));
    }
    Ok(lines)
}

/// Logs that `pending` was cut off and is being completed.
fn announce_cut_off(pending: &crate::info::Pending) {
    log::warn!(target: "ckpt::rewind", "{} was cut off; completing it before mounting", pending.with_article());
}

/// What `mount` says of a cut-off operation it completed (`report`): the counts, and any path
/// that could not be restored, with what follows from it. The failures are logged one a line.
fn completed_line(pending: &crate::info::Pending, report: &rewind::Report) -> String {
    for f in &report.failed {
        log::warn!(target: "ckpt::rewind", "could not restore {}: {}", f.path, f.reason);
    }
    let counts = format!(
        "{} restored, {} deleted",
        report.restored.len(),
        report.deleted.len()
    );
    let Some(first) = report.failed.first() else {
        return format!("completed the {} that was cut off ({counts})", pending.what);
    };
    let failed = format!(
        "{} could not be restored (first: {}: {}; ckpt-mount status --log lists them)",
        report.failed.len(),
        first.path,
        first.reason
    );
    if report.unfinished {
        format!(
            "tried to complete the {} that was cut off ({counts}), but {failed}; it stays unfinished: fix them, then any ckpt-mount rewind completes it first",
            pending.what
        )
    } else {
        format!(
            "completed the {} that was cut off ({counts}); {failed}",
            pending.what
        )
    }
}

/// How file reads and writes are served, and why: kernel passthrough needs the daemon to hold
/// `CAP_SYS_ADMIN` (the kernel checks it when a backing file is registered), so a user's
/// daemon serves them itself.
#[derive(Debug, Clone)]
struct IoMode {
    /// `--no-passthrough` was not given.
    asked: bool,
    /// The daemon holds `CAP_SYS_ADMIN`.
    capable: bool,
}

impl IoMode {
    fn choose(asked: bool) -> Self {
        Self {
            asked,
            capable: crate::fusermount::has_cap_sys_admin(),
        }
    }

    fn passthrough_wanted(&self) -> bool {
        self.asked && self.capable
    }

    /// One line for `status`: the mode that runs and, when it is not passthrough, why.
    fn describe(&self, passthrough_on: bool) -> String {
        if passthrough_on {
            "kernel passthrough".into()
        } else if !self.asked {
            "served by the daemon (--no-passthrough)".into()
        } else if !self.capable {
            "served by the daemon (kernel passthrough needs CAP_SYS_ADMIN, which a user's daemon lacks)".into()
        } else {
            "served by the daemon (this kernel offers no FUSE passthrough)".into()
        }
    }
}

fn log_io_mode(io: &IoMode) {
    if io.asked && !io.capable {
        log::info!(target: "ckpt::fuse", "no CAP_SYS_ADMIN: file I/O is served by the daemon, not kernel passthrough");
    }
}

/// Mounts and opens the FUSE session: by `mount(2)` as root, through `fusermount3` otherwise
/// (see `crate::fusermount`). Either way the mount is of type `fuse.ckpt-mount`, its source
/// the folder's path, with the `-o` flags asked.
fn open_session(
    adapter: FuseAdapter,
    opts: &MountOptions,
) -> Result<fuser::Session<FuseAdapter>, DaemonError> {
    let dir = &opts.dir;
    let mut cfg = fuser::Config::default();
    cfg.n_threads = Some(opts.threads.max(1));
    let acl = if opts.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    let failed = |reason: String| DaemonError::Mount {
        dir: dir.clone(),
        reason,
    };
    let mut fuse = Vec::new();
    if opts.kernel_checks_permissions() {
        fuse.push("default_permissions");
    }
    if opts.allow_other {
        fuse.push("allow_other");
    }
    let device = if crate::fusermount::mounts_directly() {
        crate::fusermount::mount_directly(dir, opts.vfs.flags(), &fuse)
            .map_err(|e| failed(e.to_string()))?
    } else {
        let options = crate::fusermount::helper_options(dir, &opts.vfs.helper_words(), &fuse);
        crate::fusermount::mount(dir, &options).map_err(|e| failed(e.to_string()))?
    };
    // Worker channels are clones made by opening /dev/fuse again; a user who cannot open it
    // shares the one descriptor the helper handed over.
    cfg.clone_fd = crate::fusermount::device_opens();
    fuser::Session::from_fd(adapter, device, acl, cfg).map_err(|e| {
        // Mounted; without a session nobody serves it, so take it down again.
        let _ = crate::fusermount::unmount(dir, true);
        failed(e.to_string())
    })
}

/// Tells systemd (a `Type=notify` unit) that the mount answers: `READY=1` in one datagram to
/// the socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written `@name`), as
/// sd_notify(3) does. Without the variable, nothing; a failure is logged, not fatal: the unit's
/// start then times out and says so.
fn notify_service_manager_ready(dir: &Path) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(name) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let bytes = name.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name),
        None => SocketAddr::from_pathname(Path::new(&name)),
    };
    let message = format!("READY=1\nSTATUS=mounted {}\n", dir.display());
    let sent =
        addr.and_then(|addr| UnixDatagram::unbound()?.send_to_addr(message.as_bytes(), &addr));
    if let Err(e) = sent {
        log::warn!(target: "ckpt::daemon", "cannot tell the service manager the mount is ready (NOTIFY_SOCKET={}): {e}", name.to_string_lossy());
    }
}

/// Builds a descriptor from an inherited number (the readiness pipe).
pub fn inherited_fd(n: i32) -> Option<OwnedFd> {
    // Only the number our own parent passed with --ready-fd, which nothing else owns.
    (n > 2).then(|| sys::own_fd(n))
}
