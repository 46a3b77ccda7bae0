//! A settings file with comments (JSONC), as Gemini CLI allows in its `settings.json` (it
//! strips `//` and `/* */` comments before it parses): read and changed through the concrete
//! syntax tree of dprint's `jsonc-parser`, which keeps every comment, blank line and the file's
//! own layout, and changes only the nodes it is told to. The same rules as
//! [`super::settings`]'s `add` and `remove`, on that tree.

use super::settings::{Added, Json, Problem, SettingsError};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{
    CstArray, CstContainerNode, CstInputValue, CstLeafNode, CstNode, CstObject, CstRootNode,
};
use std::path::Path;

/// A settings file read as JSONC.
pub struct Commented {
    root: CstRootNode,
}

/// What a settings file may hold beyond JSON: comments and trailing commas, nothing looser
/// (single quotes, bare names, hex numbers are refused, as Gemini CLI's own parser would).
fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

/// `node` as a [`Json`] value, its objects' keys in file order.
fn to_json(node: &CstNode) -> Json {
    match node {
        CstNode::Container(CstContainerNode::Object(o)) => Json::Object(
            o.properties()
                .iter()
                .filter_map(|p| {
                    let value = p.value().map_or(Json::Null, |v| to_json(&v));
                    Some((p.decoded_name()?, value))
                })
                .collect(),
        ),
        CstNode::Container(CstContainerNode::Array(a)) => {
            Json::Array(a.elements().iter().map(to_json).collect())
        }
        CstNode::Leaf(CstLeafNode::StringLit(s)) => {
            Json::String(s.decoded_value().unwrap_or_default())
        }
        CstNode::Leaf(CstLeafNode::NumberLit(n)) => {
            let raw = n.to_string();
            raw.parse::<serde_json::Number>()
                .map_or(Json::String(raw), Json::Number)
        }
        CstNode::Leaf(CstLeafNode::BooleanLit(b)) => Json::Bool(b.value()),
        _ => Json::Null,
    }
}

/// `value` as a node to insert.
fn to_input(value: &Json) -> CstInputValue {
    match value {
        Json::Null => CstInputValue::Null,
        Json::Bool(b) => CstInputValue::Bool(*b),
        Json::Number(n) => CstInputValue::Number(n.to_string()),
        Json::String(s) => CstInputValue::String(s.clone()),
        Json::Array(items) => CstInputValue::Array(items.iter().map(to_input).collect()),
        Json::Object(entries) => CstInputValue::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_input(v)))
                .collect(),
        ),
    }
}

/// The hook entries of a matcher group (`{"matcher": …, "hooks": [entry, …]}`).
fn entries_of(group: &CstNode) -> Option<CstArray> {
    group.as_object()?.array_value("hooks")
}

impl Commented {
    /// Parses `text`; refuses, in one line, what is not JSON with comments or not an object.
    pub fn parse(path: &Path, text: &str) -> Result<Self, SettingsError> {
        let root = CstRootNode::parse(text, &options()).map_err(|e| SettingsError {
            path: path.to_path_buf(),
            problem: Problem::NotJson(e.to_string()),
        })?;
        if root.value().is_some_and(|v| v.as_object().is_none()) {
            return Err(SettingsError {
                path: path.to_path_buf(),
                problem: Problem::NotAnObject,
            });
        }
        Ok(Self { root })
    }

    /// The file's value (an empty object for a file with none).
    pub fn value(&self) -> Json {
        self.root
            .value()
            .map_or(Json::Object(Vec::new()), |v| to_json(&v))
    }

    /// The file's text as it is now.
    pub fn text(&self) -> String {
        self.root.to_string()
    }

    /// Whether the file holds nothing at all: an empty object, no comment.
    pub fn holds_nothing(&self) -> bool {
        let text = self.text();
        text.chars().filter(|c| !c.is_whitespace()).eq("{}".chars())
    }

    /// The event's list of matcher groups in `"hooks"."<event>"`, made when missing; refuses
    /// a shape the agents do not document.
    fn event_groups(&self, event: &str, path: &Path) -> Result<CstArray, SettingsError> {
        let bad = |what: String| SettingsError {
            path: path.to_path_buf(),
            problem: Problem::Shape(what),
        };
        let top: CstObject = self.root.object_value_or_create().ok_or(SettingsError {
            path: path.to_path_buf(),
            problem: Problem::NotAnObject,
        })?;
        let hooks = top
            .object_value_or_create("hooks")
            .ok_or_else(|| bad("\"hooks\" is not an object".into()))?;
        hooks
            .array_value_or_create(event)
            .ok_or_else(|| bad(format!("\"hooks\".\"{event}\" is not a list")))
    }

