/** The privacy GraphQL fragment as printed: a change to it is a change of the public contract. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printType } from 'graphql';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [privacyPlugin] });
});
afterAll(() => t?.close());

describe('schema fragment', () => {
  it.each(['Consent', 'ConsentPage', 'ErasureRequest', 'ErasurePreview', 'ErasureCollectionCount', 'ErasureResult', 'ErasureRequestPage', 'ErasureExecution'])(
    'type %s',
    (name) => {
      expect(printType(t.app.schema.getType(name)!)).toMatchSnapshot();
    },
  );

  it('queries and mutations with their arguments', () => {
    const sig = (f: { args: readonly { name: string; type: unknown }[]; type: unknown }) => `(${f.args.map((a) => `${a.name}: ${String(a.type)}`).join(', ')}): ${String(f.type)}`;
    const q = t.app.schema.getQueryType()!.getFields();
    const m = t.app.schema.getMutationType()!.getFields();
    expect({
      consents: sig(q.consents!),
      erasureRequests: sig(q.erasureRequests!),
      erasureRequest: sig(q.erasureRequest!),
      grantConsent: sig(m.grantConsent!),
      revokeConsent: sig(m.revokeConsent!),
      requestErasure: sig(m.requestErasure!),
      executeErasure: sig(m.executeErasure!),
    }).toMatchSnapshot();
  });
});
