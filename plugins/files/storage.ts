/** Where file bytes live: the adapter contract and the registry plugins add adapters to. */
import type { Readable } from 'node:stream';
import { ConflictError } from '../../core/errors.ts';
import { PluginError } from '../../core/plugin.ts';

/** An inclusive byte range, as HTTP `Range` names it. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * A storage adapter. Keys are opaque strings the files service chooses (`<tenant>/<file id>`,
 * `<tenant>/<file id>/<variant>`); an adapter stores each key's bytes once and never rewrites them.
 */
export interface StorageAdapter {
  /** Unique name, recorded on each file it holds (`storage`). @example 'gridfs' */
  readonly name: string;
  /**
   * Stores the stream under `key`, reading it to its end. When the stream fails (a limit cut it
   * off, the client went away) the adapter removes whatever it had stored of it and rejects.
   */
  put(key: string, body: Readable, info: { content_type: string }): Promise<{ size: number }>;
  /** The bytes of `key` (those of `range` only, when given). @throws when the key holds nothing */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Removes `key`; a key that holds nothing is not an error. */
  delete(key: string): Promise<void>;
  /** The stored size of `key`, or null when it holds nothing. */
  stat(key: string): Promise<{ size: number } | null>;
  /** Every stored key starting with `prefix` (the orphan sweep compares them with the records). */
  keys?(prefix: string): AsyncIterable<string>;
  /**
   * Removes bytes of stores that never completed before `before` (a process killed mid-upload),
   * for stores that can leave such bytes behind; resolves to how many stores it removed.
   */
  sweepIncomplete?(before: Date): Promise<number>;
  /** A URL of the storage service itself that serves `key` without credentials until `expires_in` seconds pass. */
  presign?(key: string, opts: { expires_in: number; filename: string; content_type: string }): Promise<string>;
}

/** The registered adapters, looked up by a file's `storage` name. */
export class StorageRegistry {
  private readonly byName = new Map<string, StorageAdapter>();

  /**
   * Adds an adapter.
   * @throws PluginError on a bad or duplicate name or a missing function
   */
  add(a: StorageAdapter): void {
    if (!a || typeof a.name !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(a.name)) throw new PluginError(`Storage adapter name "${String(a?.name)}" must match [a-z0-9][a-z0-9_-]{0,63}`);
    if (this.byName.has(a.name)) throw new PluginError(`Storage adapter "${a.name}" is already registered`);
    for (const fn of ['put', 'get', 'delete', 'stat'] as const) {
      if (typeof a[fn] !== 'function') throw new PluginError(`Storage adapter "${a.name}": ${fn} must be a function`);
    }
    this.byName.set(a.name, a);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /** @throws ConflictError when no adapter of that name is registered on this server (a file stored by one since removed) */
  get(name: string): StorageAdapter {
    const a = this.byName.get(name);
    if (!a) throw new ConflictError(`Storage adapter "${name}" is not registered on this server`, { storage: name });
    return a;
  }
}
