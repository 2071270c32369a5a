// The options page: the one place a human sets token, port and label (saved in
// chrome.storage.local; the service worker reconnects when they change).
import { DEFAULTS, provisioned } from "./settings.js";

const $ = (id) => document.getElementById(id);

async function render() {
  const { settings = {} } = await chrome.storage.local.get("settings");
  const fixed = await provisioned();
  const merged = { ...DEFAULTS, ...settings, ...fixed };
  $("token").value = merged.token;
  $("port").value = merged.port;
  $("label").value = merged.label;
  $("default").checked = !!merged.default;
  for (const key of Object.keys(fixed)) $(key).disabled = true;
  if (Object.keys(fixed).length) {
    $("provisioned").hidden = false;
    $("provisioned").textContent = `Set by config.json next to the extension: ${Object.keys(fixed).join(", ")}.`;
  }
  $("extension-id").textContent = chrome.runtime.id;
  await refresh();
}

async function refresh() {
  // Read status and id fresh each time: the service worker writes them concurrently, and it
  // alone mints the id (two contexts minting at once would disagree).
  const { status, executorId } = await chrome.storage.local.get(["status", "executorId"]);
  $("executor-id").textContent = executorId || "";
  showStatus(status);
}

function showStatus(status) {
  $("status").textContent = status ? `status: ${status.state}${status.detail ? " — " + status.detail : ""}` : "status: not started";
  $("status").dataset.state = status ? status.state : "";
}

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const settings = {
    token: $("token").value.trim(),
    port: Number($("port").value) || DEFAULTS.port,
    label: $("label").value.trim(),
    default: $("default").checked,
  };
  await chrome.storage.local.set({ settings });
  $("saved").textContent = "saved";
});

chrome.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && (changes.status || changes.executorId)) refresh();
});

render();
