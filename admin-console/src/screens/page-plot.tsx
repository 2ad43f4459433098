/**
 * A page's plots (a job, an endpoint, payments) for administrators when the server keeps the
 * series: the charts chunk (uPlot) is loaded here, when such a page is first opened.
 */
import { useEffect, useState } from 'preact/hooks';
import type { ComponentType } from 'preact';
import { isAdmin, session } from '../api.ts';
import { rootFields } from '../caps.ts';
import { ErrorBox, Loading, waitFor } from '../ui.tsx';
import type { PagePlotProps } from './charts.tsx';

/** `needs`: the root field of the page's series; `title`: the heading over the plots. */
export function LazyPagePlot(props: PagePlotProps & { needs: string; title: string }) {
  const show = isAdmin(session.value?.user) && !!rootFields.value?.has(props.needs);
  const [Plot, setPlot] = useState<ComponentType<PagePlotProps> | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => { if (show) waitFor(import('./charts.tsx')).then((m) => setPlot(() => m.PagePlot), setError); }, [show]);
  if (!show) return null;
  const { needs: _needs, title, ...plot } = props;
  return (
    <>
      <h2>{title}</h2>
      {error ? <ErrorBox error={error} /> : Plot ? <Plot {...(plot as PagePlotProps)} /> : <Loading when />}
    </>
  );
}
