import { AppError, definePlugin, defineRoute, isSystemActor, modelOn, Schema, z, type Actor } from 'plugin-api-server';

const greetingSchema = new Schema({ name: { type: String, required: true }, by: { type: String, required: true } });

/** Who greets: a job's system actor is no one. */
function greeter(actor: Actor): string {
  if (isSystemActor(actor)) throw new AppError(400, 'BAD_REQUEST', 'The system actor greets no one');
  return actor.name;
}

export default definePlugin({
  name: 'greeter',
  setup: ({ db }) => {
    const greetings = modelOn(db, 'Greeting', greetingSchema);
    return {
      routes: [defineRoute({
        method: 'POST', path: '/greetings', status: 201, body: z.object({ name: z.string().min(1) }).strict(),
        handler: async ({ actor, body }) => {
          const g = await greetings.create({ name: body.name, by: greeter(actor!) });
          return { id: String(g._id), name: g.name, by: g.by };
        },
      })],
    };
  },
});
export {};
