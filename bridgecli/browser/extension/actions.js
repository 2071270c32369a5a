// The executor actions, with the same parameters and answers as the CDP executor
// (docs/browser-protocol.md, "Executor actions"). Every action is bounded by a timeout and
// every failure is an Error whose message says "problem — fix".
import * as registry from "./registry.js";

const DEFAULT_TIMEOUT_S = 30;

function fail(message) { throw new Error(message); }

function withTimeout(promise, seconds, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(
      `${what} did not finish within ${seconds} s — retry, or raise params.timeout`)), seconds * 1000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// A load wait that cannot miss its event: the listener is registered BEFORE the navigation
// starts and buffers the status of every tab (the tab id of a new tab is only known after
// tabs.create returns); a tabs.get poll backs it up. A same-document navigation (#hash,
// history.pushState) loads nothing: Chrome need not report any status for it, and while the
// page still fetches subresources the tab stays "loading" — so its own webNavigation event ends
// the wait, unless a cross-document navigation started in that tab during the wait (a page
// that calls pushState while it loads must not end the wait for its load).
function loadWatcher() {
  const seen = new Map();
  const errors = new Map();
  const sameDocument = new Set();
  const crossDocument = new Set();
  let wake = null;
  const listener = (tabId, info) => {
    if (!info.status) return;
    if (!seen.has(tabId)) seen.set(tabId, []);
    seen.get(tabId).push(info.status);
    if (wake) wake();
  };
  // A failed main-frame navigation still "completes" (Chrome shows its error page): report it.
  const onError = (details) => {
    if (details.frameId !== 0 || details.error === "net::ERR_ABORTED") return;
    errors.set(details.tabId, `navigation to ${details.url} failed: ${details.error} — check the URL and that its server is up`);
    if (wake) wake();
  };
  const onSameDocument = (details) => {
    if (details.frameId !== 0 || crossDocument.has(details.tabId)) return;
    sameDocument.add(details.tabId);
    if (wake) wake();
  };
  // Fired for cross-document navigations only (same-document ones skip it).
  const onBeforeNavigate = (details) => {
    if (details.frameId === 0) crossDocument.add(details.tabId);
  };
  chrome.tabs.onUpdated.addListener(listener);
  chrome.webNavigation.onErrorOccurred.addListener(onError);
  chrome.webNavigation.onBeforeNavigate.addListener(onBeforeNavigate);
  chrome.webNavigation.onReferenceFragmentUpdated.addListener(onSameDocument);
  chrome.webNavigation.onHistoryStateUpdated.addListener(onSameDocument);
  return {
    async wait(tabId, url, seconds, { startedLoading = false } = {}) {
      const deadline = Date.now() + seconds * 1000;
      for (;;) {
        if (errors.has(tabId)) fail(errors.get(tabId));
        if (sameDocument.has(tabId)) return;
        const statuses = seen.get(tabId) || [];
        const sawLoading = startedLoading || statuses.includes("loading");
        if (sawLoading && statuses.lastIndexOf("complete") > statuses.lastIndexOf("loading")) {
          if (errors.has(tabId)) fail(errors.get(tabId));
          return;
        }
        const tab = await chrome.tabs.get(tabId).catch(() => null);
        if (!tab) fail(`tab ${tabId} closed while loading — open it again`);
        if (sawLoading && tab.status === "complete" && !tab.pendingUrl) return;
        if (Date.now() > deadline) fail(`${url} did not finish loading within ${seconds} s — retry, or raise params.timeout`);
        await new Promise((resolve) => { wake = resolve; setTimeout(resolve, 250); });
        wake = null;
      }
    },
    dispose() {
      chrome.tabs.onUpdated.removeListener(listener);
      chrome.webNavigation.onErrorOccurred.removeListener(onError);
      chrome.webNavigation.onBeforeNavigate.removeListener(onBeforeNavigate);
      chrome.webNavigation.onReferenceFragmentUpdated.removeListener(onSameDocument);
      chrome.webNavigation.onHistoryStateUpdated.removeListener(onSameDocument);
    },
  };
}

async function page(tabId, op, args, seconds) {
  // page.js (shared with the CDP executor) lives in the isolated world; inject it on first use.
  const call = () => chrome.scripting.executeScript({
    target: { tabId },
    func: (op, args) => (typeof __bridgePage === "function" ? __bridgePage(op, args) : { missing: true }),
    args: [op, args],
  });
  const run = async () => {
    let [res] = await call();
    if (res && res.result && res.result.missing) {
      await chrome.scripting.executeScript({ target: { tabId }, files: ["page.js"] });
      [res] = await call();
    }
    const value = res && res.result;
    if (!value) fail(`${op} got no answer from the page — it may still be loading; retry`);
    if (value.error) fail(value.error);
    delete value.ok;
    return value;
  };
  return withTimeout(run(), seconds, op);
}

