//! Shell completions and the man pages, generated from the clap definitions; the man pages add
//! the concepts no option list says (turns, control files, the store, exit status, environment).

use super::{Cli, CliError, CliResult};
use clap::{Args, CommandFactory};
use clap_mangen::roff::{Roff, bold, roman};
use std::path::PathBuf;

/// The command name, as users type it and as the completion scripts register it.
const BIN: &str = "ckpt-mount";

/// The version the pages name.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `ckpt-mount completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell
    pub shell: clap_complete::Shell,
}

/// `ckpt-mount man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command into this directory (ckpt-mount.1, ckpt-mount-rewind.1 and so on)
    /// instead of printing them all
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Prints completions.
pub fn completions(a: CompletionsArgs) -> CliResult {
    write_out(completion_script(a.shell).as_bytes())
}

/// The completion script for `shell`.
pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut cmd = Cli::command();
    // Rendered into memory first: clap_complete panics on a write error such as a closed pipe.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut buf);
    let script = String::from_utf8_lossy(&buf).into_owned();
    let hidden = hidden_subcommands();
    match shell {
        clap_complete::Shell::Bash => {
            bash_with_moments(&unlist_bash(&repair_bash_states(&script, BIN), &hidden))
        }
        clap_complete::Shell::Zsh => zsh_with_moments(&repair_zsh_rest_arguments(&script)),
        clap_complete::Shell::Fish => {
            unlist_fish(&script, &hidden) + &fish_positional_values(&Cli::command()) + FISH_MOMENTS
        }
        _ => script,
    }
}

/// The names of the hidden subcommands (`hook`, `__complete`): run by programs, never typed.
fn hidden_subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect()
}

/// clap_complete's bash script offers hidden subcommands among the others (4.6.12): this takes
/// `hidden` out of every list of words it offers (`opts="…"`).
fn unlist_bash(script: &str, hidden: &[String]) -> String {
    script
        .split_inclusive('\n')
        .map(|line| match line.split_once("opts=\"") {
            Some((head, rest)) => {
                let (words, tail) = rest.split_once('"').unwrap_or((rest, ""));
                let kept: Vec<&str> = words
                    .split(' ')
                    .filter(|w| !hidden.iter().any(|h| h == w))
                    .collect();
                format!("{head}opts=\"{}\"{tail}", kept.join(" "))
            }
            None => line.to_string(),
        })
        .collect()
}

/// clap_complete's fish script offers hidden subcommands too (4.6.12): this drops the lines
/// that offer one of `hidden` by name.
fn unlist_fish(script: &str, hidden: &[String]) -> String {
    script
        .split_inclusive('\n')
        .filter(|line| {
            !hidden
                .iter()
                .any(|h| line.contains(&format!(" -a \"{h}\" ")))
        })
        .collect()
}

