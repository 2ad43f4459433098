import { definePlugin, defineRoute, z } from 'plugin-api-server';

export const helloPlugin = definePlugin({
  name: 'hello',
  options: z.object({ greeting: z.string().default('Hello') }),
  setup: ({ options }) => ({
    routes: [defineRoute({ method: 'GET', path: '/hello', auth: 'public', handler: () => ({ msg: options.greeting }) })],
    graphql: (b) => b.queryField('hello', (t) => t.string({ resolve: () => options.greeting })),
    health: { hello: async () => true },
  }),
});
export default helloPlugin;
export {};
