//! The `ckpt-mount` binary: parse, dispatch, print one line on failure.

use clap::Parser;

fn main() {
    let cli = ckpt_mount::cli::Cli::parse();
    // A command's output may go to `head`; the daemon (`mount`, `run`) must outlive a client.
    if !matches!(
        cli.command,
        ckpt_mount::cli::Command::Mount(_) | ckpt_mount::cli::Command::Run(_)
    ) {
        ckpt_mount::sys::default_sigpipe();
    }
    if let Err(e) = ckpt_mount::cli::run(cli) {
        // `run` passes its command's exit code through with no message of its own.
        if !e.message.is_empty() {
            eprintln!("ckpt-mount: {}", e.message);
        }
        std::process::exit(e.code);
    }
}
