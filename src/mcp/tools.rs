//! The tools mekara serves: their names, descriptions, input schemas and annotations, and
//! the parsing of a call's arguments into a [`ToolCall`].

use serde_json::{Map, Value as Json, json};

/// The tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `start`.
    Start,
    /// `continue_compiled_script`.
    Continue,
    /// `finish_nl_script`.
    Finish,
    /// `status`.
    Status,
    /// `list_scripts`.
    ListScripts,
    /// `resume`.
    Resume,
    /// `eject_script`.
    Eject,
}

/// Every tool, in the order `tools/list` gives them.
pub const ALL: [Tool; 7] = [
    Tool::Start,
    Tool::Continue,
    Tool::Finish,
    Tool::Status,
    Tool::ListScripts,
    Tool::Resume,
    Tool::Eject,
];

/// A tool call with its arguments checked.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    /// Push a script and run it until it needs the agent.
    Start {
        /// The script's name.
        name: String,
        /// Its arguments (`$ARGUMENTS`).
        arguments: String,
        /// The folder it runs in, relative to the server's.
        working_dir: Option<String>,
    },
    /// Finish the pending llm step.
    Continue {
        /// Its outputs.
        outputs: Map<String, Json>,
    },
    /// Finish the pending NL script or fallback.
    Finish,
    /// Show the stack and the pending item.
    Status,
    /// List the scripts.
    ListScripts,
    /// List interrupted runs, or take one up.
    Resume {
        /// The run to take up.
        run_id: Option<String>,
    },
    /// Copy a bundled script into the project.
    Eject {
        /// The bundled script's name.
        name: String,
        /// Overwrite the project's files.
        force: bool,
    },
}

impl ToolCall {
    /// The tool this call is for.
    pub fn tool(&self) -> Tool {
        match self {
            ToolCall::Start { .. } => Tool::Start,
            ToolCall::Continue { .. } => Tool::Continue,
            ToolCall::Finish => Tool::Finish,
            ToolCall::Status => Tool::Status,
            ToolCall::ListScripts => Tool::ListScripts,
            ToolCall::Resume { .. } => Tool::Resume,
            ToolCall::Eject { .. } => Tool::Eject,
        }
    }
}

