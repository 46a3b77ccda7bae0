//! An agent's JSON settings file, read, changed by one hook entry and written back with the
//! rest of it as it was (Gemini CLI's, which may hold comments, is changed in place by
//! `jsonc.rs` with the same rules): objects keep their keys in file order (serde_json's own map would
//! sort them), and a file that is not JSON, or whose `hooks` are not of the shape the agents
//! document, is refused rather than rewritten.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::path::{Path, PathBuf};

/// A JSON value whose objects keep their keys in the order of the file.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, its entries in file order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value of `key` in an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string of `key` in an object.
    pub fn str_of(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Json::String(s)) => Some(s),
            _ => None,
        }
    }

    /// An object built from its entries.
    pub fn object(entries: &[(&str, &str)]) -> Json {
        Json::Object(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_string(), Json::String((*v).to_string())))
                .collect(),
        )
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry()? {
            entries.push((k, v));
        }
        Ok(Json::Object(entries))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// Why a settings file was not read or written: the file, and what is wrong with it. Nothing
/// was written when it is said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The file (or, for [`Problem::CreateDir`], the folder).
    pub path: PathBuf,
    /// What is wrong.
    pub problem: Problem,
}

/// What [`SettingsError`] found wrong; an I/O error or a parser's is kept as its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Reading the file failed.
    Read(String),
    /// The file is not JSON.
    NotJson(String),
    /// The file is JSON, not a JSON object.
    NotAnObject,
    /// Its `hooks` are not of the shape the agents document: which part.
    Shape(String),
    /// It is a symlink to nothing.
    DanglingSymlink(String),
    /// The file has no parent folder.
    NoParent,
    /// Its folder cannot be created.
    CreateDir(String),
    /// Writing it failed.
    Write(String),
}

impl SettingsError {
    fn new(path: &Path, problem: Problem) -> Self {
        Self {
            path: path.to_path_buf(),
            problem,
        }
    }
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match &self.problem {
            Problem::Read(e) => write!(f, "cannot read {path}: {e}"),
            Problem::NotJson(e) => write!(
                f,
                "{path} is not valid JSON ({e}); nothing was written: fix it, or add the hook by hand (see mount-scripts/README.md)"
            ),
            Problem::NotAnObject => {
                write!(f, "{path} does not hold a JSON object; nothing was written")
            }
            Problem::Shape(what) => write!(f, "{path}: {what}; nothing was written"),
            Problem::DanglingSymlink(e) => write!(f, "{path} is a symlink to nothing: {e}"),
            Problem::NoParent => write!(f, "{path} has no parent folder"),
            Problem::CreateDir(e) => write!(f, "cannot create {path}: {e}"),
            Problem::Write(e) => write!(f, "cannot write {path}: {e}"),
        }
    }
}

impl std::error::Error for SettingsError {}

/// The text of a settings file, `Ok(None)` when there is none.
pub fn read_text(path: &Path) -> Result<Option<String>, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SettingsError::new(path, Problem::Read(e.to_string()))),
    }
}

/// Reads a settings file: `Ok(None)` when there is none, an empty object for an empty file,
/// and a one-line refusal when it is not a JSON object.
pub fn read(path: &Path) -> Result<Option<(String, Json)>, SettingsError> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(Some((text, Json::Object(Vec::new()))));
    }
    let value: Json = serde_json::from_str(&text)
        .map_err(|e| SettingsError::new(path, Problem::NotJson(e.to_string())))?;
    if !matches!(value, Json::Object(_)) {
        return Err(SettingsError::new(path, Problem::NotAnObject));
    }
    Ok(Some((text, value)))
}

/// The text a settings file is written with: two-space indents, as the agents write theirs.
pub fn render(value: &Json) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// What [`add`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Added {
    /// The entry was there already, exactly.
    AlreadyThere,
    /// An entry of ours with another command (the binary moved) now has this one.
    Updated,
    /// A new matcher group holding the entry was appended to the event's list.
    Appended,
}

