// bridge dashboard page. Every value shown comes from the network and is untrusted: it is
// written with textContent (or as an SVG number), never parsed as HTML.
"use strict";

const MAX_ROWS = 500;       // traffic rows kept in the page
const SHOWN_ROWS = 150;     // traffic rows drawn
const SEARCH_DELAY = 300;   // ms of no typing before the history is searched
const $ = (id) => document.getElementById(id);
const page = { state: null, skew: 0, traffic: [], paused: false, pending: 0, skipped: 0,
               confirm: null, updates: 0, lag: { last: null, max: 0 },
               receipts: new Map(),  // msgId -> its state (a Map: no id can reach a prototype)
               search: { timer: null, asked: 0, answered: 0 } };  // history searches typed / drawn
window.bridgeDashboard = page;  // read by the end-to-end tests and the benchmark

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function tr(cells, cls) {
  const row = el("tr", null, cls);
  for (const cell of cells) {
    const td = el("td");
    if (cell instanceof Node) td.appendChild(cell); else td.textContent = cell == null ? "" : String(cell);
    row.appendChild(td);
  }
  return row;
}

function fill(tableId, rows) {
  const body = $(tableId).tBodies[0];
  const frag = document.createDocumentFragment();
  for (const row of rows) frag.appendChild(row);
  body.replaceChildren(frag);
}

const now = () => Date.now() / 1000 + page.skew;
const short = (gid) => (gid || "").slice(0, 13); // the host tag and 16 random bits

