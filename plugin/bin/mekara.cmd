@echo off
rem mekara-launcher: how mekara's Claude Code plugin (and Gemini CLI extension) runs mekara on
rem Windows. `bin/mekara` beside it is the same launcher in `sh`, for Linux, macOS and Git Bash.
rem
rem Windows cannot start that `sh` script, so the plugin's entries reach this file instead:
rem the plugin names `${CLAUDE_PLUGIN_ROOT}/bin/mekara`, without an extension, and a client
rem that looks the name up the way Windows does (the MCP SDK's cross-spawn for the server;
rem cmd.exe for a hook) takes `mekara.cmd`. A hook run by Git Bash runs the `sh` one.
rem
rem It runs the installed mekara with the same arguments, found in order at MEKARA_BIN,
rem `mekara.exe` on PATH, where `cargo install` and pipx or `uv tool install` put programs,
rem then npm's `mekara.cmd` on PATH (never this file). With none, it says how to install it,
rem once, in the SessionStart hook, stays quiet in the other hooks (a hook must never break a
rem session), and fails every other command with the same sentence on stderr.
setlocal EnableExtensions DisableDelayedExpansion
set "mekara_found="
if defined MEKARA_BIN if exist "%MEKARA_BIN%" set "mekara_found=%MEKARA_BIN%"
if not defined mekara_found for %%P in (mekara.exe) do set "mekara_found=%%~$PATH:P"
if not defined mekara_found if exist "%USERPROFILE%\.cargo\bin\mekara.exe" set "mekara_found=%USERPROFILE%\.cargo\bin\mekara.exe"
if not defined mekara_found if exist "%USERPROFILE%\.local\bin\mekara.exe" set "mekara_found=%USERPROFILE%\.local\bin\mekara.exe"
if not defined mekara_found for %%P in (mekara.cmd) do if /i not "%%~dp$PATH:P"=="%~dp0" set "mekara_found=%%~$PATH:P"
if not defined mekara_found goto missing
"%mekara_found%" %*
exit /b %ERRORLEVEL%

:missing
set "install=mekara is not installed: install it with `pipx install mekara-cli` (or `npm install -g mekara`, or `cargo install --locked mekara`), then restart the agent"
if /i not "%~1"=="hook" goto fail
if /i not "%~2"=="session-start" exit /b 0
echo {"systemMessage": "%install%", "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "The mekara plugin is enabled, but %install%. Until then its tools and commands cannot work: tell the user this if they ask for a mekara script or command."}}
exit /b 0

:fail
>&2 echo %install%
exit /b 127