async function tabFor(group, params) {
  const entry = await registry.get(group);
  if (!entry || !entry.tabs.length) fail(`group "${group}" has no tabs in this browser — open one first with the open action`);
  if (params.tab == null) return entry.active ?? entry.tabs.at(-1);
  const wanted = Number(params.tab);
  if (!entry.tabs.includes(wanted)) fail(`tab ${params.tab} is not in group "${group}" — list the group's tabs with the tabs action`);
  await registry.setActive(group, wanted);
  return wanted;
}

async function joinGroup(group, tabId) {
  const entry = await registry.get(group);
  let groupId = null;
  if (entry && entry.groupId != null) {
    groupId = await chrome.tabs.group({ tabIds: [tabId], groupId: entry.groupId }).catch(() => null);
  }
  if (groupId == null) {
    // The Chrome tab group is gone (closed, or the browser restarted): make a new one.
    groupId = await chrome.tabs.group({ tabIds: [tabId] });
    await chrome.tabGroups.update(groupId, { title: group });
  }
  await registry.addTab(group, tabId, groupId);
}

async function capture(windowId) {
  // Chrome allows two captureVisibleTab calls per second per extension; wait out the quota
  // instead of failing (the outer timeout still bounds the action).
  for (;;) {
    try {
      return await chrome.tabs.captureVisibleTab(windowId, { format: "png" });
    } catch (e) {
      if (!String(e && e.message).includes("MAX_CAPTURE_VISIBLE_TAB_CALLS_PER_SECOND")) throw e;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

const ACTIONS = {
  async open(group, params, seconds) {
    const url = params.url || "about:blank";
    const watcher = loadWatcher();
    try {
      // In the background: an agent opening tabs must not steal the user's focus.
      const tab = await chrome.tabs.create({ url, active: false }).catch(async (e) => {
        // Every window closed (macOS keeps Chrome running without one): open a window for it.
        if (!String(e && e.message).includes("window")) throw e;
        const win = await chrome.windows.create({ url, focused: false });
        return win.tabs[0];
      });
      await joinGroup(group, tab.id);
      if (url !== "about:blank") await watcher.wait(tab.id, url, seconds, { startedLoading: true });
      const done = await chrome.tabs.get(tab.id);
      return { group, tab: tab.id, url: done.url, title: done.title };
    } finally {
      watcher.dispose();
    }
  },

  async navigate(group, params, seconds) {
    if (!params.url) fail("navigate needs a url — pass url=https://…");
    const tabId = await tabFor(group, params);
    const watcher = loadWatcher();
    try {
      await chrome.tabs.update(tabId, { url: params.url });
      await watcher.wait(tabId, params.url, seconds);
    } finally {
      watcher.dispose();
    }
    const tab = await chrome.tabs.get(tabId);
    return { group, tab: tabId, url: tab.url, title: tab.title };
  },

  async tabs(group) {
    const { groups, live } = await registry.reconcile();
    const names = group ? [group] : Object.keys(groups).sort();
    const out = [];
    for (const name of names) {
      const entry = groups[name];
      if (!entry) continue;
      out.push({
        group: name,
        tabs: entry.tabs.map((id) => ({ tab: id, url: live.get(id).url, title: live.get(id).title,
          active: id === entry.active })),
      });
    }
    return { groups: out };
  },

  async click(group, params, seconds) {
    return page(await tabFor(group, params), "click", { selector: params.selector }, seconds);
  },

  async type(group, params, seconds) {
    return page(await tabFor(group, params), "type",
      { selector: params.selector, text: params.text, clear: params.clear ?? true }, seconds);
  },

  async text(group, params, seconds) {
    return page(await tabFor(group, params), "text", { selector: params.selector }, seconds);
  },

  async snapshot(group, params, seconds) {
    return page(await tabFor(group, params), "snapshot", {}, seconds);
  },

  async screenshot(group, params, seconds) {
    const tabId = await tabFor(group, params);
    const tab = await chrome.tabs.get(tabId);
    if (!tab.active) {
      // captureVisibleTab only sees the active tab: bring ours to the front, let it paint.
      await chrome.tabs.update(tabId, { active: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const url = await withTimeout(capture(tab.windowId), seconds, "screenshot");
    return { tab: tabId, png: url.slice(url.indexOf(",") + 1) };
  },

  async close(group, params) {
    const entry = await registry.get(group);
    const tabs = params.tab != null ? [await tabFor(group, params)] : (entry ? entry.tabs : []);
    for (const tabId of tabs) {
      await registry.removeTab(tabId);
      await chrome.tabs.remove(tabId).catch(() => {}); // already gone: closing is idempotent
    }
    return { group, closed: tabs };
  },
};

export const ACTION_NAMES = Object.keys(ACTIONS);

export async function runAction(action, group, params) {
  const name = String(action || "").replace(/^browser_/, "");
  const fn = ACTIONS[name];
  if (!fn) fail(`unknown action '${name}' — use one of ${ACTION_NAMES.join(", ")}`);
  if (name !== "tabs" && !group) fail(`${name} needs a group — pass the group name`);
  const seconds = Number(params.timeout) || DEFAULT_TIMEOUT_S;
  // The outer bound covers every await inside the action (tab APIs included).
  return withTimeout(fn(group, params || {}, seconds), seconds + 5, name);
}
