//! The `landfall` binary: argument parsing and wiring only; the work is in the libraries.

/// `println!` for every module of this crate (defined before them, it shadows std's): std's
/// panics when standard output is a closed pipe (`landfall streams | head -1`); this one ends
/// the process quietly, as `ls` and `git` do (out.rs).
macro_rules! println {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` for every module of this crate: std's panics when standard error is a closed
/// pipe (`landfall check ... 2>&1 | head -1`); a message nobody can read is dropped instead.
macro_rules! eprintln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod admin;
mod bars;
mod cli;
mod daemon;
mod http;
mod maintenance;
mod memory;
mod notify;
mod out;
mod report;
mod rows;
mod top;

fn main() -> std::process::ExitCode {
    cli::main()
}
