// What the sign-in page and the operator console share: base64url, the WebAuthn JSON forms for
// browsers with and without WebAuthn Level 3's JSON helpers, and the error of a problem+json
// answer. The server puts this file into both pages' scripts, after ROUTES and before their own.
"use strict";

// --- base64url and the WebAuthn JSON forms -------------------------------------------------------

function toBase64URL(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64URL(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(binary, (character) => character.charCodeAt(0)).buffer;
}

function descriptors(list) {
  return (list || []).map((item) => ({ ...item, id: fromBase64URL(item.id) }));
}

// The server's options are WebAuthn L3 JSON; browsers without parse…FromJSON get them converted.
function creationOptions(json) {
  if (typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function") {
    return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  }
  return {
    ...json,
    challenge: fromBase64URL(json.challenge),
    user: { ...json.user, id: fromBase64URL(json.user.id) },
    excludeCredentials: descriptors(json.excludeCredentials),
  };
}

function requestOptions(json) {
  if (typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function") {
    return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  }
  // No allowCredentials: every Keybound passkey is discoverable.
  return { ...json, challenge: fromBase64URL(json.challenge) };
}

// The verify endpoints take exactly PublicKeyCredential.toJSON(); older browsers get it built.
function credentialJSON(credential) {
  if (typeof credential.toJSON === "function") return credential.toJSON();
  const response = { clientDataJSON: toBase64URL(credential.response.clientDataJSON) };
  if (credential.response.attestationObject) {
    response.attestationObject = toBase64URL(credential.response.attestationObject);
  } else {
    response.authenticatorData = toBase64URL(credential.response.authenticatorData);
    response.signature = toBase64URL(credential.response.signature);
    if (credential.response.userHandle) response.userHandle = toBase64URL(credential.response.userHandle);
  }
  return {
    id: credential.id,
    rawId: toBase64URL(credential.rawId),
    type: credential.type,
    response,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults(),
  };
}

// --- this browser's client id -------------------------------------------------------------------

// One client id per browser and page, kept under `key`: a new sign-in from here ends this
// browser's previous session of that page.
function browserClientID(key, prefix) {
  let id = localStorage.getItem(key);
  if (!id) {
    id = prefix + toBase64URL(crypto.getRandomValues(new Uint8Array(12)));
    localStorage.setItem(key, id);
  }
  return id;
}

// --- problem+json --------------------------------------------------------------------------------

class Problem extends Error {
  constructor(status, body) {
    super((body && body.detail) || `The server answered ${status}.`);
    this.status = status;
    this.code = body && body.code;
  }
}
