// The live dashboard's charts (GET /dashboard): one uPlot chart per panel of CHARTS, made once
// and given new data at each poll. A classic <script> loaded before dashboard.js, which calls
// createDashboardCharts (the one global it defines) at its first render.
// biome-ignore lint/correctness/noUnusedVariables: the page's other script calls it
function createDashboardCharts(container, fmt) {
  'use strict';
  const QUANTILE_COLORS = ['#2f6fd6', '#e08a1e', '#c8372d'];
  const CHARTS = [
    {
      id: 'requests',
      title: 'Requests',
      unit: 'per second',
      series: [
        ['finished', 'finished', '#5f6b7a'],
        ['success', 'success', '#3a9a4a'],
        ['failed', 'failed', '#c8372d'],
        ['clientErrors', '4xx (clients)', '#a0a8b3'],
        ['cancelled', 'cancelled', '#9b59b6'],
      ],
    },
    {
      id: 'ttft',
      title: 'Time to first token',
      unit: 'ms',
      suffix: ' ms',
      scale: 1000,
      series: [
        ['ttftP50', 'p50'],
        ['ttftP90', 'p90'],
        ['ttftP99', 'p99'],
      ].map((s, i) => [...s, QUANTILE_COLORS[i]]),
      empty: streamsOnly,
    },
    {
      id: 'tpot',
      title: 'Time per output token',
      unit: 'ms',
      suffix: ' ms',
      scale: 1000,
      series: [
        ['tpotP50', 'p50'],
        ['tpotP90', 'p90'],
        ['tpotP99', 'p99'],
      ].map((s, i) => [...s, QUANTILE_COLORS[i]]),
      empty: streamsOnly,
    },
    {
      id: 'tokens',
      title: 'Tokens',
      unit: 'per second',
      series: [
        ['promptTokens', 'prompt', '#8c6d31'],
        ['generationTokens', 'generation', '#2f6fd6'],
      ],
    },
    {
      id: 'inflight',
      title: 'In flight',
      unit: 'requests',
      series: [
        ['waiting', 'waiting', '#e08a1e'],
        ['running', 'running', '#3a9a4a'],
      ],
    },
    {
      id: 'kv',
      title: 'KV-cache usage',
      unit: '% (engine)',
      suffix: ' %',
      scale: 100,
      series: [['kvCache', 'KV cache', '#9b59b6']],
      empty: () => "no figure: the engine's metrics are not read (INFERMETER_UPSTREAM_METRICS) or do not report it",
    },
  ];
  const charts = [];

  /** Why a TTFT or TPOT chart is empty: they are measured on streams only. */
  function streamsOnly(entry) {
    return entry.totals.streams === 0 ? 'no streamed requests: TTFT and TPOT are measured on streamed answers only' : 'no streamed request in the last minute';
  }

  function chartData(def, t, entry) {
    return [
      t,
      ...def.series.map(([name]) => {
        const values = entry ? entry.series[name] : t.map(() => null);
        return def.scale ? values.map((v) => (v == null ? null : v * def.scale)) : values;
      }),
    ];
  }

  /** Draws `t` (the snapshots' times) and the selected model's series (`entry`, absent: none). */
  function render(t, entry, model) {
    if (charts.length === 0) {
      for (const def of CHARTS) {
        const box = document.createElement('div');
        box.className = 'chart';
        box.dataset.chart = def.id;
        const title = document.createElement('h2');
        title.textContent = `${def.title} `;
        const unit = document.createElement('small');
        unit.textContent = def.unit;
        title.appendChild(unit);
        const plotBox = document.createElement('div');
        plotBox.className = 'plot';
        // Said over an empty chart, so that no data is never mistaken for a fault.
        const why = document.createElement('p');
        why.className = 'why-empty';
        why.hidden = true;
        box.append(title, plotBox, why);
        container.appendChild(box);
        const options = {
          width: Math.max(300, plotBox.clientWidth),
          height: 190,
          cursor: { drag: { x: false, y: false } },
          // A fresh page has seconds of data: at least a minute is shown, so that the time axis
          // does not tick every few hundred milliseconds; ticks at least 90 px apart leave room
          // for an h:mm:ss label each.
          scales: {
            x: { time: true, range: (_u, min, max) => [Math.min(min, max - 60), max] },
            y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.15 : 1] },
          },
          axes: [
            { stroke: '#5f6b7a', space: 90, grid: { stroke: '#eef0f3' } },
            { stroke: '#5f6b7a', size: 58, space: 30, grid: { stroke: '#eef0f3' } },
          ],
          series: [
            {},
            ...def.series.map(([, label, color]) => ({
              label,
              stroke: color,
              width: 1.6,
              spanGaps: false,
              value: (_u, v) => (v == null ? '–' : `${fmt(v, Math.abs(v) < 10 ? 2 : 1)}${def.suffix || ''}`),
            })),
          ],
        };
        const plot = new uPlot(options, chartData(def, t, entry), plotBox);
        charts.push({ def, plot, box, plotBox, why });
      }
      const resize = new ResizeObserver(() => {
        for (const c of charts) c.plot.setSize({ width: Math.max(300, c.plotBox.clientWidth), height: 190 });
      });
      for (const c of charts) resize.observe(c.plotBox);
    } else {
      for (const c of charts) c.plot.setData(chartData(c.def, t, entry));
    }
    // Away from the cursor, the legends show the newest values.
    for (const c of charts) if (!(c.plot.cursor.left >= 0) && t.length > 0) c.plot.setLegend({ idx: t.length - 1 });
    for (const c of charts) {
      const empty = c.def.empty && entry && c.def.series.every(([name]) => entry.series[name].every((v) => v == null));
      c.why.hidden = !empty;
      if (empty) c.why.textContent = c.def.empty(entry);
      c.box.dataset.model = model;
      c.box.dataset.points = String(t.length);
      c.box.dataset.xspan = String(c.plot.scales.x.max - c.plot.scales.x.min); // seconds shown
    }
  }

  return { render };
}
