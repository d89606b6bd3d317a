//! Standard output of the commands. A reader that goes away (`landfall state orders | head`)
//! closes the pipe; std's `println!` then panics ("failed printing to stdout: Broken pipe").
//! Here the command ends quietly instead, as `ls` and `git` do: no message, and the process
//! ends by SIGPIPE (the shell shows status 141; it counts as failure only under `pipefail`).
//! Any other write error (a full disk) is reported and the command fails.
//!
//! The crate's `println!` (main.rs) writes through [`line`]; commands that print many rows
//! write through [`stdout`] and return their `io::Result` to [`finish`], in the
//! [`OutputFormat`] asked for.

use std::io::{self, BufWriter, ErrorKind, StdoutLock, Write};
use std::process::ExitCode;

/// `--format`: `json` keeps types (numbers, booleans, null for an absent value).
#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
    Csv,
}

/// Buffered, locked standard output, for a command that prints many rows.
pub fn stdout() -> BufWriter<StdoutLock<'static>> {
    BufWriter::with_capacity(64 << 10, io::stdout().lock())
}

/// A command's exit code, or how its output failed.
pub fn finish(result: io::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => failed(e),
    }
}

/// One line to standard output (what the crate's `println!` expands to).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(e) = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
    {
        drop(out);
        failed(e);
        std::process::exit(1);
    }
}

/// End quietly on a closed pipe; report any other error (exit code 1).
fn failed(e: io::Error) -> ExitCode {
    if e.kind() == ErrorKind::BrokenPipe {
        closed_pipe();
    }
    eprintln!("error: cannot write the output: {e}");
    ExitCode::FAILURE
}

/// The reader went away: end as a process that did not ignore SIGPIPE would (Rust programs
/// ignore it, so writes fail with `BrokenPipe` instead).
fn closed_pipe() -> ! {
    #[cfg(unix)]
    // SAFETY: restoring the default action of a signal and raising it in this thread; the
    // default action ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}
