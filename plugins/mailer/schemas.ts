import { z } from 'zod';

/** One rendered e-mail, as a template returns it: both bodies are sent (multipart/alternative). */
export const renderedMail = z.object({
  /** One line (no line breaks: a header). */
  subject: z.string().min(1).max(998).regex(/^[^\r\n]*$/, 'must be one line'),
  text: z.string().min(1),
  html: z.string().min(1),
});
export type RenderedMail = z.output<typeof renderedMail>;

/** Renders a template from its data (the sender's own fields, e.g. `link`, `tenant_name`). */
export type MailTemplate<D = Record<string, unknown>> = (data: D) => RenderedMail;
