//! Why `mekara serve` cannot serve the tools it was given ([`ServeError`]), and the exit
//! code each reason gives.

use std::path::PathBuf;

/// Why the tools cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// A path given does not exist.
    #[error("`{path}` does not exist; name `.star` files, folders of them, or globs")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A path holds no `.star` file.
    #[error("`{path}` holds no `.star` module")]
    NoModules {
        /// The path as given.
        path: String,
    },
    /// A glob does not parse.
    #[error("`{pattern}` is not a valid glob: {reason}")]
    BadGlob {
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file cannot be read.
    #[error("cannot read `{}`: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// A module does not parse, or its top level fails: the Starlark error with its
    /// location.
    #[error("{0}")]
    Code(String),
    /// A module's top level does work.
    #[error(
        "{location}: a tool module may only define things, but this is {what}; move it into a function"
    )]
    TopLevel {
        /// `file:line:col`.
        location: String,
        /// The statement, in words.
        what: String,
    },
    /// `exports` is not a list of the module's function names.
    #[error("`exports` of `{module}` must list names of functions the module defines: {detail}")]
    Exports {
        /// The module.
        module: String,
        /// What is wrong.
        detail: String,
    },
    /// A function's signature has no schema.
    #[error("function `{function}` of `{module}` cannot be a tool: {detail}")]
    Signature {
        /// The module.
        module: String,
        /// The function.
        function: String,
        /// What is wrong.
        detail: String,
    },
    /// Two functions give the same tool name.
    #[error(
        "tool name `{name}` is taken twice: by `{first}` in `{first_module}` and by `{second}` in `{second_module}`; rename one, or leave one out with `exports = [...]`"
    )]
    Duplicate {
        /// The tool name.
        name: String,
        /// The first function.
        first: String,
        /// Its module.
        first_module: String,
        /// The second function.
        second: String,
        /// Its module.
        second_module: String,
    },
    /// Filters left nothing.
    #[error("no tool left to serve: {0}")]
    Nothing(String),
    /// The config file cannot be read or does not parse.
    #[error("config file `{}`: {reason}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl ServeError {
    /// The exit code of `mekara serve` failing with this: a path on the command line that
    /// names nothing to serve is a usage error; a module that cannot be served failed.
    pub(crate) fn exit_code(&self) -> crate::exit::Exit {
        match self {
            ServeError::NotFound { .. }
            | ServeError::NoModules { .. }
            | ServeError::BadGlob { .. } => crate::exit::Exit::Usage,
            _ => crate::exit::Exit::Failure,
        }
    }
}

impl ServeError {
    /// A Starlark error, rendered with its location and snippet. The command line adds its
    /// own `error: `, so starlark's is dropped.
    pub(crate) fn code(rendered: &str) -> ServeError {
        let rendered = rendered.trim_end();
        ServeError::Code(
            rendered
                .strip_prefix("error: ")
                .unwrap_or(rendered)
                .to_string(),
        )
    }
}
