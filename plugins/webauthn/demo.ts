import { createHash } from 'node:crypto';

/**
 * The client side of passkeys in one small page (`GET /auth/webauthn/demo`): register a passkey
 * for an API-key session, log in with it, list and delete credentials. It only uses the plugin's
 * REST endpoints and `navigator.credentials`; integrators can copy `script` as a starting point.
 * `window.passkeyDemo` exposes the same functions the buttons call.
 */
const script = String.raw`
const b64u = {
  toBuf: (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4)), (c) => c.charCodeAt(0)).buffer,
  fromBuf: (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''),
};
const out = document.getElementById('result');
const show = (label, value) => { out.textContent = label + '\n' + JSON.stringify(value, null, 2); return value; };
async function call(method, path, { key, token, json } = {}) {
  const headers = {};
  if (key) headers['X-API-Key'] = key;
  if (token) headers.Authorization = 'Bearer ' + token;
  if (json !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: json === undefined ? undefined : JSON.stringify(json) });
  const body = res.status === 204 ? null : await res.json();
  return { status: res.status, body };
}
async function register(key, deviceName) {
  const opts = await call('POST', '/auth/webauthn/register/options', { key });
  if (opts.status !== 200) return show('register/options failed', opts);
  const o = opts.body;
  const cred = await navigator.credentials.create({ publicKey: {
    ...o,
    challenge: b64u.toBuf(o.challenge),
    user: { ...o.user, id: b64u.toBuf(o.user.id) },
    excludeCredentials: (o.excludeCredentials || []).map((c) => ({ ...c, id: b64u.toBuf(c.id) })),
  } });
  const res = await call('POST', '/auth/webauthn/register', { key, json: {
    credential_id: cred.id,
    client_data_json: b64u.fromBuf(cred.response.clientDataJSON),
    attestation_object: b64u.fromBuf(cred.response.attestationObject),
    transports: cred.response.getTransports ? cred.response.getTransports() : [],
    device_name: deviceName,
  } });
  return show('register', res);
}
async function login(email) {
  const opts = await call('POST', '/auth/webauthn/authenticate/options', { json: { email } });
  if (opts.status !== 200) return show('authenticate/options failed', opts);
  const o = opts.body;
  let assertion;
  try {
    assertion = await navigator.credentials.get({ publicKey: {
      ...o,
      challenge: b64u.toBuf(o.challenge),
      allowCredentials: o.allowCredentials.map((c) => ({ ...c, id: b64u.toBuf(c.id) })),
    } });
  } catch (err) {
    return show('the browser found no usable passkey', { status: 0, error: String(err) });
  }
  const res = await call('POST', '/auth/webauthn/authenticate', { json: {
    email,
    credential_id: assertion.id,
    client_data_json: b64u.fromBuf(assertion.response.clientDataJSON),
    authenticator_data: b64u.fromBuf(assertion.response.authenticatorData),
    signature: b64u.fromBuf(assertion.response.signature),
  } });
  return show('authenticate', res);
}
const list = (key) => call('GET', '/auth/webauthn/credentials', { key }).then((r) => show('credentials', r));
const remove = (key, id) => call('DELETE', '/auth/webauthn/credentials/' + encodeURIComponent(id), { key }).then((r) => show('delete', r));
const me = (token) => call('GET', '/auth/me', { token }).then((r) => show('me (with the passkey token)', r));
window.passkeyDemo = { register, login, list, remove, me };
const val = (id) => document.getElementById(id).value;
document.getElementById('register').onclick = () => register(val('key'), val('device')).catch((e) => show('error', String(e)));
document.getElementById('login').onclick = () => login(val('email')).catch((e) => show('error', String(e)));
document.getElementById('list').onclick = () => list(val('key')).catch((e) => show('error', String(e)));
`;

/** CSP hash of the inline script: the page runs nothing else. */
const scriptHash = createHash('sha256').update(script).digest('base64');

export const DEMO_CSP = `default-src 'none'; script-src 'sha256-${scriptHash}'; connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

export const DEMO_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Passkey demo</title>
<style>body{font:14px system-ui,sans-serif;max-width:44rem;margin:2rem auto}label{display:block;margin:.4rem 0}input{width:22rem}pre{background:#f4f4f4;padding:1rem;white-space:pre-wrap}</style>
</head><body>
<h1>Passkey demo</h1>
<p>Register a passkey for the user of an API key, then log in with the user's email. Served only when <code>WEBAUTHN_DEMO_ENABLED</code> is on (default in development); open it on an origin listed in <code>WEBAUTHN_ORIGIN</code>.</p>
<label>API key <input id="key" autocomplete="off"></label>
<label>Device name <input id="device" value="My laptop"></label>
<button id="register">Register a passkey</button> <button id="list">List my passkeys</button>
<label>Email <input id="email" type="email" autocomplete="username webauthn"></label>
<button id="login">Log in with a passkey</button>
<pre id="result"></pre>
<script>${script}</script>
</body></html>`;
