//! The control socket between the CLI and a running daemon: one JSON request line, one JSON
//! response line, over an abstract Unix socket named after the folder. Only root and the
//! daemon's own user may connect (checked with `SO_PEERCRED`).

use crate::ids::Turn;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A request to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Read the current turn, or begin turn `set`.
    Turn {
        /// Turn to begin.
        set: Option<Turn>,
        /// Its label.
        label: Option<String>,
        /// The agent whose hook begins it, by name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// Where that agent's conversation stood (its hook's payload).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<crate::store::journal::Conversation>,
    },
    /// Rewind.
    Rewind {
        /// Target turn (default: the current one).
        to: Option<Turn>,
        /// Plan only.
        dry_run: bool,
        /// Undo the last rewind.
        undo: bool,
        /// Only these paths (relative to the folder); empty for the whole folder.
        #[serde(default)]
        paths: Vec<crate::relpath::RelPath>,
        /// Only what the agents changed (`rewind --agent`), with what to do with conflicts.
        #[serde(default)]
        agent: Option<crate::rewind::Conflicts>,
        /// With `agent`: the agents whose changes, by name (empty: every agent's).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        agents: Vec<String>,
    },
    /// Mark a process (and what descends from it) as the agent.
    MarkAgent {
        /// The mark: process, start time, command name, who marks it, session.
        mark: crate::store::journal::AgentMark,
    },
    /// Undo the newest operation in effect (`redo` false), or redo the newest undone one.
    Undo {
        /// Redo instead.
        #[serde(default)]
        redo: bool,
        /// Preview only.
        dry_run: bool,
    },
    /// Give turn `turn` the label `label` (none: remove it).
    Relabel {
        /// The turn.
        turn: Turn,
        /// The label.
        label: Option<String>,
    },
    /// The operation log as JSON.
    OpLog,
    /// What operation `id` changed (`op show`).
    OpShow {
        /// The operation's id.
        id: u64,
    },
    /// The folder as it was just after operation `id` (`op restore`).
    RestoreOp {
        /// The operation's id.
        id: u64,
        /// Preview only.
        dry_run: bool,
    },
    /// Status as JSON.
    Status,
    /// Turn log as JSON.
    Log,
    /// The moments the turn log lists, without their counts (shell completion). A daemon
    /// older than this request refuses it as a bad request; ask [`Request::Log`] then.
    Moments,
    /// The agents marked, as JSON (`agents`).
    Agents,
    /// Check the store.
    Fsck,
    /// Forget old turns (or only remove the blobs no record names).
    Prune {
        /// Keep this many newest turns.
        keep_turns: Option<usize>,
        /// Keep the store under this many bytes.
        max_size: Option<u64>,
        /// The undo and redo history, when no turn is dropped.
        #[serde(default)]
        undo: crate::store::prune::UndoHistory,
        /// Plan only.
        #[serde(default)]
        dry_run: bool,
        /// Go ahead only if the prune makes exactly this unrecoverable (what the preview the
        /// user answered showed): the history may have changed in between.
        #[serde(default)]
        expect: Option<crate::store::prune::Unrecoverable>,
    },
    /// The last `lines` lines of the daemon's log (`.ckpt/daemon.log`, hidden from the mount).
    DaemonLog {
        /// How many lines.
        lines: usize,
    },
    /// Changes from the start of `turn` (default: current) to now, or to the start of `to`, or
    /// (`show`) what turn `turn` alone changed.
    /// A file as it was when `turn` (default: current) began; its bytes follow the answer.
    Cat {
        /// The turn, live or retired.
        turn: Option<crate::moment::Moment>,
        /// The path, relative to the folder.
        path: crate::relpath::RelPath,
    },
    Diff {
        /// The turn, live or retired.
        turn: Option<crate::moment::Moment>,
        /// The later turn whose start ends the range (default: now).
        #[serde(default)]
        to: Option<crate::moment::Moment>,
        /// Only what turn `turn` changed: to the start of the next turn, or now for the last.
        #[serde(default)]
        show: bool,
        /// Only these paths (and what is below them).
        paths: Vec<crate::relpath::RelPath>,
    },
}

/// The request that asks a mounted folder's daemon the engine's `query`.
impl From<crate::engine::Query> for Request {
    fn from(query: crate::engine::Query) -> Self {
        use crate::engine::{DiffQuery, PruneQuery, Query};
        match query {
            Query::Status => Self::Status,
            Query::Log => Self::Log,
            Query::Moments => Self::Moments,
            Query::Agents => Self::Agents,
            Query::OpLog => Self::OpLog,
            Query::OpShow { id } => Self::OpShow { id },
            Query::DaemonLog { lines } => Self::DaemonLog { lines },
            Query::Fsck => Self::Fsck,
            Query::Diff(DiffQuery {
                turn,
                to,
                show,
                paths,
            }) => Self::Diff {
                turn,
                to,
                show,
                paths,
            },
            Query::Prune(PruneQuery {
                policy,
                dry_run,
                expect,
            }) => Self::Prune {
                keep_turns: policy.keep_turns,
                max_size: policy.max_size,
                undo: policy.undo,
                dry_run,
                expect,
            },
        }
    }
}

