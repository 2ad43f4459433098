import { z } from 'zod';

/** `GET /graphql/assets/:file`: any name is accepted here; a name the page does not link is 404. */
export const assetParams = z.object({
  file: z.string().describe('A file the GraphiQL page links, e.g. `graphiql.<hash>.js`'),
});

/** What the files are. */
export const ASSET_MEDIA_TYPES = ['text/javascript', 'text/css', 'image/x-icon'];
