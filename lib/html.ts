/** Text and attribute values in HTML that the server writes itself (documentation pages, e-mails). */

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * `v` as text safe inside an element or a quoted attribute: `&`, `<`, `>`, `"` and `'` as entities.
 * Not for `<script>` contents or URLs' schemes: those need their own rules.
 */
export const escapeHtml = (v: unknown): string => String(v).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
