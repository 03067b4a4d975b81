/**
 * The local dashboard page (bundled by esbuild with uPlot when the local stack starts; see ../server.ts). It polls
 * /api/state every half second and redraws. Text only goes in through textContent: nothing from the API is parsed as
 * HTML.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import type { DashboardState } from '../state.js';

type State = DashboardState;

// Colours with at least 3:1 contrast on white (lines) and distinguishable for common colour-vision deficiencies.
const PALETTE = ['#0b5cad', '#b34700', '#1a7f37', '#8250df', '#bf0a52', '#5a5a5a', '#006d75', '#7d5a00'];

const $ = <T extends HTMLElement>(sel: string) => document.querySelector(sel) as T;
const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string | number,
  attrs: Record<string, string> = {},
): HTMLElementTagNameMap[K] => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

function fillTable(id: string, rows: (string | number)[][], keys: string[] = []): void {
  const body = $<HTMLTableElement>(`#${id}`).tBodies[0]!;
  const trs = rows.map((r, i) => {
    const tr = el('tr');
    if (keys[i]) tr.dataset.key = keys[i];
    r.forEach((c, j) => {
      tr.append(j === 0 ? el('th', c, { scope: 'row' }) : el('td', c));
    });
    return tr;
  });
  if (trs.length === 0) {
    const tr = el('tr');
    const cols = $<HTMLTableElement>(`#${id}`).tHead!.rows[0]!.cells.length;
    tr.append(el('td', 'none', { colspan: String(cols), class: 'empty' }));
    trs.push(tr);
  }
  body.replaceChildren(...trs);
}

function renderSubnets(s: State): void {
  const box = $('#subnets');
  const items = s.subnets.map((n) => {
    const fig = el('div', undefined, {
      class: 'subnet',
      'data-subnet': n.subnet,
      'data-used': String(n.used),
    });
    const title = `${n.subnet}${n.cidr ? ` (${n.cidr})` : ''}`;
    fig.append(el('h3', title));
    if (n.error) {
      fig.append(el('p', n.error, { class: 'error' }));
      return fig;
    }
    const total = n.used + n.free + n.excluded || 1;
    const bar = el('div', undefined, { class: 'bar', 'aria-hidden': 'true' });
    for (const [k, v] of [
      ['used', n.used],
      ['excluded', n.excluded],
      ['free', n.free],
    ] as const) {
      const seg = el('span', undefined, { class: `seg ${k}` });
      seg.style.width = `${(100 * v) / total}%`;
      bar.append(seg);
    }
    fig.append(bar);
    fig.append(
      el(
        'p',
        `used ${n.used} · free ${n.free} · excluded ${n.excluded} (${Math.round((1000 * n.used) / Math.max(1, n.used + n.free)) / 10} % of the allocatable addresses used)`,
        { class: 'legend-text' },
      ),
    );
    return fig;
  });
  box.replaceChildren(...(items.length ? items : [el('p', 'no external subnet in use')]));
}

const charts = new Map<string, { plot: uPlot; labels: string }>();

function chartWidth(box: HTMLElement): number {
  return Math.max(220, box.clientWidth - 16);
}

function renderWidgets(s: State): void {
  const grid = $('#widgets');
  const first = s.widgets[0];
  $('#widgets-note').textContent = first
    ? `Same metric names, dimension sets and statistics as the CloudWatch dashboard; a 300 s CloudWatch period is ${first.localPeriod} s here, ${first.times.length} periods shown.`
    : '';
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local dashboard's state or page assembled in one pass, pinned by test/e2e/dashboard-browser.test.ts
  s.widgets.forEach((w, i) => {
    const id = `w${i}`;
    let card = document.getElementById(id);
    if (!card) {
      card = el('figure', undefined, { id, class: `card span${w.width}`, 'data-title': w.title });
      // The first widget of a CloudWatch row starts a new row here too.
      if (s.widgets[i - 1]?.row !== w.row) card.classList.add('row-start');
      const cap = el('figcaption');
      cap.append(el('h3', w.title));
      card.append(cap, el('div', undefined, { class: 'plot' }), el('ul', undefined, { class: 'totals' }));
      grid.append(card);
    }
    const totals = card.querySelector('ul.totals') as HTMLUListElement;
    const plotBox = card.querySelector('div.plot') as HTMLDivElement;
    if (w.local === 'aws-only') {
      totals.replaceChildren(
        el('li', 'AWS/Lambda metrics: shown on CloudWatch only (no Lambda service locally).'),
      );
      return;
    }
    if (w.local === 'dead-letters') {
      totals.replaceChildren(
        el('li', `waiting (local dead letters): ${s.deadLetters.length}`, { 'data-metric': 'dead-letters' }),
      );
      return;
    }
    const series = w.lines.flatMap((l) => l.series.map((x) => ({ ...x, stat: l.stat })));
    const items = w.lines.flatMap((l) =>
      l.series.length
        ? l.series.map((x) =>
            el('li', `${x.label}: ${Math.round(x.total * 10) / 10} (${l.stat})`, {
              'data-metric': l.metric,
              'data-total': String(x.total),
            }),
          )
        : [el('li', `${l.metric}: no data (${l.stat})`, { 'data-metric': l.metric, 'data-total': '0' })],
    );
    totals.replaceChildren(...items);
    plotBox.setAttribute('role', 'img');
    plotBox.setAttribute(
      'aria-label',
      `${w.title}: ${series.length ? series.map((x) => `${x.label} ${Math.round(x.total * 10) / 10}`).join('; ') : 'no data'}`,
    );
    const labels = series.map((x) => x.label).join('|');
    const data = [w.times, ...series.map((x) => x.values)] as uPlot.AlignedData;
    const existing = charts.get(id);
    if (existing && existing.labels === labels) {
      existing.plot.setData(data);
      return;
    }
    existing?.plot.destroy();
    plotBox.replaceChildren();
    if (series.length === 0) {
      charts.delete(id);
      plotBox.append(el('p', 'no data yet', { class: 'nodata' }));
      return;
    }
    const plot = new uPlot(
      {
        width: chartWidth(plotBox),
        height: 160,
        legend: { show: false },
        cursor: { show: true },
        axes: [{}, { size: 48 }],
        series: [
          {},
          ...series.map((x, k) => ({
            label: x.label,
            stroke: PALETTE[k % PALETTE.length],
            width: 2,
            points: { show: true, size: 5 },
            spanGaps: false,
          })),
        ],
      },
      data,
      plotBox,
    );
    charts.set(id, { plot, labels });
  });
}

/** `2 of 3 pods` with the pods that lack the address named, or `—` before a check read its gateway. */
function onPods(pods: State['eips'][number]['pods']): string {
  if (pods.length === 0) return '—';
  const missing = pods.filter((p) => !p.carries).map((p) => p.pod);
  const on = `${pods.length - missing.length} of ${pods.length} pod${pods.length > 1 ? 's' : ''}`;
  return missing.length ? `${on} (missing on ${missing.join(', ')})` : on;
}

