//! Ctrl-C at a prompt on Windows: a pipe or a console cannot be polled beside a flag, so
//! stdin is read by a thread of its own (started at the first prompt, for the life of the
//! process) that hands what it reads over a channel; the prompt waits on the channel a
//! tick at a time and looks at the cancel flag, which the console's Ctrl-C and Ctrl-Break
//! set (the C runtime turns them into SIGINT and SIGBREAK).

use std::io::Read as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{CtrlC, Left, Stdin, left};

/// How often a waiting prompt looks at the flag.
const TICK: Duration = Duration::from_millis(50);

/// The executor's cancel flag, which Ctrl-C sets.
pub(super) struct Pressed {
    flag: Arc<AtomicBool>,
}

impl Pressed {
    #[allow(clippy::unnecessary_wraps)] // The Unix one can fail; the callers are shared.
    pub(super) fn new(flag: &Arc<AtomicBool>) -> std::io::Result<Pressed> {
        Ok(Pressed { flag: flag.clone() })
    }

    /// Nothing more to register: the flag is set by the handler already registered.
    #[allow(clippy::unnecessary_wraps)] // The Unix one can fail; the callers are shared.
    pub(super) fn register(&self, _signal: std::ffi::c_int) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the reading thread hands over: bytes, or the end (`None`).
fn reader() -> &'static Mutex<Receiver<Option<Vec<u8>>>> {
    static READER: OnceLock<Mutex<Receiver<Option<Vec<u8>>>>> = OnceLock::new();
    READER.get_or_init(|| {
        let (send, receive) = channel();
        let _ = std::thread::Builder::new()
            .name("mekara-stdin".into())
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut chunk = [0u8; 4096];
                loop {
                    let read = match stdin.read(&mut chunk) {
                        Ok(0) | Err(_) => None,
                        Ok(n) => Some(chunk[..n].to_vec()),
                    };
                    let ended = read.is_none();
                    if send.send(read).is_err() || ended {
                        return;
                    }
                }
            });
        Mutex::new(receive)
    })
}

/// Reads what stdin has into `buffered`, waiting for it until `deadline`, or Ctrl-C.
pub(crate) fn read_stdin(
    ctrl_c: Option<&CtrlC>,
    deadline: Option<Instant>,
    buffered: &mut Vec<u8>,
) -> std::io::Result<Stdin> {
    let receive = reader()
        .lock()
        .map_err(|_| std::io::Error::other("the stdin reader panicked"))?;
    loop {
        if ctrl_c.is_some_and(|c| c.pressed.flag.load(Ordering::SeqCst)) {
            return Ok(Stdin::Interrupted);
        }
        let wait = match left(deadline) {
            Left::Passed => return Ok(Stdin::TimedOut),
            Left::Forever => TICK,
            Left::For(left) => left.min(TICK),
        };
        match receive.recv_timeout(wait) {
            Ok(Some(bytes)) => {
                buffered.extend_from_slice(&bytes);
                return Ok(Stdin::Read);
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => return Ok(Stdin::Ended),
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}
