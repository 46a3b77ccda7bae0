//! Which mounted folders an agent's prompt begins a turn in: the one it works in, and the other
//! folders the agent was given (Claude Code's additional directories, Gemini CLI's include
//! directories, Codex's writable roots, and those `hooks install --also` named). One place
//! decides it, for every hook that acts per prompt or per step, so that all of them act on the
//! same folders.

use super::payload::HookAgent;
use super::settings::Json;
use std::path::{Path, PathBuf};

/// The folders a hook acts in, and what the user should hear about the folders named but not
/// acted in.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HookFolders {
    /// The ckpt-mount folder containing the agent's working directory (mounted or not: the
    /// hook tells the user when it is not), when there is one.
    pub main: Option<PathBuf>,
    /// The other mounted folders, each once, none of them `main`, in the order found.
    pub others: Vec<PathBuf>,
    /// One line per folder named with `--also` that is not a mounted ckpt-mount folder.
    pub warnings: Vec<String>,
}

impl HookFolders {
    /// Every folder acted in: `main` first.
    pub fn all(&self) -> Vec<PathBuf> {
        self.main.iter().chain(&self.others).cloned().collect()
    }
}

/// The folders for a prompt of `agent` working in `cwd`, with the folders `also` named
/// explicitly. The agent's own settings are read from the user's configuration and the
/// project's (its directory: the agent's `*_PROJECT_DIR` variable, else `cwd`). A folder reached
/// two ways (a path inside it, a symlink, a second mount of the same filesystem) counts once;
/// a folder from the settings that is not mounted is left out without a word (the settings
/// name directories for the agent, not for ckpt-mount).
pub fn hook_folders(agent: HookAgent, cwd: &Path, also: &[PathBuf]) -> HookFolders {
    let main = crate::mounts::find_folder(cwd);
    let mut seen: Vec<String> = main.iter().map(|m| identity(m)).collect();
    let mut out = HookFolders {
        main,
        ..HookFolders::default()
    };
    let project = project_dir(agent, cwd);
    let named = agent_dirs(agent, &project).into_iter().map(|d| (d, false));
    for (dir, explicit) in named.chain(also.iter().map(|d| (d.clone(), true))) {
        match mounted_folder(&dir) {
            Some(folder) => {
                let id = identity(&folder);
                if !seen.contains(&id) {
                    seen.push(id);
                    out.others.push(folder);
                }
            }
            None if explicit => out.warnings.push(format!(
                "{} (--also) is not a mounted ckpt-mount folder: no turn was begun there",
                dir.display()
            )),
            None => {}
        }
    }
    out
}

/// The mounted ckpt-mount folder containing `dir`, if it is mounted.
fn mounted_folder(dir: &Path) -> Option<PathBuf> {
    let folder = crate::mounts::find_folder(dir)?;
    crate::mounts::is_ckpt_mount(&folder).then_some(folder)
}

/// What makes two folders the same: the device of the mount at it (a FUSE mount's names one
/// filesystem wherever it is mounted), else its path.
fn identity(folder: &Path) -> String {
    crate::mounts::mount_at(folder)
        .filter(crate::mounts::MountEntry::is_ckpt)
        .map_or_else(
            || folder.display().to_string(),
            |m| format!("dev {}", m.dev),
        )
}

/// The project the agent runs in: the directory it tells its hooks (`CLAUDE_PROJECT_DIR`,
/// `GEMINI_PROJECT_DIR`), else the working directory of the payload.
fn project_dir(agent: HookAgent, cwd: &Path) -> PathBuf {
    let var = match agent {
        HookAgent::ClaudeCode => Some("CLAUDE_PROJECT_DIR"),
        HookAgent::Gemini => Some("GEMINI_PROJECT_DIR"),
        HookAgent::Codex | HookAgent::CodexNotify => None,
    };
    var.and_then(std::env::var_os)
        .filter(|v| !v.is_empty())
        .map_or_else(|| cwd.to_path_buf(), PathBuf::from)
}

