//! The `landfall` binary: argument parsing and wiring only; the work is in the libraries.

mod admin;
mod bars;
mod cli;
mod daemon;
mod memory;
mod notify;
mod report;

fn main() -> std::process::ExitCode {
    cli::main()
}
