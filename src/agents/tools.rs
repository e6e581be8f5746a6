//! The tools `mekara mcp` serves agents, as a catalogue: their names, titles, descriptions,
//! input schemas and annotations (the agent reads these too, but they define the tools, so
//! they stay here beside the argument checks), and the parsing of a call's arguments into an
//! [`AgentCall`] or an [`ArgumentError`]. Everything said in reply to a call is
//! [`super::reply`]'s.

use serde_json::{Map, Value as Json, json};

use crate::display::json_type;
use crate::engine::Rewind;

/// The tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentTool {
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

/// The name mekara's server is registered under in every client's configuration, which
/// `mekara install` writes.
pub(crate) use crate::install::edits::SERVER_NAME;

/// Every tool, in the order `tools/list` gives them.
pub(crate) const ALL: [AgentTool; 7] = [
    AgentTool::Start,
    AgentTool::Continue,
    AgentTool::Finish,
    AgentTool::Status,
    AgentTool::ListScripts,
    AgentTool::Resume,
    AgentTool::Eject,
];

/// A tool call with its arguments checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentCall {
    /// Push a script and run it until it needs the agent.
    Start {
        /// The script's name.
        name: String,
        /// Its arguments (`$ARGUMENTS`).
        arguments: String,
        /// The folder it runs in, relative to the server's.
        working_dir: Option<String>,
        /// The handle of the waiting run to nest it in; without one, a new run.
        parent: Option<String>,
        /// The person agreed to run the project's own script of a bundled script's name.
        project_script: bool,
    },
    /// Finish the pending llm step.
    Continue {
        /// The run's handle; without one, the run this connection drives.
        run_id: Option<String>,
        /// Its outputs.
        outputs: Map<String, Json>,
    },
    /// Finish the pending NL script or fallback.
    Finish {
        /// The run's handle; without one, the run this connection drives.
        run_id: Option<String>,
    },
    /// Show the stack and the pending item, or the open runs.
    Status {
        /// The run's handle; without one, the run this connection drives.
        run_id: Option<String>,
    },
    /// List the scripts.
    ListScripts {
        /// The bundled demo scripts (`test:*`) too.
        all: bool,
    },
    /// List interrupted runs, or take one up.
    Resume {
        /// The run to take up.
        run_id: Option<String>,
        /// A retry or rewind to do first.
        rewind: Option<Rewind>,
        /// The user's answer to the question the run waits on (`ask`).
        answer: Option<String>,
    },
    /// Copy a bundled script into the project.
    Eject {
        /// The bundled script's name.
        name: String,
        /// Overwrite the project's files.
        force: bool,
    },
}

impl AgentCall {
    /// The run handle the call names (`run_id`, or `parent` for `start`), if any.
    pub(crate) fn handle(&self) -> Option<&str> {
        match self {
            AgentCall::Start { parent, .. } => parent.as_deref(),
            AgentCall::Continue { run_id, .. }
            | AgentCall::Finish { run_id }
            | AgentCall::Status { run_id }
            | AgentCall::Resume { run_id, .. } => run_id.as_deref(),
            AgentCall::ListScripts { .. } | AgentCall::Eject { .. } => None,
        }
    }

    /// The tool this call is for.
    pub(crate) fn tool(&self) -> AgentTool {
        match self {
            AgentCall::Start { .. } => AgentTool::Start,
            AgentCall::Continue { .. } => AgentTool::Continue,
            AgentCall::Finish { .. } => AgentTool::Finish,
            AgentCall::Status { .. } => AgentTool::Status,
            AgentCall::ListScripts { .. } => AgentTool::ListScripts,
            AgentCall::Resume { .. } => AgentTool::Resume,
            AgentCall::Eject { .. } => AgentTool::Eject,
        }
    }
}

