//! Evaluation in a child process: a script that asks for more memory than an evaluation may
//! have ends as that script's failure, not as the end of the mekara that runs it.
//!
//! starlark 0.14 cannot survive a refused allocation (see `crate::memory`): the process
//! stops. So the parent (a terminal run, an MCP server with many sessions, a worker) does
//! not evaluate scripts itself. It starts `mekara __evaluate`, sends it the script, its
//! helper modules and the frame's journal ([`Start`](protocol::Start)), and does what the child asks
//! ([`Ask`](protocol::Ask)): run a shell step or a tool call, journal a step, tell the observer. The child
//! has no effect of its own (it only evaluates Starlark), so a child that stops halfway has
//! done nothing the journal does not hold, and one orphaned by a killed parent does nothing
//! at all. When it stops with the memory cap's message, the parent makes that message the
//! script's failure, with the statement's line; when it stops any other way, the run is kept
//! as it was and the error says so.
//!
//! The two talk in lines of JSON over the child's stdin and stdout; the child's stderr is
//! kept for what it says when it stops.
//!
//! - [`evaluator`](mod@evaluator): which binary evaluates (this one, or none: in this process);
//! - [`sources`]: what the parent reads for a child to load a script ([`Sources`]);
//! - [`protocol`]: the lines the two say to each other;
//! - [`parent_side`]: the parent's side: start a child, do what it asks, tell how it ended;
//! - [`live`]: the child process and its pipes; [`warm`]: one kept holding a suspended
//!   evaluation ([`Warm`]);
//! - [`child_side`]: `mekara __evaluate` itself, and [`link`], its line to the parent.

mod child_side;
mod evaluator;
mod link;
mod live;
mod parent_side;
mod protocol;
mod sources;
mod warm;

pub(crate) use child_side::serve_parent;
pub(crate) use evaluator::{SUBCOMMAND, evaluator};
pub(crate) use parent_side::{call, evaluate, load};
pub(crate) use sources::Sources;
pub(crate) use warm::Warm;