/// The bash script, its completion function wrapped by [`BASH_MOMENTS`]: the wrapper asks
/// `ckpt-mount __complete` first, and hands every word that is not a moment to clap's function.
fn bash_with_moments(script: &str) -> String {
    let clap_fn = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("complete -F "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("_ckpt__mount")
        .to_string();
    let wrapper = format!("{clap_fn}__moments");
    let registered = script.replace(
        &format!("complete -F {clap_fn} "),
        &format!("complete -F {wrapper} "),
    );
    registered
        + &BASH_MOMENTS
            .replace("WRAPPER", &wrapper)
            .replace("CLAP_FN", &clap_fn)
}

/// What bash runs at a TAB (the words `WRAPPER` and `CLAP_FN` replaced by the functions'
/// names). The line up to the cursor goes as it was typed, not `COMP_WORDS`, which bash splits
/// at `:` and `=` too (`COMP_POINT` counts characters, as `${s:0:n}` does: tried with `é`).
const BASH_MOMENTS: &str = r#"
# Moments (turn numbers, /labels) where a command takes one: `ckpt-mount __complete` says
# whether the word under the cursor is one (its exit status) and prints the candidates, quoted;
# any other word goes to the completion above.
WRAPPER() {
    local bin=${COMP_WORDS[0]} out
    [[ $bin == */* && -x $bin ]] || bin=ckpt-mount
    COMPREPLY=()
    if ! out=$(command "$bin" __complete bash --word "$2" -- "${COMP_LINE:0:COMP_POINT}" 2>/dev/null); then
        CLAP_FN "$@"
        return
    fi
    # No file names in place of turns, when there are none.
    compopt +o default +o bashdefault 2>/dev/null
    [[ -n $out ]] && mapfile -t COMPREPLY <<<"$out"
    return 0
}
"#;

/// The zsh script with clap's function renamed `_ckpt-mount_clap` and [`ZSH_MOMENTS`] as
/// `_ckpt-mount` in its place, which asks `ckpt-mount __complete` first.
fn zsh_with_moments(script: &str) -> String {
    const CALL: &str = "if [ \"$funcstack[1]\" = \"_ckpt-mount\" ]; then";
    let renamed = script.replacen("\n_ckpt-mount() {\n", "\n_ckpt-mount_clap() {\n", 1);
    match renamed.find(CALL) {
        Some(at) => format!("{}{ZSH_MOMENTS}\n{}", &renamed[..at], &renamed[at..]),
        // A script of another shape keeps clap's completion alone.
        None => script.to_string(),
    }
}

/// What zsh runs at a TAB: the words go unquoted, the one under the cursor up to the cursor;
/// the candidates come back as `value<TAB>description` and are added with `compadd`, which
/// quotes each for the line.
const ZSH_MOMENTS: &str = r#"# Moments (turn numbers, /labels) where a command takes one: `ckpt-mount __complete` says
# whether the word under the cursor is one (its exit status) and prints the candidates; any
# other word goes to clap's completion, _ckpt-mount_clap.
_ckpt-mount() {
    local bin=${words[1]} out line expl
    local -a vals descs
    [[ $bin == */* && -x $bin ]] || bin=ckpt-mount
    if out=$(command $bin __complete zsh -- "${(@Q)words[2,CURRENT-1]}" "${(Q)PREFIX}" 2>/dev/null); then
        for line in "${(@f)out}"; do
            [[ -n $line ]] || continue
            vals+=("${line%%$'\t'*}")
            if [[ -n ${line#*$'\t'} ]]; then
                descs+=("${line%%$'\t'*}  -- ${line#*$'\t'}")
            else
                descs+=("${line%%$'\t'*}")
            fi
        done
        _description -V moments expl 'turn'
        compadd "${expl[@]}" -l -d descs -a vals
        return
    fi
    _ckpt-mount_clap "$@"
}
"#;

/// What fish runs at a TAB: the condition asks `ckpt-mount __complete` whether the word under
/// the cursor is a moment (its exit status), and the same call prints the candidates as
/// `value<TAB>description`, in `log`'s order (`-k`).
const FISH_MOMENTS: &str = r#"# Moments (turn numbers, /labels) where a command takes one.
function __fish_ckpt_mount_moments
    set -l words (commandline -opc)
    set -l current (commandline -ct | string trim -l -c "'\"")
    set -l bin $words[1]
    string match -q -- '*/*' $bin; and test -x $bin; or set bin ckpt-mount
    command $bin __complete fish -- $words[2..-1] "$current" 2>/dev/null
end
complete -c ckpt-mount -n '__fish_ckpt_mount_moments >/dev/null' -f -k -a '(__fish_ckpt_mount_moments)'
"#;

/// clap_complete's bash script (4.6.12; clap issue #6421) spells the state of a subcommand two
/// ways when the command name has a hyphen: its loop over the words sets
/// `ckpt__mount__subcmd__rewind`, while the case arm that lists rewind's options is labelled
/// `ckpt__subcmd__mount__subcmd__rewind` (the hyphen escaped as a subcommand separator), so no
/// arm matched and no option of any subcommand completed. This relabels those arms the way
/// the loop spells them; a script without the fault is returned unchanged.
pub fn repair_bash_states(script: &str, bin: &str) -> String {
    const SEP: &str = "__subcmd__";
    let wrong = format!("{}{SEP}", bin.replace('-', SEP));
    let right = format!("{}{SEP}", bin.replace('-', "__"));
    if wrong == right {
        return script.to_string();
    }
    script
        .split_inclusive('\n')
        .map(|line| {
            let label = line.trim();
            if label.starts_with(&wrong) && label.ends_with(')') {
                line.replacen(&wrong, &right, 1)
            } else {
                line.to_string()
            }
        })
        .collect()
}

/// clap_complete's zsh script (4.6.12) describes a subcommand's multi-valued positional (the
/// paths of `rewind` and `diff`, the command of `run`) as `'*::NAME -- HELP:ACTION'`. To zsh's
/// `_arguments` the double colon means "restrict the words to the normal arguments", and with it
/// zsh 5.9 offers no option once a positional is on the line: `rewind 2 --d` and `diff 2 --s`
/// completed nothing (clap issue #6282 reports the same family). A single colon describes the
/// same rest arguments and keeps the options. Only lines that start such a spec change (the
/// top-level `"*::: :->ckpt-mount"` dispatch is in double quotes and stays).
pub fn repair_zsh_rest_arguments(script: &str) -> String {
    script
        .split_inclusive('\n')
        .map(|line| match line.strip_prefix("'*::") {
            Some(rest) => format!("'*:{rest}"),
            None => line.to_string(),
        })
        .collect()
}

/// clap_complete's fish script completes options only, no positional values (its documented
/// limit): `ckpt-mount completions ba` offered nothing. These lines complete the possible
/// values of every positional of every subcommand, nested ones too.
fn fish_positional_values(cmd: &clap::Command) -> String {
    fn walk(cmd: &clap::Command, seen: &mut Vec<String>, out: &mut String) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            seen.push(format!("__fish_seen_subcommand_from {}", sub.get_name()));
            for arg in sub.get_positionals().filter(|a| !a.is_hide_set()) {
                let values: Vec<String> = arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| v.get_name().to_string())
                    .collect();
                if !values.is_empty() {
                    out.push_str(&format!(
                        "complete -c {BIN} -n \"{}\" -f -a \"{}\"\n",
                        seen.join("; and "),
                        values.join(" ")
                    ));
                }
            }
            walk(sub, seen, out);
            seen.pop();
        }
    }
    let mut out = String::new();
    walk(cmd, &mut Vec::new(), &mut out);
    if out.is_empty() {
        return out;
    }
    format!(
        "# Values of positional arguments (clap_complete's own lines complete options only).\n{out}"
    )
}

fn write_out(bytes: &[u8]) -> CliResult {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => Ok(()),
        // `| head` closing the pipe is not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::fail(format!("cannot write: {e}"))),
    }
}

