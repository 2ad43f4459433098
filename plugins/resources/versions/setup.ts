/** What the resources plugin contributes for versions: the store and its sink, the personal-data declaration, the purge job. */
import type { Connection } from 'mongoose';
import type { EventLog } from '../../events/index.ts';
import type { JobDefinition, PersonalDataDeclaration } from '../../../core/plugin.ts';
import type { ResourceRegistry } from '../registry.ts';
import { purgeVersions } from './purge.ts';
import { Versions } from './service.ts';
import { VersionStore } from './store.ts';

/** The versions of the registry's versioned resources: every write stores its version from its event, durably (store.ts). */
export function setUpVersions(db: Connection, registry: ResourceRegistry, events: EventLog): Versions {
  const versions = new Versions(new VersionStore(db, (name) => registry.get(name)?.def.versions ?? null));
  events.addSink({ name: 'versions', types: '*', write: (batch) => versions.store.write(batch) });
  registry.purgeVersions = (resource, ids) => versions.store.purgeDocuments(resource, ids);
  return versions;
}

/**
 * The documents' declarations, and `resource_versions` when a resource keeps versions: old
 * versions hold what the documents held, so an erasure scrubs them as it depersonalizes those.
 */
export function withVersionsPersonalData(documents: PersonalDataDeclaration[], registry: ResourceRegistry, versions: Versions): PersonalDataDeclaration[] {
  const versioned = documents.filter((d) => registry.get(d.name)?.def.versions);
  if (!versioned.length) return documents;
  const resources = versioned.map((d) => ({ name: d.name, subject_field: d.subject_field ?? 'created_by', neutral: d.neutral ?? {} }));
  return [...documents, {
    name: 'resource_versions', model: versions.store.model.modelName, subject_field: 'actor', gdpr_fields: [], on_erasure: 'scrub',
    scrub: (subject) => versions.store.scrubSubject(resources, subject),
  }];
}

/** `purge_versions`: the age limit (`versions.max_age_days`), as the run's actor. */
export const purgeVersionsJob = (registry: ResourceRegistry, versions: Versions): JobDefinition => ({
  name: 'purge_versions',
  description: 'Drops versions older than their resource\'s versions.max_age_days (the first version of each document stays)',
  timeout: 600,
  run: async (ctx) => purgeVersions(registry.list(), versions.store, ctx.actor),
});
