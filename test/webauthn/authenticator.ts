/**
 * A software WebAuthn authenticator for tests, made with node:crypto: ES256 (P-256) or RS256
 * (RSA 2048) keys, real `none` attestation objects (CBOR via cborg, pure JavaScript) and real assertion
 * signatures over `authenticatorData || sha256(clientDataJSON)`. Every output can be bent
 * (type, origin, challenge, rp id, counter) to exercise one verification rule at a time.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { encode } from 'cborg';

/** CBOR with byte strings as such (cborg takes Uint8Array; Buffers are passed as plain views). */
const bytes = (b: Buffer) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();
const b64u = (b: Buffer) => b.toString('base64url');

/** Authenticator data flags (WebAuthn §6.1). */
export const FLAGS = { UP: 0x01, UV: 0x04, AT: 0x40 } as const;

export interface CeremonyOverrides {
  type?: string;
  origin?: string;
  challenge?: string;
  rpId?: string;
  /** Sign count to report (assertions). Default: the next count. */
  counter?: number;
  flags?: number;
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(32);
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  /** Last sign count reported. */
  signCount = 0;

  constructor(
    readonly alg: 'ES256' | 'RS256' = 'ES256',
    readonly rpId = 'localhost',
    readonly origin = 'http://localhost:3000',
  ) {
    const pair = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.privateKey = pair.privateKey;
    this.publicKey = pair.publicKey;
  }

  get id(): string {
    return b64u(this.credentialId);
  }

  /** The public key as a COSE_Key (RFC 9053): EC2 with crv P-256, or RSA with n and e. */
  coseKey(): Buffer {
    const jwk = this.publicKey.export({ format: 'jwk' });
    const m = new Map<number, unknown>();
    if (this.alg === 'ES256') {
      m.set(1, 2).set(3, -7).set(-1, 1).set(-2, bytes(Buffer.from(jwk.x!, 'base64url'))).set(-3, bytes(Buffer.from(jwk.y!, 'base64url')));
    } else {
      m.set(1, 3).set(3, -257).set(-1, bytes(Buffer.from(jwk.n!, 'base64url'))).set(-2, bytes(Buffer.from(jwk.e!, 'base64url')));
    }
    return Buffer.from(encode(m));
  }

  authData(o: { rpId?: string; flags: number; counter: number; attested?: boolean }): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(o.counter);
    const parts: Uint8Array[] = [sha256(o.rpId ?? this.rpId), Buffer.from([o.flags]), counter];
    if (o.attested) {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(this.credentialId.length);
      parts.push(Buffer.alloc(16), len, this.credentialId, this.coseKey());
    }
    return Buffer.concat(parts);
  }

  clientData(type: string, challenge: string, origin: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** A `navigator.credentials.create()` result as the register endpoint takes it. */
  makeCredential(challenge: string, o: CeremonyOverrides & { device_name?: string; transports?: string[] } = {}) {
    const clientData = this.clientData(o.type ?? 'webauthn.create', o.challenge ?? challenge, o.origin ?? this.origin);
    const authData = this.authData({ rpId: o.rpId, flags: o.flags ?? FLAGS.UP | FLAGS.UV | FLAGS.AT, counter: o.counter ?? this.signCount, attested: true });
    const attestationObject = Buffer.from(encode(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', bytes(authData)]])));
    return {
      credential_id: this.id,
      client_data_json: b64u(clientData),
      attestation_object: b64u(attestationObject),
      transports: o.transports ?? ['internal'],
      device_name: o.device_name ?? `soft ${this.alg}`,
    };
  }

  /** A `navigator.credentials.get()` result (without email). Raises the sign count, or reports `counter` (which becomes the current count). */
  getAssertion(challenge: string, o: CeremonyOverrides = {}) {
    const counter = (this.signCount = o.counter ?? this.signCount + 1);
    const clientData = this.clientData(o.type ?? 'webauthn.get', o.challenge ?? challenge, o.origin ?? this.origin);
    const authData = this.authData({ rpId: o.rpId, flags: o.flags ?? FLAGS.UP | FLAGS.UV, counter });
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientData)]), this.privateKey);
    return {
      credential_id: this.id,
      client_data_json: b64u(clientData),
      authenticator_data: b64u(authData),
      signature: b64u(signature),
    };
  }
}