impl AgentTool {
    /// The tool named `name`, if there is one.
    pub(crate) fn named(name: &str) -> Option<AgentTool> {
        ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its own name, as `tools/list` gives it (clients show it to their models under names
    /// of their own: [`super::clients::AgentClient::tool_name`]).
    pub(crate) fn name(self) -> &'static str {
        match self {
            AgentTool::Start => "start",
            AgentTool::Continue => "continue_compiled_script",
            AgentTool::Finish => "finish_nl_script",
            AgentTool::Status => "status",
            AgentTool::ListScripts => "list_scripts",
            AgentTool::Resume => "resume",
            AgentTool::Eject => "eject_script",
        }
    }

    /// A short title for people.
    pub(crate) fn title(self) -> &'static str {
        match self {
            AgentTool::Start => "Start a mekara script",
            AgentTool::Continue => "Finish the pending llm step",
            AgentTool::Finish => "Finish the pending NL script",
            AgentTool::Status => "Show the run's stack",
            AgentTool::ListScripts => "List mekara scripts",
            AgentTool::Resume => "Resume an interrupted run",
            AgentTool::Eject => "Copy a bundled script into the project",
        }
    }

    /// When an agent should call it, and what happens.
    pub(crate) fn description(self) -> &'static str {
        match self {
            AgentTool::Start => {
                "Run a mekara script (a workflow). Call this when the user asks for a script \
                 by name, e.g. `/test:random` or `/deploy staging`: pass the name \
                 (`test:random` or `test/random`) and everything after it as `arguments`. \
                 mekara runs the script's automatic steps itself and replies with what ran, the \
                 one thing you must do next, and the run's handle: pass it as `run_id` to the \
                 calls that go on with this run. Each `start` begins a new, independent run; \
                 to run a script nested inside a run that waits for you (its pending step \
                 comes back when the nested script ends), pass that run's handle as \
                 `parent`."
            }
            AgentTool::Continue => {
                "Give the outputs of the pending llm step of a compiled script, once you have \
                 done that one step. `outputs` must hold every expected output the last reply \
                 named (`{}` when none are expected); `run_id` is the run's handle, from the \
                 last reply. Also the way to pass on the user's answer to a script's question \
                 (`outputs: {\"answer\": \"<the user's answer>\"}`), for a run live here or \
                 one interrupted by a restart. Not for NL scripts: those are finished \
                 with `finish_nl_script`."
            }
            AgentTool::Finish => {
                "Say that you have followed ALL of the pending NL script's instructions (or \
                 finished a failed compiled script by hand). Call it once, when the whole \
                 script is done, never after a single step; `run_id` is the run's handle, from \
                 the last reply. Not for llm steps of compiled \
                 scripts: those take `continue_compiled_script`."
            }
            AgentTool::Status => {
                "Show a run: its stack of scripts and the pending item with the call to make \
                 next (`run_id`: the run's handle). Without `run_id`, the run this connection \
                 drives; when it drives several that wait, which they are; when it drives \
                 none, the project's open runs. Changes nothing, and reads a run another \
                 process drives without taking it; use it when unsure what mekara is waiting \
                 for."
            }
            AgentTool::ListScripts => {
                "List the scripts that can be started with `start`, with one-line \
                 descriptions. The bundled demo scripts (`test:*`) are listed only with \
                 `all: true`. Changes nothing."
            }
            AgentTool::Resume => {
                "Take up a run that was interrupted (the server restarted, or a call was \
                 cancelled). Without `run_id`, lists the interrupted runs; with the run's \
                 handle, rebuilds its stack from the journal and shows its pending step again \
                 (the other tools take a run up by its handle too). Auto steps that \
                 finished never run twice, unless you ask: once the cause of a failure is \
                 fixed, `retry: true` runs the failed step again and goes on (after an edit \
                 of the script, from the first step that changed); `from` runs again from \
                 a step you name."
            }
            AgentTool::Eject => {
                "Copy a bundled script (such as `compile`) into the project's \
                 `.mekara/scripts/`, where it can be changed; the project's copy then wins \
                 over the bundled one. Refuses to overwrite existing files unless `force` is \
                 true. Call it only when the user wants to customise a bundled script."
            }
        }
    }

    /// The JSON Schema of its arguments: an object of exactly these properties.
    pub(crate) fn input_schema(self) -> Map<String, Json> {
        match self {
            AgentTool::Start => object_schema(
                json!({
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
                    },
                    "parent": {
                        "type": "string",
                        "description": "The handle of a run that waits for you, to run this script nested inside it. Leave out to start a new, independent run."
                    },
                    "project_script": {
                        "type": "boolean",
                        "description": "Set to true only after the user said yes to running this project's own script that has the name of one of mekara's bundled scripts (a `start` without it is refused, naming the project's files). Never set it on your own.",
                        "default": false
                    }
                }),
                &["name"],
            ),
            AgentTool::Continue => object_schema(
                json!({
                    "run_id": run_id_schema(),
                    "outputs": {
                        "type": "object",
                        "description": "One entry per expected output of the pending llm step, by name; `{}` when none are expected.",
                        "additionalProperties": true
                    }
                }),
                &["outputs"],
            ),
            AgentTool::Resume => object_schema(
                json!({
                    "run_id": {
                        "type": "string",
                        "description": "The handle of the run to take up, as the `start` reply gave it: `<run id>.<token>`. Leave out to list the interrupted runs."
                    },
                    "retry": {
                        "type": "boolean",
                        "description": "Run the step whose failure made the run fall back again, once its cause is fixed, and go on; when a script changed since the run recorded its steps, go on from the first step whose inputs changed. Needs `run_id`.",
                        "default": false
                    },
                    "from": {
                        "type": "string",
                        "description": "Run again from this recorded step, e.g. `deploy[4]` (as `mekara runs show` labels it); the steps before it are answered from the journal. Works on a finished run too. Needs `run_id`."
                    },
                    "answer": {
                        "type": "string",
                        "description": "Kept for agents that already answer this way; prefer `continue_compiled_script` with `{\"run_id\": …, \"outputs\": {\"answer\": …}}`, which takes the run up too. For a run waiting for an answer (a script's question to the user): the user's answer, exactly as they gave it; never your own. Needs `run_id`.",
                        "deprecated": true
                    }
                }),
                &[],
            ),
            AgentTool::Eject => object_schema(
                json!({
                    "name": {
                        "type": "string",
                        "description": "The bundled script's name, e.g. `compile` or `test:random`."
                    },
                    "force": {
                        "type": "boolean",
                        "description": "Overwrite the project's files if they exist.",
                        "default": false
                    }
                }),
                &["name"],
            ),
            AgentTool::ListScripts => object_schema(
                json!({
                    "all": {
                        "type": "boolean",
                        "description": "Also list the bundled demo scripts (`test:*`), which exist for mekara's own tests.",
                        "default": false
                    }
                }),
                &[],
            ),
            AgentTool::Finish | AgentTool::Status => {
                object_schema(json!({ "run_id": run_id_schema() }), &[])
            }
        }
    }

    /// Whether it only reads.
    pub(crate) fn read_only(self) -> bool {
        matches!(self, AgentTool::Status | AgentTool::ListScripts)
    }

    /// The names of its arguments, in the schema's order.
    pub(crate) fn argument_names(self) -> Vec<String> {
        self.input_schema()
            .get("properties")
            .and_then(Json::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Checks `arguments` against the schema and builds the call. The error says which
    /// argument is wrong and what it should be.
    pub(crate) fn parse(
        self,
        arguments: Option<&Map<String, Json>>,
    ) -> Result<AgentCall, ArgumentError> {
        let empty = Map::new();
        let args = arguments.unwrap_or(&empty);
        let known = self.argument_names();
        if let Some(unknown) = args.keys().find(|k| !known.contains(k)) {
            return Err(ArgumentError::Unknown {
                tool: self,
                argument: unknown.clone(),
            });
        }
        let string = |key: &'static str, required: bool| -> Result<Option<String>, ArgumentError> {
            match args.get(key) {
                None | Some(Json::Null) if required => Err(ArgumentError::Missing {
                    tool: self,
                    argument: key,
                }),
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(ArgumentError::NotString {
                    tool: self,
                    argument: key,
                    found: json_type(other),
                }),
            }
        };
        let boolean = |key: &'static str| -> Result<bool, ArgumentError> {
            match args.get(key) {
                None | Some(Json::Null) => Ok(false),
                Some(Json::Bool(b)) => Ok(*b),
                Some(other) => Err(ArgumentError::NotBoolean {
                    tool: self,
                    argument: key,
                    found: json_type(other),
                }),
            }
        };
        Ok(match self {
            AgentTool::Start => {
                let name = string("name", true)?.unwrap_or_default();
                if name.trim().is_empty() {
                    return Err(ArgumentError::EmptyName);
                }
                AgentCall::Start {
                    name,
                    arguments: string("arguments", false)?.unwrap_or_default(),
                    working_dir: string("working_dir", false)?,
                    parent: string("parent", false)?.filter(|h| !h.is_empty()),
                    project_script: boolean("project_script")?,
                }
            }
            AgentTool::Continue => match args.get("outputs") {
                Some(Json::Object(outputs)) => AgentCall::Continue {
                    run_id: string("run_id", false)?.filter(|h| !h.is_empty()),
                    outputs: outputs.clone(),
                },
                None | Some(Json::Null) => return Err(ArgumentError::NoOutputs),
                Some(other) => {
                    return Err(ArgumentError::OutputsNotObject {
                        found: json_type(other),
                    });
                }
            },
            AgentTool::Finish => AgentCall::Finish {
                run_id: string("run_id", false)?.filter(|h| !h.is_empty()),
            },
            AgentTool::Status => AgentCall::Status {
                run_id: string("run_id", false)?.filter(|h| !h.is_empty()),
            },
            AgentTool::ListScripts => AgentCall::ListScripts {
                all: boolean("all")?,
            },
            AgentTool::Resume => {
                let run_id = string("run_id", false)?.filter(|id| !id.is_empty());
                let from = string("from", false)?.filter(|step| !step.is_empty());
                let rewind = match (boolean("retry")?, from) {
                    (true, Some(_)) => return Err(ArgumentError::RetryAndFrom),
                    (true, None) => Some(Rewind::Retry),
                    (false, from) => from.map(Rewind::From),
                };
                if rewind.is_some() && run_id.is_none() {
                    return Err(ArgumentError::RewindWithoutRun);
                }
                let answer = string("answer", false)?;
                if answer.is_some() && run_id.is_none() {
                    return Err(ArgumentError::AnswerWithoutRun);
                }
                AgentCall::Resume {
                    run_id,
                    rewind,
                    answer,
                }
            }
            AgentTool::Eject => AgentCall::Eject {
                name: string("name", true)?.unwrap_or_default(),
                force: boolean("force")?,
            },
        })
    }
}

