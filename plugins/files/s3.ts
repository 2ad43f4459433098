/** The `s3` storage adapter, for AWS S3 and S3-compatible services (MinIO, R2, Ceph, ...). */
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateMultipartUploadCommand, DeleteObjectCommand, GetObjectCommand,
  HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { ByteRange, StorageAdapter } from './storage.ts';

/** Settings of the `s3` adapter (from `FILES_S3_*` and the AWS credential variables). */
export interface S3Settings {
  bucket: string;
  region: string;
  /** A custom endpoint; requests then use path-style addressing (`<endpoint>/<bucket>/<key>`). */
  endpoint?: string | undefined;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined } | undefined;
}

/** S3's smallest part (except the last): the most one upload holds in memory at a time. */
const PART_BYTES = 5 * 1024 * 1024;

/**
 * Streams of unknown length go up as multipart uploads in 5 MB parts (S3 needs each part's length),
 * so memory stays at one part whatever the file's size; a stream that ends within the first part is
 * one PutObject.
 */
export function s3Adapter(s: S3Settings): StorageAdapter {
  const client = new S3Client({
    region: s.region,
    ...(s.endpoint ? { endpoint: s.endpoint, forcePathStyle: true } : {}),
    ...(s.credentials ? { credentials: s.credentials } : {}),
  });
  const Bucket = s.bucket;
  return {
    name: 's3',
    async put(key: string, body: Readable, info: { content_type: string }) {
      let uploadId: string | undefined;
      const parts: { ETag: string | undefined; PartNumber: number }[] = [];
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      let size = 0;
      const flush = async () => {
        const part = Buffer.concat(pending, pendingBytes);
        pending = [];
        pendingBytes = 0;
        uploadId ??= (await client.send(new CreateMultipartUploadCommand({ Bucket, Key: key, ContentType: info.content_type }))).UploadId;
        const PartNumber = parts.length + 1;
        const res = await client.send(new UploadPartCommand({ Bucket, Key: key, UploadId: uploadId, PartNumber, Body: part, ContentLength: part.length }));
        parts.push({ ETag: res.ETag, PartNumber });
      };
      try {
        for await (const chunk of body) {
          const b = chunk as Buffer;
          pending.push(b);
          pendingBytes += b.length;
          size += b.length;
          if (pendingBytes >= PART_BYTES) await flush();
        }
        if (!uploadId) {
          const part = Buffer.concat(pending, pendingBytes);
          await client.send(new PutObjectCommand({ Bucket, Key: key, Body: part, ContentLength: part.length, ContentType: info.content_type }));
        } else {
          if (pendingBytes) await flush();
          await client.send(new CompleteMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
        }
      } catch (err) {
        if (uploadId) await client.send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId })).catch(() => undefined);
        throw err;
      }
      return { size };
    },
    async get(key: string, range?: ByteRange) {
      const res = await client.send(new GetObjectCommand({ Bucket, Key: key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
      return res.Body as Readable;
    },
    async delete(key: string) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: key }));
    },
    async stat(key: string) {
      try {
        const res = await client.send(new HeadObjectCommand({ Bucket, Key: key }));
        return { size: Number(res.ContentLength ?? 0) };
      } catch (err) {
        if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return null;
        throw err;
      }
    },
    async *keys(prefix: string) {
      let token: string | undefined;
      do {
        const res = await client.send(new ListObjectsV2Command({ Bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
        for (const o of res.Contents ?? []) if (o.Key) yield o.Key;
        token = res.IsTruncated ? res.NextContinuationToken : undefined;
      } while (token);
    },
  };
}