/// The event's list of matcher groups in `"hooks"."<event>"` of `root`, made when missing; refuses a
/// shape the agents do not document instead of overwriting it.
fn event_groups<'a>(
    root: &'a mut Json,
    event: &str,
    path: &Path,
) -> Result<&'a mut Vec<Json>, SettingsError> {
    let bad = |what: &str| SettingsError::new(path, Problem::Shape(what.to_string()));
    let Json::Object(top) = root else {
        return Err(bad("not a JSON object"));
    };
    if !top.iter().any(|(k, _)| k == "hooks") {
        top.push(("hooks".into(), Json::Object(Vec::new())));
    }
    let Some((_, Json::Object(hooks))) = top.iter_mut().find(|(k, _)| k == "hooks") else {
        return Err(bad("\"hooks\" is not an object"));
    };
    if !hooks.iter().any(|(k, _)| k == event) {
        hooks.push((event.into(), Json::Array(Vec::new())));
    }
    match hooks.iter_mut().find(|(k, _)| k == event) {
        Some((_, Json::Array(groups))) => Ok(groups),
        _ => Err(bad(&format!("\"hooks\".\"{event}\" is not a list"))),
    }
}

/// The hook entries of a matcher group (`{"matcher": …, "hooks": [entry, …]}`), when it has
/// that shape.
fn entries_mut(group: &mut Json) -> Option<&mut Vec<Json>> {
    match group {
        Json::Object(fields) => match fields.iter_mut().find(|(k, _)| k == "hooks") {
            Some((_, Json::Array(entries))) => Some(entries),
            _ => None,
        },
        _ => None,
    }
}

/// A hook entry, and the matcher of the group it is added in when no entry of ours is found
/// (tool events: a regex of the tool names it runs for; none: every prompt).
pub struct Group<'a> {
    /// The entry (`{"type": "command", "command": …}`).
    pub entry: Json,
    /// The group's `matcher`.
    pub matcher: Option<&'a str>,
}

/// A new matcher group holding `entry` alone.
pub fn group_of(entry: Json, matcher: Option<&str>) -> Json {
    let mut fields = Vec::new();
    if let Some(m) = matcher {
        fields.push(("matcher".to_string(), Json::String(m.to_string())));
    }
    fields.push(("hooks".to_string(), Json::Array(vec![entry])));
    Json::Object(fields)
}

/// Adds `entry` to `"hooks"."<event>"` of `root` unless an entry that `is_ours` is there; an entry of
/// ours with a different command is replaced in place, so a reinstall after the binary moved
/// leaves one entry.
pub fn add(
    root: &mut Json,
    event: &str,
    group: Group<'_>,
    is_ours: &dyn Fn(&Json) -> bool,
    path: &Path,
) -> Result<Added, SettingsError> {
    let Group { entry, matcher } = group;
    let groups = event_groups(root, event, path)?;
    let mut result = None;
    for group in groups.iter_mut() {
        let Some(entries) = entries_mut(group) else {
            continue;
        };
        for e in entries.iter_mut().filter(|e| is_ours(e)) {
            if result.is_none() {
                result = Some(if *e == entry {
                    Added::AlreadyThere
                } else {
                    *e = entry.clone();
                    Added::Updated
                });
            }
        }
    }
    if let Some(r) = result {
        return Ok(r);
    }
    groups.push(group_of(entry, matcher));
    Ok(Added::Appended)
}

/// Removes every entry that `is_ours` from `"hooks"."<event>"` of `root`, then whatever that left
/// empty (its matcher group, the event's list, `hooks`), and nothing else. Returns how many
/// entries it removed.
pub fn remove(root: &mut Json, event: &str, is_ours: &dyn Fn(&Json) -> bool) -> usize {
    let Json::Object(top) = root else { return 0 };
    let Some((_, Json::Object(hooks))) = top.iter_mut().find(|(k, _)| k == "hooks") else {
        return 0;
    };
    let Some((_, Json::Array(groups))) = hooks.iter_mut().find(|(k, _)| k == event) else {
        return 0;
    };
    let mut removed = 0;
    groups.retain_mut(|group| {
        let Some(entries) = entries_mut(group) else {
            return true;
        };
        let before = entries.len();
        entries.retain(|e| !is_ours(e));
        let gone = before - entries.len();
        removed += gone;
        !(gone > 0 && entries.is_empty())
    });
    if removed > 0 && groups.is_empty() {
        hooks.retain(|(k, _)| k != event);
        if hooks.is_empty() {
            top.retain(|(k, _)| k != "hooks");
        }
    }
    removed
}

