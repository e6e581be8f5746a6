"""The Windows smoke suite: mekara.exe, built for x86_64-pc-windows-gnu, driven under Wine.

Usage: smoke.py RUNNER MEKARA_EXE STANDIN_BASH

RUNNER runs a Windows program (tests/windows/wine-run); MEKARA_EXE is the Windows build;
STANDIN_BASH is the stand-in for Git for Windows' bash.exe (standin_bash.c), which mekara is
pointed at through CLAUDE_CODE_GIT_BASH_PATH because Git for Windows does not run under Wine
here. Each part prints `ok: ...`; the first failed check exits 1 with what was wrong.

The parts: `mekara mcp` over stdio driven by the official Python MCP SDK (start, an llm step,
continue, status), function steps, shell steps through the configured shell and through
`shell = "cmd"`, `mekara run` of a script with an `ask()` answered on stdin, a hook with its
JSON on stdin, and a run killed in a long step and resumed, which runs no finished step again;
then the client side: the Claude Code plugin's Windows launcher (`plugin/bin/mekara.cmd`)
started by `cmd` as a client starts `${CLAUDE_PLUGIN_ROOT}/bin/mekara` (its server answering
the SDK, its hooks with and without a mekara to find), `mekara install` for every client in a
project and for the user (`USERPROFILE` and `APPDATA` in a temporary folder), and a
`[notify] command` run with the configured bash and, without one, with `cmd`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

# Each part is bounded: a hung mekara fails the suite instead of hanging it.
PART_TIMEOUT_SECONDS = 180

SMOKE_STAR = """def double(n):
    return n * 2

def execute(request):
    doubled = auto(double, {"n": 21})
    said = auto("echo through-the-configured-shell")
    by_cmd = auto("echo through-cmd", shell = "cmd")
    answer = llm("Say a word.", expects = {"word": "one word"})
    auto(double, {"n": len(answer.outputs["word"])})
    llm("The word was " + answer.outputs["word"] + "; doubled 21 is " + str(doubled.value) + "; the shell said " + said.output.strip() + " and cmd " + by_cmd.output.strip())
"""

ASK_STAR = """def execute(request):
    name = ask("What is the release called?")
    auto("echo release " + name.answer)
"""

# The first step writes a line to a file on each run; the second waits long enough to be
# killed in. A resume must not write the first line again.
KILLED_STAR = """def execute(request):
    auto("echo once>>steps.txt")
    auto("ping -n 30 127.0.0.1 >NUL", shell = "cmd")
    auto("echo after>>steps.txt")
"""


# The repository, for the plugin's folder.
ROOT = Path(__file__).resolve().parents[2]

# Every client `mekara install --client` knows besides Claude Code, which is always set up.
CLIENTS = ["codex", "gemini", "copilot", "opencode", "qwen"]

# What a hook or server entry of `mekara install` may run on Windows: mekara by its bare name
# (Windows finds `mekara.exe` on PATH) and words, nothing a POSIX shell would have to read.
HOOK_COMMAND = re.compile(r"mekara hook [a-z-]+")


def windows(path: Path) -> str:
    """`path` as a Windows program under Wine sees it: drive Z: is the Linux root."""
    return "Z:" + str(path.resolve()).replace("/", "\\")


class Failure(Exception):
    """A check that did not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


def script(project: Path, name: str, star: str) -> None:
    """A compiled script and the NL script it says it was compiled from."""
    nl = project / ".mekara/scripts/nl" / f"{name}.md"
    compiled = project / ".mekara/scripts/compiled" / f"{name}.star"
    nl.parent.mkdir(parents=True, exist_ok=True)
    compiled.parent.mkdir(parents=True, exist_ok=True)
    nl.write_text(f"---\ndescription: the Windows smoke test `{name}`\n---\n\n# {name}\n\n1. Do it.\n")
    compiled.write_text(f"# Compiled from nl/{name}.md.\n\n" + star)