    /// As `settings::add`: `entry` added to `"hooks"."<event>"` unless an entry that
    /// `is_ours` is there (one with another command is replaced in place).
    pub fn add(
        &self,
        event: &str,
        group: &super::settings::Group<'_>,
        is_ours: &dyn Fn(&Json) -> bool,
        path: &Path,
    ) -> Result<Added, SettingsError> {
        let entry = &group.entry;
        let groups = self.event_groups(event, path)?;
        for group in groups.elements() {
            let Some(entries) = entries_of(&group) else {
                continue;
            };
            for node in entries.elements() {
                let found = to_json(&node);
                if !is_ours(&found) {
                    continue;
                }
                if found == *entry {
                    return Ok(Added::AlreadyThere);
                }
                let at = node.element_index().unwrap_or(0);
                node.remove();
                entries.insert(at, to_input(entry));
                return Ok(Added::Updated);
            }
        }
        groups.append(to_input(&super::settings::group_of(
            entry.clone(),
            group.matcher,
        )));
        Ok(Added::Appended)
    }

    /// As `settings::remove`: every entry that `is_ours` taken out of `"hooks"."<event>"`,
    /// then whatever that left empty, and nothing else; how many entries it removed.
    pub fn remove(&self, event: &str, is_ours: &dyn Fn(&Json) -> bool) -> usize {
        let Some(hooks) = self
            .root
            .object_value()
            .and_then(|top| top.object_value("hooks"))
        else {
            return 0;
        };
        let Some(groups) = hooks.array_value(event) else {
            return 0;
        };
        let mut removed = 0;
        for group in groups.elements() {
            let Some(entries) = entries_of(&group) else {
                continue;
            };
            let ours: Vec<CstNode> = entries
                .elements()
                .into_iter()
                .filter(|e| is_ours(&to_json(e)))
                .collect();
            if ours.is_empty() {
                continue;
            }
            removed += ours.len();
            ours.into_iter().for_each(CstNode::remove);
            if entries.elements().is_empty() {
                group.remove();
            }
        }
        if removed > 0 && groups.elements().is_empty() {
            if let Some(prop) = hooks.get(event) {
                prop.remove();
            }
            if hooks.properties().is_empty()
                && let Some(prop) = self.root.object_value().and_then(|t| t.get("hooks"))
            {
                prop.remove();
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMENTED: &str = r#"// Gemini CLI settings
{
  /* the model */
  "model": "gemini-2.5-pro", // trailing note
  "hooks": {
    "BeforeAgent": [
      {
        // someone else's
        "hooks": [{ "type": "command", "command": "theirs" }],
      },
    ],
  },
}
"#;

    fn ours(e: &Json) -> bool {
        e.str_of("command") == Some("ours")
    }

    fn group(entry: &Json) -> super::super::settings::Group<'static> {
        super::super::settings::Group {
            entry: entry.clone(),
            matcher: None,
        }
    }

    #[test]
    fn add_and_remove_keep_every_comment_and_the_layout() {
        let p = Path::new("settings.json");
        let doc = Commented::parse(p, COMMENTED).expect("parse");
        let entry = Json::object(&[("type", "command"), ("command", "ours")]);
        assert_eq!(
            doc.add("BeforeAgent", &group(&entry), &ours, p),
            Ok(Added::Appended)
        );
        let installed = doc.text();
        for kept in [
            "// Gemini CLI settings",
            "/* the model */",
            "// trailing note",
            "// someone else's",
        ] {
            assert!(installed.contains(kept), "{kept} lost: {installed}");
        }
        assert_eq!(
            super::super::settings::commands(&doc.value(), "BeforeAgent"),
            ["theirs", "ours"]
        );
        assert_eq!(
            doc.add("BeforeAgent", &group(&entry), &ours, p),
            Ok(Added::AlreadyThere)
        );
        assert_eq!(doc.remove("BeforeAgent", &ours), 1);
        assert_eq!(doc.text(), COMMENTED);
        assert!(!doc.holds_nothing());
    }

    #[test]
    fn a_new_file_gets_the_entry_and_loses_it_again() {
        let p = Path::new("settings.json");
        let doc = Commented::parse(p, "").expect("parse");
        let entry = Json::object(&[("type", "command"), ("command", "ours")]);
        assert_eq!(
            doc.add("BeforeAgent", &group(&entry), &ours, p),
            Ok(Added::Appended)
        );
        let value: serde_json::Value = serde_json::from_str(&doc.text()).expect("plain JSON");
        assert_eq!(
            value["hooks"]["BeforeAgent"][0]["hooks"][0]["command"],
            "ours"
        );
        assert_eq!(doc.remove("BeforeAgent", &ours), 1);
        assert!(doc.holds_nothing(), "{}", doc.text());
    }

    #[test]
    fn what_is_not_jsonc_or_not_an_object_is_refused() {
        let p = Path::new("s.json");
        for text in ["{ 'model': 1 }", "{ \"a\": 1", "{ model: 1 }"] {
            let e = Commented::parse(p, text).err().expect(text);
            assert!(matches!(e.problem, Problem::NotJson(_)), "{text}: {e}");
        }
        let e = Commented::parse(p, "// a list\n[1]").err().expect("list");
        assert_eq!(e.problem, Problem::NotAnObject);
        let doc = Commented::parse(p, r#"{"hooks": []}"#).expect("parse");
        let entry = Json::object(&[("command", "ours")]);
        assert!(doc.add("BeforeAgent", &group(&entry), &ours, p).is_err());
    }
}
