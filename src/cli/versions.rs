//! `cat` and `restore`: a file as it was when a turn began, to stdout or copied out to a new
//! path, without rewinding anything.

use super::{CliError, CliResult, Target};
use crate::ipc::Request;
use crate::moment::{Moment, Spec};
use crate::quote::quote_path;
use crate::versions::OldVersion;
use crate::xattrs::{Via, Xattr};
use clap::Args;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `ckpt-mount cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// The turn whose start to read from (default: the current turn): N, N#K (a turn a rewind
    /// retired, as `log` lists it), -K, @TIME or /TEXT
    #[arg(value_name = "N", value_parser = super::moment::parse, allow_negative_numbers = true)]
    pub turn: Option<Spec>,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The file, relative to the folder or absolute inside it
    #[arg(last = true, required = true, value_name = "PATH")]
    pub path: PathBuf,
}

/// `ckpt-mount restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The turn whose start to take the file from (default: the current turn): N, N#K, -K,
    /// @TIME or /TEXT
    #[arg(value_name = "N", value_parser = super::moment::parse, allow_negative_numbers = true)]
    pub turn: Option<Spec>,
    /// Where to write it: a new file (or symlink), anywhere; without PATH, a new (or empty)
    /// directory that receives the whole folder as it was
    #[arg(long, value_name = "DEST")]
    pub to: PathBuf,
    /// Replace DEST if it exists (one file only)
    #[arg(long)]
    pub force: bool,
    /// The folder (default: the ckpt-mount folder containing the current directory)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The file, relative to the folder or absolute inside it; none: the whole folder
    #[arg(last = true, value_name = "PATH")]
    pub path: Option<PathBuf>,
}

/// Finds the version of `path` at the start of `turn` and, for a file, writes its bytes to
/// `out`: through the daemon of a mounted folder, or from the store of an unmounted one.
fn fetch(
    dir: Option<PathBuf>,
    turn: Option<&Spec>,
    path: &Path,
    out: &mut dyn Write,
) -> Result<(OldVersion, crate::relpath::RelPath, Option<Moment>), CliError> {
    let (t, paths) = super::target_with_paths(dir, &[path.to_path_buf()])?;
    let rel = paths
        .into_iter()
        .next()
        .ok_or_else(|| CliError::usage("give one path after --"))?;
    let turn = super::moment::resolve(&t, turn, crate::moment::Use::Read)?;
    let version = match t {
        Target::Mounted(folder) => {
            let req = Request::Cat {
                turn,
                path: rel.clone(),
            };
            let answer = crate::ipc::call_streaming(&folder, &req, out).map_err(|e| {
                CliError::fail(format!(
                    "{}: copying {} out: {e}",
                    folder.display(),
                    quote_path(rel.as_bytes())
                ))
            })?;
            match (answer.ok, answer.data) {
                (true, Some(version)) => version,
                (true, None) => {
                    return Err(CliError::fail(format!(
                        "{}: the daemon's answer has nothing in it",
                        folder.display()
                    )));
                }
                (false, _) => return Err(CliError::fail(answer.error.unwrap_or_default())),
            }
        }
        Target::Offline(folder) => {
            let (root, store) = super::open_offline(&folder)?;
            let v = crate::versions::old_version(&store, root.as_fd(), turn, &rel)
                .map_err(CliError::fail)?;
            crate::versions::copy_out(store.blobs(), root.as_fd(), &rel, &v, out)
                .map_err(|e| CliError::fail(format!("{}: {e}", folder.display())))?;
            v
        }
    };
    Ok((version, rel, turn))
}

fn when(turn: Option<Moment>) -> String {
    match turn {
        Some(n) => format!("when turn {n} began"),
        None => "when the current turn began".into(),
    }
}

/// Runs `cat`.
pub fn cat(a: CatArgs) -> CliResult {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (version, rel, turn) = fetch(a.dir, a.turn.as_ref(), &a.path, &mut out)?;
    if let OldVersion::Symlink { target, .. } = version {
        return Err(CliError::fail(format!(
            "{} was a symlink to {} {}; restore --to copies it out as one",
            quote_path(rel.as_bytes()),
            quote_path(&target.0),
            when(turn)
        )));
    }
    out.flush()
        .map_err(|e| CliError::fail(format!("writing to stdout: {e}")))
}

