//! The `ckpt-mount` binary: parse, dispatch, print one line on failure.

use clap::Parser;

fn main() {
    let cli = ckpt_mount::cli::Cli::parse();
    if let Err(e) = ckpt_mount::cli::run(cli) {
        eprintln!("ckpt-mount: {}", e.message);
        std::process::exit(e.code);
    }
}
