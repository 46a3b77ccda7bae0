//! Shell completions and the man page, generated from the clap definitions.

use super::{Cli, CliError, CliResult};
use clap::{Args, CommandFactory};

/// `ckpt-mount completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell
    pub shell: clap_complete::Shell,
}

/// Prints completions.
pub fn completions(a: CompletionsArgs) -> CliResult {
    let mut cmd = Cli::command();
    // Rendered into memory first: clap_complete panics on a write error such as a closed pipe.
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "ckpt-mount", &mut buf);
    write_out(&buf)
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

/// Prints the man page of the main command and each subcommand.
pub fn man() -> CliResult {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| CliError::fail(e.to_string()))?;
    for sub in cmd.get_subcommands() {
        // Leaked once per subcommand for the life of this short command: clap wants 'static.
        let name: &'static str =
            Box::leak(format!("ckpt-mount-{}", sub.get_name()).into_boxed_str());
        let page = sub.clone().name(name);
        clap_mangen::Man::new(page)
            .render(&mut out)
            .map_err(|e| CliError::fail(e.to_string()))?;
    }
    write_out(&out)
}
