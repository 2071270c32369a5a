// The group registry: group name -> {groupId (Chrome tab group), tabs: [tab ids], active}.
// Persisted in chrome.storage.local because the service worker may be killed at any time and
// because a new broker (after failover) rebuilds ownership from our `tabs` answer.
let cache = null;
let chain = Promise.resolve();

async function load() {
  if (!cache) cache = (await chrome.storage.local.get("groups")).groups || {};
  return cache;
}

// Serialise read-modify-write cycles: concurrent commands must not lose each other's tabs.
function locked(fn) {
  const run = chain.then(async () => {
    const groups = await load();
    const result = await fn(groups);
    await chrome.storage.local.set({ groups });
    return result;
  });
  chain = run.catch(() => {});
  return run;
}

export function addTab(group, tabId, groupId) {
  return locked((groups) => {
    const entry = groups[group] || (groups[group] = { groupId: null, tabs: [], active: null });
    if (!entry.tabs.includes(tabId)) entry.tabs.push(tabId);
    entry.active = tabId;
    if (groupId != null) entry.groupId = groupId;
  });
}

export function removeTab(tabId) {
  // Returns {group, empty} when the tab was ours, else null.
  return locked((groups) => {
    for (const [name, entry] of Object.entries(groups)) {
      if (!entry.tabs.includes(tabId)) continue;
      entry.tabs = entry.tabs.filter((t) => t !== tabId);
      if (entry.active === tabId) entry.active = entry.tabs.at(-1) ?? null;
      const empty = entry.tabs.length === 0;
      if (empty) delete groups[name];
      return { group: name, empty };
    }
    return null;
  });
}

export function setActive(group, tabId) {
  return locked((groups) => { if (groups[group]) groups[group].active = tabId; });
}

export async function get(group) {
  const groups = await load();
  return groups[group] ? structuredClone(groups[group]) : null;
}

export function reconcile() {
  // Drop tabs closed while we were not watching (browser restart, killed worker) and
  // follow tabs the user dragged into another tab group.
  return locked(async (groups) => {
    const live = new Map((await chrome.tabs.query({})).map((t) => [t.id, t]));
    for (const [name, entry] of Object.entries(groups)) {
      entry.tabs = entry.tabs.filter((id) => live.has(id));
      if (!entry.tabs.includes(entry.active)) entry.active = entry.tabs.at(-1) ?? null;
      const first = live.get(entry.tabs[0]);
      if (first && first.groupId !== -1) entry.groupId = first.groupId;
      if (!entry.tabs.length) delete groups[name];
    }
    return { groups: structuredClone(groups), live };
  });
}