/// Runs `restore`: the old version is written to a temporary file beside DEST and renamed onto
/// it only once whole, so DEST is never left half written.
pub fn restore(a: RestoreArgs) -> CliResult {
    let dest = std::path::absolute(&a.to)
        .map_err(|e| CliError::fail(format!("{}: {e}", a.to.display())))?;
    let Some(path) = a.path.clone() else {
        if a.force {
            return Err(CliError::usage(
                "--force replaces one file; the whole folder goes to a new or empty directory",
            ));
        }
        let t = super::target(a.dir.clone())?;
        let turn = super::moment::resolve(&t, a.turn.as_ref(), crate::moment::Use::Read)?;
        return super::restore_tree::restore_tree(t, turn, &dest);
    };
    let exists = std::fs::symlink_metadata(&dest).is_ok();
    if exists && !a.force {
        return Err(CliError::fail(format!(
            "{} exists; choose another --to, or add --force to replace it",
            dest.display()
        )));
    }
    let parent = dest.parent().unwrap_or(Path::new("/"));
    let mut temp = tempfile::Builder::new()
        .prefix(".ckpt-restore-")
        .tempfile_in(parent)
        .map_err(|e| CliError::fail(format!("cannot write in {}: {e}", parent.display())))?;
    let (version, rel, turn) = fetch(a.dir, a.turn.as_ref(), &path, temp.as_file_mut())?;
    match version {
        OldVersion::File {
            size, mode, xattrs, ..
        } => {
            use std::os::unix::fs::PermissionsExt;
            // Set-id bits are not carried to a copy made elsewhere.
            let perms = std::fs::Permissions::from_mode(mode & 0o777);
            temp.as_file()
                .set_permissions(perms)
                .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))?;
            let kept = copy_xattrs(Via::Open(temp.as_file().as_fd()), xattrs.as_deref(), &dest);
            temp.as_file()
                .sync_all()
                .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))?;
            persist(temp, &dest, a.force)?;
            println!(
                "restored {} as it was {} to {} ({}{kept})",
                quote_path(rel.as_bytes()),
                when(turn),
                dest.display(),
                crate::units::human_size(size)
            );
        }
        OldVersion::Symlink { target, xattrs } => {
            drop(temp);
            if exists {
                std::fs::remove_file(&dest)
                    .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))?;
            }
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target.0), &dest)
                .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))?;
            let kept = symlink_xattrs(&dest, xattrs.as_deref())?;
            println!(
                "restored {} as it was {} to {} (a symlink to {}{kept})",
                quote_path(rel.as_bytes()),
                when(turn),
                dest.display(),
                quote_path(&target.0)
            );
        }
    }
    Ok(())
}

/// The one attribute never carried: file capabilities grant privilege as set-id bits do, and
/// neither goes to a copy made elsewhere.
const NOT_CARRIED: &[u8] = b"security.capability";

/// Gives the copy at `dest` (reached through `via`) the version's extended attributes `xattrs`,
/// and says on stderr, one line each, which it could not and why: one this user may not set
/// (`trusted.` or `security.` as a normal user), one `dest`'s filesystem does not hold,
/// file capabilities (never carried). Returns the words the `restored` line ends with: how many
/// were copied, or that the version's attributes are not known.
fn copy_xattrs(via: Via<'_>, xattrs: Option<&[Xattr]>, dest: &Path) -> String {
    let Some(list) = xattrs else {
        return "; its extended attributes were not recorded, so none were copied".into();
    };
    let not_kept = |name: &[u8], why: String| {
        eprintln!(
            "ckpt-mount: {}: extended attribute {} not kept: {why}",
            dest.display(),
            quote_path(name)
        );
    };
    let (carried, privileged): (Vec<Xattr>, Vec<Xattr>) =
        list.iter().cloned().partition(|x| x.name != NOT_CARRIED);
    for x in &privileged {
        not_kept(
            &x.name,
            "file capabilities are not carried to a copy, as set-id bits are not".into(),
        );
    }
    let failed = crate::xattrs::set_each(via, &carried);
    for (x, errno) in &failed {
        let why = match errno.0 {
            libc::EPERM => format!("{errno} (setting it needs a privilege this user lacks)"),
            libc::ENOTSUP => format!("{errno} (the filesystem of the copy does not hold it)"),
            _ => errno.to_string(),
        };
        not_kept(&x.name, why);
    }
    match carried.len() - failed.len() {
        0 => String::new(),
        1 => ", 1 extended attribute".into(),
        n => format!(", {n} extended attributes"),
    }
}

/// [`copy_xattrs`] for the symlink just made at `dest`, reached without following it.
fn symlink_xattrs(dest: &Path, xattrs: Option<&[Xattr]>) -> Result<String, CliError> {
    if xattrs.is_some_and(<[Xattr]>::is_empty) {
        return Ok(String::new());
    }
    let c = std::ffi::CString::new(dest.as_os_str().as_bytes())
        .map_err(|_| CliError::fail(format!("{}: the path holds a NUL", dest.display())))?;
    let fd = crate::sys::open_path(&c, libc::O_PATH | libc::O_NOFOLLOW)
        .map_err(|e| CliError::fail(format!("{}: {e}", dest.display())))?;
    Ok(copy_xattrs(Via::Path(fd.as_fd()), xattrs, dest))
}

fn persist(temp: tempfile::NamedTempFile, dest: &Path, replace: bool) -> CliResult {
    let done = if replace {
        temp.persist(dest).map(drop)
    } else {
        temp.persist_noclobber(dest).map(drop)
    };
    done.map_err(|e| CliError::fail(format!("{}: {}", dest.display(), e.error)))
}