/// Prints the man pages (the main one, then one per subcommand), or writes them into a
/// directory.
pub fn man(a: ManArgs) -> CliResult {
    let pages = man_pages().map_err(|e| CliError::fail(format!("cannot render: {e}")))?;
    match a.out_dir {
        None => write_out(
            &pages
                .iter()
                .flat_map(|(_, page)| page.bytes())
                .collect::<Vec<u8>>(),
        ),
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| CliError::fail(format!("cannot create {}: {e}", dir.display())))?;
            for (name, page) in &pages {
                let path = dir.join(name);
                std::fs::write(&path, page)
                    .map_err(|e| CliError::fail(format!("cannot write {}: {e}", path.display())))?;
            }
            println!("wrote {} man pages to {}", pages.len(), dir.display());
            Ok(())
        }
    }
}

/// Every man page as (file name, roff source): `ckpt-mount.1` with the concepts, then one page
/// per subcommand (nested ones too), each with its examples.
pub fn man_pages() -> std::io::Result<Vec<(String, String)>> {
    let mut root = Cli::command().disable_help_subcommand(true);
    // Built once here so every subcommand knows its full name (`ckpt-mount rewind`).
    root.build();
    let mut pages = vec![(format!("{BIN}.1"), main_page(&root)?)];
    add_sub_pages(&root, &mut pages)?;
    Ok(pages)
}

