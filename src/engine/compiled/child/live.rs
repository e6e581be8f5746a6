//! An evaluator child process (`mekara __evaluate`) with its pipes: started in a process
//! group of its own, its stderr kept on a thread, killed and reaped when dropped.

use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::evaluator::SUBCOMMAND;
use crate::engine::compiled::Limits;
use crate::engine::process::EvaluatorLimit;

/// What an evaluator child may allocate besides its evaluation's memory cap: its own
/// start, and the job (the script, its helpers, the frame's journal) it reads and holds.
const EVALUATOR_OWN: usize = 256 * 1024 * 1024;

/// The memory the system lets an evaluator child commit where it can bound a process
/// (Windows, see [`EvaluatorLimit`]): the evaluation's cap and [`EVALUATOR_OWN`], 1.25 GiB by
/// default.
fn evaluator_memory(limits: &Limits) -> usize {
    limits.memory_cap().saturating_add(EVALUATOR_OWN)
}

/// An evaluator child, with its pipes; killed and reaped when dropped.
pub(crate) struct Live {
    pub(super) process: Child,
    /// Holds it to its memory and to this process's life (a Job Object on Windows).
    _limit: EvaluatorLimit,
    pub(super) to_child: Option<ChildStdin>,
    pub(super) from_child: Option<BufReader<ChildStdout>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Live {
    /// Starts `exe __evaluate`, in a process group of its own: a Ctrl-C at the terminal goes
    /// to the parent, which stops the step in flight and so the evaluation.
    pub(super) fn spawn(exe: &Path, limits: &Limits) -> std::io::Result<Live> {
        let mut command = Command::new(exe);
        command
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::engine::process::in_own_group(&mut command);
        let mut process = command.spawn()?;
        // Before the job is sent: the child allocates nothing of the script's until then.
        let limit = EvaluatorLimit::hold(&process, evaluator_memory(limits));
        Ok(Live {
            _limit: limit,
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
