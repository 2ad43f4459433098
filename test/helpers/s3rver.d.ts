/** Types of `s3rver` (the package ships none): the part the files tests use. */
declare module 's3rver' {
  export interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string; configs: unknown[] }[];
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    /** Starts listening; resolves with the bound address. */
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
  }
}
