// Service worker: keeps one WebSocket to the bridge broker (role "extension"), answers its
// commands, reconnects with capped jittered backoff and keeps itself alive.
// An MV3 service worker is killed 30 s after its last WebSocket message (protocol pings do not
// count), so we send a JSON ping every 20 s; a 30 s alarm wakes a killed worker to reconnect.
import { loadSettings, setStatus } from "./settings.js";
import { runAction } from "./actions.js";
import * as registry from "./registry.js";

const KEEPALIVE_MS = 20000;
const BACKOFF_FIRST_MS = 250;
const BACKOFF_CAP_MS = 10000; // below 30 s so the retry timer fires before the worker is reaped
const CLOSE_BAD_TOKEN = 4001;
const CLOSE_REPLACED = 4004;
const HELLO_TIMEOUT_MS = 10000;

// Set when another live executor took over our id (a copied profile): reconnecting would make
// the two evict each other forever, so we wait for the user to change the settings.
let replaced = false;

let ws = null;
let backoff = BACKOFF_FIRST_MS;
let retryTimer = null;
let keepaliveTimer = null;

function send(sock, frame) {
  if (sock && sock.readyState === WebSocket.OPEN) sock.send(JSON.stringify(frame));
}

function scheduleReconnect(delay) {
  clearTimeout(retryTimer);
  const wait = delay ?? (backoff / 2 + Math.random() * backoff / 2);
  backoff = Math.min(BACKOFF_CAP_MS, backoff * 2);
  retryTimer = setTimeout(connect, wait);
}

let connecting = null;

function connect() {
  // Start-up events (top level, onStartup, onInstalled, alarms) may all call this at once;
  // they share one attempt, so there is never a second socket.
  if (!connecting) connecting = openSocket().finally(() => { connecting = null; });
  return connecting;
}

async function openSocket() {
  clearTimeout(retryTimer);
  if (replaced) return;
  if (ws && (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)) return;
  const settings = await loadSettings();
  if (!settings.token) {
    await setStatus("needs-token", "paste the token from `bridge token show` on the options page");
    return; // saving the options page reconnects
  }
  let sock;
  try {
    sock = new WebSocket(`ws://127.0.0.1:${settings.port}/`);
  } catch (e) {
    await setStatus("error", String(e));
    scheduleReconnect();
    return;
  }
  ws = sock;
  sock.onopen = () => {
    send(sock, {
      v: 1, type: "hello", token: settings.token, role: "extension", id: settings.id,
      label: settings.label, browser: "chrome", default: !!settings.default,
    });
    // Something that accepts the socket but never says ready is not a broker: try again later.
    sock.readyTimer = setTimeout(() => sock.close(4002, "no ready"), HELLO_TIMEOUT_MS);
  };
  sock.onmessage = (event) => onFrame(sock, event.data);
  sock.onerror = () => {}; // onclose follows and handles it
  sock.onclose = (event) => {
    if (ws === sock) ws = null;
    clearTimeout(sock.readyTimer);
    clearInterval(keepaliveTimer);
    if (event.code === CLOSE_REPLACED) {
      replaced = true;
      setStatus("replaced", "another browser connected with this executor id (a copied profile?) — save the options page to reconnect and take it back");
    } else if (event.code === CLOSE_BAD_TOKEN) {
      setStatus("token-refused", "the broker refused the token — paste the current one from `bridge token show`");
      scheduleReconnect(BACKOFF_CAP_MS);
    } else {
      setStatus("disconnected", `closed ${event.code} ${event.reason || ""}`.trim());
      scheduleReconnect();
    }
  };
}

async function onFrame(sock, raw) {
  let frame;
  try { frame = JSON.parse(raw); } catch { return; }
  if (frame.type === "ping") return send(sock, { type: "pong" });
  if (frame.type === "ready") {
    clearTimeout(sock.readyTimer);
    backoff = BACKOFF_FIRST_MS;
    clearInterval(keepaliveTimer);
    keepaliveTimer = setInterval(() => send(sock, { type: "ping" }), KEEPALIVE_MS);
    const settings = await loadSettings();
    return setStatus("connected", `as ${settings.label} (${frame.clientId}) on port ${settings.port}`);
  }
  if (frame.type !== "command") return;
  try {
    const data = await runAction(frame.action, frame.group, frame.params || {});
    send(sock, { type: "result", id: frame.id, ok: true, data });
  } catch (e) {
    send(sock, { type: "result", id: frame.id, ok: false,
      error: { code: "executor_error", message: (e && e.message) || String(e) } });
  }
}

// A tab of ours closed by the user: tell the broker (group_closed makes it forget the group).
chrome.tabs.onRemoved.addListener(async (tabId) => {
  const gone = await registry.removeTab(tabId);
  if (!gone) return;
  send(ws, { type: "event", event: "tab_closed", group: gone.group, data: { tab: tabId } });
  if (gone.empty) send(ws, { type: "event", event: "group_closed", group: gone.group, data: null });
});

chrome.storage.onChanged.addListener((changes, area) => {
  if (area !== "local" || !changes.settings) return;
  backoff = BACKOFF_FIRST_MS;
  replaced = false;
  if (ws) { const old = ws; ws = null; old.onclose = null; old.close(1000, "settings changed"); }
  clearInterval(keepaliveTimer);
  connect();
});

chrome.alarms.create("bridge-keepalive", { periodInMinutes: 0.5 });
chrome.alarms.onAlarm.addListener(() => connect());
chrome.runtime.onStartup.addListener(() => connect());
chrome.runtime.onInstalled.addListener(() => connect());
chrome.action.onClicked.addListener(() => chrome.runtime.openOptionsPage());
connect();
