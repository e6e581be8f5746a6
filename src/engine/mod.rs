//! The engine: runs scripts as a stack of frames over an append-only journal.
//!
//! It owns evaluation ([`compiled`]), effects (the [`runner`] seam and the real [`shell`]),
//! durability (the [`journal`] format, the [`store`] interface, [`runs`]) and the stack
//! ([`executor`]). The stores themselves (files, PostgreSQL) are backends in `crate::store`.
//! It knows nothing of terminals or MCP: callers drive it through [`Executor`] and hear about
//! steps through an [`Observer`].

pub(crate) mod caps;
pub(crate) mod compiled;
pub(crate) mod error;
pub(crate) mod estimate;
pub(crate) mod executor;
pub(crate) mod group_note;
pub(crate) mod handle;
pub(crate) mod journal;
pub(crate) mod observer;
pub(crate) mod process;
pub(crate) mod rewind;
pub(crate) mod runner;
pub(crate) mod runs;
pub(crate) mod settings;
pub(crate) mod shell;
pub(crate) mod step;
pub(crate) mod store;
pub(crate) mod tool;

pub(crate) use compiled::Task;
pub(crate) use error::{EngineError, Waiting};
pub(crate) use executor::{Answer, Claim, Executor, Pending};
pub(crate) use observer::{FrameEvent, Observer};
pub(crate) use rewind::{Rewind, RewindPlan};
pub(crate) use runner::{CancelToken, StepRunner, ToolCall};
pub(crate) use settings::Settings;
pub(crate) use shell::ShellRunner;