function duration(seconds) {
  if (seconds == null || isNaN(seconds)) return "?";
  seconds = Math.max(0, Math.round(seconds));
  if (seconds < 60) return seconds + "s";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m" + String(seconds % 60).padStart(2, "0") + "s";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h" + String(Math.floor(seconds % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(seconds / 86400) + "d" + Math.floor(seconds % 86400 / 3600) + "h";
}
const ago = (ts) => ts ? duration(now() - ts) + " ago" : "?";
const clock = (ts) => new Date(ts * 1000).toLocaleTimeString([], { hour12: false });
const dateTime = (ts) => new Date(ts * 1000).toLocaleString([], { hour12: false });

function options(selectId, values) {
  const select = $(selectId);
  const chosen = select.value;
  const items = [el("option", "all")];
  items[0].value = "";
  for (const value of values) { const o = el("option", value); o.value = value; items.push(o); }
  select.replaceChildren(...items);
  select.value = values.includes(chosen) ? chosen : "";
}

// --- views ------------------------------------------------------------------------------

function renderFleet() {
  const fleet = page.state && page.state.fleet;
  if (!fleet) return;
  fill("hosts", fleet.hosts.map((h) => tr([
    h.host + (h.local ? " (this host)" : ""), h.version, h.gone ? "gone" : duration(h.uptime),
    h.broker + (h.brokerServer ? " — " + h.brokerServer : ""),
    h.gone ? "gone " + ago(h.goneSince) : (h.lastSeen ? ago(h.lastSeen) : "now")], h.gone ? "gone" : "")));
  const hosts = [...new Set(fleet.entities.map((e) => e.host).concat(fleet.hosts.map((h) => h.host)))].sort();
  const roles = [...new Set(fleet.entities.map((e) => e.role))].sort();
  if (JSON.stringify(hosts) !== page.hostOptions) { page.hostOptions = JSON.stringify(hosts); options("filter-host", hosts); }
  if (JSON.stringify(roles) !== page.roleOptions) { page.roleOptions = JSON.stringify(roles); options("filter-role", roles); }
  const host = $("filter-host").value, role = $("filter-role").value;
  const label = $("filter-label").value.toLowerCase();
  const rows = fleet.entities.filter((e) => (!host || e.host === host) && (!role || e.role === role)
                                            && (!label || e.label.toLowerCase().includes(label)));
  fill("entities", rows.map((e) => {
    const gid = el("span", short(e.gid)); gid.title = e.gid;
    return tr([e.label, gid, e.host, e.role, e.backend, e.status, (e.channels || []).map((c) => "#" + c).join(" "),
               e.gone ? "gone " + ago(e.goneSince) : ago(e.lastSeen)], e.gone ? "gone" : "");
  }));
}

function renderHeld() {
  const held = page.state ? page.state.held : null;
  $("held-note").textContent = held === null ? "no local gateway: held messages are only known to it" :
    (held.length ? "" : "no entity on this host has held messages");
  fill("held", (held || []).map((h) => tr([h.label, short(h.gid), h.role, h.held, h.oldest ? ago(h.oldest) : "?"])));
}

function renderChannels() {
  const list = page.state ? page.state.channels : null;
  $("channels-note").textContent = list ? (list.length ? "" : "no channels yet: `bridge channel join NAME` makes one") :
    page.state && page.state.held === null ? "no local gateway: channels are listed by it" :
    "the local gateway cannot list channels (an older version: restart it after upgrading bridge)";
  fill("channels", (list || []).map((c) => {
    const who = el("td", null, "content");
    c.members.forEach((m, i) => {
      if (i) who.appendChild(document.createTextNode(", "));
      const member = el("span", m.label + "@" + m.host, "member");
      member.title = m.gid;
      who.appendChild(member);
    });
    const row = tr(["#" + c.name, c.members.length]);
    row.appendChild(who);
    row.dataset.channel = c.name;
    return row;
  }));
  const names = (list || []).map((c) => c.name);
  if (JSON.stringify(names) !== page.channelOptions) { page.channelOptions = JSON.stringify(names); options("history-channel", names); }
}

function labelOf(gid) {
  const fleet = page.state && page.state.fleet;
  const entity = fleet && fleet.entities.find((e) => e.gid === gid);
  if (entity) return entity.label;
  const channel = page.state && page.state.channels && page.state.channels.find((c) => c.gid === gid);
  return channel ? "#" + channel.name : short(gid);  // a channel message's "to" is the channel's own id
}

function trafficMatches(row, needle) {
  if (!needle) return true;
  const fields = [row.from, row.fromLabel, row.to, labelOf(row.to), labelOf(row.from), row.routing_key];
  return fields.some((f) => f && String(f).toLowerCase().includes(needle));
}

// a message's states, in the order it reaches them; the furthest is shown, all in the tooltip
const STATES = ["sent", "delivered", "read", "dead-lettered"];
const STATE_CLASS = { "sent": "st-sent", "delivered": "st-delivered", "read": "st-read", "dead-lettered": "st-dead" };
const STATE_COLUMN = 4;  // the traffic table's state column (0-based)

function receiptCell(msgId) {
  const td = el("td", null, "receipt");
  const r = page.receipts.get(msgId);
  if (!r) return td;  // not sent from this host, or no receipt yet
  td.appendChild(el("span", r.state, "state " + (STATE_CLASS[r.state] || "")));
  if (r.detail) {
    const detail = String(r.detail);
    td.appendChild(el("small", detail.length > 24 ? detail.slice(0, 24) + "…" : detail, "muted"));  // all of it on hover
  }
  td.title = STATES.filter((s) => r.states && r.states[s]).map((s) => {
    const st = r.states[s], why = st.how || st.reason;
    return s + " " + (st.at ? clock(st.at) : "?") + (why ? " (" + why + ")" : "");
  }).join("\n");
  return td;
}

function applyReceipts(changed) {
  const ids = Object.keys(changed);
  for (const id of ids) page.receipts.set(id, changed[id]);
  if (page.receipts.size > 4 * MAX_ROWS) {  // forget the states of rows the page no longer has
    const kept = new Set(page.traffic.map((m) => m.msgId));
    for (const id of page.receipts.keys()) if (!kept.has(id)) page.receipts.delete(id);
  }
  const fresh = new Set(ids);
  for (const row of $("traffic").tBodies[0].rows) {
    if (row.dataset.msgId !== undefined && fresh.has(row.dataset.msgId)) {
      row.cells[STATE_COLUMN].replaceWith(receiptCell(row.dataset.msgId));
    }
  }
}

function renderTraffic() {
  const needle = $("traffic-filter").value.toLowerCase();
  const rows = [];
  for (let i = page.traffic.length - 1; i >= 0 && rows.length < SHOWN_ROWS; i--) {
    const m = page.traffic[i];
    if (!trafficMatches(m, needle)) continue;
    if (m.invalid) {
      rows.push(tr([clock(m.seen), "INVALID", "→ " + m.routing_key, m.size, "", m.invalid + ": " + m.body]));
      continue;
    }
    const who = el("span", (m.fromLabel || labelOf(m.from)) + " → " + labelOf(m.to));
    who.title = m.from + " → " + m.to;
    const content = el("td", m.content + (m.truncated ? "…" : ""), "content");
    const row = tr([clock(m.ts), m.kind, who, m.size]);
    row.appendChild(receiptCell(m.msgId));
    row.appendChild(content);
    row.className = "clickable";
    row.dataset.msgId = m.msgId;
    row.addEventListener("click", () => openMessage(m.msgId));
    rows.push(row);
  }
  fill("traffic", rows);
  renderTrafficNote();
}

function renderTrafficNote() {
  const notes = [];
  if (page.paused) notes.push("paused: " + page.pending + " new message(s) not shown");
  if (page.skipped) notes.push(page.skipped + " message(s) went by faster than the page draws (counted in throughput)");
  $("traffic-note").textContent = notes.join("; ");
}

async function openMessage(msgId) {
  const reply = await fetch("/api/message/" + encodeURIComponent(msgId));
  const data = await reply.json();
  $("message").hidden = false;
  const fields = $("message-fields");
  if (!reply.ok) {
    fields.replaceChildren(el("dt", "error"), el("dd", data.error));
    $("message-content").textContent = "";
    $("message-thread").replaceChildren();
    return;
  }
  const m = data.message;
  const pairs = [["id", m.msgId], ["kind", m.kind], ["from", (m.fromLabel || "") + " " + m.from + (m.fromHost ? " @" + m.fromHost : "")],
                 ["to", labelOf(m.to) + " " + m.to + (m.toHost ? " @" + m.toHost : "")], ["time", new Date(m.ts * 1000).toISOString()],
                 ["in reply to", m.inReplyTo || "—"], ["size", m.size + " characters"]];
  fields.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
  $("message-content").textContent = m.content;
  $("message-thread").replaceChildren(...data.thread.map((t) => {
    const item = el("li", clock(t.ts) + " " + t.kind + " " + (t.fromLabel || labelOf(t.from)) + " → " + labelOf(t.to) + ": " + t.content,
                    t.msgId === m.msgId ? "current" : "");
    item.addEventListener("click", () => openMessage(t.msgId));
    return item;
  }));
}

// --- history search -----------------------------------------------------------------------

function searchSoon() {
  const asked = ++page.search.asked;  // counted when typed: an answer to older text is dropped
  clearTimeout(page.search.timer);
  page.search.timer = setTimeout(() => searchHistory(asked), SEARCH_DELAY);
}

async function searchHistory(asked) {
  const q = $("history-q").value.trim(), channel = $("history-channel").value;
  if (!q && !channel) {
    page.search.answered = asked;
    $("history-note").textContent = "";
    fill("history", []);
    return;
  }
  const params = new URLSearchParams({ q });
  if (channel) params.set("channel", channel);
  $("history-note").textContent = "searching…";
  let ok = false, data;
  try {
    const reply = await fetch("/api/history?" + params);
    ok = reply.ok;
    data = await reply.json();
  } catch (error) {
    ok = false;
    data = { error: String(error) };
  }
  if (asked !== page.search.asked) return;  // typed on since: a newer search is coming
  page.search.answered = asked;
  if (!ok) {
    $("history-note").textContent = "search failed: " + data.error;
    fill("history", []);
    return;
  }
  const found = data.messages;
  $("history-note").textContent = found.length ? found.length + " message(s), newest first" : "no message matches";
  fill("history", found.map((m) => {
    const who = el("span", (m.fromLabel || labelOf(m.from)) + " → " + (m.channel ? "#" + m.channel : labelOf(m.to)));
    who.title = m.from + (m.fromHost ? " @" + m.fromHost : "") + " → " + m.to;
    const row = tr([m.ts ? dateTime(m.ts) : "?", m.directions.join(" + "), who]);
    row.appendChild(el("td", m.content + (m.truncated ? "…" : ""), "content"));
    row.dataset.msgId = m.msgId;
    return row;
  }));
}

function renderDeadLetters() {
  const dl = page.state && page.state.deadLetters;
  if (!dl) return;
  $("dlq-note").textContent = dl.error ? "cannot read bridge.dlq: " + dl.error : (dl.rows.length ? "" : "bridge.dlq is empty");
  fill("dlq", dl.rows.map((r) => {
    const button = el("button", "Retry");
    button.type = "button";
    button.addEventListener("click", () => ask("Retry dead letter " + r.id + " to its recipient?", "/api/dlq/retry", { ids: [r.id] }));
    const row = tr([r.id, r.reason, r.queue, el("span", r.detail, "wrap"), button]);
    row.dataset.id = r.id;
    return row;
  }));
}

function ask(question, url, body) {
  page.confirm = { url, body };
  $("confirm-text").textContent = question;
  $("confirm").hidden = false;
}

async function confirmed() {
  const action = page.confirm;
  page.confirm = null;
  $("confirm").hidden = true;
  if (!action) return;
  try {
    const reply = await fetch(action.url, { method: "POST", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify(action.body) });
    const data = await reply.json();
    $("dlq-result").textContent = !reply.ok ? "failed: " + data.error :
      data.retried ? "re-published " + data.retried.length + " message(s)" : "purged " + data.purged + " message(s)";
  } catch (error) {
    $("dlq-result").textContent = "failed: " + error;
  }
}

function renderBrowser() {
  const b = page.state && page.state.browser;
  if (!b) return;
  $("browser-note").textContent = b.running ? "" : "no browser broker on 127.0.0.1:" + b.port + (b.why ? " (" + b.why + ")" : "");
  fill("executors", (b.executors || []).map((e) => tr([e.label, e.id, e.kind, e.default ? "yes" : "", e.groups.join(", ")])));
  fill("agents", (b.agents || []).map((a) => tr([a.label || "(no label)", a.id, a.groups.join(", ")])));
  fill("groups", (b.groups || []).map((g) => tr([g.group, g.executor, g.owner, g.connected ? "yes" : "no"])));
}

const SVG = "http://www.w3.org/2000/svg";
function sparkline(values, cls) {
  const width = 96, height = 24, top = Math.max(1, ...values);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark " + cls);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const line = document.createElementNS(SVG, "polyline");
  const step = width / Math.max(1, values.length - 1);
  line.setAttribute("points", values.map((v, i) => (i * step).toFixed(1) + "," + (height - 1 - (v / top) * (height - 2)).toFixed(1)).join(" "));
  svg.appendChild(line);
  const cell = el("span", null, "spark-cell");
  cell.appendChild(svg);
  cell.appendChild(el("span", (values[values.length - 1] || 0) + "/s, max " + top, "muted"));
  return cell;
}

function renderRates(rates) {
  fill("rates", Object.keys(rates).sort().map((host) => tr([host, sparkline(rates[host].sent, "sent"),
    sparkline(rates[host].delivered, "delivered"), sparkline(rates[host].dead, "dead")])));
}

function renderHeader() {
  const s = page.state;
  $("host").textContent = s && s.host ? "on " + s.host : "";
  $("missing").replaceChildren(...((s && s.missing) || []).map((text) => el("li", text)));
}

// --- the live stream ----------------------------------------------------------------------

function apply(update) {
  page.updates += 1;
  page.skew = update.now - Date.now() / 1000;
  if (update.state) {
    page.state = update.state;
    renderHeader(); renderFleet(); renderChannels(); renderHeld(); renderDeadLetters(); renderBrowser();
  } else if (page.updates % 4 === 0) {
    renderFleet(); renderHeld();  // the "ago" columns
  }
  if (update.traffic) {
    page.traffic.push(...update.traffic);
    if (page.traffic.length > MAX_ROWS) page.traffic.splice(0, page.traffic.length - MAX_ROWS);
    page.skipped += update.skipped || 0;
    if (page.paused) { page.pending += update.traffic.length; renderTrafficNote(); } else renderTraffic();
    // lag = drawn now minus sent then, for the newest row (same machine's clock in the benchmark)
    const newest = update.traffic[update.traffic.length - 1];
    if (newest && newest.ts) {
      page.lag.last = Date.now() / 1000 - newest.ts;
      page.lag.max = Math.max(page.lag.max, page.lag.last);
    }
  }
  if (update.receipts) applyReceipts(update.receipts);
  if (update.rates) { page.rates = update.rates; renderRates(update.rates); }
}

function connect() {
  const source = new EventSource("/api/events");
  source.onopen = () => { $("conn").textContent = "live"; $("conn").className = "badge ok"; };
  source.onmessage = (event) => apply(JSON.parse(event.data));
  source.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "badge bad"; };
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["filter-host", "filter-role", "filter-label"]) $(id).addEventListener("input", renderFleet);
  $("traffic-filter").addEventListener("input", renderTraffic);
  $("history-q").addEventListener("input", searchSoon);
  $("history-channel").addEventListener("input", searchSoon);
  $("pause").addEventListener("click", () => {
    page.paused = !page.paused;
    page.pending = 0;
    $("pause").textContent = page.paused ? "Resume" : "Pause";
    renderTraffic();
  });
  $("message-close").addEventListener("click", () => { $("message").hidden = true; });
  $("dlq-retry-all").addEventListener("click", () => ask("Retry every dead letter to its recipient?", "/api/dlq/retry", { all: true }));
  $("dlq-purge").addEventListener("click", () => ask("Delete every message in bridge.dlq? This cannot be undone.", "/api/dlq/purge", {}));
  $("confirm-yes").addEventListener("click", confirmed);
  $("confirm-no").addEventListener("click", () => { page.confirm = null; $("confirm").hidden = true; });
  connect();
});
