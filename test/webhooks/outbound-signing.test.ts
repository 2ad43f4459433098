/** The outbound signature (node's HMAC) is the one `standardwebhooks` makes and verifies, byte for byte. */
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { newSecret, sign, signedHeaders } from '../../plugins/webhooks/signing.ts';

describe('outbound signing', () => {
  it('equals Webhook#sign for any secret, id, time and body, and verifies', () => {
    const at = new Date('2026-11-29T12:34:56.789Z');
    for (const body of ['{}', JSON.stringify({ id: 'evt_1', data: { name: 'Zoë ✓ 日本', n: 1.5 } }), 'x'.repeat(10_000)]) {
      for (const secret of [newSecret(), newSecret(), `whsec_${Buffer.from('short').toString('base64')}`]) {
        expect(sign(secret, 'evt_abc', at, body)).toBe(new Webhook(secret).sign('evt_abc', at, body));
      }
    }
    const [a, b] = [newSecret(), newSecret()];
    const headers = signedHeaders([a, b], 'evt_2', new Date(), '{"ok":true}');
    for (const s of [a, b]) expect(new Webhook(s).verify('{"ok":true}', headers)).toEqual({ ok: true });
  });
});
