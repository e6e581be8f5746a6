//! [`ClientRunner`]: the engine's effect runner for runs that may call MCP tools.

use super::mcp_client::McpClient;
use crate::engine::runner::Ran;
use crate::engine::{CancelToken, ShellRunner, StepRunner, ToolCall};

/// The effect runner of runs that may call MCP tools: shell steps as [`ShellRunner`] runs
/// them, tool calls through an [`McpClient`].
pub(crate) struct ClientRunner {
    shell: ShellRunner,
    client: McpClient,
}

impl ClientRunner {
    /// Runs shell steps with `shell` and tool calls with `client`.
    /// The client reads the declared servers now, expanding their `${VAR}`s, so that the
    /// process knows those secrets before the first step (a shell step can print one, an
    /// agent can answer with one) and redacts them from what it journals.
    pub(crate) fn new(shell: ShellRunner, client: McpClient) -> ClientRunner {
        let _ = client.secrets();
        ClientRunner { shell, client }
    }
}

impl StepRunner for ClientRunner {
    fn inner(&self) -> Option<&dyn StepRunner> {
        Some(&self.shell)
    }

    fn call_tool(&self, call: &ToolCall, cancel: &CancelToken) -> Ran {
        self.client.step(call, cancel)
    }
}