impl Tool {
    /// The tool named `name`, if there is one.
    pub fn named(name: &str) -> Option<Tool> {
        ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name clients call it by (Claude Code: `mcp__mekara__<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Tool::Start => "start",
            Tool::Continue => "continue_compiled_script",
            Tool::Finish => "finish_nl_script",
            Tool::Status => "status",
            Tool::ListScripts => "list_scripts",
            Tool::Resume => "resume",
            Tool::Eject => "eject_script",
        }
    }

    /// A short title for people.
    pub fn title(self) -> &'static str {
        match self {
            Tool::Start => "Start a mekara script",
            Tool::Continue => "Finish the pending llm step",
            Tool::Finish => "Finish the pending NL script",
            Tool::Status => "Show the run's stack",
            Tool::ListScripts => "List mekara scripts",
            Tool::Resume => "Resume an interrupted run",
            Tool::Eject => "Copy a bundled script into the project",
        }
    }

    /// When an agent should call it, and what happens.
    pub fn description(self) -> &'static str {
        match self {
            Tool::Start => {
                "Run a mekara script (a workflow). Call this when the user asks for a script \
                 by name, e.g. `/test:random` or `/deploy staging`: pass the name \
                 (`test:random` or `test/random`) and everything after it as `arguments`. \
                 mekara runs the script's automatic steps itself and replies with what ran and \
                 the one thing you must do next. Called while another script is pending, the \
                 new script runs nested inside it, and the outer script's pending step comes \
                 back when it ends."
            }
            Tool::Continue => {
                "Give the outputs of the pending llm step of a compiled script, once you have \
                 done that one step. `outputs` must hold every expected output the last reply \
                 named (`{}` when none are expected). Not for NL scripts: those are finished \
                 with `finish_nl_script`."
            }
            Tool::Finish => {
                "Say that you have followed ALL of the pending NL script's instructions (or \
                 finished a failed compiled script by hand). Call it once, when the whole \
                 script is done, never after a single step. Not for llm steps of compiled \
                 scripts: those take `continue_compiled_script`."
            }
            Tool::Status => {
                "Show this session's run: the stack of scripts and the pending item with the \
                 call to make next. Changes nothing; use it when unsure what mekara is waiting \
                 for."
            }
            Tool::ListScripts => {
                "List the scripts that can be started with `start`, with one-line \
                 descriptions. Changes nothing."
            }
            Tool::Resume => {
                "Take up a run that was interrupted (the server restarted, or a call was \
                 cancelled). Without `run_id`, lists the interrupted runs; with one, rebuilds \
                 its stack from the journal and shows its pending step again. Auto steps that \
                 finished never run twice."
            }
            Tool::Eject => {
                "Copy a bundled script (such as `compile`) into the project's \
                 `.mekara/scripts/`, where it can be changed; the project's copy then wins \
                 over the bundled one. Refuses to overwrite existing files unless `force` is \
                 true. Call it only when the user wants to customise a bundled script."
            }
        }
    }

    /// The JSON Schema of its arguments.
    pub fn input_schema(self) -> Map<String, Json> {
        let schema = match self {
            Tool::Start => json!({
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "The script's name: `test:random` or `test/random`."
                    },
                    "arguments": {
                        "type": "string",
                        "description": "Everything the user wrote after the script's name, exactly (it replaces `$ARGUMENTS`). Empty when there is nothing.",
                        "default": ""
                    },
                    "working_dir": {
                        "type": "string",
                        "description": "The folder the script runs in, absolute or relative to the server's folder. Default: the server's folder."
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            Tool::Continue => json!({
                "type": "object",
                "properties": {
                    "outputs": {
                        "type": "object",
                        "description": "One entry per expected output of the pending llm step, by name; `{}` when none are expected.",
                        "additionalProperties": true
                    }
                },
                "required": ["outputs"],
                "additionalProperties": false
            }),
            Tool::Resume => json!({
                "type": "object",
                "properties": {
                    "run_id": {
                        "type": "string",
                        "description": "The run to take up, e.g. `20261122-031502-9f3a`. Leave out to list the interrupted runs."
                    }
                },
                "additionalProperties": false
            }),
            Tool::Eject => json!({
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "The bundled script's name, e.g. `compile` or `test:random`."
                    },
                    "force": {
                        "type": "boolean",
                        "description": "Overwrite the project's files if they exist.",
                        "default": false
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            Tool::Finish | Tool::Status | Tool::ListScripts => json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
        };
        match schema {
            Json::Object(map) => map,
            _ => unreachable!("every schema is an object"),
        }
    }

    /// Whether it only reads.
    pub fn read_only(self) -> bool {
        matches!(self, Tool::Status | Tool::ListScripts)
    }

    /// Checks `arguments` against the schema and builds the call. The error says which
    /// argument is wrong and what it should be.
    pub fn parse(self, arguments: Option<&Map<String, Json>>) -> Result<ToolCall, String> {
        let empty = Map::new();
        let args = arguments.unwrap_or(&empty);
        let schema = self.input_schema();
        let known: Vec<&String> = schema
            .get("properties")
            .and_then(Json::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        if let Some(unknown) = args.keys().find(|k| !known.contains(k)) {
            let expected = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!(
                    "it takes {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(format!(
                "`{}` has no argument `{unknown}`: {expected}",
                self.name()
            ));
        }
        let string = |key: &str, required: bool| -> Result<Option<String>, String> {
            match args.get(key) {
                None | Some(Json::Null) if required => Err(format!(
                    "`{}` needs the argument `{key}` (a string)",
                    self.name()
                )),
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!(
                    "argument `{key}` of `{}` must be a string, not {}",
                    self.name(),
                    json_type(other)
                )),
            }
        };
        Ok(match self {
            Tool::Start => {
                let name = string("name", true)?.unwrap_or_default();
                if name.trim().is_empty() {
                    return Err(
                        "argument `name` of `start` is empty: give a script's name (`list_scripts` lists them)"
                            .to_string(),
                    );
                }
                ToolCall::Start {
                    name,
                    arguments: string("arguments", false)?.unwrap_or_default(),
                    working_dir: string("working_dir", false)?,
                }
            }
            Tool::Continue => match args.get("outputs") {
                Some(Json::Object(outputs)) => ToolCall::Continue {
                    outputs: outputs.clone(),
                },
                None | Some(Json::Null) => {
                    return Err(
                        "`continue_compiled_script` needs the argument `outputs` (an object; `{}` when no outputs are expected)"
                            .to_string(),
                    );
                }
                Some(other) => {
                    return Err(format!(
                        "argument `outputs` of `continue_compiled_script` must be an object of named outputs, not {}",
                        json_type(other)
                    ));
                }
            },
            Tool::Finish => ToolCall::Finish,
            Tool::Status => ToolCall::Status,
            Tool::ListScripts => ToolCall::ListScripts,
            Tool::Resume => ToolCall::Resume {
                run_id: string("run_id", false)?.filter(|id| !id.is_empty()),
            },
            Tool::Eject => ToolCall::Eject {
                name: string("name", true)?.unwrap_or_default(),
                force: match args.get("force") {
                    None | Some(Json::Null) => false,
                    Some(Json::Bool(b)) => *b,
                    Some(other) => {
                        return Err(format!(
                            "argument `force` of `eject_script` must be a boolean, not {}",
                            json_type(other)
                        ));
                    }
                },
            },
        })
    }
}

/// `a string`, `an array`, … for error messages.
pub(crate) fn json_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}
