//! [`Sources`]: what a child needs to load a script, read by the parent, so that the child
//! reads no file.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::compiled::CodeError;
use crate::engine::compiled::modules::{FindModule, ModuleGraph};
use crate::script::{HelperError, ScriptFile};

/// What a child needs to load a script: its text and every helper module it loads, read
/// by the parent (so the child reads no file), and the text of their string literals.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Sources {
    /// The script's file, in error locations.
    pub(super) origin: String,
    /// Its text.
    pub(super) text: String,
    /// The helper modules, by the `load` path that names them.
    pub(super) helpers: BTreeMap<String, ScriptFile>,
    /// The text of the string literals of the script and its helpers: where the author
    /// writes the prompt tags that may call tools (see `Program::authored`).
    pub(super) authored: String,
}

impl Sources {
    /// Reads `source` and, through `find`, the helper modules it loads, parsing them (which
    /// finds syntax errors, missing modules and cycles, as loading them would) without
    /// running any of them.
    pub(crate) fn collect(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
    ) -> Result<Sources, CodeError> {
        let helpers = RefCell::new(BTreeMap::new());
        let recording = |path: &str| -> Result<ScriptFile, HelperError> {
            let file = find(path)?;
            helpers.borrow_mut().insert(path.to_string(), file.clone());
            Ok(file)
        };
        let authored = ModuleGraph::collect(origin, source, &recording)?.authored();
        Ok(Sources {
            origin: origin.to_string(),
            text: source.to_string(),
            helpers: helpers.into_inner(),
            authored,
        })
    }

    /// A module that loads no other (a tool module of `mekara serve`), not parsed here.
    pub(crate) fn alone(origin: &str, source: &str) -> Sources {
        Sources {
            origin: origin.to_string(),
            text: source.to_string(),
            helpers: BTreeMap::new(),
            authored: String::new(),
        }
    }

    /// The text of the string literals of the script and its helpers.
    pub(crate) fn authored(&self) -> &str {
        &self.authored
    }
}
