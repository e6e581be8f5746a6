//! The engine: runs scripts as a stack of frames over an append-only journal.
//!
//! It owns evaluation ([`compiled`]), effects (the [`runner`] seam and the real [`shell`]),
//! durability ([`journal`], [`runs`]) and the stack ([`executor`]). It knows nothing of
//! terminals or MCP: callers drive it through [`Executor`] and hear about steps through an
//! [`Observer`].

pub(crate) mod compiled;
pub(crate) mod error;
pub(crate) mod executor;
pub(crate) mod group_note;
pub mod handle;
pub mod journal;
pub(crate) mod observer;
pub mod postgres;
pub(crate) mod process;
pub mod rewind;
pub(crate) mod runner;
pub mod runs;
pub(crate) mod shell;
pub(crate) mod step;
pub mod store;
pub(crate) mod tool;

pub use compiled::Task;
pub use error::{EngineError, Waiting};
pub use executor::{Answer, Claim, Executor, Pending, Settings};
pub use observer::{FrameEvent, Observer, Quiet};
pub use rewind::{Rewind, RewindPlan};
pub use runner::{CancelToken, StepRunner, ToolCall};
pub use shell::ShellRunner;