/// The engine's query a request asks, or the request itself when it changes the folder.
impl TryFrom<Request> for crate::engine::Query {
    type Error = Request;
    fn try_from(req: Request) -> Result<Self, Request> {
        use crate::engine::{DiffQuery, PruneQuery, Query};
        Ok(match req {
            Request::Status => Query::Status,
            Request::Log => Query::Log,
            Request::Moments => Query::Moments,
            Request::Agents => Query::Agents,
            Request::OpLog => Query::OpLog,
            Request::OpShow { id } => Query::OpShow { id },
            Request::DaemonLog { lines } => Query::DaemonLog { lines },
            Request::Fsck => Query::Fsck,
            Request::Diff {
                turn,
                to,
                show,
                paths,
            } => Query::Diff(DiffQuery {
                turn,
                to,
                show,
                paths,
            }),
            Request::Prune {
                keep_turns,
                max_size,
                undo,
                dry_run,
                expect,
            } => Query::Prune(PruneQuery {
                policy: crate::store::prune::Policy {
                    keep_turns,
                    max_size,
                    undo,
                },
                dry_run,
                expect,
            }),
            other => return Err(other),
        })
    }
}

/// The answer to [`Request::Turn`] and [`Request::Relabel`]: the turn current now (or the one
/// relabelled), and for a switch whether it began a new turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnAnswer {
    /// The turn.
    pub turn: Turn,
    /// A switch: whether it changed the current turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
}

/// The answer to [`Request::MarkAgent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkAgentAnswer {
    /// Whether the mark is new (a process marked already is not marked twice).
    pub added: bool,
}

/// Bytes that follow an answer's line on the connection (`cat`, `restore`): written straight
/// to the socket, so a large file never sits whole in the daemon's memory. The answer says how
/// many (`data.size`), and the client reads exactly that many.
pub type Stream = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + Send>;

/// An answer, and the bytes that follow it, if any.
pub struct Reply {
    /// The answer line.
    pub response: Response,
    /// The bytes after it.
    pub stream: Option<Stream>,
}

impl From<Response> for Reply {
    fn from(response: Response) -> Self {
        Self {
            response,
            stream: None,
        }
    }
}

/// The daemon's answer line, as it sends it: `{"ok": …, "error": …, "data": …}`, the data
/// being one of the typed answers (a [`crate::rewind::ReportJson`], a
/// [`crate::info::Status`], …) written as JSON text once. The client reads it back as an
/// [`Answer`] of that type.
#[derive(Debug, Clone, Serialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// One line saying what went wrong.
    pub error: Option<String>,
    /// The payload as JSON text (`null` when there is none): a rewind's report of 100,000
    /// paths as a `Value` tree was twice its text, at the rewind's memory peak.
    #[serde(serialize_with = "shared_text")]
    pub data: Option<Arc<JsonText>>,
}

/// Writes shared JSON text as the JSON it holds (`null` for none).
fn shared_text<S: serde::Serializer>(
    text: &Option<Arc<JsonText>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match text {
        Some(text) => text.serialize(s),
        None => s.serialize_none(),
    }
}

/// A daemon's answer as the client reads it, its payload typed: the same type the daemon
/// (or, for an unmounted folder, the CLI itself) wrote.
#[derive(Debug, Clone, Deserialize)]
pub struct Answer<T> {
    /// Whether the request succeeded.
    pub ok: bool,
    /// One line saying what went wrong.
    #[serde(default)]
    pub error: Option<String>,
    /// The payload: none when the request failed before producing one (a rewind that could
    /// not restore every path fails with its report).
    pub data: Option<T>,
}

