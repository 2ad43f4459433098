import { Schema } from 'mongoose';
import { defineResource } from './define.ts';

const projectFields = {
  name: { type: String, required: true, trim: true, minlength: 1, maxlength: 200 },
  description: { type: String, default: null, maxlength: 5000 },
  status: { type: String, enum: ['active', 'archived'], default: 'active' },
  tags: { type: [String], default: [] },
  budget: { type: Number, default: null },
  owner_email: { type: String, default: null, lowercase: true, trim: true },
};

const projects = (schema: Schema) => defineResource({
  name: 'projects',
  schema,
  searchable_fields: ['name', 'description'],
  allow_bulk_create: true,
  allow_bulk_delete: true,
  // The owner's address is personal data; the rest describes the project, not a person.
  gdpr_fields: ['owner_email'],
  // Every write keeps the document as a version: history, diff and restore (docs/versions.md).
  versions: true,
  // Drafts too, so a new user sees history and publishing together (docs/versions.md#drafts).
  drafts: true,
});

/** `/projects`: the sample resource with search, tags and both bulk operations. */
export const projectsResource = projects(new Schema(projectFields));

/** `/projects` with the files plugin on: plus an optional `attachment`, a file of any type (cleared when the file is deleted). */
export const projectsWithAttachment = projects(new Schema({ ...projectFields, attachment: { type: 'file', default: null } }));

/** `/tasks`: needs feature `tasks`; references projects, whose deletion it denies while live tasks exist. */
export const tasksResource = defineResource({
  name: 'tasks',
  schema: new Schema({
    project_id: { type: Schema.Types.ObjectId, ref: 'projects', required: true, index: true },
    title: { type: String, required: true, trim: true, minlength: 1, maxlength: 500 },
    done: { type: Boolean, default: false },
    priority: { type: Number, integer: true, min: 1, max: 5, default: null },
    due_at: { type: Date, default: null },
    tags: { type: [String], default: [] },
  }),
  searchable_fields: ['title'],
  populatable: ['project_id'],
  guards: { features: ['tasks'] },
  cascade: [{ field: 'project_id', references: 'projects', on_delete: 'deny' }],
  // No field is designed to hold personal data; tasks are still exported with their creator's data.
  gdpr_fields: [],
});

/**
 * The sample resources `/projects` and `/tasks`, registered when the plugin is given no `resources`
 * and `SAMPLE_RESOURCES_ENABLED` is on (its default outside production).
 */
export const sampleResources = [projectsResource, tasksResource];

/** The sample resources when `FILES_ENABLED` is on. */
export const sampleResourcesWithFiles = [projectsWithAttachment, tasksResource];