/// The pages of `parent`'s subcommands and theirs, in the order the help lists them.
fn add_sub_pages(parent: &clap::Command, pages: &mut Vec<(String, String)>) -> std::io::Result<()> {
    for sub in parent.get_subcommands().filter(|s| !s.is_hide_set()) {
        let full = sub.get_bin_name().unwrap_or(sub.get_name());
        let page_name = full.replace(' ', "-");
        let page = sub_page(sub.clone().display_name(page_name.clone()))?;
        pages.push((format!("{page_name}.1"), page));
        add_sub_pages(sub, pages)?;
    }
    Ok(())
}

/// Roff rendered by clap_mangen or by us, each piece starting with the same two-line preamble
/// (it defines the apostrophe string); kept once per page.
struct Page(String);

impl Page {
    fn add(
        &mut self,
        render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut buf = Vec::new();
        render(&mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        let preamble = Roff::new().render();
        match text.strip_prefix(preamble.as_str()) {
            Some(body) if !self.0.is_empty() => self.0.push_str(body),
            _ => self.0.push_str(&text),
        }
        Ok(())
    }

    fn add_roff(&mut self, roff: &Roff) -> std::io::Result<()> {
        self.add(|w| roff.to_writer(w))
    }
}

fn main_page(root: &clap::Command) -> std::io::Result<String> {
    let man = clap_mangen::Man::new(root.clone());
    let mut page = Page(String::new());
    page.add(|w| man.render_title(w))?;
    page.add(|w| man.render_name_section(w))?;
    page.add(|w| man.render_synopsis_section(w))?;
    page.add_roff(&sections(&[DESCRIPTION]))?;
    page.add(|w| man.render_options_section(w))?;
    page.add(|w| man.render_subcommands_section(w))?;
    page.add_roff(&sections(CONCEPTS))?;
    page.add_roff(&examples_section(
        MAIN_EXAMPLES.iter().map(|l| l.to_string()),
    ))?;
    page.add_roff(&see_also())?;
    page.add(|w| man.render_version_section(w))?;
    Ok(page.0)
}

/// The page of one subcommand: its description without the `Example:` lines, which get an
/// EXAMPLES section of their own (a man page fills consecutive lines into one paragraph).
fn sub_page(cmd: clap::Command) -> std::io::Result<String> {
    let long = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(ToString::to_string)
        .unwrap_or_default();
    let (examples, text): (Vec<&str>, Vec<&str>) = long
        .lines()
        .partition(|l| l.trim_start().starts_with("Example:"));
    let description = text.join("\n").trim_end().to_string();
    let examples: Vec<String> = examples
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix("Example:"))
        .map(|l| l.trim().to_string())
        .collect();
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subs = cmd.has_subcommands();
    let man = clap_mangen::Man::new(cmd.long_about(description)).source(format!("{BIN} {VERSION}"));
    let mut page = Page(String::new());
    page.add(|w| man.render_title(w))?;
    page.add(|w| man.render_name_section(w))?;
    page.add(|w| man.render_synopsis_section(w))?;
    page.add(|w| man.render_description_section(w))?;
    if has_args {
        page.add(|w| man.render_options_section(w))?;
    }
    if has_subs {
        page.add(|w| man.render_subcommands_section(w))?;
    }
    if !examples.is_empty() {
        page.add_roff(&examples_section(examples.into_iter()))?;
    }
    let mut tail = Roff::new();
    tail.control("SH", ["EXIT STATUS"]);
    text_line(&mut tail, SUB_EXIT_STATUS);
    tail.control("SH", ["SEE ALSO"]);
    text_line(
        &mut tail,
        &format!("`{BIN}`(1), the main page: turns, control files, the store, environment."),
    );
    // clap_mangen's own version section needs a version on the subcommand itself.
    tail.control("SH", ["VERSION"]);
    text_line(&mut tail, &format!("v{VERSION}"));
    page.add_roff(&tail)?;
    Ok(page.0)
}

fn examples_section(lines: impl Iterator<Item = String>) -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["EXAMPLES"]);
    r.control("PP", []);
    r.control("RS", ["4"]);
    r.control("nf", []);
    for line in lines {
        r.text([roman(line)]);
    }
    r.control("fi", []);
    r.control("RE", []);
    r
}