/// What is wrong with a call's arguments; [`super::reply::argument_refusal`] words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgumentError {
    /// `answer` of `resume` without the run to give it to.
    AnswerWithoutRun,
    /// An argument the tool does not take.
    Unknown {
        /// The tool called.
        tool: AgentTool,
        /// The argument given.
        argument: String,
    },
    /// A string argument the tool needs is missing.
    Missing {
        /// The tool called.
        tool: AgentTool,
        /// The argument.
        argument: &'static str,
    },
    /// A string argument is something else.
    NotString {
        /// The tool called.
        tool: AgentTool,
        /// The argument.
        argument: &'static str,
        /// What it is instead (`an array`).
        found: &'static str,
    },
    /// `start` got an empty `name`.
    EmptyName,
    /// `continue_compiled_script` got no `outputs`.
    NoOutputs,
    /// `outputs` is not an object.
    OutputsNotObject {
        /// What it is instead.
        found: &'static str,
    },
    /// `resume` got both `retry` and `from`.
    RetryAndFrom,
    /// `resume` got `retry` or `from` without `run_id`.
    RewindWithoutRun,
    /// A boolean argument (`force`, `all`) is something else.
    NotBoolean {
        /// The tool called.
        tool: AgentTool,
        /// The argument.
        argument: &'static str,
        /// What it is instead.
        found: &'static str,
    },
}

/// The `run_id` argument of the tools that go on with a run.
fn run_id_schema() -> Json {
    json!({
        "type": "string",
        "description": "The run's handle, as the last reply gave it: `<run id>.<token>`. Leave out only when this connection drives one run that waits: with several, a call without it is refused."
    })
}

/// An object schema with `properties`, the `required` names, and nothing else allowed.
fn object_schema(properties: Json, required: &[&str]) -> Map<String, Json> {
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    schema
}
