//! Names as a person reads them: quoted the way git quotes a path (its default,
//! `core.quotePath=true`), so that a name holding a newline or an escape sequence can neither
//! fake nor hide a line of the output it is printed in.
//!
//! Every human-readable output prints a path (or another name taken from the folder or from a
//! process, such as a command name) through [`quote_path`]; `--json` keeps names raw.

use serde_json::Value;
use std::borrow::Cow;

/// Whether git's C-style quoting escapes byte `b`: control bytes, DEL, `"`, `\`, and every
/// byte of a multi-byte character (git's `core.quotePath=true`).
fn must_quote(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == b'"' || b == b'\\' || b >= 0x80
}

/// `bytes` as git prints a path: as it is when no byte needs quoting, else the whole of it in
/// double quotes with C escapes (`\a \b \t \n \v \f \r \" \\`, and any other byte as three
/// octal digits: `é` is `\303\251`). Git quotes a whole path, never one component of it.
pub fn quote_path(bytes: &[u8]) -> Cow<'_, str> {
    if !bytes.iter().copied().any(must_quote) {
        // Only printable ASCII is left, which is UTF-8 as it is.
        if let Ok(text) = std::str::from_utf8(bytes) {
            return Cow::Borrowed(text);
        }
    }
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        let escape = match b {
            0x07 => "\\a",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0b => "\\v",
            0x0c => "\\f",
            b'\r' => "\\r",
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b if must_quote(b) => {
                out.push('\\');
                for shift in [6, 3, 0] {
                    out.push(char::from(b'0' + ((b >> shift) & 7)));
                }
                continue;
            }
            b => {
                out.push(char::from(b));
                continue;
            }
        };
        out.push_str(escape);
    }
    out.push('"');
    Cow::Owned(out)
}

/// `bytes` as a log line names a path: always between double quotes, so the line shows where
/// the path ends, escaped as [`quote_path`] escapes it where it needs to be (it then adds the
/// quotes itself).
pub fn quote_log_path(bytes: &[u8]) -> String {
    match quote_path(bytes) {
        Cow::Borrowed(plain) => format!("\"{plain}\""),
        Cow::Owned(quoted) => quoted,
    }
}

/// A path of a JSON answer (a report, a diff) quoted by [`quote_path`]: a string (text, with
/// U+FFFD where a name that is not UTF-8 was made text), or `{"hex": ...}` as a
/// [`crate::relpath::RelPath`] serialises a name that is not UTF-8, quoted from its raw bytes;
/// `?` for anything else.
pub fn quote_json_path(v: &Value) -> Cow<'_, str> {
    if let Some(text) = v.as_str() {
        return quote_path(text.as_bytes());
    }
    match v["hex"].as_str().and_then(crate::relpath::unhex) {
        Some(raw) => Cow::Owned(quote_path(&raw).into_owned()),
        None => Cow::Borrowed("?"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names with every kind of byte git treats apart, and what `git ls-files` prints for each
    /// (git 2.x, `core.quotePath` at its default); [`agrees_with_git`] asks git itself.
    const NAMES: &[(&[u8], &str)] = &[
        (b"plain.txt", "plain.txt"),
        (b"dir/with space", "dir/with space"),
        (b"new\nline.txt", r#""new\nline.txt""#),
        (b"esc\x1b[31mred", r#""esc\033[31mred""#),
        (b"tab\there", r#""tab\there""#),
        (b"quote\"d", r#""quote\"d""#),
        (b"back\\slash", r#""back\\slash""#),
        ("é.txt".as_bytes(), r#""\303\251.txt""#),
        (
            b"bell\x07bs\x08vt\x0bff\x0ccr\r",
            r#""bell\abs\bvt\vff\fcr\r""#,
        ),
        (b"del\x7f\x01", r#""del\177\001""#),
        (b"bad\xff\xfe", r#""bad\377\376""#),
        (b"d\n/plain", r#""d\n/plain""#),
        (b"it's $(x) `y` *?", "it's $(x) `y` *?"),
    ];

    #[test]
    fn quotes_as_git_does() {
        for (raw, want) in NAMES {
            assert_eq!(quote_path(raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
        assert!(matches!(quote_path(b"a/b.rs"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_paths_are_quoted_from_their_raw_bytes() {
        assert_eq!(
            quote_json_path(&serde_json::json!("new\nline")),
            r#""new\nline""#
        );
        assert_eq!(
            quote_json_path(&serde_json::json!({"hex": "6469722ffffe"})),
            r#""dir/\377\376""#
        );
        assert_eq!(quote_json_path(&Value::Null), "?");
        assert_eq!(quote_json_path(&serde_json::json!({"hex": "zz"})), "?");
    }

    /// The names above, created in a new git repository and listed by `git ls-files`: git's
    /// own quoting must be ours, byte for byte. Skipped (with a note) where git is missing.
    #[test]
    fn agrees_with_git() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        use std::process::Command;
        let dir = tempfile::tempdir().expect("tempdir");
        let git = |args: &[&str]| {
            Command::new("git")
                .args(["-c", "core.quotePath=true"])
                .args(args)
                .current_dir(dir.path())
                .output()
        };
        match git(&["init", "-q"]) {
            Ok(o) if o.status.success() => {}
            _ => {
                eprintln!("git is not installed: the comparison with git is skipped");
                return;
            }
        }
        for (raw, _) in NAMES {
            let path = dir.path().join(OsStr::from_bytes(raw));
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, b"x").expect("write");
        }
        let add = git(&["add", "-A"]).expect("git add");
        assert!(
            add.status.success(),
            "{}",
            String::from_utf8_lossy(&add.stderr)
        );
        let listed = git(&["ls-files"]).expect("git ls-files");
        let got: Vec<&[u8]> = listed.stdout.split(|b| *b == b'\n').collect();
        let mut want: Vec<(Vec<u8>, String)> = NAMES
            .iter()
            .map(|(raw, _)| (raw.to_vec(), quote_path(raw).into_owned()))
            .collect();
        // git lists by raw bytes.
        want.sort();
        let want: Vec<&[u8]> = want
            .iter()
            .map(|(_, q)| q.as_bytes())
            .chain([&b""[..]])
            .collect();
        assert_eq!(
            got.iter()
                .map(|l| String::from_utf8_lossy(l))
                .collect::<Vec<_>>(),
            want.iter()
                .map(|l| String::from_utf8_lossy(l))
                .collect::<Vec<_>>()
        );
    }
}
