/**
 * Payments: the list with filters and exact money per currency (live through `resourceChanged`),
 * a payment's detail with its transition history from the audit log, process / complete (capture) /
 * cancel / refund (the refundable amount shown; the server's refusal shown as it says it), the
 * the payment's refund attempts, the ledger (administrators) and payout batches (system
 * administrators) with approve, process, execute (completed, with the bank reference) and fail.
 */
import { LazyPagePlot } from './page-plot.tsx';
import { useState } from 'preact/hooks';
import { isAdmin, isSystem, run, session } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useLive } from '../live.ts';
import { Crumbs, Dialog, Empty, ErrorBox, fieldErrors, fmtDate, Time, Loading, money, Pager, Tabs, useAction, useAsync } from '../ui.tsx';

const Payments = graphql(`
  query Payments($filter: JSON, $page: Int) {
    payments(filter: $filter, page: $page, per_page: 20, sort: "-created_at") { total page total_pages items { _id amount currency status provider user_name resource_type resource_id refunded_amount created_at } }
  }
`);
const PaymentQ = graphql(`
  query Payment($id: ID!, $rid: String!) {
    payment(id: $id) { _id etag amount currency status provider provider_reference user_id user_name resource_type resource_id refunded_amount refund_reason failure_reason paid_at cancelled_at refunded_at created_at }
    auditLog(resource: "payments", resource_id: $rid, sort: "created_at", per_page: 100) { items { id created_at operation user_name changes } }
    paymentRefunds(id: $id) { id amount currency status reason error provider_refund_id created_at }
  }
`);
const Process = graphql(`mutation ProcessPayment($id: ID!) { processPayment(id: $id) { payment { _id status } } }`);
const Complete = graphql(`mutation CompletePayment($id: ID!, $ref: String!) { completePayment(id: $id, provider_reference: $ref, provider_status: "paid") { _id status } }`);
const CancelP = graphql(`mutation CancelPayment($id: ID!, $reason: String) { cancelPayment(id: $id, reason: $reason) { _id status } }`);
const Refund = graphql(`mutation RefundPayment($id: ID!, $amount: String!, $reason: String) { refundPayment(id: $id, amount: $amount, reason: $reason) { _id status refunded_amount } }`);
const Ledger = graphql(`
  query Ledger($page: Int) {
    ledgerBalance { tenant_id account currency debit credit balance }
    ledgerEntries(page: $page, per_page: 25) { total page total_pages items { id created_at entry_type account direction amount currency payment_id } }
  }
`);
const Payouts = graphql(`query Payouts($status: String) { payouts(status: $status, per_page: 50) { total items { id status currency gross_amount fee_amount net_amount payment_count recipient_type recipient_id failure_reason bank_reference created_at } } }`);
const ProcessPayout = graphql(`mutation ProcessPayout($id: ID!) { processPayout(id: $id) { id status } }`);
const ApprovePayout = graphql(`mutation ApprovePayout($id: ID!) { approvePayout(id: $id) { id status } }`);
const ExecutePayout = graphql(`mutation ExecutePayout($id: ID!, $ref: String!) { executePayout(id: $id, bank_reference: $ref) { id status } }`);
const FailPayout = graphql(`mutation FailPayout($id: ID!, $reason: String!) { failPayout(id: $id, reason: $reason) { id status } }`);
const Changed = graphql(`subscription PaymentsChanged { resourceChanged(resource: "payments") { id } }`);
type Batch = ResultOf<typeof Payouts>['payouts']['items'][number];

export default function PaymentsScreen({ route }: { route: string[] }) {
  const u = session.value?.user;
  const [tab = 'list', id] = route;
  const tabs: [string, string][] = [['/payments/list', 'Payments'], ...(isAdmin(u) ? [['/payments/ledger', 'Ledger'] as [string, string]] : []), ...(isSystem(u) ? [['/payments/payouts', 'Payouts'] as [string, string]] : [])];
  return (
    <>
      <h1>Payments</h1>
      <Tabs label="Payments" current={`/payments/${tab}`} items={tabs} />
      {tab === 'list' && id ? <PaymentDetail id={id} /> : tab === 'ledger' && isAdmin(u) ? <LedgerView /> : tab === 'payouts' && isSystem(u) ? <PayoutsView /> : <PaymentList />}
    </>
  );
}

/** A payment's status in words: `partially_refunded` → "partially refunded". */
const statusText = (s: string | null) => (s ?? '').replace(/_/g, ' ');

