// Drives headless Chromium through the DevTools protocol, for tests/it/ui.rs: no npm package,
// only Node's own WebSocket (`node --experimental-websocket`, Node 20.10 and later).
//
//   node --experimental-websocket tests/ui/browser.js PLAN.json
//
// PLAN.json: {"chromium": PATH, "profile": DIR, "steps": [...]}, each step one of
//   {"open": URL}                      navigate, and wait for the page's load
//   {"wait": JS, "timeout_ms": N}      evaluate JS until it is truthy (default 20 s)
//   {"eval": JS}                       evaluate JS once
//   {"dom": PATH}                      write the page's DOM to PATH
//   {"shot": PATH, "width": W, "height": H}  write a PNG of the page at that size
//   {"touch": PATH}                    create an empty file (to move a run on)
// It prints one line per step, and exits 1 with the reason when a step fails.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");

const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const chrome = spawn(plan.chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--hide-scrollbars", "--remote-debugging-port=0", "--user-data-dir=" + plan.profile,
  "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });

function fail(why) {
  console.log("failed: " + why);
  chrome.kill("SIGKILL");
  process.exit(1);
}
setTimeout(() => fail("the plan took more than 120 s"), 120000).unref();

const address = new Promise((resolve) => {
  let text = "";
  chrome.stderr.on("data", (chunk) => {
    text += chunk;
    const found = /DevTools listening on (ws:\/\/\S+)/.exec(text);
    if (found) resolve(found[1]);
  });
});

let socket;
let next = 0;
const waiting = new Map();
const listeners = [];
function send(method, params = {}, sessionId) {
  const id = ++next;
  socket.send(JSON.stringify({ id, method, params, sessionId }));
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject, method }));
}
function once(method) {
  return new Promise((resolve) => listeners.push({ method, resolve }));
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

(async () => {
  socket = new WebSocket(await address);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = () => reject(new Error("cannot reach Chromium's DevTools"));
  });
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.id && waiting.has(message.id)) {
      const call = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error) call.reject(new Error(call.method + ": " + message.error.message));
      else call.resolve(message.result);
    } else if (message.method) {
      for (let i = listeners.length - 1; i >= 0; i--) {
        if (listeners[i].method === message.method) {
          listeners[i].resolve(message.params);
          listeners.splice(i, 1);
        }
      }
    }
  };
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  await page("Page.enable");
  await page("Runtime.enable");
  const evaluate = async (expression) => {
    const { result, exceptionDetails } = await page("Runtime.evaluate", {
      expression, returnByValue: true, awaitPromise: true,
    });
    if (exceptionDetails) throw new Error(expression + ": " + exceptionDetails.text);
    return result.value;
  };
  for (const step of plan.steps) {
    if (step.open) {
      const loaded = once("Page.loadEventFired");
      await page("Page.navigate", { url: step.open });
      await loaded;
      console.log("opened " + step.open.replace(/token=[0-9a-f]+/, "token=…"));
    } else if (step.wait) {
      const deadline = Date.now() + (step.timeout_ms || 20000);
      while (!(await evaluate(step.wait))) {
        if (Date.now() > deadline) fail("never true: " + step.wait);
        await sleep(50);
      }
      console.log("true: " + step.wait);
    } else if (step.eval) {
      console.log("= " + JSON.stringify(await evaluate(step.eval)));
    } else if (step.dom) {
      fs.writeFileSync(step.dom, await evaluate("document.documentElement.outerHTML"));
      console.log("dom " + step.dom);
    } else if (step.shot) {
      await page("Emulation.setDeviceMetricsOverride", {
        width: step.width, height: step.height, deviceScaleFactor: 1, mobile: false,
      });
      await sleep(200);
      const { data } = await page("Page.captureScreenshot", { format: "png", captureBeyondViewport: false });
      fs.writeFileSync(step.shot, Buffer.from(data, "base64"));
      console.log("shot " + step.shot);
    } else if (step.touch) {
      fs.writeFileSync(step.touch, "");
      console.log("touched " + step.touch);
    } else {
      fail("unknown step " + JSON.stringify(step));
    }
  }
  chrome.kill("SIGKILL");
  process.exit(0);
})().catch((e) => fail(e.message));
