/**
 * Files: the tenant's files a page at a time (name, type, size, status, when, id), uploads with a
 * progress bar (multipart `POST /files` through XMLHttpRequest, whose upload events give the
 * progress), image previews, download and delete. Previews and downloads use the file's signed
 * URL (`File.url`), taken as a same-origin path so the page's `img-src 'self'` allows it and the
 * bearer token never leaves memory.
 */
import { useState } from 'preact/hooks';
import { actingTenant, ApiError, isSystem, run, session } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { ConfirmDialog, Drawer, Empty, ErrorBox, Loading, Pager, Progress, ShortId, Time, toast, useAsync } from '../ui.tsx';

const PER_PAGE = 20;
const Files = graphql(`
  query Files($page: Int, $per_page: Int) {
    files(page: $page, per_page: $per_page, sort: "-created_at") {
      total total_pages
      items { _id filename content_type size status created_at etag sha256 url }
    }
  }
`);
const FileUrl = graphql(`query FileUrl($id: ID!) { file(id: $id) { _id url } }`);
const DeleteFile = graphql(`mutation DeleteFile($id: ID!, $if_match: String) { deleteFile(id: $id, if_match: $if_match) { _id status } }`);
type FileRow = ResultOf<typeof Files>['files']['items'][number];

/** Image types a browser shows in an `<img>` (the server sends them inline). */
const IMAGES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif']);
/** Transform sizes asked for (`FILES_TRANSFORM_ALLOWED` must hold them), and the largest original shown when it does not. */
export const THUMB = '96x96';
export const PREVIEW = '800x0';
const ORIGINAL_MAX = 2 * 1024 * 1024;

/** "1.5 MB" for a number of bytes. */
export function bytes(n: number | null | undefined): string {
  if (n == null) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** The signed URL as a path on this origin (the server may see another host or scheme behind a proxy). */
const local = (url: string): string => {
  const u = new URL(url, location.href);
  return u.pathname + u.search;
};

/** The image's URLs to try in order: the transform, then the original when it is small enough. */
function sources(f: FileRow, size: string): string[] {
  if (!f.url || !IMAGES.has(f.content_type ?? '')) return [];
  const [w, h] = size.split('x');
  const base = local(f.url);
  const out = [`${base}&w=${w}&h=${h}&fit=${h === '0' ? 'inside' : 'cover'}`];
  if ((f.size ?? Infinity) <= ORIGINAL_MAX) out.push(base);
  return out;
}

/** An image through its signed URL, falling back to the next source when one fails (a transform not allowed). */
function Preview({ f, size, cls }: { f: FileRow; size: string; cls: string }) {
  const all = sources(f, size);
  const [at, setAt] = useState(0);
  const src = all[at];
  if (!src) return <span class={`${cls} none`} aria-hidden="true" />;
  return <img class={cls} src={src} alt={`Preview of ${f.filename ?? 'the file'}`} onError={() => setAt((i) => i + 1)} data-testid="preview" />;
}

/** The upload's failure in plain words, from the server's envelope. */
export function uploadError(status: number, body: { error?: { code?: string; message?: string; details?: Record<string, unknown> }; request_id?: string } | null, name: string, requestId: string | null): ApiError {
  const e = body?.error ?? {};
  const d = e.details ?? {};
  const code = e.code ?? (status ? `HTTP_${status}` : 'NETWORK_ERROR');
  let text = e.message ?? `The upload of ${name} failed (HTTP ${status}).`;
  if (status === 413 && typeof d.quota === 'number') text = `${name} was not stored: your tenant's storage is full (${bytes(Number(d.usage))} of ${bytes(d.quota)} used). Delete files you no longer need, or ask for a larger quota.`;
  else if (status === 413 && typeof d.max_bytes === 'number') text = `${name} was not stored: it is larger than the ${bytes(d.max_bytes)} allowed per file.`;
  else if (status === 415 && Array.isArray(d.allowed)) text = `${name} was not stored: files of type ${String(d.content_type)} are not accepted here (accepted: ${d.allowed.join(', ')}).`;
  else if (status === 415) text = `${name} was not stored: its contents (${String(d.detected ?? 'unknown')}) are not the type it claims to be (${String(d.declared)}).`;
  else if (status === 0) text = `${name} was not stored: the connection broke off (the server may have refused a file this large).`;
  return new ApiError(text, code, status, d, body?.request_id ?? requestId);
}

/** `POST /files` (multipart) with the session's token; `onProgress` gets 0–100 as the bytes go up. */
function send(file: File, onProgress: (pct: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = session.value;
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/files');
    xhr.setRequestHeader('Accept', 'application/json');
    if (s) xhr.setRequestHeader('Authorization', `Bearer ${s.token}`);
    if (actingTenant.value) xhr.setRequestHeader('X-Tenant-Id', actingTenant.value.id);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress((e.loaded / e.total) * 100);
    xhr.onload = () => {
      if (xhr.status === 201) return resolve();
      let body = null;
      try { body = JSON.parse(xhr.responseText) as Parameters<typeof uploadError>[1]; } catch { /* not JSON: the status says enough */ }
      reject(uploadError(xhr.status, body, file.name, xhr.getResponseHeader('X-Request-Id')));
    };
    xhr.onerror = () => reject(uploadError(0, null, file.name, null));
    const form = new FormData();
    form.append('file', file, file.name);
    xhr.send(form);
  });
}