fn see_also() -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["SEE ALSO"]);
    text_line(
        &mut r,
        "The page of each subcommand (listed under SUBCOMMANDS), `fusermount3`(1), `fuse`(4), `git`(1).",
    );
    text_line(&mut r, SEE_ALSO_DOCS);
    r
}

/// A block of a section's text. In the strings, `` `x` `` is set in bold (commands, file
/// names, values to type).
enum Block {
    /// A paragraph.
    Para(&'static str),
    /// A tagged paragraph: a term, then its description indented.
    Item(&'static str, &'static str),
}

/// A section of the main page.
struct Section {
    title: &'static str,
    blocks: &'static [Block],
}

fn sections(list: &[Section]) -> Roff {
    let mut r = Roff::new();
    for s in list {
        r.control("SH", [s.title]);
        for b in s.blocks {
            match b {
                Block::Para(text) => {
                    r.control("PP", []);
                    text_line(&mut r, text);
                }
                Block::Item(term, text) => {
                    r.control("TP", []);
                    text_line(&mut r, term);
                    text_line(&mut r, text);
                }
            }
        }
    }
    r
}

/// One text line, with `` `x` `` in bold.
fn text_line(r: &mut Roff, text: &str) {
    let inlines = text
        .split('`')
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| if i % 2 == 1 { bold(s) } else { roman(s) })
        .collect::<Vec<_>>();
    r.text(inlines);
}

const DESCRIPTION: Section = Section {
    title: "DESCRIPTION",
    blocks: &[
        Block::Para(
            "`ckpt-mount` mounts a FUSE passthrough filesystem over a project folder, over the folder itself, so that every process working inside goes through its daemon. Before the first change of any path in the current turn it records what the path was, whichever program made the change: an agent's own write tool or its shell (`rm`, `sed -i`, `mv`, `npm install`, `git checkout`).",
        ),
        Block::Para(
            "`ckpt-mount rewind N` then puts the folder back exactly as it was when turn N began: contents, types, permission bits, symlink targets, empty directories, hard links, extended attributes, uncommitted and git-ignored files and `.git` itself. Files that no turn from N on touched are not rewritten. The folder changes at once in the mounted view.",
        ),
        Block::Para(
            "`ckpt-mount run -- CMD` mounts the folder (the current directory by default), runs CMD inside it and unmounts when CMD exits. `ckpt-mount mount DIR` and `ckpt-mount unmount DIR` do the two halves separately. Every subcommand has a page of its own, listed below.",
        ),
    ],
};

