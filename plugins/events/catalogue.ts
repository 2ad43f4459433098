import { z } from 'zod';
import { blamed, PluginError } from '../../core/plugin-error.ts';
import type { PluginContribution } from '../../core/plugin.ts';
import type { EventConsumer, EventTypeDefinition, JsonSchema } from './public/contributions.ts';

/** One entry of the catalogue as served by `GET /events/types`. */
export interface EventTypeView {
  name: string;
  description: string;
  plugin: string;
  schema: JsonSchema;
  /** Sent to webhook endpoints subscribed to it (false: only in the log and its subscriptions). */
  outbound: boolean;
}

const NAME = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/;

/** JSON encodes dates as ISO strings: say so instead of `{}` (zod calls `z.date()` unrepresentable). */
const dateAsString = (ctx: { zodSchema: { _zod: { def: { type: string } } }; jsonSchema: JsonSchema }): void => {
  if (ctx.zodSchema._zod.def.type === 'date') {
    ctx.jsonSchema.type = 'string';
    ctx.jsonSchema.format = 'date-time';
  }
};

/** The catalogue of event types: names are unique across plugins (a duplicate fails start-up). */
export class EventCatalogue {
  private readonly types = new Map<string, EventTypeView>();

  register(def: EventTypeDefinition, plugin: string): void {
    if (!NAME.test(def.name)) throw new PluginError(`Event type "${def.name}" of plugin "${plugin}" must be lower-case words separated by dots`);
    const prior = this.types.get(def.name);
    if (prior) throw new PluginError(`Event type "${def.name}" of plugin "${plugin}" is already declared by plugin "${prior.plugin}"`);
    const schema = def.data instanceof z.ZodType ? (z.toJSONSchema(def.data, { unrepresentable: 'any', io: 'output', override: dateAsString as never }) as JsonSchema) : def.data;
    this.types.set(def.name, { name: def.name, description: def.description, plugin, schema, outbound: def.outbound ?? true });
  }

  has(name: string): boolean {
    return this.types.has(name);
  }

  /** Whether webhook endpoints may receive events of `name` (false for unknown names). */
  outbound(name: string): boolean {
    return this.types.get(name)?.outbound ?? false;
  }

  names(): string[] {
    return [...this.types.keys()].sort();
  }

  list(): EventTypeView[] {
    return this.names().map((n) => this.types.get(n)!);
  }
}

/**
 * Registers every plugin's `eventTypes` and `eventConsumers` (`KernelView.contributions()`), once
 * every plugin is set up; a failure names the plugin that contributed it.
 */
export function registerContributions(
  log: { catalogue: EventCatalogue; addConsumer(consumer: EventConsumer): void },
  contributions: readonly { plugin: string; contribution: PluginContribution }[],
): void {
  for (const { plugin, contribution: c } of contributions) {
    try {
      const types = typeof c.eventTypes === 'function' ? c.eventTypes() : (c.eventTypes ?? []);
      for (const t of types) log.catalogue.register(t, plugin);
      for (const consumer of c.eventConsumers ?? []) log.addConsumer(consumer);
    } catch (err) {
      throw blamed(plugin, err);
    }
  }
}
