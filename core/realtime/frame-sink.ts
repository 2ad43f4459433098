/**
 * A graphql-ws subscription's socket (http.ts puts it in the operation's context): its group
 * writes the subscription's `next` messages to it directly, rather than through graphql-ws's
 * per-message loop and envelop's per-result mapping.
 */
export interface FrameSink {
  /**
   * Writes one `next` message per payload (the JSON of a result without errors), in order, in one
   * write. Undefined when little is buffered; past the socket's high-water mark, a promise that
   * settles once they have left: the member waits, and its queue grows toward REALTIME_MAX_QUEUE
   * (then its stream ends, 503), as graphql-ws's own loop waits for each write.
   */
  next(payloads: Buffer[]): Promise<void> | undefined;
}
