// Keybound's sign-in page: passkey sign-up and sign-in (or a password) against this server's own
// API, and the signed-in user's passkeys and devices. Served for an OAuth authorization request,
// it then signs the user in to the app that asked (continueToApp). Plain JavaScript, no build
// step; loaded as a file because the page's Content-Security-Policy allows no inline script.
"use strict";

const ALGORITHMS = { "-7": "ES256", "-8": "EdDSA", "-257": "RS256" };
const KEY_PROTECTION = { secure_enclave: "Secure Enclave", software: "software key", emulator: "emulator" };

// --- the API (base64url, the WebAuthn JSON forms and Problem come before, from webauthn.js) ------

const session = {
  get access() { return sessionStorage.getItem("keybound.access"); },
  get refresh() { return sessionStorage.getItem("keybound.refresh"); },
  save(tokens) {
    sessionStorage.setItem("keybound.access", tokens.access_token);
    sessionStorage.setItem("keybound.refresh", tokens.refresh_token);
  },
  clear() {
    sessionStorage.removeItem("keybound.access");
    sessionStorage.removeItem("keybound.refresh");
  },
};

function clientID() { return browserClientID("keybound.client", "web:"); }

// ROUTES (method and path of each API route this page calls) comes first in this script: the
// server writes it from its route declarations, so the page cannot call a path the server lacks.
async function call(route, body, id, retried) {
  const method = route.method;
  const path = id === undefined ? route.path : route.path.replace("{id}", encodeURIComponent(id));
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (session.access) headers.Authorization = "Bearer " + session.access;
  const reply = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await reply.text();
  const parsed = text ? JSON.parse(text) : null;
  if (reply.status === 401 && session.refresh && !retried && parsed && parsed.code === "token_invalid") {
    // The access token lives 15 minutes: rotate it once, then try again.
    const refreshed = await fetch(ROUTES.refresh.path, {
      method: ROUTES.refresh.method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ refresh_token: session.refresh }),
    });
    if (refreshed.ok) {
      session.save(await refreshed.json());
      return call(route, body, id, true);
    }
    session.clear();
  }
  if (!reply.ok) throw new Problem(reply.status, parsed);
  return parsed;
}

// --- the page ------------------------------------------------------------------------------------

const element = (id) => document.getElementById(id);

function say(message, isError) {
  element("status").textContent = message;
  element("status").className = isError ? "error" : "";
}

function setState(state) {
  document.body.dataset.state = state;
  for (const button of document.querySelectorAll("button")) button.disabled = state === "busy";
}

function when(timestamp) {
  return new Date(timestamp).toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "numeric", minute: "2-digit",
  });
}

function item(title, meta, action) {
  const row = document.createElement("li");
  const text = document.createElement("span");
  const strong = document.createElement("span");
  strong.className = "title";
  strong.textContent = title;
  const small = document.createElement("span");
  small.className = "meta";
  small.textContent = meta;
  text.append(strong, small);
  row.append(text);
  if (action) row.append(action);
  return row;
}

function removeButton(label, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "remove";
  button.textContent = label;
  button.addEventListener("click", onClick);
  return button;
}

async function showSignedIn() {
  const [me, passkeys, devices] = await Promise.all([
    call(ROUTES.me),
    call(ROUTES.listPasskeys),
    call(ROUTES.listDevices),
  ]);
  element("who").textContent = me.username;
  element("how").textContent = `by ${me.auth_method} · ${when(me.auth_time)}`;
  const passkeyList = element("passkeys");
  passkeyList.replaceChildren(
    ...passkeys.passkeys.map((passkey) => {
      const row = item(
        `Passkey ${passkey.credential_id.slice(0, 8)}…`,
        [
          ALGORITHMS[passkey.algorithm] || `alg ${passkey.algorithm}`,
          passkey.backup_eligible ? (passkey.backed_up ? "synced" : "syncable") : "this device only",
          passkey.attested ? `attested (${passkey.attestation_format})` : null,
          passkey.last_used_at ? `last used ${when(passkey.last_used_at)}` : `added ${when(passkey.created_at)}`,
        ].filter(Boolean).join(" · "),
        removeButton("Remove", () => act(() => removePasskey(passkey.passkey_id))),
      );
      row.dataset.passkeyId = passkey.passkey_id;
      return row;
    }),
  );
  const deviceList = element("devices");
  deviceList.replaceChildren(
    ...devices.devices.map((device) => {
      const active = device.status === "active";
      const row = item(
        device.name,
        [KEY_PROTECTION[device.key_protection] || device.key_protection, device.status, device.attested ? "App Attest" : null, `bound ${when(device.created_at)}`]
          .filter(Boolean)
          .join(" · "),
        active ? removeButton("Revoke", () => act(() => revokeDevice(device.device_id))) : null,
      );
      row.dataset.deviceId = device.device_id;
      return row;
    }),
  );
  element("no-devices").hidden = devices.devices.length > 0;
  element("signed-out").hidden = true;
  element("signed-in").hidden = false;
}

