/** `multipart/form-data` of `POST /files`: one file part, streamed, plus optional text fields. */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { UnsupportedMediaTypeError, ValidationError } from '../../core/errors.ts';

export interface FilePart {
  stream: Readable;
  filename: string;
  mime_type: string;
}

const fieldError = (loc: string, msg: string, type: string) => new ValidationError([{ loc: ['body', loc], msg, type }]);

/**
 * Parses the request as it arrives and hands the file part's stream to `onFile` (which must read it
 * to its end or fail); resolves with `onFile`'s result and the text fields once the body has ended.
 * Fields may come before or after the file. On failure the request is unpiped, so the server can
 * drain or close it.
 * @throws UnsupportedMediaTypeError for a body that is not multipart; ValidationError without a file part, with two, or with an over-long field
 */
export async function readMultipart<T>(req: IncomingMessage, onFile: (part: FilePart) => Promise<T>): Promise<{ result: T; fields: Record<string, string> }> {
  if (!/^multipart\/form-data\b/i.test(req.headers['content-type'] ?? '')) throw new UnsupportedMediaTypeError('POST /files takes multipart/form-data (or a tus upload under /files/uploads)');
  const bb = busboy({ headers: req.headers, limits: { files: 1, fields: 20, fieldSize: 64 * 1024, parts: 22 } });
  const fields: Record<string, string> = {};
  let work: Promise<T> | null = null;
  let part: Readable | null = null;
  try {
    return await new Promise((resolve, reject) => {
      let failed = false;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        reject(err instanceof Error ? err : new Error(String(err)));
      };
      bb.on('file', (_name, stream, info) => {
        part = stream;
        work = onFile({ stream, filename: info.filename ?? 'file', mime_type: info.mimeType });
        work.catch(fail);
      });
      bb.on('field', (name, value, info) => {
        if (info.valueTruncated) fail(fieldError(name, 'field is longer than 65536 bytes', 'too_big'));
        else fields[name] = value;
      });
      bb.on('filesLimit', () => fail(fieldError('file', 'exactly one file part is accepted', 'too_many_files')));
      bb.on('error', fail);
      bb.on('close', () => {
        if (!work) return fail(fieldError('file', 'a file part is required', 'missing'));
        work.then((result) => resolve({ result, fields }), fail);
      });
      req.pipe(bb);
    });
  } catch (err) {
    req.unpipe(bb);
    // A file still being stored fails too, so its partial bytes are removed.
    (part as Readable | null)?.destroy(err as Error);
    throw err;
  }
}
