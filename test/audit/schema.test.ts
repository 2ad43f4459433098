/**
 * The audit plugin's GraphQL fragment (plugins/audit/graphql.ts), printed: its types and its two
 * query fields. The snapshot was taken from the fragment as it stood inline in index.ts, so moving
 * or refactoring it cannot change the schema clients see unnoticed.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { GraphQLObjectType, printType } from 'graphql';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin] });
});
afterAll(() => t?.close());

it('the printed audit types and query fields', () => {
  const schema = t.app.schema;
  const types = Object.keys(schema.getTypeMap()).filter((n) => n.startsWith('Audit')).sort();
  expect(types).toEqual(['AuditEntry', 'AuditLogPage', 'AuditPeriodCount', 'AuditStats', 'AuditUserCount']);
  const query = schema.getQueryType()!;
  const fields = Object.fromEntries(Object.entries(query.getFields()).filter(([n]) => n.startsWith('audit')));
  const queryPart = printType(new GraphQLObjectType({ name: 'Query', fields: () => Object.fromEntries(Object.entries(fields).map(([n, f]) => [n, {
    type: f.type, description: f.description, args: Object.fromEntries(f.args.map((a) => [a.name, { type: a.type, description: a.description }])),
  }])) }));
  expect([...types.map((n) => printType(schema.getType(n)!)), queryPart].join('\n\n')).toMatchSnapshot();
});
