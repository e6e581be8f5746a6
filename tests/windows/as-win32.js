// For tests/windows/packages.sh only: makes Node say it runs on win32 (x64) and print the
// program and arguments a script spawns instead of spawning it, so that the npm launcher
// (npm/mekara/bin/mekara.js) shows on Linux which binary it would start on Windows.
"use strict";
const childProcess = require("node:child_process");
const { EventEmitter } = require("node:events");

Object.defineProperty(process, "platform", { value: "win32" });
Object.defineProperty(process, "arch", { value: "x64" });
childProcess.spawn = (program, args) => {
  process.stdout.write(`${[program, ...args].join(" ")}\n`);
  const child = new EventEmitter();
  child.exitCode = 0;
  setImmediate(() => child.emit("exit", 0, null));
  return child;
};
