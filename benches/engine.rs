//! The engine's overhead figures (`engine/unix.rs` says which and how): they measure Unix
//! process groups, `getrusage` and `waitid`, so on Windows this bench only says so.

#[cfg(unix)]
mod common;

#[cfg(unix)]
#[path = "engine/unix.rs"]
mod unix;

fn main() {
    #[cfg(unix)]
    unix::main();
    #[cfg(not(unix))]
    eprintln!("the engine bench measures Unix process groups; it runs on Linux and macOS");
}
