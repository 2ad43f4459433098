/** The verbs of a resource's events (`<resource>.<verb>`): its own file, so the types and the event builders share it without an import cycle. */
export const RESOURCE_EVENT_VERBS = ['created', 'updated', 'deleted', 'restored'] as const;
/** The events of a resource with drafts besides the four: a draft saved (no draft values), published, withdrawn. */
export const DRAFT_EVENT_VERBS = ['draft_saved', 'published', 'unpublished'] as const;
export type ResourceEventVerb = (typeof RESOURCE_EVENT_VERBS)[number] | (typeof DRAFT_EVENT_VERBS)[number];
