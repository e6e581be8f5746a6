"""The Windows smoke suite: mekara.exe, built for x86_64-pc-windows-gnu, driven under Wine.

Usage: smoke.py RUNNER MEKARA_EXE STANDIN_BASH

RUNNER runs a Windows program (tests/windows/wine-run); MEKARA_EXE is the Windows build;
STANDIN_BASH is the stand-in for Git for Windows' bash.exe (standin_bash.c), which mekara is
pointed at through CLAUDE_CODE_GIT_BASH_PATH because Git for Windows does not run under Wine
here. Each part prints `ok: ...`; the first failed check exits 1 with what was wrong.

The parts: `mekara mcp` over stdio driven by the official Python MCP SDK (start, an llm step,
continue, status), function steps, shell steps through the configured shell and through
`shell = "cmd"`, `mekara run` of a script with an `ask()` answered on stdin, a hook with its
JSON on stdin, and a run killed in a long step and resumed, which runs no finished step again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
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

    def run(self, *args: str, stdin: str = "", code: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run(
            self.command(*args),
            cwd=self.project,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=PART_TIMEOUT_SECONDS,
        )
        check(
            done.returncode == code,
            f"`mekara {' '.join(args)}` exited {done.returncode}, expected {code}\n"
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
        child = subprocess.Popen(
            self.command("run", "--run-id", "killed1", "killed"),
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + PART_TIMEOUT_SECONDS
        while not (steps.exists() and steps.read_text().strip() == "once"):
            check(time.monotonic() < deadline, "the first step never ran")
            time.sleep(0.1)
        time.sleep(3)  # into the long step
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        print("ok: mekara was killed (SIGKILL to Wine's process) in the long step")
        done = self.run("run", "--resume", "killed1")
        lines = steps.read_text().split()
        check(lines == ["once", "after"], f"steps.txt is {lines}: a finished step ran again, or one did not run")
        print(f"ok: the resume ran no finished step twice ({lines}); {done.stdout.strip().splitlines()[-1:]}")


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
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    print("the Windows smoke suite passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
