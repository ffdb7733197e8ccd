// infermeter's live dashboard: polls dashboard/data (same origin) every interval, keeps the
// last retention of snapshots, and shows them in its tables and in the charts of
// dashboard-charts.js (loaded before this). With a metrics token the page asks for it, keeps it
// in sessionStorage (this tab only) and sends it as an Authorization header; it never goes into
// a URL.
// Over 300 lines: one classic <script>, no bundler: the page's state, polling and tables together.
(() => {
  'use strict';
  const TOKEN_KEY = 'infermeter.dashboard.token';
  const needsToken = document.body.dataset.auth === 'bearer';
  const $ = (id) => document.getElementById(id);

  const SERIES = [
    'requests',
    'finished',
    'success',
    'failed',
    'clientErrors',
    'cancelled',
    'failedShare',
    'clientErrorShare',
    'promptTokens',
    'generationTokens',
    'waiting',
    'running',
    'kvCache',
    'ttftP50',
    'ttftP90',
    'ttftP99',
    'tpotP50',
    'tpotP90',
    'tpotP99',
  ];
  // Table columns: [series or derived field, decimals/scale].
  const COLUMNS = [
    ['finished', (v) => fmt(v, 2)],
    ['success', (v) => fmt(v, 2)],
    ['failed', (v) => fmt(v, 2)],
    ['clientErrors', (v) => fmt(v, 2)],
    ['cancelled', (v) => fmt(v, 2)],
    ['failedShare', (v) => (v == null ? '–' : `${fmt(v * 100, 1)} %`)],
    ['clientErrorShare', (v) => (v == null ? '–' : `${fmt(v * 100, 1)} %`)],
    ['ttftP50', ms],
    ['ttftP90', ms],
    ['ttftP99', ms],
    ['tpotP50', ms],
    ['tpotP90', ms],
    ['tpotP99', ms],
    ['attainment', pct],
    ['promptTokens', (v) => fmt(v, 1)],
    ['generationTokens', (v) => fmt(v, 1)],
    ['waiting', (v) => fmt(v, 0)],
    ['running', (v) => fmt(v, 0)],
    ['kvCache', (v) => (v == null ? '–' : `${fmt(v * 100, 1)} %`)],
    ['received', (v) => fmt(v, 0)],
  ];

  const store = { seq: undefined, t: [], models: new Map(), meta: undefined };
  let selected = decodeURIComponent((location.hash.match(/^#model=(.*)$/) || [])[1] || '');
  let charts; // the chart panel (dashboard-charts.js), made at the first render: it needs the laid-out page
  let timer;

  function fmt(v, decimals) {
    if (v == null || !Number.isFinite(v)) return '–';
    return v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  }
  function ms(v) {
    if (v == null) return '–';
    const x = v * 1000;
    return fmt(x, x < 10 ? 2 : x < 100 ? 1 : 0);
  }
  const last = (a) => (a.length === 0 ? null : a[a.length - 1]);
  function pct(v) {
    return v == null ? '–' : `${fmt(v * 100, 1)} %`;
  }
  // Goodput's row of a model or tenant over the last minute (INFERMETER_SLO), as a cell's tooltip.
  const verdicts = (g) =>
    g ? `${g.good} good, ${g.missed} missed, ${g.failed} failed, ${g.cancelled} cancelled in the last minute` : 'nothing judged in the last minute';

  // ---- token --------------------------------------------------------------------------------
  const token = () => sessionStorage.getItem(TOKEN_KEY);
  function showLogin(message) {
    clearTimeout(timer);
    $('live').hidden = true;
    $('login').hidden = false;
    $('forget').hidden = true;
    $('login-error').textContent = message || '';
    setStatus('a token is required', true);
    $('token').focus();
  }
  $('login').addEventListener('submit', (event) => {
    event.preventDefault();
    const value = $('token').value.trim();
    if (value === '') return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $('token').value = '';
    $('login').hidden = true;
    poll();
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    store.seq = undefined;
    showLogin('');
  });

  function setStatus(text, down) {
    const status = $('status');
    status.textContent = text;
    status.classList.toggle('down', Boolean(down));
  }

  // ---- polling ------------------------------------------------------------------------------
  async function poll() {
    clearTimeout(timer);
    const t = token();
    if (needsToken && !t) {
      showLogin('');
      return;
    }
    let delay = 1000;
    try {
      const res = await fetch(`dashboard/data${store.seq === undefined ? '' : `?since=${store.seq}`}`, {
        headers: t ? { authorization: `Bearer ${t}` } : {},
        cache: 'no-store',
        credentials: 'omit',
      });
      if (res.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        store.seq = undefined;
        showLogin(t ? 'The token was refused.' : '');
        return;
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const data = await res.json();
      merge(data);
      render();
      delay = data.intervalSeconds * 1000;
      $('forget').hidden = !t;
      $('status').dataset.seq = String(data.seq);
      setStatus(`updated ${new Date().toLocaleTimeString()} · every ${data.intervalSeconds} s`);
    } catch (error) {
      setStatus(`no answer (${error.message}); retrying`, true);
      delay = 3000;
    }
    timer = setTimeout(poll, delay);
  }

  function merge(data) {
    if (data.full) {
      store.t = [];
      store.models = new Map();
    }
    const before = store.t.length;
    const added = data.t.length;
    store.t.push(...data.t);
    const seen = new Set();
    for (const m of data.models) {
      seen.add(m.model);
      let entry = store.models.get(m.model);
      if (entry === undefined) {
        entry = { series: {} };
        for (const name of SERIES) entry.series[name] = new Array(before).fill(null);
        store.models.set(m.model, entry);
      }
      entry.totals = m.totals;
      entry.inFlightSource = m.inFlightSource;
      for (const name of SERIES) entry.series[name].push(...(m.series[name] || new Array(added).fill(null)));
    }
    for (const [model, entry] of store.models) {
      if (seen.has(model)) continue;
      for (const name of SERIES) entry.series[name].push(...new Array(added).fill(null));
    }
    const keep = Math.round(data.retentionSeconds / data.intervalSeconds);
    const extra = store.t.length - keep;
    if (extra > 0) {
      store.t.splice(0, extra);
      for (const entry of store.models.values()) for (const name of SERIES) entry.series[name].splice(0, extra);
    }
    for (const [model, entry] of store.models) {
      if (!seen.has(model) && SERIES.every((name) => entry.series[name].every((v) => v == null))) store.models.delete(model);
    }
    store.seq = data.seq;
    store.meta = data;
  }

  // ---- rendering ----------------------------------------------------------------------------
  function render() {
    $('login').hidden = true;
    $('live').hidden = false;
    const models = [...store.models.keys()];
    $('empty').hidden = models.length > 0;
    // Unless the URL names one (#model=<name>), open on the busiest model: the first one in
    // name order may well be a mistyped name that only ever got 404s.
    if (!store.models.has(selected)) selected = busiest(models);
    renderTable(models);
    renderSelect(models);
    const meta = store.meta;
    $('notes').textContent =
      `rates over the last ${meta.rateWindowSeconds} s; quantiles over the last ${meta.quantileWindowSeconds} s (within ±${(meta.quantileRelativeError * 100).toFixed(1)} %); ${Math.round(meta.retentionSeconds / 60)} minutes kept`;
    charts ??= createDashboardCharts($('charts'), fmt);
    charts.render(store.t, store.models.get(selected), selected);
    renderTenants(meta);
    renderSlo(meta);
  }

  // The SLOs requests are held to; goodput's columns only when there are some.
  function renderSlo(meta) {
    const on = meta.goodput !== undefined;
    $('models').classList.toggle('no-slo', !on);
    $('tenant-table').classList.toggle('no-slo', !on);
    $('slo').hidden = !on;
    if (on)
      $('slo').textContent =
        `SLO met: requests good by vLLM's goodput rules, of those that completed or failed, in the last ${meta.quantileWindowSeconds} s (a non-streamed answer's TTFT is its whole answer, as vLLM's rules have it; the clients' 4xx are not judged). SLOs: ${meta.goodput.slo.join('; ')}`;
  }

  // Per-tenant metering's table (INFERMETER_TENANT): over the quantile window, newest answer.
  // Tenant names come from clients: only ever set as text.
  function renderTenants(meta) {
    const rows = meta.tenants || [];
    $('tenant-table').classList.toggle('no-cost', meta.cost === undefined);
    $('idle-cost').hidden = meta.cost?.tenants.idle === undefined;
    if (meta.cost !== undefined) {
      $('cost-head').textContent = `cost since start (${meta.cost.currency})`;
      if (meta.cost.tenants.idle !== undefined)
        $('idle-cost').textContent = `Idle (the pools' unoccupied time, never spread over the tenants): ${meta.cost.tenants.idle} ${meta.cost.currency}`;
    }
    $('tenants').hidden = rows.length === 0;
    $('tenants-window').textContent = `finished in the last ${meta.quantileWindowSeconds} s`;
    $('tenant-table').tBodies[0].replaceChildren(
      ...rows.map((r) => {
        const row = document.createElement('tr');
        row.dataset.tenant = r.tenant;
        const failed = r.requests > 0 ? r.failed / r.requests : null;
        const cells = [
          [r.tenant],
          [fmt(r.requests, 0)],
          [failed == null ? '–' : `${fmt(failed * 100, 1)} %`, failed != null && failed > 0.05],
          [fmt(r.promptTokens, 0)],
          [fmt(r.generationTokens, 0)],
          [ms(r.ttftP50)],
          [ms(r.ttftP99)],
        ];
        const g = meta.goodput?.tenants[r.tenant];
        const attained = g ? g.attainment : null;
        cells.push([pct(attained), attained != null && attained < 0.99, 'slo', verdicts(g)]);
        // Chargeback (INFERMETER_PRICES_FILE): the tenant's cost since the start, an exact decimal.
        cells.push([meta.cost?.tenants[r.tenant] ?? '–', false, 'cost']);
        for (const [text, bad, cls, title] of cells) {
          const cell = row.insertCell();
          cell.textContent = text;
          if (bad) cell.classList.add('bad');
          if (cls) cell.classList.add(cls);
          if (title) cell.title = title;
        }
        return row;
      }),
    );
  }

  function busiest(models) {
    let best = models[0] || '';
    for (const model of models) if (store.models.get(model).totals.received > store.models.get(best).totals.received) best = model;
    return best;
  }

  function renderTable(models) {
    const body = $('models').tBodies[0];
    const rows = new Map([...body.rows].map((r) => [r.dataset.model, r]));
    for (const [model, row] of rows) if (!store.models.has(model)) row.remove();
    for (const model of models) {
      const entry = store.models.get(model);
      let row = rows.get(model);
      if (row === undefined) {
        row = body.insertRow();
        row.dataset.model = model;
        const name = row.insertCell();
        name.textContent = model;
        for (const [field] of COLUMNS) {
          const cell = row.insertCell();
          cell.dataset.field = field;
          if (field === 'attainment') cell.classList.add('slo');
        }
        row.addEventListener('click', () => select(model));
      }
      body.appendChild(row); // keeps the order of `models`
      row.classList.toggle('selected', model === selected);
      const s = entry.series;
      // failedShare is null (shown "–") when nothing finished in the window: not "0.0 %".
      const g = store.meta.goodput?.models[model];
      const values = { received: entry.totals.received, attainment: g ? g.attainment : null };
      for (const [i, [field, format]] of COLUMNS.entries()) {
        const cell = row.cells[i + 1];
        const v = field in values ? values[field] : last(s[field]);
        const text = format(v);
        if (cell.textContent !== text) cell.textContent = text;
        // The service's failures in alarm colours; the clients' own 4xx only marked, never red.
        if (field === 'failedShare') cell.classList.toggle('bad', v != null && v > 0.05);
        if (field === 'clientErrorShare') cell.classList.toggle('client', v != null && v > 0);
        if (field === 'attainment') {
          cell.classList.toggle('bad', v != null && v < 0.99);
          cell.title = verdicts(g);
        }
      }
      row.cells[COLUMNS.findIndex(([f]) => f === 'waiting') + 1].title = `in flight as the ${entry.inFlightSource} reports it`;
    }
  }

  function renderSelect(models) {
    const picker = $('model');
    const current = [...picker.options].map((o) => o.value);
    if (current.join('\n') !== models.join('\n')) {
      picker.replaceChildren(...models.map((m) => new Option(m, m)));
    }
    picker.value = selected;
  }
  $('model').addEventListener('change', (event) => select(event.target.value));

  function select(model) {
    selected = model;
    history.replaceState(null, '', `#model=${encodeURIComponent(model)}`);
    render();
  }

  poll();
})();
