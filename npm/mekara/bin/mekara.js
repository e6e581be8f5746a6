#!/usr/bin/env node
// The `mekara` command of the npm package: finds the package with this platform's prebuilt
// binary (one of the main package's optionalDependencies, of which npm installs only the one
// whose `os`, `cpu` and `libc` match), runs the binary with this process's arguments,
// standard streams and environment, and ends as it ended: with its exit code, or killed by
// the same signal.
"use strict";

const { spawn } = require("node:child_process");
const { constants } = require("node:os");
const path = require("node:path");

const SCOPE = "@mekara-dev";

/** "gnu" or "musl": the C library Node itself runs on (Linux only). */
function linuxLibc() {
  const header = process.report && process.report.getReport().header;
  return header && header.glibcVersionRuntime ? "gnu" : "musl";
}

/** This platform's names ("linux-x64-gnu", "darwin-arm64"), the best first. */
function platforms() {
  const { platform, arch } = process;
  if (platform !== "linux") {
    return [`${platform}-${arch}`];
  }
  // The musl builds are static, so they also run where glibc is the C library.
  const order = linuxLibc() === "gnu" ? ["gnu", "musl"] : ["musl"];
  return order.map((libc) => `${platform}-${arch}-${libc}`);
}

/** The npm package with the binary for `platform`. */
function packageName(platform) {
  return `${SCOPE}/mekara-${platform}`;
}

function findBinary() {
  for (const name of platforms().map(packageName)) {
    try {
      const manifest = require.resolve(`${name}/package.json`);
      const file = process.platform === "win32" ? "mekara.exe" : "mekara";
      return path.join(path.dirname(manifest), "bin", file);
    } catch {
      // not installed: try the next one
    }
  }
  return null;
}

const binary = findBinary();
if (binary === null) {
  const platform = platforms()[0];
  process.stderr.write(
    `mekara: no prebuilt binary for this platform (${platform}): ` +
      `the package ${packageName(platform)} is not installed (npm leaves it out with --omit=optional, ` +
      `and there is none for a platform mekara is not built for); reinstall without ` +
      `--omit=optional, or install mekara another way: \`pipx install mekara-cli\` or ` +
      `\`cargo install --locked mekara\`\n`,
  );
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });

child.on("error", (error) => {
  process.stderr.write(`mekara: cannot run ${binary}: ${error.message}\n`);
  process.exit(1);
});

// Signals sent to this process go on to mekara. Ctrl-C in a terminal is the exception: the
// terminal sends SIGINT to mekara itself (it is in the same process group), and a second
// copy from here would make `mekara run` leave at once (exit 130) instead of stopping the
// running step.
const inTerminal = process.stdin.isTTY || process.stdout.isTTY || process.stderr.isTTY;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (signal === "SIGINT" && inTerminal) {
      return;
    }
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  });
}

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so that whoever started us sees it; the exit code stands in
    // where the signal is ignored here.
    process.removeAllListeners(signal);
    process.exitCode = 128 + (constants.signals[signal] || 0);
    process.kill(process.pid, signal);
  } else {
    process.exit(code === null ? 1 : code);
  }
});
