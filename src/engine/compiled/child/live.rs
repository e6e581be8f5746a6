//! An evaluator child process (`mekara __evaluate`) with its pipes: started in a process
//! group of its own, its stderr kept on a thread, killed and reaped when dropped.

use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::evaluator::SUBCOMMAND;

/// An evaluator child, with its pipes; killed and reaped when dropped.
pub(crate) struct Live {
    pub(super) process: Child,
    pub(super) to_child: Option<ChildStdin>,
    pub(super) from_child: Option<BufReader<ChildStdout>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Live {
    /// Starts `exe __evaluate`, in a process group of its own: a Ctrl-C at the terminal goes
    /// to the parent, which stops the step in flight and so the evaluation.
    pub(super) fn spawn(exe: &Path) -> std::io::Result<Live> {
        let mut command = Command::new(exe);
        command
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::engine::process::in_own_group(&mut command);
        let mut process = command.spawn()?;
        Ok(Live {
            to_child: process.stdin.take(),
            from_child: process.stdout.take().map(BufReader::new),
            stderr: process.stderr.take().map(keep_stderr),
            process,
        })
    }

    /// Closes its stdin and waits for it to end: how it ended, and what it said on stderr.
    pub(super) fn end(mut self) -> (std::io::Result<std::process::ExitStatus>, String) {
        drop(self.to_child.take());
        drop(self.from_child.take());
        let status = self.process.wait();
        let said = self
            .stderr
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        (status, said)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // A child that ended is reaped already, and `kill` then sends nothing.
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The most of the child's stderr that is kept.
const STDERR_KEPT: usize = 64 * 1024;

/// Reads the child's stderr to its end on a thread of its own, keeping its beginning.
fn keep_stderr(mut stderr: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let room = STDERR_KEPT.saturating_sub(kept.len());
            kept.extend_from_slice(&buffer[..n.min(room)]);
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}