/// The directories the agent's settings give it besides its project, resolved: `~` is the
/// home, a relative path is relative to the project. A file missing or unreadable gives none.
fn agent_dirs(agent: HookAgent, project: &Path) -> Vec<PathBuf> {
    let home = env_dir("HOME");
    let mut raw: Vec<String> = Vec::new();
    match agent {
        HookAgent::ClaudeCode => {
            let user =
                env_dir("CLAUDE_CONFIG_DIR").or_else(|| home.as_ref().map(|h| h.join(".claude")));
            let files = user.map(|u| u.join("settings.json")).into_iter().chain([
                project.join(".claude/settings.json"),
                project.join(".claude/settings.local.json"),
            ]);
            for f in files {
                raw.extend(json_strings(&f, &["permissions", "additionalDirectories"]));
            }
        }
        HookAgent::Gemini => {
            let user = env_dir("GEMINI_CLI_HOME").or_else(|| home.clone());
            let files = user.map(|u| u.join(".gemini/settings.json")).into_iter();
            for f in files.chain([project.join(".gemini/settings.json")]) {
                raw.extend(json_strings(&f, &["context", "includeDirectories"]));
                // The same list at the top level, where older Gemini CLI settings keep it.
                raw.extend(json_strings(&f, &["includeDirectories"]));
            }
        }
        HookAgent::Codex | HookAgent::CodexNotify => {
            let user = env_dir("CODEX_HOME").or_else(|| home.as_ref().map(|h| h.join(".codex")));
            let files = user.map(|u| u.join("config.toml")).into_iter();
            for f in files.chain([project.join(".codex/config.toml")]) {
                raw.extend(super::toml_roots::writable_roots(&f));
            }
        }
    }
    raw.iter()
        .filter(|r| !r.trim().is_empty())
        .map(|r| resolve(r, home.as_deref(), project))
        .collect()
}

/// A variable naming a directory, when set and not empty.
fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A directory as a setting names it: `~` and `~/…` under the home, a relative path under the
/// project.
fn resolve(raw: &str, home: Option<&Path>, project: &Path) -> PathBuf {
    if let Some(h) = home {
        if raw == "~" {
            return h.to_path_buf();
        }
        if let Some(rest) = raw.strip_prefix("~/") {
            return h.join(rest);
        }
    }
    project.join(raw)
}

/// The strings of the array at `keys` in a settings file (JSON, or JSON with comments, which
/// Gemini CLI allows); none when the file is missing, unreadable or of another shape.
fn json_strings(file: &Path, keys: &[&str]) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let Ok(doc) = super::jsonc::Commented::parse(file, &text) else {
        return Vec::new();
    };
    let root = doc.value();
    let mut at = Some(&root);
    for k in keys {
        at = at.and_then(|v| v.get(k));
    }
    match at {
        Some(Json::Array(items)) => items
            .iter()
            .filter_map(|i| match i {
                Json::String(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_names_a_folder_under_the_home_or_the_project() {
        let (home, project) = (Path::new("/h"), Path::new("/p"));
        assert_eq!(resolve("~", Some(home), project), PathBuf::from("/h"));
        assert_eq!(
            resolve("~/lib", Some(home), project),
            PathBuf::from("/h/lib")
        );
        assert_eq!(
            resolve("../lib", Some(home), project),
            PathBuf::from("/p/../lib")
        );
        assert_eq!(resolve("/abs", Some(home), project), PathBuf::from("/abs"));
        assert_eq!(resolve("~x", Some(home), project), PathBuf::from("/p/~x"));
    }

    #[test]
    fn the_settings_arrays_are_read_with_comments_and_of_any_shape() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("settings.json");
        std::fs::write(
            &f,
            "{\n  // mine\n  \"context\": {\"includeDirectories\": [\"../a\", 3, \"~/b\"]},\n}\n",
        )
        .expect("write");
        assert_eq!(
            json_strings(&f, &["context", "includeDirectories"]),
            vec!["../a".to_string(), "~/b".to_string()]
        );
        assert!(json_strings(&f, &["permissions", "additionalDirectories"]).is_empty());
        std::fs::write(&f, "{\"permissions\": {\"additionalDirectories\": \"x\"}}").expect("w");
        assert!(json_strings(&f, &["permissions", "additionalDirectories"]).is_empty());
        assert!(json_strings(&dir.path().join("none"), &["a"]).is_empty());
    }
}
