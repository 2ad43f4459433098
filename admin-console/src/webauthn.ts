/** base64url ⇄ bytes for the WebAuthn options and answers the server exchanges as JSON. */
const toBytes = (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4)), (c) => c.charCodeAt(0));
const toB64u = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

type Json = Record<string, unknown>;
type Cred = { id: string; type: 'public-key'; transports?: AuthenticatorTransport[] };

export function requestOptions(o: unknown): PublicKeyCredentialRequestOptions {
  const j = o as Json & { challenge: string; allowCredentials?: Cred[] };
  return { ...(j as object), challenge: toBytes(j.challenge), allowCredentials: (j.allowCredentials ?? []).map((c) => ({ ...c, id: toBytes(c.id) })) } as PublicKeyCredentialRequestOptions;
}

export function creationOptions(o: unknown): PublicKeyCredentialCreationOptions {
  const j = o as Json & { challenge: string; user: { id: string; name: string; displayName: string }; excludeCredentials?: Cred[] };
  return {
    ...(j as object),
    challenge: toBytes(j.challenge),
    user: { ...j.user, id: toBytes(j.user.id) },
    excludeCredentials: (j.excludeCredentials ?? []).map((c) => ({ ...c, id: toBytes(c.id) })),
  } as unknown as PublicKeyCredentialCreationOptions;
}

export function assertionJson(c: PublicKeyCredential) {
  const r = c.response as AuthenticatorAssertionResponse;
  return { credential_id: c.id, client_data_json: toB64u(r.clientDataJSON), authenticator_data: toB64u(r.authenticatorData), signature: toB64u(r.signature) };
}

export function attestationJson(c: PublicKeyCredential) {
  const r = c.response as AuthenticatorAttestationResponse;
  return { credential_id: c.id, client_data_json: toB64u(r.clientDataJSON), attestation_object: toB64u(r.attestationObject), transports: r.getTransports?.() ?? [] };
}