/// Every `command` string in `"hooks"."<event>"` of `root`.
pub fn commands(root: &Json, event: &str) -> Vec<String> {
    let Some(Json::Array(groups)) = root.get("hooks").and_then(|h| h.get(event)) else {
        return Vec::new();
    };
    groups
        .iter()
        .filter_map(|g| match g.get("hooks") {
            Some(Json::Array(entries)) => Some(entries),
            _ => None,
        })
        .flatten()
        .filter_map(|e| e.str_of("command").map(str::to_string))
        .collect()
}

/// Writes `text` to the settings file: through a symlink to the file it names (dotfile
/// managers link these), by a temp file renamed over it, with the old file's permissions.
pub fn write(path: &Path, text: &str) -> Result<(), SettingsError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)
            .map_err(|e| SettingsError::new(path, Problem::DanglingSymlink(e.to_string())))?,
        _ => path.to_path_buf(),
    };
    let dir = target
        .parent()
        .ok_or_else(|| SettingsError::new(&target, Problem::NoParent))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| SettingsError::new(dir, Problem::CreateDir(e.to_string())))?;
    let mode = std::fs::metadata(&target).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let fail = |e: std::io::Error| SettingsError::new(&target, Problem::Write(e.to_string()));
    let mut tmp = tempfile::Builder::new()
        .prefix(".ckpt-mount-")
        .tempfile_in(dir)
        .map_err(fail)?;
    tmp.write_all(text.as_bytes()).map_err(fail)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(&target).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `entry` in a group of its own, with no matcher (a prompt hook).
    fn plain(entry: Json) -> Group<'static> {
        Group {
            entry,
            matcher: None,
        }
    }

    fn parse(s: &str) -> Json {
        serde_json::from_str(s).expect("json")
    }

    #[test]
    fn keys_keep_their_order_through_a_round_trip() {
        let text = r#"{"zeta": 1, "alpha": {"b": [1.5, null, true], "a": "x"}}"#;
        let rendered = render(&parse(text));
        assert_eq!(
            rendered,
            "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"b\": [\n      1.5,\n      null,\n      true\n    ],\n    \"a\": \"x\"\n  }\n}\n"
        );
    }

    #[test]
    fn add_then_remove_leaves_the_rest_as_it_was() {
        let ours = |e: &Json| e.str_of("command") == Some("ours");
        let entry = Json::object(&[("type", "command"), ("command", "ours")]);
        let original = parse(
            r#"{"model": "x", "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "theirs"}]}], "Stop": []}}"#,
        );
        let mut v = original.clone();
        let p = Path::new("s.json");
        assert_eq!(
            add(&mut v, "UserPromptSubmit", plain(entry.clone()), &ours, p),
            Ok(Added::Appended)
        );
        assert_eq!(
            add(&mut v, "UserPromptSubmit", plain(entry.clone()), &ours, p),
            Ok(Added::AlreadyThere)
        );
        assert_eq!(commands(&v, "UserPromptSubmit"), vec!["theirs", "ours"]);
        assert_eq!(remove(&mut v, "UserPromptSubmit", &ours), 1);
        assert_eq!(v, original);
        let mut empty = Json::Object(Vec::new());
        add(&mut empty, "BeforeAgent", plain(entry), &ours, p).expect("add");
        assert_eq!(remove(&mut empty, "BeforeAgent", &ours), 1);
        assert_eq!(empty, Json::Object(Vec::new()));
    }

    #[test]
    fn a_shape_the_agents_do_not_document_is_refused() {
        let ours = |_: &Json| false;
        let entry = Json::object(&[("command", "ours")]);
        for text in [r#"{"hooks": []}"#, r#"{"hooks": {"UserPromptSubmit": {}}}"#] {
            let mut v = parse(text);
            let before = v.clone();
            assert!(
                add(
                    &mut v,
                    "UserPromptSubmit",
                    plain(entry.clone()),
                    &ours,
                    Path::new("s")
                )
                .is_err()
            );
            assert_eq!(v, before);
        }
    }
}