function render(s: State): void {
  fillTable(
    'eips',
    s.eips.map((e) => [
      e.name,
      e.ip || '—',
      e.gateway || '—',
      e.qosPolicy || '—',
      e.ready ? 'yes' : 'no',
      e.lastTransition || '—',
      onPods(e.pods),
    ]),
    s.eips.map((e) => e.name),
  );
  fillTable(
    'gateway-pods',
    s.gatewayPods.map((p) => [
      p.name,
      p.gateway || '—',
      p.namespace,
      p.terminating ? `${p.phase} (terminating)` : p.phase,
      p.container,
      p.restarts,
      p.token,
      p.release || '—',
      p.carries ?? 'not read',
    ]),
    s.gatewayPods.map((p) => `${p.namespace}/${p.name}`),
  );
  renderSubnets(s);
  fillTable(
    'dead-letters',
    s.deadLetters.map((d) => [d.at, d.handler, d.eip, d.reason, d.attempts, d.error]),
    s.deadLetters.map((d) => `${d.handler}/${d.eip}`),
  );
  fillTable(
    'outcomes',
    s.outcomes.map((o) => [o.at, o.handler, o.eip, o.reason, o.status, o.detail]),
  );
  fillTable(
    'drift',
    (s.drift?.items ?? []).map((d) => [d.kind, d.target || '—', d.message, d.repair ?? '—']),
    (s.drift?.items ?? []).map((d) => `${d.kind}/${d.target}`),
  );
  $('#drift-note').textContent = !s.drift
    ? 'The drift check has not run yet (it runs beside the bridge resync, every 10 minutes by default).'
    : s.drift.failed
      ? `The drift check at ${s.drift.at} failed; see the logs.`
      : `Checked at ${s.drift.at}: ${s.drift.items.length ? `${s.drift.items.length} drift item(s)` : 'no drift'}.`;
  renderWidgets(s);
  const ready = s.eips.filter((e) => e.ready).length;
  $('#status').textContent =
    `updated ${s.at} · ${s.eips.length} EIPs, ${ready} Ready · ${s.deadLetters.length} dead letters${s.errors.length ? ` · ${s.errors.join('; ')}` : ''}`;
}

async function poll(): Promise<void> {
  try {
    const res = await fetch('/api/state', { cache: 'no-store' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    render((await res.json()) as State);
  } catch (e) {
    $('#status').textContent = `the local stack does not answer (${(e as Error).message}); retrying`;
  }
  setTimeout(() => void poll(), 500);
}

window.addEventListener('resize', () => {
  for (const [id, c] of charts) {
    const box = document.querySelector(`#${id} div.plot`) as HTMLDivElement | null;
    if (box) c.plot.setSize({ width: chartWidth(box), height: 160 });
  }
});

void poll();
