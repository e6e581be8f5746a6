//! The `mekara` binary: parse the command line and hand it to the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    mekara::run(std::env::args_os())
}
