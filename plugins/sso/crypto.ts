import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Encryption of providers' client secrets at rest: AES-256-GCM under a key derived (HKDF-SHA256)
 * from `TOKEN_SECRET`, so a copy of the database alone does not give them away. Rotating
 * `TOKEN_SECRET` makes stored secrets unreadable: each provider's secret must then be set again.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(tokenSecret: string) {
    this.key = Buffer.from(hkdfSync('sha256', tokenSecret, 'sso', 'sso-client-secret', 32));
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [iv, cipher.getAuthTag(), body].map((b) => b.toString('base64url')).join('.');
  }

  /** @throws Error when the value was not sealed with this key (another `TOKEN_SECRET`) */
  open(sealed: string): string {
    const [iv, tag, body] = sealed.split('.').map((p) => Buffer.from(p, 'base64url'));
    if (!iv || !tag || !body) throw new Error('sealed secret is malformed');
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
  }
}
