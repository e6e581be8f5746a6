//! Scripts: their names, where they are found, and how their files read.
//!
//! This module owns resolution by name (DESIGN §2): the three levels, the pairing of an NL
//! file with a compiled one, and the checks that keep a name inside its folders. It reads
//! files but never runs anything; running is the engine's job.

pub(crate) mod bundled;
pub(crate) mod dialect;
pub(crate) mod eject;
pub(crate) mod name;
pub(crate) mod nl;
pub(crate) mod resolver;

pub(crate) use name::ScriptName;
pub(crate) use resolver::{
    HelperError, Level, Listing, Orphan, Resolver, Script, ScriptEntry, ScriptError, ScriptFile,
    Shadowing,
};