interface Upload { id: number; name: string; pct: number; error: unknown; done: boolean }
let uploadSeq = 0;

export default function FilesScreen() {
  const [page, setPage] = useState(1);
  const list = useAsync(() => run(Files, { page, per_page: PER_PAGE }).then((r) => r.files), [page]);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [open, setOpen] = useState<FileRow | null>(null);
  const [deleting, setDeleting] = useState<FileRow | null>(null);
  // A system administrator's own view spans every tenant: a new file needs one tenant to belong to.
  const canUpload = !isSystem(session.value?.user) || !!actingTenant.value;
  const patch = (id: number, p: Partial<Upload>) => setUploads((all) => all.map((u) => (u.id === id ? { ...u, ...p } : u)));

  const uploadAll = async (files: File[]) => {
    for (const file of files) {
      const id = ++uploadSeq;
      setUploads((all) => [...all.filter((u) => !u.done || u.error), { id, name: file.name, pct: 0, error: null, done: false }]);
      try {
        await send(file, (pct) => patch(id, { pct }));
        patch(id, { pct: 100, done: true });
        toast(`Uploaded ${file.name}`);
        setPage(1);
        list.reload();
      } catch (e) {
        patch(id, { error: e, done: true });
        toast(`Failed: ${e instanceof Error ? e.message : String(e)}`, 'bad');
      }
    }
  };
  const download = async (f: FileRow) => {
    try {
      const url = (await run(FileUrl, { id: f._id })).file?.url;
      if (!url) throw new Error(`${f.filename ?? 'The file'} is not ready to download`);
      const a = document.createElement('a');
      a.href = local(url);
      a.download = f.filename ?? 'file';
      document.body.append(a);
      a.click();
      a.remove();
    } catch (e) {
      toast(`Failed: ${e instanceof Error ? e.message : String(e)}`, 'bad');
    }
  };

  const data = list.data;
  return (
    <>
      <h1>Files</h1>
      <section aria-labelledby="h-upload">
        <h2 id="h-upload">Upload</h2>
        {canUpload ? (
          <form class="filters" onSubmit={(e) => {
            e.preventDefault();
            const input = e.currentTarget.elements.namedItem('files') as HTMLInputElement;
            const chosen = [...(input.files ?? [])];
            if (!chosen.length) return toast('Choose a file first', 'bad');
            input.value = '';
            void uploadAll(chosen);
          }}>
            <div class="row">
              <label for="file-input">Files to upload</label>
              <input id="file-input" name="files" type="file" multiple />
            </div>
            <button type="submit">Upload</button>
          </form>
        ) : (
          <p class="muted" data-testid="choose-tenant">Choose a tenant in the header to upload files for it: a file belongs to one tenant.</p>
        )}
        {uploads.length > 0 && <ul class="uploads" data-testid="uploads">
          {uploads.map((u) => (
            <li key={u.id}>
              <span class="upload-name">{u.name}</span>
              {u.error ? <ErrorBox error={u.error} /> : <Progress value={u.pct} label={`Upload of ${u.name}`} />}
            </li>
          ))}
        </ul>}
      </section>
      <section aria-labelledby="h-files">
        <h2 id="h-files">{data ? `Files (${data.total ?? 0})` : 'Files'}</h2>
        <Loading when={list.loading} />
        <ErrorBox error={list.error} />
        {data && data.items.length === 0 && (
          <Empty>No files yet. {canUpload ? 'Choose files above and press Upload' : 'Choose a tenant in the header, then upload files'}; images show a preview here.</Empty>
        )}
        {data && data.items.length > 0 && (
          <div class="scroll">
            <table class="list" data-testid="file-list">
              <caption class="sr-only">Files</caption>
              <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Size</th><th scope="col">Status</th><th scope="col">Uploaded</th><th scope="col">Id</th><th scope="col">Actions</th></tr></thead>
              <tbody>
                {data.items.map((f) => (
                  <tr key={f._id}>
                    <td><span class="file-name"><Preview f={f} size={THUMB} cls="thumb" /><button type="button" class="link" onClick={() => setOpen(f)}>{f.filename}</button></span></td>
                    <td class="nowrap">{f.content_type}</td>
                    <td class="nowrap">{bytes(f.size)}</td>
                    <td>{f.status}</td>
                    <td class="nowrap"><Time v={f.created_at} /></td>
                    <td class="nowrap"><ShortId id={f._id} label="file id" /></td>
                    <td>
                      <span class="row-actions">
                        {f.status === 'ready' && <button type="button" onClick={() => void download(f)}>Download<span class="sr-only"> {f.filename}</span></button>}
                        <button type="button" onClick={() => setDeleting(f)}>Delete…<span class="sr-only"> {f.filename}</span></button>
                      </span>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {data && (data.total_pages ?? 1) > 1 && <Pager label="Pages of files" page={page} totalPages={data.total_pages ?? 1} onPage={setPage} />}
      </section>
      {open && (
        <Drawer title={`File ${open.filename ?? ''}`} onClose={() => setOpen(null)} testId="file-detail">
          <Preview f={open} size={PREVIEW} cls="preview" />
          <dl class="detail">
            <div><dt>Id</dt><dd><code>{open._id}</code></dd></div>
            <div><dt>Type</dt><dd>{open.content_type}</dd></div>
            <div><dt>Size</dt><dd>{bytes(open.size)} ({open.size} bytes)</dd></div>
            <div><dt>Status</dt><dd>{open.status}</dd></div>
            <div><dt>Uploaded</dt><dd><Time v={open.created_at} /></dd></div>
            <div><dt>SHA-256</dt><dd><code>{open.sha256 ?? '–'}</code></dd></div>
          </dl>
        </Drawer>
      )}
      {deleting && (
        <ConfirmDialog title={`Delete ${deleting.filename ?? 'this file'}?`} confirmLabel="Delete" onClose={() => setDeleting(null)} onConfirm={async () => {
          await run(DeleteFile, { id: deleting._id, if_match: deleting.etag });
          toast(`Deleted ${deleting.filename ?? deleting._id}`);
          if (open?._id === deleting._id) setOpen(null);
          list.reload();
        }}>
          The file is no longer listed or downloadable at once; its bytes are removed later by the purge.
        </ConfirmDialog>
      )}
    </>
  );
}
