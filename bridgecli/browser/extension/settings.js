// Settings of the executor: port, token, label, default — and the stable executor id.
// Sources, later wins: defaults < what the user saved on the options page < config.json
// shipped next to the manifest (provisioning for automation and tests; see README.md).
export const DEFAULTS = { port: 4517, token: "", label: "", default: false };
export const PROVISIONED_KEYS = ["port", "token", "label", "default"];

let provisionedCache = null;

export async function provisioned() {
  // config.json is read once per service-worker life: it can only change on reload.
  if (provisionedCache) return provisionedCache;
  try {
    const reply = await fetch(chrome.runtime.getURL("config.json"));
    const data = reply.ok ? await reply.json() : {};
    provisionedCache = Object.fromEntries(
      Object.entries(data).filter(([key]) => PROVISIONED_KEYS.includes(key)));
  } catch {
    provisionedCache = {};
  }
  return provisionedCache;
}

let idPromise = null;

export function executorId() {
  // Generated once per install and persisted: the broker keys group ownership on it, so a
  // reconnect (or a new broker after failover) finds this browser's groups again. One
  // promise per worker life, so concurrent start-up events cannot mint two ids.
  if (!idPromise) {
    idPromise = (async () => {
      const { executorId } = await chrome.storage.local.get("executorId");
      if (executorId) return executorId;
      const id = "ext-" + crypto.randomUUID();
      await chrome.storage.local.set({ executorId: id });
      return id;
    })();
  }
  return idPromise;
}

export async function loadSettings() {
  const { settings } = await chrome.storage.local.get("settings");
  const merged = { ...DEFAULTS, ...(settings || {}), ...(await provisioned()) };
  merged.port = Number(merged.port) || DEFAULTS.port;
  merged.id = await executorId();
  merged.label = (merged.label || "").trim() || merged.id;
  return merged;
}

export async function setStatus(state, detail = "") {
  await chrome.storage.local.set({ status: { state, detail, at: Date.now() } });
}
