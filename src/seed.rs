//! The seed scenario: a tiny site in git with uncommitted and ignored work, one agent turn done
//! with shell tools, and the four git recipes that people use instead of a real undo.
//! The demo prints the comparison; the tests assert it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the seed scenario could not be built or run.
#[derive(Debug)]
pub enum SeedError {
    /// `sh` could not be started.
    Spawn(std::io::Error),
    /// A script exited with an error.
    Script {
        /// The script.
        script: String,
        /// What it wrote to stderr, trimmed.
        stderr: String,
    },
    /// A file of the project could not be written.
    Write {
        /// Its name in the project.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A recipe's scratch directory could not be made.
    Scratch {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "cannot run sh: {e}"),
            Self::Script { script, stderr } => write!(f, "`{script}` failed: {stderr}"),
            Self::Write { name, source } => write!(f, "write {name}: {source}"),
            // The demo has always said only why: the directory is a temp one of its own.
            Self::Scratch { source, .. } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for SeedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) | Self::Write { source: e, .. } | Self::Scratch { source: e, .. } => {
                Some(e)
            }
            Self::Script { .. } => None,
        }
    }
}

/// Runs a shell script in `dir`; fails with its stderr.
pub fn sh(dir: &Path, script: &str) -> Result<String, SeedError> {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "seed")
        .env("GIT_AUTHOR_EMAIL", "seed@example.invalid")
        .env("GIT_COMMITTER_NAME", "seed")
        .env("GIT_COMMITTER_EMAIL", "seed@example.invalid")
        .output()
        .map_err(SeedError::Spawn)?;
    if !out.status.success() {
        return Err(SeedError::Script {
            script: script.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn styles(lines: usize, tag: &str) -> String {
    (0..lines)
        .map(|i| format!(".{tag}-{i} {{ margin: {i}px; }}\n"))
        .collect()
}

/// Builds the project as the user left it before turn 2: committed site, an ignored `.env`,
/// an uncommitted title change and an untracked `notes.md`.
pub fn build_project(dir: &Path) -> Result<(), SeedError> {
    let w = |name: &str, body: &str| {
        std::fs::write(dir.join(name), body).map_err(|source| SeedError::Write {
            name: name.to_string(),
            source,
        })
    };
    w(
        "index.html",
        "<!doctype html>\n<html>\n<head>\n<title>My Site</title>\n<link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body><h1>Hello</h1><script src=\"app.js\"></script></body>\n</html>\n",
    )?;
    w("styles.css", &styles(212, "site"))?;
    w(
        "app.js",
        "document.querySelector('h1').textContent = 'Hello, world';\n",
    )?;
    w(".gitignore", ".env\n")?;
    w(".env", "API_URL=https://api.example.com\nSECRET=hunter2\n")?;
    sh(dir, "git init -q . && git add -A && git commit -qm 'site'")?;
    sh(
        dir,
        "sed -i 's/<title>My Site</<title>My Portfolio</' index.html",
    )?;
    w("notes.md", "# notes\n- ask about the colour scheme\n")?;
    Ok(())
}

/// The agent's turn, all through the shell.
pub const AGENT_TURN: &str = r#"
awk 'NR<=41' styles.css | sed 's/site-/compact-/' > styles.css.new && mv styles.css.new styles.css
sed -i 's#<link rel="stylesheet" href="styles.css">#<link rel="stylesheet" href="styles.css"><link rel="stylesheet" href="theme.css">#' index.html
printf 'import { start } from "./start.js";\nstart();\n' > app.js
sed -i 's#^API_URL=.*#API_URL=http://localhost:3000#' .env
printf ':root { --accent: #f60; }\n' > theme.css
"#;

/// Every regular file below `dir` (not `.git`, not `.ckpt`) with its bytes.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(base.join(rel)) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if rel.is_empty() && (name == ".git" || name == ".ckpt") {
                continue;
            }
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(base, &path, out),
                Ok(t) if t.is_file() => {
                    if let Ok(b) = std::fs::read(base.join(&path)) {
                        out.insert(path, b);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

/// Names that differ between two snapshots (content, or present in only one).
pub fn differing(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut names: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| a.get(n) != b.get(n)).collect()
}

/// The git recipes, each as (name, script before the turn, script after it).
pub const RECIPES: [(&str, &str, &str); 4] = [
    ("git checkout -- .", "true", "git checkout -- ."),
    ("git stash -u", "true", "git stash -u -q"),
    (
        "git checkout -- . && git clean -fd",
        "true",
        "git checkout -- . && git clean -fdq",
    ),
    (
        "git stash create (before) + apply",
        "git stash create > ../stash.sha",
        "git checkout -- . && git stash apply -q $(cat ../stash.sha)",
    ),
];

/// Runs each recipe on a fresh copy in `scratch` and lists the files it gets wrong.
pub fn run_recipes(scratch: &Path) -> Result<Vec<(String, Vec<String>)>, SeedError> {
    let mut out = Vec::new();
    for (i, (name, before, after)) in RECIPES.iter().enumerate() {
        let dir = scratch.join(format!("recipe{i}/site"));
        std::fs::create_dir_all(&dir).map_err(|source| SeedError::Scratch {
            dir: dir.clone(),
            source,
        })?;
        build_project(&dir)?;
        let pre = snapshot(&dir);
        sh(&dir, before)?;
        sh(&dir, AGENT_TURN)?;
        sh(&dir, after)?;
        out.push((name.to_string(), differing(&pre, &snapshot(&dir))));
    }
    Ok(out)
}
