// Keybound's operator console: an administrator signs in (passkey or password) on the console's
// own listener, then reads the traffic, finds users, revokes what must go, and reads the audit
// log, through /admin/v1 (docs/console.md). Plain JavaScript, no build step, no other origin: the
// page's Content-Security-Policy allows no inline script. Every value from the server is put into
// the page as text (textContent), never as markup.
"use strict";

// --- the API -------------------------------------------------------------------------------------

// The token lives in this tab only; no cookie is ever set, so no other site can make the browser
// send a request the console would take (no CSRF).
const session = {
  get access() { return sessionStorage.getItem("keybound.console.access"); },
  save(tokens) { sessionStorage.setItem("keybound.console.access", tokens.access_token); },
  clear() { sessionStorage.removeItem("keybound.console.access"); },
};

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (session.access) headers.Authorization = "Bearer " + session.access;
  const reply = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await reply.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!reply.ok) {
    if (reply.status === 401 || (parsed && parsed.code === "step_up_required")) showSignIn(parsed && parsed.detail);
    throw new Problem(reply.status, parsed);
  }
  return parsed;
}

function routePath(route, id) {
  return id === undefined ? route.path : route.path.replace("{id}", encodeURIComponent(id));
}

// --- small DOM helpers ---------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function setStatus(text, failed) {
  $("status").textContent = text;
  $("status").classList.toggle("error", Boolean(failed));
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function when(time) { return time ? time.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—"; }

// A table of `rows` with `columns` [heading, value(row)]; `action` adds a button per row.
function fillTable(table, columns, rows, action) {
  table.replaceChildren();
  const head = element("tr");
  for (const [heading] of columns) head.append(element("th", heading));
  if (action) head.append(element("th", ""));
  table.append(head);
  if (rows.length === 0) {
    const empty = element("tr");
    const cell = element("td", "none", "detail");
    cell.colSpan = columns.length + (action ? 1 : 0);
    empty.append(cell);
    table.append(empty);
  }
  for (const row of rows) {
    const line = element("tr");
    for (const [, value] of columns) line.append(element("td", value(row)));
    if (action) {
      const cell = element("td");
      const made = action(row);
      if (made) cell.append(made);
      line.append(cell);
    }
    table.append(line);
  }
}

function button(label, onClick, className) {
  const node = element("button", label, className);
  node.type = "button";
  node.addEventListener("click", async () => {
    node.disabled = true;
    try { await onClick(); } catch (error) { setStatus(error.message, true); } finally { node.disabled = false; }
  });
  return node;
}

// --- sign-in -------------------------------------------------------------------------------------

function showSignIn(reason) {
  session.clear();
  for (const page of document.querySelectorAll(".page")) page.hidden = true;
  $("nav").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
  document.body.dataset.state = "signed-out";
  if (reason) setStatus(reason, true);
}

function consoleClientID() { return browserClientID("keybound.console.client", "console:"); }

async function signInWithPassword() {
  const tokens = await api(ROUTES.passwordLogin.method, ROUTES.passwordLogin.path, {
    username: $("username").value.trim(), password: $("password").value, client_id: consoleClientID(),
  });
  $("password").value = "";
  session.save(tokens);
  await start("Signed in.");
}

async function signInWithPasskey() {
  const username = $("username").value.trim();
  const options = await api(ROUTES.passkeyLoginOptions.method, ROUTES.passkeyLoginOptions.path,
    username ? { username, client_id: consoleClientID() } : { client_id: consoleClientID() });
  const credential = await navigator.credentials.get({ publicKey: requestOptions(options.publicKey) });
  // The answer carries the session's tokens beside the passkey's name and count.
  session.save(await api(ROUTES.passkeyLoginVerify.method, ROUTES.passkeyLoginVerify.path, credentialJSON(credential)));
  await start("Signed in with a passkey.");
}

async function signOut() {
  try { await api("DELETE", "/admin/v1/sessions/current"); } finally { showSignIn(); setStatus("Signed out."); }
}

// --- pages ---------------------------------------------------------------------------------------

const PAGES = {
  overview: showOverview, users: showUsers, audit: showAudit, clients: showClients, webhooks: showWebhooks,
};

async function go(name) {
  const page = PAGES[name] ? name : "overview";
  for (const section of document.querySelectorAll(".page")) section.hidden = section.id !== "page-" + page;
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("current", link.dataset.page === page);
  document.body.dataset.state = "loading";
  await PAGES[page]();
  document.body.dataset.state = "ready";
  document.body.dataset.page = page;
}

const SERIES = [
  ["Logins by method", ["login.password", "login.device", "login.passkey", "login.oauth"]],
  ["Failed logins", ["failure.password", "failure.device", "failure.passkey"]],
  ["Throttled requests", ["throttled.password", "throttled.device", "throttled.passkey"]],
  ["Approvals", ["approval.approved", "approval.denied", "approval.expired"]],
  ["Failed webhook deliveries", ["webhook.failed"]],
];
const COLORS = ["#1b5e9e", "#2e8b57", "#c27c0e", "#8e44ad"];

// One chart: stacked bars per five-minute bucket, drawn as SVG by this code.
function chart(title, names, series, start, bucketSeconds) {
  const figure = element("figure", undefined, "chart");
  const counts = names.map((name) => (series.find((item) => item.name === name) || { counts: [] }).counts);
  const buckets = Math.max(...counts.map((list) => list.length), 1);
  const totals = counts.map((list) => list.reduce((sum, value) => sum + value, 0));
  figure.dataset.title = title;
  figure.dataset.total = String(totals.reduce((sum, value) => sum + value, 0));
  const caption = element("figcaption");
  caption.append(element("strong", title + " "));
  names.forEach((name, index) => {
    const key = element("span", `${name.split(".")[1]} ${totals[index]}`, "key");
    key.style.setProperty("--swatch", COLORS[index % COLORS.length]);
    key.dataset.series = name;
    key.dataset.total = String(totals[index]);
    caption.append(key);
  });
  const width = 720, height = 120;
  const peak = Math.max(0, ...Array.from({ length: buckets }, (_, bucket) =>
    counts.reduce((sum, list) => sum + (list[bucket] || 0), 0)));
  const most = Math.max(1, peak);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const barWidth = width / buckets;
  for (let bucket = 0; bucket < buckets; bucket++) {
    let top = height;
    counts.forEach((list, index) => {
      const value = list[bucket] || 0;
      if (!value) return;
      const barHeight = (value / most) * (height - 4);
      top -= barHeight;
      const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      bar.setAttribute("x", String(bucket * barWidth));
      bar.setAttribute("y", String(top));
      bar.setAttribute("width", String(Math.max(barWidth - 0.5, 1)));
      bar.setAttribute("height", String(barHeight));
      bar.setAttribute("fill", COLORS[index % COLORS.length]);
      const tip = document.createElementNS("http://www.w3.org/2000/svg", "title");
      const at = new Date((start + bucket * bucketSeconds) * 1000).toISOString().slice(11, 16);
      tip.textContent = `${at} ${names[index]}: ${value}`;
      bar.append(tip);
      svg.append(bar);
    });
  }
  const axis = document.createElementNS("http://www.w3.org/2000/svg", "line");
  for (const [name, value] of [["x1", 0], ["y1", height], ["x2", width], ["y2", height]]) axis.setAttribute(name, String(value));
  axis.setAttribute("stroke", "#9aa5b1");
  svg.append(axis);
  const scale = element("div", undefined, "axis");
  scale.append(element("span", "24 h ago"), element("span", `most in 5 min: ${peak}`), element("span", "now"));
  figure.append(caption, svg, scale);
  return figure;
}

async function showOverview() {
  const overview = await api("GET", "/admin/v1/overview");
  const start = Date.parse(overview.start) / 1000;
  $("charts").replaceChildren(...SERIES.map(([title, names]) =>
    chart(title, names, overview.series, start, overview.bucket_seconds)));
}

async function showUsers() {
  const query = $("user-query").value.trim();
  const found = await api("GET", "/admin/v1/users?query=" + encodeURIComponent(query));
  $("user-list").replaceChildren(...found.users.map((user) => {
    const item = element("li");
    const open = button(user.username, () => showUser(user.user_id), "link");
    open.dataset.userId = user.user_id;
    item.append(open, element("span", [user.admin ? "admin" : "", user.locked_at ? "locked" : ""].filter(Boolean).join(" "), "detail"));
    return item;
  }));
}

let shownUser = null;

async function change(method, path, done) {
  await api(method, path);
  setStatus(done);
  if (shownUser) await showUser(shownUser);
}

async function showUser(userID) {
  const user = await api("GET", "/admin/v1/users/" + encodeURIComponent(userID));
  shownUser = userID;
  $("user-detail").hidden = false;
  $("user-detail").dataset.userId = userID;
  $("user-name").textContent = user.username;
  $("user-facts").textContent = [
    `id ${user.user_id}`, `created ${when(user.created_at)}`, user.roles.length ? `roles: ${user.roles.join(", ")}` : "",
    user.locked_at ? `LOCKED since ${when(user.locked_at)}` : "", user.has_password ? "has a password" : "no password",
  ].filter(Boolean).join(" · ");
  $("user-lock").hidden = Boolean(user.locked_at);
  $("user-unlock").hidden = !user.locked_at;
  const base = "/admin/v1/users/" + encodeURIComponent(userID);
  fillTable($("user-devices"), [
    ["name", (d) => d.name], ["key", (d) => d.key_protection], ["attested", (d) => (d.attested ? "App Attest" : "no")],
    ["status", (d) => d.status], ["bound", (d) => when(d.created_at)], ["last used", (d) => when(d.last_used_at)],
  ], user.devices, (d) => d.status === "active"
    ? button("Revoke", () => change("DELETE", "/admin/v1/devices/" + encodeURIComponent(d.device_id), "Device revoked."), "danger")
    : null);
  fillTable($("user-passkeys"), [
    ["id", (p) => p.passkey_id], ["attestation", (p) => (p.attested ? p.attestation_format : "none")],
    ["synced", (p) => (p.backed_up ? "yes" : "no")], ["created", (p) => when(p.created_at)],
    ["last used", (p) => when(p.last_used_at)], ["suspended", (p) => when(p.suspended_at)],
  ], user.passkeys, (p) => button("Remove", () => change("DELETE", "/admin/v1/passkeys/" + encodeURIComponent(p.passkey_id), "Passkey removed."), "danger"));
  fillTable($("user-sessions"), [
    ["client", (s) => s.client_id], ["method", (s) => s.auth_method], ["signed in", (s) => when(s.auth_time)],
    ["device", (s) => s.device_id || "—"], ["OAuth scope", (s) => s.oauth_scope || "—"],
  ], user.sessions, (s) => button("End", () => change("DELETE", "/admin/v1/sessions/" + encodeURIComponent(s.session_id), "Session ended."), "danger"));
  fillTable($("user-approvals"), [
    ["action", (a) => a.action.title || a.action.type || JSON.stringify(a.action)], ["status", (a) => a.status],
    ["created", (a) => when(a.created_at)], ["decided", (a) => when(a.decided_at)],
    ["receipt", (a) => (a.receipt ? a.receipt.slice(0, 24) + "…" : "—")],
  ], user.approvals);
  fillTable($("user-throttles"), [
    ["scope", (t) => t.scope], ["failures", (t) => t.failures], ["blocked until", (t) => when(t.blocked_until)],
  ], user.throttles);
  fillTable($("user-events"), auditColumns, user.events);
  $("user-lock").dataset.path = base + "/lock";
  $("user-unlock").dataset.path = base + "/unlock";
  $("user-end-sessions").dataset.path = base + "/sessions";
  $("user-clear-throttles").dataset.path = base + "/throttles";
}

const auditColumns = [
  ["time", (e) => when(e.last_time)], ["type", (e) => e.type], ["method", (e) => e.method || "—"],
  ["user", (e) => e.user_id || "—"], ["by admin", (e) => e.actor_id || "—"], ["address", (e) => e.last_client_address || "—"],
  ["count", (e) => e.count], ["detail", (e) => e.detail || ""],
];

async function showAudit() {
  const filters = new URLSearchParams();
  for (const name of ["user", "type", "address", "since", "until"]) {
    const value = $("audit-" + name).value.trim();
    if (value) filters.set(name, value);
  }
  const found = await api("GET", "/admin/v1/audit?" + filters.toString());
  fillTable($("audit-events"), auditColumns, found.events);
}

async function showClients() {
  const found = await api("GET", "/admin/v1/oauth-clients");
  fillTable($("client-list"), [
    ["client id", (c) => c.client_id], ["name", (c) => c.name], ["authentication", (c) => c.authentication],
    ["redirect URIs", (c) => c.redirect_uris.join(" ")], ["CIBA", (c) => c.ciba || "—"], ["created", (c) => when(c.created_at)],
  ], found.clients, (c) => button("Remove", async () => {
    await api("DELETE", "/admin/v1/oauth-clients/" + encodeURIComponent(c.client_id));
    setStatus("Client removed.");
    await showClients();
  }, "danger"));
}

async function addClient() {
  const created = await api("POST", "/admin/v1/oauth-clients", {
    name: $("client-name").value.trim(),
    redirect_uris: $("client-redirects").value.trim().split(/\s+/).filter(Boolean),
    confidential: $("client-confidential").checked,
  });
  $("client-secret").hidden = false;
  $("client-secret").textContent = created.secret
    ? `${created.client_id}: client secret (shown once): ${created.secret}` : `${created.client_id}: a public client (PKCE, no secret).`;
  await showClients();
}

async function showWebhooks() {
  const found = await api("GET", "/admin/v1/webhooks");
  fillTable($("webhook-list"), [
    ["url", (w) => w.url], ["events", (w) => w.events.join(" ")], ["created", (w) => when(w.created_at)],
  ], found.webhooks, (w) => {
    const cell = element("span");
    cell.append(button("Deliveries", () => showDeliveries(w)), button("Remove", async () => {
      await api("DELETE", "/admin/v1/webhooks/" + encodeURIComponent(w.id));
      setStatus("Endpoint removed.");
      await showWebhooks();
    }, "danger"));
    return cell;
  });
}

async function showDeliveries(webhook) {
  const found = await api("GET", "/admin/v1/webhooks/" + encodeURIComponent(webhook.id) + "/deliveries");
  $("delivery-title").hidden = false;
  $("delivery-title").textContent = "Deliveries to " + webhook.url;
  fillTable($("delivery-list"), [
    ["event", (d) => d.type], ["status", (d) => d.status], ["created", (d) => when(d.created_at)],
    ["attempts", (d) => d.attempts.map((a) => `${a.number}: ${a.result}`).join(", ") || "—"],
  ], found.deliveries, (d) => d.status === "delivered" ? null : button("Retry", async () => {
    await api("POST", "/admin/v1/webhook-deliveries/" + encodeURIComponent(d.id) + "/retry");
    setStatus("Sent again.");
    await showDeliveries(webhook);
  }));
}

async function addWebhook() {
  const created = await api("POST", "/admin/v1/webhooks", {
    url: $("webhook-url").value.trim(), events: $("webhook-events").value.trim().split(/[\s,]+/).filter(Boolean),
  });
  $("webhook-secret").hidden = false;
  $("webhook-secret").textContent = "Signing secret (shown once): " + created.secret;
  await showWebhooks();
}

// --- start ---------------------------------------------------------------------------------------

async function start(message) {
  const me = await api("GET", "/admin/v1/me");
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("who").hidden = false;
  $("admin-name").textContent = me.username;
  setStatus(message || "");
  await go(location.hash.slice(1));
}

function wire(id, action) {
  $(id).addEventListener("click", async () => {
    $(id).disabled = true;
    document.body.dataset.state = "busy";
    try { await action(); } catch (error) { setStatus(error.message, true); }
    finally { $(id).disabled = false; if (document.body.dataset.state === "busy") document.body.dataset.state = "ready"; }
  });
}

wire("sign-in-password", signInWithPassword);
wire("sign-in-passkey", signInWithPasskey);
wire("sign-out", signOut);
wire("user-search", showUsers);
wire("audit-filter", showAudit);
wire("webhook-add", addWebhook);
wire("client-add", addClient);
for (const [id, done] of [["user-lock", "Account locked."], ["user-unlock", "Account unlocked."],
  ["user-end-sessions", "Sessions ended."], ["user-clear-throttles", "Throttles cleared."]]) {
  wire(id, () => change(id === "user-lock" || id === "user-unlock" ? "POST" : "DELETE", $(id).dataset.path, done));
}
window.addEventListener("hashchange", () => { if (session.access) go(location.hash.slice(1)).catch((error) => setStatus(error.message, true)); });
if (session.access) start().catch(() => showSignIn()); else showSignIn();
