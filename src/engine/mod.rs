//! The engine: runs scripts as a stack of frames over an append-only journal.
//!
//! It owns evaluation ([`compiled`]), effects (the [`runner`] seam and the real [`shell`]),
//! durability (the [`journal`] format, the [`store`] interface, [`runs`]) and the stack
//! ([`executor`]). The stores themselves (files, PostgreSQL) are backends in `crate::store`. It knows nothing of
//! terminals or MCP: callers drive it through [`Executor`] and hear about steps through an
//! [`Observer`].

pub(crate) mod compiled;
pub(crate) mod error;
pub(crate) mod executor;
pub(crate) mod group_note;
pub mod handle;
pub mod journal;
pub(crate) mod observer;
pub(crate) mod process;
pub mod rewind;
pub(crate) mod runner;
pub mod runs;
pub(crate) mod settings;
pub(crate) mod shell;
pub(crate) mod step;
pub mod store;
pub(crate) mod tool;

pub use compiled::Task;
pub use error::{EngineError, Waiting};
pub use executor::{Answer, Claim, Executor, FailedCall, Pending};
pub use observer::{FrameEvent, Observer, Quiet};
pub use rewind::{Rewind, RewindPlan};
pub use runner::{CancelToken, StepRunner, ToolCall};
pub use settings::Settings;
pub use shell::ShellRunner;
