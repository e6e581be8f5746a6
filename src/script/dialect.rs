//! The Starlark dialect compiled scripts are written in. It is the script layer's, not the
//! engine's: reading a script (eject finds the helpers a script loads) needs it as much as
//! running one does.

use starlark::syntax::{Dialect, DialectTypes};

/// The Starlark dialect of compiled scripts: Python-like `def`, lambdas, keyword-only
/// arguments, type annotations, f-strings, and `load` of helper modules (which only
/// compiled scripts resolve: see the engine's `compiled::modules`).
pub(crate) fn dialect() -> Dialect {
    Dialect {
        enable_f_strings: true,
        enable_keyword_only_arguments: true,
        enable_types: DialectTypes::Enable,
        ..Dialect::Standard
    }
}
