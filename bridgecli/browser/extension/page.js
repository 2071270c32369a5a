// Page-side helpers shared by BOTH executors (the extension injects this file into an
// isolated world; the CDP executor evaluates it), so click/type/text/snapshot behave and
// fail identically whichever browser target runs the group.
// Every helper returns a plain JSON object: {ok: true, ...} or {error: "problem — fix"}.
function __bridgePage(op, args) {
  const MAX_TEXT = 200000;
  const find = (sel) => {
    if (typeof sel !== "string" || !sel) return [null, "selector is required — pass selector=CSS"];
    let el;
    try { el = document.querySelector(sel); } catch (e) {
      return [null, `invalid selector ${sel} — use a CSS selector such as #id or button.primary`];
    }
    return el ? [el, null] : [null, `no element matches ${sel} — check the selector with the snapshot action`];
  };
  const clip = (text) => text.length > MAX_TEXT
    ? { text: text.slice(0, MAX_TEXT), truncated: true } : { text, truncated: false };
  const visible = (el) => {
    const style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden" && el.getClientRects().length > 0;
  };
  const hint = (el) => {
    if (el.id) return "#" + CSS.escape(el.id);
    if (el.getAttribute("name")) return `${el.tagName.toLowerCase()}[name="${el.getAttribute("name")}"]`;
    const parts = [];
    for (let node = el; node && node.nodeType === 1 && node !== document.body; node = node.parentElement) {
      if (node.id) { parts.unshift("#" + CSS.escape(node.id)); break; }
      let i = 1;
      for (let sib = node.previousElementSibling; sib; sib = sib.previousElementSibling)
        if (sib.tagName === node.tagName) i++;
      parts.unshift(`${node.tagName.toLowerCase()}:nth-of-type(${i})`);
    }
    return parts.join(" > ");
  };
  const ops = {
    click({ selector }) {
      const [el, err] = find(selector);
      if (err) return { error: err };
      el.scrollIntoView({ block: "center", inline: "center" });
      el.click();
      return { ok: true, clicked: selector };
    },
    type({ selector, text, clear = true }) {
      const [el, err] = find(selector);
      if (err) return { error: err };
      if (typeof text !== "string") return { error: "text is required — pass text=..." };
      el.focus();
      if (el.isContentEditable) {
        if (clear) el.textContent = "";
        el.textContent += text;
      } else if (el instanceof HTMLTextAreaElement || (el instanceof HTMLInputElement &&
                 !/^(button|submit|reset|checkbox|radio|file|image|range|color)$/.test(el.type))) {
        // The native setter, so frameworks that track the value (React) see the change.
        const proto = Object.getPrototypeOf(el);
        const setter = Object.getOwnPropertyDescriptor(proto, "value")?.set;
        const value = (clear ? "" : el.value) + text;
        setter ? setter.call(el, value) : (el.value = value);
      } else {
        return { error: `${selector} is not a text field — pick an input, textarea or contenteditable` };
      }
      el.dispatchEvent(new Event("input", { bubbles: true }));
      el.dispatchEvent(new Event("change", { bubbles: true }));
      return { ok: true, typed: text.length };
    },
    text({ selector }) {
      if (!selector) return { ok: true, ...clip(document.body ? document.body.innerText : "") };
      const [el, err] = find(selector);
      if (err) return { error: err };
      return { ok: true, ...clip(el.innerText ?? el.textContent ?? "") };
    },
    snapshot() {
      // A compact accessibility-ish outline: one line per meaningful element, with a CSS
      // selector hint for anything an agent may want to click or type into.
      const lines = [];
      const walk = (el, depth) => {
        if (lines.length > 2000 || !visible(el)) return;
        const tag = el.tagName.toLowerCase();
        const pad = "  ".repeat(Math.min(depth, 12));
        const label = (el.getAttribute("aria-label") || "").trim();
        const own = (el.innerText || "").trim().replace(/\s+/g, " ").slice(0, 120);
        let line = null;
        if (/^h[1-6]$/.test(tag)) line = `heading[${tag[1]}] "${own}"`;
        else if (tag === "a" && el.href) line = `link "${label || own}" -> ${el.getAttribute("href")} [${hint(el)}]`;
        else if (tag === "button" || el.getAttribute("role") === "button")
          line = `button "${label || own}" [${hint(el)}]`;
        else if (tag === "input" || tag === "textarea" || tag === "select") {
          const kind = tag === "input" ? (el.type || "text") : tag;
          const name = label || el.placeholder || el.name || el.id || "";
          line = `${kind === "checkbox" || kind === "radio" ? kind : "textbox"}(${kind}) "${name}"` +
            ` value="${String(el.value ?? "").slice(0, 80)}" [${hint(el)}]`;
        } else if (tag === "img") line = `img "${el.alt || ""}"`;
        if (line) { lines.push(pad + line); if (tag !== "select") return; }
        let wroteText = false;
        for (const child of el.childNodes) {
          if (child.nodeType === 3) {
            const t = child.textContent.trim().replace(/\s+/g, " ");
            if (t && !wroteText) { lines.push(pad + `text "${t.slice(0, 200)}"`); wroteText = true; }
          } else if (child.nodeType === 1) walk(child, depth + 1);
        }
      };
      if (document.body) walk(document.body, 0);
      return { ok: true, url: location.href, title: document.title, snapshot: lines.join("\n") };
    },
    info() {
      return { ok: true, url: location.href, title: document.title, readyState: document.readyState };
    },
  };
  const fn = ops[op];
  if (!fn) return { error: `unknown page operation ${op}` };
  try { return fn(args || {}); } catch (e) { return { error: `${op} failed in the page: ${e && e.message}` }; }
}
