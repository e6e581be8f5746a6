//! `mekara tools`: the tools of the MCP servers in `.mcp.json`, one call of one of them,
//! and a starting policy file.

use super::output::outln;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value as Json};

use crate::client::{ClientError, McpClient, config, policy};
use crate::engine::CancelToken;
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct ToolsArgs {
    #[command(subcommand)]
    command: ToolsCommand,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// List the servers and their tools, marking what policy lets scripts call.
    List {
        /// Only this server.
        server: Option<String>,
        /// Start the servers of the project's `.mcp.json` even if you have not approved them
        /// in Claude Code (they are commands from the repository: read them first).
        #[arg(long)]
        trust: bool,
    },
    /// Call one tool, under the same policy as scripts.
    Call {
        /// The server's name in `.mcp.json`.
        server: String,
        /// The tool's name.
        tool: String,
        /// An argument, `name=value`; the value is read as JSON when it is JSON
        /// (`n=5`, `flag=true`, `list=[1,2]`), else as a string.
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
        /// All arguments as one JSON object (combined with `--arg`, which wins).
        #[arg(long, value_name = "OBJECT")]
        json: Option<String>,
        /// How to print the result.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
        /// Start the server even if it comes from the project's `.mcp.json` and you have not
        /// approved it in Claude Code (it is a command from the repository: read it first).
        #[arg(long)]
        trust: bool,
    },
    /// Write a commented example `.mekara/config.toml` for the servers of `.mcp.json`.
    Init {
        /// Replace an existing `.mekara/config.toml`.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    /// The tool's text.
    Text,
    /// `{"content", "structured", "is_error"}`.
    Json,
}

pub(super) fn run(args: ToolsArgs) -> anyhow::Result<Exit> {
    let (locations, _) = super::locate()?;
    let root = match &locations.project_root {
        Some(root) => root.clone(),
        None => std::env::current_dir()?,
    };
    let client = |trust| McpClient::with_trust(Some(&root), locations.home.as_deref(), trust);
    match args.command {
        ToolsCommand::List { server, trust } => list(&client(trust), server.as_deref()),
        ToolsCommand::Call {
            server,
            tool,
            args,
            json,
            output,
            trust,
        } => call(
            &client(trust),
            &server,
            &tool,
            &args,
            json.as_deref(),
            output,
        ),
        ToolsCommand::Init { force } => init(&root, force),
    }
}

fn usage_error(e: ClientError) -> anyhow::Result<Exit> {
    match e {
        ClientError::UnknownServer { .. } | ClientError::UnknownTool { .. } => {
            super::usage(e.to_string())
        }
        other => Err(other.into()),
    }
}

fn list(client: &McpClient, only: Option<&str>) -> anyhow::Result<Exit> {
    let listings = match client.list(only) {
        Ok(l) => l,
        Err(e) => return usage_error(e),
    };
    let refused = listings.iter().any(|l| {
        l.tools
            .as_ref()
            .is_ok_and(|t| t.iter().any(|t| t.allowed.is_err()))
    });
    if listings.is_empty() {
        outln!(
            "no MCP servers: declare them in `.mcp.json` (`{{\"mcpServers\": {{...}}}}`), as for Claude Code"
        )?;
        return Ok(Exit::Success);
    }
    let mut exit = Exit::Success;
    for (i, listing) in listings.iter().enumerate() {
        if i > 0 {
            outln!()?;
        }
        match &listing.tools {
            Err(ClientError::Refused(why)) => outln!("{}: not contacted: {why}", listing.name)?,
            Err(e @ ClientError::NotApproved { .. }) => {
                outln!("{}: not started: {e}", listing.name)?;
            }
            Err(e) => {
                exit = Exit::Failure;
                outln!("{}: error: {e}", listing.name)?;
            }
            Ok(tools) => {
                let allowed = tools.iter().filter(|t| t.allowed.is_ok()).count();
                outln!("{}: {} tools, {allowed} allowed", listing.name, tools.len())?;
                let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
                for t in tools {
                    let (mark, note) = match &t.allowed {
                        Ok(()) => ("✓", String::new()),
                        Err(setting) => ("✗", format!(" [refused: {setting}]")),
                    };
                    let kind = if t.read_only {
                        "read-only"
                    } else {
                        "writes   "
                    };
                    outln!(
                        "  {mark} {:width$}  {kind}  {}{note}",
                        t.name,
                        shorten(&t.description, 60)
                    )?;
                }
            }
        }
    }
    if refused {
        outln!(
            "\n✗ marks tools scripts may not call; `mekara tools call SERVER TOOL` says which setting of `.mekara/config.toml` allows one"
        )?;
    }
    Ok(exit)
}

/// `text` cut to `max` characters, with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

fn call(
    client: &McpClient,
    server: &str,
    tool: &str,
    args: &[String],
    json: Option<&str>,
    output: Output,
) -> anyhow::Result<Exit> {
    let mut arguments = match json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Json>(text) {
            Ok(Json::Object(map)) => map,
            Ok(other) => {
                return super::usage(format!(
                    "`--json` must be a JSON object, got `{other}`; write `--json '{{\"name\": value}}'`"
                ));
            }
            Err(e) => return super::usage(format!("`--json` is not valid JSON: {e}")),
        },
    };
    for arg in args {
        let Some((name, value)) = arg.split_once('=') else {
            return super::usage(format!(
                "`--arg {arg}` is not `NAME=VALUE`; write `--arg {arg}=...`"
            ));
        };
        if name.is_empty() {
            return super::usage(format!("`--arg {arg}` has no name before `=`"));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Json::String(value.into()));
        arguments.insert(name.to_string(), value);
    }
    let result = match client.call(server, tool, arguments, None, &CancelToken::default()) {
        Ok(result) => result,
        Err(e) => return usage_error(e),
    };
    match output {
        Output::Text => {
            outln!("{}", result.text.trim_end_matches('\n'))?;
            if let Some(structured) = &result.structured
                && result.text.trim().is_empty()
            {
                outln!("{}", serde_json::to_string_pretty(structured)?)?;
            }
        }
        Output::Json => {
            let value = serde_json::json!({
                "content": result.text,
                "structured": result.structured,
                "is_error": result.is_error,
            });
            outln!("{}", serde_json::to_string_pretty(&value)?)?;
        }
    }
    if result.is_error {
        eprintln!("error: tool `{server}/{tool}` reported an error");
        return Ok(Exit::Failure);
    }
    Ok(Exit::Success)
}

fn init(root: &std::path::Path, force: bool) -> anyhow::Result<Exit> {
    let path: PathBuf = root.join(crate::config::FILE);
    if path.exists() && !force {
        return super::usage(format!(
            "`{}` exists; edit it, or pass `--force` to replace it",
            path.display()
        ));
    }
    // Only the project's own servers: the user's are not this project's to configure.
    let names: Vec<String> = config::discover(Some(root), None)?
        .into_iter()
        .map(|d| d.name)
        .collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, policy::example(&names))?;
    outln!(
        "wrote `{}` for {} server{}",
        path.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" }
    )?;
    Ok(Exit::Success)
}