const CONCEPTS: &[Section] = &[
    Section {
        title: "TURNS",
        blocks: &[
            Block::Para(
                "A turn is a numbered span of work, typically one prompt to an agent and everything done in answer to it. Turn 1 is current after the first mount; a remount continues the numbering from the store.",
            ),
            Block::Para(
                "Before the first change of a path in the current turn (a write, truncation, creation, removal, rename, chmod, chown or extended-attribute change, by any process) its pre-image is stored: the file's bytes and mode, a directory and its mode, a symlink's target, or the fact that the path did not exist. Later changes of the same path in the same turn store nothing more. A file bigger than the mount's `--max-blob` (default 1G) is recorded as skipped, and a rewind reports it as not restored.",
            ),
            Block::Para("A new turn begins when"),
            Block::Item(
                "`echo N > .ckpt/turn`",
                "a process writes the number to the control file inside the mounted folder (any program that can write a file can mark turns);",
            ),
            Block::Item(
                "`ckpt-mount turn N -m LABEL`",
                "the same from the command line, with a label that `ckpt-mount log` shows;",
            ),
            Block::Item(
                "an agent's hook",
                "an agent's own hook runs one of the above at each prompt, labelled with the prompt (see the README's integrations). An agent that works across several mounted folders (its additional directories, or those `hooks install --also` names) gets the prompt's turn in each of them, under one prompt id: `ckpt-mount rewind N --all-folders` takes all of them back to the start of that prompt after one question, `ckpt-mount undo --all-folders` undoes that rewind in each, and `ckpt-mount redo --all-folders` redoes it.",
            ),
            Block::Para(
                "N must be greater than the current turn (numbers may be skipped) and at most 4294967295 (2^32-1, which leaves room for a turn a second for 136 years); asking for the current number again changes nothing. After `ckpt-mount rewind N`, turn N is current again with nothing captured in it yet, and the turns after it leave the history; `ckpt-mount rewind --undo` brings back the state from just before the last rewind.",
            ),
        ],
    },
    Section {
        title: "MOMENTS",
        blocks: &[
            Block::Para(
                "Every command that takes a turn (`rewind`, `diff`, `show`, `cat`, `restore`, and a write to `.ckpt/rewind`) takes it in one grammar:",
            ),
            Block::Item(
                "`N`",
                "turn N. For reading, a turn a rewind retired is named by its number too when no live turn has it and one rewind retired it;",
            ),
            Block::Item(
                "`N.S`",
                "step S of turn N: a tool call an agent's hook marked within the prompt's turn (`hooks install --steps`), or `ckpt-mount turn --step`. A rewind to it returns the folder to just before that call; `N.S#K` names a step a rewind retired;",
            ),
            Block::Item(
                "`N#K`",
                "turn N as rewind #K retired it: `log` lists it as `N  rewound #K`. `diff`, `show`, `cat` and `restore` read it without an undo (a rewind goes to live turns only; `undo` brings a retired one back);",
            ),
            Block::Item(
                "`-K`",
                "K turns before the current one: `-1` is the previous turn (steps are not counted);",
            ),
            Block::Item(
                "`@TIME`",
                "the turn (or step) current at TIME, in local time: `@10:42`, `@10:42:05` (today), `@\"2026-12-04 10:42\"`, `@2026-12-04T10:42`, `@2026-12-04` (midnight);",
            ),
            Block::Item(
                "`/TEXT`",
                "the newest turn or step whose label (an agent's prompt, or a step's tool call) contains TEXT, case ignored: `/fix the build`, `/npm install`.",
            ),
            Block::Para(
                "`diff` takes a span `FROM..TO` of two of them. A spec that names no turn, or names several (`N` rewound by two rewinds), is a usage error (exit 2) that names what there is. `rewind --json` reports the spec as given (`spec`) and the turn it resolved to (`to`).",
            ),
        ],
    },
    Section {
        title: "CONTROL FILES",
        blocks: &[
            Block::Para(
                "In the mounted view `.ckpt/` is a virtual directory holding three files and nothing else. The kernel never caches them, so a read is never stale; they cannot be removed, renamed or chmod-ed, and creating anything else there fails with EPERM (Operation not permitted).",
            ),
            Block::Item(
                "`.ckpt/turn`",
                "Read: the current turn and a newline. Write `N` or `N label` to begin turn N (with an optional label). N must be greater than the current turn and at most 4294967295, and writing the current number is a no-op; anything else fails with EINVAL (Invalid argument) and changes nothing.",
            ),
            Block::Item(
                "`.ckpt/rewind`",
                "Write `N` to rewind the folder to the start of turn N, or `undo` to undo the last rewind; the write returns when the rewind is done, and fails with EIO if some path could not be restored. Read: the report of the last rewind as JSON (the paths restored, deleted and failed, with reasons).",
            ),
            Block::Item(
                "`.ckpt/.gitignore`",
                "Holds `*`, so `git status` in the folder never shows `.ckpt/` (the store keeps a real one, so neither does an unmounted folder).",
            ),
            Block::Para(
                "The control files exist only in the mounted view. A shell whose working directory was inside the folder before the mount still stands in the underlying folder, where nothing it does is captured; there `.ckpt/turn` and `.ckpt/rewind` are empty directories, so `echo N > .ckpt/turn` fails with \"Is a directory\" instead of writing into the store. `cd \"$PWD\"` enters the mounted view.",
            ),
        ],
    },
    Section {
        title: "THE STORE",
        blocks: &[
            Block::Para(
                "The history lives in `.ckpt/` inside the folder on the underlying filesystem, beside the files it protects, and is hidden from the mounted view (where `.ckpt/` holds only the control files). Its files are the user's, mode 0600, in directories of mode 0700. A folder keeps its store when unmounted and the next mount continues from it; `rewind`, `diff`, `log`, `status`, `prune` and `fsck` also work on an unmounted folder (after a crash, say: `ckpt-mount rewind N --dir DIR`).",
            ),
            Block::Item(
                "`journal.jsonl`",
                "the append-only journal: one JSON record per turn, capture and rewind.",
            ),
            Block::Item(
                "`blobs/`",
                "the pre-images' bytes, named by their SHA-256 (identical bytes are stored once); small ones are appended to packs in `blobs/packs/`. Mounting with `--compress` stores new ones zstd-compressed.",
            ),
            Block::Item(
                "`staged/`",
                "removed files moved aside by their removal, until their bytes are in `blobs/`.",
            ),
            Block::Item(
                "`daemon.log`",
                "the background daemon's log (see `RUST_LOG` below).",
            ),
            Block::Item(
                "`VERSION`, `lock`, `turn/`, `rewind/`, `.gitignore`",
                "the format version, the one-writer lock, the two guards described under CONTROL FILES, and a `*` for git.",
            ),
            Block::Item(
                "`attic/`",
                "old stores set aside by `ckpt-mount fsck --start-over`, one folder each, named by the time (UTC); never read or pruned.",
            ),
            Block::Para(
                "A store is never silently reset: when `.ckpt` or a file in it is a symlink (never followed), when blobs remain without their journal, or when `VERSION` is missing beside a history, every command, `mount` and `fsck` included, refuses the folder in one line that says what is there, and changes nothing. `ckpt-mount fsck --start-over` then moves the old store's files into `.ckpt/attic/`, deleting nothing, and begins a new history.",
            ),
            Block::Para(
                "The store grows with every turn: `ckpt-mount status` shows its size (and warns past 1 GiB or 10 % of the free space on its disk), `ckpt-mount prune --dry-run` says what a prune would forget and free, `ckpt-mount prune --keep-turns N` or `--max-size SIZE` forgets the oldest turns and the blobs only they used, and `ckpt-mount fsck` re-hashes every blob, checks every record and names orphans and stray files. Forgetting a turn forgets the undo and redo history too; a prune that forgets no turn keeps that history (`--drop-undo` forgets it) and removes only the blobs no record names. A prune that forgets anything shows what and asks first on a terminal, and is refused elsewhere without `--yes`. The format is described in docs/FORMAT.md in the source tree.",
            ),
        ],
    },
    Section {
        title: "EXIT STATUS",
        blocks: &[
            Block::Item("0", "Success."),
            Block::Item(
                "1",
                "A failure, reported in one line on standard error that begins with `ckpt-mount:`. A rewind that could not restore every path exits 1 after its report; `fsck` exits 1 when it finds an error; a question answered no (or Esc in the list `rewind` shows without a turn), and a prune that would forget something run off a terminal without `--yes`, exit 1 having changed nothing.",
            ),
            Block::Item(
                "2",
                "Bad usage: an unknown option, a missing argument, turn 0, `prune --keep-turns 0`.",
            ),
            Block::Item(
                "130",
                "Ctrl-C twice during a rewind, undo or redo: the command stopped waiting, and the daemon runs the operation to its end (`ckpt-mount undo` takes a rewind back). The first Ctrl-C only says so and waits on. Also Ctrl-C in the list `rewind` shows without a turn, having changed nothing.",
            ),
            Block::Para(
                "`ckpt-mount run` exits with its command's status instead: 128 + N when the command was killed by signal N, 127 when it could not be started.",
            ),
        ],
    },
    Section {
        title: "ENVIRONMENT",
        blocks: &[
            Block::Item(
                "`RUST_LOG`",
                "What the daemon logs (to `.ckpt/daemon.log`, or to standard error with `mount --foreground`): `error`, `warn`, `info` (the default), `debug` or `trace`, or per-module filters such as `ckpt_mount::rewind=debug`. Read when the daemon starts.",
            ),
            Block::Item(
                "`RUST_LOG_STYLE`",
                "Colours in the daemon's log: `auto` (the default), `always` or `never`.",
            ),
            Block::Item(
                "`HOME`",
                "`mount` and `run` refuse to mount the home directory itself; `hooks install` writes the agents' settings below it unless `--project` is given.",
            ),
            Block::Item(
                "`PATH`",
                "Where `run` looks for its command (it refuses, mounting nothing, when the command is not found) and where `fusermount3` is looked for.",
            ),
            Block::Item(
                "`FUSERMOUNT_PATH`",
                "The `fusermount3` (or `fusermount`) program a normal user mounts and unmounts with, instead of the first one on `PATH` or in `/usr/bin`, `/bin`, `/usr/sbin`, `/sbin`.",
            ),
            Block::Item(
                "`NOTIFY_SOCKET`",
                "Set by systemd for a `Type=notify` unit: `mount --foreground` sends `READY=1` there once the mount answers.",
            ),
            Block::Item(
                "`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`",
                "Where `hooks install` finds the user settings of Claude Code (default `~/.claude`), Codex (default `~/.codex`) and Gemini CLI (default `~`, settings in `.gemini/`), as those agents do themselves; the hook reads the agent's additional directories there too.",
            ),
            Block::Item(
                "`CLAUDE_PROJECT_DIR`, `GEMINI_PROJECT_DIR`",
                "The project whose settings (`.claude/settings.json`, `.claude/settings.local.json`, `.gemini/settings.json`) the hook reads the agent's additional directories from, set by the agent for its hooks; otherwise the payload's working directory.",
            ),
            Block::Item(
                "`COLUMNS`",
                "The width `log` fits its table to; otherwise the terminal's, or 100 columns when the output is not a terminal.",
            ),
            Block::Item(
                "`TZ`",
                "The time zone of the times `log` prints (otherwise the system's, `/etc/localtime`); `log --utc` prints UTC.",
            ),
            Block::Item(
                "`CKPT_FAILPOINT`",
                "Only in builds with the cargo feature `failpoints`, for the crash tests: `NAME` or `NAME:N` makes the process kill itself with SIGKILL the Nth time it reaches the named point. Ordinary builds ignore it.",
            ),
        ],
    },
    Section {
        title: "FILES",
        blocks: &[
            Block::Item(
                "`DIR/.ckpt/`",
                "The store of the folder DIR, on the underlying filesystem (see THE STORE).",
            ),
            Block::Item(
                "`DIR/.ckpt/daemon.log`",
                "The log of DIR's background daemon.",
            ),
            Block::Item(
                "`DIR/.ckpt/turn`, `DIR/.ckpt/rewind`, `DIR/.ckpt/.gitignore`",
                "The control files, in the mounted view (see CONTROL FILES).",
            ),
            Block::Item(
                "`/proc/self/mountinfo`",
                "Where commands find which folders ckpt-mount has mounted, and so which folder `--dir` defaults to.",
            ),
        ],
    },
];

/// A first session, as the main page shows it.
const MAIN_EXAMPLES: &[&str] = &[
    "ckpt-mount mount ~/src/site",
    "cd ~/src/site                   # enter the mounted view",
    "ckpt-mount turn 2 -m \"add a footer\"",
    "(an agent, or you, changes files)",
    "ckpt-mount diff 2 --stat        # what turn 2 changed so far",
    "ckpt-mount rewind 2 --dry-run   # what a rewind would do",
    "ckpt-mount rewind 2             # back to the start of turn 2",
    "cd ~ && ckpt-mount unmount ~/src/site",
];

const SUB_EXIT_STATUS: &str = "0 on success, 1 on a failure reported in one line on standard error, 2 on bad usage (see `ckpt-mount`(1)).";

const SEE_ALSO_DOCS: &str = "In the source tree: README.md, docs/SEMANTICS.md (what a rewind restores, exactly), docs/FORMAT.md (the store) and docs/ARCHITECTURE.md.";
