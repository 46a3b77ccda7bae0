//! The control socket between the CLI and a running daemon: one JSON request line, one JSON
//! response line, over an abstract Unix socket named after the folder. Only root and the
//! daemon's own user may connect (checked with `SO_PEERCRED`).

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
        set: Option<u64>,
        /// Its label.
        label: Option<String>,
    },
    /// Rewind.
    Rewind {
        /// Target turn (default: the current one).
        to: Option<u64>,
        /// Plan only.
        dry_run: bool,
        /// Undo the last rewind.
        undo: bool,
        /// Only these paths (relative to the folder); empty for the whole folder.
        #[serde(default)]
        paths: Vec<crate::relpath::RelPath>,
        /// Only what the agent changed (`rewind --agent`), with what to do with conflicts.
        #[serde(default)]
        agent: Option<crate::rewind::Conflicts>,
    },
    /// Mark a process (and what descends from it) as the agent.
    MarkAgent {
        /// The mark: process, start time, command name, who marks it, session.
        mark: crate::store::actors::AgentMark,
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
        turn: u64,
        /// The label.
        label: Option<String>,
    },
    /// The operation log as JSON.
    OpLog,
    /// Status as JSON.
    Status,
    /// Turn log as JSON.
    Log,
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
        /// The turn.
        turn: Option<u64>,
        /// The path, relative to the folder.
        path: crate::relpath::RelPath,
    },
    Diff {
        /// The turn.
        turn: Option<u64>,
        /// The later turn whose start ends the range (default: now).
        #[serde(default)]
        to: Option<u64>,
        /// Only what turn `turn` changed: to the start of the next turn, or now for the last.
        #[serde(default)]
        show: bool,
        /// Only these paths (and what is below them).
        paths: Vec<crate::relpath::RelPath>,
    },
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

/// The daemon's answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// One line saying what went wrong.
    #[serde(default)]
    pub error: Option<String>,
    /// The payload.
    #[serde(default)]
    pub data: serde_json::Value,
    /// The payload as JSON text already, sent in place of `data` (the daemon's side only): a
    /// rewind's report of 100,000 paths as a `Value` tree was twice its text, at the rewind's
    /// memory peak.
    #[serde(skip)]
    pub raw: Option<Arc<JsonText>>,
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

/// Written with `raw` as `data` when there is one: the same line either way.
impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Response", 3)?;
        st.serialize_field("ok", &self.ok)?;
        st.serialize_field("error", &self.error)?;
        match &self.raw {
            Some(raw) => st.serialize_field("data", &**raw)?,
            None => st.serialize_field("data", &self.data)?,
        }
        st.end()
    }
}

impl Response {
    /// A success.
    pub fn ok(data: serde_json::Value) -> Self {
        Self {
            ok: true,
            error: None,
            data,
            raw: None,
        }
    }
    /// A failure.
    pub fn fail(msg: impl Into<String>, data: serde_json::Value) -> Self {
        Self {
            ok: false,
            error: Some(msg.into()),
            data,
            raw: None,
        }
    }
    /// An answer whose payload is `value` written as JSON text once ([`Self::raw`]).
    pub fn with_text<T: Serialize>(ok: bool, error: Option<String>, value: &T) -> Self {
        match JsonText::of(value) {
            Ok(text) => Self::with_shared(ok, error, text),
            Err(e) => Self::fail(
                format!("cannot encode the answer: {e}"),
                serde_json::Value::Null,
            ),
        }
    }

    /// An answer whose payload is JSON text written already, and kept elsewhere too.
    pub fn with_shared(ok: bool, error: Option<String>, text: Arc<JsonText>) -> Self {
        Self {
            ok,
            error,
            data: serde_json::Value::Null,
            raw: Some(text),
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
                        serde_json::Value::Null,
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
                        Err(e) => {
                            Response::fail(format!("bad request: {e}"), serde_json::Value::Null)
                                .into()
                        }
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

/// Sends one request to the daemon of `folder`.
pub fn call(folder: &Path, req: &Request) -> std::io::Result<Response> {
    call_with_progress(folder, req, &mut |_, _| {})
}

/// As [`call`], passing progress reports to `on_progress`.
pub fn call_with_progress(
    folder: &Path,
    req: &Request,
    on_progress: &mut dyn FnMut(u64, u64),
) -> std::io::Result<Response> {
    let addr = SocketAddr::from_abstract_name(socket_name(folder).as_bytes())?;
    let conn = UnixStream::connect_addr(&addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(3600)))?;
    let mut out = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    out.push(b'\n');
    (&conn).write_all(&out)?;
    let mut reader = BufReader::new(&conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ));
        }
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(std::io::Error::other)?;
        if let Some(p) = value.get("progress").and_then(|p| p.as_array()) {
            let n = |i: usize| p.get(i).and_then(serde_json::Value::as_u64).unwrap_or(0);
            on_progress(n(0), n(1));
            continue;
        }
        return serde_json::from_value(value).map_err(std::io::Error::other);
    }
}

/// As [`call`], for an answer followed by bytes (`cat`): copies exactly `data.size` bytes to
/// `out` after a successful answer.
pub fn call_streaming(
    folder: &Path,
    req: &Request,
    out: &mut dyn Write,
) -> std::io::Result<Response> {
    let addr = SocketAddr::from_abstract_name(socket_name(folder).as_bytes())?;
    let conn = UnixStream::connect_addr(&addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(3600)))?;
    let mut line = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    line.push(b'\n');
    (&conn).write_all(&line)?;
    let mut reader = BufReader::new(&conn);
    let mut answer = String::new();
    if reader.read_line(&mut answer)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the daemon closed the connection",
        ));
    }
    let resp: Response = serde_json::from_str(&answer).map_err(std::io::Error::other)?;
    if let (true, Some(size)) = (resp.ok, resp.data["size"].as_u64()) {
        let copied = std::io::copy(&mut std::io::Read::take(&mut reader, size), out)?;
        if copied != size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the daemon sent {copied} of {size} bytes (see status --log)"),
            ));
        }
    }
    Ok(resp)
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
            let back: Response = serde_json::from_str(&line).expect("decode");
            assert_eq!(
                (back.ok, back.error, back.data),
                (ok, error, payload.clone())
            );
            // The answer made of the value reads back the same.
            let by_value = Response {
                ok,
                error: (!ok).then(|| "some paths could not be restored".to_string()),
                data: payload.clone(),
                raw: None,
            };
            let again: Response =
                serde_json::from_str(&serde_json::to_string(&by_value).expect("encode"))
                    .expect("decode");
            assert_eq!(again.data, payload);
        }
    }
}
