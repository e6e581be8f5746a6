// Writes the package.json of mekara's npm packages (packaging/build runs it):
//
//   node packaging/npm.js main VERSION DIR             the `mekara` package (npm/mekara)
//   node packaging/npm.js platform VERSION ID DIR      `@mekara-dev/mekara-ID`, whose
//                                                      bin/mekara (bin/mekara.exe on
//                                                      Windows) is the binary for ID
//
// The main package lists every platform package as an optional dependency at the same
// version; npm installs only the one whose `os`, `cpu` and `libc` match the machine, and
// npm/mekara/bin/mekara.js runs its binary.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const SCOPE = "@mekara-dev";
// Each platform a release builds (.github/workflows/release.yml), and its npm fields.
const PLATFORMS = {
  "linux-x64-gnu": { os: "linux", cpu: "x64", libc: "glibc" },
  "linux-arm64-gnu": { os: "linux", cpu: "arm64", libc: "glibc" },
  "linux-x64-musl": { os: "linux", cpu: "x64", libc: "musl" },
  "linux-arm64-musl": { os: "linux", cpu: "arm64", libc: "musl" },
  "darwin-x64": { os: "darwin", cpu: "x64" },
  "darwin-arm64": { os: "darwin", cpu: "arm64" },
  "win32-x64": { os: "win32", cpu: "x64", exe: ".exe" },
};

const common = {
  license: "MIT",
  homepage: "https://github.com/mekara-dev/mekara",
  repository: { type: "git", url: "git+https://github.com/mekara-dev/mekara.git" },
};

function write(dir, manifest) {
  fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

const [kind, version, ...rest] = process.argv.slice(2);
if (kind === "main" && rest.length === 1) {
  const optionalDependencies = {};
  for (const id of Object.keys(PLATFORMS)) {
    optionalDependencies[`${SCOPE}/mekara-${id}`] = version;
  }
  write(rest[0], {
    name: "mekara",
    version,
    description:
      "Workflows as code for coding agents: deterministic steps run by mekara, the rest handed to the agent, every step journaled",
    keywords: ["mcp", "workflow", "agent", "starlark", "claude"],
    ...common,
    bin: { mekara: "bin/mekara.js" },
    files: ["bin/mekara.js"],
    engines: { node: ">=18" },
    optionalDependencies,
  });
} else if (kind === "platform" && rest.length === 2 && PLATFORMS[rest[0]]) {
  const [id, dir] = rest;
  const { os, cpu, libc, exe = "" } = PLATFORMS[id];
  write(dir, {
    name: `${SCOPE}/mekara-${id}`,
    version,
    description: `The mekara binary for ${id} (installed by the \`mekara\` npm package)`,
    ...common,
    os: [os],
    cpu: [cpu],
    ...(libc ? { libc: [libc] } : {}),
    files: [`bin/mekara${exe}`],
    preferUnplugged: true,
  });
} else {
  process.stderr.write(
    `usage: node packaging/npm.js main VERSION DIR | platform VERSION ID DIR ` +
      `(ID one of ${Object.keys(PLATFORMS).join(", ")})\n`,
  );
  process.exit(2);
}
