import { describe, expect, it } from 'vitest';
import { toAppError } from '../../core/http/map-error.ts';

// Driver errors the server must classify; these shapes are MongoDB's own (code + codeName).
describe('toAppError', () => {
  it.each([
    [{ code: 11000, codeName: 'DuplicateKey' }, 409, 'CONFLICT'],
    [{ code: 50, codeName: 'MaxTimeMSExpired' }, 503, 'QUERY_TIMEOUT'],
    [{ name: 'CastError', message: 'Cast to ObjectId failed' }, 400, 'BAD_REQUEST'],
    [{ status: 413, expose: true, message: 'request entity too large' }, 413, 'PAYLOAD_TOO_LARGE'],
    [{ status: 400, expose: true, type: 'entity.parse.failed', message: 'Unexpected token' }, 400, 'BAD_REQUEST'],
  ])('%o → %i %s', (err, status, code) => {
    const e = toAppError(err);
    expect(e?.status).toBe(status);
    expect(e?.code).toBe(code);
  });

  it('leaves unexpected errors unclassified (they become a masked 500)', () => {
    expect(toAppError(new Error('boom'))).toBeNull();
    expect(toAppError({ code: 1, codeName: 'InternalError' })).toBeNull();
    expect(toAppError({ status: 500, message: 'x' })).toBeNull();
  });
});