function PaymentList() {
  const [f, setF] = useState({ status: '', currency: '' });
  const [applied, setApplied] = useState(f);
  const [page, setPage] = useState(1);
  const filter = Object.fromEntries(Object.entries(applied).filter(([, v]) => v));
  const list = useAsync(() => run(Payments, { filter, page }).then((r) => r.payments), [applied, page]);
  useLive(Changed, {}, () => list.reload(), []);
  return (
    <>
      <LazyPagePlot kind="payments" needs="paymentSeries" title="Payments per day" />
      <form class="filters" aria-label="Filter payments" onSubmit={(e) => { e.preventDefault(); setPage(1); setApplied(f); }}>
        <div class="row">
          <label for="pay-status">Status</label>
          <select id="pay-status" value={f.status} onChange={(e) => setF({ ...f, status: e.currentTarget.value })}>
            <option value="">any</option>
            {['pending', 'processing', 'completed', 'partially_refunded', 'refunded', 'cancelled', 'failed'].map((s) => <option key={s} value={s}>{statusText(s)}</option>)}
          </select>
        </div>
        <div class="row"><label for="pay-currency">Currency</label><input id="pay-currency" maxLength={3} value={f.currency} onInput={(e) => setF({ ...f, currency: e.currentTarget.value.toUpperCase() })} /></div>
        <button type="submit">Apply</button>
      </form>
      <Loading when={list.loading} />
      <ErrorBox error={list.error} />
      {list.data?.items.length === 0 && <Empty>{Object.keys(filter).length ? 'No payment matches these filters. Choose "any" status and clear the currency to see them all.' : 'No payments yet. A payment appears here when a user pays for a resource through the API.'}</Empty>}
      {!!list.data?.items.length && <table data-testid="payments">
        <caption class="sr-only">Payments</caption>
        <thead><tr><th scope="col">Payment</th><th scope="col">Amount</th><th scope="col">Refunded</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
        <tbody>
          {(list.data?.items ?? []).map((p) => (
            <tr key={p._id}>
              <td><a href={`#/payments/list/${p._id}`}>{p.resource_type} {p.resource_id}</a><br /><small class="muted">{p.user_name} · {p.provider}</small></td>
              <td class="num">{money(p.amount, p.currency)}</td>
              <td class="num">{p.refunded_amount && p.refunded_amount !== '0' && !/^0(\.0+)?$/.test(p.refunded_amount) ? money(p.refunded_amount, p.currency) : ''}</td>
              <td>{statusText(p.status)}</td>
              <td><Time v={p.created_at} /></td>
            </tr>
          ))}
        </tbody>
      </table>}
      <Pager label="Pages of payments" page={page} totalPages={list.data?.total_pages ?? 1} onPage={setPage} />
    </>
  );
}

/** Exact decimal subtraction on strings (no floating point): a − b with `scale` decimals. */
const minus = (a: string, b: string | null | undefined): string => {
  const scale = Math.max((a.split('.')[1] ?? '').length, ((b ?? '0').split('.')[1] ?? '').length);
  const toInt = (s: string) => {
    const [i = '0', f = ''] = s.split('.');
    return BigInt(i + f.padEnd(scale, '0'));
  };
  const v = toInt(a) - toInt(b ?? '0');
  const neg = v < 0n;
  const digits = (neg ? -v : v).toString().padStart(scale + 1, '0');
  return `${neg ? '-' : ''}${scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits}`;
};

