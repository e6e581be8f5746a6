//! The `mekara` binary: parse the command line and hand it to the library.

use std::process::ExitCode;

/// Counts what a Starlark evaluation allocates, so a script cannot take the machine's memory.
#[global_allocator]
static ALLOCATOR: mekara::Allocator = mekara::Allocator;

fn main() -> ExitCode {
    mekara::run(std::env::args_os())
}