function showSignedOut() {
  element("signed-in").hidden = true;
  element("signed-out").hidden = false;
}

// Runs one user action: the page is busy meanwhile, and ends up showing the session's state.
async function act(action) {
  setState("busy");
  say("");
  try {
    const message = await action();
    if (message) say(message);
  } catch (error) {
    say(error.name === "NotAllowedError" ? "The passkey prompt was dismissed." : error.message, true);
  }
  try {
    if (session.access) {
      await showSignedIn();
    } else {
      showSignedOut();
    }
  } catch (error) {
    session.clear();
    showSignedOut();
  }
  setState(session.access ? "signed-in" : "signed-out");
}

// --- signing in to another app (an OAuth authorization request) ---------------------------------

// The server shows "Sign in to continue to …" only on the page of a valid authorization request.
const authorizing = () => !element("continue-to").hidden;

const AUTHORIZATION_PARAMETERS = [
  "client_id", "redirect_uri", "response_type", "scope", "state", "nonce", "code_challenge",
  "code_challenge_method",
];

// Completes the request this page was opened with for the signed-in user: the server answers
// where the browser goes next, the app's redirect URI with a code (or with an error).
async function continueToApp() {
  const query = new URLSearchParams(location.search);
  const body = {};
  for (const name of AUTHORIZATION_PARAMETERS) if (query.has(name)) body[name] = query.get(name);
  try {
    const answer = await call(ROUTES.oauthAuthorize, body);
    location.assign(answer.redirect_to);
    return "Signing you in to the app…";
  } catch (error) {
    // The app needs a sign-in from the last 5 minutes: this session is older.
    if (error.code === "step_up_required") session.clear();
    throw error;
  }
}

// A sign-in, and then, on an authorization request's page, on to the app.
function thenContinue(signInAction) {
  return async () => {
    const message = await signInAction();
    return authorizing() ? continueToApp() : message;
  };
}

async function signUp() {
  const username = element("username").value.trim();
  if (!username) throw new Error("Choose a username to create an account.");
  const options = await call(ROUTES.passkeyRegistrationOptions, { username, client_id: clientID() });
  const credential = await navigator.credentials.create({ publicKey: creationOptions(options.publicKey) });
  const result = await call(ROUTES.passkeyRegistrationVerify, credentialJSON(credential));
  session.save(result);
  return `Welcome, ${result.username}. Your passkey is ready.`;
}

async function signIn() {
  const username = element("username").value.trim();
  const body = { client_id: clientID() };
  if (username) body.username = username;
  const options = await call(ROUTES.passkeyLoginOptions, body);
  const credential = await navigator.credentials.get({ publicKey: requestOptions(options.publicKey) });
  const result = await call(ROUTES.passkeyLoginVerify, credentialJSON(credential));
  session.save(result);
  return `Signed in as ${result.username}.`;
}

async function signInWithPassword() {
  const username = element("username").value.trim();
  const password = element("password").value;
  if (!username || !password) throw new Error("Give your username and your password.");
  const result = await call(ROUTES.passwordLogin, { username, password, client_id: clientID() });
  element("password").value = "";
  session.save(result);
  return `Signed in as ${username}.`;
}

async function addPasskey() {
  const options = await call(ROUTES.passkeyRegistrationOptions, {});
  const credential = await navigator.credentials.create({ publicKey: creationOptions(options.publicKey) });
  await call(ROUTES.passkeyRegistrationVerify, credentialJSON(credential));
  return "Passkey added.";
}

async function removePasskey(id) {
  await call(ROUTES.removePasskey, undefined, id);
  return "Passkey removed.";
}

async function revokeDevice(id) {
  await call(ROUTES.revokeDevice, undefined, id);
  return "Device revoked.";
}

async function signOut() {
  try {
    await call(ROUTES.logout);
  } finally {
    session.clear();
  }
  return "Signed out.";
}

document.addEventListener("DOMContentLoaded", () => {
  if (!window.PublicKeyCredential) {
    say("This browser has no passkeys (WebAuthn needs https or localhost).", true);
  }
  element("sign-up").addEventListener("click", () => act(thenContinue(signUp)));
  element("sign-in").addEventListener("click", () => act(thenContinue(signIn)));
  element("sign-in-password").addEventListener("click", () => act(thenContinue(signInWithPassword)));
  element("continue").addEventListener("click", () => act(continueToApp));
  element("continue").hidden = !authorizing();
  element("add-passkey").addEventListener("click", () => act(addPasskey));
  element("sign-out").addEventListener("click", () => act(signOut));
  act(async () => null);
});