function PaymentDetail({ id }: { id: string }) {
  const admin = isAdmin(session.value?.user);
  const q = useAsync(() => run(PaymentQ, { id, rid: id }), [id]);
  const { error, busy, act } = useAction();
  const [amount, setAmount] = useState('');
  const [ref, setRef] = useState('');
  useLive(Changed, {}, () => q.reload(), [id]);
  const p = q.data?.payment;
  if (!p) return <><Loading when={q.loading} /><ErrorBox error={q.error ?? (q.data ? new Error('Payment not found') : null)} /></>;
  const refundable = p.amount && (p.status === 'completed' || p.status === 'partially_refunded') ? minus(p.amount, p.refunded_amount) : null;
  const errs = fieldErrors(error);
  return (
    <section aria-labelledby="pay-h">
      <Crumbs items={[['Payments', '/payments/list'], [`Payment …${p._id.slice(-6)}`, null]]} />
      <h2 id="pay-h">Payment {money(p.amount, p.currency)} · <span data-testid="payment-status">{p.status}</span></h2>
      <dl class="detail">
        {([['For', `${p.resource_type} ${p.resource_id}`], ['Payer', `${p.user_name ?? ''} (${p.user_id ?? ''})`], ['Provider', `${p.provider} ${p.provider_reference ?? ''}`], ['Refunded', money(p.refunded_amount ?? '0', p.currency)], ['Refundable', refundable ? money(refundable, p.currency) : '–'], ['Paid', fmtDate(p.paid_at)], ['Created', fmtDate(p.created_at)]] as const).map(([k, v]) => (
          <div key={k}><dt>{k}</dt><dd data-testid={`pay-${k.toLowerCase()}`}>{v}</dd></div>
        ))}
      </dl>
      <ErrorBox error={error} />
      <div class="actions">
        {p.status === 'pending' && <button type="button" disabled={busy} onClick={() => act(() => run(Process, { id }), q.reload)}>Process</button>}
        {p.status === 'pending' && <button type="button" disabled={busy} onClick={() => act(() => run(CancelP, { id, reason: 'cancelled in the console' }), q.reload)}>Cancel payment</button>}
      </div>
      {admin && p.status === 'processing' && (
        <form class="inline-form" aria-label="Capture" onSubmit={(e) => { e.preventDefault(); void act(() => run(Complete, { id, ref }), q.reload); }}>
          <label for="cap-ref">Provider reference</label>
          <input id="cap-ref" required value={ref} onInput={(e) => setRef(e.currentTarget.value)} />
          <button type="submit" disabled={busy}>Capture (complete)</button>
        </form>
      )}
      {admin && refundable && (
        <form class="inline-form" aria-label="Refund" onSubmit={(e) => { e.preventDefault(); void act(() => run(Refund, { id, amount, reason: 'console' }), q.reload, () => setAmount('')); }}>
          <label for="refund-amount">Refund amount ({p.currency}; up to {refundable})</label>
          <input id="refund-amount" required inputMode="decimal" value={amount} aria-invalid={errs.amount ? 'true' : undefined} aria-describedby={errs.amount ? 'refund-amount-err' : undefined} onInput={(e) => setAmount(e.currentTarget.value)} />
          {errs.amount && <span id="refund-amount-err" class="field-error">{errs.amount}</span>}
          <button type="submit" disabled={busy}>Refund</button>
        </form>
      )}
      <h3>Refund attempts</h3>
      {q.data?.paymentRefunds.length ? (
        <table data-testid="refund-attempts">
          <caption class="sr-only">Refund attempts</caption>
          <thead><tr><th scope="col">Time</th><th scope="col">Amount</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Provider</th></tr></thead>
          <tbody>
            {q.data.paymentRefunds.map((r) => (
              <tr key={r.id} data-status={r.status}>
                <td><Time v={r.created_at} /></td><td class="num">{money(r.amount, r.currency)}</td>
                <td>{r.status}{r.error ? `: ${r.error}` : ''}</td><td>{r.reason ?? ''}</td><td>{r.provider_refund_id ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : <p class="muted">No refund attempts.</p>}
      <h3>History</h3>
      <ol data-testid="payment-history" class="entries">
        {(q.data?.auditLog.items ?? []).map((e) => {
          const ch = e.changes as { status?: { old?: unknown; new?: unknown } } | null;
          return <li key={e.id}><Time v={e.created_at} />: {e.operation}{ch?.status ? ` ${String(ch.status.old ?? '')} → ${String(ch.status.new ?? '')}` : ''} <small class="muted">by {e.user_name ?? 'system'}</small></li>;
        })}
      </ol>
    </section>
  );
}

function LedgerView() {
  const [page, setPage] = useState(1);
  const q = useAsync(() => run(Ledger, { page }), [page]);
  useLive(Changed, {}, () => q.reload(), []);
  return (
    <>
      <Loading when={q.loading} />
      <ErrorBox error={q.error} />
      <h2>Balances</h2>
      <table data-testid="ledger-balance">
        <caption class="sr-only">Balances</caption>
        <thead><tr><th scope="col">Account</th><th scope="col">Debit</th><th scope="col">Credit</th><th scope="col">Balance</th></tr></thead>
        <tbody>{(q.data?.ledgerBalance ?? []).map((b) => <tr key={`${b.tenant_id}-${b.account}-${b.currency}`}><td>{b.account}</td><td>{money(b.debit, b.currency)}</td><td>{money(b.credit, b.currency)}</td><td>{money(b.balance, b.currency)}</td></tr>)}</tbody>
      </table>
      <h2>Entries</h2>
      <table data-testid="ledger-entries">
        <caption class="sr-only">Ledger entries</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Account</th><th scope="col">Debit / credit</th><th scope="col">Amount</th><th scope="col">Payment</th></tr></thead>
        <tbody>{(q.data?.ledgerEntries.items ?? []).map((e) => <tr key={e.id}><td><Time v={e.created_at} /></td><td>{e.entry_type}</td><td>{e.account}</td><td>{e.direction}</td><td>{money(e.amount, e.currency)}</td><td><a href={`#/payments/list/${e.payment_id}`}><code>{e.payment_id}</code></a></td></tr>)}</tbody>
      </table>
      <Pager label="Pages of ledger entries" page={page} totalPages={q.data?.ledgerEntries.total_pages ?? 1} onPage={setPage} />
    </>
  );
}

function PayoutsView() {
  const [status, setStatus] = useState('');
  const q = useAsync(() => run(Payouts, { status: status || null }).then((r) => r.payouts), [status]);
  const { error, act } = useAction();
  const [failing, setFailing] = useState<Batch | null>(null);
  const [executing, setExecuting] = useState<Batch | null>(null);
  return (
    <>
      {failing && <PayoutInputDialog input={FAIL_INPUT} batch={failing} onClose={() => setFailing(null)} onDone={q.reload} />}
      {executing && <PayoutInputDialog input={EXECUTE_INPUT} batch={executing} onClose={() => setExecuting(null)} onDone={q.reload} />}
      <div class="filters">
        <div class="row">
          <label for="po-status">Status</label>
          <select id="po-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            <option value="">(any)</option>
            {['draft', 'approved', 'processing', 'completed', 'failed'].map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
      </div>
      <Loading when={q.loading} />
      <ErrorBox error={q.error ?? error} />
      <table data-testid="payouts">
        <caption class="sr-only">Payout batches</caption>
        <thead><tr><th scope="col">Batch</th><th scope="col">Gross</th><th scope="col">Fee</th><th scope="col">Net</th><th scope="col">Status</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(q.data?.items ?? []).map((b) => (
            <tr key={b.id}>
              <td>{b.recipient_type} {b.recipient_id}<br /><small class="muted">{b.payment_count} payment(s) · <Time v={b.created_at} /></small></td>
              <td>{money(b.gross_amount, b.currency)}</td><td>{money(b.fee_amount, b.currency)}</td><td>{money(b.net_amount, b.currency)}</td>
              <td>{b.status}{b.failure_reason ? `: ${b.failure_reason}` : ''}{b.bank_reference ? ` (bank reference ${b.bank_reference})` : ''}</td>
              <td class="actions">
                {b.status === 'draft' && <button type="button" onClick={() => act(() => run(ApprovePayout, { id: b.id }), q.reload)}>Approve</button>}
                {(b.status === 'approved' || b.status === 'failed') && <button type="button" onClick={() => act(() => run(ProcessPayout, { id: b.id }), q.reload)}>Process</button>}
                {(b.status === 'approved' || b.status === 'processing') && <button type="button" onClick={() => setExecuting(b)}>Execute<span class="sr-only"> the payout to {b.recipient_type} {b.recipient_id}</span>…</button>}
                {b.status === 'processing' && <button type="button" onClick={() => setFailing(b)}>Fail<span class="sr-only"> the payout to {b.recipient_type} {b.recipient_id}</span>…</button>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** What one payout action needs, asked in a dialog: the field is required, and the server's message shows next to it. */
interface PayoutInput {
  title: string;
  label: string;
  /** The input's id. */
  id: string;
  /** The argument's name in the server's validation errors. */
  field: string;
  submit: string;
  testId: string;
  send: (batch: Batch, value: string) => Promise<unknown>;
}

const FAIL_INPUT: PayoutInput = {
  title: 'Fail', label: 'Why did the payout fail?', id: 'po-fail-reason', field: 'reason', submit: 'Mark as failed', testId: 'fail-dialog',
  send: (b, reason) => run(FailPayout, { id: b.id, reason }),
};
const EXECUTE_INPUT: PayoutInput = {
  title: 'Execute', label: 'Bank reference of the transfer', id: 'po-bank-reference', field: 'bank_reference', submit: 'Mark as paid', testId: 'execute-dialog',
  send: (b, ref) => run(ExecutePayout, { id: b.id, ref }),
};

function PayoutInputDialog({ input, batch, onClose, onDone }: { input: PayoutInput; batch: Batch; onClose: () => void; onDone: () => void }) {
  const [value, setValue] = useState('');
  const { error, busy, act } = useAction();
  const err = fieldErrors(error)[input.field];
  return (
    <Dialog title={`${input.title} the payout to ${batch.recipient_type} ${batch.recipient_id}`} onClose={onClose} testId={input.testId}>
      <form onSubmit={(e) => { e.preventDefault(); if (!busy) void act(() => input.send(batch, value), onDone, onClose); }}>
        <div class="row">
          <label for={input.id}>{input.label}</label>
          <input id={input.id} required value={value} aria-invalid={err ? 'true' : undefined} aria-describedby={err ? `${input.id}-err` : undefined} onInput={(e) => setValue(e.currentTarget.value)} />
          {err && <span id={`${input.id}-err`} class="field-error">{err}</span>}
        </div>
        <ErrorBox error={err ? null : error} />
        <p class="actions">
          <button type="submit" aria-disabled={busy ? 'true' : undefined}>{input.submit}</button>
          <button type="button" onClick={onClose}>Cancel</button>
        </p>
      </form>
    </Dialog>
  );
}