/// Why a call to the daemon gave no answer to read.
#[derive(Debug)]
pub enum CallError {
    /// The connection failed, or closed before the answer.
    Io(std::io::Error),
    /// The answer came but is not the answer the request has (a daemon of another version).
    BadAnswer(serde_json::Error),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::BadAnswer(e) => write!(f, "its answer cannot be read: {e}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<std::io::Error> for CallError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// A value written as JSON text once, shared where it is kept and where it is sent: a full
/// rewind's report is both `.ckpt/rewind`'s content and the CLI's answer, one text of several
/// MB for 100,000 paths.
#[derive(Debug)]
pub struct JsonText(Box<serde_json::value::RawValue>);

impl JsonText {
    /// `value` as JSON text.
    pub fn of<T: Serialize>(value: &T) -> serde_json::Result<Arc<Self>> {
        serde_json::value::to_raw_value(value).map(|raw| Arc::new(Self(raw)))
    }

    /// The text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

/// Written as the JSON it holds, not as a string.
impl Serialize for JsonText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Response {
    /// A success whose payload is `value`.
    pub fn ok<T: Serialize>(value: &T) -> Self {
        Self::with_text(true, None, value)
    }

    /// A failure without a payload.
    pub fn fail(msg: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(msg.into()),
            data: None,
        }
    }

    /// An answer whose payload is `value` written as JSON text once.
    pub fn with_text<T: Serialize>(ok: bool, error: Option<String>, value: &T) -> Self {
        match JsonText::of(value) {
            Ok(text) => Self::with_shared(ok, error, text),
            Err(e) => Self::fail(format!("cannot encode the answer: {e}")),
        }
    }

    /// An answer whose payload is JSON text written already, and kept elsewhere too.
    pub fn with_shared(ok: bool, error: Option<String>, text: Arc<JsonText>) -> Self {
        Self {
            ok,
            error,
            data: Some(text),
        }
    }
}

/// Whether a daemon listens on the folder's control socket (connects, sends nothing).
pub fn listening(folder: &Path) -> bool {
    SocketAddr::from_abstract_name(socket_name(folder).as_bytes())
        .and_then(|addr| UnixStream::connect_addr(&addr))
        .is_ok()
}

/// The abstract socket name for a folder.
pub fn socket_name(folder: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let h = Sha256::digest(folder.as_os_str().as_bytes());
    format!("ckpt-mount/{}", &crate::relpath::hex(&h)[..32])
}

/// Binds the daemon's listener.
pub fn listen(folder: &Path) -> std::io::Result<UnixListener> {
    let addr = SocketAddr::from_abstract_name(socket_name(folder).as_bytes())?;
    UnixListener::bind_addr(&addr)
}

/// Serves requests until the process exits; `handle` answers one request and may report
/// progress (steps done, steps in all), sent as `{"progress": [done, total]}` lines before the
/// answer, at most about a hundred per request.
pub fn serve(
    listener: UnixListener,
    handle: impl Fn(Request, crate::rewind::Progress<'_>) -> Reply + Send + Sync + 'static,
) {
    let handle = std::sync::Arc::new(handle);
    let me = crate::sys::geteuid();
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let handle = handle.clone();
        let _ = std::thread::Builder::new()
            .name("ckpt-ctl".into())
            .spawn(move || {
                let allowed = crate::sys::peer_cred(conn.as_fd())
                    .is_ok_and(|(uid, _, _)| uid == 0 || uid == me);
                let mut reader = BufReader::new(&conn);
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                let reply: Reply = if !allowed {
                    Response::fail(
                        "permission denied: only the folder's owner or root may control it",
                    )
                    .into()
                } else {
                    let progress = |done: usize, total: usize| {
                        if done.is_multiple_of((total / 100).max(1)) || done == total {
                            let mut w = &conn;
                            let _ = w.write_all(
                                format!("{{\"progress\":[{done},{total}]}}\n").as_bytes(),
                            );
                        }
                    };
                    match serde_json::from_str::<Request>(&line) {
                        Ok(req) => handle(req, &progress),
                        Err(e) => Response::fail(format!("bad request: {e}")).into(),
                    }
                };
                // Written through a buffer, not made into one line first: a rewind's report is
                // already text, and a second copy of it was part of the rewind's memory peak.
                let mut line = std::io::BufWriter::with_capacity(1 << 16, &conn);
                let sent = serde_json::to_writer(&mut line, &reply.response).is_ok()
                    && line.write_all(b"\n").is_ok()
                    && line.flush().is_ok();
                drop(line);
                if !sent {
                    return;
                }
                drop(reply.response);
                let mut w = &conn;
                if let Some(stream) = reply.stream {
                    // A failure midway leaves the client short of the promised size, which it
                    // reports; the daemon logs why.
                    if let Err(e) = stream(&mut w) {
                        log::warn!(target: "ckpt::ipc", "streaming an answer failed: {e}");
                    }
                }
            });
    }
}

/// Sends one request to the daemon of `folder`, and reads its answer as a `T`.
pub fn call<T: DeserializeOwned>(folder: &Path, req: &Request) -> Result<Answer<T>, CallError> {
    call_with_progress(folder, req, &mut |_, _| {})
}

/// As [`call`], giving up when the daemon has not answered within `limit`: for a caller that
/// must not wait on a daemon busy with a long rewind (shell completion, at a keypress).
pub fn call_within<T: DeserializeOwned>(
    folder: &Path,
    req: &Request,
    limit: Duration,
) -> Result<Answer<T>, CallError> {
    let conn = send(folder, req, limit)?;
    let line = read_line(&mut BufReader::new(&conn))?;
    serde_json::from_str(&line).map_err(CallError::BadAnswer)
}

/// A progress line: `{"progress": [done, total]}`.
#[derive(Deserialize)]
struct ProgressLine {
    progress: (u64, u64),
}

/// As [`call`], passing progress reports to `on_progress`.
pub fn call_with_progress<T: DeserializeOwned>(
    folder: &Path,
    req: &Request,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<Answer<T>, CallError> {
    let conn = send(folder, req, ANSWER_WAIT)?;
    let mut reader = BufReader::new(&conn);
    loop {
        let line = read_line(&mut reader)?;
        // Only a progress line begins so; an answer begins with `{"ok"`.
        if line.starts_with("{\"progress\"") {
            let p: ProgressLine = serde_json::from_str(&line).map_err(CallError::BadAnswer)?;
            on_progress(p.progress.0, p.progress.1);
            continue;
        }
        return serde_json::from_str(&line).map_err(CallError::BadAnswer);
    }
}

/// As [`call`], for an answer followed by bytes (`cat`): copies exactly the file's size in
/// bytes to `out` after a successful answer.
pub fn call_streaming(
    folder: &Path,
    req: &Request,
    out: &mut dyn Write,
) -> Result<Answer<crate::versions::OldVersion>, CallError> {
    use crate::versions::OldVersion;
    let conn = send(folder, req, ANSWER_WAIT)?;
    let mut reader = BufReader::new(&conn);
    let line = read_line(&mut reader)?;
    let answer: Answer<OldVersion> = serde_json::from_str(&line).map_err(CallError::BadAnswer)?;
    if let (true, Some(OldVersion::File { size, .. })) = (answer.ok, &answer.data) {
        let size = *size;
        let copied = std::io::copy(&mut std::io::Read::take(&mut reader, size), out)?;
        if copied != size {
            return Err(CallError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the daemon sent {copied} of {size} bytes (see status --log)"),
            )));
        }
    }
    Ok(answer)
}

/// How long a command waits for each line of the daemon's answer: a rewind of a large tree
/// reports progress, but may take long between reports.
const ANSWER_WAIT: Duration = Duration::from_secs(3600);

/// Connects to the daemon of `folder` and sends `req`, one line; reading the answer then
/// times out after `wait` without a line.
fn send(folder: &Path, req: &Request, wait: Duration) -> std::io::Result<UnixStream> {
    let addr = SocketAddr::from_abstract_name(socket_name(folder).as_bytes())?;
    let conn = UnixStream::connect_addr(&addr)?;
    conn.set_read_timeout(Some(wait))?;
    conn.set_write_timeout(Some(wait))?;
    let mut line = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    line.push(b'\n');
    (&conn).write_all(&line)?;
    Ok(conn)
}

/// The next line the daemon sends; the end of the connection before it is an error.
fn read_line(reader: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the daemon closed the connection",
        ));
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_written_as_text_reads_back_as_the_same_value() {
        let payload = serde_json::json!({
            "restored": ["a", "b/c"],
            "failed": [{"path": "d", "reason": "gone"}],
            "summary": {"restored": 2},
        });
        for ok in [true, false] {
            let error = (!ok).then(|| "some paths could not be restored".to_string());
            let line = serde_json::to_string(&Response::with_text(ok, error.clone(), &payload))
                .expect("encode");
            let back: Answer<serde_json::Value> = serde_json::from_str(&line).expect("decode");
            assert_eq!(
                (back.ok, back.error, back.data),
                (ok, error, Some(payload.clone()))
            );
        }
    }

    #[test]
    fn a_failure_without_a_payload_reads_back_as_none_of_any_type() {
        let line = serde_json::to_string(&Response::fail("turn 9 does not exist")).expect("encode");
        assert_eq!(
            line,
            r#"{"ok":false,"error":"turn 9 does not exist","data":null}"#
        );
        let back: Answer<crate::info::Status> = serde_json::from_str(&line).expect("decode");
        assert_eq!(
            (back.ok, back.error.as_deref()),
            (false, Some("turn 9 does not exist"))
        );
        assert!(back.data.is_none());
    }

    #[test]
    fn an_answer_of_the_wrong_shape_is_an_error_not_a_panic() {
        let line = r#"{"ok":true,"error":null,"data":{"turn":"three"}}"#;
        let back = serde_json::from_str::<Answer<crate::ipc::TurnAnswer>>(line);
        assert!(back.is_err());
    }
}
