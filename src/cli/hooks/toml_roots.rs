//! Codex's extra writable folders, `writable_roots` under `[sandbox_workspace_write]` in its
//! config.toml: read with a reader of that one array of strings (and nothing else of TOML),
//! so that no TOML parser is linked for one setting. What it cannot read gives no folder: the
//! hook then acts in the working directory's folder alone, as before.

use std::path::Path;

/// The table the setting lives in.
const TABLE: &str = "sandbox_workspace_write";
/// The setting.
const KEY: &str = "writable_roots";

/// The strings of `writable_roots` in `[sandbox_workspace_write]` (or the dotted key
/// `sandbox_workspace_write.writable_roots` before any table) in `file`; none when the file is
/// missing or the setting is not an array of plain strings.
pub fn writable_roots(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .map(|t| roots_in(&t))
        .unwrap_or_default()
}

/// [`writable_roots`] of a file's text.
fn roots_in(text: &str) -> Vec<String> {
    let mut table = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let l = line.trim();
        if l.starts_with('[') && !l.starts_with("[[") {
            let end = l.find(']').unwrap_or(l.len());
            table = l[1..end].trim().to_string();
            continue;
        }
        let Some((key, value)) = l.split_once('=') else {
            continue;
        };
        let key: String = key.chars().filter(|c| !c.is_whitespace()).collect();
        let ours =
            (table == TABLE && key == KEY) || (table.is_empty() && key == format!("{TABLE}.{KEY}"));
        if !ours {
            continue;
        }
        // The array may go on over several lines: up to its closing bracket.
        let mut array = value.trim().to_string();
        while !closed(&array) {
            match lines.next() {
                Some(more) => {
                    array.push('\n');
                    array.push_str(more);
                }
                None => return Vec::new(),
            }
        }
        return strings(&array).unwrap_or_default();
    }
    Vec::new()
}

/// Whether an array's text reaches its closing bracket (outside strings and comments).
fn closed(array: &str) -> bool {
    scan(array).is_some_and(|(_, done)| done)
}

/// The strings of an array's text, `None` when it is not an array of strings.
fn strings(array: &str) -> Option<Vec<String>> {
    scan(array).and_then(|(items, done)| done.then_some(items))
}

/// Reads an array's text: its strings (basic and literal) and whether its `]` was reached;
/// `None` when it holds anything but strings, commas, whitespace and comments.
fn scan(array: &str) -> Option<(Vec<String>, bool)> {
    let mut chars = array.chars().peekable();
    if chars.next()? != '[' {
        return None;
    }
    let mut items = Vec::new();
    while let Some(c) = chars.next() {
        match c {
            ']' => return Some((items, true)),
            ',' | ' ' | '\t' | '\n' | '\r' => {}
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\'' => {
                let s: String = chars.by_ref().take_while(|c| *c != '\'').collect();
                items.push(s);
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            'n' => s.push('\n'),
                            't' => s.push('\t'),
                            other => s.push(other),
                        },
                        c => s.push(c),
                    }
                }
                items.push(s);
            }
            _ => return None,
        }
    }
    Some((items, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writable_roots_are_read_from_their_table_only() {
        let text = "model = \"o3\"\n\
                    [sandbox_workspace_write]\n\
                    network_access = false\n\
                    writable_roots = [\n  \"/srv/lib\", # the library\n  '~/notes',\n]\n\
                    [other]\nwritable_roots = [\"/no\"]\n";
        assert_eq!(roots_in(text), vec!["/srv/lib", "~/notes"]);
        assert_eq!(
            roots_in("sandbox_workspace_write.writable_roots = [\"/a\\\\b\"]\n"),
            vec!["/a\\b"]
        );
        assert!(roots_in("[other]\nsandbox_workspace_write.writable_roots = [\"/a\"]").is_empty());
        assert!(roots_in("[sandbox_workspace_write]\nwritable_roots = [1]").is_empty());
        assert!(roots_in("[sandbox_workspace_write]\nwritable_roots = [\"/a\"").is_empty());
    }
}
