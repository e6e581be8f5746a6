//! Writing to stdout as Unix tools do. Every line a command prints goes through [`outln!`]
//! or [`out!`], which return the write's `io::Error` instead of panicking as `println!`
//! does. So a reader that goes away early (`mekara runs | head -3`) surfaces as an
//! `io::ErrorKind::BrokenPipe` error that [`closed`] recognises on its way up, and mekara
//! ends quietly with [`Exit::OutputClosed`](crate::exit::Exit::OutputClosed) (ripgrep does
//! the same). Rust ignores `SIGPIPE`, so the write fails instead of killing the process.

/// `writeln!` to stdout; evaluates to `std::io::Result<()>`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `write!` to stdout, then flush (a prompt must show before mekara waits for its answer);
/// evaluates to `std::io::Result<()>`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*).and_then(|()| stdout.flush())
    }};
}

pub(crate) use {out, outln};

/// Whether `e` is, or was caused by, a write to an output whose reader has gone.
pub(crate) fn closed(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