class Suite:
    def __init__(self, runner: str, mekara: str, bash: str) -> None:
        self.runner = runner
        self.mekara = mekara
        self.project = Path(tempfile.mkdtemp(prefix="mekara-windows-smoke-"))
        home = self.project / "home"
        home.mkdir()
        self.env = dict(os.environ)
        self.env.update(
            {
                # Wine's drive Z: is the Linux root.
                "CLAUDE_CODE_GIT_BASH_PATH": "Z:" + str(Path(bash).resolve()).replace("/", "\\"),
                "USERPROFILE": str(home),
                "HOME": str(home),
                "NO_COLOR": "1",
                "MEKARA_LOG": "warn",
            }
        )
        (self.project / ".mekara").mkdir()
        script(self.project, "smoke", SMOKE_STAR)
        script(self.project, "asks", ASK_STAR)
        script(self.project, "killed", KILLED_STAR)

    def command(self, *args: str) -> list[str]:
        return [self.runner, self.mekara, *args]

    def run(self, *args: str, stdin: str = "", code: int = 0, cwd: Path | None = None, env: dict | None = None, inside: dict | None = None) -> subprocess.CompletedProcess:
        return self.run_program(self.command(*args), f"mekara {' '.join(args)}", stdin, code, cwd, env, inside)

    def run_program(self, command: list[str], shown: str, stdin: str = "", code: int = 0, cwd: Path | None = None, env: dict | None = None, inside: dict | None = None) -> subprocess.CompletedProcess:
        """Runs `command` (the runner, a program, its arguments) and checks its exit code.
        `inside` are variables set in Windows itself, by a `cmd` that then runs the program:
        Wine sets `USERPROFILE` and `APPDATA` of a program it starts to its prefix's, and
        drops `HOME`, so a home of the test's own is set this way (no word may hold a space)."""
        if inside:
            program, *args = command[1:]
            if "/" in program:
                program = windows(Path(program))
            line = "".join(f"set {key}={value}&& " for key, value in inside.items()) + " ".join([program, *args])
            command = [self.runner, "cmd", "/d", "/s", "/c", line]
        done = subprocess.run(
            command,
            cwd=cwd or self.project,
            env=env or self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=PART_TIMEOUT_SECONDS,
        )
        check(
            done.returncode == code,
            f"`{shown}` exited {done.returncode}, expected {code}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}",
        )
        return done

    def version(self) -> None:
        done = self.run("--version")
        check(done.stdout.startswith("mekara "), f"`--version` said {done.stdout!r}")
        print(f"ok: {done.stdout.strip()} starts under Wine")

    async def mcp(self) -> None:
        params = StdioServerParameters(
            command=self.runner, args=[self.mekara, "mcp"], cwd=str(self.project), env=self.env
        )
        with anyio.fail_after(PART_TIMEOUT_SECONDS):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    check(init.server_info.name == "mekara", f"server name {init.server_info.name!r}")
                    print(f"ok: `mekara mcp` over stdio answers initialize ({init.protocol_version})")
                    result = await session.call_tool("start", {"name": "smoke"})
                    reply = text_of(result)
                    check(not result.is_error, f"start failed:\n{reply}")
                    for expected in ("through-the-configured-shell", "through-cmd", "word"):
                        check(expected in reply, f"the start reply lacks `{expected}`:\n{reply}")
                    print("ok: start ran a function step and shell steps (configured shell, cmd), pends the llm step")
                    status = text_of(await session.call_tool("status", {}))
                    check("continue_compiled_script" in status, f"status shows no pending llm step:\n{status}")
                    print("ok: status shows the llm step pending")
                    result = await session.call_tool("continue_compiled_script", {"outputs": {"word": "wine"}})
                    reply = text_of(result)
                    check(not result.is_error, f"continue failed:\n{reply}")
                    for expected in ("The word was wine", "doubled 21 is 42", "the shell said through-the-configured-shell", "cmd through-cmd"):
                        check(expected in reply, f"the continue reply lacks `{expected}`:\n{reply}")
                    print("ok: continue ran the next function step and pends the last llm step with every value")
                    result = await session.call_tool("continue_compiled_script", {"outputs": {}})
                    reply = text_of(result)
                    check(not result.is_error and "complete" in reply.lower(), f"the run did not end:\n{reply}")
                    print("ok: the last continue ends the run")

    def ask(self) -> None:
        done = self.run("run", "asks", stdin="v1.2\n")
        check("release v1.2" in done.stdout + done.stderr, f"the answer did not reach the step:\n{done.stdout}\n{done.stderr}")
        print("ok: `mekara run` of a script with ask() took the answer from stdin")

    def hook(self) -> None:
        payload = {
            "session_id": "s",
            "cwd": str(self.project),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "/smoke",
        }
        done = self.run("hook", "reroute-user-commands", stdin=json.dumps(payload))
        answer = json.loads(done.stdout)
        context = answer["hookSpecificOutput"]["additionalContext"]
        check('"name":"smoke"' in context.replace(" ", ""), f"the hook did not send /smoke to start:\n{context}")
        print("ok: the UserPromptSubmit hook read its JSON from stdin and sent /smoke to `start`")

    def kill_and_resume(self) -> None:
        steps = self.project / "steps.txt"
        # What the killed run printed is kept beside the project, for a failure to show.
        said = self.project / "killed1.out"
        with open(said, "wb") as out:
            child = subprocess.Popen(
                self.command("run", "--run-id", "killed1", "killed"),
                cwd=self.project,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + PART_TIMEOUT_SECONDS
        while not (steps.exists() and steps.read_text().strip() == "once"):
            if time.monotonic() >= deadline or child.poll() is not None:
                ended = "it is still running" if child.poll() is None else f"it ended with {child.returncode}"
                os.killpg(child.pid, signal.SIGKILL)
                check(False, f"the first step never ran ({ended}); it printed:\n{said.read_text(errors='replace')}")
            time.sleep(0.1)
        time.sleep(3)  # into the long step
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        print("ok: mekara was killed (SIGKILL to Wine's process) in the long step")
        done = self.run("run", "--resume", "killed1")
        lines = steps.read_text().split()
        check(lines == ["once", "after"], f"steps.txt is {lines}: a finished step ran again, or one did not run")
        print(f"ok: the resume ran no finished step twice ({lines}); {done.stdout.strip().splitlines()[-1:]}")

    def plugin_env(self, mekara_on_path: bool) -> tuple[dict, dict, Path]:
        """The environment a client gives the plugin: Windows' PATH (Wine's, plus `WINEPATH`)
        holds mekara.exe's folder or not, and a new home (set inside Windows) holds no
        mekara. Returns the environment, the variables to set inside, and the home."""
        env = dict(self.env)
        env.pop("MEKARA_BIN", None)
        home = Path(tempfile.mkdtemp(prefix="plugin-home-", dir=self.project))
        if mekara_on_path:
            env["WINEPATH"] = windows(Path(self.mekara).parent)
        else:
            env.pop("WINEPATH", None)
        return env, {"USERPROFILE": windows(home)}, home

    async def plugin_server(self) -> None:
        """The plugin's server as a client on Windows starts `${CLAUDE_PLUGIN_ROOT}/bin/mekara`:
        the MCP SDK's cross-spawn finds `bin/mekara.cmd` by PATHEXT and runs it with `cmd /d /s
        /c`, which runs the mekara.exe it finds on PATH."""
        plugin = self.project / "plugin-cache" / "mekara"
        shutil.copytree(ROOT / "plugin", plugin)
        self.plugin = plugin
        launcher = windows(plugin / "bin" / "mekara.cmd")
        params = StdioServerParameters(
            command=self.runner,
            args=["cmd", "/d", "/s", "/c", launcher, "mcp", "--plugin"],
            cwd=str(self.project),
            env=self.plugin_env(mekara_on_path=True)[0],
        )
        with anyio.fail_after(PART_TIMEOUT_SECONDS):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    check(init.server_info.name == "mekara", f"server name {init.server_info.name!r}")
                    tools = [tool.name for tool in (await session.list_tools()).tools]
                    check("start" in tools, f"the plugin's server lists no `start`: {tools}")
        print("ok: the plugin's bin/mekara.cmd, run by cmd, starts the mekara.exe on PATH as `mcp --plugin`, which answers initialize and lists its tools")

    def plugin_hooks(self) -> None:
        """The plugin's hooks as cmd runs their command: `"${CLAUDE_PLUGIN_ROOT}/bin/mekara" hook
        ...`, the root a Windows path and the name without an extension."""
        named = windows(self.plugin) + "/bin/mekara"
        hook = ["cmd", "/d", "/c", named]
        payload = json.dumps({"session_id": "s", "cwd": str(self.project), "hook_event_name": "UserPromptSubmit", "prompt": "/smoke"})
        found, _, _ = self.plugin_env(mekara_on_path=True)
        done = self.run_program([self.runner, *hook, "hook", "reroute-user-commands", "--plugin"], "the plugin's UserPromptSubmit hook", stdin=payload, env=found)
        context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        check('"name":"smoke"' in context.replace(" ", ""), f"the plugin's hook did not send /smoke to start:\n{context}")
        print("ok: cmd runs `<plugin root>/bin/mekara hook reroute-user-commands --plugin` as bin/mekara.cmd, which hands stdin's JSON to mekara.exe")
        # MEKARA_BIN first, as the sh launcher does; its exit code comes back.
        chosen, inside, _ = self.plugin_env(mekara_on_path=False)
        chosen["MEKARA_BIN"] = windows(Path(self.mekara))
        done = self.run_program([self.runner, *hook, "--version"], "the launcher with MEKARA_BIN", env=chosen, inside=inside)
        check(done.stdout.startswith("mekara "), f"the launcher with MEKARA_BIN said {done.stdout!r}")
        self.run_program([self.runner, *hook, "no-such-command"], "the launcher with a wrong command", code=2, env=chosen, inside=inside)
        # cargo install's folder, with nothing on PATH.
        cargo, inside, home = self.plugin_env(mekara_on_path=False)
        bin_dir = home / ".cargo" / "bin"
        bin_dir.mkdir(parents=True)
        shutil.copy(self.mekara, bin_dir / "mekara.exe")
        shutil.copy(Path(self.mekara).parent / "bcryptprimitives.dll", bin_dir)
        done = self.run_program([self.runner, *hook, "--version"], "the launcher with ~/.cargo/bin", env=cargo, inside=inside)
        check(done.stdout.startswith("mekara "), f"the launcher with ~/.cargo/bin said {done.stdout!r}")
        print("ok: the launcher takes MEKARA_BIN first, then %USERPROFILE%\\.cargo\\bin, and passes mekara's exit code on")
        # No mekara anywhere: the SessionStart hook says how to install it, the others are
        # quiet and succeed, any other command fails with the sentence on stderr.
        missing, inside, _ = self.plugin_env(mekara_on_path=False)
        done = self.run_program([self.runner, *hook, "hook", "session-start", "--plugin"], "the SessionStart hook without mekara", stdin="{}", env=missing, inside=inside)
        answer = json.loads(done.stdout)
        told = answer["systemMessage"]
        check(told.startswith("mekara is not installed: install it with `pipx install mekara-cli`"), f"the SessionStart hook said {told!r}")
        check(told in answer["hookSpecificOutput"]["additionalContext"], f"the agent is not told: {answer}")
        for quiet in ["reroute-user-commands", "reroute-agent-commands"]:
            done = self.run_program([self.runner, *hook, "hook", quiet, "--plugin"], f"the {quiet} hook without mekara", stdin="{}", env=missing, inside=inside)
            check(done.stdout.strip() == "", f"the {quiet} hook without mekara said {done.stdout!r}")
        done = self.run_program([self.runner, *hook, "mcp"], "the launcher without mekara", code=127, env=missing, inside=inside)
        check("mekara is not installed" in done.stderr, f"the launcher without mekara said {done.stderr!r}")
        print("ok: without mekara the launcher's SessionStart hook says how to install it (JSON for the person and the agent), the other hooks stay quiet, `mcp` fails with 127")

    def install(self) -> None:
        """`mekara install` for every client in a project and with `--user`, on Windows paths:
        the home (USERPROFILE) and APPDATA in a temporary folder."""
        base = Path(tempfile.mkdtemp(prefix="install-", dir=self.project))
        home, appdata, project = base / "home", base / "appdata", base / "project"
        for folder in (home, appdata, project / ".mekara"):
            folder.mkdir(parents=True)
        env = dict(self.env, WINEPATH=windows(Path(self.mekara).parent))
        inside = {"USERPROFILE": windows(home), "APPDATA": windows(appdata)}
        args = [arg for client in CLIENTS for arg in ("--client", client)]
        for scope, where, extra in (("project", project, []), ("user", home, ["--user"])):
            done = self.run("install", *extra, *args, cwd=project, env=env, inside=inside)
            check("put `mekara` on your PATH" not in done.stdout, f"install did not see mekara.exe on PATH:\n{done.stdout}")
            self.check_installed(scope, where, done.stdout)
            again = self.run("install", *extra, *args, cwd=project, env=env, inside=inside)
            # Only the link again, which Wine never made (see check_installed).
            changes = again.stdout.split("Left for you:")[0].splitlines()[1:]
            changed = [line for line in changes if not line.startswith("  linked .claude\\commands")]
            check(changed == [], f"a second {scope} install changed something:\n{again.stdout}")
            print(f"ok: `mekara install{' --user' if extra else ''}` for Claude Code and {', '.join(CLIENTS)} wrote their files under {windows(where)}, each server `mekara mcp`, each hook `mekara hook NAME`; a second install changes nothing but the link Wine did not make")
        check(not any(appdata.iterdir()), f"install wrote under APPDATA: {list(appdata.iterdir())}")
        done = self.run("uninstall", *args, cwd=project, env=env, inside=inside)
        left = sorted(str(p.relative_to(project)) for p in project.rglob("*") if not str(p.relative_to(project)).startswith(".mekara"))
        check(left == [], f"uninstall left {left}:\n{done.stdout}")
        print("ok: `mekara uninstall` in the project removes every file and link install made (the scripts folder stays)")
        # npm on Windows puts only `mekara.cmd` on PATH: install says what that leaves out.
        npm = base / "npm"
        npm.mkdir()
        (npm / "mekara.cmd").write_text("@echo off\r\n")
        done = self.run("install", "--dry-run", cwd=project, env=dict(env, WINEPATH=windows(npm)), inside=inside)
        check("npm's `mekara.cmd` is there, but a client that starts `mekara` without a shell (Codex) finds only a `.exe`" in " ".join(done.stdout.split()), f"install with npm's mekara.cmd alone on PATH said:\n{done.stdout}")
        print("ok: with only npm's mekara.cmd on PATH, install says to put mekara.exe there")

    def check_installed(self, scope: str, where: Path, said: str) -> None:
        servers = {}
        if scope == "project":
            servers["Claude Code"] = json.loads((where / ".mcp.json").read_text())["mcpServers"]["mekara"]
            servers["Copilot CLI"] = servers["Claude Code"]
            servers["OpenCode"] = json.loads((where / "opencode.json").read_text())["mcp"]["mekara"]
            settings = json.loads((where / ".claude/settings.json").read_text())
        else:
            servers["Claude Code"] = json.loads((where / ".claude.json").read_text())["mcpServers"]["mekara"]
            servers["Copilot CLI"] = json.loads((where / ".copilot/mcp-config.json").read_text())["mcpServers"]["mekara"]
            servers["OpenCode"] = json.loads((where / ".config/opencode/opencode.json").read_text())["mcp"]["mekara"]
            settings = json.loads((where / ".claude/settings.json").read_text())
        servers["Codex"] = tomllib.loads((where / ".codex/config.toml").read_text())["mcp_servers"]["mekara"]
        servers["Gemini CLI"] = json.loads((where / ".gemini/settings.json").read_text())["mcpServers"]["mekara"]
        servers["Qwen Code"] = json.loads((where / ".qwen/settings.json").read_text())["mcpServers"]["mekara"]
        for client, entry in servers.items():
            command = entry["command"]
            words = command if isinstance(command, list) else [command, *entry.get("args", [])]
            check(words == ["mekara", "mcp"], f"{scope} install: {client}'s server runs {words}, not `mekara mcp`")
        hooks = [h["command"] for event in settings["hooks"].values() for matcher in event for h in matcher["hooks"]]
        check(len(hooks) >= 2, f"{scope} install: Claude Code's hooks are {hooks}")
        for command in hooks:
            check(HOOK_COMMAND.fullmatch(command) is not None, f"{scope} install: the hook `{command}` is not `mekara hook NAME`")
        # Wine's CreateSymbolicLinkW says it made a link and makes none, so the link itself
        # is not checked here; its target is, written with Windows' separator.
        check("linked .claude\\commands -> ..\\.mekara\\scripts\\nl" in said, f"{scope} install did not link .claude\\commands to ..\\.mekara\\scripts\\nl:\n{said}")
        check((where / ".mekara" / "scripts" / "nl" / "compile.md").is_file(), f"{scope} install wrote no command file for `/compile`")

    def notify(self) -> None:
        """A `[notify] command` in the person's config, run when a run completes: through the
        configured bash (the stand-in, which hands it to `cmd` in turn), then with no bash to
        be found, through `cmd` itself."""
        for how, drop in (("the configured bash", False), ("cmd, with no bash", True)):
            project = Path(tempfile.mkdtemp(prefix="notify-", dir=self.project))
            script(project, "done", 'def execute(request):\n    auto("echo done", shell = "cmd")\n')
            home = project / "home"
            (home / ".mekara").mkdir(parents=True)
            (home / ".mekara" / "config.toml").write_text('[notify]\ncommand = "echo %MEKARA_EVENT% %MEKARA_SCRIPT%>notified.txt"\n')
            env = dict(self.env)
            if drop:
                env.pop("CLAUDE_CODE_GIT_BASH_PATH")
            self.run("run", "done", cwd=project, env=env, inside={"USERPROFILE": windows(home)})
            said = (project / "notified.txt").read_text().strip() if (project / "notified.txt").exists() else None
            check(said == "completed done", f"the notify command through {how} wrote {said!r}")
            print(f"ok: a `[notify] command` ran through {how} when the run completed (it wrote {said!r})")


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    suite = Suite(*sys.argv[1:])
    print("note: shell steps use a stand-in bash.exe (tests/windows/standin_bash.c), not Git for Windows' bash, which does not run under Wine here")
    try:
        suite.version()
        anyio.run(suite.mcp)
        suite.ask()
        suite.hook()
        suite.kill_and_resume()
        anyio.run(suite.plugin_server)
        suite.plugin_hooks()
        suite.install()
        suite.notify()
    except Failure as failure:
        print(f"FAILED: {failure} (its files are kept in {suite.project})", file=sys.stderr)
        return 1
    # Each run's folder holds Wine's copies and journals (hundreds of MB): kept only on failure.
    shutil.rmtree(suite.project, ignore_errors=True)
    print("the Windows smoke suite passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
