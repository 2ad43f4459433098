/**
 * The `permissions` document of a role and the rules a resource declares in code: their schema,
 * their types, and the normal form the engine combines. No Koa or GraphQL here.
 */
import { z } from 'zod';
import type { Actor } from '../../core/context.ts';
import { ROLES } from '../../core/access.ts';

/** The actions a rule grants; `read_drafts` and `publish` concern resources with drafts only. */
export const ACTIONS = ['read', 'create', 'update', 'delete', 'read_drafts', 'publish'] as const;
export type Action = (typeof ACTIONS)[number];

/** A filter in a resource's `where` language (checked against the resource when the role is saved). */
const whereSchema = z.record(z.string(), z.unknown());

/** `fields`: the fields a rule lets the role read or write, as a list or as everything but a list. */
export const fieldsSchema = z.union([z.array(z.string().min(1)).max(500), z.object({ except: z.array(z.string().min(1)).max(500) }).strict()]);

/** One action's rule: `true` (everything) or rows, fields, presets and check. */
export const ruleSchema = z.union([
  z.literal(true),
  z
    .object({
      rows: whereSchema.optional(),
      fields: fieldsSchema.optional(),
      presets: z.record(z.string(), z.unknown()).optional(),
      check: whereSchema.optional(),
    })
    .strict(),
]);
export type Rule = z.output<typeof ruleSchema>;

/** The rules of one resource, per action; an action without a rule is denied. */
export const resourceRulesSchema = z.object({ read: ruleSchema, create: ruleSchema, update: ruleSchema, delete: ruleSchema, read_drafts: ruleSchema, publish: ruleSchema }).partial().strict();
export type ResourceRules = z.output<typeof resourceRulesSchema>;

/** A role's `permissions`: resource name → its rules. */
export const permissionsSchema = z.record(z.string().regex(/^[a-z][a-z0-9_]*$/), resourceRulesSchema);
export type Permissions = z.output<typeof permissionsSchema>;

/** A rule declared in code may also be a function of the actor returning a rule (or nothing: denied). */
export type CodeRule = Rule | ((actor: Actor) => Rule | false | null | undefined);
/** `defineResource({ access })`: role name → the rules of this resource for that role. */
export type CodeAccess = Record<string, Partial<Record<Action, CodeRule>>>;

/** The roles every tenant has, with the access they always had. */
export const BUILTIN_ROLES: readonly string[] = Object.freeze([...ROLES]);

/** A rule after validation: rows and check compiled (variables still unresolved), fields as a set (null: every field). */
export interface CompiledRule {
  /** null: every row. */
  rows: Record<string, unknown> | null;
  fields: { only: string[] } | { except: string[] } | null;
  presets: Record<string, unknown>;
  check: Record<string, unknown> | null;
}

/** The normal form of a rule with `where` compiled by `compile` (the resource's own compiler). */
export function normalize(rule: Rule, compile: (where: Record<string, unknown>) => Record<string, unknown>): CompiledRule {
  if (rule === true) return { rows: null, fields: null, presets: {}, check: null };
  return {
    rows: rule.rows && Object.keys(rule.rows).length ? compile(rule.rows) : null,
    fields: rule.fields === undefined ? null : Array.isArray(rule.fields) ? { only: rule.fields } : { except: rule.fields.except },
    presets: rule.presets ?? {},
    check: rule.check && Object.keys(rule.check).length ? compile(rule.check) : null,
  };
}

/** Names of the variables a rule may use. */
export const VARIABLE = /^\$(actor\.id|actor\.tenant_id|actor\.attributes\.[A-Za-z0-9_.-]+|now)$/;
